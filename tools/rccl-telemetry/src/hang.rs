//! The root of a hang: the wait-for graph across ranks, and the quiet-links rule.
//!
//! Rank A waits on B when A has a QP towards B (joined through the run's QP index, else through
//! the peer's device GID or LID) that is stalled or has error completions (format version 4).
//! The roots are the sink components of that graph: a rank (or a peer NIC in no file) that
//! others wait on and that waits on nobody, or a cycle of ranks waiting on each other with
//! nothing beyond it. With nothing stalled or errored, the QPs' last post and completion times
//! (version 4) decide: the rank whose links all went quiet before every other rank's links
//! elsewhere, else the common end of the links that went quiet first, or the one link when one
//! went quiet alone. Each rank is read from its latest file (snapshot or final), as the load
//! chose it.
//! Separate from `stalls` (which lists what is stuck) because it is the one function that
//! `stalls`, `summary`, `outliers` and the report share for their hang line.

mod graph;
pub(crate) mod peers;
mod quiet;
mod root;
mod wait_for;

pub use root::{Hang, Root};

use crate::load::addr::QpIndex;
use crate::load::Run;
use crate::model::{parse_timestamp_ns, Device, QueuePair};
use graph::{ns, Edge, Graph, Key};
use peers::{Peer, PeerResolver};
use quiet::{quiet_roots, Quiet};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use wait_for::wait_for_roots;

/// The wait-for graph as it is built from the latest files, with the hang's QP counts.
struct GraphBuild<'a> {
    latest: &'a BTreeMap<crate::load::ranks::RankKey, usize>,
    peers: PeerResolver<'a>,
    g: Graph,
    hang: Hang,
    edges: BTreeMap<(usize, usize), Edge>,
    /// Links for the quiet rule: (lower node, higher node) -> acc.
    links: BTreeMap<(usize, usize), Quiet>,
    /// Stalled or errored QPs whose settings differ from their NIC's other QPs': no edge to
    /// their peer.
    misconfigured: u64,
}

impl GraphBuild<'_> {
    /// Adds a QP of node `src`, NIC `src_nic` (device `dev`), whose file was written at
    /// `end_ns`: its progress to its link, and an edge to its peer when it is stalled or
    /// errored. A stalled or errored QP whose settings differ from its NIC's other QPs' (QP
    /// lint's `qp_config_mismatch`: a traffic class its fabric drops, a shorter timeout) waits
    /// or failed on its own settings, not for want of its peer: it waits on nobody (its stall
    /// and error findings name the settings).
    fn add_qp(
        &mut self,
        src: usize,
        (dev, src_nic): (&Device, &str),
        end_ns: Option<i128>,
        q: &QueuePair,
    ) {
        let errs = q.cq_error_total();
        let errored = errs > 0 || q.first_cq_error.is_some();
        let stalled = q.stalled == Some(true);
        let progress = ns(q.last_post_time.as_deref()).max(ns(q.last_completion_time.as_deref()));
        if !(stalled || errored || progress.is_some()) {
            return;
        }
        self.hang.stalled_qps += u64::from(stalled);
        self.hang.errored_qps += u64::from(errored);
        let Some(p) = &q.peer else {
            if stalled || errored {
                self.hang.unresolved_qps += 1;
            }
            return;
        };
        let (dst, dst_nic) = match self.peers.resolve(p) {
            Peer::Rank(h, pid, nic) => {
                let fi = crate::load::ranks::of_host_pid(self.latest, &h, pid);
                (self.g.node(Key::Rank(h, pid), fi), nic)
            }
            Peer::Absent(a) => (self.g.node(Key::Absent(a.clone()), None), a),
            Peer::Unresolved => {
                if stalled || errored {
                    self.hang.unresolved_qps += 1;
                }
                return;
            }
        };
        if let Some(t) = progress {
            let key = (src.min(dst), src.max(dst));
            self.links.entry(key).or_default().note(
                src <= dst,
                t,
                end_ns,
                ns(q.last_post_time.as_deref()),
                src_nic,
                &dst_nic,
            );
        }
        if !(stalled || errored) {
            return;
        }
        if crate::outliers::qp_lint::differs_from_its_nic(dev, q) {
            self.misconfigured += 1;
            return;
        }
        self.edges
            .entry((src, dst))
            .or_default()
            .add(q, stalled, errored, src_nic, dst_nic);
    }
}

/// Builds the wait-for graph of the run and names its roots (the run's QP index and latest
/// files taken from the run).
pub fn analyse(run: &Run) -> Hang {
    analyse_with(
        run,
        &crate::load::qp_index(run),
        &crate::load::latest_per_rank(&run.files),
    )
}

/// Builds the wait-for graph of the run and names its roots: each rank read from its file in
/// `latest` ([`crate::load::latest_per_rank`]), the peers found through the run's QP index.
pub fn analyse_with(
    run: &Run,
    idx: &QpIndex,
    latest: &BTreeMap<crate::load::ranks::RankKey, usize>,
) -> Hang {
    let mut b = GraphBuild {
        latest,
        peers: PeerResolver::new(run, idx, latest),
        g: Graph {
            nodes: Vec::new(),
            index: HashMap::new(),
        },
        hang: Hang {
            basis: "none",
            ranks: latest.len(),
            ..Default::default()
        },
        edges: BTreeMap::new(),
        links: BTreeMap::new(),
        misconfigured: 0,
    };
    for (k, &fi) in latest {
        b.g.node(Key::Rank(k.0.clone(), k.1), Some(fi));
    }
    let mut stall_ms: u64 = 0;
    for (k, &fi) in latest {
        let f = &run.files[fi].file;
        stall_ms = stall_ms.max(f.stall_ms.unwrap_or(0));
        let src = b.g.index[&Key::Rank(k.0.clone(), k.1)];
        let end_ns = parse_timestamp_ns(&f.end_time);
        for d in &f.devices {
            let src_nic = format!("{}:{}", f.host_name, d.roce_device);
            for c in &d.channels {
                for q in &c.queue_pairs {
                    b.add_qp(src, (d, &src_nic), end_ns, q);
                }
            }
        }
    }
    let GraphBuild {
        g,
        mut hang,
        edges,
        links,
        misconfigured,
        ..
    } = b;
    hang.edges = edges.len();
    hang.waiting_ranks = edges.keys().map(|(s, _)| *s).collect::<BTreeSet<_>>().len();
    if !edges.is_empty() {
        hang.basis = "wait_for";
        wait_for_roots(&g, &edges, run, &mut hang);
        return hang;
    }
    if misconfigured > 0 {
        let (s, its) = if misconfigured == 1 {
            ("", "its")
        } else {
            ("s", "their")
        };
        hang.no_root = Some(format!(
            "{misconfigured} stalled or errored QP{s} whose settings differ from {its} NIC's other QPs' (qp_config_mismatch): {its} settings, not {its} peer{s}, explain the wait"
        ));
        return hang;
    }
    if hang.unresolved_qps > 0 {
        hang.no_root = Some(format!(
            "{} QPs are stalled or errored but none of their peers can be told (no peer key, or a peer claimed by two files): run `rccl-telemetry links` on the same files",
            hang.unresolved_qps
        ));
        return hang;
    }
    // A run whose every file was written at its end finished: links that went quiet before
    // then were done, not hung. The quiet rule reads snapshots of a live (or hung) job only.
    if latest
        .values()
        .all(|&fi| run.files[fi].file.is_final != Some(false))
    {
        return hang;
    }
    let tick_ms = (stall_ms.max(1000) / 2).max(5);
    quiet_roots(&g, &links, stall_ms.max(1000), tick_ms, &mut hang);
    hang
}

/// The hang of each job of a run whose files are of several, analysed on its own (its ranks'
/// latest files only) and put together: each root's and each "no root" reason's evidence
/// starts with its job, the counts are summed, and the basis is the wait-for graph when any
/// job's is.
pub fn of_jobs(
    run: &Run,
    idx: &QpIndex,
    latest: &BTreeMap<crate::load::ranks::RankKey, usize>,
    jobs: &crate::jobs::Jobs,
) -> Hang {
    let mut out = Hang {
        basis: "none",
        ..Default::default()
    };
    let mut no_root = Vec::new();
    for j in &jobs.jobs {
        let members: BTreeSet<usize> = j.members.iter().copied().collect();
        let mine: BTreeMap<_, usize> = latest
            .iter()
            .filter(|(_, fi)| members.contains(fi))
            .map(|(k, &fi)| (k.clone(), fi))
            .collect();
        let h = analyse_with(run, idx, &mine);
        out.basis = match (out.basis, h.basis) {
            ("wait_for", _) | (_, "wait_for") => "wait_for",
            ("quiet", _) | (_, "quiet") => "quiet",
            _ => "none",
        };
        out.ranks += h.ranks;
        out.waiting_ranks += h.waiting_ranks;
        out.stalled_qps += h.stalled_qps;
        out.errored_qps += h.errored_qps;
        out.unresolved_qps += h.unresolved_qps;
        out.edges += h.edges;
        if let Some(why) = h.no_root {
            no_root.push(format!("job {}: {why}", j.job));
        }
        // `behind` is in the roots' order (a quiet root has none): kept aligned.
        let mut behind = h.behind;
        behind.resize(h.roots.len(), Vec::new());
        out.behind.extend(behind);
        out.roots.extend(h.roots.into_iter().map(|mut r| {
            r.evidence = format!("job {}: {}", j.job, r.evidence);
            r
        }));
    }
    if out.roots.is_empty() && !no_root.is_empty() {
        out.no_root = Some(no_root.join("; "));
    }
    out
}

/// The hang in one line for `summary`, `outliers` and the report; None when the files show no
/// hang at all (nothing stalled or errored, no link quiet).
pub fn one_line(h: &Hang) -> Option<String> {
    if !h.roots.is_empty() {
        let names: Vec<String> = h
            .roots
            .iter()
            .take(4)
            .map(|r| {
                let who = if r.ranks.is_empty() {
                    r.nics.join(" ")
                } else {
                    format!("{} ({})", r.ranks.join(" + "), r.nics.join(" "))
                };
                match r.kind {
                    "cycle" => format!("{who} wait on each other ({} QPs)", r.waiting_qps),
                    "rank" => format!(
                        "{who}: {} QPs on {} ranks wait on it",
                        r.waiting_qps, r.waiting_ranks
                    ),
                    _ => format!("{who}: the links that went quiet first"),
                }
            })
            .collect();
        return Some(format!(
            "Hang: {} {}: {}{} (rccl-telemetry stalls for the evidence)",
            h.roots.len(),
            if h.roots.len() == 1 { "root" } else { "roots" },
            names.join("; "),
            if h.roots.len() > 4 { "; ..." } else { "" }
        ));
    }
    let evidence = h.stalled_qps + h.errored_qps > 0
        || h.no_root
            .as_deref()
            .is_some_and(|r| r.contains("went quiet"));
    evidence.then(|| {
        format!(
            "Hang: no root named: {}",
            h.no_root.as_deref().unwrap_or("-")
        )
    })
}

/// The shared call: the hang line of a run (see [`one_line`]).
pub fn hang_line(run: &Run) -> Option<String> {
    one_line(&analyse(run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_none_without_a_hang_and_says_why_with_one() {
        assert_eq!(one_line(&Hang::default()), None);
        let h = Hang {
            stalled_qps: 3,
            no_root: Some("because".into()),
            ..Default::default()
        };
        assert_eq!(
            one_line(&h).as_deref(),
            Some("Hang: no root named: because")
        );
    }
}
