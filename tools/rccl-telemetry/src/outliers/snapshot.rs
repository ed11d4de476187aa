//! A snapshot among final files (`snapshot`): its counters cover only part of the run, so it
//! looks low on everything; said once, about the file.

use super::{rank_finding, Finding, Input, Kind};

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let files = &x.run.files;
    let finals = files
        .iter()
        .filter(|l| l.file.is_final.unwrap_or(true))
        .count();
    if finals == 0 {
        return Vec::new();
    }
    files
        .iter()
        .filter(|l| !l.file.is_final.unwrap_or(true))
        .map(|l| {
            let mut f = rank_finding(l, Kind::Snapshot, "final", 0.0);
            f.score = x.opt.threshold + 1.5;
            f.population = files.len();
            f.evidence = format!(
                "this file is a snapshot of a live process (final=false, trigger {}, taken {}) while {} of {} files are final: its counters cover only part of the run",
                l.file.trigger.as_deref().unwrap_or("unknown"),
                l.file.end_time,
                finals,
                files.len()
            );
            f
        })
        .collect()
}
