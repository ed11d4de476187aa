//! Who a generated rank with peers is connected to (`generate --peers --topology`): the shapes
//! RCCL builds on a rail-optimised fabric. Rank `r` is NIC `l = r % ranks_per_host` of host
//! `h = r / ranks_per_host`; a rail is the NIC `l` of every host, and the network paths of
//! rings and trees run along rails (the hops inside a host go over xGMI, not the NICs). With a
//! single host every rank is its own position on one rail.
//!
//! - `ring`: each rail a ring over its hosts: two peers per rank.
//! - `tree`: RCCL's double binary tree per rail: a binary tree over the hosts and its mirror
//!   (position `i` as `P-1-i`), so a rank is an inner node of at most one: up to 6 peers.
//! - `rail` (the default): ring and trees together, what an all-reduce job's ranks hold QPs
//!   to: up to 8 peers, links growing linearly with the ranks.
//! - `alltoall`: every rank to every rank of the other hosts (every other rank on one host), as
//!   all-to-all collectives over PXN do: links growing with the square of the ranks.

/// The connection shape of a generated run with peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    #[default]
    Rail,
    Ring,
    Tree,
    AllToAll,
}

impl Topology {
    pub const NAMES: [&'static str; 4] = ["rail", "ring", "tree", "alltoall"];

    pub fn from_name(s: &str) -> Option<Topology> {
        match s {
            "rail" => Some(Topology::Rail),
            "ring" => Some(Topology::Ring),
            "tree" => Some(Topology::Tree),
            "alltoall" | "all-to-all" => Some(Topology::AllToAll),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Rail => "rail",
            Topology::Ring => "ring",
            Topology::Tree => "tree",
            Topology::AllToAll => "alltoall",
        }
    }
}

/// The connected rank pairs (a < b), sorted, each once.
pub fn edges(t: Topology, ranks: usize, per_host: usize) -> Vec<(usize, usize)> {
    let per_host = per_host.max(1);
    let hosts = ranks.div_ceil(per_host);
    let mut e: Vec<(usize, usize)> = Vec::new();
    if t == Topology::AllToAll {
        for a in 0..ranks {
            for b in a + 1..ranks {
                if hosts == 1 || a / per_host != b / per_host {
                    e.push((a, b));
                }
            }
        }
        return e;
    }
    let rails: Vec<Vec<usize>> = if hosts == 1 {
        vec![(0..ranks).collect()]
    } else {
        (0..per_host)
            .map(|l| {
                (0..hosts)
                    .map(|h| h * per_host + l)
                    .filter(|r| *r < ranks)
                    .collect()
            })
            .collect()
    };
    for m in &rails {
        let p = m.len();
        if p < 2 {
            continue;
        }
        if matches!(t, Topology::Ring | Topology::Rail) {
            for i in 0..p {
                e.push((m[i], m[(i + 1) % p]));
            }
        }
        if matches!(t, Topology::Tree | Topology::Rail) {
            for i in 1..p {
                let parent = (i - 1) / 2;
                e.push((m[i], m[parent]));
                e.push((m[p - 1 - i], m[p - 1 - parent]));
            }
        }
    }
    let mut e: Vec<(usize, usize)> = e
        .into_iter()
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect();
    e.sort_unstable();
    e.dedup();
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn degree(e: &[(usize, usize)], ranks: usize) -> Vec<usize> {
        let mut d = vec![0; ranks];
        for (a, b) in e {
            d[*a] += 1;
            d[*b] += 1;
        }
        d
    }

    #[test]
    fn a_ring_of_four_hosts_per_rail() {
        // 4 hosts of 2: rail 0 is ranks 0, 2, 4, 6.
        let e = edges(Topology::Ring, 8, 2);
        assert_eq!(
            e,
            vec![
                (0, 2),
                (0, 6),
                (1, 3),
                (1, 7),
                (2, 4),
                (3, 5),
                (4, 6),
                (5, 7)
            ]
        );
    }

    #[test]
    fn the_double_tree_and_its_mirror() {
        // One rail of 7 hosts: tree 0-(1,2), 1-(3,4), 2-(5,6); the mirror 6-(5,4), 5-(3,2), 4-(1,0).
        let e = edges(Topology::Tree, 7, 1);
        let want: BTreeSet<(usize, usize)> = [
            (0, 1),
            (0, 2),
            (1, 3),
            (1, 4),
            (2, 5),
            (2, 6),
            (5, 6),
            (4, 6),
            (3, 5),
            (2, 5),
            (1, 4),
            (0, 4),
        ]
        .into_iter()
        .collect();
        assert_eq!(e.into_iter().collect::<BTreeSet<_>>(), want);
    }

    proptest! {
        /// Every shape stays on its rails and within its degree; rail is ring and tree
        /// together; all-to-all joins every pair of ranks on different hosts.
        #[test]
        fn shapes_hold_their_rules(ranks in 1usize..80, per_host in 1usize..9) {
            let hosts = ranks.div_ceil(per_host);
            let ring = edges(Topology::Ring, ranks, per_host);
            let tree = edges(Topology::Tree, ranks, per_host);
            let rail = edges(Topology::Rail, ranks, per_host);
            let all = edges(Topology::AllToAll, ranks, per_host);
            for (e, max) in [(&ring, 2), (&tree, 6), (&rail, 8)] {
                for (a, b) in e.iter() {
                    prop_assert!(a < b && *b < ranks);
                    if hosts > 1 {
                        prop_assert_eq!(a % per_host, b % per_host, "off its rail");
                        prop_assert_ne!(a / per_host, b / per_host, "inside a host");
                    }
                }
                prop_assert!(degree(e, ranks).iter().all(|d| *d <= max));
                let set: BTreeSet<_> = e.iter().collect();
                prop_assert_eq!(set.len(), e.len());
            }
            let union: BTreeSet<_> = ring.iter().chain(tree.iter()).copied().collect();
            prop_assert_eq!(rail.iter().copied().collect::<BTreeSet<_>>(), union);
            let want = if hosts == 1 { ranks * ranks.saturating_sub(1) / 2 } else {
                (0..ranks).flat_map(|a| (a + 1..ranks).map(move |b| (a, b))).filter(|(a, b)| a / per_host != b / per_host).count()
            };
            prop_assert_eq!(all.len(), want);
            // A rail of two or more positions is connected by its ring: every such rank has a peer.
            let d = degree(&rail, ranks);
            for (r, deg) in d.iter().enumerate() {
                let on_rail = if hosts == 1 { ranks } else { (0..hosts).filter(|h| h * per_host + r % per_host < ranks).count() };
                prop_assert_eq!(*deg > 0, on_rail > 1);
            }
        }
    }
}
