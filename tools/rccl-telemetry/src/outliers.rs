//! `outliers`: ranks what stands out across the ranks and devices of one run.
//!
//! Every statistical rule compares a device with the whole population of used devices through
//! the median and the MAD (robust: a few anomalies cannot drag the centre or the spread, which
//! a mean and a standard deviation would). A value is an outlier when its robust z-score
//! (x - median) / (1.4826 * MAD) passes `threshold` AND it differs from the median by a
//! practically meaningful ratio, so a run whose ranks agree to the byte does not report noise.
//!
//! Each rule is a detector, one file each (as a metrics exporter has one file per collector):
//! a function from the run's [`Input`] to its findings, listed in [`DETECTORS`]. A finding's
//! kind is a [`Kind`], and every kind has a [`Severity`]: critical (the job is failing or
//! stuck), warning (something is slow or wrong and named), info (about the data). The fabric
//! classifier (slow NIC, link or host from the joined links) is `fabric`, the hang's root and
//! its stalled QPs `hang`, the folding of the findings into one row per culprit and their
//! printing `text`. What the run is too small or too uniform to tell is a [`Caveat`], said in
//! one line, never a silent all-clear.

mod availability;
mod cq_errors;
mod explain;
pub mod fabric;
mod hang;
mod hw_counter;
mod latency_tail;
mod lossy_class;
pub mod qp_lint;
mod samples_dropped;
mod skew;
mod slot_miss;
mod snapshot;
pub mod text;
mod untracked;

use crate::context::RunContext;
use crate::hwclass::Category;
use crate::load::Run;
use crate::model::{Device, TelemetryFile};
use crate::stats::{fmt_count, Robust};
use crate::summary::rank_label;
use serde::Serialize;

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
    /// Counters whose median is near 0: the least excess over the median, in events.
    pub min_events: f64,
    /// Latency tail: the least share of a device's completions beyond the run's typical p99.
    pub min_tail_share: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: 3.5,
            min_skew: 0.10,
            min_ratio: 2.0,
            min_population: 5,
            min_events: 10.0,
            min_tail_share: 0.10,
        }
    }
}

/// What kind of anomaly a finding is: one variant per thing a detector can say. Its one
/// spelling is [`Kind::as_str`]: the JSON's (`--json`, `"kind"`), the tables' (with spaces) and
/// the tool README's table of kinds (generated from [`Kind::meaning`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, strum::VariantArray)]
pub enum Kind {
    TxByteSkew,
    RxByteSkew,
    LatencyTail,
    HwCounter,
    CqErrors,
    UntrackedQps,
    SlotMiss,
    CounterUnavailable,
    CounterAvailable,
    Snapshot,
    SamplesDropped,
    SlowNic,
    SlowLink,
    SlowHost,
    SlowLinkOneWay,
    HostSideDelay,
    SlowLinkOrNic,
    StalledQps,
    HangRoot,
    QpConfigMismatch,
    MtuMismatch,
    RnrInfiniteRetry,
    QpConfigUnusual,
    LossyClassTraffic,
}

impl Kind {
    /// The name in the JSON and in scripts: `"slow_link"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::TxByteSkew => "tx_byte_skew",
            Kind::RxByteSkew => "rx_byte_skew",
            Kind::LatencyTail => "latency_tail",
            Kind::HwCounter => "hw_counter",
            Kind::CqErrors => "cq_errors",
            Kind::UntrackedQps => "untracked_qps",
            Kind::SlotMiss => "slot_miss",
            Kind::CounterUnavailable => "counter_unavailable",
            Kind::CounterAvailable => "counter_available",
            Kind::Snapshot => "snapshot",
            Kind::SamplesDropped => "samples_dropped",
            Kind::SlowNic => "slow_nic",
            Kind::SlowLink => "slow_link",
            Kind::SlowHost => "slow_host",
            Kind::SlowLinkOneWay => "slow_link_one_way",
            Kind::HostSideDelay => "host_side_delay",
            Kind::SlowLinkOrNic => "slow_link_or_nic",
            Kind::StalledQps => "stalled_qps",
            Kind::HangRoot => "hang_root",
            Kind::QpConfigMismatch => "qp_config_mismatch",
            Kind::MtuMismatch => "mtu_mismatch",
            Kind::RnrInfiniteRetry => "rnr_infinite_retry",
            Kind::QpConfigUnusual => "qp_config_unusual",
            Kind::LossyClassTraffic => "lossy_class_traffic",
        }
    }

    /// How bad it is for the job: critical (failing or stuck), warning (slow or wrong, with a
    /// culprit), info (about the data: a file, a counter, a gap).
    pub fn severity(self) -> Severity {
        match self {
            Kind::HangRoot | Kind::StalledQps | Kind::CqErrors => Severity::Critical,
            Kind::CounterUnavailable
            | Kind::CounterAvailable
            | Kind::Snapshot
            | Kind::SamplesDropped
            | Kind::QpConfigUnusual => Severity::Info,
            _ => Severity::Warning,
        }
    }

    /// A kind that names a culprit by itself (a NIC, link, host, process or hang root): the
    /// other findings about the same NIC fold into its row.
    pub fn is_culprit(self) -> bool {
        matches!(
            self,
            Kind::HangRoot
                | Kind::SlowNic
                | Kind::SlowHost
                | Kind::SlowLink
                | Kind::SlowLinkOneWay
                | Kind::HostSideDelay
                | Kind::SlowLinkOrNic
        )
    }

    /// The name for people: "slow link".
    pub fn label(self) -> String {
        self.as_str().replace('_', " ")
    }

    /// What a finding of the kind says, for the tool README's table of kinds.
    pub fn meaning(self) -> &'static str {
        match self {
            Kind::TxByteSkew => "a device sent far more or far less than the others (median and MAD)",
            Kind::RxByteSkew => "a device received far more or far less than the others",
            Kind::LatencyTail => "a device's p99 completion latency stands above the run's, with a tenth of its completions beyond twice the run's p99",
            Kind::HwCounter => "a problem hardware counter (CNP, ECN, PFC pause, drop, retransmit, sequence, error) well above the run's; a row per category",
            Kind::CqErrors => "completions drained with an error status: each failed its collective",
            Kind::UntrackedQps => "QPs that got no stats slot: their traffic is missing from every counter",
            Kind::SlotMiss => "CTS FIFO slot misses well above the run's",
            Kind::CounterUnavailable => "a counter reads -1 on a few devices of a hw_type and is read on the others",
            Kind::CounterAvailable => "a counter is read on a few devices of a hw_type and reads -1 on most",
            Kind::Snapshot => "a snapshot among final files: its counters cover only part of the run",
            Kind::SamplesDropped => "the sampler's bounded buffer overflowed: the time series has gaps",
            Kind::SlowNic => "a NIC whose links are slow: the NIC, its cable, its switch port (below)",
            Kind::SlowLink => "a NIC pair slow both ways that no NIC explains: the path between them (below)",
            Kind::SlowHost => "every NIC of a host of two or more slow: the host (PCIe, CPU, memory, its ToR; below)",
            Kind::SlowLinkOneWay => "one direction of a pair slow, the other normal: congestion or a degraded hop that way (below)",
            Kind::HostSideDelay => "a NIC's own completions slow, its peers' towards it not: its process polls late (below)",
            Kind::SlowLinkOrNic => "a NIC pair slow both ways that the files cannot pin on one end or the path (a 2-host job's only link): both named, with what would tell them apart",
            Kind::StalledQps => "QPs with work outstanding and no completion for the stall time, per waiting NIC and peer",
            Kind::HangRoot => "the root of a hang: a frozen rank, a cycle on a dead link, or the end whose links went quiet first",
            Kind::QpConfigMismatch => "QPs whose traffic class, SL, ACK timeout, retry count or RNR settings differ from the rest of their NIC's QPs or from their peer's end (qp_lint.md)",
            Kind::MtuMismatch => "QPs whose path MTU differs from their peer's end of the connection, or is below both ports' active MTU",
            Kind::RnrInfiniteRetry => "QPs with rnr_retry 7 (for ever) and min_rnr_timer 0: every RNR NAK stalls them 655 ms, and they never fail",
            Kind::QpConfigUnusual => "every QP of the run agrees on a setting a RoCE fabric rarely wants (traffic class 0): a note, not a warning",
            Kind::LossyClassTraffic => "RoCE on a priority without PFC on a NIC configured for lossless RoCE: a QP whose class maps to such a priority beside QPs on a PFC priority, or more traffic counted there than all the port's non-RDMA traffic",
        }
    }
}

impl Serialize for Kind {
    /// As its name, [`Kind::as_str`].
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How bad a finding is; rows are ranked by it first (critical first), then by score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// What the run cannot tell, said in one line with its evidence: `too_few_to_tell` (the
/// link matrix cannot say which end is slow, or its healthy baseline is itself most of it),
/// `hang_without_root` (QPs stalled or errored, and why no root can be named).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Caveat {
    pub kind: &'static str,
    pub evidence: String,
}

impl Caveat {
    /// The caveat's title for people.
    pub fn title(&self) -> &'static str {
        match self.kind {
            "hang_without_root" => "Hang, no root named",
            "missing_files" => "Missing files",
            "several_jobs" => "Several jobs",
            "imported_logs" => "From logs",
            _ => "Too few to tell",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What kind of anomaly (serialised as its name: `"latency_tail"`).
    pub kind: Kind,
    /// The kind's severity.
    pub severity: Severity,
    /// Who it is about, as every row names it: "host:NIC" (a device), "a:NIC <-> b:NIC" (a
    /// link), "a:NIC -> b:NIC" (one direction), the host (a slow host), "host:pid" (a rank file
    /// that drives several NICs).
    pub culprit: String,
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
    /// How sure the finding is, 0 to 1: a fabric verdict from the cells it explains, its
    /// margin over the next explanation and the matrix's size; a statistical rule from its
    /// robust z and population; 1 for what is read from the files as it is (an error count, a
    /// counter that reads -1). [`confidence_label`] words it.
    pub confidence: f64,
    /// `slow_link_or_nic`: the explanations that fit equally (either end, the path); empty
    /// otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
    /// Fabric findings: the NICs (host, device name) of the culprit, as the links' matrix
    /// names them (one NIC, the two ends of a link, every NIC of a host); empty otherwise.
    #[serde(skip)]
    pub nics: Vec<(String, String)>,
    /// Hang roots: the ranks ("host:pid") waiting on it or blocked behind it, whose stalled
    /// and errored QPs fold into its row.
    #[serde(skip)]
    pub behind: Vec<String>,
}

/// One of the explanations an ambiguous finding names: its kind and culprit, as a finding of
/// that kind would name it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Alternative {
    pub kind: Kind,
    pub culprit: String,
}

/// "high" (0.8 and above), "medium" (0.5 and above) or "low": a confidence in words.
pub fn confidence_label(c: f64) -> &'static str {
    if c >= 0.8 {
        "high"
    } else if c >= 0.5 {
        "medium"
    } else {
        "low"
    }
}

#[derive(Debug, Serialize)]
pub struct OutlierReport {
    pub threshold: f64,
    pub ranks: usize,
    pub devices: usize,
    pub ranks_flagged: usize,
    /// Rows (culprits) by severity: critical, warning, info.
    pub critical: usize,
    pub warning: usize,
    pub info: usize,
    /// What the run cannot tell (one line each, printed before the rows).
    pub caveats: Vec<Caveat>,
    /// One row per culprit, every finding about it folded in, most severe first.
    pub rows: Vec<Row>,
    pub findings: Vec<Finding>,
    /// The peer NICs and ranks the files name that no file covers (`completeness`); absent
    /// when every one has a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::completeness::Completeness>,
    /// Each NIC's distinct QP settings with their QP counts, and the QPs that differ (QP lint,
    /// files of version 5); absent when no QP told its settings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub qp_settings: Vec<qp_lint::NicSettings>,
}

/// One used device of the run, with the file it is in.
pub struct Dev<'a> {
    pub file: &'a TelemetryFile,
    pub path: String,
    pub dev: &'a Device,
}

impl Dev<'_> {
    fn finding(&self, kind: Kind, metric: &str, value: f64) -> Finding {
        Finding {
            device_id: Some(self.dev.device_id),
            roce_device: Some(self.dev.roce_device.clone()),
            culprit: nic_label(&self.file.host_name, &self.dev.roce_device),
            ..new_finding(self.file, self.path.clone(), kind, metric, value)
        }
    }
}

/// "host:NIC": how every row names a device.
pub fn nic_label(host: &str, device: &str) -> String {
    format!("{host}:{device}")
}

/// What every detector looks at: the run and its shared analyses (the joined links, the hang:
/// [`RunContext`]), its used devices, the options, and the fabric's classification of the
/// links under those options, computed once, when first asked for.
pub struct Input<'c, 'r> {
    pub cx: &'c RunContext<'r>,
    pub run: &'r Run,
    pub devs: Vec<Dev<'r>>,
    pub opt: &'c Options,
    fabric: std::cell::OnceCell<fabric::Analysis>,
}

impl<'c, 'r> Input<'c, 'r> {
    pub fn new(cx: &'c RunContext<'r>, opt: &'c Options) -> Input<'c, 'r> {
        Input {
            cx,
            run: cx.run(),
            devs: used_devices(cx.run()),
            opt,
            fabric: std::cell::OnceCell::new(),
        }
    }

    /// Enough devices for a median and a MAD to mean something.
    fn statistical(&self) -> bool {
        self.devs.len() >= self.opt.min_population
    }

    /// The run's QPs joined into links (`links::join`, once per command).
    pub fn links(&self) -> &crate::links::LinkReport {
        self.cx.links()
    }

    /// The fabric's classification of the links.
    pub fn fabric(&self) -> &fabric::Analysis {
        self.fabric
            .get_or_init(|| fabric::analyse(self.links(), self.opt))
    }

    /// The wait-for graph of the run and its roots (`crate::hang::analyse_with`, once per
    /// command).
    pub fn hang(&self) -> &crate::hang::Hang {
        self.cx.hang()
    }
}

/// A detector: one rule over the run, its findings in any order (`find` ranks them).
pub type Detector = fn(&Input) -> Vec<Finding>;

/// Every detector, in the order their findings are gathered (ties in the ranking keep it).
pub const DETECTORS: [(&str, Detector); 12] = [
    ("byte skew", skew::find),
    ("latency tail", latency_tail::find),
    ("hw counters", hw_counter::find),
    ("counter availability", availability::find),
    ("cq errors", cq_errors::find),
    ("untracked qps", untracked::find),
    ("slot misses", slot_miss::find),
    ("snapshots", snapshot::find),
    ("samples dropped", samples_dropped::find),
    ("fabric", fabric::find),
    ("hang", hang::find),
    ("qp lint", qp_lint::find),
];

/// A finding about a whole rank file rather than one of its devices: named by its NIC when it
/// drives one, else by host:pid.
fn rank_finding(l: &crate::load::Loaded, kind: Kind, metric: &str, value: f64) -> Finding {
    let mut f = new_finding(&l.file, l.path.display().to_string(), kind, metric, value);
    let mut used = l.file.devices.iter().filter(|d| d.is_used());
    if let (Some(d), None) = (used.next(), used.next()) {
        f.culprit = nic_label(&l.file.host_name, &d.roce_device);
    }
    f
}

/// A finding with no device, no statistics and no evidence yet.
fn new_finding(
    file: &TelemetryFile,
    path: String,
    kind: Kind,
    metric: &str,
    value: f64,
) -> Finding {
    Finding {
        kind,
        severity: kind.severity(),
        culprit: rank_label(file),
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
        confidence: 1.0,
        alternatives: Vec::new(),
        nics: Vec::new(),
        behind: Vec::new(),
    }
}

fn with_stats(mut f: Finding, r: &Robust, z: f64) -> Finding {
    f.population = r.n;
    f.median = Some(r.median);
    f.mad = Some(r.mad);
    f.z = Some(z);
    f.score = z.abs();
    f.confidence = statistical_confidence(z, r.n);
    f
}

/// A statistical rule's confidence: its robust z against three times the cut-off (3.5), and
/// its population (a median and MAD of 5 devices are rougher than of 24 and more).
fn statistical_confidence(z: f64, n: usize) -> f64 {
    let strength = (z.abs() / (3.0 * 3.5)).min(1.0);
    let population = (0.6 + 0.4 * n as f64 / 24.0).min(1.0);
    (0.5 + 0.5 * strength) * population
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

/// The used devices of a run, file by file.
fn used_devices(run: &Run) -> Vec<Dev<'_>> {
    run.files
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
        .collect()
}

/// Finds the outliers of one run: every detector's findings, most severe first and, within a
/// severity, strongest first; folded into one row per culprit; and what the run cannot tell.
///
/// A device's latency tail that the fabric's culprits explain (its slow completions go to or
/// come from them) is evidence for them, not a finding of its own ([`explain::fold_tails`]).
pub fn find(run: &Run, opt: &Options) -> OutlierReport {
    find_in(&RunContext::new(run), opt)
}

/// [`find`] on a run whose shared analyses other parts of the command read too.
pub fn find_in(cx: &RunContext, opt: &Options) -> OutlierReport {
    let run = cx.run();
    let input = Input::new(cx, opt);
    let mut out: Vec<Finding> = DETECTORS.iter().flat_map(|(_, d)| d(&input)).collect();
    let completeness = crate::completeness::Completeness::of_run(run);
    completeness.qualify(&mut out);
    explain::fold_tails(&input, &mut out);
    out.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| {
                (a.kind.as_str(), &a.rank, a.device_id).cmp(&(
                    b.kind.as_str(),
                    &b.rank,
                    b.device_id,
                ))
            })
    });
    let mut flagged: Vec<&str> = out.iter().map(|f| f.rank.as_str()).collect();
    flagged.sort_unstable();
    flagged.dedup();
    let mut caveats = fabric::caveats(&input);
    caveats.extend(hang::caveats(&input));
    caveats.extend(completeness.caveat());
    if crate::import::is_imported(run) {
        // What a log cannot give: the operator reads it beside the verdict, in every output.
        caveats.push(Caveat {
            kind: "imported_logs",
            evidence: crate::import::CAVEAT.to_string(),
        });
    }
    let rows = fold(&out);
    let count = |s: Severity| rows.iter().filter(|r| r.severity == s).count();
    OutlierReport {
        threshold: opt.threshold,
        ranks: run.files.len(),
        devices: input.devs.len(),
        ranks_flagged: flagged.len(),
        critical: count(Severity::Critical),
        warning: count(Severity::Warning),
        info: count(Severity::Info),
        caveats,
        findings: out,
        rows,
        incomplete: (!completeness.is_complete()).then_some(completeness),
        qp_settings: qp_lint::view(&input),
    }
}

pub use fabric::{classify_fabric, Culprit, MIN_LINK_SAMPLES, MIN_TAIL_SAMPLES};
pub use text::{fold, render_text, render_text_layout, render_with, OutlierText, Row};
