//! The renderer's input: plain data (a rank, its devices, channels, QPs, counters) that each
//! side converts what it has into. Separate because both crates build these and only these.

use crate::counters::{Field, N};

/// The software counters of a QP, or their sum over a channel or a device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Every counter of the table ([`crate::counters::FIELDS`]), in its order (an optional one
    /// absent is 0); index it with a [`Field`].
    pub values: [u64; N],
    /// Whether each counter was told: an optional one only where the file or the slot has it
    /// (a sum: where any of its parts has it). The renderer writes no series for an optional
    /// counter nothing told (absent, not zero); the others it writes whatever this says.
    pub present: [bool; N],
    /// The completion-latency histogram (buckets of the rank's interval, the last open).
    pub hist: Vec<u64>,
    /// The log-scale histogram, sparse and sorted: `(lo_ns, hi_ns, count)` with inclusive
    /// bounds, `hi_ns` None for the open last bucket (channels and devices; QPs have none).
    pub log_hist: Vec<(u64, Option<u64>, u64)>,
}

impl std::ops::Index<Field> for Counts {
    type Output = u64;
    fn index(&self, f: Field) -> &u64 {
        &self.values[f as usize]
    }
}

impl std::ops::IndexMut<Field> for Counts {
    fn index_mut(&mut self, f: Field) -> &mut u64 {
        &mut self.values[f as usize]
    }
}

impl Counts {
    /// The counts of the table's values (`values()` of the writer's or the reader's struct)
    /// and a latency histogram; no log-scale histogram.
    pub fn of(values: [Option<u64>; N], hist: Vec<u64>) -> Counts {
        Counts {
            present: values.map(|v| v.is_some()),
            values: values.map(|v| v.unwrap_or(0)),
            hist,
            log_hist: Vec::new(),
        }
    }

    pub fn add(&mut self, o: &Counts) {
        for (a, b) in self.values.iter_mut().zip(o.values) {
            *a = a.saturating_add(b);
        }
        for (a, b) in self.present.iter_mut().zip(o.present) {
            *a |= b;
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
    /// The WQE latency monitor's statistics (None: the monitor off, or nothing measured).
    pub monitor: Option<QpLatency>,
}

/// The WQE latency monitor's statistics of a QP's measured completions, in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QpLatency {
    pub count: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    /// p50, p90, p99, p99.9.
    pub quantiles_ns: [u64; 4],
}

/// The communicator a channel belongs to, as its series' labels: `comm` (RCCL's commHash,
/// "0x" and hex), `comm_rank` (the rank's place in it) and `comm_nranks` (its size). Channels
/// of the process-wide calls have none (the labels are absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommLabels {
    pub hash: String,
    pub rank: i64,
    pub nranks: i64,
}

impl CommLabels {
    /// The three label pairs, in the order they are written.
    pub fn pairs(&self) -> [(&'static str, String); 3] {
        [
            ("comm", self.hash.clone()),
            ("comm_rank", self.rank.to_string()),
            ("comm_nranks", self.nranks.to_string()),
        ]
    }
}

#[derive(Debug, Clone)]
pub struct Channel {
    /// None when the transport gave no channel ids.
    pub id: Option<u64>,
    /// The communicator it belongs to (None: the process-wide calls').
    pub comm: Option<CommLabels>,
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
    /// The counters of the device's finalized communicators, summed: part of the device's
    /// counters (which never go down when a communicator goes), in no channel's.
    pub finalized: Counts,
    /// Their requests completed.
    pub finalized_requests: u64,
    /// Their QP slots (a device whose communicators are all gone still drove them).
    pub finalized_qps: u64,
    /// The device's QPs by their path and retry settings, each distinct combination once with
    /// its QP count (QPs with none told are left out); see [`QpSettings::tally`].
    pub qp_settings: Vec<(QpSettings, u64)>,
    /// The port's active MTU and DCB settings, each None where the file has none.
    pub port_qos: PortQos,
}

/// A port's active MTU and QoS settings, as the `rccl_telemetry_port_qos` series names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortQos {
    pub active_mtu: Option<u32>,
    /// The priorities with PFC enabled.
    pub pfc_enabled: Option<Vec<u8>>,
    /// (DSCP, priority), by DSCP.
    pub dscp_priority: Option<Vec<(u8, u8)>>,
}

/// The writer's side (the library's textfile).
impl From<&crate::write::PortQosReport> for PortQos {
    fn from(q: &crate::write::PortQosReport) -> PortQos {
        PortQos {
            active_mtu: q.active_mtu,
            pfc_enabled: q.pfc_enabled.clone(),
            dscp_priority: q
                .dscp_priority
                .as_ref()
                .map(|m| m.iter().map(|(d, p)| (*d, *p)).collect()),
        }
    }
}

/// The reader's side (the tool's export).
impl From<&crate::read::Device> for PortQos {
    fn from(d: &crate::read::Device) -> PortQos {
        PortQos {
            active_mtu: d.active_mtu,
            pfc_enabled: d.pfc_enabled.clone(),
            dscp_priority: d
                .dscp_priority
                .as_ref()
                .map(|m| m.iter().map(|(d, p)| (*d, *p)).collect()),
        }
    }
}

impl PortQos {
    /// The label values, in [`super::PORT_QOS`]' order: the MTU; the PFC priorities joined by
    /// ","; the DSCP map as "dscp:priority" joined by ",". "none" for an empty list, "" for
    /// unknown.
    pub fn values(&self) -> [String; 3] {
        fn list<T>(v: &Option<Vec<T>>, f: impl Fn(&T) -> String) -> String {
            match v {
                None => String::new(),
                Some(v) if v.is_empty() => "none".into(),
                Some(v) => v.iter().map(f).collect::<Vec<_>>().join(","),
            }
        }
        [
            self.active_mtu.map(|m| m.to_string()).unwrap_or_default(),
            list(&self.pfc_enabled, |p| p.to_string()),
            list(&self.dscp_priority, |(d, p)| format!("{d}:{p}")),
        ]
    }

    /// Whether anything is known.
    pub fn is_known(&self) -> bool {
        *self != PortQos::default()
    }
}

/// The path and retry settings the `rccl_telemetry_qp_settings` series names as labels (None:
/// not told, an empty label).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QpSettings {
    pub traffic_class: Option<u8>,
    pub sl: Option<u8>,
    pub path_mtu: Option<u32>,
    pub timeout: Option<u8>,
    pub retry_cnt: Option<u8>,
    pub rnr_retry: Option<u8>,
    pub min_rnr_timer: Option<u8>,
}

/// The settings a file's QP row names (the writer's side: the library's textfile).
impl From<&crate::write::QpAttrsReport> for QpSettings {
    fn from(a: &crate::write::QpAttrsReport) -> QpSettings {
        QpSettings {
            traffic_class: a.traffic_class,
            sl: a.sl,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
        }
    }
}

/// The settings a file's QP row names (the reader's side: the tool's export).
impl From<&crate::read::QpAttrs> for QpSettings {
    fn from(a: &crate::read::QpAttrs) -> QpSettings {
        QpSettings {
            traffic_class: a.traffic_class,
            sl: a.sl,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
        }
    }
}

impl QpSettings {
    /// The label values, in [`super::QP_SETTINGS`]' order.
    pub fn values(&self) -> [Option<u32>; 7] {
        let b = |v: Option<u8>| v.map(u32::from);
        [
            b(self.traffic_class),
            b(self.sl),
            self.path_mtu,
            b(self.timeout),
            b(self.retry_cnt),
            b(self.rnr_retry),
            b(self.min_rnr_timer),
        ]
    }

    /// Each distinct combination of `qps` with its count, in settings order; combinations
    /// with nothing told are left out.
    pub fn tally(qps: impl IntoIterator<Item = QpSettings>) -> Vec<(QpSettings, u64)> {
        let mut m = std::collections::BTreeMap::new();
        for q in qps.into_iter().filter(|q| *q != QpSettings::default()) {
            *m.entry(q).or_insert(0u64) += 1;
        }
        m.into_iter().collect()
    }
}

impl Device {
    /// A device the rank drove (it moved bytes or has QPs); the others are not written.
    pub fn is_used(&self) -> bool {
        self.tx_bytes > 0
            || self.rx_bytes > 0
            || self.finalized_qps > 0
            || self.channels.iter().any(|c| !c.qps.is_empty())
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
