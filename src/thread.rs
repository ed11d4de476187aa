//! What belongs to one thread, borrowed by every layer above: the thread's own pointer
//! (which picks its counter stripe and owns a histogram's plain counts), the add of a counter
//! only the calling thread writes, and the library's threads that never take a signal
//! (`spawn_quiet`, with the signal-mask helpers it and the exit path use). A leaf: it imports
//! nothing of the crate.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;

/// Adds to a counter that only the calling thread writes.
#[inline(always)]
pub fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Relaxed).wrapping_add(by), Relaxed);
}

/// The calling thread's thread pointer: unique among live threads.
#[inline(always)]
pub fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the x86-64 TLS ABI stores the thread pointer itself at %fs:0.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags, pure));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reading the thread-pointer register has no side effect.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags, pure));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: pthread_self cannot fail.
        tp = unsafe { libc::pthread_self() } as usize;
    }
    tp
}

/// Spawns a thread of the library with every signal blocked for its whole life: it is
/// created with the full mask (the mask is inherited at creation, so not even its first
/// instruction can take a signal), and the caller's mask is put back at once. A process that
/// blocks a signal in its own threads and takes it with sigwait() then gets it, and none of
/// our handlers ever runs on a thread of ours.
pub fn spawn_quiet<F>(name: &str, f: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let (_all, old) = block(SigSet::Full);
    let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
    restore_mask(&old);
    spawned
}

/// Which signals [`block`] blocks.
pub enum SigSet<'a> {
    /// Every signal.
    Full,
    /// These signals.
    Only(&'a [i32]),
}

/// Blocks signals in the calling thread; returns (the set blocked, the mask to restore).
pub fn block(which: SigSet<'_>) -> (libc::sigset_t, libc::sigset_t) {
    // SAFETY: sigset operations on stack values; pthread_sigmask with valid pointers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        match which {
            SigSet::Full => {
                libc::sigfillset(&mut set);
            }
            SigSet::Only(sigs) => {
                libc::sigemptyset(&mut set);
                for &s in sigs {
                    if s > 0 {
                        libc::sigaddset(&mut set, s);
                    }
                }
            }
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        (set, old)
    }
}

/// Puts back a mask saved by [`block`].
pub fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: a valid mask saved by block().
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_threads_block_every_signal_and_the_caller_keeps_its_mask() {
        let (_, before) = block(SigSet::Only(&[]));
        let h = spawn_quiet("t", || {
            let (_, mask) = block(SigSet::Only(&[]));
            // SAFETY: reading a valid mask.
            for s in [
                libc::SIGTERM,
                libc::SIGINT,
                libc::SIGUSR1,
                libc::SIGHUP,
                libc::SIGQUIT,
            ] {
                assert_eq!(
                    unsafe { libc::sigismember(&mask, s) },
                    1,
                    "signal {s} unblocked in our thread"
                );
            }
        })
        .unwrap();
        h.join().unwrap();
        let (_, after) = block(SigSet::Only(&[]));
        // SAFETY: reading valid masks.
        unsafe {
            assert_eq!(
                libc::sigismember(&before, libc::SIGTERM),
                libc::sigismember(&after, libc::SIGTERM)
            );
        }
    }
}
