//! librccl_telemetry: per device / channel / QP network telemetry for RCCL's IB-CAST
//! transport, behind a C ABI (see `include/rccl_telemetry.h`, generated from `capi`).
//!
//! Flow: env -> `config` -> (enabled?) -> `registry` (devices -> channels -> QP slots) <- hooks
//! (`capi`, through resolved handles) ; `hw` (baselines on first use, finals at flush) ;
//! at exit or Flush: snapshot every slot -> `rank_file` -> JSON -> temp file -> rename.
//! The hot path never calls into `hw` or `rank_file`.
//!
//! This file is the map: the modules, layer by layer from the bottom, each with a line on
//! what it holds. A module imports only from its own layer or below, and nothing imports in a
//! circle ([`LAYERS`] is the table; `rust_tests/layers.rs` checks every `crate::` path of
//! `src/` against it). Below every layer, a crate of its own: `rccl_telemetry_format`
//! (`format/`), the file format the tool reads too: the file's types and version, the
//! hardware-counter vocabulary, the Prometheus families and renderer.

/// The layer table (bottom first) that `rust_tests/layers.rs` holds `src/` to; `lib` is this
/// file. A new module gets a row here and a line below.
#[doc(hidden)]
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &["diag", "panics", "hot", "thread", "sysfs", "reserve"],
    ),
    (
        "hot data",
        &["latency", "loghist", "counters", "qp_ext", "channel_peers"],
    ),
    ("hardware", &["hw"]),
    ("state", &["config", "registry"]),
    (
        "observers",
        &["peers", "stall_detector", "monitor", "cq_errors", "comms"],
    ),
    ("sampler", &["sampler"]),
    ("outputs", &["atomic_file", "rank_file", "textfile"]),
    ("runtime", &["runtime"]),
    ("writer", &["writer"]),
    (
        "entry points",
        &["lib", "lifecycle", "capi", "signals", "inline_abi"],
    ),
];

// 1. Leaves, what everyone borrows.
pub mod diag; // every line the library prints (stderr, or RCCL's logger)
pub mod hot; // the hot parameter block the data path reads on both sides of the C ABI
pub mod panics; // the panic hook and the boundary's one line for a contained panic
pub mod reserve; // the global allocator: the system's, with a reserve for small allocations
mod sysfs; // small, bounded sysfs attribute reads
pub mod thread; // the thread pointer, the owner's relaxed add, threads that take no signal

// 2. Hot data: what the hooks write.
pub mod channel_peers; // a channel's told QP identities and per-peer histograms
pub mod counters; // the slot layouts and the hot-path updates
pub mod latency; // the clock behind PostTs tokens, 1-in-N selection, the linear histogram
pub mod loghist; // the log-scale completion-latency histogram
pub mod qp_ext; // the verbs interposer's per-QP counters beside a slot

// 3. Hardware.
pub mod hw; // NIC counters: drivers, netdevs, ethtool and IB sysfs, baselines, finals

// 4. State.
pub mod config; // the environment, parsed once
pub mod registry; // devices, channels and QP slots, and the handles to them

// 5. Observers built on the registry.
pub mod comms; // a finalized communicator's record
pub mod cq_errors; // error completions per QP and device, by status
pub mod monitor; // the WQE latency monitor: slow counts, mean, quantiles and its log lines
pub mod peers; // who is on the other end of each QP, and per-peer sums
pub mod stall_detector; // stalled QPs, computed at ticks off the data path

// 6. The sampler, above the hardware and the stall detector it reads.
pub mod sampler; // RCCL_TELEMETRY_SAMPLE_MS: the "hw_samples" rows

// 7. Outputs.
pub mod atomic_file; // the atomic, private, durable write every output uses
pub mod rank_file; // the per-rank JSON file
pub mod textfile; // the live node_exporter textfile

// 8. The runtime.
pub mod runtime; // the state in this process (on, off, finished, forked) and the file writes

// 9. The writer thread.
pub mod writer; // interval snapshots, triggered snapshots, the writes signals ask for

// 10. Entry points.
pub mod capi; // every extern "C" item (the header is generated from it)
pub mod inline_abi; // what the header's inline hooks may touch, and its layout promise
pub mod lifecycle; // Init, the exit and fork handlers, the inline-layout refusal
pub mod signals; // the termination and snapshot signal handlers

pub use lifecycle::{
    init, inline_layout_refused, INIT_FAILED, INIT_FINISHED, INIT_OFF, INIT_STARTED,
};
pub use panics::contained_panic;
pub use runtime::{flush, is_on, runtime, snapshot_signal, write_file, Runtime, Trigger};

/// Every Rust allocation of the library goes through the system's allocator, with a reserve
/// behind it (see `reserve`): an allocation failure never aborts the host program.
#[global_allocator]
static ALLOCATOR: reserve::WithReserve = reserve::WithReserve;
