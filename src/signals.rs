//! Termination and snapshot signals.
//!
//! On SIGTERM, SIGINT, SIGHUP or SIGQUIT the handler asks the writer thread for the file and
//! waits for it (bounded), then lets the previous disposition act: an earlier handler (RCCL's
//! or the application's) is called, otherwise the default is restored and the signal raised
//! again. A signal that was ignored when telemetry started stays ignored: no handler is
//! installed for it. The handler itself only calls getpid, write, poll, read, sigaction and
//! raise, all async-signal-safe.
//!
//! When an earlier handler exists the process may survive the signal, so the file written
//! then is a snapshot; the final file is still written at exit.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::*};

use crate::runtime::{self, WRITE_TIMEOUT_MS};
use crate::writer;

const NSIG: usize = 65;

struct OldActions(UnsafeCell<[MaybeUninit<libc::sigaction>; NSIG]>);
// SAFETY: each entry is written once, before the handler for that signal is installed
// (sigaction is the barrier), and only read afterwards.
unsafe impl Sync for OldActions {}

static OLD: OldActions = OldActions(UnsafeCell::new([const { MaybeUninit::uninit() }; NSIG]));
static OURS: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];
static OWNER_PID: AtomicI32 = AtomicI32::new(0);

fn old(sig: i32) -> &'static libc::sigaction {
    // SAFETY: read only after install() wrote this entry (OURS[sig] is set after it).
    unsafe { (*OLD.0.get())[sig as usize].assume_init_ref() }
}

fn is_owner() -> bool {
    // SAFETY: getpid is async-signal-safe and cannot fail.
    let pid = unsafe { libc::getpid() };
    pid == OWNER_PID.load(Relaxed)
}

extern "C" fn on_terminate(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is thread-local; saved and restored around the handler.
    let errno = unsafe { *libc::__errno_location() };
    if is_owner() {
        let chained = old(sig).sa_sigaction != libc::SIG_DFL;
        let byte = sig as u8 | if chained { writer::CHAINED } else { 0 };
        if writer::request(byte) {
            writer::wait_ack(WRITE_TIMEOUT_MS);
        }
    }
    chain(sig, info, ctx);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

extern "C" fn on_snapshot(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: as in on_terminate.
    let errno = unsafe { *libc::__errno_location() };
    if is_owner() {
        writer::request(writer::SNAPSHOT);
    }
    // The default action of most signals would end the process: only a handler is chained.
    let h = old(sig).sa_sigaction;
    if h != libc::SIG_DFL && h != libc::SIG_IGN {
        chain(sig, info, ctx);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn chain(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let o = old(sig);
    match o.sa_sigaction {
        libc::SIG_DFL => {
            // Default action: put it back and raise again; the signal is blocked while we run,
            // so it is delivered, with its default action, as soon as this handler returns.
            // SAFETY: sigaction and raise are async-signal-safe.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
                OURS[sig as usize].store(false, Relaxed);
                libc::raise(sig);
            }
        }
        libc::SIG_IGN => {}
        h => {
            // SAFETY: h is the handler that was installed before ours, with its own flags.
            unsafe {
                if o.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(i32) = std::mem::transmute(h);
                    f(sig);
                }
            }
        }
    }
}

fn install_one(
    sig: i32,
    handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void),
    keep_ignored: bool,
) -> Result<bool, String> {
    // SAFETY: plain sigaction calls with valid pointers; OLD[sig] is written before our
    // handler can run.
    unsafe {
        let slot = &mut (*OLD.0.get())[sig as usize];
        if libc::sigaction(sig, std::ptr::null(), slot.as_mut_ptr()) != 0 {
            return Err(format!(
                "{}: {}",
                crate::config::signal_name(sig),
                std::io::Error::last_os_error()
            ));
        }
        if !keep_ignored && slot.assume_init_ref().sa_sigaction == libc::SIG_IGN {
            return Ok(false);
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
            return Err(format!(
                "{}: {}",
                crate::config::signal_name(sig),
                std::io::Error::last_os_error()
            ));
        }
        OURS[sig as usize].store(true, Release);
    }
    Ok(true)
}

/// Installs the handlers asked for. Returns the names of the signals taken (the snapshot
/// signal's with " (snapshot)") and one diagnostic per signal that could not be taken.
pub fn install(termination: bool, snapshot: Option<i32>) -> (Vec<String>, Vec<String>) {
    // SAFETY: getpid cannot fail.
    OWNER_PID.store(unsafe { libc::getpid() }, Relaxed);
    let mut taken = Vec::new();
    let mut diags = Vec::new();
    if termination {
        for sig in crate::config::TERMINATION_SIGNALS {
            match install_one(sig, on_terminate, false) {
                Ok(true) => taken.push(crate::config::signal_name(sig)),
                Ok(false) => crate::diag::debug(|| {
                    format!(
                        "{} is ignored by the process; left alone",
                        crate::config::signal_name(sig)
                    )
                }),
                Err(e) => diags.push(format!("cannot handle {e}")),
            }
        }
    }
    if let Some(sig) = snapshot {
        runtime::set_snapshot_signal(sig);
        match install_one(sig, on_snapshot, true) {
            Ok(_) => taken.push(format!("{} (snapshot)", crate::config::signal_name(sig))),
            Err(e) => diags.push(format!("cannot take the snapshot signal {e}")),
        }
    }
    (taken, diags)
}

/// Puts back the earlier disposition of every signal whose current handler is still ours
/// (at exit and at dlclose, so no handler points into an unloaded library). A handler
/// installed after ours is left in place.
pub fn restore() {
    for sig in 1..NSIG as i32 {
        if !OURS[sig as usize].swap(false, AcqRel) {
            continue;
        }
        // SAFETY: plain sigaction calls with valid pointers.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && (cur.sa_sigaction == on_terminate as *const () as usize
                    || cur.sa_sigaction == on_snapshot as *const () as usize)
            {
                libc::sigaction(sig, old(sig), std::ptr::null_mut());
            }
        }
    }
}
