//! The per-rank JSON file: the library's side of it. The file's types, key order and version
//! are the format crate's (`rccl_telemetry_format::write`, in `format/`, re-exported here);
//! `build` reads the registry into them, `layout` lays the file out, `file` names it and
//! writes a model (through `atomic_file::write_atomic_with`). This file holds what fills the
//! format's types from the library's own state. `stream` writes the file as it reads the
//! registry (what the runtime does); `build` also makes the whole model in memory.

mod build;
mod file;
mod layout;
mod stream;

pub use build::{build, device_report};
pub use file::{file_name, host_name, probe_dir, process_name, rfc3339, write_atomic};
pub use layout::to_writer;
pub use rccl_telemetry_format::write::*;
pub use rccl_telemetry_format::FORMAT_VERSION;
pub use stream::{write_file, write_to, write_to_two_passes};

use crate::counters::ExtSnapshot;
use crate::loghist::{self, LOG_BUCKETS};

/// Process facts captured at Init.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The process that initialised telemetry (a forked child has another pid).
    pub pid: u32,
    pub host_name: String,
    pub process_name: String,
    pub start_wall_ns: u64,
    pub histogram_buckets: u32,
    pub histogram_interval_ns: u64,
    pub latency_sample: u64,
    /// Whether channels record the log-scale histogram (RCCL_TELEMETRY_LOG_HISTOGRAM).
    pub log_histogram: bool,
    /// The process's rank, from the launcher's environment (`textfile::RANK_VARS`).
    pub rank: Option<String>,
}

/// A QP's stall keys from the detector's state of it.
pub fn qp_stall_report(
    st: &crate::stall_detector::QpState,
    view: &crate::stall_detector::DevView,
    preload: bool,
) -> QpStallReport {
    QpStallReport {
        num_wqe_outstanding: st.outstanding,
        oldest_outstanding_ms: preload
            .then(|| crate::stall_detector::token_age_ms(st.oldest_token)),
        stalled: st.stalled(),
        stalled_since: st.stall_start.map(|s| rfc3339(view.wall(s))),
        longest_stall_ms: st.longest_ns / 1_000_000,
        longest_stall_start: (st.longest_ns > 0).then(|| rfc3339(view.wall(st.longest_start))),
    }
}

/// Error completions by status value, named and in the enum's order.
pub fn status_counts(m: &std::collections::BTreeMap<i32, u64>) -> StatusCounts {
    StatusCounts(
        m.iter()
            .map(|(k, v)| (crate::cq_errors::status_name(*k), *v))
            .collect(),
    )
}

/// A QP's version-4 keys: its error completions (None: it had none) and, from the stall
/// detector's state of it, the ticks that saw its last post and completion.
pub fn qp_error_report(
    e: Option<&crate::cq_errors::QpErrors>,
    stall: Option<(
        &crate::stall_detector::QpState,
        &crate::stall_detector::DevView,
    )>,
) -> QpErrorReport {
    let at = |t: Option<u64>| stall.and_then(|(_, v)| t.map(|t| rfc3339(v.wall(t))));
    QpErrorReport {
        cq_errors: e.map(|e| status_counts(&e.by_status)).unwrap_or_default(),
        first_cq_error: e.and_then(|e| e.first.as_ref()).map(|f| FirstErrorReport {
            status: crate::cq_errors::status_name(f.status),
            status_code: f.status,
            vendor_err: f.vendor_err,
            time: rfc3339(f.wall_ns),
            opcode: f.opcode,
            bytes: f.bytes,
            age_ms: f.age_ms,
        }),
        qp_state: e.and_then(|e| e.state),
        last_post_time: at(stall.and_then(|(s, _)| s.last_post)),
        last_completion_time: at(stall.and_then(|(s, _)| s.last_completion)),
    }
}

impl From<&ExtSnapshot> for VerbsCounters {
    fn from(e: &ExtSnapshot) -> Self {
        VerbsCounters {
            num_send_wqe: e.send_wqe,
            num_read_wqe: e.read_wqe,
            num_atomic_wqe: e.atomic_wqe,
            num_other_wqe: e.other_wqe,
            num_wqe_retired_unsignalled: e.retired_unsignalled,
            num_wqe_track_full: e.track_full,
        }
    }
}

/// A log-scale histogram as the file shows it (only the non-empty buckets).
pub fn log_buckets(counts: &[u64; LOG_BUCKETS]) -> LogBuckets {
    LogBuckets(loghist::sparse(counts))
}
