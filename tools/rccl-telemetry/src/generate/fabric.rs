//! `generate --peers`: runs of format version 3, a job whose ranks each drive their own NIC
//! and hold QPs to their peers (`--topology`: rail, ring, tree or all-to-all; see
//! `topology.rs`), each QP naming its peer, with the fabric anomalies (slow NIC, link or host,
//! missing or ambiguous peers, stalls) planted, and the verdict benchmark's plants and noise
//! (`verdict.rs`). Separate from generate.rs (runs without
//! peers) because the model differs: links between NICs, not ranks on their own. Each rank's
//! file is written as soon as it is made, so a run of a million QPs is never in memory whole.

use super::*;

/// The IPv4-mapped GID of NIC `dev` of host `host` (::ffff:10.h.d.1) and its address.
pub fn fabric_gid(host: usize, dev: u32) -> (String, String) {
    let (h, d) = ((host % 256) as u8, (dev % 256) as u8);
    (
        format!("0000:0000:0000:0000:0000:ffff:0a{h:02x}:{d:02x}01"),
        format!("10.{h}.{d}.1"),
    )
}

/// The log-scale bucket of `ns` as the library's histogram has it: exact below 16 ns, above
/// that 8 sub-buckets per power of two (width / lower bound <= 1/8).
pub fn log_bucket(ns: u64) -> (u64, u64) {
    if ns < 16 {
        return (ns, ns);
    }
    let e = 63 - ns.leading_zeros() as u64; // ns in [2^e, 2^(e+1))
    let w = 1u64 << (e - 3);
    let lo = ns / w * w;
    (lo, lo + w - 1)
}

/// The log-scale histogram of some samples (the library's buckets).
pub(super) fn log_hist_of(samples: &[u64]) -> Vec<LogBucket> {
    let mut m: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &s in samples {
        let (lo, hi) = log_bucket(s);
        m.entry(lo).or_insert((hi, 0)).1 += 1;
    }
    m.into_iter()
        .map(|(lo, (hi, n))| (lo, Hi::new(Some(hi)), n))
        .collect()
}

struct Nic {
    host: usize,
    dev: u32,
    gid: Option<(String, String)>,
    lid: u64,
}

/// One end of a connection being generated.
struct End {
    rank: usize,
    peer_rank: usize,
    qpn: u64,
    peer_qpn: u64,
    ch: usize,
    factor: f64,
    stalled: bool,
    recovered: bool,
}

const N_CHANNELS: usize = 4;
const WQE_SIZE: u64 = 256 * 1024;

/// The run being generated: who is where, the culprits, every rank's connections.
struct Plan {
    ranks_per_host: usize,
    dpr: usize,
    n_hosts: usize,
    nics: Vec<Nic>,
    ends: Vec<Vec<End>>,
    slow_nic: Option<usize>,
    slow_host: Option<usize>,
    slow_link: Option<(usize, usize)>,
    stall_link: Option<(usize, usize)>,
    lid_host: Option<usize>,
    missing: Option<usize>,
    ambiguous: Option<usize>,
    /// The verdict benchmark's plants (`verdict.rs`): one direction of a link (sender,
    /// receiver), and a rank whose own completions are slow.
    one_way: Option<(usize, usize)>,
    host_side: Option<usize>,
    /// QP lint's plants: the rank one of whose QPs rides traffic class 0 where every other
    /// QP of the run rides 106, and the rank one of whose QPs has path MTU 1024 where every
    /// other (its peer's end included) has 4096. With either, every QP carries its settings.
    qp_tclass: Option<usize>,
    qp_mtu: Option<usize>,
    /// The noise of real hosts (`--noise`).
    noise: super::verdict::Noise,
    snapshot: bool,
    /// The bytes every rank moves each way: a collective's ranks move about the same whatever
    /// their number of peers (the busiest rank's QPs at 330 WRs of 256 KiB each).
    bytes_per_rank: f64,
}

impl Plan {
    /// Whether the QPs carry their settings (format version 5): with QP lint's plants.
    fn has_attrs(&self) -> bool {
        self.qp_tclass.is_some() || self.qp_mtu.is_some()
    }
    fn host_of(&self, r: usize) -> usize {
        r / self.ranks_per_host
    }
    fn dev_of(&self, r: usize) -> u32 {
        ((r % self.ranks_per_host) % self.dpr) as u32
    }
}

fn pid_of(r: usize) -> i64 {
    20_000 + (r as i64 * 7919) % 40_000
}

fn hostname(h: usize) -> String {
    format!("gpu_node_{h:03}")
}

/// Writes a run of `o.ranks` ranks, `o.ranks_per_host` per host, each driving its own NIC
/// (device `local % devices_per_rank`), connected as `o.topology` says by `qps_per_peer` RC
/// QPs per connected pair, with the version-3 keys: QPNs unique per device, GIDs per NIC,
/// every QP's peer, per-device peers with their log histograms, and the stall keys
/// (`stall_ms` 1000). Plants are those of [`RunKind::Fabric`], or one of [`RunKind::Hang`]
/// alone; planted.json names the culprit (for a link, `peer` names the other end).
pub fn generate_fabric(
    dir: &Path,
    o: &GenOptions,
    qps_per_peer: usize,
) -> Result<Vec<Planted>, String> {
    if let Some(r) = super::hang::dispatch(dir, o, qps_per_peer) {
        return r;
    }
    if let Some(p) = o.plants.iter().find(|p| p.run() != RunKind::Fabric) {
        return Err(format!(
            "{p} is a plant of runs without peers; with --peers: {}",
            Plant::names(&Plant::of(RunKind::Fabric))
        ));
    }
    if o.ranks == 0 || o.ranks_per_host == 0 {
        return Err("--ranks and --ranks-per-host must be at least 1".into());
    }
    if o.ranks_per_host > o.devices_per_rank.max(1) {
        return Err(format!("--peers gives every rank of a host its own NIC: --ranks-per-host {} needs --devices-per-rank >= {0}", o.ranks_per_host));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let plan = plan(o, qps_per_peer.max(1), &mut rng)?;
    let mut extra = None;
    for rank in 0..o.ranks {
        let f = rank_file(o, &plan, rank, &mut rng);
        if plan.ambiguous == Some(rank) {
            extra = Some(ambiguous_copy(&f, rank));
        }
        if plan.missing != Some(rank) {
            write_file(dir, &f)?;
        }
    }
    if let Some(f) = &extra {
        write_file(dir, f)?;
    }
    let planted = manifest(o, &plan, extra.as_ref());
    super::write_planted(dir, &planted)?;
    Ok(planted)
}

/// The culprits (distinct, chosen by the seed) and every rank's connections.
fn plan(o: &GenOptions, qps_per_peer: usize, rng: &mut fastrand::Rng) -> Result<Plan, String> {
    let has = |p: Plant| o.plants.contains(&p);
    let mut pl = Plan {
        ranks_per_host: o.ranks_per_host,
        dpr: o.devices_per_rank.max(1),
        n_hosts: o.ranks.div_ceil(o.ranks_per_host),
        nics: Vec::new(),
        ends: (0..o.ranks).map(|_| Vec::new()).collect(),
        slow_nic: None,
        slow_host: None,
        slow_link: None,
        stall_link: None,
        lid_host: None,
        missing: None,
        ambiguous: None,
        one_way: None,
        host_side: None,
        qp_tclass: None,
        qp_mtu: None,
        noise: super::verdict::Noise::default(),
        snapshot: has(Plant::Stall),
        bytes_per_rank: 0.0,
    };
    let edges = super::topology::edges(o.topology, o.ranks, o.ranks_per_host);
    pl.lid_host = has(Plant::LidOnly).then(|| rng.usize(0..pl.n_hosts));
    pl.slow_host = has(Plant::SlowHost).then(|| rng.usize(0..pl.n_hosts));
    // A rank with a peer (off the slow host when there is one).
    let connected: Vec<bool> = {
        let mut c = vec![false; o.ranks];
        for (a, b) in &edges {
            c[*a] = true;
            c[*b] = true;
        }
        c
    };
    let pick_rank = |rng: &mut fastrand::Rng, avoid_host: Option<usize>| -> usize {
        for _ in 0..256 {
            let r = rng.usize(0..o.ranks);
            if connected[r] && Some(r / o.ranks_per_host) != avoid_host {
                return r;
            }
        }
        rng.usize(0..o.ranks)
    };
    pl.slow_nic = has(Plant::SlowNic).then(|| pick_rank(rng, pl.slow_host));
    // A connected pair neither of whose NICs is planted otherwise.
    let (slow_nic, slow_host, rph) = (pl.slow_nic, pl.slow_host, o.ranks_per_host);
    let pick_pair = |rng: &mut fastrand::Rng| -> Option<(usize, usize)> {
        let busy = |r: usize| Some(r) == slow_nic || Some(r / rph) == slow_host;
        for _ in 0..256 {
            let (a, b) = *edges.get(rng.usize(0..edges.len().max(1)))?;
            if !busy(a) && !busy(b) {
                return Some((a, b));
            }
        }
        None
    };
    pl.slow_link = if has(Plant::SlowLink) {
        pick_pair(rng)
    } else {
        None
    };
    pl.stall_link = if has(Plant::Stall) || has(Plant::RecoveredStall) {
        pick_pair(rng)
    } else {
        None
    };
    pl.missing = has(Plant::MissingPeer).then(|| pick_rank(rng, None));
    pl.ambiguous = has(Plant::AmbiguousPeer).then(|| pick_rank(rng, pl.lid_host));
    // The verdict benchmark's plants and noise (generate/verdict.rs): no draw when unused.
    pl.noise = super::verdict::Noise::new(&o.noise, o.ranks, rng)?;
    pl.one_way = if has(Plant::SlowLinkOneWay) {
        pick_pair(rng).map(|(a, b)| if rng.bool() { (b, a) } else { (a, b) })
    } else {
        None
    };
    pl.host_side = has(Plant::HostSideDelay).then(|| pick_rank(rng, pl.slow_host));
    pl.qp_tclass = has(Plant::QpTclass).then(|| pick_rank(rng, None));
    pl.qp_mtu = has(Plant::QpMtu).then(|| pick_rank(rng, None));
    pl.nics = (0..o.ranks)
        .map(|r| {
            let (h, d) = (pl.host_of(r), pl.dev_of(r));
            Nic {
                host: h,
                dev: d,
                gid: (Some(h) != pl.lid_host).then(|| fabric_gid(h, d)),
                lid: (h * 16 + d as usize + 1) as u64,
            }
        })
        .collect();
    connect(
        o,
        &mut pl,
        &edges,
        qps_per_peer,
        rng,
        has(Plant::Stall),
        has(Plant::RecoveredStall),
    );
    let busiest = pl.ends.iter().map(Vec::len).max().unwrap_or(0);
    pl.bytes_per_rank = 330.0 * WQE_SIZE as f64 * busiest as f64;
    Ok(pl)
}

/// The latency factor of a pair: 4x for each planted culprit it involves.
fn factor(pl: &Plan, a: usize, b: usize) -> f64 {
    let mut f = 1.0;
    if pl.slow_nic == Some(a) || pl.slow_nic == Some(b) {
        f *= 4.0;
    }
    if pl.slow_host.is_some()
        && (pl.slow_host == Some(pl.host_of(a)) || pl.slow_host == Some(pl.host_of(b)))
    {
        f *= 4.0;
    }
    if pl.slow_link == Some((a.min(b), a.max(b))) {
        f *= 4.0;
    }
    f
}

/// Both ends of every connection: QPNs per device from a random base, in edge order.
fn connect(
    o: &GenOptions,
    pl: &mut Plan,
    edges: &[(usize, usize)],
    qps_per_peer: usize,
    rng: &mut fastrand::Rng,
    stall: bool,
    recovered: bool,
) {
    let mut next_qpn: Vec<u64> = (0..o.ranks).map(|_| 0x100 + rng.u64(0..0x4000)).collect();
    for &(a, b) in edges {
        let f = factor(pl, a, b);
        for k in 0..qps_per_peer {
            let (qa, qb) = (next_qpn[a], next_qpn[b]);
            next_qpn[a] += 1;
            next_qpn[b] += 1;
            let st = pl.stall_link == Some((a, b)) && k == 0;
            let ch = (a + b + k) % N_CHANNELS;
            for (me, peer, q, pq) in [(a, b, qa, qb), (b, a, qb, qa)] {
                let way = super::verdict::direction_factor(pl.one_way, pl.host_side, me, peer);
                pl.ends[me].push(End {
                    rank: me,
                    peer_rank: peer,
                    qpn: q,
                    peer_qpn: pq,
                    ch,
                    factor: f * way,
                    stalled: st && stall,
                    recovered: st && recovered,
                });
            }
        }
    }
}

/// One rank's file.
fn rank_file(o: &GenOptions, pl: &Plan, rank: usize, rng: &mut fastrand::Rng) -> TelemetryFile {
    let nic = &pl.nics[rank];
    let start = 1_796_209_200_000_000_000i128 + rng.i128(0..50_000_000); // 2026-12-02T11:00:00Z
    let end_t = start
        + if pl.snapshot {
            60_000_000_000
        } else {
            120_000_000_000
        };
    let mut channels: Vec<Channel> = (0..N_CHANNELS)
        .map(|c| Channel {
            id: Some(c as u64),
            num_data_qp: 0,
            ..Default::default()
        })
        .collect();
    let mut peer_hists: BTreeMap<usize, (u64, Vec<LogBucket>)> = BTreeMap::new();
    let mut dev = Device::default();
    let mut sends = 0u64;
    for (i, e) in pl.ends[rank].iter().enumerate() {
        let (q, lh, sent) = qp_of(o, pl, e, i, start, end_t, rng);
        let ph = peer_hists.entry(e.peer_rank).or_insert((0, Vec::new()));
        ph.0 += 1;
        add_log_hist(&mut ph.1, &lh);
        sends += sent;
        *dev.num_wqe_outstanding.get_or_insert(0) += q.num_wqe_outstanding.unwrap_or(0);
        *dev.num_qps_stalled.get_or_insert(0) += u64::from(e.stalled);
        let ch = &mut channels[e.ch];
        ch.num_data_qp += 1;
        add_log_hist(
            ch.wqe_completion_log_histogram.get_or_insert_with(Vec::new),
            &lh,
        );
        ch.queue_pairs.push(q);
    }
    if sends > 0 {
        dev.tx_bytes = jitter(rng, pl.bytes_per_rank, 0.01);
        dev.rx_bytes = jitter(rng, pl.bytes_per_rank, 0.01);
    }
    let sampled = o.latency_sample > 1;
    for ch in &mut channels {
        ch.counters = counters_from_qps(&ch.queue_pairs, sampled);
        if ch.queue_pairs.is_empty() {
            ch.counters.wqe_completion_histogram = vec![0; o.buckets.max(1)];
        }
        ch.num_req_completed = ch.counters.num_recv_wqe;
        if ch.wqe_completion_log_histogram.is_none() {
            ch.wqe_completion_log_histogram = Some(Vec::new());
        }
    }
    let mut dev_log = Vec::new();
    for ch in &channels {
        add_log_hist(
            &mut dev_log,
            ch.wqe_completion_log_histogram.as_deref().unwrap_or(&[]),
        );
    }
    let peers = peer_hists
        .into_iter()
        .map(|(pr, (nq, h))| {
            let pn = &pl.nics[pr];
            DevicePeer {
                gid: pn.gid.as_ref().map(|g| g.0.as_str().into()),
                gid_ip: pn.gid.as_ref().map(|g| g.1.as_str().into()),
                lid: Some(pn.lid),
                num_qps: nq,
                wqe_completion_log_histogram: Some(h),
            }
        })
        .collect();
    let mut hw = BTreeMap::new();
    for k in hw_names(Kind::Scalar) {
        hw.insert(k.to_string(), HwValue::Scalar(0));
    }
    let qp_count: u64 = channels.iter().map(|c| c.queue_pairs.len() as u64).sum();
    let dev = Device {
        device_id: nic.dev,
        roce_device: crate::generate::roce_device_name(&o.hw_type, nic.dev),
        eth_device: format!("enp{}s0f0", 12 + nic.dev * 16),
        hw_type: o.hw_type.clone(),
        cq_poll_count: qp_count * 900,
        num_channels: Some(N_CHANNELS as u64),
        active_channels: channels
            .iter()
            .filter(|c| !c.queue_pairs.is_empty())
            .count() as u64,
        wqe_size_stats: if sends > 0 {
            vec![crate::model::WqeSizeStat {
                max_wqe_size: dev.tx_bytes.div_ceil(sends).next_power_of_two(),
                num_wqe: sends,
            }]
        } else {
            Vec::new()
        },
        channels,
        hw_counters: hw.into(),
        wqe_completion_log_histogram: Some(dev_log),
        port: Some(1),
        gid_index: nic.gid.as_ref().map(|_| 3),
        gid: nic.gid.as_ref().map(|g| g.0.as_str().into()),
        gid_ip: nic.gid.as_ref().map(|g| g.1.as_str().into()),
        lid: Some(nic.lid),
        peers: Some(peers),
        num_wqe_outstanding: Some(dev.num_wqe_outstanding.unwrap_or(0)),
        num_qps_stalled: Some(dev.num_qps_stalled.unwrap_or(0)),
        ..dev
    };
    let (format, version) = if pl.has_attrs() {
        (crate::model::SourceFormat::V5, 5)
    } else {
        (crate::model::SourceFormat::V3, 3)
    };
    TelemetryFile {
        format,
        version,
        host_name: hostname(nic.host),
        process_name: "all_reduce_perf".into(),
        process_id: pid_of(rank),
        start_time: format_timestamp_ns(start),
        end_time: format_timestamp_ns(end_t),
        is_final: Some(!pl.snapshot),
        trigger: Some(if pl.snapshot { "SIGUSR1" } else { "exit" }.into()),
        transport: Some("IB-CAST".into()),
        histogram_interval_ns: o.interval_ns.max(1),
        latency_sample_interval: sampled.then_some(o.latency_sample),
        devices: vec![dev],
        stall_ms: Some(1000),
        ..Default::default()
    }
}

/// One QP of a rank: the QP, its log histogram and its sends.
fn qp_of(
    o: &GenOptions,
    pl: &Plan,
    e: &End,
    i: usize,
    start: i128,
    end_t: i128,
    rng: &mut fastrand::Rng,
) -> (QueuePair, Vec<LogBucket>, u64) {
    let base_ns = 9_000.0;
    let n = pl.noise.completions(rng);
    let all: Vec<u64> = (0..n)
        .map(|_| pl.noise.latency(rng, e.rank, base_ns, e.factor))
        .collect();
    // --latency-sample N: the histograms keep one completion in N.
    let sample_n = o.latency_sample.max(1);
    let samples = &all[..(n / sample_n) as usize];
    let lh = log_hist_of(samples);
    let width = o.interval_ns.max(1);
    let mut lin = vec![0u64; o.buckets.max(1)];
    for &s in samples {
        let b = ((s / width) as usize).min(lin.len() - 1);
        lin[b] += 1;
    }
    let sent = n + if e.stalled { 12 } else { 0 };
    let pn = &pl.nics[e.peer_rank];
    let t_stall = start + 30_000_000_000;
    let q = QueuePair {
        id: i as u64,
        role: Some("data".into()),
        counters: Counters {
            num_wqe_sent: sent,
            num_recv_wqe: n / 8,
            // The CQ entries polled: the sends' completions and the receives' (as the library
            // counts them), so never below num_wqe_completed.
            num_wqe_rcvd: n + n / 8,
            num_wqe_completed: n,
            num_wqe_sampled: (sample_n > 1).then_some(samples.len() as u64),
            num_write_wqe: sent - sent / 8,
            num_write_imm_wqe: sent / 8,
            wqe_completion_ns_min: samples.iter().min().map_or(-1, |m| *m as i64),
            wqe_completion_ns_max: samples.iter().max().map_or(-1, |m| *m as i64),
            wqe_completion_histogram: lin,
            ..Default::default()
        },
        qp_num: Some(e.qpn),
        peer: Some(QpPeer {
            qp_num: e.peer_qpn,
            gid: pn.gid.as_ref().map(|g| g.0.as_str().into()),
            gid_ip: pn.gid.as_ref().map(|g| g.1.as_str().into()),
            lid: Some(pn.lid),
        }),
        num_wqe_outstanding: Some(if e.stalled { 12 } else { 0 }),
        oldest_outstanding_ms: None,
        stalled: Some(e.stalled),
        stalled_since: e.stalled.then(|| format_timestamp_ns(t_stall).into()),
        longest_stall_ms: Some(if e.stalled {
            ((end_t - t_stall) / 1_000_000) as u64
        } else if e.recovered {
            7_500
        } else {
            0
        }),
        longest_stall_start: (e.stalled || e.recovered)
            .then(|| format_timestamp_ns(t_stall).into()),
        monitor: qp_attrs(pl, e, i).map(|a| {
            Box::new(crate::model::QpMonitor {
                attrs: Some(*a),
                ..Default::default()
            })
        }),
        ..Default::default()
    };
    (q, lh, sent)
}

/// NCCL's QP settings on RoCE: traffic class 106, SL 3, MTU 4096, timeout 20, 7 retries, RNR
/// timer 12 (what a transport calling rcclTelemetryQpSetAttrs tells of a healthy QP).
pub const NCCL_ROCE_ATTRS: crate::model::QpAttrs = crate::model::QpAttrs {
    traffic_class: Some(106),
    sl: Some(3),
    path_mtu: Some(4096),
    timeout: Some(20),
    retry_cnt: Some(7),
    rnr_retry: Some(7),
    min_rnr_timer: Some(12),
    sgid_index: Some(3),
    port: Some(1),
    hop_limit: Some(255),
    max_rd_atomic: Some(1),
    max_dest_rd_atomic: Some(1),
};

/// A QP's settings, with QP lint's plants: [`NCCL_ROCE_ATTRS`], but on the planted rank's
/// first QP.
fn qp_attrs(pl: &Plan, e: &End, i: usize) -> Option<Box<crate::model::QpAttrs>> {
    if !pl.has_attrs() {
        return None;
    }
    let first = i == 0;
    let mut a = NCCL_ROCE_ATTRS;
    if first && pl.qp_tclass == Some(e.rank) {
        a.traffic_class = Some(0);
    }
    if first && pl.qp_mtu == Some(e.rank) {
        a.path_mtu = Some(1024);
    }
    Some(Box::new(a))
}

/// The ambiguous claim: another process on the same host with a device of the same GID and
/// one QP of the same QPN (a QPN reused by a later run in the same directory).
fn ambiguous_copy(f: &TelemetryFile, rank: usize) -> TelemetryFile {
    let mut f = f.clone();
    f.process_id = 60_001 + rank as i64;
    let d = &mut f.devices[0];
    for ch in &mut d.channels {
        ch.queue_pairs.truncate(1);
        ch.counters = counters_from_qps(&ch.queue_pairs, false);
        ch.num_data_qp = ch.queue_pairs.len() as u64;
        ch.num_req_completed = ch.counters.num_recv_wqe;
        ch.wqe_completion_log_histogram = Some(log_hist_of(&[]));
    }
    d.channels.retain(|c| !c.queue_pairs.is_empty());
    d.channels.truncate(1);
    f
}

/// Where each anomaly was planted.
fn manifest(o: &GenOptions, pl: &Plan, extra: Option<&TelemetryFile>) -> Vec<Planted> {
    let mut planted = Vec::new();
    let mut mark = |kind: Plant, r: usize, peer: Option<usize>, note: Option<String>| {
        planted.push(Planted {
            kind,
            host: hostname(pl.host_of(r)),
            pid: pid_of(r),
            device_id: pl.dev_of(r),
            file: format!(
                "rccl_telemetry_{}_1000_{}.json",
                hostname(pl.host_of(r)),
                pid_of(r)
            ),
            counter: note,
            peer: peer.map(|p| {
                let dev = crate::generate::roce_device_name(&o.hw_type, pl.dev_of(p));
                format!("{}:{dev}", hostname(pl.host_of(p)))
            }),
        });
    };
    if let Some(r) = pl.slow_nic {
        mark(Plant::SlowNic, r, None, None);
    }
    if let Some(h) = pl.slow_host {
        mark(
            Plant::SlowHost,
            (h * o.ranks_per_host).min(o.ranks - 1),
            None,
            None,
        );
    }
    if let Some((a, b)) = pl.slow_link {
        mark(Plant::SlowLink, a, Some(b), None);
    }
    if let Some(h) = pl.lid_host {
        mark(
            Plant::LidOnly,
            (h * o.ranks_per_host).min(o.ranks - 1),
            None,
            None,
        );
    }
    if let Some((a, b)) = pl.stall_link {
        let kind = if pl.snapshot {
            Plant::Stall
        } else {
            Plant::RecoveredStall
        };
        mark(kind, a, Some(b), None);
    }
    if let Some(r) = pl.missing {
        mark(Plant::MissingPeer, r, None, Some("file not written".into()));
    }
    if let Some((a, b)) = pl.one_way {
        mark(Plant::SlowLinkOneWay, a, Some(b), None);
    }
    if let Some(r) = pl.host_side {
        mark(Plant::HostSideDelay, r, None, None);
    }
    let first_qpn = |r: usize| pl.ends[r].first().map(|e| format!("qp_num {}", e.qpn));
    if let Some(r) = pl.qp_tclass {
        mark(Plant::QpTclass, r, None, first_qpn(r));
    }
    if let Some(r) = pl.qp_mtu {
        mark(Plant::QpMtu, r, None, first_qpn(r));
    }
    if let (Some(r), Some(f)) = (pl.ambiguous, extra) {
        let qpn = f.devices[0]
            .channels
            .first()
            .and_then(|c| c.queue_pairs.first())
            .and_then(|q| q.qp_num);
        if let Some(qpn) = qpn {
            mark(Plant::AmbiguousPeer, r, None, Some(format!("qp_num {qpn}")));
        }
    }
    planted
}
