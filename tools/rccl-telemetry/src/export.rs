//! `export`: Prometheus text exposition, and CSV / NDJSON in one long, tidy table.

use crate::load::{BadKind, Run};
use crate::model::{parse_timestamp_ns, Counters, Device, HwValue, TelemetryFile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

// ---------------------------------------------------------------------------------------------
// Prometheus

use crate::promtext::{self, Level as PromLevel};
pub use crate::promtext::{base_unit, prom_name};

impl From<Level> for PromLevel {
    fn from(l: Level) -> PromLevel {
        match l {
            Level::Device => PromLevel::Device,
            Level::Channel => PromLevel::Channel,
            Level::Qp => PromLevel::Qp,
        }
    }
}

fn counts(c: &Counters) -> promtext::Counts {
    promtext::Counts {
        wqes_sent: c.num_wqe_sent,
        recv_wqes: c.num_recv_wqe,
        wqes_drained: c.num_wqe_rcvd,
        wqes_completed: c.num_wqe_completed,
        cts_signalled: c.num_cts_sent_signalled,
        cts_unsignalled: c.num_cts_sent_unsignalled,
        slot_misses: c.num_slot_miss,
        writes: c.num_write_wqe,
        writes_imm: c.num_write_imm_wqe,
        hist: c.wqe_completion_histogram.clone(),
        log_hist: Vec::new(),
    }
}

fn device(d: &Device) -> promtext::Device {
    promtext::Device {
        id: d.device_id,
        name: d.roce_device.clone(),
        hw_type: d.hw_type.clone(),
        tx_bytes: d.tx_bytes,
        rx_bytes: d.rx_bytes,
        cq_errors: d.num_cq_errors,
        cq_polls: d.cq_poll_count,
        active_channels: d.active_channels,
        untracked_qps: d.num_qp_untracked,
        hw: d
            .hw_counters
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    HwValue::Scalar(x) => promtext::Hw::Scalar(*x),
                    HwValue::PerPrio(a) => promtext::Hw::PerPrio(a.clone()),
                };
                (k.clone(), v)
            })
            .collect(),
        channels: d
            .channels
            .iter()
            .map(|c| promtext::Channel {
                id: c.id,
                counts: promtext::Counts {
                    log_hist: c.wqe_completion_log_histogram.clone().unwrap_or_default(),
                    ..counts(&c.counters)
                },
                requests_completed: c.num_req_completed,
                data_qps: c.num_data_qp,
                cts_qps: c.num_cts_qp,
                untracked_qps: c.num_qp_untracked,
                qps: c
                    .queue_pairs
                    .iter()
                    .map(|q| promtext::Qp {
                        id: q.id,
                        role: q.role.clone(),
                        counts: counts(&q.counters),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// One file as the library's live textfile would have shown it when the file was written.
pub fn prom_rank(tf: &TelemetryFile) -> promtext::Rank {
    let secs = |s: &str| parse_timestamp_ns(s).map(|t| t as f64 / 1e9);
    promtext::Rank {
        host: tf.host_name.clone(),
        pid: u64::try_from(tf.process_id).unwrap_or(0),
        rank: None,
        start_s: secs(&tf.start_time),
        taken_s: secs(&tf.end_time),
        hist_interval_ns: tf.histogram_interval_ns,
        devices: tf.devices.iter().map(device).collect(),
    }
}

/// One file's stall numbers as the live textfile showed them when the file was written: the
/// devices the rank's series show (the used ones), each with its outstanding WRs and stalled QPs, and the QPs
/// stalled then (stalled for `end_time - stalled_since`). Empty when detection was off.
fn stall_devices(tf: &TelemetryFile, r: &promtext::Rank) -> Vec<promtext::DevStall> {
    let end = parse_timestamp_ns(&tf.end_time);
    let mut out = Vec::new();
    for d in &tf.devices {
        let (Some(outstanding), Some(stalled)) = (d.num_wqe_outstanding, d.num_qps_stalled) else {
            return Vec::new();
        };
        let Some(shown) = r
            .devices
            .iter()
            .find(|x| x.id == d.device_id && x.is_used())
        else {
            continue;
        };
        let mut qps = Vec::new();
        for (pos, c) in d.channels.iter().enumerate() {
            for q in c.queue_pairs.iter().filter(|q| q.stalled == Some(true)) {
                let since = q.stalled_since.as_deref().and_then(parse_timestamp_ns);
                let stalled_s = match (end, since) {
                    (Some(e), Some(s)) if e > s => (e - s) as f64 / 1e9,
                    _ => 0.0,
                };
                qps.push(promtext::StalledQp {
                    channel: c
                        .id
                        .map_or_else(|| format!("unknown_{pos}"), |id| id.to_string()),
                    qp: q.id,
                    qp_num: q.qp_num.and_then(|n| u32::try_from(n).ok()),
                    peer_gid: q.peer.as_ref().and_then(|p| p.gid.clone()),
                    peer_qp_num: q.peer.as_ref().and_then(|p| u32::try_from(p.qp_num).ok()),
                    outstanding: q.num_wqe_outstanding.unwrap_or(0),
                    stalled_s,
                });
            }
        }
        out.push(promtext::DevStall {
            name: shown.name.clone(),
            hw_type: shown.hw_type.clone(),
            outstanding,
            stalled,
            qps,
        });
    }
    out
}

/// Renders the run as Prometheus text exposition format (version 0.0.4) at the default depth
/// (device and channel series, as the library's live textfile).
pub fn prometheus(run: &Run) -> String {
    prometheus_at(run, Level::Channel).0
}

/// Renders the run at `level`, with the families, help texts and labels of the library's live
/// textfile (both compile src/promtext/): one set of series per rank (`host`, `pid`), so
/// summing over ranks, or taking the max of a NIC's hardware counters over the ranks that
/// share it, is PromQL's job. Then the run-wide families. Also returns how many files were
/// left out because an earlier file had the same host and pid.
pub fn prometheus_at(run: &Run, level: Level) -> (String, usize) {
    let ranks: Vec<promtext::Rank> = run.files.iter().map(|l| prom_rank(&l.file)).collect();
    let mut out = String::new();
    let dups = promtext::render(&ranks, level.into(), &mut out);
    // The stall families after each rank's, as the live textfile has them (files written with
    // stall detection on only).
    for (l, r) in run.files.iter().zip(&ranks) {
        promtext::render_stalls(r, &stall_devices(&l.file, r), &mut out);
    }

    let mut hosts: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut start, mut end): (Option<i128>, Option<i128>) = (None, None);
    for l in &run.files {
        *hosts.entry(&l.file.host_name).or_default() += 1;
        if let Some(t) = parse_timestamp_ns(&l.file.start_time) {
            start = Some(start.map_or(t, |s| s.min(t)));
        }
        if let Some(t) = parse_timestamp_ns(&l.file.end_time) {
            end = Some(end.map_or(t, |e| e.max(t)));
        }
    }
    let per_host: Vec<(Vec<(&str, &str)>, String)> = hosts
        .iter()
        .map(|(h, n)| (vec![("host", *h)], n.to_string()))
        .collect();
    promtext::write_simple(&mut out, &promtext::RANKS, &per_host);
    let skipped = run
        .bad
        .iter()
        .filter(|b| b.kind != BadKind::Missing)
        .count();
    promtext::write_simple(
        &mut out,
        &promtext::FILES_SKIPPED,
        &[(vec![], skipped.to_string())],
    );
    let secs = |t: Option<i128>| {
        t.map(|t| vec![(vec![], promtext::prom_f64(t as f64 / 1e9))])
            .unwrap_or_default()
    };
    promtext::write_simple(&mut out, &promtext::RUN_START, &secs(start));
    promtext::write_simple(&mut out, &promtext::RUN_END, &secs(end));
    (out, dups)
}

// ---------------------------------------------------------------------------------------------
// Tidy rows

/// How deep the tidy export goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Level {
    /// Device totals, hw counters and hw samples.
    Device,
    /// ... plus per-channel counters and histograms.
    Channel,
    /// ... plus per-QP counters and histograms (everything in the files).
    Qp,
}

/// One observation. `value` is empty (null) where the file says -1 ("not available") or null.
#[derive(Debug, Clone, Serialize)]
pub struct Row<'a> {
    pub file: &'a str,
    /// Who wrote the file: "v1" or "intree-1.0" (whose hw_sample timestamp_ns is
    /// CLOCK_MONOTONIC of its host, not wall-clock time).
    pub format: &'static str,
    pub host: &'a str,
    pub pid: i64,
    pub process: &'a str,
    pub device_id: u32,
    pub roce_device: &'a str,
    pub hw_type: &'a str,
    /// device, channel, qp, hw (hardware counters) or hw_sample.
    pub scope: &'static str,
    pub channel: Option<u64>,
    pub qp: Option<u64>,
    pub role: Option<&'a str>,
    pub metric: &'a str,
    /// Histogram bucket, PFC priority, max_wqe_size for wqe_size_count, or the bucket's lower
    /// bound in ns for wqe_completion_log_histogram; empty otherwise.
    pub index: Option<u64>,
    pub timestamp_ns: Option<u64>,
    pub value: Option<i64>,
}

fn avail(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

fn clamp_u64(v: u64) -> Option<i64> {
    i64::try_from(v).ok()
}

/// Calls `emit` for every row of one file, in file order.
pub fn rows<'a>(path: &'a str, f: &'a TelemetryFile, level: Level, emit: &mut dyn FnMut(Row<'a>)) {
    for d in &f.devices {
        let base = Row {
            file: path,
            format: f.format.label(),
            host: &f.host_name,
            pid: f.process_id,
            process: &f.process_name,
            device_id: d.device_id,
            roce_device: &d.roce_device,
            hw_type: &d.hw_type,
            scope: "device",
            channel: None,
            qp: None,
            role: None,
            metric: "",
            index: None,
            timestamp_ns: None,
            value: None,
        };
        device_rows(&base, d, emit);
        for (name, v) in &d.hw_counters {
            match v {
                HwValue::Scalar(x) => emit(Row {
                    scope: "hw",
                    metric: name,
                    value: avail(*x),
                    ..base.clone()
                }),
                HwValue::PerPrio(a) => {
                    for (i, x) in a.iter().enumerate() {
                        emit(Row {
                            scope: "hw",
                            metric: name,
                            index: Some(i as u64),
                            value: avail(*x),
                            ..base.clone()
                        })
                    }
                }
            }
        }
        if let Some(samples) = &f.hw_samples {
            for s in samples.iter().filter(|s| s.device_id == d.device_id) {
                for (name, v) in &s.counters {
                    emit(Row {
                        scope: "hw_sample",
                        metric: name,
                        timestamp_ns: Some(s.timestamp_ns),
                        value: avail(*v),
                        ..base.clone()
                    });
                }
            }
        }
        if level == Level::Device {
            continue;
        }
        for c in &d.channels {
            let cb = Row {
                scope: "channel",
                channel: c.id,
                ..base.clone()
            };
            counter_rows(&cb, &c.counters, emit);
            log_rows(&cb, c.wqe_completion_log_histogram.as_deref(), emit);
            for (m, v) in [
                ("num_req_completed", c.num_req_completed),
                ("num_data_qp", c.num_data_qp),
                ("num_cts_qp", c.num_cts_qp),
                ("num_qp_untracked", c.num_qp_untracked),
            ] {
                emit(Row {
                    metric: m,
                    value: clamp_u64(v),
                    ..cb.clone()
                });
            }
            if level == Level::Qp {
                for q in &c.queue_pairs {
                    let qb = Row {
                        scope: "qp",
                        qp: Some(q.id),
                        role: q.role.as_deref(),
                        ..cb.clone()
                    };
                    counter_rows(&qb, &q.counters, emit);
                }
            }
        }
    }
}

fn device_rows<'a>(base: &Row<'a>, d: &'a Device, emit: &mut dyn FnMut(Row<'a>)) {
    for (m, v) in [
        ("tx_bytes", clamp_u64(d.tx_bytes)),
        ("rx_bytes", clamp_u64(d.rx_bytes)),
        ("num_cq_errors", clamp_u64(d.num_cq_errors)),
        ("cq_poll_count", clamp_u64(d.cq_poll_count)),
        ("num_channels", d.num_channels.and_then(clamp_u64)),
        ("active_channels", clamp_u64(d.active_channels)),
        ("num_qp_untracked", clamp_u64(d.num_qp_untracked)),
    ] {
        emit(Row {
            metric: m,
            value: v,
            ..base.clone()
        });
    }
    for w in &d.wqe_size_stats {
        emit(Row {
            metric: "wqe_size_count",
            index: Some(w.max_wqe_size),
            value: clamp_u64(w.num_wqe),
            ..base.clone()
        });
    }
    log_rows(base, d.wqe_completion_log_histogram.as_deref(), emit);
}

/// The log-scale histogram (version-2 files): one row per non-empty bucket, index = its lower
/// bound in ns (the bucket ends below the next row's lower bound; the file has the upper bound).
fn log_rows<'a>(
    base: &Row<'a>,
    h: Option<&[crate::model::LogBucket]>,
    emit: &mut dyn FnMut(Row<'a>),
) {
    for (lo, _, n) in h.unwrap_or_default() {
        emit(Row {
            metric: "wqe_completion_log_histogram",
            index: Some(*lo),
            value: clamp_u64(*n),
            ..base.clone()
        });
    }
}

fn counter_rows<'a>(base: &Row<'a>, c: &'a Counters, emit: &mut dyn FnMut(Row<'a>)) {
    for (m, v) in [
        ("num_wqe_sent", c.num_wqe_sent),
        ("num_recv_wqe", c.num_recv_wqe),
        ("num_wqe_rcvd", c.num_wqe_rcvd),
        ("num_wqe_completed", c.num_wqe_completed),
        ("num_cts_sent", c.num_cts_sent),
        ("num_cts_sent_signalled", c.num_cts_sent_signalled),
        ("num_cts_sent_unsignalled", c.num_cts_sent_unsignalled),
        ("num_slot_miss", c.num_slot_miss),
        ("num_write_wqe", c.num_write_wqe),
        ("num_write_imm_wqe", c.num_write_imm_wqe),
    ] {
        emit(Row {
            metric: m,
            value: clamp_u64(v),
            ..base.clone()
        });
    }
    if let Some(s) = c.num_wqe_sampled {
        emit(Row {
            metric: "num_wqe_sampled",
            value: clamp_u64(s),
            ..base.clone()
        });
    }
    emit(Row {
        metric: "wqe_completion_ns_min",
        value: avail(c.wqe_completion_ns_min),
        ..base.clone()
    });
    emit(Row {
        metric: "wqe_completion_ns_max",
        value: avail(c.wqe_completion_ns_max),
        ..base.clone()
    });
    for (b, v) in c.wqe_completion_histogram.iter().enumerate() {
        emit(Row {
            metric: "wqe_completion_histogram",
            index: Some(b as u64),
            value: clamp_u64(*v),
            ..base.clone()
        });
    }
}

/// Writes every row of the run as CSV (with a header) or NDJSON.
pub fn write_tidy(
    run: &Run,
    level: Level,
    ndjson: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let paths: Vec<String> = run
        .files
        .iter()
        .map(|l| l.path.display().to_string())
        .collect();
    if ndjson {
        let mut err = None;
        for (l, p) in run.files.iter().zip(&paths) {
            rows(p, &l.file, level, &mut |r| {
                if err.is_none() {
                    if let Err(e) = serde_json::to_writer(&mut *out, &r)
                        .map_err(|e| e.to_string())
                        .and_then(|_| out.write_all(b"\n").map_err(|e| e.to_string()))
                    {
                        err = Some(e);
                    }
                }
            });
        }
        return err.map_or(Ok(()), Err);
    }
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    let mut err = None;
    // An empty run still gets its header.
    w.write_record([
        "file",
        "format",
        "host",
        "pid",
        "process",
        "device_id",
        "roce_device",
        "hw_type",
        "scope",
        "channel",
        "qp",
        "role",
        "metric",
        "index",
        "timestamp_ns",
        "value",
    ])
    .map_err(|e| e.to_string())?;
    for (l, p) in run.files.iter().zip(&paths) {
        rows(p, &l.file, level, &mut |r| {
            if err.is_none() {
                if let Err(e) = w.serialize(&r) {
                    err = Some(e.to_string());
                }
            }
        });
    }
    if let Some(e) = err {
        return Err(e);
    }
    w.flush().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Link rows (`export --links`): one row (or set of series) per link of `links`

/// One link as a flat row (CSV and NDJSON).
#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    pub src_host: String,
    /// The pids that drove the NIC, joined by ';'.
    pub src_pids: String,
    pub src_device: String,
    pub src_gid: Option<String>,
    pub src_gid_ip: Option<String>,
    pub src_lid: Option<u64>,
    pub dst_host: String,
    pub dst_pids: String,
    pub dst_device: String,
    pub dst_gid: Option<String>,
    pub dst_gid_ip: Option<String>,
    pub dst_lid: Option<u64>,
    pub qps: u64,
    pub wrs_sent: u64,
    pub wrs_completed: u64,
    pub wrs_received_by_dst: u64,
    pub tx_bytes_est: u64,
    pub latency_source: Option<&'static str>,
    pub latency_relative_error: Option<f64>,
    pub latency_bucket_ns: Option<u64>,
    pub latency_samples: Option<u64>,
    pub p50_ns: Option<f64>,
    pub p90_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub retired_unsignalled: Option<u64>,
    pub wrs_outstanding: Option<u64>,
    pub qps_stalled: Option<u64>,
    pub longest_stall_ms: Option<u64>,
}

fn pids(p: &[i64]) -> String {
    p.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

pub fn link_rows(r: &crate::links::LinkReport) -> Vec<LinkRow> {
    r.links
        .iter()
        .map(|l| {
            let lat = l.latency.as_ref();
            LinkRow {
                src_host: l.src.host.clone(),
                src_pids: pids(&l.src.pids),
                src_device: l.src.device.clone(),
                src_gid: l.src.gid.clone(),
                src_gid_ip: l.src.gid_ip.clone(),
                src_lid: l.src.lid,
                dst_host: l.dst.host.clone(),
                dst_pids: pids(&l.dst.pids),
                dst_device: l.dst.device.clone(),
                dst_gid: l.dst.gid.clone(),
                dst_gid_ip: l.dst.gid_ip.clone(),
                dst_lid: l.dst.lid,
                qps: l.qps,
                wrs_sent: l.wrs_sent,
                wrs_completed: l.wrs_completed,
                wrs_received_by_dst: l.wrs_received_by_dst,
                tx_bytes_est: l.tx_bytes_est,
                latency_source: lat.map(|x| x.source),
                latency_relative_error: lat.and_then(|x| x.relative_error),
                latency_bucket_ns: lat.and_then(|x| x.bucket_ns),
                latency_samples: lat.map(|x| x.samples),
                p50_ns: lat.and_then(|x| x.p50_ns),
                p90_ns: lat.and_then(|x| x.p90_ns),
                p99_ns: lat.and_then(|x| x.p99_ns),
                retired_unsignalled: l.retired_unsignalled,
                wrs_outstanding: l.wrs_outstanding,
                qps_stalled: l.qps_stalled,
                longest_stall_ms: l.longest_stall_ms,
            }
        })
        .collect()
}

/// Writes the link rows as CSV (header first) or NDJSON.
pub fn write_link_rows(run: &Run, ndjson: bool, out: &mut dyn Write) -> Result<(), String> {
    let rows = link_rows(&crate::links::join(run));
    if ndjson {
        for r in &rows {
            serde_json::to_writer(&mut *out, r).map_err(|e| e.to_string())?;
            out.write_all(b"\n").map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    let mut w = csv::Writer::from_writer(out);
    if rows.is_empty() {
        w.write_record([
            "src_host",
            "src_pids",
            "src_device",
            "dst_host",
            "dst_pids",
            "dst_device",
            "qps",
        ])
        .map_err(|e| e.to_string())?;
    }
    for r in &rows {
        w.serialize(r).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

/// The link families: one series per link and family, labelled src_host, src_device,
/// dst_host, dst_device (pids and GIDs stay out of the labels: a NIC is its host and device,
/// and a relaunch must not start new series). Cardinality: links x 7 families, at most
/// NICs x (NICs - 1) links (all-to-all: 512 NICs give 261,632 links, 1.8 M series), so for
/// large runs export the per-host-pair view of `links` or the CSV rather than Prometheus.
pub const LINK_FAMILIES: [(&str, &str, &str); 7] = [
    ("rccl_telemetry_link_qps", "gauge", "QPs of src whose peer QP is on dst."),
    ("rccl_telemetry_link_wqe_sent_total", "counter", "WRs src posted on the link's QPs."),
    ("rccl_telemetry_link_wqe_received_total", "counter", "WRs dst's matched QPs received (the same direction seen from dst)."),
    ("rccl_telemetry_link_tx_bytes_estimate", "gauge", "src's tx bytes shared out by the link's part of its sent WRs (an estimate: bytes are counted per device)."),
    ("rccl_telemetry_link_p50_completion_seconds", "gauge", "Median completion latency at src towards dst (see rccl-telemetry links for the histogram and its error)."),
    ("rccl_telemetry_link_p99_completion_seconds", "gauge", "p99 completion latency at src towards dst."),
    ("rccl_telemetry_link_stalled_qps", "gauge", "QPs of the link stalled when the file was written (files with stall keys)."),
];

fn prom_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The link rows as Prometheus text.
pub fn prometheus_links(run: &Run) -> String {
    use std::fmt::Write as _;
    let lr = crate::links::join(run);
    let mut out = String::new();
    for (i, (name, kind, help)) in LINK_FAMILIES.iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for l in &lr.links {
            let v: Option<f64> = match i {
                0 => Some(l.qps as f64),
                1 => Some(l.wrs_sent as f64),
                2 => Some(l.wrs_received_by_dst as f64),
                3 => Some(l.tx_bytes_est as f64),
                4 => l.latency.as_ref().and_then(|x| x.p50_ns).map(|x| x / 1e9),
                5 => l.latency.as_ref().and_then(|x| x.p99_ns).map(|x| x / 1e9),
                _ => l.qps_stalled.map(|x| x as f64),
            };
            if let Some(v) = v {
                let _ = writeln!(
                    out,
                    "{name}{{src_host=\"{}\",src_device=\"{}\",dst_host=\"{}\",dst_device=\"{}\"}} {}",
                    prom_label(&l.src.host),
                    prom_label(&l.src.device),
                    prom_label(&l.dst.host),
                    prom_label(&l.dst.device),
                    promtext::prom_f64(v)
                );
            }
        }
    }
    out
}
