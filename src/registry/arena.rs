//! A channel's QP slots: the append-only arena of geometric segments (allocated on demand
//! from the system, never from the library's reserve, never moved or freed, with each slot's role and the interposer's counters beside it) and
//! the slot index that leads a bare slot address back to its channel. Separate from the
//! devices and channels that own arenas: this is the memory layout and its one lock.
//!
//! A communicator's channel is handed to a later communicator when it is finalized: the arena
//! is then cleared ([`SlotArena::release`]: every slot it had zeroed, its count back to 0) and
//! keeps its segments, so a device's slot memory is its high-water mark, not the sum of its
//! communicators' lifetimes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering::*};

use parking_lot::Mutex;

use crate::counters::{QpExt, RcclQpStats};
use crate::loghist::{LogCounts, LogHist};

use super::{device, verbs_keys, Channel};

/// Slots in the first segment of a channel's arena; segment s holds FIRST_SEG << s.
const FIRST_SEG: u64 = 16;
const SEGMENTS: usize = 24;
/// Ceiling on QP slots per channel (a guard against a garbage numQps, not a design limit:
/// 16,777,216 slots take 4 GiB).
pub const MAX_QPS_PER_CHANNEL: u64 = 1 << 24;

/// A channel's QP slots: geometric segments allocated on demand, never moved.
pub struct SlotArena {
    segs: [AtomicPtr<RcclQpStats>; SEGMENTS],
    /// Parallel segments of `QpExt`, only when `verbs_keys()`.
    ext_segs: [AtomicPtr<QpExt>; SEGMENTS],
    /// Parallel segments of each slot's own log-scale counts, only while the WQE latency
    /// monitor is on (`slow_ns() != 0` when the segment is allocated): the slot's
    /// `mon_hist` word is its entry's address.
    mon_segs: [AtomicPtr<LogCounts>; SEGMENTS],
    /// Parallel segments of each slot's role (ROLE_*, one byte a slot): told once at setup,
    /// read by the report, never by the hot path, so it stays out of the slot and the slot's
    /// histogram word is a bare address.
    role_segs: [AtomicPtr<AtomicU8>; SEGMENTS],
    len: AtomicU64,
    /// The most slots it ever had (its high-water mark): what a release clears and what
    /// [`SlotArena::quiet`] then checks, since a handle kept from an earlier owner may count
    /// in a slot beyond the last owner's.
    high: AtomicU64,
    /// Slots checked by [`SlotArena::quiet`]: the high-water mark at the last release.
    released: AtomicU64,
    grow: Mutex<()>,
    /// (device, channel serial) of the arena, when it belongs to a registered channel: its
    /// segments are then listed in the slot index (`slot_home`), so a handle leads back to
    /// its channel.
    home: Option<(u32, u32)>,
}

/// Where a slot segment lives: (device, channel serial, index of its first slot, slots in it).
#[derive(Clone, Copy)]
struct SegHome {
    dev: u32,
    serial: u32,
    first: u64,
    len: u64,
}

/// A slot as its words, to clear and check it whole (it is 40 atomic words, nothing else).
fn words(q: &RcclQpStats) -> &[AtomicU64; 40] {
    const _: () = assert!(std::mem::size_of::<RcclQpStats>() == 40 * 8);
    // SAFETY: RcclQpStats is repr(C), made of AtomicU64 fields and arrays only, 320 bytes.
    unsafe { &*(q as *const RcclQpStats as *const [AtomicU64; 40]) }
}

/// The interposer's counters of a slot as their words.
fn ext_words(e: &QpExt) -> &[AtomicU64; 8] {
    const _: () = assert!(std::mem::size_of::<QpExt>() == 8 * 8);
    // SAFETY: QpExt is repr(C), eight AtomicU64 fields, 64 bytes.
    unsafe { &*(e as *const QpExt as *const [AtomicU64; 8]) }
}

/// The WQE latency monitor's threshold in ns (0: off), which a slot copies when reserved.
static SLOW_NS: AtomicU64 = AtomicU64::new(0);

/// Sets the monitor's threshold; at Init, before any slot is reserved.
pub fn set_slow_ns(ns: u64) {
    SLOW_NS.store(ns, Relaxed);
}

/// The monitor's threshold in ns; 0 while the monitor is off.
pub fn slow_ns() -> u64 {
    SLOW_NS.load(Relaxed)
}

/// Every registered channel's slot segments by start address, sorted: the reverse of a
/// handle, for the cold entry points that receive a bare `RcclQpStats*`
/// (rcclTelemetryQpSetPeer). About one entry per channel per doubling of its slots; looked up
/// only off the data path. A vector, so that it grows fallibly (a segment that cannot be
/// indexed is not handed out).
static SLOT_INDEX: Mutex<Vec<(usize, SegHome)>> = Mutex::new(Vec::new());

/// The device id, channel and slot index of a slot handle; None for an address that is no
/// reserved slot of a registered channel (a stray pointer, or an arena of a unit test).
pub fn slot_home(q: *const RcclQpStats) -> Option<(u32, &'static Channel, u64)> {
    let a = q as usize;
    let h = {
        let idx = SLOT_INDEX.lock();
        let at = idx
            .partition_point(|&(start, _)| start <= a)
            .checked_sub(1)?;
        let (start, h) = idx[at];
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
    let c = device(h.dev as i32)?.object(h.serial)?;
    (h.first < c.slots.reserved()).then_some((h.dev, c, h.first))
}

/// Lists a segment in the slot index; false when the index cannot grow.
fn index_segment(start: usize, home: SegHome) -> bool {
    let mut idx = SLOT_INDEX.lock();
    if idx.try_reserve(1).is_err() {
        return false;
    }
    let at = idx.partition_point(|&(s, _)| s < start);
    idx.insert(at, (start, home));
    true
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
            mon_segs: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            role_segs: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            len: AtomicU64::new(0),
            high: AtomicU64::new(0),
            released: AtomicU64::new(0),
            grow: Mutex::new(()),
            home: None,
        }
    }

    pub(super) fn with_home(dev: u32, serial: u32) -> SlotArena {
        SlotArena {
            home: Some((dev, serial)),
            ..SlotArena::new()
        }
    }

    /// Reserves up to `n` consecutive slots, each recording its latencies into `log` as
    /// well; returns (first, granted).
    pub(super) fn reserve(&self, n: u64, log: Option<&'static LogHist>) -> (u64, u64) {
        let _g = self.grow.lock();
        let first = self.len.load(Relaxed);
        let want = n.min(MAX_QPS_PER_CHANNEL.saturating_sub(first));
        let mask = crate::hot::rcclTelemetryHotV3.sample_mask.load(Relaxed);
        let thr = slow_ns();
        let mut granted = 0;
        while granted < want {
            let (seg, off) = locate(first + granted);
            if self.segs[seg].load(Relaxed).is_null() {
                let layout =
                    Layout::array::<RcclQpStats>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; all-zero bytes are a valid, empty RcclQpStats.
                let p = unsafe { System.alloc_zeroed(layout) } as *mut RcclQpStats;
                if p.is_null() {
                    break; // out of memory: the rest are untracked
                }
                if let Some((dev, serial)) = self.home {
                    let home = SegHome {
                        dev,
                        serial,
                        first: FIRST_SEG * ((1 << seg) - 1),
                        len: seg_len(seg),
                    };
                    if !index_segment(p as usize, home) {
                        // SAFETY: allocated just above with this layout, never handed out.
                        unsafe { System.dealloc(p.cast(), layout) };
                        break;
                    }
                }
                self.segs[seg].store(p, Release);
            }
            if self.role_segs[seg].load(Relaxed).is_null() {
                let layout =
                    Layout::array::<AtomicU8>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; zero is ROLE_UNKNOWN.
                let p = unsafe { System.alloc_zeroed(layout) } as *mut AtomicU8;
                if p.is_null() {
                    break;
                }
                self.role_segs[seg].store(p, Release);
            }
            if verbs_keys() && self.ext_segs[seg].load(Relaxed).is_null() {
                let layout = Layout::array::<QpExt>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; all-zero bytes are a valid, empty QpExt.
                let p = unsafe { System.alloc_zeroed(layout) } as *mut QpExt;
                if p.is_null() {
                    break;
                }
                self.ext_segs[seg].store(p, Release);
            }
            if thr != 0 && self.mon_segs[seg].load(Relaxed).is_null() {
                let layout =
                    Layout::array::<LogCounts>(seg_len(seg) as usize).expect("segment layout");
                // SAFETY: non-zero size; all-zero bytes are valid, empty LogCounts.
                let p = unsafe { System.alloc_zeroed(layout) } as *mut LogCounts;
                if p.is_null() {
                    break;
                }
                self.mon_segs[seg].store(p, Release);
            }
            let n = (seg_len(seg) - off).min(want - granted);
            // SAFETY: the segment is allocated and holds slots off..off + n.
            let seg_slots = unsafe {
                std::slice::from_raw_parts(
                    self.segs[seg].load(Relaxed).add(off as usize),
                    n as usize,
                )
            };
            let mon = self.mon_segs[seg].load(Relaxed);
            for (k, q) in seg_slots.iter().enumerate() {
                q.sample_mask.store(mask, Relaxed);
                if let Some(h) = log {
                    q.set_log_hist(h);
                }
                if thr != 0 && !mon.is_null() {
                    // SAFETY: the monitor segment parallels the slot segment: off + k is in it.
                    q.mon_hist
                        .store(unsafe { mon.add(off as usize + k) } as u64, Relaxed);
                    q.mon_thr.store(thr, Relaxed);
                }
            }
            granted += n;
        }
        self.len.store(first + granted, Release);
        self.high.fetch_max(first + granted, Relaxed);
        (first, granted)
    }

    /// Slots reserved so far (all of them resolvable).
    pub fn reserved(&self) -> u64 {
        self.len.load(Acquire)
    }

    /// Clears the arena for its next owner: every slot it ever had, up to its high-water mark
    /// (counters, histogram, the histogram word and the sampling mask, so a handle kept past
    /// its owner records nothing in anyone's histogram), its roles and the interposer's
    /// counters are zeroed, and its count drops to 0. The segments stay (the next owner's
    /// slots reuse them). Clearing only the last owner's slots would leave a count that a
    /// handle of an earlier, larger owner made beyond them for the next owner to inherit.
    pub(super) fn release(&self) {
        let _g = self.grow.lock();
        let n = self.high.load(Relaxed);
        for i in 0..n {
            let (seg, off) = locate(i);
            let p = self.segs[seg].load(Acquire);
            if !p.is_null() {
                // SAFETY: as for get(): allocated, never freed, seg_len(seg) slots.
                for w in words(unsafe { &*p.add(off as usize) }) {
                    w.store(0, Relaxed);
                }
            }
            let r = self.role_segs[seg].load(Acquire);
            if !r.is_null() {
                // SAFETY: as for role_cell().
                unsafe { &*r.add(off as usize) }.store(crate::counters::ROLE_UNKNOWN, Relaxed);
            }
            let e = self.ext_segs[seg].load(Acquire);
            if !e.is_null() {
                // SAFETY: as for ext().
                for w in ext_words(unsafe { &*e.add(off as usize) }) {
                    w.store(0, Relaxed);
                }
            }
            let m = self.mon_segs[seg].load(Acquire);
            if !m.is_null() {
                // SAFETY: as for ext(): allocated, never freed, seg_len(seg) entries.
                for w in &unsafe { &*m.add(off as usize) }.0 {
                    w.store(0, Relaxed);
                }
            }
        }
        self.released.store(n, Relaxed);
        self.len.store(0, Release);
    }

    /// Whether every slot the arena ever had is still all zero since it was released
    /// (nothing counted through a handle kept past its owner, of the last owner or an
    /// earlier one).
    pub fn quiet(&self) -> bool {
        let _g = self.grow.lock();
        (0..self.released.load(Relaxed)).all(|i| {
            let (seg, off) = locate(i);
            let p = self.segs[seg].load(Acquire);
            // SAFETY: as for get().
            p.is_null()
                || words(unsafe { &*p.add(off as usize) })
                    .iter()
                    .all(|w| w.load(Relaxed) == 0)
        })
    }

    /// The slots the arena ever had, as they are now since its last release (the counts a
    /// handle kept past its owner made since), with their indices.
    pub fn released_slots(&self) -> impl Iterator<Item = (u64, &'static RcclQpStats)> + '_ {
        (0..self.released.load(Relaxed)).filter_map(|i| {
            let (seg, off) = locate(i);
            let p = self.segs[seg].load(Acquire);
            // SAFETY: as for get().
            (!p.is_null()).then(|| (i, unsafe { &*p.add(off as usize) }))
        })
    }

    /// Zeroes the released slots again (after their late counts were taken).
    pub fn clear_released(&self) {
        for (_, q) in self.released_slots() {
            for w in words(q) {
                w.store(0, Relaxed);
            }
        }
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

    /// A handle kept past its owner (outside the contract) that counts in a slot beyond the
    /// next owner's: the arena's check sees it while free, and its hand-backs clear it, so a
    /// later owner's slot starts at zero.
    #[test]
    fn a_late_count_beyond_the_next_owner_s_slots_never_reaches_a_later_owner() {
        let zero = |q: &RcclQpStats| words(q).iter().all(|w| w.load(Relaxed) == 0);
        let a = SlotArena::new();
        a.reserve(8, None);
        let kept = a.get(5).unwrap();
        a.release();
        // The second owner takes 2 slots; the kept handle counts in slot 5, beyond them.
        a.reserve(2, None);
        kept.recv_posted();
        a.release();
        assert!(zero(kept), "released up to the high-water mark");
        assert!(a.quiet());
        // Counted again while the arena is free: the check before reuse sees it.
        kept.recv_posted();
        assert!(
            !a.quiet(),
            "a count beyond the last owner's slots is a late count"
        );
        assert!(a.released_slots().any(|(i, _)| i == 5));
        a.clear_released();
        assert!(a.quiet());
        // A third owner of 8 slots starts at zero.
        a.reserve(8, None);
        assert!(zero(a.get(5).unwrap()));
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
    fn arena_stops_at_the_ceiling() {
        let a = SlotArena::new();
        let (_, g) = a.reserve(MAX_QPS_PER_CHANNEL - 5, None);
        assert_eq!(g, MAX_QPS_PER_CHANNEL - 5);
        assert_eq!(a.reserve(10, None), (MAX_QPS_PER_CHANNEL - 5, 5));
        assert_eq!(a.reserve(1, None), (MAX_QPS_PER_CHANNEL, 0));
    }
}
