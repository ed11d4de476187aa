//! How many bytes of file text may be in memory at once, over every reading thread. A thread
//! takes a file's size from the budget before it reads the file and gives it back when the
//! file is parsed, waiting while the others hold it: files are read in parallel, and without
//! it as many files as there are cores could be at the size cap together.

use std::sync::{Condvar, Mutex};

pub struct Budget {
    capacity: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

/// Bytes taken from a [`Budget`], given back when dropped.
pub struct Permit<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Budget {
    pub const fn new(capacity: u64) -> Budget {
        Budget {
            capacity,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Takes `bytes` (at most the whole budget, so one file larger than it still goes, alone),
    /// waiting until they are free.
    pub fn take(&self, bytes: u64) -> Permit<'_> {
        let bytes = bytes.min(self.capacity);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used + bytes > self.capacity && *used > 0 {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += bytes;
        Permit {
            budget: self,
            bytes,
        }
    }

    #[cfg(test)]
    fn in_use(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn threads_never_hold_more_than_the_budget() {
        let b = Budget::new(100);
        let peak = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (b, peak) = (&b, &peak);
                s.spawn(move || {
                    for i in 0..50u64 {
                        let p = b.take(10 + (t * 7 + i) % 60);
                        peak.fetch_max(b.in_use(), Ordering::Relaxed);
                        std::thread::yield_now();
                        drop(p);
                    }
                });
            }
        });
        assert!(peak.load(Ordering::Relaxed) <= 100);
        assert_eq!(b.in_use(), 0);
    }

    #[test]
    fn a_file_larger_than_the_budget_goes_alone() {
        let b = Budget::new(100);
        let p = b.take(1000);
        assert_eq!(b.in_use(), 100);
        drop(p);
        assert_eq!(b.in_use(), 0);
    }
}
