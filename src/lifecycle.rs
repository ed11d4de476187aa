//! Init and the end of the process: rcclTelemetryInit reads the environment and, when
//! telemetry is asked for, sets up the runtime and starts what runs beside the program (the
//! sampler, the writer thread, the signal handlers, the exit and fork handlers); the exit
//! handler writes the final file and stops them again. Also the refusal of a header whose
//! inline hooks have another layout.
//!
//! The top of the library with the C entry points: it starts the writer and the signal
//! handlers, which sit above the runtime they ask for writes.

use std::sync::atomic::{AtomicBool, Ordering::*};

use parking_lot::Mutex;

use crate::config::{self, Config, Fault};
use crate::rank_file::{self, Identity};
use crate::runtime::{
    self, go_inert, note_fork, Runtime, Trigger, DISABLED, FAILED, FINISHED, FORKED, FORK_NOTED,
    ON, RUNTIME, STATE, UNINIT,
};
use crate::{
    cq_errors, diag, hot, latency, panics, registry, sampler, signals, stall_detector, textfile,
    writer,
};

/// Serialises Init and the inline-layout refusal.
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// pthread_atfork child handler: the child of a process with telemetry on is inert.
extern "C" fn in_forked_child() {
    if matches!(STATE.load(Relaxed), ON | FINISHED) {
        FORK_NOTED.store(false, Relaxed);
        go_inert(FORKED);
    }
}

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
    let (enabled, note) = config::enabled_from(config::lookup(config::ENV_ENABLE).as_deref());
    if let Some(n) = note {
        diag::warn(&n);
    }
    if !enabled {
        STATE.store(DISABLED, Release);
        return INIT_OFF;
    }
    panics::install_panic_hook();
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
        cfg.clock_monotonic,
        &cfg.hw.sysfs_root,
    );
    registry::set_log_histogram(cfg.log_histogram);
    stall_detector::configure(cfg.stall_ms);
    crate::monitor::configure(cfg.slow_ns, cfg.wqe_latency_report);
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
        rank: textfile::rank_from(config::lookup),
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
    sampler::start(&cfg.hw);
    let prom_interval = textfile::configure(&cfg, &id);
    // The stall detector ticks on the writer thread: with detection on (the default) the
    // writer runs even when nothing else asks for it.
    let want_writer = cfg.signals
        || cfg.flush_interval_s > 0
        || cfg.snapshot_signal.is_some()
        || prom_interval > 0
        || cfg.stall_ms > 0
        || cfg.slow_ns > 0;
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
    // The monitor's lines are said at the stall detector's ticks (every 250 ms without it).
    let tick_ms = match stall_detector::tick_period_ms(stall_detector::stall_ms()) {
        0 if crate::monitor::slow_ns() > 0 => 250,
        t => t,
    };
    if want_writer {
        match writer::start(interval, prom_interval, tick_ms) {
            Ok(()) => {
                // A QP's first error completion wakes the writer for its snapshot.
                cq_errors::set_waker(|| {
                    writer::request(writer::TRIGGER);
                });
                let (taken, diags) = signals::install(signals, snapshot_signal);
                for d in diags {
                    diag::warn(&d);
                }
                // Information, under RCCL_TELEMETRY_DEBUG only: a normal start says nothing
                // (one line per rank is thousands in a big job's log).
                if !taken.is_empty() {
                    diag::debug(|| {
                        format!(
                        "signal handlers installed for {}: on one, the file is written first, then the signal takes its course as before (RCCL_TELEMETRY_SIGNALS=0 leaves the termination signals alone)",
                        taken.join(", ")
                    )
                    });
                }
            }
            Err(e) => diag::warn(&format!(
                "{e}; no file on signals or at intervals (nor a Prometheus textfile), only at exit"
            )),
        }
    }
    Ok(())
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
        runtime::write_file(Trigger::Exit, true);
        writer::stop();
        signals::restore();
        runtime::say_reserve_used();
    });
}

/// Whether a late rcclTelemetrySetParam has been said (once per process).
static LATE_PARAM_SAID: AtomicBool = AtomicBool::new(false);

/// rcclTelemetrySetParam: sets (Some) or removes (None) a parameter before Init. Once Init has
/// run, whatever it answered, the configuration is fixed: refused (-1), said once. A refused
/// name is said each time (a program's own mistake, made once per name). 0 when set.
pub fn set_param(name: &str, value: Option<std::ffi::OsString>) -> i32 {
    let result = {
        let _g = INIT_LOCK.lock();
        if STATE.load(Acquire) != UNINIT {
            Err(None)
        } else {
            config::set_param(name, value).map_err(Some)
        }
    };
    // Said with no lock held: a logger may call back into the library.
    match result {
        Ok(()) => 0,
        Err(Some(why)) => {
            diag::warn(&format!("rcclTelemetrySetParam: {why}; ignored"));
            -1
        }
        Err(None) => {
            let msg = || {
                format!("rcclTelemetrySetParam({name}) after rcclTelemetryInit: the configuration is fixed at Init; ignored (later calls too, said once)")
            };
            // Telemetry not asked for says nothing, as everywhere else.
            if STATE.load(Acquire) == DISABLED {
                diag::debug(msg);
            } else {
                diag::warn_once(&LATE_PARAM_SAID, msg);
            }
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
    let (asked, _) = config::enabled_from(config::lookup(config::ENV_ENABLE).as_deref());
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
