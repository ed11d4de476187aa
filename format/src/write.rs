//! The per-rank file as the library writes it: one struct per object, whose field order is
//! the file's key order (a new key goes after every older key of its object), serialised with
//! serde. The library fills these from its registry (`rccl_telemetry::rank_file`); nothing
//! here reads a counter or knows a slot. The reader's side, lenient with older versions, is
//! [`crate::read`].

use std::io::Write;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// One value under "hw_counters": a scalar, or one of the per-priority arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwValue {
    Scalar(i64),
    PerPrio([i64; 8]),
}

/// The "hw_counters" object of one device, keys in vocabulary order.
pub type HwReport = Vec<(&'static str, HwValue)>;

/// `devices` is a type of its own so that the library can stream the file: `D` serialises as
/// the sequence of [`DeviceReport`]s (a `Vec` when the whole file is built in memory).
#[derive(Serialize)]
pub struct FileReport<D = Vec<DeviceReport>> {
    pub version: u32,
    pub host_name: String,
    pub process_name: String,
    pub process_id: u32,
    pub start_time: String,
    pub end_time: String,
    /// true in the file written at exit or by rcclTelemetryFlush; false in a snapshot.
    #[serde(rename = "final")]
    pub is_final: bool,
    /// What wrote this file: exit, rcclTelemetryFlush, interval, cq_error, stall, or a signal
    /// name.
    pub trigger: String,
    pub transport: Option<String>,
    pub histogram_interval_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_sample_interval: Option<u64>,
    pub devices: D,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_samples: Option<Vec<SampleReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_samples_dropped: Option<u64>,
    /// RCCL_TELEMETRY_STALL_MS in effect (0: stall detection off).
    pub stall_ms: u64,
    /// Version 4: the process's rank, from the launcher's environment (null when unknown).
    pub rank: Option<u64>,
    /// Version 4: the communicators RCCL told of (rcclTelemetryCommInit), live and finalized,
    /// by id.
    pub communicators: Vec<CommunicatorReport>,
}

/// A communicator as the file names it: its id in the process, RCCL's commHash, the
/// process's rank in it and its size (a channel's and a finalized record's "comm").
#[derive(Serialize)]
pub struct CommRef {
    pub id: u64,
    /// "0x" and lower-case hex, as RCCL's own log lines print it.
    pub hash: String,
    pub rank: i32,
    pub nranks: i32,
}

impl CommRef {
    pub fn new(id: u64, hash: u64, rank: i32, nranks: i32) -> CommRef {
        CommRef {
            id,
            hash: format!("0x{hash:x}"),
            rank,
            nranks,
        }
    }
}

/// One communicator of the process (top-level "communicators").
#[derive(Serialize)]
pub struct CommunicatorReport {
    #[serde(flatten)]
    pub comm: CommRef,
    pub init_time: String,
    /// null while it is live.
    pub finalize_time: Option<String>,
}

/// A finalized communicator's record on one device (device "finalized_comms"): every counter
/// its channels and QPs had, summed, with the channel keys' names and meanings.
#[derive(Serialize)]
pub struct FinalizedCommReport {
    /// null: the record sums the oldest finalized communicators, past the file's cap.
    pub comm: Option<CommRef>,
    pub num_comms: u64,
    pub num_channels: u64,
    pub num_qps: u64,
    pub num_wqe_sent: u64,
    pub num_recv_wqe: u64,
    pub num_wqe_rcvd: u64,
    pub num_wqe_completed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_sampled: Option<u64>,
    pub num_cts_sent: u64,
    pub num_cts_sent_signalled: u64,
    pub num_cts_sent_unsignalled: u64,
    pub num_slot_miss: u64,
    pub num_write_wqe: u64,
    pub num_write_imm_wqe: u64,
    pub num_req_completed: u64,
    pub num_data_qp: u64,
    pub num_cts_qp: u64,
    pub num_qp_untracked: u64,
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// Its QPs' remote NICs, as the device's "peers" (its QPs, their latency).
    pub peers: Vec<PeerReport>,
    pub cq_errors: StatusCounts,
    /// The earliest first error of its QPs.
    pub first_cq_error: Option<FirstErrorReport>,
    /// Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<FinalizedStallReport>,
}

/// A finalized communicator's stall keys: its QPs' stalls ended at its finalization.
#[derive(Serialize)]
pub struct FinalizedStallReport {
    /// Send WRs outstanding when it was finalized.
    pub num_wqe_outstanding: u64,
    /// QPs stalled when it was finalized.
    pub num_qps_stalled: u64,
    pub longest_stall_ms: u64,
    pub longest_stall_start: Option<String>,
}

/// `C` serialises as the sequence of [`ChannelReport`]s (see [`FileReport`]).
#[derive(Serialize)]
pub struct DeviceReport<C = Vec<ChannelReport>> {
    pub device_id: u32,
    pub roce_device: String,
    pub eth_device: String,
    pub hw_type: &'static str,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_cq_errors: u64,
    pub cq_poll_count: u64,
    pub num_channels: Option<u64>,
    pub active_channels: u64,
    pub num_qp_untracked: u64,
    pub wqe_size_stats: Vec<SizeStat>,
    pub channels: C,
    pub hw_counters: HwCounters,
    /// The sum of the channels' log-scale histograms (after the seed's keys; absent with
    /// RCCL_TELEMETRY_LOG_HISTOGRAM=0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    /// Only in files written by the verbs interposer (librccl_telemetry_preload.so).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<DeviceVerbsReport>,
    /// Version 3: the local port, GID index, GID and LID its QPs use (the first told).
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
    /// Version 3: one entry per remote NIC its QPs were told of, with their latency.
    pub peers: Vec<PeerReport>,
    /// Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<DeviceStallReport>,
    /// Version 4: error completions by status (those the hooks or the interposer knew the
    /// status of; num_cq_errors counts every one).
    pub cq_errors_by_status: StatusCounts,
    /// Version 4: the finalized communicators' records on this device.
    pub finalized_comms: Vec<FinalizedCommReport>,
}

/// Error completions by status, as a map from the status name (`enum ibv_wc_status` without
/// `IBV_WC_`) to the count, in the enum's order (the writer orders them).
#[derive(Debug, Clone, Default)]
pub struct StatusCounts(pub Vec<(String, u64)>);

impl Serialize for StatusCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A QP's first error completion (queue pair "first_cq_error").
#[derive(Serialize)]
pub struct FirstErrorReport {
    pub status: String,
    pub status_code: i32,
    pub vendor_err: u32,
    pub time: String,
    /// The failed WR, as the interposer's send record knew it (null with the hooks).
    pub opcode: Option<&'static str>,
    pub bytes: Option<u64>,
    pub age_ms: Option<u64>,
}

/// Version 4 queue-pair keys: its error completions and its last progress.
#[derive(Serialize)]
pub struct QpErrorReport {
    pub cq_errors: StatusCounts,
    pub first_cq_error: Option<FirstErrorReport>,
    pub qp_state: Option<&'static str>,
    /// The stall detector's check that first saw its latest post / completion (null when
    /// none was seen, or with detection off).
    pub last_post_time: Option<String>,
    pub last_completion_time: Option<String>,
}

/// A device's stall keys, as of the detector's last tick.
#[derive(Serialize)]
pub struct DeviceStallReport {
    pub num_wqe_outstanding: u64,
    pub num_qps_stalled: u64,
}

/// A QP's stall keys, as of the detector's last tick.
#[derive(Serialize)]
pub struct QpStallReport {
    pub num_wqe_outstanding: u64,
    /// Only in the interposer's files (the key is absent in the hooks').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_outstanding_ms: Option<Option<u64>>,
    pub stalled: bool,
    pub stalled_since: Option<String>,
    pub longest_stall_ms: u64,
    pub longest_stall_start: Option<String>,
}

/// Length of a GID's text form.
pub const GID_TEXT_LEN: usize = 39;

/// A GID as ibv_devinfo prints it (8 groups of 4 lower-case hex digits joined by ':') into a
/// caller's buffer, without allocating (the file has one per QP).
pub fn gid_text_into<'a>(g: &[u8; 16], buf: &'a mut [u8; GID_TEXT_LEN]) -> &'a str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut at = 0;
    for (i, b) in g.iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            buf[at] = b':';
            at += 1;
        }
        buf[at] = HEX[usize::from(b >> 4)];
        buf[at + 1] = HEX[usize::from(b & 15)];
        at += 2;
    }
    // Only ASCII hex digits and ':' were written.
    std::str::from_utf8(&buf[..]).expect("ASCII")
}

/// A GID in the file: its text form, written straight from the 16 bytes (no allocation).
pub struct GidText(pub [u8; 16]);

impl Serialize for GidText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; GID_TEXT_LEN];
        s.serialize_str(gid_text_into(&self.0, &mut buf))
    }
}

/// The address a GID encodes, in the file (see `rccl_telemetry::peers::gid_ip`).
pub struct GidIp(pub std::net::IpAddr);

impl Serialize for GidIp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 64];
        let mut w = &mut buf[..];
        write!(w, "{}", self.0).map_err(serde::ser::Error::custom)?;
        let n = 64 - w.len();
        s.serialize_str(std::str::from_utf8(&buf[..n]).map_err(serde::ser::Error::custom)?)
    }
}

/// A remote NIC of a device (device "peers").
#[derive(Serialize)]
pub struct PeerReport {
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
    pub num_qps: u64,
    /// Those of num_qps whose channel had reached its per-peer histogram cap: their
    /// completions are in the channel's sum but not in this entry's histogram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_qps_shared: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
}

/// A QP's peer (queue pair "peer").
#[derive(Serialize)]
pub struct QpPeerReport {
    pub qp_num: u32,
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
}

/// Version 3 queue-pair keys, after every older one.
#[derive(Serialize)]
pub struct QpIdentity {
    pub qp_num: Option<u32>,
    /// Only when it differs from the device's "gid".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_gid: Option<GidText>,
    pub peer: Option<QpPeerReport>,
    /// Only in the verbs interposer's files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_type: Option<&'static str>,
}

/// The verbs interposer's device keys, after the seed's.
#[derive(Serialize)]
pub struct DeviceVerbsReport {
    pub num_srq_recv_wqe: u64,
    pub num_wc_unknown_qp: u64,
}

/// The verbs interposer's channel and QP keys, after the seed's.
#[derive(Serialize)]
pub struct VerbsCounters {
    pub num_send_wqe: u64,
    pub num_read_wqe: u64,
    pub num_atomic_wqe: u64,
    pub num_other_wqe: u64,
    pub num_wqe_retired_unsignalled: u64,
    pub num_wqe_track_full: u64,
}

#[derive(Serialize)]
pub struct SizeStat {
    pub max_wqe_size: u64,
    pub num_wqe: u64,
}

/// `Q` serialises as the sequence of [`QpReport`]s (see [`FileReport`]).
#[derive(Serialize)]
pub struct ChannelReport<Q = Vec<QpReport>> {
    pub id: Option<u32>,
    pub num_wqe_sent: u64,
    pub num_recv_wqe: u64,
    pub num_wqe_rcvd: u64,
    pub num_wqe_completed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_sampled: Option<u64>,
    pub num_cts_sent: u64,
    pub num_cts_sent_signalled: u64,
    pub num_cts_sent_unsignalled: u64,
    pub num_slot_miss: u64,
    pub num_write_wqe: u64,
    pub num_write_imm_wqe: u64,
    pub num_req_completed: u64,
    pub num_data_qp: u64,
    pub num_cts_qp: u64,
    pub num_qp_untracked: u64,
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    pub queue_pairs: Q,
    /// Every sampled completion of the channel's QPs, log-scale (after the seed's keys;
    /// absent with RCCL_TELEMETRY_LOG_HISTOGRAM=0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// Version 4: the communicator the channel belongs to (null: the process-wide calls').
    pub comm: Option<CommRef>,
}

/// A log-scale histogram as the file shows it: only the non-empty buckets, each as
/// `[lo_ns, hi_ns, count]` with inclusive bounds (`hi_ns` null for the last, open bucket).
#[derive(Serialize)]
pub struct LogBuckets(pub Vec<(u64, Option<u64>, u64)>);

#[derive(Serialize)]
pub struct QpReport {
    pub id: u64,
    pub role: Option<&'static str>,
    pub num_wqe_sent: u64,
    pub num_recv_wqe: u64,
    pub num_wqe_rcvd: u64,
    pub num_wqe_completed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_sampled: Option<u64>,
    pub num_cts_sent: u64,
    pub num_cts_sent_signalled: u64,
    pub num_cts_sent_unsignalled: u64,
    pub num_slot_miss: u64,
    pub num_write_wqe: u64,
    pub num_write_imm_wqe: u64,
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// Version 3 (per QP only; None in the channel totals built from a QpReport).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub identity: Option<QpIdentity>,
    /// Stall detection's keys (per QP only; absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<QpStallReport>,
    /// Version 4 (per QP only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub errors: Option<QpErrorReport>,
}

/// "hw_counters": the hw module's ordered keys.
pub struct HwCounters(pub HwReport);

impl Serialize for HwCounters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            match v {
                HwValue::Scalar(x) => m.serialize_entry(k, x)?,
                HwValue::PerPrio(a) => m.serialize_entry(k, a)?,
            }
        }
        m.end()
    }
}

#[derive(Serialize)]
pub struct SampleReport {
    pub device_id: u32,
    pub timestamp_ns: u64,
    pub counters: SampleCounters,
}

pub struct SampleCounters(pub Vec<(&'static str, i64)>);

impl Serialize for SampleCounters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
