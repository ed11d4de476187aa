//! Small, bounded sysfs readers. Every path is built by the caller from the injectable
//! root (RCCL_TELEMETRY_SYSFS_ROOT); nothing here knows about "/sys". A leaf (it only
//! reports through `diag`): `hw` reads its counters with it, `latency` the clock source.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// sysfs attributes are at most one page; anything longer is not a counter.
const MAX_ATTR_BYTES: u64 = 4096;

/// The directory of an RDMA device.
pub fn ib_dir(root: &Path, ibdev: &str) -> PathBuf {
    root.join("class").join("infiniband").join(ibdev)
}

/// The directory of a netdev.
pub fn net_dir(root: &Path, netdev: &str) -> PathBuf {
    root.join("class").join("net").join(netdev)
}

/// Reads a small text attribute; None when it cannot be opened or read, or is not a regular
/// file. The open is non-blocking: a FIFO (or a device node) where an attribute should be
/// would otherwise block open() forever, with the registration lock held. Anything that is
/// not a regular file is unavailable, with a line under RCCL_TELEMETRY_DEBUG.
pub fn read_text(path: &Path) -> Option<String> {
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let ft = f.metadata().ok()?.file_type();
    if !ft.is_file() {
        crate::diag::debug(|| {
            format!(
                "{} is not a regular file ({}); read as unavailable",
                path.display(),
                kind(&ft)
            )
        });
        return None;
    }
    let mut buf = Vec::new();
    f.take(MAX_ATTR_BYTES).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Parses one counter attribute: optional surrounding whitespace (and the NUL padding some
/// old kernels leave), then decimal digits only. Anything else, including "N/A (no PMA)",
/// an empty file, a sign, or a value above u64::MAX, is "unavailable" (None), never 0.
pub fn parse_counter(text: &str) -> Option<u64> {
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<u64>().ok()
}

/// Reads one counter file; None when the file fails or does not hold a number.
pub fn read_counter(path: &Path) -> Option<u64> {
    parse_counter(&read_text(path)?)
}

/// A name read from sysfs (netdev name, driver name): the first line, trimmed, without NULs.
pub fn clean_name(text: &str) -> Option<String> {
    let first = text.split(['\n', '\0']).next().unwrap_or("").trim();
    if first.is_empty() {
        None
    } else {
        Some(first.to_owned())
    }
}

/// True when `name` is usable as one path component (no separators, not "." or "..").
pub fn is_safe_component(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0')
        && name.len() <= 255
}

/// The last component of a symlink's target (e.g. `device/driver` -> "mlx5_core").
pub fn link_basename(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    let base = target.file_name()?.to_string_lossy().into_owned();
    if base.is_empty() {
        None
    } else {
        Some(base)
    }
}

/// Entries of a directory whose names are decimal numbers, sorted numerically.
pub fn numeric_entries(dir: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// Names in a directory, sorted (for deterministic fallbacks).
pub fn sorted_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counters_parse_strictly() {
        assert_eq!(parse_counter("12345\n"), Some(12345));
        assert_eq!(parse_counter("  7 \n"), Some(7));
        assert_eq!(parse_counter("0"), Some(0));
        assert_eq!(parse_counter("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter("3\0\0"), Some(3));
        for bad in [
            "",
            "\n",
            "N/A (no PMA)\n",
            "-1",
            "+5",
            "0x10",
            "1 2",
            "18446744073709551616",
            "12abc",
            "1.5",
        ] {
            assert_eq!(parse_counter(bad), None, "{bad:?} must be unavailable");
        }
    }

    #[test]
    fn missing_file_is_unavailable() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_counter(&d.path().join("nope")), None);
        std::fs::write(d.path().join("pma"), "N/A (no PMA)\n").unwrap();
        assert_eq!(read_counter(&d.path().join("pma")), None);
        std::fs::write(d.path().join("ok"), "42\n").unwrap();
        assert_eq!(read_counter(&d.path().join("ok")), Some(42));
        // A directory where a file was expected.
        std::fs::create_dir(d.path().join("dir")).unwrap();
        assert_eq!(read_counter(&d.path().join("dir")), None);
    }

    #[test]
    fn a_fifo_is_unavailable_and_never_blocks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer ever opens it: a blocking open would never return.
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || tx.send(read_counter(&q)).unwrap());
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("reading a FIFO hung");
        assert_eq!(got, None);
    }

    #[test]
    fn oversized_attribute_is_not_a_counter() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big");
        std::fs::write(&p, "1".repeat(10_000)).unwrap();
        assert_eq!(read_counter(&p), None);
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name("eth0\n").as_deref(), Some("eth0"));
        assert_eq!(
            clean_name("enp0s29u1u7u3c2\0garbage").as_deref(),
            Some("enp0s29u1u7u3c2")
        );
        assert_eq!(clean_name("\n"), None);
        assert!(!is_safe_component("../etc"));
        assert!(!is_safe_component(".."));
        assert!(is_safe_component("mlx5_0"));
    }

    proptest! {
        #[test]
        fn parse_counter_never_panics_and_agrees_with_u64(s in ".{0,64}") {
            let r = parse_counter(&s);
            if let Some(v) = r {
                let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
                prop_assert_eq!(t.parse::<u64>().ok(), Some(v));
            }
        }

        #[test]
        fn any_u64_round_trips(v in any::<u64>(), pad in "[ \t\n]{0,3}") {
            let text = format!("{pad}{v}{pad}\n");
            prop_assert_eq!(parse_counter(&text), Some(v));
        }

        #[test]
        fn random_bytes_are_safe(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_counter(&s);
            let _ = clean_name(&s);
        }
    }
}
