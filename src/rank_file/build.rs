//! The snapshot: every slot of the registry read into the file's model (channel totals,
//! per-peer sums, the stall keys, the QPs' identities, the communicators and the finalized
//! ones' records). Separate from the model so that what the file says and how it is gathered
//! from the live slots read apart.

use std::sync::atomic::Ordering::Relaxed;

use crate::comms::{self, DevRecord};
use crate::counters::{
    size_bucket_max, ExtSnapshot, QpSnapshot, ROLE_CTS, ROLE_DATA, ROLE_UNKNOWN,
};
use crate::hw::{HwReport, HwSamples};
use crate::loghist::LOG_BUCKETS;
use crate::peers;
use crate::registry::comm::CommIdent;
use crate::registry::{self, Device, OWNER_DEFAULT};

use super::*;

fn gid_keys(g: Option<[u8; 16]>) -> (Option<GidText>, Option<GidIp>) {
    let g = peers::nonzero(g);
    (
        g.map(GidText),
        g.as_ref().and_then(peers::gid_addr).map(GidIp),
    )
}

fn lid_key(l: u16) -> Option<u16> {
    (l != 0).then_some(l)
}

fn qp_identity(q: Option<peers::QpInfo>, dev_gid: Option<[u8; 16]>, verbs: bool) -> QpIdentity {
    let q = q.unwrap_or_default();
    let ud = q.qp_type == Some("ud");
    QpIdentity {
        qp_num: q.qp_num,
        local_gid: q.local_gid.filter(|g| Some(*g) != dev_gid).map(GidText),
        peer: q.peer.filter(|_| !ud).map(|r| {
            let (gid, gid_ip) = gid_keys(r.gid);
            QpPeerReport {
                qp_num: r.qp_num,
                gid,
                gid_ip,
                lid: lid_key(r.lid),
            }
        }),
        qp_type: if verbs { q.qp_type } else { None },
    }
}

fn role_name(r: u8) -> Option<&'static str> {
    match r {
        ROLE_DATA => Some("data"),
        ROLE_CTS => Some("cts"),
        _ => None,
    }
}

fn qp_report(id: u64, role: u8, s: &QpSnapshot, buckets: usize, sampled: bool) -> QpReport {
    QpReport {
        id,
        role: role_name(role),
        num_wqe_sent: s.wqe_sent,
        num_recv_wqe: s.recv_wqe,
        num_wqe_rcvd: s.wqe_rcvd,
        num_wqe_completed: s.wqe_completed,
        num_wqe_sampled: sampled.then(|| s.sampled()),
        num_cts_sent: s.cts_sent(),
        num_cts_sent_signalled: s.cts_signalled,
        num_cts_sent_unsignalled: s.cts_unsignalled,
        num_slot_miss: s.slot_miss,
        num_write_wqe: s.write_wqe,
        num_write_imm_wqe: s.write_imm_wqe,
        wqe_completion_ns_min: s.lat_min,
        wqe_completion_ns_max: s.lat_max,
        wqe_completion_histogram: s.hist[..buckets].to_vec(),
        verbs: None,
        identity: None,
        stall: None,
        errors: None,
    }
}

fn comm_ref(c: &CommIdent) -> CommRef {
    CommRef::new(c.id, c.hash, c.rank, c.nranks)
}

fn peer_report(
    key: peers::PeerKey,
    lid: u16,
    num_qps: u64,
    shared: u64,
    hist: Option<LogBuckets>,
) -> PeerReport {
    let g = if let peers::PeerKey::Gid(g) = key {
        Some(g)
    } else {
        None
    };
    let (gid, gid_ip) = gid_keys(g);
    PeerReport {
        gid,
        gid_ip,
        lid: lid_key(lid),
        num_qps,
        num_qps_shared: (shared > 0).then_some(shared),
        wqe_completion_log_histogram: hist,
    }
}

fn first_error_report(f: &crate::cq_errors::FirstError) -> FirstErrorReport {
    FirstErrorReport {
        status: crate::cq_errors::status_name(f.status),
        status_code: f.status,
        vendor_err: f.vendor_err,
        time: rfc3339(f.wall_ns),
        opcode: f.opcode,
        bytes: f.bytes,
        age_ms: f.age_ms,
    }
}

/// A finalized communicator's record on a device, as the file shows it.
fn finalized_report(
    comm: Option<&CommIdent>,
    r: &DevRecord,
    buckets: usize,
    sampled: bool,
) -> FinalizedCommReport {
    let t = qp_report(0, ROLE_UNKNOWN, &r.totals, buckets, sampled);
    FinalizedCommReport {
        comm: comm.map(comm_ref),
        num_comms: r.num_comms,
        num_channels: r.num_channels,
        num_qps: r.num_qps,
        num_wqe_sent: t.num_wqe_sent,
        num_recv_wqe: t.num_recv_wqe,
        num_wqe_rcvd: t.num_wqe_rcvd,
        num_wqe_completed: t.num_wqe_completed,
        num_wqe_sampled: t.num_wqe_sampled,
        num_cts_sent: t.num_cts_sent,
        num_cts_sent_signalled: t.num_cts_sent_signalled,
        num_cts_sent_unsignalled: t.num_cts_sent_unsignalled,
        num_slot_miss: t.num_slot_miss,
        num_write_wqe: t.num_write_wqe,
        num_write_imm_wqe: t.num_write_imm_wqe,
        num_req_completed: r.req_completed,
        num_data_qp: r.data_qps,
        num_cts_qp: r.cts_qps,
        num_qp_untracked: r.untracked,
        wqe_completion_ns_min: t.wqe_completion_ns_min,
        wqe_completion_ns_max: t.wqe_completion_ns_max,
        wqe_completion_histogram: t.wqe_completion_histogram,
        wqe_completion_log_histogram: r.log.as_ref().map(|l| log_buckets(&l.counts())),
        verbs: r.ext.as_ref().map(Into::into),
        peers: r
            .peers
            .iter()
            .map(|p| {
                let h = p.hist.as_ref().map(|h| log_buckets(&h.counts()));
                peer_report(p.key, p.lid, p.num_qps, p.num_qps_shared, h)
            })
            .collect(),
        cq_errors: status_counts(&r.cq_errors),
        first_cq_error: r.first_cq_error.as_ref().map(first_error_report),
        stall: r.stall.map(|s| FinalizedStallReport {
            num_wqe_outstanding: s.outstanding,
            num_qps_stalled: s.stalled,
            longest_stall_ms: s.longest_ns / 1_000_000,
            longest_stall_start: s.longest_start_wall.map(rfc3339),
        }),
    }
}

/// Builds one device's report from its slots (channel totals are derived here) and its
/// finalized communicators' records.
pub fn device_report(d: &Device, id: &Identity, hw: HwReport) -> DeviceReport {
    let _view = registry::read_view();
    let comms: Vec<CommIdent> = registry::comm::live().iter().map(|c| c.ident).collect();
    let buckets = id.histogram_buckets.clamp(1, 16) as usize;
    let sampled = id.latency_sample > 1;
    let unknown = d.channels_unknown.load(Relaxed);
    let verbs = registry::verbs_keys();
    let mut channels = Vec::new();
    let mut active = 0;
    let mut untracked = d.untracked_no_channel.load(Relaxed);
    let mut dev_log = [0u64; LOG_BUCKETS];
    let stall_view = crate::stall_detector::device_view(d.id);
    let local = peers::dev_local(d.id);
    let mut dev_peers = peers::DevPeers::new(id.log_histogram);
    let errors = crate::cq_errors::all();
    for c in d.channels() {
        let told = c.peers.by_slot();
        let mut total = QpSnapshot::default();
        let mut ext_total = ExtSnapshot::default();
        let (mut data, mut cts) = (0, 0);
        let mut qps = Vec::with_capacity(c.slots.reserved() as usize);
        for (i, slot) in c.slots.iter() {
            let s = slot.snapshot();
            let role = c.slots.role(i);
            total.accumulate(&s);
            data += u64::from(role == ROLE_DATA);
            cts += u64::from(role == ROLE_CTS);
            let mut r = qp_report(i, role, &s, buckets, sampled);
            if verbs {
                let e = c.slots.ext(i).map(|e| e.snapshot()).unwrap_or_default();
                ext_total.accumulate(&e);
                r.verbs = Some((&e).into());
            }
            r.identity = Some(qp_identity(
                told.get(i as usize).copied().flatten(),
                local.gid,
                verbs,
            ));
            let st = stall_view.as_ref().map(|v| {
                let st = v.state.channel(c).get(i as usize).copied();
                (st.unwrap_or_default(), v)
            });
            if let Some((st, v)) = &st {
                r.stall = Some(qp_stall_report(st, v, verbs));
            }
            r.errors = Some(qp_error_report(
                errors.get(&(slot as *const crate::counters::RcclQpStats as usize)),
                st.as_ref().map(|(s, v)| (s, *v)),
            ));
            qps.push(r);
        }
        let req = c.stats.req_completed.load(Relaxed);
        active += u64::from(total.active() || req > 0);
        let ch_untracked = c.untracked.load(Relaxed);
        untracked += ch_untracked;
        let t = qp_report(0, ROLE_UNKNOWN, &total, buckets, sampled);
        let log = dev_peers.add_channel(c);
        for (a, b) in dev_log.iter_mut().zip(log.iter().flatten()) {
            *a = a.wrapping_add(*b);
        }
        let owner = c.owner();
        channels.push(ChannelReport {
            id: (!unknown).then_some(c.id()),
            num_wqe_sent: t.num_wqe_sent,
            num_recv_wqe: t.num_recv_wqe,
            num_wqe_rcvd: t.num_wqe_rcvd,
            num_wqe_completed: t.num_wqe_completed,
            num_wqe_sampled: t.num_wqe_sampled,
            num_cts_sent: t.num_cts_sent,
            num_cts_sent_signalled: t.num_cts_sent_signalled,
            num_cts_sent_unsignalled: t.num_cts_sent_unsignalled,
            num_slot_miss: t.num_slot_miss,
            num_write_wqe: t.num_write_wqe,
            num_write_imm_wqe: t.num_write_imm_wqe,
            num_req_completed: req,
            num_data_qp: data,
            num_cts_qp: cts,
            num_qp_untracked: ch_untracked,
            wqe_completion_ns_min: t.wqe_completion_ns_min,
            wqe_completion_ns_max: t.wqe_completion_ns_max,
            wqe_completion_histogram: t.wqe_completion_histogram,
            queue_pairs: qps,
            wqe_completion_log_histogram: log.as_ref().map(log_buckets),
            verbs: verbs.then(|| (&ext_total).into()),
            comm: (owner != OWNER_DEFAULT)
                .then(|| comms.iter().find(|x| x.id == owner).map(comm_ref))
                .flatten(),
        });
    }
    // The finalized communicators: their records, and their share of the device's totals.
    let finalized: Vec<FinalizedCommReport> = comms::device_records(d.id)
        .iter()
        .map(|(comm, r)| {
            untracked += r.untracked;
            if let Some(l) = &r.log {
                l.add_to(&mut dev_log);
            }
            finalized_report(comm.as_ref(), r, buckets, sampled)
        })
        .collect();
    let totals = registry::dev_totals(d);
    let (gid, gid_ip) = gid_keys(local.gid);
    let peer_list = dev_peers
        .finish()
        .into_iter()
        .map(|p| {
            let h = p.hist.as_ref().map(log_buckets);
            peer_report(p.key, p.lid, p.num_qps, p.num_qps_shared, h)
        })
        .collect();
    DeviceReport {
        device_id: d.id,
        roce_device: d.roce_device.clone(),
        eth_device: d.hw.eth_device().to_owned(),
        hw_type: d.hw.hw_type(),
        tx_bytes: totals.tx_bytes,
        rx_bytes: totals.rx_bytes,
        num_cq_errors: totals.cq_errors,
        cq_poll_count: totals.cq_polls,
        num_channels: (!unknown).then_some(channels.len() as u64),
        active_channels: active,
        num_qp_untracked: untracked,
        wqe_size_stats: totals
            .sizes
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(b, &n)| SizeStat {
                max_wqe_size: size_bucket_max(b),
                num_wqe: n,
            })
            .collect(),
        channels,
        hw_counters: HwCounters(hw),
        wqe_completion_log_histogram: id.log_histogram.then(|| log_buckets(&dev_log)),
        verbs: verbs.then(|| DeviceVerbsReport {
            num_srq_recv_wqe: d.verbs.srq_recv_wqe.load(Relaxed),
            num_wc_unknown_qp: d.verbs.wc_unknown_qp.load(Relaxed),
        }),
        port: local.port,
        gid_index: local.gid_index,
        gid,
        gid_ip,
        lid: lid_key(local.lid),
        peers: peer_list,
        stall: stall_view.map(|v| DeviceStallReport {
            num_wqe_outstanding: v.state.outstanding,
            num_qps_stalled: v.state.stalled,
        }),
        cq_errors_by_status: status_counts(&crate::cq_errors::device(d.id)),
        finalized_comms: finalized,
    }
}

/// Builds the whole file from the registry.
pub fn build(
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> FileReport {
    // One view of the channels for the whole file: a communicator finalized meanwhile is in
    // its channels or in its record, never in both or neither.
    let _view = registry::read_view();
    // The stall keys as of now, not of the last tick.
    crate::stall_detector::tick();
    let devices: Vec<DeviceReport> = registry::devices()
        .map(|d| device_report(d, id, d.hw.final_report()))
        .collect();
    let transport = registry::devices()
        .map(|d| d.transport.clone())
        .find(|t| !t.is_empty());
    let (hw_samples, hw_samples_dropped) = match samples {
        Some(s) => (
            Some(
                s.samples
                    .into_iter()
                    .map(|x| SampleReport {
                        device_id: x.device_id,
                        timestamp_ns: x.timestamp_ns,
                        counters: SampleCounters(x.counters),
                    })
                    .collect(),
            ),
            Some(s.dropped),
        ),
        None => (None, None),
    };
    FileReport {
        version: FORMAT_VERSION,
        host_name: id.host_name.clone(),
        process_name: id.process_name.clone(),
        process_id: std::process::id(),
        start_time: rfc3339(id.start_wall_ns),
        end_time: rfc3339(end_wall_ns),
        is_final,
        trigger: trigger.to_owned(),
        transport,
        histogram_interval_ns: id.histogram_interval_ns,
        latency_sample_interval: (id.latency_sample > 1).then_some(id.latency_sample),
        devices,
        hw_samples,
        hw_samples_dropped,
        stall_ms: crate::stall_detector::stall_ms(),
        rank: id.rank.as_deref().and_then(|r| r.parse().ok()),
        communicators: comms::communicators()
            .iter()
            .map(|l| CommunicatorReport {
                comm: comm_ref(&l.ident),
                init_time: rfc3339(l.init_wall_ns),
                finalize_time: l.finalize_wall_ns.map(rfc3339),
            })
            .collect(),
    }
}
