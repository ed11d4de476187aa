//! The background writer: rewrites a snapshot every RCCL_TELEMETRY_FLUSH_INTERVAL_S seconds
//! and performs the writes that signal handlers ask for, so that no handler ever does more
//! than write(2) a byte to a pipe and poll(2) for the answer (both async-signal-safe).
//!
//! Requests are single bytes on a pipe: STOP ends the thread; SNAPSHOT writes a snapshot;
//! any other byte is a termination signal number (plus CHAINED when an earlier handler will
//! run after ours), answered with one byte on the acknowledgement pipe once the file is out.

use std::sync::atomic::{AtomicI32, Ordering::*};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::Trigger;

pub const STOP: u8 = 0;
pub const SNAPSHOT: u8 = 0xff;
/// Set on a termination-signal request when the process will go on to run an earlier
/// handler (which may not exit): the write is then a snapshot, not the final file.
pub const CHAINED: u8 = 0x40;

static REQ_R: AtomicI32 = AtomicI32::new(-1);
static REQ_W: AtomicI32 = AtomicI32::new(-1);
static ACK_R: AtomicI32 = AtomicI32::new(-1);
static ACK_W: AtomicI32 = AtomicI32::new(-1);
static THREAD: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

fn pipe(flags_write_end: i32) -> Result<(i32, i32), String> {
    let mut fds = [-1; 2];
    // SAFETY: fds is a valid two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fds[1] is a descriptor we own.
    unsafe { libc::fcntl(fds[1], libc::F_SETFL, flags_write_end) };
    Ok((fds[0], fds[1]))
}

/// Starts the writer thread. `interval_s` = 0: it only serves requests.
pub fn start(interval_s: u64) -> Result<(), String> {
    let (rr, rw) = pipe(libc::O_NONBLOCK)?;
    let (ar, aw) = pipe(libc::O_NONBLOCK)?;
    REQ_R.store(rr, Relaxed);
    REQ_W.store(rw, Relaxed);
    ACK_R.store(ar, Relaxed);
    ACK_W.store(aw, Relaxed);
    let handle = std::thread::Builder::new()
        .name("rccl-tel-writer".into())
        .spawn(move || serve(rr, aw, interval_s))
        .map_err(|e| format!("cannot start the writer thread: {e}"))?;
    *THREAD.lock() = Some(handle);
    Ok(())
}

fn serve(req: i32, ack: i32, interval_s: u64) {
    let period = Duration::from_secs(interval_s);
    let mut next = Instant::now() + period;
    loop {
        let timeout_ms = if interval_s == 0 {
            -1
        } else {
            next.saturating_duration_since(Instant::now()).as_millis().min(i32::MAX as u128) as i32
        };
        let mut pfd = libc::pollfd { fd: req, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n == 0 {
            crate::write_file(Trigger::Interval, false);
            next += period;
            if next < Instant::now() {
                next = Instant::now() + period; // a slow write: do not try to catch up
            }
            continue;
        }
        if n < 0 {
            continue; // EINTR
        }
        let mut buf = [0u8; 64];
        // SAFETY: buf is writable for its length.
        let got = unsafe { libc::read(req, buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            continue;
        }
        for &b in &buf[..got as usize] {
            match b {
                STOP => return,
                SNAPSHOT => {
                    crate::write_file(Trigger::Signal(crate::snapshot_signal()), false);
                }
                b => {
                    let sig = i32::from(b & !CHAINED);
                    crate::write_file(Trigger::Signal(sig), b & CHAINED == 0);
                    // SAFETY: writing one byte from a valid buffer.
                    unsafe { libc::write(ack, [b].as_ptr().cast(), 1) };
                }
            }
        }
    }
}

/// Asks the writer for a write. Async-signal-safe. False when there is no writer.
pub fn request(byte: u8) -> bool {
    let fd = REQ_W.load(Relaxed);
    // SAFETY: writing one byte to our pipe; a full pipe fails at once (non-blocking).
    fd >= 0 && unsafe { libc::write(fd, [byte].as_ptr().cast(), 1) } == 1
}

/// Waits up to `timeout_ms` for one acknowledgement. Async-signal-safe.
pub fn wait_ack(timeout_ms: i32) -> bool {
    let fd = ACK_R.load(Relaxed);
    if fd < 0 {
        return false;
    }
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; then one byte into a stack buffer.
    unsafe {
        if libc::poll(&mut pfd, 1, timeout_ms) == 1 {
            let mut b = 0u8;
            return libc::read(fd, (&mut b as *mut u8).cast(), 1) == 1;
        }
    }
    false
}

/// Stops and joins the writer (exit and dlclose). Safe to call when it never started.
pub fn stop() {
    let Some(handle) = THREAD.lock().take() else { return };
    for _ in 0..1000 {
        if request(STOP) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1)); // pipe full of requests: let it drain
    }
    let _ = handle.join();
}
