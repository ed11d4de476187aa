//! `links`: joins every QP to its peer's QP in another file of the run, by the peer's (GID, QPN)
//! against the QP's own (GID, QPN) (format version 3; the LID where a side has no GID), and
//! folds the matched QPs into links: ordered pairs of NICs (host and device on each side).
//!
//! A link `A -> B` carries the QPs of NIC A whose peer QP is on NIC B: the WRs A posted on them,
//! what B's matched QPs received, and the completion latency seen at A (the sending side). The
//! latency comes from A's per-peer log-scale histogram (`peers[].wqe_completion_log_histogram`,
//! relative error <= 1/8) when the file has one, else from the link's QPs' linear histograms
//! (error one bucket width). Bytes per link are not in the format (it counts bytes per device):
//! `tx_bytes_est` shares the device's tx_bytes out by the link's part of its sent WRs, and says so.
//! A QP whose peer is in no file is counted as unmatched (grouped by its NIC and the remote
//! NIC); a QP whose peer identity is claimed by two QPs is ambiguous and joined to neither.
//!
//! The table for people is printed by `links::text`.

pub mod text;

use crate::load::Run;
use crate::model::{add_hist, add_log_hist, Device, LogBucket, QueuePair, TelemetryFile};
use crate::stats::{fmt_count, histogram_percentile, log_histogram_percentile};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How a QP or a NIC is addressed: its GID (RoCE, InfiniBand with GRH), else its LID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Addr {
    Gid(String),
    Lid(u64),
}

/// The normalised GID text (lower case), None for null, empty or all zeros.
pub fn norm_gid(g: Option<&str>) -> Option<String> {
    let g = g?.trim().to_ascii_lowercase();
    if g.is_empty() || g.chars().all(|c| c == '0' || c == ':') {
        return None;
    }
    Some(g)
}

fn addr(gid: Option<&str>, lid: Option<u64>) -> Option<Addr> {
    norm_gid(gid)
        .map(Addr::Gid)
        .or(lid.filter(|l| *l > 0).map(Addr::Lid))
}

/// One NIC of the run: a (host, device) pair, whichever ranks drove it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Nic {
    pub host: String,
    pub device: String,
    pub device_id: u32,
    pub pids: Vec<i64>,
    pub gid: Option<String>,
    pub gid_ip: Option<String>,
    pub lid: Option<u64>,
}

impl Nic {
    pub fn label(&self) -> String {
        format!("{}:{}", self.host, self.device)
    }
}

/// Where a link's latency figures come from.
#[derive(Debug, Clone, Serialize)]
pub struct LinkLatency {
    /// "peers_log_histogram" (the sending device's per-peer log histogram) or
    /// "qp_linear_histogram" (the sum of the link's QPs' linear histograms).
    pub source: &'static str,
    /// Log histogram: the most a percentile can be off, relative (<= 1/8).
    pub relative_error: Option<f64>,
    /// Linear histogram: the bucket width, the most a percentile can be off.
    pub bucket_ns: Option<u64>,
    pub samples: u64,
    pub p50_ns: Option<f64>,
    pub p90_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    /// True when p99 lies in the open last bucket (only a lower bound).
    pub p99_open: bool,
    pub max_ns: Option<i64>,
}

/// One end of a link as the JSON names it.
#[derive(Debug, Clone, Serialize)]
pub struct End {
    pub host: String,
    pub pids: Vec<i64>,
    pub device: String,
    pub device_id: u32,
    pub gid: Option<String>,
    pub gid_ip: Option<String>,
    pub lid: Option<u64>,
}

/// An ordered NIC pair: src's QPs whose peers are on dst.
#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub src: End,
    pub dst: End,
    /// Index of src and dst in [`LinkReport::nics`].
    #[serde(skip)]
    pub src_nic: usize,
    #[serde(skip)]
    pub dst_nic: usize,
    pub qps: u64,
    /// WRs src posted on these QPs (num_wqe_sent) and completed (num_wqe_completed).
    pub wrs_sent: u64,
    pub wrs_completed: u64,
    /// What dst's matched QPs received (num_wqe_rcvd), the same direction seen from the other end.
    pub wrs_received_by_dst: u64,
    /// src's device tx_bytes times this link's share of the device's sent WRs (an estimate: the
    /// format counts bytes per device, not per QP).
    pub tx_bytes_est: u64,
    pub latency: Option<LinkLatency>,
    /// Preload files: sends retired unsignalled by a later completion.
    pub retired_unsignalled: Option<u64>,
    /// Stall keys (version 3): WRs outstanding now, QPs stalled now, the longest stall of any of
    /// the link's QPs.
    pub wrs_outstanding: Option<u64>,
    pub qps_stalled: Option<u64>,
    pub longest_stall_ms: Option<u64>,
}

/// QPs of one NIC whose peer is in no file, grouped by the remote NIC they name.
#[derive(Debug, Clone, Serialize)]
pub struct Unmatched {
    pub host: String,
    pub pids: Vec<i64>,
    pub device: String,
    pub remote_gid: Option<String>,
    pub remote_lid: Option<u64>,
    pub qps: u64,
    /// The remote QPNs (the first 16).
    pub remote_qp_nums: Vec<u64>,
}

/// A QP whose peer identity (GID or LID, QPN) is claimed by more than one QP of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Ambiguous {
    pub host: String,
    pub pid: i64,
    pub device: String,
    pub qp_num: Option<u64>,
    pub remote_gid: Option<String>,
    pub remote_lid: Option<u64>,
    pub remote_qp_num: u64,
    /// The QPs claiming that identity: "host:pid device".
    pub candidates: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct LinkReport {
    pub files: usize,
    /// Files of format version 3 (the others have no peers to join).
    pub files_with_peers: usize,
    pub qps: u64,
    /// QPs whose file names a peer.
    pub qps_with_peer: u64,
    pub qps_matched: u64,
    pub qps_unmatched: u64,
    pub qps_ambiguous: u64,
    pub nics: Vec<Nic>,
    pub links: Vec<Link>,
    pub unmatched: Vec<Unmatched>,
    pub ambiguous: Vec<Ambiguous>,
}

struct QpRef<'a> {
    fi: usize,
    nic: usize,
    dev: &'a Device,
    file: &'a TelemetryFile,
    qp: &'a QueuePair,
}

#[derive(Default)]
struct Acc<'a> {
    qps: u64,
    sent: u64,
    completed: u64,
    rcvd: u64,
    retired: Option<u64>,
    outstanding: Option<u64>,
    stalled: Option<u64>,
    longest: Option<u64>,
    /// (file index, device) on the sending side.
    devs: BTreeMap<(usize, u32), (&'a TelemetryFile, &'a Device)>,
    lin: Vec<u64>,
    width: Option<u64>,
    lin_min: Option<i64>,
    lin_max: Option<i64>,
}

fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
    if let Some(b) = b {
        *a = Some(a.unwrap_or(0).saturating_add(b));
    }
}

/// Joins the QPs of a run into links.
#[allow(clippy::too_many_lines)] // past the limit of clippy.toml: to be split into its steps
pub fn join(run: &Run) -> LinkReport {
    let mut rep = LinkReport {
        files: run.files.len(),
        ..Default::default()
    };
    // NICs by (host, device name).
    let mut nic_index: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut nics: Vec<Nic> = Vec::new();
    let mut qps: Vec<QpRef> = Vec::new();
    for (fi, l) in run.files.iter().enumerate() {
        let f = &l.file;
        if f.version >= 3 {
            rep.files_with_peers += 1;
        }
        for d in &f.devices {
            if !d.is_used() {
                continue;
            }
            let key = (f.host_name.clone(), d.roce_device.clone());
            let ni = *nic_index.entry(key).or_insert_with(|| {
                nics.push(Nic {
                    host: f.host_name.clone(),
                    device: d.roce_device.clone(),
                    device_id: d.device_id,
                    pids: Vec::new(),
                    gid: None,
                    gid_ip: None,
                    lid: None,
                });
                nics.len() - 1
            });
            let n = &mut nics[ni];
            if !n.pids.contains(&f.process_id) {
                n.pids.push(f.process_id);
            }
            if n.gid.is_none() {
                n.gid = norm_gid(d.gid.as_deref());
                n.gid_ip = d.gid_ip.clone();
            }
            n.lid = n.lid.or(d.lid.filter(|l| *l > 0));
            for c in &d.channels {
                for q in &c.queue_pairs {
                    qps.push(QpRef {
                        fi,
                        nic: ni,
                        dev: d,
                        file: f,
                        qp: q,
                    });
                }
            }
        }
    }
    // Every QP under its GID and under its LID, with its QPN.
    let mut index: HashMap<(Addr, u64), Vec<usize>> = HashMap::new();
    for (i, r) in qps.iter().enumerate() {
        let Some(qpn) = r.qp.qp_num else { continue };
        if let Some(g) = norm_gid(r.qp.local_gid.as_deref().or(r.dev.gid.as_deref())) {
            index.entry((Addr::Gid(g), qpn)).or_default().push(i);
        }
        if let Some(lid) = r.dev.lid.filter(|l| *l > 0) {
            index.entry((Addr::Lid(lid), qpn)).or_default().push(i);
        }
    }
    let mut acc: BTreeMap<(usize, usize), Acc> = BTreeMap::new();
    let mut unmatched: BTreeMap<(usize, Option<String>, Option<u64>), Unmatched> = BTreeMap::new();
    rep.qps = qps.len() as u64;
    for r in &qps {
        let Some(p) = &r.qp.peer else { continue };
        rep.qps_with_peer += 1;
        let pg = norm_gid(p.gid.as_deref());
        let plid = p.lid.filter(|l| *l > 0);
        let Some(a) = addr(pg.as_deref(), plid) else {
            // A peer with neither GID nor LID cannot be joined.
            push_unmatched(&mut unmatched, &nics, r, pg, plid, p.qp_num);
            continue;
        };
        let cands: Vec<usize> = index.get(&(a, p.qp_num)).cloned().unwrap_or_default();
        // A QP cannot be its own peer's twin in the same file twice: distinct candidates only.
        match cands.len() {
            0 => push_unmatched(&mut unmatched, &nics, r, pg, plid, p.qp_num),
            1 => {
                let t = &qps[cands[0]];
                rep.qps_matched += 1;
                let e = acc.entry((r.nic, t.nic)).or_default();
                let c = &r.qp.counters;
                e.qps += 1;
                e.sent = e.sent.saturating_add(c.num_wqe_sent);
                e.completed = e.completed.saturating_add(c.num_wqe_completed);
                e.rcvd = e.rcvd.saturating_add(t.qp.counters.num_wqe_rcvd);
                add_opt(&mut e.retired, c.num_wqe_retired_unsignalled);
                add_opt(&mut e.outstanding, r.qp.num_wqe_outstanding);
                add_opt(&mut e.stalled, r.qp.stalled.map(u64::from));
                if let Some(ls) = r.qp.longest_stall_ms {
                    e.longest = Some(e.longest.unwrap_or(0).max(ls));
                }
                e.devs.insert((r.fi, r.dev.device_id), (r.file, r.dev));
                let w = r.file.histogram_interval_ns;
                if e.width.is_none() || e.width == Some(w) {
                    e.width = Some(w);
                    add_hist(&mut e.lin, &c.wqe_completion_histogram);
                    if c.wqe_completion_ns_min >= 0 {
                        e.lin_min =
                            Some(e.lin_min.map_or(c.wqe_completion_ns_min, |m| {
                                m.min(c.wqe_completion_ns_min)
                            }));
                    }
                    if c.wqe_completion_ns_max >= 0 {
                        e.lin_max =
                            Some(e.lin_max.map_or(c.wqe_completion_ns_max, |m| {
                                m.max(c.wqe_completion_ns_max)
                            }));
                    }
                }
            }
            _ => {
                rep.qps_ambiguous += 1;
                rep.ambiguous.push(Ambiguous {
                    host: r.file.host_name.clone(),
                    pid: r.file.process_id,
                    device: r.dev.roce_device.clone(),
                    qp_num: r.qp.qp_num,
                    remote_gid: pg,
                    remote_lid: plid,
                    remote_qp_num: p.qp_num,
                    candidates: cands
                        .iter()
                        .map(|i| {
                            format!(
                                "{}:{} {}",
                                qps[*i].file.host_name,
                                qps[*i].file.process_id,
                                qps[*i].dev.roce_device
                            )
                        })
                        .collect(),
                });
            }
        }
    }
    rep.qps_unmatched = unmatched.values().map(|u| u.qps).sum();
    rep.unmatched = unmatched.into_values().collect();
    rep.unmatched.sort_by(|a, b| {
        b.qps
            .cmp(&a.qps)
            .then_with(|| (&a.host, &a.device).cmp(&(&b.host, &b.device)))
    });
    for ((s, d), e) in acc {
        let dst = &nics[d];
        let dst_addr = addr(dst.gid.as_deref(), dst.lid);
        // The sending devices' per-peer log histograms towards dst.
        let mut log: Option<Vec<LogBucket>> = None;
        let mut dev_sent = 0u64;
        let mut dev_tx = 0u64;
        for (f, dev) in e.devs.values() {
            dev_sent = dev_sent.saturating_add(dev.sum_counters(|c| c.num_wqe_sent));
            dev_tx = dev_tx.saturating_add(dev.tx_bytes);
            let _ = f;
            for p in dev.peers.iter().flatten() {
                let pa = addr(p.gid.as_deref(), p.lid);
                let same = match (&pa, &dst_addr) {
                    (Some(Addr::Gid(a)), Some(Addr::Gid(b))) => a == b,
                    (Some(Addr::Lid(a)), _) => Some(*a) == dst.lid,
                    _ => false,
                };
                if same {
                    if let Some(h) = &p.wqe_completion_log_histogram {
                        add_log_hist(log.get_or_insert_with(Vec::new), h);
                    }
                }
            }
        }
        let latency = match log.filter(|h| h.iter().any(|b| b.2 > 0)) {
            Some(h) => {
                let pct = |q| log_histogram_percentile(&h, q, None, None);
                let p99 = pct(0.99);
                let rel = [pct(0.5), pct(0.9), p99]
                    .iter()
                    .flatten()
                    .filter_map(|p| p.relative_error)
                    .reduce(f64::max);
                Some(LinkLatency {
                    source: "peers_log_histogram",
                    relative_error: rel.or(Some(0.125)),
                    bucket_ns: None,
                    samples: h.iter().map(|b| b.2).sum(),
                    p50_ns: pct(0.5).map(|p| p.estimate_ns),
                    p90_ns: pct(0.9).map(|p| p.estimate_ns),
                    p99_ns: p99.map(|p| p.estimate_ns),
                    p99_open: p99.is_some_and(|p| p.open_bucket && p.upper_ns.is_none()),
                    max_ns: h
                        .iter()
                        .rev()
                        .find(|b| b.2 > 0)
                        .and_then(|b| b.1)
                        .map(|x| x as i64),
                })
            }
            None => {
                let w = e.width.unwrap_or(0);
                let pct = |q| histogram_percentile(&e.lin, w, q, e.lin_min, e.lin_max);
                let samples: u64 = e.lin.iter().sum();
                (samples > 0 && w > 0).then(|| {
                    let p99 = pct(0.99);
                    LinkLatency {
                        source: "qp_linear_histogram",
                        relative_error: None,
                        bucket_ns: Some(w),
                        samples,
                        p50_ns: pct(0.5).map(|p| p.estimate_ns),
                        p90_ns: pct(0.9).map(|p| p.estimate_ns),
                        p99_ns: p99.map(|p| p.estimate_ns),
                        p99_open: p99.is_some_and(|p| p.open_bucket && p.upper_ns.is_none()),
                        max_ns: e.lin_max,
                    }
                })
            }
        };
        let tx_bytes_est = if dev_sent > 0 {
            ((dev_tx as u128 * e.sent as u128) / dev_sent as u128) as u64
        } else {
            0
        };
        rep.links.push(Link {
            src: end(&nics[s]),
            dst: end(dst),
            src_nic: s,
            dst_nic: d,
            qps: e.qps,
            wrs_sent: e.sent,
            wrs_completed: e.completed,
            wrs_received_by_dst: e.rcvd,
            tx_bytes_est,
            latency,
            retired_unsignalled: e.retired,
            wrs_outstanding: e.outstanding,
            qps_stalled: e.stalled,
            longest_stall_ms: e.longest,
        });
    }
    rep.nics = nics;
    rep
}

fn end(n: &Nic) -> End {
    End {
        host: n.host.clone(),
        pids: n.pids.clone(),
        device: n.device.clone(),
        device_id: n.device_id,
        gid: n.gid.clone(),
        gid_ip: n.gid_ip.clone(),
        lid: n.lid,
    }
}

fn push_unmatched(
    m: &mut BTreeMap<(usize, Option<String>, Option<u64>), Unmatched>,
    nics: &[Nic],
    r: &QpRef,
    gid: Option<String>,
    lid: Option<u64>,
    qpn: u64,
) {
    let n = &nics[r.nic];
    let u = m
        .entry((r.nic, gid.clone(), lid))
        .or_insert_with(|| Unmatched {
            host: n.host.clone(),
            pids: Vec::new(),
            device: n.device.clone(),
            remote_gid: gid,
            remote_lid: lid,
            qps: 0,
            remote_qp_nums: Vec::new(),
        });
    u.qps += 1;
    if !u.pids.contains(&r.file.process_id) {
        u.pids.push(r.file.process_id);
    }
    if u.remote_qp_nums.len() < 16 {
        u.remote_qp_nums.push(qpn);
    }
}

impl LinkReport {
    /// The NIC-by-NIC matrix of a per-link value (row = sending NIC, column = peer NIC).
    pub fn matrix(&self, value: impl Fn(&Link) -> Option<f64>) -> Vec<Vec<Option<f64>>> {
        let n = self.nics.len();
        let mut m = vec![vec![None; n]; n];
        for l in &self.links {
            m[l.src_nic][l.dst_nic] = value(l);
        }
        m
    }

    /// One line on what the join found.
    pub fn headline(&self) -> String {
        let mut s = format!(
            "{} links between {} NICs; {} of {} QPs name a peer: {} joined, {} unmatched (peer in no file), {} ambiguous",
            self.links.len(),
            self.nics.len(),
            fmt_count(self.qps_with_peer),
            fmt_count(self.qps),
            fmt_count(self.qps_matched),
            fmt_count(self.qps_unmatched),
            fmt_count(self.qps_ambiguous)
        );
        if self.files_with_peers < self.files {
            s.push_str(&format!(
                "; {} of {} files are older than format version 3 (no peers)",
                self.files - self.files_with_peers,
                self.files
            ));
        }
        s
    }
}

/// Who holds a (GID or LID, QPN) in the run: "host:pid device" of every QP claiming it.
pub type QpIndex = HashMap<(Addr, u64), Vec<(String, i64, String)>>;

/// Indexes every QP of the run under its GID and its LID, with its QPN.
pub fn qp_index(run: &Run) -> QpIndex {
    let mut idx: QpIndex = HashMap::new();
    for l in &run.files {
        let f = &l.file;
        for d in &f.devices {
            for c in &d.channels {
                for q in &c.queue_pairs {
                    let Some(qpn) = q.qp_num else { continue };
                    let who = (f.host_name.clone(), f.process_id, d.roce_device.clone());
                    if let Some(g) = norm_gid(q.local_gid.as_deref().or(d.gid.as_deref())) {
                        idx.entry((Addr::Gid(g), qpn))
                            .or_default()
                            .push(who.clone());
                    }
                    if let Some(lid) = d.lid.filter(|l| *l > 0) {
                        idx.entry((Addr::Lid(lid), qpn)).or_default().push(who);
                    }
                }
            }
        }
    }
    idx
}

/// The QPs claiming a peer identity (empty: in no file; more than one: ambiguous).
pub fn lookup<'a>(
    idx: &'a QpIndex,
    gid: Option<&str>,
    lid: Option<u64>,
    qpn: u64,
) -> &'a [(String, i64, String)] {
    addr(gid, lid)
        .and_then(|a| idx.get(&(a, qpn)))
        .map_or(&[], |v| v.as_slice())
}

pub use crate::links::text::render_text;
