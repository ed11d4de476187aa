//! `generate --finalized`: the same run as RCCL leaves it when every rank destroys its
//! communicator before exit (ncclCommDestroy; PyTorch's destroy_process_group): each file's
//! channels are folded into one finalized communicator's record per device, as the library's
//! rcclTelemetryCommFinalize folds them (format version 4). The record keeps every counter
//! summed, its peers with the sums of the QPs towards each, and the rows of its QPs that had
//! error completions or stalled (the first [`KEPT_QPS`]); the device lists no channel.

use super::counters_from_qps;
use crate::model::{
    add_log_hist, CommRef, Communicator, Counters, Device, DevicePeer, FinalizedComm,
    FinalizedPeer, FinalizedQp, QueuePair, SourceFormat, TelemetryFile,
};
use std::collections::BTreeMap;
use std::path::Path;

/// The rows of errored or stalled QPs a record keeps (the library's `MAX_KEPT_QPS`).
pub const KEPT_QPS: usize = 8;

/// Rewrites every rank file of `dir` (a run `generate` wrote) as if its communicator had been
/// finalized before the file was written. Ranks in the communicator: the files in name order.
pub fn finalize_dir(dir: &Path) -> Result<(), String> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rccl_telemetry_") && n.ends_with(".json"))
        })
        .collect();
    paths.sort();
    let n = paths.len();
    for (rank, path) in paths.iter().enumerate() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut f: TelemetryFile = serde_json::from_str(&text)
            .map_err(|e| format!("cannot parse {}: {e}", path.display()))?;
        finalize(&mut f, rank, n);
        let text = serde_json::to_string(&f).map_err(|e| format!("cannot serialise: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Folds the file's channels into one finalized communicator (id 1, rank `rank` of `nranks`).
pub fn finalize(f: &mut TelemetryFile, rank: usize, nranks: usize) {
    let comm = CommRef {
        id: 1,
        hash: "0x5eed0001".into(),
        rank: rank as i64,
        nranks: nranks.max(1) as i64,
    };
    f.version = 4;
    f.format = SourceFormat::V4;
    f.rank = Some(rank as u64);
    f.communicators = Some(vec![Communicator {
        comm: comm.clone(),
        init_time: f.start_time.clone(),
        finalize_time: Some(f.end_time.clone()),
    }]);
    let sampled = f.latency_sample_interval.is_some();
    for d in &mut f.devices {
        d.cq_errors_by_status.get_or_insert_with(BTreeMap::new);
        if d.channels.is_empty() {
            continue;
        }
        let rec = record(d, comm.clone(), sampled);
        d.channels.clear();
        d.num_channels = d.num_channels.map(|_| 0);
        d.active_channels = 0;
        d.peers = d.peers.as_ref().map(|_| Vec::new());
        d.num_wqe_outstanding = d.num_wqe_outstanding.map(|_| 0);
        d.num_qps_stalled = d.num_qps_stalled.map(|_| 0);
        d.finalized_comms.push(rec);
    }
}

fn errored(q: &QueuePair) -> bool {
    q.cq_error_total() > 0 || q.first_cq_error.is_some()
}

fn stalled(q: &QueuePair) -> bool {
    q.stalled == Some(true) || q.longest_stall_ms.is_some_and(|l| l > 0)
}

/// The stall keys of some QPs, as a record sums them (None without stall keys).
type StallSums = (Option<u64>, Option<u64>, Option<u64>, Option<String>);

fn stall_sums<'a>(qps: impl Iterator<Item = &'a QueuePair>) -> StallSums {
    let (mut out, mut st, mut longest, mut start) = (None::<u64>, None::<u64>, None, None);
    for q in qps {
        if let Some(o) = q.num_wqe_outstanding {
            *out.get_or_insert(0) += o;
        }
        if let Some(s) = q.stalled {
            *st.get_or_insert(0) += u64::from(s);
        }
        if let Some(l) = q.longest_stall_ms {
            if longest.is_none_or(|m| l > m) {
                longest = Some(l);
                start = q.longest_stall_start.as_deref().map(String::from);
            }
        }
    }
    (out, st, longest, start)
}

fn record(d: &Device, comm: CommRef, sampled: bool) -> FinalizedComm {
    let qps: Vec<QueuePair> = d
        .channels
        .iter()
        .flat_map(|c| c.queue_pairs.iter().cloned())
        .collect();
    let mut log = None;
    for h in d
        .channels
        .iter()
        .filter_map(|c| c.wqe_completion_log_histogram.as_deref())
    {
        add_log_hist(log.get_or_insert_with(Vec::new), h);
    }
    let sum = |f: fn(&crate::model::Channel) -> u64| d.channels.iter().map(f).sum::<u64>();
    let (out, st, longest, start) = stall_sums(qps.iter());
    let mut kept = Vec::new();
    let mut unlisted = 0;
    for c in &d.channels {
        for q in c.queue_pairs.iter().filter(|q| errored(q) || stalled(q)) {
            if kept.len() < KEPT_QPS {
                kept.push(FinalizedQp {
                    channel: c.id,
                    qp: q.clone(),
                });
            } else {
                unlisted += 1;
            }
        }
    }
    FinalizedComm {
        comm: Some(comm),
        num_comms: 1,
        num_channels: d.channels.len() as u64,
        num_qps: qps.len() as u64,
        counters: totals(&d.channels, sampled),
        num_req_completed: sum(|c| c.num_req_completed),
        num_data_qp: sum(|c| c.num_data_qp),
        num_cts_qp: sum(|c| c.num_cts_qp),
        num_qp_untracked: sum(|c| c.num_qp_untracked),
        wqe_completion_log_histogram: log,
        peers: d
            .peers
            .iter()
            .flatten()
            .map(|p| peer(p, &qps, sampled))
            .collect(),
        cq_errors: Some(BTreeMap::new()),
        first_cq_error: None,
        num_wqe_outstanding: out,
        num_qps_stalled: st,
        longest_stall_ms: longest,
        longest_stall_start: start,
        queue_pairs: kept,
        num_qps_unlisted: Some(unlisted),
    }
}

/// The channels' counters summed, as a record holds them.
fn totals(channels: &[crate::model::Channel], sampled: bool) -> Counters {
    let qps: Vec<QueuePair> = channels
        .iter()
        .map(|c| QueuePair {
            counters: c.counters.clone(),
            ..Default::default()
        })
        .collect();
    counters_from_qps(&qps, sampled)
}

/// A peer of the device with the sums of its QPs towards it.
fn peer(p: &DevicePeer, qps: &[QueuePair], sampled: bool) -> FinalizedPeer {
    let towards: Vec<QueuePair> = qps
        .iter()
        .filter(|q| {
            q.peer
                .as_ref()
                .is_some_and(|r| (&r.gid, r.lid) == (&p.gid, p.lid))
        })
        .cloned()
        .collect();
    let (out, st, longest, start) = stall_sums(towards.iter());
    FinalizedPeer {
        peer: p.clone(),
        counters: Some(counters_from_qps(&towards, sampled)),
        num_wqe_outstanding: out,
        num_qps_stalled: st,
        longest_stall_ms: longest,
        longest_stall_start: start,
    }
}
