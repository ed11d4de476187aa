//! `generate --peers --plant <hang>`: runs of format version 4 of a job that hangs (or
//! recovers), for the wait-for graph of `stalls`. The job is rail-shaped: NIC `l` of a host
//! talks to NIC `l` of the hosts one and two away on either side (every other rank when there
//! is one host), so a rank has at most four peers and 16,384 ranks stay small. Every QP
//! carries the version-4 keys (errors by status, first error, state, last post and
//! completion). Separate from `fabric.rs` because a hang is a story in time (who stopped
//! first, who wrote a file when), not a latency factor per link.

use super::*;
use crate::model::QpError;
use std::collections::BTreeSet;

/// The hook `generate_fabric` calls first: Some when the plants are hang plants.
pub fn dispatch(
    dir: &Path,
    o: &GenOptions,
    qps_per_peer: usize,
) -> Option<Result<Vec<Planted>, String>> {
    let n = o.plants.iter().filter(|p| p.run() == RunKind::Hang).count();
    if n == 0 {
        return None;
    }
    if n != 1 || o.plants.len() != 1 {
        return Some(Err(format!(
            "a hang plant ({}) goes alone: one per run, without other plants",
            Plant::names(&Plant::of(RunKind::Hang))
        )));
    }
    Some(generate_hang(dir, o, qps_per_peer.max(1)))
}

/// One QP being generated.
struct Qp {
    peer: usize,
    qpn: u64,
    peer_qpn: u64,
    ch: usize,
    stalled_since: Option<i128>,
    outstanding: u64,
    errors: BTreeMap<String, u64>,
    first_error: Option<QpError>,
    last_post: i128,
    last_completion: i128,
    longest_stall: Option<(u64, i128)>,
}

/// One rank's file as the story has it.
struct RankState {
    end: i128,
    is_final: bool,
    trigger: &'static str,
    qps: Vec<Qp>,
    rnr_naks: u64,
    retry_exceeded: u64,
}

const MS: i128 = 1_000_000;
const S: i128 = 1_000_000_000;

/// Channels of every rank's device.
const CHANNELS: usize = 4;

/// The job's layout: where each rank runs (host, NIC, pid) and whom it talks to.
struct Job<'a> {
    o: &'a GenOptions,
    /// Ranks per host.
    rph: usize,
    /// Each rank's peers.
    peers: Vec<Vec<usize>>,
}

impl<'a> Job<'a> {
    /// Lays the job out: each rank's peers on the rail (see the module's doc).
    fn new(o: &'a GenOptions) -> Self {
        let rph = o.ranks_per_host;
        let n_hosts = o.ranks.div_ceil(rph);
        let partners = |r: usize| -> Vec<usize> {
            if n_hosts == 1 {
                return (0..o.ranks).filter(|&x| x != r).collect();
            }
            let (h, l) = (r / rph, r % rph);
            let mut v = BTreeSet::new();
            for dh in [1, 2, n_hosts - 1, n_hosts.saturating_sub(2)] {
                let h2 = (h + dh) % n_hosts;
                let x = h2 * rph + l;
                if h2 != h && x < o.ranks && dh % n_hosts != 0 {
                    v.insert(x);
                }
            }
            v.into_iter().collect()
        };
        let peers = (0..o.ranks).map(partners).collect();
        Job { o, rph, peers }
    }

    /// The host a rank runs on.
    fn host_of(&self, r: usize) -> usize {
        r / self.rph
    }

    /// The NIC a rank drives.
    fn dev_of(&self, r: usize) -> u32 {
        ((r % self.rph) % self.o.devices_per_rank.max(1)) as u32
    }

    /// A rank's process id.
    fn pid_of(r: usize) -> i64 {
        20_000 + (r as i64 * 7919) % 40_000
    }

    /// A host's name.
    fn hostname(h: usize) -> String {
        format!("gpu_node_{h:03}")
    }

    /// A rank's NIC address: its (GID, GID as IP) and its LID.
    fn nic(&self, r: usize) -> ((String, String), u64) {
        let (h, d) = (self.host_of(r), self.dev_of(r));
        (fabric_gid(h, d), (h * 16 + d as usize + 1) as u64)
    }

    /// A rank with peers, chosen by the seed.
    fn pick(&self, rng: &mut fastrand::Rng) -> usize {
        loop {
            let r = rng.usize(0..self.o.ranks);
            if !self.peers[r].is_empty() {
                break r;
            }
        }
    }

    /// The manifest's entry of an anomaly planted on rank `r` (on its link to `peer`).
    fn planted(&self, kind: Plant, r: usize, peer: Option<usize>, note: &str) -> Planted {
        let hostname = Self::hostname;
        Planted {
            kind,
            host: hostname(self.host_of(r)),
            pid: Self::pid_of(r),
            device_id: self.dev_of(r),
            file: format!(
                "rccl_telemetry_{}_1000_{}.json",
                hostname(self.host_of(r)),
                Self::pid_of(r)
            ),
            counter: Some(note.to_string()),
            peer: peer.map(|p| {
                let dev = crate::generate::roce_device_name(&self.o.hw_type, self.dev_of(p));
                format!("{}:{dev}", hostname(self.host_of(p)))
            }),
        }
    }
}

/// Writes the run of the one hang plant (of [`RunKind::Hang`]).
pub fn generate_hang(
    dir: &Path,
    o: &GenOptions,
    qps_per_peer: usize,
) -> Result<Vec<Planted>, String> {
    let plant = o.plants[0];
    if o.ranks < 2 || o.ranks_per_host == 0 {
        return Err("a hang needs --ranks >= 2 and --ranks-per-host >= 1".into());
    }
    if o.ranks_per_host > o.devices_per_rank.max(1) {
        return Err(format!("--peers gives every rank of a host its own NIC: --ranks-per-host {} needs --devices-per-rank >= {0}", o.ranks_per_host));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let job = Job::new(o);
    if job.peers.iter().all(|p| p.is_empty()) {
        return Err("no rank has a peer: give the run two hosts or two ranks on one".into());
    }

    let run_start: i128 = 1_796_209_200_000_000_000 + rng.i128(0..50 * MS); // 2026-12-02T11:00:00Z
    let t0 = run_start + 40 * S; // the moment it goes wrong
    let snap = t0 + 20 * S; // when the operator asks every rank for a snapshot (SIGUSR1)
    let final_end = run_start + 120 * S;
    let finals = plant == Plant::RecoveredHang;
    let mut st = healthy_ranks(
        &job,
        &mut rng,
        qps_per_peer,
        finals,
        if finals { final_end } else { snap },
    );
    let mut planted = Vec::new();
    let mut ctx = Plot {
        job: &job,
        st: &mut st,
        rng: &mut rng,
        t0,
        planted: &mut planted,
    };
    match plant {
        Plant::FrozenRank | Plant::TwoHangs => ctx.frozen(plant)?,
        Plant::StoppedPosting => ctx.stopped_posting(plant),
        Plant::DeadLink => ctx.dead_link(plant),
        Plant::RecoveredHang => ctx.recovered_hang(plant),
        Plant::Idle => ctx.idle(),
        p => return Err(format!("{p} is not a hang plant")),
    }

    for (rank, s) in st.iter().enumerate() {
        let f = rank_file(&job, rank, s, &mut rng, run_start);
        write_file(dir, &f)?;
    }
    super::write_planted(dir, &planted)?;
    Ok(planted)
}

/// Healthy defaults: every rank writes at the same moment (about `end`), every link busy
/// until then, `qps_per_peer` QPs on each.
fn healthy_ranks(
    job: &Job,
    rng: &mut fastrand::Rng,
    qps_per_peer: usize,
    finals: bool,
    end: i128,
) -> Vec<RankState> {
    let o = job.o;
    let mut next_qpn: Vec<u64> = (0..o.ranks).map(|_| 0x100 + rng.u64(0..0x4000)).collect();
    let mut st: Vec<RankState> = (0..o.ranks)
        .map(|_| RankState {
            end: end + rng.i128(0..300 * MS),
            is_final: finals,
            trigger: if finals { "exit" } else { "SIGUSR1" },
            qps: Vec::new(),
            rnr_naks: 0,
            retry_exceeded: 0,
        })
        .collect();
    for a in 0..o.ranks {
        for &b in &job.peers[a] {
            if b <= a {
                continue;
            }
            for k in 0..qps_per_peer {
                let (qa, qb) = (next_qpn[a], next_qpn[b]);
                next_qpn[a] += 1;
                next_qpn[b] += 1;
                let ch = (a + b + k) % CHANNELS;
                for (me, other, mine, theirs) in [(a, b, qa, qb), (b, a, qb, qa)] {
                    let end = st[me].end;
                    let post = end - rng.i128(0..200 * MS);
                    st[me].qps.push(Qp {
                        peer: other,
                        qpn: mine,
                        peer_qpn: theirs,
                        ch,
                        stalled_since: None,
                        outstanding: 0,
                        errors: BTreeMap::new(),
                        first_error: None,
                        last_post: post,
                        last_completion: (post + rng.i128(0..5 * MS)).min(end),
                        longest_stall: None,
                    });
                }
            }
        }
    }
    st
}

/// The plot of the story: the plant's changes to the healthy ranks, from `t0` on.
struct Plot<'a> {
    job: &'a Job<'a>,
    st: &'a mut Vec<RankState>,
    rng: &'a mut fastrand::Rng,
    /// The moment it goes wrong.
    t0: i128,
    planted: &'a mut Vec<Planted>,
}

impl Plot<'_> {
    /// Rank `f` stopped: its last file is an interval snapshot from just before.
    fn freeze(&mut self, f: usize) {
        let end = self.t0 - 300 * MS + self.rng.i128(0..100 * MS);
        self.st[f].end = end;
        self.st[f].trigger = "interval";
        for q in &mut self.st[f].qps {
            q.last_post = end - self.rng.i128(0..200 * MS);
            q.last_completion = (q.last_post + self.rng.i128(0..5 * MS)).min(end);
        }
    }

    /// `waiter`'s QPs towards `on` stall from `since` (RNR: the receiver posts no receives).
    fn stall_towards(&mut self, waiter: usize, on: usize, since: i128) {
        let end = self.st[waiter].end;
        let mut n = 0;
        for q in self.st[waiter].qps.iter_mut().filter(|q| q.peer == on) {
            let s = since + self.rng.i128(0..50 * MS);
            q.stalled_since = Some(s);
            q.outstanding = 6 + self.rng.u64(0..7);
            q.last_post = s;
            q.last_completion = s - self.rng.i128(0..MS);
            q.longest_stall = Some((((end - s) / MS) as u64, s));
            n += 1;
        }
        self.st[waiter].rnr_naks += 40 * n;
    }

    /// frozen_rank and two_hangs: frozen receivers, their peers stalled towards them (and
    /// with one, the ranks two away stalled towards those, later).
    fn frozen(&mut self, plant: Plant) -> Result<(), String> {
        let (job, t0) = (self.job, self.t0);
        let peers = &job.peers;
        let f1 = job.pick(self.rng);
        let mut frozen = vec![f1];
        if plant == Plant::TwoHangs {
            let near: BTreeSet<usize> = std::iter::once(f1)
                .chain(peers[f1].iter().copied())
                .flat_map(|x| std::iter::once(x).chain(peers[x].iter().copied()))
                .collect();
            let far: Vec<usize> = (0..job.o.ranks)
                .filter(|r| !near.contains(r) && !peers[*r].is_empty())
                .collect();
            if far.is_empty() {
                return Err("two_hangs needs two ranks that share no peer: --ranks-per-host >= 2 or 10 hosts".into());
            }
            frozen.push(far[self.rng.usize(0..far.len())]);
        }
        for &f in &frozen {
            self.freeze(f);
            self.planted
                .push(job.planted(plant, f, None, "frozen: its peers stall towards it"));
            for &p in &peers[f] {
                if !frozen.contains(&p) {
                    self.stall_towards(p, f, t0);
                }
            }
        }
        if plant == Plant::FrozenRank {
            // The hang spreads: ranks two away stall towards the waiting ranks, later.
            let first: BTreeSet<usize> = peers[f1].iter().copied().collect();
            for &p in &first {
                for &q in &peers[p] {
                    if q != f1 && !first.contains(&q) && self.rng.bool() {
                        self.stall_towards(q, p, t0 + 2 * S);
                    }
                }
            }
        }
        Ok(())
    }

    /// stopped_posting: a rank stops posting at t0, and its links go quiet ring by ring.
    fn stopped_posting(&mut self, plant: Plant) {
        let (job, t0) = (self.job, self.t0);
        let peers = &job.peers;
        let s = job.pick(self.rng);
        self.planted.push(job.planted(
            plant,
            s,
            None,
            "stopped posting: its links went quiet first",
        ));
        let first: BTreeSet<usize> = peers[s].iter().copied().collect();
        // Hops from the stopped rank: its links go quiet at t0, the next ring 1.5 s later, ...
        let dist: Vec<usize> = (0..job.o.ranks)
            .map(|r| {
                if r == s {
                    0
                } else if first.contains(&r) {
                    1
                } else if peers[r].iter().any(|x| first.contains(x)) {
                    2
                } else {
                    3
                }
            })
            .collect();
        // One of its peers drains those credits 700 ms (more than one check) after the others,
        // as a loaded host does: its side of the link goes quiet after the rest.
        let late = (peers[s].len() >= 2).then(|| peers[s][0]);
        for (r, rs) in self.st.iter_mut().enumerate() {
            for q in &mut rs.qps {
                let d = dist[r].min(dist[q.peer]);
                // The stopped rank posts last at t0; its peers a little later (the credits
                // it had given them), then they block too.
                let lag = if r == s { 0 } else { 15 * MS };
                let drain = if late == Some(r) && q.peer == s {
                    700 * MS
                } else {
                    0
                };
                let lag = lag + drain;
                let quiet = t0 + lag + [0, 1500, 3000, 4500][d] * MS + self.rng.i128(0..10 * MS);
                q.last_post = quiet;
                q.last_completion = quiet + self.rng.i128(0..5 * MS);
            }
        }
    }

    /// dead_link: RETRY_EXC_ERR then WR_FLUSH_ERR at both ends of one link, each end's
    /// writer snapshotting on its first error.
    fn dead_link(&mut self, plant: Plant) {
        let (job, t0) = (self.job, self.t0);
        let a = job.pick(self.rng);
        let b = job.peers[a][self.rng.usize(0..job.peers[a].len())];
        self.planted.push(job.planted(
            plant,
            a,
            Some(b),
            "RETRY_EXC_ERR then WR_FLUSH_ERR at both ends",
        ));
        let (st, rng) = (&mut *self.st, &mut *self.rng);
        for (me, other, at) in [(a, b, t0), (b, a, t0 + 150 * MS)] {
            let mut first_err = at;
            for q in st[me].qps.iter_mut().filter(|q| q.peer == other) {
                let e = at + rng.i128(0..10 * MS);
                first_err = first_err.min(e);
                let flushed = 4 + rng.u64(0..8);
                q.errors = BTreeMap::from([
                    ("RETRY_EXC_ERR".to_string(), 1),
                    ("WR_FLUSH_ERR".to_string(), flushed),
                ]);
                q.first_error = Some(QpError {
                    status: "RETRY_EXC_ERR".into(),
                    status_code: 12,
                    vendor_err: 0x81,
                    time: format_timestamp_ns(e),
                    opcode: Some("RDMA_WRITE".into()),
                    bytes: Some(262_144),
                    age_ms: Some(7_516),
                });
                // The failed WR waited out seven retries: a stall that the error ended.
                let stall = e - 7_516 * MS;
                q.last_post = stall + rng.i128(0..20 * MS);
                q.last_completion = stall - rng.i128(0..MS);
                q.longest_stall = Some((7_516, stall));
                q.outstanding = 0;
            }
            st[me].retry_exceeded += st[me].qps.iter().filter(|q| q.peer == other).count() as u64;
            // The writer's snapshot on the first error.
            let end = first_err + 20 * MS + rng.i128(0..20 * MS);
            st[me].end = end;
            st[me].trigger = "cq_error";
            for q in &mut st[me].qps {
                q.last_post = q.last_post.min(end);
                q.last_completion = q.last_completion.min(end);
            }
        }
    }

    /// recovered_hang: the QPs towards one rank stalled 7.5 s on RNR from t0 and recovered.
    fn recovered_hang(&mut self, plant: Plant) {
        let job = self.job;
        let r = job.pick(self.rng);
        self.planted
            .push(job.planted(plant, r, None, "recovered: no root"));
        for &p in &job.peers[r] {
            let mut n = 0;
            for q in self.st[p].qps.iter_mut().filter(|q| q.peer == r) {
                q.longest_stall = Some((7_500, self.t0));
                n += 1;
            }
            self.st[p].rnr_naks += 40 * n;
        }
    }

    /// idle: everyone finished a phase at t0 and waits at a host-side barrier.
    fn idle(&mut self) {
        for s in self.st.iter_mut() {
            for q in &mut s.qps {
                q.last_post = self.t0 + self.rng.i128(0..150 * MS);
                q.last_completion = q.last_post + self.rng.i128(0..5 * MS);
            }
        }
    }
}

/// What a rank's device adds up to, gathered one QP at a time.
struct DeviceTally {
    channels: Vec<Channel>,
    /// Per peer rank: its QPs and their summed log-scale histogram.
    peer_hists: BTreeMap<usize, (u64, Vec<LogBucket>)>,
    tx: u64,
    rx: u64,
    outstanding: u64,
    stalled: u64,
    by_status: BTreeMap<String, u64>,
}

/// Bytes of a WQE.
const HANG_WQE_SIZE: u64 = 256 * 1024;

impl DeviceTally {
    /// Adds QP `i` of the story: its completions (drawn), counters and version-4 keys, into
    /// its channel.
    fn add_qp(&mut self, job: &Job, i: usize, q: &Qp, rng: &mut fastrand::Rng) {
        let o = job.o;
        let n = 300 + rng.u64(0..40);
        let samples: Vec<u64> = (0..n)
            .map(|_| (9_000.0 * (0.15 * noise(rng)).exp()) as u64)
            .collect();
        let lh = log_hist_of(&samples);
        let width = o.interval_ns.max(1);
        let mut lin = vec![0u64; o.buckets.max(1)];
        let top = lin.len() - 1;
        for &x in &samples {
            lin[((x / width) as usize).min(top)] += 1;
        }
        let errs: u64 = q.errors.values().sum();
        let sent = n + q.outstanding + errs;
        let ph = self.peer_hists.entry(q.peer).or_insert((0, Vec::new()));
        ph.0 += 1;
        add_log_hist(&mut ph.1, &lh);
        self.tx += sent * HANG_WQE_SIZE;
        self.rx += n * HANG_WQE_SIZE;
        for (k, v) in &q.errors {
            *self.by_status.entry(k.clone()).or_default() += v;
        }
        let ((pg, pip), plid) = job.nic(q.peer);
        let is_stalled = q.stalled_since.is_some();
        self.outstanding += q.outstanding;
        self.stalled += u64::from(is_stalled);
        let qp = QueuePair {
            id: i as u64,
            role: Some("data".into()),
            counters: Counters {
                num_wqe_sent: sent,
                num_recv_wqe: n / 8,
                // Every completion polled: the sends' and the receives'.
                num_wqe_rcvd: n + n / 8,
                num_wqe_completed: n,
                num_write_wqe: sent - sent / 8,
                num_write_imm_wqe: sent / 8,
                wqe_completion_ns_min: *samples.iter().min().unwrap_or(&0) as i64,
                wqe_completion_ns_max: *samples.iter().max().unwrap_or(&0) as i64,
                wqe_completion_histogram: lin,
                ..Default::default()
            },
            qp_num: Some(q.qpn),
            peer: Some(QpPeer {
                qp_num: q.peer_qpn,
                gid: Some(pg.into()),
                gid_ip: Some(pip.into()),
                lid: Some(plid),
            }),
            num_wqe_outstanding: Some(q.outstanding),
            stalled: Some(is_stalled),
            stalled_since: q.stalled_since.map(|t| format_timestamp_ns(t).into()),
            longest_stall_ms: Some(q.longest_stall.map_or(0, |l| l.0)),
            longest_stall_start: q.longest_stall.map(|l| format_timestamp_ns(l.1).into()),
            cq_errors: Some(Box::new(q.errors.clone())),
            first_cq_error: q.first_error.clone().map(Box::new),
            qp_state: q.first_error.as_ref().map(|_| "ERR".into()),
            last_post_time: Some(format_timestamp_ns(q.last_post).into()),
            last_completion_time: Some(format_timestamp_ns(q.last_completion).into()),
            ..Default::default()
        };
        let ch = &mut self.channels[q.ch];
        ch.num_data_qp += 1;
        add_log_hist(
            ch.wqe_completion_log_histogram.get_or_insert_with(Vec::new),
            &lh,
        );
        ch.queue_pairs.push(qp);
    }
}

/// A rank's hardware counters: zeros but the RNR and retry errors of the story.
fn hang_hw(s: &RankState) -> BTreeMap<String, HwValue> {
    let mut hw = BTreeMap::new();
    for k in hw_names(Kind::Scalar) {
        hw.insert(k.to_string(), HwValue::Scalar(0));
    }
    hw.insert(
        "rnr_nak_retry_err".into(),
        HwValue::Scalar(s.rnr_naks as i64),
    );
    hw.insert(
        "retry_exceeded_err".into(),
        HwValue::Scalar(s.retry_exceeded as i64),
    );
    hw.insert(
        "local_ack_timeout_err".into(),
        HwValue::Scalar(7 * s.retry_exceeded as i64),
    );
    hw
}

/// One rank's file: its device (NIC `dev_of(rank)`), channels, QPs with every version-4 key.
fn rank_file(
    job: &Job,
    rank: usize,
    s: &RankState,
    rng: &mut fastrand::Rng,
    run_start: i128,
) -> TelemetryFile {
    let o = job.o;
    let (my_gid, my_lid) = job.nic(rank);
    let dev_id = ((rank % o.ranks_per_host) % o.devices_per_rank.max(1)) as u32;
    let mut t = DeviceTally {
        channels: (0..CHANNELS)
            .map(|c| Channel {
                id: Some(c as u64),
                ..Default::default()
            })
            .collect(),
        peer_hists: BTreeMap::new(),
        tx: 0,
        rx: 0,
        outstanding: 0,
        stalled: 0,
        by_status: BTreeMap::new(),
    };
    for (i, q) in s.qps.iter().enumerate() {
        t.add_qp(job, i, q, rng);
    }
    let mut channels = t.channels;
    for ch in &mut channels {
        ch.counters = counters_from_qps(&ch.queue_pairs, false);
        if ch.queue_pairs.is_empty() {
            ch.counters.wqe_completion_histogram = vec![0; o.buckets.max(1)];
        }
        ch.num_req_completed = ch.counters.num_recv_wqe;
        ch.wqe_completion_log_histogram.get_or_insert_with(Vec::new);
    }
    let mut dev_log = Vec::new();
    for ch in &channels {
        add_log_hist(
            &mut dev_log,
            ch.wqe_completion_log_histogram.as_deref().unwrap_or(&[]),
        );
    }
    let peers = t
        .peer_hists
        .into_iter()
        .map(|(pr, (nq, h))| {
            let ((g, ip), lid) = job.nic(pr);
            DevicePeer {
                gid: Some(g.into()),
                gid_ip: Some(ip.into()),
                lid: Some(lid),
                num_qps: nq,
                wqe_completion_log_histogram: Some(h),
            }
        })
        .collect();
    let qp_count = s.qps.len() as u64;
    let (tx, wqe_size) = (t.tx, HANG_WQE_SIZE);
    let dev = Device {
        device_id: dev_id,
        roce_device: crate::generate::roce_device_name(&o.hw_type, dev_id),
        eth_device: format!("enp{}s0f0", 12 + dev_id * 16),
        hw_type: o.hw_type.clone(),
        tx_bytes: tx,
        rx_bytes: t.rx,
        num_cq_errors: t.by_status.values().sum(),
        cq_poll_count: qp_count * 900,
        num_channels: Some(CHANNELS as u64),
        active_channels: channels
            .iter()
            .filter(|c| !c.queue_pairs.is_empty())
            .count() as u64,
        wqe_size_stats: vec![crate::model::WqeSizeStat {
            max_wqe_size: wqe_size,
            num_wqe: (tx / wqe_size).max(1),
        }],
        channels,
        hw_counters: hang_hw(s).into(),
        wqe_completion_log_histogram: Some(dev_log),
        port: Some(1),
        gid_index: Some(3),
        gid: Some(my_gid.0),
        gid_ip: Some(my_gid.1),
        lid: Some(my_lid),
        peers: Some(peers),
        num_wqe_outstanding: Some(t.outstanding),
        num_qps_stalled: Some(t.stalled),
        cq_errors_by_status: Some(t.by_status),
        ..Default::default()
    };
    TelemetryFile {
        format: crate::model::SourceFormat::V4,
        version: 4,
        host_name: Job::hostname(job.host_of(rank)),
        process_name: "all_reduce_perf".into(),
        process_id: Job::pid_of(rank),
        start_time: format_timestamp_ns(run_start + rng.i128(0..50 * MS)),
        end_time: format_timestamp_ns(s.end),
        is_final: Some(s.is_final),
        trigger: Some(s.trigger.into()),
        transport: Some("IB-CAST".into()),
        histogram_interval_ns: o.interval_ns.max(1),
        devices: vec![dev],
        stall_ms: Some(1000),
        ..Default::default()
    }
}
