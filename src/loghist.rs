//! Log-scale bucket arithmetic for the completion-latency histogram ("latency_log_histogram").
//!
//! HdrHistogram-style: a value's bucket comes from the position of its highest set bit and
//! the [`SUB_BITS`] bits below it, so every power of two is split into `1 << SUB_BITS` equal
//! sub-buckets. With `SUB_BITS = 3` a bucket is never wider than 1/8 of its lower bound, so
//! reporting a bucket's lower bound for any value in it is off by less than 1/8 of the value.
//! Values below `2 << SUB_BITS` (16 ns) get one bucket each and are exact.
//!
//! The index costs a `clz`, a shift and an add: no division, no floating point, no branch.
//! [`BUCKETS_U64`] buckets cover all of u64; how many of them a slot stores (and where the
//! storage lives) is the recording side's choice, which clamps with [`clamp_index`]: here
//! [`LogHist`], [`LOG_BUCKETS`] of them per channel.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};

/// Bits below the highest set bit that pick the sub-bucket.
pub const SUB_BITS: u32 = 3;
/// Sub-buckets per power of two (8: the relative error is at most 1/8).
pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Buckets needed to hold every u64 value.
pub const BUCKETS_U64: usize = bucket_index(u64::MAX) + 1;

/// The bucket of `v` (ns). Monotonic in `v`; `bucket_index(0) == 0`.
#[inline(always)]
pub const fn bucket_index(v: u64) -> usize {
    // For v < 16, (v | 15) has 60 leading zeros: shift 0 and the index is v itself.
    // Otherwise shift = (highest bit) - SUB_BITS and v >> shift lies in [8, 16).
    let shift = (64 - SUB_BITS - 1) - (v | (2 * SUB_BUCKETS - 1)).leading_zeros();
    ((shift as u64) * SUB_BUCKETS + (v >> shift)) as usize
}

/// The bucket of `v` when only buckets `0..buckets` are stored: everything beyond goes into
/// the last one (its upper bound is then reported as open).
#[inline(always)]
pub const fn clamp_index(v: u64, buckets: usize) -> usize {
    let i = bucket_index(v);
    if i < buckets {
        i
    } else {
        buckets - 1
    }
}

/// Inclusive bounds `(lo, hi)` in ns of bucket `i` (`i < BUCKETS_U64`): a value `v` has
/// `bucket_index(v) == i` exactly when `lo <= v <= hi`.
pub const fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB_BUCKETS {
        return (i, i);
    }
    let shift = (i / SUB_BUCKETS - 1) as u32;
    let mantissa = SUB_BUCKETS + (i % SUB_BUCKETS);
    let lo = mantissa << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// Buckets a recorded histogram stores: 0 ns up to 17.18 s, 1/8 apart. The last one
/// (from 16.1 s) also takes everything longer, and its upper bound is reported as open.
pub const LOG_BUCKETS: usize = 256;

/// One set of log-scale bucket counts.
#[repr(C)]
pub struct LogCounts(pub [AtomicU64; LOG_BUCKETS]);

/// A channel's log-scale completion histogram (see docs/format.md: why per channel, not per QP).
///
/// Recording follows the device stripes' rule: the first thread to record owns `counts` and
/// adds with a plain load and store (the header's inline hook does the same, see
/// `rcclTelemetryLog_`); any other thread (another QP's thread on the same channel, or the
/// index forms from anywhere) adds atomically to `shared`, allocated on its first use. So
/// no count is lost whichever threads drive the channel's QPs.
#[repr(C, align(64))]
pub struct LogHist {
    /// Thread pointer of the owner of `counts` (0 = none yet).
    pub owner: AtomicUsize,
    /// Every other thread's counts (atomic adds), or NULL until first needed.
    shared: AtomicPtr<LogCounts>,
    /// Completions not counted because `shared` could not be allocated.
    pub lost: AtomicU64,
    _pad: [u64; 5],
    pub counts: LogCounts,
}

const _: () = assert!(std::mem::size_of::<LogHist>() == 64 + 8 * LOG_BUCKETS);

impl LogHist {
    pub fn new() -> LogHist {
        // SAFETY: all-zero bytes are a valid, empty LogHist (atomics and a null pointer).
        unsafe { std::mem::zeroed() }
    }

    /// Records a latency from the thread that drives the QP (the handle forms).
    #[inline(always)]
    pub fn record(&self, ns: u64) {
        let i = clamp_index(ns, LOG_BUCKETS);
        if self.owner.load(Relaxed) == crate::thread::thread_pointer() {
            crate::thread::bump(&self.counts.0[i], 1);
        } else {
            self.record_other(i);
        }
    }

    /// Records bucket `i` from a thread that is not (yet) the owner: it becomes the owner if
    /// there is none, else counts into the shared set.
    #[cold]
    pub fn record_other(&self, i: usize) {
        let i = i.min(LOG_BUCKETS - 1);
        let tp = crate::thread::thread_pointer();
        let o = self.owner.load(Relaxed);
        if o == tp || (o == 0 && self.owner.compare_exchange(0, tp, Relaxed, Relaxed).is_ok()) {
            crate::thread::bump(&self.counts.0[i], 1);
        } else {
            self.record_shared_index(i);
        }
    }

    /// Records a latency from any thread (the index forms): an atomic add to the shared set.
    pub fn record_shared(&self, ns: u64) {
        self.record_shared_index(clamp_index(ns, LOG_BUCKETS));
    }

    fn record_shared_index(&self, i: usize) {
        match self.shared_set() {
            Some(s) => {
                s.0[i].fetch_add(1, Relaxed);
            }
            None => {
                self.lost.fetch_add(1, Relaxed);
            }
        }
    }

    fn shared_set(&self) -> Option<&LogCounts> {
        let mut p = self.shared.load(Acquire);
        if p.is_null() {
            let layout = Layout::new::<LogCounts>();
            // SAFETY: non-zero size; all-zero bytes are valid LogCounts.
            let fresh = unsafe { alloc_zeroed(layout) } as *mut LogCounts;
            if fresh.is_null() {
                return None;
            }
            p = match self
                .shared
                .compare_exchange(ptr::null_mut(), fresh, AcqRel, Acquire)
            {
                Ok(_) => fresh,
                Err(won) => {
                    // SAFETY: fresh came from alloc_zeroed with this layout and was never shared.
                    unsafe { dealloc(fresh as *mut u8, layout) };
                    won
                }
            };
        }
        // SAFETY: once published, the shared set is never freed.
        Some(unsafe { &*p })
    }

    /// Empties the histogram for its next owner: both sets' counts, the lost count and the
    /// owning thread (the next one to record owns it). Its shared set, once allocated, stays.
    /// Only while nothing records into it (its channel was handed back).
    pub fn reset(&self) {
        for c in &self.counts.0 {
            c.store(0, Relaxed);
        }
        let p = self.shared.load(Acquire);
        if !p.is_null() {
            // SAFETY: as in shared_set.
            for c in unsafe { &(*p).0 } {
                c.store(0, Relaxed);
            }
        }
        self.lost.store(0, Relaxed);
        self.owner.store(0, Relaxed);
    }

    /// The counts of both sets, bucket by bucket.
    pub fn snapshot(&self) -> [u64; LOG_BUCKETS] {
        let mut out = [0u64; LOG_BUCKETS];
        for (o, c) in out.iter_mut().zip(&self.counts.0) {
            *o = c.load(Relaxed);
        }
        let p = self.shared.load(Acquire);
        if !p.is_null() {
            // SAFETY: as in shared_set.
            for (o, c) in out.iter_mut().zip(unsafe { &(*p).0 }) {
                *o = o.wrapping_add(c.load(Relaxed));
            }
        }
        out
    }
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist::new()
    }
}

/// The non-empty buckets of `counts` as (lo, hi, count), bounds in ns, inclusive; `hi` is
/// None for the last stored bucket (it also holds everything beyond).
pub fn sparse(counts: &[u64; LOG_BUCKETS]) -> Vec<(u64, Option<u64>, u64)> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| {
            let (lo, hi) = bucket_bounds(i);
            (lo, (i < LOG_BUCKETS - 1).then_some(hi), n)
        })
        .collect()
}

/// The header's fallback for a sampled completion whose thread does not own the channel's
/// histogram (see `rcclTelemetryLog_`, the header's mirror of [`LogHist`]): counts bucket `i`.
///
/// # Safety
/// `h` is NULL or the histogram pointer of a reserved QP slot.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryLogAdd_(h: *const LogHist, i: u64) {
    // SAFETY: per the contract above; histograms are never freed.
    if let Some(h) = unsafe { h.as_ref() } {
        h.record_other(i.min(LOG_BUCKETS as u64 - 1) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(v: u64) {
        let i = bucket_index(v);
        assert!(i < BUCKETS_U64, "v={v} i={i}");
        let (lo, hi) = bucket_bounds(i);
        assert!(lo <= v && v <= hi, "v={v} i={i} lo={lo} hi={hi}");
        // Relative error: reporting lo for v is off by (v - lo) <= (hi - lo) <= v / 8.
        assert!(
            (hi - lo) as u128 * SUB_BUCKETS as u128 <= lo.max(1) as u128 || hi == lo,
            "v={v} width {} over lo {lo}",
            hi - lo
        );
        assert!(
            (v - lo) as u128 * SUB_BUCKETS as u128 <= v as u128,
            "v={v} lo={lo}"
        );
    }

    #[test]
    fn covers_u64_in_496_buckets() {
        assert_eq!(BUCKETS_U64, 496);
        assert_eq!(bucket_bounds(BUCKETS_U64 - 1).1, u64::MAX);
        // 10 s lies well inside the range.
        assert!(bucket_index(10_000_000_000) < BUCKETS_U64 - 1);
    }

    #[test]
    fn stored_range_edges() {
        // The header's sampled path indexes a latency below 2^32 ns without clamping: every
        // such value lies below the last stored bucket, whose start the clamp uses.
        assert!(bucket_index(u64::from(u32::MAX)) < LOG_BUCKETS - 1);
        assert_eq!(
            bucket_bounds(LOG_BUCKETS - 1).0,
            15 << 30,
            "the header's RCCL_TELEMETRY_LOG_LAST_NS_"
        );
        assert_eq!(clamp_index(15 << 30, LOG_BUCKETS), LOG_BUCKETS - 1);
        assert_eq!(clamp_index((15 << 30) - 1, LOG_BUCKETS), LOG_BUCKETS - 2);
    }

    #[test]
    fn exhaustive_small_values() {
        for v in 0..=(1u64 << 20) {
            check(v);
        }
        for v in 0..16 {
            assert_eq!(bucket_index(v), v as usize, "values below 16 ns are exact");
        }
    }

    #[test]
    fn buckets_tile_u64_at_every_edge() {
        let mut next = 0u64;
        for i in 0..BUCKETS_U64 {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(
                lo,
                next,
                "bucket {i} starts where {} ended",
                i.saturating_sub(1)
            );
            assert!(hi >= lo);
            assert_eq!(bucket_index(lo), i);
            assert_eq!(bucket_index(hi), i);
            if lo > 0 {
                assert_eq!(bucket_index(lo - 1), i - 1);
            }
            if hi < u64::MAX {
                assert_eq!(bucket_index(hi + 1), i + 1);
            }
            check(lo);
            check(hi);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn clamp_puts_the_tail_in_the_last_stored_bucket() {
        let n = bucket_index(10_000_000_000) + 1;
        assert_eq!(clamp_index(10_000_000_000, n), n - 1);
        assert_eq!(clamp_index(u64::MAX, n), n - 1);
        assert_eq!(clamp_index(5_000, n), bucket_index(5_000));
    }

    #[test]
    fn threads_sharing_a_histogram_lose_no_count() {
        let h: &'static LogHist = Box::leak(Box::new(LogHist::new()));
        let barrier = std::sync::Barrier::new(6);
        std::thread::scope(|sc| {
            for t in 0..6u64 {
                let barrier = &barrier;
                sc.spawn(move || {
                    for i in 0..10_000u64 {
                        if t == 5 {
                            h.record_shared(i * 37)
                        } else {
                            h.record(i * 37)
                        }
                    }
                    barrier.wait(); // no thread exits (and frees its thread pointer) early
                });
            }
        });
        let snap = h.snapshot();
        assert_eq!(snap.iter().sum::<u64>(), 60_000);
        assert_eq!(h.lost.load(Relaxed), 0);
        assert_ne!(h.owner.load(Relaxed), 0, "one thread owns the plain counts");
        let own: u64 = h.counts.0.iter().map(|c| c.load(Relaxed)).sum();
        assert!(
            (10_000..60_000).contains(&own),
            "the owner counted plainly, the rest shared: {own}"
        );
        for i in 0..10_000u64 {
            assert!(snap[clamp_index(i * 37, LOG_BUCKETS)] >= 6);
        }
    }

    #[test]
    fn sparse_lists_non_empty_buckets_with_bounds_and_an_open_last() {
        let h = LogHist::new();
        for ns in [0, 15, 16, 17, 5_000, 5_200, 16_106_127_360, u64::MAX] {
            h.record_shared(ns);
        }
        let s = sparse(&h.snapshot());
        assert_eq!(
            s,
            vec![
                (0, Some(0), 1),
                (15, Some(15), 1),
                (16, Some(17), 2),
                (4608, Some(5119), 1),
                (5120, Some(5631), 1),
                (16_106_127_360, None, 2)
            ]
        );
        assert!(sparse(&[0; LOG_BUCKETS]).is_empty());
        // 10 s lies in a bounded bucket; the last stored bucket starts above it.
        assert!(clamp_index(10_000_000_000, LOG_BUCKETS) < LOG_BUCKETS - 1);
        assert_eq!(bucket_bounds(LOG_BUCKETS - 1).0, 16_106_127_360);
    }

    #[test]
    fn the_headers_fallback_counts_and_ignores_null() {
        let h = LogHist::new();
        // SAFETY: a live histogram, and NULL.
        unsafe {
            rcclTelemetryLogAdd_(&h, 3);
            rcclTelemetryLogAdd_(&h, 10_000); // out of range: the last bucket
            rcclTelemetryLogAdd_(ptr::null(), 3);
        }
        let snap = h.snapshot();
        assert_eq!(
            (snap[3], snap[LOG_BUCKETS - 1], snap.iter().sum::<u64>()),
            (1, 1, 2)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn any_u64_lies_in_its_bucket_within_one_eighth(v in any::<u64>()) {
            check(v);
        }

        #[test]
        fn any_magnitude_lies_in_its_bucket(bits in 0u32..=64, low in any::<u64>()) {
            // any::<u64>() almost never draws small values; this spreads over magnitudes:
            // `bits` is the position of the highest set bit plus one (0: the value 0).
            let v = if bits == 0 {
                0
            } else {
                let top = 1u64 << (bits - 1);
                top | (low & (top - 1))
            };
            check(v);
        }

        #[test]
        fn monotonic(a in any::<u64>(), b in any::<u64>()) {
            let (a, b) = (a.min(b), a.max(b));
            prop_assert!(bucket_index(a) <= bucket_index(b));
        }
    }
}
