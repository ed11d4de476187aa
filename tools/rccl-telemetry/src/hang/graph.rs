//! The wait-for graph: its nodes (ranks, and peers in no file), its edges (the stalled or
//! errored QPs of one rank towards another) and its strongly connected components.

use crate::model::{format_timestamp_ns, parse_timestamp_ns, QueuePair};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Key {
    Rank(String, i64),
    Absent(String),
}

pub(super) struct Node {
    pub(super) key: Key,
    pub(super) label: String,
    /// Index of its latest file in the run.
    pub(super) file: Option<usize>,
}

#[derive(Default)]
pub(super) struct Edge {
    pub(super) qps: u64,
    pub(super) stalled: u64,
    pub(super) errored: u64,
    pub(super) since: Option<i128>,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) first_error: Option<(i128, String)>,
    pub(super) dst_nics: BTreeSet<String>,
}

pub(super) struct Graph {
    pub(super) nodes: Vec<Node>,
    pub(super) index: HashMap<Key, usize>,
}

impl Graph {
    pub(super) fn node(&mut self, key: Key, file: Option<usize>) -> usize {
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

pub(super) fn ns(s: Option<&str>) -> Option<i128> {
    s.and_then(parse_timestamp_ns)
}

pub(super) fn min_opt(a: Option<i128>, b: Option<i128>) -> Option<i128> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Strongly connected components (Tarjan, iterative): the component of every node.
pub(super) fn components(adj: &[Vec<usize>]) -> Vec<usize> {
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

pub(super) fn ts(v: i128) -> String {
    format_timestamp_ns(v)
}

impl Edge {
    /// Adds a stalled or errored QP of `src_nic` waiting on `dst_nic`.
    pub(super) fn add(
        &mut self,
        q: &QueuePair,
        stalled: bool,
        errored: bool,
        src_nic: &str,
        dst_nic: String,
    ) {
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
}
