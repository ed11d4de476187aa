//! The WQE latency monitor's figures in an imported file: every key `import` writes that the
//! format's writer types do not have yet, in this one place.
//!
//! They are written beside the writer's own keys (`#[serde(flatten)]` into each QP and the top
//! level), with the names the library's monitor keys take: per QP `num_wqe_slow`, `num_stalls`,
//! `wqe_completion_ns_mean`, `_stddev`, `_p50`, `_p90`, `_p99`, `_p999`, `local_lid` and
//! `port`; at the top `slow_threshold_ns`. Once the format's tables carry them, these structs
//! give way to those fields.

use serde::Serialize;

/// A QP's monitor keys, each absent when no line gave it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QpMonitor {
    /// Completions above the threshold (the summary's `slow=`; else the slow lines seen, a
    /// lower bound: the monitor prints at most one a second per QP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_slow: Option<u64>,
    /// Stall episodes (runs of `WQE stall` lines of one stuck WR, ended by a completion);
    /// present when the rank's logs have stall lines (the file's stall_ms then > 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_stalls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_stddev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_p50: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_p90: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_p99: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_ns_p999: Option<u64>,
    /// The local LID (null when 0: RoCE) and port the QP was brought up on (the slow and
    /// stall lines' `local:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_lid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
}

/// The top-level monitor key.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileMonitor {
    /// The `NCCL_IB_WQE_LATENCY_THRESHOLD_NS` the lines print (`thr=`); absent when no
    /// monitor line was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_threshold_ns: Option<u64>,
}

/// A writer struct and the monitor keys after its own.
#[derive(Serialize)]
pub struct WithMonitor<T, M> {
    #[serde(flatten)]
    pub inner: T,
    #[serde(flatten)]
    pub monitor: M,
}
