//! `export`: Prometheus text exposition, and CSV / NDJSON in one long, tidy table.

use crate::load::{BadKind, Run};
use crate::model::{parse_timestamp_ns, Counters, Device, HwValue, TelemetryFile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

// ---------------------------------------------------------------------------------------------
// Prometheus

/// Sanitises a name into the Prometheus metric-name alphabet [a-zA-Z0-9_].
pub fn prom_name(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' }).collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Rewrites a counter name into Prometheus base units, by its unit token (not a fixed list of
/// names): microseconds, milliseconds and nanoseconds become seconds, bits become bytes.
/// Returns the new name, the factor to multiply values by, and the unit when one was converted.
pub fn base_unit(name: &str) -> (String, f64, Option<&'static str>) {
    let mut scale = 1.0;
    let mut unit = None;
    let tokens: Vec<&str> = name
        .split('_')
        .map(|t| match t {
            "us" | "usec" | "usecs" | "microseconds" => {
                scale = 1e-6;
                unit = Some("seconds");
                "seconds"
            }
            "ms" | "msec" | "msecs" | "milliseconds" => {
                scale = 1e-3;
                unit = Some("seconds");
                "seconds"
            }
            "ns" | "nsec" | "nsecs" | "nanoseconds" => {
                scale = 1e-9;
                unit = Some("seconds");
                "seconds"
            }
            "bits" => {
                scale = 0.125;
                unit = Some("bytes");
                "bytes"
            }
            other => other,
        })
        .collect();
    (tokens.join("_"), scale, unit)
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Formats a float the way the exposition format reads it.
fn prom_f64(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        let s = format!("{v}");
        s
    }
}

/// (host, device, hw_type): the low-cardinality key every per-device series is labelled with.
type Key = (String, String, String);

struct Family {
    help: String,
    kind: &'static str,
    /// (labels, value) in insertion order, merged by labels.
    samples: BTreeMap<Vec<(String, String)>, f64>,
}

#[derive(Default)]
struct Families {
    order: Vec<String>,
    map: BTreeMap<String, Family>,
}

#[derive(Clone, Copy)]
enum Merge {
    Sum,
    Max,
}

impl Families {
    fn add(&mut self, name: &str, help: &str, kind: &'static str, labels: Vec<(String, String)>, v: f64, merge: Merge) {
        if !self.map.contains_key(name) {
            self.order.push(name.to_string());
            self.map.insert(name.to_string(), Family { help: help.to_string(), kind, samples: BTreeMap::new() });
        }
        let fam = self.map.get_mut(name).expect("inserted above");
        let e = fam.samples.entry(labels).or_insert(match merge {
            Merge::Sum => 0.0,
            Merge::Max => f64::NEG_INFINITY,
        });
        match merge {
            Merge::Sum => *e += v,
            Merge::Max => *e = e.max(v),
        }
    }
}

fn key_labels(k: &Key) -> Vec<(String, String)> {
    vec![("host".into(), k.0.clone()), ("device".into(), k.1.clone()), ("hw_type".into(), k.2.clone())]
}

fn with(mut l: Vec<(String, String)>, k: &str, v: &str) -> Vec<(String, String)> {
    l.push((k.to_string(), v.to_string()));
    l
}

/// Renders the run as Prometheus text exposition format (version 0.0.4).
///
/// Series are labelled by host, device (the RoCE device name) and hw_type only: ranks that
/// share a device on a host are summed (software counters) or maxed (hardware counters, which
/// every such rank reads from the same NIC). Channels, QPs and pids are not labels.
pub fn prometheus(run: &Run) -> String {
    let mut f = Families::default();
    let p = "rccl_telemetry_";
    let mut hosts: BTreeMap<&str, f64> = BTreeMap::new();
    let (mut start, mut end): (Option<i128>, Option<i128>) = (None, None);
    // Latency histograms per key; only merged when the bucket widths agree.
    let mut hists: BTreeMap<Key, (u64, Vec<u64>, bool)> = BTreeMap::new();
    // Log-scale histograms per key (version-2 files), and every bucket upper bound seen.
    let mut log_hists: BTreeMap<Key, Vec<crate::model::LogBucket>> = BTreeMap::new();
    let mut log_bounds: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();

    for l in &run.files {
        let tf = &l.file;
        *hosts.entry(&tf.host_name).or_default() += 1.0;
        if let Some(t) = parse_timestamp_ns(&tf.start_time) {
            start = Some(start.map_or(t, |s| s.min(t)));
        }
        if let Some(t) = parse_timestamp_ns(&tf.end_time) {
            end = Some(end.map_or(t, |e| e.max(t)));
        }
        for d in tf.devices.iter().filter(|d| d.is_used()) {
            let k: Key = (tf.host_name.clone(), d.roce_device.clone(), d.hw_type.clone());
            let kl = key_labels(&k);
            let sum = |g: fn(&Counters) -> u64| d.sum_channels(|c| g(&c.counters)) as f64;
            let c = "counter";
            let g = "gauge";
            f.add(&format!("{p}tx_bytes_total"), "Bytes sent (software count).", c, kl.clone(), d.tx_bytes as f64, Merge::Sum);
            f.add(&format!("{p}rx_bytes_total"), "Bytes received (software count).", c, kl.clone(), d.rx_bytes as f64, Merge::Sum);
            f.add(&format!("{p}cq_errors_total"), "Completions drained with an error status.", c, kl.clone(), d.num_cq_errors as f64, Merge::Sum);
            f.add(&format!("{p}cq_polls_total"), "ibv_poll_cq calls.", c, kl.clone(), d.cq_poll_count as f64, Merge::Sum);
            f.add(&format!("{p}wqes_sent_total"), "Send WQEs posted.", c, kl.clone(), sum(|x| x.num_wqe_sent), Merge::Sum);
            f.add(&format!("{p}recv_wqes_posted_total"), "Receive WQEs posted.", c, kl.clone(), sum(|x| x.num_recv_wqe), Merge::Sum);
            f.add(&format!("{p}wqes_drained_total"), "Completions drained from the CQ, send and receive (num_wqe_rcvd).", c, kl.clone(), sum(|x| x.num_wqe_rcvd), Merge::Sum);
            f.add(&format!("{p}wqes_completed_total"), "Completions matched to a tracked posting.", c, kl.clone(), sum(|x| x.num_wqe_completed), Merge::Sum);
            f.add(&format!("{p}cts_sent_total"), "CTS messages posted, by whether the WR was signalled.", c, with(kl.clone(), "signalled", "true"), sum(|x| x.num_cts_sent_signalled), Merge::Sum);
            f.add(&format!("{p}cts_sent_total"), "CTS messages posted, by whether the WR was signalled.", c, with(kl.clone(), "signalled", "false"), sum(|x| x.num_cts_sent_unsignalled), Merge::Sum);
            f.add(&format!("{p}slot_misses_total"), "CTS FIFO slot misses.", c, kl.clone(), sum(|x| x.num_slot_miss), Merge::Sum);
            f.add(&format!("{p}rdma_writes_total"), "RDMA write postings, by immediate data.", c, with(kl.clone(), "immediate", "false"), sum(|x| x.num_write_wqe), Merge::Sum);
            f.add(&format!("{p}rdma_writes_total"), "RDMA write postings, by immediate data.", c, with(kl.clone(), "immediate", "true"), sum(|x| x.num_write_imm_wqe), Merge::Sum);
            f.add(&format!("{p}requests_completed_total"), "Network requests completed.", c, kl.clone(), d.sum_channels(|c| c.num_req_completed) as f64, Merge::Sum);
            f.add(&format!("{p}untracked_qps"), "QPs that got no stats slot; their traffic is missing from every counter.", g, kl.clone(), d.num_qp_untracked as f64, Merge::Sum);
            f.add(&format!("{p}qps"), "Tracked queue pairs, by role.", g, with(kl.clone(), "role", "data"), d.sum_channels(|c| c.num_data_qp) as f64, Merge::Sum);
            f.add(&format!("{p}qps"), "Tracked queue pairs, by role.", g, with(kl.clone(), "role", "cts"), d.sum_channels(|c| c.num_cts_qp) as f64, Merge::Sum);
            f.add(&format!("{p}active_channels"), "Channels that carried traffic.", g, kl.clone(), d.active_channels as f64, Merge::Sum);

            for (name, v) in &d.hw_counters {
                let (base, scale, unit) = base_unit(&prom_name(name.strip_prefix("delta_").unwrap_or(name)));
                let metric = format!("{p}hw_{base}_total");
                let help = format!(
                    "NIC hardware counter {name}, delta over the run{}; absent where the NIC does not expose it.",
                    unit.map_or(String::new(), |u| format!(", converted to {u}"))
                );
                match v {
                    HwValue::Scalar(x) if *x >= 0 => f.add(&metric, &help, "counter", kl.clone(), *x as f64 * scale, Merge::Max),
                    HwValue::PerPrio(a) => {
                        for (prio, x) in a.iter().enumerate() {
                            if *x >= 0 {
                                f.add(&metric, &help, "counter", with(kl.clone(), "priority", &prio.to_string()), *x as f64 * scale, Merge::Max);
                            }
                        }
                    }
                    _ => {}
                }
            }
            let e = hists.entry(k.clone()).or_insert((tf.histogram_interval_ns, Vec::new(), true));
            if e.0 != tf.histogram_interval_ns {
                e.2 = false;
            }
            crate::model::add_hist(&mut e.1, &d.histogram());
            if let Some(h) = d.log_histogram() {
                log_bounds.extend(h.iter().filter_map(|b| b.1));
                crate::model::add_log_hist(log_hists.entry(k).or_default(), &h);
            }
        }
    }
    for (h, n) in hosts {
        f.add(&format!("{p}ranks"), "Rank files read, per host.", "gauge", vec![("host".into(), h.to_string())], n, Merge::Sum);
    }
    let skipped = run.bad.iter().filter(|b| b.kind != BadKind::Missing).count();
    f.add(&format!("{p}files_skipped"), "Input files that could not be read and were skipped.", "gauge", vec![], skipped as f64, Merge::Sum);
    if let Some(s) = start {
        f.add(&format!("{p}run_start_timestamp_seconds"), "Earliest start_time over the ranks.", "gauge", vec![], s as f64 / 1e9, Merge::Sum);
    }
    if let Some(e) = end {
        f.add(&format!("{p}run_end_timestamp_seconds"), "Latest end_time over the ranks.", "gauge", vec![], e as f64 / 1e9, Merge::Sum);
    }

    let mut out = String::new();
    for name in &f.order {
        let fam = &f.map[name];
        let _ = writeln!(out, "# HELP {name} {}", fam.help);
        let _ = writeln!(out, "# TYPE {name} {}", fam.kind);
        for (labels, v) in &fam.samples {
            let _ = writeln!(out, "{name}{} {}", fmt_labels(labels), prom_f64(*v));
        }
    }
    // The completion-latency histogram, in seconds; the last bucket is +Inf. The sum of the
    // latencies is not recorded by the library, so _sum is absent (allowed by the format).
    let name = format!("{p}wqe_completion_seconds");
    let mut wrote_header = false;
    for (k, (w, h, same_width)) in &hists {
        if !same_width || h.is_empty() || h.iter().all(|c| *c == 0) {
            continue;
        }
        if !wrote_header {
            let _ = writeln!(out, "# HELP {name} WQE completion latency over the sampled completions (no _sum: not recorded).");
            let _ = writeln!(out, "# TYPE {name} histogram");
            wrote_header = true;
        }
        let mut cum = 0u64;
        for (b, c) in h.iter().enumerate() {
            cum = cum.saturating_add(*c);
            let le = if b + 1 == h.len() { "+Inf".to_string() } else { prom_f64((b as f64 + 1.0) * *w as f64 / 1e9) };
            let _ = writeln!(out, "{name}_bucket{} {cum}", fmt_labels(&with(key_labels(k), "le", &le)));
        }
        let _ = writeln!(out, "{name}_count{} {cum}", fmt_labels(&key_labels(k)));
    }
    // The log-scale histogram (version-2 files) as classic buckets: every series gets the same
    // `le` set, the upper bounds (inclusive, in seconds) of every bucket non-empty anywhere in
    // the run, so sum by (le) and histogram_quantile work across hosts and devices.
    let name = format!("{p}wqe_completion_log_seconds");
    if log_hists.values().any(|h| h.iter().any(|b| b.2 > 0)) {
        let _ = writeln!(out, "# HELP {name} WQE completion latency over the sampled completions, log-scale buckets at most 1/8 of their lower bound wide (wqe_completion_log_histogram; no _sum: not recorded).");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (k, h) in &log_hists {
            let mut cum = 0u64;
            let mut it = h.iter().peekable();
            for le in &log_bounds {
                while let Some(b) = it.peek().filter(|b| b.1.is_some_and(|hi| hi <= *le)) {
                    cum = cum.saturating_add(b.2);
                    it.next();
                }
                let _ = writeln!(out, "{name}_bucket{} {cum}", fmt_labels(&with(key_labels(k), "le", &prom_f64(*le as f64 / 1e9))));
            }
            let total = h.iter().fold(0u64, |s, b| s.saturating_add(b.2));
            let _ = writeln!(out, "{name}_bucket{} {total}", fmt_labels(&with(key_labels(k), "le", "+Inf")));
            let _ = writeln!(out, "{name}_count{} {total}", fmt_labels(&key_labels(k)));
        }
    }
    out
}

fn fmt_labels(labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
    format!("{{{}}}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_become_base_units() {
        assert_eq!(base_unit("pfc_rx_pause_duration_us"), ("pfc_rx_pause_duration_seconds".into(), 1e-6, Some("seconds")));
        assert_eq!(base_unit("fec_corrected_bits"), ("fec_corrected_bytes".into(), 0.125, Some("bytes")));
        assert_eq!(base_unit("cnp_sent"), ("cnp_sent".into(), 1.0, None));
        // A token only matches whole: "status" is not "us".
        assert_eq!(base_unit("link_status_msgs").0, "link_status_msgs");
    }
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
                HwValue::Scalar(x) => emit(Row { scope: "hw", metric: name, value: avail(*x), ..base.clone() }),
                HwValue::PerPrio(a) => {
                    for (i, x) in a.iter().enumerate() {
                        emit(Row { scope: "hw", metric: name, index: Some(i as u64), value: avail(*x), ..base.clone() })
                    }
                }
            }
        }
        if let Some(samples) = &f.hw_samples {
            for s in samples.iter().filter(|s| s.device_id == d.device_id) {
                for (name, v) in &s.counters {
                    emit(Row { scope: "hw_sample", metric: name, timestamp_ns: Some(s.timestamp_ns), value: avail(*v), ..base.clone() });
                }
            }
        }
        if level == Level::Device {
            continue;
        }
        for c in &d.channels {
            let cb = Row { scope: "channel", channel: c.id, ..base.clone() };
            counter_rows(&cb, &c.counters, emit);
            log_rows(&cb, c.wqe_completion_log_histogram.as_deref(), emit);
            for (m, v) in [
                ("num_req_completed", c.num_req_completed),
                ("num_data_qp", c.num_data_qp),
                ("num_cts_qp", c.num_cts_qp),
                ("num_qp_untracked", c.num_qp_untracked),
            ] {
                emit(Row { metric: m, value: clamp_u64(v), ..cb.clone() });
            }
            if level == Level::Qp {
                for q in &c.queue_pairs {
                    let qb = Row { scope: "qp", qp: Some(q.id), role: q.role.as_deref(), ..cb.clone() };
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
        emit(Row { metric: m, value: v, ..base.clone() });
    }
    for w in &d.wqe_size_stats {
        emit(Row { metric: "wqe_size_count", index: Some(w.max_wqe_size), value: clamp_u64(w.num_wqe), ..base.clone() });
    }
    log_rows(base, d.wqe_completion_log_histogram.as_deref(), emit);
}

/// The log-scale histogram (version-2 files): one row per non-empty bucket, index = its lower
/// bound in ns (the bucket ends below the next row's lower bound; the file has the upper bound).
fn log_rows<'a>(base: &Row<'a>, h: Option<&[crate::model::LogBucket]>, emit: &mut dyn FnMut(Row<'a>)) {
    for (lo, _, n) in h.unwrap_or_default() {
        emit(Row { metric: "wqe_completion_log_histogram", index: Some(*lo), value: clamp_u64(*n), ..base.clone() });
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
        emit(Row { metric: m, value: clamp_u64(v), ..base.clone() });
    }
    if let Some(s) = c.num_wqe_sampled {
        emit(Row { metric: "num_wqe_sampled", value: clamp_u64(s), ..base.clone() });
    }
    emit(Row { metric: "wqe_completion_ns_min", value: avail(c.wqe_completion_ns_min), ..base.clone() });
    emit(Row { metric: "wqe_completion_ns_max", value: avail(c.wqe_completion_ns_max), ..base.clone() });
    for (b, v) in c.wqe_completion_histogram.iter().enumerate() {
        emit(Row { metric: "wqe_completion_histogram", index: Some(b as u64), value: clamp_u64(*v), ..base.clone() });
    }
}

/// Writes every row of the run as CSV (with a header) or NDJSON.
pub fn write_tidy(run: &Run, level: Level, ndjson: bool, out: &mut dyn Write) -> Result<(), String> {
    let paths: Vec<String> = run.files.iter().map(|l| l.path.display().to_string()).collect();
    if ndjson {
        let mut err = None;
        for (l, p) in run.files.iter().zip(&paths) {
            rows(p, &l.file, level, &mut |r| {
                if err.is_none() {
                    if let Err(e) = serde_json::to_writer(&mut *out, &r).map_err(|e| e.to_string()).and_then(|_| out.write_all(b"\n").map_err(|e| e.to_string())) {
                        err = Some(e);
                    }
                }
            });
        }
        return err.map_or(Ok(()), Err);
    }
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(out);
    let mut err = None;
    // An empty run still gets its header.
    w.write_record([
        "file", "host", "pid", "process", "device_id", "roce_device", "hw_type", "scope", "channel", "qp", "role", "metric", "index", "timestamp_ns", "value",
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
