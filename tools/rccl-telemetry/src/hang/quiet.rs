//! The quiet rule, when nothing is stalled or errored: the rank, or the link, whose QPs' last
//! post and completion times went quiet first.

use super::graph::{ts, Graph, Key};
use super::root::{Hang, Root};
use crate::stats::fmt_ns;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One link's last progress (the quiet rule).
#[derive(Default)]
pub(super) struct Quiet {
    last: Option<i128>,
    observed: Option<i128>,
    post_lo: Option<i128>,
    post_hi: Option<i128>,
    nic_lo: BTreeSet<String>,
    nic_hi: BTreeSet<String>,
}

/// A quiet link: its (lower node, higher node), its progress, and when it went quiet.
pub(super) type QuietLink<'a> = (&'a (usize, usize), &'a Quiet, i128);

/// The links that went quiet first (within one check of the first), which a quiet root
/// is named from.
pub(super) struct QuietFirst<'a> {
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
pub(super) fn quiet_rank<'a>(
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
pub(super) fn quiet_roots(
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

impl Quiet {
    /// Notes a QP's progress at `t` on this link, from its lower end (`lo`) or its higher.
    pub(super) fn note(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
