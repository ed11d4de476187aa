//! A hung job (`hang_root`, `stalled_qps`): the root of the hang from the wait-for graph of
//! `crate::hang` (a frozen rank, a cycle of ranks on a dead link, the end of the links that went
//! quiet first), and the QPs stalled now, one finding per waiting NIC and peer. Both are
//! critical: they come first in `outliers` and on the report's first screen. A hang whose
//! root cannot be named is a caveat that says why, never a silent all-clear.
//!
//! Facts, not statistics: a stalled QP is stalled whatever the others do. They are scored by
//! what they hold up (a root by the ranks blocked behind it, stalled QPs by their number) so a
//! root ranks above the stalls it explains.

use super::{nic_label, Caveat, Finding, Input, Kind};
use crate::load::addr::lookup;
use crate::model::parse_timestamp_ns;
use crate::stats::{fmt_count, fmt_ns};
use std::collections::BTreeMap;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = roots(x);
    out.extend(stalled(x));
    out
}

/// "host:device" -> (host, device); None for a NIC in no file ("gid ... (not in the files)").
fn split_nic(s: &str) -> Option<(String, String)> {
    if s.contains(' ') {
        return None;
    }
    s.rsplit_once(':')
        .map(|(h, d)| (h.to_string(), d.to_string()))
}

/// The latest file of a rank "host:pid" among the inputs.
fn file_of<'a>(x: &'a Input, rank: &str) -> Option<&'a crate::load::Loaded> {
    let (h, p) = rank.rsplit_once(':')?;
    let pid: i64 = p.parse().ok()?;
    let i = crate::load::ranks::of_host_pid(x.cx.latest(), h, pid)?;
    Some(&x.run.files[i])
}

fn roots(x: &Input) -> Vec<Finding> {
    let h = x.hang();
    h.roots
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let nics: Vec<(String, String)> = r.nics.iter().filter_map(|n| split_nic(n)).collect();
            let culprit = if nics.is_empty() {
                r.nics.join(" + ")
            } else {
                nics.iter()
                    .map(|(h, d)| nic_label(h, d))
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            let rank = r.ranks.first().cloned().unwrap_or_else(|| culprit.clone());
            let l = r.ranks.first().and_then(|k| file_of(x, k));
            let dev = l.and_then(|l| {
                let (hh, d) = nics.first()?;
                (nics.len() == 1 && *hh == l.file.host_name)
                    .then(|| l.file.devices.iter().find(|x| x.roce_device == *d))
                    .flatten()
            });
            Finding {
                kind: Kind::HangRoot,
                severity: Kind::HangRoot.severity(),
                culprit: culprit.clone(),
                category: None,
                rank,
                host: l.map_or_else(
                    || nics.first().map_or(String::new(), |n| n.0.clone()),
                    |l| l.file.host_name.clone(),
                ),
                pid: l.map_or(0, |l| l.file.process_id),
                file: l.map_or(String::new(), |l| l.path.display().to_string()),
                device_id: dev.map(|d| d.device_id),
                roce_device: dev.map(|d| d.roce_device.clone()),
                metric: "waiting_qps".into(),
                value: r.waiting_qps as f64,
                population: h.ranks,
                median: None,
                mad: None,
                z: None,
                score: 1000.0 + r.blocked_ranks as f64,
                evidence: format!("root of the hang ({}): {}", r.kind, r.evidence),
                confidence: 1.0,
                alternatives: Vec::new(),
                nics,
                behind: h.behind.get(i).cloned().unwrap_or_default(),
            }
        })
        .collect()
}

/// The stalled QPs of one waiting NIC towards one peer.
#[derive(Default)]
struct Group {
    qps: u64,
    outstanding: u64,
    since: Option<i128>,
    since_text: Option<String>,
    peer_rank: Option<String>,
    /// The first of its QPs whose settings differ from its NIC's other QPs: "QP 3: its
    /// settings differ: ...; the transport gives up after ..." (QP lint).
    settings: Option<String>,
}

fn stalled(x: &Input) -> Vec<Finding> {
    // The latest file of every rank (a snapshot followed by a final file that recovered has no
    // stall left).
    let files: Vec<&crate::load::Loaded> =
        x.cx.latest().values().map(|&i| &x.run.files[i]).collect();
    let any = files.iter().any(|l| {
        l.file.devices.iter().any(|d| {
            d.channels
                .iter()
                .any(|c| c.queue_pairs.iter().any(|q| q.stalled == Some(true)))
        })
    });
    if !any {
        return Vec::new();
    }
    let idx = x.cx.qp_index();
    let mut out = Vec::new();
    for l in files {
        let f = &l.file;
        for d in f.devices.iter() {
            let mut groups: BTreeMap<String, Group> = BTreeMap::new();
            for q in d.channels.iter().flat_map(|c| &c.queue_pairs) {
                if q.stalled != Some(true) {
                    continue;
                }
                let (dst, peer_rank) = match &q.peer {
                    Some(p) => match lookup(idx, p.gid.as_deref(), p.lid, p.qp_num) {
                        [one] => (
                            nic_label(&one.0, &one.2),
                            Some(format!("{}:{}", one.0, one.1)),
                        ),
                        _ => (
                            p.gid
                                .as_deref()
                                .map(String::from)
                                .or(p.lid.map(|l| format!("LID {l}")))
                                .map_or("peer unknown".into(), |a| {
                                    format!("{a} (not in the files)")
                                }),
                            None,
                        ),
                    },
                    None => ("peer unknown".into(), None),
                };
                let g = groups.entry(dst).or_default();
                if g.settings.is_none() {
                    let note = super::qp_lint::mismatch_note(d, q);
                    if note.starts_with("; its settings differ") {
                        g.settings = Some(format!("; QP {}{note}", q.id));
                    }
                }
                g.qps += 1;
                g.outstanding += q.num_wqe_outstanding.unwrap_or(0);
                g.peer_rank = g.peer_rank.take().or(peer_rank);
                let t = q.stalled_since.as_deref().and_then(parse_timestamp_ns);
                if t.is_some() && (g.since.is_none() || t < g.since) {
                    g.since = t;
                    g.since_text = q.stalled_since.as_deref().map(String::from);
                }
            }
            for (dst, g) in groups {
                out.push(stall_finding(x, l, d, &dst, &g));
            }
        }
    }
    out
}

fn stall_finding(
    x: &Input,
    l: &crate::load::Loaded,
    d: &crate::model::Device,
    dst: &str,
    g: &Group,
) -> Finding {
    let f = &l.file;
    let src = nic_label(&f.host_name, &d.roce_device);
    let end = parse_timestamp_ns(&f.end_time);
    let how_long = match (g.since, end) {
        (Some(a), Some(b)) if b >= a => format!(" for {}", fmt_ns((b - a) as f64)),
        _ => String::new(),
    };
    let mut v = super::rank_finding(l, Kind::StalledQps, "stalled_qps", g.qps as f64);
    v.device_id = Some(d.device_id);
    v.roce_device = Some(d.roce_device.clone());
    v.culprit = format!("{src} -> {dst}");
    v.nics = vec![(f.host_name.clone(), d.roce_device.clone())];
    v.population = x.run.files.len();
    v.score = 500.0 + g.qps as f64;
    v.evidence = format!(
        "{} QP{} of {src} (pid {}) stalled towards {dst}{}: {} WRs outstanding, no completion{how_long}{}; in its {} written {}{}",
        fmt_count(g.qps),
        if g.qps == 1 { "" } else { "s" },
        f.process_id,
        g.peer_rank
            .as_ref()
            .map_or(String::new(), |r| format!(" (rank {r})")),
        fmt_count(g.outstanding),
        g.since_text
            .as_ref()
            .map_or(String::new(), |s| format!(" (since {s})")),
        if f.is_final == Some(false) {
            "snapshot"
        } else {
            "final file"
        },
        f.end_time,
        g.settings.as_deref().unwrap_or("")
    );
    v
}

/// A hang whose root cannot be named says why, in one line.
pub(super) fn caveats(x: &Input) -> Vec<Caveat> {
    let h = x.hang();
    if !h.roots.is_empty() {
        return Vec::new();
    }
    crate::hang::one_line(h)
        .map(|l| Caveat {
            kind: "hang_without_root",
            // The title says "Hang, no root named": the evidence is the reason alone.
            evidence: l
                .trim_start_matches("Hang: ")
                .trim_start_matches("no root named: ")
                .to_string(),
        })
        .into_iter()
        .collect()
}
