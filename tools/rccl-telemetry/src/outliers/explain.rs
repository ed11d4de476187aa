//! One explanation of the slow links, not a row per detector: the slow cells of the NIC-by-NIC
//! matrix are explained by the fewest culprits, strongest first, and a device's latency tail
//! that a culprit among its peers explains is that culprit's evidence, not a finding of its own.
//!
//! Each round takes every explanation the unexplained cells still support (a slow NIC: its row
//! and column mostly slow, or its column; a host-side delay: its row mostly slow, its column
//! at the healthy level or far nearer it; a slow host: every NIC of it, two or more, the
//! same), accepts the one that explains the most slow cells, takes its share off the cells it
//! explains (the median excess of its slow row, and of its slow column, in log scale) and
//! judges them again. A healthy NIC whose slow links all go to culprits is then left with no
//! slow cell, and a link slow on top of a slow NIC or a late-polling process keeps the excess
//! of the link alone. What no NIC or host explains is a link (both directions slow) or one
//! direction. Explanations that fit the very same slow cells (the only link of two NICs:
//! either end, or the path) are one finding naming each of them, never one picked by chance.
//!
//! How sure a verdict is: the cells it explains and how far they stand out, its margin over
//! the next explanation that shares its cells, and the size of the matrix its baseline comes
//! from.

use super::fabric::{Culprit, Fabric};
use super::latency_tail::{share_above_log, weighty};
use super::{Finding, Input, Kind};
use crate::stats::{fmt_ns, median};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A row slow alone is a host-side delay while its column's slowness, as a ratio to the
/// healthy level, stays below this root of the row's (see [`class_of`]).
const HOST_SIDE_ROOT: f64 = 4.0;

/// How a NIC's row and column read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NicClass {
    Fine,
    /// Row and column mostly slow, or its column only: the NIC, its cable, its switch port.
    Slow,
    /// Its row mostly slow, its column at the healthy level: its process polls late.
    HostSide,
}

fn majority((k, n): (usize, usize)) -> bool {
    n > 0 && 2 * k > n
}

/// A NIC's class from the share of its row and column that is slow (unexplained).
fn class_of(f: &Fabric, a: usize) -> NicClass {
    let (row, col) = (f.share(&f.rows[a]), f.share(&f.cols[a]));
    match (majority(row), majority(col)) {
        (false, true) => NicClass::Slow,
        (true, _) => {
            // Its peers see it at the healthy level (the column's typical completion is not
            // `min_ratio` above the healthy links'), or far nearer to it than its own
            // completions are, however many of its column's cells pass as slow: a NIC's own
            // slowness lengthens the round trips of its column as much as its row's, while a
            // process that polls late lengthens its row and its column at most a little (its
            // receives reposted late). Far nearer: the column's excess over the healthy level,
            // as a ratio, below the fourth root of the row's (2.7x against 54x).
            let excess = |idx: &[usize]| {
                let v: Vec<f64> = idx.iter().map(|i| f.excess(*i)).collect();
                median(&v)
            };
            let col_ok = match (excess(&f.cols[a]), excess(&f.rows[a])) {
                (Some(c), Some(r)) => c < f.min_gap || c < r / HOST_SIDE_ROOT,
                (Some(c), None) => c < f.min_gap,
                (None, _) => false,
            };
            if col_ok {
                NicClass::HostSide
            } else {
                NicClass::Slow
            }
        }
        (false, false) => NicClass::Fine,
    }
}

/// One explanation the unexplained cells support: its kind, NICs and the slow cells it
/// explains (sorted), and their summed excess (the tie-break).
#[derive(Debug, Clone)]
struct Cand {
    kind: Kind,
    nics: Vec<usize>,
    slow: Vec<usize>,
    weight: f64,
}

/// The lower median of some values (of two, the smaller), 0 for none.
fn lower_median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

/// The unexplained excess (p50, p90) that some cells share, never below 0: the share of them
/// a culprit explains. The lower median, so that of a NIC's two links (a ring), one also slow
/// for a reason of its own (a slow link, a second slow NIC at its other end) keeps that excess
/// rather than have half of it taken as the NIC's.
fn effect(f: &Fabric, idx: &[usize]) -> (f64, f64) {
    let a: Vec<f64> = idx.iter().map(|i| f.x50[*i]).collect();
    let b: Vec<f64> = idx.iter().map(|i| f.x90[*i]).collect();
    (lower_median(a).max(0.0), lower_median(b).max(0.0))
}

/// The slow cells NIC `a` of class `class` explains. A host-side delay explains its slow row
/// and, of its column, the slow cells whose reverse is not slow once its row's share is taken
/// off: a starved process reposts its receives late, so a peer's writes towards it meet
/// receiver-not-ready retries now and then; a cell slow both ways beside it is a link.
fn explained_by(f: &Fabric, a: usize, class: NicClass) -> Vec<usize> {
    let slow_of =
        |idx: &[usize]| -> Vec<usize> { idx.iter().copied().filter(|i| f.slow[*i]).collect() };
    let mut v = slow_of(&f.rows[a]);
    match class {
        NicClass::Fine => return Vec::new(),
        NicClass::Slow => v.extend(slow_of(&f.cols[a])),
        NicClass::HostSide => {
            let (e50, e90) = effect(f, &v);
            for i in slow_of(&f.cols[a]) {
                let back = f.at.get(&(a, f.cells[i].src)).copied();
                let back_slow = back.is_some_and(|r| f.judge(r, f.x50[r] - e50, f.x90[r] - e90));
                if !back_slow {
                    v.push(i);
                }
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Every NIC and host explanation the unexplained cells support.
fn candidates(f: &Fabric) -> Vec<Cand> {
    let n = f.links.nics.len();
    let in_matrix = |a: usize| !f.rows[a].is_empty() || !f.cols[a].is_empty();
    let class: Vec<NicClass> = (0..n)
        .map(|a| {
            if in_matrix(a) {
                class_of(f, a)
            } else {
                NicClass::Fine
            }
        })
        .collect();
    let weight = |s: &[usize]| s.iter().map(|i| f.excess(*i)).sum::<f64>();
    let mut out = Vec::new();
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for a in (0..n).filter(|a| in_matrix(*a)) {
        by_host
            .entry(f.links.nics[a].host.as_str())
            .or_default()
            .push(a);
        if class[a] == NicClass::Fine {
            continue;
        }
        let slow = explained_by(f, a, class[a]);
        if slow.is_empty() {
            continue;
        }
        out.push(Cand {
            kind: if class[a] == NicClass::HostSide {
                Kind::HostSideDelay
            } else {
                Kind::SlowNic
            },
            nics: vec![a],
            weight: weight(&slow),
            slow,
        });
    }
    for members in by_host.into_values() {
        let first = class[members[0]];
        if members.len() < 2 || first == NicClass::Fine {
            continue;
        }
        if members.iter().all(|a| class[*a] == first) {
            let mut slow: Vec<usize> = members
                .iter()
                .flat_map(|a| explained_by(f, *a, first))
                .collect();
            slow.sort_unstable();
            slow.dedup();
            out.push(Cand {
                kind: if first == NicClass::HostSide {
                    Kind::HostSideDelay
                } else {
                    Kind::SlowHost
                },
                nics: members,
                weight: weight(&slow),
                slow,
            });
        }
    }
    out
}

/// Explains the slow cells of a settled matrix: NIC and host culprits strongest first, then the
/// links for what is left (see the module's doc).
pub(super) fn explain(f: &mut Fabric) -> Vec<Culprit> {
    let mut out: Vec<Culprit> = Vec::new();
    // Each round explains at least one slow cell; the bound only guards against a cycle.
    for _ in 0..4 * f.links.nics.len() + 8 {
        let cands = candidates(f);
        let Some(best) = cands.iter().max_by(|a, b| {
            a.slow
                .len()
                .cmp(&b.slow.len())
                .then(a.weight.total_cmp(&b.weight))
                .then(b.nics.cmp(&a.nics))
        }) else {
            break;
        };
        let twins: Vec<&Cand> = cands.iter().filter(|c| c.slow == best.slow).collect();
        let shares = |c: &&Cand| c.slow.iter().any(|i| best.slow.binary_search(i).is_ok());
        let second = cands
            .iter()
            .filter(|c| c.slow != best.slow)
            .filter(shares)
            .map(|c| c.slow.len())
            .max()
            .unwrap_or(0);
        let margin = 1.0 - second as f64 / best.slow.len() as f64;
        let c = if twins.len() > 1 {
            ambiguous(f, &twins)
        } else {
            accept(f, best, margin)
        };
        match out
            .iter_mut()
            .find(|o| o.kind == c.kind && o.nics == c.nics)
        {
            Some(o) => o.cells.extend(c.cells),
            None => out.push(c),
        }
        f.rejudge();
    }
    out.extend(link_culprits(f));
    out
}

/// How sure a verdict is: `k` slow cells explained at robust z `z` (their evidence: a cell at
/// three times the cut-off is as strong as a cell can be), its `margin` over the next
/// explanation of its cells (1: none, 0: one fits as well), and the matrix's `cells` (a healthy
/// level from a handful of links is rough).
fn confidence(k: usize, z: f64, margin: f64, cells: usize, threshold: f64) -> f64 {
    let strength = (z / (3.0 * threshold)).clamp(0.0, 1.0);
    let evidence = 1.0 - 0.5f64.powi(k.min(30) as i32);
    let real = 1.0 - (1.0 - strength) * (1.0 - evidence);
    let population = (0.6 + 0.4 * cells as f64 / 24.0).min(1.0);
    real * (0.5 + 0.5 * margin.clamp(0.0, 1.0)) * population
}

/// The level of some slow cells: (median p50, median p99, robust z, slow in their tail only).
/// A tail-only slowness (their p50 not `min_ratio` above the healthy level) is measured by the
/// p90.
fn level(f: &Fabric, idx: &[usize]) -> (f64, f64, f64, bool) {
    let (lvl, p99) = f.medians(idx).unwrap_or((f.p50.base, f.p99.base));
    let p90s: Vec<f64> = idx.iter().map(|i| f.cells[*i].p90).collect();
    let p90 = median(&p90s).unwrap_or(f.p90.base);
    let tail_only = lvl - f.p50.base < f.min_gap && p90 - f.p90.base >= f.min_gap;
    let z = if tail_only {
        f.p90.z(p90)
    } else {
        f.p50.z(lvl)
    };
    (lvl, p99, z, tail_only)
}

/// ", slow in its tail: p90 30.1 µs (3.1x the healthy links' p90 9.8 µs), its p50 at the
/// healthy level (a PCIe link trained down, a port that flaps, throttling: part of its work
/// slow)", or "".
fn tail_text(f: &Fabric, idx: &[usize], tail_only: bool) -> String {
    if !tail_only {
        return String::new();
    }
    let p90s: Vec<f64> = idx.iter().map(|i| f.cells[*i].p90).collect();
    let p90 = median(&p90s).unwrap_or(f.p90.base);
    format!(
        "; slow in its tail: p90 {} ({:.1}x the healthy links' p90 {}), its p50 near the healthy level (a PCIe link trained down, a port that flaps, throttling: part of its work slow)",
        fmt_ns(p90.exp()),
        (p90 - f.p90.base).exp(),
        fmt_ns(f.p90.base.exp())
    )
}

fn pids(p: &[i64]) -> String {
    p.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// The evidence of a NIC culprit (a slow NIC, its receive side, or its process polling late).
fn nic_evidence(f: &Fabric, a: usize, kind: Kind, slow: &[usize]) -> String {
    let (row, col) = (f.share(&f.rows[a]), f.share(&f.cols[a]));
    let mine = f.rows[a].len() + f.cols[a].len();
    let (lvl, p99, z, tail_only) = level(f, slow);
    let ratio = (lvl - f.p50.base).exp();
    let nic = &f.links.nics[a];
    let tail = tail_text(f, slow, tail_only);
    if kind == Kind::HostSideDelay {
        return format!(
            "{} (pid {}): its own completions are slow towards {} of its {} peers (its row, as sender: {}; {ratio:.1}x {}), while its peers' completions towards it are normal or nearly (its column: {}; {} of {} slow): the process polls late (CPU starvation, a descheduled proxy thread), not its NIC or the network{tail}",
            f.label(a),
            pids(&nic.pids),
            row.0,
            row.1,
            f.figures(&f.rows[a]),
            f.healthy_text(),
            f.figures(&f.cols[a]),
            col.0,
            col.1
        );
    }
    if !majority(row) {
        return format!(
            "{} is slow as a peer: the completions towards it are slow from {} of its {} peers (its column: {}; {ratio:.1}x {}), its own are normal (its row: {}): its receive side (the NIC, its cable or switch port towards it){tail}",
            f.label(a),
            col.0,
            col.1,
            f.figures(&f.cols[a]),
            f.healthy_text(),
            f.figures(&f.rows[a])
        );
    }
    format!(
        "{} is slow towards most of its peers ({} of its {} links): median p50 {} ({ratio:.1}x {}, robust z {z:.1}), p99 {}; its row (as sender) {}, its column (as peer) {}{tail}",
        f.label(a),
        slow.len(),
        mine,
        fmt_ns(lvl.exp()),
        f.healthy_text(),
        fmt_ns(p99.exp()),
        f.figures(&f.rows[a]),
        f.figures(&f.cols[a])
    )
}

/// Accepts one explanation: its culprit (evidence read before its share is taken off), then
/// its share taken off the cells it explains.
fn accept(f: &mut Fabric, c: &Cand, margin: f64) -> Culprit {
    let (lvl, p99, z, tail_only) = level(f, &c.slow);
    let evidence = if c.nics.len() == 1 {
        nic_evidence(f, c.nics[0], c.kind, &c.slow)
    } else {
        let host = &f.links.nics[c.nics[0]].host;
        let what = if c.kind == Kind::HostSideDelay {
            "poll late: their own completions are slow while their peers see them at normal latency (the host's CPUs, not its NICs or the network)"
        } else {
            "are slow towards most of their peers: the host (PCIe, CPU, memory, its ToR)"
        };
        format!(
            "all {} NICs of {host} {what}: median p50 of their slow links {} ({:.1}x {}, robust z {z:.1}), p99 {}{}",
            c.nics.len(),
            fmt_ns(lvl.exp()),
            (lvl - f.p50.base).exp(),
            f.healthy_text(),
            fmt_ns(p99.exp()),
            tail_text(f, &c.slow, tail_only)
        )
    };
    let culprit = Culprit {
        kind: c.kind,
        nics: c.nics.clone(),
        host: f.links.nics[c.nics[0]].host.clone(),
        p99_ns: p99.exp(),
        baseline_ns: f.p99.base.exp(),
        z,
        evidence,
        confidence: confidence(c.slow.len(), z, margin, f.cells.len(), f.opt.threshold),
        alternatives: Vec::new(),
        cells: c
            .slow
            .iter()
            .map(|i| (f.cells[*i].src, f.cells[*i].dst))
            .collect(),
    };
    for &a in &c.nics {
        take_share(f, a, c.kind);
    }
    culprit
}

/// Takes NIC `a`'s share off the cells it explains: its slow row's median excess off its row,
/// its slow column's off its column (a slow NIC, a slow host's NIC); a host-side delay's off
/// its row, and the column cells it explains set to no excess.
fn take_share(f: &mut Fabric, a: usize, kind: Kind) {
    let slow_of = |f: &Fabric, idx: &[usize]| -> Vec<usize> {
        idx.iter().copied().filter(|i| f.slow[*i]).collect()
    };
    let class = if kind == Kind::HostSideDelay {
        NicClass::HostSide
    } else {
        NicClass::Slow
    };
    let col_cells = if class == NicClass::HostSide {
        let mut explained = explained_by(f, a, class);
        explained.retain(|i| f.cells[*i].dst == a);
        explained
    } else {
        Vec::new()
    };
    let row = f.rows[a].clone();
    let (e50, e90) = effect(f, &slow_of(f, &row));
    for i in row {
        f.x50[i] -= e50;
        f.x90[i] -= e90;
    }
    if class == NicClass::HostSide {
        for i in col_cells {
            f.x50[i] = f.x50[i].min(0.0);
            f.x90[i] = f.x90[i].min(0.0);
        }
        return;
    }
    let col = f.cols[a].clone();
    let (e50, e90) = effect(f, &slow_of(f, &col));
    for i in col {
        f.x50[i] -= e50;
        f.x90[i] -= e90;
    }
}

/// Explanations that fit the very same slow cells: one culprit naming each, with what would
/// tell them apart; every one of those cells explained.
fn ambiguous(f: &mut Fabric, twins: &[&Cand]) -> Culprit {
    let slow = twins[0].slow.clone();
    let mut nics: Vec<usize> = twins.iter().flat_map(|c| c.nics.iter().copied()).collect();
    nics.sort_unstable();
    nics.dedup();
    let (_, p99, z, tail_only) = level(f, &slow);
    let pair = (nics.len() == 2).then(|| (nics[0], nics[1]));
    let one_way = pair.is_some() && slow.iter().all(|i| f.cells[*i].src == f.cells[slow[0]].src);
    if let (true, Some(_)) = (one_way, pair) {
        let s = f.cells[slow[0]].src;
        nics = vec![s, if nics[0] == s { nics[1] } else { nics[0] }];
    }
    let mut alternatives: Vec<(Kind, String)> = twins
        .iter()
        .map(|c| {
            let name = if c.nics.len() == 1 {
                f.label(c.nics[0])
            } else {
                f.links.nics[c.nics[0]].host.clone()
            };
            (c.kind, name)
        })
        .collect();
    let (a, b) = (
        f.label(nics[0]),
        nics.get(1).map_or(String::new(), |x| f.label(*x)),
    );
    match (pair, one_way) {
        (Some(_), true) => alternatives.push((Kind::SlowLinkOneWay, format!("{a} -> {b}"))),
        (Some(_), false) => alternatives.push((Kind::SlowLink, format!("{a} <-> {b}"))),
        (None, _) => {}
    }
    let said: Vec<String> = alternatives
        .iter()
        .map(|(k, n)| format!("{} {n}", k.label()))
        .collect();
    let directions = if slow.len() == 1 {
        "one direction".to_string()
    } else {
        format!("{} directions", slow.len())
    };
    let evidence = format!(
        "{directions} slow ({}; p50 {:.1}x {}{}), explained alike by {}: the links cannot tell which, as every slow link of each joins the other. What would tell them apart: a run in which each talks to a third NIC (another host on its rail, or an all-to-all job), or each end's hardware counters (retransmits, out-of-sequence packets, PCIe link width and speed)",
        f.figures(&slow),
        (f.medians(&slow).map_or(f.p50.base, |m| m.0) - f.p50.base).exp(),
        f.healthy_text(),
        tail_text(f, &slow, tail_only),
        said.join(", or ")
    );
    let culprit = Culprit {
        kind: Kind::SlowLinkOrNic,
        host: f.links.nics[nics[0]].host.clone(),
        nics,
        p99_ns: p99.exp(),
        baseline_ns: f.p99.base.exp(),
        z,
        evidence,
        confidence: confidence(slow.len(), z, 0.0, f.cells.len(), f.opt.threshold),
        alternatives,
        cells: slow
            .iter()
            .map(|i| (f.cells[*i].src, f.cells[*i].dst))
            .collect(),
    };
    for i in slow {
        f.x50[i] = f.x50[i].min(0.0);
        f.x90[i] = f.x90[i].min(0.0);
    }
    culprit
}

/// The slow cells no NIC or host explains, one culprit per NIC pair: both directions slow (a
/// path), or one (one direction of a path: congestion or a degraded hop that way).
fn link_culprits(f: &Fabric) -> Vec<Culprit> {
    let mut pairs: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (i, c) in f.cells.iter().enumerate() {
        if f.slow[i] {
            pairs
                .entry((c.src.min(c.dst), c.src.max(c.dst)))
                .or_default()
                .push(i);
        }
    }
    // One direction slow by its tail alone is what a jittery sender makes now and then among
    // a large matrix's cells (a tenth of a few hundred completions polled late): a one-way
    // link needs its p50; a tail-only link needs both directions.
    pairs.retain(|_, idx| idx.len() == 2 || f.judge(idx[0], f.x50[idx[0]], f64::NEG_INFINITY));
    let end_share = |a: usize| {
        let (r, c) = (f.share(&f.rows[a]), f.share(&f.cols[a]));
        (r.0 + c.0) as f64 / (r.1 + c.1).max(1) as f64
    };
    let mut out = Vec::new();
    for idx in pairs.into_values() {
        let worst = idx
            .iter()
            .copied()
            .max_by(|x, y| f.excess(*x).total_cmp(&f.excess(*y)))
            .unwrap_or(idx[0]);
        let c = f.cells[worst];
        let (s, d) = (c.src, c.dst);
        let both = idx.len() == 2;
        let (_, _, z, tail_only) = level(f, &[worst]);
        let margin = 1.0 - end_share(s).max(end_share(d));
        out.push(Culprit {
            kind: if both {
                Kind::SlowLink
            } else {
                Kind::SlowLinkOneWay
            },
            nics: vec![s, d],
            host: f.links.nics[s].host.clone(),
            p99_ns: c.p99.exp(),
            baseline_ns: f.p99.base.exp(),
            z,
            evidence: link_evidence(f, worst, both, z, tail_only),
            confidence: confidence(idx.len(), z, margin, f.cells.len(), f.opt.threshold),
            alternatives: Vec::new(),
            cells: idx
                .iter()
                .map(|i| (f.cells[*i].src, f.cells[*i].dst))
                .collect(),
        });
    }
    out
}

fn link_evidence(f: &Fabric, worst: usize, both: bool, z: f64, tail_only: bool) -> String {
    let c = f.cells[worst];
    let (s, d) = (c.src, c.dst);
    let back = f.at.get(&(d, s)).map(|i| f.cells[*i]);
    let reverse = match back {
        Some(b) if both => format!(
            "{} -> {} p50 {}, p99 {} (slow both ways)",
            f.label(d),
            f.label(s),
            fmt_ns(b.p50.exp()),
            fmt_ns(b.p99.exp())
        ),
        Some(b) => format!(
            "while {} -> {} is normal (p50 {}, p99 {})",
            f.label(d),
            f.label(s),
            fmt_ns(b.p50.exp()),
            fmt_ns(b.p99.exp())
        ),
        None => format!(
            "{} -> {} carries no measured completions",
            f.label(d),
            f.label(s)
        ),
    };
    format!(
        "{} -> {} p50 {}, p99 {} (p50 {:.1}x {}, robust z {z:.1}){} against {}'s row ({}) and {}'s column ({}); {reverse}{}",
        f.label(s),
        f.label(d),
        fmt_ns(c.p50.exp()),
        fmt_ns(c.p99.exp()),
        (c.p50 - f.p50.base).exp(),
        f.healthy_text(),
        tail_text(f, &[worst], tail_only),
        f.label(s),
        f.figures(&f.rows[s]),
        f.label(d),
        f.figures(&f.cols[d]),
        if both {
            ": a path (a bad switch hop, a routed detour)"
        } else {
            ": one direction of the path (congestion or a degraded hop that way)"
        }
    )
}

/// Folds into the fabric's culprits the latency tails they explain: a device's tail (its
/// completions beyond `min_ratio` x the run's median p99) is explained when, without its
/// completions towards the peers whose links a culprit explains (read from its per-peer
/// histograms), what is left is no tail worth a row. The finding goes; the culprit's evidence
/// names the devices whose tails it explains (a slow link's or host's own NICs included). A
/// NIC culprit keeps its own tail as a finding folded into its row.
pub(super) fn fold_tails(x: &Input, out: &mut Vec<Finding>) {
    if !out.iter().any(|f| f.kind == Kind::LatencyTail) || x.links().links.is_empty() {
        return;
    }
    let culprits = &x.fabric().culprits;
    if culprits.is_empty() {
        return;
    }
    let links = x.links();
    let mut by_cell: HashMap<(usize, usize), usize> = HashMap::new();
    for (ci, c) in culprits.iter().enumerate() {
        for cell in &c.cells {
            by_cell.entry(*cell).or_insert(ci);
        }
    }
    // A peer by its GID and LID together (either may repeat alone across a large fabric's
    // subnets), else by the one it has.
    let mut by_addr: HashMap<(Option<&str>, Option<u64>), usize> = HashMap::new();
    let mut by_name: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, n) in links.nics.iter().enumerate() {
        by_addr.insert((n.gid.as_deref(), n.lid), i);
        by_name.insert((n.host.as_str(), n.device.as_str()), i);
    }
    let mut folded: Vec<BTreeSet<String>> = vec![BTreeSet::new(); culprits.len()];
    out.retain(|f| {
        if f.kind != Kind::LatencyTail {
            return true;
        }
        let Some(dev) = x.devs.iter().find(|d| {
            d.file.host_name == f.host
                && d.file.process_id == f.pid
                && Some(&d.dev.roce_device) == f.roce_device.as_ref()
        }) else {
            return true;
        };
        let Some(&a) = by_name.get(&(f.host.as_str(), dev.dev.roce_device.as_str())) else {
            return true;
        };
        let own = |c: &Culprit| {
            c.nics.contains(&a)
                && matches!(
                    c.kind,
                    Kind::SlowNic | Kind::HostSideDelay | Kind::SlowLinkOrNic
                )
        };
        if culprits.iter().any(own) {
            return true;
        }
        let (Some(h), Some(med)) = (dev.dev.log_histogram(), f.median) else {
            return true;
        };
        let line = x.opt.min_ratio * med;
        let (beyond, total) = share_above_log(&h, line, dev.dev.latency_min_max().1);
        let mut took: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
        for p in dev.dev.all_peers() {
            let b = by_addr.get(&(p.gid.as_deref(), p.lid)).copied();
            let Some(ci) = b.and_then(|b| by_cell.get(&(a, b))) else {
                continue;
            };
            let (pb, pt) = share_above_log(
                p.wqe_completion_log_histogram.as_deref().unwrap_or(&[]),
                line,
                None,
            );
            let e = took.entry(*ci).or_default();
            e.0 += pb;
            e.1 += pt;
        }
        let (tb, tt) = took
            .values()
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        if took.is_empty()
            || weighty(
                (beyond - tb).max(0.0),
                (total - tt).max(0.0),
                x.opt.min_tail_share,
                x.opt.threshold,
            )
        {
            return true;
        }
        let ci = took
            .iter()
            .max_by(|p, q| p.1 .0.total_cmp(&q.1 .0))
            .map_or(0, |(ci, _)| *ci);
        folded[ci].insert(f.culprit.clone());
        false
    });
    for (ci, names) in folded.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
        let c = &culprits[ci];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let said = if names.len() > 4 {
            format!("{}, ... ({} devices)", names[..4].join(", "), names.len())
        } else {
            names.join(", ")
        };
        for f in out
            .iter_mut()
            .filter(|f| f.kind == c.kind && f.evidence == c.evidence)
        {
            f.evidence.push_str(&format!(
                "; it also explains the latency tail of {said} (their completions towards it)"
            ));
        }
    }
}
