//! librccl_telemetry: per device / channel / QP network telemetry for RCCL's IB-CAST
//! transport, behind a C ABI (see `include/rccl_telemetry.h`, generated from `capi`).
//!
//! Flow: env -> `config` -> (enabled?) -> `registry` (devices -> channels -> QP slots) <- hooks
//! (`capi`, through resolved handles) ; `hw` (baselines on first use, finals at flush) ;
//! at exit or Flush: snapshot every slot -> `rank_file` -> JSON -> temp file -> rename.
//! The hot path never calls into `hw` or `rank_file`.
//!
//! Layers, bottom to top; a module imports only from its own layer or below, and nothing
//! imports in a circle ([`LAYERS`] is the table; `rust_tests/layers.rs` checks every
//! `crate::` path of `src/` against it):
//!
//! 1. leaves, what everyone borrows: `diag` (stderr lines), `panics` (the boundary's panic
//!    line), `hot` (the header's hot parameters), `thread` (the thread pointer, the owner's
//!    relaxed add, `spawn_quiet`), `sysfs` (bounded attribute reads), `reserve` (the global
//!    allocator: the system's, with a reserve for small allocations it refuses);
//! 2. hot data: `latency` (clock, tokens, linear histogram), `loghist`, `counters` (the
//!    slots), `qp_ext` (the verbs interposer's counters beside a slot), `channel_peers` (a
//!    channel's told identities and per-peer histograms);
//! 3. hardware: `hw` (its sampler takes stall numbers through a source `stall_detector`
//!    installs);
//! 4. state: `config` (the environment), `registry` (devices, channels, slots);
//! 5. observers built on the registry: `peers` (SetPeer, per-peer sums), `stall_detector`,
//!    `cq_errors` (error completions per QP and device, by status), `comms` (a finalized
//!    communicator's record);
//! 6. outputs: `atomic_file`, `rank_file` (the per-rank JSON file), `textfile` (the live
//!    node_exporter textfile), `writer` (the thread; the runtime hands it its writes as
//!    `writer::Jobs`);
//! 7. entry points: this file (the runtime: Init, Flush, the final write), `capi`,
//!    `signals`, `inline_abi`.
//!
//! Below every layer, a crate of its own: `rccl_telemetry_format` (`format/`), the file
//! format the tool reads too: the file's types and version, the hardware-counter vocabulary,
//! the Prometheus families and renderer.

/// The layer table (bottom first) that `rust_tests/layers.rs` holds `src/` to; `lib` is this
/// file. A new module gets a row here.
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
        &["peers", "stall_detector", "cq_errors", "comms"],
    ),
    (
        "outputs",
        &["atomic_file", "rank_file", "textfile", "writer"],
    ),
    ("entry points", &["lib", "capi", "signals", "inline_abi"]),
];

pub mod atomic_file;
pub mod capi;
pub mod channel_peers;
pub mod comms;
pub mod config;
pub mod counters;
pub mod cq_errors;
pub mod diag;
pub mod hot;
pub mod hw;
pub mod inline_abi;
pub mod latency;
pub mod loghist;
pub mod panics;
pub mod peers;
pub mod qp_ext;
pub mod rank_file;
pub mod registry;
pub mod reserve;
pub mod signals;
pub mod stall_detector;
mod sysfs;
pub mod textfile;
pub mod thread;
pub mod writer;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use parking_lot::Mutex;

use config::{Config, Fault};

/// Every Rust allocation of the library goes through the system's allocator, with a reserve
/// behind it (see `reserve`): an allocation failure never aborts the host program.
#[global_allocator]
static ALLOCATOR: reserve::WithReserve = reserve::WithReserve;

/// Says once that memory ran out badly enough for the reserve to be used.
fn say_reserve_used() {
    if let Some(n) = reserve::take_used() {
        diag::warn(&format!(
            "memory ran out: {n} small allocations of the library were served from its reserve (what could not be allocated at all is said in a line of its own)"
        ));
    }
}
use rank_file::Identity;

/// Lifecycle of the library in this process.
const UNINIT: u8 = 0;
const DISABLED: u8 = 1;
const ON: u8 = 2;
const FAILED: u8 = 3;
/// The final file has been claimed (Flush or exit): every entry point is inert from then on.
const FINISHED: u8 = 4;
/// A forked child of a process with telemetry on: inert, writes nothing.
const FORKED: u8 = 5;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static INIT_LOCK: Mutex<()> = Mutex::new(());
/// The final file: not yet claimed, being written, written (or failed: it is tried once).
const FINAL_NONE: u8 = 0;
const FINAL_WRITING: u8 = 1;
const FINAL_DONE: u8 = 2;
static FINAL: AtomicU8 = AtomicU8::new(FINAL_NONE);
/// Serialises writes; a snapshot checks FINAL only once it holds it, so it can never be
/// renamed over the final file.
static WRITE_LOCK: Mutex<()> = Mutex::new(());
/// Whether this forked child has said that it is one.
static FORK_NOTED: AtomicBool = AtomicBool::new(false);

pub use writer::Trigger;

/// What Init established; set once, only when telemetry is on.
pub struct Runtime {
    pub cfg: Config,
    pub id: Identity,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime while telemetry is on: None when disabled, failed, after the final write, or
/// in a forked child (which says so once, on its first call).
pub fn runtime() -> Option<&'static Runtime> {
    if is_on() {
        RUNTIME.get()
    } else {
        None
    }
}

/// Whether telemetry is enabled, initialised, and not yet finished by the final write.
pub fn is_on() -> bool {
    match STATE.load(Acquire) {
        ON => true,
        FORKED => {
            note_fork();
            false
        }
        _ => false,
    }
}

/// The one line a forked child prints, on its first call into the library.
fn note_fork() {
    if FORK_NOTED.swap(true, Relaxed) {
        return;
    }
    let parent = RUNTIME.get().map_or(0, |rt| rt.id.pid);
    diag::warn(&format!(
        "process {} is a fork of {parent}, which has telemetry on: telemetry is off in it and it writes no file (an exec'd program starts afresh)",
        std::process::id()
    ));
}

/// Clears everything the entry points and the header's inline hooks read to decide that
/// telemetry counts: the state (rcclTelemetryOn, every cold entry point, the library's data
/// path), `rcclTelemetryHotV3.enabled` (what an inline rcclTelemetryOn reads), and each
/// device's published stripes (so the inline device forms call the library, which is inert).
fn go_inert(state: u8) {
    STATE.store(state, Release);
    hot::rcclTelemetryHotV3.enabled.store(0, Release);
    for s in &hot::rcclTelemetryHotV3.stripes {
        s.store(std::ptr::null_mut(), Release);
    }
}

/// pthread_atfork child handler: the child of a process with telemetry on is inert.
extern "C" fn in_forked_child() {
    if matches!(STATE.load(Relaxed), ON | FINISHED) {
        FORK_NOTED.store(false, Relaxed);
        go_inert(FORKED);
    }
}

pub use panics::contained_panic;
use panics::install_panic_hook;

/// rcclTelemetryInit's results (the header's RCCL_TELEMETRY_INIT_*, defined in `capi`).
pub const INIT_STARTED: i32 = 0;
pub const INIT_OFF: i32 = 1;
pub const INIT_FINISHED: i32 = 2;
pub const INIT_FAILED: i32 = -1;

/// Init's answer once it has run (the header's RCCL_TELEMETRY_INIT_*): started, off,
/// finished (the final file written, or a forked child), failed; None: not yet.
fn settled() -> Option<i32> {
    match STATE.load(Acquire) {
        FORKED => {
            note_fork();
            Some(INIT_FINISHED)
        }
        ON => Some(INIT_STARTED),
        DISABLED => Some(INIT_OFF),
        FINISHED => Some(INIT_FINISHED),
        FAILED => Some(INIT_FAILED),
        _ => None,
    }
}

pub fn init() -> i32 {
    if let Some(rc) = settled() {
        return rc;
    }
    let _g = INIT_LOCK.lock();
    if let Some(rc) = settled() {
        return rc;
    }
    let (enabled, note) = config::enabled_from(std::env::var_os(config::ENV_ENABLE).as_deref());
    if let Some(n) = note {
        diag::warn(&n);
    }
    if !enabled {
        STATE.store(DISABLED, Release);
        return INIT_OFF;
    }
    install_panic_hook();
    let started = std::panic::catch_unwind(start);
    let outcome = match started {
        Ok(Ok(())) => {
            STATE.store(ON, Release);
            hot::rcclTelemetryHotV3.enabled.store(1, Release);
            return INIT_STARTED;
        }
        Ok(Err(reason)) => reason,
        Err(_) => {
            let msg = panics::take_message();
            format!("internal error: {msg}")
        }
    };
    diag::warn(&format!(
        "telemetry could not start ({outcome}); continuing with telemetry off"
    ));
    STATE.store(FAILED, Release);
    INIT_FAILED
}

fn start() -> Result<(), String> {
    let (cfg, diags) = Config::from_env();
    for d in &diags {
        diag::warn(d);
    }
    diag::set_debug(cfg.debug);
    match cfg.fault {
        Fault::InitError => return Err(format!("forced by {}=init_error", config::ENV_TEST_FAULT)),
        Fault::InitPanic => panic!("forced by {}=init_panic", config::ENV_TEST_FAULT),
        _ => {}
    }
    latency::configure(
        cfg.latency_sample,
        cfg.histogram_buckets,
        cfg.histogram_interval_ns,
        &cfg.hw.sysfs_root,
    );
    registry::set_log_histogram(cfg.log_histogram);
    stall_detector::configure(cfg.stall_ms);
    if let Err(e) = rank_file::probe_dir(&cfg.output_dir) {
        diag::warn(&e);
    }
    let id = Identity {
        pid: std::process::id(),
        host_name: rank_file::host_name(),
        process_name: rank_file::process_name(),
        start_wall_ns: latency::realtime_ns(),
        histogram_buckets: cfg.histogram_buckets,
        histogram_interval_ns: cfg.histogram_interval_ns,
        latency_sample: cfg.latency_sample,
        log_histogram: cfg.log_histogram,
        rank: textfile::rank_from(|n| std::env::var_os(n)),
    };
    diag::debug(|| {
        format!(
            "telemetry on: output {}, {} latency buckets of {} ns, measuring 1 WQE in {}, sampler {} ms, sysfs {}",
            cfg.output_dir.join(rank_file::file_name(&id.host_name)).display(),
            cfg.histogram_buckets,
            cfg.histogram_interval_ns,
            cfg.latency_sample,
            cfg.hw.sample_ms,
            cfg.hw.sysfs_root.display()
        )
    });
    hw::sampler_start(&cfg.hw);
    let prom_interval = textfile::configure(&cfg, &id);
    // The stall detector ticks on the writer thread: with detection on (the default) the
    // writer runs even when nothing else asks for it.
    let want_writer = cfg.signals
        || cfg.flush_interval_s > 0
        || cfg.snapshot_signal.is_some()
        || prom_interval > 0
        || cfg.stall_ms > 0;
    let (signals, snapshot_signal, interval) =
        (cfg.signals, cfg.snapshot_signal, cfg.flush_interval_s);
    if RUNTIME.set(Runtime { cfg, id }).is_err() {
        return Err("initialised twice".into());
    }
    // SAFETY: registering a plain extern "C" function.
    if unsafe { libc::atexit(at_exit) } != 0 {
        diag::warn(
            "could not register the exit handler; call rcclTelemetryFlush to write the file",
        );
    }
    // SAFETY: registering a plain extern "C" function that only stores to atomics.
    if unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } != 0 {
        diag::debug(|| {
            "could not register the fork handler; a forked child still writes nothing".into()
        });
    }
    if want_writer {
        let jobs = writer::Jobs {
            write_file,
            snapshot_signal: crate::snapshot_signal,
            prom: prom_periodic,
        };
        match writer::start(
            interval,
            prom_interval,
            stall_detector::tick_period_ms(stall_detector::stall_ms()),
            jobs,
        ) {
            Ok(()) => {
                // A QP's first error completion wakes the writer for its snapshot.
                cq_errors::set_waker(|| {
                    writer::request(writer::TRIGGER);
                });
                let (taken, diags) = signals::install(signals, snapshot_signal);
                for d in diags {
                    diag::warn(&d);
                }
                if !taken.is_empty() {
                    diag::info(&format!(
                        "signal handlers installed for {}: on one, the file is written first, then the signal takes its course as before (RCCL_TELEMETRY_SIGNALS=0 leaves the termination signals alone)",
                        taken.join(", ")
                    ));
                }
            }
            Err(e) => diag::warn(&format!(
                "{e}; no file on signals or at intervals (nor a Prometheus textfile), only at exit"
            )),
        }
    }
    Ok(())
}

/// The snapshot signal in effect (0 when none).
pub fn snapshot_signal() -> i32 {
    signals::snapshot_signal()
}

/// The writer thread's periodic textfile write, while telemetry is on.
fn prom_periodic() {
    if is_on() {
        textfile::write_periodic();
    }
}

/// Runs at process exit, and at dlclose of the library: the final file, then every thread
/// of ours joined and every signal handler of ours put back, so nothing points into an
/// unloaded library.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(rt) = RUNTIME.get() else { return };
        if std::process::id() != rt.id.pid || !matches!(STATE.load(Acquire), ON | FINISHED) {
            return; // a forked child: the parent's threads, pipes and file are not ours
        }
        write_file(Trigger::Exit, true);
        writer::stop();
        signals::restore();
        say_reserve_used();
    });
}

/// rcclTelemetryFlush: writes the final file once. 0 on success or when disabled, -1 on failure.
pub fn flush() -> i32 {
    write_file(Trigger::Flush, true)
}

/// Writes the file: the final one (once), or a snapshot (any number, never after the final).
/// A forked child writes nothing: its counters began as the parent's. 0 on success or when
/// there was nothing to do, -1 on failure (one line on stderr).
///
/// The termination and snapshot signals are blocked in the calling thread while it writes,
/// so a signal cannot interrupt the write on this thread (it is taken by another thread, or
/// once the write is done). A final write asked for while another is in progress waits for
/// it (at most the handlers' bound), so a signal or exit() arriving during Flush lets the
/// file be completed before the process dies.
pub fn write_file(trigger: Trigger, is_final: bool) -> i32 {
    let Some(rt) = RUNTIME.get() else { return 0 };
    let state = STATE.load(Acquire);
    if state == FORKED || std::process::id() != rt.id.pid {
        note_fork();
        return 0;
    }
    if !matches!(state, ON | FINISHED) {
        return 0;
    }
    let mut sigs: Vec<i32> = config::TERMINATION_SIGNALS.to_vec();
    sigs.push(signals::snapshot_signal());
    let (_, mask) = writer::block(writer::SigSet::Only(&sigs));
    let rc = if is_final {
        if FINAL
            .compare_exchange(FINAL_NONE, FINAL_WRITING, AcqRel, Acquire)
            .is_ok()
        {
            go_inert(FINISHED);
            // The live textfile goes first: the rank's series end with it.
            textfile::finish();
            let rc = {
                let _g = WRITE_LOCK.lock();
                write_locked(rt, trigger, true)
            };
            FINAL.store(FINAL_DONE, Release);
            rc
        } else {
            wait_final();
            0
        }
    } else {
        let _g = WRITE_LOCK.lock();
        if FINAL.load(Acquire) != FINAL_NONE {
            0
        } else {
            write_locked(rt, trigger, false)
        }
    };
    writer::restore_mask(&mask);
    rc
}

/// Waits (bounded, as the signal handlers are) for a final write in progress elsewhere.
fn wait_final() {
    let deadline = latency::monotonic_ns() + signals::WRITE_TIMEOUT_MS as u64 * 1_000_000;
    while FINAL.load(Acquire) == FINAL_WRITING && latency::monotonic_ns() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Where the last write went when it could not take the file's own name (removed once a
/// later write lands, so snapshots leave one file, not one per interval).
static LAST_FALLBACK: Mutex<Option<std::path::PathBuf>> = Mutex::new(None);

fn write_locked(rt: &Runtime, trigger: Trigger, is_final: bool) -> i32 {
    let written = std::panic::catch_unwind(|| {
        if rt.cfg.fault == Fault::FlushPanic && is_final {
            panic!("forced by {}=flush_panic", config::ENV_TEST_FAULT);
        }
        let samples = if is_final {
            hw::sampler_stop()
        } else {
            hw::sampler_snapshot()
        };
        rank_file::write_file(
            &rt.cfg.output_dir,
            &rank_file::file_name(&rt.id.host_name),
            &rt.id,
            latency::realtime_ns(),
            samples,
            is_final,
            &trigger.name(),
        )
    });
    say_reserve_used();
    match written {
        Ok(Ok(w)) => {
            let mut last = LAST_FALLBACK.lock();
            if let Some(old) = last.take().filter(|old| *old != w.path) {
                let _ = std::fs::remove_file(old);
            }
            if let Some(why) = &w.fallback {
                // Every final; a snapshot only the first time (they repeat every interval).
                if is_final || last.is_none() {
                    diag::warn(&format!("telemetry file: {why}"));
                }
                *last = Some(w.path.clone());
            }
            diag::debug(|| {
                format!(
                    "wrote {} ({}, {})",
                    w.path.display(),
                    if is_final { "final" } else { "snapshot" },
                    trigger.name()
                )
            });
            0
        }
        Ok(Err(line)) => {
            diag::warn(&line);
            -1
        }
        Err(_) => {
            contained_panic("rcclTelemetryFlush");
            -1
        }
    }
}

/// Whether the inline-layout refusal has been said (once per process).
static LAYOUT_NOTED: AtomicBool = AtomicBool::new(false);

/// A caller's header was compiled for inline hooks of another layout than this library's
/// (`hot::INLINE_LAYOUT`): its hooks would miscount, so telemetry stays off for the process.
/// Before Init: Init will not start it (-1 when it was asked for). While on: counting stops
/// (the inline hooks see it off, no handle is handed out); the file written at exit keeps what
/// was counted before. One line, when telemetry was asked for. Returns -1 when it was, else 0.
pub fn inline_layout_refused(header_layout: i32) -> i32 {
    let _g = INIT_LOCK.lock();
    let (asked, _) = config::enabled_from(std::env::var_os(config::ENV_ENABLE).as_deref());
    let state = STATE.load(Acquire);
    match state {
        UNINIT => STATE.store(if asked { FAILED } else { DISABLED }, Release),
        ON => go_inert(FINISHED),
        _ => {}
    }
    if asked && !LAYOUT_NOTED.swap(true, Relaxed) {
        let then = if state == ON {
            "telemetry stops counting here (the file keeps what was counted before)"
        } else {
            "telemetry stays off"
        };
        diag::warn(&format!(
            "this program's rccl_telemetry.h was compiled for inline hooks of layout {header_layout}, this library (version {}) provides layout {}: {then}; rebuild against this library's header, or with -DRCCL_TELEMETRY_NO_INLINE",
            env!("CARGO_PKG_VERSION"),
            hot::INLINE_LAYOUT
        ));
    }
    if asked {
        -1
    } else {
        0
    }
}
