//! The root of a hang: the wait-for graph across ranks, and the quiet-links rule.
//!
//! Rank A waits on B when A has a QP towards B (joined through `links`' QP index, else through
//! the peer's device GID or LID) that is stalled or has error completions (format version 4).
//! The roots are the sink components of that graph: a rank (or a peer NIC in no file) that
//! others wait on and that waits on nobody, or a cycle of ranks waiting on each other with
//! nothing beyond it. With nothing stalled or errored, the QPs' last post and completion times
//! (version 4) decide: the rank whose links all went quiet before every other rank's links
//! elsewhere, else the common end of the links that went quiet first, or the one link when one
//! went quiet alone. Each rank is read from its latest file (snapshot or final).
//! Separate from `stalls` (which lists what is stuck) because it is the one function that
//! `stalls`, `summary`, `outliers` and the report share for their hang line.

use crate::links::{lookup, norm_gid, qp_index, QpIndex};
use crate::load::Run;
use crate::model::{format_timestamp_ns, parse_timestamp_ns, QueuePair};
use crate::stats::fmt_ns;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One root of a hang, as `stalls --json` lists it under `roots`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Root {
    /// "rank": waited on, waits on nobody; "cycle": ranks waiting on each other and on nobody
    /// else; "quiet_end": the end common to the links that went quiet first; "quiet_link":
    /// the one link that went quiet first (either end).
    pub kind: &'static str,
    /// "host:pid" of each rank (empty for a peer that is in no file).
    pub ranks: Vec<String>,
    /// "host:device" of its NICs others wait on (or of the quiet links' ends); a NIC in no file
    /// by its address: "gid ... (not in the files)".
    pub nics: Vec<String>,
    /// False when no file of the run is this rank's (frozen, killed, or not collected).
    pub in_files: bool,
    /// QPs waiting on it (towards it, or inside the cycle), and on how many ranks.
    pub waiting_qps: u64,
    pub waiting_ranks: u64,
    pub stalled_qps: u64,
    pub errored_qps: u64,
    /// Ranks that wait on it directly or through others (members of a cycle not counted).
    pub blocked_ranks: u64,
    /// The earliest stall start or first error among those QPs; for the quiet rule, when the
    /// first links went quiet.
    pub since: Option<String>,
    /// Error completions of the waiting QPs by status.
    pub errors_by_status: BTreeMap<String, u64>,
    /// The earliest first error: "STATUS at TIME on host:device QP n".
    pub first_error: Option<String>,
    /// Quiet rule: the links that went quiet first ("a <-> b").
    pub quiet_links: Vec<String>,
    /// The evidence in one sentence.
    pub evidence: String,
}

/// What the graph says about a run.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Hang {
    /// "wait_for" (stalled or errored QPs), "quiet" (last-progress times) or "none".
    pub basis: &'static str,
    /// Ranks read (their latest file) and those with a QP waiting on another.
    pub ranks: usize,
    pub waiting_ranks: usize,
    pub stalled_qps: u64,
    pub errored_qps: u64,
    /// Stalled or errored QPs whose peer could not be resolved (no peer, ambiguous claim).
    pub unresolved_qps: u64,
    pub edges: usize,
    pub roots: Vec<Root>,
    /// Why no root is named, when none is.
    pub no_root: Option<String>,
    /// For each root (same order), the ranks ("host:pid") waiting on it directly or through
    /// others: the outliers fold their stalled and errored QPs into the root's row. Not in the
    /// JSON.
    #[serde(skip)]
    pub behind: Vec<Vec<String>>,
}

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Rank(String, i64),
    Absent(String),
}

struct Node {
    key: Key,
    label: String,
    /// Index of its latest file in the run.
    file: Option<usize>,
}

#[derive(Default)]
struct Edge {
    qps: u64,
    stalled: u64,
    errored: u64,
    since: Option<i128>,
    errors: BTreeMap<String, u64>,
    first_error: Option<(i128, String)>,
    dst_nics: BTreeSet<String>,
}

/// The latest file of each rank (host, pid, start time: `load::ranks`): the newest end_time,
/// a final file on a tie.
fn latest_files(run: &Run) -> BTreeMap<crate::load::ranks::RankKey, usize> {
    crate::load::ranks::latest_per_rank(&run.files)
}

struct Graph {
    nodes: Vec<Node>,
    index: HashMap<Key, usize>,
}

impl Graph {
    fn node(&mut self, key: Key, file: Option<usize>) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let label = match &key {
            Key::Rank(h, p) => format!("{h}:{p}"),
            Key::Absent(a) => a.clone(),
        };
        self.nodes.push(Node {
            key: key.clone(),
            label,
            file,
        });
        self.index.insert(key, self.nodes.len() - 1);
        self.nodes.len() - 1
    }
}

/// A peer resolved to its rank and NIC, or to its address when no file has it.
enum Peer {
    Rank(String, i64, String),
    Absent(String),
    Unresolved,
}

fn ns(s: Option<&str>) -> Option<i128> {
    s.and_then(parse_timestamp_ns)
}

fn min_opt(a: Option<i128>, b: Option<i128>) -> Option<i128> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Strongly connected components (Tarjan, iterative): the component of every node.
fn components(adj: &[Vec<usize>]) -> Vec<usize> {
    let n = adj.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0usize; n]);
    let (mut on, mut comp) = (vec![false; n], vec![usize::MAX; n]);
    let (mut stack, mut call) = (Vec::new(), Vec::<(usize, usize)>::new());
    let (mut next, mut nc) = (0usize, 0usize);
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        index[s] = next;
        low[s] = next;
        next += 1;
        stack.push(s);
        on[s] = true;
        call.push((s, 0));
        while let Some(top) = call.len().checked_sub(1) {
            let (v, i) = call[top];
            if i < adj[v].len() {
                call[top].1 += 1;
                let w = adj[v][i];
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    call.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on[w] = false;
                        comp[w] = nc;
                        if w == v {
                            break;
                        }
                    }
                    nc += 1;
                }
            }
        }
    }
    comp
}

fn ts(v: i128) -> String {
    format_timestamp_ns(v)
}

fn status_list(m: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves a QP's peer to its rank and NIC: by the QPs of the run, else by the device
/// addresses of the latest files.
struct PeerResolver<'a> {
    idx: std::borrow::Cow<'a, QpIndex>,
    /// Who owns each device GID and LID ("lid N") of the latest files.
    by_addr: HashMap<String, BTreeSet<(String, i64, String)>>,
}

impl<'a> PeerResolver<'a> {
    /// Indexes the QPs of the run and the device GIDs and LIDs of the latest files: a peer
    /// whose QPN no file claims (a QP created after its owner's last file) still names its NIC.
    fn new(run: &'a Run, latest: &BTreeMap<crate::load::ranks::RankKey, usize>) -> Self {
        let mut by_addr: HashMap<String, BTreeSet<(String, i64, String)>> = HashMap::new();
        for &fi in latest.values() {
            let f = &run.files[fi].file;
            for d in &f.devices {
                let who = (f.host_name.clone(), f.process_id, d.roce_device.clone());
                if let Some(g) = norm_gid(d.gid.as_deref()) {
                    by_addr.entry(g).or_default().insert(who.clone());
                }
                if let Some(l) = d.lid.filter(|l| *l > 0) {
                    by_addr.entry(format!("lid {l}")).or_default().insert(who);
                }
            }
        }
        PeerResolver {
            idx: qp_index(run),
            by_addr,
        }
    }

    /// The peer's rank and NIC, its address when no file has it, or Unresolved.
    fn resolve(&self, p: &crate::model::QpPeer) -> Peer {
        let claims = lookup(&self.idx, p.gid.as_deref(), p.lid, p.qp_num);
        let ranks: BTreeSet<(&String, i64)> = claims.iter().map(|c| (&c.0, c.1)).collect();
        if ranks.len() == 1 {
            let c = &claims[0];
            return Peer::Rank(c.0.clone(), c.1, format!("{}:{}", c.0, c.2));
        }
        if ranks.len() > 1 {
            return Peer::Unresolved;
        }
        let g = norm_gid(p.gid.as_deref());
        let key = g
            .clone()
            .or(p.lid.filter(|l| *l > 0).map(|l| format!("lid {l}")));
        let Some(key) = key else {
            return Peer::Unresolved;
        };
        match self.by_addr.get(&key) {
            Some(s) if s.len() == 1 => {
                let (h, pid, d) = s.iter().next().cloned().unwrap_or_default();
                Peer::Rank(h.clone(), pid, format!("{h}:{d}"))
            }
            Some(_) => Peer::Unresolved,
            None => {
                let what = match (&g, p.gid_ip.as_deref().filter(|s| !s.is_empty())) {
                    (Some(_), Some(ip)) => format!("gid {} ({ip})", g.clone().unwrap_or_default()),
                    (Some(g), None) => format!("gid {g}"),
                    _ => key,
                };
                Peer::Absent(format!("{what} (not in the files)"))
            }
        }
    }
}

impl Quiet {
    /// Notes a QP's progress at `t` on this link, from its lower end (`lo`) or its higher.
    fn note(
        &mut self,
        lo: bool,
        t: i128,
        observed: Option<i128>,
        post: Option<i128>,
        src_nic: &str,
        dst_nic: &str,
    ) {
        self.last = self.last.max(Some(t));
        self.observed = self.observed.max(observed);
        let e = if lo {
            &mut self.post_lo
        } else {
            &mut self.post_hi
        };
        *e = (*e).max(post);
        let nics = if lo {
            (&mut self.nic_lo, &mut self.nic_hi)
        } else {
            (&mut self.nic_hi, &mut self.nic_lo)
        };
        nics.0.insert(src_nic.to_string());
        nics.1.insert(dst_nic.to_string());
    }
}

impl Edge {
    /// Adds a stalled or errored QP of `src_nic` waiting on `dst_nic`.
    fn add(&mut self, q: &QueuePair, stalled: bool, errored: bool, src_nic: &str, dst_nic: String) {
        self.qps += 1;
        self.stalled += u64::from(stalled);
        self.errored += u64::from(errored);
        if stalled {
            self.since = min_opt(self.since, ns(q.stalled_since.as_deref()));
        }
        if let Some(fe) = &q.first_cq_error {
            let t = parse_timestamp_ns(&fe.time);
            self.since = min_opt(self.since, t);
            let what = format!(
                "{} at {} on {src_nic} QP {}{}",
                fe.status,
                fe.time,
                q.id,
                q.qp_num.map_or(String::new(), |n| format!(" (QPN {n})"))
            );
            let t = t.unwrap_or(i128::MAX);
            if self.first_error.as_ref().is_none_or(|(t0, _)| t < *t0) {
                self.first_error = Some((t, what));
            }
        }
        for (s, n) in q.cq_errors.iter().flat_map(|m| m.iter()) {
            *self.errors.entry(s.clone()).or_default() += n;
        }
        self.dst_nics.insert(dst_nic);
    }
}

/// The wait-for graph as it is built from the latest files, with the hang's QP counts.
struct GraphBuild<'a> {
    latest: &'a BTreeMap<crate::load::ranks::RankKey, usize>,
    peers: PeerResolver<'a>,
    g: Graph,
    hang: Hang,
    edges: BTreeMap<(usize, usize), Edge>,
    /// Links for the quiet rule: (lower node, higher node) -> acc.
    links: BTreeMap<(usize, usize), Quiet>,
}

impl GraphBuild<'_> {
    /// Adds a QP of node `src`, NIC `src_nic`, whose file was written at `end_ns`: its
    /// progress to its link, and an edge to its peer when it is stalled or errored.
    fn add_qp(&mut self, src: usize, src_nic: &str, end_ns: Option<i128>, q: &QueuePair) {
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
                // The node of every rank exists already; a peer in no file gets its first.
                let fi = self
                    .latest
                    .range((h.clone(), pid, String::new())..)
                    .next()
                    .filter(|(k, _)| k.0 == h && k.1 == pid)
                    .map(|(_, &i)| i);
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
        self.edges
            .entry((src, dst))
            .or_default()
            .add(q, stalled, errored, src_nic, dst_nic);
    }
}

/// Builds the wait-for graph of the run and names its roots.
pub fn analyse(run: &Run) -> Hang {
    let latest = latest_files(run);
    let mut b = GraphBuild {
        latest: &latest,
        peers: PeerResolver::new(run, &latest),
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
    };
    for (k, &fi) in &latest {
        b.g.node(Key::Rank(k.0.clone(), k.1), Some(fi));
    }
    let mut stall_ms: u64 = 0;
    for (k, &fi) in &latest {
        let f = &run.files[fi].file;
        stall_ms = stall_ms.max(f.stall_ms.unwrap_or(0));
        let src = b.g.index[&Key::Rank(k.0.clone(), k.1)];
        let end_ns = parse_timestamp_ns(&f.end_time);
        for d in &f.devices {
            let src_nic = format!("{}:{}", f.host_name, d.roce_device);
            for c in &d.channels {
                for q in &c.queue_pairs {
                    b.add_qp(src, &src_nic, end_ns, q);
                }
            }
        }
    }
    let GraphBuild {
        g,
        mut hang,
        edges,
        links,
        ..
    } = b;
    hang.edges = edges.len();
    hang.waiting_ranks = edges.keys().map(|(s, _)| *s).collect::<BTreeSet<_>>().len();
    if !edges.is_empty() {
        hang.basis = "wait_for";
        wait_for_roots(&g, &edges, run, &mut hang);
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

/// The sink components of the graph, each a root with its evidence.
fn wait_for_roots(g: &Graph, edges: &BTreeMap<(usize, usize), Edge>, run: &Run, hang: &mut Hang) {
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

fn root_evidence(
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

/// One link's last progress (the quiet rule).
#[derive(Default)]
struct Quiet {
    last: Option<i128>,
    observed: Option<i128>,
    post_lo: Option<i128>,
    post_hi: Option<i128>,
    nic_lo: BTreeSet<String>,
    nic_hi: BTreeSet<String>,
}

/// A quiet link: its (lower node, higher node), its progress, and when it went quiet.
type QuietLink<'a> = (&'a (usize, usize), &'a Quiet, i128);

/// The links that went quiet first (within one check of the first), which a quiet root
/// is named from.
struct QuietFirst<'a> {
    g: &'a Graph,
    first: Vec<QuietLink<'a>>,
    /// When the first link went quiet.
    t0: i128,
    tick_ns: i128,
    /// What came next, for the evidence: the next link to go quiet or those still busy.
    next: String,
    /// How far apart the first links went quiet: one check for the first-links rule, the
    /// span of the root's own links for the quiet-rank rule.
    span_ns: i128,
}

impl QuietFirst<'_> {
    /// A link's name: its two ends.
    fn link_name(&self, k: &(usize, usize)) -> String {
        format!(
            "{} <-> {}",
            self.g.nodes[k.0].label, self.g.nodes[k.1].label
        )
    }

    /// A root of `kind` from the first quiet links, its names and evidence left to fill.
    fn base(&self, kind: &'static str) -> Root {
        Root {
            kind,
            ranks: Vec::new(),
            nics: Vec::new(),
            in_files: true,
            waiting_qps: 0,
            waiting_ranks: 0,
            stalled_qps: 0,
            errored_qps: 0,
            blocked_ranks: 0,
            since: Some(ts(self.t0)),
            errors_by_status: BTreeMap::new(),
            first_error: None,
            quiet_links: self.first.iter().map(|q| self.link_name(q.0)).collect(),
            evidence: String::new(),
        }
    }

    /// The NICs of node `v` on the first quiet links.
    fn nics_of(&self, v: usize) -> Vec<String> {
        let mut s = BTreeSet::new();
        for q in &self.first {
            if q.0 .0 == v {
                s.extend(q.1.nic_lo.iter().cloned());
            }
            if q.0 .1 == v {
                s.extend(q.1.nic_hi.iter().cloned());
            }
        }
        s.into_iter().collect()
    }

    /// Node `v` as a rank ("host:pid"), none when it is an absent peer.
    fn rank_of(&self, v: usize) -> Vec<String> {
        match self.g.nodes[v].key {
            Key::Rank(..) => vec![self.g.nodes[v].label.clone()],
            Key::Absent(_) => Vec::new(),
        }
    }

    /// The root when one link went quiet first: either end, the one that posted last first.
    fn link_root(&self) -> Root {
        let g = self.g;
        let (k, l, _) = self.first[0];
        let mut r = self.base("quiet_link");
        r.ranks = self
            .rank_of(k.0)
            .into_iter()
            .chain(self.rank_of(k.1))
            .collect();
        r.nics = l.nic_lo.iter().chain(&l.nic_hi).cloned().collect();
        r.in_files = g.nodes[k.0].file.is_some() && g.nodes[k.1].file.is_some();
        let who_first = match (l.post_lo, l.post_hi) {
            (Some(a), Some(b)) if b - a > self.tick_ns => format!(
                "; {} posted last at {}, {} at {}",
                g.nodes[k.0].label,
                ts(a),
                g.nodes[k.1].label,
                ts(b)
            ),
            (Some(a), Some(b)) if a - b > self.tick_ns => format!(
                "; {} posted last at {}, {} at {}",
                g.nodes[k.1].label,
                ts(b),
                g.nodes[k.0].label,
                ts(a)
            ),
            _ => String::new(),
        };
        r.evidence = format!(
            "nothing is stalled or errored; the link {} went quiet first, at {} ({}): either end{who_first}",
            self.link_name(k),
            ts(self.t0),
            self.next
        );
        r
    }

    /// The root when the first quiet links all have node `v` at one end.
    fn end_root(&self, v: usize) -> Root {
        let (g, first) = (self.g, &self.first);
        let mut r = self.base("quiet_end");
        r.ranks = self.rank_of(v);
        r.nics = self.nics_of(v);
        r.in_files = g.nodes[v].file.is_some();
        // The last post on the first links by v's side (own) or by its peers' side.
        let last_post = |own: bool| {
            first
                .iter()
                .filter_map(|q| {
                    if (q.0 .0 == v) == own {
                        q.1.post_lo
                    } else {
                        q.1.post_hi
                    }
                })
                .max()
        };
        let (own_post, peer_post) = (last_post(true), last_post(false));
        r.evidence = format!(
            "nothing is stalled or errored; the {} links that went quiet first, at {} (within {}; {}), all have {} at one end{}",
            first.len(),
            ts(self.t0),
            fmt_ns(self.span_ns as f64),
            self.next,
            g.nodes[v].label,
            match (own_post, peer_post) {
                (Some(a), Some(b)) => format!("; its last post on them at {}, its peers' at {}", ts(a), ts(b)),
                (Some(a), None) => format!("; its last post on them at {}", ts(a)),
                _ => String::new(),
            }
        );
        r
    }
}

/// The quiet-rank rule: the rank whose links (two or more) all went quiet more than one check
/// before every other rank's links elsewhere (not to it) did. A frozen rank's links go quiet as
/// its peers drain the credits it had given them, which on a loaded host can end a check later
/// on one link than on another, while its peers' links to each other go on until they too block
/// on it. At least one other rank must have such a link: with nothing but the root's links
/// there is nothing to compare with. Returns the root's node and its links as the first ones.
fn quiet_rank<'a>(
    g: &'a Graph,
    links: &'a BTreeMap<(usize, usize), Quiet>,
    quiet: &[QuietLink<'a>],
    tick_ns: i128,
) -> Option<(usize, QuietFirst<'a>)> {
    let at: HashMap<(usize, usize), i128> = quiet.iter().map(|q| (*q.0, q.2)).collect();
    // When the last of a set of links went quiet; None when one of them is still busy.
    let all_quiet = |ks: &mut dyn Iterator<Item = &(usize, usize)>| {
        let mut last = i128::MIN;
        for k in ks {
            last = last.max(*at.get(k)?);
        }
        Some(last)
    };
    let mut of_node: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for k in links.keys() {
        of_node.entry(k.0).or_default().push(*k);
        of_node.entry(k.1).or_default().push(*k);
    }
    let (v, tv) = of_node
        .iter()
        .filter(|(_, ks)| ks.len() >= 2)
        .filter_map(|(&v, ks)| Some((v, all_quiet(&mut ks.iter())?)))
        .min_by_key(|&(v, t)| (t, v))?;
    let mut next: Option<i128> = None;
    let mut witnesses = 0usize;
    for (&u, ks) in &of_node {
        let mut elsewhere = ks.iter().filter(|k| k.0 != v && k.1 != v).peekable();
        if u == v || elsewhere.peek().is_none() {
            continue;
        }
        witnesses += 1;
        if let Some(t) = all_quiet(&mut elsewhere) {
            if t - tv <= tick_ns {
                return None;
            }
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    if witnesses == 0 {
        return None;
    }
    let mut first: Vec<QuietLink<'a>> = of_node[&v]
        .iter()
        .filter_map(|k| links.get_key_value(k).map(|(k, l)| (k, l, at[k])))
        .collect();
    first.sort_by_key(|q| q.2);
    let t0 = first[0].2;
    let next = match next {
        Some(t) => format!(
            "every other rank's links elsewhere went quiet at {} or later",
            ts(t)
        ),
        None => "the other ranks' links elsewhere were still making progress".into(),
    };
    let span_ns = (tv - t0).max(tick_ns);
    Some((
        v,
        QuietFirst {
            g,
            first,
            t0,
            tick_ns,
            next,
            span_ns,
        },
    ))
}

/// The quiet rule, when nothing is stalled or errored: the link, or the rank at one end of
/// every link, that went quiet first (no progress for `quiet_ms` before its file).
fn quiet_roots(
    g: &Graph,
    links: &BTreeMap<(usize, usize), Quiet>,
    quiet_ms: u64,
    tick_ms: u64,
    hang: &mut Hang,
) {
    if links.is_empty() {
        hang.no_root = Some(
            "nothing is stalled or errored, and no QP has last-progress times (format version 4): nothing to go on"
                .into(),
        );
        return;
    }
    let quiet_ns = quiet_ms as i128 * 1_000_000;
    let tick_ns = tick_ms as i128 * 1_000_000;
    let mut quiet: Vec<QuietLink> = links
        .iter()
        .filter_map(|(k, l)| {
            let (t, o) = (l.last?, l.observed?);
            (o - t >= quiet_ns).then_some((k, l, t))
        })
        .collect();
    if quiet.is_empty() {
        hang.no_root = Some(format!(
            "nothing is stalled or errored, and every link made progress within {} of its files being written",
            fmt_ns(quiet_ns as f64)
        ));
        return;
    }
    quiet.sort_by_key(|q| q.2);
    let t0 = quiet[0].2;
    let first: Vec<QuietLink> = quiet
        .iter()
        .filter(|q| q.2 - t0 <= tick_ns)
        .copied()
        .collect();
    if first.len() == links.len() {
        hang.no_root = Some(format!(
            "nothing is stalled or errored, and all {} links went quiet within one check ({}) of each other, at {}: the times cannot tell which stopped first",
            links.len(),
            fmt_ns(tick_ns as f64),
            ts(t0)
        ));
        return;
    }
    hang.basis = "quiet";
    if let Some((v, qf)) = quiet_rank(g, links, &quiet, tick_ns) {
        hang.roots = vec![qf.end_root(v)];
        return;
    }
    let later = quiet.get(first.len()).map(|q| q.2);
    let mut ends: BTreeMap<usize, usize> = BTreeMap::new();
    for q in &first {
        *ends.entry(q.0 .0).or_default() += 1;
        *ends.entry(q.0 .1).or_default() += 1;
    }
    let next = match later {
        Some(t) => format!("the next went quiet at {}", ts(t)),
        None => format!(
            "{} other links were still making progress",
            links.len() - first.len()
        ),
    };
    let qf = QuietFirst {
        g,
        first,
        t0,
        tick_ns,
        next,
        span_ns: tick_ns,
    };
    if qf.first.len() == 1 {
        hang.roots = vec![qf.link_root()];
        return;
    }
    let (&v, &cnt) = ends
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .unwrap_or((&0, &0));
    if cnt < qf.first.len() {
        hang.basis = "none";
        let mut names: Vec<String> = qf.first.iter().take(6).map(|q| qf.link_name(q.0)).collect();
        if qf.first.len() > 6 {
            names.push(format!("and {} more", qf.first.len() - 6));
        }
        hang.no_root = Some(format!(
            "nothing is stalled or errored; {} links went quiet first, at {} (within {}), with no end common to all of them: {}",
            qf.first.len(),
            ts(t0),
            fmt_ns(tick_ns as f64),
            names.join(", ")
        ));
        return;
    }
    hang.roots = vec![qf.end_root(v)];
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
    fn components_find_cycles_and_leave_chains_apart() {
        // 0 -> 1 -> 2 <-> 3, 4 -> 2, 5 alone with a self-loop.
        let adj = vec![vec![1], vec![2], vec![3], vec![2], vec![2], vec![5]];
        let c = components(&adj);
        assert_eq!(c[2], c[3]);
        let distinct: BTreeSet<usize> = [c[0], c[1], c[2], c[4], c[5]].into_iter().collect();
        assert_eq!(distinct.len(), 5, "{c:?}");
    }

    #[test]
    fn a_long_chain_does_not_recurse() {
        let n = 200_000;
        let adj: Vec<Vec<usize>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        let c = components(&adj);
        assert_eq!(c.iter().collect::<BTreeSet<_>>().len(), n);
    }

    /// A graph of ranks 0..n and links whose progress ended at the given seconds (None: still
    /// busy at the files' time, 100 s).
    fn quiet_graph(
        n: usize,
        ends: &[(usize, usize, Option<i128>)],
    ) -> (Graph, BTreeMap<(usize, usize), Quiet>) {
        let mut g = Graph {
            nodes: Vec::new(),
            index: HashMap::new(),
        };
        for r in 0..n {
            g.node(Key::Rank(format!("h{r}"), 1), Some(r));
        }
        let s = 1_000_000_000i128;
        let links = ends
            .iter()
            .map(|&(a, b, t)| {
                let mut q = Quiet::default();
                q.note(
                    true,
                    t.map_or(100 * s, |t| t * s),
                    Some(100 * s),
                    None,
                    "x",
                    "y",
                );
                ((a, b), q)
            })
            .collect();
        (g, links)
    }

    /// The node `quiet_rank` names, with a one-second check.
    fn quiet_rank_of(n: usize, ends: &[(usize, usize, Option<i128>)]) -> Option<usize> {
        let (g, links) = quiet_graph(n, ends);
        let s = 1_000_000_000i128;
        let quiet: Vec<QuietLink> = links
            .iter()
            .filter(|(_, l)| l.last < Some(90 * s))
            .map(|(k, l)| (k, l, l.last.unwrap_or_default()))
            .collect();
        quiet_rank(&g, &links, &quiet, s).map(|(v, _)| v)
    }

    #[test]
    fn the_quiet_rank_is_the_one_whose_links_all_went_quiet_before_the_others() {
        // Rank 1 stopped: 0-1 quiet at 10 s, 1-2 two checks later; 0-2 went on to 20 s.
        assert_eq!(
            quiet_rank_of(3, &[(0, 1, Some(10)), (1, 2, Some(12)), (0, 2, Some(20))]),
            Some(1)
        );
        // ... or is still busy.
        assert_eq!(
            quiet_rank_of(3, &[(0, 1, Some(10)), (1, 2, Some(12)), (0, 2, None)]),
            Some(1)
        );
        // The others' links went quiet within one check of its last: the times cannot tell.
        assert_eq!(
            quiet_rank_of(3, &[(0, 1, Some(10)), (1, 2, Some(12)), (0, 2, Some(13))]),
            None
        );
        // A star: nothing but the centre's links to compare with.
        assert_eq!(
            quiet_rank_of(3, &[(0, 1, Some(10)), (0, 2, Some(12))]),
            None
        );
        // One link alone went quiet: no rank has all of its links quiet.
        assert_eq!(
            quiet_rank_of(
                4,
                &[(0, 1, Some(10)), (1, 2, None), (0, 3, None), (2, 3, None)]
            ),
            None
        );
        // A rank with a single link is never named by it (either end could have stopped).
        assert_eq!(quiet_rank_of(3, &[(0, 1, Some(10)), (1, 2, None)]), None);
    }

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
