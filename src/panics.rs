//! Panics at the C boundary: a panic hook that records the message instead of printing it,
//! and the one prefixed line (at most a few) that the boundary prints for a contained panic.
//! A leaf beside `diag`: every layer's boundary can report through it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::diag;

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces Rust's default panic output with a record that the boundary turns into one
/// prefixed line (this library's std is its own, so no application hook is affected).
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = match (
                info.payload().downcast_ref::<&str>(),
                info.payload().downcast_ref::<String>(),
            ) {
                (Some(s), _) => (*s).to_owned(),
                (_, Some(s)) => s.clone(),
                _ => "unknown panic".to_owned(),
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let _ = PANIC_MSG.try_with(|m| *m.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// Called by the C boundary when it caught a panic: one line, at most a few times.
pub fn contained_panic(entry: &str) {
    static REPORTED: AtomicU32 = AtomicU32::new(0);
    let msg = take_message();
    if REPORTED.fetch_add(1, Relaxed) < 16 {
        diag::warn(&format!(
            "internal error in {entry} contained, call ignored: {msg}"
        ));
    }
}

/// The message of the last panic on this thread (empty when none), taken.
pub fn take_message() -> String {
    PANIC_MSG
        .try_with(|m| m.borrow_mut().take())
        .ok()
        .flatten()
        .unwrap_or_default()
}
