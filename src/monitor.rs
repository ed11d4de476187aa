//! The WQE latency monitor: NCCL's and RCCL's per-QP monitor (`NCCL_IB_WQE_LATENCY_THRESHOLD_NS`,
//! net_ib's wqe_lat_mon.cc and RCCL's IB-CAST port of it) over every measured WR, not one
//! tracked WR per QP at a time as upstream samples.
//!
//! The data path does the least it can (see `counters::RcclQpStats::monitor` and the header's
//! `rcclTelemetryMonitor_`): while the threshold is set it adds each measured latency to the
//! QP's running sum and sum of squares and to the QP's own log-scale counts, and a latency
//! above the threshold bumps the slow count and leaves its latency and posting token in the
//! slot. Everything else happens here, off the data path: the exact mean and sample standard
//! deviation from the sums, the quantiles from the counts (a bucket is at most 1/8 of its
//! lower bound wide; its midpoint, kept within the QP's min and max, is within 1/16 of any
//! value in it), and the three upstream lines, each at most once per QP per second:
//!
//! - "WQE slow": the writer thread's tick ([`tick`]) sees a QP's slow count move;
//! - "WQE stall (no CQE)": the tick sees the stall detector hold the QP stalled;
//! - "WQE latency summary": for each QP with measured completions, when its communicator
//!   finalizes, and at the final write (rcclTelemetryFlush or exit); off with
//!   NCCL_IB_WQE_LATENCY_REPORT=0.
//!
//! The lines go to RCCL's logger at INFO with the NET subsystem, and to stderr only under
//! RCCL_TELEMETRY_DEBUG (`diag::monitor`). With the threshold unset none of this runs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::counters::RcclQpStats;
use crate::loghist::{bucket_bounds, LOG_BUCKETS};
use crate::registry::{self, Channel};
use crate::{diag, latency, peers, stall_detector};

/// The prefix of the lines: RCCL's IB-CAST transport's, so that its log greps match ours.
pub const PREFIX: &str = "NET/IB-CAST:";

/// At most one line of each kind per QP per this many ns (upstream's kReportIntervalNs).
pub const LINE_INTERVAL_NS: u64 = 1_000_000_000;

/// The quantiles the monitor reports, as upstream's P² estimators: p50, p90, p99, p99.9.
pub const QUANTILES: [f64; 4] = [0.50, 0.90, 0.99, 0.999];

static REPORT: AtomicBool = AtomicBool::new(true);

/// Sets the threshold (0: the monitor is off) and whether summaries are said; at Init, before
/// any slot is reserved (a slot copies the threshold when it is reserved, so the registry
/// holds it).
pub fn configure(slow_ns: u64, report: bool) {
    registry::set_slow_ns(slow_ns);
    REPORT.store(report, Relaxed);
}

/// The threshold in ns; 0 while the monitor is off.
pub fn slow_ns() -> u64 {
    registry::slow_ns()
}

/// One QP's monitor statistics, as upstream's `ncclIbWqeLatStats` (over every measured WR).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Measured completions.
    pub count: u64,
    pub slow: u64,
    pub mean_ns: f64,
    /// Sample standard deviation (n - 1); 0 with one completion.
    pub stddev_ns: f64,
    /// p50, p90, p99, p99.9 in ns.
    pub quantiles_ns: [u64; 4],
    pub max_ns: u64,
}

/// Mean and sample standard deviation from the count, the sum and the sum of squares: the
/// variance's numerator n·Σx² − (Σx)² is exact in 128 bits while it fits (latencies below
/// 2^32 ns and fewer than 2^32 of them), else computed in floating point.
pub fn mean_stddev(n: u64, sum: u64, sq: u128) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = sum as f64 / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let s2 = u128::from(sum) * u128::from(sum);
    let var = match sq.checked_mul(u128::from(n)) {
        Some(nsq) => nsq.saturating_sub(s2) as f64 / (n as f64 * (n - 1) as f64),
        None => ((sq as f64 - (sum as f64) * mean) / (n - 1) as f64).max(0.0),
    };
    (mean, var.sqrt())
}

/// The nearest-rank quantile `p` of log-scale counts (`counts[i]` values in bucket i): the
/// midpoint of the bucket that holds the ceil(p·n)-th smallest value, kept within [min, max].
pub fn quantile(counts: &[u64], n: u64, p: f64, min: u64, max: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let rank = ((p * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (lo, hi) = bucket_bounds(i);
            let mid = if i + 1 == counts.len() {
                max
            } else {
                lo + (hi - lo) / 2
            };
            return mid.clamp(min, max.max(min));
        }
    }
    max
}

/// The monitor's statistics of slot `q`; None while the monitor is off for it or nothing was
/// measured on it.
pub fn stats(q: &RcclQpStats) -> Option<Stats> {
    let h = q.mon_hist()?;
    let mut counts = [0u64; LOG_BUCKETS];
    for (c, a) in counts.iter_mut().zip(&h.0) {
        *c = a.load(Relaxed);
    }
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let sum = q.mon_sum.load(Relaxed);
    let sq = u128::from(q.mon_sq_hi.load(Relaxed)) << 64 | u128::from(q.mon_sq_lo.load(Relaxed));
    let (mean_ns, stddev_ns) = mean_stddev(n, sum, sq);
    let s = q.snapshot();
    let (min, max) = if s.lat_min >= 0 {
        (s.lat_min as u64, s.lat_max.max(s.lat_min) as u64)
    } else {
        (0, u64::MAX)
    };
    Some(Stats {
        count: n,
        slow: q.slow.load(Relaxed),
        mean_ns,
        stddev_ns,
        quantiles_ns: QUANTILES.map(|p| quantile(&counts, n, p, min, max)),
        max_ns: if s.lat_max >= 0 { s.lat_max as u64 } else { 0 },
    })
}

// ------------------------------------------------------------------------------ the lines

/// What a line says of a QP and its peer (upstream's `peerInfo`, from what the transport told).
struct Ends {
    /// Upstream prints the peer's socket ip:port; we print the address the peer's GID encodes,
    /// else its LID, else "?".
    peer: String,
    dev: String,
    qpn: u32,
    port: u8,
    lid: u16,
    local_gid: String,
    remote_qpn: u32,
    /// The peer's port: not told by the transport, so 0 (as upstream prints it when unknown).
    remote_port: u8,
    remote_lid: u16,
    remote_gid: String,
}

fn gid_text(g: Option<[u8; 16]>) -> String {
    peers::nonzero(g).map_or_else(String::new, |g| std::net::Ipv6Addr::from(g).to_string())
}

fn ends(dev: u32, c: &Channel, i: u64) -> Ends {
    let d = registry::device(dev as i32);
    let local = peers::dev_local(dev);
    let info = c.peers.qp(i).unwrap_or_default();
    let remote = info.peer;
    let rgid = remote.and_then(|r| peers::nonzero(r.gid));
    let peer = match (rgid.as_ref().and_then(peers::gid_addr), remote) {
        (Some(a), _) => a.to_string(),
        (None, Some(r)) if r.lid != 0 => format!("lid{}", r.lid),
        _ => "?".to_owned(),
    };
    Ends {
        peer,
        dev: d.map_or_else(|| "?".to_owned(), |d| d.roce_device.clone()),
        qpn: info.qp_num.unwrap_or(0),
        port: info.port.or(local.port).unwrap_or(0),
        lid: if info.local_lid != 0 {
            info.local_lid
        } else {
            local.lid
        },
        local_gid: gid_text(info.local_gid.or(local.gid)),
        remote_qpn: remote.map_or(0, |r| r.qp_num),
        remote_port: 0,
        remote_lid: remote.map_or(0, |r| r.lid),
        remote_gid: gid_text(rgid),
    }
}

/// The part of the slow and stall lines that names both ends.
fn ends_text(e: &Ends) -> String {
    format!(
        "peer={} | local: qpn={} dev={} port={} lid={} localGid={} | remote: qpn={} port={} lid={} remoteGid={}",
        e.peer, e.qpn, e.dev, e.port, e.lid, e.local_gid, e.remote_qpn, e.remote_port, e.remote_lid, e.remote_gid
    )
}

/// "WQE slow": upstream's fields; t_post and t_poll in CLOCK_MONOTONIC ns.
fn slow_line(e: &Ends, thr: u64, delta: u64, s: &Stats, t_post: u64) -> String {
    let [p50, p90, p99, p999] = s.quantiles_ns;
    format!(
        "{PREFIX} WQE slow: {} | thr={thr}ns delta={delta}ns mean={:.0}ns stddev={:.0}ns p50={p50}ns p90={p90}ns p99={p99}ns p99.9={p999}ns max={}ns count={} | t_post={t_post} t_poll={}",
        ends_text(e),
        s.mean_ns,
        s.stddev_ns,
        s.max_ns,
        s.count,
        t_post + delta
    )
}

/// "WQE stall (no CQE)": the stall detector's threshold, how long the QP has waited, and the
/// WRs it has outstanding.
fn stall_line(e: &Ends, stall_thr_ns: u64, age_ns: u64, inflight: u64) -> String {
    format!(
        "{PREFIX} WQE stall (no CQE): {} | stall_thr={stall_thr_ns}ns age={age_ns}ns inflight={inflight}",
        ends_text(e)
    )
}

/// "WQE latency summary": `send` for a QP that posted sends, else `recv`.
fn summary_line(e: &Ends, send: bool, thr: u64, s: &Stats) -> String {
    let [p50, p90, p99, p999] = s.quantiles_ns;
    let mut l = String::new();
    let _ = write!(
        l,
        "{PREFIX} WQE latency summary [{} peer={} dev={} qpn={} port={}]: n={} slow={} thr={thr}ns | post-to-poll ns: mean={:.0} std={:.0} p50={p50} p90={p90} p99={p99} p99.9={p999} max={}",
        if send { "send" } else { "recv" },
        e.peer,
        e.dev,
        e.qpn,
        e.port,
        s.count,
        s.slow,
        s.mean_ns,
        s.stddev_ns,
        s.max_ns
    );
    l
}

/// Per QP (by slot address): the slow count last seen and when each kind of line was last said.
#[derive(Default, Clone, Copy)]
struct Said {
    slow_seen: u64,
    slow_at: Option<u64>,
    stall_at: Option<u64>,
    summary_at: Option<u64>,
}

static SAID: Mutex<Option<HashMap<usize, Said>>> = Mutex::new(None);

/// Whether a line last said at `last` may be said at `now` (and records it if so).
fn due(last: &mut Option<u64>, now: u64) -> bool {
    if last.is_some_and(|t| now.saturating_sub(t) < LINE_INTERVAL_NS) {
        return false;
    }
    *last = Some(now);
    true
}

/// The writer thread's tick (with the stall detector's): a "WQE slow" line for each QP whose
/// slow count moved, a "WQE stall (no CQE)" line for each QP the stall detector holds stalled,
/// each at most once per QP per second.
pub fn tick() {
    let thr = slow_ns();
    if thr == 0 {
        return;
    }
    let now = latency::monotonic_ns();
    let stall_ns = stall_detector::stall_ms().saturating_mul(1_000_000);
    let mut lines = Vec::new();
    {
        let _view = registry::read_view();
        let mut said = SAID.lock();
        let said = said.get_or_insert_with(HashMap::new);
        for d in registry::devices() {
            for c in d.channels() {
                let mut states = Vec::new();
                if stall_ns > 0 && stall_detector::channel_states(c, &mut states).is_err() {
                    states.clear();
                }
                for (i, q) in c.slots.iter() {
                    if q.mon_thr.load(Relaxed) == 0 {
                        continue;
                    }
                    let key = q as *const RcclQpStats as usize;
                    let slow = q.slow.load(Relaxed);
                    let st = states.get(i as usize).filter(|s| s.stalled());
                    let have = said.get(&key).copied();
                    let unmoved = match have {
                        Some(h) => h.slow_seen == slow,
                        None => slow == 0,
                    };
                    if unmoved && st.is_none() {
                        continue;
                    }
                    let s = said.entry(key).or_default();
                    if slow != s.slow_seen && due(&mut s.slow_at, now) {
                        s.slow_seen = slow;
                        if let Some(stats) = stats(q) {
                            let delta = q.slow_ns.load(Relaxed);
                            let post = q.slow_post.load(Relaxed) as i64;
                            let t_post = now.saturating_sub(latency::elapsed_ns(post));
                            lines.push(slow_line(&ends(d.id, c, i), thr, delta, &stats, t_post));
                        }
                    }
                    if let Some(st) = st {
                        if due(&mut s.stall_at, now) {
                            let age = now.saturating_sub(st.stall_start.unwrap_or(now));
                            lines.push(stall_line(
                                &ends(d.id, c, i),
                                stall_ns,
                                age,
                                st.outstanding,
                            ));
                        }
                    }
                }
            }
        }
    }
    for l in &lines {
        diag::monitor(l);
    }
}

/// The "WQE latency summary" lines of channel `c`'s QPs that measured completions (at most one
/// per QP per second). The caller holds the registry's view or the lifetime lock.
pub fn summaries_of(dev: u32, c: &Channel) {
    let thr = slow_ns();
    if thr == 0 || !REPORT.load(Relaxed) {
        return;
    }
    let now = latency::monotonic_ns();
    let mut lines = Vec::new();
    {
        let mut said = SAID.lock();
        let said = said.get_or_insert_with(HashMap::new);
        for (i, q) in c.slots.iter() {
            let Some(s) = stats(q) else { continue };
            let key = q as *const RcclQpStats as usize;
            let e = said.entry(key).or_default();
            if due(&mut e.summary_at, now) {
                let send = q.snapshot().wqe_sent > 0;
                lines.push(summary_line(&ends(dev, c, i), send, thr, &s));
            }
        }
    }
    for l in &lines {
        diag::monitor(l);
    }
}

/// The summaries of every QP (the final write: rcclTelemetryFlush or exit).
pub fn summaries() {
    if slow_ns() == 0 || !REPORT.load(Relaxed) {
        return;
    }
    let _view = registry::read_view();
    for d in registry::devices() {
        for c in d.channels() {
            summaries_of(d.id, c);
        }
    }
}

/// Forgets channel `c`'s QPs' line times (its slots go to another communicator's QPs).
pub fn forget(c: &Channel) {
    let mut said = SAID.lock();
    if let Some(said) = said.as_mut() {
        for (_, q) in c.slots.iter() {
            said.remove(&(q as *const RcclQpStats as usize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loghist::bucket_index;

    fn counts_of(values: &[(u64, u64)]) -> ([u64; LOG_BUCKETS], u64, u64, u128) {
        let mut c = [0u64; LOG_BUCKETS];
        let (mut n, mut sum, mut sq) = (0u64, 0u64, 0u128);
        for &(v, k) in values {
            c[bucket_index(v)] += k;
            n += k;
            sum += v * k;
            sq += u128::from(v) * u128::from(v) * u128::from(k);
        }
        (c, n, sum, sq)
    }

    #[test]
    fn two_modes_give_the_modes_as_p50_and_p99() {
        // 200 completions of 20 us and 50 of 1 ms: the distribution.
        let (c, n, sum, sq) = counts_of(&[(20_000, 200), (1_000_000, 50)]);
        let q = QUANTILES.map(|p| quantile(&c, n, p, 20_000, 1_000_000));
        assert_eq!(q, [20_000, 1_000_000, 1_000_000, 1_000_000]);
        let (mean, sd) = mean_stddev(n, sum, sq);
        assert_eq!(mean, 216_000.0);
        // Sample stddev of 200 x 20000 and 50 x 1e6: sqrt(sum((x - mean)^2) / 249).
        let want = ((200.0 * 196_000f64.powi(2) + 50.0 * 784_000f64.powi(2)) / 249.0).sqrt();
        assert!((sd - want).abs() < 1e-6 * want, "{sd} vs {want}");
    }

    #[test]
    fn a_quantile_is_within_a_sixteenth_of_the_value() {
        for v in [17u64, 100, 999, 20_000, 123_456, 7_654_321, 3_000_000_000] {
            let (c, n, _, _) = counts_of(&[(v, 3)]);
            // Without min/max to clamp to, only the bucket's midpoint is known.
            let q = quantile(&c, n, 0.5, 0, u64::MAX);
            let err = (q as f64 - v as f64).abs() / v as f64;
            assert!(err <= 1.0 / 16.0, "{v}: {q}");
        }
    }

    #[test]
    fn stddev_is_zero_for_one_or_equal_values_and_exact_for_two() {
        assert_eq!(mean_stddev(0, 0, 0), (0.0, 0.0));
        assert_eq!(mean_stddev(1, 500, 250_000), (500.0, 0.0));
        assert_eq!(mean_stddev(3, 300, 30_000), (100.0, 0.0));
        let (m, s) = mean_stddev(2, 300, 100 * 100 + 200 * 200);
        assert_eq!(m, 150.0);
        assert!((s - 70.710_678_118_654_76).abs() < 1e-9, "{s}");
    }

    #[test]
    fn lines_carry_upstreams_words_and_fields() {
        let e = Ends {
            peer: "10.0.0.2".into(),
            dev: "mlx5_0".into(),
            qpn: 77,
            port: 1,
            lid: 0,
            local_gid: "::ffff:10.0.0.1".into(),
            remote_qpn: 88,
            remote_port: 0,
            remote_lid: 0,
            remote_gid: "::ffff:10.0.0.2".into(),
        };
        let s = Stats {
            count: 250,
            slow: 50,
            mean_ns: 216_000.0,
            stddev_ns: 400_000.4,
            quantiles_ns: [20_000, 1_000_000, 1_000_000, 1_000_000],
            max_ns: 1_000_000,
        };
        assert_eq!(
            slow_line(&e, 100_000, 1_000_000, &s, 5),
            "NET/IB-CAST: WQE slow: peer=10.0.0.2 | local: qpn=77 dev=mlx5_0 port=1 lid=0 localGid=::ffff:10.0.0.1 | remote: qpn=88 port=0 lid=0 remoteGid=::ffff:10.0.0.2 | thr=100000ns delta=1000000ns mean=216000ns stddev=400000ns p50=20000ns p90=1000000ns p99=1000000ns p99.9=1000000ns max=1000000ns count=250 | t_post=5 t_poll=1000005"
        );
        assert_eq!(
            stall_line(&e, 1_000_000_000, 1_500_000_000, 3),
            "NET/IB-CAST: WQE stall (no CQE): peer=10.0.0.2 | local: qpn=77 dev=mlx5_0 port=1 lid=0 localGid=::ffff:10.0.0.1 | remote: qpn=88 port=0 lid=0 remoteGid=::ffff:10.0.0.2 | stall_thr=1000000000ns age=1500000000ns inflight=3"
        );
        assert_eq!(
            summary_line(&e, true, 100_000, &s),
            "NET/IB-CAST: WQE latency summary [send peer=10.0.0.2 dev=mlx5_0 qpn=77 port=1]: n=250 slow=50 thr=100000ns | post-to-poll ns: mean=216000 std=400000 p50=20000 p90=1000000 p99=1000000 p99.9=1000000 max=1000000"
        );
    }

    #[test]
    fn a_line_of_a_kind_is_said_at_most_once_a_second() {
        let mut last = None;
        assert!(due(&mut last, 10));
        assert!(!due(&mut last, 10 + LINE_INTERVAL_NS - 1));
        assert!(due(&mut last, 10 + LINE_INTERVAL_NS));
    }
}
