//! Devices, channels and QP slots: the append-only arena behind every handle, handle
//! resolution, and `num_qp_untracked` accounting. Also the per-thread shards behind the
//! device forms (bytes, CQ errors, CQ polls, WQE sizes).
//!
//! Nothing here is ever freed or moved: devices, channels and slot segments are allocated
//! once and leaked, so every handle stays valid for the life of the process.

use std::alloc::{alloc_zeroed, Layout};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::Once;

use parking_lot::Mutex;

use crate::counters::{QpExt, RcclChannelStats, RcclQpStats, SIZE_BUCKETS};
use crate::hw::{HwDevice, HwSettings};
use crate::loghist::LogHist;
use crate::thread::thread_pointer;

pub use crate::hot::MAX_DEVS;
pub const MAX_CHANNELS: usize = 512;
/// Slots in the first segment of a channel's arena; segment s holds FIRST_SEG << s.
const FIRST_SEG: u64 = 16;
const SEGMENTS: usize = 24;
/// Ceiling on QP slots per channel (a guard against a garbage numQps, not a design limit:
/// 16,777,216 slots take 4 GiB).
pub const MAX_QPS_PER_CHANNEL: u64 = 1 << 24;

/// Whether slots get a `QpExt` beside them and the file the verbs interposer's keys: set
/// once by `librccl_telemetry_preload.so` before it reserves any slot.
static VERBS_KEYS: AtomicBool = AtomicBool::new(false);

/// Whether slots record into their channel's log-scale histogram (RCCL_TELEMETRY_LOG_HISTOGRAM,
/// set at Init before any slot is reserved).
static LOG_HISTOGRAM: AtomicBool = AtomicBool::new(true);

pub fn set_log_histogram(on: bool) {
    LOG_HISTOGRAM.store(on, Release);
}

/// Turns on the verbs interposer's per-QP and per-device keys for this process.
pub fn enable_verbs_keys() {
    VERBS_KEYS.store(true, Release);
}

/// Whether the verbs interposer's keys are on.
pub fn verbs_keys() -> bool {
    VERBS_KEYS.load(Acquire)
}

/// A channel's QP slots: geometric segments allocated on demand, never moved.
pub struct SlotArena {
    segs: [AtomicPtr<RcclQpStats>; SEGMENTS],
    /// Parallel segments of `QpExt`, only when `verbs_keys()`.
    ext_segs: [AtomicPtr<QpExt>; SEGMENTS],
    /// Parallel segments of each slot's role (ROLE_*, one byte a slot): told once at setup,
    /// read by the report, never by the hot path, so it stays out of the slot and the slot's
    /// histogram word is a bare address.
    role_segs: [AtomicPtr<AtomicU8>; SEGMENTS],
    len: AtomicU64,
    grow: Mutex<()>,
    /// (device, channel) of the arena, when it belongs to a registered channel: its segments
    /// are then listed in the slot index (`slot_home`), so a handle leads back to its channel.
    home: Option<(u32, u32)>,
}

/// Where a slot segment lives: (device, channel, index of its first slot, slots in it).
#[derive(Clone, Copy)]
struct SegHome {
    dev: u32,
    ch: u32,
    first: u64,
    len: u64,
}

/// Every registered channel's slot segments by start address: the reverse of a handle, for
/// the cold entry points that receive a bare `RcclQpStats*` (rcclTelemetryQpSetPeer). About
/// one entry per channel per doubling of its slots; looked up only off the data path.
static SLOT_INDEX: Mutex<std::collections::BTreeMap<usize, SegHome>> =
    Mutex::new(std::collections::BTreeMap::new());

/// The device id, channel and slot index of a slot handle; None for an address that is no
/// reserved slot of a registered channel (a stray pointer, or an arena of a unit test).
pub fn slot_home(q: *const RcclQpStats) -> Option<(u32, &'static Channel, u64)> {
    let a = q as usize;
    let h = {
        let idx = SLOT_INDEX.lock();
        let (&start, &h) = idx.range(..=a).next_back()?;
        let off = a - start;
        let size = std::mem::size_of::<RcclQpStats>();
        if off % size != 0 || (off / size) as u64 >= h.len {
            return None;
        }
        SegHome {
            first: h.first + (off / size) as u64,
            ..h
        }
    };
    let c = channel(h.dev as i32, h.ch as i32)?;
    (h.first < c.slots.reserved()).then_some((h.dev, c, h.first))
}

fn locate(i: u64) -> (usize, u64) {
    let x = i / FIRST_SEG + 1;
    let seg = 63 - x.leading_zeros() as u64;
    (seg as usize, i - FIRST_SEG * ((1 << seg) - 1))
}

fn seg_len(seg: usize) -> u64 {
    FIRST_SEG << seg
}

impl SlotArena {
    fn new() -> SlotArena {
        SlotArena {
            segs: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            ext_segs: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            role_segs: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            len: AtomicU64::new(0),
            grow: Mutex::new(()),
            home: None,
        }
    }

    fn with_home(dev: u32, ch: u32) -> SlotArena {
        SlotArena {
            home: Some((dev, ch)),
            ..SlotArena::new()
        }
    }

    /// Reserves up to `n` consecutive slots, each recording its latencies into `log` as
    /// well; returns (first, granted).
    fn reserve(&self, n: u64, log: Option<&'static LogHist>) -> (u64, u64) {
        let _g = self.grow.lock();
        let first = self.len.load(Relaxed);
        let want = n.min(MAX_QPS_PER_CHANNEL.saturating_sub(first));
        let mask = crate::hot::rcclTelemetryHotV3.sample_mask.load(Relaxed);
        let mut granted = 0;
        while granted < want {
            let (seg, off) = locate(first + granted);
            if self.segs[seg].load(Relaxed).is_null() {
                let layout =
                    Layout::array::<RcclQpStats>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; all-zero bytes are a valid, empty RcclQpStats.
                let p = unsafe { alloc_zeroed(layout) } as *mut RcclQpStats;
                if p.is_null() {
                    break; // out of memory: the rest are untracked
                }
                self.segs[seg].store(p, Release);
                if let Some((dev, ch)) = self.home {
                    let first = FIRST_SEG * ((1 << seg) - 1);
                    SLOT_INDEX.lock().insert(
                        p as usize,
                        SegHome {
                            dev,
                            ch,
                            first,
                            len: seg_len(seg),
                        },
                    );
                }
            }
            if self.role_segs[seg].load(Relaxed).is_null() {
                let layout =
                    Layout::array::<AtomicU8>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; zero is ROLE_UNKNOWN.
                let p = unsafe { alloc_zeroed(layout) } as *mut AtomicU8;
                if p.is_null() {
                    break;
                }
                self.role_segs[seg].store(p, Release);
            }
            if verbs_keys() && self.ext_segs[seg].load(Relaxed).is_null() {
                let layout = Layout::array::<QpExt>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; all-zero bytes are a valid, empty QpExt.
                let p = unsafe { alloc_zeroed(layout) } as *mut QpExt;
                if p.is_null() {
                    break;
                }
                self.ext_segs[seg].store(p, Release);
            }
            let n = (seg_len(seg) - off).min(want - granted);
            // SAFETY: the segment is allocated and holds slots off..off + n.
            let seg_slots = unsafe {
                std::slice::from_raw_parts(
                    self.segs[seg].load(Relaxed).add(off as usize),
                    n as usize,
                )
            };
            for q in seg_slots {
                q.sample_mask.store(mask, Relaxed);
                if let Some(h) = log {
                    q.set_log_hist(h);
                }
            }
            granted += n;
        }
        self.len.store(first + granted, Release);
        (first, granted)
    }

    /// Slots reserved so far (all of them resolvable).
    pub fn reserved(&self) -> u64 {
        self.len.load(Acquire)
    }

    /// Every reserved slot with its index, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &'static RcclQpStats)> + '_ {
        (0..self.reserved()).filter_map(|i| Some((i, self.get(i)?)))
    }

    pub fn get(&self, i: u64) -> Option<&'static RcclQpStats> {
        if i >= self.reserved() {
            return None;
        }
        let (seg, off) = locate(i);
        let p = self.segs[seg].load(Acquire);
        // SAFETY: segments below len are allocated, never freed, and hold seg_len(seg) slots.
        (!p.is_null()).then(|| unsafe { &*p.add(off as usize) })
    }

    /// The role of slot `i` as rcclTelemetrySetQpRole told it (ROLE_UNKNOWN until then).
    pub fn role(&self, i: u64) -> u8 {
        self.role_cell(i)
            .map_or(crate::counters::ROLE_UNKNOWN, |r| r.load(Relaxed))
    }

    /// Records the role of slot `i`; false when no such slot is reserved.
    pub fn set_role(&self, i: u64, role: u8) -> bool {
        self.role_cell(i).map(|r| r.store(role, Relaxed)).is_some()
    }

    fn role_cell(&self, i: u64) -> Option<&'static AtomicU8> {
        if i >= self.reserved() {
            return None;
        }
        let (seg, off) = locate(i);
        let p = self.role_segs[seg].load(Acquire);
        // SAFETY: as for get(): allocated before len covered i, never freed.
        (!p.is_null()).then(|| unsafe { &*p.add(off as usize) })
    }

    /// The verbs interposer's counters of slot `i` (None unless `verbs_keys()` was on when
    /// the slot was reserved).
    pub fn ext(&self, i: u64) -> Option<&'static QpExt> {
        if i >= self.reserved() {
            return None;
        }
        let (seg, off) = locate(i);
        let p = self.ext_segs[seg].load(Acquire);
        // SAFETY: as for get(): allocated before len covered i, never freed.
        (!p.is_null()).then(|| unsafe { &*p.add(off as usize) })
    }
}

pub struct Channel {
    pub stats: RcclChannelStats,
    pub id: u32,
    pub slots: SlotArena,
    pub untracked: AtomicU64,
    /// The log-scale completion histogram every slot of the channel records into (None with
    /// RCCL_TELEMETRY_LOG_HISTOGRAM=0: then it costs no memory either).
    pub log: Option<&'static LogHist>,
    /// What rcclTelemetryQpSetPeer told about the channel's QPs, and the per-peer log-scale
    /// histograms their slots record into (see `peers`).
    pub peers: crate::peer_table::ChannelPeers,
}

pub struct Device {
    pub id: u32,
    pub roce_device: String,
    pub transport: String,
    channels: Box<[AtomicPtr<Channel>]>,
    new_channel: Mutex<()>,
    pub channels_unknown: AtomicBool,
    /// QPs set up on an out-of-range channel index.
    pub untracked_no_channel: AtomicU64,
    first_use: Once,
    pub hw: HwDevice,
    /// The device forms' counters (bytes, CQ errors and polls, WQE sizes).
    pub stripes: Box<[DevShard; STRIPES]>,
    /// The verbs interposer's device-level counters.
    pub verbs: DevVerbs,
}

/// Device-level counters of the verbs interposer (any thread, atomic adds).
#[derive(Default)]
pub struct DevVerbs {
    /// Receive WRs posted to shared receive queues on this device (no QP at post time).
    pub srq_recv_wqe: AtomicU64,
    /// Completions drained whose qp_num is no QP the interposer tracks on this device.
    pub wc_unknown_qp: AtomicU64,
}

impl Device {
    pub fn channel(&self, ch: i32) -> Option<&'static Channel> {
        let p = self.channels.get(usize::try_from(ch).ok()?)?.load(Acquire);
        // SAFETY: channels are leaked boxes, never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    fn channel_or_create(&self, ch: usize) -> &'static Channel {
        if let Some(c) = self.channel(ch as i32) {
            return c;
        }
        let _g = self.new_channel.lock();
        if let Some(c) = self.channel(ch as i32) {
            return c;
        }
        let c: &'static Channel = Box::leak(Box::new(Channel {
            stats: RcclChannelStats {
                req_completed: AtomicU64::new(0),
            },
            id: ch as u32,
            slots: SlotArena::with_home(self.id, ch as u32),
            untracked: AtomicU64::new(0),
            peers: crate::peer_table::ChannelPeers::new(),
            log: LOG_HISTOGRAM
                .load(Acquire)
                .then(|| &*Box::leak(Box::new(LogHist::new()))),
        }));
        self.channels[ch].store(c as *const Channel as *mut Channel, Release);
        c
    }

    /// The channels seen so far, in index order.
    pub fn channels(&self) -> impl Iterator<Item = &'static Channel> + '_ {
        (0..MAX_CHANNELS as i32).filter_map(|i| self.channel(i))
    }
}

static DEVICES: [AtomicPtr<Device>; MAX_DEVS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_DEVS];
static REGISTER: Mutex<()> = Mutex::new(());

#[inline(always)]
pub fn device(dev: i32) -> Option<&'static Device> {
    let p = DEVICES.get(usize::try_from(dev).ok()?)?.load(Acquire);
    // SAFETY: devices are leaked boxes, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Every registered device, in id order.
pub fn devices() -> impl Iterator<Item = &'static Device> {
    (0..MAX_DEVS as i32).filter_map(device)
}

/// Registers device `id`. Registering the same name again returns the id; a different
/// name on a taken id is refused.
pub fn register(
    id: i32,
    roce_device: &str,
    transport: &str,
    hw: &HwSettings,
) -> Result<i32, String> {
    let Ok(idx) = usize::try_from(id) else {
        return Err(format!("device id {id} is negative"));
    };
    if idx >= MAX_DEVS {
        return Err(format!(
            "device id {id} is out of range 0..{}",
            MAX_DEVS - 1
        ));
    }
    let _g = REGISTER.lock();
    if let Some(d) = device(id) {
        return if d.roce_device == roce_device {
            Ok(id)
        } else {
            Err(format!(
                "device id {id} is already {}; {roce_device} not registered",
                d.roce_device
            ))
        };
    }
    let d = Box::leak(Box::new(Device {
        id: idx as u32,
        roce_device: roce_device.to_owned(),
        transport: transport.to_owned(),
        channels: (0..MAX_CHANNELS)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect(),
        new_channel: Mutex::new(()),
        channels_unknown: AtomicBool::new(false),
        untracked_no_channel: AtomicU64::new(0),
        first_use: Once::new(),
        hw: HwDevice::probe(idx as u32, roce_device, hw),
        // SAFETY: all-zero bytes are a valid DevShard.
        stripes: Box::new(unsafe { std::mem::zeroed::<[DevShard; STRIPES]>() }),
        verbs: DevVerbs::default(),
    }));
    DEVICES[idx].store(d, Release);
    // The header's inline device forms count for this device from now on.
    crate::hot::rcclTelemetryHotV3.stripes[idx].store(
        d.stripes.as_ptr() as *mut DevShard as *mut std::ffi::c_void,
        Release,
    );
    Ok(id)
}

/// SetupChannel: reserves `num_qps` slots on (dev, ch). Returns (first, granted), or None
/// when nothing was granted. The device's hardware baseline is taken on its first call.
pub fn setup_channel(dev: i32, ch: i32, num_qps: i32) -> Option<(u64, u64)> {
    let d = device(dev)?;
    if num_qps <= 0 {
        return None;
    }
    d.first_use.call_once(|| d.hw.take_baseline());
    let n = num_qps as u64;
    let Some(chi) = usize::try_from(ch).ok().filter(|&c| c < MAX_CHANNELS) else {
        d.untracked_no_channel.fetch_add(n, Relaxed);
        return None;
    };
    let c = d.channel_or_create(chi);
    let (first, granted) = c.slots.reserve(n, c.log);
    if granted < n {
        c.untracked.fetch_add(n - granted, Relaxed);
    }
    (granted > 0).then_some((first, granted))
}

#[inline]
pub fn qp(dev: i32, ch: i32, qp: i32) -> Option<&'static RcclQpStats> {
    device(dev)?.channel(ch)?.slots.get(u64::try_from(qp).ok()?)
}

/// Records the role of QP slot `qp` of (dev, ch); false when the indices name no slot.
pub fn set_qp_role(dev: i32, ch: i32, qp: i32, role: u8) -> bool {
    let (Some(c), Ok(i)) = (channel(dev, ch), u64::try_from(qp)) else {
        return false;
    };
    c.slots.set_role(i, role)
}

pub fn channel(dev: i32, ch: i32) -> Option<&'static Channel> {
    device(dev)?.channel(ch)
}

// ---------------------------------------------------------------------------------------
// Device forms: striped per-device counters, so threads sharing a NIC rarely share a line.
//
// A thread picks its stripe from its thread pointer (the x86-64 and AArch64 ABIs keep it in
// a register: no thread-local lookup, no call). The first thread to use a stripe owns it and
// counts into its own set with a plain load and store, no locked instruction; any other
// thread that lands on the stripe counts into the stripe's shared set with atomic adds. A
// collision therefore costs contention, never a lost count. Thread pointers are unique among
// live threads; a thread that reuses a dead owner's thread pointer inherits its set, which
// nobody else writes.

pub const STRIPES: usize = 16;

/// One set of device-form counters.
#[repr(C)]
pub struct DevCounters {
    pub tx_bytes: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub cq_errors: AtomicU64,
    pub cq_polls: AtomicU64,
    pub sizes: [AtomicU64; SIZE_BUCKETS],
}

/// The shared set, on cache lines of its own.
#[repr(C, align(64))]
pub struct SharedCounters(pub DevCounters);

/// One stripe of one device's device-form counters.
#[repr(C, align(64))]
pub struct DevShard {
    /// Thread pointer of the owner (0 = unowned).
    pub(crate) owner: AtomicUsize,
    pub(crate) own: DevCounters,
    shared: SharedCounters,
}

impl DevShard {
    /// Runs `f` on the set this thread may count into, and whether it is the owner's.
    #[inline(always)]
    pub fn with(&self, f: impl FnOnce(&DevCounters, bool)) {
        let tp = thread_pointer();
        let o = self.owner.load(Relaxed);
        if o == tp || (o == 0 && self.owner.compare_exchange(0, tp, Relaxed, Relaxed).is_ok()) {
            f(&self.own, true)
        } else {
            f(&self.shared.0, false)
        }
    }
}

/// The stripe of the calling thread.
#[inline(always)]
pub fn stripe() -> usize {
    // Thread control blocks sit pages apart: mix the page number, keep the top bits.
    ((thread_pointer() as u64 >> 12).wrapping_mul(crate::hot::STRIPE_MIX)
        >> (64 - STRIPES.trailing_zeros())) as usize
}

/// Adds to a device-form counter: a plain load and store in the owner's set, an atomic add
/// in the shared one.
#[inline(always)]
pub fn add(c: &AtomicU64, v: u64, owner: bool) {
    if owner {
        crate::thread::bump(c, v);
    } else {
        c.fetch_add(v, Relaxed);
    }
}

/// Totals of the device forms for one device.
#[derive(Debug, Clone, Copy)]
pub struct DevTotals {
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub cq_errors: u64,
    pub cq_polls: u64,
    pub sizes: [u64; SIZE_BUCKETS],
}

pub fn dev_totals(d: &Device) -> DevTotals {
    let mut t = DevTotals {
        tx_bytes: 0,
        rx_bytes: 0,
        cq_errors: 0,
        cq_polls: 0,
        sizes: [0; SIZE_BUCKETS],
    };
    for s in d.stripes.iter().flat_map(|s| [&s.own, &s.shared.0]) {
        t.tx_bytes = t.tx_bytes.wrapping_add(s.tx_bytes.load(Relaxed));
        t.rx_bytes = t.rx_bytes.wrapping_add(s.rx_bytes.load(Relaxed));
        t.cq_errors = t.cq_errors.wrapping_add(s.cq_errors.load(Relaxed));
        t.cq_polls = t.cq_polls.wrapping_add(s.cq_polls.load(Relaxed));
        for (a, c) in t.sizes.iter_mut().zip(&s.sizes) {
            *a = a.wrapping_add(c.load(Relaxed));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_covers_every_index_once() {
        let mut expect = (0usize, 0u64);
        for i in 0..100_000u64 {
            assert_eq!(locate(i), expect, "i={i}");
            expect.1 += 1;
            if expect.1 == seg_len(expect.0) {
                expect = (expect.0 + 1, 0);
            }
        }
        let total: u64 = (0..SEGMENTS).map(seg_len).sum();
        assert!(total >= MAX_QPS_PER_CHANNEL);
    }

    #[test]
    fn arena_slots_never_move_and_grow_without_cap() {
        let a = SlotArena::new();
        let (f, g) = a.reserve(3, None);
        assert_eq!((f, g), (0, 3));
        let p0 = a.get(0).unwrap() as *const _;
        let (f, g) = a.reserve(10_000, None);
        assert_eq!((f, g), (3, 10_000));
        assert_eq!(a.get(0).unwrap() as *const _, p0);
        assert!(a.get(10_002).is_some());
        assert!(a.get(10_003).is_none());
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_003 {
            assert!(seen.insert(a.get(i).unwrap() as *const RcclQpStats as usize));
        }
    }

    #[test]
    fn roles_live_beside_the_slots_and_leave_the_histogram_word_a_bare_address() {
        use crate::counters::{ROLE_CTS, ROLE_DATA, ROLE_UNKNOWN};
        let log: &'static LogHist = Box::leak(Box::new(LogHist::new()));
        let a = SlotArena::new();
        // 40 slots span the first two segments (16 + 32).
        assert_eq!(a.reserve(40, Some(log)), (0, 40));
        assert!(!a.set_role(40, ROLE_DATA), "no slot 40");
        assert_eq!(a.role(40), ROLE_UNKNOWN);
        for i in 0..40 {
            assert_eq!(a.role(i), ROLE_UNKNOWN, "slot {i} before its role is told");
            assert!(a.set_role(i, if i % 3 == 0 { ROLE_CTS } else { ROLE_DATA }));
        }
        a.set_role(7, ROLE_CTS); // told again: the last word wins
        for i in 0..40 {
            let want = if i % 3 == 0 || i == 7 {
                ROLE_CTS
            } else {
                ROLE_DATA
            };
            assert_eq!(a.role(i), want, "slot {i}");
            let q = a.get(i).unwrap();
            assert_eq!(
                q.log_hist.load(Relaxed),
                log as *const LogHist as u64,
                "slot {i}: the word the inline hook uses as the pointer"
            );
            assert!(std::ptr::eq(q.log_hist().unwrap(), log));
        }
        let b = SlotArena::new();
        b.reserve(2, None);
        b.set_role(1, ROLE_DATA);
        assert_eq!(
            b.get(1).unwrap().log_hist.load(Relaxed),
            0,
            "no histogram: the word is 0, whatever the role"
        );
        assert!(b.get(1).unwrap().log_hist().is_none());
        assert_eq!((b.role(0), b.role(1)), (ROLE_UNKNOWN, ROLE_DATA));
    }

    #[test]
    fn live_threads_spread_over_the_stripes() {
        let mut seen = std::collections::HashSet::new();
        let handles: Vec<_> = (0..8).map(|_| std::thread::spawn(stripe)).collect();
        let here = stripe();
        for h in handles {
            let s = h.join().unwrap();
            assert!(s < STRIPES);
            seen.insert(s);
        }
        assert!(here < STRIPES);
        assert_eq!(stripe(), here, "a thread keeps its stripe");
        assert!(
            seen.len() >= 3,
            "8 threads landed on {} stripes",
            seen.len()
        );
    }

    #[test]
    fn one_owner_per_stripe_and_no_count_lost_when_threads_collide() {
        // Every thread on the same stripe: one owns it (plain adds), the rest share (atomic).
        let shard: &'static DevShard =
            Box::leak(Box::new(unsafe { std::mem::zeroed::<DevShard>() }));
        let owners = std::sync::atomic::AtomicUsize::new(0);
        // No thread exits before all have counted: a thread that reused an exited owner's
        // thread pointer would (rightly) inherit its ownership.
        let all_done = std::sync::Barrier::new(12);
        std::thread::scope(|sc| {
            for _ in 0..12 {
                sc.spawn(|| {
                    for i in 0..20_000u64 {
                        shard.with(|c, own| {
                            if i == 0 && own {
                                owners.fetch_add(1, Relaxed);
                            }
                            add(&c.tx_bytes, 3, own);
                            add(&c.sizes[5], 1, own);
                        });
                    }
                    all_done.wait();
                });
            }
        });
        assert_eq!(
            owners.load(Relaxed),
            1,
            "exactly one thread owns the stripe"
        );
        let total = |f: fn(&DevCounters) -> u64| f(&shard.own) + f(&shard.shared.0);
        assert_eq!(total(|c| c.tx_bytes.load(Relaxed)), 12 * 20_000 * 3);
        assert_eq!(total(|c| c.sizes[5].load(Relaxed)), 12 * 20_000);
        assert!(
            shard.shared.0.tx_bytes.load(Relaxed) > 0,
            "the others counted into the shared set"
        );
    }

    #[test]
    fn arena_stops_at_the_ceiling() {
        let a = SlotArena::new();
        let (_, g) = a.reserve(MAX_QPS_PER_CHANNEL - 5, None);
        assert_eq!(g, MAX_QPS_PER_CHANNEL - 5);
        assert_eq!(a.reserve(10, None), (MAX_QPS_PER_CHANNEL - 5, 5));
        assert_eq!(a.reserve(1, None), (MAX_QPS_PER_CHANNEL, 0));
    }
}
