//! Which job each file is of, when one directory holds the files of more than one.
//!
//! A job's ranks run at the same time and talk to each other. So the files are first grouped
//! by time: files whose spans (start_time .. end_time) overlap, directly or through others, are
//! of one group, and a group that starts more than a minute ([`TIME_GAP_NS`]) after another
//! has ended is another job (a job run
//! again on the same hosts, whose pids may be reused, is told apart this way). Within a group,
//! files are of one job when one names a peer NIC another is addressed by, they share a
//! communicator, or they are of one host (a host's ranks reach each other without a NIC: the
//! rails of a rail-optimised job share no peer); two sets of files with no host and no peer in
//! common are two jobs, unless either names a peer that no file of the group covers (a missing
//! file could join them: they stay one).
//! When a file of a group names no peer and no communicator, or a file's times cannot be read
//! (the in-tree engine's local times), nothing is split that this cannot tell.
//!
//! Every command says when the files are of more than one job; `outliers` and `report` give
//! their verdicts per job ([`split`]), since figures of two jobs are no population.

use crate::completeness::{reach_of, Reach};
use crate::load::Run;
use crate::model::parse_timestamp_ns;
use crate::outliers::{Caveat, Options, OutlierReport, OutlierText};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// One job of the files.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Job {
    /// Its number, 1 first (by start time).
    pub job: usize,
    pub files: usize,
    pub hosts: usize,
    pub processes: Vec<String>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    /// The indices of its files in the run.
    #[serde(skip)]
    pub members: Vec<usize>,
}

/// The jobs of a run's files, when more than one, and why they are told apart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Jobs {
    pub jobs: Vec<Job>,
    /// Why: "no overlap in time", "no peer in common".
    pub why: Vec<String>,
    /// (host, pid) pairs of more than one job (a pid reused, told apart by the start time).
    pub pids_reused: usize,
}

/// Union-find over file indices.
struct Sets(Vec<usize>);

impl Sets {
    fn find(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
}

/// The least gap between the end of one group of files and the start of the next for them to
/// be two jobs: the ranks of a short job (a test, a launcher that starts them one by one) need
/// not overlap, but they follow each other within seconds.
pub const TIME_GAP_NS: i128 = 60_000_000_000;

/// The files' spans in ns, or None when a file's times cannot be read.
fn spans(run: &Run) -> Option<Vec<(i128, i128)>> {
    run.files
        .iter()
        .map(|l| {
            let s = parse_timestamp_ns(&l.file.start_time)?;
            let e = parse_timestamp_ns(&l.file.end_time)?;
            Some((s, e.max(s)))
        })
        .collect()
}

/// Groups of files whose spans overlap, in time order (all files in one group when a span
/// cannot be read).
fn time_groups(run: &Run) -> Vec<Vec<usize>> {
    let Some(sp) = spans(run) else {
        return vec![(0..run.files.len()).collect()];
    };
    let mut order: Vec<usize> = (0..sp.len()).collect();
    order.sort_by_key(|&i| (sp[i].0, i));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut end = i128::MIN;
    for i in order {
        if groups.is_empty() || sp[i].0 > end.saturating_add(TIME_GAP_NS) {
            groups.push(Vec::new());
            end = sp[i].1;
        }
        end = end.max(sp[i].1);
        if let Some(g) = groups.last_mut() {
            g.push(i);
        }
    }
    groups
}

/// Splits one time group by its peer graph: sets of files that name no peer of each other
/// and share no communicator, each naming only peers the group covers.
fn peer_groups(group: &[usize], reach: &[Cow<Reach>]) -> Vec<Vec<usize>> {
    if group.len() < 2 || group.iter().any(|&i| reach[i].is_unlinked()) {
        return vec![group.to_vec()];
    }
    let mut sets = Sets((0..group.len()).collect());
    let mut by_gid: HashMap<u128, usize> = HashMap::new();
    let mut by_lid: HashMap<u64, usize> = HashMap::new();
    let mut by_comm: HashMap<&str, usize> = HashMap::new();
    let mut by_host: HashMap<&str, usize> = HashMap::new();
    for (k, &i) in group.iter().enumerate() {
        // Ranks of one host at once are of one job: a host's ranks reach each other without
        // a NIC, so a rail-optimised job's rails share no peer, only hosts.
        let first = *by_host.entry(reach[i].host.as_str()).or_insert(k);
        sets.union(first, k);
        for g in &reach[i].own_gids {
            let first = *by_gid.entry(*g).or_insert(k);
            sets.union(first, k);
        }
        for l in &reach[i].own_lids {
            let first = *by_lid.entry(*l).or_insert(k);
            sets.union(first, k);
        }
        for (hash, _, _) in &reach[i].comms {
            let first = *by_comm.entry(hash.as_str()).or_insert(k);
            sets.union(first, k);
        }
    }
    // A set naming a peer no file of the group is reached by is open: a missing file may
    // join it to another, so the open sets are kept together.
    let mut open: Option<usize> = None;
    for (k, &i) in group.iter().enumerate() {
        for n in &reach[i].named {
            // No file owns address 0: a peer without a GID is found by its LID.
            let owner = by_gid.get(&n.gid).or_else(|| by_lid.get(&n.lid));
            match owner {
                Some(&o) => sets.union(o, k),
                None => match open {
                    Some(o) => sets.union(o, k),
                    None => open = Some(k),
                },
            }
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut root_at: HashMap<usize, usize> = HashMap::new();
    for (k, &i) in group.iter().enumerate() {
        let r = sets.find(k);
        let at = *root_at.entry(r).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[at].push(i);
    }
    out
}

/// The jobs of the run's files; None when they are of one job.
pub fn detect(run: &Run) -> Option<Jobs> {
    if run.files.len() < 2 {
        return None;
    }
    let reach: Vec<Cow<Reach>> = run.files.iter().map(reach_of).collect();
    let times = time_groups(run);
    let mut why = Vec::new();
    if times.len() > 1 {
        why.push("no overlap in time".to_string());
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut split_by_peers = false;
    for t in &times {
        let p = peer_groups(t, &reach);
        split_by_peers |= p.len() > 1;
        groups.extend(p);
    }
    if split_by_peers {
        why.push("no peer in common".to_string());
    }
    if groups.len() < 2 {
        return None;
    }
    let mut jobs: Vec<Job> = groups.into_iter().map(|g| job_of(run, g)).collect();
    jobs.sort_by(|a, b| (&a.start_time, a.members[0]).cmp(&(&b.start_time, b.members[0])));
    for (n, j) in jobs.iter_mut().enumerate() {
        j.job = n + 1;
    }
    let mut seen: HashMap<(&str, i64), usize> = HashMap::new();
    let mut reused = BTreeSet::new();
    for j in &jobs {
        for &i in &j.members {
            let f = &run.files[i].file;
            let k = (f.host_name.as_str(), f.process_id);
            if *seen.entry(k).or_insert(j.job) != j.job {
                reused.insert(k);
            }
        }
    }
    if !reused.is_empty() {
        why.push(format!(
            "{} host and pid pairs are in more than one job, with another start time",
            reused.len()
        ));
    }
    let names: BTreeSet<&Vec<String>> = jobs.iter().map(|j| &j.processes).collect();
    if names.len() > 1 {
        why.push("the process names differ".to_string());
    }
    Some(Jobs {
        jobs,
        why,
        pids_reused: reused.len(),
    })
}

fn job_of(run: &Run, members: Vec<usize>) -> Job {
    let files = || members.iter().map(|&i| &run.files[i].file);
    let hosts: BTreeSet<&str> = files().map(|f| f.host_name.as_str()).collect();
    let processes: BTreeSet<String> = files().map(|f| f.process_name.clone()).collect();
    let start = files()
        .filter_map(|f| parse_timestamp_ns(&f.start_time).map(|t| (t, &f.start_time)))
        .min();
    let end = files()
        .filter_map(|f| parse_timestamp_ns(&f.end_time).map(|t| (t, &f.end_time)))
        .max();
    Job {
        job: 0,
        files: members.len(),
        hosts: hosts.len(),
        processes: processes.into_iter().collect(),
        start_time: start.map(|(_, s)| s.clone()),
        end_time: end.map(|(_, s)| s.clone()),
        members,
    }
}

impl Job {
    /// "32 files on 4 hosts, all_reduce_perf, 2026-... .. 2026-..."
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} files on {} hosts, {}",
            self.files,
            self.hosts,
            self.processes.join(", ")
        );
        if let (Some(a), Some(b)) = (&self.start_time, &self.end_time) {
            s.push_str(&format!(", {a} .. {b}"));
        }
        s
    }
}

impl Jobs {
    /// The line every command prints: how many jobs, why, and each job.
    pub fn line(&self) -> String {
        let each: Vec<String> = self
            .jobs
            .iter()
            .take(crate::completeness::FIRST_NAMES)
            .map(|j| format!("job {}: {}", j.job, j.label()))
            .collect();
        let more = self.jobs.len() - each.len();
        format!(
            "the files are of {} jobs ({}): {}{}",
            self.jobs.len(),
            self.why.join("; "),
            each.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )
    }
}

/// Splits a run into one run per job (the files moved, in their order; the skipped files
/// stay with the first). Only for a run whose QP index is built from the files it holds
/// (`Keep::All` or `Keep::Links`): a prebuilt index is of every job's QPs.
pub fn split(run: Run, jobs: &Jobs) -> Vec<Run> {
    let mut job_of = vec![0usize; run.files.len()];
    for (n, j) in jobs.jobs.iter().enumerate() {
        for &i in &j.members {
            job_of[i] = n;
        }
    }
    let mut out: Vec<Run> = jobs
        .jobs
        .iter()
        .map(|_| Run {
            kept: run.kept,
            ..Default::default()
        })
        .collect();
    for (i, l) in run.files.into_iter().enumerate() {
        out[job_of[i]].files.push(l);
    }
    for r in &mut out {
        r.found = r.files.len();
    }
    if let Some(first) = out.first_mut() {
        first.found += run.found.saturating_sub(job_of.len());
        first.bad = run.bad;
    }
    out
}

/// Puts the runs of [`split`] back together, in the loader's order (by rank, then path).
pub fn join(runs: Vec<Run>) -> Run {
    let mut out = Run::default();
    for (n, r) in runs.into_iter().enumerate() {
        if n == 0 {
            out.bad = r.bad;
            out.kept = r.kept;
        }
        out.found += r.found;
        out.files.extend(r.files);
    }
    out.files
        .sort_by(|a, b| crate::load::ranks::sort_key(a).cmp(&crate::load::ranks::sort_key(b)));
    out
}

/// The caveat that heads the verdicts of a run whose files are of several jobs.
pub fn caveat(jobs: &Jobs) -> Caveat {
    Caveat {
        kind: "several_jobs",
        evidence: format!(
            "{}. The findings are per job: figures of two jobs are no population.",
            jobs.line()
        ),
    }
}

/// The outliers of a run: its report, or when its files are of several jobs, the jobs and one
/// report per job (each job's files analysed as a run of their own).
pub fn find_outliers(run: Run, opt: &Options) -> (Run, Option<Jobs>, Vec<OutlierReport>) {
    match detect(&run) {
        None => {
            let r = crate::outliers::find(&run, opt);
            (run, None, vec![r])
        }
        Some(jobs) => {
            let runs = split(run, &jobs);
            let reports = runs.iter().map(|r| crate::outliers::find(r, opt)).collect();
            (join(runs), Some(jobs), reports)
        }
    }
}

/// One report of the verdicts of every job (for the HTML report): the jobs' caveat first, then
/// each job's caveats, rows and findings, each said to be of its job.
pub fn merge(jobs: &Jobs, reports: Vec<OutlierReport>) -> OutlierReport {
    let mut out = OutlierReport {
        threshold: reports.first().map_or(0.0, |r| r.threshold),
        ranks: 0,
        devices: 0,
        ranks_flagged: 0,
        critical: 0,
        warning: 0,
        info: 0,
        caveats: vec![caveat(jobs)],
        rows: Vec::new(),
        findings: Vec::new(),
        incomplete: None,
        qp_settings: Vec::new(),
    };
    for (j, r) in jobs.jobs.iter().zip(reports) {
        out.qp_settings.extend(r.qp_settings);
        let tag = |s: &str| format!("job {}: {s}", j.job);
        out.ranks += r.ranks;
        out.devices += r.devices;
        out.ranks_flagged += r.ranks_flagged;
        out.critical += r.critical;
        out.warning += r.warning;
        out.info += r.info;
        out.caveats.extend(r.caveats.into_iter().map(|mut c| {
            c.evidence = tag(&c.evidence);
            c
        }));
        out.rows.extend(r.rows.into_iter().map(|mut row| {
            row.evidence = tag(&row.evidence);
            row
        }));
        out.findings.extend(r.findings.into_iter().map(|mut f| {
            f.evidence = tag(&f.evidence);
            f
        }));
    }
    out.rows.sort_by_key(|r| r.severity);
    out.findings.sort_by_key(|f| f.severity);
    out
}

/// The outliers of every job for people: the jobs' line, then each job's report under its
/// label.
pub fn render_per_job(jobs: &Jobs, reports: &[OutlierReport], o: &OutlierText) -> String {
    let mut out = o.layout.wrap(&format!("Jobs: {}", jobs.line()));
    out.push('\n');
    for (j, r) in jobs.jobs.iter().zip(reports) {
        out.push('\n');
        out.push_str(&o.layout.wrap(&format!(
            "Job {} of {}: {}",
            j.job,
            jobs.jobs.len(),
            j.label()
        )));
        out.push('\n');
        out.push_str(&crate::outliers::render_with(r, o));
    }
    out
}

/// What `outliers --json` prints for a run of several jobs.
#[derive(Serialize)]
pub struct PerJob<'a> {
    pub jobs: &'a Jobs,
    pub reports: &'a [OutlierReport],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Loaded;
    use crate::model::{Device, DevicePeer, TelemetryFile};

    /// A rank of a ring of `n` on host `h`, NIC 10.j.h.1, peers h-1 and h+1, over `t0`..`t1`.
    fn rank(job: u8, h: u8, n: u8, pid: i64, t0: &str, t1: &str) -> Loaded {
        let gid = |x: u8| format!("::ffff:10.{job}.{x}.1");
        let peers = [(h + n - 1) % n, (h + 1) % n]
            .iter()
            .map(|&p| DevicePeer {
                gid: Some(gid(p).into()),
                num_qps: 2,
                ..Default::default()
            })
            .collect();
        Loaded {
            path: format!("{job}-{h}").into(),
            file: TelemetryFile {
                host_name: format!("node{h}"),
                process_id: pid,
                process_name: "all_reduce_perf".into(),
                start_time: t0.into(),
                end_time: t1.into(),
                devices: vec![Device {
                    roce_device: "mlx5_0".into(),
                    gid: Some(gid(h)),
                    peers: Some(peers),
                    ..Default::default()
                }],
                ..Default::default()
            },
            qp_claims: None,
            reach: None,
        }
    }

    const A0: &str = "2026-01-01T00:00:00.000Z";
    const A1: &str = "2026-01-01T00:02:00.000Z";
    const B0: &str = "2026-01-01T01:00:00.000Z";
    const B1: &str = "2026-01-01T01:02:00.000Z";

    fn run(files: Vec<Loaded>) -> Run {
        Run {
            found: files.len(),
            files,
            ..Default::default()
        }
    }

    #[test]
    fn one_job_is_no_jobs() {
        let r = run((0..4)
            .map(|h| rank(1, h, 4, 100 + i64::from(h), A0, A1))
            .collect());
        assert_eq!(detect(&r), None);
    }

    /// The same hosts and pids an hour later: two jobs, told apart by time, the pids reused.
    #[test]
    fn a_job_run_again_later_is_another_job() {
        let mut files: Vec<Loaded> = (0..4)
            .map(|h| rank(1, h, 4, 100 + i64::from(h), A0, A1))
            .collect();
        files.extend((0..4).map(|h| rank(1, h, 4, 100 + i64::from(h), B0, B1)));
        let r = run(files);
        let j = detect(&r).expect("two jobs");
        assert_eq!(j.jobs.len(), 2);
        assert_eq!(j.jobs[0].members, vec![0, 1, 2, 3]);
        assert_eq!(j.jobs[1].start_time.as_deref(), Some(B0));
        assert_eq!(j.pids_reused, 4);
        assert!(j.why[0] == "no overlap in time", "{:?}", j.why);
        assert!(
            j.line()
                .starts_with("the files are of 2 jobs (no overlap in time; 4 host and pid pairs"),
            "{}",
            j.line()
        );
        let runs = split(r, &j);
        assert_eq!(
            runs.iter().map(|r| r.files.len()).collect::<Vec<_>>(),
            vec![4, 4]
        );
    }

    /// Two rings at the same time with no peer in common are two jobs.
    #[test]
    fn two_disjoint_rings_at_once_are_two_jobs() {
        let mut files: Vec<Loaded> = (0..3)
            .map(|h| rank(1, h, 3, 100 + i64::from(h), A0, A1))
            .collect();
        files.extend((0..3).map(|h| rank(2, h + 10, 3, 200 + i64::from(h), A0, A1)));
        // Job 2's ring is h+10 modulo 3 of its own addresses: fix its peers to its own hosts.
        for (k, l) in files.iter_mut().skip(3).enumerate() {
            let gid = |x: usize| format!("::ffff:10.2.{}.1", x + 10);
            let d = &mut l.file.devices[0];
            d.gid = Some(gid(k));
            d.peers = Some(
                [(k + 2) % 3, (k + 1) % 3]
                    .iter()
                    .map(|&p| DevicePeer {
                        gid: Some(gid(p).into()),
                        num_qps: 2,
                        ..Default::default()
                    })
                    .collect(),
            );
        }
        let j = detect(&run(files)).expect("two jobs");
        assert_eq!(j.jobs.len(), 2);
        assert_eq!(j.why, vec!["no peer in common".to_string()]);
    }

    /// A ring whose one file is missing names that peer: its two halves could be joined by
    /// it, so they stay one job.
    #[test]
    fn a_ring_broken_by_a_missing_file_stays_one_job() {
        let files: Vec<Loaded> = (0..6)
            .filter(|h| *h != 2 && *h != 5)
            .map(|h| rank(1, h, 6, 100 + i64::from(h), A0, A1))
            .collect();
        assert_eq!(detect(&run(files)), None);
    }
}
