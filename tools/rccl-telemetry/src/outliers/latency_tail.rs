//! Heavy latency tail (`latency_tail`): a device whose p99 completion latency stands above the
//! run's, estimated from each device's histogram: the log-scale one (version-2 files and
//! later) when every device has it, else the linear one.

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
        if z >= x.opt.threshold && v >= x.opt.min_ratio * r.median {
            let d = &devs[*i];
            let mut f = with_stats(d.finding(Kind::LatencyTail, "p99_completion_ns", v), &r, z);
            f.evidence = evidence(d, l, v, &r, z, use_log);
            out.push(f);
        }
    }
    out
}

/// The sentence: the p99 against the run's median, and how far the histogram can be trusted.
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
