//! The per-rank file as a reader takes it: typed data for every version this library has
//! written ([`crate::READ_VERSIONS`]: 1 to 5; the tool maps the in-tree engine's files
//! onto it through its `intree`).
//!
//! The tolerance of older versions is here: a key an older version lacks is optional
//! (`#[serde(default)]`, None when absent), and [`SourceFormat::of_version`] says which
//! version a file's "version" value names. Parsing is lenient where the format may grow:
//! unknown keys are ignored at every level (a later version adds snapshot keys at the top),
//! and everything a checker needs to say about an unexpected key comes from the JSON Schema,
//! not from here.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::counters::{values_fn, wqe_counts};

mod hw;
mod text;
mod wire;

pub use hw::{HwCounters, Named};
pub use text::{text, Text};

/// Which writer produced a file: this library (schema version 1) or RCCL's in-tree C engine
/// (version "1.0", mapped onto this model by `intree`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum SourceFormat {
    #[default]
    #[serde(rename = "v1")]
    V1,
    /// Version 2: version 1 plus the log-scale completion histogram of every channel and device.
    #[serde(rename = "v2")]
    V2,
    /// Version 3: version 2 plus every QP's identity and peer and the stall keys.
    #[serde(rename = "v3")]
    V3,
    /// Version 4: version 3 plus error completions per QP (by status, the first one), the QP's
    /// state, its last post and completion times, and errors by status per device.
    #[serde(rename = "v4")]
    V4,
    /// Version 5: version 4 plus the WQE latency monitor (slow_threshold_ns, num_wqe_slow,
    /// num_stalls, a QP's port, local_lid and latency statistics) and each QP's path and retry
    /// settings.
    #[serde(rename = "v5")]
    V5,
    #[serde(rename = "intree-1.0")]
    InTree,
}

impl SourceFormat {
    /// The format a file's "version" value names: 1 to 5 (this library's), or "1.0"
    /// (RCCL's in-tree engine); None for any other value.
    pub fn of_version(v: &serde_json::Value) -> Option<SourceFormat> {
        match v {
            serde_json::Value::Number(n) if n.as_i64() == Some(1) => Some(SourceFormat::V1),
            serde_json::Value::Number(n) if n.as_i64() == Some(2) => Some(SourceFormat::V2),
            serde_json::Value::Number(n) if n.as_i64() == Some(3) => Some(SourceFormat::V3),
            serde_json::Value::Number(n) if n.as_i64() == Some(4) => Some(SourceFormat::V4),
            serde_json::Value::Number(n) if n.as_i64() == Some(5) => Some(SourceFormat::V5),
            serde_json::Value::String(s) if s == crate::INTREE_VERSION => {
                Some(SourceFormat::InTree)
            }
            _ => None,
        }
    }

    /// The short name shown in tables, CSV rows and JSON.
    pub fn label(self) -> &'static str {
        match self {
            SourceFormat::V1 => "v1",
            SourceFormat::V2 => "v2",
            SourceFormat::V3 => "v3",
            SourceFormat::V4 => "v4",
            SourceFormat::V5 => "v5",
            SourceFormat::InTree => "intree-1.0",
        }
    }

    /// True when start_time/end_time are UTC and hw_samples timestamps are wall-clock ns, so
    /// they compare across hosts. The in-tree engine writes local times without a zone and
    /// CLOCK_MONOTONIC sample times.
    pub fn has_wall_clock(self) -> bool {
        matches!(
            self,
            SourceFormat::V1
                | SourceFormat::V2
                | SourceFormat::V3
                | SourceFormat::V4
                | SourceFormat::V5
        )
    }
}

/// One rccl_telemetry_<host>_<uid>_<pid>.json file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TelemetryFile {
    /// Who wrote it; not a key of either format (set by the loader).
    #[serde(skip)]
    pub format: SourceFormat,
    pub version: i64,
    pub host_name: String,
    pub process_name: String,
    pub process_id: i64,
    pub start_time: String,
    pub end_time: String,
    /// true: written at exit or by rcclTelemetryFlush; false: a snapshot of a live process.
    /// Absent in files written before snapshots existed (read as final).
    #[serde(rename = "final", default, skip_serializing_if = "Option::is_none")]
    pub is_final: Option<bool>,
    /// What wrote the file: exit, rcclTelemetryFlush, interval, or a signal name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    #[serde(default)]
    pub transport: Option<String>,
    pub histogram_interval_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_sample_interval: Option<u64>,
    pub devices: Vec<Device>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_samples: Option<Vec<HwSample>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_samples_dropped: Option<u64>,
    /// Version 3: the RCCL_TELEMETRY_STALL_MS in effect (0 = stall detection off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<u64>,
    /// Version 4: the process's rank from the launcher's environment (None: unknown, or an
    /// older file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u64>,
    /// Version 4: the communicators RCCL told of, live and finalized (None in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communicators: Option<Vec<Communicator>>,
    /// Version 5: the WQE latency monitor's threshold in ns (0: off; None: an older file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_threshold_ns: Option<u64>,
    /// What wrote the file when it was not the library: "nccl_log" (`import` rebuilt it from
    /// NCCL/RCCL debug logs); None for the library's own files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A communicator as the file names it (a channel's and a finalized record's "comm").
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommRef {
    /// Its id in the process (creation order).
    pub id: u64,
    /// RCCL's commHash, "0x" and hex.
    pub hash: String,
    pub rank: i64,
    pub nranks: i64,
}

impl CommRef {
    /// `0x<hash> rank <rank>/<nranks>`, as the library's lines name it.
    pub fn label(&self) -> String {
        format!("{} rank {}/{}", self.hash, self.rank, self.nranks)
    }
}

/// One communicator of a process (version 4, top-level "communicators").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Communicator {
    #[serde(flatten)]
    pub comm: CommRef,
    pub init_time: String,
    /// None while it is live.
    #[serde(default)]
    pub finalize_time: Option<String>,
}

/// A finalized communicator's counts on one device (version 4, device "finalized_comms"):
/// every counter its channels had, summed, under the channel keys' names.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FinalizedComm {
    /// None: the oldest finalized communicators past the writer's cap, summed.
    #[serde(default)]
    pub comm: Option<CommRef>,
    #[serde(default)]
    pub num_comms: u64,
    #[serde(default)]
    pub num_channels: u64,
    #[serde(default)]
    pub num_qps: u64,
    #[serde(flatten)]
    pub counters: Counters,
    #[serde(default)]
    pub num_req_completed: u64,
    #[serde(default)]
    pub num_data_qp: u64,
    #[serde(default)]
    pub num_cts_qp: u64,
    #[serde(default)]
    pub num_qp_untracked: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<Vec<LogBucket>>,
    /// Its QPs' remote NICs, each with the sums of its QPs towards it.
    #[serde(default)]
    pub peers: Vec<FinalizedPeer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_errors: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    pub first_cq_error: Option<FinalizedFirstError>,
    /// Stall detection on: WRs outstanding and QPs stalled when it was finalized, its longest
    /// stall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_outstanding: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_qps_stalled: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_start: Option<String>,
    /// Its QPs that had error completions or stalled (the first few), as their rows were when
    /// it was finalized.
    #[serde(default)]
    pub queue_pairs: Vec<FinalizedQp>,
    /// Errored or stalled QPs beyond those listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_qps_unlisted: Option<u64>,
}

/// A remote NIC of a finalized communicator's device: the peer keys and, in files that have
/// them, the sums of the device's QPs towards it (the link to it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FinalizedPeer {
    #[serde(flatten)]
    pub peer: DevicePeer,
    /// None in a record without the link sums.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
    /// Stall detection on: WRs outstanding and QPs stalled towards the NIC when it was
    /// finalized, their longest stall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_outstanding: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_qps_stalled: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_start: Option<String>,
}

/// A finalized communicator's first error completion and the QP it came on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalizedFirstError {
    #[serde(flatten)]
    pub error: QpError,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<u64>,
    /// The QP's slot index on its channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_num: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<QpPeer>,
}

/// A QP a finalized communicator's record keeps (it had error completions or stalled): its
/// channel and its row.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FinalizedQp {
    #[serde(default)]
    pub channel: Option<u64>,
    #[serde(flatten)]
    pub qp: QueuePair,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Device {
    pub device_id: u32,
    pub roce_device: String,
    pub eth_device: String,
    pub hw_type: String,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_cq_errors: u64,
    pub cq_poll_count: u64,
    pub num_channels: Option<u64>,
    pub active_channels: u64,
    pub num_qp_untracked: u64,
    #[serde(default)]
    pub wqe_size_stats: Vec<WqeSizeStat>,
    pub channels: Vec<Channel>,
    pub hw_counters: HwCounters,
    /// Version 2: the sum of the channels' log-scale histograms (see [`LogBucket`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<Vec<LogBucket>>,
    // Version 3: the local identity its QPs use; null or absent where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<u64>,
    /// Version 3: one entry per remote NIC its QPs were told of, with the completion latency
    /// towards it. None in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<DevicePeer>>,
    /// Version 3 (stall detection on): send WRs outstanding over the device's QPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_outstanding: Option<u64>,
    /// Version 3 (stall detection on): QPs stalled when the file was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_qps_stalled: Option<u64>,
    /// Version 4: error completions of the device's QPs by status name (`RETRY_EXC_ERR`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_errors_by_status: Option<BTreeMap<String, u64>>,
    /// Version 4: the finalized communicators' counts on this device (their channels are gone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalized_comms: Vec<FinalizedComm>,
    /// Version 5 (the WQE latency monitor on): completions above slow_threshold_ns, summed over
    /// the device's channels and finalized communicators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_slow: Option<u64>,
    /// Version 5 (stall detection on): stall episodes, summed likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_stalls: Option<u64>,
    /// Version 5: the port's active MTU in bytes, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_mtu: Option<u32>,
    /// Version 5: the priorities with PFC enabled on the port, where DCB is readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_enabled: Option<Vec<u8>>,
    /// Version 5: the port's DSCP-to-priority map, where DCB is readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp_priority: Option<BTreeMap<u8, u8>>,
}

/// A remote NIC a device's QPs talk to (version 3, device "peers").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DevicePeer {
    #[serde(default)]
    pub gid: Option<Text>,
    #[serde(default)]
    pub gid_ip: Option<Text>,
    #[serde(default)]
    pub lid: Option<u64>,
    #[serde(default)]
    pub num_qps: u64,
    /// The completions of the QPs towards this NIC, log-scale (absent with LOG_HISTOGRAM=0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<Vec<LogBucket>>,
}

/// A QP's peer (version 3, queue pair "peer").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QpPeer {
    pub qp_num: u64,
    #[serde(default)]
    pub gid: Option<Text>,
    #[serde(default)]
    pub gid_ip: Option<Text>,
    #[serde(default)]
    pub lid: Option<u64>,
}

/// One non-empty bucket of a log-scale completion histogram (file version 2):
/// `[lo_ns, hi_ns, count]`, bounds inclusive; `hi_ns` null for the last, open-ended bucket.
pub type LogBucket = (u64, Hi, u64);

/// A log-scale bucket's upper bound in ns, inclusive, or none for the open last bucket: 8
/// bytes where an `Option<u64>` takes 16 (an all-to-all run of 1,024 ranks holds 11 million
/// buckets in its per-peer histograms alone). A bound of `u64::MAX` reads as open, which it
/// is for any latency.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hi(u64);

impl Hi {
    /// The open last bucket.
    pub const OPEN: Hi = Hi(u64::MAX);

    pub const fn new(hi: Option<u64>) -> Hi {
        match hi {
            Some(h) => Hi(h),
            None => Hi::OPEN,
        }
    }

    /// The bound, none when the bucket is open.
    pub const fn get(self) -> Option<u64> {
        if self.0 == u64::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    pub const fn is_open(self) -> bool {
        self.0 == u64::MAX
    }
}

impl From<Option<u64>> for Hi {
    fn from(hi: Option<u64>) -> Hi {
        Hi::new(hi)
    }
}

impl std::fmt::Debug for Hi {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.get(), f)
    }
}

impl Serialize for Hi {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Hi {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hi, D::Error> {
        Option::<u64>::deserialize(d).map(Hi::new)
    }
}

/// A histogram's buckets with `hi_ns` as an `Option`: the type of the Prometheus text module
/// (which writes the library's live textfile and the export of a file alike), and a form for
/// arithmetic on the bounds.
pub fn log_buckets_opt(h: Option<&[LogBucket]>) -> Vec<(u64, Option<u64>, u64)> {
    let h = h.unwrap_or_default();
    h.iter().map(|b| (b.0, b.1.get(), b.2)).collect()
}

/// Adds sparse log-scale histograms bucket by bucket (keyed by lower bound), in order.
pub fn add_log_hist(dst: &mut Vec<LogBucket>, src: &[LogBucket]) {
    let mut m: BTreeMap<u64, (Hi, u64)> = dst.iter().map(|(lo, hi, n)| (*lo, (*hi, *n))).collect();
    for (lo, hi, n) in src {
        let e = m.entry(*lo).or_insert((*hi, 0));
        e.1 = e.1.saturating_add(*n);
        if hi.is_open() {
            e.0 = Hi::OPEN;
        }
    }
    *dst = m.into_iter().map(|(lo, (hi, n))| (lo, hi, n)).collect();
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WqeSizeStat {
    pub max_wqe_size: u64,
    pub num_wqe: u64,
}

/// The reader's struct of the counter table ([`crate::counters`]), and the latency keys
/// beside it: an optional row is None when the file lacks it and left out when None.
macro_rules! reader_counts {
    ([$($extra:tt)*] $( $(#[doc = $doc:literal])+ $key:ident : $t:ty, since $v:literal, prom($($p:tt)*); )*) => {
        /// The software counters a channel and a queue pair have in common.
        #[derive(Debug, Clone, Default, Serialize, Deserialize)]
        pub struct Counters {
            $(
                $(#[doc = $doc])+
                #[serde(skip_serializing_if = "crate::counters::absent")]
                pub $key: $t,
            )*
            $($extra)*
        }
    };
}
wqe_counts!(reader_counts
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    /// Preload files: sends retired by a later signalled completion without one of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_retired_unsignalled: Option<u64>,
);
wqe_counts!(values_fn Counters);

/// Read through [`wire::ChannelWire`] (the counters inline, not `flatten`: serde buffers a
/// flattened struct's every key before it fills the fields, which made parsing 2-3x slower).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "wire::ChannelWire")]
pub struct Channel {
    pub id: Option<u64>,
    #[serde(flatten)]
    pub counters: Counters,
    pub num_req_completed: u64,
    pub num_data_qp: u64,
    pub num_cts_qp: u64,
    pub num_qp_untracked: u64,
    pub queue_pairs: Vec<QueuePair>,
    /// Version 2: every sampled completion of the channel, log-scale (see [`LogBucket`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<Vec<LogBucket>>,
    /// Version 4: the communicator it belongs to (None: the process-wide calls', or an
    /// older file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<CommRef>,
    /// Not a key of the file: QPs of the channel a reader counted and then dropped, because
    /// the command reading it needs only some of them (`summary` keeps those the stall and
    /// hang analysis read). [`Channel::qp_count`] counts them; `queue_pairs` does not hold
    /// them.
    #[serde(skip)]
    pub dropped_qps: u64,
}

impl Channel {
    /// The channel's QPs in the file: those held and those dropped after reading.
    pub fn qp_count(&self) -> u64 {
        (self.queue_pairs.len() as u64).saturating_add(self.dropped_qps)
    }
}

/// Read through [`wire::QueuePairWire`] (the counters inline; see [`Channel`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "wire::QueuePairWire")]
pub struct QueuePair {
    pub id: u64,
    pub role: Option<Text>,
    #[serde(flatten)]
    pub counters: Counters,
    // Version 3: the QP's identity and its peer; absent or null where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_num: Option<u64>,
    /// Only when it differs from the device's "gid".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_gid: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<QpPeer>,
    /// Preload files only: "rc", "uc", "ud", ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_type: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ud_peers: Option<u64>,
    // Version 3 stall keys, present when stall detection was on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_wqe_outstanding: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_outstanding_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_since: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_stall_start: Option<Box<str>>,
    // Version 4: what failed on the QP and when it last made progress.
    /// Error completions by status name (`RETRY_EXC_ERR`, `WR_FLUSH_ERR`, ...); empty when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_errors: Option<Box<BTreeMap<String, u64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_cq_error: Option<Box<QpError>>,
    /// The QP's state after an error where it could be read ("ERR"), else null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_state: Option<Text>,
    /// Wall times of the last post and the last completion, at the stall check's resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_post_time: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_completion_time: Option<Box<str>>,
    /// Version 5: the QP's local port and LID and the WQE latency monitor's statistics, behind
    /// one pointer (None when the file has none of them: most QPs of most files).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<Box<QpMonitor>>,
}

/// A QP's local end and the WQE latency monitor's statistics (version 5).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QpMonitor {
    /// The local port the QP was brought up on and that port's LID, where the writer records
    /// them (a dual-port HCA, or subnets that repeat LIDs): the join then takes the QP's LID,
    /// not its device's. The library's hooks write them null (the device's "port"/"lid" stand
    /// for every QP of the device) unless the transport told the QP's LID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_lid: Option<u64>,
    /// The monitor on and the QP measured a completion: its statistics.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<LatencyStats>,
    /// The QP's path and retry settings, where told (behind the same pointer: most QPs of
    /// most files have none of these version 5 keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs: Option<QpAttrs>,
}

impl QueuePair {
    /// The local port the file records for the QP (None: the device's stands for it).
    pub fn port(&self) -> Option<u64> {
        self.monitor.as_ref().and_then(|m| m.port)
    }

    /// The QP's own LID where the file records one.
    pub fn local_lid(&self) -> Option<u64> {
        self.monitor.as_ref().and_then(|m| m.local_lid)
    }

    /// The WQE latency monitor's statistics of the QP, where the file has them.
    pub fn latency_stats(&self) -> Option<&LatencyStats> {
        self.monitor.as_ref().and_then(|m| m.stats.as_ref())
    }

    /// The QP's path and retry settings, where told.
    pub fn attrs(&self) -> Option<&QpAttrs> {
        self.monitor.as_ref().and_then(|m| m.attrs.as_ref())
    }
}

/// The WQE latency monitor's statistics of a QP's measured completions (version 5): the exact
/// mean and sample standard deviation, and quantiles within 1/16 of the exact ones. Files
/// `import`ed from NCCL's or RCCL's log lines carry upstream's (over one tracked WR at a time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub wqe_completion_ns_mean: f64,
    pub wqe_completion_ns_stddev: f64,
    pub wqe_completion_ns_p50: u64,
    pub wqe_completion_ns_p90: u64,
    pub wqe_completion_ns_p99: u64,
    pub wqe_completion_ns_p999: u64,
}

/// A QP's path and retry settings (version 5, queue pair "attrs"): each None until told.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct QpAttrs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_class: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sl: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_cnt: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rnr_retry: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rnr_timer: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgid_index: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_limit: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rd_atomic: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dest_rd_atomic: Option<u8>,
}

/// A QP's first error completion (version 4, queue pair "first_cq_error").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QpError {
    /// The `ibv_wc_status` name without its `IBV_WC_` prefix.
    pub status: String,
    #[serde(default)]
    pub status_code: i64,
    #[serde(default)]
    pub vendor_err: u64,
    pub time: String,
    /// The failed WR, where the writer knew it (the preload's send record).
    #[serde(default)]
    pub opcode: Option<String>,
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub age_ms: Option<u64>,
}

impl QueuePair {
    /// Error completions of any status (0 in files without the key).
    pub fn cq_error_total(&self) -> u64 {
        self.cq_errors
            .as_ref()
            .map_or(0, |m| m.values().fold(0u64, |s, v| s.saturating_add(*v)))
    }
}

/// A value under "hw_counters": a scalar or a per-priority array; -1 means "not available".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HwValue {
    Scalar(i64),
    PerPrio(Vec<i64>),
}

impl HwValue {
    /// None when the counter is not available (-1, or an array that is all -1);
    /// otherwise the value, an array summed over the available priorities.
    pub fn total(&self) -> Option<i64> {
        match self {
            HwValue::Scalar(v) => (*v >= 0).then_some(*v),
            HwValue::PerPrio(a) => {
                let avail: Vec<i64> = a.iter().copied().filter(|v| *v >= 0).collect();
                if avail.is_empty() {
                    None
                } else {
                    Some(avail.iter().fold(0i64, |s, v| s.saturating_add(*v)))
                }
            }
        }
    }

    /// True when at least one element reads -1.
    pub fn has_unavailable(&self) -> bool {
        match self {
            HwValue::Scalar(v) => *v < 0,
            HwValue::PerPrio(a) => a.iter().any(|v| *v < 0),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HwSample {
    pub device_id: u32,
    pub timestamp_ns: u64,
    pub counters: Named<i64>,
}

impl Counters {
    /// How many completions the histogram is built from.
    pub fn sampled(&self) -> u64 {
        self.num_wqe_sampled.unwrap_or(self.num_wqe_completed)
    }
}

impl Device {
    /// A device this rank actually drove (it moved bytes or had QPs, its own or a finalized
    /// communicator's).
    pub fn is_used(&self) -> bool {
        self.tx_bytes > 0
            || self.rx_bytes > 0
            || self.channels.iter().any(|c| c.qp_count() > 0)
            || self.finalized_comms.iter().any(|f| f.num_qps > 0)
    }

    /// The remote NICs of the device: its own "peers" (its live channels'), then every
    /// finalized communicator's.
    pub fn all_peers(&self) -> impl Iterator<Item = &DevicePeer> {
        self.peers.iter().flatten().chain(
            self.finalized_comms
                .iter()
                .flat_map(|f| &f.peers)
                .map(|p| &p.peer),
        )
    }

    /// The QP rows of the device: its channels', then those its finalized communicators'
    /// records keep (their errored or stalled QPs).
    pub fn all_qps(&self) -> impl Iterator<Item = &QueuePair> {
        self.channels.iter().flat_map(|c| &c.queue_pairs).chain(
            self.finalized_comms
                .iter()
                .flat_map(|f| &f.queue_pairs)
                .map(|q| &q.qp),
        )
    }

    /// The software counters of the device: every channel's, then every finalized
    /// communicator's (what the device's totals are summed from).
    pub fn all_counters(&self) -> impl Iterator<Item = &Counters> {
        self.channels
            .iter()
            .map(|c| &c.counters)
            .chain(self.finalized_comms.iter().map(|f| &f.counters))
    }

    /// The sum of every channel's histogram and the finalized communicators', bucket by
    /// bucket (the longest length wins).
    pub fn histogram(&self) -> Vec<u64> {
        let mut h: Vec<u64> = Vec::new();
        for c in self.all_counters() {
            add_hist(&mut h, &c.wqe_completion_histogram);
        }
        h
    }

    /// The device's log-scale histogram: its own key, else the sum of its channels'; None
    /// when the file has none (version 1, the in-tree engine, RCCL_TELEMETRY_LOG_HISTOGRAM=0).
    pub fn log_histogram(&self) -> Option<Vec<LogBucket>> {
        if let Some(h) = &self.wqe_completion_log_histogram {
            return Some(h.clone());
        }
        let mut out = None::<Vec<LogBucket>>;
        let hists = self
            .channels
            .iter()
            .map(|c| &c.wqe_completion_log_histogram)
            .chain(
                self.finalized_comms
                    .iter()
                    .map(|f| &f.wqe_completion_log_histogram),
            );
        for h in hists.flatten() {
            add_log_hist(out.get_or_insert_with(Vec::new), h);
        }
        out
    }

    /// Min and max completion latency over the channels and finalized communicators
    /// (ignoring -1).
    pub fn latency_min_max(&self) -> (Option<i64>, Option<i64>) {
        let (mn, mx) = latency_range(self.all_counters());
        ((mn >= 0).then_some(mn), (mx >= 0).then_some(mx))
    }

    /// Sum of a channel counter over the device's channels (those in use when the file was
    /// written; see [`Device::sum_counters`] for the device's totals).
    pub fn sum_channels(&self, f: impl Fn(&Channel) -> u64) -> u64 {
        self.channels
            .iter()
            .fold(0u64, |s, c| s.saturating_add(f(c)))
    }

    /// Sum of a software counter over the device's channels and its finalized communicators:
    /// the device's total.
    pub fn sum_counters(&self, f: impl Fn(&Counters) -> u64) -> u64 {
        self.all_counters()
            .fold(0u64, |s, c| s.saturating_add(f(c)))
    }

    /// The sum of an optional counter over the device's channels and finalized records; None
    /// when none of them has it (the writer did not count it).
    pub fn sum_optional(&self, f: impl Fn(&Counters) -> Option<u64>) -> Option<u64> {
        self.all_counters()
            .filter_map(f)
            .fold(None, |s: Option<u64>, v| {
                Some(s.unwrap_or(0).saturating_add(v))
            })
    }

    /// The WQE latency monitor's slow completions of the device (version 5): its own key, else
    /// its channels' and records' sum (a file that lacks the device key); None with the
    /// monitor off.
    pub fn wqe_slow(&self) -> Option<u64> {
        self.num_wqe_slow
            .or_else(|| self.sum_optional(|c| c.num_wqe_slow))
    }

    /// Stall episodes of the device (version 5), as [`Device::wqe_slow`].
    pub fn stalls(&self) -> Option<u64> {
        self.num_stalls
            .or_else(|| self.sum_optional(|c| c.num_stalls))
    }

    /// The communicators of the device's channels and finalized records, in order of first
    /// appearance (None: the process-wide calls' channels, or the record of those past the
    /// writer's cap).
    pub fn comms(&self) -> Vec<Option<&CommRef>> {
        let mut v: Vec<Option<&CommRef>> = Vec::new();
        let all = self
            .channels
            .iter()
            .map(|c| c.comm.as_ref())
            .chain(self.finalized_comms.iter().map(|f| f.comm.as_ref()));
        for c in all {
            if !v.contains(&c) {
                v.push(c);
            }
        }
        v
    }

    pub fn hw(&self, name: &str) -> Option<i64> {
        self.hw_counters.get(name).and_then(HwValue::total)
    }
}

/// Adds `src` into `dst` bucket by bucket, growing `dst` as needed.
pub fn add_hist(dst: &mut Vec<u64>, src: &[u64]) {
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d = d.saturating_add(*s);
    }
}

/// The lowest `wqe_completion_ns_min` and the highest `wqe_completion_ns_max` of some counters,
/// each -1 (nothing timed) left out; -1 when none has one, as a channel writes its QPs' range.
pub fn latency_range<'a>(counters: impl IntoIterator<Item = &'a Counters>) -> (i64, i64) {
    counters.into_iter().fold((-1, -1), |(mn, mx), c| {
        let lo = c.wqe_completion_ns_min;
        let hi = c.wqe_completion_ns_max;
        (
            if lo >= 0 && (mn < 0 || lo < mn) {
                lo
            } else {
                mn
            },
            if hi > mx { hi } else { mx },
        )
    })
}

/// Parses an RFC 3339 UTC timestamp "YYYY-MM-DDTHH:MM:SS.fffffffffZ" into Unix ns.
/// Returns None for anything else (the schema's pattern is the authority on format).
pub fn parse_timestamp_ns(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let rest = &s[19..];
    let rest = rest.strip_suffix('Z')?;
    let frac_ns: i64 = if rest.is_empty() {
        0
    } else {
        let digits = rest.strip_prefix('.')?;
        if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        digits.parse::<i64>().ok()? * 10i64.pow(9 - digits.len() as u32)
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + h * 3600 + mi * 60 + se;
    Some(secs as i128 * 1_000_000_000 + frac_ns as i128)
}

/// Formats Unix ns as the file format's timestamp ("2026-12-02T11:15:31.123456789Z").
pub fn format_timestamp_ns(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000) as i64;
    let frac = ns.rem_euclid(1_000_000_000) as i64;
    let days = secs.div_euclid(86400);
    let sod = secs.rem_euclid(86400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_bucket_reads_and_writes_its_open_bound_as_null_in_24_bytes() {
        use super::{add_log_hist, log_buckets_opt, Hi, LogBucket};
        assert_eq!(std::mem::size_of::<LogBucket>(), 24);
        let h: Vec<LogBucket> =
            serde_json::from_str("[[4096, 4607, 90], [16106127360, null, 1]]").unwrap();
        assert_eq!(h[0].1.get(), Some(4607));
        assert!(h[1].1.is_open() && h[1].1.get().is_none() && !h[0].1.is_open());
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            "[[4096,4607,90],[16106127360,null,1]]"
        );
        assert_eq!(
            log_buckets_opt(Some(&h)),
            vec![(4096, Some(4607), 90), (16_106_127_360, None, 1)]
        );
        assert_eq!(log_buckets_opt(None), vec![]);
        // The open bucket stays open when added to a closed one at the same lower bound.
        let mut sum = vec![(16_106_127_360, Hi::new(Some(17_179_869_183)), 2)];
        add_log_hist(&mut sum, &h);
        assert_eq!(
            sum,
            vec![
                (4096, Hi::new(Some(4607)), 90),
                (16_106_127_360, Hi::OPEN, 3)
            ]
        );
        assert!(serde_json::from_str::<Hi>("-1").is_err());
    }

    /// What an all-to-all run of 1,024 ranks (a million QPs and per-peer histograms) holds in
    /// 1.4 GiB was measured with; a field that grows them shows here first (bench/README.md).
    #[test]
    fn a_qp_and_a_peer_stay_the_size_the_memory_budget_was_measured_with() {
        use std::mem::size_of;
        assert!(
            size_of::<super::QueuePair>() <= 488,
            "{}",
            size_of::<super::QueuePair>()
        );
        assert!(
            size_of::<super::DevicePeer>() <= 80,
            "{}",
            size_of::<super::DevicePeer>()
        );
    }

    #[test]
    fn the_latency_range_leaves_out_what_was_not_timed() {
        let c = |mn, mx| super::Counters {
            wqe_completion_ns_min: mn,
            wqe_completion_ns_max: mx,
            ..Default::default()
        };
        assert_eq!(super::latency_range(&[]), (-1, -1));
        assert_eq!(super::latency_range(&[c(-1, -1), c(-1, -1)]), (-1, -1));
        assert_eq!(
            super::latency_range(&[c(-1, -1), c(700, 900), c(500, 800), c(-1, -1)]),
            (500, 900)
        );
    }

    #[test]
    fn timestamp_round_trips() {
        for ns in [
            0i128,
            1_796_210_131_123_456_789,
            951_782_400_000_000_001,
            4_102_444_799_999_999_999,
        ] {
            assert_eq!(
                parse_timestamp_ns(&format_timestamp_ns(ns)),
                Some(ns),
                "{}",
                format_timestamp_ns(ns)
            );
        }
        assert_eq!(
            format_timestamp_ns(1_796_210_131_123_456_789),
            "2026-12-02T11:15:31.123456789Z"
        );
    }

    use super::*;

    #[test]
    fn timestamp_parses_epoch_and_known_instant() {
        assert_eq!(
            parse_timestamp_ns("1970-01-01T00:00:00.000000000Z"),
            Some(0)
        );
        // 2026-12-02T11:15:31Z = 1796210131 s (checked with `date -d ... +%s`).
        assert_eq!(
            parse_timestamp_ns("2026-12-02T11:15:31.123456789Z"),
            Some(1_796_210_131_123_456_789)
        );
        assert_eq!(parse_timestamp_ns("2026-13-02T11:15:31.123456789Z"), None);
        assert_eq!(parse_timestamp_ns("garbage"), None);
    }

    #[test]
    fn hw_value_total_ignores_unavailable() {
        assert_eq!(HwValue::Scalar(-1).total(), None);
        assert_eq!(HwValue::Scalar(0).total(), Some(0));
        assert_eq!(HwValue::PerPrio(vec![-1; 8]).total(), None);
        assert_eq!(
            HwValue::PerPrio(vec![1, 2, -1, 0, 0, 0, 0, 3]).total(),
            Some(6)
        );
    }
}
