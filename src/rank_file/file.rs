//! The file on disk and the names in it: the rank's file name, the atomic write, the early
//! check of the directory, the host and process names, and the RFC 3339 times. Separate from
//! the model because these touch the system (libc, /proc, the file system).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::Serialize;

use super::layout::to_writer;

/// UTC time as RFC 3339 with nanoseconds: 2026-12-02T11:15:31.123456789Z.
pub fn rfc3339(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let nanos = unix_ns % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// The file name of this rank: rccl_telemetry_<hostname>_<uid>_<pid>.json.
pub fn file_name(host: &str) -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let host: String = host
        .chars()
        .map(|c| if c == '/' || c.is_control() { '_' } else { c })
        .collect();
    format!("rccl_telemetry_{host}_{uid}_{}.json", std::process::id())
}

/// Writes `report` to `dir/name` with [`crate::atomic_file::write_atomic_with`]: a private
/// temporary file with an unpredictable name, renamed into place (or to the fallback name
/// when the final name cannot be taken), the directory fsync'ed. Returns where it went, or
/// one line with the path and the reason.
pub fn write_atomic<T: Serialize>(
    dir: &Path,
    name: &str,
    report: &T,
) -> Result<crate::atomic_file::Written, String> {
    crate::atomic_file::write_atomic_with(&dir.join(name), |w| {
        to_writer(&mut *w, report)?;
        w.write_all(b"\n")
    })
    .map_err(|e| e.replacen("cannot write ", "cannot write telemetry file ", 1))
}

/// The host name (gethostname), "unknown" if it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc != 0 || end == 0 {
        return "unknown".into();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The process name (/proc/self/comm), "unknown" if it cannot be read.
pub fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end_matches('\n').to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Checks early (at Init) that the output directory is usable, so a bad path is reported
/// when the run starts rather than only at exit.
pub fn probe_dir(dir: &Path) -> Result<(), String> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| format!("output directory {} contains a NUL byte", dir.display()))?;
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            let what = if m.is_file() {
                "a regular file"
            } else {
                "not a directory"
            };
            return Err(format!(
                "output directory {} is {what}, not a directory; the telemetry file will not be written unless that changes",
                dir.display()
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "output directory {} does not exist; the telemetry file will not be written unless it is created",
                dir.display()
            ));
        }
        _ => {}
    }
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(format!(
            "output directory {} is not writable: {}; the telemetry file will not be written unless that changes",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_path_that_is_no_directory_is_named_as_such() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("plain");
        std::fs::write(&f, b"x").unwrap();
        let e = probe_dir(&f).unwrap_err();
        assert!(e.contains("is a regular file, not a directory"), "{e}");
        assert!(!e.contains('\n'));
        let e = probe_dir(&d.path().join("missing")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert!(probe_dir(d.path()).is_ok());
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(
            rfc3339(1_796_210_131_123_456_789),
            "2026-12-02T11:15:31.123456789Z"
        );
        assert_eq!(
            rfc3339(4_107_542_399_999_999_999),
            "2100-02-28T23:59:59.999999999Z"
        );
    }

    #[test]
    fn atomic_write_replaces_a_planted_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("out.json")).unwrap();
        let p = write_atomic(dir.path(), "out.json", &serde_json::json!({"k": 1}))
            .unwrap()
            .path;
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    }

    #[test]
    fn atomic_write_reports_path_and_reason() {
        let e = write_atomic(Path::new("/nonexistent/dir"), "x.json", &1).unwrap_err();
        assert!(
            e.contains("/nonexistent/dir/x.json") && e.contains("No such file"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn file_name_has_host_uid_pid() {
        let n = file_name("node/1");
        assert!(
            n.starts_with("rccl_telemetry_node_1_")
                && n.ends_with(&format!("_{}.json", std::process::id())),
            "{n}"
        );
    }
}
