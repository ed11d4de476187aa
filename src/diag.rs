//! The one place that prints to stderr. Every line carries the same prefix and is
//! written with a single write(2), so lines from several threads or ranks never interleave
//! and nothing here allocates after the line is formatted or can panic on a closed stderr.

use std::sync::atomic::{AtomicBool, Ordering};

/// Prefix of every line the library prints.
pub const PREFIX: &str = "rccl-telemetry: ";

static DEBUG: AtomicBool = AtomicBool::new(false);

/// Turns RCCL_TELEMETRY_DEBUG output on or off (set once from the configuration).
pub fn set_debug(on: bool) {
    DEBUG.store(on, Ordering::Relaxed);
}

/// Whether RCCL_TELEMETRY_DEBUG is in effect.
pub fn debug_on() -> bool {
    DEBUG.load(Ordering::Relaxed)
}

/// Prints one diagnostic line: a degradation the user should know about.
pub fn warn(msg: &str) {
    let mut line = String::with_capacity(PREFIX.len() + msg.len() + 1);
    line.push_str(PREFIX);
    // One line per diagnostic, whatever the message holds.
    line.extend(msg.chars().map(|c| if c == '\n' { ' ' } else { c }));
    line.push('\n');
    write_stderr(line.as_bytes());
}

/// Prints one line the first time `said` is false (and sets it): for a condition that can
/// repeat (a refused call, an allocation that failed), the first occurrence is said and the
/// rest are counted where the file shows them.
pub fn warn_once(said: &AtomicBool, msg: impl FnOnce() -> String) {
    if !said.swap(true, Ordering::Relaxed) {
        warn(&msg());
    }
}

/// Prints one line only under RCCL_TELEMETRY_DEBUG.
pub fn debug(msg: impl FnOnce() -> String) {
    if debug_on() {
        warn(&msg());
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
