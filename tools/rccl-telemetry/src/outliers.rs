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
//! kind is a [`Kind`]. The fabric classifier (slow NIC, link or host from the joined links) is
//! `fabric`, the folding and printing of the findings `text`.

mod availability;
mod cq_errors;
pub mod fabric;
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
        }
    }

    /// The name for people: "slow link".
    pub fn label(self) -> String {
        self.as_str().replace('_', " ")
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
}

#[derive(Debug, Serialize)]
pub struct OutlierReport {
    pub threshold: f64,
    pub ranks: usize,
    pub devices: usize,
    pub ranks_flagged: usize,
    pub findings: Vec<Finding>,
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
            ..new_finding(self.file, self.path.clone(), kind, metric, value)
        }
    }
}

/// What every detector looks at: the run, its used devices, the options.
pub struct Input<'a> {
    pub run: &'a Run,
    pub devs: Vec<Dev<'a>>,
    pub opt: &'a Options,
}

impl Input<'_> {
    /// Enough devices for a median and a MAD to mean something.
    fn statistical(&self) -> bool {
        self.devs.len() >= self.opt.min_population
    }
}

/// A detector: one rule over the run, its findings in any order (`find` ranks them).
pub type Detector = fn(&Input) -> Vec<Finding>;

/// Every detector, in the order their findings are gathered (ties in the ranking keep it).
pub const DETECTORS: [(&str, Detector); 10] = [
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
];

/// A finding about a whole rank file rather than one of its devices.
fn rank_finding(l: &crate::load::Loaded, kind: Kind, metric: &str, value: f64) -> Finding {
    new_finding(&l.file, l.path.display().to_string(), kind, metric, value)
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

/// Finds the outliers of one run: every detector's findings, strongest first.
///
/// A device that is an end of a slow link, or one NIC of a slow host, is not also reported
/// for its device-wide latency tail: the link (host) explains it.
pub fn find(run: &Run, opt: &Options) -> OutlierReport {
    let input = Input {
        run,
        devs: used_devices(run),
        opt,
    };
    let mut out: Vec<Finding> = DETECTORS.iter().flat_map(|(_, d)| d(&input)).collect();
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
        b.score.total_cmp(&a.score).then_with(|| {
            (a.kind.as_str(), &a.rank, a.device_id).cmp(&(b.kind.as_str(), &b.rank, b.device_id))
        })
    });
    let mut flagged: Vec<&str> = out.iter().map(|f| f.rank.as_str()).collect();
    flagged.sort_unstable();
    flagged.dedup();
    OutlierReport {
        threshold: opt.threshold,
        ranks: run.files.len(),
        devices: input.devs.len(),
        ranks_flagged: flagged.len(),
        findings: out,
    }
}

pub use fabric::{classify_fabric, Culprit, MIN_LINK_SAMPLES};
pub use text::{fold, render_text, render_text_layout, render_with, OutlierText, Row};
