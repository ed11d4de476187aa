//! Stalled queue pairs (RCCL_TELEMETRY_STALL_MS): which QPs have work outstanding and have
//! seen no completion for at least that long, computed off the data path.
//!
//! A *tick* runs on the writer thread (see `writer.rs`) every [`tick_period_ms`] = STALL_MS / 2
//! (at least 5 ms), and once more before every file is built. It reads, per QP slot, counters
//! the data path keeps anyway and compares them with the previous tick's; nothing is added to
//! the post or completion path. Per QP it keeps, here (not in the slot, whose layout the
//! header mirrors): the completion count last seen, since when the QP has been waiting, the
//! current stall's start and the longest stall of the run.
//!
//! What each mode can know (docs/operators.md, "Stalled queue pairs"):
//! - hooks: outstanding = max(0, WRITE_WITH_IMM postings - completions drained). IB-CAST signals
//!   exactly one WR per post, the WRITE_WITH_IMM that ends it, and takes one completion for it;
//!   plain writes are unsignalled companions of that WR and CTS writes are signalled only one
//!   in many, with no completion hook call for it in RCCL's call sites, so neither counts.
//!   Receives are not counted (they are pre-posted and wait for the peer).
//!   A lower bound: a QP whose receive completions land on it too can hide its sends.
//! - preload: the interposer's in-order record of send WRs: the entries between its head and
//!   tail that are not void, plus the WRs that went untracked (record full) and are not yet
//!   accounted for, published into the slot's `QpExt` by the interposer's walk, which this tick
//!   calls first ([`set_walker`]). A completion is expected only when a signalled WR is among
//!   them: a trailing run of unsignalled WRs with no signalled one after it never completes on
//!   its own, so it is outstanding but never a stall. Receives are not a criterion.
//!
//! Stalled: a completion is expected (outstanding > 0) and the QP's completion count has not
//! moved for at least STALL_MS, counted from the later of its last observed completion and
//! the tick that first saw it waiting. Detection latency: the count is compared at ticks, so a
//! stall is detected at most two ticks (one STALL_MS) after the threshold is crossed, and a
//! recorded duration is within one tick of the real pause.
//!
//! Communicators: the state is kept per channel object (its serial on the device) and owner
//! (the channel's generation). A finalized communicator's QPs are forgotten at once
//! ([`forget`], after [`fold`] ended their stalls at the finalization and summed them into
//! its record): a QP torn down with work in flight is no stall afterwards, and a later
//! communicator handed the same channel starts from nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

use parking_lot::Mutex;

use crate::counters::{QpExt, RcclQpStats};
use crate::qp_ext::STALL_EXPECT;
use crate::{diag, latency, registry};

/// Named stderr lines at most per tick (one more line counts the rest).
pub const LINES_PER_TICK: usize = 8;

static STALL_MS: AtomicU64 = AtomicU64::new(0);
/// Set by a test that drives [`tick_at`] with its own clock: the automatic ticks stop.
static MANUAL: AtomicBool = AtomicBool::new(false);
/// The preload's walk: publishes its send records into the slots' `QpExt` (under its lock).
/// The interposer is linked above the library, so it registers the walk ([`set_walker`]).
static WALKER: Mutex<Option<extern "C" fn()>> = Mutex::new(None);
/// The set of stalled QPs changed at a tick since [`take_changed`] last looked (whichever
/// thread ticked: the writer, or a file's build).
static CHANGED: AtomicBool = AtomicBool::new(false);

/// A stall episode started at a tick since [`take_started`] last looked (the writer's
/// snapshot trigger).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Whether a stall episode started at a tick since the last call (on any QP).
pub fn take_started() -> bool {
    STARTED.swap(false, AcqRel)
}

/// Whether the set of stalled QPs changed since the last call (the writer rewrites the
/// textfile then).
pub fn take_changed() -> bool {
    CHANGED.swap(false, Relaxed)
}

/// Turns detection on (`ms` > 0) or off; at Init.
pub fn configure(ms: u64) {
    STALL_MS.store(ms, Relaxed);
}

/// The RCCL_TELEMETRY_STALL_MS in effect (0: off).
pub fn stall_ms() -> u64 {
    STALL_MS.load(Relaxed)
}

pub fn enabled() -> bool {
    stall_ms() > 0
}

/// The tick period: half the threshold, at least 5 ms; 0 when off.
pub fn tick_period_ms(stall_ms: u64) -> u64 {
    if stall_ms == 0 {
        0
    } else {
        (stall_ms / 2).max(5)
    }
}

/// Registers the preload's walk (called by its engine at start).
pub fn set_walker(f: extern "C" fn()) {
    *WALKER.lock() = Some(f);
}

/// Stops the automatic ticks: the caller drives [`tick_at`] with an injected clock (tests).
pub fn manual_clock() {
    MANUAL.store(true, Relaxed);
}

// ---------------------------------------------------------------------------- per QP

/// What a tick reads of one QP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Moves on every completion of the QP (num_wqe_rcvd).
    pub progress: u64,
    pub outstanding: u64,
    /// A completion is expected for one of the outstanding WRs.
    pub expect: bool,
    /// Preload: the PostTs token of the oldest outstanding send WR (> 1: a clock reading).
    pub oldest_token: i64,
    /// Moves on every WR posted to the QP, send or receive (for its last post's time).
    pub posted: u64,
}

/// Reads one slot: through its `QpExt` (preload) or from the hooks' counters.
pub fn read(slot: &RcclQpStats, ext: Option<&QpExt>) -> Reading {
    // The completion count first: a post between the two loads shows as outstanding, never a
    // completion as missing.
    let progress = slot.wqe_rcvd.load(Relaxed);
    let posted = [
        &slot.sent_write,
        &slot.sent_imm,
        &slot.idx_sent,
        &slot.idx_write,
        &slot.idx_imm,
        &slot.recv_wqe,
        &slot.cts_signalled,
        &slot.cts_unsignalled,
    ]
    .iter()
    .fold(0u64, |a, c| a.wrapping_add(c.load(Relaxed)));
    match ext {
        Some(e) => {
            let out = e.stall_out.load(Relaxed);
            Reading {
                progress,
                outstanding: out & !STALL_EXPECT,
                expect: out & STALL_EXPECT != 0,
                oldest_token: e.stall_oldest.load(Relaxed) as i64,
                posted,
            }
        }
        None => {
            let imm = slot
                .sent_imm
                .load(Relaxed)
                .wrapping_add(slot.idx_imm.load(Relaxed));
            let outstanding = imm.saturating_sub(progress);
            Reading {
                progress,
                outstanding,
                expect: outstanding > 0,
                oldest_token: 0,
                posted,
            }
        }
    }
}

/// The detector's state of one QP (monotonic ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpState {
    seen: bool,
    last_progress: u64,
    /// Since when the QP has been waiting for a completion with none seen: the first tick
    /// that saw it waiting, or the last that saw a completion.
    wait_since: u64,
    waiting: bool,
    /// The current stall's start (= wait_since when it was declared).
    pub stall_start: Option<u64>,
    pub longest_ns: u64,
    pub longest_start: u64,
    pub outstanding: u64,
    pub oldest_token: i64,
    last_posted: u64,
    /// The tick that first saw the QP's latest post, and its latest completion (None: none
    /// seen yet). Tick resolution: the event happened since the tick before.
    pub last_post: Option<u64>,
    pub last_completion: Option<u64>,
    /// Stall episodes so far (num_stalls): one per stall declared, however long it lasts.
    pub episodes: u64,
    /// WRs a QP the transport replaced in this slot left outstanding ([`replaced`]): they
    /// never complete, so they are no longer counted against the slot's new QP.
    base: u64,
}

impl QpState {
    /// One tick at `now`. True when a stall episode starts at this tick.
    pub fn step(&mut self, r: &Reading, now: u64, stall_ns: u64) -> bool {
        let mut r = *r;
        if self.base > 0 {
            self.base = self.base.min(r.outstanding);
            r.outstanding -= self.base;
            r.expect &= r.outstanding > 0;
        }
        if !self.seen {
            self.seen = true;
            self.last_progress = r.progress;
            self.wait_since = now;
            self.last_posted = r.posted;
            if r.posted != 0 {
                self.last_post = Some(now);
            }
            if r.progress != 0 {
                self.last_completion = Some(now);
            }
        }
        if r.posted != self.last_posted {
            self.last_posted = r.posted;
            self.last_post = Some(now);
        }
        let progressed = r.progress != self.last_progress;
        if progressed {
            self.last_completion = Some(now);
        }
        self.last_progress = r.progress;
        self.outstanding = r.outstanding;
        self.oldest_token = if r.outstanding > 0 { r.oldest_token } else { 0 };
        if progressed || !r.expect {
            if let Some(s) = self.stall_start.take() {
                self.note(s, now);
            }
            self.wait_since = now;
            self.waiting = r.expect;
            return false;
        }
        if !self.waiting {
            self.waiting = true;
            self.wait_since = now;
        }
        let mut started = false;
        if self.stall_start.is_none() && now.saturating_sub(self.wait_since) >= stall_ns {
            self.stall_start = Some(self.wait_since);
            self.episodes += 1;
            started = true;
        }
        if let Some(s) = self.stall_start {
            self.note(s, now);
        }
        started
    }

    fn note(&mut self, start: u64, end: u64) {
        let d = end.saturating_sub(start);
        if d > self.longest_ns {
            self.longest_ns = d;
            self.longest_start = start;
        }
    }

    pub fn stalled(&self) -> bool {
        self.stall_start.is_some()
    }

    /// The slot got a new QP at `now`: the current stall ends, what is outstanding becomes the
    /// base the new QP's readings are taken above. True when a stall ended.
    fn replace(&mut self, now: u64) -> bool {
        let stalled = match self.stall_start.take() {
            Some(s) => {
                self.note(s, now);
                true
            }
            None => false,
        };
        self.base += self.outstanding;
        self.outstanding = 0;
        self.waiting = false;
        self.wait_since = now;
        stalled
    }
}

// ------------------------------------------------------------------------- the detector

/// One channel object's QPs, by slot index, under one owner (the channel's generation).
#[derive(Default, Clone)]
pub struct ChanState {
    pub generation: u64,
    pub qps: Vec<QpState>,
}

/// One device's QPs, by channel serial (`registry::Channel::serial`) then slot index.
#[derive(Default, Clone)]
pub struct DevState {
    pub channels: Vec<ChanState>,
    pub outstanding: u64,
    pub stalled: u64,
}

impl DevState {
    /// Slot `i` of the channel object of serial `serial`.
    pub fn qp(&self, serial: u32, i: u64) -> Option<&QpState> {
        self.channels.get(serial as usize)?.qps.get(i as usize)
    }

    /// The QPs of channel `c` as of the last tick (empty when the channel has changed owner
    /// since).
    pub fn channel(&self, c: &registry::Channel) -> &[QpState] {
        match self.channels.get(c.serial as usize) {
            Some(s) if s.generation == c.generation() => &s.qps,
            _ => &[],
        }
    }
}

#[derive(Default)]
struct Detector {
    devs: Vec<DevState>,
    /// wall - mono at the last tick, to turn monotonic instants into wall time.
    wall_offset: i128,
    ticked: bool,
    tick_mono: u64,
    /// (device, channel serial, slot) of every QP stalled at the last tick, in order.
    stalled_set: Vec<(u32, u32, u64)>,
}

static DET: Mutex<Detector> = Mutex::new(Detector {
    devs: Vec::new(),
    wall_offset: 0,
    ticked: false,
    tick_mono: 0,
    stalled_set: Vec::new(),
});

/// A stall that started at a tick, for its stderr line.
struct Started {
    dev: u32,
    ch: u32,
    idx: u64,
    outstanding: u64,
    waited_ns: u64,
    channel: &'static registry::Channel,
}

/// The automatic tick (writer thread, and before each file): the real clocks. True when
/// the set of stalled QPs changed.
pub fn tick() -> bool {
    if !enabled() || MANUAL.load(Relaxed) {
        return false;
    }
    tick_at(latency::monotonic_ns(), latency::realtime_ns())
}

/// One tick at the given instants (monotonic and wall ns). True when the set of stalled QPs
/// changed since the previous tick.
pub fn tick_at(mono: u64, wall: u64) -> bool {
    let stall_ns = stall_ms().saturating_mul(1_000_000);
    if stall_ns == 0 {
        return false;
    }
    let _view = registry::read_view();
    let mut det = DET.lock();
    let walk = *WALKER.lock();
    if let Some(f) = walk {
        f();
    }
    det.wall_offset = i128::from(wall) - i128::from(mono);
    det.ticked = true;
    det.tick_mono = mono;
    // Named on stderr: the first LINES_PER_TICK stalls that start; the rest only counted.
    let mut started = Vec::new();
    let mut more_started = 0usize;
    // Every allocation here is fallible: a channel whose states cannot be held is not
    // checked (said once); a set of stalled QPs that cannot be held counts as a change.
    let mut set = Vec::new();
    let mut set_whole = set.try_reserve(det.stalled_set.len()).is_ok();
    let mut skipped = 0u64;
    for d in registry::devices() {
        let di = d.id as usize;
        let have = det.devs.len();
        if have <= di {
            if det.devs.try_reserve(di + 1 - have).is_err() {
                skipped += d.channels().iter().map(|c| c.slots.reserved()).sum::<u64>();
                continue;
            }
            det.devs.resize_with(di + 1, DevState::default);
        }
        let ds = &mut det.devs[di];
        let (mut out, mut stalled) = (0u64, 0u64);
        for c in d.channels() {
            let ci = c.serial as usize;
            let n = c.slots.reserved() as usize;
            let have = ds.channels.len();
            if have <= ci {
                if ds.channels.try_reserve(ci + 1 - have).is_err() {
                    skipped += n as u64;
                    continue;
                }
                ds.channels.resize_with(ci + 1, ChanState::default);
            }
            let cs = &mut ds.channels[ci];
            if cs.generation != c.generation() {
                *cs = ChanState {
                    generation: c.generation(),
                    qps: Vec::new(),
                };
            }
            let qs = &mut cs.qps;
            if qs.len() < n {
                if qs.try_reserve_exact(n - qs.len()).is_ok() {
                    qs.resize(n, QpState::default());
                } else {
                    skipped += (n - qs.len()) as u64;
                }
            }
            for (i, slot) in c.slots.iter().take(qs.len()) {
                let st = &mut qs[i as usize];
                let r = read(slot, c.slots.ext(i));
                if st.step(&r, mono, stall_ns) {
                    if started.len() < LINES_PER_TICK && started.try_reserve(1).is_ok() {
                        started.push(Started {
                            dev: d.id,
                            ch: c.id(),
                            idx: i,
                            outstanding: r.outstanding,
                            waited_ns: mono - st.stall_start.unwrap_or(mono),
                            channel: c,
                        });
                    } else {
                        more_started += 1;
                    }
                }
                out = out.wrapping_add(st.outstanding);
                if st.stalled() {
                    stalled += 1;
                    if set_whole && (set.len() < set.capacity() || set.try_reserve(1).is_ok()) {
                        set.push((d.id, c.serial, i));
                    } else {
                        set_whole = false;
                    }
                }
            }
        }
        ds.outstanding = out;
        ds.stalled = stalled;
    }
    let changed = !set_whole || set != det.stalled_set;
    if set_whole {
        det.stalled_set = set;
    }
    if !started.is_empty() || more_started > 0 {
        STARTED.store(true, Release);
    }
    if changed {
        CHANGED.store(true, Relaxed);
    }
    drop(det);
    if skipped > 0 {
        diag::warn_once(&NO_MEMORY_SAID, || {
            format!("stall detection: out of memory for the states of {skipped} QPs; they are not checked for stalls while that lasts (their counts are unaffected)")
        });
    }
    say(&started, more_started);
    changed
}

/// Whether QPs left unchecked for want of memory were said (once per process).
static NO_MEMORY_SAID: AtomicBool = AtomicBool::new(false);

/// The stderr lines of the stalls that started at a tick: at most LINES_PER_TICK named, one
/// line for the rest.
fn say(started: &[Started], more: usize) {
    for s in started.iter().take(LINES_PER_TICK) {
        let dev = registry::device(s.dev as i32)
            .map(|d| d.roce_device.clone())
            .unwrap_or_default();
        let p = peer_labels(s.channel, s.idx);
        let qpn = p
            .qp_num
            .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
        let peer = match (&p.peer_gid, p.peer_lid, p.peer_qp_num) {
            (Some(g), _, Some(n)) => format!("peer gid {g} qp_num {n}"),
            (None, Some(l), Some(n)) => format!("peer lid {l} qp_num {n}"),
            (None, None, Some(n)) => format!("peer qp_num {n}"),
            _ => "peer unknown".to_owned(),
        };
        let comm = registry::comm::describe(s.channel.owner())
            .map(|c| format!(" of communicator {c}"))
            .unwrap_or_default();
        diag::warn(&format!(
            "stall: device {} ({dev}) channel {}{comm} QP {} (qp_num {qpn}), {peer}: {} WRs outstanding, no completion for {} ms",
            s.dev,
            s.ch,
            s.idx,
            s.outstanding,
            s.waited_ns / 1_000_000
        ));
    }
    if more > 0 {
        diag::warn(&format!(
            "stall: {more} more QPs stalled at this check (not named; see the textfile or a snapshot)"
        ));
    }
}

/// What names a QP and its peer (what `rcclTelemetryQpSetPeer` / the preload told).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerLabels {
    pub qp_num: Option<u32>,
    pub peer_gid: Option<String>,
    pub peer_qp_num: Option<u32>,
    pub peer_lid: Option<u16>,
}

/// Slot `i` of channel `c`: its QPN and its peer's GID (text form), QPN and LID, when told.
pub fn peer_labels(c: &registry::Channel, i: u64) -> PeerLabels {
    let Some(q) = c.peers.qp(i) else {
        return PeerLabels::default();
    };
    let r = q.peer;
    PeerLabels {
        qp_num: q.qp_num,
        peer_gid: r
            .and_then(|r| crate::peers::nonzero(r.gid))
            .map(|g| crate::peers::gid_text(&g)),
        peer_qp_num: r.map(|r| r.qp_num),
        peer_lid: r.map(|r| r.lid).filter(|&l| l != 0),
    }
}

// ------------------------------------------------------------------------ what files read

/// A copy of one device's states as of the last tick, and the wall offset to read them.
pub struct DevView {
    pub state: DevState,
    wall_offset: i128,
    /// The last tick (monotonic ns).
    pub tick_mono: u64,
}

impl DevView {
    /// Wall ns of a monotonic instant of the detector.
    pub fn wall(&self, mono: u64) -> u64 {
        u64::try_from(i128::from(mono) + self.wall_offset).unwrap_or(0)
    }
}

/// The device's states (None when detection is off, or before the first tick).
pub fn device_view(dev: u32) -> Option<DevView> {
    if !enabled() {
        return None;
    }
    let det = DET.lock();
    if !det.ticked {
        return Some(DevView {
            state: DevState::default(),
            wall_offset: 0,
            tick_mono: 0,
        });
    }
    Some(DevView {
        state: det.devs.get(dev as usize).cloned().unwrap_or_default(),
        wall_offset: det.wall_offset,
        tick_mono: det.tick_mono,
    })
}

/// [`device_view`] without the QPs' states: the device's totals and the clock to read them
/// (no copy of its QPs, so nothing that grows with the job is allocated). The QPs are read a
/// channel at a time with [`channel_states`] or one at a time with [`qp_state`].
pub fn device_clock(dev: u32) -> Option<DevView> {
    if !enabled() {
        return None;
    }
    let det = DET.lock();
    let d = det.devs.get(dev as usize).filter(|_| det.ticked);
    Some(DevView {
        state: DevState {
            channels: Vec::new(),
            outstanding: d.map_or(0, |d| d.outstanding),
            stalled: d.map_or(0, |d| d.stalled),
        },
        wall_offset: if det.ticked { det.wall_offset } else { 0 },
        tick_mono: if det.ticked { det.tick_mono } else { 0 },
    })
}

/// A copy of channel `c`'s QP states into `out` (replacing what it held), as of the last
/// tick; nothing copied before the first tick, or for a channel handed to another owner since
/// (its generation moved on). Fails only when `out` cannot grow to the channel's QPs: then
/// `out` is empty.
pub fn channel_states(
    c: &registry::Channel,
    out: &mut Vec<QpState>,
) -> Result<(), std::collections::TryReserveError> {
    out.clear();
    let det = DET.lock();
    let Some(d) = det.devs.get(c.dev as usize).filter(|_| det.ticked) else {
        return Ok(());
    };
    let qs = d.channel(c);
    out.try_reserve_exact(qs.len())?;
    out.extend_from_slice(qs);
    Ok(())
}

/// One QP's state as of the last tick (None before the first tick, or for a QP no tick saw).
pub fn qp_state(c: &registry::Channel, i: u64) -> Option<QpState> {
    let det = DET.lock();
    if !det.ticked {
        return None;
    }
    det.devs
        .get(c.dev as usize)?
        .channel(c)
        .get(i as usize)
        .copied()
}

/// (outstanding WRs, stalled QPs) of a device at the last tick, for hw_samples.
pub fn device_summary(dev: u32) -> Option<(u64, u64)> {
    if !enabled() {
        return None;
    }
    let det = DET.lock();
    Some(
        det.devs
            .get(dev as usize)
            .map_or((0, 0), |d| (d.outstanding, d.stalled)),
    )
}

/// The stall keys a finalized communicator's channel leaves in its record: its QPs' stalls
/// end at `now` (monotonic ns), the finalization.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallFold {
    /// Send WRs outstanding at the last tick before the finalization.
    pub outstanding: u64,
    /// QPs stalled when the communicator was finalized.
    pub stalled: u64,
    /// The longest stall of its QPs (one that lasted to the finalization ends there).
    pub longest_ns: u64,
    /// When it started, wall-clock ns (None: no stall).
    pub longest_start_wall: Option<u64>,
    /// Stall episodes of its QPs (num_stalls).
    pub episodes: u64,
}

impl StallFold {
    pub fn add(&mut self, o: &StallFold) {
        self.outstanding = self.outstanding.wrapping_add(o.outstanding);
        self.stalled += o.stalled;
        self.episodes += o.episodes;
        if o.longest_ns > self.longest_ns {
            self.longest_ns = o.longest_ns;
            self.longest_start_wall = o.longest_start_wall;
        }
    }
}

/// Channel `c`'s QPs as a finalized record keeps them, their stalls ended at `now`
/// (monotonic ns). None when detection is off.
pub fn fold(c: &registry::Channel, now: u64) -> Option<StallFold> {
    if !enabled() {
        return None;
    }
    let det = DET.lock();
    let mut f = StallFold::default();
    let Some(ds) = det.devs.get(c.dev as usize) else {
        return Some(f);
    };
    for st in ds.channel(c) {
        let mut st = *st;
        f.outstanding = f.outstanding.wrapping_add(st.outstanding);
        f.episodes += st.episodes;
        if let Some(s) = st.stall_start {
            f.stalled += 1;
            st.note(s, now.max(det.tick_mono));
        }
        if st.longest_ns > f.longest_ns {
            f.longest_ns = st.longest_ns;
            let wall = i128::from(st.longest_start) + det.wall_offset;
            f.longest_start_wall = u64::try_from(wall).ok();
        }
    }
    Some(f)
}

/// One QP of a finalized communicator's channel as its record keeps it: its stall keys, a
/// stall that lasted to the finalization ended there, its times in wall-clock ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinalQp {
    /// Send WRs outstanding at the last tick before the finalization.
    pub outstanding: u64,
    /// When its stall began, if it was stalled when finalized.
    pub stalled_since: Option<u64>,
    pub longest_ns: u64,
    /// When its longest stall began (None: no stall).
    pub longest_start: Option<u64>,
    /// The ticks that first saw its latest post and its latest completion.
    pub last_post: Option<u64>,
    pub last_completion: Option<u64>,
    /// Its stall episodes (num_stalls).
    pub episodes: u64,
}

impl FinalQp {
    /// It stalled: when finalized, or earlier and recovered.
    pub fn stalled(&self) -> bool {
        self.stalled_since.is_some() || self.longest_ns > 0
    }

    /// Its stall keys as one QP's share of a record's.
    pub fn fold(&self) -> StallFold {
        StallFold {
            outstanding: self.outstanding,
            stalled: u64::from(self.stalled_since.is_some()),
            longest_ns: self.longest_ns,
            longest_start_wall: self.longest_start,
            episodes: self.episodes,
        }
    }
}

/// Channel `c`'s QPs by slot index as a finalized record keeps them, their stalls ended at
/// `now` (monotonic ns). None when detection is off; empty when the states cannot be copied.
pub fn final_qps(c: &registry::Channel, now: u64) -> Option<Vec<FinalQp>> {
    if !enabled() {
        return None;
    }
    let det = DET.lock();
    let wall = |mono: u64| u64::try_from(i128::from(mono) + det.wall_offset).ok();
    let mut v = Vec::new();
    let Some(ds) = det.devs.get(c.dev as usize) else {
        return Some(v);
    };
    let qs = ds.channel(c);
    if v.try_reserve_exact(qs.len()).is_err() {
        return Some(v);
    }
    for st in qs {
        let mut st = *st;
        if let Some(s) = st.stall_start {
            st.note(s, now.max(det.tick_mono));
        }
        v.push(FinalQp {
            outstanding: st.outstanding,
            stalled_since: st.stall_start.and_then(wall),
            longest_ns: st.longest_ns,
            longest_start: (st.longest_ns > 0)
                .then(|| wall(st.longest_start))
                .flatten(),
            last_post: st.last_post.and_then(wall),
            last_completion: st.last_completion.and_then(wall),
            episodes: st.episodes,
        });
    }
    Some(v)
}

/// Forgets channel `c`'s QPs (its communicator was finalized): they leave the device's
/// outstanding and stalled counts and the stalled set at once, not at the next tick.
pub fn forget(c: &registry::Channel) {
    let mut det = DET.lock();
    let det = &mut *det;
    let Some(ds) = det.devs.get_mut(c.dev as usize) else {
        return;
    };
    let Some(cs) = ds.channels.get_mut(c.serial as usize) else {
        return;
    };
    for st in cs.qps.drain(..) {
        ds.outstanding = ds.outstanding.wrapping_sub(st.outstanding);
        ds.stalled = ds.stalled.saturating_sub(u64::from(st.stalled()));
    }
    let before = det.stalled_set.len();
    det.stalled_set
        .retain(|&(d, serial, _)| (d, serial) != (c.dev, c.serial));
    if det.stalled_set.len() != before {
        CHANGED.store(true, Relaxed);
    }
}

/// The transport handed slot `i` of channel `c` to a new QP (rcclTelemetryQpSetPeer with
/// another local QPN, as RCCL's port recovery does): the old QP's stall ends now, and the
/// WRs it left outstanding are no longer counted against the new one.
pub fn replaced(c: &registry::Channel, i: u64) {
    let now = latency::monotonic_ns();
    let mut det = DET.lock();
    let det = &mut *det;
    let Some(ds) = det.devs.get_mut(c.dev as usize) else {
        return;
    };
    let Some(cs) = ds.channels.get_mut(c.serial as usize) else {
        return;
    };
    if cs.generation != c.generation() {
        return;
    }
    let Some(st) = cs.qps.get_mut(i as usize) else {
        return;
    };
    ds.outstanding = ds.outstanding.wrapping_sub(st.outstanding);
    if st.replace(now) {
        ds.stalled = ds.stalled.saturating_sub(1);
        det.stalled_set.retain(|&x| x != (c.dev, c.serial, i));
        CHANGED.store(true, Relaxed);
    }
}

/// Age in ms of a token's clock reading, now (None when it is no clock reading).
pub fn token_age_ms(token: i64) -> Option<u64> {
    (token > latency::TS_UNSAMPLED).then(|| latency::elapsed_ns(token) / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn r(progress: u64, outstanding: u64) -> Reading {
        Reading {
            progress,
            outstanding,
            expect: outstanding > 0,
            oldest_token: 0,
            posted: 0,
        }
    }

    #[test]
    fn outstanding_without_progress_stalls_after_the_threshold() {
        let mut s = QpState::default();
        assert!(!s.step(&r(5, 0), 0, 1000 * MS));
        assert!(!s.step(&r(5, 3), 500 * MS, 1000 * MS)); // waiting since 500
        assert!(!s.step(&r(5, 3), 1000 * MS, 1000 * MS));
        assert!(s.step(&r(5, 3), 1500 * MS, 1000 * MS));
        assert_eq!(s.stall_start, Some(500 * MS));
        assert!(!s.step(&r(5, 3), 2000 * MS, 1000 * MS));
        assert_eq!(s.longest_ns, 1500 * MS, "ongoing included");
        // A completion ends it.
        assert!(!s.step(&r(6, 2), 2500 * MS, 1000 * MS));
        assert!(!s.stalled());
        assert_eq!((s.longest_ns, s.longest_start), (2000 * MS, 500 * MS));
    }

    #[test]
    fn progress_without_outstanding_or_idle_never_stalls() {
        let mut s = QpState::default();
        for t in 0..100 {
            assert!(!s.step(&r(t, 0), t * 500 * MS, 1000 * MS));
            assert!(!s.stalled());
        }
        // Idle for an hour, then one post: the wait counts from the tick that saw it.
        let t0 = 100 * 500 * MS + 3_600_000 * MS;
        assert!(!s.step(&r(99, 1), t0, 1000 * MS));
        assert!(!s.step(&r(100, 0), t0 + 500 * MS, 1000 * MS));
        assert_eq!(s.longest_ns, 0);
    }

    #[test]
    fn outstanding_that_expects_no_completion_is_no_stall() {
        let mut s = QpState::default();
        let unsignalled = Reading {
            progress: 1,
            outstanding: 4,
            expect: false,
            oldest_token: 0,
            posted: 0,
        };
        for t in 0..20 {
            assert!(!s.step(&unsignalled, t * 500 * MS, 1000 * MS));
        }
        assert_eq!((s.outstanding, s.longest_ns), (4, 0));
    }

    #[test]
    fn a_replaced_qps_outstanding_work_is_not_the_new_ones() {
        let ms = 1_000_000;
        let mut s = QpState::default();
        s.step(&r(5, 1), 0, 100 * ms);
        assert!(s.step(&r(5, 1), 150 * ms, 100 * ms), "the old QP stalls");
        assert!(s.replace(160 * ms), "the stall ends with its QP");
        assert_eq!(s.longest_ns, 160 * ms);
        assert!(
            !s.step(&r(5, 1), 400 * ms, 100 * ms),
            "the new QP has nothing outstanding"
        );
        assert!(!s.stalled() && s.outstanding == 0);
        s.step(&r(5, 2), 410 * ms, 100 * ms);
        assert_eq!(s.outstanding, 1, "the new QP's own WR counts");
        assert!(s.step(&r(5, 2), 600 * ms, 100 * ms), "and can stall");
        assert_eq!(s.episodes, 2);
    }

    #[test]
    fn a_stall_ends_when_the_work_goes_away() {
        // A destroyed QP: its published outstanding count is cleared.
        let mut s = QpState::default();
        s.step(&r(0, 2), 0, 100 * MS);
        assert!(s.step(&r(0, 2), 100 * MS, 100 * MS));
        assert!(!s.step(&r(0, 0), 150 * MS, 100 * MS));
        assert!(!s.stalled());
        assert_eq!(s.longest_ns, 150 * MS);
    }

    #[test]
    fn hooks_count_write_with_imm_against_completions() {
        let slot: RcclQpStats = unsafe { std::mem::zeroed() };
        slot.sent_imm.store(3, Relaxed);
        slot.sent_write.store(3, Relaxed);
        slot.idx_imm.store(1, Relaxed);
        slot.wqe_rcvd.store(2, Relaxed);
        slot.cts_signalled.store(9, Relaxed);
        assert_eq!(
            read(&slot, None),
            Reading {
                progress: 2,
                outstanding: 2,
                expect: true,
                oldest_token: 0,
                posted: 9 + 3 + 3 + 1
            }
        );
        slot.wqe_rcvd.store(10, Relaxed); // receive completions on the same QP: a lower bound
        assert_eq!(read(&slot, None).outstanding, 0);
    }

    #[test]
    fn preload_readings_come_from_the_published_fields() {
        let slot: RcclQpStats = unsafe { std::mem::zeroed() };
        let ext = QpExt::default();
        ext.stall_out.store(STALL_EXPECT | 7, Relaxed);
        ext.stall_oldest.store(12345, Relaxed);
        slot.sent_imm.store(100, Relaxed); // not used in this mode
        assert_eq!(
            read(&slot, Some(&ext)),
            Reading {
                progress: 0,
                outstanding: 7,
                expect: true,
                oldest_token: 12345,
                posted: 100
            }
        );
        ext.stall_out.store(3, Relaxed);
        assert!(!read(&slot, Some(&ext)).expect);
    }

    #[test]
    fn last_post_and_completion_are_the_ticks_that_saw_them() {
        let at = |posted, progress| Reading {
            posted,
            ..r(progress, 0)
        };
        let mut s = QpState::default();
        s.step(&at(0, 0), 100 * MS, 1000 * MS);
        assert_eq!((s.last_post, s.last_completion), (None, None));
        s.step(&at(2, 0), 200 * MS, 1000 * MS);
        assert_eq!((s.last_post, s.last_completion), (Some(200 * MS), None));
        s.step(&at(2, 1), 300 * MS, 1000 * MS);
        s.step(&at(2, 1), 400 * MS, 1000 * MS);
        assert_eq!(
            (s.last_post, s.last_completion),
            (Some(200 * MS), Some(300 * MS))
        );
        // Seen first with work already done: stamped at that first tick.
        let mut s = QpState::default();
        s.step(&at(5, 4), 700 * MS, 1000 * MS);
        assert_eq!(
            (s.last_post, s.last_completion),
            (Some(700 * MS), Some(700 * MS))
        );
    }

    #[test]
    fn tick_period_is_half_the_threshold() {
        assert_eq!(tick_period_ms(0), 0);
        assert_eq!(tick_period_ms(1000), 500);
        assert_eq!(tick_period_ms(3), 5);
    }

    proptest! {
        /// Completions flow, pause for `pause` ns with work outstanding, and resume: the
        /// recorded stall equals the pause within one tick, and none is recorded below the
        /// threshold minus a tick.
        #[test]
        fn recorded_duration_is_the_pause_within_one_tick(
            tick_ms in 5u64..200, stall_ms in 5u64..2000, pause_ms in 0u64..5000, offset_ms in 0u64..200, qps in 1usize..6,
        ) {
            let (tick, stall, pause) = (tick_ms * MS, stall_ms * MS, pause_ms * MS);
            let pause_at = 1000 * MS + offset_ms * MS; // the last completion
            let resume = pause_at + pause;
            let mut st = vec![QpState::default(); qps];
            let mut t = 0;
            while t < resume + 4 * tick + stall {
                for (k, s) in st.iter_mut().enumerate() {
                    // QP k's completion count: one per ms, except during the pause.
                    let done = if t <= pause_at { t / MS } else if t < resume { pause_at / MS } else { pause_at / MS + 1 + (t - resume) / MS };
                    s.step(&r(done * (k as u64 + 1), 1), t, stall);
                }
                t += tick;
            }
            for s in &st {
                prop_assert!(!s.stalled());
                if s.longest_ns > 0 {
                    prop_assert!(s.longest_ns + tick >= pause && s.longest_ns <= pause + tick, "{} vs {}", s.longest_ns, pause);
                } else {
                    prop_assert!(pause < stall + 2 * tick, "a pause of {pause} went unrecorded (stall {stall}, tick {tick})");
                }
            }
        }
    }
}
