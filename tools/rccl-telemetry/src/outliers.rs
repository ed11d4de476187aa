//! `outliers`: ranks what stands out across the ranks and devices of one run.
//!
//! Every statistical rule compares a device with the whole population of used devices through
//! the median and the MAD (robust: a few anomalies cannot drag the centre or the spread, which
//! a mean and a standard deviation would). A value is an outlier when its robust z-score
//! (x - median) / (1.4826 * MAD) passes `threshold` AND it differs from the median by a
//! practically meaningful ratio, so a run whose ranks agree to the byte does not report noise.

use crate::hwclass::{classify, Category};
use crate::layout::{col, table, Column, Layout};
use crate::load::Run;
use crate::model::{Device, HwValue, TelemetryFile};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns, median, Robust};
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

/// One row of the findings table: the findings of one kind on one device (or rank file),
/// folded together so a device whose 17 counters all read -1 is one row naming them.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The highest score of the folded findings.
    pub score: f64,
    pub kind: &'static str,
    pub what: String,
    pub rank: String,
    pub device_id: Option<u32>,
    /// The metrics (counters) folded into this row, strongest first.
    pub metrics: Vec<String>,
    pub evidence: String,
}

fn what(f: &Finding) -> String {
    match f.category {
        Some(c) if f.kind == "hw_counter" => format!("{} ({})", c.label(), f.metric),
        _ => format!("{} ({})", f.kind.replace('_', " "), f.metric),
    }
}

/// Folds the (score-ordered) findings: one row per kind and device (or rank file), at the
/// place of its strongest finding.
pub fn fold(findings: &[Finding]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut members: Vec<Vec<&Finding>> = Vec::new();
    let mut index: BTreeMap<(&str, &str, &str, Option<u32>), usize> = BTreeMap::new();
    for f in findings {
        let key = (f.kind, f.rank.as_str(), f.file.as_str(), f.device_id);
        match index.get(&key) {
            Some(&i) => members[i].push(f),
            None => {
                index.insert(key, rows.len());
                members.push(vec![f]);
                rows.push(Row {
                    score: f.score,
                    kind: f.kind,
                    what: String::new(),
                    rank: f.rank.clone(),
                    device_id: f.device_id,
                    metrics: Vec::new(),
                    evidence: String::new(),
                });
            }
        }
    }
    for (r, m) in rows.iter_mut().zip(&members) {
        r.score = m.iter().map(|f| f.score).fold(f64::NEG_INFINITY, f64::max);
        r.metrics = m.iter().map(|f| f.metric.clone()).collect();
        if m.len() == 1 {
            r.what = what(m[0]);
            r.evidence = m[0].evidence.clone();
        } else {
            let mut cats: Vec<&str> = m
                .iter()
                .filter_map(|f| f.category.map(|c| c.label()))
                .collect();
            cats.sort_unstable();
            cats.dedup();
            r.what = if r.kind == "hw_counter" && cats.len() == 1 {
                format!("{} ({} counters)", cats[0], m.len())
            } else {
                format!("{} ({} counters)", r.kind.replace('_', " "), m.len())
            };
            r.evidence = format!(
                "{} counters: {}. Strongest: {}",
                m.len(),
                r.metrics.join(", "),
                m[0].evidence
            );
        }
    }
    rows
}

const FINDING_COLUMNS: [Column; 6] = [
    col("#", true, 1),
    col("score", true, 0),
    col("finding", false, 0),
    col("rank", false, 0).whole(),
    col("dev", true, 0),
    col("evidence", false, 0),
];

/// Renders the findings for people (wide); `top` limits the rows (0 = all).
pub fn render_text(r: &OutlierReport, top: usize) -> String {
    render_text_layout(r, top, Layout::Wide)
}

/// Renders the findings for people within `layout`, one row per kind and device; `top`
/// limits the rows (0 = all).
pub fn render_text_layout(r: &OutlierReport, top: usize, layout: Layout) -> String {
    let rows = fold(&r.findings);
    let mut out = layout.wrap(&format!(
        "{} findings in {} rows on {} of {} ranks ({} used devices; robust z >= {}, median/MAD)",
        r.findings.len(),
        rows.len(),
        r.ranks_flagged,
        r.ranks,
        r.devices,
        r.threshold
    ));
    out.push('\n');
    if r.findings.is_empty() {
        return out;
    }
    let n = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                format!("{:.1}", f.score),
                f.what.clone(),
                f.rank.clone(),
                f.device_id.map_or("-".into(), |d| d.to_string()),
                f.evidence.clone(),
            ]
        })
        .collect();
    let (t, _) = table(&FINDING_COLUMNS, &cells, layout);
    out.push_str(&t);
    out.push('\n');
    if n < rows.len() {
        out.push_str(&layout.wrap(&format!(
            "... and {} more rows (--top 0 shows all)",
            rows.len() - n
        )));
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Naming the bad one: NIC, link or host, from the NIC-by-NIC matrix of per-link p99 latency

/// What the matrix classification found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Culprit {
    /// "slow_nic", "slow_link" or "slow_host".
    pub kind: &'static str,
    /// NIC indices into [`crate::links::LinkReport::nics`]: one NIC, the two ends of a link, or
    /// every NIC of a host.
    pub nics: Vec<usize>,
    pub host: String,
    /// The culprit's p99 (the NIC's median over its links, the link's worse direction).
    pub p99_ns: f64,
    /// What it is compared with: the median over the healthy NICs (NIC, host) or links (link).
    pub baseline_ns: f64,
    pub z: f64,
    pub evidence: String,
}

/// Links with fewer sampled completions than this have no p99 worth comparing.
pub const MIN_LINK_SAMPLES: u64 = 10;

/// The smallest spread the classification divides by: ln(1 + 1/8), the log histogram's error.
fn log_floor() -> f64 {
    (1.125f64).ln()
}

/// Classifies what is slow from the links' p99 (log scale, so a ratio is a difference).
///
/// The baseline is the fast half of the matrix: its median (the lower quartile of every link)
/// and its spread (1.4826 x its MAD, doubled for the cut at the median, floored at the log
/// histogram's 1/8 error). A slow NIC or host makes up to 2/3 of the links of a small run
/// slow (one host of three), which a median over every link or over a NIC's row would take as
/// normal; the lower quartile stays on healthy links while fewer than 3/4 are slow.
///
/// 1. A link (one direction) is slow when its p99 stands above the baseline by `min_ratio`
///    and by `threshold` robust z.
/// 2. A NIC is slow when more than half of its links (its row and its column: as sender and
///    as peer) are slow: towards most of its peers, not one. A NIC with exactly half slow (the
///    ends of a slow link in a run of three NICs, the healthy NICs next to a slow host of
///    three) is not.
/// 3. A host is slow when it has two or more NICs in the matrix and every one of them is slow;
///    it is then one finding, not one per NIC.
/// 4. The slow links whose two ends are not slow NICs are links (paths): one finding per NIC
///    pair, with the pair's p99 against its row and column medians. Both directions must be
///    slow when both are measured (a completion waits for the round trip, so a slow path
///    shows both ways; one slow direction alone is the noise of one p99).
///
/// Limits: with two NICs (or two hosts) nothing can say which end is slow; links with fewer
/// than [`MIN_LINK_SAMPLES`] completions are left out.
pub fn classify_fabric(links: &crate::links::LinkReport, opt: &Options) -> Vec<Culprit> {
    let n = links.nics.len();
    let m = links.matrix(|l| {
        l.latency
            .as_ref()
            .filter(|x| x.samples >= MIN_LINK_SAMPLES)
            .and_then(|x| x.p99_ns)
            .filter(|p| *p > 0.0)
            .map(f64::ln)
    });
    let label = |i: usize| links.nics[i].label();
    let all: Vec<f64> = m.iter().flatten().flatten().copied().collect();
    if all.len() < 3 {
        return Vec::new();
    }
    let mid = median(&all).unwrap_or(0.0);
    let fast: Vec<f64> = all.iter().copied().filter(|v| *v <= mid).collect();
    let base = median(&fast).unwrap_or(mid);
    let scale = (2.0 * 1.4826 * crate::stats::mad(&fast, base)).max(log_floor());
    let min_gap = opt.min_ratio.max(1.0).ln();
    let z_of = |v: f64| (v - base) / scale;
    let slow = |v: f64| v - base >= min_gap && z_of(v) >= opt.threshold;
    let ns = |x: f64| fmt_ns(x.exp());
    let row_col = |a: usize| -> (Option<f64>, Option<f64>) {
        let row: Vec<f64> = (0..n).filter(|b| *b != a).filter_map(|b| m[a][b]).collect();
        let col: Vec<f64> = (0..n).filter(|b| *b != a).filter_map(|b| m[b][a]).collect();
        (median(&row), median(&col))
    };
    // NICs: the share of their links that are slow.
    let mut nic_slow = vec![false; n];
    let mut level = vec![f64::NAN; n];
    for a in 0..n {
        let mine: Vec<f64> = (0..n)
            .filter(|b| *b != a)
            .flat_map(|b| [m[a][b], m[b][a]])
            .flatten()
            .collect();
        if mine.is_empty() {
            continue;
        }
        level[a] = median(&mine).unwrap_or(f64::NAN);
        let k = mine.iter().filter(|v| slow(**v)).count();
        nic_slow[a] = 2 * k > mine.len() && slow(level[a]);
    }
    let mut out = Vec::new();
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for a in (0..n).filter(|a| !level[*a].is_nan()) {
        by_host
            .entry(links.nics[a].host.as_str())
            .or_default()
            .push(a);
    }
    let mut in_host = vec![false; n];
    for (h, members) in &by_host {
        if members.len() >= 2 && members.iter().all(|a| nic_slow[*a]) {
            let lv: Vec<f64> = members.iter().map(|a| level[*a]).collect();
            let lvl = median(&lv).unwrap_or(f64::NAN);
            for a in members {
                in_host[*a] = true;
            }
            out.push(Culprit {
                kind: "slow_host",
                nics: members.clone(),
                host: h.to_string(),
                p99_ns: lvl.exp(),
                baseline_ns: base.exp(),
                z: z_of(lvl),
                evidence: format!(
                    "all {} NICs of {h} are slow towards most of their peers: median p99 of their links {} ({:.1}x the healthy links' {}, robust z {:.1})",
                    members.len(),
                    ns(lvl),
                    (lvl - base).exp(),
                    ns(base),
                    z_of(lvl)
                ),
            });
        }
    }
    for a in (0..n).filter(|a| nic_slow[*a] && !in_host[*a]) {
        let (row, col) = row_col(a);
        let mine: Vec<f64> = (0..n)
            .filter(|b| *b != a)
            .flat_map(|b| [m[a][b], m[b][a]])
            .flatten()
            .collect();
        let k = mine.iter().filter(|v| slow(**v)).count();
        out.push(Culprit {
            kind: "slow_nic",
            nics: vec![a],
            host: links.nics[a].host.clone(),
            p99_ns: level[a].exp(),
            baseline_ns: base.exp(),
            z: z_of(level[a]),
            evidence: format!(
                "{} is slow towards most of its peers ({k} of its {} links): median p99 {} ({:.1}x the healthy links' {}, robust z {:.1}); its row (as sender) {}, its column (as peer) {}",
                label(a),
                mine.len(),
                ns(level[a]),
                (level[a] - base).exp(),
                ns(base),
                z_of(level[a]),
                row.map_or("-".into(), ns),
                col.map_or("-".into(), ns)
            ),
        });
    }
    // Slow links between NICs that are not slow themselves.
    // (host a, host b) -> the slow links (NIC a, NIC b, p99) between them.
    type HostPairLinks = BTreeMap<(usize, usize), Vec<(usize, usize, f64)>>;
    let mut pairs: HostPairLinks = BTreeMap::new();
    for a in 0..n {
        for b in 0..n {
            if let Some(v) = m[a][b] {
                if a != b && !nic_slow[a] && !nic_slow[b] && slow(v) {
                    pairs
                        .entry((a.min(b), a.max(b)))
                        .or_default()
                        .push((a, b, v));
                }
            }
        }
    }
    for ((a, b), dirs) in pairs {
        // Completion latency is a round trip: a slow path delays both directions' completions
        // (data one way, ACKs the other). One slow direction while the other is measured and
        // normal is the tail noise of one p99, not a path.
        if dirs.len() == 1 && m[dirs[0].1][dirs[0].0].is_some() {
            continue;
        }
        let (s, d, v) = dirs
            .iter()
            .copied()
            .max_by(|x, y| x.2.total_cmp(&y.2))
            .unwrap_or((a, b, 0.0));
        let (row, _) = row_col(s);
        let (_, col) = row_col(d);
        out.push(Culprit {
            kind: "slow_link",
            nics: vec![a, b],
            host: links.nics[s].host.clone(),
            p99_ns: v.exp(),
            baseline_ns: base.exp(),
            z: z_of(v),
            evidence: format!(
                "{} -> {} p99 {} ({:.1}x the healthy links' {}, robust z {:.1}) against {}'s row median {} and {}'s column median {}; {} -> {} {}{}",
                label(s),
                label(d),
                ns(v),
                (v - base).exp(),
                ns(base),
                z_of(v),
                label(s),
                row.map_or("-".into(), ns),
                label(d),
                col.map_or("-".into(), ns),
                label(d),
                label(s),
                m[d][s].map_or("-".into(), ns),
                if dirs.len() == 2 { " (slow both ways)" } else { "" }
            ),
        });
    }
    out.sort_by(|x, y| y.z.total_cmp(&x.z));
    out
}

/// The classification as outlier findings (one per culprit).
fn fabric_findings(
    run: &Run,
    links: &crate::links::LinkReport,
    culprits: &[Culprit],
) -> Vec<Finding> {
    culprits
        .iter()
        .map(|c| {
            let nic = &links.nics[c.nics[0]];
            let pid = nic.pids.first().copied().unwrap_or(0);
            let file = run
                .files
                .iter()
                .find(|l| l.file.host_name == nic.host && l.file.process_id == pid)
                .map_or(String::new(), |l| l.path.display().to_string());
            let rank = match c.kind {
                "slow_host" => c.host.clone(),
                "slow_link" => format!("{} <-> {}", nic.label(), links.nics[c.nics[1]].label()),
                _ => nic.label(),
            };
            Finding {
                kind: c.kind,
                category: None,
                rank,
                host: c.host.clone(),
                pid,
                file,
                device_id: (c.kind != "slow_host").then_some(nic.device_id),
                roce_device: (c.kind != "slow_host").then(|| nic.device.clone()),
                metric: "link_p99_completion_ns".into(),
                value: c.p99_ns,
                population: links.nics.len(),
                median: Some(c.baseline_ns),
                mad: None,
                z: Some(c.z),
                score: c.z,
                evidence: c.evidence.clone(),
            }
        })
        .collect()
}
