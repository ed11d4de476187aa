//! The family table: every fixed metric family's name, type, help text and labels, and which
//! are written at which depth. Separate from the renderers so the whole vocabulary of the
//! textfile reads in one place.

pub const PREFIX: &str = "rccl_telemetry_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
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
    /// ... `channel` (and `comm`, `comm_rank`, `comm_nranks` for a communicator's).
    Channel,
    /// ... `channel` (and the communicator's), `qp`, `role`.
    Qp,
}

impl Scope {
    /// The label names, in the order they are written. `rank` is written only when known, the
    /// communicator's labels only on a communicator's channels and QPs.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Scope::Run => &[],
            Scope::Host => &["host"],
            Scope::Rank => &["host", "pid", "rank"],
            Scope::Device => &["host", "pid", "rank", "device", "hw_type"],
            Scope::Channel => &[
                "host",
                "pid",
                "rank",
                "device",
                "hw_type",
                "channel",
                "comm",
                "comm_rank",
                "comm_nranks",
            ],
            Scope::Qp => &[
                "host",
                "pid",
                "rank",
                "device",
                "hw_type",
                "channel",
                "comm",
                "comm_rank",
                "comm_nranks",
                "qp",
                "role",
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

    pub(super) fn at(self, scope: Scope) -> Family {
        Family { scope, ..self }
    }
}

pub(super) const fn fam(
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
/// values are sums over their QPs); written at each level asked for. Which counter goes to
/// which family (and under which label value) the counter table says.
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
pub const WQES_SLOW: Family = fam(
    "wqes_slow_total",
    Counter,
    "Measured completions above the WQE latency monitor's threshold (slow_threshold_ns).",
    S::Device,
    &[],
);
pub const STALL_EPISODES: Family = fam(
    "stall_episodes_total",
    Counter,
    "Stall episodes of the QPs (a completion expected and none for stall_ms).",
    S::Device,
    &[],
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

pub const QP_SETTINGS: Family = fam(
    "qp_settings",
    Gauge,
    "QPs of the device with these path and retry settings, one series per distinct combination (an empty label was not told): a device whose QPs disagree has several.",
    S::Device,
    &[
        "traffic_class",
        "sl",
        "path_mtu",
        "timeout",
        "retry_cnt",
        "rnr_retry",
        "min_rnr_timer",
    ],
);

pub const PORT_QOS: Family = fam(
    "port_qos",
    Gauge,
    "1 for each device whose port's active MTU or DCB settings are known: active_mtu in bytes, pfc_enabled the priorities with PFC enabled, dscp_priority the DSCP-to-priority map as dscp:priority pairs (\"none\": an empty list; an empty label: not known, as on Soft-RoCE, veth and VMs).",
    S::Device,
    &["active_mtu", "pfc_enabled", "dscp_priority"],
);

/// The families written at each scope, in output order.
pub const DEVICE_ONLY: [Family; 5] = [TX_BYTES, RX_BYTES, CQ_ERRORS, CQ_POLLS, ACTIVE_CHANNELS];
/// The software counters' families are the counter table's ([`crate::counters::families`]):
/// each of its rows names the family of its series.
pub const CHANNEL_TOTALS: [Family; 3] = [REQUESTS, UNTRACKED_QPS, QPS];

/// Every fixed family at the given depth (hardware counter families are named after the
/// counters: see [`super::hw_metric`]).
/// The WQE latency monitor's per-QP families (RCCL_TELEMETRY_SLOW_NS set; the QP level only):
/// its quantiles as a summary, and its standard deviation.
pub const WQE_LATENCY: Family = fam(
    "wqe_latency_seconds",
    Summary,
    "The WQE latency monitor's post-to-poll latency of the QP's measured completions: p50, p90, p99 and p99.9 (within 1/16), the exact sum and the count.",
    S::Qp,
    &["quantile"],
);
pub const WQE_LATENCY_STDDEV: Family = fam(
    "wqe_latency_stddev_seconds",
    Gauge,
    "The WQE latency monitor's sample standard deviation of the QP's measured completion latencies (exact).",
    S::Qp,
    &[],
);

pub fn families(level: Level) -> Vec<Family> {
    let mut v = vec![START_TIME, LAST_WRITE];
    let counts = crate::counters::families();
    v.extend(DEVICE_ONLY);
    v.extend(counts.iter().copied());
    v.extend(CHANNEL_TOTALS);
    v.push(COMPLETION);
    v.push(COMPLETION_LOG);
    v.push(HW_AVAILABLE);
    v.push(QP_SETTINGS);
    v.push(PORT_QOS);
    if level >= Level::Channel {
        v.extend(
            counts
                .iter()
                .chain(&CHANNEL_TOTALS)
                .chain([&COMPLETION, &COMPLETION_LOG])
                .map(|f| f.at(S::Channel)),
        );
    }
    if level >= Level::Qp {
        v.extend(counts.iter().chain([&COMPLETION]).map(|f| f.at(S::Qp)));
        v.extend([WQE_LATENCY, WQE_LATENCY_STDDEV]);
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
