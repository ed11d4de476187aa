//! `export --links`: one row (or set of Prometheus series) per link that `links` joins, as CSV,
//! NDJSON or Prometheus text. Separate from the per-rank exports because its rows come from the
//! joined links of the whole run, not from one file at a time.

use super::*;

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
pub fn write_link_rows(
    lr: &crate::links::LinkReport,
    ndjson: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let rows = link_rows(lr);
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
pub fn prometheus_links(lr: &crate::links::LinkReport) -> String {
    use std::fmt::Write as _;
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
