//! `generate`: writes a realistic run of many ranks, optionally with planted anomalies, for
//! tests, demos and benchmarks. Every file satisfies the schema and the invariants `check`
//! verifies (channel totals are derived from their QPs, as the library does), and a manifest
//! `planted.json` next to them says which rank carries which anomaly.
//!
//! This file generates the runs of format versions 1 and 2 (one file per rank, no peers) and
//! holds what every generated run shares (noise, histograms, counters, writing a file);
//! `fabric.rs` generates runs of version 3, whose QPs know their peers (`--peers`).

use crate::model::{
    add_log_hist, format_timestamp_ns, Channel, Counters, Device, DevicePeer, Hi, HwSample,
    HwValue, LogBucket, QpPeer, QueuePair, TelemetryFile,
};
use rccl_telemetry_format::vocab::{self, Kind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

mod fabric;
pub use fabric::*;
mod finalized;
pub use finalized::finalize_dir;
mod hang;
pub use hang::generate_hang;
mod nccl_log;
pub use nccl_log::{generate_logs, log_name, LogOptions, LOG_PLANTS};
mod plant;
pub use plant::{Plant, PlantArg, RunKind, Spec};
mod verdict;
pub use verdict::{Noise, NOISE_MODELS};
pub mod topology;
pub use topology::Topology;

#[derive(Debug, Clone)]
pub struct GenOptions {
    pub ranks: usize,
    pub ranks_per_host: usize,
    pub seed: u64,
    /// The anomalies to plant: of runs without peers here, of runs with peers (a hang alone)
    /// in `generate_fabric`.
    pub plants: Vec<Plant>,
    /// "mlx5" or "thor2" (one channel with a null id) or "ainic" (4 numbered channels).
    pub hw_type: String,
    /// Latency sampling N (1 = every WQE, no sampled keys).
    pub latency_sample: u64,
    pub buckets: usize,
    pub interval_ns: u64,
    /// hw_samples per rank (0 = the sampler did not run).
    pub samples: usize,
    /// Devices registered per rank (each rank drives one of them).
    pub devices_per_rank: usize,
    /// Runs with peers: the noise models of `generate/verdict.rs` (jitter, deschedule, few).
    pub noise: Vec<String>,
    /// With peers: who each rank is connected to (the hang plants keep their own shape).
    pub topology: Topology,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            ranks: 16,
            ranks_per_host: 8,
            seed: 1,
            plants: Vec::new(),
            hw_type: "mlx5".into(),
            latency_sample: 1,
            buckets: 5,
            interval_ns: 30_000,
            samples: 0,
            devices_per_rank: 8,
            noise: Vec::new(),
            topology: Topology::default(),
        }
    }
}

/// Where an anomaly was planted.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Planted {
    pub kind: Plant,
    pub host: String,
    pub pid: i64,
    pub device_id: u32,
    pub file: String,
    /// The counter involved, when there is one.
    pub counter: Option<String>,
    /// For a link: the NIC at the other end, "host:device".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// Normal-ish noise: the sum of four uniforms, centred, scaled to unit variance.
fn noise(rng: &mut fastrand::Rng) -> f64 {
    let s: f64 = (0..4).map(|_| rng.f64()).sum::<f64>() - 2.0;
    s * (3.0f64).sqrt()
}

fn jitter(rng: &mut fastrand::Rng, x: f64, rel: f64) -> u64 {
    (x * (1.0 + rel * noise(rng))).max(0.0).round() as u64
}

/// Splits `total` into `n` parts that add up exactly, each within a few percent of total/n.
fn split(rng: &mut fastrand::Rng, total: u64, n: usize) -> Vec<u64> {
    if n == 0 {
        return Vec::new();
    }
    let w: Vec<f64> = (0..n).map(|_| 1.0 + 0.03 * noise(rng)).collect();
    let ws: f64 = w.iter().sum();
    let mut parts: Vec<u64> = w
        .iter()
        .map(|x| (total as f64 * x / ws).floor() as u64)
        .collect();
    let used: u64 = parts.iter().sum();
    parts[0] += total - used.min(total);
    parts
}

/// A latency histogram of `k` samples with bucket probabilities `p`, plus a min and a max
/// that fall in the first and last non-empty buckets.
fn histogram(
    rng: &mut fastrand::Rng,
    k: u64,
    p: &[f64],
    width: u64,
    tail_max_ns: u64,
) -> (Vec<u64>, i64, i64) {
    let n = p.len();
    let mut h: Vec<u64> = p.iter().map(|q| (k as f64 * q).floor() as u64).collect();
    let used: u64 = h.iter().sum();
    h[0] += k - used.min(k);
    if k == 0 {
        return (h, -1, -1);
    }
    let first = h.iter().position(|v| *v > 0).unwrap_or(0) as u64;
    let last = h.iter().rposition(|v| *v > 0).unwrap_or(0) as u64;
    let lo = first * width;
    let min = lo + rng.u64(0..=width / 3).max(1) + if first == 0 { width / 10 } else { 0 };
    let max = if last as usize == n - 1 {
        last * width + rng.u64(width / 2..=tail_max_ns.max(width))
    } else {
        last * width + rng.u64(width / 2..width)
    };
    let max = max.max(min);
    (h, min as i64, max as i64)
}

fn counters_from_qps(qps: &[QueuePair], sampled: bool) -> Counters {
    let mut c = Counters::default();
    let mut hist: Vec<u64> = Vec::new();
    for q in qps {
        let x = &q.counters;
        c.num_wqe_sent += x.num_wqe_sent;
        c.num_recv_wqe += x.num_recv_wqe;
        c.num_wqe_rcvd += x.num_wqe_rcvd;
        c.num_wqe_completed += x.num_wqe_completed;
        c.num_cts_sent += x.num_cts_sent;
        c.num_cts_sent_signalled += x.num_cts_sent_signalled;
        c.num_cts_sent_unsignalled += x.num_cts_sent_unsignalled;
        c.num_slot_miss += x.num_slot_miss;
        c.num_write_wqe += x.num_write_wqe;
        c.num_write_imm_wqe += x.num_write_imm_wqe;
        crate::model::add_hist(&mut hist, &x.wqe_completion_histogram);
    }
    c.num_wqe_sampled = sampled.then(|| {
        qps.iter()
            .map(|q| q.counters.num_wqe_sampled.unwrap_or(0))
            .sum()
    });
    (c.wqe_completion_ns_min, c.wqe_completion_ns_max) =
        crate::model::latency_range(qps.iter().map(|q| &q.counters));
    c.wqe_completion_histogram = hist;
    c
}

/// The hardware-counter vocabulary the generator writes: the format's canonical keys
/// (`rccl_telemetry_format::vocab`), the scalars then the per-priority arrays.
fn hw_names(kind: Kind) -> impl Iterator<Item = &'static str> {
    vocab::names_of(kind)
}

fn unavailable_counters() -> BTreeMap<String, HwValue> {
    let mut m = BTreeMap::new();
    for k in hw_names(Kind::Scalar) {
        m.insert(k.to_string(), HwValue::Scalar(-1));
    }
    for k in hw_names(Kind::PerPrio) {
        m.insert(k.to_string(), HwValue::PerPrio(vec![-1; 8]));
    }
    m
}

/// Checks the options of a run without peers: known anomalies and hardware, sane sizes.
fn check_options(o: &GenOptions) -> Result<(), String> {
    if let Some(p) = o.plants.iter().find(|p| p.run() != RunKind::Flat) {
        return Err(format!(
            "{p} is a plant of runs with peers (--peers); without: {}",
            Plant::names(&Plant::of(RunKind::Flat))
        ));
    }
    if o.ranks == 0 || o.ranks_per_host == 0 || o.devices_per_rank == 0 {
        return Err("--ranks, --ranks-per-host and --devices-per-rank must be at least 1".into());
    }
    if o.buckets == 0 || o.buckets > 16 || o.interval_ns == 0 {
        return Err("--buckets must be 1..16 and --interval-ns at least 1".into());
    }
    if !["mlx5", "thor2", "ainic", "rxe"].contains(&o.hw_type.as_str()) {
        return Err(format!(
            "unknown --hw-type {:?} (mlx5, thor2, ainic, rxe)",
            o.hw_type
        ));
    }
    if o.plants.len() > o.ranks {
        return Err(format!(
            "{} anomalies need at least as many ranks, not {}",
            o.plants.len(),
            o.ranks
        ));
    }
    if o.plants.contains(&Plant::SamplesDropped) && o.samples == 0 {
        return Err("the samples_dropped anomaly needs --samples > 0".into());
    }
    Ok(())
}

/// What every rank of a run without peers shares: the options, the channel layout and the
/// completion-latency distributions.
struct RunShape<'a> {
    o: &'a GenOptions,
    named_channels: bool,
    n_channels: usize,
    data_per_ch: usize,
    cts_per_ch: usize,
    width: u64,
    /// Bucket probabilities of an ordinary completion-latency distribution.
    normal_p: Vec<f64>,
    /// Bucket probabilities of a heavy tail.
    tail_p: Vec<f64>,
}

impl<'a> RunShape<'a> {
    /// The channel layout of the hardware type and the latency distributions of the buckets.
    fn new(o: &'a GenOptions) -> Self {
        let named_channels = o.hw_type == "ainic" || o.hw_type == "rxe";
        let (n_channels, data_per_ch, cts_per_ch) =
            if named_channels { (4, 2, 1) } else { (1, 8, 4) };
        let mut normal_p: Vec<f64> = (0..o.buckets)
            .map(|b| 0.8 * 0.22f64.powi(b as i32))
            .collect();
        let s: f64 = normal_p.iter().sum();
        normal_p.iter_mut().for_each(|p| *p /= s);
        let tail_p: Vec<f64> = if o.buckets == 1 {
            vec![1.0]
        } else {
            let mut t: Vec<f64> = (0..o.buckets)
                .map(|b| {
                    if b == 0 {
                        0.5
                    } else {
                        0.5 / (o.buckets - 1) as f64
                    }
                })
                .collect();
            let s: f64 = t.iter().sum();
            t.iter_mut().for_each(|p| *p /= s);
            t
        };
        RunShape {
            o,
            named_channels,
            n_channels,
            data_per_ch,
            cts_per_ch,
            width: o.interval_ns,
            normal_p,
            tail_p,
        }
    }
}

/// The rank being generated: who it is, its planted anomaly and its time span.
struct RankSpan {
    host: String,
    pid: i64,
    plant: Option<Plant>,
    start: i128,
    end: i128,
    /// The share of the run its counters cover (half for a snapshot).
    part: f64,
}

/// Writes the run into `dir` and returns where the anomalies were planted.
pub fn generate(dir: &Path, o: &GenOptions) -> Result<Vec<Planted>, String> {
    check_options(o)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut rng = fastrand::Rng::with_seed(o.seed);

    // Each anomaly on its own rank, chosen by the seed.
    let mut order: Vec<usize> = (0..o.ranks).collect();
    rng.shuffle(&mut order);
    let plant_at: BTreeMap<usize, Plant> = o
        .plants
        .iter()
        .enumerate()
        .map(|(i, p)| (order[i], *p))
        .collect();

    let shape = RunShape::new(o);
    let mut planted = Vec::new();
    for rank in 0..o.ranks {
        let plant = plant_at.get(&rank).copied();
        let f = rank_file_v1(&shape, &mut rng, rank, plant, &mut planted);
        let path = dir.join(format!(
            "rccl_telemetry_{}_1000_{}.json",
            f.host_name, f.process_id
        ));
        let text =
            serde_json::to_string_pretty(&f).map_err(|e| format!("cannot serialise: {e}"))?;
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    write_planted(dir, &planted)?;
    Ok(planted)
}

/// Generates a rank's file: its devices (one used), and its anomaly into `planted`.
fn rank_file_v1(
    s: &RunShape,
    rng: &mut fastrand::Rng,
    rank: usize,
    plant: Option<Plant>,
    planted: &mut Vec<Planted>,
) -> TelemetryFile {
    let o = s.o;
    let run_start_ns: i128 = 1_796_209_200_000_000_000; // 2026-12-02T11:00:00Z
    let host_idx = rank / o.ranks_per_host;
    let local = rank % o.ranks_per_host;
    let host = format!("gpu_node_{host_idx:03}");
    let pid = 20_000 + (rank as i64 * 7919) % 40_000;
    let used_dev = (local % o.devices_per_rank) as u32;
    let start = run_start_ns + rng.i128(0..50_000_000);
    let snapshot = plant == Some(Plant::Snapshot);
    let end = start
        + if snapshot {
            60_000_000_000
        } else {
            120_000_000_000
        }
        + rng.i128(0..50_000_000);
    let r = RankSpan {
        host,
        pid,
        plant,
        start,
        end,
        part: if snapshot { 0.5 } else { 1.0 },
    };

    let mut devices = Vec::new();
    let mut samples = Vec::new();
    for dev_id in 0..o.devices_per_rank as u32 {
        let roce = roce_device_name(&o.hw_type, dev_id);
        let eth = format!("enp{}s0f0", 12 + dev_id * 16);
        if dev_id != used_dev {
            devices.push(Device {
                device_id: dev_id,
                roce_device: roce,
                eth_device: eth,
                hw_type: o.hw_type.clone(),
                tx_bytes: 0,
                rx_bytes: 0,
                num_cq_errors: 0,
                cq_poll_count: 0,
                num_channels: if s.named_channels { Some(0) } else { None },
                active_channels: 0,
                num_qp_untracked: 0,
                wqe_size_stats: Vec::new(),
                channels: Vec::new(),
                hw_counters: unavailable_counters().into(),
                wqe_completion_log_histogram: None,
                ..Default::default()
            });
            continue;
        }
        let (d, counter) = used_device_v1(s, rng, &r, dev_id, (roce, eth), &mut samples);
        devices.push(d);
        if let Some(kind) = plant {
            planted.push(Planted {
                kind,
                host: r.host.clone(),
                pid: r.pid,
                device_id: dev_id,
                file: format!("rccl_telemetry_{}_1000_{}.json", r.host, r.pid),
                counter,
                peer: None,
            });
        }
    }
    let dropped = if o.samples > 0 {
        Some(if plant == Some(Plant::SamplesDropped) {
            12
        } else {
            0
        })
    } else {
        None
    };
    TelemetryFile {
        format: crate::model::SourceFormat::V1,
        version: 1,
        host_name: r.host,
        process_name: "all_reduce_perf".into(),
        process_id: pid,
        start_time: format_timestamp_ns(start),
        end_time: format_timestamp_ns(end),
        is_final: Some(!snapshot),
        trigger: Some(if snapshot { "SIGTERM" } else { "exit" }.into()),
        transport: Some("IB-CAST".into()),
        histogram_interval_ns: s.width,
        latency_sample_interval: (o.latency_sample > 1).then_some(o.latency_sample),
        devices,
        hw_samples: (o.samples > 0).then_some(samples),
        hw_samples_dropped: dropped,
        ..Default::default()
    }
}

/// Generates the device a rank drives, its hw_samples into `samples`; returns it with the
/// counter its planted anomaly shows in.
fn used_device_v1(
    s: &RunShape,
    rng: &mut fastrand::Rng,
    r: &RankSpan,
    dev_id: u32,
    (roce, eth): (String, String),
    samples: &mut Vec<HwSample>,
) -> (Device, Option<String>) {
    let o = s.o;
    let plant = r.plant;
    let skew = if plant == Some(Plant::Skew) { 1.6 } else { 1.0 };
    let base_bytes = 8.0 * (1u64 << 30) as f64;
    let tx_bytes = jitter(rng, base_bytes * skew * r.part, 0.01);
    let rx_bytes = jitter(rng, base_bytes * r.part, 0.01);
    let wqe_size: u64 = 512 * 1024;
    let sends = tx_bytes / wqe_size;
    let recvs = rx_bytes / wqe_size / 8; // one receive per request (the write-with-imm)
    let channels = channels_v1(s, rng, plant, sends, recvs);
    let (hw, counter) = hw_counters_v1(rng, plant, (tx_bytes, rx_bytes), (sends, recvs));
    if o.samples > 0 {
        samples.extend(hw_samples_v1(o, &hw, r, dev_id));
    }

    let cq_errors = if plant == Some(Plant::CqErrors) {
        17
    } else {
        0
    };
    let untracked_dev = if plant == Some(Plant::Untracked) {
        2
    } else {
        0
    };
    let wqe_sent_total: u64 = channels.iter().map(|c| c.counters.num_wqe_sent).sum();
    let d = Device {
        device_id: dev_id,
        roce_device: roce,
        eth_device: eth,
        hw_type: o.hw_type.clone(),
        tx_bytes,
        rx_bytes,
        num_cq_errors: cq_errors,
        cq_poll_count: jitter(rng, wqe_sent_total as f64 * 3.0, 0.05),
        num_channels: s.named_channels.then_some(s.n_channels as u64),
        active_channels: s.n_channels as u64,
        num_qp_untracked: untracked_dev,
        wqe_size_stats: vec![
            crate::model::WqeSizeStat {
                max_wqe_size: 65536,
                num_wqe: (wqe_sent_total / 20).max(1),
            },
            crate::model::WqeSizeStat {
                max_wqe_size: wqe_size,
                num_wqe: (wqe_sent_total - wqe_sent_total / 20).max(1),
            },
        ],
        channels,
        hw_counters: hw.into(),
        wqe_completion_log_histogram: None,
        ..Default::default()
    };
    (d, counter)
}

/// Generates the channels of a used device: its sends and receives split over the data QPs,
/// the CTS QPs beside them, each channel's totals derived from its QPs.
fn channels_v1(
    s: &RunShape,
    rng: &mut fastrand::Rng,
    plant: Option<Plant>,
    sends: u64,
    recvs: u64,
) -> Vec<Channel> {
    let o = s.o;
    let (n_channels, data_per_ch, cts_per_ch) = (s.n_channels, s.data_per_ch, s.cts_per_ch);
    let width = s.width;
    let n_data = n_channels * data_per_ch;
    let n_cts = n_channels * cts_per_ch;
    let sends_per_qp = split(rng, sends, n_data);
    let recvs_per_qp = split(rng, recvs, n_data);
    let cts_per_qp = split(rng, recvs, n_cts);
    let slot_scale = if plant == Some(Plant::SlotMiss) {
        10.0
    } else {
        1.0
    };
    let (p, tail_max) = if plant == Some(Plant::Tail) {
        (&s.tail_p, 5_000_000)
    } else {
        (&s.normal_p, 4 * width)
    };
    let sample_n = o.latency_sample.max(1);

    let mut channels = Vec::new();
    let mut qp_id = 0u64;
    for ch in 0..n_channels {
        let mut qps = Vec::new();
        for i in 0..data_per_ch {
            let k = ch * data_per_ch + i;
            let sent = sends_per_qp[k];
            let imm = sent / 8;
            let completed = sent;
            let rcvd = completed + recvs_per_qp[k]
                - jitter(rng, recvs_per_qp[k] as f64 * 0.01, 0.2).min(recvs_per_qp[k]);
            let sampled = completed / sample_n;
            let (h, mn, mx) = histogram(rng, sampled, p, width, tail_max);
            qps.push(QueuePair {
                id: qp_id,
                role: Some("data".into()),
                counters: Counters {
                    num_wqe_sent: sent,
                    num_recv_wqe: recvs_per_qp[k],
                    num_wqe_rcvd: rcvd,
                    num_wqe_completed: completed,
                    num_wqe_sampled: (sample_n > 1).then_some(sampled),
                    num_cts_sent: 0,
                    num_cts_sent_signalled: 0,
                    num_cts_sent_unsignalled: 0,
                    num_slot_miss: jitter(rng, 40.0 * slot_scale, 0.15),
                    num_write_wqe: sent - imm,
                    num_write_imm_wqe: imm,
                    wqe_completion_ns_min: mn,
                    wqe_completion_ns_max: mx,
                    wqe_completion_histogram: h,
                    ..Default::default()
                },
                ..Default::default()
            });
            qp_id += 1;
        }
        for i in 0..cts_per_ch {
            qps.push(cts_qp_v1(qp_id, cts_per_qp[ch * cts_per_ch + i], o));
            qp_id += 1;
        }
        let counters = counters_from_qps(&qps, sample_n > 1);
        let untracked = if plant == Some(Plant::Untracked) && ch == 0 {
            1
        } else {
            0
        };
        channels.push(Channel {
            id: s.named_channels.then_some(ch as u64),
            num_req_completed: counters.num_recv_wqe,
            num_data_qp: data_per_ch as u64,
            num_cts_qp: cts_per_ch as u64,
            num_qp_untracked: untracked,
            counters,
            queue_pairs: qps,
            wqe_completion_log_histogram: None,
            comm: None,
            dropped_qps: 0,
        });
    }
    channels
}

/// A CTS QP that sent `cts` clear-to-sends, one in 16 of them signalled.
fn cts_qp_v1(id: u64, cts: u64, o: &GenOptions) -> QueuePair {
    let sample_n = o.latency_sample.max(1);
    let signalled = cts / 16;
    QueuePair {
        id,
        role: Some("cts".into()),
        counters: Counters {
            num_wqe_sent: 0,
            num_recv_wqe: 0,
            num_wqe_rcvd: signalled,
            num_wqe_completed: 0,
            num_wqe_sampled: (sample_n > 1).then_some(0),
            num_cts_sent: cts,
            num_cts_sent_signalled: signalled,
            num_cts_sent_unsignalled: cts - signalled,
            num_slot_miss: 0,
            num_write_wqe: 0,
            num_write_imm_wqe: 0,
            wqe_completion_ns_min: -1,
            wqe_completion_ns_max: -1,
            wqe_completion_histogram: vec![0; o.buckets],
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Generates a used device's hardware counters from its traffic, the planted anomaly's
/// raised; returns them with the counter the anomaly shows in.
fn hw_counters_v1(
    rng: &mut fastrand::Rng,
    plant: Option<Plant>,
    (tx_bytes, rx_bytes): (u64, u64),
    (sends, recvs): (u64, u64),
) -> (BTreeMap<String, HwValue>, Option<String>) {
    let packets = |b: u64| b / 4096 + b / 65536;
    let mut hw = BTreeMap::new();
    for k in hw_names(Kind::Scalar) {
        hw.insert(k.to_string(), HwValue::Scalar(0));
    }
    let mut set = |name: &str, v: u64| {
        hw.insert(name.to_string(), HwValue::Scalar(v as i64));
    };
    let (dtx, drx) = (tx_bytes + tx_bytes / 50, rx_bytes + rx_bytes / 50);
    set("delta_tx_bytes", dtx);
    set("delta_rx_bytes", drx);
    set("delta_tx_packets", packets(tx_bytes));
    set("delta_rx_packets", packets(rx_bytes));
    set("port_tx_bytes", dtx + dtx / 100);
    set("port_rx_bytes", drx + drx / 100);
    set(
        "port_tx_packets",
        packets(tx_bytes) + packets(tx_bytes) / 100,
    );
    set(
        "port_rx_packets",
        packets(rx_bytes) + packets(rx_bytes) / 100,
    );
    set("rdma_sends", sends);
    set("rdma_recvs", recvs);
    set("rx_write_requests", packets(rx_bytes));
    let cnp = if plant == Some(Plant::Cnp) { 5.0 } else { 1.0 };
    set("cnp_sent", jitter(rng, 2000.0 * cnp, 0.08));
    set("cnp_handled", jitter(rng, 1900.0 * cnp, 0.08));
    set("ecn_marked_pkts", jitter(rng, 2100.0 * cnp, 0.08));
    set(
        "local_ack_timeout_err",
        if plant == Some(Plant::Retransmit) {
            jitter(rng, 40.0, 0.1)
        } else {
            0
        },
    );
    set(
        "retransmitted_pkts",
        jitter(
            rng,
            if plant == Some(Plant::Retransmit) {
                4000.0
            } else {
                0.0
            },
            0.1,
        ),
    );
    set(
        "out_of_sequence",
        jitter(
            rng,
            if plant == Some(Plant::OutOfSequence) {
                60.0
            } else {
                3.0
            },
            0.3,
        ),
    );
    set("packet_seq_err", jitter(rng, 2.0, 0.3));
    set(
        "port_rx_discards",
        if plant == Some(Plant::Drops) {
            jitter(rng, 5000.0, 0.1)
        } else {
            0
        },
    );
    set("ack_deferred", jitter(rng, 500.0, 0.1));
    set("fec_corrected_bits", jitter(rng, 10_000.0, 0.2));
    let pfc = if plant == Some(Plant::Pfc) { 8.0 } else { 1.0 };
    for (rx_tx, base) in [("rx", 150.0), ("tx", 150.0)] {
        let frames = jitter(rng, base * pfc, 0.1) as i64;
        let mut a = vec![0i64; 8];
        a[3] = frames;
        hw.insert(format!("pfc_{rx_tx}_frames"), HwValue::PerPrio(a.clone()));
        hw.insert(format!("pfc_{rx_tx}_frames_total"), HwValue::Scalar(frames));
        a[3] = frames * 12;
        hw.insert(
            format!("pfc_{rx_tx}_pause_duration_us"),
            HwValue::PerPrio(a),
        );
    }
    let counter = plant.and_then(Plant::counter);
    if let (Some(Plant::Unavailable), Some(c)) = (plant, counter) {
        hw.insert(c.into(), HwValue::Scalar(-1));
    }
    (hw, counter.map(str::to_string))
}

/// A used device's hw_samples: a few counters rising evenly to their final values over the
/// rank's span (the planted CNP rank's in a burst half-way).
fn hw_samples_v1(
    o: &GenOptions,
    hw: &BTreeMap<String, HwValue>,
    r: &RankSpan,
    dev_id: u32,
) -> Vec<HwSample> {
    let keys = [
        "cnp_sent",
        "cnp_handled",
        "ecn_marked_pkts",
        "out_of_sequence",
        "port_rx_discards",
        "pfc_rx_frames_total",
    ];
    let (start, end) = (r.start, r.end);
    let mut samples = Vec::new();
    let step = (end - start) / (o.samples as i128 + 1);
    for s in 0..o.samples {
        let t = start + step * (s as i128 + 1);
        let frac = (s + 1) as f64 / o.samples as f64;
        let mut c = BTreeMap::new();
        for k in keys {
            let fin = hw.get(k).and_then(HwValue::total).unwrap_or(-1);
            // A burst in the middle of the run for the planted CNP rank.
            let shape = if r.plant == Some(Plant::Cnp) && k.starts_with("cnp") {
                ((frac - 0.4) / 0.3).clamp(0.0, 1.0)
            } else {
                frac
            };
            c.insert(
                k.to_string(),
                if fin < 0 {
                    -1
                } else {
                    (fin as f64 * shape).round() as i64
                },
            );
        }
        samples.push(HwSample {
            device_id: dev_id,
            timestamp_ns: t as u64,
            counters: c.into(),
        });
    }
    samples
}

/// Writes `planted.json`, what a generated run has planted where, beside its rank files.
fn write_planted(dir: &Path, planted: &[Planted]) -> Result<(), String> {
    let manifest = dir.join("planted.json");
    let text =
        serde_json::to_string_pretty(planted).map_err(|e| format!("cannot serialise: {e}"))?;
    std::fs::write(&manifest, text).map_err(|e| format!("cannot write {}: {e}", manifest.display()))
}

fn write_file(dir: &Path, f: &TelemetryFile) -> Result<(), String> {
    let path = dir.join(format!(
        "rccl_telemetry_{}_1000_{}.json",
        f.host_name, f.process_id
    ));
    let text = serde_json::to_string(f).map_err(|e| format!("cannot serialise: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A generated NIC's RDMA device name as its driver names them (`mlx5_0`, `bnxt_re0`,
/// `ionic_0`, `rxe0`).
pub fn roce_device_name(hw_type: &str, dev: u32) -> String {
    match hw_type {
        "thor2" => format!("bnxt_re{dev}"),
        "ainic" => format!("ionic_{dev}"),
        "rxe" => format!("rxe{dev}"),
        _ => format!("mlx5_{dev}"),
    }
}
