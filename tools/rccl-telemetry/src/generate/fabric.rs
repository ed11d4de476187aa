//! `generate --peers`: runs of format version 3, a job whose ranks each drive their own NIC
//! and hold QPs to every rank of the other hosts, each QP naming its peer, with the fabric
//! anomalies (slow NIC, link or host, missing or ambiguous peers, stalls) planted. Separate
//! from generate.rs (runs without peers) because the model differs: links between NICs,
//! not ranks on their own.

use super::*;

/// Anomalies of a run generated with peers (`--peers`), each planted once.
pub const FABRIC_PLANTS: [&str; 8] = [
    "slow_nic",        // one NIC: 4x the completion latency of every QP it is an end of
    "slow_link",       // one NIC pair (two hosts): 4x on the QPs between them, both ways
    "slow_host",       // every NIC of one host: 4x
    "missing_peer",    // one rank's file is not written: its peers' QPs stay unmatched
    "ambiguous_peer",  // a second file claims the GID and QPN of one QP
    "lid_only",        // one host's NICs have no GID (InfiniBand without GRH): joined by LID
    "stall",           // a snapshot during a hang: the QPs of one link are stalled now
    "recovered_stall", // final files; the QPs of one link had a long stall that ended
];

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

fn log_hist_of(samples: &[u64]) -> Vec<LogBucket> {
    let mut m: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &s in samples {
        let (lo, hi) = log_bucket(s);
        m.entry(lo).or_insert((hi, 0)).1 += 1;
    }
    m.into_iter()
        .map(|(lo, (hi, n))| (lo, Some(hi), n))
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

/// Writes a run of `o.ranks` ranks, `o.ranks_per_host` per host, each driving its own NIC
/// (device `local % devices_per_rank`), where every rank is connected to every rank of the
/// other hosts (to every other rank when there is one host) by `qps_per_peer` RC QPs, with the
/// version-3 keys: QPNs unique per device, GIDs per NIC, every QP's peer, per-device peers with
/// their log histograms, and the stall keys (`stall_ms` 1000). Plants come from
/// [`FABRIC_PLANTS`]; planted.json names the culprit (for a link, `peer` names the other end).
#[allow(clippy::too_many_lines)] // past the limit of clippy.toml: to be split into its steps
pub fn generate_fabric(
    dir: &Path,
    o: &GenOptions,
    qps_per_peer: usize,
) -> Result<Vec<Planted>, String> {
    if let Some(r) = super::hang::dispatch(dir, o, qps_per_peer) {
        return r;
    }
    for p in &o.plants {
        if !FABRIC_PLANTS.contains(&p.as_str())
            && !super::verdict::VERDICT_PLANTS.contains(&p.as_str())
        {
            return Err(format!(
                "unknown plant {p:?} with --peers (one of: {}, {})",
                FABRIC_PLANTS.join(", "),
                super::verdict::VERDICT_PLANTS.join(", ")
            ));
        }
    }
    if o.ranks == 0 || o.ranks_per_host == 0 {
        return Err("--ranks and --ranks-per-host must be at least 1".into());
    }
    if o.ranks_per_host > o.devices_per_rank.max(1) {
        return Err(format!("--peers gives every rank of a host its own NIC: --ranks-per-host {} needs --devices-per-rank >= {0}", o.ranks_per_host));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let has = |p: &str| o.plants.iter().any(|x| x == p);
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let n_hosts = o.ranks.div_ceil(o.ranks_per_host);
    let dpr = o.devices_per_rank.max(1);
    let host_of = |r: usize| r / o.ranks_per_host;
    let dev_of = |r: usize| ((r % o.ranks_per_host) % dpr) as u32;
    let pid_of = |r: usize| 20_000 + (r as i64 * 7919) % 40_000;
    let hostname = |h: usize| format!("gpu_node_{h:03}");
    let file_of = |r: usize| {
        format!(
            "rccl_telemetry_{}_1000_{}.json",
            hostname(host_of(r)),
            pid_of(r)
        )
    };
    // Distinct culprits, chosen by the seed.
    let lid_host = has("lid_only").then(|| rng.usize(0..n_hosts));
    let slow_host = has("slow_host").then(|| rng.usize(0..n_hosts));
    let pick_rank = |rng: &mut fastrand::Rng, avoid_host: Option<usize>| -> usize {
        for _ in 0..64 {
            let r = rng.usize(0..o.ranks);
            if Some(host_of(r)) != avoid_host {
                return r;
            }
        }
        rng.usize(0..o.ranks)
    };
    let slow_nic = has("slow_nic").then(|| pick_rank(&mut rng, slow_host));
    let connected = |a: usize, b: usize| a != b && (n_hosts == 1 || host_of(a) != host_of(b));
    // A connected pair neither of whose NICs is planted otherwise.
    let pick_pair = |rng: &mut fastrand::Rng| -> Option<(usize, usize)> {
        for _ in 0..256 {
            let a = rng.usize(0..o.ranks);
            let b = rng.usize(0..o.ranks);
            let busy = |r: usize| Some(r) == slow_nic || Some(host_of(r)) == slow_host;
            if connected(a, b) && !busy(a) && !busy(b) {
                return Some((a.min(b), a.max(b)));
            }
        }
        None
    };
    let slow_link = if has("slow_link") {
        pick_pair(&mut rng)
    } else {
        None
    };
    let stall_link = if has("stall") || has("recovered_stall") {
        pick_pair(&mut rng)
    } else {
        None
    };
    let missing = has("missing_peer").then(|| pick_rank(&mut rng, None));
    // The verdict benchmark's plants and noise (generate/verdict.rs): no draw when unused.
    let noise_m = super::verdict::Noise::new(&o.noise, o.ranks, &mut rng)?;
    let one_way = if has("slow_link_one_way") {
        pick_pair(&mut rng).map(|(a, b)| if rng.bool() { (b, a) } else { (a, b) })
    } else {
        None
    };
    let host_side = has("host_side_delay").then(|| pick_rank(&mut rng, slow_host));
    let way =
        |from: usize, to: usize| super::verdict::direction_factor(one_way, host_side, from, to);

    let nics: Vec<Nic> = (0..o.ranks)
        .map(|r| {
            let (h, d) = (host_of(r), dev_of(r));
            Nic {
                host: h,
                dev: d,
                gid: (Some(h) != lid_host).then(|| fabric_gid(h, d)),
                lid: (h * 16 + d as usize + 1) as u64,
            }
        })
        .collect();
    let factor = |a: usize, b: usize| -> f64 {
        let mut f = 1.0;
        if Some(a) == slow_nic || Some(b) == slow_nic {
            f *= 4.0;
        }
        if Some(host_of(a)) == slow_host || Some(host_of(b)) == slow_host {
            f *= 4.0;
        }
        if slow_link == Some((a.min(b), a.max(b))) {
            f *= 4.0;
        }
        f
    };
    // QPNs: per device (rank), from a random base, in connection order.
    let mut next_qpn: Vec<u64> = (0..o.ranks).map(|_| 0x100 + rng.u64(0..0x4000)).collect();
    let mut ends: Vec<Vec<End>> = (0..o.ranks).map(|_| Vec::new()).collect();
    let n_channels = 4usize;
    for a in 0..o.ranks {
        for b in a + 1..o.ranks {
            if !connected(a, b) {
                continue;
            }
            for k in 0..qps_per_peer {
                let (qa, qb) = (next_qpn[a], next_qpn[b]);
                next_qpn[a] += 1;
                next_qpn[b] += 1;
                let f = factor(a, b);
                let st = stall_link == Some((a, b)) && k == 0;
                let ch = (a + b + k) % n_channels;
                ends[a].push(End {
                    rank: a,
                    peer_rank: b,
                    qpn: qa,
                    peer_qpn: qb,
                    ch,
                    factor: f * way(a, b),
                    stalled: st && has("stall"),
                    recovered: st && has("recovered_stall"),
                });
                ends[b].push(End {
                    rank: b,
                    peer_rank: a,
                    qpn: qb,
                    peer_qpn: qa,
                    ch,
                    factor: f * way(b, a),
                    stalled: st && has("stall"),
                    recovered: st && has("recovered_stall"),
                });
            }
        }
    }

    let snapshot = has("stall");
    let run_start_ns: i128 = 1_796_209_200_000_000_000; // 2026-12-02T11:00:00Z
    let wqe_size: u64 = 256 * 1024;
    let base_ns = 9_000.0;
    let sample_n = o.latency_sample.max(1);
    let mut planted = Vec::new();
    let mut written: Vec<TelemetryFile> = Vec::new();
    for rank in 0..o.ranks {
        let nic = &nics[rank];
        let start = run_start_ns + rng.i128(0..50_000_000);
        let end_t = start
            + if snapshot {
                60_000_000_000
            } else {
                120_000_000_000
            };
        let mut channels: Vec<Channel> = (0..n_channels)
            .map(|c| Channel {
                id: Some(c as u64),
                num_data_qp: 0,
                ..Default::default()
            })
            .collect();
        let mut peer_hists: BTreeMap<usize, (u64, Vec<LogBucket>)> = BTreeMap::new();
        let (mut tx, mut rx) = (0u64, 0u64);
        let (mut outstanding_dev, mut stalled_dev) = (0u64, 0u64);
        for (i, e) in ends[rank].iter().enumerate() {
            let n = noise_m.completions(&mut rng);
            let all: Vec<u64> = (0..n)
                .map(|_| noise_m.latency(&mut rng, rank, base_ns, e.factor))
                .collect();
            // --latency-sample N: the histograms keep one completion in N.
            let samples = &all[..(n / sample_n) as usize];
            let lh = log_hist_of(samples);
            let width = o.interval_ns.max(1);
            let mut lin = vec![0u64; o.buckets.max(1)];
            for &s in samples {
                let b = ((s / width) as usize).min(lin.len() - 1);
                lin[b] += 1;
            }
            let sent = n + if e.stalled { 12 } else { 0 };
            let ph = peer_hists.entry(e.peer_rank).or_insert((0, Vec::new()));
            ph.0 += 1;
            add_log_hist(&mut ph.1, &lh);
            tx += sent * wqe_size;
            rx += n * wqe_size;
            let pn = &nics[e.peer_rank];
            let t_stall = start + 30_000_000_000;
            let q = QueuePair {
                id: i as u64,
                role: Some("data".into()),
                counters: Counters {
                    num_wqe_sent: sent,
                    num_recv_wqe: n / 8,
                    num_wqe_rcvd: n / 8,
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
                    gid: pn.gid.as_ref().map(|g| g.0.clone()),
                    gid_ip: pn.gid.as_ref().map(|g| g.1.clone()),
                    lid: Some(pn.lid),
                }),
                num_wqe_outstanding: Some(if e.stalled { 12 } else { 0 }),
                oldest_outstanding_ms: None,
                stalled: Some(e.stalled),
                stalled_since: e.stalled.then(|| format_timestamp_ns(t_stall)),
                longest_stall_ms: Some(if e.stalled {
                    ((end_t - t_stall) / 1_000_000) as u64
                } else if e.recovered {
                    7_500
                } else {
                    0
                }),
                longest_stall_start: (e.stalled || e.recovered)
                    .then(|| format_timestamp_ns(t_stall)),
                ..Default::default()
            };
            debug_assert_eq!(e.rank, rank);
            outstanding_dev += q.num_wqe_outstanding.unwrap_or(0);
            stalled_dev += u64::from(e.stalled);
            let ch = &mut channels[e.ch];
            ch.num_data_qp += 1;
            add_log_hist(
                ch.wqe_completion_log_histogram.get_or_insert_with(Vec::new),
                &lh,
            );
            ch.queue_pairs.push(q);
        }
        for ch in &mut channels {
            ch.counters = counters_from_qps(&ch.queue_pairs, sample_n > 1);
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
                let pn = &nics[pr];
                DevicePeer {
                    gid: pn.gid.as_ref().map(|g| g.0.clone()),
                    gid_ip: pn.gid.as_ref().map(|g| g.1.clone()),
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
            roce_device: format!("mlx5_{}", nic.dev),
            eth_device: format!("enp{}s0f0", 12 + nic.dev * 16),
            hw_type: o.hw_type.clone(),
            tx_bytes: tx,
            rx_bytes: rx,
            cq_poll_count: qp_count * 900,
            num_channels: Some(n_channels as u64),
            active_channels: channels
                .iter()
                .filter(|c| !c.queue_pairs.is_empty())
                .count() as u64,
            wqe_size_stats: vec![crate::model::WqeSizeStat {
                max_wqe_size: wqe_size,
                num_wqe: tx / wqe_size,
            }],
            channels,
            hw_counters: hw,
            wqe_completion_log_histogram: Some(dev_log),
            port: Some(1),
            gid_index: nic.gid.as_ref().map(|_| 3),
            gid: nic.gid.as_ref().map(|g| g.0.clone()),
            gid_ip: nic.gid.as_ref().map(|g| g.1.clone()),
            lid: Some(nic.lid),
            peers: Some(peers),
            num_wqe_outstanding: Some(outstanding_dev),
            num_qps_stalled: Some(stalled_dev),
            ..Default::default()
        };
        let host = hostname(nic.host);
        let f = TelemetryFile {
            format: crate::model::SourceFormat::V3,
            version: 3,
            host_name: host.clone(),
            process_name: "all_reduce_perf".into(),
            process_id: pid_of(rank),
            start_time: format_timestamp_ns(start),
            end_time: format_timestamp_ns(end_t),
            is_final: Some(!snapshot),
            trigger: Some(if snapshot { "SIGUSR1" } else { "exit" }.into()),
            transport: Some("IB-CAST".into()),
            histogram_interval_ns: o.interval_ns.max(1),
            latency_sample_interval: (sample_n > 1).then_some(sample_n),
            devices: vec![dev],
            stall_ms: Some(1000),
            ..Default::default()
        };
        written.push(f);
    }
    let mut mark = |kind: &str, r: usize, peer: Option<usize>, note: Option<String>| {
        planted.push(Planted {
            kind: kind.into(),
            host: hostname(host_of(r)),
            pid: pid_of(r),
            device_id: dev_of(r),
            file: file_of(r),
            counter: note,
            peer: peer.map(|p| format!("{}:mlx5_{}", hostname(host_of(p)), dev_of(p))),
        });
    };
    if let Some(r) = slow_nic {
        mark("slow_nic", r, None, None);
    }
    if let Some(h) = slow_host {
        let r = h * o.ranks_per_host;
        mark("slow_host", r.min(o.ranks - 1), None, None);
    }
    if let Some((a, b)) = slow_link {
        mark("slow_link", a, Some(b), None);
    }
    if let Some(h) = lid_host {
        mark(
            "lid_only",
            (h * o.ranks_per_host).min(o.ranks - 1),
            None,
            None,
        );
    }
    if let Some((a, b)) = stall_link {
        mark(
            if snapshot { "stall" } else { "recovered_stall" },
            a,
            Some(b),
            None,
        );
    }
    if let Some(r) = missing {
        mark("missing_peer", r, None, Some("file not written".into()));
    }
    if let Some((a, b)) = one_way {
        mark("slow_link_one_way", a, Some(b), None);
    }
    if let Some(r) = host_side {
        mark("host_side_delay", r, None, None);
    }
    // The ambiguous claim: another process on the same host with a device of the same GID and
    // one QP of the same QPN (a QPN reused by a later run in the same directory).
    let mut extra = None;
    if has("ambiguous_peer") {
        let r = pick_rank(&mut rng, lid_host);
        let mut f = written[r].clone();
        f.process_id = 60_001 + r as i64;
        let d = &mut f.devices[0];
        for ch in &mut d.channels {
            ch.queue_pairs.truncate(1);
            ch.counters = counters_from_qps(&ch.queue_pairs, false);
            ch.num_data_qp = ch.queue_pairs.len() as u64;
        }
        d.channels.retain(|c| !c.queue_pairs.is_empty());
        d.channels.truncate(1);
        if let Some(q) = d.channels.first().and_then(|c| c.queue_pairs.first()) {
            mark(
                "ambiguous_peer",
                r,
                None,
                Some(format!("qp_num {}", q.qp_num.unwrap_or(0))),
            );
        }
        extra = Some(f);
    }
    for (r, f) in written.iter().enumerate() {
        if Some(r) == missing {
            continue;
        }
        write_file(dir, f)?;
    }
    if let Some(f) = &extra {
        write_file(dir, f)?;
    }
    let manifest = dir.join("planted.json");
    let text =
        serde_json::to_string_pretty(&planted).map_err(|e| format!("cannot serialise: {e}"))?;
    std::fs::write(&manifest, text)
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    Ok(planted)
}
