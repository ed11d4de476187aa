//! The one place that says anything: every line the library prints goes through here, to
//! RCCL's logger when one was installed (`rcclTelemetrySetLogger`, NCCL's `ncclDebugLogger_t`:
//! NCCL_DEBUG and NCCL_DEBUG_FILE then decide), to stderr otherwise. Every line carries the
//! same prefix; on stderr it is written with a single write(2), so lines from several threads
//! or ranks never interleave. A line is laid out in a buffer on the stack (the heap only for
//! one longer than it), so saying that memory ran out needs none; nothing here can panic on
//! a closed stderr.

use std::ffi::{c_char, c_int, c_ulong};
use std::fmt::Write as _;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Prefix of every line the library prints.
pub const PREFIX: &str = "rccl-telemetry: ";

/// NCCL's `ncclDebugLogger_t`: (level, subsystem flags, file, line, printf format, ...).
pub type Logger = unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...);

/// NCCL's log levels (`ncclDebugLogLevel`) and the subsystem the library's lines belong to
/// (`NCCL_NET` of `ncclDebugLogSubSys`): the values of NCCL's and RCCL's `nccl_common.h`.
pub const LOG_WARN: c_int = 2;
pub const LOG_INFO: c_int = 3;
pub const SUBSYS_NET: c_ulong = 0x10;

static DEBUG: AtomicBool = AtomicBool::new(false);
static LOGGER: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// Set while this thread is inside a call of the installed logger.
    static IN_LOGGER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is inside the logger: a call into the library from there is
/// re-entrant (the call that said the line may hold a lock the new call needs) and returns at
/// once (`capi`'s cold entry points).
pub fn in_logger() -> bool {
    IN_LOGGER.with(|c| c.get())
}

/// Turns RCCL_TELEMETRY_DEBUG output on or off (set once from the configuration).
pub fn set_debug(on: bool) {
    DEBUG.store(on, Ordering::Relaxed);
}

/// Whether RCCL_TELEMETRY_DEBUG is in effect.
pub fn debug_on() -> bool {
    DEBUG.load(Ordering::Relaxed)
}

/// Sends every later line to `logger` (None: back to stderr).
pub fn set_logger(logger: Option<Logger>) {
    LOGGER.store(
        logger.map_or(std::ptr::null_mut(), |f| f as *mut ()),
        Ordering::Release,
    );
}

fn logger() -> Option<Logger> {
    let p = LOGGER.load(Ordering::Acquire);
    // SAFETY: set_logger stored a `Logger` (or null).
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut (), Logger>(p) })
}

/// Prints one diagnostic line: a degradation the user should know about (NCCL's WARN).
#[track_caller]
pub fn warn(msg: &str) {
    say(LOG_WARN, msg, Location::caller());
}

/// Prints one line the first time `said` is false (and sets it): for a condition that can
/// repeat (a refused call, an allocation that failed), the first occurrence is said and the
/// rest are counted where the file shows them.
#[track_caller]
pub fn warn_once(said: &AtomicBool, msg: impl FnOnce() -> String) {
    if !said.swap(true, Ordering::Relaxed) {
        say(LOG_WARN, &msg(), Location::caller());
    }
}

/// Says one line of the WQE latency monitor as upstream's monitor says it: to RCCL's logger at
/// INFO (NET subsystem) whenever one is set, and on stderr only under RCCL_TELEMETRY_DEBUG.
#[track_caller]
pub fn monitor(msg: &str) {
    if logger().is_some() || debug_on() {
        say(LOG_INFO, msg, Location::caller());
    }
}

/// Prints one line only under RCCL_TELEMETRY_DEBUG (NCCL's INFO through a logger).
#[track_caller]
pub fn debug(msg: impl FnOnce() -> String) {
    if debug_on() {
        say(LOG_INFO, &msg(), Location::caller());
    }
}

/// A line being laid out: a stack buffer, spilling to the heap only when it is too short.
struct Line {
    stack: [u8; 1024],
    len: usize,
    heap: Option<Vec<u8>>,
    truncated: bool,
}

impl Line {
    fn new() -> Line {
        Line {
            stack: [0; 1024],
            len: 0,
            heap: None,
            truncated: false,
        }
    }

    fn push(&mut self, b: &[u8]) {
        if let Some(h) = self.heap.as_mut() {
            if h.try_reserve(b.len()).is_ok() {
                h.extend_from_slice(b);
            } else {
                self.truncated = true;
            }
            return;
        }
        // Room is kept for the newline and a NUL.
        if self.len + b.len() + 2 <= self.stack.len() {
            self.stack[self.len..self.len + b.len()].copy_from_slice(b);
            self.len += b.len();
            return;
        }
        let mut h = Vec::new();
        if h.try_reserve(self.len + b.len() + 256).is_ok() {
            h.extend_from_slice(&self.stack[..self.len]);
            h.extend_from_slice(b);
            self.heap = Some(h);
        } else {
            self.truncated = true;
        }
    }

    /// Ends the line with the byte `end` (a newline or a NUL), which always fits: the stack
    /// keeps room for it, and a full heap buffer gives up its last byte.
    fn finish(&mut self, end: u8) {
        match self.heap.as_mut() {
            Some(h) => {
                if h.len() == h.capacity() && h.try_reserve(1).is_err() {
                    h.pop();
                }
                h.push(end);
            }
            None => {
                self.stack[self.len] = end;
                self.len += 1;
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.heap {
            Some(h) => h,
            None => &self.stack[..self.len],
        }
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// Lays out `PREFIX msg` as one line (newlines and NULs made spaces), ending with `end`.
fn layout(msg: &str, end: u8) -> Line {
    let mut l = Line::new();
    l.push(PREFIX.as_bytes());
    for part in msg.split(['\n', '\0']).enumerate() {
        if part.0 > 0 {
            l.push(b" ");
        }
        l.push(part.1.as_bytes());
    }
    if l.truncated {
        l.push(b" [cut short: out of memory]");
    }
    l.finish(end);
    l
}

fn say(level: c_int, msg: &str, at: &Location) {
    match logger() {
        Some(f) => {
            let line = layout(msg, 0);
            let mut file = Line::new();
            let _ = write!(file, "{}", at.file());
            file.finish(0);
            // A logger that calls back into the library gets its calls returned at once.
            IN_LOGGER.with(|c| c.set(true));
            // SAFETY: the logger has NCCL's signature; "%s" takes the one NUL-terminated
            // string passed after it; both strings outlive the call.
            unsafe {
                f(
                    level,
                    SUBSYS_NET,
                    file.bytes().as_ptr().cast(),
                    at.line() as c_int,
                    c"%s".as_ptr(),
                    line.bytes().as_ptr().cast::<c_char>(),
                )
            };
            IN_LOGGER.with(|c| c.set(false));
        }
        None => write_stderr(layout(msg, b'\n').bytes()),
    }
}

fn write_stderr(mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: writing an initialised byte slice to fd 2.
        let n = unsafe { libc::write(2, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            return; // stderr closed or full: diagnostics are best effort
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_line_whatever_the_message_holds() {
        let l = layout("a\nb\0c", b'\n');
        assert_eq!(l.bytes(), b"rccl-telemetry: a b c\n");
        assert!(l.heap.is_none(), "a short line stays on the stack");
        let long = "x".repeat(5000);
        let l = layout(&long, 0);
        assert_eq!(l.bytes().len(), PREFIX.len() + 5000 + 1);
        assert!(l.bytes().ends_with(b"x\0"));
    }
}
