//! `export`: Prometheus text exposition, and CSV / NDJSON in one long, tidy table.
//!
//! This file writes the Prometheus text; `tidy.rs` the tidy CSV / NDJSON rows, `links.rs` the
//! link rows of `export --links` (CSV, NDJSON and Prometheus). The Parquet tables are in
//! parquet.rs.

use crate::load::{BadKind, Run};
use crate::model::{
    log_buckets_opt, parse_timestamp_ns, CommRef, Counters, Device, HwValue, TelemetryFile,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

mod links;
pub mod parquet;
mod tidy;
pub use links::*;
pub use tidy::*;

// ---------------------------------------------------------------------------------------------
// Prometheus

use crate::promtext::{self, Level as PromLevel};
pub use crate::promtext::{base_unit, prom_name};
use rccl_telemetry_format::wc_status;

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
    promtext::Counts::of(c.values(), c.wqe_completion_histogram.clone())
}

/// A channel's communicator as its series' labels.
fn comm_labels(c: Option<&CommRef>) -> Option<promtext::CommLabels> {
    c.map(|m| promtext::CommLabels {
        hash: m.hash.clone(),
        rank: m.rank,
        nranks: m.nranks,
    })
}

fn device(d: &Device) -> promtext::Device {
    let mut finalized = promtext::Counts::default();
    for f in &d.finalized_comms {
        finalized.add(&promtext::Counts {
            log_hist: log_buckets_opt(f.wqe_completion_log_histogram.as_deref()),
            ..counts(&f.counters)
        });
    }
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
                (k.to_string(), v)
            })
            .collect(),
        channels: d
            .channels
            .iter()
            .map(|c| promtext::Channel {
                id: c.id,
                comm: comm_labels(c.comm.as_ref()),
                counts: promtext::Counts {
                    log_hist: log_buckets_opt(c.wqe_completion_log_histogram.as_deref()),
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
                        role: q.role.as_deref().map(String::from),
                        counts: counts(&q.counters),
                        monitor: q.latency_stats().map(|s| promtext::QpLatency {
                            count: q.counters.wqe_completion_histogram.iter().sum(),
                            mean_ns: s.wqe_completion_ns_mean,
                            stddev_ns: s.wqe_completion_ns_stddev,
                            quantiles_ns: [
                                s.wqe_completion_ns_p50,
                                s.wqe_completion_ns_p90,
                                s.wqe_completion_ns_p99,
                                s.wqe_completion_ns_p999,
                            ],
                        }),
                    })
                    .collect(),
            })
            .collect(),
        finalized,
        finalized_requests: d.finalized_comms.iter().map(|f| f.num_req_completed).sum(),
        finalized_qps: d.finalized_comms.iter().map(|f| f.num_qps).sum(),
        qp_settings: promtext::QpSettings::tally(
            d.channels
                .iter()
                .flat_map(|c| &c.queue_pairs)
                .filter_map(|q| q.attrs())
                .map(promtext::QpSettings::from),
        ),
        port_qos: promtext::PortQos::from(d),
    }
}

/// One file as the library's live textfile would have shown it when the file was written.
pub fn prom_rank(tf: &TelemetryFile) -> promtext::Rank {
    let secs = |s: &str| parse_timestamp_ns(s).map(|t| t as f64 / 1e9);
    promtext::Rank {
        host: tf.host_name.clone(),
        pid: u64::try_from(tf.process_id).unwrap_or(0),
        rank: tf.rank.map(|r| r.to_string()),
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
                    comm: comm_labels(c.comm.as_ref()),
                    qp: q.id,
                    qp_num: q.qp_num.and_then(|n| u32::try_from(n).ok()),
                    peer_gid: q
                        .peer
                        .as_ref()
                        .and_then(|p| p.gid.as_deref().map(String::from)),
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

/// One file's error completions as the live textfile showed them when the file was written
/// (version 4 files; empty for older ones): the devices the rank's series show, each with its
/// errors by status, and every QP that had an error, with its first.
fn error_devices(tf: &TelemetryFile, r: &promtext::Rank) -> Vec<promtext::DevErrors> {
    let ordered = |m: &BTreeMap<String, u64>| {
        let mut v: Vec<(String, u64)> = m.iter().map(|(k, n)| (k.clone(), *n)).collect();
        v.sort_by(|a, b| wc_status::order_key(&a.0).cmp(&wc_status::order_key(&b.0)));
        v
    };
    let mut out = Vec::new();
    for d in &tf.devices {
        let Some(by_status) = &d.cq_errors_by_status else {
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
            for q in &c.queue_pairs {
                let Some(first) = &q.first_cq_error else {
                    continue;
                };
                qps.push(promtext::ErroredQp {
                    channel: c
                        .id
                        .map_or_else(|| format!("unknown_{pos}"), |id| id.to_string()),
                    qp: q.id,
                    qp_num: q.qp_num.and_then(|n| u32::try_from(n).ok()),
                    peer_gid: q
                        .peer
                        .as_ref()
                        .and_then(|p| p.gid.as_deref().map(String::from)),
                    peer_qp_num: q.peer.as_ref().and_then(|p| u32::try_from(p.qp_num).ok()),
                    by_status: q.cq_errors.as_deref().map(ordered).unwrap_or_default(),
                    comm: comm_labels(c.comm.as_ref()),
                    first_status: first.status.clone(),
                    first_s: parse_timestamp_ns(&first.time).map_or(0.0, |t| t as f64 / 1e9),
                });
            }
        }
        out.push(promtext::DevErrors {
            name: shown.name.clone(),
            hw_type: shown.hw_type.clone(),
            by_status: ordered(by_status),
            qps,
        });
    }
    out
}

/// Appends exposition fragments that may each hold the same families (one rank's stall
/// series each) as one exposition: every family's HELP and TYPE line once, then all of its
/// samples, families in the order they first appear. A sample belongs to the family of the
/// HELP or TYPE line above it, as in the format.
fn merge_families(fragments: &[String], out: &mut String) {
    struct Fam<'a> {
        help: Option<&'a str>,
        kind: Option<&'a str>,
        samples: Vec<&'a str>,
    }
    let mut order: Vec<&str> = Vec::new();
    let mut fams: BTreeMap<&str, Fam<'_>> = BTreeMap::new();
    for frag in fragments {
        let mut cur: Option<&str> = None;
        for line in frag.lines() {
            let header = line
                .strip_prefix("# HELP ")
                .map(|r| (true, r))
                .or_else(|| line.strip_prefix("# TYPE ").map(|r| (false, r)));
            if let Some((is_help, rest)) = header {
                let name = rest.split(' ').next().unwrap_or(rest);
                let f = fams.entry(name).or_insert_with(|| {
                    order.push(name);
                    Fam {
                        help: None,
                        kind: None,
                        samples: Vec::new(),
                    }
                });
                let slot = if is_help { &mut f.help } else { &mut f.kind };
                slot.get_or_insert(line);
                cur = Some(name);
            } else if !line.is_empty() && !line.starts_with('#') {
                match cur.and_then(|c| fams.get_mut(c)) {
                    Some(f) => f.samples.push(line),
                    None => {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
        }
    }
    for name in order {
        let f = &fams[name];
        for l in f.help.iter().chain(&f.kind).chain(&f.samples) {
            out.push_str(l);
            out.push('\n');
        }
    }
}

/// Renders the run as Prometheus text exposition format (version 0.0.4) at the default depth
/// (device and channel series, as the library's live textfile).
pub fn prometheus(run: &Run) -> String {
    prometheus_at(run, Level::Channel).0
}

/// Renders the run at `level`, with the families, help texts and labels of the library's live
/// textfile (both render with the format crate's `promtext`): one set of series per rank (`host`, `pid`), so
/// summing over ranks, or taking the max of a NIC's hardware counters over the ranks that
/// share it, is PromQL's job. Then the run-wide families. Also returns how many files were
/// left out because an earlier file had the same host and pid.
pub fn prometheus_at(run: &Run, level: Level) -> (String, usize) {
    let ranks: Vec<promtext::Rank> = run.files.iter().map(|l| prom_rank(&l.file)).collect();
    let mut out = String::new();
    let dups = promtext::render(&ranks, level.into(), &mut out);
    // The stall and error families after the counters, as the live textfile has them (stall
    // families: files written with stall detection on only; error families: version 4). The renderer writes one rank's families with their HELP
    // and TYPE lines; a run of many ranks needs each family's lines once, its samples together.
    let stalls: Vec<String> = run
        .files
        .iter()
        .zip(&ranks)
        .map(|(l, r)| {
            let mut s = String::new();
            promtext::render_stalls(r, &stall_devices(&l.file, r), &mut s);
            promtext::render_errors(r, &error_devices(&l.file, r), &mut s);
            s
        })
        .collect();
    merge_families(&stalls, &mut out);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_of_the_same_families_merge_into_one_header_each() {
        let a = "# HELP x_a A.\n# TYPE x_a gauge\nx_a{r=\"1\"} 1\n# HELP x_b B.\n# TYPE x_b gauge\nx_b{r=\"1\"} 2\n";
        let b = "# HELP x_a A.\n# TYPE x_a gauge\nx_a{r=\"2\"} 3\n# HELP x_c C.\n# TYPE x_c gauge\nx_c 4\n";
        let mut out = String::new();
        merge_families(&[a.to_string(), String::new(), b.to_string()], &mut out);
        assert_eq!(
            out,
            "# HELP x_a A.\n# TYPE x_a gauge\nx_a{r=\"1\"} 1\nx_a{r=\"2\"} 3\n\
             # HELP x_b B.\n# TYPE x_b gauge\nx_b{r=\"1\"} 2\n\
             # HELP x_c C.\n# TYPE x_c gauge\nx_c 4\n"
        );
    }
}
