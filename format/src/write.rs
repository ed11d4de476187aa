//! The per-rank file as the library writes it: one struct per object, whose field order is
//! the file's key order (a new key goes after every older key of its object), serialised with
//! serde. The library fills these from its registry (`rccl_telemetry::rank_file`); nothing
//! here reads a counter or knows a slot. The reader's side, lenient with older versions, is
//! [`crate::read`].

use std::io::Write;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::counters::{values_fn, wqe_counts};

/// One value under "hw_counters": a scalar, or one of the per-priority arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwValue {
    Scalar(i64),
    PerPrio([i64; 8]),
}

/// The "hw_counters" object of one device, keys in vocabulary order.
pub type HwReport = Vec<(&'static str, HwValue)>;

/// A queue pair's "role" values (the transport's rcclTelemetrySetQpRole: data, CTS).
pub const ROLES: [&str; 2] = ["data", "cts"];

/// The top-level "source" values: what wrote a file that no process loading the library did
/// (nccl_log: `rccl-telemetry import`, from NCCL/RCCL debug logs).
pub const SOURCES: [&str; 1] = ["nccl_log"];

/// The largest "device_id" (the library's device slots, RCCL_TELEMETRY_MAX_DEVS of them).
pub const MAX_DEVICE_ID: u32 = 31;

/// The largest channel "id" (the library's channel slots, RCCL_TELEMETRY_MAX_CHANNELS of them).
pub const MAX_CHANNEL_ID: u32 = 511;

/// The file (its description in the schema is the attribute below).
// `devices` is a type of its own so that the library can stream the file: `D` serialises as
// the sequence of [`DeviceReport`]s (a `Vec` when the whole file is built in memory).
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(
        rename = "file",
        title = "rccl_telemetry_<hostname>_<uid>_<pid>.json",
        description = "One file per rank, written by librccl_telemetry at process exit (or by rcclTelemetryFlush). Software counters are totals over the process; hw_counters are deltas against the device's first use; -1 means 'not available', never 'zero events'."
    )
)]
pub struct FileReport<D = Vec<DeviceReport>> {
    /// The format version the file was written in: 5 added the WQE latency monitor
    /// (slow_threshold_ns, num_wqe_slow, num_stalls, a QP's port, local_lid, mean, stddev and
    /// quantiles) and each QP's path and retry settings (attrs); 4 per-QP error completions and
    /// last-progress times, errors by status per device, the cq_error and stall triggers, and
    /// communicators (rank, communicators, a channel's comm, a device's finalized_comms); 3 QP
    /// identities and peers, per-peer latency and the stall keys; 2 the log-scale completion
    /// histogram; 1 is the first. The Since column says which version added each key.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Version"))]
    pub version: u32,
    /// The host name, as in the file's name.
    pub host_name: String,
    /// The process's name.
    pub process_name: String,
    /// The process id.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub process_id: u32,
    /// When telemetry started in the process (rcclTelemetryInit).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Timestamp"))]
    pub start_time: String,
    /// When this file's counters were read (for a snapshot: when it was taken).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Timestamp"))]
    pub end_time: String,
    /// true: written at exit or by rcclTelemetryFlush, the whole run. false: a snapshot of a live
    /// process (RCCL_TELEMETRY_FLUSH_INTERVAL_S, RCCL_TELEMETRY_SNAPSHOT_SIGNAL, or a termination
    /// signal caught before an earlier handler).
    #[serde(rename = "final")]
    pub is_final: bool,
    /// What wrote the file: exit, rcclTelemetryFlush, interval, a signal name such as SIGTERM, or
    /// (version 4, snapshots) cq_error (a QP's first error completion) or stall (the first check of
    /// a stall episode).
    pub trigger: String,
    /// The transport the devices were registered for (rcclTelemetryRegisterDevice, e.g. IB-CAST;
    /// verbs-preload in the interposer's files); null when no device was registered.
    pub transport: Option<String>,
    /// Width of a linear latency bucket in ns (RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS): bucket b
    /// holds [b*w, (b+1)*w), the last one also everything above.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub histogram_interval_ns: u64,
    /// Present only when RCCL_TELEMETRY_LATENCY_SAMPLE > 1: the N in effect after the power-of-two
    /// round-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", range(min = 2)))]
    pub latency_sample_interval: Option<u64>,
    /// One entry per registered device, whether or not the rank used it.
    pub devices: D,
    /// Present only when RCCL_TELEMETRY_SAMPLE_MS > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<SampleReport>"))]
    pub hw_samples: Option<Vec<SampleReport>>,
    /// Present only when RCCL_TELEMETRY_SAMPLE_MS > 0: samples not kept because the bounded buffer
    /// was full.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub hw_samples_dropped: Option<u64>,
    /// RCCL_TELEMETRY_STALL_MS in effect (0: stall detection off, and no stall keys).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub stall_ms: u64,
    /// The process's rank, from the launcher's environment (OMPI_COMM_WORLD_RANK, PMIX_RANK,
    /// PMI_RANK, SLURM_PROCID, RANK: the first that is a number); null when unknown.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub rank: Option<u64>,
    /// The communicators RCCL told of (rcclTelemetryCommInit), live and finalized, by id; those
    /// past the cap of finalized records are left out (their counts are in the devices' record with
    /// comm null).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub communicators: Vec<CommunicatorReport>,
    /// The WQE latency monitor's threshold in ns: RCCL_TELEMETRY_SLOW_NS, else NCCL's
    /// NCCL_IB_WQE_LATENCY_THRESHOLD_NS; 0 when neither is set (the monitor off, and no
    /// num_wqe_slow or monitor statistics keys).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub slow_threshold_ns: u64,
    /// Present only when the file was not written by a process that loaded the library: nccl_log
    /// (`rccl-telemetry import` rebuilt it from NCCL/RCCL debug logs: no hardware counters, bytes,
    /// posts or per-channel split; latency only as the logs' quantiles).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::schema::Source", extend("x-since" = 5))
    )]
    pub source: Option<&'static str>,
}

/// A communicator as the file names it: its id in the process, RCCL's commHash, the
/// process's rank in it and its size (a channel's and a finalized record's "comm").
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "comm_ref"))]
pub struct CommRef {
    /// Its id in the process (creation order, from 1).
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub id: u64,
    /// RCCL's commHash, 0x and lower-case hex as RCCL's log lines print it.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::CommHash"))]
    pub hash: String,
    /// The process's rank in it.
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub rank: i32,
    /// Its size.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "communicator"))]
pub struct CommunicatorReport {
    #[serde(flatten)]
    pub comm: CommRef,
    /// When rcclTelemetryCommInit created it.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Timestamp"))]
    pub init_time: String,
    /// When rcclTelemetryCommFinalize ended it; null while it is live.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<crate::schema::Timestamp>")
    )]
    pub finalize_time: Option<String>,
}

/// A finalized communicator's record on one device (device "finalized_comms"): every counter
/// its channels and QPs had, summed, with the channel keys' names and meanings.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "finalized_comm"))]
pub struct FinalizedCommReport {
    /// The communicator; null for the sum of the oldest finalized communicators past the cap.
    pub comm: Option<CommRef>,
    /// Communicators the record sums: 1, or (comm null) how many are past the cap.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub num_comms: u64,
    /// Channels it had on the device.
    pub num_channels: u64,
    /// QP slots it had on the device.
    pub num_qps: u64,
    #[serde(flatten)]
    pub counts: WqeCounts,
    /// Network requests its channels completed.
    pub num_req_completed: u64,
    /// Its data QPs on the device.
    pub num_data_qp: u64,
    /// Its CTS QPs on the device.
    pub num_cts_qp: u64,
    /// Its QPs on the device that got no stats slot.
    pub num_qp_untracked: u64,
    #[serde(flatten)]
    pub latency: CompletionLatency,
    /// Its channels' log-scale histograms, merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "LogBuckets"))]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// Its QPs' remote NICs, as the device's peers, each with the sums of its QPs towards that NIC
    /// (the link from this device to it).
    pub peers: Vec<FinalizedPeerReport>,
    /// Its QPs' error completions by status.
    pub cq_errors: StatusCounts,
    /// The earliest first error of its QPs, with the QP it came on; null when none.
    pub first_cq_error: Option<FinalizedFirstErrorReport>,
    // Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<FinalizedStallReport>,
    /// Its QPs that had error completions or stalled, each as its channel listed it when it was
    /// finalized (stalls ended there), the first 8 in channel and slot order.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub queue_pairs: Vec<FinalizedQpReport>,
    /// QPs that had error completions or stalled beyond those listed in queue_pairs.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub num_qps_unlisted: u64,
}

/// A remote NIC of a finalized communicator's device (finalized record "peers"): the peer keys,
/// then every counter of the device's QPs whose peer it is, summed (the link from the device to
/// it, as the QPs' rows would have added up).
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "finalized_peer"))]
pub struct FinalizedPeerReport {
    #[serde(flatten)]
    pub peer: PeerReport,
    // The sums are version 5's: version 4 listed the peers alone.
    #[serde(flatten)]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::schema::Since<WqeCounts, 5>")
    )]
    pub counts: WqeCounts,
    #[serde(flatten)]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::schema::Since<CompletionLatency, 5>")
    )]
    pub latency: CompletionLatency,
    // Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<crate::schema::Since<FinalizedStallReport, 5>>")
    )]
    pub stall: Option<FinalizedStallReport>,
}

/// A finalized communicator's first error completion (finalized record "first_cq_error"): the
/// error, then the QP it came on.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "finalized_first_cq_error"))]
pub struct FinalizedFirstErrorReport {
    #[serde(flatten)]
    pub error: FirstErrorReport,
    /// The QP's channel; null after rcclTelemetryMarkChannelsUnknown.
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_CHANNEL_ID), extend("x-since" = 5)))]
    pub channel: Option<u32>,
    /// The QP's slot index on the channel.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub qp: u64,
    /// The local QP number; null when not told.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub qp_num: Option<u32>,
    /// The QP's remote end; null when not told.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 5)))]
    pub peer: Option<QpPeerReport>,
}

/// A QP of a finalized communicator kept for its error completions or its stall (finalized
/// record "queue_pairs"): its channel, then the keys of its row.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "finalized_queue_pair"))]
pub struct FinalizedQpReport {
    /// The QP's channel; null after rcclTelemetryMarkChannelsUnknown.
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_CHANNEL_ID)))]
    pub channel: Option<u32>,
    #[serde(flatten)]
    pub qp: QpReport,
}

/// A finalized communicator's stall keys: its QPs' stalls ended at its finalization.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FinalizedStallReport {
    /// Stall detection on: WRs outstanding on its QPs when it was finalized.
    pub num_wqe_outstanding: u64,
    /// Stall detection on: its QPs stalled when it was finalized (their stalls end there).
    pub num_qps_stalled: u64,
    /// Stall detection on: the longest stall of its QPs, one that lasted to the finalization ended
    /// there; 0 when none.
    pub longest_stall_ms: u64,
    /// Stall detection on: when it began; null when none.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<crate::schema::Timestamp>")
    )]
    pub longest_stall_start: Option<String>,
}

/// A registered device (top-level "devices").
// `C` serialises as the sequence of [`ChannelReport`]s (see [`FileReport`]).
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "device"))]
pub struct DeviceReport<C = Vec<ChannelReport>> {
    /// The slot the transport registered the device in (0..31).
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_DEVICE_ID)))]
    pub device_id: u32,
    /// The RDMA device's name (mlx5_0, bnxt_re0, rxe0, ...).
    pub roce_device: String,
    /// Its Ethernet netdev; "" when there is none.
    pub eth_device: String,
    /// The driver family, from the RoCE device's kernel driver: mlx5, thor2 (bnxt_re), ainic
    /// (ionic), rxe (Soft-RoCE), else unsupported.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::HwType"))]
    pub hw_type: &'static str,
    /// Bytes sent (software count).
    pub tx_bytes: u64,
    /// Bytes received (software count; 0 on the CTS offload path with optional receive completion).
    pub rx_bytes: u64,
    /// Completions drained with an error status, every one.
    pub num_cq_errors: u64,
    /// ibv_poll_cq calls.
    pub cq_poll_count: u64,
    /// Channels set up on the device; null after rcclTelemetryMarkChannelsUnknown.
    pub num_channels: Option<u64>,
    /// Channels that carried traffic.
    pub active_channels: u64,
    /// QPs that got no stats slot (its channels' and those set up on an out-of-range channel
    /// index): their traffic is in no counter.
    pub num_qp_untracked: u64,
    /// Send WQEs by size in power-of-two buckets, the non-empty ones only.
    pub wqe_size_stats: Vec<SizeStat>,
    /// One entry per channel set up on the device.
    pub channels: C,
    /// The NIC's counters as deltas since the device's first use: the same keys in the same order
    /// whatever the driver (see Hardware counters), a number or an array of 8 (per priority); -1
    /// means not available, never zero events.
    pub hw_counters: HwCounters,
    /// The sum of the device's channels' log-scale histograms (and its finalized communicators').
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "LogBuckets", extend("x-since" = 2)))]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    // Only in files written by the verbs interposer (librccl_telemetry_preload.so).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<DeviceVerbsReport>,
    /// The local port its QPs use (the preload, from modify_qp); null when unknown (always with the
    /// hooks).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub port: Option<u8>,
    /// The local GID index its QPs use (the preload: ah_attr.grh.sgid_index); null when unknown
    /// (always with the hooks).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub gid_index: Option<u32>,
    /// The local GID its QPs use (the first one told; a QP whose GID differs carries its own
    /// local_gid); null when none was told.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub gid: Option<GidText>,
    /// The address the local GID encodes; null when the GID is unknown or all zeros.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub gid_ip: Option<GidIp>,
    /// The local LID its QPs use (the first one told).
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Lid>", extend("x-since" = 3)))]
    pub lid: Option<u16>,
    /// One entry per remote NIC, in GID then LID order; empty when no peer was told.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub peers: Vec<PeerReport>,
    // Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<DeviceStallReport>,
    /// Error completions by status, those whose status was told (rcclTelemetryQpCqError, the
    /// interposer); num_cq_errors counts every one.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub cq_errors_by_status: StatusCounts,
    /// One record per finalized communicator that had channels on the device, oldest first, then
    /// (comm null) the sum of those past the cap. The device's totals are its channels' plus these.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub finalized_comms: Vec<FinalizedCommReport>,
    /// Present only when slow_threshold_ns > 0: num_wqe_slow of the device's channels and
    /// finalized communicators, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub num_wqe_slow: Option<u64>,
    /// Present only when stall_ms > 0: num_stalls of the device's channels and finalized
    /// communicators, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub num_stalls: Option<u64>,
    // The port's MTU and QoS settings, each absent where the system does not expose it.
    #[serde(flatten)]
    pub port_qos: PortQosReport,
}

/// Version 5 device keys: its port's active MTU and QoS settings as the kernel has them, each
/// absent where the system does not expose it (Soft-RoCE, veth and VMs have no DCB; a device
/// never used is not read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PortQosReport {
    /// The port's active MTU in bytes: the IB MTU its RoCE driver derives from the netdev's MTU.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "u32", range(min = 256, max = 4096), extend("x-since" = 5))
    )]
    pub active_mtu: Option<u32>,
    /// The priorities (0..7) with PFC enabled on the port (DCB netlink, IEEE PFC), ascending; []
    /// when none; absent where the netdev has no DCB or its driver does not report PFC.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::schema::Priority>", extend("x-since" = 5))
    )]
    pub pfc_enabled: Option<Vec<u8>>,
    /// The port's DSCP-to-priority map (DCB netlink, the IEEE APP table's DSCP entries): DSCP
    /// (as a string key, "0".."63") to priority; {} when the table has no DSCP entry (the port
    /// trusts PCP); absent where the netdev has no DCB.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::schema::DscpMap", extend("x-since" = 5))
    )]
    pub dscp_priority: Option<std::collections::BTreeMap<u8, u8>>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "first_cq_error"))]
pub struct FirstErrorReport {
    /// The status: enum ibv_wc_status without IBV_WC_ (UNKNOWN_<n> for a value it lacks).
    #[cfg_attr(
        feature = "schema",
        schemars(pattern(crate::wc_status::STATUS_NAME_PATTERN))
    )]
    pub status: String,
    /// The enum ibv_wc_status value.
    pub status_code: i32,
    /// The completion's vendor_err.
    pub vendor_err: u32,
    /// When the error completion was counted (wall clock).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Timestamp"))]
    pub time: String,
    /// Verbs interposer: the failed WR's opcode (enum ibv_wr_opcode without IBV_WR_, or RECV); null
    /// when unknown (always with the hooks).
    pub opcode: Option<&'static str>,
    /// Verbs interposer: the failed send WR's payload; null when unknown.
    pub bytes: Option<u64>,
    /// Verbs interposer: how long the failed WR had been posted, when its record entry carries a
    /// clock reading; else null.
    pub age_ms: Option<u64>,
}

/// Version 4 queue-pair keys: its error completions and its last progress.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QpErrorReport {
    /// The QP's error completions by status; {} when none.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub cq_errors: StatusCounts,
    /// The QP's first error completion; null when none.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub first_cq_error: Option<FirstErrorReport>,
    /// The state the first error left the QP in where it follows from it (RC: ERR); null when no
    /// error or unknown.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub qp_state: Option<&'static str>,
    /// The stall detector's check that first saw the QP's latest post (its resolution); null when
    /// none was seen or detection is off.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Timestamp>", extend("x-since" = 4)))]
    pub last_post_time: Option<String>,
    /// The stall detector's check that first saw the QP's latest completion; null when none was
    /// seen or detection is off.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Timestamp>", extend("x-since" = 4)))]
    pub last_completion_time: Option<String>,
}

/// A device's stall keys, as of the detector's last tick.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceStallReport {
    /// Stall detection on: WRs outstanding on the device's QPs (sum of theirs).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub num_wqe_outstanding: u64,
    /// Stall detection on: QPs stalled when the file was written.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub num_qps_stalled: u64,
}

/// A QP's stall keys, as of the detector's last tick.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QpStallReport {
    /// Stall detection on: WRs outstanding at the detector's last check (hooks: WRITE_WITH_IMM
    /// postings minus completions, at least 0; preload: its send record).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub num_wqe_outstanding: u64,
    /// Stall detection on, verbs interposer only: age of the oldest outstanding send WR when its
    /// record entry carries a clock reading, else null.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>", extend("x-since" = 3)))]
    pub oldest_outstanding_ms: Option<Option<u64>>,
    /// Stall detection on: a completion is expected and none came for at least stall_ms.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub stalled: bool,
    /// Stall detection on: when the current stall's wait began; null when not stalled.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Timestamp>", extend("x-since" = 3)))]
    pub stalled_since: Option<String>,
    /// Stall detection on: the longest stall of the run, an ongoing one included; 0 when none.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub longest_stall_ms: u64,
    /// Stall detection on: when the longest stall began; null when none.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Timestamp>", extend("x-since" = 3)))]
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

/// One remote NIC a device's QPs were told of (by rcclTelemetryQpSetPeer, or the preload at the
/// transition to RTR), keyed by its GID, else its LID; gid and lid both null when neither was
/// known (device and finalized record "peers").
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "peer"))]
pub struct PeerReport {
    /// The remote NIC's GID; null when only its LID is known (or neither).
    pub gid: Option<GidText>,
    /// The address its GID encodes; null when the GID is unknown or all zeros.
    pub gid_ip: Option<GidIp>,
    /// Its LID; null when 0 or unknown (RoCE).
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Lid>"))]
    pub lid: Option<u16>,
    /// QPs of the device whose current peer is this NIC.
    pub num_qps: u64,
    /// Present only when > 0: those of num_qps on channels that had reached their cap of per-peer
    /// histograms (8); their completions are in the channel's histogram, not in this entry's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", range(min = 1)))]
    pub num_qps_shared: Option<u64>,
    /// The sampled completions of the QPs towards this NIC (per-peer histograms of the device's
    /// channels, summed): the latency towards it. Absent with RCCL_TELEMETRY_LOG_HISTOGRAM=0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "LogBuckets"))]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
}

/// A QP's peer (queue pair "peer").
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "qp_peer"))]
pub struct QpPeerReport {
    /// The remote QP number.
    pub qp_num: u32,
    /// The remote NIC's GID; null when unknown.
    pub gid: Option<GidText>,
    /// The address the remote GID encodes; null when the GID is unknown or all zeros.
    pub gid_ip: Option<GidIp>,
    /// The remote LID; null when 0 or unknown.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Lid>"))]
    pub lid: Option<u16>,
}

/// Version 3 queue-pair keys, after every older one.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QpIdentity {
    /// The local QP number; null when not told.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub qp_num: Option<u32>,
    /// Present only when the QP's local GID differs from its device's gid.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "GidText", extend("x-since" = 3)))]
    pub local_gid: Option<GidText>,
    /// The QP's remote end; null when not told (and for UD QPs, which have no single peer).
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 3)))]
    pub peer: Option<QpPeerReport>,
    /// Verbs interposer only: rc, uc, ud, xrc_send, xrc_recv, raw_packet, driver, or another name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String", extend("x-since" = 3)))]
    pub qp_type: Option<&'static str>,
}

/// The verbs interposer's device keys, after every key both writers have.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceVerbsReport {
    /// Verbs interposer only: receive WRs posted to shared receive queues of this device.
    pub num_srq_recv_wqe: u64,
    /// Verbs interposer only: completions whose qp_num is no QP tracked on this device.
    pub num_wc_unknown_qp: u64,
}

/// The verbs interposer's channel and QP keys, after every key both writers have.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VerbsCounters {
    /// Verbs interposer only: SEND, SEND_WITH_IMM and SEND_WITH_INV WRs posted.
    pub num_send_wqe: u64,
    /// Verbs interposer only: RDMA_READ WRs posted.
    pub num_read_wqe: u64,
    /// Verbs interposer only: atomic WRs posted (compare-and-swap, fetch-and-add, masked forms).
    pub num_atomic_wqe: u64,
    /// Verbs interposer only: send WRs of any other opcode (LOCAL_INV, BIND_MW, TSO, ...).
    pub num_other_wqe: u64,
    /// Verbs interposer only: unsignalled send WRs retired by a later signalled completion on the
    /// same QP.
    pub num_wqe_retired_unsignalled: u64,
    /// Verbs interposer only: signalled send WRs posted while the QP's bounded in-flight record was
    /// full; counted, not matched.
    pub num_wqe_track_full: u64,
}

#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
/// Send WQEs of one power-of-two size bucket (device "wqe_size_stats").
#[cfg_attr(feature = "schema", schemars(rename = "wqe_size"))]
pub struct SizeStat {
    /// The bucket's upper bound in bytes, a power of two.
    pub max_wqe_size: u64,
    /// Send WQEs of at most that size and above the bucket below.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub num_wqe: u64,
}

/// A channel of a device (device "channels").
// `Q` serialises as the sequence of [`QpReport`]s (see [`FileReport`]).
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "channel"))]
pub struct ChannelReport<Q = Vec<QpReport>> {
    /// The channel's index; null after rcclTelemetryMarkChannelsUnknown.
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_CHANNEL_ID)))]
    pub id: Option<u32>,
    #[serde(flatten)]
    pub counts: WqeCounts,
    /// Network requests completed (a request is striped over one WQE per data QP; it bounds none of
    /// the WQE counters).
    pub num_req_completed: u64,
    /// Data QPs of the channel.
    pub num_data_qp: u64,
    /// CTS QPs of the channel.
    pub num_cts_qp: u64,
    /// QPs of the channel that got no stats slot.
    pub num_qp_untracked: u64,
    #[serde(flatten)]
    pub latency: CompletionLatency,
    /// One entry per QP slot of the channel, in slot order.
    pub queue_pairs: Q,
    /// Every sampled completion of the channel's QPs (the log-scale histogram lives per channel,
    /// not per QP: see The log-scale completion histogram).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "LogBuckets", extend("x-since" = 2)))]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// The communicator the channel belongs to; null for the process-wide calls' channels. Channel
    /// ids are per communicator.
    #[cfg_attr(feature = "schema", schemars(extend("x-since" = 4)))]
    pub comm: Option<CommRef>,
}

/// The writer's struct of the counter table ([`crate::counters`]): a field per row, its doc
/// comment the key's description, and what its type cannot say beside it (an optional row is
/// left out when None; the version that added it).
macro_rules! writer_counts {
    (@ [$($field:tt)*]) => {
        /// The WQE and CTS counts of a channel, a queue pair or a finalized communicator's record, in
        /// that order in each (after the object's own first keys).
        #[derive(Serialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        pub struct WqeCounts {
            $($field)*
        }
    };
    (@ [$($field:tt)*] $(#[doc = $doc:literal])+ $key:ident : u64, since $v:literal, prom($($p:tt)*); $($rest:tt)*) => {
        writer_counts!(@ [$($field)*
            $(#[doc = $doc])+
            #[cfg_attr(feature = "schema", schemars(extend("x-since" = $v)))]
            pub $key: u64,
        ] $($rest)*);
    };
    (@ [$($field:tt)*] $(#[doc = $doc:literal])+ $key:ident : Option<u64>, since $v:literal, prom($($p:tt)*); $($rest:tt)*) => {
        writer_counts!(@ [$($field)*
            $(#[doc = $doc])+
            #[serde(skip_serializing_if = "Option::is_none")]
            #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = $v)))]
            pub $key: Option<u64>,
        ] $($rest)*);
    };
    ([] $($rows:tt)*) => {
        writer_counts!(@ [] $($rows)*);
    };
}
wqe_counts!(writer_counts);
wqe_counts!(values_fn WqeCounts);

/// The sampled completion latency of a channel, a queue pair or a finalized communicator's
/// record: its extremes and its linear histogram.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompletionLatency {
    /// The smallest sampled completion latency in ns.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::LatencyNs"))]
    pub wqe_completion_ns_min: i64,
    /// The largest sampled completion latency in ns.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::LatencyNs"))]
    pub wqe_completion_ns_max: i64,
    /// Sampled completions per linear latency bucket of histogram_interval_ns
    /// (RCCL_TELEMETRY_HISTOGRAM_BUCKETS of them, the last one open).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Histogram"))]
    pub wqe_completion_histogram: Vec<u64>,
}

/// A log-scale histogram as the file shows it: only the non-empty buckets, each as
/// `[lo_ns, hi_ns, count]` with inclusive bounds (`hi_ns` null for the last, open bucket).
#[derive(Serialize)]
pub struct LogBuckets(pub Vec<(u64, Option<u64>, u64)>);

#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
/// A QP slot of a channel (channel "queue_pairs").
#[cfg_attr(feature = "schema", schemars(rename = "queue_pair"))]
pub struct QpReport {
    /// Its slot index on the channel.
    pub id: u64,
    /// data or cts, as the transport set it (rcclTelemetrySetQpRole); null when it did not.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Role"))]
    pub role: Option<&'static str>,
    #[serde(flatten)]
    pub counts: WqeCounts,
    #[serde(flatten)]
    pub latency: CompletionLatency,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    // Version 3 (per QP only; None in the channel totals built from a QpReport).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub identity: Option<QpIdentity>,
    // Stall detection's keys (per QP only; absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<QpStallReport>,
    // Version 4 (per QP only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub errors: Option<QpErrorReport>,
    // Version 5 (per QP only): its local port and LID, the WQE latency monitor's statistics.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<QpMonitorReport>,
    /// The QP's path and retry settings as the transport set them (rcclTelemetryQpSetAttrs, or the
    /// interposer's modify_qp); absent when none was told, and within it each setting absent until
    /// told.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "QpAttrsReport", extend("x-since" = 5)))]
    pub attrs: Option<QpAttrsReport>,
}

/// Version 5 queue-pair keys, after every older one: the QP's local end as told, and the WQE
/// latency monitor's statistics of its measured completions.
#[derive(Serialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QpMonitorReport {
    /// The local port the QP uses (the preload: from modify_qp); null when unknown (always with
    /// the hooks, whose device "port" is null too).
    #[cfg_attr(feature = "schema", schemars(range(max = 255), extend("x-since" = 5)))]
    pub port: Option<u8>,
    /// The QP's local LID as told (rcclTelemetryQpSetPeer, the preload); null when 0 or unknown.
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::Lid>", extend("x-since" = 5)))]
    pub local_lid: Option<u16>,
    /// Present only when slow_threshold_ns > 0 and the QP measured a completion: the exact mean
    /// post-to-poll latency in ns of its measured completions.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "f64", range(min = 0), extend("x-since" = 5)))]
    pub wqe_completion_ns_mean: Option<f64>,
    /// Present with wqe_completion_ns_mean: their sample standard deviation in ns (n - 1; 0 for
    /// one completion), exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "f64", range(min = 0), extend("x-since" = 5)))]
    pub wqe_completion_ns_stddev: Option<f64>,
    /// Present with wqe_completion_ns_mean: their median in ns, from the QP's own log-scale
    /// counts (within 1/16 of the exact value, and within the QP's min and max).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub wqe_completion_ns_p50: Option<u64>,
    /// Present with wqe_completion_ns_mean: their 90th percentile in ns, as p50.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub wqe_completion_ns_p90: Option<u64>,
    /// Present with wqe_completion_ns_mean: their 99th percentile in ns, as p50.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub wqe_completion_ns_p99: Option<u64>,
    /// Present with wqe_completion_ns_mean: their 99.9th percentile in ns, as p50.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64", extend("x-since" = 5)))]
    pub wqe_completion_ns_p999: Option<u64>,
}

/// A QP's path and retry settings (queue pair "attrs"): each key present once told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "qp_attrs"))]
pub struct QpAttrsReport {
    /// The GRH traffic class (DSCP << 2 | ECN).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub traffic_class: Option<u8>,
    /// The service level (the priority on RoCE without DSCP mapping).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub sl: Option<u8>,
    /// The path MTU in bytes (256 .. 4096).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "u32", range(min = 256, max = 4096))
    )]
    pub path_mtu: Option<u32>,
    /// The local ACK timeout exponent: the transport waits 4.096 us * 2^timeout for an ACK.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub timeout: Option<u8>,
    /// Retransmissions after an ACK timeout before the QP fails with RETRY_EXC_ERR.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub retry_cnt: Option<u8>,
    /// Retries after an RNR NAK before RNR_RETRY_EXC_ERR; 7 retries for ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub rnr_retry: Option<u8>,
    /// The RNR NAK timer the QP asks its peer to wait, IB-encoded (0 = 655.36 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub min_rnr_timer: Option<u8>,
    /// The source GID index.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub sgid_index: Option<u8>,
    /// The local port.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub port: Option<u8>,
    /// The GRH hop limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub hop_limit: Option<u8>,
    /// RDMA reads and atomics the QP may have outstanding as initiator.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub max_rd_atomic: Option<u8>,
    /// RDMA reads and atomics the QP accepts outstanding as target.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u8"))]
    pub max_dest_rd_atomic: Option<u8>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
/// One sample of a device's hardware counters (top-level "hw_samples").
#[cfg_attr(feature = "schema", schemars(rename = "hw_sample"))]
pub struct SampleReport {
    /// The device the row is of.
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_DEVICE_ID)))]
    pub device_id: u32,
    /// UTC wall clock in ns since the Unix epoch: the wall clock at start plus a monotonic offset,
    /// so samples line up across hosts and never go backwards.
    pub timestamp_ns: u64,
    /// The sampled counters (the congestion set, read from IB sysfs) as deltas since the device's
    /// first sample, and, with stall detection on, num_wqe_outstanding and num_qps_stalled as of
    /// the detector's last check; -1 means not available.
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
