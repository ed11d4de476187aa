//! `prom-gc`: removes the live Prometheus textfiles (`rccl_telemetry_<host>_<uid>_<pid>.prom`)
//! that no running rank owns any more. A rank removes its own file at exit, at
//! rcclTelemetryFlush and on a termination signal; after SIGKILL (or an OOM kill, or a node
//! that lost power) the file stays, and node_exporter would keep serving its frozen series.
//!
//! A file is stale when it has not been rewritten for `max_age` (a live rank rewrites it every
//! RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S), or, when its host is this host, when its pid is not
//! a running process (no such process, or a zombie: killed and not yet reaped). Temporary
//! files a write left behind (`.rccl_telemetry_*.prom.*.tmp`) go by age alone. Where /proc
//! hides other users' processes (`hidepid=2`), pids are not judged and age alone decides.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Host and pid from a textfile's name (the writer's fallback name, with a random token
/// before `.prom`, included); None for any other name.
pub fn parse_name(name: &str) -> Option<(String, u32)> {
    let stem = name
        .strip_prefix("rccl_telemetry_")?
        .strip_suffix(".prom")?;
    // A fallback name: <stem>.<12 random characters>.prom
    let stem = match stem.rsplit_once('.') {
        Some((s, tok)) if tok.len() == 12 && tok.bytes().all(|b| b.is_ascii_alphanumeric()) => s,
        _ => stem,
    };
    let (rest, pid) = stem.rsplit_once('_')?;
    let (host, uid) = rest.rsplit_once('_')?;
    if host.is_empty() || uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((host.to_owned(), pid.parse().ok()?))
}

fn is_temporary(name: &str) -> bool {
    name.starts_with(".rccl_telemetry_") && name.contains(".prom.") && name.ends_with(".tmp")
}

/// The host name as the library writes it in file names.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().replace('/', "_"))
        .unwrap_or_default()
}

/// Whether `pid` is a running process of this pid namespace. A zombie (killed, not yet
/// reaped by its parent: the state a SIGKILLed rank is in until its launcher waits for it)
/// and a dead entry are not running. A process whose state cannot be read (another user's,
/// under `hidepid=1`) counts as running: the age rule still removes its file later.
fn alive(pid: u32) -> bool {
    let dir = Path::new("/proc").join(pid.to_string());
    match std::fs::read_to_string(dir.join("stat")) {
        Ok(stat) => !matches!(stat_state(&stat), Some('Z' | 'X' | 'x')),
        Err(_) => dir.exists(),
    }
}

/// The state letter of a `/proc/<pid>/stat` line: the field after the command, which is in
/// parentheses and may itself hold spaces and parentheses (so the last `)` ends it).
fn stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether other processes' pids can be judged at all: under `hidepid=2` (`invisible`) the
/// processes of other users are absent from /proc, so every rank would look dead. init (pid 1)
/// is never ours unless we are root, so its absence means /proc hides what is not ours.
fn pids_visible() -> bool {
    Path::new("/proc/1").exists()
}

/// One decision: the file and why it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub path: PathBuf,
    pub why: String,
}

/// The stale files of `dir`, judged at `now` for this host `host`.
pub fn find(
    dir: &Path,
    max_age: Duration,
    host: &str,
    now: SystemTime,
) -> Result<Vec<Stale>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let judge_pids = pids_visible();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let parsed = parse_name(&name);
        if parsed.is_none() && !is_temporary(&name) {
            continue;
        }
        // Never follows a link: the link itself is judged (and removed), not its target.
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        let why = if age > max_age {
            Some(format!("not rewritten for {} s", age.as_secs()))
        } else {
            match parsed {
                Some((h, pid)) if h == host && judge_pids && !alive(pid) => {
                    Some(format!("process {pid} is not running"))
                }
                _ => None,
            }
        };
        if let Some(why) = why {
            out.push(Stale {
                path: e.path(),
                why,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_from_the_right() {
        assert_eq!(
            parse_name("rccl_telemetry_node_a-1_1000_4242.prom"),
            Some(("node_a-1".into(), 4242))
        );
        assert_eq!(
            parse_name("rccl_telemetry_h_0_7.k3J9xQ2bA1b2.prom"),
            Some(("h".into(), 7))
        );
        assert_eq!(parse_name("rccl_telemetry_h_0_7.json"), None);
        assert_eq!(parse_name("rccl_telemetry_h_x_7.prom"), None);
        assert_eq!(parse_name("node_cpu.prom"), None);
        assert!(is_temporary(".rccl_telemetry_h_0_7.prom.k3J9xQ2bA1b2.tmp"));
    }

    #[test]
    fn the_state_is_read_after_the_last_parenthesis() {
        assert_eq!(stat_state("42 (sleep) S 1 42 42 0"), Some('S'));
        assert_eq!(stat_state("42 (a) Z (b) R 1 42"), Some('R'));
        assert_eq!(stat_state("42 (rank 7) Z 1 0"), Some('Z'));
        assert_eq!(stat_state("garbage"), None);
    }

    /// A rank killed with SIGKILL stays a zombie until its parent reaps it: its /proc entry
    /// exists, but it runs no more, and its file must go at the first run.
    #[test]
    fn a_zombie_is_not_running() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let file = format!("rccl_telemetry_here_0_{pid}.prom");
        std::fs::write(d.path().join(&file), "x 1\n").unwrap();
        let stale = || {
            find(
                d.path(),
                Duration::from_secs(300),
                "here",
                SystemTime::now(),
            )
            .unwrap()
        };
        assert!(stale().is_empty(), "a running process's file is not stale");
        child.kill().unwrap();
        // Not reaped yet: wait (bounded) until the kernel shows it as a zombie.
        let stat = format!("/proc/{pid}/stat");
        let mut state = None;
        for _ in 0..500 {
            state = std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| stat_state(&s));
            if state == Some('Z') {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            state,
            Some('Z'),
            "the killed child never showed as a zombie"
        );
        let found = stale();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].path.ends_with(&file));
        assert_eq!(found[0].why, format!("process {pid} is not running"));
    }

    #[test]
    fn dead_pids_and_old_files_go_live_and_foreign_files_stay() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let dead = u32::MAX - 1; // beyond pid_max: never running
        for n in [
            format!("rccl_telemetry_here_0_{me}.prom"),
            format!("rccl_telemetry_here_0_{dead}.prom"),
            format!("rccl_telemetry_elsewhere_0_{dead}.prom"),
            "node_cpu.prom".to_string(),
        ] {
            std::fs::write(d.path().join(n), "x 1\n").unwrap();
        }
        let now = SystemTime::now();
        let names = |v: Vec<Stale>| {
            v.into_iter()
                .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let found = find(d.path(), Duration::from_secs(300), "here", now).unwrap();
        assert_eq!(
            names(found.clone()),
            vec![format!("rccl_telemetry_here_0_{dead}.prom")]
        );
        assert!(found[0].why.contains("not running"));
        // An hour later everything of ours is old, even the live rank's file (it would have
        // been rewritten); other collectors' files are never touched.
        let later = find(
            d.path(),
            Duration::from_secs(300),
            "here",
            now + Duration::from_secs(3600),
        )
        .unwrap();
        assert_eq!(later.len(), 3, "{later:?}");
        assert!(!names(later).contains(&"node_cpu.prom".to_string()));
        assert!(find(
            &d.path().join("missing"),
            Duration::from_secs(1),
            "here",
            now
        )
        .unwrap_err()
        .contains("missing"));
    }
}
