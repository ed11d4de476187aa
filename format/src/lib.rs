//! rccl-telemetry-format: the per-rank file and the Prometheus text format, in one place for
//! the writer (`librccl_telemetry`, its verbs interposer) and the reader (the `rccl-telemetry`
//! tool), as Darshan's writer and parser share one log-format header.
//!
//! - [`write`]: the file as the library writes it, one struct per object, field order = key
//!   order; the hardware-counter values.
//! - [`counters`]: the per-QP software counters, one row each: the writer's, the reader's and
//!   the Prometheus text's fields and every list of them come from this one table.
//! - [`read`]: the file as a reader takes it, every version this library has written
//!   ([`READ_VERSIONS`]): keys an older version lacks are optional, unknown keys are ignored.
//! - [`vocab`]: the hardware-counter vocabulary (name, kind, unit, meaning, and where each
//!   driver exposes it), in the order the file lists it.
//! - [`wc_status`]: the names of `enum ibv_wc_status` (error completions by status).
//! - `schema` (feature "schema"): the JSON Schema of the file, generated from [`write`]'s
//!   types.
//! - [`promtext`]: the Prometheus text exposition: every family and the renderer, shared by
//!   the library's live textfile and the tool's `export --format prometheus`.
//!
//! Plain data and serde only: nothing here reads a counter, a clock or the file system, and
//! the crate depends on nothing the library does not already (schemars, which derives the
//! schema, only with the feature "schema", which only the contract test turns on). What moving the format here
//! cost the library, measured when it moved: the stripped `librccl_telemetry.so` grew from
//! 892,584 to 897,960 bytes (+0.6 %, cold generics instantiated in both crates), its third-party
//! dependencies stayed serde and serde_json, and the disassembly of its 23 data-path exports
//! stayed identical.

pub mod counters;
pub mod promtext;
pub mod read;
#[cfg(feature = "schema")]
pub mod schema;
pub mod vocab;
pub mod wc_status;
pub mod write;

/// The version this library writes.
/// 2: adds `wqe_completion_log_histogram` to every channel and device (version 1 files lack it).
/// 3: adds each QP's identity and peer, and each device's local identity and per-peer latency
/// ("qp_num", "local_gid", "peer", "qp_type"; "port", "gid_index", "gid", "gid_ip", "lid",
/// "peers"), after every older key of their object; and, with stall detection on, each QP's and
/// device's stall keys after those, and "stall_ms" (always) at the top.
/// 4: adds each QP's error completions by status, its first error, its state after it and the
/// times of its last post and completion ("cq_errors", "first_cq_error", "qp_state",
/// "last_post_time", "last_completion_time"), and each device's errors by status
/// ("cq_errors_by_status"), after every older key of their object; and the communicators: the
/// process's "rank" and its "communicators" at the top, each channel's "comm", each device's
/// "finalized_comms" (a finalized communicator's counts), after every older key of their object.
/// 5: adds the WQE latency monitor: "slow_threshold_ns" at the top, the counters "num_wqe_slow"
/// and "num_stalls" (channels, QPs, finalized records; summed per device), and each QP's
/// "wqe_completion_ns_mean", "_stddev", "_p50", "_p90", "_p99", "_p999", "port" and
/// "local_lid"; and each QP's path and retry settings ("attrs"), after every older key of
/// their object.
pub const FORMAT_VERSION: u32 = 5;

/// The numeric versions [`read`] takes: every one this library has written, and 5 (the WQE
/// latency monitor's keys, each QP's path and retry settings).
pub const READ_VERSIONS: [u32; 5] = [1, 2, 3, 4, 5];

/// The "version" string of the files RCCL's in-tree engine writes, which the tool also reads
/// (mapping them onto [`read`]'s model itself).
pub const INTREE_VERSION: &str = "1.0";
