//! `stalls`: what is stuck. Every QP the files (format version 3, stall detection on) mark
//! `stalled`, grouped by link (its NIC and its peer's NIC, through the join of `links`),
//! longest first, with the ranks waiting on them; the longest stall of every rank (so a run
//! that recovered still shows its worst pause); and the stalled QPs of the live Prometheus
//! textfiles (`*.prom`: `rccl_telemetry_stalled_qps` per device, and the per-QP series
//! `rccl_telemetry_qp_stalled_seconds` / `rccl_telemetry_qp_stall_outstanding` with the labels
//! host, pid, device, channel, qp, qp_num, peer_gid, peer_qp_num). The root of the hang
//! (`roots`) comes from the wait-for graph of `crate::hang`.

use crate::context::RunContext;
use crate::hang::peers::{Peer, PeerResolver};
use crate::layout::{col, table, Column, Layout};
use crate::load::addr::{lookup, QpIndex, Who};
use crate::load::Run;
use crate::model::{parse_timestamp_ns, Channel, Device, QueuePair, TelemetryFile};
use crate::stats::fmt_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One stalled QP.
#[derive(Debug, Clone, Serialize)]
pub struct StalledQp {
    /// "file" (a JSON file) or "prom" (a live textfile).
    pub source: &'static str,
    pub host: String,
    pub pid: i64,
    pub device: String,
    pub channel: Option<u64>,
    pub qp: Option<u64>,
    pub qp_num: Option<u64>,
    pub outstanding: Option<u64>,
    /// How long it has been stalled when the file was written (end_time - stalled_since), or
    /// the textfile's qp_stalled_seconds.
    pub stalled_ms: Option<u64>,
    pub stalled_since: Option<String>,
    pub oldest_outstanding_ms: Option<u64>,
    pub peer_gid: Option<String>,
    pub peer_lid: Option<u64>,
    pub peer_qp_num: Option<u64>,
    /// The peer QP's owner, "host:pid device", when one file claims it.
    pub peer_rank: Option<String>,
    pub peer_nic: Option<String>,
}

/// The stalled QPs of one link (or of one NIC towards a peer that is in no file).
#[derive(Debug, Clone, Serialize)]
pub struct StallGroup {
    pub src: String,
    /// "host:device" of the peer NIC; else its GID/LID and "(not in the files)".
    pub dst: String,
    pub qps: Vec<StalledQp>,
    pub longest_ms: Option<u64>,
    pub outstanding: u64,
    /// The ranks whose QPs are stalled here (waiting on a completion), and the ranks at the
    /// other end.
    pub waiting_ranks: Vec<String>,
    pub peer_ranks: Vec<String>,
}

/// The longest stall of one rank (any file: snapshot or final).
#[derive(Debug, Clone, Serialize)]
pub struct RankStall {
    pub rank: String,
    pub is_final: bool,
    pub longest_stall_ms: u64,
    pub start: Option<String>,
    pub device: String,
    pub qp: u64,
    pub qp_num: Option<u64>,
    pub peer: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct StallReport {
    /// JSON files read, those with stall keys, and the snapshots (final = false) among them.
    pub files: usize,
    pub files_with_stall_keys: usize,
    pub snapshots: usize,
    pub prom_files: usize,
    pub stalled_qps: usize,
    /// The textfiles' rccl_telemetry_stalled_qps summed (it counts QPs beyond the per-QP cap too).
    pub prom_stalled_qps_gauge: Option<u64>,
    pub groups: Vec<StallGroup>,
    pub longest_per_rank: Vec<RankStall>,
    /// Lines of the textfiles that could not be read (the first 10).
    pub prom_problems: Vec<String>,
    /// The root(s) of the hang from the wait-for graph of the JSON files (`crate::hang`): empty
    /// when none can be named, and then `no_root` says why (null when there is no hang at all).
    pub roots: Vec<crate::hang::Root>,
    /// "wait_for" (stalled or errored QPs), "quiet" (last-progress times) or "none".
    pub roots_basis: &'static str,
    pub no_root: Option<String>,
    /// QPs with error completions (format version 4), in the JSON files' latest file per rank.
    pub errored_qps: u64,
    /// Ranks with a QP waiting on another rank.
    pub waiting_ranks: usize,
    /// The jobs the files are of, when more than one (`jobs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<crate::jobs::Jobs>,
}

impl StallReport {
    /// Something is stuck now: a QP stalled, or a root named.
    pub fn found(&self) -> bool {
        self.stalled_qps > 0 || !self.roots.is_empty()
    }
}

/// The *.prom files among the inputs (files given, and those in directories given).
pub fn prom_inputs(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for i in inputs {
        if i.is_dir() {
            if let Ok(rd) = std::fs::read_dir(i) {
                out.extend(
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "prom")),
                );
            }
        } else if i.extension().is_some_and(|x| x == "prom") && i.is_file() {
            out.push(i.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One sample of a Prometheus text line: name, labels, value. None for comments, blank lines
/// and lines that do not parse (the caller counts those).
pub fn parse_prom_line(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if rest.starts_with('{') {
        let mut chars = rest[1..].char_indices();
        let mut key = String::new();
        let mut val = String::new();
        let mut in_val = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if in_val {
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => val.push('\n'),
                        Some((_, x)) => val.push(x),
                        None => return None,
                    },
                    '"' => {
                        labels.insert(
                            std::mem::take(&mut key).trim().to_string(),
                            std::mem::take(&mut val),
                        );
                        in_val = false;
                    }
                    _ => val.push(c),
                }
            } else {
                match c {
                    '}' => {
                        end = Some(i + 2);
                        break;
                    }
                    '=' => {
                        if chars.next().map(|x| x.1) != Some('"') {
                            return None;
                        }
                        in_val = true;
                    }
                    ',' | ' ' => {}
                    _ => key.push(c),
                }
            }
        }
        rest = &rest[end?..];
    }
    let v = rest.split_whitespace().next()?;
    let value = match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => v.parse().ok()?,
    };
    Some((name, labels, value))
}

fn ms_between(since: &str, until: &str) -> Option<u64> {
    let (a, b) = (parse_timestamp_ns(since)?, parse_timestamp_ns(until)?);
    (b >= a).then(|| ((b - a) / 1_000_000) as u64)
}

/// Finds the stalls of the run and of the textfiles.
pub fn find(run: &Run, proms: &[PathBuf]) -> StallReport {
    find_in(&RunContext::new(run), proms)
}

/// [`find`] on a run whose shared analyses (its QP index, its hang) other parts of the
/// command read too.
pub fn find_in(cx: &RunContext, proms: &[PathBuf]) -> StallReport {
    let run = cx.run();
    let mut rep = StallReport {
        files: run.files.len(),
        prom_files: proms.len(),
        ..Default::default()
    };
    let idx = cx.qp_index();
    let mut stalled = file_stalls(cx, idx, &mut rep);
    stalled.extend(prom_stalls(proms, idx, &mut rep));
    rep.stalled_qps = stalled.len();
    rep.groups = group_by_link(stalled);
    rep.groups.sort_by(|a, b| {
        b.longest_ms
            .cmp(&a.longest_ms)
            .then_with(|| b.qps.len().cmp(&a.qps.len()))
    });
    rep.longest_per_rank
        .sort_by_key(|r| std::cmp::Reverse(r.longest_stall_ms));
    let h = cx.hang();
    rep.errored_qps = h.errored_qps;
    rep.waiting_ranks = h.waiting_ranks;
    rep.roots_basis = h.basis;
    rep.no_root = h.no_root.clone();
    rep.roots = h.roots.clone();
    rep.jobs = cx.jobs().cloned();
    rep
}

/// Collects the stalled QPs of the files, and each rank's longest stall into the report.
fn file_stalls(cx: &RunContext, idx: &QpIndex, rep: &mut StallReport) -> Vec<StalledQp> {
    let run = cx.run();
    let mut stalled: Vec<StalledQp> = Vec::new();
    // Finalized communicators' QPs: their peers' QPs are no rows either, so their peers are
    // found by their NICs' addresses (built only for a run that has such QPs).
    let kept = |f: &TelemetryFile| {
        f.devices
            .iter()
            .any(|d| d.finalized_comms.iter().any(|r| !r.queue_pairs.is_empty()))
    };
    let resolver = run
        .files
        .iter()
        .any(|l| kept(&l.file))
        .then(|| PeerResolver::new(run, idx, cx.latest()));
    for l in &run.files {
        let f = &l.file;
        let has_keys =
            f.stall_ms.is_some() || f.devices.iter().any(|d| d.num_qps_stalled.is_some());
        if !has_keys {
            continue;
        }
        rep.files_with_stall_keys += 1;
        if f.is_final == Some(false) {
            rep.snapshots += 1;
        }
        let rank = format!("{}:{}", f.host_name, f.process_id);
        let mut best: Option<RankStall> = None;
        for d in &f.devices {
            let peer_one = |q: &QueuePair| {
                let claims = q
                    .peer
                    .as_ref()
                    .map_or(&[][..], |p| lookup(idx, p.gid.as_deref(), p.lid, p.qp_num));
                (claims.len() == 1).then(|| &claims[0])
            };
            let mut longest = |q: &QueuePair, peer: Option<&Who>| {
                let ls = q.longest_stall_ms.unwrap_or(0);
                if ls > 0 && best.as_ref().is_none_or(|b| ls > b.longest_stall_ms) {
                    best = Some(RankStall {
                        rank: rank.clone(),
                        is_final: f.is_final != Some(false),
                        longest_stall_ms: ls,
                        start: q.longest_stall_start.as_deref().map(String::from),
                        device: d.roce_device.clone(),
                        qp: q.id,
                        qp_num: q.qp_num,
                        peer: peer_label(q, peer),
                    });
                }
            };
            for c in &d.channels {
                for q in &c.queue_pairs {
                    longest(q, peer_one(q));
                    if q.stalled == Some(true) {
                        stalled.push(file_stalled_qp(f, d, c, q, peer_one(q)));
                    }
                }
            }
            // The stalls of finalized communicators' QPs ended at their finalization: they
            // count for the longest, never as stalled now.
            for q in d.finalized_comms.iter().flat_map(|r| &r.queue_pairs) {
                let q = &q.qp;
                let peer = q.peer.as_ref().zip(resolver.as_ref());
                let who: Option<Who> = match peer.map(|(p, r)| r.resolve(p)) {
                    Some(Peer::Rank(host, pid, nic)) => {
                        let dev = nic.strip_prefix(&format!("{host}:")).unwrap_or(&nic);
                        Some(std::sync::Arc::new((host.clone(), pid, dev.to_owned())))
                    }
                    _ => None,
                };
                longest(q, who.as_ref());
            }
        }
        rep.longest_per_rank.extend(best);
    }
    stalled
}

/// Names a QP's peer: its rank and NIC when the run holds it, else its address and QPN.
fn peer_label(q: &QueuePair, peer_one: Option<&Who>) -> Option<String> {
    peer_one
        .map(|p| format!("{}:{} {}", p.0, p.1, p.2))
        .or_else(|| {
            q.peer.as_ref().map(|p| {
                format!(
                    "{} QPN {}",
                    p.gid
                        .as_deref()
                        .map(String::from)
                        .or(p.lid.map(|l| format!("LID {l}")))
                        .unwrap_or_default(),
                    p.qp_num
                )
            })
        })
}

/// The stalled QP of a file, with its peer when the run holds exactly one claimant.
fn file_stalled_qp(
    f: &TelemetryFile,
    d: &Device,
    c: &Channel,
    q: &QueuePair,
    peer_one: Option<&Who>,
) -> StalledQp {
    StalledQp {
        source: "file",
        host: f.host_name.clone(),
        pid: f.process_id,
        device: d.roce_device.clone(),
        channel: c.id,
        qp: Some(q.id),
        qp_num: q.qp_num,
        outstanding: q.num_wqe_outstanding,
        stalled_ms: q
            .stalled_since
            .as_deref()
            .and_then(|s| ms_between(s, &f.end_time)),
        stalled_since: q.stalled_since.as_deref().map(String::from),
        oldest_outstanding_ms: q.oldest_outstanding_ms,
        peer_gid: q
            .peer
            .as_ref()
            .and_then(|p| p.gid.as_deref().map(String::from)),
        peer_lid: q.peer.as_ref().and_then(|p| p.lid),
        peer_qp_num: q.peer.as_ref().map(|p| p.qp_num),
        peer_rank: peer_one.map(|p| format!("{}:{}", p.0, p.1)),
        peer_nic: peer_one.map(|p| format!("{}:{}", p.0, p.2)),
    }
}

/// A stalled QP's series in the textfiles: (host, pid, device, channel, qp).
type SeriesKey = (String, String, String, String, String);

/// Collects the stalled QPs of the textfiles (their peers resolved in the run), and the
/// stalled-QPs gauge and the textfiles' problems into the report.
fn prom_stalls(proms: &[PathBuf], idx: &QpIndex, rep: &mut StallReport) -> Vec<StalledQp> {
    let mut gauge: Option<u64> = None;
    let mut series: BTreeMap<SeriesKey, StalledQp> = BTreeMap::new();
    for p in proms {
        let Ok(text) = std::fs::read_to_string(p) else {
            rep.prom_problems
                .push(format!("{}: cannot read", p.display()));
            continue;
        };
        for (ln, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let Some((name, lab, v)) = parse_prom_line(t) else {
                if rep.prom_problems.len() < 10 {
                    rep.prom_problems.push(format!(
                        "{}:{}: not a sample line",
                        p.display(),
                        ln + 1
                    ));
                }
                continue;
            };
            match name.as_str() {
                "rccl_telemetry_stalled_qps" => *gauge.get_or_insert(0) += v.max(0.0) as u64,
                "rccl_telemetry_qp_stalled_seconds" | "rccl_telemetry_qp_stall_outstanding" => {
                    add_prom_sample(&mut series, &name, &lab, v);
                }
                _ => {}
            }
        }
    }
    rep.prom_stalled_qps_gauge = gauge;
    series
        .into_values()
        .map(|mut q| {
            if let Some(qpn) = q.peer_qp_num {
                let claims = lookup(idx, q.peer_gid.as_deref(), None, qpn);
                if claims.len() == 1 {
                    q.peer_rank = Some(format!("{}:{}", claims[0].0, claims[0].1));
                    q.peer_nic = Some(format!("{}:{}", claims[0].0, claims[0].2));
                }
            }
            q
        })
        .collect()
}

/// Adds a stalled-seconds or stall-outstanding sample to its QP's series.
fn add_prom_sample(
    series: &mut BTreeMap<SeriesKey, StalledQp>,
    name: &str,
    lab: &BTreeMap<String, String>,
    v: f64,
) {
    let get = |k: &str| lab.get(k).cloned().unwrap_or_default();
    let key = (
        get("host"),
        get("pid"),
        get("device"),
        get("channel"),
        get("qp"),
    );
    let e = series.entry(key).or_insert_with(|| StalledQp {
        source: "prom",
        host: get("host"),
        pid: get("pid").parse().unwrap_or(-1),
        device: get("device"),
        channel: get("channel").parse().ok(),
        qp: get("qp").parse().ok(),
        qp_num: get("qp_num").parse().ok(),
        outstanding: None,
        stalled_ms: None,
        stalled_since: None,
        oldest_outstanding_ms: None,
        peer_gid: crate::load::addr::norm_gid(lab.get("peer_gid").map(String::as_str)),
        peer_lid: None,
        peer_qp_num: get("peer_qp_num").parse().ok(),
        peer_rank: None,
        peer_nic: None,
    });
    if name.ends_with("seconds") {
        e.stalled_ms = (v.is_finite() && v >= 0.0).then(|| (v * 1000.0).round() as u64);
    } else {
        e.outstanding = (v.is_finite() && v >= 0.0).then_some(v as u64);
    }
}

/// Groups the stalled QPs by link (this NIC to the peer's), each with its waiting ranks.
fn group_by_link(stalled: Vec<StalledQp>) -> Vec<StallGroup> {
    let mut groups: BTreeMap<(String, String), Vec<StalledQp>> = BTreeMap::new();
    for q in stalled {
        let src = format!("{}:{}", q.host, q.device);
        let dst = q.peer_nic.clone().unwrap_or_else(|| {
            let who = q
                .peer_gid
                .clone()
                .or(q.peer_lid.map(|l| format!("LID {l}")));
            match who {
                Some(w) => format!("{w} (not in the files)"),
                None => "peer unknown".into(),
            }
        });
        groups.entry((src, dst)).or_default().push(q);
    }
    groups
        .into_iter()
        .map(|((src, dst), mut qps)| {
            qps.sort_by_key(|q| std::cmp::Reverse(q.stalled_ms));
            let mut waiting: Vec<String> = qps
                .iter()
                .map(|q| format!("{}:{}", q.host, q.pid))
                .collect();
            waiting.sort();
            waiting.dedup();
            let mut peers: Vec<String> = qps.iter().filter_map(|q| q.peer_rank.clone()).collect();
            peers.sort();
            peers.dedup();
            StallGroup {
                longest_ms: qps.iter().filter_map(|q| q.stalled_ms).max(),
                outstanding: qps.iter().filter_map(|q| q.outstanding).sum(),
                src,
                dst,
                qps,
                waiting_ranks: waiting,
                peer_ranks: peers,
            }
        })
        .collect()
}

fn hang_of(r: &StallReport) -> crate::hang::Hang {
    crate::hang::Hang {
        basis: r.roots_basis,
        stalled_qps: r.stalled_qps as u64,
        errored_qps: r.errored_qps,
        roots: r.roots.clone(),
        no_root: r.no_root.clone(),
        ..Default::default()
    }
}

fn ms(v: Option<u64>) -> String {
    v.map_or("-".into(), |m| fmt_ns(m as f64 * 1e6))
}

/// One line for `summary`: None when no file has stall keys and no textfile was read.
pub fn one_line(r: &StallReport) -> Option<String> {
    if r.files_with_stall_keys == 0 && r.prom_files == 0 {
        return None;
    }
    let worst = r.longest_per_rank.first();
    let hang = crate::hang::one_line(&hang_of(r)).map_or(String::new(), |l| format!("\n{l}"));
    Some(
        format!(
        "Stalls: {} QPs stalled now on {} links ({} snapshot files); longest stall of the run {}{}",
        r.stalled_qps,
        r.groups.len(),
        r.snapshots,
        worst.map_or("none".into(), |w| ms(Some(w.longest_stall_ms))),
        worst.map_or(String::new(), |w| format!(
            " on {} {} QP {}",
            w.rank, w.device, w.qp
        )),
    ) + &hang,
    )
}

/// The root section of `stalls`: every root with its evidence, or why none can be named.
fn render_roots(r: &StallReport, top: usize, layout: Layout) -> String {
    let mut out = String::new();
    if r.roots.is_empty() {
        if let Some(why) = &r.no_root {
            if r.stalled_qps > 0 || r.errored_qps > 0 || why.contains("went quiet") {
                out.push_str(&layout.wrap(&format!("No root of the hang can be named: {why}.")));
                out.push('\n');
            }
        }
        return out;
    }
    let basis = match r.roots_basis {
        "quiet" => "from the last-progress times (nothing stalled or errored)".to_string(),
        _ => format!(
            "from the wait-for graph: {} ranks wait on another ({} QPs stalled, {} with errors)",
            r.waiting_ranks, r.stalled_qps, r.errored_qps
        ),
    };
    out.push_str(&layout.wrap(&format!(
        "Root{} of the hang, {basis}:",
        if r.roots.len() == 1 { "" } else { "s" }
    )));
    out.push('\n');
    let n = if top == 0 {
        r.roots.len()
    } else {
        top.min(r.roots.len())
    };
    for root in r.roots.iter().take(n) {
        let who = if root.ranks.is_empty() {
            root.nics.join(" ")
        } else {
            format!("{} ({})", root.ranks.join(" + "), root.nics.join(" "))
        };
        out.push_str(&layout.wrap(&format!("- {} {who}: {}.", root.kind, root.evidence)));
        out.push('\n');
    }
    if n < r.roots.len() {
        out.push_str(&format!(
            "... and {} more roots (--top 0, --json)\n",
            r.roots.len() - n
        ));
    }
    out
}

/// Renders the stalls for people; `top` bounds the groups and ranks shown (0 = all).
pub fn render_text(r: &StallReport, top: usize, layout: Layout) -> String {
    let mut out = String::new();
    out.push_str(&layout.wrap(&format!(
        "{} stalled QPs on {} links; {} of {} files carry stall keys ({} snapshots), {} textfiles{}",
        r.stalled_qps,
        r.groups.len(),
        r.files_with_stall_keys,
        r.files,
        r.snapshots,
        r.prom_files,
        r.prom_stalled_qps_gauge.map_or(String::new(), |g| format!(" (rccl_telemetry_stalled_qps sums to {g})"))
    )));
    out.push('\n');
    if let Some(j) = &r.jobs {
        out.push_str(&layout.wrap(&format!("Jobs: {}", j.line())));
        out.push('\n');
    }
    out.push_str(&render_roots(r, top, layout));
    if r.files > 0 && r.files_with_stall_keys == 0 {
        out.push_str(
            "No file has stall keys (format version 3 with RCCL_TELEMETRY_STALL_MS > 0).\n",
        );
    }
    let lim = |n: usize| if top == 0 { n } else { top.min(n) };
    if !r.groups.is_empty() {
        const COLS: [Column; 7] = [
            col("stalled QPs of", false, 0).whole(),
            col("towards", false, 0).whole(),
            col("QPs", true, 0),
            col("outstanding", true, 1),
            col("longest", true, 0),
            col("waiting ranks", false, 2),
            col("peer ranks", false, 3),
        ];
        let cells: Vec<Vec<String>> = r
            .groups
            .iter()
            .take(lim(r.groups.len()))
            .map(|g| {
                vec![
                    g.src.clone(),
                    g.dst.clone(),
                    g.qps.len().to_string(),
                    g.outstanding.to_string(),
                    ms(g.longest_ms),
                    g.waiting_ranks.join(" "),
                    g.peer_ranks.join(" "),
                ]
            })
            .collect();
        out.push_str(&table(&COLS, &cells, layout).0);
        out.push('\n');
        if lim(r.groups.len()) < r.groups.len() {
            out.push_str(&format!(
                "... and {} more links (--top 0, --json)\n",
                r.groups.len() - lim(r.groups.len())
            ));
        }
    }
    if !r.longest_per_rank.is_empty() {
        out.push_str(
            "Longest stall per rank (the run's worst pause, over, or still going in a snapshot):\n",
        );
        const COLS: [Column; 6] = [
            col("rank", false, 0).whole(),
            col("file", false, 2),
            col("longest", true, 0),
            col("since", false, 3),
            col("QP", false, 1),
            col("peer", false, 1),
        ];
        let cells: Vec<Vec<String>> = r
            .longest_per_rank
            .iter()
            .take(lim(r.longest_per_rank.len()))
            .map(|s| {
                vec![
                    s.rank.clone(),
                    if s.is_final { "final" } else { "snapshot" }.into(),
                    ms(Some(s.longest_stall_ms)),
                    s.start.clone().unwrap_or_else(|| "-".into()),
                    format!(
                        "{} QP {}{}",
                        s.device,
                        s.qp,
                        s.qp_num.map_or(String::new(), |n| format!(" (QPN {n})"))
                    ),
                    s.peer.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        out.push_str(&table(&COLS, &cells, layout).0);
        out.push('\n');
    }
    for p in &r.prom_problems {
        out.push_str(&format!("textfile: {p}\n"));
    }
    out
}

/// The textfile inputs of a path list that has no JSON file: `stalls` accepts a directory of
/// textfiles alone.
pub fn only_prom(inputs: &[PathBuf]) -> bool {
    !inputs.is_empty()
        && !prom_inputs(inputs).is_empty()
        && crate::load::expand_inputs(inputs).0.is_empty()
}
