//! The join itself, in its steps: the run's NICs and QPs, the index of every QP by its
//! addresses, each QP matched to its peer and added to its link, each link's figures.
//!
//! Built for jobs of 16,384 ranks and all-to-all jobs of a million QPs: a QP is a few indices
//! (no strings copied), addresses are numbered and a QP's peer is found in a sorted list of
//! (address number, QPN) keys, a link's ends are shared with its NICs, and a sending device's
//! per-peer histograms are indexed once, while the links from its NIC are summed (not searched
//! per link, and not all devices' at once).
//!
//! A finalized communicator's QPs have no rows: its record sums them per remote NIC (its
//! `peers`, each with the counters of the QPs towards that NIC). Such a sum joins the NIC
//! whose GID (else LID) it names, and adds to the link between them as its QPs would have:
//! their sends, completions, histograms and stall keys at the sending end, and what the other
//! end received from the sums of its devices towards this NIC.

use super::report::{Ambiguous, End, Link, LinkLatency, LinkReport, Nic, Unmatched};
use crate::load::addr::{
    addr, claims, gid_addr, lid_addr, norm_gid, qp_addrs, Addr, AddrIndexBuilder,
};
use crate::load::Run;
use crate::model::{
    add_hist, add_log_hist, Counters, Device, FinalizedPeer, LogBucket, QueuePair, TelemetryFile,
};
use crate::stats::{histogram_percentile, log_histogram_percentile};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One QP of the run: its NIC and its device by index.
struct QpRef<'a> {
    nic: u32,
    dev: u32,
    qp: &'a QueuePair,
}

/// A finalized communicator's QPs of one device towards one remote NIC, summed.
struct AggRef<'a> {
    nic: u32,
    dev: u32,
    peer: &'a FinalizedPeer,
    counters: &'a Counters,
}

/// One used device of the run, with what every link from it needs.
struct DevRef<'a> {
    file: &'a TelemetryFile,
    dev: &'a Device,
    /// WRs sent over the device's channels.
    sent: u64,
}

/// A device's per-peer log histograms by the peer's address (GID, else LID).
type PeerHists<'a> = HashMap<Addr, Vec<&'a [LogBucket]>>;

/// What the matched QPs of one link add up to.
#[derive(Default)]
struct Acc {
    qps: u64,
    sent: u64,
    completed: u64,
    rcvd: u64,
    retired: Option<u64>,
    outstanding: Option<u64>,
    stalled: Option<u64>,
    longest: Option<u64>,
    /// The WQE latency monitor: slow completions, and the largest p99 of any of the QPs.
    slow: Option<u64>,
    qp_p99: Option<u64>,
    /// The sending devices (indices into the device table), each once.
    devs: Vec<u32>,
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

/// The run's NICs, used devices and QPs.
struct Parts<'a> {
    nics: Vec<Nic>,
    devs: Vec<DevRef<'a>>,
    qps: Vec<QpRef<'a>>,
    /// The finalized communicators' sums per (device, remote NIC).
    aggs: Vec<AggRef<'a>>,
    files_with_peers: usize,
    /// The used devices' QPs as the files list them (a pruned read holds fewer: `load::prune`).
    listed: u64,
}

fn parts(run: &Run) -> Parts<'_> {
    let mut p = Parts {
        nics: Vec::new(),
        devs: Vec::new(),
        qps: Vec::new(),
        aggs: Vec::new(),
        files_with_peers: 0,
        listed: 0,
    };
    // NICs by (host, device name), numbered in the order the files first name them.
    let mut nic_index: HashMap<(&str, &str), usize> = HashMap::new();
    for l in &run.files {
        let f = &l.file;
        if f.version >= 3 {
            p.files_with_peers += 1;
        }
        for d in f.devices.iter().filter(|d| d.is_used()) {
            let nics = &mut p.nics;
            let ni = *nic_index
                .entry((f.host_name.as_str(), d.roce_device.as_str()))
                .or_insert_with(|| {
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
            let n = &mut p.nics[ni];
            if !n.pids.contains(&f.process_id) {
                n.pids.push(f.process_id);
            }
            if n.gid.is_none() {
                n.gid = norm_gid(d.gid.as_deref());
                n.gid_ip = d.gid_ip.clone();
            }
            n.lid = n.lid.or(d.lid.filter(|l| *l > 0));
            let di = p.devs.len() as u32;
            p.devs.push(dev_ref(f, d));
            for c in &d.channels {
                p.listed = p.listed.saturating_add(c.qp_count());
                for q in &c.queue_pairs {
                    p.qps.push(QpRef {
                        nic: ni as u32,
                        dev: di,
                        qp: q,
                    });
                }
            }
            for f in &d.finalized_comms {
                p.listed = p.listed.saturating_add(f.num_qps);
                for peer in &f.peers {
                    if let Some(counters) = &peer.counters {
                        p.aggs.push(AggRef {
                            nic: ni as u32,
                            dev: di,
                            peer,
                            counters,
                        });
                    }
                }
            }
        }
    }
    p
}

fn dev_ref<'a>(file: &'a TelemetryFile, dev: &'a Device) -> DevRef<'a> {
    DevRef {
        file,
        dev,
        sent: dev.sum_counters(|c| c.num_wqe_sent),
    }
}

fn peer_hists(dev: &Device) -> PeerHists<'_> {
    let mut peers = PeerHists::new();
    for p in dev.all_peers() {
        if let (Some(a), Some(h)) = (
            addr(p.gid.as_deref(), p.lid),
            p.wqe_completion_log_histogram.as_deref(),
        ) {
            peers.entry(a).or_default().push(h);
        }
    }
    peers
}

/// Joins the QPs of a run into links.
///
/// Each matched QP becomes a (link, QP, peer QP) triple of numbers; the triples sorted by link
/// are summed one link at a time, so what is held beside the model is the QP list, the index
/// and the links themselves, never a per-link accumulator for every link at once.
pub fn join(run: &Run) -> LinkReport {
    debug_assert!(
        matches!(run.kept, crate::load::Keep::All | crate::load::Keep::Links),
        "links are joined from every QP with a QPN or a peer"
    );
    let p = parts(run);
    let mut rep = LinkReport {
        files: run.files.len(),
        files_with_peers: p.files_with_peers,
        qps: p.listed,
        ..Default::default()
    };
    // Every QP under its GID and under its LID, with its QPN.
    let dev = |r: &QpRef| p.devs[r.dev as usize].dev;
    let n = p.qps.iter().map(|r| claims(dev(r), r.qp)).sum();
    let mut index = AddrIndexBuilder::with_capacity(n);
    for (i, r) in p.qps.iter().enumerate() {
        index.insert_qp(dev(r), r.qp, i as u32);
    }
    let index = index.build();
    // (source NIC, destination NIC, QP, peer QP) of every matched QP.
    let mut matched: Vec<(u32, u32, u32, u32)> = Vec::with_capacity(p.qps.len());
    let mut unmatched: BTreeMap<(usize, Option<String>, Option<u64>), Unmatched> = BTreeMap::new();
    for (i, r) in p.qps.iter().enumerate() {
        let Some(peer) = &r.qp.peer else { continue };
        rep.qps_with_peer += 1;
        let (pg, plid) = (gid_addr(peer.gid.as_deref()), lid_addr(peer.lid));
        let cands = index.get(pg.as_ref(), plid.as_ref(), peer.qp_num);
        match pick(&p, r, cands) {
            Pick::None => push_unmatched(&mut unmatched, &p, r),
            Pick::One(t) => {
                rep.qps_matched += 1;
                matched.push((r.nic, p.qps[t as usize].nic, i as u32, t));
            }
            Pick::Ambiguous => {
                rep.qps_ambiguous += 1;
                rep.ambiguous.push(ambiguous(&p, r, cands));
            }
        }
    }
    drop(index);
    let agg_matched = join_sums(&p, &mut rep, &mut unmatched);
    rep.qps_unmatched = unmatched.values().map(|u| u.qps).sum();
    rep.unmatched = unmatched.into_values().collect();
    rep.unmatched.sort_by(|a, b| {
        b.qps
            .cmp(&a.qps)
            .then_with(|| (&a.host, &a.device).cmp(&(&b.host, &b.device)))
    });
    let ends: Vec<Arc<End>> = p.nics.iter().map(|n| Arc::new(end(n))).collect();
    // By link, each link's QPs in the order they were read (a stable sort).
    matched.sort_by_key(|&(s, d, _, _)| (s, d));
    // What each link's other end received: the sums of its devices towards this NIC.
    let mut back: HashMap<(u32, u32), u64> = HashMap::new();
    for &(s, d, a) in &agg_matched {
        let e = back.entry((s, d)).or_default();
        *e = e.saturating_add(p.aggs[a as usize].counters.num_wqe_rcvd);
    }
    // The links in (source, destination) order: those of the QPs' rows and of the sums, merged.
    let (mq, ma) = (&matched, &agg_matched);
    let keys = move || {
        let (mut qi, mut ai) = (0, 0);
        std::iter::from_fn(move || {
            let kq = mq.get(qi).map(|m| (m.0, m.1));
            let ka = ma.get(ai).map(|m| (m.0, m.1));
            let key = match (kq, ka) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b)?,
            };
            let (q0, a0) = (qi, ai);
            while mq.get(qi).is_some_and(|m| (m.0, m.1) == key) {
                qi += 1;
            }
            while ma.get(ai).is_some_and(|m| (m.0, m.1) == key) {
                ai += 1;
            }
            Some((key, q0..qi, a0..ai))
        })
    };
    // Sized exactly: grown by doubling, a million links would be held twice for a moment.
    rep.links = Vec::with_capacity(keys().count());
    // The sending devices' per-peer histograms, only while one NIC's links are summed.
    let mut hists: HashMap<u32, PeerHists> = HashMap::new();
    let mut hists_of = None;
    for ((s, d), qps, sums) in keys() {
        if hists_of != Some(s) {
            hists.clear();
            hists_of = Some(s);
        }
        let mut e = Acc::default();
        for &(_, _, r, t) in &matched[qps] {
            add_qp(&mut e, &p, &p.qps[r as usize], &p.qps[t as usize]);
        }
        if !sums.is_empty() {
            for &(_, _, a) in &agg_matched[sums] {
                add_sums(&mut e, &p, &p.aggs[a as usize]);
            }
            let rcvd = back.get(&(d, s)).copied().unwrap_or(0);
            e.rcvd = e.rcvd.saturating_add(rcvd);
        }
        for &di in &e.devs {
            hists
                .entry(di)
                .or_insert_with(|| peer_hists(p.devs[di as usize].dev));
        }
        rep.links
            .push(link(&p, &hists, &ends, s as usize, d as usize, e));
    }
    rep.nics = p.nics;
    rep
}

/// Joins the finalized communicators' sums: each to the one NIC of the run with the address it
/// names (GID first, else LID). Returns the joined ones as (source NIC, destination NIC, sum),
/// by link; counts the others as unmatched or ambiguous.
fn join_sums(
    p: &Parts,
    rep: &mut LinkReport,
    unmatched: &mut BTreeMap<(usize, Option<String>, Option<u64>), Unmatched>,
) -> Vec<(u32, u32, u32)> {
    if p.aggs.is_empty() {
        return Vec::new();
    }
    let mut by_addr: HashMap<Addr, Vec<u32>> = HashMap::new();
    for (i, n) in p.nics.iter().enumerate() {
        for a in [gid_addr(n.gid.as_deref()), lid_addr(n.lid)]
            .into_iter()
            .flatten()
        {
            by_addr.entry(a).or_default().push(i as u32);
        }
    }
    let mut joined = Vec::with_capacity(p.aggs.len());
    for (i, a) in p.aggs.iter().enumerate() {
        let n = a.peer.peer.num_qps;
        rep.qps_with_peer = rep.qps_with_peer.saturating_add(n);
        let (g, l) = (a.peer.peer.gid.as_deref(), a.peer.peer.lid);
        let nics = [gid_addr(g), lid_addr(l)]
            .iter()
            .flatten()
            .find_map(|k| by_addr.get(k))
            .map_or(&[][..], Vec::as_slice);
        match nics {
            [] => {
                let nic = &p.nics[a.nic as usize];
                let pid = p.devs[a.dev as usize].file.process_id;
                let u = unmatched
                    .entry((a.nic as usize, norm_gid(g), l.filter(|l| *l > 0)))
                    .or_insert_with(|| Unmatched {
                        host: nic.host.clone(),
                        pids: Vec::new(),
                        device: nic.device.clone(),
                        remote_gid: norm_gid(g),
                        remote_lid: l.filter(|l| *l > 0),
                        qps: 0,
                        remote_qp_nums: Vec::new(),
                    });
                u.qps = u.qps.saturating_add(n);
                if !u.pids.contains(&pid) {
                    u.pids.push(pid);
                }
            }
            [d] => {
                rep.qps_matched = rep.qps_matched.saturating_add(n);
                joined.push((a.nic, *d, i as u32));
            }
            _ => {
                rep.qps_ambiguous = rep.qps_ambiguous.saturating_add(n);
                let dv = &p.devs[a.dev as usize];
                rep.ambiguous.push(Ambiguous {
                    host: dv.file.host_name.clone(),
                    pid: dv.file.process_id,
                    device: dv.dev.roce_device.clone(),
                    qp_num: None,
                    remote_gid: norm_gid(g),
                    remote_lid: l.filter(|l| *l > 0),
                    remote_qp_num: 0,
                    candidates: nics.iter().map(|&d| p.nics[d as usize].label()).collect(),
                });
            }
        }
    }
    joined.sort_by_key(|&(s, d, _)| (s, d));
    joined
}

enum Pick {
    None,
    One(u32),
    Ambiguous,
}

/// The peer among the QPs claiming its identity: the one, or of several the only one whose
/// own peer names this QP back (an RC QP pair names each other; two subnets may repeat a
/// LID and a QPN, a second file may copy a QP).
fn pick(p: &Parts, r: &QpRef, cands: &[u32]) -> Pick {
    match cands {
        [] => Pick::None,
        [t] => Pick::One(*t),
        _ => {
            let Some(me) = r.qp.qp_num else {
                return Pick::Ambiguous;
            };
            let (mg, ml) = qp_addrs(p.devs[r.dev as usize].dev, r.qp);
            let back: Vec<u32> = cands
                .iter()
                .copied()
                .filter(|&t| {
                    p.qps[t as usize].qp.peer.as_ref().is_some_and(|tp| {
                        tp.qp_num == me
                            && ((mg.is_some() && gid_addr(tp.gid.as_deref()) == mg)
                                || (ml.is_some() && lid_addr(tp.lid) == ml))
                    })
                })
                .collect();
            match back.as_slice() {
                [t] => Pick::One(*t),
                _ => Pick::Ambiguous,
            }
        }
    }
}

fn add_qp(e: &mut Acc, p: &Parts, r: &QpRef, t: &QpRef) {
    e.qps += 1;
    e.rcvd = e.rcvd.saturating_add(t.qp.counters.num_wqe_rcvd);
    let q = r.qp;
    add_counts(e, p, r.dev, &q.counters);
    add_opt(&mut e.outstanding, q.num_wqe_outstanding);
    add_opt(&mut e.stalled, q.stalled.map(u64::from));
    if let Some(ls) = q.longest_stall_ms {
        e.longest = Some(e.longest.unwrap_or(0).max(ls));
    }
    add_opt(&mut e.slow, q.counters.num_wqe_slow);
    if let Some(s) = r.qp.latency_stats() {
        e.qp_p99 = Some(e.qp_p99.unwrap_or(0).max(s.wqe_completion_ns_p99));
    }
}

/// A finalized communicator's sum towards the link's destination, as its QPs would add.
fn add_sums(e: &mut Acc, p: &Parts, a: &AggRef) {
    e.qps = e.qps.saturating_add(a.peer.peer.num_qps);
    add_counts(e, p, a.dev, a.counters);
    add_opt(&mut e.outstanding, a.peer.num_wqe_outstanding);
    add_opt(&mut e.stalled, a.peer.num_qps_stalled);
    add_opt(&mut e.slow, a.counters.num_wqe_slow);
    if let Some(ls) = a.peer.longest_stall_ms {
        e.longest = Some(e.longest.unwrap_or(0).max(ls));
    }
}

/// The sending end's counters of a QP or a sum of QPs on device `dev`.
fn add_counts(e: &mut Acc, p: &Parts, dev: u32, c: &Counters) {
    e.sent = e.sent.saturating_add(c.num_wqe_sent);
    e.completed = e.completed.saturating_add(c.num_wqe_completed);
    add_opt(&mut e.retired, c.num_wqe_retired_unsignalled);
    if !e.devs.contains(&dev) {
        e.devs.push(dev);
    }
    let w = p.devs[dev as usize].file.histogram_interval_ns;
    if e.width.is_none() || e.width == Some(w) {
        e.width = Some(w);
        add_hist(&mut e.lin, &c.wqe_completion_histogram);
        if c.wqe_completion_ns_min >= 0 {
            let m = c.wqe_completion_ns_min;
            e.lin_min = Some(e.lin_min.map_or(m, |x| x.min(m)));
        }
        if c.wqe_completion_ns_max >= 0 {
            let m = c.wqe_completion_ns_max;
            e.lin_max = Some(e.lin_max.map_or(m, |x| x.max(m)));
        }
    }
}

fn ambiguous(p: &Parts, r: &QpRef, cands: &[u32]) -> Ambiguous {
    let f = p.devs[r.dev as usize].file;
    let peer = r.qp.peer.as_ref();
    Ambiguous {
        host: f.host_name.clone(),
        pid: f.process_id,
        device: p.devs[r.dev as usize].dev.roce_device.clone(),
        qp_num: r.qp.qp_num,
        remote_gid: peer.and_then(|x| norm_gid(x.gid.as_deref())),
        remote_lid: peer.and_then(|x| x.lid.filter(|l| *l > 0)),
        remote_qp_num: peer.map_or(0, |x| x.qp_num),
        candidates: cands
            .iter()
            .map(|&i| {
                let t = &p.qps[i as usize];
                let d = &p.devs[t.dev as usize];
                format!(
                    "{}:{} {}",
                    d.file.host_name, d.file.process_id, d.dev.roce_device
                )
            })
            .collect(),
    }
}

/// A link's figures from what its QPs added up to.
fn link(
    p: &Parts,
    hists: &HashMap<u32, PeerHists>,
    ends: &[Arc<End>],
    s: usize,
    d: usize,
    e: Acc,
) -> Link {
    let dst = &p.nics[d];
    let dst_keys = [gid_addr(dst.gid.as_deref()), lid_addr(dst.lid)];
    // The sending devices' per-peer log histograms towards dst.
    let mut log: Option<Vec<LogBucket>> = None;
    let (mut dev_sent, mut dev_tx) = (0u64, 0u64);
    for &di in &e.devs {
        let dv = &p.devs[di as usize];
        dev_sent = dev_sent.saturating_add(dv.sent);
        dev_tx = dev_tx.saturating_add(dv.dev.tx_bytes);
        for k in dst_keys.iter().flatten() {
            let peers = hists.get(&di).and_then(|h| h.get(k));
            for h in peers.into_iter().flatten() {
                add_log_hist(log.get_or_insert_with(Vec::new), h);
            }
        }
    }
    let latency = match log.filter(|h| h.iter().any(|b| b.2 > 0)) {
        Some(h) => Some(log_latency(&h)),
        None => linear_latency(&e),
    };
    let tx_bytes_est = if dev_sent > 0 {
        ((dev_tx as u128 * e.sent as u128) / dev_sent as u128) as u64
    } else {
        0
    };
    Link {
        src: ends[s].clone(),
        dst: ends[d].clone(),
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
        wrs_slow: e.slow,
        qp_p99_max_ns: e.qp_p99,
    }
}

fn log_latency(h: &[LogBucket]) -> LinkLatency {
    let pct = |q| log_histogram_percentile(h, q, None, None);
    let (p50, p90, p99) = (pct(0.5), pct(0.9), pct(0.99));
    let rel = [p50, p90, p99]
        .iter()
        .flatten()
        .filter_map(|p| p.relative_error)
        .reduce(f64::max);
    LinkLatency {
        source: "peers_log_histogram",
        relative_error: rel.or(Some(0.125)),
        bucket_ns: None,
        samples: h.iter().map(|b| b.2).sum(),
        p50_ns: p50.map(|p| p.estimate_ns),
        p90_ns: p90.map(|p| p.estimate_ns),
        p99_ns: p99.map(|p| p.estimate_ns),
        p99_open: p99.is_some_and(|p| p.open_bucket && p.upper_ns.is_none()),
        max_ns: h
            .iter()
            .rev()
            .find(|b| b.2 > 0)
            .and_then(|b| b.1.get())
            .map(|x| x as i64),
    }
}

fn linear_latency(e: &Acc) -> Option<LinkLatency> {
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

/// A QP whose peer is in no file, grouped by its NIC and the remote NIC it names.
fn push_unmatched(
    m: &mut BTreeMap<(usize, Option<String>, Option<u64>), Unmatched>,
    p: &Parts,
    r: &QpRef,
) {
    let Some(peer) = &r.qp.peer else { return };
    let (gid, lid) = (norm_gid(peer.gid.as_deref()), peer.lid.filter(|l| *l > 0));
    let n = &p.nics[r.nic as usize];
    let pid = p.devs[r.dev as usize].file.process_id;
    let u = m
        .entry((r.nic as usize, gid.clone(), lid))
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
    if !u.pids.contains(&pid) {
        u.pids.push(pid);
    }
    if u.remote_qp_nums.len() < 16 {
        u.remote_qp_nums.push(peer.qp_num);
    }
}
