//! A QP's completion-latency histograms, rebuilt from what the monitor prints of it: its
//! count and its p50, p90, p99, p99.9 and max.
//!
//! The distribution is the piecewise-linear CDF through (lo, 0), (p50, 0.5), (p90, 0.9),
//! (p99, 0.99), (p99.9, 0.999) and (max, 1), where lo, which the monitor does not print, is
//! p50 less the p50-to-p90 spread, kept within [p50 / 2, p50]. Its buckets hold `n` split by the
//! CDF (largest remainders, so they add up to `n`), so the quantiles read back from them are the
//! printed ones to within a bucket, and a reader's p99 of a link is that of its QPs.

use super::line::Figures;
use crate::generate::log_bucket;

/// The CDF's points, x non-decreasing.
fn points(f: &Figures) -> [(f64, f64); 6] {
    let p50 = f.p50.max(0.0);
    let lo = (2.0 * p50 - f.p90).clamp(p50 / 2.0, p50);
    let mut xs = [lo, p50, f.p90, f.p99, f.p999, f.max];
    for i in 1..xs.len() {
        xs[i] = xs[i].max(xs[i - 1]);
    }
    let qs = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0];
    std::array::from_fn(|i| (xs[i], qs[i]))
}

/// The CDF at `x`.
fn cdf(p: &[(f64, f64); 6], x: f64) -> f64 {
    if x < p[0].0 {
        return 0.0;
    }
    for w in p.windows(2) {
        let ((x0, q0), (x1, q1)) = (w[0], w[1]);
        if x < x1 {
            return if x1 > x0 {
                q0 + (q1 - q0) * (x - x0) / (x1 - x0)
            } else {
                q1
            };
        }
    }
    1.0
}

/// `n` split over consecutive ranges `[lo_i, hi_i]` (inclusive) by the CDF.
fn split(p: &[(f64, f64); 6], n: u64, ranges: &[(u64, u64)]) -> Vec<u64> {
    let last = ranges.len() - 1;
    let share: Vec<f64> = ranges
        .iter()
        .enumerate()
        .map(|(i, &(lo, hi))| {
            let a = if i == 0 { 0.0 } else { cdf(p, lo as f64) };
            let b = if i == last {
                1.0
            } else {
                cdf(p, hi as f64 + 1.0)
            };
            (b - a).max(0.0) * n as f64
        })
        .collect();
    let mut out: Vec<u64> = share.iter().map(|s| s.floor() as u64).collect();
    let mut left = n.saturating_sub(out.iter().sum());
    let mut order: Vec<usize> = (0..share.len()).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (share[a] - share[a].floor(), share[b] - share[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for i in order.into_iter().cycle() {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// The rebuilt latency of `n` completions: the log-scale buckets (non-empty ones, as
/// `(lo, hi, count)`), the linear histogram of `buckets` buckets of `width` ns, and the
/// smallest and largest value (the rebuilt distribution's lo, the printed max).
pub struct Rebuilt {
    pub log: Vec<(u64, u64, u64)>,
    pub linear: Vec<u64>,
    pub min: i64,
    pub max: i64,
}

pub fn rebuild(n: u64, f: &Figures, width: u64, buckets: usize) -> Rebuilt {
    if n == 0 {
        return Rebuilt {
            log: Vec::new(),
            linear: vec![0; buckets],
            min: -1,
            max: -1,
        };
    }
    let p = points(f);
    let (lo, hi) = (p[0].0.round() as u64, p[5].0.round() as u64);
    let mut ranges = Vec::new();
    let mut at = lo;
    loop {
        let (blo, bhi) = log_bucket(at);
        ranges.push((blo.max(lo), bhi.min(hi)));
        if bhi >= hi {
            break;
        }
        at = bhi + 1;
    }
    let counts = split(&p, n, &ranges);
    let log: Vec<(u64, u64, u64)> = ranges
        .iter()
        .zip(&counts)
        .filter(|(_, c)| **c > 0)
        .map(|(&(l, _), &c)| {
            let (blo, bhi) = log_bucket(l);
            (blo, bhi, c)
        })
        .collect();
    let first = (lo / width) as usize;
    let lin_ranges: Vec<(u64, u64)> = (0..buckets)
        .map(|b| {
            let l = b as u64 * width;
            (
                l,
                if b + 1 == buckets {
                    u64::MAX
                } else {
                    l + width - 1
                },
            )
        })
        .filter(|&(l, h)| h >= lo && l <= hi)
        .map(|(l, h)| (l.max(lo), h.min(hi)))
        .collect();
    let lin_counts = split(&p, n, &lin_ranges);
    let mut linear = vec![0u64; buckets];
    for (i, c) in lin_counts.into_iter().enumerate() {
        linear[(first + i).min(buckets - 1)] += c;
    }
    // min and max as the histograms hold them: min in the first non-empty bucket.
    let min = log.first().map_or(lo, |b| b.0.max(lo));
    Rebuilt {
        log,
        linear,
        min: min as i64,
        max: hi.max(min) as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Hi, LogBucket};
    use crate::stats::log_histogram_percentile;

    fn fig(p50: f64, p90: f64, p99: f64, p999: f64, max: f64) -> Figures {
        Figures {
            mean: 0.0,
            stddev: 0.0,
            p50,
            p90,
            p99,
            p999,
            max,
        }
    }

    #[test]
    fn the_quantiles_read_back_within_a_bucket() {
        let f = fig(20_000.0, 24_000.0, 900_000.0, 1_000_000.0, 1_100_000.0);
        let r = rebuild(1000, &f, 30_000, 5);
        let total: u64 = r.log.iter().map(|b| b.2).sum();
        assert_eq!(total, 1000);
        assert_eq!(r.linear.iter().sum::<u64>(), 1000);
        let h: Vec<LogBucket> = r
            .log
            .iter()
            .map(|&(l, h, c)| (l, Hi::new(Some(h)), c))
            .collect();
        for (q, want) in [(0.5, 20_000.0), (0.99, 900_000.0)] {
            let got = log_histogram_percentile(&h, q, None, None)
                .unwrap()
                .estimate_ns;
            assert!((got - want).abs() / want < 0.15, "p{q}: {got} vs {want}");
        }
        assert_eq!(r.max, 1_100_000);
        assert!(r.min >= 10_000 && r.min <= 20_000, "{}", r.min);
    }

    #[test]
    fn one_value_and_none() {
        let r = rebuild(5, &fig(100.0, 100.0, 100.0, 100.0, 100.0), 30_000, 5);
        assert_eq!(r.log, vec![(96, 103, 5)]);
        assert_eq!(r.linear, vec![5, 0, 0, 0, 0]);
        assert_eq!((r.min, r.max), (100, 100));
        let r = rebuild(0, &fig(1.0, 1.0, 1.0, 1.0, 1.0), 30_000, 5);
        assert_eq!((r.min, r.max, r.log.len()), (-1, -1, 0));
    }
}
