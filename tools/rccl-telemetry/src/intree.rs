//! Files written by RCCL's in-tree C engine (`net_telemetry.cc`, `"version": "1.0"`), read
//! onto this tool's model. The format's own rules, for `check`, are in `check::intree`.
//!
//! The format is described in ../shared/design/INTREE_FORMAT.md (in the repository: the tool
//! README's "Files of the in-tree engine"). What differs from ours and how it is mapped:
//!
//! | in-tree | here |
//! | --- | --- |
//! | `"version": "1.0"`, `"process_id": "12345"` (strings) | `format: InTree`, the pid as a number |
//! | local `"YYYY-MM-DD HH:MM:SS"` times, no zone | kept as written; never compared across files |
//! | `data_qp: true/false` | `role: "data"/"cts"` |
//! | histogram objects `{latency_ns: (b+1)*w, num_wqe}` | counts; `w` is bucket 0's `latency_ns` |
//! | min/max `0` when nothing was measured | `-1` |
//! | no latency, CTS split, slot-miss or write fields per channel | summed over the channel's QPs |
//! | its hardware counter names (`oos_drop_count`, `cnp_rcvd`, ...) | this library's names |
//! | `hw_samples`: CLOCK_MONOTONIC `ts_us`, absolute values | `timestamp_ns` (still monotonic), change since the device's first sample |

use crate::model::{
    Channel, Counters, Device, HwSample, HwValue, QueuePair, SourceFormat, TelemetryFile,
    WqeSizeStat,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
#[cfg(test)]
use std::collections::BTreeSet;

/// The in-tree engine's hardware counter names that differ from this library's vocabulary,
/// with the name used here (see ../../data/nic_counters.json for the driver names behind them).
pub const COUNTER_NAMES: &[(&str, &str)] = &[
    ("seq_err_naks_rcvd", "packet_seq_err"),
    ("oos_drop_count", "out_of_sequence"),
    ("rnr_retry_err", "rnr_nak_retry_err"),
    ("max_retry_exceeded", "retry_exceeded_err"),
    ("to_retransmits", "local_ack_timeout_err"),
    ("cnp_rcvd", "cnp_handled"),
    ("pfc_rx_pause_frames", "pfc_rx_frames_total"),
    ("pfc_tx_pause_frames", "pfc_tx_frames_total"),
    ("pfc_rx_pause_us", "pfc_rx_pause_duration_us"),
    ("pfc_tx_pause_us", "pfc_tx_pause_duration_us"),
    ("dup_req", "duplicate_request"),
    ("rx_write_req", "rx_write_requests"),
    ("rx_read_req", "rx_read_requests"),
];

/// The in-tree engine's per-priority arrays (8 integers each).
pub(crate) const PFC_ARRAYS: [&str; 4] = [
    "pfc_rx_frames",
    "pfc_tx_frames",
    "pfc_rx_pause_us",
    "pfc_tx_pause_us",
];
/// Written last in every device's hw_counters.
pub(crate) const ALWAYS_DELTAS: [&str; 4] = [
    "delta_tx_bytes",
    "delta_rx_bytes",
    "delta_tx_packets",
    "delta_rx_packets",
];
/// The engine stops sampling for good at this many samples and records nothing about it.
pub const SAMPLE_CAP: usize = 100_000;

/// This library's name for an in-tree counter name.
pub fn our_name(name: &str) -> &str {
    COUNTER_NAMES
        .iter()
        .find(|(it, _)| *it == name)
        .map_or(name, |(_, ours)| ours)
}

/// True when a parsed document says it was written by the in-tree engine.
pub fn is_intree(v: &Value) -> bool {
    v.get("version").and_then(Value::as_str) == Some("1.0")
}

/// What a format-wide limitation of the in-tree files means for the analysis: said once per run
/// by `check` (and in the README), not on every file.
pub const LIMITATIONS: &[&str] = &[
    "start_time/end_time are local times without a zone: the tool does not compare them across files, and a run's span is only known per file",
    "hw_samples ts_us is CLOCK_MONOTONIC (time since that host booted): sample times do not line up across hosts",
    "there is no final/trigger key: a snapshot cannot be told from a file written at exit",
    "the last histogram bucket is open-ended although its latency_ns reads like an upper bound",
    "0 stands for \"no latency measured\" in wqe_completion_ns_min/max, and -1 for \"not available\" in hw_counters is indistinguishable from a counter that went back by exactly 1",
];

// ---------------------------------------------------------------------------------------------
// The format as typed data

#[derive(Deserialize)]
pub(crate) struct ItFile {
    pub(crate) version: String,
    pub(crate) host_name: String,
    pub(crate) process_name: String,
    pub(crate) process_id: String,
    pub(crate) start_time: String,
    pub(crate) end_time: String,
    #[serde(default)]
    pub(crate) transport: Option<String>,
    #[serde(default)]
    pub(crate) latency_sample_interval: Option<u64>,
    pub(crate) devices: Vec<ItDevice>,
    #[serde(default)]
    pub(crate) hw_samples: Option<Vec<ItSample>>,
}

#[derive(Deserialize)]
pub(crate) struct ItDevice {
    pub(crate) device_id: u32,
    pub(crate) roce_device: String,
    pub(crate) eth_device: String,
    pub(crate) hw_type: String,
    pub(crate) tx_bytes: u64,
    pub(crate) rx_bytes: u64,
    pub(crate) num_cq_errors: u64,
    pub(crate) cq_poll_count: u64,
    pub(crate) num_channels: Option<u64>,
    pub(crate) active_channels: u64,
    pub(crate) num_qp_untracked: u64,
    #[serde(default)]
    pub(crate) wqe_size_stats: Vec<WqeSizeStat>,
    pub(crate) channels: Vec<ItChannel>,
    pub(crate) hw_counters: BTreeMap<String, HwValue>,
}

#[derive(Deserialize)]
pub(crate) struct ItChannel {
    pub(crate) id: Option<u64>,
    pub(crate) num_wqe_sent: u64,
    pub(crate) num_recv_wqe: u64,
    pub(crate) num_wqe_rcvd: u64,
    pub(crate) num_wqe_completed: u64,
    #[serde(default)]
    pub(crate) num_wqe_sampled: Option<u64>,
    pub(crate) num_cts_sent: u64,
    pub(crate) num_req_completed: u64,
    pub(crate) num_data_qp: u64,
    pub(crate) num_cts_qp: u64,
    pub(crate) num_qp_untracked: u64,
    pub(crate) queue_pairs: Vec<ItQp>,
}

#[derive(Deserialize)]
pub(crate) struct ItQp {
    pub(crate) id: u64,
    pub(crate) data_qp: bool,
    pub(crate) num_wqe_sent: u64,
    pub(crate) num_recv_wqe: u64,
    pub(crate) num_wqe_rcvd: u64,
    pub(crate) num_wqe_completed: u64,
    pub(crate) num_slot_miss: u64,
    pub(crate) num_cts_sent: u64,
    pub(crate) num_cts_sent_signalled: u64,
    pub(crate) num_cts_sent_unsignalled: u64,
    pub(crate) num_write_wqe: u64,
    pub(crate) num_write_imm_wqe: u64,
    #[serde(default)]
    pub(crate) num_wqe_sampled: Option<u64>,
    pub(crate) wqe_completion_ns_min: i64,
    pub(crate) wqe_completion_ns_max: i64,
    pub(crate) wqe_completion_histogram: Vec<ItBucket>,
}

#[derive(Deserialize)]
pub(crate) struct ItBucket {
    pub(crate) latency_ns: u64,
    pub(crate) num_wqe: u64,
}

#[derive(Deserialize)]
pub(crate) struct ItSample {
    pub(crate) ts_us: u64,
    pub(crate) device_id: u32,
    #[allow(dead_code)]
    pub(crate) roce_device: String,
    #[serde(flatten)]
    pub(crate) counters: BTreeMap<String, i64>,
}

/// A serde_path_to_error path as a JSON Pointer.
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut p = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => p.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                p.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1")))
            }
            Segment::Enum { variant } => p.push_str(&format!("/{variant}")),
            Segment::Unknown => p.push_str("/?"),
        }
    }
    p
}

pub(crate) fn typed(v: &Value) -> Result<ItFile, (String, String)> {
    serde_path_to_error::deserialize::<_, ItFile>(v)
        .map_err(|e| (pointer(e.path()), e.inner().to_string()))
}

// ---------------------------------------------------------------------------------------------
// Mapping onto the model

/// The bucket width a file's histograms name (bucket 0's latency_ns), if any QP has one.
pub(crate) fn interval(f: &ItFile) -> Option<u64> {
    f.devices
        .iter()
        .flat_map(|d| &d.channels)
        .flat_map(|c| &c.queue_pairs)
        .find_map(|q| q.wqe_completion_histogram.first().map(|b| b.latency_ns))
}

fn qp_counters(q: &ItQp) -> Counters {
    let hist: Vec<u64> = q
        .wqe_completion_histogram
        .iter()
        .map(|b| b.num_wqe)
        .collect();
    let measured = hist.iter().any(|n| *n > 0);
    // 0 is the in-tree engine's "nothing measured"; -1 is ours.
    let (mn, mx) = if measured {
        (q.wqe_completion_ns_min, q.wqe_completion_ns_max)
    } else {
        (-1, -1)
    };
    Counters {
        num_wqe_sent: q.num_wqe_sent,
        num_recv_wqe: q.num_recv_wqe,
        num_wqe_rcvd: q.num_wqe_rcvd,
        num_wqe_completed: q.num_wqe_completed,
        num_wqe_sampled: q.num_wqe_sampled,
        num_cts_sent: q.num_cts_sent,
        num_cts_sent_signalled: q.num_cts_sent_signalled,
        num_cts_sent_unsignalled: q.num_cts_sent_unsignalled,
        num_slot_miss: q.num_slot_miss,
        num_write_wqe: q.num_write_wqe,
        num_write_imm_wqe: q.num_write_imm_wqe,
        wqe_completion_ns_min: mn,
        wqe_completion_ns_max: mx,
        wqe_completion_histogram: hist,
        ..Default::default()
    }
}

fn channel(c: ItChannel) -> Channel {
    let qps: Vec<QueuePair> = c
        .queue_pairs
        .iter()
        .map(|q| QueuePair {
            id: q.id,
            role: Some(if q.data_qp { "data" } else { "cts" }.into()),
            counters: qp_counters(q),
            ..Default::default()
        })
        .collect();
    let sum = |g: fn(&Counters) -> u64| {
        qps.iter()
            .fold(0u64, |s, q| s.saturating_add(g(&q.counters)))
    };
    let mut hist = Vec::new();
    for q in &qps {
        crate::model::add_hist(&mut hist, &q.counters.wqe_completion_histogram);
    }
    let (mn, mx) = crate::model::latency_range(qps.iter().map(|q| &q.counters));
    let counters = Counters {
        num_wqe_sent: c.num_wqe_sent,
        num_recv_wqe: c.num_recv_wqe,
        num_wqe_rcvd: c.num_wqe_rcvd,
        num_wqe_completed: c.num_wqe_completed,
        num_wqe_sampled: c.num_wqe_sampled,
        num_cts_sent: c.num_cts_sent,
        // Not written per channel by the in-tree engine: the sums over its queue pairs.
        num_cts_sent_signalled: sum(|x| x.num_cts_sent_signalled),
        num_cts_sent_unsignalled: sum(|x| x.num_cts_sent_unsignalled),
        num_slot_miss: sum(|x| x.num_slot_miss),
        num_write_wqe: sum(|x| x.num_write_wqe),
        num_write_imm_wqe: sum(|x| x.num_write_imm_wqe),
        wqe_completion_ns_min: mn,
        wqe_completion_ns_max: mx,
        wqe_completion_histogram: hist,
        ..Default::default()
    };
    Channel {
        id: c.id,
        comm: None,
        counters,
        num_req_completed: c.num_req_completed,
        num_data_qp: c.num_data_qp,
        num_cts_qp: c.num_cts_qp,
        num_qp_untracked: c.num_qp_untracked,
        queue_pairs: qps,
        wqe_completion_log_histogram: None,
        dropped_qps: 0,
    }
}

/// Absolute sample values become the change since the device's first available value of that
/// counter (this model's samples are deltas); -1 stays "not available".
fn samples(raw: Vec<ItSample>) -> Vec<HwSample> {
    let mut first: BTreeMap<(u32, String), i64> = BTreeMap::new();
    raw.into_iter()
        .map(|s| {
            let counters = s
                .counters
                .into_iter()
                .map(|(k, v)| {
                    let name = our_name(&k).to_string();
                    if v < 0 {
                        return (name, -1);
                    }
                    let base = *first.entry((s.device_id, name.clone())).or_insert(v);
                    // A value below the first one is a reset: it cannot be a delta, say "not available".
                    (name, if v >= base { v - base } else { -1 })
                })
                .collect();
            HwSample {
                device_id: s.device_id,
                timestamp_ns: s.ts_us.saturating_mul(1000),
                counters,
            }
        })
        .collect()
}

/// Maps a parsed in-tree document onto the model; Err is the one-line reason it cannot be.
pub fn to_model(v: &Value) -> Result<TelemetryFile, String> {
    let f = typed(v).map_err(|(p, m)| {
        format!(
            "not an in-tree telemetry file: {}: {m}",
            if p.is_empty() { "/" } else { &p }
        )
    })?;
    let pid: i64 = f.process_id.trim().parse().map_err(|_| {
        format!(
            "not an in-tree telemetry file: /process_id: {:?} is not a process id",
            f.process_id
        )
    })?;
    let width = interval(&f).unwrap_or(0);
    let devices = f
        .devices
        .into_iter()
        .map(|d| Device {
            device_id: d.device_id,
            roce_device: d.roce_device,
            eth_device: d.eth_device,
            hw_type: d.hw_type,
            tx_bytes: d.tx_bytes,
            rx_bytes: d.rx_bytes,
            num_cq_errors: d.num_cq_errors,
            cq_poll_count: d.cq_poll_count,
            num_channels: d.num_channels,
            active_channels: d.active_channels,
            num_qp_untracked: d.num_qp_untracked,
            wqe_size_stats: d.wqe_size_stats,
            channels: d.channels.into_iter().map(channel).collect(),
            hw_counters: d
                .hw_counters
                .into_iter()
                .map(|(k, v)| (our_name(&k).to_string(), v))
                .collect(),
            wqe_completion_log_histogram: None,
            ..Default::default()
        })
        .collect();
    Ok(TelemetryFile {
        format: SourceFormat::InTree,
        version: 1,
        host_name: f.host_name,
        process_name: f.process_name,
        process_id: pid,
        start_time: f.start_time,
        end_time: f.end_time,
        is_final: None,
        trigger: None,
        transport: f.transport,
        histogram_interval_ns: width,
        latency_sample_interval: f.latency_sample_interval,
        devices,
        hw_samples: f.hw_samples.map(samples),
        hw_samples_dropped: None,
        stall_ms: None,
        rank: None,
        communicators: None,
        slow_threshold_ns: None,
        source: None,
    })
}

// ---------------------------------------------------------------------------------------------
// Diagnosing a file that is not JSON

/// When bytes that do not parse look like an in-tree file, says why in words a user can act
/// on: an unescaped host name (the engine writes it verbatim) or a file that ends early.
pub fn diagnose_unparsable(bytes: &[u8], eof: bool) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let looks_intree = text.find("\"version\"").is_some_and(|i| {
        text[i + 9..]
            .trim_start()
            .strip_prefix(':')
            .is_some_and(|r| r.trim_start().starts_with("\"1.0\""))
    });
    if !looks_intree {
        return None;
    }
    if let Some(i) = text.find("\"host_name\"") {
        let rest = &text[i + "\"host_name\"".len()..];
        let line = rest.lines().next().unwrap_or("");
        let value = line.trim_start().strip_prefix(':').unwrap_or(line).trim();
        let value = value.strip_suffix(',').unwrap_or(value).trim_end();
        if serde_json::from_str::<String>(value).is_err() {
            return Some(format!(
                "in-tree file (version \"1.0\") broken by its host name {value}: the in-tree engine writes host_name without escaping, so a quote, backslash or control character in it makes the file invalid JSON"
            ));
        }
    }
    eof.then(|| "in-tree file (version \"1.0\") truncated: it ends before the JSON does (the process died or the disk filled while the engine was writing it)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_onto_the_vocabulary() {
        assert_eq!(our_name("oos_drop_count"), "out_of_sequence");
        assert_eq!(our_name("cnp_rcvd"), "cnp_handled");
        assert_eq!(our_name("cnp_sent"), "cnp_sent");
        // Every target is a name this library writes, and no two in-tree names collide.
        let targets: BTreeSet<&str> = COUNTER_NAMES.iter().map(|(_, o)| *o).collect();
        assert_eq!(targets.len(), COUNTER_NAMES.len());
    }

    #[test]
    fn a_broken_host_name_is_named() {
        let bad = b"{\n  \"version\": \"1.0\",\n  \"host_name\": \"node\"7\",\n  \"process_name\": \"x\"\n}";
        let why = diagnose_unparsable(bad, false).unwrap();
        assert!(
            why.contains("host name \"node\"7\"") && why.contains("without escaping"),
            "{why}"
        );
        let cut = b"{\n  \"version\": \"1.0\",\n  \"host_name\": \"node7\",\n  \"devi";
        assert!(diagnose_unparsable(cut, true)
            .unwrap()
            .contains("truncated"));
        // Our own format is not diagnosed as in-tree.
        assert_eq!(
            diagnose_unparsable(b"{\"version\": 1, \"host_name\": \"a\"b\"", false),
            None
        );
    }

    #[test]
    fn samples_become_changes_since_the_first() {
        let raw = vec![
            ItSample {
                ts_us: 10,
                device_id: 0,
                roce_device: "m".into(),
                counters: [("oos_drop_count".to_string(), 100)].into(),
            },
            ItSample {
                ts_us: 20,
                device_id: 0,
                roce_device: "m".into(),
                counters: [("oos_drop_count".to_string(), 130)].into(),
            },
            ItSample {
                ts_us: 30,
                device_id: 0,
                roce_device: "m".into(),
                counters: [("oos_drop_count".to_string(), 5)].into(),
            },
            ItSample {
                ts_us: 30,
                device_id: 1,
                roce_device: "n".into(),
                counters: [("oos_drop_count".to_string(), -1)].into(),
            },
        ];
        let s = samples(raw);
        let v: Vec<i64> = s.iter().map(|x| x.counters["out_of_sequence"]).collect();
        assert_eq!(v, vec![0, 30, -1, -1]);
        assert_eq!(s[1].timestamp_ns, 20_000);
    }
}
