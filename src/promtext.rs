//! Prometheus text exposition (format 0.0.4): the one definition of every metric family
//! (name, type, help text, labels) and the one renderer, shared by the library's live
//! textfile (`RCCL_TELEMETRY_PROMETHEUS_DIR`) and the tool's
//! `rccl-telemetry export --format prometheus`, which compiles this very file (`#[path]`), so
//! the two cannot drift.
//!
//! Plain data in, text out: std only and no paths into either crate. Each side converts what
//! it has (the library its live slots, the tool a parsed JSON file) into [`Rank`]s.
//!
//! Conventions: every series carries the rank's identity (`host`, `pid`, and `rank` when the
//! launcher told it); device series add `device` and `hw_type`; channel series add `channel`,
//! QP series `channel`, `qp` and `role`. Device, channel and QP series are separate families
//! (`rccl_telemetry_*`, `rccl_telemetry_channel_*`, `rccl_telemetry_qp_*`) so that a `sum()`
//! over one family never counts a WQE twice. Hardware counters are deltas since the rank's
//! first use of the device; a counter the NIC does not expose (-1 in the JSON file) has no
//! sample, and `rccl_telemetry_hw_available` says which are there. Devices the rank
//! never drove are left out. Times are seconds, sizes bytes.

use std::collections::HashSet;
use std::fmt::Write as _;

pub const PREFIX: &str = "rccl_telemetry_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Which labels identify a series of a family, before the family's own extra labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// No labels (the tool's run-wide families).
    Run,
    /// `host` (the tool's per-host families).
    Host,
    /// `host`, `pid`, `rank`.
    Rank,
    /// ... `device`, `hw_type`.
    Device,
    /// ... `channel`.
    Channel,
    /// ... `channel`, `qp`, `role`.
    Qp,
}

impl Scope {
    /// The label names, in the order they are written. `rank` is written only when known.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Scope::Run => &[],
            Scope::Host => &["host"],
            Scope::Rank => &["host", "pid", "rank"],
            Scope::Device => &["host", "pid", "rank", "device", "hw_type"],
            Scope::Channel => &["host", "pid", "rank", "device", "hw_type", "channel"],
            Scope::Qp => &[
                "host", "pid", "rank", "device", "hw_type", "channel", "qp", "role",
            ],
        }
    }

    /// The prefix of the names of this scope's families.
    fn prefix(self) -> &'static str {
        match self {
            Scope::Channel => "rccl_telemetry_channel_",
            Scope::Qp => "rccl_telemetry_qp_",
            _ => PREFIX,
        }
    }
}

/// One metric family: its name is the scope's prefix + `suffix`.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub suffix: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub scope: Scope,
    /// Labels of the family's own, after the scope's.
    pub extra: &'static [&'static str],
}

impl Family {
    pub fn name(&self) -> String {
        format!("{}{}", self.scope.prefix(), self.suffix)
    }

    /// Every label name a series of this family can carry.
    pub fn label_names(&self) -> Vec<&'static str> {
        self.scope
            .labels()
            .iter()
            .chain(self.extra)
            .copied()
            .collect()
    }

    fn at(self, scope: Scope) -> Family {
        Family { scope, ..self }
    }
}

const fn fam(
    suffix: &'static str,
    kind: Kind,
    help: &'static str,
    scope: Scope,
    extra: &'static [&'static str],
) -> Family {
    Family {
        suffix,
        kind,
        help,
        scope,
        extra,
    }
}

use Kind::*;
use Scope as S;

// ----------------------------------------------------------------------------- the families

pub const START_TIME: Family = fam(
    "start_timestamp_seconds",
    Gauge,
    "When telemetry started in the process (Unix time).",
    S::Rank,
    &[],
);
pub const LAST_WRITE: Family = fam(
    "last_write_timestamp_seconds",
    Gauge,
    "When these numbers were taken (Unix time): the last write of the live textfile, or the write of the JSON file exported. A value that stops moving is a rank that ended without removing its file.",
    S::Rank,
    &[],
);

pub const TX_BYTES: Family = fam(
    "tx_bytes_total",
    Counter,
    "Bytes sent (software count).",
    S::Device,
    &[],
);
pub const RX_BYTES: Family = fam(
    "rx_bytes_total",
    Counter,
    "Bytes received (software count).",
    S::Device,
    &[],
);
pub const CQ_ERRORS: Family = fam(
    "cq_errors_total",
    Counter,
    "Completions drained with an error status.",
    S::Device,
    &[],
);
pub const CQ_POLLS: Family = fam(
    "cq_polls_total",
    Counter,
    "ibv_poll_cq calls.",
    S::Device,
    &[],
);
pub const ACTIVE_CHANNELS: Family = fam(
    "active_channels",
    Gauge,
    "Channels that carried traffic.",
    S::Device,
    &[],
);

/// The software counters devices, channels and QPs have in common (device and channel
/// values are sums over their QPs); written at each level asked for.
pub const WQES_SENT: Family = fam(
    "wqes_sent_total",
    Counter,
    "Send WQEs posted.",
    S::Device,
    &[],
);
pub const RECV_WQES: Family = fam(
    "recv_wqes_posted_total",
    Counter,
    "Receive WQEs posted.",
    S::Device,
    &[],
);
pub const WQES_DRAINED: Family = fam(
    "wqes_drained_total",
    Counter,
    "Completions drained from the CQ, send and receive (num_wqe_rcvd).",
    S::Device,
    &[],
);
pub const WQES_COMPLETED: Family = fam(
    "wqes_completed_total",
    Counter,
    "Completions matched to a tracked posting.",
    S::Device,
    &[],
);
pub const CTS_SENT: Family = fam(
    "cts_sent_total",
    Counter,
    "CTS messages posted, by whether the WR was signalled.",
    S::Device,
    &["signalled"],
);
pub const SLOT_MISSES: Family = fam(
    "slot_misses_total",
    Counter,
    "CTS FIFO slot misses.",
    S::Device,
    &[],
);
pub const RDMA_WRITES: Family = fam(
    "rdma_writes_total",
    Counter,
    "RDMA write postings, by immediate data.",
    S::Device,
    &["immediate"],
);
pub const COMPLETION: Family = fam(
    "wqe_completion_seconds",
    Histogram,
    "WQE completion latency over the sampled completions (no _sum: not recorded).",
    S::Device,
    &["le"],
);
/// Device and channel only: the log-scale histogram (the file's wqe_completion_log_histogram).
pub const COMPLETION_LOG: Family = fam(
    "wqe_completion_log_seconds",
    Histogram,
    "WQE completion latency over the sampled completions, log-scale buckets at most 1/8 of their lower bound wide (no _sum: not recorded).",
    S::Device,
    &["le"],
);
/// Device and channel only.
pub const REQUESTS: Family = fam(
    "requests_completed_total",
    Counter,
    "Network requests completed.",
    S::Device,
    &[],
);
pub const UNTRACKED_QPS: Family = fam(
    "untracked_qps",
    Gauge,
    "QPs that got no stats slot; their traffic is missing from every counter.",
    S::Device,
    &[],
);
pub const QPS: Family = fam(
    "qps",
    Gauge,
    "Tracked queue pairs, by role.",
    S::Device,
    &["role"],
);

pub const HW_AVAILABLE: Family = fam(
    "hw_available",
    Gauge,
    "1 when the NIC exposes the hardware counter (its rccl_telemetry_hw_* series is present), 0 when it does not (no series).",
    S::Device,
    &["counter", "priority"],
);
/// The help text of a hardware counter's family, `rccl_telemetry_hw_<name>_total`.
pub fn hw_help(counter: &str, converted_to: Option<&str>) -> String {
    format!(
        "NIC hardware counter {counter}, delta since the rank's first use of the device{}; absent where the NIC does not expose it (rccl_telemetry_hw_available).",
        converted_to.map_or(String::new(), |u| format!(", converted to {u}"))
    )
}

/// The tool's families over a whole run.
pub const RANKS: Family = fam("ranks", Gauge, "Rank files read, per host.", S::Host, &[]);
pub const FILES_SKIPPED: Family = fam(
    "files_skipped",
    Gauge,
    "Input files that could not be read and were skipped.",
    S::Run,
    &[],
);
pub const RUN_START: Family = fam(
    "run_start_timestamp_seconds",
    Gauge,
    "Earliest start_time over the ranks.",
    S::Run,
    &[],
);
pub const RUN_END: Family = fam(
    "run_end_timestamp_seconds",
    Gauge,
    "Latest end_time over the ranks.",
    S::Run,
    &[],
);

/// The families written at each scope, in output order.
pub const DEVICE_ONLY: [Family; 5] = [TX_BYTES, RX_BYTES, CQ_ERRORS, CQ_POLLS, ACTIVE_CHANNELS];
pub const COUNTS: [Family; 7] = [
    WQES_SENT,
    RECV_WQES,
    WQES_DRAINED,
    WQES_COMPLETED,
    CTS_SENT,
    SLOT_MISSES,
    RDMA_WRITES,
];
pub const CHANNEL_TOTALS: [Family; 3] = [REQUESTS, UNTRACKED_QPS, QPS];

/// Every fixed family at the given depth (hardware counter families are named after the
/// counters: see [`hw_metric`]).
pub fn families(level: Level) -> Vec<Family> {
    let mut v = vec![START_TIME, LAST_WRITE];
    v.extend(DEVICE_ONLY);
    v.extend(COUNTS);
    v.extend(CHANNEL_TOTALS);
    v.push(COMPLETION);
    v.push(COMPLETION_LOG);
    v.push(HW_AVAILABLE);
    if level >= Level::Channel {
        v.extend(
            COUNTS
                .iter()
                .chain(&CHANNEL_TOTALS)
                .chain([&COMPLETION, &COMPLETION_LOG])
                .map(|f| f.at(S::Channel)),
        );
    }
    if level >= Level::Qp {
        v.extend(COUNTS.iter().chain([&COMPLETION]).map(|f| f.at(S::Qp)));
    }
    v
}

/// How deep the series go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Device,
    Channel,
    Qp,
}

// ------------------------------------------------------------------------- names and units

/// Sanitises a name into the Prometheus metric-name alphabet [a-z0-9_].
pub fn prom_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Rewrites a counter name into Prometheus base units, by its unit token (not a fixed list of
/// names): microseconds, milliseconds and nanoseconds become seconds, bits become bytes.
/// Returns the new name, the factor to multiply values by, and the unit when one was converted.
pub fn base_unit(name: &str) -> (String, f64, Option<&'static str>) {
    let mut scale = 1.0;
    let mut unit = None;
    let tokens: Vec<&str> = name
        .split('_')
        .map(|t| match t {
            "us" | "usec" | "usecs" | "microseconds" => {
                scale = 1e-6;
                unit = Some("seconds");
                "seconds"
            }
            "ms" | "msec" | "msecs" | "milliseconds" => {
                scale = 1e-3;
                unit = Some("seconds");
                "seconds"
            }
            "ns" | "nsec" | "nsecs" | "nanoseconds" => {
                scale = 1e-9;
                unit = Some("seconds");
                "seconds"
            }
            "bits" => {
                scale = 0.125;
                unit = Some("bytes");
                "bytes"
            }
            other => other,
        })
        .collect();
    (tokens.join("_"), scale, unit)
}

/// A hardware counter's family: (metric name, help, factor to its base unit).
pub fn hw_metric(counter: &str) -> (String, String, f64) {
    let (base, scale, unit) = base_unit(&prom_name(
        counter.strip_prefix("delta_").unwrap_or(counter),
    ));
    (
        format!("{PREFIX}hw_{base}_total"),
        hw_help(counter, unit),
        scale,
    )
}

/// Formats a float the way the exposition format reads it.
pub fn prom_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

// ------------------------------------------------------------------------------ the data

/// The software counters of a QP, or their sum over a channel or a device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub wqes_sent: u64,
    pub recv_wqes: u64,
    pub wqes_drained: u64,
    pub wqes_completed: u64,
    pub cts_signalled: u64,
    pub cts_unsignalled: u64,
    pub slot_misses: u64,
    pub writes: u64,
    pub writes_imm: u64,
    /// The completion-latency histogram (buckets of the rank's interval, the last open).
    pub hist: Vec<u64>,
    /// The log-scale histogram, sparse and sorted: `(lo_ns, hi_ns, count)` with inclusive
    /// bounds, `hi_ns` None for the open last bucket (channels and devices; QPs have none).
    pub log_hist: Vec<(u64, Option<u64>, u64)>,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        for (a, b) in [
            (&mut self.wqes_sent, o.wqes_sent),
            (&mut self.recv_wqes, o.recv_wqes),
            (&mut self.wqes_drained, o.wqes_drained),
            (&mut self.wqes_completed, o.wqes_completed),
            (&mut self.cts_signalled, o.cts_signalled),
            (&mut self.cts_unsignalled, o.cts_unsignalled),
            (&mut self.slot_misses, o.slot_misses),
            (&mut self.writes, o.writes),
            (&mut self.writes_imm, o.writes_imm),
        ] {
            *a = a.saturating_add(b);
        }
        if self.hist.len() < o.hist.len() {
            self.hist.resize(o.hist.len(), 0);
        }
        for (a, b) in self.hist.iter_mut().zip(&o.hist) {
            *a = a.saturating_add(*b);
        }
        if !o.log_hist.is_empty() {
            let mut m: std::collections::BTreeMap<u64, (Option<u64>, u64)> = self
                .log_hist
                .iter()
                .map(|&(lo, hi, n)| (lo, (hi, n)))
                .collect();
            for &(lo, hi, n) in &o.log_hist {
                let e = m.entry(lo).or_insert((hi, 0));
                e.1 = e.1.saturating_add(n);
            }
            self.log_hist = m.into_iter().map(|(lo, (hi, n))| (lo, hi, n)).collect();
        }
    }
}

#[derive(Debug, Clone)]
pub struct Qp {
    pub id: u64,
    /// "data", "cts", or None (not set).
    pub role: Option<String>,
    pub counts: Counts,
}

#[derive(Debug, Clone)]
pub struct Channel {
    /// None when the transport gave no channel ids.
    pub id: Option<u64>,
    /// The channel's totals (the sum of its QPs).
    pub counts: Counts,
    pub requests_completed: u64,
    pub data_qps: u64,
    pub cts_qps: u64,
    pub untracked_qps: u64,
    pub qps: Vec<Qp>,
}

/// A hardware counter's delta; -1 (or a negative element) is "not available".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hw {
    Scalar(i64),
    PerPrio(Vec<i64>),
}

#[derive(Debug, Clone)]
pub struct Device {
    pub id: u32,
    pub name: String,
    pub hw_type: String,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub cq_errors: u64,
    pub cq_polls: u64,
    pub active_channels: u64,
    /// Over the whole device (channels' and those with no channel).
    pub untracked_qps: u64,
    pub hw: Vec<(String, Hw)>,
    pub channels: Vec<Channel>,
}

impl Device {
    /// A device the rank drove (it moved bytes or has QPs); the others are not written.
    pub fn is_used(&self) -> bool {
        self.tx_bytes > 0 || self.rx_bytes > 0 || self.channels.iter().any(|c| !c.qps.is_empty())
    }
}

#[derive(Debug, Clone)]
pub struct Rank {
    pub host: String,
    pub pid: u64,
    /// The launcher's rank, when known (the library reads it from the environment).
    pub rank: Option<String>,
    /// Unix seconds.
    pub start_s: Option<f64>,
    /// Unix seconds: when the numbers were taken.
    pub taken_s: Option<f64>,
    pub hist_interval_ns: u64,
    pub devices: Vec<Device>,
}

// ------------------------------------------------------------------------- the renderer

fn header(out: &mut String, name: &str, help: &str, kind: Kind) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {}", kind.as_str());
}

fn label(out: &mut String, first: &mut bool, k: &str, v: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push_str(k);
    out.push_str("=\"");
    escape_into(out, v);
    out.push('"');
}

/// `a="x",b="y"` for the given pairs.
fn labels(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let mut first = true;
    for (k, v) in pairs {
        label(&mut s, &mut first, k, v);
    }
    s
}

/// `name{base,extra} value`; `extra` is already formatted (may be empty).
fn sample(out: &mut String, name: &str, base: &str, extra: &str, value: impl std::fmt::Display) {
    out.push_str(name);
    if !base.is_empty() || !extra.is_empty() {
        out.push('{');
        out.push_str(base);
        if !base.is_empty() && !extra.is_empty() {
            out.push(',');
        }
        out.push_str(extra);
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Distinct label values: a repeat gets `#2`, `#3`... (only a malformed file repeats).
fn unique(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values
        .map(|v| {
            let mut u = v.clone();
            let mut k = 1;
            while !seen.insert(u.clone()) {
                k += 1;
                u = format!("{v}#{k}");
            }
            u
        })
        .collect()
}

/// Writes a family of plain samples, (label pairs, value), with its HELP and TYPE lines
/// (nothing when there are no samples).
pub fn write_simple(out: &mut String, f: &Family, samples: &[(Vec<(&str, &str)>, String)]) {
    if samples.is_empty() {
        return;
    }
    let name = f.name();
    header(out, &name, f.help, f.kind);
    for (l, v) in samples {
        sample(out, &name, &labels(l), "", v);
    }
}

/// One series owner at some scope: its labels and its counters.
struct Item<'a> {
    labels: String,
    counts: &'a Counts,
    interval_ns: u64,
    totals: Option<&'a Channel>,
}

/// Writes the families of `ranks` (skipping a rank whose host and pid repeat an earlier
/// one's, which would duplicate series); returns how many were skipped.
pub fn render(ranks: &[Rank], level: Level, out: &mut String) -> usize {
    let mut seen = HashSet::new();
    let mut kept: Vec<&Rank> = Vec::with_capacity(ranks.len());
    for r in ranks {
        if seen.insert((r.host.as_str(), r.pid, r.rank.as_deref())) {
            kept.push(r);
        }
    }
    let skipped = ranks.len() - kept.len();

    // Labels, built once per scope.
    let rank_l: Vec<String> = kept
        .iter()
        .map(|r| {
            let pid = r.pid.to_string();
            let mut p = vec![("host", r.host.as_str()), ("pid", pid.as_str())];
            if let Some(k) = &r.rank {
                p.push(("rank", k.as_str()));
            }
            labels(&p)
        })
        .collect();
    let mut dev_counts: Vec<Counts> = Vec::new();
    // (rank index, device, labels, index into dev_counts)
    let mut devs: Vec<(usize, &Device, String)> = Vec::new();
    for (ri, r) in kept.iter().enumerate() {
        let used: Vec<&Device> = r.devices.iter().filter(|d| d.is_used()).collect();
        let names = unique(used.iter().map(|d| d.name.clone()));
        for (d, name) in used.into_iter().zip(names) {
            let mut l = rank_l[ri].clone();
            let mut first = l.is_empty();
            label(&mut l, &mut first, "device", &name);
            label(&mut l, &mut first, "hw_type", &d.hw_type);
            let mut total = Counts::default();
            for c in &d.channels {
                total.add(&c.counts);
            }
            dev_counts.push(total);
            devs.push((ri, d, l));
        }
    }

    for f in [START_TIME, LAST_WRITE] {
        let get = |r: &Rank| {
            if f.suffix == START_TIME.suffix {
                r.start_s
            } else {
                r.taken_s
            }
        };
        if kept.iter().any(|r| get(r).is_some()) {
            header(out, &f.name(), f.help, f.kind);
            for (r, l) in kept.iter().zip(&rank_l) {
                if let Some(v) = get(r) {
                    sample(out, &f.name(), l, "", prom_f64(v));
                }
            }
        }
    }
    if devs.is_empty() {
        return skipped;
    }

    // Device-only families.
    for f in DEVICE_ONLY {
        let name = f.name();
        header(out, &name, f.help, f.kind);
        for (_, d, l) in &devs {
            let v = match f.suffix {
                "tx_bytes_total" => d.tx_bytes,
                "rx_bytes_total" => d.rx_bytes,
                "cq_errors_total" => d.cq_errors,
                "cq_polls_total" => d.cq_polls,
                _ => d.active_channels,
            };
            sample(out, &name, l, "", v);
        }
    }

    let dev_items: Vec<Item> = devs
        .iter()
        .zip(&dev_counts)
        .map(|((ri, _, l), c)| Item {
            labels: l.clone(),
            counts: c,
            interval_ns: kept[*ri].hist_interval_ns,
            totals: None,
        })
        .collect();
    counts_families(
        out,
        S::Device,
        &dev_items,
        devs.iter().map(|(_, d, _)| DevTotals::of(d)).collect(),
    );
    hw_families(out, &devs);

    if level >= Level::Channel {
        let mut ch_items: Vec<Item> = Vec::new();
        let mut qp_items: Vec<Item> = Vec::new();
        for (ri, d, dl) in &devs {
            let ids = unique(d.channels.iter().enumerate().map(|(i, c)| {
                c.id.map_or_else(|| format!("unknown_{i}"), |id| id.to_string())
            }));
            for (c, id) in d.channels.iter().zip(ids) {
                let mut cl = dl.clone();
                let mut first = cl.is_empty();
                label(&mut cl, &mut first, "channel", &id);
                if level >= Level::Qp {
                    let qids = unique(c.qps.iter().map(|q| q.id.to_string()));
                    for (q, qid) in c.qps.iter().zip(qids) {
                        let mut ql = cl.clone();
                        let mut first = ql.is_empty();
                        label(&mut ql, &mut first, "qp", &qid);
                        label(
                            &mut ql,
                            &mut first,
                            "role",
                            q.role.as_deref().unwrap_or("unset"),
                        );
                        qp_items.push(Item {
                            labels: ql,
                            counts: &q.counts,
                            interval_ns: kept[*ri].hist_interval_ns,
                            totals: None,
                        });
                    }
                }
                ch_items.push(Item {
                    labels: cl,
                    counts: &c.counts,
                    interval_ns: kept[*ri].hist_interval_ns,
                    totals: Some(c),
                });
            }
        }
        if level >= Level::Channel && !ch_items.is_empty() {
            let totals = ch_items
                .iter()
                .map(|i| DevTotals::of_channel(i.totals.expect("a channel")))
                .collect();
            counts_families(out, S::Channel, &ch_items, totals);
        }
        if level >= Level::Qp && !qp_items.is_empty() {
            counts_families(out, S::Qp, &qp_items, Vec::new());
        }
    }
    skipped
}

/// requests completed, untracked QPs, data and CTS QPs of a device or a channel.
struct DevTotals([u64; 4]);

impl DevTotals {
    fn of(d: &Device) -> DevTotals {
        let s =
            |g: fn(&Channel) -> u64| d.channels.iter().fold(0u64, |a, c| a.saturating_add(g(c)));
        DevTotals([
            s(|c| c.requests_completed),
            d.untracked_qps,
            s(|c| c.data_qps),
            s(|c| c.cts_qps),
        ])
    }
    fn of_channel(c: &Channel) -> DevTotals {
        DevTotals([c.requests_completed, c.untracked_qps, c.data_qps, c.cts_qps])
    }
}

/// The shared counters at one scope, then (device and channel) the totals, then the histogram.
fn counts_families(out: &mut String, scope: Scope, items: &[Item], totals: Vec<DevTotals>) {
    type Get = fn(&Counts) -> u64;
    for f in COUNTS {
        let f = f.at(scope);
        let name = f.name();
        header(out, &name, f.help, f.kind);
        let variants: &[(&str, Get)] = match f.suffix {
            "wqes_sent_total" => &[("", |c| c.wqes_sent)],
            "recv_wqes_posted_total" => &[("", |c| c.recv_wqes)],
            "wqes_drained_total" => &[("", |c| c.wqes_drained)],
            "wqes_completed_total" => &[("", |c| c.wqes_completed)],
            "cts_sent_total" => &[
                ("signalled=\"true\"", |c| c.cts_signalled),
                ("signalled=\"false\"", |c| c.cts_unsignalled),
            ],
            "slot_misses_total" => &[("", |c| c.slot_misses)],
            _ => &[
                ("immediate=\"false\"", |c| c.writes),
                ("immediate=\"true\"", |c| c.writes_imm),
            ],
        };
        for it in items {
            for (extra, get) in variants {
                sample(out, &name, &it.labels, extra, get(it.counts));
            }
        }
    }
    if !totals.is_empty() {
        for (i, f) in CHANNEL_TOTALS.iter().enumerate() {
            let f = f.at(scope);
            let name = f.name();
            header(out, &name, f.help, f.kind);
            for (it, t) in items.iter().zip(&totals) {
                match i {
                    0 => sample(out, &name, &it.labels, "", t.0[0]),
                    1 => sample(out, &name, &it.labels, "", t.0[1]),
                    _ => {
                        sample(out, &name, &it.labels, "role=\"data\"", t.0[2]);
                        sample(out, &name, &it.labels, "role=\"cts\"", t.0[3]);
                    }
                }
            }
        }
    }
    // The completion-latency histogram, in seconds; the last bucket is +Inf. The library does
    // not record the sum of the latencies, so _sum is absent (the format allows it).
    let f = COMPLETION.at(scope);
    let name = f.name();
    if items.iter().any(|i| !i.counts.hist.is_empty()) {
        header(out, &name, f.help, f.kind);
        let (bucket, count) = (format!("{name}_bucket"), format!("{name}_count"));
        let mut le = String::new();
        for it in items.iter().filter(|i| !i.counts.hist.is_empty()) {
            let h = &it.counts.hist;
            let mut cum = 0u64;
            for (b, c) in h.iter().enumerate() {
                cum = cum.saturating_add(*c);
                le.clear();
                le.push_str("le=\"");
                if b + 1 == h.len() {
                    le.push_str("+Inf");
                } else {
                    le.push_str(&prom_f64((b as f64 + 1.0) * it.interval_ns as f64 / 1e9));
                }
                le.push('"');
                sample(out, &bucket, &it.labels, &le, cum);
            }
            sample(out, &count, &it.labels, "", cum);
        }
    }
    // The log-scale histogram as classic buckets: every series of the family gets the same
    // `le` set (the upper bounds, in seconds, of every bucket non-empty in any of them), so
    // sum by (le) and histogram_quantile work across ranks and devices.
    if scope == S::Qp || items.iter().all(|i| i.counts.log_hist.is_empty()) {
        return;
    }
    let f = COMPLETION_LOG.at(scope);
    let name = f.name();
    header(out, &name, f.help, f.kind);
    let bounds: std::collections::BTreeSet<u64> = items
        .iter()
        .flat_map(|i| i.counts.log_hist.iter().filter_map(|b| b.1))
        .collect();
    let (bucket, count) = (format!("{name}_bucket"), format!("{name}_count"));
    for it in items.iter().filter(|i| !i.counts.log_hist.is_empty()) {
        let mut cum = 0u64;
        let mut sorted = it.counts.log_hist.clone();
        sorted.sort_unstable_by_key(|b| b.1.unwrap_or(u64::MAX));
        let mut rest = sorted.iter().peekable();
        for hi in &bounds {
            while let Some(b) = rest.next_if(|b| b.1.is_some_and(|h| h <= *hi)) {
                cum = cum.saturating_add(b.2);
            }
            sample(
                out,
                &bucket,
                &it.labels,
                &format!("le=\"{}\"", prom_f64(*hi as f64 / 1e9)),
                cum,
            );
        }
        let total = it
            .counts
            .log_hist
            .iter()
            .fold(0u64, |a, b| a.saturating_add(b.2));
        sample(out, &bucket, &it.labels, "le=\"+Inf\"", total);
        sample(out, &count, &it.labels, "", total);
    }
}

/// One family per hardware counter (available values only), then the availability gauge.
fn hw_families(out: &mut String, devs: &[(usize, &Device, String)]) {
    // By name: the library holds them in its vocabulary's order, a parsed file sorted.
    let mut order: Vec<&str> = devs
        .iter()
        .flat_map(|(_, d, _)| d.hw.iter().map(|(n, _)| n.as_str()))
        .collect();
    order.sort_unstable();
    order.dedup();
    let mut names_taken = HashSet::new();
    for counter in &order {
        let (name, help, scale) = hw_metric(counter);
        if !names_taken.insert(name.clone()) {
            continue; // two counter names that sanitise alike: the first wins
        }
        let mut wrote = false;
        for (_, d, l) in devs {
            for (_, v) in d.hw.iter().filter(|(n, _)| n == counter) {
                let mut emit = |extra: &str, x: i64| {
                    if x < 0 {
                        return;
                    }
                    if !wrote {
                        header(out, &name, &help, Kind::Counter);
                        wrote = true;
                    }
                    if scale == 1.0 {
                        sample(out, &name, l, extra, x);
                    } else {
                        sample(out, &name, l, extra, prom_f64(x as f64 * scale));
                    }
                };
                match v {
                    Hw::Scalar(x) => emit("", *x),
                    Hw::PerPrio(a) => {
                        for (p, x) in a.iter().enumerate() {
                            emit(&format!("priority=\"{p}\""), *x);
                        }
                    }
                }
            }
        }
    }
    if order.is_empty() {
        return;
    }
    let name = HW_AVAILABLE.name();
    header(out, &name, HW_AVAILABLE.help, HW_AVAILABLE.kind);
    let mut extra = String::new();
    for (_, d, l) in devs {
        let mut hw: Vec<&(String, Hw)> = d.hw.iter().collect();
        hw.sort_by(|a, b| a.0.cmp(&b.0));
        for (n, v) in hw {
            extra.clear();
            extra.push_str("counter=\"");
            escape_into(&mut extra, n);
            extra.push('"');
            match v {
                Hw::Scalar(x) => sample(out, &name, l, &extra, u8::from(*x >= 0)),
                Hw::PerPrio(a) => {
                    let base = extra.clone();
                    for (p, x) in a.iter().enumerate() {
                        sample(
                            out,
                            &name,
                            l,
                            &format!("{base},priority=\"{p}\""),
                            u8::from(*x >= 0),
                        );
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------- stalls

/// Stall detection's families (the live textfile only; docs/operators.md, "Stalled queue pairs").
pub const WQE_OUTSTANDING: Family = fam(
    "wqe_outstanding",
    Gauge,
    "Send WRs outstanding on the device's QPs at the stall detector's last check (hooks: WRITE_WITH_IMM postings not yet completed; preload: the send record).",
    S::Device,
    &[],
);
pub const STALLED_QPS: Family = fam(
    "stalled_qps",
    Gauge,
    "QPs with a completion expected and none for at least RCCL_TELEMETRY_STALL_MS.",
    S::Device,
    &[],
);
/// The labels of a stalled QP's series, after the device's.
pub const STALLED_QP_LABELS: &[&str] = &["channel", "qp", "qp_num", "peer_gid", "peer_qp_num"];
pub const QP_STALLED_SECONDS: Family = fam(
    "qp_stalled_seconds",
    Gauge,
    "How long this stalled QP has had work outstanding and no completion (only stalled QPs have a series).",
    S::Device,
    STALLED_QP_LABELS,
);
pub const QP_STALL_OUTSTANDING: Family = fam(
    "qp_stall_outstanding",
    Gauge,
    "Send WRs outstanding on this stalled QP (only stalled QPs have a series).",
    S::Device,
    STALLED_QP_LABELS,
);
pub const STALLED_QP_SERIES_DROPPED: Family = fam(
    "stalled_qp_series_dropped",
    Gauge,
    "Stalled QPs beyond the cap of per-QP series (they count in rccl_telemetry_stalled_qps, without a series of their own).",
    S::Rank,
    &[],
);

/// Stalled QP series written at most per rank (the longest-stalled first).
pub const MAX_STALLED_QP_SERIES: usize = 64;

/// One stalled QP, for its series. Unknown label values are empty (which Prometheus reads as
/// an absent label).
#[derive(Debug, Clone, Default)]
pub struct StalledQp {
    pub channel: String,
    pub qp: u64,
    pub qp_num: Option<u32>,
    pub peer_gid: Option<String>,
    pub peer_qp_num: Option<u32>,
    pub outstanding: u64,
    pub stalled_s: f64,
}

/// One device's stall numbers.
#[derive(Debug, Clone, Default)]
pub struct DevStall {
    pub name: String,
    pub hw_type: String,
    pub outstanding: u64,
    pub stalled: u64,
    pub qps: Vec<StalledQp>,
}

/// Writes the stall families of one rank; per-QP series for at most [`MAX_STALLED_QP_SERIES`]
/// QPs, the longest-stalled first. Returns how many stalled QPs got no series.
pub fn render_stalls(r: &Rank, devs: &[DevStall], out: &mut String) -> usize {
    if devs.is_empty() {
        return 0;
    }
    let pid = r.pid.to_string();
    let mut base = vec![("host", r.host.as_str()), ("pid", pid.as_str())];
    if let Some(k) = &r.rank {
        base.push(("rank", k.as_str()));
    }
    let rank_l = labels(&base);
    let dev_l: Vec<String> = devs
        .iter()
        .map(|d| {
            labels(
                &[
                    base.clone(),
                    vec![("device", d.name.as_str()), ("hw_type", d.hw_type.as_str())],
                ]
                .concat(),
            )
        })
        .collect();
    for (f, get) in [
        (
            WQE_OUTSTANDING,
            (|d: &DevStall| d.outstanding) as fn(&DevStall) -> u64,
        ),
        (STALLED_QPS, |d: &DevStall| d.stalled),
    ] {
        header(out, &f.name(), f.help, f.kind);
        for (d, l) in devs.iter().zip(&dev_l) {
            sample(out, &f.name(), l, "", get(d));
        }
    }
    let mut all: Vec<(usize, &StalledQp)> = devs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| d.qps.iter().map(move |q| (i, q)))
        .collect();
    all.sort_by(|a, b| b.1.stalled_s.total_cmp(&a.1.stalled_s));
    let dropped = all.len().saturating_sub(MAX_STALLED_QP_SERIES);
    all.truncate(MAX_STALLED_QP_SERIES);
    if !all.is_empty() {
        let ql: Vec<String> = all
            .iter()
            .map(|(_, q)| {
                let (qp, n, g, pn) = (
                    q.qp.to_string(),
                    q.qp_num.map(|n| n.to_string()),
                    q.peer_gid.clone(),
                    q.peer_qp_num.map(|n| n.to_string()),
                );
                labels(&[
                    ("channel", q.channel.as_str()),
                    ("qp", qp.as_str()),
                    ("qp_num", n.as_deref().unwrap_or("")),
                    ("peer_gid", g.as_deref().unwrap_or("")),
                    ("peer_qp_num", pn.as_deref().unwrap_or("")),
                ])
            })
            .collect();
        header(
            out,
            &QP_STALLED_SECONDS.name(),
            QP_STALLED_SECONDS.help,
            Gauge,
        );
        for ((i, q), l) in all.iter().zip(&ql) {
            sample(
                out,
                &QP_STALLED_SECONDS.name(),
                &dev_l[*i],
                l,
                prom_f64(q.stalled_s),
            );
        }
        header(
            out,
            &QP_STALL_OUTSTANDING.name(),
            QP_STALL_OUTSTANDING.help,
            Gauge,
        );
        for ((i, q), l) in all.iter().zip(&ql) {
            sample(
                out,
                &QP_STALL_OUTSTANDING.name(),
                &dev_l[*i],
                l,
                q.outstanding,
            );
        }
    }
    header(
        out,
        &STALLED_QP_SERIES_DROPPED.name(),
        STALLED_QP_SERIES_DROPPED.help,
        Gauge,
    );
    sample(out, &STALLED_QP_SERIES_DROPPED.name(), &rank_l, "", dropped);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(n: u64) -> Counts {
        Counts {
            wqes_sent: n,
            recv_wqes: n,
            wqes_drained: 2 * n,
            wqes_completed: n,
            cts_signalled: 1,
            cts_unsignalled: n - 1,
            slot_misses: 0,
            writes: n,
            writes_imm: 0,
            hist: vec![n, 0, 1],
            log_hist: vec![(56, Some(59), n), (1 << 40, None, 1)],
        }
    }

    #[test]
    fn log_histogram_series_share_one_le_set_and_sum_channels_into_devices() {
        let mut a = Counts {
            log_hist: vec![(56, Some(59), 3), (1 << 40, None, 1)],
            ..Counts::default()
        };
        let b = Counts {
            log_hist: vec![(64, Some(71), 2), (56, Some(59), 1)],
            ..Counts::default()
        };
        let items = [
            Item {
                labels: "host=\"h\",pid=\"1\"".into(),
                counts: &a,
                interval_ns: 1000,
                totals: None,
            },
            Item {
                labels: "host=\"h\",pid=\"2\"".into(),
                counts: &b,
                interval_ns: 1000,
                totals: None,
            },
        ];
        let mut out = String::new();
        counts_families(&mut out, S::Device, &items, Vec::new());
        let name = COMPLETION_LOG.name();
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_")))
            .collect();
        assert_eq!(
            lines,
            [
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"0.000000059\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"0.000000071\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"+Inf\"}} 4"),
                format!("{name}_count{{host=\"h\",pid=\"1\"}} 4"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"0.000000059\"}} 1"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"0.000000071\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"+Inf\"}} 3"),
                format!("{name}_count{{host=\"h\",pid=\"2\"}} 3"),
            ],
            "{out}"
        );
        // QP series have no log-scale histogram.
        let mut q = String::new();
        counts_families(&mut q, S::Qp, &items, Vec::new());
        assert!(!q.contains("log_seconds"), "{q}");
        // Adding merges buckets by their lower bound, in order.
        a.add(&b);
        assert_eq!(
            a.log_hist,
            vec![(56, Some(59), 4), (64, Some(71), 2), (1 << 40, None, 1)]
        );
    }

    fn rank(pid: u64) -> Rank {
        let qps = vec![
            Qp {
                id: 0,
                role: Some("data".into()),
                counts: counts(4),
            },
            Qp {
                id: 1,
                role: None,
                counts: counts(2),
            },
        ];
        let mut total = Counts::default();
        for q in &qps {
            total.add(&q.counts);
        }
        let ch = Channel {
            id: Some(3),
            counts: total,
            requests_completed: 5,
            data_qps: 1,
            cts_qps: 0,
            untracked_qps: 0,
            qps,
        };
        let used = Device {
            id: 0,
            name: "mlx5_\"0\"".into(),
            hw_type: "mlx5".into(),
            tx_bytes: 100,
            rx_bytes: 50,
            cq_errors: 0,
            cq_polls: 9,
            active_channels: 1,
            untracked_qps: 2,
            hw: vec![
                ("cnp_sent".into(), Hw::Scalar(7)),
                (
                    "pfc_rx_pause_duration_us".into(),
                    Hw::PerPrio(vec![-1, 3, -1, -1, -1, -1, -1, -1]),
                ),
                ("rx_fcs_errors".into(), Hw::Scalar(-1)),
            ],
            channels: vec![ch],
        };
        let unused = Device {
            id: 1,
            name: "mlx5_1".into(),
            tx_bytes: 0,
            rx_bytes: 0,
            channels: vec![],
            ..used.clone()
        };
        Rank {
            host: "h1".into(),
            pid,
            rank: Some("3".into()),
            start_s: Some(1.5),
            taken_s: Some(2.0),
            hist_interval_ns: 30_000,
            devices: vec![used, unused],
        }
    }

    fn lines(level: Level) -> Vec<String> {
        let mut s = String::new();
        assert_eq!(render(&[rank(7), rank(8), rank(7)], level, &mut s), 1);
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn series_carry_the_rank_and_the_scope_labels() {
        let l = lines(Level::Qp);
        let has = |x: &str| l.iter().any(|y| y == x);
        assert!(
            has(
                r#"rccl_telemetry_tx_bytes_total{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 100"#
            ),
            "{l:#?}"
        );
        assert!(has(
            r#"rccl_telemetry_wqes_sent_total{host="h1",pid="8",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 6"#
        ));
        assert!(has(
            r#"rccl_telemetry_channel_qps{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",role="data"} 1"#
        ));
        assert!(has(
            r#"rccl_telemetry_qp_cts_sent_total{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",qp="1",role="unset",signalled="false"} 1"#
        ));
        assert!(has(
            r#"rccl_telemetry_untracked_qps{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 2"#
        ));
        assert!(has(
            r#"rccl_telemetry_qp_wqe_completion_seconds_bucket{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",qp="0",role="data",le="0.00003"} 4"#
        ));
        assert!(has(
            r#"rccl_telemetry_wqe_completion_seconds_count{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 8"#
        ));
        assert!(has(
            r#"rccl_telemetry_last_write_timestamp_seconds{host="h1",pid="7",rank="3"} 2"#
        ));
        // The unused device is absent; the repeated rank is written once.
        assert!(!l.iter().any(|x| x.contains("mlx5_1")));
        assert_eq!(
            l.iter()
                .filter(|x| x.starts_with("rccl_telemetry_tx_bytes_total{"))
                .count(),
            2
        );
    }

    #[test]
    fn unavailable_hardware_counters_are_absent_and_flagged() {
        let l = lines(Level::Device);
        assert!(!l.iter().any(|x| !x.starts_with('#') && x.ends_with(" -1")));
        assert!(l
            .iter()
            .any(|x| x.starts_with("rccl_telemetry_hw_cnp_sent_total{") && x.ends_with(" 7")));
        assert!(l.iter().any(|x| x
            .starts_with("rccl_telemetry_hw_pfc_rx_pause_duration_seconds_total{")
            && x.contains("priority=\"1\"")
            && x.ends_with(" 0.000003")));
        assert!(!l
            .iter()
            .any(|x| x.contains("priority=\"0\"") && x.starts_with("rccl_telemetry_hw_pfc")));
        assert!(!l
            .iter()
            .any(|x| x.starts_with("rccl_telemetry_hw_rx_fcs_errors_total")));
        assert!(l
            .iter()
            .any(|x| x.contains("counter=\"rx_fcs_errors\"") && x.ends_with(" 0")));
        assert!(l
            .iter()
            .any(|x| x.contains("counter=\"cnp_sent\"") && x.ends_with(" 1")));
        // Device level has no channel or QP series.
        assert!(!l.iter().any(|x| x.contains("channel=")));
    }

    #[test]
    fn every_family_has_help_and_type_once_and_counters_end_in_total() {
        let l = lines(Level::Qp);
        let mut typed = HashSet::new();
        for x in l.iter().filter_map(|x| x.strip_prefix("# TYPE ")) {
            let (n, k) = x.split_once(' ').unwrap();
            assert!(typed.insert(n.to_owned()), "{n} twice");
            if k == "counter" {
                assert!(n.ends_with("_total"), "{n}");
            }
        }
        for f in families(Level::Qp) {
            assert!(typed.contains(&f.name()), "{} not written", f.name());
        }
        let series: Vec<&String> = l.iter().filter(|x| !x.starts_with('#')).collect();
        let distinct: HashSet<&str> = series
            .iter()
            .map(|x| x.rsplit_once(' ').unwrap().0)
            .collect();
        assert_eq!(distinct.len(), series.len(), "duplicate series");
    }

    #[test]
    fn repeated_names_get_distinct_labels() {
        assert_eq!(
            unique(["a", "b", "a", "a"].iter().map(|s| s.to_string())),
            vec!["a", "b", "a#2", "a#3"]
        );
    }

    #[test]
    fn stalled_qps_get_series_up_to_the_cap_longest_first() {
        let r = rank(7);
        let q = |i: u64, s: f64| StalledQp {
            channel: "0".into(),
            qp: i,
            qp_num: Some(100 + i as u32),
            peer_gid: Some("fe80:0000:0000:0000:0000:0000:0000:0001".into()),
            peer_qp_num: None,
            outstanding: 3,
            stalled_s: s,
        };
        let devs = vec![
            DevStall {
                name: "mlx5_0".into(),
                hw_type: "mlx5".into(),
                outstanding: 9,
                stalled: 1,
                qps: vec![q(1, 2.5)],
            },
            DevStall {
                name: "mlx5_1".into(),
                hw_type: "mlx5".into(),
                outstanding: 0,
                stalled: 0,
                qps: vec![],
            },
        ];
        let mut out = String::new();
        assert_eq!(render_stalls(&r, &devs, &mut out), 0);
        assert!(out.contains("rccl_telemetry_stalled_qps{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_0\",hw_type=\"mlx5\"} 1\n"), "{out}");
        assert!(out.contains("rccl_telemetry_stalled_qps{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_1\",hw_type=\"mlx5\"} 0\n"), "{out}");
        assert!(out.contains("rccl_telemetry_wqe_outstanding{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_0\",hw_type=\"mlx5\"} 9\n"), "{out}");
        assert!(out.contains(",device=\"mlx5_0\",hw_type=\"mlx5\",channel=\"0\",qp=\"1\",qp_num=\"101\",peer_gid=\"fe80:0000:0000:0000:0000:0000:0000:0001\",peer_qp_num=\"\"} 2.5\n"), "{out}");
        // Past the cap: the longest stay, the rest are counted.
        let many = vec![DevStall {
            name: "d".into(),
            hw_type: "t".into(),
            outstanding: 1,
            stalled: 70,
            qps: (0..70).map(|i| q(i, i as f64)).collect(),
        }];
        let mut out = String::new();
        assert_eq!(render_stalls(&r, &many, &mut out), 6);
        assert_eq!(
            out.lines()
                .filter(|l| l.starts_with("rccl_telemetry_qp_stalled_seconds{"))
                .count(),
            MAX_STALLED_QP_SERIES
        );
        assert!(
            out.contains("qp=\"69\"") && !out.contains("qp=\"5\""),
            "{out}"
        );
        assert!(
            out.contains(
                "rccl_telemetry_stalled_qp_series_dropped{host=\"h1\",pid=\"7\",rank=\"3\"} 6\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn units_become_base_units() {
        assert_eq!(
            base_unit("pfc_rx_pause_duration_us"),
            (
                "pfc_rx_pause_duration_seconds".into(),
                1e-6,
                Some("seconds")
            )
        );
        assert_eq!(
            base_unit("fec_corrected_bits"),
            ("fec_corrected_bytes".into(), 0.125, Some("bytes"))
        );
        assert_eq!(base_unit("cnp_sent"), ("cnp_sent".into(), 1.0, None));
        assert_eq!(base_unit("link_status_msgs").0, "link_status_msgs");
    }
}
