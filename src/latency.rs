//! Completion latency: the time source behind PostTs tokens, 1-in-N selection and the
//! histogram bucket function.
//!
//! Tokens: 0 = the completion matched no tracked posting, 1 = matched but not sampled,
//! anything larger is a clock reading. The reading is the TSC when the CPU has an invariant
//! one (constant_tsc + nonstop_tsc), calibrated once against CLOCK_MONOTONIC at Init; otherwise
//! CLOCK_MONOTONIC in ns. Either way the library converts a difference of two readings to ns
//! with one multiply and shift, so callers only store tokens and hand them back.

use std::sync::atomic::Ordering::Relaxed;

/// Token for "matched a tracked posting, but 1-in-N sampling skipped it".
pub const TS_UNSAMPLED: i64 = 1;

// The parameters live in `hot::HotParams`: the header's inline hooks read them too.
use crate::hot::rcclTelemetryHotV1 as PARAMS;

/// Publishes the latency parameters (called once from Init).
pub fn configure(sample: u64, buckets: u32, interval_ns: u64) {
    let (use_tsc, mult) = calibrate();
    let d = Divider::new(interval_ns);
    PARAMS.sample_mask.store(sample.max(1) - 1, Relaxed);
    PARAMS.use_tsc.store(u64::from(use_tsc), Relaxed);
    PARAMS.ns_mult.store(mult, Relaxed);
    PARAMS.div_mul.store(d.mul, Relaxed);
    PARAMS.div_shift.store(d.encoded_shift(), Relaxed);
    PARAMS.last_bucket.store(u64::from(buckets.clamp(1, 16)) - 1, Relaxed);
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME in ns since the Unix epoch.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc is available on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// A clock reading usable as a token: always > TS_UNSAMPLED.
#[inline(always)]
pub fn now_token() -> i64 {
    let t = if PARAMS.use_tsc.load(Relaxed) != 0 { rdtsc() } else { monotonic_ns() };
    // Tokens travel as int64_t; both clocks stay below 2^63 for centuries of uptime.
    ((t & (i64::MAX as u64)) as i64).max(2)
}

/// ns between a token and now.
#[inline(always)]
pub fn elapsed_ns(token: i64) -> u64 {
    let dt = (now_token() as u64).saturating_sub(token as u64);
    let ns = (u128::from(dt) * u128::from(PARAMS.ns_mult.load(Relaxed))) >> 32;
    if ns > u128::from(u64::MAX) { u64::MAX } else { ns as u64 }
}

/// The histogram bucket of a latency: min(ns / interval, buckets - 1), by a multiply.
#[inline(always)]
pub fn bucket_of(ns: u64) -> usize {
    let q = Divider::div_raw(ns, PARAMS.div_mul.load(Relaxed), PARAMS.div_shift.load(Relaxed));
    q.min(PARAMS.last_bucket.load(Relaxed)) as usize
}

/// Whether the CPU has an invariant TSC (Linux flags constant_tsc and nonstop_tsc).
fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return false };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else { return false };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Chooses the time source and returns (use_tsc, ns-per-tick as a 32.32 fixed-point multiplier).
fn calibrate() -> (bool, u64) {
    if std::env::var_os("RCCL_TELEMETRY_CLOCK").is_some_and(|v| v == "monotonic") || !invariant_tsc() {
        return (false, 1 << 32);
    }
    // Measure TSC ticks against CLOCK_MONOTONIC over about 2 ms; keep the tightest of a few tries.
    let t0 = monotonic_ns();
    let c0 = rdtsc();
    let mut t1 = t0;
    while t1.wrapping_sub(t0) < 2_000_000 {
        t1 = monotonic_ns();
    }
    let c1 = rdtsc();
    let ticks = c1.wrapping_sub(c0);
    let ns = t1 - t0;
    if ticks == 0 || ticks < ns / 16 {
        return (false, 1 << 32); // TSC slower than 62.5 MHz: not a usable clock
    }
    let mult = ((u128::from(ns) << 32) / u128::from(ticks)) as u64;
    (true, mult.max(1))
}

/// Exact unsigned division by a constant through a multiply-high (Granlund and Montgomery,
/// "Division by invariant integers using multiplication", 1994): for every u64 n,
/// `div(n) == n / d`. Proven below against the hardware division.
#[derive(Debug, Clone, Copy)]
pub struct Divider {
    /// Low 64 bits of the 65-bit magic number ceil(2^(64+l) / d) - 2^64... see new().
    pub mul: u64,
    /// l = ceil(log2 d); 0 means d == 1.
    pub shift: u32,
}

impl Divider {
    pub fn new(d: u64) -> Divider {
        assert!(d > 0, "divisor must be positive");
        if d == 1 {
            return Divider { mul: 0, shift: 0 };
        }
        let l = 64 - (d - 1).leading_zeros(); // ceil(log2 d), 1..=64
        // m' = floor(2^64 * (2^l - d) / d) + 1, which fits in 64 bits.
        let num = (1u128 << 64) * ((1u128 << l) - u128::from(d));
        let mul = (num / u128::from(d)) as u64 + 1;
        Divider { mul, shift: l }
    }

    /// The shift as stored in PARAMS (l, with 0 for d == 1).
    pub fn encoded_shift(&self) -> u64 {
        u64::from(self.shift)
    }

    #[inline(always)]
    pub fn div(&self, n: u64) -> u64 {
        Divider::div_raw(n, self.mul, u64::from(self.shift))
    }

    #[inline(always)]
    pub fn div_raw(n: u64, mul: u64, shift: u64) -> u64 {
        if shift == 0 {
            return n;
        }
        let t = ((u128::from(mul) * u128::from(n)) >> 64) as u64;
        // (t + ((n - t) >> 1)) >> (l - 1), without overflow.
        (t + ((n - t) >> 1)) >> (shift - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(d: u64, n: u64) {
        assert_eq!(Divider::new(d).div(n), n / d, "n={n} d={d}");
    }

    #[test]
    fn exhaustive_small_range() {
        for d in 1..=1024u64 {
            let dv = Divider::new(d);
            for n in 0..=(1u64 << 14) {
                assert_eq!(dv.div(n), n / d, "n={n} d={d}");
            }
        }
    }

    #[test]
    fn edges_of_the_whole_range() {
        let ds = [1u64, 2, 3, 5, 7, 30_000, 1 << 31, (1 << 31) + 1, (1 << 32) - 1, 1 << 63,
                  (1 << 63) + 1, u64::MAX - 1, u64::MAX];
        for &d in &ds {
            for &n in &[0, 1, d - 1, d, d.saturating_add(1), u64::MAX, u64::MAX - 1, u64::MAX / 2,
                        (u64::MAX / d) * d, ((u64::MAX / d) * d).wrapping_sub(1)] {
                check(d, n);
            }
            // Every bucket boundary of a 16-bucket histogram, and one either side.
            for b in 0..=17u64 {
                let edge = b.saturating_mul(d);
                for n in [edge.saturating_sub(1), edge, edge.saturating_add(1)] {
                    check(d, n);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn equals_division_everywhere(d in 1u64.., n in any::<u64>()) {
            prop_assert_eq!(Divider::new(d).div(n), n / d);
        }

        #[test]
        fn equals_division_for_latency_sized_values(d in 1u64..10_000_000, n in 0u64..100_000_000_000) {
            prop_assert_eq!(Divider::new(d).div(n), n / d);
        }
    }

    #[test]
    fn tokens_are_above_unsampled_and_elapsed_is_sane() {
        configure(1, 5, 30_000);
        let t = now_token();
        assert!(t > TS_UNSAMPLED);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = elapsed_ns(t);
        // Not a timing assertion on the code under test: a sleep of 20 ms cannot read as
        // under 10 ms or over an hour unless the calibration is wrong.
        assert!((10_000_000..3_600_000_000_000).contains(&ns), "{ns}");
    }

    #[test]
    fn bucket_clamps_to_the_last() {
        configure(1, 5, 30_000);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(29_999), 0);
        assert_eq!(bucket_of(30_000), 1);
        assert_eq!(bucket_of(149_999), 4);
        assert_eq!(bucket_of(150_000), 4);
        assert_eq!(bucket_of(u64::MAX), 4);
    }
}
