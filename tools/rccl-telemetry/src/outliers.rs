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
pub mod fabric;
mod hang;
mod hw_counter;
mod latency_tail;
mod samples_dropped;
mod skew;
mod slot_miss;
mod snapshot;
pub mod text;
mod untracked;

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

/// What kind of anomaly a finding is: one variant per thing a detector can say. Its name in
/// the JSON (`--json`, `"kind"`) is [`Kind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
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
    StalledQps,
    HangRoot,
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
            Kind::StalledQps => "stalled_qps",
            Kind::HangRoot => "hang_root",
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
            | Kind::SamplesDropped => Severity::Info,
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
        )
    }

    /// The name for people: "slow link".
    pub fn label(self) -> String {
        self.as_str().replace('_', " ")
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
    /// Fabric findings: the NICs (host, device name) of the culprit, as the links' matrix
    /// names them (one NIC, the two ends of a link, every NIC of a host); empty otherwise.
    #[serde(skip)]
    pub nics: Vec<(String, String)>,
    /// Hang roots: the ranks ("host:pid") waiting on it or blocked behind it, whose stalled
    /// and errored QPs fold into its row.
    #[serde(skip)]
    pub behind: Vec<String>,
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

/// What every detector looks at: the run, its used devices, the options; the joined links,
/// the fabric's classification and the hang analysis are computed once, when first asked for.
pub struct Input<'a> {
    pub run: &'a Run,
    pub devs: Vec<Dev<'a>>,
    pub opt: &'a Options,
    links: std::cell::OnceCell<crate::links::LinkReport>,
    fabric: std::cell::OnceCell<fabric::Analysis>,
    hang: std::cell::OnceCell<crate::waitfor::Hang>,
}

impl<'a> Input<'a> {
    pub fn new(run: &'a Run, opt: &'a Options) -> Input<'a> {
        Input {
            run,
            devs: used_devices(run),
            opt,
            links: std::cell::OnceCell::new(),
            fabric: std::cell::OnceCell::new(),
            hang: std::cell::OnceCell::new(),
        }
    }

    /// Enough devices for a median and a MAD to mean something.
    fn statistical(&self) -> bool {
        self.devs.len() >= self.opt.min_population
    }

    /// The run's QPs joined into links (`links::join`).
    pub fn links(&self) -> &crate::links::LinkReport {
        self.links.get_or_init(|| crate::links::join(self.run))
    }

    /// The fabric's classification of the links.
    pub fn fabric(&self) -> &fabric::Analysis {
        self.fabric
            .get_or_init(|| fabric::analyse(self.links(), self.opt))
    }

    /// The wait-for graph of the run and its roots (`waitfor::analyse`).
    pub fn hang(&self) -> &crate::waitfor::Hang {
        self.hang.get_or_init(|| crate::waitfor::analyse(self.run))
    }
}

/// A detector: one rule over the run, its findings in any order (`find` ranks them).
pub type Detector = fn(&Input) -> Vec<Finding>;

/// Every detector, in the order their findings are gathered (ties in the ranking keep it).
pub const DETECTORS: [(&str, Detector); 11] = [
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
/// A device that is an end of a slow link, or one NIC of a slow host, is not also reported
/// for its device-wide latency tail: the link (host) explains it.
pub fn find(run: &Run, opt: &Options) -> OutlierReport {
    let input = Input::new(run, opt);
    let mut out: Vec<Finding> = DETECTORS.iter().flat_map(|(_, d)| d(&input)).collect();
    let completeness = crate::completeness::Completeness::of_run(run);
    completeness.qualify(&mut out);
    let explained: Vec<(String, String)> = out
        .iter()
        .filter(|f| matches!(f.kind, Kind::SlowLink | Kind::SlowHost))
        .flat_map(|f| f.nics.iter().cloned())
        .collect();
    out.retain(|f| {
        f.kind != Kind::LatencyTail
            || !explained
                .iter()
                .any(|(h, d)| *h == f.host && Some(d) == f.roce_device.as_ref())
    });
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
    }
}

pub use fabric::{classify_fabric, Culprit, MIN_LINK_SAMPLES};
pub use text::{fold, render_text, render_text_layout, render_with, OutlierText, Row};
