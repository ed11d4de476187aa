//! `summary`: the run read into one row per rank and device, its totals and latency.
//!
//! The model and its aggregation; `summary::fleet` adds the distributions and stand-outs for
//! runs beyond a screen, `summary::text` prints either view.

pub mod comms;
pub mod fleet;
pub mod text;

use crate::hwclass::{classify, Category};
use crate::load::{Loaded, Run};
use crate::model::{add_hist, add_log_hist, parse_timestamp_ns, Device, LogBucket, TelemetryFile};
use crate::stats::{fmt_ns, histogram_percentile, log_histogram_percentile, median, Percentile};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The quantiles the summary estimates.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// How the percentiles are estimated, said once in the table's footer and in the JSON.
pub const PERCENTILE_METHOD: &str = "Percentiles are estimated from wqe_completion_histogram: the bucket holding the \
quantile is exact, the value is interpolated linearly inside it, so each estimate is within one bucket width \
(histogram_interval_ns) of the truth; the observed min/max tighten the bounds. The last bucket is open-ended: a \
percentile that falls in it is only known to lie between that bucket's lower edge and the observed max, and is shown \
as a lower bound (>=). With latency_sample_interval N > 1 the histograms \
count one completion in N and the max understates the tail.";

/// How the log-scale percentiles are estimated (files of version 2), said with the figures.
pub const LOG_PERCENTILE_METHOD: &str = "Log-scale percentiles come from wqe_completion_log_histogram (version-2 files): buckets at most 1/8 of their lower bound wide, so each estimate is within 12.5% of the truth (the relative error is given per percentile in --json; exact below 16 ns); the last bucket (from 16.1 s) is open-ended. The linear figures from wqe_completion_histogram are still shown, labelled with their bucket width.";

/// `rank` identifies a process: host and pid.
pub fn rank_label(f: &TelemetryFile) -> String {
    format!("{}:{}", f.host_name, f.process_id)
}

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub samples: u64,
    pub min_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub percentiles: Vec<Percentile>,
}

impl Latency {
    pub fn of(hist: &[u64], width: u64, min_ns: Option<i64>, max_ns: Option<i64>) -> Latency {
        let samples = hist.iter().fold(0u64, |s, c| s.saturating_add(*c));
        let percentiles = QUANTILES
            .iter()
            .filter_map(|q| histogram_percentile(hist, width, *q, min_ns, max_ns))
            .collect();
        Latency {
            samples,
            min_ns,
            max_ns,
            percentiles,
        }
    }

    /// From a sparse log-scale histogram (file version 2).
    pub fn of_log(buckets: &[LogBucket], min_ns: Option<i64>, max_ns: Option<i64>) -> Latency {
        let samples = buckets.iter().fold(0u64, |s, b| s.saturating_add(b.2));
        let percentiles = QUANTILES
            .iter()
            .filter_map(|q| log_histogram_percentile(buckets, *q, min_ns, max_ns))
            .collect();
        Latency {
            samples,
            min_ns,
            max_ns,
            percentiles,
        }
    }

    /// The largest relative error of the percentiles (log-scale only).
    pub fn max_relative_error(&self) -> Option<f64> {
        self.percentiles
            .iter()
            .filter_map(|p| p.relative_error)
            .reduce(f64::max)
    }

    pub fn get(&self, q: f64) -> Option<&Percentile> {
        self.percentiles.iter().find(|p| (p.q - q).abs() < 1e-12)
    }
}

/// Formats a percentile for a table cell.
/// `p50 ..  p90 ..  p99 ..  p99.9 ..  max ..` of a run's latency, as the summary prints it.
pub(crate) fn percentiles_line(l: &Latency) -> String {
    format!(
        "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        fmt_percentile(l.get(0.5)),
        fmt_percentile(l.get(0.9)),
        fmt_percentile(l.get(0.99)),
        fmt_percentile(l.get(0.999)),
        l.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
    )
}

pub fn fmt_percentile(p: Option<&Percentile>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p.open_bucket => format!(">={}", fmt_ns(p.lower_ns)),
        Some(p) => fmt_ns(p.estimate_ns),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceRow {
    pub file: String,
    /// Who wrote the file: "v1" (this library) or "intree-1.0" (RCCL's in-tree engine).
    pub format: &'static str,
    pub host: String,
    pub pid: i64,
    pub process: String,
    pub device_id: u32,
    pub roce_device: String,
    pub eth_device: String,
    pub hw_type: String,
    pub used: bool,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// This device's share of the run's tx/rx bytes, 0..1.
    pub tx_share: f64,
    pub rx_share: f64,
    pub num_wqe_sent: u64,
    pub num_wqe_completed: u64,
    pub num_cq_errors: u64,
    pub num_qp_untracked: u64,
    pub num_slot_miss: u64,
    /// The WQE latency monitor's slow completions (None: the monitor was off, or an older file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_slow: Option<u64>,
    /// The threshold they were counted against (the file's slow_threshold_ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_threshold_ns: Option<u64>,
    pub active_channels: u64,
    pub histogram_interval_ns: u64,
    /// The device's completion-latency histogram (the sum over its channels).
    pub histogram: Vec<u64>,
    pub latency: Latency,
    /// From the log-scale histogram, when the file has one (version 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_latency: Option<Latency>,
    /// The device's log-scale histogram (sum over its channels), for the report's plots.
    #[serde(skip)]
    pub log_histogram: Option<Vec<LogBucket>>,
    /// Hardware counters (other than the traffic deltas) that moved on this device.
    pub hw_counters_moved: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HwCounterSummary {
    pub name: String,
    pub category: Category,
    /// Devices (of those used) where the counter is available (not -1).
    pub devices_reporting: usize,
    /// Devices where it is -1.
    pub devices_unavailable: usize,
    /// Devices where it moved (> 0).
    pub devices_moved: usize,
    pub total: i64,
    pub median: f64,
    pub max: i64,
    /// The rank and device holding the max.
    pub max_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunLatency {
    pub histogram_interval_ns: u64,
    pub devices: usize,
    pub histogram: Vec<u64>,
    pub latency: Latency,
}

/// The run's log-scale histogram: the sum over the used devices whose files have one.
#[derive(Debug, Clone, Serialize)]
pub struct LogRunLatency {
    pub histogram: &'static str,
    pub devices: usize,
    /// Used devices whose files have no log-scale histogram (version 1, in-tree): not in it.
    pub devices_without: usize,
    pub buckets: Vec<LogBucket>,
    pub latency: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub files: usize,
    pub files_skipped: usize,
    /// Files per format ("v1", "intree-1.0").
    pub formats: BTreeMap<&'static str, usize>,
    /// Files whose times are local without a zone (in-tree): not in start_time/end_time.
    pub files_without_wall_clock: usize,
    /// Files written at exit or by rcclTelemetryFlush (final: true, or no "final" key).
    pub files_final: usize,
    /// What wrote the files ("exit", "rcclTelemetryFlush", "interval", "SIGTERM" ...), counted.
    pub triggers: BTreeMap<String, usize>,
    pub hosts: usize,
    pub ranks: usize,
    pub processes: Vec<String>,
    pub transports: Vec<String>,
    pub devices_used: usize,
    pub devices_registered: usize,
    pub hw_types: BTreeMap<String, usize>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub duration_s: Option<f64>,
    pub latency_sample_intervals: Vec<u64>,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_wqe_sent: u64,
    pub num_wqe_completed: u64,
    pub num_cq_errors: u64,
    pub num_qp_untracked: u64,
    pub num_slot_miss: u64,
    /// The WQE latency monitor's slow completions over the used devices that counted them
    /// (None: no file had the monitor on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_slow: Option<u64>,
    /// The thresholds they were counted against, each once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slow_thresholds_ns: Vec<u64>,
    pub hw_samples: usize,
    pub hw_samples_dropped: u64,
    pub percentile_method: &'static str,
    pub latency: Vec<RunLatency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_percentile_method: Option<&'static str>,
    /// Present when at least one used device has a log-scale histogram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_latency: Option<LogRunLatency>,
    pub devices: Vec<DeviceRow>,
    pub hw_counters_moved: Vec<HwCounterSummary>,
    /// Distributions across the rows and hosts, and what stands out (what the summary prints
    /// for runs beyond a screen).
    pub fleet: crate::summary::fleet::Fleet,
    /// One row per rank and communicator, for the ranks whose file has more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub communicators: Vec<crate::summary::comms::CommRow>,
    /// The peer NICs and ranks the files name that no file covers; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::completeness::Completeness>,
    /// The jobs the files are of, when more than one (`jobs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<crate::jobs::Jobs>,
}

fn device_row(path: &str, f: &TelemetryFile, d: &Device) -> DeviceRow {
    let hist = d.histogram();
    let (mn, mx) = d.latency_min_max();
    DeviceRow {
        file: path.to_string(),
        format: f.format.label(),
        host: f.host_name.clone(),
        pid: f.process_id,
        process: f.process_name.clone(),
        device_id: d.device_id,
        roce_device: d.roce_device.clone(),
        eth_device: d.eth_device.clone(),
        hw_type: d.hw_type.clone(),
        used: d.is_used(),
        tx_bytes: d.tx_bytes,
        rx_bytes: d.rx_bytes,
        tx_share: 0.0,
        rx_share: 0.0,
        num_wqe_sent: d.sum_counters(|c| c.num_wqe_sent),
        num_wqe_completed: d.sum_counters(|c| c.num_wqe_completed),
        num_cq_errors: d.num_cq_errors,
        num_qp_untracked: d.num_qp_untracked,
        num_slot_miss: d.sum_counters(|c| c.num_slot_miss),
        num_wqe_slow: d.wqe_slow(),
        slow_threshold_ns: d.wqe_slow().and(f.slow_threshold_ns.filter(|&t| t > 0)),
        active_channels: d.active_channels,
        histogram_interval_ns: f.histogram_interval_ns,
        latency: Latency::of(&hist, f.histogram_interval_ns, mn, mx),
        log_latency: d.log_histogram().map(|h| Latency::of_log(&h, mn, mx)),
        log_histogram: d.log_histogram(),
        histogram: hist,
        hw_counters_moved: d
            .hw_counters
            .iter()
            .filter(|(k, v)| classify(k) != Category::Traffic && v.total().is_some_and(|t| t > 0))
            .count(),
    }
}

/// Devices sharing one bucket width: how many, their summed histogram, min and max latency.
type WidthGroup = (usize, Vec<u64>, Option<i64>, Option<i64>);

/// The lower of two optional latencies (either one when the other is absent).
fn min_of(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The higher of two optional latencies (either one when the other is absent).
fn max_of(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// What the files add up to, gathered one file at a time.
#[derive(Default)]
struct Tally<'a> {
    rows: Vec<DeviceRow>,
    hosts: BTreeSet<String>,
    processes: BTreeSet<String>,
    transports: BTreeSet<String>,
    hw_types: BTreeMap<String, usize>,
    sample_intervals: BTreeSet<u64>,
    start: Option<(i128, &'a str)>,
    end: Option<(i128, &'a str)>,
    registered: usize,
    hw_samples: usize,
    hw_dropped: u64,
    files_final: usize,
    triggers: BTreeMap<String, usize>,
    formats: BTreeMap<&'static str, usize>,
    no_wall_clock: usize,
    by_width: BTreeMap<u64, WidthGroup>,
    /// (devices with, devices without, buckets, min, max)
    log: (usize, usize, Vec<LogBucket>, Option<i64>, Option<i64>),
    /// name -> (per-device values (rank label, device), unavailable count)
    hw: BTreeMap<String, (Vec<(i64, String)>, usize)>,
    /// name -> (row index, value) for the fleet aggregates
    hw_rows: BTreeMap<String, Vec<(usize, i64)>>,
}

impl<'a> Tally<'a> {
    /// Adds a file: its identity, times and writer, then each of its devices (a row for the
    /// used ones, or for all with `all_devices`).
    fn add_file(&mut self, l: &'a Loaded, all_devices: bool) {
        let f = &l.file;
        *self.formats.entry(f.format.label()).or_default() += 1;
        if !f.format.has_wall_clock() {
            self.no_wall_clock += 1;
        }
        self.hosts.insert(f.host_name.clone());
        self.processes.insert(f.process_name.clone());
        self.transports
            .insert(f.transport.clone().unwrap_or_else(|| "null".into()));
        self.sample_intervals
            .insert(f.latency_sample_interval.unwrap_or(1));
        if let Some(t) = parse_timestamp_ns(&f.start_time) {
            if self.start.is_none_or(|(s, _)| t < s) {
                self.start = Some((t, &f.start_time));
            }
        }
        if let Some(t) = parse_timestamp_ns(&f.end_time) {
            if self.end.is_none_or(|(e, _)| t > e) {
                self.end = Some((t, &f.end_time));
            }
        }
        if f.is_final.unwrap_or(true) {
            self.files_final += 1;
        }
        *self
            .triggers
            .entry(f.trigger.clone().unwrap_or_else(|| "unknown".into()))
            .or_default() += 1;
        self.hw_samples += f.hw_samples.as_ref().map_or(0, Vec::len);
        self.hw_dropped = self
            .hw_dropped
            .saturating_add(f.hw_samples_dropped.unwrap_or(0));
        let path = l.path.display().to_string();
        for d in &f.devices {
            self.registered += 1;
            let used = d.is_used();
            if used {
                *self.hw_types.entry(d.hw_type.clone()).or_default() += 1;
                self.add_latency(f, d);
                self.add_hw_counters(f, d);
            }
            if used || all_devices {
                self.rows.push(device_row(&path, f, d));
            }
        }
    }

    /// Adds a used device's histograms: to its bucket width's group and to the log-scale sum.
    fn add_latency(&mut self, f: &TelemetryFile, d: &Device) {
        let e = self
            .by_width
            .entry(f.histogram_interval_ns)
            .or_insert((0, Vec::new(), None, None));
        e.0 += 1;
        add_hist(&mut e.1, &d.histogram());
        let log = &mut self.log;
        match d.log_histogram() {
            Some(h) => {
                let (mn, mx) = d.latency_min_max();
                log.0 += 1;
                add_log_hist(&mut log.2, &h);
                log.3 = min_of(log.3, mn);
                log.4 = max_of(log.4, mx);
            }
            None => log.1 += 1,
        }
        let (mn, mx) = d.latency_min_max();
        e.2 = min_of(e.2, mn);
        e.3 = max_of(e.3, mx);
    }

    /// Adds a used device's hardware counters (the row it is about to get holds their values).
    fn add_hw_counters(&mut self, f: &TelemetryFile, d: &Device) {
        for (name, v) in &d.hw_counters {
            let e = self.hw.entry(name.to_string()).or_default();
            match v.total() {
                Some(t) => {
                    e.0.push((
                        t,
                        format!("{}:{} (pid {})", f.host_name, d.roce_device, f.process_id),
                    ));
                    self.hw_rows
                        .entry(name.to_string())
                        .or_default()
                        .push((self.rows.len(), t));
                }
                None => e.1 += 1,
            }
        }
    }
}

/// Sums the used rows' traffic and sets each row's share of it; returns (tx, rx).
fn share_traffic(rows: &mut [DeviceRow]) -> (u64, u64) {
    let tx: u64 = rows
        .iter()
        .filter(|r| r.used)
        .fold(0u64, |s, r| s.saturating_add(r.tx_bytes));
    let rx: u64 = rows
        .iter()
        .filter(|r| r.used)
        .fold(0u64, |s, r| s.saturating_add(r.rx_bytes));
    for r in rows {
        r.tx_share = if tx > 0 {
            r.tx_bytes as f64 / tx as f64
        } else {
            0.0
        };
        r.rx_share = if rx > 0 {
            r.rx_bytes as f64 / rx as f64
        } else {
            0.0
        };
    }
    (tx, rx)
}

/// The hardware counters that moved on some device, by category and name.
fn hw_moved(hw: BTreeMap<String, (Vec<(i64, String)>, usize)>) -> Vec<HwCounterSummary> {
    let mut hw_moved: Vec<HwCounterSummary> = hw
        .into_iter()
        .filter(|(_, (vals, _))| vals.iter().any(|(v, _)| *v > 0))
        .map(|(name, (vals, unavailable))| {
            let fl: Vec<f64> = vals.iter().map(|(v, _)| *v as f64).collect();
            let (max, max_at) = vals
                .iter()
                .max_by_key(|(v, _)| *v)
                .cloned()
                .unwrap_or((0, String::new()));
            HwCounterSummary {
                category: classify(&name),
                devices_reporting: vals.len(),
                devices_unavailable: unavailable,
                devices_moved: vals.iter().filter(|(v, _)| *v > 0).count(),
                total: vals.iter().fold(0i64, |s, (v, _)| s.saturating_add(*v)),
                median: median(&fl).unwrap_or(0.0),
                max,
                max_at,
                name,
            }
        })
        .collect();
    hw_moved.sort_by(|a, b| (a.category, &a.name).cmp(&(b.category, &b.name)));
    hw_moved
}

/// Builds the summary. `all_devices` keeps the registered devices a rank never drove.
pub fn summarize(run: &Run, all_devices: bool) -> Summary {
    let mut t = Tally::default();
    for l in &run.files {
        t.add_file(l, all_devices);
    }
    let (tx, rx) = share_traffic(&mut t.rows);
    let rows = t.rows;
    let used_rows = || rows.iter().filter(|r| r.used);
    let sum = |f: fn(&DeviceRow) -> u64| used_rows().fold(0u64, |s, r| s.saturating_add(f(r)));
    let hw_moved = hw_moved(t.hw);
    let latency = t
        .by_width
        .into_iter()
        .map(|(w, (n, h, mn, mx))| RunLatency {
            histogram_interval_ns: w,
            devices: n,
            latency: Latency::of(&h, w, mn, mx),
            histogram: h,
        })
        .collect();

    let fleet = crate::summary::fleet::build(&rows, &t.hw_rows);
    let duration_s = match (t.start, t.end) {
        (Some((s, _)), Some((e, _))) => Some((e - s) as f64 / 1e9),
        _ => None,
    };
    let log = t.log;
    let completeness = crate::completeness::Completeness::of_run(run);
    Summary {
        files: run.files.len(),
        files_skipped: run
            .bad
            .iter()
            .filter(|b| b.kind != crate::load::BadKind::Missing)
            .count(),
        formats: t.formats,
        files_without_wall_clock: t.no_wall_clock,
        files_final: t.files_final,
        triggers: t.triggers,
        hosts: t.hosts.len(),
        ranks: run.files.len(),
        processes: t.processes.into_iter().collect(),
        transports: t.transports.into_iter().collect(),
        devices_used: used_rows().count(),
        devices_registered: t.registered,
        hw_types: t.hw_types,
        start_time: t.start.map(|(_, s)| s.to_string()),
        end_time: t.end.map(|(_, s)| s.to_string()),
        duration_s,
        latency_sample_intervals: t.sample_intervals.into_iter().collect(),
        tx_bytes: tx,
        rx_bytes: rx,
        num_wqe_sent: sum(|r| r.num_wqe_sent),
        num_wqe_completed: sum(|r| r.num_wqe_completed),
        num_cq_errors: sum(|r| r.num_cq_errors),
        num_qp_untracked: sum(|r| r.num_qp_untracked),
        num_slot_miss: sum(|r| r.num_slot_miss),
        num_wqe_slow: used_rows()
            .filter_map(|r| r.num_wqe_slow)
            .fold(None, |s: Option<u64>, v| {
                Some(s.unwrap_or(0).saturating_add(v))
            }),
        slow_thresholds_ns: used_rows()
            .filter_map(|r| r.slow_threshold_ns)
            .collect::<std::collections::BTreeSet<u64>>()
            .into_iter()
            .collect(),
        hw_samples: t.hw_samples,
        hw_samples_dropped: t.hw_dropped,
        percentile_method: PERCENTILE_METHOD,
        latency,
        log_percentile_method: (log.0 > 0).then_some(LOG_PERCENTILE_METHOD),
        log_latency: (log.0 > 0).then(|| LogRunLatency {
            histogram: "wqe_completion_log_histogram",
            devices: log.0,
            devices_without: log.1,
            latency: Latency::of_log(&log.2, log.3, log.4),
            buckets: log.2,
        }),
        devices: rows,
        hw_counters_moved: hw_moved,
        fleet,
        communicators: comms::rows(run),
        incomplete: (!completeness.is_complete()).then_some(completeness),
        jobs: crate::jobs::detect(run),
    }
}

/// What a run that mixes formats or holds in-tree files needs said about its times.
pub fn format_note(s: &Summary) -> Option<String> {
    if s.files_without_wall_clock == 0 {
        return None;
    }
    Some(format!(
        "{} of {} files are in-tree (intree-1.0): their start/end times are local without a zone and their hw_samples \
         ts_us are CLOCK_MONOTONIC (time since that host booted), so they are not compared across hosts and are left \
         out of the run's time span",
        s.files_without_wall_clock, s.files
    ))
}

pub use crate::summary::text::{render_text, render_text_layout, render_with, TextOptions};
