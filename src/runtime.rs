//! The library's state in this process and its file writes: the lifecycle state every entry
//! point reads (on, off, failed, finished, a forked child), what Init established
//! ([`Runtime`]), the snapshot signal in effect, and the writes of the JSON file (a snapshot,
//! or the final file once) with the sampler's rows.
//!
//! Below the writer thread and the signal handlers, which ask for writes, and below
//! `lifecycle`, which sets the state up at Init and ends it at exit.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::config::{self, Config, Fault};
use crate::rank_file::{self, Identity};
use crate::thread::{block, restore_mask, SigSet};
use crate::{diag, hot, latency, panics, reserve, sampler, textfile};

/// Lifecycle of the library in this process.
pub(crate) const UNINIT: u8 = 0;
pub(crate) const DISABLED: u8 = 1;
pub(crate) const ON: u8 = 2;
pub(crate) const FAILED: u8 = 3;
/// The final file has been claimed (Flush or exit): every entry point is inert from then on.
pub(crate) const FINISHED: u8 = 4;
/// A forked child of a process with telemetry on: inert, writes nothing.
pub(crate) const FORKED: u8 = 5;

pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The final file: not yet claimed, being written, written (or failed: it is tried once).
const FINAL_NONE: u8 = 0;
const FINAL_WRITING: u8 = 1;
const FINAL_DONE: u8 = 2;
static FINAL: AtomicU8 = AtomicU8::new(FINAL_NONE);
/// Serialises writes; a snapshot checks FINAL only once it holds it, so it can never be
/// renamed over the final file.
static WRITE_LOCK: Mutex<()> = Mutex::new(());
/// Whether this forked child has said that it is one.
pub(crate) static FORK_NOTED: AtomicBool = AtomicBool::new(false);

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
    /// A QP's first error completion (a snapshot, rate-limited by the writer:
    /// [`Triggered`](crate::writer::Triggered)).
    CqError,
    /// The first check of a stall episode (a snapshot, rate-limited by the writer:
    /// [`Triggered`](crate::writer::Triggered)).
    Stall,
}

impl Trigger {
    pub fn name(self) -> String {
        match self {
            Trigger::Exit => "exit".into(),
            Trigger::Flush => "rcclTelemetryFlush".into(),
            Trigger::Interval => "interval".into(),
            Trigger::Signal(s) => crate::config::signal_name(s),
            Trigger::CqError => "cq_error".into(),
            Trigger::Stall => "stall".into(),
        }
    }
}

/// What Init established; set once, only when telemetry is on.
pub struct Runtime {
    pub cfg: Config,
    pub id: Identity,
}

pub(crate) static RUNTIME: OnceLock<Runtime> = OnceLock::new();

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
pub(crate) fn note_fork() {
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
pub(crate) fn go_inert(state: u8) {
    STATE.store(state, Release);
    hot::rcclTelemetryHotV3.enabled.store(0, Release);
    for s in &hot::rcclTelemetryHotV3.stripes {
        s.store(std::ptr::null_mut(), Release);
    }
}

/// How long a write may be waited for: a signal handler waits this long for the file before
/// letting the signal act anyway, and a final write asked for while another is in progress
/// waits this long for it.
pub const WRITE_TIMEOUT_MS: i32 = 10_000;

/// The snapshot signal in effect (0 when none): set when its handler is installed.
static SNAPSHOT_SIG: AtomicI32 = AtomicI32::new(0);

/// The snapshot signal in effect (0 when none).
pub fn snapshot_signal() -> i32 {
    SNAPSHOT_SIG.load(Relaxed)
}

/// Records the snapshot signal whose handler `signals` installs.
pub(crate) fn set_snapshot_signal(sig: i32) {
    SNAPSHOT_SIG.store(sig, Relaxed);
}

/// Says once that memory ran out badly enough for the reserve to be used.
pub(crate) fn say_reserve_used() {
    if let Some(n) = reserve::take_used() {
        diag::warn(&format!(
            "memory ran out: {n} small allocations of the library were served from its reserve (what could not be allocated at all is said in a line of its own)"
        ));
    }
}
/// The termination and snapshot signals blocked in the calling thread while it lives. A cold
/// entry point holds one for its whole call (`capi`): a signal aimed at its thread then waits
/// until the call has released every lock (the handler waits for the writer thread, which may
/// need those locks for the file), and one sent to the process goes to another thread.
pub(crate) struct QuietSignals(libc::sigset_t);

impl QuietSignals {
    pub(crate) fn new() -> QuietSignals {
        let [a, b, c, d] = config::TERMINATION_SIGNALS;
        QuietSignals(block(SigSet::Only(&[a, b, c, d, snapshot_signal()])).1)
    }
}

impl Drop for QuietSignals {
    fn drop(&mut self) {
        restore_mask(&self.0);
    }
}

/// A test's forced failure at a named point (RCCL_TELEMETRY_TEST_FAULT): `finalize_sigterm`
/// raises SIGTERM on the thread finalizing a communicator, inside its exclusive section.
pub(crate) fn fault_point(at: Fault) {
    if at == Fault::FinalizeSigterm && RUNTIME.get().is_some_and(|rt| rt.cfg.fault == at) {
        // SAFETY: raise is always safe to call.
        unsafe { libc::raise(libc::SIGTERM) };
    }
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
    sigs.push(snapshot_signal());
    let (_, mask) = block(SigSet::Only(&sigs));
    let rc = if is_final {
        if FINAL
            .compare_exchange(FINAL_NONE, FINAL_WRITING, AcqRel, Acquire)
            .is_ok()
        {
            go_inert(FINISHED);
            crate::monitor::summaries();
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
    restore_mask(&mask);
    rc
}

/// Waits (bounded, as the signal handlers are) for a final write in progress elsewhere.
fn wait_final() {
    let deadline = latency::monotonic_ns() + WRITE_TIMEOUT_MS as u64 * 1_000_000;
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
            sampler::stop()
        } else {
            sampler::snapshot()
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
            panics::contained_panic("rcclTelemetryFlush");
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_names_are_the_files() {
        assert_eq!(Trigger::CqError.name(), "cq_error");
        assert_eq!(Trigger::Stall.name(), "stall");
        assert_eq!(Trigger::Interval.name(), "interval");
    }
}
