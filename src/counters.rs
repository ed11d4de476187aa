//! Slot layouts and the hot-path updates.
//!
//! A QP or channel handle is driven by one thread at a time (RCCL's proxy-thread model, the
//! contract in the header), so the handle forms update their counters with a relaxed load and a
//! relaxed store: no locked read-modify-write, no fence. Readers (Flush, SwCapture) use relaxed
//! loads and see every count once the writer's thread has been joined, or a value at most a few
//! increments old while it runs. The index forms may be called from any thread, so they use
//! atomic read-modify-writes on the same counters.
//!
//! Cache lines: a QP slot is five 64-byte lines: what every WQE touches, what rare and sampled
//! events touch (and the address of the channel's log-scale histogram), two of histogram, and
//! the WQE latency monitor's (touched only when RCCL_TELEMETRY_SLOW_NS is set).
//! Nothing on them is shared with another QP, so QPs on one channel never contend for a line.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::latency;
use crate::loghist::{clamp_index, LogCounts, LogHist, LOG_BUCKETS};

/// Number of histogram buckets a slot holds (the configured count is 1..=16).
pub const HIST: usize = 16;

pub use crate::qp_ext::{ExtSnapshot, QpExt};
pub use crate::thread::bump;

/// QP role, as told by rcclTelemetrySetQpRole. Kept beside the slot, in its channel's arena
/// (`SlotArena::role`), not in it: nothing on the hot path reads it.
pub const ROLE_UNKNOWN: u8 = 0;
pub const ROLE_DATA: u8 = 1;
pub const ROLE_CTS: u8 = 2;

/// A QP's statistics handle (from rcclTelemetryResolveQp): opaque, to be stored on the QP
/// and passed to the handle forms of the hooks; its address never changes.
//
// Counters the reader can derive are not kept: a send posted through the handle bumps one
// of `sent_write`/`sent_imm` (num_wqe_sent is their sum, plus the index form's own posts),
// and a completion bumps `wqe_rcvd` only, plus `untracked` in the rare case it matched no
// posting (num_wqe_completed = wqe_rcvd - untracked). One store per hook, not two.
// The header's inline hooks mirror this layout (see `inline_abi`).
#[repr(C, align(64))]
pub struct RcclQpStats {
    // Line 0: everything an unsampled WQE touches, posting and completion (one thread drives
    // both, so they share a line without contention).
    /// Sends posted through the handle, by opcode.
    pub sent_write: AtomicU64,
    pub sent_imm: AtomicU64,
    pub recv_wqe: AtomicU64,
    pub cts_signalled: AtomicU64,
    pub cts_unsignalled: AtomicU64,
    /// Posting position, for 1-in-N selection (touched only when N > 1).
    pub post_seq: AtomicU64,
    pub wqe_rcvd: AtomicU64,
    /// N - 1 for 1-in-N selection: the global setting, copied here when the slot is reserved
    /// so that PostTs reads nothing but this line.
    pub sample_mask: AtomicU64,
    // Line 1: the rare and the sampled.
    /// Completions that matched no tracked posting (postTs 0).
    pub untracked: AtomicU64,
    /// Bitwise NOT of the smallest sampled latency, so zeroed memory means "none yet".
    pub lat_min_inv: AtomicU64,
    pub lat_max: AtomicU64,
    pub slot_miss: AtomicU64,
    /// rcclTelemetryWqePosted(isSend != 0): num_wqe_sent without an opcode.
    pub idx_sent: AtomicU64,
    /// rcclTelemetryWriteWqe: an opcode without num_wqe_sent.
    pub idx_write: AtomicU64,
    /// The WQE latency monitor's threshold in ns (RCCL_TELEMETRY_SLOW_NS), copied here when the
    /// slot is reserved, or 0 when the monitor is off: a measured completion reads it beside
    /// min and max, and does the monitor's work (line 4) only when it is not 0.
    pub mon_thr: AtomicU64,
    /// The address of the channel's log-scale histogram (`LogHist`), nothing else: 0 when the
    /// slot records none (RCCL_TELEMETRY_LOG_HISTOGRAM=0), so the inline hook tests the word
    /// and uses it as the pointer as it is.
    pub log_hist: AtomicU64,
    // Lines 2-3.
    pub hist: [AtomicU64; HIST],
    // Line 4: the WQE latency monitor (touched only while `mon_thr` is not 0).
    /// The address of the QP's own log-scale counts (`monitor::MonHist`, LOG_BUCKETS of them),
    /// set with `mon_thr`: the monitor's quantiles.
    pub mon_hist: AtomicU64,
    /// Sum of the measured latencies in ns, and of their squares (128 bits, low word first):
    /// the exact mean and standard deviation.
    pub mon_sum: AtomicU64,
    pub mon_sq_lo: AtomicU64,
    pub mon_sq_hi: AtomicU64,
    /// Completions whose latency exceeded `mon_thr` (num_wqe_slow).
    pub slow: AtomicU64,
    /// The latest slow completion: its latency in ns and its posting token (the background
    /// thread's "WQE slow" line reads them).
    pub slow_ns: AtomicU64,
    pub slow_post: AtomicU64,
    /// rcclTelemetryWriteWqe(withImm != 0): an opcode without num_wqe_sent.
    pub idx_imm: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<RcclQpStats>() == 320);
const _: () = assert!(std::mem::align_of::<RcclQpStats>() == 64);

impl RcclQpStats {
    /// Points the slot at its channel's log-scale histogram (before the slot is handed out).
    pub fn set_log_hist(&self, h: &'static LogHist) {
        self.log_hist.store(h as *const LogHist as u64, Relaxed);
    }

    /// The channel's log-scale histogram this slot records into, if any.
    #[inline(always)]
    pub fn log_hist(&self) -> Option<&'static LogHist> {
        let a = self.log_hist.load(Relaxed);
        // SAFETY: a non-zero address was stored by set_log_hist from a &'static LogHist.
        (a != 0).then(|| unsafe { &*(a as usize as *const LogHist) })
    }

    #[inline(always)]
    pub fn post_ts(&self) -> i64 {
        let mask = self.sample_mask.load(Relaxed);
        if mask != 0 {
            let seq = self.post_seq.load(Relaxed);
            self.post_seq.store(seq.wrapping_add(1), Relaxed);
            if seq & mask != 0 {
                return latency::TS_UNSAMPLED;
            }
        }
        latency::now_token()
    }

    /// Token for the index form: the posting position is claimed atomically.
    #[inline]
    pub fn post_ts_shared(&self) -> i64 {
        let mask = self.sample_mask.load(Relaxed);
        if mask != 0 && self.post_seq.fetch_add(1, Relaxed) & mask != 0 {
            return latency::TS_UNSAMPLED;
        }
        latency::now_token()
    }

    #[inline(always)]
    pub fn send_posted(&self, with_imm: bool) {
        bump(
            if with_imm {
                &self.sent_imm
            } else {
                &self.sent_write
            },
            1,
        );
    }

    #[inline(always)]
    pub fn recv_posted(&self) {
        bump(&self.recv_wqe, 1);
    }

    #[inline(always)]
    pub fn cts_sent(&self, signalled: bool) {
        bump(
            if signalled {
                &self.cts_signalled
            } else {
                &self.cts_unsignalled
            },
            1,
        );
    }

    #[inline(always)]
    pub fn slot_missed(&self) {
        bump(&self.slot_miss, 1);
    }

    #[inline(always)]
    pub fn wqe_complete(&self, post_ts: i64) {
        self.wqe_complete_at(post_ts, 0);
    }

    /// A completion whose poll returned at `now_ts` (a reading of the token clock taken once
    /// per poll); `now_ts` <= 1 means "read the clock now", as `wqe_complete` does.
    #[inline(always)]
    pub fn wqe_complete_at(&self, post_ts: i64, now_ts: i64) {
        bump(&self.wqe_rcvd, 1);
        if post_ts == 0 {
            bump(&self.untracked, 1);
        } else if post_ts > latency::TS_UNSAMPLED {
            let now = if now_ts > latency::TS_UNSAMPLED {
                now_ts
            } else {
                latency::now_token()
            };
            let ns = latency::elapsed_ns_until(post_ts, now);
            bump(&self.hist[latency::bucket_of(ns) & (HIST - 1)], 1);
            if let Some(h) = self.log_hist() {
                h.record(ns);
            }
            if !ns > self.lat_min_inv.load(Relaxed) {
                self.lat_min_inv.store(!ns, Relaxed);
            }
            if ns > self.lat_max.load(Relaxed) {
                self.lat_max.store(ns, Relaxed);
            }
            let thr = self.mon_thr.load(Relaxed);
            if thr != 0 {
                self.monitor(ns, post_ts, thr);
            }
        }
    }

    /// The WQE latency monitor's share of a measured completion (monitor on): the sums, the
    /// QP's log-scale count, and, above the threshold, the slow count and the latest slow one.
    #[inline(always)]
    fn monitor(&self, ns: u64, post_ts: i64, thr: u64) {
        bump(&self.mon_sum, ns);
        // The square's high word is 0 below 2^32 ns and the low word's sum carries rarely:
        // the high word is touched only then (as the header's hook does).
        let sq = u128::from(ns) * u128::from(ns);
        let (lo, carry) = self.mon_sq_lo.load(Relaxed).overflowing_add(sq as u64);
        self.mon_sq_lo.store(lo, Relaxed);
        let hi = (sq >> 64) as u64 + u64::from(carry);
        if hi != 0 {
            bump(&self.mon_sq_hi, hi);
        }
        if let Some(h) = self.mon_hist() {
            bump(&h.0[clamp_index(ns, LOG_BUCKETS)], 1);
        }
        if ns > thr {
            bump(&self.slow, 1);
            self.slow_ns.store(ns, Relaxed);
            self.slow_post.store(post_ts as u64, Relaxed);
        }
    }

    /// The monitor's share of a measured completion from any thread (atomic adds).
    fn monitor_shared(&self, ns: u64, post_ts: i64, thr: u64) {
        self.mon_sum.fetch_add(ns, Relaxed);
        let sq = u128::from(ns) * u128::from(ns);
        let (lo, hi) = (sq as u64, (sq >> 64) as u64);
        let carry = u64::from(
            self.mon_sq_lo
                .fetch_add(lo, Relaxed)
                .checked_add(lo)
                .is_none(),
        );
        if hi + carry != 0 {
            self.mon_sq_hi.fetch_add(hi + carry, Relaxed);
        }
        if let Some(h) = self.mon_hist() {
            h.0[clamp_index(ns, LOG_BUCKETS)].fetch_add(1, Relaxed);
        }
        if ns > thr {
            self.slow.fetch_add(1, Relaxed);
            self.slow_ns.store(ns, Relaxed);
            self.slow_post.store(post_ts as u64, Relaxed);
        }
    }

    /// The QP's own log-scale counts (monitor on), if any.
    #[inline(always)]
    pub fn mon_hist(&self) -> Option<&'static LogCounts> {
        let a = self.mon_hist.load(Relaxed);
        // SAFETY: a non-zero address was stored by the arena from a never-freed LogCounts.
        (a != 0).then(|| unsafe { &*(a as usize as *const LogCounts) })
    }

    /// The completion hook for callers on any thread (index form).
    pub fn wqe_complete_shared(&self, post_ts: i64) {
        self.wqe_rcvd.fetch_add(1, Relaxed);
        if post_ts == 0 {
            self.untracked.fetch_add(1, Relaxed);
        } else if post_ts > latency::TS_UNSAMPLED {
            self.latency_shared(post_ts);
        }
    }

    /// The latency of a sampled completion (token > 1), from any thread: histogram, min, max
    /// (and the monitor's share when it is on).
    pub fn latency_shared(&self, post_ts: i64) {
        let ns = latency::elapsed_ns(post_ts);
        self.hist[latency::bucket_of(ns) & (HIST - 1)].fetch_add(1, Relaxed);
        if let Some(h) = self.log_hist() {
            h.record_shared(ns);
        }
        self.lat_min_inv.fetch_max(!ns, Relaxed);
        self.lat_max.fetch_max(ns, Relaxed);
        let thr = self.mon_thr.load(Relaxed);
        if thr != 0 {
            self.monitor_shared(ns, post_ts, thr);
        }
    }

    pub fn snapshot(&self) -> QpSnapshot {
        let mut hist = [0u64; HIST];
        for (h, c) in hist.iter_mut().zip(&self.hist) {
            *h = c.load(Relaxed);
        }
        let sampled: u64 = hist.iter().sum();
        let (write, imm) = (self.sent_write.load(Relaxed), self.sent_imm.load(Relaxed));
        // untracked before wqe_rcvd: while hooks run, the difference can then lag, not wrap.
        let untracked = self.untracked.load(Relaxed);
        let wqe_rcvd = self.wqe_rcvd.load(Relaxed);
        // A completion bumps its bucket before it stores min and max, so a live reader can see
        // a sampled count whose min is still "none" (lat_min_inv 0) or whose max is still 0.
        // Then min and max read -1 (as with nothing sampled), and a max below the min is the
        // min: never i64::MAX, never a max of 0 under a larger min.
        let min_inv = self.lat_min_inv.load(Relaxed);
        let (lat_min, lat_max) = if sampled == 0 || min_inv == 0 {
            (-1, -1)
        } else {
            let min = clamp_i64(!min_inv);
            (min, clamp_i64(self.lat_max.load(Relaxed)).max(min))
        };
        QpSnapshot {
            wqe_sent: write
                .wrapping_add(imm)
                .wrapping_add(self.idx_sent.load(Relaxed)),
            recv_wqe: self.recv_wqe.load(Relaxed),
            wqe_rcvd,
            wqe_completed: wqe_rcvd.saturating_sub(untracked),
            cts_signalled: self.cts_signalled.load(Relaxed),
            cts_unsignalled: self.cts_unsignalled.load(Relaxed),
            slot_miss: self.slot_miss.load(Relaxed),
            write_wqe: write.wrapping_add(self.idx_write.load(Relaxed)),
            write_imm_wqe: imm.wrapping_add(self.idx_imm.load(Relaxed)),
            lat_min,
            lat_max,
            hist,
            slow: self.slow.load(Relaxed),
            stalls: 0,
        }
    }
}

fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A point-in-time copy of one QP's counters (or a sum of several).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSnapshot {
    pub wqe_sent: u64,
    pub recv_wqe: u64,
    pub wqe_rcvd: u64,
    pub wqe_completed: u64,
    pub cts_signalled: u64,
    pub cts_unsignalled: u64,
    pub slot_miss: u64,
    pub write_wqe: u64,
    pub write_imm_wqe: u64,
    /// -1 when nothing was sampled.
    pub lat_min: i64,
    pub lat_max: i64,
    pub hist: [u64; HIST],
    /// Completions above the monitor's threshold (num_wqe_slow; 0 while the monitor is off).
    pub slow: u64,
    /// Stall episodes (num_stalls): not in the slot, filled from the stall detector's state by
    /// whoever reads it with one.
    pub stalls: u64,
}

impl Default for QpSnapshot {
    fn default() -> Self {
        QpSnapshot {
            wqe_sent: 0,
            recv_wqe: 0,
            wqe_rcvd: 0,
            wqe_completed: 0,
            cts_signalled: 0,
            cts_unsignalled: 0,
            slot_miss: 0,
            write_wqe: 0,
            write_imm_wqe: 0,
            lat_min: -1,
            lat_max: -1,
            hist: [0; HIST],
            slow: 0,
            stalls: 0,
        }
    }
}

impl QpSnapshot {
    pub fn cts_sent(&self) -> u64 {
        self.cts_signalled + self.cts_unsignalled
    }

    /// Completions whose latency was measured: exactly the histogram's sum.
    pub fn sampled(&self) -> u64 {
        self.hist.iter().sum()
    }

    /// Whether this QP carried any traffic.
    pub fn active(&self) -> bool {
        self.wqe_sent
            | self.recv_wqe
            | self.wqe_rcvd
            | self.cts_sent()
            | self.slot_miss
            | self.write_wqe
            | self.write_imm_wqe
            != 0
    }

    /// Adds another QP's counters (channel and device totals are derived this way).
    pub fn accumulate(&mut self, o: &QpSnapshot) {
        self.wqe_sent += o.wqe_sent;
        self.recv_wqe += o.recv_wqe;
        self.wqe_rcvd += o.wqe_rcvd;
        self.wqe_completed += o.wqe_completed;
        self.cts_signalled += o.cts_signalled;
        self.cts_unsignalled += o.cts_unsignalled;
        self.slot_miss += o.slot_miss;
        self.write_wqe += o.write_wqe;
        self.write_imm_wqe += o.write_imm_wqe;
        self.slow += o.slow;
        self.stalls += o.stalls;
        for (a, b) in self.hist.iter_mut().zip(&o.hist) {
            *a += b;
        }
        if o.lat_min >= 0 && (self.lat_min < 0 || o.lat_min < self.lat_min) {
            self.lat_min = o.lat_min;
        }
        if o.lat_max > self.lat_max {
            self.lat_max = o.lat_max;
        }
    }
}

/// A channel's statistics handle (from rcclTelemetryResolveChannel): opaque, to be passed to
/// rcclTelemetryChRequestCompleted; its address never changes.
//
// Only num_req_completed is stored here: every other channel total is summed from the QP
// slots when a file is written.
#[repr(C, align(64))]
pub struct RcclChannelStats {
    pub req_completed: AtomicU64,
}

impl RcclChannelStats {
    #[inline(always)]
    pub fn request_completed(&self) {
        bump(&self.req_completed, 1);
    }
}

/// Number of WQE-size buckets: size 0, then (2^(k-1), 2^k] for k = 0..=64.
pub const SIZE_BUCKETS: usize = 66;

/// The bucket of a send WQE payload size.
#[inline(always)]
pub fn size_bucket(bytes: u64) -> usize {
    if bytes == 0 {
        0
    } else {
        1 + (64 - (bytes - 1).leading_zeros()) as usize
    }
}

/// The largest size that falls in a bucket (what the JSON calls max_wqe_size).
pub fn size_bucket_max(b: usize) -> u64 {
    match b {
        0 => 0,
        65 => u64::MAX,
        k => 1u64 << (k - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn size_buckets_are_powers_of_two() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 1);
        assert_eq!(size_bucket(2), 2);
        assert_eq!(size_bucket(3), 3);
        assert_eq!(size_bucket(4), 3);
        assert_eq!(size_bucket(5), 4);
        assert_eq!(size_bucket(65536), 17);
        assert_eq!(size_bucket(65537), 18);
        assert_eq!(size_bucket(u64::MAX), 65);
        assert_eq!(size_bucket_max(17), 65536);
    }

    proptest! {
        #[test]
        fn size_lands_in_the_bucket_that_bounds_it(bytes in any::<u64>()) {
            let b = size_bucket(bytes);
            prop_assert!(b < SIZE_BUCKETS);
            prop_assert!(bytes <= size_bucket_max(b));
            if b > 0 {
                let below = if b == 1 { 0 } else { size_bucket_max(b - 1) };
                prop_assert!(bytes > below);
            }
        }
    }

    #[test]
    fn zeroed_slot_reads_as_empty() {
        let s: RcclQpStats = unsafe { std::mem::zeroed() };
        let snap = s.snapshot();
        assert_eq!(snap, QpSnapshot::default());
        assert!(!snap.active());
    }

    #[test]
    fn a_live_read_between_bucket_and_min_never_shows_sentinels() {
        // What a reader sees while a completion is half-recorded: the bucket, but no min/max.
        let s: RcclQpStats = unsafe { std::mem::zeroed() };
        s.wqe_rcvd.store(1, Relaxed);
        s.hist[0].store(1, Relaxed);
        let snap = s.snapshot();
        assert_eq!((snap.lat_min, snap.lat_max), (-1, -1));
        // The min stored, the max not yet.
        s.lat_min_inv.store(!700, Relaxed);
        let snap = s.snapshot();
        assert_eq!((snap.lat_min, snap.lat_max), (700, 700));
        s.lat_max.store(900, Relaxed);
        assert_eq!((s.snapshot().lat_min, s.snapshot().lat_max), (700, 900));
    }

    #[test]
    fn completion_tokens_mean_what_the_header_says() {
        crate::latency::configure(1, 5, 30_000, false, std::path::Path::new("/sys"));
        let s: RcclQpStats = unsafe { std::mem::zeroed() };
        s.wqe_complete(0);
        s.wqe_complete(latency::TS_UNSAMPLED);
        let t = s.post_ts();
        s.wqe_complete(t);
        let snap = s.snapshot();
        assert_eq!(
            (snap.wqe_rcvd, snap.wqe_completed, snap.sampled()),
            (3, 2, 1)
        );
        assert!(snap.lat_min >= 0 && snap.lat_min == snap.lat_max);
    }
}
