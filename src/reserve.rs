//! The library's allocator: the system's, and a reserve for when it refuses.
//!
//! Rust aborts the process when an allocation fails (stable Rust has no way to make that a
//! panic), which a library inside someone else's process must never do: a program that ran
//! out of memory would lose its own exit status to us. So every allocation whose size grows
//! with the job is made fallibly where it is made (`try_reserve` and its kin: the registry's
//! slots, channels and devices, the file's per-channel reads, the stall detector's states,
//! the peers' and errors' tables, the file's buffer, the finalized communicators' records),
//! and says once what it dropped. What
//! is left are small allocations (a line of text, a path, a node of a small map): when the
//! system refuses one of those, it is served from [`RESERVE`] bytes set aside at load, in
//! power-of-two blocks of at most [`MAX_BLOCK`] bytes that return to the reserve when freed.
//! The reserve is static (address space, not memory, until used); the runtime says once when
//! it was used ([`take_used`]). The data path allocates nothing, so none of this is on it.
//!
//! A leaf: it imports nothing from the library.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};

/// Bytes set aside for small allocations the system refuses.
pub const RESERVE: usize = 4 << 20;
/// The largest block the reserve serves (larger requests fail as they would without it:
/// every such request of the library is a fallible one).
pub const MAX_BLOCK: usize = 1 << 16;
const MIN_SHIFT: usize = 4;
const MAX_SHIFT: usize = 16;
const CLASSES: usize = MAX_SHIFT - MIN_SHIFT + 1;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; RESERVE]>);

// SAFETY: blocks of the arena are handed out under LOCK, each to one owner at a time.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; RESERVE]));
/// Bytes of the arena carved into blocks so far.
static TOP: AtomicUsize = AtomicUsize::new(0);
/// Per size class, the offset + 1 of the first free block (0: none); a free block holds the
/// next one's offset + 1 in its first word.
static FREE: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];
static LOCK: AtomicBool = AtomicBool::new(false);
/// Allocations the reserve served, and whether that was said.
static SERVED: AtomicU64 = AtomicU64::new(0);
static SAID: AtomicBool = AtomicBool::new(false);

/// The system's allocator, with the reserve behind it.
pub struct WithReserve;

fn base() -> usize {
    ARENA.0.get() as usize
}

fn in_arena(p: *mut u8) -> bool {
    let a = p as usize;
    a >= base() && a < base() + RESERVE
}

/// The size class of a layout (None: larger than the reserve serves).
fn class(l: Layout) -> Option<usize> {
    let need = l.size().max(l.align()).max(1 << MIN_SHIFT);
    let shift = need.next_power_of_two().trailing_zeros() as usize;
    (shift <= MAX_SHIFT).then(|| shift - MIN_SHIFT)
}

fn lock() {
    while LOCK
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

fn unlock() {
    LOCK.store(false, Release);
}

/// A block of the reserve for `l`, or null.
fn take(l: Layout) -> *mut u8 {
    let Some(c) = class(l) else {
        return ptr::null_mut();
    };
    let size = 1usize << (c + MIN_SHIFT);
    lock();
    let head = FREE[c].load(Relaxed);
    let off = if head != 0 {
        // SAFETY: a free block of the arena holds its successor's offset + 1.
        let next = unsafe { ((base() + head - 1) as *const usize).read() };
        FREE[c].store(next, Relaxed);
        Some(head - 1)
    } else {
        // Blocks are aligned to their size, which covers the layout's alignment.
        let top = TOP.load(Relaxed);
        let off = (top + size - 1) & !(size - 1);
        (off + size <= RESERVE).then(|| {
            TOP.store(off + size, Relaxed);
            off
        })
    };
    unlock();
    match off {
        Some(off) => {
            SERVED.fetch_add(1, Relaxed);
            (base() + off) as *mut u8
        }
        None => ptr::null_mut(),
    }
}

/// Returns a block to the reserve.
fn give(p: *mut u8, l: Layout) {
    let Some(c) = class(l) else { return };
    let off = p as usize - base();
    lock();
    // SAFETY: the block is ours again and at least a word long.
    unsafe { (p as *mut usize).write(FREE[c].load(Relaxed)) };
    FREE[c].store(off + 1, Relaxed);
    unlock();
}

#[cfg(test)]
thread_local! {
    /// The tests' forced failures: (at least this many bytes, how many more to refuse).
    static REFUSE: std::cell::Cell<(usize, u32)> = const { std::cell::Cell::new((usize::MAX, 0)) };
}

/// Tests: refuses the calling thread's next `count` allocations of at least `size` bytes, as
/// the system and the reserve both would once memory is gone.
#[cfg(test)]
pub(crate) fn refuse_next(size: usize, count: u32) {
    REFUSE.with(|r| r.set((size, count)));
}

#[cfg(test)]
fn refused(l: Layout) -> bool {
    REFUSE
        .try_with(|r| {
            let (size, n) = r.get();
            let refuse = n > 0 && l.size() >= size;
            if refuse {
                r.set((size, n - 1));
            }
            refuse
        })
        .unwrap_or(false)
}

#[cfg(not(test))]
#[inline(always)]
fn refused(_: Layout) -> bool {
    false
}

// SAFETY: every block handed out is valid for its layout (a system allocation, or a block of
// the arena of at least the layout's size, aligned to its size) and owned by one caller.
unsafe impl GlobalAlloc for WithReserve {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if refused(l) {
            return ptr::null_mut();
        }
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            take(l)
        } else {
            p
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if refused(l) {
            return ptr::null_mut();
        }
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            return p;
        }
        let p = take(l);
        if !p.is_null() {
            // SAFETY: the block holds at least l.size() bytes (a reused block is not zero).
            unsafe { ptr::write_bytes(p, 0, l.size()) };
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if in_arena(p) {
            give(p, l);
        } else {
            // SAFETY: the system's block, with its layout.
            unsafe { System.dealloc(p, l) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: new_size is non-zero and valid for l's alignment.
        let nl = unsafe { Layout::from_size_align_unchecked(new_size, l.align()) };
        if refused(nl) {
            return ptr::null_mut();
        }
        if !in_arena(p) {
            // SAFETY: the system's block, with its layout.
            let q = unsafe { System.realloc(p, l, new_size) };
            if !q.is_null() {
                return q;
            }
        }
        // SAFETY: a fresh block for the new layout (the system's first).
        let q = unsafe { self.alloc(nl) };
        if !q.is_null() {
            // SAFETY: both blocks are valid for the smaller size, and distinct.
            unsafe {
                ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                self.dealloc(p, l);
            }
        }
        q
    }
}

/// How many allocations the reserve has served, the first time it is asked after the
/// reserve was used (then None until the process ends): for the one line that says so.
pub fn take_used() -> Option<u64> {
    let n = SERVED.load(Relaxed);
    (n > 0 && !SAID.swap(true, Relaxed)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_blocks_are_aligned_sized_reused_and_bounded() {
        let l = Layout::from_size_align(100, 8).unwrap();
        let a = take(l);
        let b = take(l);
        assert!(in_arena(a) && in_arena(b) && a != b);
        assert_eq!(a as usize % 128, 0, "a block is aligned to its size");
        give(a, l);
        assert_eq!(take(l), a, "a freed block is reused");
        let big = Layout::from_size_align(MAX_BLOCK + 1, 8).unwrap();
        assert!(take(big).is_null(), "larger than the reserve serves");
        let aligned = Layout::from_size_align(16, 4096).unwrap();
        assert_eq!(take(aligned) as usize % 4096, 0);
        give(b, l);
        assert!(take_used().is_some_and(|n| n >= 4));
        assert_eq!(take_used(), None, "said once");
    }

    #[test]
    fn blocks_leave_the_arena_through_realloc() {
        let l = Layout::from_size_align(32, 8).unwrap();
        let a = take(l);
        // SAFETY: a is a block of 32 bytes of the arena.
        unsafe {
            a.write_bytes(7, 32);
            let b = WithReserve.realloc(a, l, 4096);
            assert!(
                !b.is_null() && !in_arena(b),
                "the system serves it when it can"
            );
            assert!((0..32).all(|i| *b.add(i) == 7));
            WithReserve.dealloc(b, Layout::from_size_align(4096, 8).unwrap());
        }
    }
}
