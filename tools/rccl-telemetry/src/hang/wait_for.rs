//! The wait-for rule: the roots are the sink components of the graph.

use super::graph::{components, min_opt, ts, Edge, Graph, Key};
use super::root::{Hang, Root};
use crate::load::Run;
use crate::model::parse_timestamp_ns;
use std::collections::{BTreeMap, BTreeSet};

fn status_list(m: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sink components of the graph, each a root with its evidence.
pub(super) fn wait_for_roots(
    g: &Graph,
    edges: &BTreeMap<(usize, usize), Edge>,
    run: &Run,
    hang: &mut Hang,
) {
    let n = g.nodes.len();
    let mut adj = vec![Vec::new(); n];
    let mut radj = vec![Vec::new(); n];
    let mut in_graph = vec![false; n];
    for &(s, d) in edges.keys() {
        adj[s].push(d);
        radj[d].push(s);
        in_graph[s] = true;
        in_graph[d] = true;
    }
    let comp = components(&adj);
    let nc = comp
        .iter()
        .filter(|c| **c != usize::MAX)
        .max()
        .map_or(0, |m| m + 1);
    let mut has_out = vec![false; nc];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nc];
    for v in 0..n {
        if in_graph[v] {
            members[comp[v]].push(v);
        }
    }
    for &(s, d) in edges.keys() {
        if comp[s] != comp[d] {
            has_out[comp[s]] = true;
        }
    }
    let mut roots = Vec::new();
    for c in 0..nc {
        if has_out[c] || members[c].is_empty() {
            continue;
        }
        let mem: BTreeSet<usize> = members[c].iter().copied().collect();
        let mut r = Root {
            kind: if mem.len() > 1 { "cycle" } else { "rank" },
            ranks: Vec::new(),
            nics: Vec::new(),
            in_files: mem.iter().all(|&v| g.nodes[v].file.is_some()),
            waiting_qps: 0,
            waiting_ranks: 0,
            stalled_qps: 0,
            errored_qps: 0,
            blocked_ranks: 0,
            since: None,
            errors_by_status: BTreeMap::new(),
            first_error: None,
            quiet_links: Vec::new(),
            evidence: String::new(),
        };
        let mut since = None;
        let mut first: Option<(i128, String)> = None;
        let mut waiters = BTreeSet::new();
        let mut nics = BTreeSet::new();
        for &d in &mem {
            for &s in &radj[d] {
                let e = &edges[&(s, d)];
                waiters.insert(s);
                r.waiting_qps += e.qps;
                r.stalled_qps += e.stalled;
                r.errored_qps += e.errored;
                since = min_opt(since, e.since);
                for (k, v) in &e.errors {
                    *r.errors_by_status.entry(k.clone()).or_default() += v;
                }
                if let Some(fe) = &e.first_error {
                    if first.as_ref().is_none_or(|f| fe.0 < f.0) {
                        first = Some(fe.clone());
                    }
                }
                nics.extend(e.dst_nics.iter().cloned());
            }
        }
        r.waiting_ranks = waiters.len() as u64;
        r.since = since.map(ts);
        r.first_error = first.map(|f| f.1);
        r.nics = nics.into_iter().collect();
        for &v in &mem {
            if let Key::Rank(..) = g.nodes[v].key {
                r.ranks.push(g.nodes[v].label.clone());
            }
        }
        // Everyone behind it: a walk back along the edges.
        let mut seen: BTreeSet<usize> = mem.clone();
        let mut todo: Vec<usize> = mem.iter().copied().collect();
        while let Some(v) = todo.pop() {
            for &s in &radj[v] {
                if seen.insert(s) {
                    todo.push(s);
                }
            }
        }
        r.blocked_ranks = (seen.len() - mem.len()) as u64;
        r.evidence = root_evidence(&r, &mem, g, run, since);
        let behind: Vec<String> = seen
            .difference(&mem)
            .map(|&v| g.nodes[v].label.clone())
            .collect();
        roots.push((r, behind));
    }
    roots.sort_by(|(a, _), (b, _)| {
        b.blocked_ranks
            .cmp(&a.blocked_ranks)
            .then(b.waiting_qps.cmp(&a.waiting_qps))
            .then(a.since.cmp(&b.since))
            .then(a.ranks.cmp(&b.ranks))
    });
    (hang.roots, hang.behind) = roots.into_iter().unzip();
}

pub(super) fn root_evidence(
    r: &Root,
    mem: &BTreeSet<usize>,
    g: &Graph,
    run: &Run,
    since: Option<i128>,
) -> String {
    let who = |v: usize| g.nodes[v].label.clone();
    let mut s = match r.kind {
        "cycle" => format!(
            "{} wait on each other and on nobody else",
            mem.iter()
                .map(|&v| who(v))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        _ => format!("{} waits on nobody", who(*mem.iter().next().unwrap_or(&0))),
    };
    s.push_str(&format!(
        "; {} QP{} on {} rank{} wait on {} ({} stalled, {} with errors{})",
        r.waiting_qps,
        if r.waiting_qps == 1 { "" } else { "s" },
        r.waiting_ranks,
        if r.waiting_ranks == 1 { "" } else { "s" },
        if r.kind == "cycle" { "them" } else { "it" },
        r.stalled_qps,
        r.errored_qps,
        if r.errors_by_status.is_empty() {
            String::new()
        } else {
            format!(": {}", status_list(&r.errors_by_status))
        }
    ));
    if let Some(t) = &r.since {
        s.push_str(&format!(", since {t}"));
    }
    if let Some(fe) = &r.first_error {
        s.push_str(&format!("; first error {fe}"));
    }
    if r.blocked_ranks > r.waiting_ranks {
        s.push_str(&format!(
            "; {} ranks blocked behind it in all",
            r.blocked_ranks
        ));
    }
    if r.kind == "rank" {
        let v = *mem.iter().next().unwrap_or(&0);
        match g.nodes[v].file {
            None => {
                s.push_str("; no file of it among the inputs (frozen, killed, or not collected)")
            }
            Some(fi) => {
                let f = &run.files[fi].file;
                let end = parse_timestamp_ns(&f.end_time);
                let kind = if f.is_final == Some(false) {
                    "snapshot"
                } else {
                    "final file"
                };
                if let (Some(e), Some(t)) = (end, since) {
                    if e < t {
                        s.push_str(&format!(
                            "; its latest file ({kind}, {}, {}) is older than the first wait on it: it stopped writing (frozen or stopped?)",
                            f.trigger.as_deref().unwrap_or("?"),
                            f.end_time
                        ));
                    }
                }
            }
        }
    }
    s
}
