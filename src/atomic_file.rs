//! The atomic, private, durable file write that every output of the library uses (the JSON
//! file, the Prometheus textfile): a temporary file of an unpredictable name, fsync, rename,
//! directory fsync, and a fallback name beside a path that cannot be taken (a shared /tmp).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::*;

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
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<Written, String> {
    write_atomic_mode(path, None, fill)
}

/// [`write_atomic_with`], with the file made `mode` (fchmod on the private temporary file
/// before any data goes in, so umask does not decide) instead of `0600`: for files another
/// user must read, such as the textfile node_exporter (user `prometheus`) collects.
pub fn write_atomic_mode(
    path: &Path,
    mode: Option<u32>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<Written, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        format!("cannot write {}: {what}: {e}", path.display())
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| fail("no file name", &"empty"))?
        .to_string_lossy()
        .into_owned();
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
    let Some((tmp, file)) = created else {
        return Err(fail("cannot create a file in the directory", &last_err));
    };
    let result = (|| -> io::Result<()> {
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(m))?;
        }
        let mut w = FileBuf::new(file);
        fill(&mut w)?;
        w.flush()?;
        w.file.sync_data()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write failed", &e));
    }
    let taken = match std::fs::rename(&tmp, path) {
        Ok(()) => Ok(Written {
            path: path.to_path_buf(),
            fallback: None,
        }),
        Err(e) => Err(e),
    };
    let written = match taken {
        Ok(w) => w,
        Err(why) => fallback(&dir, &name, &tmp, path, &why),
    };
    sync_dir(&dir);
    Ok(written)
}

/// The buffer in front of a file being written, allocated fallibly: 1 MiB, or the largest
/// of 64 KiB and 4 KiB that can be had, or none (every write then goes straight to the file).
/// Nothing a write does grows it, so writing a file never takes more memory than that.
struct FileBuf {
    file: File,
    buf: Vec<u8>,
}

impl FileBuf {
    fn new(file: File) -> FileBuf {
        let mut buf = Vec::new();
        for size in [1 << 20, 1 << 16, 1 << 12] {
            if buf.try_reserve_exact(size).is_ok() {
                break;
            }
        }
        FileBuf { file, buf }
    }

    fn drain(&mut self) -> io::Result<()> {
        let r = self.file.write_all(&self.buf);
        self.buf.clear();
        r
    }
}

impl Write for FileBuf {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        let cap = self.buf.capacity();
        if self.buf.len() + data.len() > cap {
            self.drain()?;
        }
        if data.len() >= cap {
            return self.file.write_all(data);
        }
        self.buf.extend_from_slice(data); // within the capacity: no allocation
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()
    }
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
                fallback: Some(format!(
                    "{} could not be taken ({why}); the file is {} instead",
                    wanted.display(),
                    alt.display()
                )),
                path: alt,
            };
        }
    }
    Written {
        fallback: Some(format!(
            "{} could not be taken ({why}), nor a fallback name; the file is {}",
            wanted.display(),
            tmp.display()
        )),
        path: tmp.to_path_buf(),
    }
}

/// rename(2) that never replaces: renameat2(RENAME_NOREPLACE), or link + unlink where the
/// file system does not support the flag.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
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
    if let Ok(d) = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
    {
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
        let mut x = crate::latency::monotonic_ns()
            ^ (u64::from(std::process::id()) << 32)
            ^ N.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed);
        for b in raw.iter_mut() {
            // splitmix64 steps
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *b = (z ^ (z >> 31)) as u8;
        }
    }
    raw.iter()
        .map(|&b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_buffer_writes_every_byte_in_order_whatever_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let chunks: Vec<Vec<u8>> = (0..200u32)
            .map(|i| (0..(i * 7 % 23)).map(|k| (i + k) as u8).collect())
            .collect();
        let want: Vec<u8> = chunks.concat();
        // No buffer (nothing could be allocated), a small one, and the usual.
        for cap in [0usize, 8, 1 << 20] {
            let path = dir.path().join(format!("f{cap}"));
            let mut buf = Vec::new();
            buf.reserve_exact(cap);
            let mut w = FileBuf {
                file: File::create(&path).unwrap(),
                buf,
            };
            let cap = w.buf.capacity();
            for c in &chunks {
                w.write_all(c).unwrap();
                assert_eq!(w.buf.capacity(), cap, "the buffer never grows");
            }
            w.flush().unwrap();
            drop(w);
            assert_eq!(std::fs::read(&path).unwrap(), want, "capacity {cap}");
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_private_files_and_leaves_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        let w = write_atomic(&p, b"{}\n").unwrap();
        assert_eq!(
            w,
            Written {
                path: p.clone(),
                fallback: None
            }
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"{}\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
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
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(names(d.path()), vec!["x.prom"]);
    }

    #[test]
    fn a_final_name_that_cannot_be_taken_gets_the_fallback_name() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rccl_telemetry_h_0_1.json");
        std::fs::create_dir(&p).unwrap(); // rename(file, directory): EISDIR
        let w = write_atomic(&p, b"data").unwrap();
        let why = w.fallback.expect("a fallback");
        assert!(
            why.contains(&p.display().to_string()) && why.contains(&w.path.display().to_string()),
            "{why}"
        );
        let name = w.path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("rccl_telemetry_h_0_1.")
                && name.ends_with(".json")
                && name.len() == "rccl_telemetry_h_0_1..json".len() + 12,
            "{name}"
        );
        assert_eq!(std::fs::read(&w.path).unwrap(), b"data");
        assert_eq!(
            names(d.path()).len(),
            2,
            "the planted directory and the fallback: {:?}",
            names(d.path())
        );
    }

    #[test]
    fn temporary_names_are_unpredictable_and_distinct() {
        let toks: std::collections::HashSet<String> = (0..1000).map(|_| random_token()).collect();
        assert_eq!(toks.len(), 1000);
        assert!(toks
            .iter()
            .all(|t| t.len() == 12 && t.bytes().all(|b| b.is_ascii_alphanumeric())));
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
        assert!(
            e.contains("/nonexistent/dir/x.json")
                && e.contains("No such file")
                && !e.contains('\n'),
            "{e}"
        );
    }
}
