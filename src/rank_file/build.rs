//! The snapshot: every slot of the registry read into the file's model (channel totals,
//! per-peer sums, the stall keys, the QPs' identities, the communicators and the finalized
//! ones' records). Separate from the model so that what the file says and how it is gathered
//! from the live slots read apart.
//!
//! A device is gathered in two steps, so that the file can be written as it is read
//! (`stream`) as well as built whole (`build`, `device_report`): [`device_plan`] reads what
//! the device's keys need from each channel (untracked QPs, requests, log-scale histograms,
//! peers, whether it is active), then each channel is read once, slot by slot
//! ([`ChannelRead`]), and its totals and rows come from that one read. What either way holds
//! at once is one device's channel list (and its finalized communicators' records) and one
//! channel's slot reads, never the whole file. Whoever reads holds `registry::read_view` for
//! the whole file, so a communicator finalized meanwhile is in its channels or in its record,
//! never in both or neither.

use std::collections::TryReserveError;
use std::sync::atomic::Ordering::Relaxed;

use crate::comms::{self, DevRecord};
use crate::counters::{
    size_bucket_max, ExtSnapshot, QpSnapshot, RcclQpStats, ROLE_CTS, ROLE_DATA, ROLE_UNKNOWN,
};
use crate::hw::HwReport;
use crate::loghist::LOG_BUCKETS;
use crate::peers;
use crate::registry::comm::CommIdent;
use crate::registry::{self, Channel, Device, OWNER_DEFAULT};
use crate::sampler::HwSamples;
use crate::stall_detector::{DevView, QpState};

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

fn qp_peer_report(r: peers::Remote) -> QpPeerReport {
    let (gid, gid_ip) = gid_keys(r.gid);
    QpPeerReport {
        qp_num: r.qp_num,
        gid,
        gid_ip,
        lid: lid_key(r.lid),
    }
}

fn qp_identity(q: Option<peers::QpInfo>, dev_gid: Option<[u8; 16]>, verbs: bool) -> QpIdentity {
    let q = q.unwrap_or_default();
    let ud = q.qp_type == Some("ud");
    QpIdentity {
        qp_num: q.qp_num,
        local_gid: q.local_gid.filter(|g| Some(*g) != dev_gid).map(GidText),
        peer: q.peer.filter(|_| !ud).map(qp_peer_report),
        qp_type: if verbs { q.qp_type } else { None },
    }
}

fn role_name(r: u8) -> Option<&'static str> {
    match r {
        ROLE_DATA => Some(ROLES[0]),
        ROLE_CTS => Some(ROLES[1]),
        _ => None,
    }
}

/// Which of the counters a row carries besides those every row has.
#[derive(Clone, Copy)]
struct RowKeys {
    buckets: usize,
    /// num_wqe_sampled (1-in-N sampling).
    sampled: bool,
    /// num_wqe_slow (the WQE latency monitor on).
    slow: bool,
    /// num_stalls (stall detection on).
    stalls: bool,
}

fn qp_report(id: u64, role: u8, s: &QpSnapshot, k: RowKeys) -> QpReport {
    let RowKeys {
        buckets, sampled, ..
    } = k;
    QpReport {
        id,
        role: role_name(role),
        counts: WqeCounts {
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
            num_wqe_slow: k.slow.then_some(s.slow),
            num_stalls: k.stalls.then_some(s.stalls),
        },
        latency: CompletionLatency {
            wqe_completion_ns_min: s.lat_min,
            wqe_completion_ns_max: s.lat_max,
            wqe_completion_histogram: s.hist[..buckets].to_vec(),
        },
        verbs: None,
        identity: None,
        stall: None,
        errors: None,
        monitor: None,
        attrs: None,
    }
}

/// A QP's version 5 keys: its local port and LID, and the monitor's statistics (None while
/// the monitor is off for it or it measured nothing).
fn qp_monitor_report(
    info: Option<peers::QpInfo>,
    stats: Option<crate::monitor::Stats>,
) -> QpMonitorReport {
    let info = info.unwrap_or_default();
    let mut m = QpMonitorReport {
        port: info.port,
        local_lid: lid_key(info.local_lid),
        ..QpMonitorReport::default()
    };
    if let Some(s) = stats {
        let [p50, p90, p99, p999] = s.quantiles_ns;
        m.wqe_completion_ns_mean = Some(s.mean_ns);
        m.wqe_completion_ns_stddev = Some(s.stddev_ns);
        m.wqe_completion_ns_p50 = Some(p50);
        m.wqe_completion_ns_p90 = Some(p90);
        m.wqe_completion_ns_p99 = Some(p99);
        m.wqe_completion_ns_p999 = Some(p999);
    }
    m
}

/// The file's "attrs" of a QP's told settings; None when none was told.
fn qp_attrs(a: peers::QpAttrs) -> Option<QpAttrsReport> {
    a.any().then_some(QpAttrsReport {
        traffic_class: a.traffic_class,
        sl: a.sl,
        path_mtu: a.path_mtu,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        min_rnr_timer: a.min_rnr_timer,
        sgid_index: a.sgid_index,
        port: a.port,
        hop_limit: a.hop_limit,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
    })
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

fn finalized_stall(s: &crate::stall_detector::StallFold) -> FinalizedStallReport {
    FinalizedStallReport {
        num_wqe_outstanding: s.outstanding,
        num_qps_stalled: s.stalled,
        longest_stall_ms: s.longest_ns / 1_000_000,
        longest_stall_start: s.longest_start_wall.map(rfc3339),
    }
}

/// A QP a finalized record keeps, as its channel's row was at the finalization.
fn kept_qp_report(q: &comms::KeptQp, rows: &Rows) -> FinalizedQpReport {
    let mut r = qp_report(q.slot, q.role, &q.totals, rows.keys);
    r.verbs = q.ext.as_ref().map(Into::into);
    r.identity = Some(qp_identity(q.info, rows.dev_gid, rows.verbs));
    let at = |t: Option<u64>| t.map(rfc3339);
    r.stall = q.stall.as_ref().map(|s| QpStallReport {
        num_wqe_outstanding: s.outstanding,
        oldest_outstanding_ms: rows.verbs.then_some(None),
        stalled: s.stalled_since.is_some(),
        stalled_since: at(s.stalled_since),
        longest_stall_ms: s.longest_ns / 1_000_000,
        longest_stall_start: at(s.longest_start),
    });
    let mut e = qp_error_report(q.errors.as_ref(), None);
    if let Some(s) = &q.stall {
        e.last_post_time = at(s.last_post);
        e.last_completion_time = at(s.last_completion);
    }
    r.errors = Some(e);
    FinalizedQpReport {
        channel: (!rows.unknown).then_some(q.channel),
        qp: r,
    }
}

/// A finalized communicator's record on a device, as the file shows it.
fn finalized_report(comm: Option<&CommIdent>, r: &DevRecord, rows: &Rows) -> FinalizedCommReport {
    let k = rows.keys;
    let t = qp_report(0, ROLE_UNKNOWN, &r.totals, k);
    FinalizedCommReport {
        comm: comm.map(comm_ref),
        num_comms: r.num_comms,
        num_channels: r.num_channels,
        num_qps: r.num_qps,
        counts: t.counts,
        num_req_completed: r.req_completed,
        num_data_qp: r.data_qps,
        num_cts_qp: r.cts_qps,
        num_qp_untracked: r.untracked,
        latency: t.latency,
        wqe_completion_log_histogram: r.log.as_ref().map(|l| log_buckets(&l.counts())),
        verbs: r.ext.as_ref().map(Into::into),
        peers: r
            .peers
            .iter()
            .map(|p| {
                let h = p.hist.as_ref().map(|h| log_buckets(&h.counts()));
                let sums = qp_report(0, ROLE_UNKNOWN, &p.totals, k);
                FinalizedPeerReport {
                    peer: peer_report(p.key, p.lid, p.num_qps, p.num_qps_shared, h),
                    counts: sums.counts,
                    latency: sums.latency,
                    stall: p.stall.as_ref().map(finalized_stall),
                }
            })
            .collect(),
        cq_errors: status_counts(&r.cq_errors),
        first_cq_error: r
            .first_cq_error
            .as_ref()
            .map(|(f, at)| FinalizedFirstErrorReport {
                error: first_error_report(f),
                channel: (!rows.unknown).then_some(at.channel),
                qp: at.slot,
                qp_num: at.qp_num,
                peer: at.peer.map(qp_peer_report),
            }),
        stall: r.stall.as_ref().map(finalized_stall),
        queue_pairs: r.kept_qps.iter().map(|q| kept_qp_report(q, rows)).collect(),
        num_qps_unlisted: r.qps_unlisted,
    }
}

/// What every QP row of a device is built with besides its own slot.
pub struct Rows {
    keys: RowKeys,
    verbs: bool,
    unknown: bool,
    dev_gid: Option<[u8; 16]>,
    /// The stall detector's clock and device totals (None with detection off).
    stall: Option<DevView>,
    /// The live communicators, to name a channel's.
    comms: Vec<CommIdent>,
}

/// One read of a QP slot: what its row and its channel's totals are both built from.
#[derive(Clone, Copy)]
pub struct SlotRead {
    pub i: u64,
    pub slot: &'static RcclQpStats,
    pub s: QpSnapshot,
    pub e: ExtSnapshot,
    pub role: u8,
}

/// A channel's totals, summed from one read of each of its slots.
#[derive(Default)]
pub struct Totals {
    total: QpSnapshot,
    ext: ExtSnapshot,
    data: u64,
    cts: u64,
    /// Slots summed.
    pub qps: u64,
}

impl Totals {
    fn add(&mut self, r: &SlotRead, verbs: bool) {
        self.qps += 1;
        self.total.accumulate(&r.s);
        self.data += u64::from(r.role == ROLE_DATA);
        self.cts += u64::from(r.role == ROLE_CTS);
        if verbs {
            self.ext.accumulate(&r.e);
        }
    }
}

impl Rows {
    fn new(d: &Device, id: &Identity) -> Rows {
        let stall = crate::stall_detector::device_clock(d.id);
        Rows {
            keys: RowKeys {
                buckets: id.histogram_buckets.clamp(1, 16) as usize,
                sampled: id.latency_sample > 1,
                slow: crate::monitor::slow_ns() > 0,
                stalls: stall.is_some(),
            },
            verbs: registry::verbs_keys(),
            unknown: d.channels_unknown.load(Relaxed),
            dev_gid: peers::dev_local(d.id).gid,
            stall,
            comms: registry::comm::live().iter().map(|c| c.ident).collect(),
        }
    }

    /// One read of slot `i` of `c`.
    pub fn read(&self, c: &Channel, i: u64, slot: &'static RcclQpStats) -> SlotRead {
        let mut s = slot.snapshot();
        if self.keys.stalls {
            s.stalls = crate::stall_detector::qp_state(c, i).map_or(0, |st| st.episodes);
        }
        SlotRead {
            i,
            slot,
            s,
            e: if self.verbs {
                c.slots.ext(i).map(|e| e.snapshot()).unwrap_or_default()
            } else {
                ExtSnapshot::default()
            },
            role: c.slots.role(i),
        }
    }

    /// The stall states of channel `c`'s QPs: a copy of the channel's, or, when that copy
    /// cannot be allocated, a lookup per QP.
    pub fn stall_states(&self, c: &Channel) -> ChannelStall {
        let mut copy = Vec::new();
        let copied =
            self.stall.is_some() && crate::stall_detector::channel_states(c, &mut copy).is_ok();
        ChannelStall { copy, copied }
    }

    /// QP `r`'s row.
    pub fn qp_row(&self, c: &Channel, stall: &ChannelStall, r: &SlotRead) -> QpReport {
        let mut q = qp_report(r.i, r.role, &r.s, self.keys);
        if self.verbs {
            q.verbs = Some((&r.e).into());
        }
        let info = c.peers.qp(r.i);
        q.identity = Some(qp_identity(info, self.dev_gid, self.verbs));
        q.monitor = Some(qp_monitor_report(info, crate::monitor::stats(r.slot)));
        let st = self.stall.as_ref().map(|v| {
            let st = if stall.copied {
                stall.copy.get(r.i as usize).copied()
            } else {
                crate::stall_detector::qp_state(c, r.i)
            };
            (st.unwrap_or_default(), v)
        });
        if let Some((st, v)) = &st {
            q.stall = Some(qp_stall_report(st, v, self.verbs));
        }
        q.errors = Some(qp_error_report(
            crate::cq_errors::of(r.slot).as_ref(),
            st.as_ref().map(|(s, v)| (s, *v)),
        ));
        q.attrs = info.and_then(|t| qp_attrs(t.attrs));
        q
    }

    /// Channel `p`'s keys, from its totals, with `queue_pairs` as given.
    pub fn channel_report<Q>(&self, p: &ChannelPlan, t: &Totals, qps: Q) -> ChannelReport<Q> {
        let c = p.c;
        let tr = qp_report(0, ROLE_UNKNOWN, &t.total, self.keys);
        ChannelReport {
            id: (!self.unknown).then_some(c.id()),
            counts: tr.counts,
            num_req_completed: p.req,
            num_data_qp: t.data,
            num_cts_qp: t.cts,
            num_qp_untracked: p.untracked,
            latency: tr.latency,
            queue_pairs: qps,
            wqe_completion_log_histogram: p.log.first().map(log_buckets),
            verbs: self.verbs.then(|| (&t.ext).into()),
            comm: self.comm_of(c),
        }
    }

    /// The communicator channel `c` belongs to (None: the process-wide calls').
    fn comm_of(&self, c: &Channel) -> Option<CommRef> {
        let owner = c.owner();
        (owner != OWNER_DEFAULT)
            .then(|| self.comms.iter().find(|x| x.id == owner).map(comm_ref))
            .flatten()
    }
}

/// A channel's stall states for its rows (see [`Rows::stall_states`]).
pub struct ChannelStall {
    copy: Vec<QpState>,
    copied: bool,
}

/// What a channel contributes to its device's keys, read before the device is written so that
/// the device's keys and the channel's agree.
pub struct ChannelPlan {
    pub c: &'static Channel,
    req: u64,
    untracked: u64,
    /// The channel's log-scale histogram as the file shows it (empty without one; a vector
    /// so that its 2 KiB are allocated fallibly).
    log: Vec<[u64; LOG_BUCKETS]>,
}

/// A device before its channels are read: every key but the channels.
pub struct DevicePlan {
    pub rows: Rows,
    pub channels: Vec<ChannelPlan>,
    d: &'static Device,
    active: u64,
    untracked: u64,
    dev_log: [u64; LOG_BUCKETS],
    /// Taken by [`DevicePlan::report`] (a cell, so that the channels can borrow the plan
    /// while its report is made).
    peers: std::cell::Cell<Vec<PeerReport>>,
    /// The device's num_wqe_slow and num_stalls (None: the monitor, detection off).
    slow: Option<u64>,
    stalls: Option<u64>,
    /// The finalized communicators' records on the device; taken like `peers`.
    finalized: std::cell::Cell<Vec<FinalizedCommReport>>,
    log_histogram: bool,
}

/// Reads what device `d`'s keys need from its channels. Fails only when the channel list
/// cannot be allocated (512 entries at most).
pub fn device_plan(d: &'static Device, id: &Identity) -> Result<DevicePlan, TryReserveError> {
    let rows = Rows::new(d, id);
    let mut channels: Vec<ChannelPlan> = Vec::new();
    let mut active = 0;
    let mut untracked = d.untracked_no_channel.load(Relaxed);
    let mut dev_log = [0u64; LOG_BUCKETS];
    let mut dev_peers = peers::DevPeers::new(id.log_histogram);
    // num_wqe_slow and num_stalls of the device: its channels' QPs' and its finalized records'.
    let (mut slow, mut stalls) = (0u64, 0u64);
    let mut states = Vec::new();
    for c in d.channels() {
        channels.try_reserve(1)?;
        for (i, q) in c.slots.iter() {
            slow = slow.wrapping_add(q.slow.load(Relaxed));
            if rows.keys.stalls {
                if states.is_empty()
                    && crate::stall_detector::channel_states(c, &mut states).is_err()
                {
                    states.clear();
                }
                stalls += states.get(i as usize).map_or(0, |s| s.episodes);
            }
        }
        states.clear();
        let req = c.stats.req_completed.load(Relaxed);
        let is_active = req > 0 || c.slots.iter().any(|(_, q)| q.snapshot().active());
        active += u64::from(is_active);
        let ch_untracked = c.untracked.load(Relaxed);
        untracked += ch_untracked;
        let log = dev_peers.add_channel(c);
        if let Some(l) = &log {
            for (a, b) in dev_log.iter_mut().zip(l.iter()) {
                *a = a.wrapping_add(*b);
            }
        }
        let log = match log {
            Some(l) => {
                let mut v = Vec::new();
                v.try_reserve_exact(1)?;
                v.push(l);
                v
            }
            None => Vec::new(),
        };
        channels.push(ChannelPlan {
            c,
            req,
            untracked: ch_untracked,
            log,
        });
    }
    // The finalized communicators: their records, and their share of the device's totals.
    let records = comms::device_records(d.id)?;
    let mut finalized = Vec::new();
    finalized.try_reserve_exact(records.len())?;
    for (comm, r) in &records {
        untracked += r.untracked;
        if let Some(l) = &r.log {
            l.add_to(&mut dev_log);
        }
        slow = slow.wrapping_add(r.totals.slow);
        stalls = stalls.wrapping_add(r.totals.stalls);
        finalized.push(finalized_report(comm.as_ref(), r, &rows));
    }
    let peers = dev_peers
        .finish()
        .into_iter()
        .map(|p| {
            let h = p.hist.as_ref().map(log_buckets);
            peer_report(p.key, p.lid, p.num_qps, p.num_qps_shared, h)
        })
        .collect();
    let keys = rows.keys;
    Ok(DevicePlan {
        rows,
        channels,
        d,
        active,
        untracked,
        dev_log,
        peers: std::cell::Cell::new(peers),
        finalized: std::cell::Cell::new(finalized),
        log_histogram: id.log_histogram,
        slow: keys.slow.then_some(slow),
        stalls: keys.stalls.then_some(stalls),
    })
}

impl DevicePlan {
    /// The device's report, with `channels` as given (built from [`DevicePlan::channels`]).
    /// Once per plan: its peers move into the report.
    pub fn report<C>(&self, hw: HwReport, channels: C) -> DeviceReport<C> {
        let d = self.d;
        let totals = registry::dev_totals(d);
        let local = peers::dev_local(d.id);
        let (gid, gid_ip) = gid_keys(local.gid);
        DeviceReport {
            device_id: d.id,
            roce_device: d.roce_device.clone(),
            eth_device: d.hw.eth_device().to_owned(),
            hw_type: d.hw.hw_type(),
            tx_bytes: totals.tx_bytes,
            rx_bytes: totals.rx_bytes,
            num_cq_errors: totals.cq_errors,
            cq_poll_count: totals.cq_polls,
            num_channels: (!self.rows.unknown).then_some(self.channels.len() as u64),
            active_channels: self.active,
            num_qp_untracked: self.untracked,
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
            wqe_completion_log_histogram: self.log_histogram.then(|| log_buckets(&self.dev_log)),
            verbs: self.rows.verbs.then(|| DeviceVerbsReport {
                num_srq_recv_wqe: d.verbs.srq_recv_wqe.load(Relaxed),
                num_wc_unknown_qp: d.verbs.wc_unknown_qp.load(Relaxed),
            }),
            port: local.port,
            gid_index: local.gid_index,
            gid,
            gid_ip,
            lid: lid_key(local.lid),
            peers: self.peers.take(),
            stall: self.rows.stall.as_ref().map(|v| DeviceStallReport {
                num_wqe_outstanding: v.state.outstanding,
                num_qps_stalled: v.state.stalled,
            }),
            cq_errors_by_status: status_counts(&crate::cq_errors::device(d.id)),
            finalized_comms: self.finalized.take(),
            num_wqe_slow: self.slow,
            num_stalls: self.stalls,
            port_qos: d.hw.port_qos(),
        }
    }
}

/// One read of each of a channel's slots, with the totals summed from it.
pub struct ChannelRead {
    pub reads: Vec<SlotRead>,
    pub totals: Totals,
}

/// Reads every slot of `p`'s channel once. Fails only when the reads cannot be held (one
/// slot read per QP of the channel).
pub fn read_channel(rows: &Rows, p: &ChannelPlan) -> Result<ChannelRead, TryReserveError> {
    let mut reads = Vec::new();
    reads.try_reserve_exact(p.c.slots.reserved() as usize)?;
    let mut totals = Totals::default();
    for (i, slot) in p.c.slots.iter() {
        let r = rows.read(p.c, i, slot);
        totals.add(&r, rows.verbs);
        if reads.len() == reads.capacity() {
            reads.try_reserve(1)?; // slots reserved while we read
        }
        reads.push(r);
    }
    Ok(ChannelRead { reads, totals })
}

/// A channel's totals from one pass over its slots, without holding the reads (the stream's
/// way when [`read_channel`] cannot hold them: the rows are then read in a second pass).
pub fn channel_totals(rows: &Rows, p: &ChannelPlan) -> Totals {
    let mut totals = Totals::default();
    for (i, slot) in p.c.slots.iter() {
        totals.add(&rows.read(p.c, i, slot), rows.verbs);
    }
    totals
}

/// Builds one device's report from its slots, whole in memory (the live textfile's model).
/// Err when it cannot be allocated.
pub fn device_report(
    d: &'static Device,
    id: &Identity,
    hw: HwReport,
) -> Result<DeviceReport, TryReserveError> {
    let _view = registry::read_view();
    let plan = device_plan(d, id)?;
    let mut channels = Vec::new();
    channels.try_reserve_exact(plan.channels.len())?;
    for p in &plan.channels {
        let read = read_channel(&plan.rows, p)?;
        let stall = plan.rows.stall_states(p.c);
        let mut qps = Vec::new();
        qps.try_reserve_exact(read.reads.len())?;
        qps.extend(read.reads.iter().map(|r| plan.rows.qp_row(p.c, &stall, r)));
        channels.push(plan.rows.channel_report(p, &read.totals, qps));
    }
    Ok(plan.report(hw, channels))
}

/// The file's keys around its devices, with `devices` as given. The caller ticks the stall
/// detector first (`stall_detector::tick`), so that the stall keys are as of now.
pub fn file_report<D>(
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
    devices: D,
) -> FileReport<D> {
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
        slow_threshold_ns: crate::monitor::slow_ns(),
        source: None,
    }
}

/// Builds the whole file from the registry, in memory (tests, and the reference the stream
/// is held to). Err when it cannot be allocated.
pub fn build(
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> Result<FileReport, TryReserveError> {
    // One view of the channels for the whole file (see the module's comment).
    let _view = registry::read_view();
    // The stall keys as of now, not of the last tick.
    crate::stall_detector::tick();
    let mut devices = Vec::new();
    for d in registry::devices() {
        devices.try_reserve(1)?;
        devices.push(device_report(d, id, d.hw.final_report())?);
    }
    Ok(file_report(
        id,
        end_wall_ns,
        samples,
        is_final,
        trigger,
        devices,
    ))
}
