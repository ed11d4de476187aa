//! Visible skips, shared by every test crate of the workspace (included with `#[path]`).
//!
//! A test whose environment is missing calls [`skip`] and returns: it prints one greppable
//! line, `SKIP <test>: <reason>` (with ` [REQUIRED]` when this machine should have run it),
//! straight to stderr (the harness captures only print!/eprint!), and appends the same line
//! to the skip log: `$RCCL_TELEMETRY_SKIP_LOG`, else `build/skips.log` at the workspace root.
//! `make test` (and `.ci/run`) list and count the log at the end (`.ci/skips.sh`) and fail
//! when a required test was skipped.
//!
//! Required: the test knows this machine can run it (e.g. root with `ip` for veth), or CI
//! installed what it needs (`RCCL_TELEMETRY_CI=1`, set by `.ci/run`, with `needed_on_ci`).
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// True under CI (`.ci/run` exports RCCL_TELEMETRY_CI=1): it installs every test dependency.
pub fn ci() -> bool {
    std::env::var_os("RCCL_TELEMETRY_CI").is_some_and(|v| v == "1")
}

fn log_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RCCL_TELEMETRY_SKIP_LOG") {
        return Some(PathBuf::from(p));
    }
    let mut d = std::env::current_dir().ok()?;
    let mut here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // The workspace root: the nearest ancestor holding Cargo.lock.
    loop {
        if here.join("Cargo.lock").exists() {
            d = here;
            break;
        }
        if !here.pop() {
            break;
        }
    }
    Some(d.join("build").join("skips.log"))
}

/// Records a skip of `test` (say why); `required` when this machine could have run it.
/// `needed_on_ci`: CI installs what the test needs, so a skip there is required too.
pub fn skip(test: &str, reason: &str, required: bool, needed_on_ci: bool) {
    let req = required || (needed_on_ci && ci());
    let line = format!(
        "SKIP {test}: {}{}\n",
        reason.replace('\n', " "),
        if req { " [REQUIRED]" } else { "" }
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(p) = log_path() {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // One append of one line: concurrent tests never interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Is an external program on PATH?
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Running as root?
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
