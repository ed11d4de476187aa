//! RCCL_TELEMETRY_SAMPLE_MS: a background thread that samples a small set of congestion
//! counters (IB sysfs only, never ethtool) of the devices in use, with stall detection's
//! per-device numbers beside them ("hw_samples").
//!
//! A layer above both of its sources: it reads the counters through `hw` and the numbers of
//! the stall detector's last tick through `stall_detector`, so neither knows of the other.
//!
//! - Devices become visible to the sampler when their baseline is taken (first use); a
//!   device never used is never sampled. A device with no counter to sample still gets rows
//!   while stall detection is on.
//! - Each row holds, per sampled key, the delta since that device's baseline (-1 when the
//!   counter could not be read or went backwards).
//! - Timestamps: the wall clock read once when the sampler starts plus the monotonic time
//!   elapsed since then, in Unix ns, so rows line up across hosts and never go backwards.
//! - Memory is bounded: the buffer keeps the newest [`DEFAULT_CAPACITY`] rows; when it is
//!   full the oldest row is discarded for each new one, and the discarded rows are counted
//!   in `dropped` (emitted as `hw_samples_dropped`).
//! - Stop wakes the thread at once (condition variable, not a sleep), so a flush waits at
//!   most for one sampling pass in progress, never a full interval.

use crate::hw::{self, diag, HwSettings};
use crate::stall_detector;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Rows kept at most (about 3 MB with every sampled key present).
pub const DEFAULT_CAPACITY: usize = 8192;

/// One row of "hw_samples".
#[derive(Debug, Clone)]
pub struct HwSample {
    pub device_id: u32,
    pub timestamp_ns: u64,
    pub counters: Vec<(&'static str, i64)>,
}

/// What the sampler collected, handed to the report at flush.
#[derive(Debug, Clone, Default)]
pub struct HwSamples {
    pub samples: Vec<HwSample>,
    pub dropped: u64,
}

/// Fixed-capacity buffer that keeps the newest rows.
#[derive(Debug)]
struct Ring {
    buf: VecDeque<HwSample>,
    cap: usize,
    dropped: u64,
}

impl Ring {
    pub fn new(cap: usize) -> Ring {
        let cap = cap.max(1);
        Ring {
            buf: VecDeque::with_capacity(cap.min(1024)),
            cap,
            dropped: 0,
        }
    }

    /// Keeps `s`, dropping the oldest row when the ring is full, or when it cannot grow
    /// (out of memory: the ring then stays the size it has).
    pub fn push(&mut self, s: HwSample) {
        let full = self.buf.len() == self.cap
            || (self.buf.len() == self.buf.capacity() && self.buf.try_reserve(1).is_err());
        if full {
            if self.buf.pop_front().is_none() {
                self.dropped += 1; // not even one row fits
                return;
            }
            self.dropped += 1;
        }
        self.buf.push_back(s);
    }

    /// The rows, oldest first, and the count dropped; the newest that fit in memory when not
    /// all of them do (the rest counted as dropped).
    pub fn take(&mut self) -> HwSamples {
        let mut keep = self.buf.len();
        let mut samples = Vec::new();
        while samples.try_reserve_exact(keep).is_err() {
            keep /= 2;
        }
        let skip = self.buf.len() - keep;
        self.dropped += skip as u64;
        samples.extend(self.buf.drain(..).skip(skip));
        HwSamples {
            samples,
            dropped: std::mem::take(&mut self.dropped),
        }
    }
}

/// Wall clock at start plus a monotonic offset.
#[derive(Debug, Clone, Copy)]
struct Clock {
    wall0_ns: u64,
    mono0: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        let wall0_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Clock {
            wall0_ns,
            mono0: Instant::now(),
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.wall0_ns
            .saturating_add(self.mono0.elapsed().as_nanos() as u64)
    }
}

struct Shared {
    stop: Mutex<bool>,
    cv: Condvar,
    ring: Mutex<Ring>,
}

struct Running {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

static STATE: Mutex<Option<Running>> = parking_lot::Mutex::new(None);

fn sample_all(ring: &Mutex<Ring>, clock: &Clock) {
    let devices = hw::used_devices();
    for d in devices {
        // A device with nothing to sample still gets rows for stall detection's counters.
        if !d.samples_anything() && !stall_detector::enabled() {
            continue;
        }
        // Stall detection's per-device numbers as of its last tick (docs/operators.md, "Stalled queue pairs"): in
        // every row, also of a device whose hardware counters cannot be sampled.
        let stall = stall_detector::device_summary(d.device_id());
        let hw = d.sample_counters();
        if hw.is_none() && stall.is_none() {
            continue;
        }
        {
            let mut counters = hw.unwrap_or_default();
            if let Some((out, stalled)) = stall {
                counters.push((
                    "num_wqe_outstanding",
                    i64::try_from(out).unwrap_or(i64::MAX),
                ));
                counters.push((
                    "num_qps_stalled",
                    i64::try_from(stalled).unwrap_or(i64::MAX),
                ));
            }
            let s = HwSample {
                device_id: d.device_id(),
                timestamp_ns: clock.now_ns(),
                counters,
            };
            ring.lock().push(s);
        }
    }
}

fn run(shared: Arc<Shared>, interval: Duration, clock: Clock) {
    let mut next = Instant::now() + interval;
    loop {
        {
            let mut stop = shared.stop.lock();
            loop {
                if *stop {
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                shared.cv.wait_for(&mut stop, next - now);
            }
        }
        sample_all(&shared.ring, &clock);
        next += interval;
        let now = Instant::now();
        if next <= now {
            // A pass overran the interval: skip the missed ticks instead of bursting.
            next = now + interval;
        }
    }
}

/// Starts the background sampler when `settings.sample_ms > 0` (called once at Init).
pub fn start(settings: &HwSettings) {
    start_with_capacity(settings, DEFAULT_CAPACITY);
}

/// Starts the sampler with a given buffer capacity ([`start`] uses [`DEFAULT_CAPACITY`]; tests
/// choose a small one to exercise the full-buffer policy). Does nothing when `sample_ms` is 0
/// or a sampler is running.
pub fn start_with_capacity(settings: &HwSettings, capacity: usize) {
    if settings.sample_ms == 0 {
        return;
    }
    let mut st = STATE.lock();
    if st.is_some() {
        if settings.debug {
            diag("hw sampler already running; second start ignored");
        }
        return;
    }
    let shared = Arc::new(Shared {
        stop: Mutex::new(false),
        cv: Condvar::new(),
        ring: Mutex::new(Ring::new(capacity)),
    });
    let interval = Duration::from_millis(settings.sample_ms);
    let clock = Clock::start();
    let s2 = Arc::clone(&shared);
    let handle = crate::thread::spawn_quiet("rccl-tel-hwsample", move || run(s2, interval, clock));
    let handle = match handle {
        Ok(h) => Some(h),
        Err(e) => {
            diag(&format!(
                "cannot start the hw sampler thread ({e}); hw_samples will be empty"
            ));
            None
        }
    };
    if settings.debug && handle.is_some() {
        diag(&format!(
            "hw sampler started, every {} ms, at most {capacity} rows",
            settings.sample_ms
        ));
    }
    *st = Some(Running { shared, handle });
}

/// Rows produced so far (kept + dropped) by the running sampler; None when not running.
pub fn rows_so_far() -> Option<u64> {
    let st = STATE.lock();
    let r = st.as_ref()?;
    let ring = r.shared.ring.lock();
    Some(ring.buf.len() as u64 + ring.dropped)
}

/// A copy of the rows so far (and the count dropped so far), leaving the sampler running (for
/// snapshot files); None when it never ran.
pub fn snapshot() -> Option<HwSamples> {
    let st = STATE.lock();
    let r = st.as_ref()?;
    let ring = r.shared.ring.lock();
    // The newest rows that fit in memory (the rest counted as dropped in this copy).
    let mut keep = ring.buf.len();
    let mut samples = Vec::new();
    while samples.try_reserve_exact(keep).is_err() {
        keep /= 2;
    }
    let skip = ring.buf.len() - keep;
    samples.extend(ring.buf.iter().skip(skip).cloned());
    Some(HwSamples {
        samples,
        dropped: ring.dropped + skip as u64,
    })
}

/// Stops and joins the sampler and hands over its rows; None when it never started.
pub fn stop() -> Option<HwSamples> {
    let running = STATE.lock().take()?;
    *running.shared.stop.lock() = true;
    running.shared.cv.notify_all();
    if let Some(h) = running.handle {
        if h.join().is_err() {
            diag("hw sampler thread panicked; keeping the rows it collected");
        }
    }
    let out = running.shared.ring.lock().take();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64) -> HwSample {
        HwSample {
            device_id: 0,
            timestamp_ns: i,
            counters: vec![("cnp_sent", i as i64)],
        }
    }

    #[test]
    fn ring_keeps_newest_and_counts_dropped() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(row(i));
        }
        let out = r.take();
        assert_eq!(out.dropped, 2);
        assert_eq!(
            out.samples
                .iter()
                .map(|s| s.timestamp_ns)
                .collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        let again = r.take();
        assert!(again.samples.is_empty() && again.dropped == 0);
    }

    #[test]
    fn zero_capacity_is_one() {
        let mut r = Ring::new(0);
        r.push(row(1));
        r.push(row(2));
        let out = r.take();
        assert_eq!(out.samples.len(), 1);
        assert_eq!(out.dropped, 1);
    }

    #[test]
    fn clock_is_unix_ns_and_monotonic() {
        let c = Clock::start();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        // After 2020-01-01 in ns: a wall-clock anchored value, not a boot-relative one.
        assert!(a > 1_577_836_800_000_000_000);
    }
}
