//! A finalized communicator's compact record: what rcclTelemetryCommFinalize folds its
//! channels into before they are handed to later communicators, and what every output reads
//! of communicators that are gone.
//!
//! Per device the communicator used, one [`DevRecord`]: every counter its channels and QPs
//! had (summed), its latency histograms merged (the linear one, the log-scale one), its peers
//! (per remote NIC: QPs and latency, and every counter of its QPs towards that NIC summed, so
//! that the analyser joins the links of the device from both ends without the QPs' rows), its
//! error completions by status and its first one with the QP it came on, its stall keys with
//! every stall ended at the finalization, and the rows of its QPs that had error completions
//! or stalled (the first [`MAX_KEPT_QPS`]). Nothing is lost: the file's totals are the live
//! channels' plus these records'.
//!
//! Bounded: the newest [`MAX_KEPT_COMMS`] finalized communicators keep a record each; an older
//! one is merged into its devices' aggregate record (the "communicators past the cap", with
//! their count), so memory and the file stay bounded whatever the number of lifetimes.
//!
//! Every allocation that grows with the communicators is fallible (the records, their devices,
//! peers and kept QPs, a channel's per-link sums): what cannot be allocated is dropped, said
//! once on stderr ([`say_no_memory`]), and never aborts the process. A device record that
//! cannot be made goes into the device's aggregate record instead, so its counts stay in
//! the totals.
//!
//! Counts that reach a handed-back channel after its finalization (a handle kept past
//! rcclTelemetryCommFinalize, outside the header's contract) are found when the channel is
//! about to be handed out again ([`usable`]): they go to the record of the communicator that
//! owned it, and the channel waits for its next turn, so a late count never lands in another
//! communicator's counts through a channel that was reused while it came.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::counters::{ExtSnapshot, QpSnapshot, ROLE_CTS, ROLE_DATA};
use crate::cq_errors::{FirstError, QpErrors};
use crate::loghist::LOG_BUCKETS;
use crate::peers::{DevPeers, PeerKey, QpInfo, Remote};
use crate::registry::comm::CommIdent;
use crate::registry::{self, Channel};
use crate::stall_detector::{FinalQp, StallFold};
use crate::{cq_errors, diag, latency, stall_detector};

/// Finalized communicators that keep a record of their own (the newest); older ones are
/// summed into one aggregate record per device.
pub const MAX_KEPT_COMMS: usize = 1024;

/// Rows of errored or stalled QPs a device record keeps; further ones are only counted. With
/// [`MAX_KEPT_COMMS`] records per device this bounds them at 8,192 per device.
pub const MAX_KEPT_QPS: usize = 8;

/// Whether a shortfall of memory on the communicator paths was said.
static NO_MEMORY_SAID: AtomicBool = AtomicBool::new(false);

/// Says once per process that memory ran out on the communicator paths and what was dropped.
fn say_no_memory(what: &str) {
    diag::warn_once(&NO_MEMORY_SAID, || {
        format!("out of memory: {what} (later shortfalls of finalized communicators' records are not said)")
    });
}

/// A log-scale histogram without its empty buckets: (bucket index, count), by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseLog(pub Vec<(u16, u64)>);

impl SparseLog {
    pub fn of(counts: &[u64; LOG_BUCKETS]) -> SparseLog {
        SparseLog(
            counts
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| (i as u16, n))
                .collect(),
        )
    }

    pub fn add(&mut self, o: &SparseLog) {
        let mut m: BTreeMap<u16, u64> = self.0.iter().copied().collect();
        for &(i, n) in &o.0 {
            let e = m.entry(i).or_insert(0);
            *e = e.wrapping_add(n);
        }
        self.0 = m.into_iter().collect();
    }

    /// Adds the counts into a full histogram.
    pub fn add_to(&self, counts: &mut [u64; LOG_BUCKETS]) {
        for &(i, n) in &self.0 {
            if let Some(c) = counts.get_mut(usize::from(i)) {
                *c = c.wrapping_add(n);
            }
        }
    }

    pub fn counts(&self) -> [u64; LOG_BUCKETS] {
        let mut c = [0; LOG_BUCKETS];
        self.add_to(&mut c);
        c
    }
}

/// One remote NIC of a finalized communicator's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRecord {
    pub key: PeerKey,
    pub lid: u16,
    pub num_qps: u64,
    pub num_qps_shared: u64,
    /// None: the log-scale histogram was off.
    pub hist: Option<SparseLog>,
    /// Every counter of the QPs towards this NIC, summed (histogram, min and max merged).
    pub totals: QpSnapshot,
    /// Their stall keys (None: stall detection was off).
    pub stall: Option<StallFold>,
}

/// Where a QP was: its channel (its index), its slot, and who it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAt {
    pub channel: u32,
    pub slot: u64,
    pub qp_num: Option<u32>,
    pub peer: Option<Remote>,
}

/// A QP kept for its error completions or its stall: its row as it was at the finalization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptQp {
    pub channel: u32,
    pub slot: u64,
    pub role: u8,
    pub totals: QpSnapshot,
    /// The verbs interposer's counters (None: not in that mode).
    pub ext: Option<ExtSnapshot>,
    pub info: Option<QpInfo>,
    pub errors: Option<QpErrors>,
    /// None: stall detection was off.
    pub stall: Option<FinalQp>,
}

/// A finalized communicator on one device (or, with `num_comms` > 1, several summed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DevRecord {
    pub dev: u32,
    pub num_comms: u64,
    pub num_channels: u64,
    pub num_qps: u64,
    /// Every counter of its QPs, summed (histogram, min and max merged).
    pub totals: QpSnapshot,
    /// The verbs interposer's counters (None: not in that mode).
    pub ext: Option<ExtSnapshot>,
    pub req_completed: u64,
    pub data_qps: u64,
    pub cts_qps: u64,
    pub untracked: u64,
    /// Its channels' log-scale histograms, merged (None: the histogram was off).
    pub log: Option<SparseLog>,
    pub peers: Vec<PeerRecord>,
    pub cq_errors: BTreeMap<i32, u64>,
    /// The earliest first error of its QPs, and the QP it came on.
    pub first_cq_error: Option<(FirstError, QpAt)>,
    /// None: stall detection was off.
    pub stall: Option<StallFold>,
    /// Its QPs that had error completions or stalled, the first [`MAX_KEPT_QPS`].
    pub kept_qps: Vec<KeptQp>,
    /// Such QPs beyond those.
    pub qps_unlisted: u64,
}

impl DevRecord {
    fn new(dev: u32, num_comms: u64) -> DevRecord {
        DevRecord {
            dev,
            num_comms,
            ..DevRecord::default()
        }
    }

    /// Adds `o`'s counts (and, with `whole`, its communicators, channels and QPs).
    pub fn merge(&mut self, o: &DevRecord, whole: bool) {
        if whole {
            self.num_comms += o.num_comms;
            self.num_channels += o.num_channels;
            self.num_qps += o.num_qps;
            self.data_qps += o.data_qps;
            self.cts_qps += o.cts_qps;
            self.untracked += o.untracked;
        }
        self.totals.accumulate(&o.totals);
        if let Some(e) = &o.ext {
            self.ext
                .get_or_insert_with(ExtSnapshot::default)
                .accumulate(e);
        }
        self.req_completed = self.req_completed.wrapping_add(o.req_completed);
        if let Some(l) = &o.log {
            self.log.get_or_insert_with(SparseLog::default).add(l);
        }
        for p in &o.peers {
            self.add_peer(p);
        }
        for (k, v) in &o.cq_errors {
            *self.cq_errors.entry(*k).or_insert(0) += v;
        }
        if let Some(f) = &o.first_cq_error {
            if !self
                .first_cq_error
                .as_ref()
                .is_some_and(|e| e.0.wall_ns <= f.0.wall_ns)
            {
                self.first_cq_error = Some(f.clone());
            }
        }
        if let Some(s) = &o.stall {
            self.stall.get_or_insert_with(StallFold::default).add(s);
        }
        for q in &o.kept_qps {
            self.keep_qp(q.clone());
        }
        self.qps_unlisted += o.qps_unlisted;
    }

    /// Keeps a QP's row; past [`MAX_KEPT_QPS`], or when the row cannot be allocated, the QP is
    /// only counted (`qps_unlisted`).
    fn keep_qp(&mut self, q: KeptQp) {
        if self.kept_qps.len() >= MAX_KEPT_QPS {
            self.qps_unlisted += 1;
        } else if self.kept_qps.try_reserve(1).is_ok() {
            self.kept_qps.push(q);
        } else {
            self.qps_unlisted += 1;
            say_no_memory(&format!(
                "device {}: a finalized communicator's errored or stalled QP could not be kept; it is counted in num_qps_unlisted",
                self.dev
            ));
        }
    }

    /// Adds a remote NIC's sums to the record's peer of the same NIC, or as a new peer (in
    /// key order); a new peer that cannot be allocated is dropped (the device's totals keep
    /// its counts).
    fn add_peer(&mut self, p: &PeerRecord) {
        match self.peers.iter().position(|x| x.key == p.key) {
            Some(i) => {
                let x = &mut self.peers[i];
                x.num_qps += p.num_qps;
                x.num_qps_shared += p.num_qps_shared;
                if x.lid == 0 {
                    x.lid = p.lid;
                }
                if let Some(h) = &p.hist {
                    x.hist.get_or_insert_with(SparseLog::default).add(h);
                }
                x.totals.accumulate(&p.totals);
                if let Some(s) = &p.stall {
                    x.stall.get_or_insert_with(StallFold::default).add(s);
                }
            }
            None if self.peers.try_reserve(1).is_ok() => {
                let at = self.peers.partition_point(|x| x.key < p.key);
                self.peers.insert(at, p.clone()); // within the capacity
            }
            None => say_no_memory(&format!(
                "device {}: a finalized communicator's remote NIC could not be recorded; its sums are only in the device's totals",
                self.dev
            )),
        }
    }
}

/// A finalized communicator.
#[derive(Debug, Clone)]
pub struct CommRecord {
    pub ident: CommIdent,
    pub init_wall_ns: u64,
    pub finalize_wall_ns: u64,
    /// One per device it had channels on, by device id.
    pub devs: Vec<DevRecord>,
}

struct Records {
    /// The newest finalized communicators, oldest first.
    kept: VecDeque<CommRecord>,
    /// Per device, the older ones summed.
    folded: Vec<DevRecord>,
}

static RECORDS: Mutex<Records> = Mutex::new(Records {
    kept: VecDeque::new(),
    folded: Vec::new(),
});

/// One remote NIC's QPs of a channel being folded.
struct LinkSums {
    key: PeerKey,
    totals: QpSnapshot,
    stall: Option<StallFold>,
}

/// Folds channel `c` (of a communicator being finalized) into `r`. `now` is the monotonic
/// instant of the finalization: its QPs' stalls end there.
fn fold_channel(c: &Channel, r: &mut DevRecord, now: u64) {
    let verbs = registry::verbs_keys();
    let stalls = stall_detector::final_qps(c, now);
    // Per remote NIC, its QPs' sums (a channel has a few peers: a list, searched).
    let mut links: Vec<LinkSums> = Vec::new();
    for (i, slot) in c.slots.iter() {
        let snap = slot.snapshot();
        r.totals.accumulate(&snap);
        r.num_qps += 1;
        let role = c.slots.role(i);
        match role {
            ROLE_DATA => r.data_qps += 1,
            ROLE_CTS => r.cts_qps += 1,
            _ => {}
        }
        let ext = verbs.then(|| c.slots.ext(i).map(|e| e.snapshot()).unwrap_or_default());
        if let Some(e) = &ext {
            r.ext.get_or_insert_with(ExtSnapshot::default).accumulate(e);
        }
        let info = c.peers.qp(i);
        let stall = stalls
            .as_ref()
            .map(|v| v.get(i as usize).copied().unwrap_or_default());
        if let Some(p) = info.and_then(|q| q.peer) {
            let key = PeerKey::of(p.gid, p.lid);
            let at = match links.iter().position(|l| l.key == key) {
                Some(at) => Some(at),
                None if links.try_reserve(1).is_ok() => {
                    links.push(LinkSums {
                        key,
                        totals: QpSnapshot::default(),
                        stall: None,
                    });
                    Some(links.len() - 1)
                }
                None => {
                    say_no_memory(&format!(
                        "device {}: a finalized communicator's sums towards a remote NIC could not be kept; they are only in the device's totals",
                        r.dev
                    ));
                    None
                }
            };
            if let Some(l) = at.map(|at| &mut links[at]) {
                l.totals.accumulate(&snap);
                if let Some(s) = &stall {
                    l.stall
                        .get_or_insert_with(StallFold::default)
                        .add(&s.fold());
                }
            }
        }
        let errors = cq_errors::take(slot);
        if let Some(e) = &errors {
            let at = QpAt {
                channel: c.id(),
                slot: i,
                qp_num: info.and_then(|q| q.qp_num),
                peer: info.and_then(|q| q.peer),
            };
            let one = DevRecord {
                cq_errors: e.by_status.clone(),
                first_cq_error: e.first.clone().map(|f| (f, at)),
                ..DevRecord::default()
            };
            r.merge(&one, false);
        }
        if errors.is_some() || stall.is_some_and(|s| s.stalled()) {
            r.keep_qp(KeptQp {
                channel: c.id(),
                slot: i,
                role,
                totals: snap,
                ext,
                info,
                errors,
                stall,
            });
        }
    }
    r.req_completed = r
        .req_completed
        .wrapping_add(c.stats.req_completed.load(Relaxed));
    r.untracked += c.untracked.load(Relaxed);
    let mut peers = DevPeers::new(c.log.is_some());
    if let Some(l) = peers.add_channel(c) {
        r.log
            .get_or_insert_with(SparseLog::default)
            .add(&SparseLog::of(&l));
    }
    for p in peers.finish() {
        let link = links.iter().find(|l| l.key == p.key);
        r.add_peer(&PeerRecord {
            key: p.key,
            lid: p.lid,
            num_qps: p.num_qps,
            num_qps_shared: p.num_qps_shared,
            hist: p.hist.as_ref().map(SparseLog::of),
            totals: link.map_or_else(QpSnapshot::default, |l| l.totals),
            stall: link
                .and_then(|l| l.stall)
                .or(stalls.is_some().then(StallFold::default)),
        });
    }
    if let Some(s) = stall_detector::fold(c, now) {
        r.totals.stalls += s.episodes;
        r.stall.get_or_insert_with(StallFold::default).add(&s);
    }
}

/// rcclTelemetryCommFinalize: folds the communicator of handle `h` into its record and hands
/// its channels back. False when the handle names no live communicator.
pub fn finalize(h: u64) -> bool {
    finalize_with(h, || {})
}

/// [`finalize`], calling `inside` once the communicator is taken out of the live table and
/// before its record exists (the entry point's test fault point: a signal arriving there).
pub fn finalize_with(h: u64, inside: impl FnOnce()) -> bool {
    let _w = registry::lifetime_change();
    let Some((comm, chans)) = registry::comm::begin_finalize(h) else {
        return false;
    };
    inside();
    let (wall, mono) = (latency::realtime_ns(), latency::monotonic_ns());
    let mut devs: Vec<DevRecord> = Vec::new();
    for c in &chans {
        let at = match devs.iter().position(|r| r.dev == c.dev) {
            Some(i) => Some(i),
            None if devs.try_reserve(1).is_ok() => {
                devs.push(DevRecord::new(c.dev, 1));
                Some(devs.len() - 1)
            }
            None => None,
        };
        match at {
            Some(at) => {
                devs[at].num_channels += 1;
                fold_channel(c, &mut devs[at], mono);
            }
            None => {
                // No room for the device's record: the channel is folded all the same (its
                // errors and stalls leave their tables with it) into the device's aggregate.
                let mut r = DevRecord::new(c.dev, 0);
                r.num_channels = 1;
                fold_channel(c, &mut r, mono);
                let kept = folded_dev(&mut RECORDS.lock().folded, c.dev)
                    .map(|f| f.merge(&r, true))
                    .is_some();
                say_no_memory(&format!(
                    "finalizing communicator {}: its record of device {} could not be made; {}",
                    comm.ident.describe(),
                    c.dev,
                    if kept {
                        "its counts went into the record of the communicators past the cap"
                    } else {
                        "its counts there are dropped"
                    }
                ));
            }
        }
    }
    for c in &chans {
        crate::monitor::summaries_of(c.dev, c);
        crate::monitor::forget(c);
        stall_detector::forget(c);
        registry::comm::give_back(c, comm.ident.id);
    }
    devs.sort_unstable_by_key(|r| r.dev); // one record per device: no order to keep

    diag::debug(|| {
        format!(
            "communicator {} finalized: {} channels, {} QPs folded",
            comm.ident.describe(),
            chans.len(),
            devs.iter().map(|r| r.num_qps).sum::<u64>()
        )
    });
    keep(
        &mut RECORDS.lock(),
        CommRecord {
            ident: comm.ident,
            init_wall_ns: comm.init_wall_ns,
            finalize_wall_ns: wall,
            devs,
        },
        MAX_KEPT_COMMS,
    );
    true
}

/// Adds a record, merging the oldest into the aggregate past `cap`.
fn keep(recs: &mut Records, r: CommRecord, cap: usize) {
    // Out of memory for the deque: the record goes straight into the aggregate.
    if recs.kept.try_reserve(1).is_err() {
        fold_past_cap(&mut recs.folded, &r);
        return;
    }
    recs.kept.push_back(r);
    while recs.kept.len() > cap {
        let Some(old) = recs.kept.pop_front() else {
            break;
        };
        fold_past_cap(&mut recs.folded, &old);
    }
}

/// Merges a record into its devices' aggregate records (one that cannot be allocated is
/// dropped, said once).
fn fold_past_cap(folded: &mut Vec<DevRecord>, r: &CommRecord) {
    for d in &r.devs {
        match folded_dev(folded, d.dev) {
            Some(f) => f.merge(d, true),
            None => say_no_memory(&format!(
                "device {}: the record of the communicators past the cap could not be made; communicator {}'s counts there are dropped",
                d.dev,
                r.ident.describe()
            )),
        }
    }
}

/// Device `dev`'s aggregate record, made when there is none (in device order); None when it
/// cannot be allocated.
fn folded_dev(folded: &mut Vec<DevRecord>, dev: u32) -> Option<&mut DevRecord> {
    let at = match folded.binary_search_by_key(&dev, |r| r.dev) {
        Ok(i) => i,
        Err(i) => {
            folded.try_reserve(1).ok()?;
            folded.insert(i, DevRecord::new(dev, 0)); // within the capacity
            i
        }
    };
    folded.get_mut(at)
}

/// Whether a handed-back channel may go to a new owner: it may when nothing counted on it
/// since its finalization. Otherwise its late counts go to the record of the communicator
/// that owned it, the channel is zeroed again, and it waits for the next turn.
pub fn usable(c: &'static Channel) -> bool {
    if c.quiet() {
        return true;
    }
    let mut late = DevRecord::new(c.dev, 0);
    for (_, q) in c.slots.released_slots() {
        late.totals.accumulate(&q.snapshot());
    }
    late.req_completed = c.stats.req_completed.swap(0, Relaxed);
    c.slots.clear_released();
    let former = c.former();
    let mut recs = RECORDS.lock();
    let dev = c.dev;
    match recs
        .kept
        .iter_mut()
        .find(|r| r.ident.id == former)
        .and_then(|r| r.devs.iter_mut().find(|d| d.dev == dev))
    {
        Some(d) => d.merge(&late, false),
        None => match folded_dev(&mut recs.folded, dev) {
            Some(f) => f.merge(&late, false),
            None => {
                drop(recs);
                say_no_memory(&format!("device {dev}: counts made after communicator {former}'s finalization could not be recorded; they are dropped"));
                return false;
            }
        },
    }
    drop(recs);
    diag::debug(|| {
        format!(
            "device {dev}: a handle of finalized communicator {former} counted after its finalization ({} WQEs sent, {} drained); counted in its record, its channel not reused yet",
            late.totals.wqe_sent, late.totals.wqe_rcvd
        )
    });
    false
}

/// Device `dev`'s records under `recs`: each kept communicator's (oldest first), then the
/// aggregate of those past the cap (ident None), if any.
fn records_of(recs: &Records, dev: u32) -> impl Iterator<Item = (Option<CommIdent>, &DevRecord)> {
    recs.kept
        .iter()
        .filter_map(move |r| Some((Some(r.ident), r.devs.iter().find(|d| d.dev == dev)?)))
        .chain(
            recs.folded
                .iter()
                .filter(move |r| r.dev == dev)
                .map(|r| (None, r)),
        )
}

/// Device `dev`'s finalized records: each kept communicator's (oldest first), then the
/// aggregate of those past the cap (ident None), if any. Err when the list cannot be
/// allocated.
pub fn device_records(
    dev: u32,
) -> Result<Vec<(Option<CommIdent>, DevRecord)>, std::collections::TryReserveError> {
    let recs = RECORDS.lock();
    let mut v = Vec::new();
    v.try_reserve_exact(records_of(&recs, dev).count())?;
    v.extend(records_of(&recs, dev).map(|(c, r)| (c, r.clone())));
    Ok(v)
}

/// Device `dev`'s finalized communicators, summed into one record.
pub fn device_total(dev: u32) -> DevRecord {
    let mut t = DevRecord::new(dev, 0);
    for (_, r) in records_of(&RECORDS.lock(), dev) {
        t.merge(r, true);
    }
    t
}

/// A communicator as the file lists it: live (no finalization time) or finalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listing {
    pub ident: CommIdent,
    pub init_wall_ns: u64,
    pub finalize_wall_ns: Option<u64>,
}

/// Every communicator with a record or alive, by id (those merged past the cap are not).
pub fn communicators() -> Vec<Listing> {
    let mut v: Vec<Listing> = RECORDS
        .lock()
        .kept
        .iter()
        .map(|r| Listing {
            ident: r.ident,
            init_wall_ns: r.init_wall_ns,
            finalize_wall_ns: Some(r.finalize_wall_ns),
        })
        .collect();
    v.extend(registry::comm::live().iter().map(|c| Listing {
        ident: c.ident,
        init_wall_ns: c.init_wall_ns,
        finalize_wall_ns: None,
    }));
    v.sort_by_key(|l| l.ident.id);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, dev: u32, sent: u64, peer: u8) -> CommRecord {
        let mut g = [0u8; 16];
        g[15] = peer;
        let mut totals = QpSnapshot {
            wqe_sent: sent,
            ..QpSnapshot::default()
        };
        totals.hist[2] = sent;
        totals.lat_min = 100 + sent as i64;
        totals.lat_max = 1000 + sent as i64;
        CommRecord {
            ident: CommIdent {
                id,
                hash: 0x1000 + id,
                rank: 0,
                nranks: 2,
            },
            init_wall_ns: id,
            finalize_wall_ns: id + 1,
            devs: vec![DevRecord {
                dev,
                num_comms: 1,
                num_channels: 2,
                num_qps: 4,
                totals,
                log: Some(SparseLog(vec![(40, sent)])),
                peers: vec![PeerRecord {
                    key: PeerKey::Gid(g),
                    lid: 0,
                    num_qps: 4,
                    num_qps_shared: 0,
                    hist: Some(SparseLog(vec![(40, sent)])),
                    totals,
                    stall: None,
                }],
                cq_errors: [(12, 1)].into_iter().collect(),
                stall: Some(StallFold {
                    outstanding: 1,
                    stalled: 1,
                    longest_ns: sent,
                    longest_start_wall: Some(id),
                    episodes: 1,
                }),
                ..DevRecord::default()
            }],
        }
    }

    #[test]
    fn past_the_cap_the_oldest_are_summed_and_nothing_is_lost() {
        let mut recs = Records {
            kept: VecDeque::new(),
            folded: Vec::new(),
        };
        for id in 1..=10u64 {
            keep(&mut recs, rec(id, (id % 2) as u32, id, (id % 3) as u8), 4);
        }
        assert_eq!(
            recs.kept.iter().map(|r| r.ident.id).collect::<Vec<_>>(),
            [7, 8, 9, 10],
            "the newest keep their own"
        );
        let all: Vec<&DevRecord> = recs
            .kept
            .iter()
            .flat_map(|r| &r.devs)
            .chain(&recs.folded)
            .collect();
        let sum = |f: fn(&DevRecord) -> u64| all.iter().map(|d| f(d)).sum::<u64>();
        assert_eq!(sum(|d| d.totals.wqe_sent), 55);
        assert_eq!(sum(|d| d.totals.hist[2]), 55);
        assert_eq!(sum(|d| d.num_comms), 10);
        assert_eq!(sum(|d| d.num_qps), 40);
        assert_eq!(sum(|d| d.log.as_ref().unwrap().0[0].1), 55);
        assert_eq!(sum(|d| d.cq_errors[&12]), 10);
        assert_eq!(sum(|d| d.stall.unwrap().stalled), 10);
        // Per device, the aggregate of 1..=6: odd ids on device 1, even on device 0.
        assert_eq!(recs.folded.len(), 2);
        let f1 = &recs.folded[1];
        assert_eq!(
            (f1.dev, f1.num_comms, f1.totals.wqe_sent),
            (1, 3, 1 + 3 + 5)
        );
        assert_eq!((f1.totals.lat_min, f1.totals.lat_max), (101, 1005));
        assert_eq!(f1.stall.unwrap().longest_ns, 5);
        // Peers merge by remote NIC: ids 1, 3, 5 have peers 1, 0, 2.
        assert_eq!(f1.peers.len(), 3);
        assert_eq!(f1.peers.iter().map(|p| p.num_qps).sum::<u64>(), 12);
    }

    /// A registered device for these tests (ids 24.. are this module's).
    fn device(dev: i32) -> &'static registry::Device {
        let hw = crate::hw::HwSettings {
            sysfs_root: "/nonexistent-sysfs".into(),
            ..Default::default()
        };
        registry::register(dev, &format!("comms_test_{dev}"), "IB-CAST", &hw).unwrap();
        registry::device(dev).unwrap()
    }

    fn comm(hash: u64) -> (u64, std::sync::Arc<registry::comm::Comm>) {
        registry::comm::create(hash, 1, 4, latency::realtime_ns()).unwrap()
    }

    /// Posts `n` sends and completions on each slot of the communicator's (dev, ch).
    fn drive(c: &registry::comm::Comm, dev: i32, ch: i32, qps: i32, n: u64) {
        for q in 0..qps {
            let s = c.qp(dev, ch, q).unwrap();
            for _ in 0..n {
                s.send_posted(true);
                s.wqe_complete(latency::TS_UNSAMPLED);
            }
        }
        c.channel(dev, ch).unwrap().stats.request_completed();
    }

    fn record_of(id: u64, dev: u32) -> DevRecord {
        device_records(dev)
            .unwrap()
            .into_iter()
            .find(|(c, _)| c.map(|c| c.id) == Some(id))
            .map(|(_, r)| r)
            .expect("a record")
    }

    #[test]
    fn finalize_folds_every_count_and_hands_the_channels_to_the_next_communicator() {
        let d = device(24);
        let (ha, a) = comm(0xa);
        let (hb, b) = comm(0xb);
        // Two communicators on the same (device, channel): separate channels, both from 0.
        assert_eq!(a.setup_channel(24, 3, 4, &usable), Some((0, 4)));
        assert_eq!(b.setup_channel(24, 3, 2, &usable), Some((0, 2)));
        assert_eq!(a.setup_channel(24, 7, 1, &usable), Some((0, 1)));
        a.set_qp_role(24, 3, 0, ROLE_DATA);
        a.set_qp_role(24, 3, 1, ROLE_CTS);
        assert!(!std::ptr::eq(
            a.channel(24, 3).unwrap(),
            b.channel(24, 3).unwrap()
        ));
        drive(&a, 24, 3, 4, 5);
        drive(&a, 24, 7, 1, 3);
        drive(&b, 24, 3, 2, 11);
        let objects = d.num_objects();
        assert_eq!(objects, 3);
        assert!(finalize(ha));
        assert!(!finalize(ha), "once");
        let r = record_of(a.ident.id, 24);
        assert_eq!((r.num_comms, r.num_channels, r.num_qps), (1, 2, 5));
        assert_eq!((r.data_qps, r.cts_qps), (1, 1));
        assert_eq!(r.totals.wqe_sent, 4 * 5 + 3);
        assert_eq!(r.totals.write_imm_wqe, 23);
        assert_eq!(r.totals.wqe_completed, 23);
        assert_eq!(r.req_completed, 2);
        // Its channels are free (no longer listed), b's stays.
        let live: Vec<u64> = d.channels().iter().map(|c| c.owner()).collect();
        assert_eq!(live, [b.ident.id]);
        assert_eq!(b.qp(24, 3, 1).unwrap().snapshot().wqe_sent, 11);
        // The next communicator gets a handed-back channel, cleared, its slots from 0.
        let (hc, c) = comm(0xc);
        assert_eq!(c.setup_channel(24, 0, 3, &usable), Some((0, 3)));
        assert_eq!(d.num_objects(), objects, "no new channel object");
        let ch = c.channel(24, 0).unwrap();
        assert_eq!((ch.id(), ch.owner()), (0, c.ident.id));
        assert_eq!(ch.stats.req_completed.load(Relaxed), 0);
        for i in 0..3 {
            let s = c.qp(24, 0, i).unwrap();
            assert_eq!(s.snapshot(), QpSnapshot::default(), "slot {i} starts empty");
            assert_eq!(ch.slots.role(i as u64), crate::counters::ROLE_UNKNOWN);
        }
        assert!(c.qp(24, 0, 3).is_none());
        assert!(finalize(hc));
        assert!(finalize(hb));
    }

    #[test]
    fn a_count_after_finalization_goes_to_its_owner_and_the_channel_waits() {
        let d = device(25);
        let (ha, a) = comm(0x25a);
        a.setup_channel(25, 0, 2, &usable).unwrap();
        let stale = a.qp(25, 0, 1).unwrap();
        drive(&a, 25, 0, 2, 4);
        assert!(finalize(ha));
        // A handle kept past the finalization (outside the contract) still counts.
        stale.send_posted(false);
        stale.wqe_complete(latency::TS_UNSAMPLED);
        let (hb, b) = comm(0x25b);
        b.setup_channel(25, 0, 2, &usable).unwrap();
        assert_eq!(d.num_objects(), 2, "the dirty channel was not handed out");
        assert!(!std::ptr::eq(b.qp(25, 0, 1).unwrap(), stale,));
        let r = record_of(a.ident.id, 25);
        assert_eq!(r.totals.wqe_sent, 2 * 4 + 1, "the late send is a's");
        assert_eq!(r.totals.wqe_completed, 2 * 4 + 1);
        assert_eq!(r.num_qps, 2, "counts only, not another QP");
        // Quiet again: the next communicator may take it.
        let (hc, c) = comm(0x25c);
        c.setup_channel(25, 0, 1, &usable).unwrap();
        assert_eq!(d.num_objects(), 2);
        assert!(std::ptr::eq(c.qp(25, 0, 0).unwrap(), a_slot0(stale)));
        assert!(finalize(hb) && finalize(hc));
    }

    #[test]
    fn a_peer_or_a_kept_qp_that_cannot_be_allocated_is_dropped_and_said() {
        let mut r = DevRecord::new(27, 1);
        let p = rec(1, 27, 5, 1).devs[0].peers[0].clone();
        crate::reserve::refuse_next(0, 1);
        r.add_peer(&p);
        assert!(r.peers.is_empty(), "dropped");
        assert!(NO_MEMORY_SAID.load(Relaxed), "said");
        r.add_peer(&p);
        assert_eq!(r.peers, vec![p.clone()], "memory back: recorded");
        let q = KeptQp {
            channel: 0,
            slot: 0,
            role: ROLE_DATA,
            totals: QpSnapshot::default(),
            ext: None,
            info: None,
            errors: None,
            stall: None,
        };
        crate::reserve::refuse_next(0, 1);
        r.keep_qp(q.clone());
        assert_eq!(
            (r.kept_qps.len(), r.qps_unlisted),
            (0, 1),
            "counted, not kept"
        );
        r.keep_qp(q);
        assert_eq!((r.kept_qps.len(), r.qps_unlisted), (1, 1));
    }

    #[test]
    fn a_device_record_that_cannot_be_made_goes_into_the_aggregate() {
        let dev = 27;
        device(dev);
        let before = device_total(dev as u32);
        let (h, c) = comm(0x27);
        c.setup_channel(dev, 1, 3, &usable).unwrap();
        drive(&c, dev, 1, 3, 4);
        // The first allocation of a record's size in the finalization is its device list.
        crate::reserve::refuse_next(std::mem::size_of::<DevRecord>(), 1);
        assert!(finalize(h));
        assert!(NO_MEMORY_SAID.load(Relaxed), "said");
        let recs = device_records(dev as u32).unwrap();
        assert!(
            recs.iter()
                .all(|(i, _)| i.map(|i| i.id) != Some(c.ident.id)),
            "no record of its own"
        );
        let (_, agg) = recs
            .iter()
            .find(|(i, _)| i.is_none())
            .expect("the aggregate");
        assert_eq!(agg.totals.wqe_sent, 3 * 4);
        assert_eq!((agg.num_channels, agg.num_qps, agg.num_comms), (1, 3, 0));
        let after = device_total(dev as u32);
        assert_eq!(
            after.totals.wqe_sent - before.totals.wqe_sent,
            3 * 4,
            "nothing lost"
        );
        // Its channel was handed back all the same.
        let (h2, c2) = comm(0x27b);
        c2.setup_channel(dev, 1, 1, &usable).unwrap();
        assert_eq!(registry::device(dev).unwrap().num_objects(), 1);
        assert!(finalize(h2));
    }

    /// The slot before `q` in its segment (slot 0 of a two-slot channel, from slot 1).
    fn a_slot0(q: &'static crate::counters::RcclQpStats) -> &'static crate::counters::RcclQpStats {
        // SAFETY: q is slot 1 of its segment; slot 0 is the one before it.
        unsafe { &*(q as *const crate::counters::RcclQpStats).sub(1) }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]
        /// Any sequence of lifetimes: the records plus the live channels hold exactly what was
        /// posted, and the device never has more channel objects than were ever alive at once.
        #[test]
        fn lifetimes_lose_nothing_and_stay_bounded(
            plan in proptest::collection::vec((1usize..4, 1i32..5, 0u64..7, proptest::bool::ANY), 1..12)
        ) {
            // One device for every case: each case ends with every communicator finalized,
            // so what it posted is what the device's records gained.
            static PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let dev = 26;
            let d = device(dev);
            let before = device_total(dev as u32).totals.wqe_sent;
            let mut alive: Vec<(u64, std::sync::Arc<registry::comm::Comm>)> = Vec::new();
            let mut posted = 0u64;
            for (chans, qps, n, end_one) in plan {
                let (h, c) = comm(dev as u64);
                for ch in 0..chans as i32 {
                    c.setup_channel(dev, ch, qps, &usable).unwrap();
                    drive(&c, dev, ch, qps, n);
                    posted += qps as u64 * n;
                }
                alive.push((h, c));
                let now: usize = alive.iter().map(|(_, c)| c.channels().len()).sum();
                PEAK.fetch_max(now, Relaxed);
                if end_one {
                    let (h, _) = alive.remove(0);
                    proptest::prop_assert!(finalize(h));
                }
            }
            let live: u64 = d
                .channels()
                .iter()
                .flat_map(|c| c.slots.iter())
                .map(|(_, s)| s.snapshot().wqe_sent)
                .sum();
            proptest::prop_assert_eq!(device_total(dev as u32).totals.wqe_sent + live, before + posted);
            let peak = PEAK.load(Relaxed);
            proptest::prop_assert!(d.num_objects() <= peak, "{} objects for a peak of {peak}", d.num_objects());
            for (h, _) in alive {
                proptest::prop_assert!(finalize(h));
            }
            proptest::prop_assert_eq!(device_total(dev as u32).totals.wqe_sent, before + posted);
        }
    }

    #[test]
    fn sparse_histograms_add_by_bucket() {
        let mut a = SparseLog(vec![(1, 2), (9, 1)]);
        a.add(&SparseLog(vec![(3, 4), (9, 5)]));
        assert_eq!(a.0, [(1, 2), (3, 4), (9, 6)]);
        let mut full = [0u64; LOG_BUCKETS];
        full[3] = 4;
        full[255] = 7;
        let s = SparseLog::of(&full);
        assert_eq!(s.0, [(3, 4), (255, 7)]);
        assert_eq!(s.counts(), full);
    }
}
