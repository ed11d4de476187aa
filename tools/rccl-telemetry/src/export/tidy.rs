//! `export --format csv|ndjson`: every figure of the files as one long, tidy table (one
//! observation a row: rank, device, channel, QP, metric, value), to the depth `--level` asks.
//! Separate from the Prometheus text (export.rs), which has families and labels, not rows.

use super::*;
use rccl_telemetry_format::counters::FIELDS;

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
    /// Histogram bucket, PFC priority (of a per-priority counter and of pfc_enabled),
    /// max_wqe_size for wqe_size_count, the bucket's lower bound in ns for
    /// wqe_completion_log_histogram, or the DSCP of dscp_priority; empty otherwise.
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
                    monitor_rows(&qb, q, emit);
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
    port_qos_rows(base, d, emit);
}

/// The port's settings (version 5), where the file has them: `active_mtu`; `pfc_enabled`, one
/// row per priority (index) valued 1 or 0; `dscp_priority`, one row per mapped DSCP (index)
/// valued its priority.
fn port_qos_rows<'a>(base: &Row<'a>, d: &'a Device, emit: &mut dyn FnMut(Row<'a>)) {
    if let Some(m) = d.active_mtu {
        emit(Row {
            metric: "active_mtu",
            value: Some(i64::from(m)),
            ..base.clone()
        });
    }
    if let Some(on) = &d.pfc_enabled {
        for p in 0..8u8 {
            emit(Row {
                metric: "pfc_enabled",
                index: Some(u64::from(p)),
                value: Some(i64::from(on.contains(&p))),
                ..base.clone()
            });
        }
    }
    for (dscp, prio) in d.dscp_priority.iter().flatten() {
        emit(Row {
            metric: "dscp_priority",
            index: Some(u64::from(*dscp)),
            value: Some(i64::from(*prio)),
            ..base.clone()
        });
    }
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

/// The counter table's rows (every object's counts in the table's order, then the optional
/// ones the object has), then its latency.
fn counter_rows<'a>(base: &Row<'a>, c: &'a Counters, emit: &mut dyn FnMut(Row<'a>)) {
    let values = FIELDS.iter().zip(c.values());
    let always = values.clone().filter(|(r, _)| !r.optional);
    let optional = values.filter(|(r, _)| r.optional);
    for (r, v) in always.chain(optional) {
        if let Some(v) = v {
            emit(Row {
                metric: r.key,
                value: clamp_u64(v),
                ..base.clone()
            });
        }
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

/// A QP's local end and the WQE latency monitor's statistics (version 5), where the file has
/// them; the mean and standard deviation rounded to the ns (the values are integers).
fn monitor_rows<'a>(base: &Row<'a>, q: &'a crate::model::QueuePair, emit: &mut dyn FnMut(Row<'a>)) {
    let s = q.latency_stats();
    let round = |v: f64| Some(v.round().clamp(0.0, i64::MAX as f64) as i64);
    for (m, v) in [
        ("port", q.port().and_then(clamp_u64)),
        ("local_lid", q.local_lid().and_then(clamp_u64)),
        (
            "wqe_completion_ns_mean",
            s.and_then(|s| round(s.wqe_completion_ns_mean)),
        ),
        (
            "wqe_completion_ns_stddev",
            s.and_then(|s| round(s.wqe_completion_ns_stddev)),
        ),
        (
            "wqe_completion_ns_p50",
            s.and_then(|s| clamp_u64(s.wqe_completion_ns_p50)),
        ),
        (
            "wqe_completion_ns_p90",
            s.and_then(|s| clamp_u64(s.wqe_completion_ns_p90)),
        ),
        (
            "wqe_completion_ns_p99",
            s.and_then(|s| clamp_u64(s.wqe_completion_ns_p99)),
        ),
        (
            "wqe_completion_ns_p999",
            s.and_then(|s| clamp_u64(s.wqe_completion_ns_p999)),
        ),
    ] {
        if v.is_some() {
            emit(Row {
                metric: m,
                value: v,
                ..base.clone()
            });
        }
    }
}
