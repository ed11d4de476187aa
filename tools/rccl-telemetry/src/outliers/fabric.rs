//! Naming the bad one at fabric scale: a slow NIC, a slow host, a slow link (both ways or one
//! way) or a process whose own completions are slow (host-side delay), classified from the
//! NIC-by-NIC links' completion latency (files of version 3 with peers); and, in one line each,
//! what the links cannot tell.
//!
//! The one detector that works on the joined links, not on devices: its culprits become
//! findings (`slow_nic`, `slow_host`, `slow_link`, `slow_link_one_way`, `host_side_delay`),
//! its caveats `too_few_to_tell` lines.
//!
//! A cell of the matrix is one direction of a link, `a -> b`: the completions of a's QPs
//! towards b, measured at a (row a, column b). A completion waits for the round trip (the WR
//! to b, its ACK back), so a NIC whose own path is slow shows in its row and its column; a
//! process that polls late shows in its row only (its own completions), never in its column
//! (its peers' completions towards it are acknowledged by its NIC, not by it).

use super::{nic_label, Caveat, Finding, Input, Kind, Options};
use crate::links::LinkReport;
use crate::stats::{fmt_count, fmt_ns, median};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the matrix classification found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Culprit {
    /// [`Kind::SlowNic`], [`Kind::SlowHost`], [`Kind::SlowLink`], [`Kind::SlowLinkOneWay`] or
    /// [`Kind::HostSideDelay`].
    pub kind: Kind,
    /// NIC indices into [`crate::links::LinkReport::nics`]: one NIC, the two ends of a link
    /// (the slow direction's sender first), or every NIC of a host.
    pub nics: Vec<usize>,
    pub host: String,
    /// The culprit's p99 (the median over its slow cells, the link's worse direction).
    pub p99_ns: f64,
    /// What it is compared with: the healthy links' p99.
    pub baseline_ns: f64,
    pub z: f64,
    pub evidence: String,
}

/// Links with fewer sampled completions than this have no p99 worth comparing.
pub const MIN_LINK_SAMPLES: u64 = 10;

/// What the classification decided: the culprits, and what it could not tell.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub culprits: Vec<Culprit>,
    pub caveats: Vec<String>,
}

/// The smallest spread the classification divides by: ln(1 + 1/8), the log histogram's error.
fn log_floor() -> f64 {
    (1.125f64).ln()
}

/// One measured direction of a link (latencies as ln ns).
#[derive(Debug, Clone, Copy)]
struct Cell {
    src: usize,
    dst: usize,
    p50: f64,
    p99: f64,
}

/// A level and its robust spread (log scale).
#[derive(Debug, Clone, Copy)]
struct Level {
    base: f64,
    scale: f64,
}

impl Level {
    fn of(vals: &[f64]) -> Level {
        let base = median(vals).unwrap_or(0.0);
        let scale = (1.4826 * crate::stats::mad(vals, base)).max(log_floor());
        Level { base, scale }
    }

    fn z(&self, v: f64) -> f64 {
        (v - self.base) / self.scale
    }
}

/// The matrix, indexed by row and column, with the healthy levels and the slow cells.
struct Fabric<'a> {
    links: &'a LinkReport,
    opt: &'a Options,
    cells: Vec<Cell>,
    rows: Vec<Vec<usize>>,
    cols: Vec<Vec<usize>>,
    at: HashMap<(usize, usize), usize>,
    p50: Level,
    p99: Level,
    slow: Vec<bool>,
    min_gap: f64,
}

/// The 25th percentile (linear between the nearest ranks).
fn lower_quartile(vals: &[f64]) -> f64 {
    let mut v = vals.to_vec();
    v.sort_by(f64::total_cmp);
    let x = 0.25 * (v.len().saturating_sub(1)) as f64;
    let (i, f) = (x.floor() as usize, x.fract());
    match (v.get(i), v.get(i + 1)) {
        (Some(a), Some(b)) => a + f * (b - a),
        (Some(a), None) => *a,
        _ => 0.0,
    }
}

impl<'a> Fabric<'a> {
    fn new(links: &'a LinkReport, opt: &'a Options) -> Fabric<'a> {
        let n = links.nics.len();
        let mut cells = Vec::new();
        for l in &links.links {
            let Some(x) = l.latency.as_ref().filter(|x| x.samples >= MIN_LINK_SAMPLES) else {
                continue;
            };
            if let (Some(p50), Some(p99)) = (x.p50_ns, x.p99_ns) {
                if p50 > 0.0 && p99 > 0.0 && l.src_nic != l.dst_nic {
                    cells.push(Cell {
                        src: l.src_nic,
                        dst: l.dst_nic,
                        p50: p50.ln(),
                        p99: p99.ln(),
                    });
                }
            }
        }
        let mut rows = vec![Vec::new(); n];
        let mut cols = vec![Vec::new(); n];
        let mut at = HashMap::new();
        for (i, c) in cells.iter().enumerate() {
            rows[c.src].push(i);
            cols[c.dst].push(i);
            at.insert((c.src, c.dst), i);
        }
        let slow = vec![false; cells.len()];
        let flat = Level {
            base: 0.0,
            scale: log_floor(),
        };
        Fabric {
            links,
            opt,
            cells,
            rows,
            cols,
            at,
            p50: flat,
            p99: flat,
            slow,
            min_gap: opt.min_ratio.max(1.0).ln(),
        }
    }

    /// Slow: the typical completion (p50) at least `min_ratio` above the healthy links' and
    /// `threshold` robust z, and the tail (p99) not below theirs. The p50 is what a slow NIC,
    /// path or process moves; the p99 is also what scheduling jitter moves (a few late
    /// completions), so it cannot tell a slow link from a jittery sender.
    fn is_slow(&self, c: &Cell) -> bool {
        c.p50 - self.p50.base >= self.min_gap
            && self.p50.z(c.p50) >= self.opt.threshold
            && c.p99 >= self.p99.base
    }

    /// The healthy levels: start from the lower quartile (healthy while fewer than 3/4 of the
    /// cells are slow: one slow host of three makes 2/3 slow), take as healthy what is not
    /// `min_ratio` above it, then iterate (levels from the healthy cells, slow cells by both
    /// rules) until the healthy set stops changing.
    fn settle(&mut self) {
        let p50s: Vec<f64> = self.cells.iter().map(|c| c.p50).collect();
        let p99s: Vec<f64> = self.cells.iter().map(|c| c.p99).collect();
        let (lq50, lq99) = (lower_quartile(&p50s), lower_quartile(&p99s));
        let mut healthy: Vec<bool> = self
            .cells
            .iter()
            .map(|c| c.p50 - lq50 < self.min_gap || c.p99 < lq99)
            .collect();
        for _ in 0..8 {
            let pick = |v: &[f64]| -> Vec<f64> {
                let h: Vec<f64> = v
                    .iter()
                    .zip(&healthy)
                    .filter(|(_, h)| **h)
                    .map(|(x, _)| *x)
                    .collect();
                if h.is_empty() {
                    v.to_vec()
                } else {
                    h
                }
            };
            self.p50 = Level::of(&pick(&p50s));
            self.p99 = Level::of(&pick(&p99s));
            self.slow = self.cells.iter().map(|c| self.is_slow(c)).collect();
            let next: Vec<bool> = self.slow.iter().map(|s| !s).collect();
            if next == healthy {
                break;
            }
            healthy = next;
        }
    }

    fn label(&self, i: usize) -> String {
        self.links.nics[i].label()
    }

    /// (slow cells, cells) of a row or column.
    fn share(&self, idx: &[usize]) -> (usize, usize) {
        (idx.iter().filter(|i| self.slow[**i]).count(), idx.len())
    }

    /// Median p50 and p99 of some cells (ln ns).
    fn medians(&self, idx: &[usize]) -> Option<(f64, f64)> {
        let p50: Vec<f64> = idx.iter().map(|i| self.cells[*i].p50).collect();
        let p99: Vec<f64> = idx.iter().map(|i| self.cells[*i].p99).collect();
        Some((median(&p50)?, median(&p99)?))
    }

    /// "p50 12.0 µs, p99 40.1 µs" of some cells, or "-".
    fn figures(&self, idx: &[usize]) -> String {
        self.medians(idx).map_or("-".into(), |(a, b)| {
            format!("p50 {}, p99 {}", fmt_ns(a.exp()), fmt_ns(b.exp()))
        })
    }

    /// "the healthy links' p50 9.0 µs (p99 12.9 µs)": what ratios are taken against.
    fn healthy_text(&self) -> String {
        format!(
            "the healthy links' p50 {} (p99 {})",
            fmt_ns(self.p50.base.exp()),
            fmt_ns(self.p99.base.exp())
        )
    }
}

/// A row slow alone is a host-side delay while its column's slowness, as a ratio to the
/// healthy level, stays below this root of the row's (see [`classify_nics`]).
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

/// Each NIC's class from the share of its row and column that is slow.
fn classify_nics(f: &Fabric) -> Vec<NicClass> {
    (0..f.links.nics.len())
        .map(|a| {
            let (row, col) = (f.share(&f.rows[a]), f.share(&f.cols[a]));
            match (majority(row), majority(col)) {
                (false, true) => NicClass::Slow,
                (true, _) => {
                    // Its peers see it at the healthy level (the column's typical completion
                    // is not `min_ratio` above the healthy links'), or far nearer to it than
                    // its own completions are, however many of its column's cells pass as
                    // slow: a NIC's own slowness lengthens the round trips of its column as
                    // much as its row's, while a process that polls late lengthens its row and
                    // its column at most a little (its receives reposted late). Far nearer:
                    // the column's excess over the healthy level, as a ratio, below the fourth
                    // root of the row's (2.7x against 54x).
                    let excess = |idx: &[usize]| f.medians(idx).map(|(p50, _)| p50 - f.p50.base);
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
        })
        .collect()
}

fn nic_culprit(f: &Fabric, a: usize, class: NicClass) -> Culprit {
    let (row, col) = (f.share(&f.rows[a]), f.share(&f.cols[a]));
    let mine: Vec<usize> = f.rows[a].iter().chain(&f.cols[a]).copied().collect();
    let slow_mine: Vec<usize> = mine.iter().copied().filter(|i| f.slow[*i]).collect();
    let (lvl, p99) = f.medians(&slow_mine).unwrap_or((f.p50.base, f.p99.base));
    let nic = &f.links.nics[a];
    let ratio = (lvl - f.p50.base).exp();
    let evidence = match class {
        NicClass::HostSide => format!(
            "{} (pid {}): its own completions are slow towards {} of its {} peers (its row, as sender: {}; {ratio:.1}x {}), while its peers' completions towards it are normal or nearly (its column: {}; {} of {} slow): the process polls late (CPU starvation, a descheduled proxy thread), not its NIC or the network",
            f.label(a),
            pids(&nic.pids),
            row.0,
            row.1,
            f.figures(&f.rows[a]),
            f.healthy_text(),
            f.figures(&f.cols[a]),
            col.0,
            col.1
        ),
        _ if !majority(row) => format!(
            "{} is slow as a peer: the completions towards it are slow from {} of its {} peers (its column: {}; {ratio:.1}x {}), its own are normal (its row: {}): its receive side (the NIC, its cable or switch port towards it)",
            f.label(a),
            col.0,
            col.1,
            f.figures(&f.cols[a]),
            f.healthy_text(),
            f.figures(&f.rows[a])
        ),
        _ => format!(
            "{} is slow towards most of its peers ({} of its {} links): median p50 {} ({ratio:.1}x {}, robust z {:.1}), p99 {}; its row (as sender) {}, its column (as peer) {}",
            f.label(a),
            slow_mine.len(),
            mine.len(),
            fmt_ns(lvl.exp()),
            f.healthy_text(),
            f.p50.z(lvl),
            fmt_ns(p99.exp()),
            f.figures(&f.rows[a]),
            f.figures(&f.cols[a])
        ),
    };
    Culprit {
        kind: if class == NicClass::HostSide {
            Kind::HostSideDelay
        } else {
            Kind::SlowNic
        },
        nics: vec![a],
        host: nic.host.clone(),
        p99_ns: p99.exp(),
        baseline_ns: f.p99.base.exp(),
        z: f.p50.z(lvl),
        evidence,
    }
}

fn pids(p: &[i64]) -> String {
    p.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// One culprit per NIC, folded per host when every NIC of a host (two or more) has the same
/// class: a slow host, or a host whose processes all poll late.
fn nic_culprits(f: &Fabric, class: &[NicClass]) -> Vec<Culprit> {
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for a in (0..class.len()).filter(|a| !f.rows[*a].is_empty() || !f.cols[*a].is_empty()) {
        by_host
            .entry(f.links.nics[a].host.as_str())
            .or_default()
            .push(a);
    }
    let mut out = Vec::new();
    for (h, members) in by_host {
        let first = class[members[0]];
        let whole = members.len() >= 2
            && first != NicClass::Fine
            && members.iter().all(|a| class[*a] == first);
        if whole {
            let mine: Vec<usize> = members
                .iter()
                .flat_map(|a| f.rows[*a].iter().chain(&f.cols[*a]))
                .copied()
                .filter(|i| f.slow[*i])
                .collect();
            let (lvl, p99) = f.medians(&mine).unwrap_or((f.p50.base, f.p99.base));
            let what = if first == NicClass::HostSide {
                "poll late: their own completions are slow while their peers see them at normal latency (the host's CPUs, not its NICs or the network)"
            } else {
                "are slow towards most of their peers: the host (PCIe, CPU, memory, its ToR)"
            };
            out.push(Culprit {
                kind: if first == NicClass::HostSide {
                    Kind::HostSideDelay
                } else {
                    Kind::SlowHost
                },
                nics: members.clone(),
                host: h.to_string(),
                p99_ns: p99.exp(),
                baseline_ns: f.p99.base.exp(),
                z: f.p50.z(lvl),
                evidence: format!(
                    "all {} NICs of {h} {what}: median p50 of their slow links {} ({:.1}x {}, robust z {:.1}), p99 {}",
                    members.len(),
                    fmt_ns(lvl.exp()),
                    (lvl - f.p50.base).exp(),
                    f.healthy_text(),
                    f.p50.z(lvl),
                    fmt_ns(p99.exp())
                ),
            });
            continue;
        }
        for a in members.into_iter().filter(|a| class[*a] != NicClass::Fine) {
            out.push(nic_culprit(f, a, class[a]));
        }
    }
    out
}

/// The slow cells no NIC culprit explains, one culprit per NIC pair: both directions slow (a
/// path), or one (one direction of a path: congestion or a degraded hop that way). A cell
/// towards a NIC whose process polls late is its doing too, when its column stays at the
/// healthy level as a whole (what makes it host-side): a starved process reposts its receives
/// late, so a peer's writes meet receiver-not-ready retries now and then.
fn link_culprits(f: &Fabric, class: &[NicClass]) -> Vec<Culprit> {
    let explained = |c: &Cell| {
        class[c.src] == NicClass::Slow
            || class[c.dst] == NicClass::Slow
            || class[c.src] == NicClass::HostSide
            || class[c.dst] == NicClass::HostSide
    };
    let mut pairs: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (i, c) in f.cells.iter().enumerate() {
        if f.slow[i] && !explained(c) {
            pairs
                .entry((c.src.min(c.dst), c.src.max(c.dst)))
                .or_default()
                .push(i);
        }
    }
    let mut out = Vec::new();
    for idx in pairs.into_values() {
        let worst = idx
            .iter()
            .copied()
            .max_by(|x, y| f.cells[*x].p50.total_cmp(&f.cells[*y].p50))
            .unwrap_or(idx[0]);
        let c = f.cells[worst];
        let (s, d) = (c.src, c.dst);
        let back = f.at.get(&(d, s)).map(|i| f.cells[*i]);
        let both = idx.len() == 2;
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
            z: f.p50.z(c.p50),
            evidence: format!(
                "{} -> {} p50 {}, p99 {} (p50 {:.1}x {}, robust z {:.1}) against {}'s row ({}) and {}'s column ({}); {reverse}{}",
                f.label(s),
                f.label(d),
                fmt_ns(c.p50.exp()),
                fmt_ns(c.p99.exp()),
                (c.p50 - f.p50.base).exp(),
                f.healthy_text(),
                f.p50.z(c.p50),
                f.label(s),
                f.figures(&f.rows[s]),
                f.label(d),
                f.figures(&f.cols[d]),
                if both {
                    ": a path (a bad switch hop, a routed detour)"
                } else {
                    ": one direction of the path (congestion or a degraded hop that way)"
                }
            ),
        });
    }
    out
}

/// The links cannot say which end: two NICs, or two hosts every link joins.
fn two_ends(f: &Fabric) -> Option<String> {
    let hosts: BTreeSet<&str> = f
        .cells
        .iter()
        .flat_map(|c| [c.src, c.dst])
        .map(|i| f.links.nics[i].host.as_str())
        .collect();
    let nics: BTreeSet<usize> = f.cells.iter().flat_map(|c| [c.src, c.dst]).collect();
    let crossing = f
        .cells
        .iter()
        .all(|c| f.links.nics[c.src].host != f.links.nics[c.dst].host);
    let all: Vec<usize> = (0..f.cells.len()).collect();
    let p99s: Vec<f64> = f.cells.iter().map(|c| c.p99).collect();
    let range = format!(
        "{} links, {}; p99 from {} to {}",
        f.cells.len(),
        f.figures(&all),
        fmt_ns(p99s.iter().copied().fold(f64::INFINITY, f64::min).exp()),
        fmt_ns(p99s.iter().copied().fold(f64::NEG_INFINITY, f64::max).exp())
    );
    if nics.len() == 2 {
        return Some(format!(
            "2 NICs: every link has one at each end, so a slow NIC, host or path slows every link alike and which end is slow cannot be told ({range})"
        ));
    }
    (hosts.len() == 2 && crossing).then(|| {
        let h: Vec<&str> = hosts.into_iter().collect();
        format!(
            "2 hosts ({} and {}): every link joins them, so a slow host, or the path between them, slows every link alike and cannot be told from a healthy run; a NIC can still be named ({range})",
            h[0], h[1]
        )
    })
}

/// Cells markedly faster than the healthy level: the baseline may itself be slow. A cell whose
/// reverse is slow does not count: when one direction of a path is congested, the other carries
/// little (its sender waits for the credits the slow direction brings), so it runs fast on an
/// idle path; that is the slow direction's doing, not a faster tier.
fn fast_group(f: &Fabric) -> Option<String> {
    let t = f.opt.threshold;
    let fast: Vec<usize> = (0..f.cells.len())
        .filter(|i| {
            let c = &f.cells[*i];
            let reverse_slow = f.at.get(&(c.dst, c.src)).is_some_and(|r| f.slow[*r]);
            f.p50.base - c.p50 >= f.min_gap && f.p50.z(c.p50) <= -t && !reverse_slow
        })
        .collect();
    if fast.len() < 2 || 50 * fast.len() < f.cells.len() {
        return None;
    }
    let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    for i in &fast {
        let (a, b) = (
            f.links.nics[f.cells[*i].src].host.as_str(),
            f.links.nics[f.cells[*i].dst].host.as_str(),
        );
        pairs.insert((a.min(b), a.max(b)));
    }
    let named: Vec<String> = pairs
        .iter()
        .take(4)
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a} <-> {b}")
            }
        })
        .collect();
    Some(format!(
        "{} of {} links are at least {:.1}x faster than the level the others share ({} against {}): that level may itself be slow (several slow hosts or NICs making most of the matrix) or the fabric has tiers, so nothing is named from it; the fast links join {}{}",
        fmt_count(fast.len() as u64),
        fmt_count(f.cells.len() as u64),
        f.opt.min_ratio,
        f.figures(&fast),
        f.healthy_text().replace("the healthy links' ", "the others' "),
        named.join(", "),
        if pairs.len() > 4 { ", ..." } else { "" }
    ))
}

/// Classifies what is slow from the links' p50 and p99 (log scale, so a ratio is a difference).
///
/// 1. A cell (one direction of a link, with at least [`MIN_LINK_SAMPLES`] completions) is slow
///    when its typical completion (p50) is at least `min_ratio` above the healthy cells' and
///    `threshold` robust z (median and MAD of the healthy cells, the spread floored at the log
///    histogram's 1/8), its tail (p99) not below theirs: a tail alone (a few late completions,
///    what scheduling jitter makes) never is.
/// 2. A NIC whose row (its own completions) and column (its peers' towards it) are mostly slow
///    (more than half) is a slow NIC; a column alone also is (its receive side). A row alone,
///    with the column at the healthy level or far nearer to it than the row (its excess below
///    the fourth root of the row's), is a host-side delay: its process polls late.
/// 3. A host with two or more NICs, every one slow, is a slow host (one finding); every one a
///    host-side delay: one host-side finding for the host.
/// 4. The slow cells no NIC explains are links: both directions slow, a slow link; one, a slow
///    link one way.
///
/// When more than half of the NICs would be named, or a group of cells (at least 2% of them) is
/// markedly faster than the baseline (`min_ratio` and `threshold` below it), the baseline is
/// not healthy (several slow hosts making most of the matrix, a tiered fabric, a run-wide
/// slowdown): nothing is named, and a caveat says so. Caveats also say when the links join two
/// NICs or two hosts only (a NIC is still named), and when most links have too few completions.
pub fn analyse(links: &LinkReport, opt: &Options) -> Analysis {
    let mut f = Fabric::new(links, opt);
    let mut a = Analysis::default();
    let measured_links = links.links.iter().filter(|l| l.latency.is_some()).count();
    if measured_links > 0 && 2 * f.cells.len() < measured_links {
        a.caveats.push(format!(
            "{} of {} links have fewer than {MIN_LINK_SAMPLES} sampled completions: their latency is not classified",
            fmt_count((measured_links - f.cells.len()) as u64),
            fmt_count(measured_links as u64)
        ));
    }
    if f.cells.len() < 3 {
        if !f.cells.is_empty() {
            a.caveats.push(format!(
                "{} measured links: too few to say what is slow",
                f.cells.len()
            ));
        }
        return a;
    }
    f.settle();
    a.caveats.extend(two_ends(&f));
    let class = classify_nics(&f);
    let named = class.iter().filter(|c| **c != NicClass::Fine).count();
    let in_matrix = (0..class.len())
        .filter(|i| !f.rows[*i].is_empty() || !f.cols[*i].is_empty())
        .count();
    if 2 * named > in_matrix {
        a.caveats.push(format!(
            "{named} of {in_matrix} NICs would be named slow against the fastest links ({}): most of the matrix is slow, or the fabric has tiers; nothing is named from it",
            f.healthy_text()
        ));
        return a;
    }
    if let Some(c) = fast_group(&f) {
        a.caveats.push(c);
        return a;
    }
    a.culprits = nic_culprits(&f, &class);
    a.culprits.extend(link_culprits(&f, &class));
    a.culprits.sort_by(|x, y| y.z.total_cmp(&x.z));
    a
}

/// The culprits of [`analyse`] (the classification without its caveats).
pub fn classify_fabric(links: &LinkReport, opt: &Options) -> Vec<Culprit> {
    analyse(links, opt).culprits
}

/// The detector: files with peers get their slow NIC, link or host named from the NIC-by-NIC
/// matrix.
pub(super) fn find(x: &Input) -> Vec<Finding> {
    if x.links().links.is_empty() {
        return Vec::new();
    }
    fabric_findings(x, &x.fabric().culprits)
}

/// What the links cannot tell, one caveat each.
pub(super) fn caveats(x: &Input) -> Vec<Caveat> {
    if x.links().links.is_empty() {
        return Vec::new();
    }
    x.fabric()
        .caveats
        .iter()
        .map(|e| Caveat {
            kind: "too_few_to_tell",
            evidence: e.clone(),
        })
        .collect()
}

/// The classification as outlier findings (one per culprit).
fn fabric_findings(x: &Input, culprits: &[Culprit]) -> Vec<Finding> {
    let links = x.links();
    culprits
        .iter()
        .map(|c| {
            let nic = &links.nics[c.nics[0]];
            let pid = nic.pids.first().copied().unwrap_or(0);
            let file = x
                .run
                .files
                .iter()
                .find(|l| l.file.host_name == nic.host && l.file.process_id == pid)
                .map_or(String::new(), |l| l.path.display().to_string());
            let whole_host =
                c.nics.len() > 1 && !matches!(c.kind, Kind::SlowLink | Kind::SlowLinkOneWay);
            let rank = match c.kind {
                _ if whole_host => c.host.clone(),
                Kind::SlowLink => {
                    format!("{} <-> {}", nic.label(), links.nics[c.nics[1]].label())
                }
                Kind::SlowLinkOneWay => {
                    format!("{} -> {}", nic.label(), links.nics[c.nics[1]].label())
                }
                _ => nic_label(&nic.host, &nic.device),
            };
            Finding {
                kind: c.kind,
                severity: c.kind.severity(),
                culprit: rank.clone(),
                category: None,
                rank,
                host: c.host.clone(),
                pid,
                file,
                device_id: (!whole_host).then_some(nic.device_id),
                roce_device: (!whole_host).then(|| nic.device.clone()),
                metric: "link_p99_completion_ns".into(),
                value: c.p99_ns,
                population: links.nics.len(),
                median: Some(c.baseline_ns),
                mad: None,
                z: Some(c.z),
                score: c.z,
                evidence: c.evidence.clone(),
                nics: c
                    .nics
                    .iter()
                    .map(|i| (links.nics[*i].host.clone(), links.nics[*i].device.clone()))
                    .collect(),
                behind: Vec::new(),
            }
        })
        .collect()
}
