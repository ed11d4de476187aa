//! One process of the logs as a rank file, built from the format crate's writer types (the
//! library's own), so every key is one the readers and the schema know, the WQE latency
//! monitor's among them.
//!
//! Devices: the `Using` line's NICs in its order (its index is the device id), then any device
//! only a QP line names. Each device has one channel with a null id (a log has no channel
//! split) holding its QPs in (QPN) order, and its channel count is null. Counts a log has no
//! line for (bytes, posts by opcode, CTS, slot misses, polls) are 0 in the writer's required
//! keys and the file's `source` says they were never counted; the hardware counters read -1.

use super::hist::{rebuild, Rebuilt};
use super::{Qp, Rank, UNKNOWN_DEV};
use crate::model::format_timestamp_ns;
use rccl_telemetry_format::vocab::{self, Kind};
use rccl_telemetry_format::wc_status::{order_key, status_name};
use rccl_telemetry_format::write::{
    ChannelReport, CommRef, CommunicatorReport, CompletionLatency, DeviceReport, DeviceStallReport,
    FileReport, FirstErrorReport, GidIp, GidText, HwCounters, HwValue, LogBuckets, PeerReport,
    QpErrorReport, QpIdentity, QpMonitorReport, QpPeerReport, QpReport, QpStallReport,
    StatusCounts, WqeCounts,
};
use rccl_telemetry_format::FORMAT_VERSION;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The linear histogram an imported file has: the library's defaults.
pub const INTERVAL_NS: u64 = 30_000;
pub const BUCKETS: usize = 5;

type Q = QpReport;
/// A remote NIC: its GID, else its LID.
type PeerKey = (Option<[u8; 16]>, Option<u16>);
/// Log-scale buckets being summed: lower bound -> (upper bound, count).
type LogSum = BTreeMap<u64, (u64, u64)>;
type File = FileReport<Vec<DeviceReport<Vec<ChannelReport<Vec<Q>>>>>>;

/// The file's name: the library's, with uid 0 (a log does not say it).
pub fn file_name(r: &Rank) -> String {
    format!("rccl_telemetry_{}_0_{}.json", r.host, r.pid)
}

/// Writes the rank file of `r` into `dir`.
pub fn write(r: &Rank, dir: &Path) -> Result<PathBuf, String> {
    let f = file(r);
    let path = dir.join(file_name(r));
    let text = serde_json::to_string_pretty(&f).map_err(|e| format!("cannot serialise: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn ts(ns: i128) -> String {
    format_timestamp_ns(ns)
}

fn gid_ip(g: &[u8; 16]) -> Option<GidIp> {
    if g.iter().all(|&b| b == 0) {
        return None;
    }
    let a = std::net::Ipv6Addr::from(*g);
    Some(GidIp(match a.to_ipv4_mapped() {
        Some(v4) => v4.into(),
        None => a.into(),
    }))
}

/// The QP's completions and their figures: from the summary, else the last slow line.
fn completions(q: &Qp) -> Option<(u64, super::line::Figures)> {
    match (&q.summary, &q.last_slow) {
        (Some((n, _, f)), _) => Some((*n, *f)),
        (None, Some((f, n))) => Some((*n, *f)),
        _ => None,
    }
}

/// A send QP's completions are latencies; a receive QP's post-to-poll is how long its receive
/// waited for data, which is no completion latency: counted as received, not measured.
fn is_send(q: &Qp) -> bool {
    q.send != Some(false)
}

struct Built {
    qp: Q,
    log: Vec<(u64, u64, u64)>,
    peer: Option<PeerKey>,
}

/// `sent` send completions and `recv` receive completions, each WR posted and drained; `slow`
/// of them above the monitor's threshold and `stalls` stall episodes (None: not counted).
fn counts(sent: u64, recv: u64, slow: Option<u64>, stalls: Option<u64>) -> WqeCounts {
    WqeCounts {
        num_wqe_sent: sent,
        num_recv_wqe: recv,
        num_wqe_rcvd: sent + recv,
        num_wqe_completed: sent,
        num_wqe_sampled: None,
        num_cts_sent: 0,
        num_cts_sent_signalled: 0,
        num_cts_sent_unsignalled: 0,
        num_slot_miss: 0,
        num_write_wqe: 0,
        num_write_imm_wqe: 0,
        num_wqe_slow: slow,
        num_stalls: stalls,
    }
}

fn qp(
    slot: u64,
    qpn: Option<u32>,
    q: &Qp,
    dev_gid: Option<[u8; 16]>,
    (stall_on, slow_on): (bool, bool),
    end: i128,
) -> Built {
    let figs = completions(q);
    let send = is_send(q);
    let (sent, recv) = match figs {
        Some((n, _)) if send => (n, 0),
        Some((n, _)) => (0, n),
        None => (0, 0),
    };
    let lat = match figs {
        Some((n, f)) if send => rebuild(n, &f, INTERVAL_NS, BUCKETS),
        _ => rebuild(0, &Default::default(), INTERVAL_NS, BUCKETS),
    };
    let Rebuilt {
        log,
        linear,
        min,
        max,
    } = lat;
    let peer = q.remote_qpn.map(|n| QpPeerReport {
        qp_num: n,
        gid: q.remote_gid.map(GidText),
        gid_ip: q.remote_gid.as_ref().and_then(gid_ip),
        lid: q.remote_lid.filter(|l| *l > 0),
    });
    let peer_key = peer
        .as_ref()
        .map(|_| (q.remote_gid, q.remote_lid.filter(|l| *l > 0)));
    let mut by: Vec<(String, u64)> = q
        .errors
        .iter()
        .map(|(s, n)| (status_name(*s), *n))
        .collect();
    by.sort_by(|a, b| order_key(&a.0).cmp(&order_key(&b.0)));
    let first = q
        .first_error
        .map(|(s, vendor, opcode, t)| FirstErrorReport {
            status: status_name(s),
            status_code: s,
            vendor_err: vendor,
            time: ts(t.unwrap_or(end)),
            opcode,
            bytes: None,
            age_ms: None,
        });
    let stall = stall_on.then(|| QpStallReport {
        num_wqe_outstanding: q.stalled.map_or(0, |s| s.1),
        oldest_outstanding_ms: None,
        stalled: q.stalled.is_some(),
        stalled_since: q.stalled.map(|s| ts(s.0.unwrap_or(end))),
        longest_stall_ms: q.longest_stall.map_or(0, |l| l.0 / 1_000_000),
        longest_stall_start: q.longest_stall.map(|l| ts(l.1.unwrap_or(end))),
    });
    let measured = figs.filter(|_| send).map(|f| f.1);
    let ns = |v: f64| v.round() as u64;
    // Completions above the threshold: the summary's `slow=`, else the slow lines seen (a lower
    // bound: the monitor prints at most one a second per QP); counted when the file has a
    // threshold.
    let slow = slow_on.then(|| q.summary.map_or(q.slow_lines, |s| s.1));
    let stalls = stall_on.then_some(q.stalls);
    let monitor = QpMonitorReport {
        wqe_completion_ns_mean: measured.map(|f| f.mean),
        wqe_completion_ns_stddev: measured.map(|f| f.stddev),
        wqe_completion_ns_p50: measured.map(|f| ns(f.p50)),
        wqe_completion_ns_p90: measured.map(|f| ns(f.p90)),
        wqe_completion_ns_p99: measured.map(|f| ns(f.p99)),
        wqe_completion_ns_p999: measured.map(|f| ns(f.p999)),
        local_lid: q.lid.filter(|l| *l > 0),
        port: q.port,
    };
    let errors = !q.errors.is_empty();
    Built {
        qp: QpReport {
            id: slot,
            role: None,
            counts: counts(sent, recv, slow, stalls),
            latency: CompletionLatency {
                wqe_completion_ns_min: min,
                wqe_completion_ns_max: max,
                wqe_completion_histogram: linear,
            },
            verbs: None,
            identity: Some(QpIdentity {
                qp_num: qpn,
                local_gid: q.local_gid.filter(|g| Some(*g) != dev_gid).map(GidText),
                peer,
                qp_type: None,
            }),
            stall,
            errors: Some(QpErrorReport {
                cq_errors: StatusCounts(by),
                first_cq_error: first,
                qp_state: errors.then_some("ERR"),
                last_post_time: None,
                last_completion_time: None,
            }),
            monitor: Some(monitor),
            attrs: None,
        },
        log,
        peer: peer_key,
    }
}

fn add_log(into: &mut LogSum, log: &[(u64, u64, u64)]) {
    for &(lo, hi, c) in log {
        into.entry(lo).or_insert((hi, 0)).1 += c;
    }
}

fn log_buckets(m: &LogSum) -> LogBuckets {
    LogBuckets(m.iter().map(|(lo, (hi, c))| (*lo, Some(*hi), *c)).collect())
}

fn unavailable() -> HwCounters {
    let mut v: Vec<(&'static str, HwValue)> = vocab::names_of(Kind::Scalar)
        .map(|k| (k, HwValue::Scalar(-1)))
        .collect();
    v.extend(vocab::names_of(Kind::PerPrio).map(|k| (k, HwValue::PerPrio([-1; 8]))));
    HwCounters(v)
}

/// The devices of the rank: (id, name, port).
fn devices(r: &Rank) -> Vec<(u32, String, Option<u8>)> {
    let mut v: Vec<(u32, String, Option<u8>)> = r
        .nics
        .iter()
        .map(|(i, n, p, _)| (*i, n.clone(), Some(*p)))
        .collect();
    for (dev, _) in r.qps.keys() {
        if !v.iter().any(|d| &d.1 == dev) {
            let id = v.iter().map(|d| d.0 + 1).max().unwrap_or(0);
            v.push((id, dev.clone(), None));
        }
    }
    v
}

fn device(
    r: &Rank,
    id: u32,
    name: &str,
    port: Option<u8>,
    (stall_on, slow_on): (bool, bool),
    end: i128,
) -> DeviceReport<Vec<ChannelReport<Vec<Q>>>> {
    let dev_gid = r
        .gid_dev
        .iter()
        .filter(|(_, d)| d.as_str() == name)
        .map(|(g, _)| *g)
        .min();
    let mut qps = Vec::new();
    let mut chan_log = BTreeMap::new();
    let mut peers: BTreeMap<PeerKey, (u64, LogSum)> = BTreeMap::new();
    let mut lid = None;
    for ((dev, qpn), q) in r.qps.range((name.to_owned(), None)..) {
        if dev != name {
            break;
        }
        lid = lid.or(q.lid.filter(|l| *l > 0));
        let b = qp(qps.len() as u64, *qpn, q, dev_gid, (stall_on, slow_on), end);
        add_log(&mut chan_log, &b.log);
        if let Some(k) = b.peer {
            let e = peers.entry(k).or_default();
            e.0 += 1;
            add_log(&mut e.1, &b.log);
        }
        qps.push(b.qp);
    }
    let sum = |f: fn(&Q) -> u64| qps.iter().map(f).sum::<u64>();
    let opt_sum = |f: fn(&Q) -> Option<u64>| qps.iter().map(f).sum::<Option<u64>>();
    let c = counts(
        sum(|q| q.counts.num_wqe_sent),
        sum(|q| q.counts.num_recv_wqe),
        slow_on.then(|| opt_sum(|q| q.counts.num_wqe_slow).unwrap_or(0)),
        stall_on.then(|| opt_sum(|q| q.counts.num_stalls).unwrap_or(0)),
    );
    let (dev_slow, dev_stalls) = (c.num_wqe_slow, c.num_stalls);
    let mut linear = vec![0u64; BUCKETS];
    for q in &qps {
        for (a, b) in linear.iter_mut().zip(&q.latency.wqe_completion_histogram) {
            *a += b;
        }
    }
    let mins = qps
        .iter()
        .map(|q| q.latency.wqe_completion_ns_min)
        .filter(|m| *m >= 0);
    let min = mins.min().unwrap_or(-1);
    let max = qps
        .iter()
        .map(|q| q.latency.wqe_completion_ns_max)
        .max()
        .unwrap_or(-1);
    let mut by: BTreeMap<i32, u64> = BTreeMap::new();
    for ((dev, _), q) in &r.qps {
        if dev == name {
            for (s, n) in &q.errors {
                *by.entry(*s).or_default() += n;
            }
        }
    }
    let num_cq_errors = by.values().sum();
    let mut by: Vec<(String, u64)> = by.into_iter().map(|(s, n)| (status_name(s), n)).collect();
    by.sort_by(|a, b| order_key(&a.0).cmp(&order_key(&b.0)));
    let active = c.num_wqe_sent + c.num_recv_wqe > 0;
    let stalled = qps
        .iter()
        .filter(|q| q.stall.as_ref().is_some_and(|s| s.stalled))
        .count() as u64;
    let outstanding = qps
        .iter()
        .filter_map(|q| q.stall.as_ref().map(|s| s.num_wqe_outstanding))
        .sum();
    let channels = if qps.is_empty() {
        Vec::new()
    } else {
        vec![ChannelReport {
            id: None,
            counts: c,
            num_req_completed: 0,
            num_data_qp: 0,
            num_cts_qp: 0,
            num_qp_untracked: 0,
            latency: CompletionLatency {
                wqe_completion_ns_min: min,
                wqe_completion_ns_max: max,
                wqe_completion_histogram: linear,
            },
            queue_pairs: qps,
            wqe_completion_log_histogram: Some(log_buckets(&chan_log)),
            verbs: None,
            comm: None,
        }]
    };
    DeviceReport {
        device_id: id,
        roce_device: name.to_owned(),
        eth_device: String::new(),
        hw_type: hw_type(name),
        tx_bytes: 0,
        rx_bytes: 0,
        num_cq_errors,
        cq_poll_count: 0,
        num_channels: None,
        active_channels: u64::from(active),
        num_qp_untracked: 0,
        num_wqe_slow: dev_slow,
        num_stalls: dev_stalls,
        wqe_size_stats: Vec::new(),
        channels,
        hw_counters: unavailable(),
        wqe_completion_log_histogram: Some(log_buckets(&chan_log)),
        verbs: None,
        port,
        gid_index: None,
        gid: dev_gid.map(GidText),
        gid_ip: dev_gid.as_ref().and_then(gid_ip),
        lid,
        peers: peers
            .into_iter()
            .map(|((g, l), (n, h))| PeerReport {
                gid: g.map(GidText),
                gid_ip: g.as_ref().and_then(gid_ip),
                lid: l,
                num_qps: n,
                num_qps_shared: None,
                wqe_completion_log_histogram: Some(log_buckets(&h)),
            })
            .collect(),
        stall: stall_on.then_some(DeviceStallReport {
            num_wqe_outstanding: outstanding,
            num_qps_stalled: stalled,
        }),
        cq_errors_by_status: StatusCounts(by),
        finalized_comms: Vec::new(),
        port_qos: Default::default(),
    }
}

/// The driver family a device's name says (mlx5_N, bnxt_reN, ionic_N, rxeN).
fn hw_type(name: &str) -> &'static str {
    if name.starts_with("mlx5") {
        "mlx5"
    } else if name.starts_with("bnxt_re") {
        "thor2"
    } else if name.starts_with("ionic") {
        "ainic"
    } else if name.starts_with("rxe") {
        "rxe"
    } else {
        "unsupported"
    }
}

fn file(r: &Rank) -> File {
    let start = r.first_ns.or(r.mtime_ns).unwrap_or(0);
    let end = r.last_ns.or(r.mtime_ns).unwrap_or(start).max(start);
    let stall_on = r.stall_thr.is_some();
    // The monitor's one threshold is both its slow line's and its stall line's.
    let threshold = r.slow_thr.or(r.stall_thr).unwrap_or(0);
    let slow_on = threshold > 0;
    let devices = devices(r)
        .into_iter()
        .filter(|(_, n, _)| n != UNKNOWN_DEV || r.qps.keys().any(|k| k.0 == UNKNOWN_DEV))
        .map(|(id, n, p)| device(r, id, &n, p, (stall_on, slow_on), end))
        .collect();
    // The world's rank: the rank in the largest communicator.
    let rank = r
        .comms
        .iter()
        .max_by_key(|c| c.nranks)
        .map(|c| u64::from(c.rank));
    let communicators = r
        .comms
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let hash = c.id?;
            Some(CommunicatorReport {
                comm: CommRef::new(i as u64 + 1, hash, c.rank as i32, c.nranks as i32),
                init_time: ts(c.time.unwrap_or(start)),
                finalize_time: None,
            })
        })
        .collect();
    FileReport {
        version: FORMAT_VERSION,
        host_name: r.host.clone(),
        process_name: "unknown".into(),
        process_id: r.pid.max(1),
        start_time: ts(start),
        end_time: ts(end),
        is_final: true,
        trigger: "import".into(),
        transport: Some(if r.ib_cast { "IB-CAST" } else { "IB" }.into()),
        histogram_interval_ns: INTERVAL_NS,
        latency_sample_interval: None,
        devices,
        hw_samples: None,
        hw_samples_dropped: None,
        stall_ms: r.stall_thr.map_or(0, |t| (t / 1_000_000).max(1)),
        rank,
        communicators,
        slow_threshold_ns: threshold,
        source: Some("nccl_log"),
    }
}
