//! Who a rank is: one process, keyed by (host, pid, start time).
//!
//! A pid is reused: a job run on the same hosts days later can get a pid an earlier job had,
//! and its files then name the same host and pid. The start time (`start_time`, when telemetry
//! started in the process) tells the two apart, and every file of one process (its snapshots
//! and its final file) carries the same one, so the latest file of a rank is chosen among the
//! files of that process only. The start time is compared as the file writes it: one process
//! writes it one way, and an in-tree file's local time without a zone is compared as text too.

use crate::load::Loaded;
use crate::model::{parse_timestamp_ns, TelemetryFile};
use std::collections::BTreeMap;

/// A rank's identity: (host, pid, start time as written).
pub type RankKey = (String, i64, String);

/// The identity of the process that wrote a file.
pub fn key(f: &TelemetryFile) -> RankKey {
    (
        f.host_name.clone(),
        f.process_id,
        f.start_time.trim().to_string(),
    )
}

/// True when two files were written by one process (the same host, pid and start time).
pub fn same_rank(a: &TelemetryFile, b: &TelemetryFile) -> bool {
    a.host_name == b.host_name
        && a.process_id == b.process_id
        && a.start_time.trim() == b.start_time.trim()
}

/// Orders the files of one rank: the later end time, then a final file over a snapshot. The
/// latest file of a rank is the greatest.
pub fn when(f: &TelemetryFile) -> (i128, bool) {
    (
        parse_timestamp_ns(&f.end_time).unwrap_or(i128::MIN),
        f.is_final != Some(false),
    )
}

/// The index of each rank's latest file among `files`, by rank (on a tie, the first).
pub fn latest_per_rank(files: &[Loaded]) -> BTreeMap<RankKey, usize> {
    let mut m: BTreeMap<RankKey, usize> = BTreeMap::new();
    for (i, l) in files.iter().enumerate() {
        let k = key(&l.file);
        match m.get(&k) {
            Some(&j) if when(&files[j].file) >= when(&l.file) => {}
            _ => {
                m.insert(k, i);
            }
        }
    }
    m
}

/// The file of the rank with this host and pid in `latest` (its first by start time, for a
/// peer that names only host and pid), if any.
pub fn of_host_pid(latest: &BTreeMap<RankKey, usize>, host: &str, pid: i64) -> Option<usize> {
    latest
        .range((host.to_string(), pid, String::new())..)
        .next()
        .filter(|(k, _)| k.0 == host && k.1 == pid)
        .map(|(_, &i)| i)
}

/// The sort key of a file by rank: host, pid, start time, then the path.
pub fn sort_key(l: &Loaded) -> (&str, i64, &str, &std::path::Path) {
    (
        l.file.host_name.as_str(),
        l.file.process_id,
        l.file.start_time.trim(),
        l.path.as_path(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(pid: i64, start: &str, end: &str, is_final: bool) -> Loaded {
        Loaded {
            path: PathBuf::from(format!("{pid}-{start}-{end}-{is_final}")),
            file: TelemetryFile {
                host_name: "h".into(),
                process_id: pid,
                start_time: start.into(),
                end_time: end.into(),
                is_final: Some(is_final),
                ..Default::default()
            },
            qp_claims: None,
            reach: None,
        }
    }

    const T0: &str = "2026-01-01T00:00:00.000Z";
    const T1: &str = "2026-01-01T00:01:00.000Z";
    const T2: &str = "2026-01-04T00:00:00.000Z";
    const T3: &str = "2026-01-04T00:01:00.000Z";

    /// A snapshot and the final file of one process are one rank, the final file its latest;
    /// a later process with the same host and pid is another rank, not a newer file of it.
    #[test]
    fn the_start_time_tells_a_reused_pid_apart() {
        let files = vec![
            file(7, T0, T1, false),
            file(7, T0, T1, true),
            file(7, T2, T3, true),
        ];
        assert!(same_rank(&files[0].file, &files[1].file));
        assert!(!same_rank(&files[1].file, &files[2].file));
        let latest = latest_per_rank(&files);
        assert_eq!(latest.len(), 2);
        assert_eq!(latest[&key(&files[0].file)], 1);
        assert_eq!(latest[&key(&files[2].file)], 2);
    }

    /// The later end time wins over a final file that ended earlier.
    #[test]
    fn the_latest_file_ends_last() {
        let files = vec![file(7, T0, T1, true), file(7, T0, T2, false)];
        let latest = latest_per_rank(&files);
        assert_eq!(latest.values().copied().collect::<Vec<_>>(), vec![1]);
    }
}
