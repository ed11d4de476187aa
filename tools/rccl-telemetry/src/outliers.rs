//! `outliers`: ranks what stands out across the ranks and devices of one run.
//!
//! Every statistical rule compares a device with the whole population of used devices through
//! the median and the MAD (robust: a few anomalies cannot drag the centre or the spread, which
//! a mean and a standard deviation would). A value is an outlier when its robust z-score
//! (x - median) / (1.4826 * MAD) passes `threshold` AND it differs from the median by a
//! practically meaningful ratio, so a run whose ranks agree to the byte does not report noise.
//!
//! The fabric classifier (slow NIC, link or host from the joined links) is in
//! `outliers::fabric`, the folding and printing of the findings in `outliers::text`.

pub mod fabric;
pub mod text;

use crate::hwclass::{classify, Category};
use crate::load::Run;
use crate::model::{Device, HwValue, TelemetryFile};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns, Robust};
use crate::summary::{rank_label, Latency};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct Options {
    /// Robust z-score a value must reach (default 3.5, Iglewicz and Hoaglin's cut-off).
    pub threshold: f64,
    /// Byte skew: the least relative distance from the median (0.10 = 10%).
    pub min_skew: f64,
    /// Counters and latency: the least ratio to the median for a high outlier.
    pub min_ratio: f64,
    /// Statistical rules need at least this many devices.
    pub min_population: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: 3.5,
            min_skew: 0.10,
            min_ratio: 2.0,
            min_population: 5,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What kind of anomaly: tx_byte_skew, rx_byte_skew, latency_tail, hw_counter,
    /// cq_errors, untracked_qps, slot_miss, counter_unavailable, counter_available, snapshot,
    /// samples_dropped.
    pub kind: &'static str,
    /// For hw counters, the counter's category (cnp, ecn, pfc, ...).
    pub category: Option<Category>,
    pub rank: String,
    pub host: String,
    pub pid: i64,
    pub file: String,
    pub device_id: Option<u32>,
    pub roce_device: Option<String>,
    /// The metric the rule looked at.
    pub metric: String,
    pub value: f64,
    /// The population the value was compared with.
    pub population: usize,
    pub median: Option<f64>,
    pub mad: Option<f64>,
    pub z: Option<f64>,
    /// Ranking key: the robust z-score, or a fixed score for rules that are not statistical.
    pub score: f64,
    /// The evidence, in one sentence.
    pub evidence: String,
}

#[derive(Debug, Serialize)]
pub struct OutlierReport {
    pub threshold: f64,
    pub ranks: usize,
    pub devices: usize,
    pub ranks_flagged: usize,
    pub findings: Vec<Finding>,
}

struct Dev<'a> {
    file: &'a TelemetryFile,
    path: String,
    dev: &'a Device,
}

impl Dev<'_> {
    fn finding(&self, kind: &'static str, metric: &str, value: f64) -> Finding {
        Finding {
            device_id: Some(self.dev.device_id),
            roce_device: Some(self.dev.roce_device.clone()),
            ..new_finding(self.file, self.path.clone(), kind, metric, value)
        }
    }
}

/// A finding about a whole rank file rather than one of its devices.
fn rank_finding(l: &crate::load::Loaded, kind: &'static str, metric: &str, value: f64) -> Finding {
    new_finding(&l.file, l.path.display().to_string(), kind, metric, value)
}

/// A finding with no device, no statistics and no evidence yet.
fn new_finding(
    file: &TelemetryFile,
    path: String,
    kind: &'static str,
    metric: &str,
    value: f64,
) -> Finding {
    Finding {
        kind,
        category: None,
        rank: rank_label(file),
        host: file.host_name.clone(),
        pid: file.process_id,
        file: path,
        device_id: None,
        roce_device: None,
        metric: metric.to_string(),
        value,
        population: 0,
        median: None,
        mad: None,
        z: None,
        score: 0.0,
        evidence: String::new(),
    }
}

fn with_stats(mut f: Finding, r: &Robust, z: f64) -> Finding {
    f.population = r.n;
    f.median = Some(r.median);
    f.mad = Some(r.mad);
    f.z = Some(z);
    f.score = z.abs();
    f
}

/// "4.83x the median 1,995" or "while the median is 0", with the median formatted by `fmt`.
fn vs_median(x: f64, med: f64, fmt: impl Fn(f64) -> String) -> String {
    if med > 0.0 {
        format!("is {:.2}x the median {}", x / med, fmt(med))
    } else {
        format!("while the median is {}", fmt(med))
    }
}

fn count(v: f64) -> String {
    fmt_count(v.max(0.0).round() as u64)
}

/// Finds the outliers of one run.
pub fn find(run: &Run, opt: &Options) -> OutlierReport {
    let devs: Vec<Dev> = run
        .files
        .iter()
        .flat_map(|l| {
            let path = l.path.display().to_string();
            l.file
                .devices
                .iter()
                .filter(|d| d.is_used())
                .map(move |d| Dev {
                    file: &l.file,
                    path: path.clone(),
                    dev: d,
                })
        })
        .collect();
    let mut out: Vec<Finding> = Vec::new();
    let statistical = devs.len() >= opt.min_population;

    // Byte skew, both directions.
    if statistical {
        for (metric, kind, get) in [
            (
                "tx_bytes",
                "tx_byte_skew",
                (|d: &Device| d.tx_bytes) as fn(&Device) -> u64,
            ),
            ("rx_bytes", "rx_byte_skew", |d: &Device| d.rx_bytes),
        ] {
            let vals: Vec<f64> = devs.iter().map(|d| get(d.dev) as f64).collect();
            let Some(r) = Robust::of(&vals, 1.0) else {
                continue;
            };
            for (d, &x) in devs.iter().zip(&vals) {
                let z = r.z(x);
                let rel = if r.median > 0.0 {
                    (x / r.median - 1.0).abs()
                } else {
                    f64::INFINITY
                };
                if z.abs() >= opt.threshold && rel >= opt.min_skew {
                    let mut f = with_stats(d.finding(kind, metric, x), &r, z);
                    f.evidence = format!(
                        "{metric} {} {} (MAD {}, robust z {:+.1}) over {} devices",
                        fmt_bytes(x),
                        vs_median(x, r.median, fmt_bytes),
                        fmt_bytes(r.mad),
                        z,
                        r.n
                    );
                    out.push(f);
                }
            }
        }
    }

    // Heavy latency tail: p99 estimated from each device's histogram: the log-scale one
    // (version-2 files) when every device has it, else the linear one.
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
    if lat.len() >= opt.min_population {
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
        if let Some(r) = Robust::of(&vals, floor) {
            for ((i, l), &x) in lat.iter().zip(&vals) {
                let z = r.z(x);
                if z >= opt.threshold && x >= opt.min_ratio * r.median {
                    let d = &devs[*i];
                    let p = l.get(0.99);
                    let hist = d.dev.histogram();
                    let total: u64 = crate::stats::hist_total(&hist);
                    let top = hist.last().copied().unwrap_or(0);
                    let mut f =
                        with_stats(d.finding("latency_tail", "p99_completion_ns", x), &r, z);
                    if use_log {
                        f.evidence = format!(
                            "p99 completion latency {}{} vs run median {} (robust z {:+.1}), from the log-scale histogram (within {:.1}%) of {} sampled completions, max {}",
                            if p.is_some_and(|p| p.open_bucket) { ">=" } else { "~" },
                            fmt_ns(p.filter(|p| p.open_bucket).map_or(x, |p| p.lower_ns)),
                            fmt_ns(r.median),
                            z,
                            100.0 * p.and_then(|p| p.relative_error).unwrap_or(0.125),
                            fmt_count(l.samples),
                            l.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
                        );
                        out.push(f);
                        continue;
                    }
                    f.evidence = format!(
                        "p99 completion latency {}{} vs run median {} (robust z {:+.1}); {:.1}% of {} sampled completions in the open top bucket (>= {}), max {}",
                        if p.is_some_and(|p| p.open_bucket) { ">=" } else { "~" },
                        fmt_ns(p.filter(|p| p.open_bucket).map_or(x, |p| p.lower_ns)),
                        fmt_ns(r.median),
                        z,
                        if total > 0 { 100.0 * top as f64 / total as f64 } else { 0.0 },
                        fmt_count(total),
                        fmt_ns((hist.len().max(1) - 1) as f64 * d.file.histogram_interval_ns as f64),
                        l.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
                    );
                    out.push(f);
                }
            }
        }
    }

    // Problem hardware counters, one population per counter name.
    let mut names: BTreeMap<&str, ()> = BTreeMap::new();
    for d in &devs {
        for k in d.dev.hw_counters.keys() {
            names.insert(k, ());
        }
    }
    for name in names.keys() {
        let cat = classify(name);
        if !cat.is_problem() {
            continue;
        }
        let have: Vec<(&Dev, f64, &HwValue)> = devs
            .iter()
            .filter_map(|d| {
                let v = d.dev.hw_counters.get(*name)?;
                v.total().map(|t| (d, t as f64, v))
            })
            .collect();
        if have.len() < opt.min_population {
            continue;
        }
        let vals: Vec<f64> = have.iter().map(|(_, x, _)| *x).collect();
        let Some(r) = Robust::of(&vals, 1.0) else {
            continue;
        };
        for (d, x, v) in &have {
            let z = r.z(*x);
            if z >= opt.threshold && *x >= opt.min_ratio * r.median && *x > 0.0 {
                let mut f = with_stats(d.finding("hw_counter", name, *x), &r, z);
                f.category = Some(cat);
                let prio = match v {
                    HwValue::PerPrio(a) => {
                        let nz: Vec<String> = a
                            .iter()
                            .enumerate()
                            .filter(|(_, v)| **v > 0)
                            .map(|(i, v)| format!("prio{i}={}", fmt_count(*v as u64)))
                            .collect();
                        format!(" [{}]", nz.join(" "))
                    }
                    _ => String::new(),
                };
                let moved = d
                    .dev
                    .hw("delta_tx_bytes")
                    .unwrap_or(0)
                    .saturating_add(d.dev.hw("delta_rx_bytes").unwrap_or(0));
                let per_gib = if moved > 0 {
                    format!(
                        "; {:.1} per GiB moved",
                        *x / (moved as f64 / (1u64 << 30) as f64)
                    )
                } else {
                    String::new()
                };
                f.evidence = format!(
                    "{} counter {name} = {}{prio} {} (MAD {:.0}, robust z {:+.1}) over {} devices{per_gib}",
                    cat.label(),
                    fmt_count(*x as u64),
                    vs_median(*x, r.median, count),
                    r.mad,
                    z,
                    r.n
                );
                out.push(f);
            }
        }
    }

    // Counters that read -1 on some devices of a hw_type but not on others: flag the minority.
    let mut by_type: BTreeMap<&str, Vec<&Dev>> = BTreeMap::new();
    for d in &devs {
        by_type.entry(d.dev.hw_type.as_str()).or_default().push(d);
    }
    for (hw_type, group) in &by_type {
        let mut names: BTreeMap<&str, (Vec<&Dev>, Vec<&Dev>)> = BTreeMap::new();
        for d in group {
            for (k, v) in &d.dev.hw_counters {
                let e = names.entry(k).or_default();
                if v.total().is_some() {
                    e.0.push(d)
                } else {
                    e.1.push(d)
                }
            }
        }
        for (name, (avail, unavail)) in names {
            if avail.is_empty() || unavail.is_empty() {
                continue;
            }
            let n = avail.len() + unavail.len();
            let (minority, kind, what) = if unavail.len() <= avail.len() {
                (&unavail, "counter_unavailable", format!("reads -1 (not available) here but is available on {} of {n} {hw_type} devices", avail.len()))
            } else {
                (
                    &avail,
                    "counter_available",
                    format!(
                        "is available here but reads -1 on {} of {n} {hw_type} devices",
                        unavail.len()
                    ),
                )
            };
            for d in minority {
                let v = d
                    .dev
                    .hw_counters
                    .get(name)
                    .and_then(HwValue::total)
                    .unwrap_or(-1);
                let mut f = d.finding(kind, name, v as f64);
                f.category = Some(classify(name));
                f.population = n;
                // Rarer is more surprising: the score grows as the minority shrinks.
                f.score = opt.threshold + (1.0 - minority.len() as f64 / n as f64);
                f.evidence = format!("hw counter {name} {what}");
                out.push(f);
            }
        }
    }

    // CQ errors and untracked QPs: any is worth a line; the score says how unusual.
    for (kind, metric, get) in [
        (
            "cq_errors",
            "num_cq_errors",
            (|d: &Device| d.num_cq_errors) as fn(&Device) -> u64,
        ),
        ("untracked_qps", "num_qp_untracked", |d: &Device| {
            d.num_qp_untracked
        }),
    ] {
        let vals: Vec<f64> = devs.iter().map(|d| get(d.dev) as f64).collect();
        let r = Robust::of(&vals, 1.0);
        for (d, &x) in devs.iter().zip(&vals) {
            if x <= 0.0 {
                continue;
            }
            let mut f = d.finding(kind, metric, x);
            if let Some(r) = &r {
                let z = r.z(x);
                f = with_stats(f, r, z);
                f.score = z.max(opt.threshold + 2.0);
            } else {
                f.score = opt.threshold + 2.0;
            }
            let affected = vals.iter().filter(|v| **v > 0.0).count();
            f.evidence = if kind == "cq_errors" {
                format!(
                    "{} completions drained with an error status ({} of {} devices have CQ errors)",
                    fmt_count(x as u64),
                    affected,
                    devs.len()
                )
            } else {
                format!(
                    "{} QPs got no stats slot: their traffic is missing from every counter ({} of {} devices have untracked QPs)",
                    fmt_count(x as u64),
                    affected,
                    devs.len()
                )
            };
            out.push(f);
        }
    }

    // Slot misses (a polling race, noisy by nature: the ratio rule keeps ordinary noise out).
    if statistical {
        let vals: Vec<f64> = devs
            .iter()
            .map(|d| d.dev.sum_channels(|c| c.counters.num_slot_miss) as f64)
            .collect();
        if let Some(r) = Robust::of(&vals, 1.0) {
            for (d, &x) in devs.iter().zip(&vals) {
                let z = r.z(x);
                if z >= opt.threshold && x >= opt.min_ratio * r.median && x > 0.0 {
                    let mut f = with_stats(d.finding("slot_miss", "num_slot_miss", x), &r, z);
                    f.evidence = format!(
                        "{} CTS FIFO slot misses {} (MAD {:.0}, robust z {:+.1}) over {} devices",
                        fmt_count(x as u64),
                        vs_median(x, r.median, count),
                        r.mad,
                        z,
                        r.n
                    );
                    out.push(f);
                }
            }
        }
    }

    // A snapshot among final files: its counters cover only part of the run, so it looks low.
    let finals = run
        .files
        .iter()
        .filter(|l| l.file.is_final.unwrap_or(true))
        .count();
    if finals > 0 {
        for l in run
            .files
            .iter()
            .filter(|l| !l.file.is_final.unwrap_or(true))
        {
            let mut f = rank_finding(l, "snapshot", "final", 0.0);
            f.score = opt.threshold + 1.5;
            f.population = run.files.len();
            f.evidence = format!(
                "this file is a snapshot of a live process (final=false, trigger {}, taken {}) while {} of {} files are final: its counters cover only part of the run",
                l.file.trigger.as_deref().unwrap_or("unknown"),
                l.file.end_time,
                finals,
                run.files.len()
            );
            out.push(f);
        }
    }

    // The sampler's bounded buffer overflowed: the time series has gaps.
    for l in &run.files {
        if let Some(n) = l.file.hw_samples_dropped.filter(|n| *n > 0) {
            let kept = l.file.hw_samples.as_ref().map_or(0, Vec::len);
            let mut f = rank_finding(l, "samples_dropped", "hw_samples_dropped", n as f64);
            f.score = opt.threshold;
            f.evidence = format!(
                "{} hw_samples dropped ({} kept): the time series has gaps",
                fmt_count(n),
                fmt_count(kept as u64)
            );
            out.push(f);
        }
    }

    // Files with peers: name the slow NIC, link or host from the NIC-by-NIC matrix. A device
    // that is an end of a slow link, or one NIC of a slow host, is not also reported for its
    // device-wide latency tail: the link (host) explains it.
    let links = crate::links::join(run);
    if !links.links.is_empty() {
        let culprits = classify_fabric(&links, opt);
        let mut explained: Vec<(String, String)> = Vec::new();
        for c in culprits.iter().filter(|c| c.kind != "slow_nic") {
            explained.extend(
                c.nics
                    .iter()
                    .map(|i| (links.nics[*i].host.clone(), links.nics[*i].device.clone())),
            );
        }
        out.retain(|f| {
            f.kind != "latency_tail"
                || !explained
                    .iter()
                    .any(|(h, d)| *h == f.host && Some(d) == f.roce_device.as_ref())
        });
        out.extend(fabric_findings(run, &links, &culprits));
    }
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| (a.kind, &a.rank, a.device_id).cmp(&(b.kind, &b.rank, b.device_id)))
    });
    let mut flagged: Vec<&str> = out.iter().map(|f| f.rank.as_str()).collect();
    flagged.sort_unstable();
    flagged.dedup();
    OutlierReport {
        threshold: opt.threshold,
        ranks: run.files.len(),
        devices: devs.len(),
        ranks_flagged: flagged.len(),
        findings: out,
    }
}

use crate::outliers::fabric::fabric_findings;
pub use crate::outliers::fabric::{classify_fabric, Culprit, MIN_LINK_SAMPLES};
pub use crate::outliers::text::{
    fold, render_text, render_text_layout, render_with, OutlierText, Row,
};
