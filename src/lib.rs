//! librccl_telemetry: per device / channel / QP network telemetry for RCCL's IB-CAST
//! transport, behind a C ABI (see `include/rccl_telemetry.h`, generated from `capi`).
//!
//! Flow: env -> `config` -> (enabled?) -> `registry` (devices -> channels -> QP slots) <- hooks
//! (`capi`, through resolved handles) ; `hw` (baselines on first use, finals at flush) ;
//! at exit or Flush: snapshot every slot -> `report` -> JSON -> temp file -> rename.
//! The hot path never calls into `hw` or `report`.

pub mod capi;
pub mod config;
pub mod counters;
pub mod diag;
pub mod hot;
pub mod hw;
pub mod inline_abi;
pub mod latency;
pub mod loghist;
pub mod registry;
pub mod report;
pub mod signals;
pub mod writer;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use parking_lot::Mutex;

use config::{Config, Fault};
use report::Identity;

/// Lifecycle of the library in this process.
const UNINIT: u8 = 0;
const DISABLED: u8 = 1;
const ON: u8 = 2;
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static INIT_LOCK: Mutex<()> = Mutex::new(());
/// Set once the final file has been claimed: later finals and snapshots are no-ops.
static FINAL_CLAIMED: AtomicBool = AtomicBool::new(false);
/// Serialises writes, so a snapshot can never be renamed over the final file.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// What caused a write; recorded in the file as "trigger".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The exit handler (atexit, or dlclose of the library).
    Exit,
    /// rcclTelemetryFlush.
    Flush,
    /// RCCL_TELEMETRY_FLUSH_INTERVAL_S.
    Interval,
    /// A termination signal, or RCCL_TELEMETRY_SNAPSHOT_SIGNAL.
    Signal(i32),
}

impl Trigger {
    pub fn name(self) -> String {
        match self {
            Trigger::Exit => "exit".into(),
            Trigger::Flush => "rcclTelemetryFlush".into(),
            Trigger::Interval => "interval".into(),
            Trigger::Signal(s) => config::signal_name(s),
        }
    }
}

/// What Init established; set once, only when telemetry is on.
pub struct Runtime {
    pub cfg: Config,
    pub id: Identity,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

pub fn runtime() -> Option<&'static Runtime> {
    if STATE.load(Acquire) == ON { RUNTIME.get() } else { None }
}

/// Whether telemetry is enabled and initialised.
pub fn is_on() -> bool {
    STATE.load(Acquire) == ON
}

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces Rust's default panic output with a record that the boundary turns into one
/// prefixed line (this library's std is its own, so no application hook is affected).
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = match (info.payload().downcast_ref::<&str>(), info.payload().downcast_ref::<String>()) {
                (Some(s), _) => (*s).to_owned(),
                (_, Some(s)) => s.clone(),
                _ => "unknown panic".to_owned(),
            };
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            let _ = PANIC_MSG.try_with(|m| *m.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// Called by the C boundary when it caught a panic: one line, at most a few times.
pub fn contained_panic(entry: &str) {
    static REPORTED: AtomicU32 = AtomicU32::new(0);
    let msg = PANIC_MSG.try_with(|m| m.borrow_mut().take()).ok().flatten().unwrap_or_default();
    if REPORTED.fetch_add(1, Relaxed) < 16 {
        diag::warn(&format!("internal error in {entry} contained, call ignored: {msg}"));
    }
}

/// rcclTelemetryInit: 0 on success or when disabled, -1 when asked for but not started.
/// Init's answer once it has run: 0 (on or disabled), -1 (failed), None (not yet).
fn settled() -> Option<i32> {
    match STATE.load(Acquire) {
        ON | DISABLED => Some(0),
        FAILED => Some(-1),
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
        return 0;
    }
    install_panic_hook();
    let started = std::panic::catch_unwind(start);
    let outcome = match started {
        Ok(Ok(())) => {
            STATE.store(ON, Release);
            return 0;
        }
        Ok(Err(reason)) => reason,
        Err(_) => {
            let msg = PANIC_MSG.try_with(|m| m.borrow_mut().take()).ok().flatten().unwrap_or_default();
            format!("internal error: {msg}")
        }
    };
    diag::warn(&format!("telemetry could not start ({outcome}); continuing with telemetry off"));
    STATE.store(FAILED, Release);
    -1
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
    latency::configure(cfg.latency_sample, cfg.histogram_buckets, cfg.histogram_interval_ns);
    if let Err(e) = report::probe_dir(&cfg.output_dir) {
        diag::warn(&e);
    }
    let id = Identity {
        pid: std::process::id(),
        host_name: report::host_name(),
        process_name: report::process_name(),
        start_wall_ns: latency::realtime_ns(),
        histogram_buckets: cfg.histogram_buckets,
        histogram_interval_ns: cfg.histogram_interval_ns,
        latency_sample: cfg.latency_sample,
    };
    diag::debug(|| {
        format!(
            "telemetry on: output {}, {} latency buckets of {} ns, measuring 1 WQE in {}, sampler {} ms, sysfs {}",
            cfg.output_dir.join(report::file_name(&id.host_name)).display(),
            cfg.histogram_buckets,
            cfg.histogram_interval_ns,
            cfg.latency_sample,
            cfg.hw.sample_ms,
            cfg.hw.sysfs_root.display()
        )
    });
    hw::sampler_start(&cfg.hw);
    let want_writer = cfg.signals || cfg.flush_interval_s > 0 || cfg.snapshot_signal.is_some();
    let (signals, snapshot_signal, interval) = (cfg.signals, cfg.snapshot_signal, cfg.flush_interval_s);
    if RUNTIME.set(Runtime { cfg, id }).is_err() {
        return Err("initialised twice".into());
    }
    // SAFETY: registering a plain extern "C" function.
    if unsafe { libc::atexit(at_exit) } != 0 {
        diag::warn("could not register the exit handler; call rcclTelemetryFlush to write the file");
    }
    if want_writer {
        match writer::start(interval) {
            Ok(()) => {
                for d in signals::install(signals, snapshot_signal) {
                    diag::warn(&d);
                }
            }
            Err(e) => diag::warn(&format!("{e}; no file on signals or at intervals, only at exit")),
        }
    }
    Ok(())
}

/// The snapshot signal in effect (0 when none).
pub fn snapshot_signal() -> i32 {
    signals::snapshot_signal()
}

/// Runs at process exit, and at dlclose of the library: the final file, then every thread
/// of ours joined and every signal handler of ours put back, so nothing points into an
/// unloaded library.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(rt) = runtime() else { return };
        if std::process::id() != rt.id.pid {
            return; // a forked child: the parent's threads, pipes and file are not ours
        }
        write_file(Trigger::Exit, true);
        writer::stop();
        signals::restore();
    });
}

/// rcclTelemetryFlush: writes the final file once. 0 on success or when disabled, -1 on failure.
pub fn flush() -> i32 {
    write_file(Trigger::Flush, true)
}

/// Writes the file: the final one (once), or a snapshot (any number, never after the final).
/// A forked child writes nothing: its counters began as the parent's. 0 on success or when
/// there was nothing to do, -1 on failure (one line on stderr).
pub fn write_file(trigger: Trigger, is_final: bool) -> i32 {
    let Some(rt) = runtime() else { return 0 };
    if std::process::id() != rt.id.pid {
        diag::debug(|| format!("process {} is a fork of {}: it writes no telemetry file", std::process::id(), rt.id.pid));
        return 0;
    }
    if is_final {
        if FINAL_CLAIMED.swap(true, AcqRel) {
            return 0;
        }
    } else if FINAL_CLAIMED.load(Acquire) {
        return 0;
    }
    let _g = WRITE_LOCK.lock();
    let written = std::panic::catch_unwind(|| {
        if rt.cfg.fault == Fault::FlushPanic && is_final {
            panic!("forced by {}=flush_panic", config::ENV_TEST_FAULT);
        }
        let samples = if is_final { hw::sampler_stop() } else { hw::sampler_snapshot() };
        let file = report::build(&rt.id, latency::realtime_ns(), samples, is_final, &trigger.name());
        report::write_atomic(&rt.cfg.output_dir, &report::file_name(&rt.id.host_name), &file)
    });
    match written {
        Ok(Ok(path)) => {
            diag::debug(|| format!("wrote {} ({}, {})", path.display(), if is_final { "final" } else { "snapshot" }, trigger.name()));
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
