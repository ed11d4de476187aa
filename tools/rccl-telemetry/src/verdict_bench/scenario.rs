//! The verdict benchmark's scenarios, scored honestly: every class on the rail, ring, tree and
//! all-to-all topologies, from 2 ranks up, under the generator's noise, planted by the generator
//! or by editing a healthy run's files ([`super::edit`]: one NIC's row, column or both, one
//! link, one direction, one host, two NICs of one rail, a late-polling process with a slow
//! link at it; whole histograms scaled 2.5x to 4x, or only their slowest quarter 3x).
//!
//! Every row `outliers` gives is judged: right when it names a planted culprit by its kind (a
//! `slow_link_or_nic` row when one of its alternatives does: what the links can tell on a
//! two-host link), wrong when it names anything else, whatever its kind (a healthy
//! neighbour's `latency_tail` included). A row of a culprit's kind counts for that class, any
//! other row for the class of the run it is on. Per class: precision is right rows over judged
//! rows, recall the share of runs every culprit of which is named. A healthy run is right when
//! it has no finding at all.

use super::edit::{self, Edit, NicName, Target};
use crate::generate::{generate_fabric, GenOptions, Plant, Planted, Topology};
use crate::outliers::{find, Kind, Options};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The classes scored (the hang's root is scored by the generated grid).
pub const CLASSES: [&str; 8] = [
    "healthy",
    "slow_nic",
    "slow_link",
    "slow_link_one_way",
    "slow_host",
    "host_side_delay",
    "qp_tclass",
    "qp_mtu",
];

/// Targets: per class, precision and recall, at every size; no finding on a healthy run.
pub const MIN_PRECISION: f64 = 0.98;
pub const MIN_RECALL: f64 = 0.95;

/// How a scenario's culprit is planted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Planting {
    /// Nothing.
    Healthy,
    /// By the generator (`generate --peers --plant`): the class's own plant.
    Generated(&'static str),
    /// Edited into a healthy run: a NIC's row and column (a slow NIC), only the slowest
    /// quarter of them 3x (a NIC slow in its tail), its column (its receive side), its row (a
    /// process polling late); a link both ways, one direction; every NIC of a host; two NICs
    /// of one rail; a late-polling process with a slow link at it.
    NicBoth,
    NicTail,
    NicColumn,
    NicRow,
    Link,
    LinkOneWay,
    Host,
    TwoNicsOnARail,
    HostSideAndLink,
    /// Every QP told the same settings (a healthy run of a transport that tells them), or all
    /// but one NIC's first QP: its traffic class 0 (a connection on another priority), or its
    /// path MTU 1024.
    AttrsUniform,
    AttrsTclass,
    AttrsMtu,
}

/// Every planting of a class or an edit, in the order the tables list them.
pub const PLANTINGS: [Planting; 18] = [
    Planting::Healthy,
    Planting::Generated("slow_nic"),
    Planting::Generated("slow_link"),
    Planting::Generated("slow_link_one_way"),
    Planting::Generated("slow_host"),
    Planting::Generated("host_side_delay"),
    Planting::NicBoth,
    Planting::NicTail,
    Planting::NicColumn,
    Planting::NicRow,
    Planting::Link,
    Planting::LinkOneWay,
    Planting::Host,
    Planting::TwoNicsOnARail,
    Planting::HostSideAndLink,
    Planting::AttrsUniform,
    Planting::AttrsTclass,
    Planting::AttrsMtu,
];

impl Planting {
    /// The class its runs are scored as.
    pub fn class(self) -> &'static str {
        match self {
            Planting::Healthy | Planting::AttrsUniform => "healthy",
            Planting::Generated(c) => c,
            Planting::AttrsTclass => "qp_tclass",
            Planting::AttrsMtu => "qp_mtu",
            Planting::NicBoth
            | Planting::NicTail
            | Planting::NicColumn
            | Planting::TwoNicsOnARail => "slow_nic",
            Planting::NicRow | Planting::HostSideAndLink => "host_side_delay",
            Planting::Link => "slow_link",
            Planting::LinkOneWay => "slow_link_one_way",
            Planting::Host => "slow_host",
        }
    }

    /// Its name in the tables: "generated slow_nic", "edited nic row".
    pub fn name(self) -> String {
        match self {
            Planting::Healthy => "healthy".into(),
            Planting::Generated(c) => format!("generated {c}"),
            Planting::NicBoth => "edited nic row+column".into(),
            Planting::NicTail => "edited nic tail only".into(),
            Planting::NicColumn => "edited nic column".into(),
            Planting::NicRow => "edited nic row".into(),
            Planting::Link => "edited link".into(),
            Planting::LinkOneWay => "edited one way".into(),
            Planting::Host => "edited host".into(),
            Planting::TwoNicsOnARail => "edited two nics of a rail".into(),
            Planting::HostSideAndLink => "edited nic row + its link".into(),
            Planting::AttrsUniform => "edited qp settings, all alike".into(),
            Planting::AttrsTclass => "edited qp traffic class".into(),
            Planting::AttrsMtu => "edited qp path mtu".into(),
        }
    }
}

/// One labelled run.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub planting: Planting,
    pub topology: &'static str,
    /// Ranks (one NIC each) and ranks per host.
    pub nics: usize,
    pub per_host: usize,
    pub seed: u64,
    pub noise: &'static str,
}

impl Scenario {
    fn hosts(&self) -> usize {
        self.nics.div_ceil(self.per_host.max(1))
    }

    /// Whether the planting can be told at this size: two ranks have no healthy link to
    /// compare with (nothing is named, a caveat says why); a slow host needs two NICs a host
    /// and three hosts (of two, every link is slow alike); two NICs of one rail need four
    /// hosts and other rails (of four NICs, two slow make ten of the twelve links slow: the
    /// two healthy ones read as a faster tier), a late poller with a slow link three hosts.
    /// A QP's settings are compared with its NIC's other QPs, its peer's and the run's: two
    /// ranks of one QP each have none of these to go by (both ends are named), three do.
    pub fn applicable(&self) -> bool {
        let hosts = self.hosts();
        match self.planting {
            Planting::Healthy | Planting::AttrsUniform => true,
            Planting::AttrsTclass | Planting::AttrsMtu => self.nics >= 3,
            _ if self.nics < 3 || hosts < 2 => false,
            Planting::Host | Planting::Generated("slow_host") => hosts >= 3 && self.per_host >= 2,
            Planting::TwoNicsOnARail => hosts >= 4 && self.per_host >= 2,
            Planting::HostSideAndLink => hosts >= 3,
            _ => true,
        }
    }

    /// The factor of an edit: 2.5x, 3x or 4x by the seed (a cell at 2x is at the classifier's
    /// practical threshold, `min_ratio`, by definition); 3x for the tail only.
    fn factor(&self) -> f64 {
        match self.planting {
            Planting::NicTail => 3.0,
            _ => [2.5, 3.0, 4.0][(self.seed % 3) as usize],
        }
    }

    fn options(&self) -> GenOptions {
        let noise: Vec<String> = match self.noise {
            "none" => Vec::new(),
            n => vec![n.to_string()],
        };
        GenOptions {
            ranks: self.nics,
            ranks_per_host: self.per_host,
            devices_per_rank: self.per_host.max(1),
            seed: self.seed,
            plants: match self.planting {
                Planting::Generated(c) => Plant::from_name(c).into_iter().collect(),
                _ => Vec::new(),
            },
            noise,
            topology: Topology::from_name(self.topology).unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// A planted culprit: its kind and the names that count as naming it.
pub type Expected = (Kind, Vec<String>);

fn nic(n: &NicName) -> String {
    format!("{}:{}", n.0, n.1)
}

fn link(a: &NicName, b: &NicName) -> Expected {
    (
        Kind::SlowLink,
        vec![
            format!("{} <-> {}", nic(a), nic(b)),
            format!("{} <-> {}", nic(b), nic(a)),
        ],
    )
}

/// What the generator planted, as rows name it.
fn generated(class: &str, planted: &[Planted]) -> Vec<Expected> {
    let Some(p) = planted.iter().find(|p| p.kind.as_str() == class) else {
        return Vec::new();
    };
    let n = (p.host.clone(), format!("mlx5_{}", p.device_id));
    let peer = p.peer.as_deref().and_then(|s| s.split_once(':'));
    let peer = peer.map(|(h, d)| (h.to_string(), d.to_string()));
    match (class, peer) {
        ("slow_link", Some(b)) => vec![link(&n, &b)],
        ("slow_link_one_way", Some(b)) => {
            vec![(
                Kind::SlowLinkOneWay,
                vec![format!("{} -> {}", nic(&n), nic(&b))],
            )]
        }
        ("slow_host", _) => vec![(Kind::SlowHost, vec![p.host.clone()])],
        ("host_side_delay", _) => vec![(Kind::HostSideDelay, vec![nic(&n)])],
        _ => vec![(Kind::SlowNic, vec![nic(&n)])],
    }
}

/// Chooses the edit's culprit in the healthy run in `dir` (by the seed) and applies it.
fn plant_edit(s: &Scenario, dir: &Path) -> Result<Vec<Expected>, String> {
    let peers = edit::peers_of(dir)?;
    let mut rng = fastrand::Rng::with_seed(s.seed.wrapping_mul(0x9e37_79b9) ^ 0x5eed);
    let nics: Vec<&NicName> = peers.keys().collect();
    if nics.is_empty() {
        return Err(format!("{s:?}: no NIC with peers"));
    }
    let a = nics[rng.usize(0..nics.len())].clone();
    let a_peers = &peers[&a];
    let b = a_peers[rng.usize(0..a_peers.len())].clone();
    let f = s.factor();
    let on = |target: Target| Edit {
        target,
        factor: f,
        tail_only: s.planting == Planting::NicTail,
    };
    let nic_edit = |row, col| {
        on(Target::Nic {
            nic: a.clone(),
            row,
            col,
        })
    };
    let (edits, expected) = match s.planting {
        Planting::NicBoth | Planting::NicTail => (
            vec![nic_edit(true, true)],
            vec![(Kind::SlowNic, vec![nic(&a)])],
        ),
        Planting::NicColumn => (
            vec![nic_edit(false, true)],
            vec![(Kind::SlowNic, vec![nic(&a)])],
        ),
        Planting::NicRow => (
            vec![nic_edit(true, false)],
            vec![(Kind::HostSideDelay, vec![nic(&a)])],
        ),
        Planting::Link | Planting::LinkOneWay => {
            let both = s.planting == Planting::Link;
            let t = Target::Link {
                from: a.clone(),
                to: b.clone(),
                both,
            };
            let e = if both {
                link(&a, &b)
            } else {
                (
                    Kind::SlowLinkOneWay,
                    vec![format!("{} -> {}", nic(&a), nic(&b))],
                )
            };
            (vec![on(t)], vec![e])
        }
        Planting::Host => {
            let hosts: Vec<&String> = nics.iter().map(|n| &n.0).collect();
            let h = hosts[rng.usize(0..hosts.len())].clone();
            (
                vec![on(Target::Host(h.clone()))],
                vec![(Kind::SlowHost, vec![h])],
            )
        }
        Planting::TwoNicsOnARail => {
            let rail: Vec<&NicName> = a_peers.iter().filter(|p| p.1 == a.1).collect();
            let b = rail
                .get(rng.usize(0..rail.len().max(1)))
                .map(|x| (*x).clone())
                .ok_or_else(|| format!("{s:?}: no peer on {}'s rail", nic(&a)))?;
            let two = Target::Nic {
                nic: b.clone(),
                row: true,
                col: true,
            };
            (
                vec![nic_edit(true, true), on(two)],
                vec![
                    (Kind::SlowNic, vec![nic(&a)]),
                    (Kind::SlowNic, vec![nic(&b)]),
                ],
            )
        }
        Planting::HostSideAndLink => {
            let t = Target::Link {
                from: a.clone(),
                to: b.clone(),
                both: true,
            };
            (
                vec![nic_edit(true, false), on(t)],
                vec![(Kind::HostSideDelay, vec![nic(&a)]), link(&a, &b)],
            )
        }
        Planting::AttrsUniform | Planting::AttrsTclass | Planting::AttrsMtu => {
            let odd = match s.planting {
                Planting::AttrsTclass => Some((&a, "traffic_class", 0, Kind::QpConfigMismatch)),
                Planting::AttrsMtu => Some((&a, "path_mtu", 1024, Kind::MtuMismatch)),
                _ => None,
            };
            let found = edit::set_attrs(dir, odd.map(|(n, k, v, _)| (n, k, v)))?;
            if odd.is_some() && !found {
                return Err(format!("{s:?}: {} has no QP", nic(&a)));
            }
            let expected = odd.map(|(n, _, _, k)| (k, vec![nic(n)]));
            return Ok(expected.into_iter().collect());
        }
        Planting::Healthy | Planting::Generated(_) => (Vec::new(), Vec::new()),
    };
    edit::apply(dir, &edits)?;
    Ok(expected)
}

/// One row as judged: its kind, culprit, confidence in words, the planted culprit it names
/// (an index into the run's expected culprits) or whether it names something else.
#[derive(Debug, Clone, Serialize)]
pub struct RowVerdict {
    pub kind: Kind,
    pub culprit: String,
    pub sure: &'static str,
    pub names: Option<usize>,
    pub wrong: bool,
}

/// What `outliers` said about one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub scenario: Scenario,
    pub expected: Vec<Expected>,
    pub rows: Vec<RowVerdict>,
    pub findings: usize,
}

impl Verdict {
    /// Every planted culprit named.
    pub fn named(&self) -> bool {
        (0..self.expected.len()).all(|i| self.rows.iter().any(|r| r.names == Some(i)))
    }

    /// Right: every culprit named and no wrong row; a healthy run, no finding at all.
    pub fn right(&self) -> bool {
        if self.scenario.planting.class() == "healthy" {
            return self.findings == 0;
        }
        self.named() && !self.rows.iter().any(|r| r.wrong)
    }
}

/// Whether a culprit name ("a:X", "a:X <-> b:Y", "a:X -> b:Y", a host, "a + b") is about the
/// planted culprits only.
fn about_culprits(name: &str, expected: &[Expected]) -> bool {
    let planted: Vec<&str> = expected
        .iter()
        .flat_map(|(_, n)| n.iter())
        .flat_map(|n| n.split(" <-> ").flat_map(|x| x.split(" -> ")))
        .collect();
    name.split(" + ")
        .flat_map(|x| x.split(" <-> "))
        .flat_map(|x| x.split(" -> "))
        .all(|part| {
            planted
                .iter()
                .any(|p| *p == part || part.split(':').next() == Some(p))
        })
}

/// Generates the scenario into `dir` (emptied first), plants it, and judges `outliers`' rows.
pub fn run(s: &Scenario, dir: &Path) -> Result<Verdict, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let planted = generate_fabric(dir, &s.options(), 1)?;
    let expected = match s.planting {
        Planting::Healthy => Vec::new(),
        Planting::Generated(c) => generated(c, &planted),
        _ => plant_edit(s, dir)?,
    };
    if s.planting.class() != "healthy" && expected.is_empty() {
        return Err(format!("{s:?}: nothing planted ({planted:?})"));
    }
    let run = crate::load::load_run(&[dir.to_path_buf()]);
    if !run.bad.is_empty() {
        return Err(format!("{s:?}: {} unreadable files", run.bad.len()));
    }
    let r = find(&run, &Options::default());
    let rows = r
        .rows
        .iter()
        .map(|w| {
            let matches = |(k, names): &Expected| *k == w.kind && names.contains(&w.culprit);
            let alt = |(k, names): &Expected| {
                w.alternatives
                    .iter()
                    .any(|a| a.kind == *k && names.contains(&a.culprit))
            };
            let names = expected.iter().position(|e| matches(e) || alt(e));
            let class_kind =
                CLASSES.iter().any(|c| kind_of(c) == Some(w.kind)) || w.kind == Kind::SlowLinkOrNic;
            RowVerdict {
                kind: w.kind,
                culprit: w.culprit.clone(),
                sure: w.sure,
                names,
                wrong: names.is_none() && (class_kind || !about_culprits(&w.culprit, &expected)),
            }
        })
        .collect();
    Ok(Verdict {
        scenario: s.clone(),
        expected,
        rows,
        findings: r.findings.len(),
    })
}

/// The kind a class is named by.
pub fn kind_of(class: &str) -> Option<Kind> {
    Some(match class {
        "slow_nic" => Kind::SlowNic,
        "slow_link" => Kind::SlowLink,
        "slow_link_one_way" => Kind::SlowLinkOneWay,
        "slow_host" => Kind::SlowHost,
        "host_side_delay" => Kind::HostSideDelay,
        "qp_tclass" => Kind::QpConfigMismatch,
        "qp_mtu" => Kind::MtuMismatch,
        _ => return None,
    })
}

/// Every applicable scenario of the matrix.
pub fn matrix(
    topologies: &[&'static str],
    sizes: &[(usize, usize)],
    plantings: &[Planting],
    noises: &[&'static str],
    seeds: &[u64],
) -> Vec<Scenario> {
    let mut v = Vec::new();
    for &topology in topologies {
        for &(nics, per_host) in sizes {
            for &noise in noises {
                for &seed in seeds {
                    for &planting in plantings {
                        let s = Scenario {
                            planting,
                            topology,
                            nics,
                            per_host,
                            seed,
                            noise,
                        };
                        if s.applicable() {
                            v.push(s);
                        }
                    }
                }
            }
        }
    }
    v
}

/// One class's line.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ClassLine {
    pub class: String,
    pub runs: usize,
    /// Runs every culprit of which is named; of those, named through an ambiguous row.
    pub named: usize,
    pub ambiguous: usize,
    /// Rows counted for the class: right, wrong.
    pub right: usize,
    pub wrong: usize,
    pub precision: f64,
    pub recall: f64,
}

/// The scenarios' figures.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Table {
    pub runs: usize,
    pub classes: Vec<ClassLine>,
    pub healthy_runs: usize,
    pub healthy_runs_without_findings: usize,
    /// (runs, runs right) by topology, size ("ranks/per host"), planting and noise.
    pub by_topology: BTreeMap<String, (usize, usize)>,
    pub by_size: BTreeMap<String, (usize, usize)>,
    pub by_planting: BTreeMap<String, (usize, usize)>,
    pub by_noise: BTreeMap<String, (usize, usize)>,
    /// Rows by confidence in words: (right, wrong).
    pub by_confidence: BTreeMap<String, (usize, usize)>,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// The class a row counts for: its kind's, else its run's.
fn counted_for(kind: Kind, run_class: &'static str) -> &'static str {
    CLASSES
        .iter()
        .copied()
        .find(|c| kind_of(c) == Some(kind))
        .unwrap_or(run_class)
}

/// Scores the verdicts.
pub fn score(vs: &[Verdict]) -> Table {
    let mut t = Table {
        runs: vs.len(),
        ..Default::default()
    };
    let mut lines: BTreeMap<&str, ClassLine> = BTreeMap::new();
    for v in vs {
        let class = v.scenario.planting.class();
        let l = lines.entry(class).or_default();
        l.runs += 1;
        if class == "healthy" {
            t.healthy_runs += 1;
            t.healthy_runs_without_findings += usize::from(v.findings == 0);
            l.named += usize::from(v.findings == 0);
        } else if v.named() {
            l.named += 1;
            l.ambiguous += usize::from(
                v.rows
                    .iter()
                    .any(|r| r.names.is_some() && r.kind == Kind::SlowLinkOrNic),
            );
        }
        for r in &v.rows {
            let l = lines.entry(counted_for(r.kind, class)).or_default();
            l.right += usize::from(r.names.is_some());
            l.wrong += usize::from(r.wrong);
            let c = t.by_confidence.entry(r.sure.to_string()).or_default();
            c.0 += usize::from(r.names.is_some());
            c.1 += usize::from(r.wrong);
        }
        let s = &v.scenario;
        for (key, m) in [
            (s.topology.to_string(), &mut t.by_topology),
            (format!("{}/{}", s.nics, s.per_host), &mut t.by_size),
            (s.planting.name(), &mut t.by_planting),
            (s.noise.to_string(), &mut t.by_noise),
        ] {
            let e = m.entry(key).or_default();
            e.0 += 1;
            e.1 += usize::from(v.right());
        }
    }
    for class in CLASSES {
        let mut l = lines.remove(class).unwrap_or_default();
        l.class = class.to_string();
        if class == "healthy" {
            // The share of the runs with no finding that were healthy.
            let clean = vs.iter().filter(|v| v.findings == 0).count();
            l.precision = ratio(l.named, clean);
        } else {
            l.precision = ratio(l.right, l.right + l.wrong);
        }
        l.recall = ratio(l.named, l.runs);
        t.classes.push(l);
    }
    t
}

/// The targets the table misses, one line each (empty: every target met).
pub fn missed(t: &Table) -> Vec<String> {
    let mut v = Vec::new();
    for c in t
        .classes
        .iter()
        .filter(|c| c.runs > 0 && c.class != "healthy")
    {
        let rows = format!("{} right, {} wrong rows", c.right, c.wrong);
        let got = ((c.precision, rows.as_str()), (c.recall, c.named, c.runs));
        super::class_misses(&c.class, got, (MIN_PRECISION, MIN_RECALL), &mut v);
    }
    super::healthy_misses(t.healthy_runs_without_findings, t.healthy_runs, &mut v);
    v
}

/// The table the benchmark prints.
pub fn render(t: &Table) -> String {
    let mut out = String::from(
        "| class | runs | named | of which ambiguous | right rows | wrong rows | precision | recall |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for c in &t.classes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} |\n",
            c.class, c.runs, c.named, c.ambiguous, c.right, c.wrong, c.precision, c.recall
        ));
    }
    out.push_str(&format!(
        "\nHealthy runs with no finding of any kind: {} of {}.\n",
        t.healthy_runs_without_findings, t.healthy_runs
    ));
    let line = |m: &BTreeMap<String, (usize, usize)>| -> String {
        m.iter()
            .map(|(k, (n, r))| format!("{k} {r}/{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "Runs answered right (every culprit named and nothing else; healthy: no finding), by topology: {}; by size (ranks/per host): {}; by noise: {}.\nBy planting: {}.\n",
        line(&t.by_topology),
        line(&t.by_size),
        line(&t.by_noise),
        line(&t.by_planting)
    ));
    let conf: Vec<String> = t
        .by_confidence
        .iter()
        .map(|(k, (r, w))| format!("{k} {r} right, {w} wrong"))
        .collect();
    out.push_str(&format!("Rows by confidence: {}.\n", conf.join("; ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_about_the_culprits_only_is_not_wrong() {
        let e = vec![link(
            &("a".into(), "mlx5_0".into()),
            &("b".into(), "mlx5_1".into()),
        )];
        assert!(about_culprits("a:mlx5_0", &e));
        assert!(about_culprits("b:mlx5_1 -> a:mlx5_0", &e));
        assert!(!about_culprits("c:mlx5_0", &e));
        assert!(!about_culprits("a:mlx5_0 <-> c:mlx5_0", &e));
        let h = vec![(Kind::SlowHost, vec!["a".to_string()])];
        assert!(about_culprits("a:mlx5_3", &h));
    }

    #[test]
    fn the_matrix_leaves_out_what_cannot_be_told() {
        let m = matrix(&["rail"], &[(2, 1), (16, 8)], &PLANTINGS, &["none"], &[1]);
        assert!(m
            .iter()
            .filter(|s| s.nics == 2)
            .all(|s| s.planting.class() == "healthy"));
        assert!(!m
            .iter()
            .any(|s| s.planting.class() == "slow_host" && s.nics == 16));
        assert!(m
            .iter()
            .any(|s| s.planting == Planting::NicTail && s.nics == 16));
    }
}
