//! What the files name but do not hold: the peer NICs and ranks a run's files talk to that no
//! file covers.
//!
//! A rank that died before writing, or whose file was not copied, leaves no trace of its own,
//! but its peers' files still name it: every QP and per-peer entry names its peer NIC (GID,
//! else LID), and a communicator says how many ranks it has. A peer NIC that no file's device
//! or QP is addressed by is *uncovered*; a communicator with fewer ranks in the files than its
//! `nranks` is short of ranks. Both are said (count, the first names) by `summary`, `outliers`,
//! `report` and `check`, because every verdict is about the files there are: a slow NIC among
//! the missing is in no finding, and a verdict on a NIC whose peers are missing rests on fewer
//! links ([`Completeness::uncovered_peers_of`], [`Completeness::qualify`]).
//!
//! Each file's [`Reach`] (the addresses it is reached by and those it names) is taken when the
//! file is parsed, before its QPs are pruned, so that a command keeping no QP still knows.

use crate::load::addr::{gid_addr, qp_addrs, Addr};
use crate::load::{Loaded, Run};
use crate::model::TelemetryFile;
use crate::outliers::{Caveat, Finding};
use crate::stats::fmt_count;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// How many names a line lists before "and N more".
pub const FIRST_NAMES: usize = 5;

/// A peer a device names: its GID (as a key, 0: none) and LID (0: none), how many QPs name it
/// (a per-peer entry's `num_qps`, else the QPs counted; at most u32::MAX), and the naming
/// device's index. 32 bytes: an all-to-all run of 1,024 ranks names a million.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    pub gid: u128,
    pub lid: u64,
    pub qps: u32,
    pub dev: u16,
}

/// What one file is reached by and names.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    pub host: String,
    /// The file's device names, by index.
    pub devices: Vec<String>,
    /// The GIDs (as keys) and LIDs its devices and QPs are addressed by.
    pub own_gids: Vec<u128>,
    pub own_lids: Vec<u64>,
    /// The peers its devices name, one entry per (device, peer).
    pub named: Vec<Named>,
    /// Its communicators: (hash, rank, nranks).
    pub comms: Vec<(String, i64, i64)>,
}

/// A GID as a key: its 128 bits, or for a GID that is no IPv6 address a hash of its text; 0
/// for none.
pub fn gid_key(g: Option<&str>) -> u128 {
    match gid_addr(g) {
        Some(Addr::Gid(b)) => b,
        Some(Addr::GidText(s)) => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            let a = h.finish();
            "gid".hash(&mut h);
            (u128::from(a) << 64) | u128::from(h.finish())
        }
        _ => 0,
    }
}

impl Reach {
    /// The reach of a parsed file (before its QPs are pruned).
    pub fn of(f: &TelemetryFile) -> Reach {
        let mut r = Reach {
            host: f.host_name.clone(),
            devices: f.devices.iter().map(|d| d.roce_device.clone()).collect(),
            ..Default::default()
        };
        let mut named: BTreeMap<(u16, u128, u64), u64> = BTreeMap::new();
        for (di, d) in f.devices.iter().enumerate() {
            let di = di.min(u16::MAX as usize) as u16;
            r.own_gids.push(gid_key(d.gid.as_deref()));
            r.own_lids.push(d.lid.unwrap_or(0));
            // The device's peers and its finalized communicators'.
            let mut has_peers = false;
            for p in d.all_peers() {
                has_peers = true;
                let k = (di, gid_key(p.gid.as_deref()), p.lid.unwrap_or(0));
                *named.entry(k).or_default() += p.num_qps.max(1);
            }
            for q in d.channels.iter().flat_map(|c| c.queue_pairs.iter()) {
                let (g, l) = qp_addrs(d, q);
                if let Some(Addr::Gid(b)) = g {
                    r.own_gids.push(b);
                }
                if let Some(Addr::Lid(l)) = l {
                    r.own_lids.push(l);
                }
                // A device without per-peer entries: its QPs name the peers.
                if let (Some(p), false) = (&q.peer, has_peers) {
                    let k = (di, gid_key(p.gid.as_deref()), p.lid.unwrap_or(0));
                    *named.entry(k).or_default() += 1;
                }
            }
        }
        r.named = named
            .into_iter()
            .filter(|((_, g, l), _)| *g != 0 || *l != 0)
            .map(|((dev, gid, lid), qps)| Named {
                gid,
                lid,
                qps: u32::try_from(qps).unwrap_or(u32::MAX),
                dev,
            })
            .collect();
        r.own_gids.retain(|x| *x != 0);
        r.own_lids.retain(|x| *x != 0);
        r.own_gids.sort_unstable();
        r.own_gids.dedup();
        r.own_lids.sort_unstable();
        r.own_lids.dedup();
        r.comms = f
            .communicators
            .iter()
            .flatten()
            .map(|c| (c.comm.hash.clone(), c.comm.rank, c.comm.nranks))
            .collect();
        r
    }

    /// True when the file names no peer and no communicator: nothing ties it to other files.
    pub fn is_unlinked(&self) -> bool {
        self.named.is_empty() && self.comms.is_empty()
    }
}

/// The reach of a loaded file: the one taken while reading, else taken now.
pub fn reach_of(l: &Loaded) -> Cow<'_, Reach> {
    match &l.reach {
        Some(r) => Cow::Borrowed(r),
        None => Cow::Owned(Reach::of(&l.file)),
    }
}

/// Every address the files are reached by.
#[derive(Debug, Default)]
pub struct Owners {
    pub gids: HashSet<u128>,
    pub lids: HashSet<u64>,
}

impl Owners {
    pub fn of<'a>(reaches: impl IntoIterator<Item = &'a Reach>) -> Owners {
        let mut o = Owners::default();
        for r in reaches {
            o.gids.extend(r.own_gids.iter().copied());
            o.lids.extend(r.own_lids.iter().copied());
        }
        o
    }

    /// True when some file is reached by the peer's GID or LID.
    pub fn covers(&self, n: &Named) -> bool {
        (n.gid != 0 && self.gids.contains(&n.gid)) || (n.lid != 0 && self.lids.contains(&n.lid))
    }
}

/// A peer NIC's name for people: the IPv4 address of an IPv4-mapped GID, else the GID, else
/// its LID.
pub fn peer_label(gid: u128, lid: u64) -> String {
    if gid == 0 {
        return format!("LID {lid}");
    }
    let a = std::net::Ipv6Addr::from(gid);
    match a.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => crate::load::addr::format_gid(gid),
    }
}

/// A communicator with fewer ranks in the files than it has.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CommGap {
    pub hash: String,
    pub nranks: i64,
    /// Its ranks that have a file.
    pub ranks_present: usize,
    /// The first of its ranks that have none.
    pub missing_first: Vec<i64>,
}

/// What the files name but do not hold.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Completeness {
    /// Distinct peer NICs the files name.
    pub peer_nics_named: usize,
    /// Of them, those no file is reached by.
    pub peer_nics_missing: usize,
    /// QPs (or per-peer entries' QPs) towards them.
    pub qps_to_missing: u64,
    /// The NICs of the files with a peer among them.
    pub nics_with_missing_peers: usize,
    /// The first of them by name (the most named first).
    pub missing_first: Vec<String>,
    /// Communicators short of ranks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub communicators: Vec<CommGap>,
    /// (host, device) -> how many of its peers are missing.
    #[serde(skip)]
    by_nic: HashMap<(String, String), usize>,
    /// (host, device) -> how many peers it names, covered or not.
    #[serde(skip)]
    named_by_nic: HashMap<(String, String), usize>,
}

impl Completeness {
    /// What the run's files name but do not hold.
    pub fn of_run(run: &Run) -> Completeness {
        let reaches: Vec<Cow<Reach>> = run.files.iter().map(reach_of).collect();
        Completeness::of(reaches.iter().map(|r| r.as_ref()))
    }

    /// What a set of files (by their reach) name but do not hold.
    pub fn of<'a>(reaches: impl Iterator<Item = &'a Reach> + Clone) -> Completeness {
        let owners = Owners::of(reaches.clone());
        let mut c = Completeness::default();
        let mut named: HashSet<(u128, u64)> = HashSet::new();
        // peer -> (QPs, NICs naming it)
        let mut missing: HashMap<(u128, u64), (u64, usize)> = HashMap::new();
        let mut comms: BTreeMap<&str, (i64, BTreeSet<i64>)> = BTreeMap::new();
        for r in reaches {
            for n in &r.named {
                let key = if n.gid != 0 { (n.gid, 0) } else { (0, n.lid) };
                named.insert(key);
                let dev = r.devices.get(n.dev as usize).cloned().unwrap_or_default();
                *c.named_by_nic.entry((r.host.clone(), dev)).or_default() += 1;
                if owners.covers(n) {
                    continue;
                }
                let m = missing.entry(key).or_default();
                m.0 = m.0.saturating_add(u64::from(n.qps));
                m.1 += 1;
                c.qps_to_missing = c.qps_to_missing.saturating_add(u64::from(n.qps));
                let dev = r.devices.get(n.dev as usize).cloned().unwrap_or_default();
                *c.by_nic.entry((r.host.clone(), dev)).or_default() += 1;
            }
            for (hash, rank, nranks) in &r.comms {
                let e = comms.entry(hash.as_str()).or_default();
                e.0 = e.0.max(*nranks);
                e.1.insert(*rank);
            }
        }
        c.peer_nics_named = named.len();
        c.peer_nics_missing = missing.len();
        c.nics_with_missing_peers = c.by_nic.len();
        let mut first: Vec<((u128, u64), (u64, usize))> = missing.into_iter().collect();
        first.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        c.missing_first = first
            .iter()
            .take(FIRST_NAMES)
            .map(|((g, l), _)| peer_label(*g, *l))
            .collect();
        c.communicators = comms
            .into_iter()
            .filter(|(_, (n, present))| (present.len() as i64) < *n)
            .map(|(hash, (nranks, present))| CommGap {
                hash: hash.to_string(),
                nranks,
                ranks_present: present.len(),
                missing_first: (0..nranks)
                    .filter(|r| !present.contains(r))
                    .take(FIRST_NAMES)
                    .collect(),
            })
            .collect();
        c
    }

    /// True when every peer the files name, and every rank of their communicators, has a file.
    pub fn is_complete(&self) -> bool {
        self.peer_nics_missing == 0 && self.communicators.is_empty()
    }

    /// How many of a NIC's peers are in no file: the hook a verdict's confidence reads (a
    /// verdict on a NIC rests on its links, and a link to a missing peer is not there).
    pub fn uncovered_peers_of(&self, host: &str, device: &str) -> usize {
        self.by_nic
            .get(&(host.to_string(), device.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The lines that say what is missing (none when complete).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.peer_nics_missing > 0 {
            out.push(format!(
                "{} of the {} peer NICs the files name are in no file ({} QPs of {} NICs go to them): {}; their ranks' files are missing (the rank died, its file was not copied, or it is of another run)",
                fmt_count(self.peer_nics_missing as u64),
                fmt_count(self.peer_nics_named as u64),
                fmt_count(self.qps_to_missing),
                fmt_count(self.nics_with_missing_peers as u64),
                and_more(&self.missing_first, self.peer_nics_missing)
            ));
        }
        for g in &self.communicators {
            let missing = (g.nranks as u64).saturating_sub(g.ranks_present as u64);
            let first: Vec<String> = g.missing_first.iter().map(|r| r.to_string()).collect();
            out.push(format!(
                "communicator {}: {} of its {} ranks have no file (ranks {})",
                g.hash,
                fmt_count(missing),
                fmt_count(g.nranks.max(0) as u64),
                and_more(&first, missing as usize)
            ));
        }
        out
    }

    /// The caveat `outliers` and the report print before their rows (none when complete).
    pub fn caveat(&self) -> Option<Caveat> {
        if self.is_complete() {
            return None;
        }
        Some(Caveat {
            kind: "missing_files",
            evidence: format!(
                "{}. Nothing about a rank without a file is in the findings, and a verdict on a NIC whose peers are missing rests on fewer links: it says so.",
                self.lines().join("; ")
            ),
        })
    }

    /// How many peers a NIC names, with a file or not.
    pub fn named_peers_of(&self, host: &str, device: &str) -> usize {
        self.named_by_nic
            .get(&(host.to_string(), device.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Says, in the evidence of each finding about a NIC with missing peers, how many are
    /// missing, and scales its confidence by the share of its peers that have a file: the
    /// verdict rests on that share of the links the job had.
    pub fn qualify(&self, findings: &mut [Finding]) {
        if self.by_nic.is_empty() {
            return;
        }
        for f in findings {
            let nics: Vec<(String, String)> = if f.nics.is_empty() {
                f.roce_device
                    .iter()
                    .map(|d| (f.host.clone(), d.clone()))
                    .collect()
            } else {
                f.nics.clone()
            };
            let n: usize = nics
                .iter()
                .map(|(h, d)| self.uncovered_peers_of(h, d))
                .sum();
            if n > 0 {
                let named: usize = nics.iter().map(|(h, d)| self.named_peers_of(h, d)).sum();
                f.confidence *= covered_share(n, named);
                f.evidence.push_str(&format!(
                    " (less sure: {n} of its {named} peers are in no file)"
                ));
            }
        }
    }
}

/// The share of `named` peers that have a file when `missing` of them have none (1 when it
/// names none).
fn covered_share(missing: usize, named: usize) -> f64 {
    if named == 0 {
        return 1.0;
    }
    named.saturating_sub(missing) as f64 / named as f64
}

/// "a, b, c and 48 more" of the first names of `total`.
pub fn and_more(first: &[String], total: usize) -> String {
    let more = total.saturating_sub(first.len());
    if more > 0 {
        format!("{} and {} more", first.join(", "), fmt_count(more as u64))
    } else {
        first.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Device, DevicePeer};

    fn dev(name: &str, gid: &str, peers: &[&str]) -> Device {
        Device {
            roce_device: name.into(),
            gid: Some(gid.into()),
            peers: Some(
                peers
                    .iter()
                    .map(|p| DevicePeer {
                        gid: Some((*p).into()),
                        num_qps: 2,
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn file(host: &str, d: Device) -> TelemetryFile {
        TelemetryFile {
            host_name: host.into(),
            devices: vec![d],
            ..Default::default()
        }
    }

    /// Three ranks in a ring, one file gone: its two neighbours name it, and each of them has
    /// one peer missing; the third's peers are all there.
    #[test]
    fn a_missing_rank_is_named_by_its_peers() {
        let a = file(
            "a",
            dev(
                "mlx5_0",
                "::ffff:10.0.0.1",
                &["::ffff:10.0.1.1", "::ffff:10.0.3.1"],
            ),
        );
        let b = file(
            "b",
            dev(
                "mlx5_0",
                "::ffff:10.0.1.1",
                &["::ffff:10.0.0.1", "::ffff:10.0.2.1"],
            ),
        );
        let c = file(
            "c",
            dev(
                "mlx5_0",
                "::ffff:10.0.2.1",
                &["::ffff:10.0.1.1", "::ffff:10.0.3.1"],
            ),
        );
        let reaches: Vec<Reach> = [&a, &b, &c].iter().map(|f| Reach::of(f)).collect();
        let c = Completeness::of(reaches.iter());
        assert_eq!(c.peer_nics_named, 4);
        assert_eq!(c.peer_nics_missing, 1);
        assert_eq!(c.qps_to_missing, 4);
        assert_eq!(c.missing_first, vec!["10.0.3.1".to_string()]);
        assert_eq!(c.uncovered_peers_of("a", "mlx5_0"), 1);
        assert_eq!(c.uncovered_peers_of("b", "mlx5_0"), 0);
        assert_eq!(c.named_peers_of("a", "mlx5_0"), 2);
        assert!(!c.is_complete());
        let line = &c.lines()[0];
        assert!(line.starts_with("1 of the 4 peer NICs the files name are in no file (4 QPs of 2 NICs go to them): 10.0.3.1;"), "{line}");
        let cav = c.caveat().expect("a caveat");
        assert_eq!(cav.kind, "missing_files");
    }

    /// A run whose peers all have files says nothing.
    #[test]
    fn a_whole_run_is_complete() {
        let a = file("a", dev("mlx5_0", "::ffff:10.0.0.1", &["::ffff:10.0.1.1"]));
        let b = file("b", dev("mlx5_0", "::ffff:10.0.1.1", &["::ffff:10.0.0.1"]));
        let reaches: Vec<Reach> = [&a, &b].iter().map(|f| Reach::of(f)).collect();
        let c = Completeness::of(reaches.iter());
        assert!(c.is_complete(), "{c:?}");
        assert!(c.lines().is_empty());
        assert!(c.caveat().is_none());
    }

    /// A communicator of 8 ranks with 6 files is short of ranks 2 and 5.
    #[test]
    fn a_communicator_counts_its_ranks() {
        let reaches: Vec<Reach> = [0, 1, 3, 4, 6, 7]
            .iter()
            .map(|&rank| Reach {
                comms: vec![("0xabc".into(), rank, 8)],
                ..Default::default()
            })
            .collect();
        let c = Completeness::of(reaches.iter());
        assert_eq!(
            c.communicators,
            vec![CommGap {
                hash: "0xabc".into(),
                nranks: 8,
                ranks_present: 6,
                missing_first: vec![2, 5],
            }]
        );
        assert_eq!(
            c.lines(),
            vec!["communicator 0xabc: 2 of its 8 ranks have no file (ranks 2, 5)".to_string()]
        );
    }

    #[test]
    fn peers_are_named_as_people_read_them() {
        assert_eq!(peer_label(gid_key(Some("::ffff:10.1.2.1")), 0), "10.1.2.1");
        assert_eq!(peer_label(0, 7), "LID 7");
        assert_eq!(
            peer_label(gid_key(Some("fe80::1")), 0),
            "fe80:0000:0000:0000:0000:0000:0000:0001"
        );
        assert_eq!(and_more(&["a".into(), "b".into()], 5), "a, b and 3 more");
    }
}
