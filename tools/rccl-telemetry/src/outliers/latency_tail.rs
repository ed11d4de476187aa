//! Heavy latency tail (`latency_tail`): a device whose p99 completion latency stands above the
//! run's, estimated from each device's histogram: the log-scale one (version-2 files and
//! later) when every device has it, else the linear one.
//!
//! Statistical: robust z of the p99 >= `threshold`. Practical: the p99 is at least `min_ratio`
//! the run's median p99, AND at least `min_tail_share` (10%) of the device's completions lie
//! beyond `min_ratio` x the run's median p99 (a typical device has well under 1% there), AND
//! that count is `threshold` binomial standard deviations above 1% of them. A p99 raised by a
//! few late completions (a process descheduled now and then: ordinary scheduling jitter on a
//! shared host), or a host a little slower than the others, is not a tail worth a row; a
//! tenth of the work at twice the run's p99 is.

use super::{with_stats, Dev, Finding, Input, Kind};
use crate::stats::{fmt_count, fmt_ns, Robust};
use crate::summary::Latency;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let devs = &x.devs;
    let use_log = !devs.is_empty() && devs.iter().all(|d| d.dev.log_histogram().is_some());
    let lat: Vec<(usize, Latency)> = devs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let (mn, mx) = d.dev.latency_min_max();
            let l = match d.dev.log_histogram().filter(|_| use_log) {
                Some(h) => Latency::of_log(&h, mn, mx),
                None => Latency::of(&d.dev.histogram(), d.file.histogram_interval_ns, mn, mx),
            };
            (l.samples > 0 && l.get(0.99).is_some()).then_some((i, l))
        })
        .collect();
    if lat.len() < x.opt.min_population {
        return out;
    }
    let vals: Vec<f64> = lat
        .iter()
        .map(|(_, l)| l.get(0.99).map_or(0.0, |p| p.estimate_ns))
        .collect();
    let width = devs.first().map_or(1, |d| d.file.histogram_interval_ns) as f64;
    // The floor is the resolution of the figures: a quarter bucket, or 1/8 of the median.
    let floor = if use_log {
        crate::stats::median(&vals).unwrap_or(0.0) / 8.0
    } else {
        width / 4.0
    };
    let Some(r) = Robust::of(&vals, floor) else {
        return out;
    };
    for ((i, l), &v) in lat.iter().zip(&vals) {
        let z = r.z(v);
        if z < x.opt.threshold || v < x.opt.min_ratio * r.median {
            continue;
        }
        let d = &devs[*i];
        let line = x.opt.min_ratio * r.median;
        let (beyond, total) = if use_log {
            let h = d.dev.log_histogram().unwrap_or_default();
            share_above_log(&h, line, l.max_ns)
        } else {
            let w = d.file.histogram_interval_ns;
            share_above_linear(&d.dev.histogram(), w, line, l.max_ns)
        };
        if !weighty(beyond, total, x.opt.min_tail_share, x.opt.threshold) {
            continue;
        }
        let mut f = with_stats(d.finding(Kind::LatencyTail, "p99_completion_ns", v), &r, z);
        f.evidence = format!(
            "{}; {:.1}% of its completions beyond {:.1}x the run's median p99{}",
            evidence(d, l, v, &r, z, use_log),
            100.0 * beyond / total.max(1.0),
            x.opt.min_ratio,
            monitor_evidence(d)
        );
        out.push(f);
    }
    out
}

/// Practical and statistical weight of a tail: `beyond` of `total` completions past the line
/// is at least `min_share` of them and `z` binomial standard deviations above 1%.
pub(super) fn weighty(beyond: f64, total: f64, min_share: f64, z: f64) -> bool {
    if total <= 0.0 {
        return false;
    }
    let expected = 0.01 * total;
    let sd = (0.01 * 0.99 * total).sqrt();
    beyond >= min_share * total && beyond - expected >= z * sd
}

/// (completions above `line` ns, completions) of a log-scale histogram, interpolated linearly
/// inside the bucket holding `line` (the open last bucket ends at the observed max).
pub(super) fn share_above_log(
    h: &[crate::model::LogBucket],
    line: f64,
    max_ns: Option<i64>,
) -> (f64, f64) {
    let mut above = 0.0;
    let mut total = 0.0;
    for &(lo, hi, n) in h {
        let n = n as f64;
        total += n;
        let lo = lo as f64;
        let hi = hi
            .get()
            .map_or_else(|| max_ns.map_or(lo, |m| m as f64), |h| h as f64 + 1.0);
        above += part_above(lo, hi, line) * n;
    }
    (above, total)
}

/// (completions above `line` ns, completions) of a linear histogram of `width` ns buckets,
/// the last open (it ends at the observed max).
pub(super) fn share_above_linear(
    h: &[u64],
    width: u64,
    line: f64,
    max_ns: Option<i64>,
) -> (f64, f64) {
    let w = width.max(1) as f64;
    let mut above = 0.0;
    let mut total = 0.0;
    for (b, &n) in h.iter().enumerate() {
        let n = n as f64;
        total += n;
        let lo = b as f64 * w;
        let hi = if b + 1 == h.len() {
            max_ns.map_or(lo + w, |m| (m as f64).max(lo))
        } else {
            lo + w
        };
        above += part_above(lo, hi, line) * n;
    }
    (above, total)
}

/// The part of a bucket [lo, hi) above `line`, the bucket's counts spread evenly.
fn part_above(lo: f64, hi: f64, line: f64) -> f64 {
    if lo >= line {
        1.0
    } else if hi <= line || hi <= lo {
        0.0
    } else {
        (hi - line) / (hi - lo)
    }
}

/// The sentence: the p99 against the run's median, and how far the histogram can be trusted.
/// What the WQE latency monitor adds (version 5, the monitor on): the device's slow WQEs and
/// the largest p99 of any one of its QPs (exact to 1/16, over every measured WR of the QP);
/// nothing when the file has neither.
fn monitor_evidence(d: &Dev) -> String {
    let mut s = String::new();
    if let Some(n) = d.dev.wqe_slow() {
        let thr = d.file.slow_threshold_ns.unwrap_or(0);
        s.push_str(&format!(
            "; {} slow WQEs above {} (the WQE latency monitor)",
            fmt_count(n),
            fmt_ns(thr as f64)
        ));
    }
    let p99 = d
        .dev
        .channels
        .iter()
        .flat_map(|c| &c.queue_pairs)
        .filter_map(|q| q.latency_stats().map(|s| s.wqe_completion_ns_p99))
        .max();
    if let Some(p) = p99 {
        s.push_str(&format!("; its slowest QP's p99 {}", fmt_ns(p as f64)));
    }
    s
}

fn evidence(d: &Dev, l: &Latency, v: f64, r: &Robust, z: f64, use_log: bool) -> String {
    let p = l.get(0.99);
    if use_log {
        return format!(
            "p99 completion latency {}{} vs run median {} (robust z {:+.1}), from the log-scale histogram (within {:.1}%) of {} sampled completions, max {}",
            if p.is_some_and(|p| p.open_bucket) { ">=" } else { "~" },
            fmt_ns(p.filter(|p| p.open_bucket).map_or(v, |p| p.lower_ns)),
            fmt_ns(r.median),
            z,
            100.0 * p.and_then(|p| p.relative_error).unwrap_or(0.125),
            fmt_count(l.samples),
            l.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
        );
    }
    let hist = d.dev.histogram();
    let total: u64 = crate::stats::hist_total(&hist);
    let top = hist.last().copied().unwrap_or(0);
    format!(
        "p99 completion latency {}{} vs run median {} (robust z {:+.1}); {:.1}% of {} sampled completions in the open top bucket (>= {}), max {}",
        if p.is_some_and(|p| p.open_bucket) { ">=" } else { "~" },
        fmt_ns(p.filter(|p| p.open_bucket).map_or(v, |p| p.lower_ns)),
        fmt_ns(r.median),
        z,
        if total > 0 { 100.0 * top as f64 / total as f64 } else { 0.0 },
        fmt_count(total),
        fmt_ns((hist.len().max(1) - 1) as f64 * d.file.histogram_interval_ns as f64),
        l.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_above_a_line_is_interpolated_inside_its_bucket() {
        // 100 completions: 90 in [0, 10), 10 in [10, 20).
        let (a, t) = share_above_linear(&[90, 10], 10, 15.0, Some(20));
        assert_eq!(t, 100.0);
        assert!((a - 5.0).abs() < 1e-9, "{a}");
        let (a, _) = share_above_linear(&[90, 10], 10, 5.0, Some(20));
        assert!((a - 55.0).abs() < 1e-9, "{a}");
        let (a, t) = share_above_log(
            &[(100, Some(111).into(), 50), (200, Some(223).into(), 50)],
            150.0,
            None,
        );
        assert_eq!((a, t), (50.0, 100.0));
    }

    #[test]
    fn a_few_late_completions_are_not_a_tail_and_a_tenth_is() {
        // 1,280 completions as in a six-host run: 3% late is jitter, 12% is a tail.
        assert!(!weighty(38.0, 1280.0, 0.10, 3.5));
        assert!(weighty(154.0, 1280.0, 0.10, 3.5));
        // 20 completions: 3 late (15%) is within what 1% can give by chance at this size?
        // Expected 0.2, sd 0.44: 3 is 6 sd above, and 15% >= 10%: a tail.
        assert!(weighty(3.0, 20.0, 0.10, 3.5));
        assert!(!weighty(1.0, 20.0, 0.10, 3.5));
        assert!(!weighty(0.0, 0.0, 0.10, 3.5));
    }
}
