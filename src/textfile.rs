//! The live node_exporter textfile (`RCCL_TELEMETRY_PROMETHEUS_DIR`).
//!
//! Every `RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S` the writer thread (never the data path)
//! snapshots the slots, renders them with [`rccl_telemetry_format::promtext`] (the definition the tool's
//! `export --format prometheus` shares) and writes
//! `<dir>/rccl_telemetry_<hostname>_<uid>_<pid>.prom` with [`crate::atomic_file::write_atomic_mode`]:
//! a temporary file in the same directory, renamed over the name (never following a planted
//! symlink), mode 0644 so node_exporter's own user can read it.
//!
//! With the final write (exit, rcclTelemetryFlush, a termination signal) the file is removed,
//! so the rank's series end with it; a rank killed by SIGKILL leaves its file, whose
//! `rccl_telemetry_last_write_timestamp_seconds` stops moving (`rccl-telemetry prom-gc`
//! removes such files).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::config::Config;
use crate::rank_file::{
    self, ChannelReport, CompletionLatency, DeviceReport, Identity, QpReport, WqeCounts,
};
use crate::{diag, hw, latency, registry};
use rccl_telemetry_format::promtext::{self, Level};

/// The launcher's rank variables, first found wins (Open MPI, PMIx, MPICH/PMI, Slurm,
/// torchrun): a decimal value becomes the `rank` label.
pub const RANK_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "RANK",
];

struct Live {
    path: PathBuf,
    level: Level,
    rank: Option<String>,
}

static LIVE: OnceLock<Live> = OnceLock::new();
/// The process facts of every series, set at Init (whether or not a textfile is written).
static ID: OnceLock<Identity> = OnceLock::new();

#[derive(Default)]
struct State {
    /// The final write happened: never write again.
    done: bool,
    /// Where the last write went (the name, or a fallback name).
    written: Option<PathBuf>,
    /// The last write failed (its line was printed; the next is printed only after a success).
    failing: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    done: false,
    written: None,
    failing: false,
});

/// The file name of this rank: rccl_telemetry_<hostname>_<uid>_<pid>.prom.
pub fn file_name(host: &str) -> String {
    let json = rank_file::file_name(host);
    format!("{}.prom", json.strip_suffix(".json").unwrap_or(&json))
}

/// The `rank` label from the launcher's environment.
pub fn rank_from(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<String> {
    RANK_VARS.iter().find_map(|v| get(v)).and_then(|v| {
        v.to_str()
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .map(str::to_owned)
    })
}

/// At Init: remembers where the textfile goes, and says at once (one line) when the
/// directory is unusable. Returns the interval in seconds, 0 when the textfile is off.
pub fn configure(cfg: &Config, id: &Identity) -> u64 {
    let _ = ID.set(id.clone());
    let host = id.host_name.as_str();
    let Some(dir) = &cfg.prometheus_dir else {
        return 0;
    };
    if let Err(e) = probe(dir) {
        diag::warn(&e);
        // Said once: the writes that fail the same way are quiet until one succeeds.
        STATE.lock().failing = true;
    }
    let live = Live {
        path: dir.join(file_name(host)),
        level: if cfg.prometheus_qp {
            Level::Qp
        } else {
            Level::Channel
        },
        rank: rank_from(crate::config::lookup),
    };
    diag::debug(|| {
        format!(
            "Prometheus textfile {} every {} s",
            live.path.display(),
            cfg.prometheus_interval_s
        )
    });
    let _ = LIVE.set(live);
    cfg.prometheus_interval_s
}

fn probe(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(format!("Prometheus directory {} is not a directory; no textfile will be written", dir.display())),
        Ok(_) => rank_file::probe_dir(dir)
            .map_err(|e| e.replacen("output directory", "Prometheus directory", 1).replacen("the telemetry file", "the textfile", 1)),
        Err(e) => Err(format!("Prometheus directory {} is unusable: {e}; no textfile will be written unless that changes", dir.display())),
    }
}

/// The rank's series now, at `level` (for the writer, the tests and the bench).
pub fn render_now(level: Level) -> String {
    let Some(id) = ID.get() else {
        return String::new();
    };
    let rank = LIVE.get().and_then(|l| l.rank.clone());
    // One view of the channels: a communicator finalized meanwhile is counted once.
    let _view = registry::read_view();
    // Room for half as much again as the last text, reserved fallibly, so that the text
    // rarely grows while it is rendered (growth cannot fail softly); none: an empty text,
    // which is not written.
    let mut out = String::new();
    let want = (LAST_LEN.load(std::sync::atomic::Ordering::Relaxed) * 3 / 2).max(1 << 16);
    if out.try_reserve_exact(want).is_err() {
        return String::new();
    }
    let mut links = Vec::new();
    let r = snapshot(id, rank, &mut links);
    promtext::render(std::slice::from_ref(&r), level, &mut out);
    let stalls = stall_devices(&r);
    promtext::render_stalls(&r, &stalls, &mut out);
    promtext::render_errors(&r, &error_devices(&r), &mut out);
    render_peer_latency(&r, links, &mut out);
    LAST_LEN.store(out.len(), std::sync::atomic::Ordering::Relaxed);
    out
}

/// The length of the last text rendered, to reserve the next one's room.
static LAST_LEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The writer thread's periodic write (the runtime calls it only while telemetry is on).
/// Quiet about a failure it already reported.
pub fn write_periodic() {
    let _ = write_now();
}

/// Writes the textfile now at the configured level. Err: one line (already printed, once
/// per run of failures).
pub fn write_now() -> Result<PathBuf, String> {
    match LIVE.get() {
        Some(live) => write_at(live.level),
        None => Err(format!("{} is not set", crate::config::ENV_PROM_DIR)),
    }
}

/// [`write_now`] at a given depth (the bench times both).
pub fn write_at(level: Level) -> Result<PathBuf, String> {
    let Some(live) = LIVE.get() else {
        return Err(format!("{} is not set", crate::config::ENV_PROM_DIR));
    };
    let mut st = STATE.lock();
    if st.done {
        return Err("telemetry has finished".into());
    }
    let written = std::panic::catch_unwind(|| {
        let text = render_now(level);
        if text.is_empty() {
            return Err(format!(
                "cannot write {}: not enough memory to render it",
                live.path.display()
            ));
        }
        crate::atomic_file::write_atomic_mode(&live.path, Some(0o644), |w| {
            w.write_all(text.as_bytes())
        })
    });
    match written {
        Ok(Ok(w)) => {
            if let Some(old) = st.written.take().filter(|old| *old != w.path) {
                let _ = std::fs::remove_file(old);
            }
            if let Some(why) = &w.fallback {
                if st.written.is_none() && !st.failing {
                    diag::warn(&format!("Prometheus textfile: {why}"));
                }
            }
            st.failing = false;
            st.written = Some(w.path.clone());
            Ok(w.path)
        }
        Ok(Err(line)) => {
            let line = line.replacen("cannot write ", "cannot write Prometheus textfile ", 1);
            if !st.failing {
                diag::warn(&format!("{line}; retrying every interval"));
            }
            st.failing = true;
            Err(line)
        }
        Err(_) => {
            crate::panics::contained_panic("the Prometheus textfile");
            Err("internal error".into())
        }
    }
}

/// The final write: the textfile goes (after any write in progress), and is never written
/// again.
pub fn finish() {
    if LIVE.get().is_none() {
        return;
    }
    let mut st = STATE.lock();
    st.done = true;
    if let Some(p) = st.written.take() {
        if let Err(e) = std::fs::remove_file(&p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                diag::warn(&format!(
                    "cannot remove Prometheus textfile {}: {e}",
                    p.display()
                ));
            }
        }
    }
}

// ------------------------------------------------------------------- slots -> promtext

/// Whether a device left out for want of memory was said (once per process).
static OOM_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One rank's live numbers, as the JSON file would hold them now; the per-peer histograms of
/// its used devices go to `links`.
fn snapshot(id: &Identity, rank: Option<String>, links: &mut Vec<PeerLatency>) -> promtext::Rank {
    let mut devices = Vec::new();
    for d in registry::devices() {
        let conv = rank_file::device_report(d, id, Vec::new())
            .map_err(|e| e.to_string())
            .and_then(|rep| {
                let dev = device(&rep).ok_or("memory allocation failed")?;
                Ok((rep, dev))
            });
        let (rep, mut dev) = match conv {
            Ok(x) => x,
            Err(e) => {
                if !OOM_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    diag::warn(&format!(
                        "Prometheus textfile: not enough memory to read device {} ({e}); it is left out of the textfile while that lasts",
                        d.id
                    ));
                }
                continue;
            }
        };
        finalized_into(&mut dev, &rep);
        if dev.is_used() {
            links.extend(peer_latency(&dev, &rep));
            // Hardware deltas since first use, read on this thread (never on the data path).
            dev.hw = hw_values(&d.hw.final_report());
            devices.push(dev);
        }
    }
    promtext::Rank {
        host: id.host_name.clone(),
        pid: u64::from(id.pid),
        rank,
        start_s: Some(id.start_wall_ns as f64 / 1e9),
        taken_s: Some(latency::realtime_ns() as f64 / 1e9),
        hist_interval_ns: id.histogram_interval_ns,
        devices,
    }
}

/// Stall detection's numbers of the devices the textfile shows (none when detection is off).
fn stall_devices(r: &promtext::Rank) -> Vec<promtext::DevStall> {
    let mut out = Vec::new();
    for d in registry::devices() {
        let Some(v) = crate::stall_detector::device_view(d.id) else {
            return out;
        };
        let Some(shown) = r.devices.iter().find(|x| x.id == d.id) else {
            continue;
        };
        let unknown = d
            .channels_unknown
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut qps = Vec::new();
        for (pos, c) in d.channels().into_iter().enumerate() {
            for (i, st) in v.state.channel(c).iter().enumerate() {
                let Some(start) = st.stall_start else {
                    continue;
                };
                let p = crate::stall_detector::peer_labels(c, i as u64);
                qps.push(promtext::StalledQp {
                    channel: if unknown {
                        format!("unknown_{pos}")
                    } else {
                        c.id().to_string()
                    },
                    comm: comm_labels(c),
                    qp: i as u64,
                    qp_num: p.qp_num,
                    peer_gid: p.peer_gid,
                    peer_qp_num: p.peer_qp_num,
                    outstanding: st.outstanding,
                    stalled_s: v.tick_mono.saturating_sub(start) as f64 / 1e9,
                });
            }
        }
        out.push(promtext::DevStall {
            name: shown.name.clone(),
            hw_type: shown.hw_type.clone(),
            outstanding: v.state.outstanding,
            stalled: v.state.stalled,
            qps,
        });
    }
    out
}

/// Error completions of the devices the textfile shows: by status, and each errored QP.
fn error_devices(r: &promtext::Rank) -> Vec<promtext::DevErrors> {
    let errors = crate::cq_errors::all();
    let names = |m: &std::collections::BTreeMap<i32, u64>| {
        m.iter()
            .map(|(k, v)| (crate::cq_errors::status_name(*k), *v))
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    for d in registry::devices() {
        let Some(shown) = r.devices.iter().find(|x| x.id == d.id) else {
            continue;
        };
        let unknown = d
            .channels_unknown
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut qps = Vec::new();
        for (pos, c) in d.channels().into_iter().enumerate() {
            for (i, slot) in c.slots.iter() {
                let Some(e) = errors.get(&(slot as *const crate::counters::RcclQpStats as usize))
                else {
                    continue;
                };
                let Some(first) = &e.first else { continue };
                let p = crate::stall_detector::peer_labels(c, i);
                qps.push(promtext::ErroredQp {
                    channel: if unknown {
                        format!("unknown_{pos}")
                    } else {
                        c.id().to_string()
                    },
                    comm: comm_labels(c),
                    qp: i,
                    qp_num: p.qp_num,
                    peer_gid: p.peer_gid,
                    peer_qp_num: p.peer_qp_num,
                    by_status: names(&e.by_status),
                    first_status: crate::cq_errors::status_name(first.status),
                    first_s: first.wall_ns as f64 / 1e9,
                });
            }
        }
        out.push(promtext::DevErrors {
            name: shown.name.clone(),
            hw_type: shown.hw_type.clone(),
            by_status: names(&crate::cq_errors::device(d.id)),
            qps,
        });
    }
    out
}

/// The labels of the communicator that owns channel `c` (None: the process-wide calls').
fn comm_labels(c: &registry::Channel) -> Option<promtext::CommLabels> {
    let owner = c.owner();
    if owner == registry::OWNER_DEFAULT {
        return None;
    }
    registry::comm::by_id(owner).map(|m| promtext::CommLabels {
        hash: format!("0x{:x}", m.ident.hash),
        rank: i64::from(m.ident.rank),
        nranks: i64::from(m.ident.nranks),
    })
}

fn hw_values(r: &hw::HwReport) -> Vec<(String, promtext::Hw)> {
    r.iter()
        .map(|(k, v)| {
            let v = match v {
                hw::HwValue::Scalar(x) => promtext::Hw::Scalar(*x),
                hw::HwValue::PerPrio(a) => promtext::Hw::PerPrio(a.to_vec()),
            };
            ((*k).to_owned(), v)
        })
        .collect()
}

/// The textfile's counts of a channel, a QP or a finalized communicator's record.
fn counts(n: &WqeCounts, l: &CompletionLatency) -> promtext::Counts {
    promtext::Counts::of(n.values(), l.wqe_completion_histogram.clone())
}

fn qp(q: &QpReport) -> promtext::Qp {
    promtext::Qp {
        id: q.id,
        role: q.role.map(str::to_owned),
        counts: counts(&q.counts, &q.latency),
        monitor: q.monitor.as_ref().and_then(|m| {
            Some(promtext::QpLatency {
                count: q.latency.wqe_completion_histogram.iter().sum(),
                mean_ns: m.wqe_completion_ns_mean?,
                stddev_ns: m.wqe_completion_ns_stddev.unwrap_or(0.0),
                quantiles_ns: [
                    m.wqe_completion_ns_p50?,
                    m.wqe_completion_ns_p90?,
                    m.wqe_completion_ns_p99?,
                    m.wqe_completion_ns_p999?,
                ],
            })
        }),
    }
}

/// The items of `it` in a vector allocated fallibly (None: out of memory).
fn try_collect<T>(it: impl ExactSizeIterator<Item = T>) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(it.len()).ok()?;
    v.extend(it);
    Some(v)
}

fn channel(c: &ChannelReport) -> Option<promtext::Channel> {
    Some(promtext::Channel {
        id: c.id.map(u64::from),
        comm: c.comm.as_ref().map(|m| promtext::CommLabels {
            hash: m.hash.clone(),
            rank: i64::from(m.rank),
            nranks: i64::from(m.nranks),
        }),
        counts: promtext::Counts {
            log_hist: c
                .wqe_completion_log_histogram
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
            ..counts(&c.counts, &c.latency)
        },
        requests_completed: c.num_req_completed,
        data_qps: c.num_data_qp,
        cts_qps: c.num_cts_qp,
        untracked_qps: c.num_qp_untracked,
        qps: try_collect(c.queue_pairs.iter().map(qp))?,
    })
}

fn device(d: &DeviceReport) -> Option<promtext::Device> {
    let mut channels = Vec::new();
    channels.try_reserve_exact(d.channels.len()).ok()?;
    for c in &d.channels {
        channels.push(channel(c)?);
    }
    Some(promtext::Device {
        id: d.device_id,
        name: d.roce_device.clone(),
        hw_type: d.hw_type.to_owned(),
        tx_bytes: d.tx_bytes,
        rx_bytes: d.rx_bytes,
        cq_errors: d.num_cq_errors,
        cq_polls: d.cq_poll_count,
        active_channels: d.active_channels,
        untracked_qps: d.num_qp_untracked,
        hw: Vec::new(),
        channels,
        finalized: promtext::Counts::default(),
        finalized_requests: 0,
        finalized_qps: 0,
        qp_settings: promtext::QpSettings::tally(
            d.channels
                .iter()
                .flat_map(|c| &c.queue_pairs)
                .filter_map(|q| q.attrs.as_ref())
                .map(promtext::QpSettings::from),
        ),
        port_qos: promtext::PortQos::from(&d.port_qos),
    })
}

/// Adds the device's finalized communicators to its series: their counts stay in the
/// device's counters after their channels' series end.
fn finalized_into(dev: &mut promtext::Device, rep: &DeviceReport) {
    for f in &rep.finalized_comms {
        let mut c = counts(&f.counts, &f.latency);
        c.log_hist = f
            .wqe_completion_log_histogram
            .as_ref()
            .map(|b| b.0.clone())
            .unwrap_or_default();
        dev.finalized.add(&c);
        dev.finalized_requests = dev.finalized_requests.saturating_add(f.num_req_completed);
        dev.finalized_qps = dev.finalized_qps.saturating_add(f.num_qps);
    }
}

// ------------------------------------------------------------ per-link latency

/// Remote NICs per rank that get latency series (the busiest first); the others are counted
/// in `rccl_telemetry_peer_series_dropped`. With [`PEER_LE_BOUNDS`] a rank writes at most
/// 32 x 38 = 1,216 such series, plus the gauge.
pub const MAX_PEER_SERIES: usize = 32;

/// The `le` bounds of the per-peer histogram, in ns: 2^k and 1.5 x 2^k for k = 12..=29 (4.1 µs
/// to 805 ms), two per octave. Each is a bucket boundary of the log-scale histogram, so every
/// completion is counted under the right bound, and one fixed set for every rank and link lets
/// histogram_quantile work over any sum of them. 36 bounds, +Inf and _count: 38 series a link.
pub const PEER_LE_BOUNDS: [u64; 36] = {
    let mut b = [0u64; 36];
    let mut k = 12;
    while k <= 29 {
        b[2 * (k - 12)] = 1 << k;
        b[2 * (k - 12) + 1] = 3 << (k - 1);
        k += 1;
    }
    b
};

const PEER_FAMILY: &str = "rccl_telemetry_peer_wqe_completion_seconds";
const PEER_HELP: &str = "WQE completion latency of the device's QPs whose peer is this remote NIC (peer_gid, or peer_lid without a GID), log-scale buckets two per octave (no _sum: not recorded).";
const PEER_DROPPED: &str = "rccl_telemetry_peer_series_dropped";
const PEER_DROPPED_HELP: &str =
    "Remote NICs with completions beyond the cap of per-peer latency series (the busiest keep theirs).";

/// One (device, remote NIC) pair's completions.
struct PeerLatency {
    device: String,
    hw_type: String,
    peer_gid: String,
    peer_lid: String,
    /// The sparse log-scale buckets: (lower ns, exclusive upper ns or None, count).
    buckets: Vec<(u64, Option<u64>, u64)>,
    total: u64,
}

fn peer_latency(dev: &promtext::Device, rep: &DeviceReport) -> Vec<PeerLatency> {
    rep.peers
        .iter()
        .filter_map(|p| {
            let b = p.wqe_completion_log_histogram.as_ref()?;
            let total = b.0.iter().fold(0u64, |a, x| a.saturating_add(x.2));
            (total > 0).then(|| PeerLatency {
                device: dev.name.clone(),
                hw_type: dev.hw_type.clone(),
                peer_gid: p
                    .gid
                    .as_ref()
                    .map(|g| crate::peers::gid_text(&g.0))
                    .unwrap_or_default(),
                peer_lid: p
                    .lid
                    .filter(|_| p.gid.is_none())
                    .map(|l| l.to_string())
                    .unwrap_or_default(),
                buckets: b.0.clone(),
                total,
            })
        })
        .collect()
}

fn escaped(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The per-peer latency histograms and the count of peers past the cap (nothing when no
/// device has per-peer histograms: no peers told, or the log-scale histogram off).
fn render_peer_latency(r: &promtext::Rank, mut links: Vec<PeerLatency>, out: &mut String) {
    use std::fmt::Write as _;
    if links.is_empty() {
        return;
    }
    links.sort_by_key(|l| std::cmp::Reverse(l.total));
    let dropped = links.len().saturating_sub(MAX_PEER_SERIES);
    links.truncate(MAX_PEER_SERIES);
    let mut base = format!("host=\"{}\",pid=\"{}\"", escaped(&r.host), r.pid);
    if let Some(k) = &r.rank {
        let _ = write!(base, ",rank=\"{}\"", escaped(k));
    }
    let _ = writeln!(
        out,
        "# HELP {PEER_FAMILY} {PEER_HELP}\n# TYPE {PEER_FAMILY} histogram"
    );
    for l in &links {
        let lbl = format!(
            "{base},device=\"{}\",hw_type=\"{}\",peer_gid=\"{}\",peer_lid=\"{}\"",
            escaped(&l.device),
            escaped(&l.hw_type),
            l.peer_gid,
            l.peer_lid
        );
        for bound in PEER_LE_BOUNDS {
            let cum = l
                .buckets
                .iter()
                .filter(|b| b.1.is_some_and(|hi| hi <= bound))
                .fold(0u64, |a, b| a.saturating_add(b.2));
            let le = promtext::prom_f64(bound as f64 / 1e9);
            let _ = writeln!(out, "{PEER_FAMILY}_bucket{{{lbl},le=\"{le}\"}} {cum}");
        }
        let _ = writeln!(
            out,
            "{PEER_FAMILY}_bucket{{{lbl},le=\"+Inf\"}} {}\n{PEER_FAMILY}_count{{{lbl}}} {}",
            l.total, l.total
        );
    }
    let _ = writeln!(
        out,
        "# HELP {PEER_DROPPED} {PEER_DROPPED_HELP}\n# TYPE {PEER_DROPPED} gauge\n{PEER_DROPPED}{{{base}}} {dropped}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn peer_latency_is_cumulative_on_fixed_bounds_and_capped() {
        assert_eq!(PEER_LE_BOUNDS[0], 4096);
        assert_eq!(PEER_LE_BOUNDS[1], 6144);
        assert_eq!(PEER_LE_BOUNDS[35], 3 << 28);
        for b in PEER_LE_BOUNDS {
            // A bucket boundary of the log-scale histogram: the bucket starting there begins at b.
            let i = crate::loghist::bucket_index(b);
            assert_eq!(crate::loghist::bucket_bounds(i).0, b);
        }
        let r = promtext::Rank {
            host: "h\"1".into(),
            pid: 7,
            rank: Some("3".into()),
            start_s: None,
            taken_s: None,
            hist_interval_ns: 0,
            devices: Vec::new(),
        };
        let link = |i: usize, n: u64| PeerLatency {
            device: "mlx5_0".into(),
            hw_type: "mlx5".into(),
            peer_gid: format!("fe80:0000:0000:0000:0000:0000:0000:{i:04x}"),
            peer_lid: String::new(),
            buckets: vec![
                (4096, Some(4608), n),
                (12288, Some(13312), 1),
                (1 << 40, None, 1),
            ],
            total: n + 2,
        };
        let mut out = String::new();
        render_peer_latency(&r, (0..40).map(|i| link(i, i as u64)).collect(), &mut out);
        let count = |f: &str| out.lines().filter(|l| l.starts_with(f)).count();
        assert_eq!(
            count("rccl_telemetry_peer_wqe_completion_seconds_count{"),
            MAX_PEER_SERIES
        );
        assert_eq!(
            count("rccl_telemetry_peer_wqe_completion_seconds_"),
            MAX_PEER_SERIES * 38
        );
        assert!(
            out.contains(
                "rccl_telemetry_peer_series_dropped{host=\"h\\\"1\",pid=\"7\",rank=\"3\"} 8\n"
            ),
            "{out}"
        );
        // The busiest link is kept; its buckets are cumulative; the open bucket only in +Inf.
        let l = "host=\"h\\\"1\",pid=\"7\",rank=\"3\",device=\"mlx5_0\",hw_type=\"mlx5\",peer_gid=\"fe80:0000:0000:0000:0000:0000:0000:0027\",peer_lid=\"\"";
        for (le, n) in [
            ("0.000004096", 0),
            ("0.000006144", 39),
            ("0.000012288", 39),
            ("0.000016384", 40),
            ("+Inf", 41),
        ] {
            let want = format!(
                "rccl_telemetry_peer_wqe_completion_seconds_bucket{{{l},le=\"{le}\"}} {n}\n"
            );
            assert!(out.contains(&want), "{want} in {out}");
        }
        assert!(
            !out.contains("0000:0000:0007\""),
            "a quiet link past the cap"
        );
        let mut none = String::new();
        render_peer_latency(&r, Vec::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn the_name_is_the_json_name_with_prom() {
        let n = file_name("node/1");
        assert!(
            n.starts_with("rccl_telemetry_node_1_")
                && n.ends_with(&format!("_{}.prom", std::process::id())),
            "{n}"
        );
    }

    #[test]
    fn the_rank_comes_from_the_first_launcher_variable_that_is_a_number() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            rank_from(env(&[("SLURM_PROCID", "5"), ("RANK", "9")])),
            Some("5".into())
        );
        assert_eq!(
            rank_from(env(&[("OMPI_COMM_WORLD_RANK", " 12 "), ("PMI_RANK", "3")])),
            Some("12".into())
        );
        assert_eq!(rank_from(env(&[("RANK", "zero")])), None);
        assert_eq!(rank_from(env(&[])), None);
    }

    #[test]
    fn an_unusable_directory_is_one_line_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        for p in [f.clone(), d.path().join("missing")] {
            let e = probe(&p).unwrap_err();
            assert!(
                e.contains(&p.display().to_string()) && !e.contains('\n'),
                "{e}"
            );
        }
        probe(d.path()).unwrap();
    }
}
