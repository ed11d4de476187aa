//! The verdict benchmark (`make verdict-bench`, and a quick grid in the tests): labelled
//! generated runs (one class planted, or none) under the noise of real hosts, through
//! `outliers`, scored as precision and recall per class.
//!
//! A run of class C has one culprit planted (`generate --peers`, or a frozen rank for
//! `stall_root`); the tool's answer is its rows (one per culprit). A row of C's kind is
//! correct when it names the planted culprit (host:NIC, the link's two ends, the one way's
//! sender first, the host, or the root's NIC). Per class: recall is the share of C's runs
//! whose culprit is named; precision the share of all rows of C's kind, over every run of
//! every class (healthy ones included), that are correct. For `healthy`, recall is the share of
//! healthy runs with no finding of any kind, precision the share of runs with no finding that
//! were healthy. Rows of other kinds on a run (a latency tail, a counter) are counted apart.
//!
//! In the library, not in the example that prints the table, so the tests assert the targets
//! on a small grid with the same code.

pub mod edit;
pub mod scenario;

use crate::generate::{generate_fabric, GenOptions, Plant, Planted, Topology};
use crate::outliers::{find, Kind, Options};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A labelled class: its name in the table and the plant of its runs (none: healthy). What
/// its runs must name comes from the plant ([`Plant::finding`]).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Class {
    pub name: &'static str,
    pub plant: Option<Plant>,
}

impl Class {
    /// The class of a plant, named after it.
    pub const fn of(plant: Plant) -> Class {
        Class {
            name: plant.as_str(),
            plant: Some(plant),
        }
    }

    /// The kind a class is named by (none for healthy runs).
    pub fn kind(self) -> Option<Kind> {
        self.plant?.finding()
    }
}

/// The labelled classes.
pub const CLASSES: [Class; 9] = [
    Class {
        name: "healthy",
        plant: None,
    },
    Class::of(Plant::SlowNic),
    Class::of(Plant::SlowLink),
    Class::of(Plant::SlowLinkOneWay),
    Class::of(Plant::SlowHost),
    Class::of(Plant::HostSideDelay),
    Class {
        name: "stall_root",
        plant: Some(Plant::FrozenRank),
    },
    Class::of(Plant::QpTclass),
    Class::of(Plant::QpMtu),
];

/// The noise a run carries: none, heavy-tailed per-process jitter, one descheduled rank,
/// 1-in-16 sampled latency, few samples per link.
pub const NOISES: [&str; 5] = ["none", "jitter", "deschedule", "sampled", "few"];

/// Targets: per class, precision and recall; healthy runs with no finding at all.
pub const MIN_PRECISION: f64 = 0.95;
pub const MIN_RECALL: f64 = 0.90;
pub const MIN_HEALTHY_RUNS: usize = 50;

/// One labelled run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Case {
    pub class: Class,
    /// NICs (one rank each) and NICs per host.
    pub nics: usize,
    pub per_host: usize,
    pub seed: u64,
    pub noise: &'static str,
}

impl Case {
    /// Whether the class can be planted at this size: a slow host needs two NICs a host
    /// (a host of one NIC is a slow NIC), every class three hosts (two cannot say which end).
    pub fn applicable(&self) -> bool {
        let hosts = self.nics.div_ceil(self.per_host.max(1));
        hosts >= 3 && (self.class.plant != Some(Plant::SlowHost) || self.per_host >= 2)
    }

    fn options(&self) -> GenOptions {
        let (noise, sample): (&[&str], u64) = match self.noise {
            "jitter" => (&["jitter"], 1),
            "deschedule" => (&["deschedule"], 1),
            "sampled" => (&[], 16),
            "few" => (&["few"], 1),
            _ => (&[], 1),
        };
        GenOptions {
            ranks: self.nics,
            ranks_per_host: self.per_host,
            devices_per_rank: self.per_host.max(1),
            seed: self.seed,
            plants: self.class.plant.into_iter().collect(),
            noise: noise.iter().map(|s| s.to_string()).collect(),
            latency_sample: sample,
            // The shape the benchmark's sizes and targets were set on: every NIC sees most of
            // the others (the default is now the rail shape, up to 8 peers per rank).
            topology: Topology::AllToAll,
            ..Default::default()
        }
    }
}

/// What the tool said about one run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub case: Case,
    /// The planted culprit's kind and the names that count as naming it.
    pub expected: Option<(Kind, Vec<String>)>,
    /// Every row: its kind, culprit, and whether it names the planted culprit.
    pub rows: Vec<(Kind, String, bool)>,
    pub findings: usize,
    pub caveats: usize,
}

impl Outcome {
    /// The planted culprit is named (in some row of its kind).
    pub fn named(&self) -> bool {
        self.rows.iter().any(|r| r.2)
    }
}

/// The names of a planted culprit, as rows name it.
fn expected(class: Class, planted: &[Planted]) -> Option<(Kind, Vec<String>)> {
    let plant = class.plant?;
    let kind = plant.finding()?;
    let p = planted.iter().find(|p| p.kind == plant)?;
    let nic = format!("{}:mlx5_{}", p.host, p.device_id);
    let peer = p.peer.clone().unwrap_or_default();
    let names = match plant {
        Plant::SlowLink => vec![format!("{nic} <-> {peer}"), format!("{peer} <-> {nic}")],
        Plant::SlowLinkOneWay => vec![format!("{nic} -> {peer}")],
        Plant::SlowHost => vec![p.host.clone()],
        _ => vec![nic],
    };
    Some((kind, names))
}

fn correct(kind: Kind, culprit: &str, exp: &Option<(Kind, Vec<String>)>) -> bool {
    let Some((k, names)) = exp else { return false };
    kind == *k
        && (names.iter().any(|n| n == culprit)
            || (kind == Kind::HangRoot
                && culprit.split(" + ").any(|c| names.iter().any(|n| n == c))))
}

/// Generates the run of `case` into `dir` (emptied first), and reads what `outliers` says.
pub fn run_case(case: &Case, dir: &Path) -> Result<Outcome, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let planted = generate_fabric(dir, &case.options(), 1)?;
    let run = crate::load::load_run(&[dir.to_path_buf()]);
    if !run.bad.is_empty() {
        return Err(format!("{case:?}: {} unreadable files", run.bad.len()));
    }
    let r = find(&run, &Options::default());
    let exp = expected(case.class, &planted);
    if case.class.plant.is_some() && exp.is_none() {
        return Err(format!("{case:?}: nothing planted ({planted:?})"));
    }
    Ok(Outcome {
        case: case.clone(),
        rows: r
            .rows
            .iter()
            .map(|w| (w.kind, w.culprit.clone(), correct(w.kind, &w.culprit, &exp)))
            .collect(),
        expected: exp,
        findings: r.findings.len(),
        caveats: r.caveats.len(),
    })
}

/// Precision and recall of one class.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ClassScore {
    pub class: String,
    pub runs: usize,
    /// Runs whose culprit is named (healthy: runs with no finding).
    pub named: usize,
    /// Runs whose culprit is named in the only row of the run.
    pub alone: usize,
    /// Rows of the class's kind over every run (healthy: runs with no finding).
    pub claims: usize,
    pub correct: usize,
    pub precision: f64,
    pub recall: f64,
}

/// The benchmark's figures.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Score {
    pub runs: usize,
    pub classes: Vec<ClassScore>,
    pub healthy_runs: usize,
    pub healthy_runs_without_findings: usize,
    /// Rows of kinds that are no class (latency tail, counters, stalled QPs...), by kind, on
    /// the runs that were not healthy.
    pub other_rows: BTreeMap<String, usize>,
    /// Per noise model: (runs, runs answered right: culprit named, or healthy with no finding).
    pub by_noise: BTreeMap<String, (usize, usize)>,
    /// Per size ("NICs/per host"): the same.
    pub by_size: BTreeMap<String, (usize, usize)>,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Scores a set of outcomes.
pub fn score(outs: &[Outcome]) -> Score {
    let mut s = Score {
        runs: outs.len(),
        ..Default::default()
    };
    for class in CLASSES {
        let mine: Vec<&Outcome> = outs.iter().filter(|o| o.case.class == class).collect();
        let mut c = ClassScore {
            class: class.name.to_string(),
            runs: mine.len(),
            ..Default::default()
        };
        if class.plant.is_none() {
            c.named = mine.iter().filter(|o| o.findings == 0).count();
            c.alone = c.named;
            c.claims = outs.iter().filter(|o| o.findings == 0).count();
            c.correct = c.named;
            s.healthy_runs = c.runs;
            s.healthy_runs_without_findings = c.named;
        } else if let Some(k) = class.kind() {
            c.named = mine.iter().filter(|o| o.named()).count();
            c.alone = mine
                .iter()
                .filter(|o| o.rows.len() == 1 && o.named())
                .count();
            for o in outs {
                for r in o.rows.iter().filter(|r| r.0 == k) {
                    c.claims += 1;
                    c.correct += usize::from(r.2);
                }
            }
        }
        c.precision = ratio(c.correct, c.claims);
        c.recall = ratio(c.named, c.runs);
        s.classes.push(c);
    }
    for o in outs {
        let right = if o.case.class.plant.is_none() {
            o.findings == 0
        } else {
            o.named()
        };
        for (key, m) in [
            (o.case.noise.to_string(), &mut s.by_noise),
            (
                format!("{}/{}", o.case.nics, o.case.per_host),
                &mut s.by_size,
            ),
        ] {
            let e = m.entry(key).or_default();
            e.0 += 1;
            e.1 += usize::from(right);
        }
        if o.case.class.plant.is_none() {
            continue;
        }
        for r in o
            .rows
            .iter()
            .filter(|r| !CLASSES.iter().any(|c| c.kind() == Some(r.0)))
        {
            *s.other_rows.entry(r.0.as_str().to_string()).or_default() += 1;
        }
    }
    s
}

/// The targets the score misses, one line each (empty: every target met).
pub fn missed(s: &Score) -> Vec<String> {
    let mut v = Vec::new();
    for c in s.classes.iter().filter(|c| c.runs > 0) {
        let rows = format!("{} of {} rows right", c.correct, c.claims);
        let got = ((c.precision, rows.as_str()), (c.recall, c.named, c.runs));
        class_misses(&c.class, got, (MIN_PRECISION, MIN_RECALL), &mut v);
    }
    healthy_misses(s.healthy_runs_without_findings, s.healthy_runs, &mut v);
    v
}

/// What a class scored: (precision, its rows in words), (recall, runs naming it, runs).
pub(crate) type Figures<'a> = ((f64, &'a str), (f64, usize, usize));

/// A class's missed targets, one line each: its precision below `min_precision`, its recall
/// below `min_recall`. Shared by the grid and the scenarios (each with its own targets), so
/// both say a miss alike.
pub(crate) fn class_misses(
    class: &str,
    ((precision, rows), (recall, named, runs)): Figures,
    (min_precision, min_recall): (f64, f64),
    v: &mut Vec<String>,
) {
    if precision < min_precision {
        v.push(format!(
            "{class}: precision {precision:.3} < {min_precision} ({rows})"
        ));
    }
    if recall < min_recall {
        v.push(format!(
            "{class}: recall {recall:.3} < {min_recall} ({named} of {runs} runs)"
        ));
    }
}

/// The healthy runs' target: no finding on any of them.
pub(crate) fn healthy_misses(without_findings: usize, runs: usize, v: &mut Vec<String>) {
    if without_findings < runs {
        v.push(format!(
            "healthy: {} of {runs} runs have findings",
            runs - without_findings
        ));
    }
}

/// The table the benchmark prints.
pub fn render(s: &Score) -> String {
    let mut out = String::from(
        "| class | runs | named | alone in its run | rows of its kind | right | precision | recall |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for c in &s.classes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} |\n",
            c.class, c.runs, c.named, c.alone, c.claims, c.correct, c.precision, c.recall
        ));
    }
    out.push_str(&format!(
        "\nHealthy runs with no finding of any kind: {} of {}.\n",
        s.healthy_runs_without_findings, s.healthy_runs
    ));
    let other: Vec<String> = s
        .other_rows
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push_str(&format!(
        "Rows of other kinds on planted runs: {}.\n",
        if other.is_empty() {
            "none".to_string()
        } else {
            other.join(", ")
        }
    ));
    let line = |m: &BTreeMap<String, (usize, usize)>| -> String {
        m.iter()
            .map(|(k, (n, r))| format!("{k} {r}/{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "Answered right (culprit named, or nothing on a healthy run), by noise: {}; by size (NICs/per host): {}.\n",
        line(&s.by_noise),
        line(&s.by_size)
    ));
    out
}

/// The grid: every applicable class x size x noise x seed.
pub fn grid(sizes: &[(usize, usize)], noises: &[&'static str], seeds: &[u64]) -> Vec<Case> {
    let mut v = Vec::new();
    for &(nics, per_host) in sizes {
        for &noise in noises {
            for &seed in seeds {
                for class in CLASSES {
                    let c = Case {
                        class,
                        nics,
                        per_host,
                        seed,
                        noise,
                    };
                    if c.applicable() {
                        v.push(c);
                    }
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoring_counts_claims_over_every_run() {
        let case = |class| Case {
            class,
            nics: 12,
            per_host: 4,
            seed: 1,
            noise: "none",
        };
        let nic = |n: &str| (Kind::SlowNic, vec![n.to_string()]);
        let outs = vec![
            Outcome {
                case: case(Class::of(Plant::SlowNic)),
                expected: Some(nic("h:mlx5_0")),
                rows: vec![(Kind::SlowNic, "h:mlx5_0".into(), true)],
                findings: 1,
                caveats: 0,
            },
            Outcome {
                case: case(Class::of(Plant::SlowNic)),
                expected: Some(nic("h:mlx5_1")),
                rows: vec![(Kind::SlowNic, "h:mlx5_2".into(), false)],
                findings: 1,
                caveats: 0,
            },
            Outcome {
                case: case(CLASSES[0]),
                expected: None,
                rows: vec![(Kind::SlowNic, "h:mlx5_3".into(), false)],
                findings: 1,
                caveats: 0,
            },
        ];
        let s = score(&outs);
        let c = s.classes.iter().find(|c| c.class == "slow_nic").unwrap();
        assert_eq!((c.runs, c.named, c.claims, c.correct), (2, 1, 3, 1));
        assert_eq!(s.healthy_runs_without_findings, 0);
        assert_eq!(missed(&s).len(), 4, "{:?}", missed(&s));
        assert!(correct(
            Kind::HangRoot,
            "a:mlx5_0 + b:mlx5_1",
            &Some((Kind::HangRoot, vec!["b:mlx5_1".into()]))
        ));
    }

    #[test]
    fn the_grid_leaves_out_what_cannot_be_planted() {
        let g = grid(&[(3, 1), (12, 4)], &["none"], &[1]);
        assert!(!g
            .iter()
            .any(|c| c.nics == 3 && c.class.plant == Some(Plant::SlowHost)));
        assert_eq!(g.len(), 8 + 9);
    }
}
