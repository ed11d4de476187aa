//! `generate --as-nccl-log`: the debug logs (`NCCL_DEBUG=INFO`, `NCCL_DEBUG_FILE=nccl.%h.%p`)
//! an RCCL job with the WQE latency monitor on (`NCCL_IB_WQE_LATENCY_THRESHOLD_NS`) writes, one
//! per rank, for `import`'s tests and bench.
//!
//! Rank r is on host r / ranks_per_host and drives NIC mlx5_(r % ranks_per_host); it holds
//! `qps_per_peer` send QPs to each rank of the other hosts on its rail, and as many receive QPs
//! from each. Each line is in the words of NCCL's and RCCL's format strings, with the noise
//! lines a real log has around them (bootstrap, channels, a `NET/IB` line `import` does not
//! read). Every send QP's slowest completions cross the threshold, so each logs a `WQE slow`
//! line naming both ends; every QP logs its `WQE latency summary` at the end. Plants:
//! `slow_link` (one NIC pair's completions eight times slower, both ways) and `cq_errors` (a
//! RETRY_EXC_ERR completion on each end of one link: one in NCCL's newer form, with the QPN,
//! the other in the older one after its `Got CQE with error` line).

use super::{Plant, Planted};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// The monitor's threshold in the generated logs (ns).
pub const THRESHOLD_NS: u64 = 30_000;

/// The options `--as-nccl-log` takes.
#[derive(Debug, Clone)]
pub struct LogOptions {
    pub ranks: usize,
    pub ranks_per_host: usize,
    pub seed: u64,
    pub qps_per_peer: usize,
    pub plants: Vec<Plant>,
    /// Noise lines between the ones `import` reads, per rank (for the bench's big logs).
    pub filler: usize,
}

/// The plants a log can carry.
pub const LOG_PLANTS: [Plant; 2] = [Plant::SlowLink, Plant::CqErrors];

fn host(h: usize) -> String {
    format!("gpu-node-{h:03}")
}

fn pid(rank: usize) -> u32 {
    41_000 + rank as u32 * 7
}

/// The OOB address of host h.
fn oob(h: usize) -> String {
    format!("10.0.{}.{}", h / 250, h % 250 + 1)
}

/// The GID of NIC l of host h (RoCE v2, IPv4-mapped), as inet_ntop prints it.
fn gid(h: usize, l: usize) -> String {
    format!("::ffff:192.168.{}.{}", l, h % 250 + 1)
}

/// The QPN of the q-th QP of rank a towards rank b, send or receive side.
fn qpn(a: usize, b: usize, q: usize, send: bool, o: &LogOptions) -> u32 {
    let per = o.qps_per_peer * 2;
    0x100 + ((b * per + q * 2 + usize::from(!send)) as u32) + (a as u32 % 7) * 0x10000
}

struct Ts(i64);

impl Ts {
    /// `[2026-12-07 10:00:05] ` (NCCL's default timestamp, on WARN lines by default).
    fn text(&self) -> String {
        let s = crate::model::format_timestamp_ns(self.0 as i128 * 1_000_000_000);
        format!("[{} {}] ", &s[..10], &s[11..19])
    }
}

/// 2026-12-07 10:00:00 UTC.
const T0: i64 = 1_796_637_600;

#[derive(Clone, Copy)]
struct Lat {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    mean: f64,
    std: f64,
}

fn lat(rng: &mut fastrand::Rng, slow: bool) -> Lat {
    let k = if slow { 8.0 } else { 1.0 };
    let p50 = (8_000.0 + rng.f64() * 800.0) * k;
    let p90 = p50 * (1.25 + rng.f64() * 0.1);
    let p99 = p50 * (2.2 + rng.f64() * 0.4);
    let p999 = p50 * (3.5 + rng.f64() * 0.5);
    let max = p50 * (5.0 + rng.f64());
    Lat {
        p50,
        p90,
        p99,
        p999,
        max,
        mean: p50 * 1.1,
        std: p50 * 0.3,
    }
}

/// One generated job: who talks to whom, the planted link, every send QP's figures.
struct Job<'a> {
    o: &'a LogOptions,
    hosts: usize,
    link: Option<(usize, usize)>,
    slow: bool,
    errs: bool,
    comm_id: u64,
    figs: HashMap<(usize, usize, usize), Lat>,
}

/// A rank's names: host, pid, NIC index, and its lines' prefix for a thread.
struct Me {
    r: usize,
    h: usize,
    l: usize,
    host: String,
    pid: u32,
}

impl Me {
    fn pre(&self, tid: u32) -> String {
        format!("{}:{}:{tid} [{}] ", self.host, self.pid, self.l)
    }
}

impl Job<'_> {
    fn h_of(&self, r: usize) -> usize {
        r / self.o.ranks_per_host
    }

    fn l_of(&self, r: usize) -> usize {
        r % self.o.ranks_per_host
    }

    /// A rank's peers: the ranks of the other hosts on its rail.
    fn peers(&self, r: usize) -> Vec<usize> {
        (0..self.o.ranks)
            .filter(|&p| self.h_of(p) != self.h_of(r) && self.l_of(p) == self.l_of(r))
            .collect()
    }

    fn is_link(&self, a: usize, b: usize) -> bool {
        self.link
            .is_some_and(|(x, y)| (a, b) == (x, y) || (a, b) == (y, x))
    }

    /// The lines before the run: bootstrap, NICs, the communicator, channels, noise.
    fn header(&self, s: &mut String, m: &Me) {
        let (o, r, l, main) = (self.o, m.r, m.l, m.pid);
        let rph = o.ranks_per_host;
        let _ = writeln!(
            s,
            "{}NCCL INFO Bootstrap : Using eth0:{}<0>",
            m.pre(main),
            oob(m.h)
        );
        let _ = writeln!(s, "{}NCCL INFO cudaDriverVersion 12080", m.pre(main));
        let nics: Vec<String> = (0..rph).map(|i| format!("[{i}]mlx5_{i}:1/RoCE")).collect();
        let _ = writeln!(
            s,
            "{}NCCL INFO NET/IB : Using {} [RO]; OOB eth0:{}<0>",
            m.pre(main),
            nics.join(" "),
            oob(m.h)
        );
        let comm = format!("0x{:x}", 0x5600_0000_0000u64 + r as u64 * 0x1000);
        let busid = format!("{:x}000", 0x1b + l * 0x10);
        for what in ["Init START", "Init COMPLETE"] {
            let _ = writeln!(
                s,
                "{}NCCL INFO ncclCommInitRank comm {comm} rank {r} nranks {n} cudaDev {l} nvmlDev {l} busId {busid} commId 0x{id:x} - {what}",
                m.pre(main),
                n = o.ranks,
                id = self.comm_id
            );
        }
        let _ = writeln!(
            s,
            "{}NCCL INFO comm {comm} rank {r} nRanks {n} nNodes {hosts} localRanks {rph} localRank {l} MNNVL 0",
            m.pre(main),
            n = o.ranks,
            hosts = self.hosts
        );
        for (c, b) in self.peers(r).into_iter().enumerate() {
            let _ = writeln!(
                s,
                "{}NCCL INFO Channel {c:02}/0 : {r}[{l}] -> {b}[{l}] [send] via NET/IB/{l}(1)/GDRDMA",
                m.pre(m.pid + 3)
            );
        }
        for i in 0..o.filler {
            let _ = writeln!(
                s,
                "{}NCCL INFO Connected all rings, use ring PXN 0 GDR 1 step {i}",
                m.pre(main)
            );
        }
    }

    /// Each send QP's `WQE slow` lines (five on a QP whose p99 is above the threshold).
    fn slow_lines(&self, s: &mut String, m: &Me, t: &mut i64) {
        let (o, thr) = (self.o, THRESHOLD_NS);
        for b in self.peers(m.r) {
            let (hb, lb) = (self.h_of(b), self.l_of(b));
            for q in 0..o.qps_per_peer {
                let f = self.figs[&(m.r, b, q)];
                let lines = if f.p99 > thr as f64 { 5 } else { 1 };
                for k in 0..lines {
                    *t += 1;
                    let delta = f.max.max(thr as f64 + 1.0) as u64 - k as u64 * 7;
                    let post = 1_000_000_000u64 * (*t - T0) as u64;
                    let _ = writeln!(
                        s,
                        "{}NCCL INFO NET/IB-CAST: WQE slow: peer={}<{}> | local: qpn={} dev=mlx5_{} port=1 lid=0 localGid={} | remote: qpn={} port=1 lid=0 remoteGid={} | thr={thr} delta={delta} mean={:.1} stddev={:.1} p50={:.0} p90={:.0} p99={:.0} p99.9={:.0} max={:.0} count={} | t_post={post} t_poll={}",
                        m.pre(m.pid + 3),
                        oob(hb),
                        43_000 + b,
                        qpn(m.r, b, q, true, o),
                        m.l,
                        gid(m.h, m.l),
                        qpn(b, m.r, q, false, o),
                        gid(hb, lb),
                        f.mean, f.std, f.p50, f.p90, f.p99, f.p999, f.max,
                        1000 * (k + 1),
                        post + delta,
                    );
                }
            }
        }
    }

    /// The planted error completion of an end of the link: the newer form on its first rank,
    /// the older one after its CQE line on the other.
    fn errors(&self, s: &mut String, m: &Me, t: &mut i64) -> Option<Planted> {
        let (a, b) = self
            .link
            .filter(|&(a, b)| self.errs && (m.r == a || m.r == b))?;
        let other = if m.r == a { b } else { a };
        let (ho, lo) = (self.h_of(other), self.l_of(other));
        let q = qpn(m.r, other, 0, true, self.o);
        *t += 1;
        let ts = Ts(*t).text();
        let pre = m.pre(m.pid + 3);
        let peer = format!("{}<{}>", oob(ho), 43_000 + other);
        let (lg, rg) = (gid(m.h, m.l), gid(ho, lo));
        if m.r == a {
            let _ = writeln!(
                s,
                "\n{ts}{pre}p2p.cc:688 NCCL WARN NET/IB-CAST: Got completion from peer {peer} with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 qp_num={q}  localGid {lg} remoteGids{rg} hca mlx5_{}",
                m.l
            );
        } else {
            let _ = writeln!(
                s,
                "\n{ts}{pre}p2p.cc:854 (ncclIbTest) NCCL WARN NET/IB-CAST: Got CQE with error (devIndex=0, req=0x7f00c0, comm=0x7f00d0 (send), wr_id=17, qp_num={q})"
            );
            let _ = writeln!(
                s,
                "\n{ts}{pre}net_ib.cc:1985 NCCL WARN NET/IB-CAST : Got completion from peer {peer} with status=12 opcode=1 len=0 vendor err 129 (Send) localGid {lg} remoteGids {rg}"
            );
        }
        Some(Planted {
            kind: Plant::CqErrors,
            host: m.host.clone(),
            pid: i64::from(m.pid),
            device_id: m.l as u32,
            file: log_name(&m.host, m.pid),
            counter: Some("RETRY_EXC_ERR".into()),
            peer: Some(format!("{}:mlx5_{lo}", host(ho))),
        })
    }

    /// Every QP's `WQE latency summary`, send and receive.
    fn summaries(&self, s: &mut String, m: &Me, rng: &mut fastrand::Rng) {
        let (o, thr) = (self.o, THRESHOLD_NS);
        let pre = m.pre(m.pid + 3);
        for b in self.peers(m.r) {
            let ob = oob(self.h_of(b));
            for q in 0..o.qps_per_peer {
                let f = self.figs[&(m.r, b, q)];
                let n = 20_000 + rng.u64(0..2_000);
                let slow_n = (n as f64 * if f.p99 > thr as f64 { 0.02 } else { 0.001 }) as u64;
                let _ = writeln!(
                    s,
                    "{pre}NCCL INFO NET/IB-CAST: WQE latency summary [send peer={ob}<{}> dev=mlx5_{} qpn={} port=1]: n={n} slow={slow_n} thr={thr}ns | post-to-poll ns: mean={:.1} std={:.1} p50={:.0} p90={:.0} p99={:.0} p99.9={:.0} max={:.0}",
                    43_000 + b,
                    m.l,
                    qpn(m.r, b, q, true, o),
                    f.mean, f.std, f.p50, f.p90, f.p99, f.p999, f.max,
                );
                let _ = writeln!(
                    s,
                    "{pre}NCCL INFO NET/IB-CAST: WQE latency summary [recv peer={ob}<{}> dev=mlx5_{} qpn={} port=1]: n={n} slow=0 thr={thr}ns | post-to-poll ns: mean=15000.0 std=2000.0 p50=14000 p90=18000 p99=22000 p99.9=25000 max=28000",
                    52_000 + b,
                    m.l,
                    qpn(m.r, b, q, false, o),
                );
            }
        }
    }
}

/// Writes the logs into `dir` (nccl.<host>.<pid>.log); returns what was planted where.
pub fn generate_logs(dir: &Path, o: &LogOptions) -> Result<Vec<Planted>, String> {
    if o.ranks == 0 || o.ranks_per_host == 0 || o.qps_per_peer == 0 {
        return Err("--ranks, --ranks-per-host and --qps-per-peer must be at least 1".into());
    }
    if let Some(p) = o.plants.iter().find(|p| !LOG_PLANTS.contains(p)) {
        return Err(format!(
            "{p} cannot be planted in a log; --as-nccl-log takes {}",
            Plant::names(&LOG_PLANTS)
        ));
    }
    let hosts = o.ranks.div_ceil(o.ranks_per_host);
    if hosts < 2 && !o.plants.is_empty() {
        return Err("a plant needs ranks on two hosts at least".into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let mut job = Job {
        o,
        hosts,
        link: None,
        slow: o.plants.contains(&Plant::SlowLink),
        errs: o.plants.contains(&Plant::CqErrors),
        comm_id: rng.u64(1..u64::MAX),
        figs: HashMap::new(),
    };
    // The planted link: rank 0 and the first rank of the last host on its rail.
    job.link = job.peers(0).last().map(|&b| (0usize, b));
    // Every send QP's figures, drawn once.
    for a in 0..o.ranks {
        for b in job.peers(a) {
            for q in 0..o.qps_per_peer {
                let f = lat(&mut rng, job.slow && job.is_link(a, b));
                job.figs.insert((a, b, q), f);
            }
        }
    }
    let mut planted = Vec::new();
    for r in 0..o.ranks {
        let m = Me {
            r,
            h: job.h_of(r),
            l: job.l_of(r),
            host: host(job.h_of(r)),
            pid: pid(r),
        };
        let mut s = String::new();
        let mut t = T0;
        job.header(&mut s, &m);
        // The run: the slow lines of each send QP, then the errors, then the summaries.
        job.slow_lines(&mut s, &m, &mut t);
        planted.extend(job.errors(&mut s, &m, &mut t));
        if let Some((_, b)) = job.link.filter(|&(a, _)| job.slow && a == r) {
            planted.push(Planted {
                kind: Plant::SlowLink,
                host: m.host.clone(),
                pid: i64::from(m.pid),
                device_id: m.l as u32,
                file: log_name(&m.host, m.pid),
                counter: None,
                peer: Some(format!("{}:mlx5_{}", host(job.h_of(b)), job.l_of(b))),
            });
        }
        job.summaries(&mut s, &m, &mut rng);
        let path = dir.join(log_name(&m.host, m.pid));
        std::fs::write(&path, s).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let manifest =
        serde_json::to_string_pretty(&planted).map_err(|e| format!("cannot serialise: {e}"))?;
    std::fs::write(dir.join("planted.json"), manifest + "\n")
        .map_err(|e| format!("cannot write planted.json: {e}"))?;
    Ok(planted)
}

/// The file a rank's log is in (`NCCL_DEBUG_FILE=nccl.%h.%p.log`).
pub fn log_name(host: &str, pid: u32) -> String {
    format!("nccl.{host}.{pid}.log")
}
