//! The per-rank JSON file: the library's side of it. The file's types, key order and version
//! are the format crate's (`rccl_telemetry_format::write`, in `format/`, re-exported here);
//! `build` reads the registry into them, `layout` lays the file out, `file` writes it
//! (through `atomic_file::write_atomic_with`) and names it. This file holds what fills the
//! format's types from the library's own state.

mod build;
mod file;
mod layout;

pub use build::{build, device_report};
pub use file::{file_name, host_name, probe_dir, process_name, rfc3339, write_atomic};
pub use layout::to_writer;
pub use rccl_telemetry_format::write::*;
pub use rccl_telemetry_format::FORMAT_VERSION;

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
