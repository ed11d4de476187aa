//! Devices, channels and QP slots: the append-only arena behind every handle, handle
//! resolution, and `num_qp_untracked` accounting. Also the per-thread shards behind the
//! device forms (bytes, CQ errors, CQ polls, WQE sizes), and the communicators.
//!
//! Nothing here is ever freed or moved: devices, channels and slot segments are allocated
//! once and leaked, so every handle's memory stays valid for the life of the process. The
//! process-wide calls own their channels for the whole process (the default communicator);
//! a communicator's channels (`comm`) are handed back when it is finalized and handed out
//! again, cleared, to later communicators: a device has as many channel objects as it ever
//! had channels at once, whatever the number of communicator lifetimes. Every one of those
//! allocations is fallible: what cannot be allocated is not tracked, is counted in
//! `num_qp_untracked`, and is said once on stderr (never an allocation-failure abort).
//!
//! Submodules: `arena` (a channel's slot segments and the slot index behind `slot_home`),
//! `stripes` (the device forms' per-thread counter sets), `comm` (the communicators, their
//! handles and channel spaces); their public items are re-exported here.

mod arena;
pub mod comm;
mod stripes;

pub use arena::{set_slow_ns, slot_home, slow_ns, SlotArena, MAX_QPS_PER_CHANNEL};
pub use stripes::{
    add, dev_totals, stripe, DevCounters, DevShard, DevTotals, SharedCounters, STRIPES,
};

/// Ceiling on the QPs one SetupChannel call may ask for (`RCCL_TELEMETRY_MAX_QPS_PER_SETUP`
/// in the header): a call asking for more is refused whole, so that a garbage or negative-
/// turned-huge count cannot take gigabytes at once. 65,536 slots are 16 MiB; a channel grows
/// past it by further calls, up to [`MAX_QPS_PER_CHANNEL`].
pub const MAX_QPS_PER_SETUP: u64 = 1 << 16;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Once;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::counters::{RcclChannelStats, RcclQpStats};
use crate::hw::{HwDevice, HwSettings};
use crate::loghist::LogHist;

pub use crate::hot::MAX_DEVS;
pub const MAX_CHANNELS: usize = 512;

// The file's (and its schema's) largest device and channel ids are these slots' last.
const _: () = assert!(MAX_DEVS == rccl_telemetry_format::write::MAX_DEVICE_ID as usize + 1);
const _: () = assert!(MAX_CHANNELS == rccl_telemetry_format::write::MAX_CHANNEL_ID as usize + 1);

/// Owner of the channels the process-wide calls set up (the default communicator).
pub const OWNER_DEFAULT: u64 = 0;
/// Owner of a channel a finalized communicator handed back (in its device's free list).
pub const OWNER_FREE: u64 = u64::MAX;

/// Held (shared) by whatever reads every channel at once (a file, the textfile, a stall
/// check, SwCapture) and (exclusive) by a communicator's finalization, so a reader sees a
/// communicator's counts either in its channels or in its finalized record, never in both
/// or neither. The lock is fair: once a finalization waits, a new view waits behind it, so
/// readers whose views overlap one another (the writer thread, the stall ticks, SwCapture in
/// a loop) cannot keep a finalization out for ever. A thread takes it once: a view or a
/// change taken inside its own view or change takes nothing more (`VIEW_DEPTH`), since a
/// second read of a fair lock behind a waiting writer would never return.
static LIFETIMES: RwLock<()> = RwLock::new(());

thread_local! {
    /// How many views or changes the calling thread holds (the lock itself only at 0).
    static VIEW_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What [`read_view`] and [`lifetime_change`] hold: the lock, taken by the thread's outermost
/// one only.
pub struct View {
    _read: Option<RwLockReadGuard<'static, ()>>,
    _write: Option<RwLockWriteGuard<'static, ()>>,
}

impl Drop for View {
    fn drop(&mut self) {
        VIEW_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Counts one more view or change on this thread; true when it is the outermost.
fn enter() -> bool {
    VIEW_DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get() == 1
    })
}

/// A consistent view of the channels (see [`LIFETIMES`]); a reader may nest views.
pub fn read_view() -> View {
    View {
        _read: enter().then(|| LIFETIMES.read()),
        _write: None,
    }
}

/// Excludes every reader while a communicator's channels are folded and handed back.
pub fn lifetime_change() -> View {
    View {
        _read: None,
        _write: enter().then(|| LIFETIMES.write()),
    }
}

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

pub struct Channel {
    pub stats: RcclChannelStats,
    /// The channel's index in its owner's channel space (chIdx).
    id: AtomicU32,
    /// The device of the channel object, for its whole life.
    pub dev: u32,
    /// The channel object's index among its device's (stable for the process: what state
    /// kept elsewhere about a channel is keyed by).
    pub serial: u32,
    /// [`OWNER_DEFAULT`], a communicator's id, or [`OWNER_FREE`].
    owner: AtomicU64,
    /// Bumped at every hand-back: state kept elsewhere about the channel belongs to one
    /// owner (the stall detector drops what it kept under another generation).
    generation: AtomicU64,
    /// The communicator that last handed the channel back (0: none yet): its record takes
    /// counts that reach the channel after its finalization.
    former: AtomicU64,
    pub slots: SlotArena,
    pub untracked: AtomicU64,
    /// The log-scale completion histogram every slot of the channel records into (None with
    /// RCCL_TELEMETRY_LOG_HISTOGRAM=0: then it costs no memory either).
    pub log: Option<&'static LogHist>,
    /// What rcclTelemetryQpSetPeer told about the channel's QPs, and the per-peer log-scale
    /// histograms their slots record into (see `peers`).
    pub peers: crate::channel_peers::ChannelPeers,
}

impl Channel {
    /// The channel's index in its owner's channel space.
    pub fn id(&self) -> u32 {
        self.id.load(Acquire)
    }

    /// [`OWNER_DEFAULT`], the owning communicator's id, or [`OWNER_FREE`].
    pub fn owner(&self) -> u64 {
        self.owner.load(Acquire)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// The communicator that last handed the channel back (0: none).
    pub fn former(&self) -> u64 {
        self.former.load(Acquire)
    }

    /// Clears every count of the channel (slots, roles, the interposer's counters, requests,
    /// untracked QPs, histograms, told peers) and records `former` as its last owner; its
    /// slot count drops to 0 and its memory stays for the next owner.
    pub(crate) fn clear(&self, former: u64) {
        self.slots.release();
        self.stats.req_completed.store(0, Relaxed);
        self.untracked.store(0, Relaxed);
        if let Some(h) = self.log {
            h.reset();
        }
        self.peers.clear();
        self.former.store(former, Release);
    }

    /// Whether nothing has counted on the channel since [`Channel::clear`]: no slot it had
    /// and no request (a handle kept past its communicator's finalization would show here).
    pub fn quiet(&self) -> bool {
        self.stats.req_completed.load(Relaxed) == 0 && self.slots.quiet()
    }
}

pub struct Device {
    pub id: u32,
    pub roce_device: String,
    pub transport: String,
    channels: Box<[AtomicPtr<Channel>]>,
    new_channel: Mutex<()>,
    /// Every channel object of the device, by serial: the default communicator's and those
    /// communicators own or handed back.
    objects: Mutex<Vec<&'static Channel>>,
    /// Channels handed back by finalized communicators, the longest-free first.
    free: Mutex<VecDeque<&'static Channel>>,
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
    /// The default communicator's channel `ch`.
    pub fn channel(&self, ch: i32) -> Option<&'static Channel> {
        let p = self.channels.get(usize::try_from(ch).ok()?)?.load(Acquire);
        // SAFETY: channels are leaked boxes, never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The default communicator's channel `ch`, created on first use; None when it cannot be
    /// allocated.
    fn channel_or_create(&self, ch: usize) -> Option<&'static Channel> {
        if let Some(c) = self.channel(ch as i32) {
            return Some(c);
        }
        let _g = self.new_channel.lock();
        if let Some(c) = self.channel(ch as i32) {
            return Some(c);
        }
        let c = self.new_object(ch as u32, OWNER_DEFAULT)?;
        self.channels[ch].store(c as *const Channel as *mut Channel, Release);
        Some(c)
    }

    /// A new channel object of the device, owned by `owner` as its channel `ch`; None when it
    /// cannot be allocated.
    fn new_object(&self, ch: u32, owner: u64) -> Option<&'static Channel> {
        let mut objects = self.objects.lock();
        objects.try_reserve(1).ok()?;
        let serial = objects.len() as u32;
        let log = if LOG_HISTOGRAM.load(Acquire) {
            Some(try_leak(LogHist::new())?)
        } else {
            None
        };
        let c: &'static Channel = try_leak(Channel {
            stats: RcclChannelStats {
                req_completed: AtomicU64::new(0),
            },
            id: AtomicU32::new(ch),
            dev: self.id,
            serial,
            owner: AtomicU64::new(owner),
            generation: AtomicU64::new(0),
            former: AtomicU64::new(0),
            slots: SlotArena::with_home(self.id, serial),
            untracked: AtomicU64::new(0),
            peers: crate::channel_peers::ChannelPeers::new(),
            log: log.map(|l| &*l),
        })?;
        objects.push(c);
        Some(c)
    }

    /// The channel object of serial `serial`.
    pub fn object(&self, serial: u32) -> Option<&'static Channel> {
        self.objects.lock().get(serial as usize).copied()
    }

    /// Channel objects the device has (in use or free): its high-water mark of channels.
    pub fn num_objects(&self) -> usize {
        self.objects.lock().len()
    }

    /// The channels in use, in the file's order: the default communicator's by index, then
    /// each communicator's (in the order they were created) by index.
    pub fn channels(&self) -> Vec<&'static Channel> {
        let mut v: Vec<((u64, u32), &'static Channel)> = self
            .objects
            .lock()
            .iter()
            .map(|c| ((c.owner(), c.id()), *c))
            .filter(|((o, _), _)| *o != OWNER_FREE)
            .collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v.into_iter().map(|(_, c)| c).collect()
    }

    /// A channel for communicator `owner`'s channel `ch`: a handed-back one that `usable`
    /// accepts (the longest-free first; one it refuses goes to the back of the list), else a
    /// new one; None when a new one cannot be allocated.
    fn take_channel(
        &self,
        ch: u32,
        owner: u64,
        usable: &dyn Fn(&'static Channel) -> bool,
    ) -> Option<&'static Channel> {
        let tries = self.free.lock().len();
        for _ in 0..tries {
            let Some(c) = self.free.lock().pop_front() else {
                break;
            };
            if usable(c) {
                c.id.store(ch, Release);
                c.owner.store(owner, Release);
                return Some(c);
            }
            self.free.lock().push_back(c);
        }
        self.new_object(ch, owner)
    }

    /// Hands a communicator's channel back, cleared, for a later communicator (when the free
    /// list cannot grow, the channel stays free but is not handed out again).
    fn give_back(&self, c: &'static Channel, former: u64) {
        c.owner.store(OWNER_FREE, Release);
        c.generation.fetch_add(1, AcqRel);
        c.clear(former);
        let mut free = self.free.lock();
        if free.try_reserve(1).is_ok() {
            free.push_back(c);
        }
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
    let no_memory =
        || format!("out of memory registering device {id} ({roce_device}); not registered");
    let mut channels = Vec::new();
    channels
        .try_reserve_exact(MAX_CHANNELS)
        .map_err(|_| no_memory())?;
    channels.extend((0..MAX_CHANNELS).map(|_| AtomicPtr::new(ptr::null_mut())));
    // SAFETY: all-zero bytes are a valid DevShard.
    let stripes = unsafe { try_box_zeroed::<[DevShard; STRIPES]>() }.ok_or_else(no_memory)?;
    let d = try_leak(Device {
        id: idx as u32,
        roce_device: try_string(roce_device).ok_or_else(no_memory)?,
        transport: try_string(transport).ok_or_else(no_memory)?,
        channels: channels.into_boxed_slice(),
        new_channel: Mutex::new(()),
        objects: Mutex::new(Vec::new()),
        free: Mutex::new(VecDeque::new()),
        channels_unknown: AtomicBool::new(false),
        untracked_no_channel: AtomicU64::new(0),
        first_use: Once::new(),
        hw: HwDevice::probe(idx as u32, roce_device, hw),
        stripes,
        verbs: DevVerbs::default(),
    })
    .ok_or_else(no_memory)?;
    DEVICES[idx].store(d as *const Device as *mut Device, Release);
    // The header's inline device forms count for this device from now on.
    crate::hot::rcclTelemetryHotV3.stripes[idx].store(
        d.stripes.as_ptr() as *mut DevShard as *mut std::ffi::c_void,
        Release,
    );
    Ok(id)
}

/// Moves `v` to memory of its own that is never freed; None when it cannot be allocated.
/// From the system, never from the library's reserve (`reserve`): what this holds (devices,
/// channels, histograms) can be done without, and the reserve is kept for what cannot.
pub fn try_leak<T>(v: T) -> Option<&'static mut T> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::leak(Box::new(v)));
    }
    // SAFETY: non-zero size; the pointer is checked, then written once and never freed.
    unsafe {
        let p = System.alloc(layout) as *mut T;
        if p.is_null() {
            return None;
        }
        p.write(v);
        Some(&mut *p)
    }
}

/// A zeroed `T` in a box of its own; None when it cannot be allocated.
///
/// # Safety
/// All-zero bytes must be a valid `T`.
unsafe fn try_box_zeroed<T>() -> Option<Box<T>> {
    let layout = Layout::new::<T>();
    assert!(layout.size() > 0);
    // SAFETY: non-zero size; the memory comes from the system with T's layout, and the
    // global allocator frees memory outside its reserve to the system; zeroed is a valid T
    // (the caller's contract).
    unsafe {
        let p = System.alloc_zeroed(layout) as *mut T;
        (!p.is_null()).then(|| Box::from_raw(p))
    }
}

/// A copy of `s`; None when it cannot be allocated.
fn try_string(s: &str) -> Option<String> {
    let mut o = String::new();
    o.try_reserve_exact(s.len()).ok()?;
    o.push_str(s);
    Some(o)
}

/// Whether a refused SetupChannel, and a channel or slots that could not be allocated, were
/// said (each once per process; the file counts every one).
static REFUSED_SAID: AtomicBool = AtomicBool::new(false);
static NO_MEMORY_SAID: AtomicBool = AtomicBool::new(false);

/// The checks SetupChannel makes before it reserves: the device, a positive count, the
/// hardware baseline on the device's first call, and a channel index in range (else the
/// QPs count as untracked on the device). Some((device, channel index, count)) to go on.
fn setup_args(dev: i32, ch: i32, num_qps: i32) -> Option<(&'static Device, usize, u64)> {
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
    Some((d, chi, n))
}

/// A channel that could not be allocated: its `n` QPs count as untracked on the device, said
/// once per process. `call` names the call and its arguments for the line.
fn no_channel(d: &Device, n: u64, call: &dyn Fn() -> String) -> Option<(u64, u64)> {
    d.untracked_no_channel.fetch_add(n, Relaxed);
    crate::diag::warn_once(&NO_MEMORY_SAID, || {
        format!("out of memory: {}: the channel could not be created; its {n} QPs are counted in the device's num_qp_untracked (later shortfalls are counted without a line)", call())
    });
    None
}

/// Reserves `n` slots on channel `c`; what is not granted (refused past
/// [`MAX_QPS_PER_SETUP`], past the channel's ceiling, out of memory) counts as untracked on it.
/// `call` names the call and its arguments for the line said once.
fn grant(c: &Channel, n: u64, call: &dyn Fn() -> String) -> Option<(u64, u64)> {
    if n > MAX_QPS_PER_SETUP {
        c.untracked.fetch_add(n, Relaxed);
        crate::diag::warn_once(&REFUSED_SAID, || {
            format!("{}: refused, more than {MAX_QPS_PER_SETUP} QPs in one call; they are counted in num_qp_untracked (later refusals are counted without a line)", call())
        });
        return None;
    }
    let (first, granted) = c.slots.reserve(n, c.log);
    if granted < n {
        c.untracked.fetch_add(n - granted, Relaxed);
        if c.slots.reserved() < MAX_QPS_PER_CHANNEL {
            crate::diag::warn_once(&NO_MEMORY_SAID, || {
                format!("out of memory: {}: granted {granted} of {n} QP slots; the other {} are counted in num_qp_untracked (later shortfalls are counted without a line)", call(), n - granted)
            });
        }
    }
    (granted > 0).then_some((first, granted))
}

/// SetupChannel: reserves `num_qps` slots on (dev, ch). Returns (first, granted), or None
/// when nothing was granted. The device's hardware baseline is taken on its first call.
/// A call asking for more than [`MAX_QPS_PER_SETUP`] is refused; QPs not granted (refused,
/// past the channel's ceiling, out of memory) are counted in num_qp_untracked.
pub fn setup_channel(dev: i32, ch: i32, num_qps: i32) -> Option<(u64, u64)> {
    let (d, chi, n) = setup_args(dev, ch, num_qps)?;
    let call = || format!("rcclTelemetrySetupChannel({dev}, {ch}, {num_qps})");
    match d.channel_or_create(chi) {
        Some(c) => grant(c, n, &call),
        None => no_channel(d, n, &call),
    }
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

#[cfg(test)]
mod tests {
    /// Overlapping readers cannot starve a finalization: once a change waits, a new view
    /// waits behind it (a reader thread that already holds one nests freely).
    #[test]
    fn a_waiting_change_goes_before_new_views() {
        let held = super::read_view();
        let nested = super::read_view();
        let changer = std::thread::spawn(|| {
            let _w = super::lifetime_change();
        });
        // Until the change is queued, a new view from another thread can be had; once it is,
        // none can (bounded: with a lock that lets readers overtake a waiting writer it never
        // comes, and the test fails).
        let queued = (0..5_000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            std::thread::spawn(|| super::LIFETIMES.try_read().is_none())
                .join()
                .unwrap()
        });
        drop(nested);
        drop(held);
        changer.join().unwrap();
        assert!(queued, "a new view overtook the waiting change");
    }
}
