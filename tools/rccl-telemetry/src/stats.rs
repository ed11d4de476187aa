//! Robust statistics and histogram percentiles.

use crate::model::{log_buckets_opt, LogBucket};
use serde::Serialize;

/// The number of samples in a histogram (saturating: counts come from untrusted files).
pub fn hist_total(hist: &[u64]) -> u64 {
    hist.iter().fold(0u64, |s, c| s.saturating_add(*c))
}

/// Median of the values (None when empty). NaNs are not expected and sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Median absolute deviation from the median (unscaled).
pub fn mad(values: &[f64], med: f64) -> f64 {
    let dev: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    median(&dev).unwrap_or(0.0)
}

/// The centre and spread of one metric across the ranks and devices of a run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Robust {
    pub n: usize,
    pub median: f64,
    pub mad: f64,
    /// The scale robust z-scores are divided by: 1.4826 * MAD (consistent with the standard
    /// deviation for normal data); when MAD is 0 (more than half the values identical) it falls
    /// back to 1.2533 * mean absolute deviation, and never goes below `floor`.
    pub scale: f64,
}

impl Robust {
    /// `floor` keeps a perfectly uniform population from turning a difference of one event
    /// into an infinite score.
    pub fn of(values: &[f64], floor: f64) -> Option<Robust> {
        let med = median(values)?;
        let mad = mad(values, med);
        let mut scale = 1.4826 * mad;
        if scale <= 0.0 {
            let mean_ad = values.iter().map(|v| (v - med).abs()).sum::<f64>() / values.len() as f64;
            scale = 1.2533 * mean_ad;
        }
        let scale = scale.max(floor).max(f64::MIN_POSITIVE);
        Some(Robust {
            n: values.len(),
            median: med,
            mad,
            scale,
        })
    }

    /// Robust z-score of `x`: how many robust standard deviations it lies from the median.
    pub fn z(&self, x: f64) -> f64 {
        (x - self.median) / self.scale
    }
}

/// One estimated percentile of a latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentile {
    /// The quantile, 0..1.
    pub q: f64,
    /// Linear interpolation inside the bucket that holds the quantile.
    pub estimate_ns: f64,
    /// The bucket's lower edge (tightened by the observed min when it is inside the bucket).
    pub lower_ns: f64,
    /// The bucket's upper edge (tightened by the observed max); None for the open-ended last
    /// bucket when no max is known: the percentile is then only known to be >= lower_ns.
    pub upper_ns: Option<f64>,
    /// Index of the bucket that holds the quantile.
    pub bucket: usize,
    /// True when that is the last, open-ended bucket: the estimate is then only known to lie
    /// between lower_ns and the observed max, so tables show it as ">= lower_ns".
    pub open_bucket: bool,
    /// From the log-scale histogram: the bucket's width over its lower bound, the most the
    /// estimate can be off relative to the true value (at most 1/8; 0 below 16 ns). None for
    /// the linear histogram, whose error is one bucket width.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_error: Option<f64>,
}

/// Estimates quantile `q` of a histogram whose bucket `b` covers [b*w, (b+1)*w) ns and whose last
/// bucket also takes everything above.
///
/// The quantile is the smallest value with at least q*total samples at or below it; its bucket is
/// found exactly and the value is interpolated linearly inside that bucket, so the error is at most
/// one bucket width. `min_ns`/`max_ns` (the observed extremes, -1 or None when unknown) tighten the
/// bounds, and close the last bucket when a max is known; with latency sampling (N > 1) max
/// understates the true tail, so the last bucket's upper bound is then only that of the sample.
pub fn histogram_percentile(
    hist: &[u64],
    width_ns: u64,
    q: f64,
    min_ns: Option<i64>,
    max_ns: Option<i64>,
) -> Option<Percentile> {
    let total: u128 = hist.iter().map(|c| *c as u128).sum();
    if total == 0 || width_ns == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let w = width_ns as f64;
    let rank = (q * total as f64).ceil().max(1.0);
    let mut cum: u128 = 0;
    let last = hist.len() - 1;
    for (b, &c) in hist.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let before = cum as f64;
        cum += c as u128;
        if cum as f64 >= rank || b == last {
            let (lo, hi) = tighten(
                b as f64 * w,
                if b == last {
                    None
                } else {
                    Some((b as f64 + 1.0) * w)
                },
                min_ns,
                max_ns,
            );
            let frac = ((rank - before) / c as f64).clamp(0.0, 1.0);
            let estimate = match hi {
                Some(h) => lo + frac * (h - lo),
                None => lo,
            };
            return Some(Percentile {
                q,
                estimate_ns: estimate,
                lower_ns: lo,
                upper_ns: hi,
                bucket: b,
                open_bucket: b == last,
                relative_error: None,
            });
        }
    }
    None
}

/// A bucket's bounds `[lo, hi)` (`hi` None: open) narrowed by the observed minimum and maximum
/// (negative: not measured) where they fall inside it; the maximum also closes an open bucket.
fn tighten(
    mut lo: f64,
    mut hi: Option<f64>,
    min_ns: Option<i64>,
    max_ns: Option<i64>,
) -> (f64, Option<f64>) {
    if let Some(mn) = min_ns.filter(|v| *v >= 0).map(|v| v as f64) {
        if mn > lo && hi.is_none_or(|h| mn < h) {
            lo = mn;
        }
    }
    if let Some(mx) = max_ns.filter(|v| *v >= 0).map(|v| v as f64) {
        match hi {
            Some(h) if mx < h && mx >= lo => hi = Some(mx),
            None if mx >= lo => hi = Some(mx),
            _ => {}
        }
    }
    (lo, hi)
}

/// Estimates quantile `q` of a sparse log-scale histogram (file version 2: `[lo, hi, count]`,
/// bounds inclusive, `hi` None for the open last bucket). The bucket is found exactly and the
/// value interpolated inside `[lo, hi + 1)`; the estimate is then off by at most the bucket's
/// width relative to its lower bound, reported as `relative_error` (<= 1/8). `bucket` is the
/// index in `buckets`. `min_ns`/`max_ns` tighten the bounds and close the open bucket.
pub fn log_histogram_percentile(
    buckets: &[LogBucket],
    q: f64,
    min_ns: Option<i64>,
    max_ns: Option<i64>,
) -> Option<Percentile> {
    let mut b = log_buckets_opt(Some(buckets));
    b.retain(|x| x.2 > 0);
    b.sort_by_key(|x| x.0);
    let total: u128 = b.iter().map(|x| x.2 as u128).sum();
    if total == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let rank = (q * total as f64).ceil().max(1.0);
    let mut cum: u128 = 0;
    let last = b.len() - 1;
    for (i, &(blo, bhi, c)) in b.iter().enumerate() {
        let before = cum as f64;
        cum += c as u128;
        if cum as f64 >= rank || i == last {
            let open = bhi.is_none();
            let width = bhi.map(|h| h.saturating_sub(blo) as f64 + 1.0);
            let relative_error = match bhi {
                Some(h) if h == blo => Some(0.0),
                Some(_) => Some(width.unwrap_or(0.0) / (blo.max(1) as f64)),
                None => None,
            };
            let (lo, hi) = tighten(blo as f64, bhi.map(|h| h as f64 + 1.0), min_ns, max_ns);
            let frac = ((rank - before) / c as f64).clamp(0.0, 1.0);
            let estimate = match hi {
                Some(h) if bhi == Some(blo) => lo.min(h),
                Some(h) => lo + frac * (h - lo),
                None => lo,
            };
            return Some(Percentile {
                q,
                estimate_ns: estimate,
                lower_ns: lo,
                upper_ns: hi,
                bucket: i,
                open_bucket: open,
                relative_error,
            });
        }
    }
    None
}

/// Formats nanoseconds for people: "850 ns", "42.5 µs", "3.20 ms", "1.50 s".
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Formats a byte count with binary prefixes: "1.50 GiB".
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Formats a count with thousands separators.
pub fn fmt_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Hi;

    #[test]
    fn median_and_mad() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!(mad(&v, 3.0), 1.0);
        let r = Robust::of(&v, 0.0).unwrap();
        assert!(r.z(100.0) > 60.0);
        assert!(r.z(3.0).abs() < 1e-12);
    }

    #[test]
    fn robust_scale_falls_back_when_mad_is_zero() {
        let mut v = vec![0.0; 99];
        v.push(50.0);
        let r = Robust::of(&v, 0.0).unwrap();
        assert_eq!(r.mad, 0.0);
        assert!((r.scale - 1.2533 * 0.5).abs() < 1e-9);
        // The floor wins when the fallback is smaller still.
        assert_eq!(Robust::of(&v, 1.0).unwrap().scale, 1.0);
        assert!(r.z(50.0) > 3.5);
        let uniform = Robust::of(&[7.0; 10], 1.0).unwrap();
        assert_eq!(uniform.scale, 1.0);
    }

    #[test]
    fn percentile_is_inside_its_bucket() {
        // 100 samples: 50 in [0,10), 40 in [10,20), 10 in the open last bucket [20, inf).
        let h = [50, 40, 10];
        let p50 = histogram_percentile(&h, 10, 0.5, None, None).unwrap();
        assert_eq!(p50.bucket, 0);
        assert_eq!((p50.lower_ns, p50.upper_ns), (0.0, Some(10.0)));
        assert!((p50.estimate_ns - 10.0).abs() < 1e-9);
        let p90 = histogram_percentile(&h, 10, 0.9, None, None).unwrap();
        assert_eq!(p90.bucket, 1);
        assert!((p90.estimate_ns - 20.0).abs() < 1e-9);
        let p99 = histogram_percentile(&h, 10, 0.99, None, None).unwrap();
        assert_eq!(p99.bucket, 2);
        assert_eq!(p99.upper_ns, None);
        assert_eq!(p99.estimate_ns, 20.0);
        // A known max closes the last bucket, a known min tightens the first.
        let p99 = histogram_percentile(&h, 10, 0.99, Some(3), Some(45)).unwrap();
        assert_eq!(p99.upper_ns, Some(45.0));
        assert!(p99.open_bucket);
        assert!(!p50.open_bucket);
        assert!(p99.estimate_ns > 20.0 && p99.estimate_ns <= 45.0);
        let p1 = histogram_percentile(&h, 10, 0.01, Some(3), Some(45)).unwrap();
        assert_eq!(p1.lower_ns, 3.0);
    }

    #[test]
    fn log_percentile_states_its_relative_error() {
        // 90 completions in [4096, 4607], 9 in [8192, 9215], 1 in the open bucket.
        let h = [
            (8192, Some(9215).into(), 9),
            (4096, Some(4607).into(), 90),
            (16_106_127_360, Hi::OPEN, 1),
        ];
        let p50 = log_histogram_percentile(&h, 0.5, None, None).unwrap();
        assert_eq!(
            (p50.lower_ns, p50.upper_ns, p50.open_bucket),
            (4096.0, Some(4608.0), false)
        );
        assert!(p50.estimate_ns > 4096.0 && p50.estimate_ns < 4608.0);
        assert_eq!(p50.relative_error, Some(512.0 / 4096.0));
        let p99 = log_histogram_percentile(&h, 0.99, None, None).unwrap();
        assert_eq!(p99.lower_ns, 8192.0);
        assert!(p99.relative_error.unwrap() <= 0.125);
        let top = log_histogram_percentile(&h, 1.0, None, Some(20_000_000_000)).unwrap();
        assert!(top.open_bucket && top.relative_error.is_none());
        assert_eq!(top.upper_ns, Some(20e9));
        // Exact buckets below 16 ns: no error at all.
        let exact = log_histogram_percentile(&[(7, Some(7).into(), 3)], 0.5, None, None).unwrap();
        assert_eq!((exact.estimate_ns, exact.relative_error), (7.0, Some(0.0)));
        assert_eq!(log_histogram_percentile(&[], 0.5, None, None), None);
        assert_eq!(
            log_histogram_percentile(&[(16, Some(17).into(), 0)], 0.5, None, None),
            None
        );
    }

    #[test]
    fn percentile_of_empty_histogram_is_none() {
        assert_eq!(histogram_percentile(&[0, 0], 10, 0.5, None, None), None);
        assert_eq!(histogram_percentile(&[], 10, 0.5, None, None), None);
        assert_eq!(histogram_percentile(&[1], 0, 0.5, None, None), None);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_ns(850.0), "850 ns");
        assert_eq!(fmt_ns(42_500.0), "42.5 µs");
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
        assert_eq!(fmt_count(1234567), "1,234,567");
        assert_eq!(fmt_count(12), "12");
    }
}
