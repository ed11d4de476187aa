//! The device forms' counters (bytes, CQ errors, CQ polls, WQE sizes): striped per device,
//! so threads sharing a NIC rarely share a cache line. Separate from the registry's
//! bookkeeping because this is hot-path code with its own ownership rule (below).
//!
//! A thread picks its stripe from its thread pointer (the x86-64 and AArch64 ABIs keep it in
//! a register: no thread-local lookup, no call). The first thread to use a stripe owns it and
//! counts into its own set with a plain load and store, no locked instruction; any other
//! thread that lands on the stripe counts into the stripe's shared set with atomic adds. A
//! collision therefore costs contention, never a lost count. Thread pointers are unique among
//! live threads; a thread that reuses a dead owner's thread pointer inherits its set, which
//! nobody else writes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

use crate::counters::SIZE_BUCKETS;
use crate::thread::thread_pointer;

use super::Device;

pub const STRIPES: usize = 16;

/// One set of device-form counters.
#[repr(C)]
pub struct DevCounters {
    pub tx_bytes: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub cq_errors: AtomicU64,
    pub cq_polls: AtomicU64,
    pub sizes: [AtomicU64; SIZE_BUCKETS],
}

/// The shared set, on cache lines of its own.
#[repr(C, align(64))]
pub struct SharedCounters(pub DevCounters);

/// One stripe of one device's device-form counters.
#[repr(C, align(64))]
pub struct DevShard {
    /// Thread pointer of the owner (0 = unowned).
    pub(crate) owner: AtomicUsize,
    pub(crate) own: DevCounters,
    shared: SharedCounters,
}

impl DevShard {
    /// Runs `f` on the set this thread may count into, and whether it is the owner's.
    #[inline(always)]
    pub fn with(&self, f: impl FnOnce(&DevCounters, bool)) {
        let tp = thread_pointer();
        let o = self.owner.load(Relaxed);
        if o == tp || (o == 0 && self.owner.compare_exchange(0, tp, Relaxed, Relaxed).is_ok()) {
            f(&self.own, true)
        } else {
            f(&self.shared.0, false)
        }
    }
}

/// The stripe of the calling thread.
#[inline(always)]
pub fn stripe() -> usize {
    // Thread control blocks sit pages apart: mix the page number, keep the top bits.
    ((thread_pointer() as u64 >> crate::hot::STRIPE_PAGE_SHIFT)
        .wrapping_mul(crate::hot::STRIPE_MIX)
        >> (64 - STRIPES.trailing_zeros())) as usize
}

/// Adds to a device-form counter: a plain load and store in the owner's set, an atomic add
/// in the shared one.
#[inline(always)]
pub fn add(c: &AtomicU64, v: u64, owner: bool) {
    if owner {
        crate::thread::bump(c, v);
    } else {
        c.fetch_add(v, Relaxed);
    }
}

/// Totals of the device forms for one device.
#[derive(Debug, Clone, Copy)]
pub struct DevTotals {
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub cq_errors: u64,
    pub cq_polls: u64,
    pub sizes: [u64; SIZE_BUCKETS],
}

pub fn dev_totals(d: &Device) -> DevTotals {
    let mut t = DevTotals {
        tx_bytes: 0,
        rx_bytes: 0,
        cq_errors: 0,
        cq_polls: 0,
        sizes: [0; SIZE_BUCKETS],
    };
    for s in d.stripes.iter().flat_map(|s| [&s.own, &s.shared.0]) {
        t.tx_bytes = t.tx_bytes.wrapping_add(s.tx_bytes.load(Relaxed));
        t.rx_bytes = t.rx_bytes.wrapping_add(s.rx_bytes.load(Relaxed));
        t.cq_errors = t.cq_errors.wrapping_add(s.cq_errors.load(Relaxed));
        t.cq_polls = t.cq_polls.wrapping_add(s.cq_polls.load(Relaxed));
        for (a, c) in t.sizes.iter_mut().zip(&s.sizes) {
            *a = a.wrapping_add(c.load(Relaxed));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_threads_spread_over_the_stripes() {
        let mut seen = std::collections::HashSet::new();
        let handles: Vec<_> = (0..8).map(|_| std::thread::spawn(stripe)).collect();
        let here = stripe();
        for h in handles {
            let s = h.join().unwrap();
            assert!(s < STRIPES);
            seen.insert(s);
        }
        assert!(here < STRIPES);
        assert_eq!(stripe(), here, "a thread keeps its stripe");
        assert!(
            seen.len() >= 3,
            "8 threads landed on {} stripes",
            seen.len()
        );
    }

    #[test]
    fn one_owner_per_stripe_and_no_count_lost_when_threads_collide() {
        // Every thread on the same stripe: one owns it (plain adds), the rest share (atomic).
        let shard: &'static DevShard =
            Box::leak(Box::new(unsafe { std::mem::zeroed::<DevShard>() }));
        let owners = std::sync::atomic::AtomicUsize::new(0);
        // No thread exits before all have counted: a thread that reused an exited owner's
        // thread pointer would (rightly) inherit its ownership.
        let all_done = std::sync::Barrier::new(12);
        std::thread::scope(|sc| {
            for _ in 0..12 {
                sc.spawn(|| {
                    for i in 0..20_000u64 {
                        shard.with(|c, own| {
                            if i == 0 && own {
                                owners.fetch_add(1, Relaxed);
                            }
                            add(&c.tx_bytes, 3, own);
                            add(&c.sizes[5], 1, own);
                        });
                    }
                    all_done.wait();
                });
            }
        });
        assert_eq!(
            owners.load(Relaxed),
            1,
            "exactly one thread owns the stripe"
        );
        let total = |f: fn(&DevCounters) -> u64| f(&shard.own) + f(&shard.shared.0);
        assert_eq!(total(|c| c.tx_bytes.load(Relaxed)), 12 * 20_000 * 3);
        assert_eq!(total(|c| c.sizes[5].load(Relaxed)), 12 * 20_000);
        assert!(
            shard.shared.0.tx_bytes.load(Relaxed) > 0,
            "the others counted into the shared set"
        );
    }
}
