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
use crate::hot::rcclTelemetryHotV3 as PARAMS;

/// Publishes the latency parameters (called once from Init). `monotonic` forces
/// CLOCK_MONOTONIC (RCCL_TELEMETRY_CLOCK=monotonic); `sysfs_root` is where the kernel's
/// clocksource is read (RCCL_TELEMETRY_SYSFS_ROOT).
pub fn configure(
    sample: u64,
    buckets: u32,
    interval_ns: u64,
    monotonic: bool,
    sysfs_root: &std::path::Path,
) {
    let (use_tsc, mult, why) =
        choose_clock(monotonic, invariant_tsc(), &kernel_clocksource(sysfs_root));
    crate::diag::debug(|| format!("latency clock: {why}"));
    let d = Divider::new(interval_ns);
    PARAMS.sample_mask.store(sample.max(1) - 1, Relaxed);
    PARAMS.use_tsc.store(u64::from(use_tsc), Relaxed);
    PARAMS.ns_mult.store(mult, Relaxed);
    PARAMS.div_mul.store(d.mul, Relaxed);
    PARAMS.div_shift.store(d.encoded_shift(), Relaxed);
    PARAMS
        .last_bucket
        .store(u64::from(buckets.clamp(1, 16)) - 1, Relaxed);
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME in ns since the Unix epoch.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
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
    let t = if PARAMS.use_tsc.load(Relaxed) != 0 {
        rdtsc()
    } else {
        monotonic_ns()
    };
    // Tokens travel as int64_t; both clocks stay below 2^63 for centuries of uptime.
    ((t & (i64::MAX as u64)) as i64).max(2)
}

/// ns between a token and now.
#[inline(always)]
pub fn elapsed_ns(token: i64) -> u64 {
    elapsed_ns_until(token, now_token())
}

/// ns between a token and a later reading `now` of the same clock (0 when `now` is earlier).
#[inline(always)]
pub fn elapsed_ns_until(token: i64, now: i64) -> u64 {
    let dt = (now as u64).saturating_sub(token as u64);
    let ns = (u128::from(dt) * u128::from(PARAMS.ns_mult.load(Relaxed))) >> 32;
    if ns > u128::from(u64::MAX) {
        u64::MAX
    } else {
        ns as u64
    }
}

/// The histogram bucket of a latency: min(ns / interval, buckets - 1), by a multiply.
#[inline(always)]
pub fn bucket_of(ns: u64) -> usize {
    let q = Divider::div_raw(
        ns,
        PARAMS.div_mul.load(Relaxed),
        PARAMS.div_shift.load(Relaxed),
    );
    q.min(PARAMS.last_bucket.load(Relaxed)) as usize
}

/// Whether the CPU has an invariant TSC (Linux flags constant_tsc and nonstop_tsc).
fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// The kernel's current clocksource (`devices/system/clocksource/clocksource0/
/// current_clocksource` under the sysfs root), or an empty string when it cannot be read.
fn kernel_clocksource(sysfs_root: &std::path::Path) -> String {
    let p = sysfs_root.join("devices/system/clocksource/clocksource0/current_clocksource");
    crate::sysfs::read_text(&p)
        .map(|t| t.trim().to_owned())
        .unwrap_or_default()
}

/// Chooses the time source: the TSC only where the CPU says it is invariant AND the kernel
/// itself trusts it (its clocksource is `tsc`: a kernel that found the TSC unstable, or a
/// guest on kvm-clock/hyperv, says otherwise), else CLOCK_MONOTONIC. Returns (use_tsc,
/// ns-per-tick as a 32.32 fixed-point multiplier, the reason in words).
fn choose_clock(forced_monotonic: bool, invariant: bool, clocksource: &str) -> (bool, u64, String) {
    let monotonic = |why: String| (false, 1u64 << 32, format!("CLOCK_MONOTONIC ({why})"));
    if forced_monotonic {
        return monotonic("RCCL_TELEMETRY_CLOCK=monotonic".into());
    }
    if !invariant {
        return monotonic("the CPU has no invariant TSC (constant_tsc and nonstop_tsc)".into());
    }
    if clocksource != "tsc" {
        let cs = if clocksource.is_empty() {
            "unreadable".to_owned()
        } else {
            format!("'{clocksource}'")
        };
        return monotonic(format!("the kernel's clocksource is {cs}, not tsc"));
    }
    match calibrate(CALIBRATION_SAMPLES, rdtsc, monotonic_ns) {
        Some((mult, spread)) => {
            let mhz = ((1u128 << 32) * 1000 / u128::from(mult)) as u64;
            (true, mult, format!("TSC (invariant, kernel clocksource tsc), {mhz} MHz, best of {CALIBRATION_SAMPLES} samples, spread {spread} ppm"))
        }
        None => monotonic("the TSC did not calibrate against CLOCK_MONOTONIC".into()),
    }
}

/// Samples taken by [`calibrate`], each over about [`CALIBRATION_NS`].
const CALIBRATION_SAMPLES: usize = 5;
const CALIBRATION_NS: u64 = 2_000_000;

/// Measures TSC ticks against CLOCK_MONOTONIC `samples` times over about 2 ms each. Each
/// end of a sample is read as tsc, clock, tsc and keeps the clock reading whose bracketing
/// TSC reads were closest (the least disturbed by an interrupt or a preemption); the sample
/// with the narrowest total bracket wins. Returns (32.32 ns-per-tick multiplier, spread of
/// all samples' rates in parts per million), or None when the TSC is not a usable clock.
fn calibrate(samples: usize, tsc: impl Fn() -> u64, clock: impl Fn() -> u64) -> Option<(u64, u64)> {
    // One (tsc, clock) pair: the tsc at the middle of the tightest of 8 brackets.
    let pair = || {
        let mut best = (u64::MAX, 0u64, 0u64);
        for _ in 0..8 {
            let a = tsc();
            let t = clock();
            let b = tsc();
            let w = b.wrapping_sub(a);
            if w < best.0 {
                best = (w, a.wrapping_add(w / 2), t);
            }
        }
        best
    };
    let mut rates: Vec<(u64, u64)> = Vec::with_capacity(samples); // (bracket width, mult)
    for _ in 0..samples.max(1) {
        let (w0, c0, t0) = pair();
        let mut t = clock();
        while t.wrapping_sub(t0) < CALIBRATION_NS {
            t = clock();
        }
        let (w1, c1, t1) = pair();
        let (ticks, ns) = (c1.wrapping_sub(c0), t1.wrapping_sub(t0));
        if ticks == 0 || ns == 0 || ticks < ns / 16 {
            continue; // TSC slower than 62.5 MHz (or stopped): not a usable clock
        }
        let mult = ((u128::from(ns) << 32) / u128::from(ticks)).min(u128::from(u64::MAX)) as u64;
        rates.push((w0.saturating_add(w1), mult.max(1)));
    }
    let best = rates.iter().min_by_key(|r| r.0)?.1;
    let (lo, hi) = rates
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), r| (lo.min(r.1), hi.max(r.1)));
    let spread = ((u128::from(hi - lo) * 1_000_000) / u128::from(best)) as u64;
    Some((best, spread))
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
        let ds = [
            1u64,
            2,
            3,
            5,
            7,
            30_000,
            1 << 31,
            (1 << 31) + 1,
            (1 << 32) - 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &d in &ds {
            for &n in &[
                0,
                1,
                d - 1,
                d,
                d.saturating_add(1),
                u64::MAX,
                u64::MAX - 1,
                u64::MAX / 2,
                (u64::MAX / d) * d,
                ((u64::MAX / d) * d).wrapping_sub(1),
            ] {
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
        configure(1, 5, 30_000, false, std::path::Path::new("/sys"));
        let t = now_token();
        assert!(t > TS_UNSAMPLED);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = elapsed_ns(t);
        // Not a timing assertion on the code under test: a sleep of 20 ms cannot read as
        // under 10 ms or over an hour unless the calibration is wrong.
        assert!((10_000_000..3_600_000_000_000).contains(&ns), "{ns}");
    }

    #[test]
    fn the_tsc_only_where_the_kernel_trusts_it() {
        let (tsc, _, why) = choose_clock(false, true, "kvm-clock");
        assert!(
            !tsc && why.contains("clocksource is 'kvm-clock', not tsc"),
            "{why}"
        );
        let (tsc, _, why) = choose_clock(false, true, "");
        assert!(!tsc && why.contains("unreadable"), "{why}");
        let (tsc, _, why) = choose_clock(false, false, "tsc");
        assert!(!tsc && why.contains("no invariant TSC"), "{why}");
        let (tsc, mult, why) = choose_clock(true, true, "tsc");
        assert!(
            !tsc && mult == 1 << 32 && why.contains("RCCL_TELEMETRY_CLOCK"),
            "{why}"
        );
    }

    /// A simulated 1 GHz TSC (one tick per clock ns) over a clock that advances 100 ns per
    /// read, whose first 16 TSC reads (the first sample's opening brackets) are each followed
    /// by a 50 us preemption before the closing read.
    fn disturbed_run(samples: usize) -> Option<(u64, u64)> {
        use std::cell::Cell;
        let now = Cell::new(1_000_000u64);
        let reads = Cell::new(0u64);
        let clock = || {
            now.set(now.get() + 100);
            now.get()
        };
        let tsc = || {
            reads.set(reads.get() + 1);
            if reads.get() <= 16 && reads.get() % 2 == 0 {
                now.set(now.get() + 50_000);
            }
            now.get()
        };
        calibrate(samples, tsc, clock)
    }

    #[test]
    fn calibration_keeps_the_least_disturbed_sample() {
        let (one, _) = disturbed_run(1).unwrap();
        assert_ne!(one, 1 << 32, "one disturbed sample is off");
        let (best, spread) = disturbed_run(5).unwrap();
        assert_eq!(best, 1 << 32, "the best of five is exact: 1 ns per tick");
        assert!(spread > 0, "the disturbed sample shows in the spread");
        // A stopped TSC is not a clock.
        let now = std::cell::Cell::new(0u64);
        let clock = || {
            now.set(now.get() + 100);
            now.get()
        };
        assert_eq!(calibrate(3, || 42, clock), None);
    }

    #[test]
    fn bucket_clamps_to_the_last() {
        configure(1, 5, 30_000, false, std::path::Path::new("/sys"));
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(29_999), 0);
        assert_eq!(bucket_of(30_000), 1);
        assert_eq!(bucket_of(149_999), 4);
        assert_eq!(bucket_of(150_000), 4);
        assert_eq!(bucket_of(u64::MAX), 4);
    }
}
