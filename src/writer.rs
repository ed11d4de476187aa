//! The background writer: rewrites a snapshot every RCCL_TELEMETRY_FLUSH_INTERVAL_S seconds
//! and performs the writes that signal handlers ask for, so that no handler ever does more
//! than write(2) a byte to a pipe and poll(2) for the answer (both async-signal-safe).
//!
//! Requests are single bytes on a pipe: STOP ends the thread; SNAPSHOT writes a snapshot;
//! any other byte is a termination signal number (plus CHAINED when an earlier handler will
//! run after ours), answered with one byte on the acknowledgement pipe once the file is out.
//!
//! The writes themselves are the runtime's (`runtime`, the layer below): the JSON file
//! through [`runtime::write_file`], the live textfile through `textfile` while telemetry is
//! on. The thread is started and stopped by `lifecycle`, above.

use std::sync::atomic::{AtomicI32, Ordering::*};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::runtime::{self, Trigger};
use crate::thread::spawn_quiet;

pub const STOP: u8 = 0;
pub const SNAPSHOT: u8 = 0xff;
/// Wakes the writer to look for a snapshot trigger (a QP's first error completion).
pub const TRIGGER: u8 = 0xfe;
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

/// Starts the writer thread. `interval_s` = 0: no periodic JSON snapshot; `prom_interval_s`
/// = 0: no Prometheus textfile; `stall_tick_ms` = 0: no stall detector tick; all 0: it only
/// serves requests.
pub fn start(interval_s: u64, prom_interval_s: u64, stall_tick_ms: u64) -> Result<(), String> {
    let (rr, rw) = pipe(libc::O_NONBLOCK)?;
    let (ar, aw) = pipe(libc::O_NONBLOCK)?;
    REQ_R.store(rr, Relaxed);
    REQ_W.store(rw, Relaxed);
    ACK_R.store(ar, Relaxed);
    ACK_W.store(aw, Relaxed);
    let handle = spawn_quiet("rccl-tel-writer", move || {
        serve(rr, aw, interval_s, prom_interval_s, stall_tick_ms)
    })
    .map_err(|e| format!("cannot start the writer thread: {e}"))?;
    *THREAD.lock() = Some(handle);
    Ok(())
}

/// A periodic job of the writer: its period and when it is next due.
struct Every {
    period: Duration,
    next: Instant,
}

impl Every {
    fn new(secs: u64) -> Option<Every> {
        Every::ms(secs.saturating_mul(1000))
    }

    fn ms(ms: u64) -> Option<Every> {
        (ms > 0).then(|| Every {
            period: Duration::from_millis(ms),
            next: Instant::now() + Duration::from_millis(ms),
        })
    }

    /// True (and the next time set) when due.
    fn due(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next += self.period;
        if self.next < now {
            self.next = now + self.period; // a slow write: do not try to catch up
        }
        true
    }
}

/// Snapshots written on a trigger (an error, a stall) at most per process.
pub const TRIGGERED_MAX: u32 = 16;
/// The least time between two triggered snapshots; a trigger inside it is written when it
/// ends (several coalesce into one), never dropped while [`TRIGGERED_MAX`] is not reached.
pub const TRIGGERED_GAP_MS: u64 = 1000;

/// The rate limit of triggered snapshots (time injected, so that tests need no clock).
#[derive(Debug, Default, Clone)]
pub struct Triggered {
    /// When the last triggered snapshot was written (ms on the caller's clock).
    last_ms: Option<u64>,
    pub written: u32,
    /// A trigger is waiting for the gap to pass: an error outranks a stall.
    pending: Option<Trigger>,
    /// Triggers that came after the bound was reached.
    pub refused: u64,
}

impl Triggered {
    /// Notes a trigger (written by the next [`Triggered::due`] that the gap allows).
    pub fn note(&mut self, t: Trigger) {
        if self.written >= TRIGGERED_MAX {
            self.refused += 1;
            return;
        }
        if self.pending != Some(Trigger::CqError) {
            self.pending = Some(t);
        }
    }

    /// The snapshot to write now, if any (and then counted as written).
    pub fn due(&mut self, now_ms: u64) -> Option<Trigger> {
        let t = self.pending?;
        if self
            .last_ms
            .is_some_and(|l| now_ms < l.saturating_add(TRIGGERED_GAP_MS))
        {
            return None;
        }
        self.pending = None;
        self.last_ms = Some(now_ms);
        self.written += 1;
        Some(t)
    }

    /// When a pending trigger may be written (ms on the caller's clock).
    pub fn next_ms(&self) -> Option<u64> {
        self.pending?;
        Some(
            self.last_ms
                .map_or(0, |l| l.saturating_add(TRIGGERED_GAP_MS)),
        )
    }
}

fn serve(req: i32, ack: i32, interval_s: u64, prom_interval_s: u64, stall_tick_ms: u64) {
    let mut json = Every::new(interval_s);
    let mut prom = Every::new(prom_interval_s);
    let mut stall = Every::ms(stall_tick_ms);
    let mut trig = Triggered::default();
    let t0 = Instant::now();
    let ms_since = |t: Instant| t.saturating_duration_since(t0).as_millis() as u64;
    loop {
        // Snapshot triggers: a QP's first error (its hook woke us, or the pipe was full and
        // this is the next tick), a stall episode's first check (at a tick, here or before a
        // file was built elsewhere).
        if crate::cq_errors::take_pending() {
            trig.note(Trigger::CqError);
        }
        if crate::stall_detector::take_started() {
            trig.note(Trigger::Stall);
        }
        if trig.refused == 1 {
            trig.refused += 1; // said once
            crate::diag::warn(&format!(
                "{TRIGGERED_MAX} snapshots were written on errors and stalls; later ones are only in interval snapshots and the final file"
            ));
        }
        if let Some(t) = trig.due(ms_since(Instant::now())) {
            runtime::write_file(t, false);
        }
        let next = [&json, &prom, &stall]
            .into_iter()
            .flatten()
            .map(|e| e.next)
            .chain(trig.next_ms().map(|ms| t0 + Duration::from_millis(ms)))
            .min();
        let timeout_ms = match next {
            None => -1,
            // Rounded up: waking before the deadline would spin until it passes.
            Some(t) => t
                .saturating_duration_since(Instant::now())
                .as_nanos()
                .div_ceil(1_000_000)
                .min(i32::MAX as u128) as i32,
        };
        let mut pfd = libc::pollfd {
            fd: req,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n == 0 {
            if json.as_mut().is_some_and(Every::due) {
                runtime::write_file(Trigger::Interval, false);
            }
            // The textfile is never written from the data path: only here, and on its own lock.
            let mut prom_due = prom.as_mut().is_some_and(Every::due);
            // A change in the set of stalled QPs rewrites the textfile at once, so a stall
            // shows (and an ended one goes) within two ticks, not at the next interval.
            if stall.as_mut().is_some_and(Every::due) {
                crate::stall_detector::tick();
                crate::monitor::tick();
            }
            // (also a change seen by the tick before a file was built)
            if crate::stall_detector::take_changed() && prom.is_some() {
                prom_due = true;
            }
            if prom_due && runtime::is_on() {
                crate::textfile::write_periodic();
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
                TRIGGER => {} // looked at on the way round
                SNAPSHOT => {
                    runtime::write_file(Trigger::Signal(runtime::snapshot_signal()), false);
                }
                b => {
                    let sig = i32::from(b & !CHAINED);
                    runtime::write_file(Trigger::Signal(sig), b & CHAINED == 0);
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
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
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
    let Some(handle) = THREAD.lock().take() else {
        return;
    };
    for _ in 0..1000 {
        if request(STOP) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1)); // pipe full of requests: let it drain
    }
    let _ = handle.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggered_snapshots_keep_a_gap_coalesce_and_stop_at_the_bound() {
        let mut t = Triggered::default();
        assert_eq!(t.due(0), None, "nothing pending");
        t.note(Trigger::Stall);
        assert_eq!(t.next_ms(), Some(0));
        assert_eq!(t.due(5), Some(Trigger::Stall), "the first goes at once");
        // Inside the gap: an error and a stall wait, coalesce, and the error names it.
        t.note(Trigger::CqError);
        t.note(Trigger::Stall);
        assert_eq!(t.next_ms(), Some(5 + TRIGGERED_GAP_MS));
        assert_eq!(t.due(5 + TRIGGERED_GAP_MS - 1), None);
        assert_eq!(t.due(5 + TRIGGERED_GAP_MS), Some(Trigger::CqError));
        assert_eq!(t.due(10 * TRIGGERED_GAP_MS), None, "one write for both");
        // Up to the bound, then refused.
        let mut now = 100 * TRIGGERED_GAP_MS;
        while t.written < TRIGGERED_MAX {
            t.note(Trigger::Stall);
            assert_eq!(t.due(now), Some(Trigger::Stall));
            now += TRIGGERED_GAP_MS;
        }
        t.note(Trigger::CqError);
        assert_eq!((t.due(now), t.next_ms(), t.refused), (None, None, 1));
        assert_eq!(t.written, TRIGGERED_MAX);
    }
}
