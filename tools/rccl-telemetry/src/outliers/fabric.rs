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
use std::collections::{BTreeSet, HashMap};

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
    /// How sure the verdict is, 0 to 1 ([`super::explain`]: the cells it explains, its margin
    /// over the next explanation, the matrix's size).
    pub confidence: f64,
    /// When the links cannot tell between explanations that fit equally (the only link of
    /// two NICs: either end, or the path): each of them, as (kind, culprit); empty otherwise.
    pub alternatives: Vec<(Kind, String)>,
    /// The slow cells it explains, as (sender, receiver) NIC indices: what folds the latency
    /// tails of its peers into it.
    #[serde(skip)]
    pub cells: Vec<(usize, usize)>,
}

/// Links with fewer sampled completions than this have no p99 worth comparing.
pub const MIN_LINK_SAMPLES: u64 = 10;

/// Links with fewer sampled completions than this are not judged by their tail (p90): the
/// tenth slowest of a few dozen completions is a handful of them, what scheduling jitter (up to
/// one completion in twenty polled late) makes by chance.
pub const MIN_TAIL_SAMPLES: u64 = 100;

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

/// One measured direction of a link (latencies as ln ns). `tail`: enough completions, from a
/// log-scale histogram, for its p90 to be judged.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cell {
    pub src: usize,
    pub dst: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub tail: bool,
}

/// A level and its robust spread (log scale).
#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    pub base: f64,
    pub scale: f64,
}

impl Level {
    fn of(vals: &[f64]) -> Level {
        let base = median(vals).unwrap_or(0.0);
        let scale = (1.4826 * crate::stats::mad(vals, base)).max(log_floor());
        Level { base, scale }
    }

    pub fn z(&self, v: f64) -> f64 {
        (v - self.base) / self.scale
    }
}

/// The matrix, indexed by row and column, with the healthy levels and the slow cells. `x50`
/// and `x90` are each cell's excess over the healthy p50 and p90 (log scale) that no accepted
/// culprit explains yet: [`super::explain`] takes a culprit's share off the cells it explains
/// and judges the rest again.
pub(super) struct Fabric<'a> {
    pub links: &'a LinkReport,
    pub opt: &'a Options,
    pub cells: Vec<Cell>,
    pub rows: Vec<Vec<usize>>,
    pub cols: Vec<Vec<usize>>,
    pub at: HashMap<(usize, usize), usize>,
    pub p50: Level,
    pub p90: Level,
    pub p99: Level,
    pub x50: Vec<f64>,
    pub x90: Vec<f64>,
    pub slow: Vec<bool>,
    pub min_gap: f64,
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
                    let p90 = x.p90_ns.filter(|p| *p > 0.0).unwrap_or(p50);
                    cells.push(Cell {
                        src: l.src_nic,
                        dst: l.dst_nic,
                        p50: p50.ln(),
                        p90: p90.ln(),
                        p99: p99.ln(),
                        tail: x.relative_error.is_some() && x.samples >= MIN_TAIL_SAMPLES,
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
        let zeros = vec![0.0; cells.len()];
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
            p90: flat,
            p99: flat,
            x50: zeros.clone(),
            x90: zeros,
            slow,
            min_gap: opt.min_ratio.max(1.0).ln(),
        }
    }

    /// Slow: the typical completion (p50) at least `min_ratio` above the healthy links' and
    /// `threshold` robust z, and the tail (p99) not below theirs; or, with enough completions
    /// ([`MIN_TAIL_SAMPLES`]), the slowest tenth (p90) as far above the healthy links' p90. The
    /// p50 is what a slow NIC, path or process moves; the p90 what a NIC slow in part of its
    /// work moves (a PCIe link trained down, a port that flaps); the p99 is also what
    /// scheduling jitter moves (a few late completions), so it alone never is. Judged on the
    /// cell's excess no accepted culprit explains (`x50`, `x90`).
    pub fn judge(&self, i: usize, x50: f64, x90: f64) -> bool {
        let c = &self.cells[i];
        let by_p50 = x50 >= self.min_gap
            && x50 / self.p50.scale >= self.opt.threshold
            && c.p99 >= self.p99.base;
        let by_tail = c.tail && x90 >= self.min_gap && x90 / self.p90.scale >= self.opt.threshold;
        by_p50 || by_tail
    }

    /// The unexplained excess of a cell: the larger of its p50's and (when judged) its p90's.
    pub fn excess(&self, i: usize) -> f64 {
        if self.cells[i].tail {
            self.x50[i].max(self.x90[i])
        } else {
            self.x50[i]
        }
    }

    /// Judges every cell again on its unexplained excess.
    pub fn rejudge(&mut self) {
        self.slow = (0..self.cells.len())
            .map(|i| self.judge(i, self.x50[i], self.x90[i]))
            .collect();
    }

    /// The healthy levels: start from the lower quartile (healthy while fewer than 3/4 of the
    /// cells are slow: one slow host of three makes 2/3 slow), take as healthy what is not
    /// `min_ratio` above it, then iterate (levels from the healthy cells, slow cells by both
    /// rules) until the healthy set stops changing.
    fn settle(&mut self) {
        let p50s: Vec<f64> = self.cells.iter().map(|c| c.p50).collect();
        let p90s: Vec<f64> = self.cells.iter().map(|c| c.p90).collect();
        let p99s: Vec<f64> = self.cells.iter().map(|c| c.p99).collect();
        let (lq50, lq90, lq99) = (
            lower_quartile(&p50s),
            lower_quartile(&p90s),
            lower_quartile(&p99s),
        );
        let mut healthy: Vec<bool> = self
            .cells
            .iter()
            .map(|c| {
                (c.p50 - lq50 < self.min_gap || c.p99 < lq99)
                    && (!c.tail || c.p90 - lq90 < self.min_gap)
            })
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
            self.p90 = Level::of(&pick(&p90s));
            self.p99 = Level::of(&pick(&p99s));
            self.x50 = p50s.iter().map(|v| v - self.p50.base).collect();
            self.x90 = p90s.iter().map(|v| v - self.p90.base).collect();
            self.rejudge();
            let next: Vec<bool> = self.slow.iter().map(|s| !s).collect();
            if next == healthy {
                break;
            }
            healthy = next;
        }
    }

    pub fn label(&self, i: usize) -> String {
        self.links.nics[i].label()
    }

    /// (slow cells, cells) of a row or column.
    pub fn share(&self, idx: &[usize]) -> (usize, usize) {
        (idx.iter().filter(|i| self.slow[**i]).count(), idx.len())
    }

    /// Median p50 and p99 of some cells (ln ns).
    pub fn medians(&self, idx: &[usize]) -> Option<(f64, f64)> {
        let p50: Vec<f64> = idx.iter().map(|i| self.cells[*i].p50).collect();
        let p99: Vec<f64> = idx.iter().map(|i| self.cells[*i].p99).collect();
        Some((median(&p50)?, median(&p99)?))
    }

    /// "p50 12.0 µs, p99 40.1 µs" of some cells, or "-".
    pub fn figures(&self, idx: &[usize]) -> String {
        self.medians(idx).map_or("-".into(), |(a, b)| {
            format!("p50 {}, p99 {}", fmt_ns(a.exp()), fmt_ns(b.exp()))
        })
    }

    /// "the healthy links' p50 9.0 µs (p99 12.9 µs)": what ratios are taken against.
    pub fn healthy_text(&self) -> String {
        format!(
            "the healthy links' p50 {} (p99 {})",
            fmt_ns(self.p50.base.exp()),
            fmt_ns(self.p99.base.exp())
        )
    }
}

impl Culprit {
    /// An ambiguous culprit about one direction only (its cells all from its first NIC).
    fn one_way(&self) -> bool {
        !self.cells.is_empty() && self.cells.iter().all(|(s, _)| Some(s) == self.nics.first())
    }
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
            "2 hosts ({} and {}): every link joins them, so a slow host, or the path between them, slows every link alike and cannot be told from a healthy run; a NIC is named only from links to several NICs of the other host (a NIC with one link cannot be told from its peer or the path: both are named in one finding) ({range})",
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

/// Classifies what is slow from the links' p50, p90 and p99 (log scale, so a ratio is a
/// difference).
///
/// 1. A cell (one direction of a link, with at least [`MIN_LINK_SAMPLES`] completions) is slow
///    when its typical completion (p50) is at least `min_ratio` above the healthy cells' and
///    `threshold` robust z (median and MAD of the healthy cells, the spread floored at the log
///    histogram's 1/8), its tail (p99) not below theirs; or when its slowest tenth (p90, from
///    at least [`MIN_TAIL_SAMPLES`] completions) is as far above theirs. A p99 alone (a few late
///    completions, what scheduling jitter makes) never is.
/// 2. The slow cells are explained by the fewest culprits, strongest first
///    ([`super::explain`]): a slow NIC (its row and column mostly slow, or its column), a
///    host-side delay (its row alone), a slow host (every NIC of it), then links (both
///    directions) and one-way links for what is left. A culprit's share is taken off the cells
///    it explains and the rest judged again, so a healthy NIC whose slow links all go to
///    culprits is not named, and a link slow on top of a slow NIC still is. Explanations that
///    fit the same cells equally (the only link of two NICs) are one finding naming both.
///
/// When more than half of the NICs would be named, or a group of cells (at least 2% of them) is
/// markedly faster than the baseline (`min_ratio` and `threshold` below it), the baseline is
/// not healthy (several slow hosts making most of the matrix, a tiered fabric, a run-wide
/// slowdown): nothing is named, and a caveat says so. Caveats also say when the links join two
/// NICs or two hosts only, and when most links have too few completions.
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
    if let Some(c) = fast_group(&f) {
        a.caveats.push(c);
        return a;
    }
    let healthy = f.healthy_text();
    let culprits = super::explain::explain(&mut f);
    let named: BTreeSet<usize> = culprits
        .iter()
        .filter(|c| !matches!(c.kind, Kind::SlowLink | Kind::SlowLinkOneWay))
        .flat_map(|c| c.nics.iter().copied())
        .collect();
    let in_matrix = (0..links.nics.len())
        .filter(|i| !f.rows[*i].is_empty() || !f.cols[*i].is_empty())
        .count();
    if 2 * named.len() > in_matrix {
        a.caveats.push(format!(
            "{} of {in_matrix} NICs would be named slow against the fastest links ({healthy}): most of the matrix is slow, or the fabric has tiers; nothing is named from it",
            named.len()
        ));
        return a;
    }
    a.culprits = culprits;
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
            let whole_host = c.nics.len() > 1
                && !matches!(
                    c.kind,
                    Kind::SlowLink | Kind::SlowLinkOneWay | Kind::SlowLinkOrNic
                );
            let rank = match c.kind {
                _ if whole_host => c.host.clone(),
                Kind::SlowLink | Kind::SlowLinkOrNic if c.nics.len() == 2 && !c.one_way() => {
                    format!("{} <-> {}", nic.label(), links.nics[c.nics[1]].label())
                }
                Kind::SlowLinkOrNic if c.nics.len() == 2 => {
                    format!("{} -> {}", nic.label(), links.nics[c.nics[1]].label())
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
                confidence: c.confidence,
                alternatives: c
                    .alternatives
                    .iter()
                    .map(|(k, n)| super::Alternative {
                        kind: *k,
                        culprit: n.clone(),
                    })
                    .collect(),
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
