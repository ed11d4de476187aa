//! The Parquet export's schema: every table's columns, their types and whether they can be
//! NULL, and the schema version. Separate so the one place a column is named and typed can be
//! read (and checked against the README's schema tables) apart from how rows are filled.

/// The version of the tables' schema: bumped when a column changes meaning or type, or goes
/// away (adding a column does not bump it).
pub const SCHEMA_VERSION: i32 = 1;
/// The file metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "rccl_telemetry.schema_version";
/// The file metadata key naming the table.
pub const TABLE_KEY: &str = "rccl_telemetry.table";

/// A column's type as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    I32,
    I64,
    F64,
    Str,
    /// INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true).
    TsMicros,
}

impl Kind {
    /// The type as the README's schema tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Bool => "BOOLEAN",
            Kind::I32 => "INT32",
            Kind::I64 => "INT64",
            Kind::F64 => "DOUBLE",
            Kind::Str => "STRING",
            Kind::TsMicros => "TIMESTAMP",
        }
    }
}

/// One column: its name, type, and whether it can be NULL.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
}

pub(super) const fn col(name: &'static str, kind: Kind) -> Col {
    Col {
        name,
        kind,
        nullable: false,
    }
}
pub(super) const fn null(name: &'static str, kind: Kind) -> Col {
    Col {
        name,
        kind,
        nullable: true,
    }
}

use rccl_telemetry_format::counters::{FIELDS, N};
use Kind::*;

/// The columns every table starts with: they identify the rank (and join the tables).
pub const IDS: &[Col] = &[
    col("schema_version", I32),
    col("job", Str),
    col("host", Str),
    col("pid", I64),
    col("rank_file", Str),
];

const RANKS: &[Col] = &[
    col("process", Str),
    col("source_format", Str),
    null("is_final", Bool),
    null("trigger", Str),
    null("transport", Str),
    null("start_time", TsMicros),
    null("end_time", TsMicros),
    null("duration_s", F64),
    col("start_time_text", Str),
    col("end_time_text", Str),
    col("histogram_interval_ns", I64),
    null("latency_sample_interval", I64),
    col("devices_registered", I32),
    col("devices_used", I32),
    col("hw_samples", I64),
    null("hw_samples_dropped", I64),
];

const DEVICES: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("eth_device", Str),
    col("hw_type", Str),
    col("used", Bool),
    col("tx_bytes", I64),
    col("rx_bytes", I64),
    col("num_cq_errors", I64),
    col("cq_poll_count", I64),
    null("num_channels", I64),
    col("active_channels", I64),
    col("num_qp_untracked", I64),
    col("num_wqe_sent", I64),
    col("num_wqe_completed", I64),
    col("num_slot_miss", I64),
    col("histogram_interval_ns", I64),
    col("latency_samples", I64),
    null("latency_min_ns", I64),
    null("latency_max_ns", I64),
    null("latency_p50_ns", F64),
    null("latency_p90_ns", F64),
    null("latency_p99_ns", F64),
    null("latency_p999_ns", F64),
    col("latency_tail_open", Bool),
    null("log_latency_samples", I64),
    null("log_latency_p50_ns", F64),
    null("log_latency_p90_ns", F64),
    null("log_latency_p99_ns", F64),
    null("log_latency_p999_ns", F64),
    null("active_mtu", I32),
    null("pfc_enabled", Str),
    null("dscp_priority", Str),
];

/// The software counters channels and queue pairs share: the counter table's rows, in its
/// order (an optional one NULL where the file lacks it), then the latency extremes.
const COUNTERS: [Col; N] = {
    let mut cols = [col("", I64); N];
    let mut i = 0;
    while i < N {
        cols[i] = Col {
            name: FIELDS[i].key,
            kind: I64,
            nullable: FIELDS[i].optional,
        };
        i += 1;
    }
    cols
};

const LATENCY: &[Col] = &[
    null("wqe_completion_ns_min", I64),
    null("wqe_completion_ns_max", I64),
];

const CHANNEL_IDS: &[Col] = &[
    col("device_id", I32),
    null("channel", I64),
    col("channel_index", I32),
];

const CHANNELS: &[Col] = &[
    col("num_req_completed", I64),
    col("num_data_qp", I64),
    col("num_cts_qp", I64),
    col("num_qp_untracked", I64),
    col("num_qps", I32),
];

const QPS: &[Col] = &[col("qp", I64), null("role", Str)];

/// A QP's local end and the WQE latency monitor's statistics (format version 5).
const QP_MONITOR: &[Col] = &[
    null("port", I64),
    null("local_lid", I64),
    null("wqe_completion_ns_mean", F64),
    null("wqe_completion_ns_stddev", F64),
    null("wqe_completion_ns_p50", I64),
    null("wqe_completion_ns_p90", I64),
    null("wqe_completion_ns_p99", I64),
    null("wqe_completion_ns_p999", I64),
];

const HW_COUNTERS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("counter", Str),
    col("category", Str),
    null("priority", I32),
    null("value", I64),
];

const HW_SAMPLES: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    null("timestamp", TsMicros),
    col("timestamp_ns", I64),
    col("counter", Str),
    col("category", Str),
    null("value", I64),
];

const HISTOGRAMS: &[Col] = &[
    col("device_id", I32),
    null("channel", I64),
    null("channel_index", I32),
    null("qp", I64),
    col("level", Str),
    col("scale", Str),
    col("bucket", I32),
    col("lower_ns", I64),
    null("upper_ns", I64),
    col("count", I64),
];

/// The columns the links table starts with: a link belongs to a job and to its sending host.
pub const LINK_IDS: &[Col] = &[
    col("schema_version", I32),
    col("job", Str),
    col("host", Str),
];

const LINKS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("pids", Str),
    null("gid", Str),
    null("lid", I64),
    col("dst_host", Str),
    col("dst_device_id", I32),
    col("dst_roce_device", Str),
    col("dst_pids", Str),
    null("dst_gid", Str),
    null("dst_lid", I64),
    col("qps", I64),
    col("wrs_sent", I64),
    col("wrs_completed", I64),
    col("wrs_received_by_dst", I64),
    col("tx_bytes_est", I64),
    null("latency_source", Str),
    null("latency_samples", I64),
    null("latency_p50_ns", F64),
    null("latency_p90_ns", F64),
    null("latency_p99_ns", F64),
    null("latency_p99_open", Bool),
    null("latency_max_ns", I64),
    null("retired_unsignalled", I64),
    null("wrs_outstanding", I64),
    null("qps_stalled", I64),
    null("longest_stall_ms", I64),
];

const STALLS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    null("channel", I64),
    col("channel_index", I32),
    col("qp", I64),
    null("qp_num", I64),
    null("peer_gid", Str),
    null("peer_lid", I64),
    null("peer_qp_num", I64),
    null("stalled", Bool),
    null("stalled_since", TsMicros),
    null("num_wqe_outstanding", I64),
    null("oldest_outstanding_ms", I64),
    null("longest_stall_ms", I64),
    null("longest_stall_start", TsMicros),
];

/// A table's columns, in order (without the identifiers a partition takes away).
pub fn columns(table: &str) -> Vec<Col> {
    let parts: &[&[Col]] = match table {
        "ranks" => &[IDS, RANKS],
        "devices" => &[IDS, DEVICES],
        "channels" => &[IDS, CHANNEL_IDS, &COUNTERS, LATENCY, CHANNELS],
        "qps" => &[IDS, CHANNEL_IDS, QPS, &COUNTERS, LATENCY, QP_MONITOR],
        "hw_counters" => &[IDS, HW_COUNTERS],
        "hw_samples" => &[IDS, HW_SAMPLES],
        "histograms" => &[IDS, HISTOGRAMS],
        "links" => &[LINK_IDS, LINKS],
        "stalls" => &[IDS, STALLS],
        _ => &[],
    };
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}
