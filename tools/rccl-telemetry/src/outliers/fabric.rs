//! Naming the bad one at fabric scale: a slow NIC, a slow link or a slow host, classified from
//! the NIC-by-NIC matrix of per-link p99 completion latency (files of version 3 with peers).
//!
//! The one detector that works on the joined links, not on devices: its culprits become
//! findings (`slow_nic`, `slow_link`, `slow_host`).

use super::{Finding, Input, Kind, Options};
use crate::load::Run;
use crate::stats::{fmt_ns, median};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the matrix classification found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Culprit {
    /// [`Kind::SlowNic`], [`Kind::SlowLink`] or [`Kind::SlowHost`].
    pub kind: Kind,
    /// NIC indices into [`crate::links::LinkReport::nics`]: one NIC, the two ends of a link, or
    /// every NIC of a host.
    pub nics: Vec<usize>,
    pub host: String,
    /// The culprit's p99 (the NIC's median over its links, the link's worse direction).
    pub p99_ns: f64,
    /// What it is compared with: the median over the healthy NICs (NIC, host) or links (link).
    pub baseline_ns: f64,
    pub z: f64,
    pub evidence: String,
}

/// Links with fewer sampled completions than this have no p99 worth comparing.
pub const MIN_LINK_SAMPLES: u64 = 10;

/// The smallest spread the classification divides by: ln(1 + 1/8), the log histogram's error.
fn log_floor() -> f64 {
    (1.125f64).ln()
}

/// Classifies what is slow from the links' p99 (log scale, so a ratio is a difference).
///
/// The baseline is the fast half of the matrix: its median (the lower quartile of every link)
/// and its spread (1.4826 x its MAD, doubled for the cut at the median, floored at the log
/// histogram's 1/8 error). A slow NIC or host makes up to 2/3 of the links of a small run
/// slow (one host of three), which a median over every link or over a NIC's row would take as
/// normal; the lower quartile stays on healthy links while fewer than 3/4 are slow.
///
/// 1. A link (one direction) is slow when its p99 stands above the baseline by `min_ratio`
///    and by `threshold` robust z.
/// 2. A NIC is slow when more than half of its links (its row and its column: as sender and
///    as peer) are slow: towards most of its peers, not one. A NIC with exactly half slow (the
///    ends of a slow link in a run of three NICs, the healthy NICs next to a slow host of
///    three) is not.
/// 3. A host is slow when it has two or more NICs in the matrix and every one of them is slow;
///    it is then one finding, not one per NIC.
/// 4. The slow links whose two ends are not slow NICs are links (paths): one finding per NIC
///    pair, with the pair's p99 against its row and column medians. Both directions must be
///    slow when both are measured (a completion waits for the round trip, so a slow path
///    shows both ways; one slow direction alone is the noise of one p99).
///
/// Limits: with two NICs (or two hosts) nothing can say which end is slow; links with fewer
/// than [`MIN_LINK_SAMPLES`] completions are left out.
#[allow(clippy::too_many_lines)] // past the limit of clippy.toml: to be split into its steps
pub fn classify_fabric(links: &crate::links::LinkReport, opt: &Options) -> Vec<Culprit> {
    let n = links.nics.len();
    // Sparse: a job of 16,384 NICs has 268 M cells and about 8 links per NIC.
    let m = links.sparse_matrix(|l| {
        l.latency
            .as_ref()
            .filter(|x| x.samples >= MIN_LINK_SAMPLES)
            .and_then(|x| x.p99_ns)
            .filter(|p| *p > 0.0)
            .map(f64::ln)
    });
    let label = |i: usize| links.nics[i].label();
    let all: Vec<f64> = m.values().collect();
    if all.len() < 3 {
        return Vec::new();
    }
    let mid = median(&all).unwrap_or(0.0);
    let fast: Vec<f64> = all.iter().copied().filter(|v| *v <= mid).collect();
    let base = median(&fast).unwrap_or(mid);
    let scale = (2.0 * 1.4826 * crate::stats::mad(&fast, base)).max(log_floor());
    let min_gap = opt.min_ratio.max(1.0).ln();
    let z_of = |v: f64| (v - base) / scale;
    let slow = |v: f64| v - base >= min_gap && z_of(v) >= opt.threshold;
    let ns = |x: f64| fmt_ns(x.exp());
    let row_col = |a: usize| -> (Option<f64>, Option<f64>) {
        let row: Vec<f64> = m.row(a).filter(|(b, _)| *b != a).map(|x| x.1).collect();
        let col: Vec<f64> = m.col(a).filter(|(b, _)| *b != a).map(|x| x.1).collect();
        (median(&row), median(&col))
    };
    // NICs: the share of their links that are slow.
    let mut nic_slow = vec![false; n];
    let mut level = vec![f64::NAN; n];
    for a in 0..n {
        let mine: Vec<f64> = m.links_of(a);
        if mine.is_empty() {
            continue;
        }
        level[a] = median(&mine).unwrap_or(f64::NAN);
        let k = mine.iter().filter(|v| slow(**v)).count();
        nic_slow[a] = 2 * k > mine.len() && slow(level[a]);
    }
    let mut out = Vec::new();
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for a in (0..n).filter(|a| !level[*a].is_nan()) {
        by_host
            .entry(links.nics[a].host.as_str())
            .or_default()
            .push(a);
    }
    let mut in_host = vec![false; n];
    for (h, members) in &by_host {
        if members.len() >= 2 && members.iter().all(|a| nic_slow[*a]) {
            let lv: Vec<f64> = members.iter().map(|a| level[*a]).collect();
            let lvl = median(&lv).unwrap_or(f64::NAN);
            for a in members {
                in_host[*a] = true;
            }
            out.push(Culprit {
                kind: Kind::SlowHost,
                nics: members.clone(),
                host: h.to_string(),
                p99_ns: lvl.exp(),
                baseline_ns: base.exp(),
                z: z_of(lvl),
                evidence: format!(
                    "all {} NICs of {h} are slow towards most of their peers: median p99 of their links {} ({:.1}x the healthy links' {}, robust z {:.1})",
                    members.len(),
                    ns(lvl),
                    (lvl - base).exp(),
                    ns(base),
                    z_of(lvl)
                ),
            });
        }
    }
    for a in (0..n).filter(|a| nic_slow[*a] && !in_host[*a]) {
        let (row, col) = row_col(a);
        let mine: Vec<f64> = m.links_of(a);
        let k = mine.iter().filter(|v| slow(**v)).count();
        out.push(Culprit {
            kind: Kind::SlowNic,
            nics: vec![a],
            host: links.nics[a].host.clone(),
            p99_ns: level[a].exp(),
            baseline_ns: base.exp(),
            z: z_of(level[a]),
            evidence: format!(
                "{} is slow towards most of its peers ({k} of its {} links): median p99 {} ({:.1}x the healthy links' {}, robust z {:.1}); its row (as sender) {}, its column (as peer) {}",
                label(a),
                mine.len(),
                ns(level[a]),
                (level[a] - base).exp(),
                ns(base),
                z_of(level[a]),
                row.map_or("-".into(), ns),
                col.map_or("-".into(), ns)
            ),
        });
    }
    // Slow links between NICs that are not slow themselves.
    // (host a, host b) -> the slow links (NIC a, NIC b, p99) between them.
    type HostPairLinks = BTreeMap<(usize, usize), Vec<(usize, usize, f64)>>;
    let mut pairs: HostPairLinks = BTreeMap::new();
    for (a, b, v) in m.entries() {
        if a != b && !nic_slow[a] && !nic_slow[b] && slow(v) {
            pairs
                .entry((a.min(b), a.max(b)))
                .or_default()
                .push((a, b, v));
        }
    }
    for ((a, b), dirs) in pairs {
        // Completion latency is a round trip: a slow path delays both directions' completions
        // (data one way, ACKs the other). One slow direction while the other is measured and
        // normal is the tail noise of one p99, not a path.
        if dirs.len() == 1 && m[dirs[0].1][dirs[0].0].is_some() {
            continue;
        }
        let (s, d, v) = dirs
            .iter()
            .copied()
            .max_by(|x, y| x.2.total_cmp(&y.2))
            .unwrap_or((a, b, 0.0));
        let (row, _) = row_col(s);
        let (_, col) = row_col(d);
        out.push(Culprit {
            kind: Kind::SlowLink,
            nics: vec![a, b],
            host: links.nics[s].host.clone(),
            p99_ns: v.exp(),
            baseline_ns: base.exp(),
            z: z_of(v),
            evidence: format!(
                "{} -> {} p99 {} ({:.1}x the healthy links' {}, robust z {:.1}) against {}'s row median {} and {}'s column median {}; {} -> {} {}{}",
                label(s),
                label(d),
                ns(v),
                (v - base).exp(),
                ns(base),
                z_of(v),
                label(s),
                row.map_or("-".into(), ns),
                label(d),
                col.map_or("-".into(), ns),
                label(d),
                label(s),
                m[d][s].map_or("-".into(), ns),
                if dirs.len() == 2 { " (slow both ways)" } else { "" }
            ),
        });
    }
    out.sort_by(|x, y| y.z.total_cmp(&x.z));
    out
}

/// The detector: files with peers get their slow NIC, link or host named from the NIC-by-NIC
/// matrix.
pub(super) fn find(x: &Input) -> Vec<Finding> {
    let links = crate::links::join(x.run);
    if links.links.is_empty() {
        return Vec::new();
    }
    let culprits = classify_fabric(&links, x.opt);
    fabric_findings(x.run, &links, &culprits)
}

/// The classification as outlier findings (one per culprit).
fn fabric_findings(
    run: &Run,
    links: &crate::links::LinkReport,
    culprits: &[Culprit],
) -> Vec<Finding> {
    culprits
        .iter()
        .map(|c| {
            let nic = &links.nics[c.nics[0]];
            let pid = nic.pids.first().copied().unwrap_or(0);
            let file = run
                .files
                .iter()
                .find(|l| l.file.host_name == nic.host && l.file.process_id == pid)
                .map_or(String::new(), |l| l.path.display().to_string());
            let rank = match c.kind {
                Kind::SlowHost => c.host.clone(),
                Kind::SlowLink => {
                    format!("{} <-> {}", nic.label(), links.nics[c.nics[1]].label())
                }
                _ => nic.label(),
            };
            Finding {
                kind: c.kind,
                category: None,
                rank,
                host: c.host.clone(),
                pid,
                file,
                device_id: (c.kind != Kind::SlowHost).then_some(nic.device_id),
                roce_device: (c.kind != Kind::SlowHost).then(|| nic.device.clone()),
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
            }
        })
        .collect()
}
