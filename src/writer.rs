//! The background writer: rewrites a snapshot every RCCL_TELEMETRY_FLUSH_INTERVAL_S seconds
//! and performs the writes that signal handlers ask for, so that no handler ever does more
//! than write(2) a byte to a pipe and poll(2) for the answer (both async-signal-safe).
//!
//! Requests are single bytes on a pipe: STOP ends the thread; SNAPSHOT writes a snapshot;
//! any other byte is a termination signal number (plus CHAINED when an earlier handler will
//! run after ours), answered with one byte on the acknowledgement pipe once the file is out.
//!
//! Also here, for every writer of the library: [`spawn_quiet`] (threads that never take a
//! signal) and [`write_atomic`] (the atomic, private, durable file write that survives a
//! shared /tmp).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
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
    let handle = spawn_quiet("rccl-tel-writer", move || serve(rr, aw, interval_s, prom_interval_s, stall_tick_ms))
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
        (ms > 0).then(|| Every { period: Duration::from_millis(ms), next: Instant::now() + Duration::from_millis(ms) })
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

fn serve(req: i32, ack: i32, interval_s: u64, prom_interval_s: u64, stall_tick_ms: u64) {
    let mut json = Every::new(interval_s);
    let mut prom = Every::new(prom_interval_s);
    let mut stall = Every::ms(stall_tick_ms);
    loop {
        let next = [&json, &prom, &stall].into_iter().flatten().map(|e| e.next).min();
        let timeout_ms = match next {
            None => -1,
            // Rounded up: waking before the deadline would spin until it passes.
            Some(t) => t.saturating_duration_since(Instant::now()).as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
        };
        let mut pfd = libc::pollfd { fd: req, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n == 0 {
            if json.as_mut().is_some_and(Every::due) {
                crate::write_file(Trigger::Interval, false);
            }
            // The textfile is never written from the data path: only here, and on its own lock.
            let mut prom_due = prom.as_mut().is_some_and(Every::due);
            // A change in the set of stalled QPs rewrites the textfile at once, so a stall
            // shows (and an ended one goes) within two ticks, not at the next interval.
            if stall.as_mut().is_some_and(Every::due) {
                crate::stall::tick();
            }
            // (also a change seen by the tick before a file was built)
            if crate::stall::take_changed() && prom.is_some() {
                prom_due = true;
            }
            if prom_due {
                crate::prom::write_periodic();
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

// ------------------------------------------------------------------- threads of our own

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

// ------------------------------------------------------------------------ atomic writes

/// Where a file went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The path that now holds the data.
    pub path: PathBuf,
    /// Set when the data is not at the path asked for: why (one line, with both paths).
    pub fallback: Option<String>,
}

/// Writes `bytes` to `path` atomically and durably; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<Written, String> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Writes a file atomically, safely in a directory shared with other users (/tmp), and
/// durably:
///
/// - the data goes to a temporary file in the same directory whose name no other user can
///   predict (`.<name>.<random>.tmp`), created exclusively (`O_EXCL`, `O_NOFOLLOW`) with mode
///   `0600`; a name that is taken is retried with another;
/// - it is fsync'ed, renamed over `path` (rename replaces a planted symlink rather than
///   following it), and the directory is fsync'ed, so a crash after this returns cannot lose
///   the file;
/// - when `path` cannot be taken (another user's file in a sticky directory: EPERM; a
///   directory planted there: EISDIR), the data is renamed to the fallback name
///   `<stem>.<random>.<ext>` beside it (`rccl_telemetry_h_0_42.k3J9xQ2b.json` for
///   `rccl_telemetry_h_0_42.json`), never over an existing file, and `fallback` says so;
///   if even that fails, the temporary file is kept and named.
///
/// Errors are one line with the path and the OS reason; nothing is left behind then.
pub fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<Written, String> {
    write_atomic_mode(path, None, fill)
}

/// [`write_atomic_with`], with the file made `mode` (fchmod on the private temporary file
/// before any data goes in, so umask does not decide) instead of `0600`: for files another
/// user must read, such as the textfile node_exporter (user `prometheus`) collects.
pub fn write_atomic_mode(path: &Path, mode: Option<u32>, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<Written, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("cannot write {}: {what}: {e}", path.display());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| fail("no file name", &"empty"))?.to_string_lossy().into_owned();
    let mut created = None;
    let mut last_err = io::Error::from_raw_os_error(libc::EEXIST);
    for _ in 0..NAME_ATTEMPTS {
        let tmp = dir.join(format!(".{name}.{}.tmp", random_token()));
        match File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => {
                created = Some((tmp, f));
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = e,
            Err(e) => return Err(fail("cannot create a file in the directory", &e)),
        }
    }
    let Some((tmp, file)) = created else { return Err(fail("cannot create a file in the directory", &last_err)) };
    let result = (|| -> io::Result<()> {
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(m))?;
        }
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_data()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write failed", &e));
    }
    let taken = match std::fs::rename(&tmp, path) {
        Ok(()) => Ok(Written { path: path.to_path_buf(), fallback: None }),
        Err(e) => Err(e),
    };
    let written = match taken {
        Ok(w) => w,
        Err(why) => fallback(&dir, &name, &tmp, path, &why),
    };
    sync_dir(&dir);
    Ok(written)
}

/// Random names tried before giving up on a directory (2^-60 odds each of a collision that
/// is not an attack).
const NAME_ATTEMPTS: usize = 16;

fn fallback(dir: &Path, name: &str, tmp: &Path, wanted: &Path, why: &io::Error) -> Written {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
        _ => (name, String::new()),
    };
    for _ in 0..NAME_ATTEMPTS {
        let alt = dir.join(format!("{stem}.{}{ext}", random_token()));
        if rename_noreplace(tmp, &alt).is_ok() {
            return Written {
                fallback: Some(format!("{} could not be taken ({why}); the file is {} instead", wanted.display(), alt.display())),
                path: alt,
            };
        }
    }
    Written {
        fallback: Some(format!("{} could not be taken ({why}), nor a fallback name; the file is {}", wanted.display(), tmp.display())),
        path: tmp.to_path_buf(),
    }
}

/// rename(2) that never replaces: renameat2(RENAME_NOREPLACE), or link + unlink where the
/// file system does not support the flag.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) {
        return Err(e);
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// fsync of a directory, so that a rename in it survives a crash. Best effort: some file
/// systems refuse it, and the data itself is already on disk.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::options().read(true).custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC).open(dir) {
        let _ = d.sync_all();
    }
}

/// 12 characters of [0-9A-Za-z] from getrandom(2) (72 bits, of which ~71 survive the
/// alphabet); falls back to the clock and a counter mixed per process if getrandom fails.
pub fn random_token() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut raw = [0u8; 12];
    // SAFETY: raw is writable for its length.
    let got = unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), libc::GRND_NONBLOCK) };
    if got != raw.len() as isize {
        use std::sync::atomic::AtomicU64;
        static N: AtomicU64 = AtomicU64::new(0);
        let mut x = crate::latency::monotonic_ns() ^ (u64::from(std::process::id()) << 32) ^ N.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed);
        for b in raw.iter_mut() {
            // splitmix64 steps
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *b = (z ^ (z >> 31)) as u8;
        }
    }
    raw.iter().map(|&b| ALPHABET[usize::from(b) % ALPHABET.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn writes_private_files_and_leaves_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        let w = write_atomic(&p, b"{}\n").unwrap();
        assert_eq!(w, Written { path: p.clone(), fallback: None });
        assert_eq!(std::fs::read(&p).unwrap(), b"{}\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(names(d.path()), vec!["out.json"]);
        // A second write replaces the first.
        write_atomic(&p, b"2").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"2");
    }

    #[test]
    fn a_mode_other_than_private_is_set_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.prom");
        // SAFETY: umask only changes this process's creation mask (restored below).
        let old = unsafe { libc::umask(0o077) };
        let w = write_atomic_mode(&p, Some(0o644), |w| w.write_all(b"a 1\n"));
        unsafe { libc::umask(old) };
        w.unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644);
        assert_eq!(names(d.path()), vec!["x.prom"]);
    }

    #[test]
    fn a_final_name_that_cannot_be_taken_gets_the_fallback_name() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rccl_telemetry_h_0_1.json");
        std::fs::create_dir(&p).unwrap(); // rename(file, directory): EISDIR
        let w = write_atomic(&p, b"data").unwrap();
        let why = w.fallback.expect("a fallback");
        assert!(why.contains(&p.display().to_string()) && why.contains(&w.path.display().to_string()), "{why}");
        let name = w.path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("rccl_telemetry_h_0_1.") && name.ends_with(".json") && name.len() == "rccl_telemetry_h_0_1..json".len() + 12, "{name}");
        assert_eq!(std::fs::read(&w.path).unwrap(), b"data");
        assert_eq!(names(d.path()).len(), 2, "the planted directory and the fallback: {:?}", names(d.path()));
    }

    #[test]
    fn temporary_names_are_unpredictable_and_distinct() {
        let toks: std::collections::HashSet<String> = (0..1000).map(|_| random_token()).collect();
        assert_eq!(toks.len(), 1000);
        assert!(toks.iter().all(|t| t.len() == 12 && t.bytes().all(|b| b.is_ascii_alphanumeric())));
    }

    #[test]
    fn noreplace_never_replaces() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        assert!(rename_noreplace(&a, &b).is_err());
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "b");
        std::fs::remove_file(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "a");
    }

    #[test]
    fn errors_name_the_path_and_the_reason_on_one_line() {
        let e = write_atomic(Path::new("/nonexistent/dir/x.json"), b"1").unwrap_err();
        assert!(e.contains("/nonexistent/dir/x.json") && e.contains("No such file") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn spawned_threads_block_every_signal_and_the_caller_keeps_its_mask() {
        let (_, before) = block(SigSet::Only(&[]));
        let h = spawn_quiet("t", || {
            let (_, mask) = block(SigSet::Only(&[]));
            // SAFETY: reading a valid mask.
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1, libc::SIGHUP, libc::SIGQUIT] {
                assert_eq!(unsafe { libc::sigismember(&mask, s) }, 1, "signal {s} unblocked in our thread");
            }
        })
        .unwrap();
        h.join().unwrap();
        let (_, after) = block(SigSet::Only(&[]));
        // SAFETY: reading valid masks.
        unsafe {
            assert_eq!(libc::sigismember(&before, libc::SIGTERM), libc::sigismember(&after, libc::SIGTERM));
        }
    }
}
