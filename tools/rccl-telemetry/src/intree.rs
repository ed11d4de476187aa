//! Files written by RCCL's in-tree C engine (`net_telemetry.cc`, `"version": "1.0"`), read
//! onto this tool's model, and checked against that format's own rules.
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
use std::collections::{BTreeMap, BTreeSet};

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
const PFC_ARRAYS: [&str; 4] = [
    "pfc_rx_frames",
    "pfc_tx_frames",
    "pfc_rx_pause_us",
    "pfc_tx_pause_us",
];
/// Written last in every device's hw_counters.
const ALWAYS_DELTAS: [&str; 4] = [
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
struct ItFile {
    version: String,
    host_name: String,
    process_name: String,
    process_id: String,
    start_time: String,
    end_time: String,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    latency_sample_interval: Option<u64>,
    devices: Vec<ItDevice>,
    #[serde(default)]
    hw_samples: Option<Vec<ItSample>>,
}

#[derive(Deserialize)]
struct ItDevice {
    device_id: u32,
    roce_device: String,
    eth_device: String,
    hw_type: String,
    tx_bytes: u64,
    rx_bytes: u64,
    num_cq_errors: u64,
    cq_poll_count: u64,
    num_channels: Option<u64>,
    active_channels: u64,
    num_qp_untracked: u64,
    #[serde(default)]
    wqe_size_stats: Vec<WqeSizeStat>,
    channels: Vec<ItChannel>,
    hw_counters: BTreeMap<String, HwValue>,
}

#[derive(Deserialize)]
struct ItChannel {
    id: Option<u64>,
    num_wqe_sent: u64,
    num_recv_wqe: u64,
    num_wqe_rcvd: u64,
    num_wqe_completed: u64,
    #[serde(default)]
    num_wqe_sampled: Option<u64>,
    num_cts_sent: u64,
    num_req_completed: u64,
    num_data_qp: u64,
    num_cts_qp: u64,
    num_qp_untracked: u64,
    queue_pairs: Vec<ItQp>,
}

#[derive(Deserialize)]
struct ItQp {
    id: u64,
    data_qp: bool,
    num_wqe_sent: u64,
    num_recv_wqe: u64,
    num_wqe_rcvd: u64,
    num_wqe_completed: u64,
    num_slot_miss: u64,
    num_cts_sent: u64,
    num_cts_sent_signalled: u64,
    num_cts_sent_unsignalled: u64,
    num_write_wqe: u64,
    num_write_imm_wqe: u64,
    #[serde(default)]
    num_wqe_sampled: Option<u64>,
    wqe_completion_ns_min: i64,
    wqe_completion_ns_max: i64,
    wqe_completion_histogram: Vec<ItBucket>,
}

#[derive(Deserialize)]
struct ItBucket {
    latency_ns: u64,
    num_wqe: u64,
}

#[derive(Deserialize)]
struct ItSample {
    ts_us: u64,
    device_id: u32,
    #[allow(dead_code)]
    roce_device: String,
    #[serde(flatten)]
    counters: BTreeMap<String, i64>,
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

fn typed(v: &Value) -> Result<ItFile, (String, String)> {
    serde_path_to_error::deserialize::<_, ItFile>(v)
        .map_err(|e| (pointer(e.path()), e.inner().to_string()))
}

// ---------------------------------------------------------------------------------------------
// Mapping onto the model

/// The bucket width a file's histograms name (bucket 0's latency_ns), if any QP has one.
fn interval(f: &ItFile) -> Option<u64> {
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
            role: Some(if q.data_qp { "data" } else { "cts" }.to_string()),
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
    let mn = qps
        .iter()
        .map(|q| q.counters.wqe_completion_ns_min)
        .filter(|v| *v >= 0)
        .min()
        .unwrap_or(-1);
    let mx = qps
        .iter()
        .map(|q| q.counters.wqe_completion_ns_max)
        .filter(|v| *v >= 0)
        .max()
        .unwrap_or(-1);
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
        counters,
        num_req_completed: c.num_req_completed,
        num_data_qp: c.num_data_qp,
        num_cts_qp: c.num_cts_qp,
        num_qp_untracked: c.num_qp_untracked,
        queue_pairs: qps,
        wqe_completion_log_histogram: None,
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

// ---------------------------------------------------------------------------------------------
// check: the in-tree format's own rules

/// One finding of `check` on an in-tree file: (JSON Pointer, kind, message). Kinds: "format"
/// (a key or type the engine does not write), "invariant" (a rule of the format broken, or a
/// value the engine got wrong) and "limitation" (what this file cannot tell; not a violation).
pub type Finding = (String, &'static str, String);

const TOP_KEYS: &[(&str, bool)] = &[
    ("version", true),
    ("host_name", true),
    ("process_name", true),
    ("process_id", true),
    ("start_time", true),
    ("end_time", true),
    ("transport", true),
    ("latency_sample_interval", false),
    ("devices", true),
    ("hw_samples", false),
];
const DEVICE_KEYS: &[(&str, bool)] = &[
    ("device_id", true),
    ("roce_device", true),
    ("eth_device", true),
    ("hw_type", true),
    ("tx_bytes", true),
    ("rx_bytes", true),
    ("num_cq_errors", true),
    ("cq_poll_count", true),
    ("num_channels", true),
    ("active_channels", true),
    ("num_qp_untracked", true),
    ("wqe_size_stats", true),
    ("channels", true),
    ("hw_counters", true),
];
const CHANNEL_KEYS: &[(&str, bool)] = &[
    ("id", true),
    ("num_wqe_sent", true),
    ("num_recv_wqe", true),
    ("num_wqe_rcvd", true),
    ("num_wqe_completed", true),
    ("num_wqe_sampled", false),
    ("num_cts_sent", true),
    ("num_req_completed", true),
    ("num_data_qp", true),
    ("num_cts_qp", true),
    ("num_qp_untracked", true),
    ("queue_pairs", true),
];
const QP_KEYS: &[(&str, bool)] = &[
    ("id", true),
    ("data_qp", true),
    ("num_wqe_sent", true),
    ("num_recv_wqe", true),
    ("num_wqe_rcvd", true),
    ("num_wqe_completed", true),
    ("num_slot_miss", true),
    ("num_cts_sent", true),
    ("num_cts_sent_signalled", true),
    ("num_cts_sent_unsignalled", true),
    ("num_write_wqe", true),
    ("num_write_imm_wqe", true),
    ("num_wqe_sampled", false),
    ("wqe_completion_ns_min", true),
    ("wqe_completion_ns_max", true),
    ("wqe_completion_histogram", true),
];

/// Missing required keys and keys the engine never writes, at one level.
fn keys(p: &str, v: &Value, allowed: &[(&str, bool)], level: &str, out: &mut Vec<Finding>) {
    let Some(obj) = v.as_object() else {
        out.push((
            p.to_string(),
            "format",
            format!(
                "the in-tree engine writes a {level} as an object, not {}",
                kind_of(v)
            ),
        ));
        return;
    };
    for (k, required) in allowed {
        if *required && !obj.contains_key(*k) {
            out.push((
                p.to_string(),
                "format",
                format!("{level} has no \"{k}\" key, which the in-tree engine always writes"),
            ));
        }
    }
    for k in obj.keys() {
        if !allowed.iter().any(|(a, _)| a == k) {
            out.push((
                format!("{p}/{}", k.replace('~', "~0").replace('/', "~1")),
                "format",
                format!("\"{k}\" is not a key of the in-tree engine's {level}"),
            ));
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// "YYYY-MM-DD HH:MM:SS" as a sortable tuple, or None when it is not that.
pub fn parse_local(s: &str) -> Option<(i64, i64, i64, i64, i64, i64)> {
    let b = s.as_bytes();
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let t = (
        n(0..4)?,
        n(5..7)?,
        n(8..10)?,
        n(11..13)?,
        n(14..16)?,
        n(17..19)?,
    );
    ((1..=12).contains(&t.1) && (1..=31).contains(&t.2) && t.3 <= 23 && t.4 <= 59 && t.5 <= 60)
        .then_some(t)
}

/// Seconds between two local times of one file (same host and zone; a DST change inside the
/// run shifts it by the change).
pub fn local_seconds(a: &str, b: &str) -> Option<i64> {
    let secs = |s: &str| -> Option<i64> {
        let (y, mo, d, h, mi, se) = parse_local(s)?;
        let ns = crate::model::parse_timestamp_ns(&format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}Z"
        ))?;
        Some((ns / 1_000_000_000) as i64)
    };
    Some(secs(b)? - secs(a)?)
}

/// Every rule of the in-tree format broken by one parsed document, and what it cannot tell.
pub fn check(v: &Value) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    keys("", v, TOP_KEYS, "file", &mut out);
    if let Some(devs) = v.get("devices").and_then(Value::as_array) {
        for (di, d) in devs.iter().enumerate() {
            let dp = format!("/devices/{di}");
            keys(&dp, d, DEVICE_KEYS, "device", &mut out);
            for (ci, c) in d
                .get("channels")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let cp = format!("{dp}/channels/{ci}");
                keys(&cp, c, CHANNEL_KEYS, "channel", &mut out);
                for (qi, q) in c
                    .get("queue_pairs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    keys(
                        &format!("{cp}/queue_pairs/{qi}"),
                        q,
                        QP_KEYS,
                        "queue pair",
                        &mut out,
                    );
                }
            }
        }
    }
    let f = match typed(v) {
        Ok(f) => f,
        Err((p, m)) => {
            // The key findings above usually say it better; the type error is the rest.
            if out.is_empty() || !m.starts_with("missing field") {
                out.push((p, "format", m));
            }
            return out;
        }
    };
    let mut err = |p: String, m: String| out.push((p, "invariant", m));
    if f.version != "1.0" {
        err(
            "/version".into(),
            format!(
                "version {:?} is not the in-tree engine's \"1.0\"",
                f.version
            ),
        );
    }
    if f.process_id.is_empty() || !f.process_id.bytes().all(|c| c.is_ascii_digit()) {
        err(
            "/process_id".into(),
            format!("process_id {:?} is not a decimal pid", f.process_id),
        );
    }
    for (k, s) in [("start_time", &f.start_time), ("end_time", &f.end_time)] {
        if parse_local(s).is_none() {
            err(
                format!("/{k}"),
                format!("{k} {s:?} is not \"YYYY-MM-DD HH:MM:SS\""),
            );
        }
    }
    if let (Some(a), Some(b)) = (parse_local(&f.start_time), parse_local(&f.end_time)) {
        if b < a {
            err(
                "/end_time".into(),
                format!(
                    "end_time {} is before start_time {} (both local times of this host)",
                    f.end_time, f.start_time
                ),
            );
        }
    }
    let sampled = match f.latency_sample_interval {
        Some(n) if n < 2 || !n.is_power_of_two() => {
            err(
                "/latency_sample_interval".into(),
                format!("{n}: the in-tree engine writes this key only for a power of two N > 1"),
            );
            true
        }
        Some(_) => true,
        None => false,
    };
    let width = interval(&f);
    let mut n_buckets: Option<usize> = None;
    let mut device_ids = BTreeSet::new();
    let mut minus_one = 0usize;
    for (di, d) in f.devices.iter().enumerate() {
        let dp = format!("/devices/{di}");
        if !device_ids.insert(d.device_id) {
            err(
                format!("{dp}/device_id"),
                format!("device_id {} appears twice", d.device_id),
            );
        }
        if !["ainic", "mlx5", "thor2", "unsupported"].contains(&d.hw_type.as_str()) {
            err(
                format!("{dp}/hw_type"),
                format!(
                    "hw_type {:?} is not ainic, mlx5, thor2 or unsupported",
                    d.hw_type
                ),
            );
        }
        if d.tx_bytes == 0 && d.rx_bytes == 0 && d.num_cq_errors == 0 && d.active_channels == 0 {
            err(dp.clone(), "a device with no bytes, no CQ errors and no active channel: the in-tree engine leaves such devices out".into());
        }
        let in_channels = d
            .channels
            .iter()
            .fold(0u64, |s, c| s.saturating_add(c.num_qp_untracked));
        if d.num_qp_untracked < in_channels {
            err(
                format!("{dp}/num_qp_untracked"),
                format!(
                    "device num_qp_untracked {} < {in_channels} summed over its channels",
                    d.num_qp_untracked
                ),
            );
        }
        // hw_counters: -1 or a delta >= 0; four PFC arrays of 8; the four byte/packet deltas.
        for (name, val) in &d.hw_counters {
            let hp = format!(
                "{dp}/hw_counters/{}",
                name.replace('~', "~0").replace('/', "~1")
            );
            let vals: Vec<i64> = match val {
                HwValue::Scalar(x) => {
                    if PFC_ARRAYS.contains(&name.as_str()) {
                        err(hp.clone(), format!("{name} is a per-priority array of 8 integers in this format, not a number"));
                    }
                    vec![*x]
                }
                HwValue::PerPrio(a) => {
                    if !PFC_ARRAYS.contains(&name.as_str()) {
                        err(
                            hp.clone(),
                            format!(
                                "{name} is an array, but only {} are arrays in this format",
                                PFC_ARRAYS.join(", ")
                            ),
                        );
                    } else if a.len() != 8 {
                        err(
                            hp.clone(),
                            format!("per-priority array has {} entries, not 8", a.len()),
                        );
                    }
                    a.clone()
                }
            };
            minus_one += vals.iter().filter(|x| **x == -1).count();
            if let Some(x) = vals.iter().find(|x| **x < -1) {
                err(
                    hp,
                    format!("negative delta {x}: the counter went backwards during the run (reset, driver reload or wrap); the in-tree engine does no reset handling, so this value is wrong and is read as not available"),
                );
            }
        }
        for k in ALWAYS_DELTAS {
            if !d.hw_counters.contains_key(k) {
                err(
                    format!("{dp}/hw_counters"),
                    format!("no {k}, which the in-tree engine always writes"),
                );
            }
        }
        for k in PFC_ARRAYS {
            if d.hw_counters.contains_key(k) {
                continue;
            }
            // The arrays are written for every supported NIC.
            if d.hw_type != "unsupported" {
                err(
                    format!("{dp}/hw_counters"),
                    format!(
                        "no {k} array, which the in-tree engine writes for every {} device",
                        d.hw_type
                    ),
                );
            }
        }
        let mut channel_ids = BTreeSet::new();
        for (ci, c) in d.channels.iter().enumerate() {
            let cp = format!("{dp}/channels/{ci}");
            match (c.id, d.num_channels) {
                (Some(id), Some(_)) => {
                    if !channel_ids.insert(id) {
                        err(format!("{cp}/id"), format!("channel id {id} appears twice on this device"));
                    }
                }
                (Some(id), None) => err(format!("{cp}/id"), format!("channel id {id} on a device whose num_channels is null (channel ids unknown)")),
                (None, Some(n)) => err(format!("{cp}/id"), format!("channel id is null on a device with num_channels {n}")),
                (None, None) => {}
            }
            if c.num_wqe_sampled.is_some() != sampled {
                err(format!("{cp}/num_wqe_sampled"), sampled_rule(sampled));
            }
            let qps = &c.queue_pairs;
            let sum = |g: fn(&ItQp) -> u64| qps.iter().fold(0u64, |s, q| s.saturating_add(g(q)));
            type QpField = fn(&ItQp) -> u64;
            let fields: [(&str, u64, QpField); 6] = [
                ("num_wqe_sent", c.num_wqe_sent, |q| q.num_wqe_sent),
                ("num_recv_wqe", c.num_recv_wqe, |q| q.num_recv_wqe),
                ("num_wqe_rcvd", c.num_wqe_rcvd, |q| q.num_wqe_rcvd),
                ("num_wqe_completed", c.num_wqe_completed, |q| {
                    q.num_wqe_completed
                }),
                ("num_cts_sent", c.num_cts_sent, |q| q.num_cts_sent),
                ("num_wqe_sampled", c.num_wqe_sampled.unwrap_or(0), |q| {
                    q.num_wqe_sampled.unwrap_or(0)
                }),
            ];
            for (name, total, g) in fields {
                let s = sum(g);
                if total != s {
                    err(
                        format!("{cp}/{name}"),
                        format!(
                            "channel total {total} != {s} summed over its {} queue pairs",
                            qps.len()
                        ),
                    );
                }
            }
            let data = qps.iter().filter(|q| q.data_qp).count() as u64;
            let cts = qps.len() as u64 - data;
            if c.num_data_qp != data {
                err(
                    format!("{cp}/num_data_qp"),
                    format!(
                        "num_data_qp {} != {data} queue pairs with data_qp true",
                        c.num_data_qp
                    ),
                );
            }
            if c.num_cts_qp != cts {
                err(
                    format!("{cp}/num_cts_qp"),
                    format!(
                        "num_cts_qp {} != {cts} queue pairs with data_qp false",
                        c.num_cts_qp
                    ),
                );
            }
            for (qi, q) in qps.iter().enumerate() {
                let qp = format!("{cp}/queue_pairs/{qi}");
                if q.num_wqe_sampled.is_some() != sampled {
                    err(format!("{qp}/num_wqe_sampled"), sampled_rule(sampled));
                }
                if q.num_cts_sent_signalled
                    .saturating_add(q.num_cts_sent_unsignalled)
                    != q.num_cts_sent
                {
                    err(
                        format!("{qp}/num_cts_sent"),
                        format!("num_cts_sent_signalled {} + num_cts_sent_unsignalled {} != num_cts_sent {}", q.num_cts_sent_signalled, q.num_cts_sent_unsignalled, q.num_cts_sent),
                    );
                }
                let h = &q.wqe_completion_histogram;
                match n_buckets {
                    None => n_buckets = Some(h.len()),
                    Some(n) if n != h.len() => err(
                        format!("{qp}/wqe_completion_histogram"),
                        format!(
                            "has {} buckets, other histograms in this file have {n}",
                            h.len()
                        ),
                    ),
                    _ => {}
                }
                if !(1..=16).contains(&h.len()) {
                    err(
                        format!("{qp}/wqe_completion_histogram"),
                        format!(
                            "{} buckets: RCCL_TELEMETRY_HISTOGRAM_BUCKETS is 1..16",
                            h.len()
                        ),
                    );
                }
                if let Some(w) = width {
                    for (b, bucket) in h.iter().enumerate() {
                        let want = (b as u64 + 1).saturating_mul(w);
                        if bucket.latency_ns != want {
                            err(
                                format!("{qp}/wqe_completion_histogram/{b}/latency_ns"),
                                format!("latency_ns {} != (b+1) x {w} = {want} (bucket 0 of this file names a {w} ns width)", bucket.latency_ns),
                            );
                        }
                    }
                }
                if w_is_zero(width) {
                    err(
                        format!("{qp}/wqe_completion_histogram/0/latency_ns"),
                        "latency_ns 0: the bucket width must be > 0".into(),
                    );
                }
                let hsum = h.iter().fold(0u64, |s, b| s.saturating_add(b.num_wqe));
                let (what, expected) = match q.num_wqe_sampled {
                    Some(s) => ("num_wqe_sampled", s),
                    None => ("num_wqe_completed", q.num_wqe_completed),
                };
                if hsum != expected {
                    err(
                        format!("{qp}/wqe_completion_histogram"),
                        format!("histogram holds {hsum} completions, {what} is {expected}"),
                    );
                }
                let (mn, mx) = (q.wqe_completion_ns_min, q.wqe_completion_ns_max);
                if mn < 0 || mx < 0 {
                    err(format!("{qp}/wqe_completion_ns_min"), format!("min {mn} / max {mx}: this format writes 0, not a negative value, when nothing was measured"));
                } else if hsum == 0 && (mn != 0 || mx != 0) {
                    err(format!("{qp}/wqe_completion_ns_min"), format!("min {mn} / max {mx} although the histogram is empty (this format writes 0 then)"));
                } else if hsum > 0 && mn > mx {
                    err(
                        format!("{qp}/wqe_completion_ns_min"),
                        format!("min {mn} > max {mx}"),
                    );
                } else if let (true, Some(w)) = (hsum > 0, width.filter(|w| *w > 0)) {
                    let bucket_of = |x: i64| ((x as u64) / w).min(h.len() as u64 - 1) as usize;
                    let first = h.iter().position(|b| b.num_wqe > 0).unwrap_or(0);
                    let last = h.iter().rposition(|b| b.num_wqe > 0).unwrap_or(0);
                    if bucket_of(mn) != first {
                        err(format!("{qp}/wqe_completion_ns_min"), format!("min {mn} ns falls in bucket {}, but the first non-empty bucket is {first}", bucket_of(mn)));
                    }
                    if bucket_of(mx) != last {
                        err(format!("{qp}/wqe_completion_ns_max"), format!("max {mx} ns falls in bucket {}, but the last non-empty bucket is {last}", bucket_of(mx)));
                    }
                }
            }
        }
    }
    if let Some(samples) = &f.hw_samples {
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        for (si, s) in samples.iter().enumerate() {
            let sp = format!("/hw_samples/{si}");
            if let Some(prev) = last.insert(s.device_id, s.ts_us) {
                if s.ts_us < prev {
                    err(format!("{sp}/ts_us"), format!("ts_us {} goes backwards (previous sample of device {}: {prev}); CLOCK_MONOTONIC cannot", s.ts_us, s.device_id));
                }
            }
            for (name, x) in &s.counters {
                if *x < -1 {
                    err(
                        format!("{sp}/{}", name.replace('~', "~0").replace('/', "~1")),
                        format!("value {x}: samples are absolute counter values, -1 or >= 0"),
                    );
                }
            }
        }
        if samples.len() >= SAMPLE_CAP {
            out.push((
                "/hw_samples".into(),
                "limitation",
                format!("{} samples: the in-tree engine stops sampling for good at {SAMPLE_CAP} and records no dropped count, so the rest of the run has no samples", samples.len()),
            ));
        }
    }
    if minus_one > 0 {
        out.push((
            "/devices".into(),
            "limitation",
            format!("{minus_one} hardware counter values read -1: in this format that is either \"not available\" or a counter that went back by exactly 1; the tool reads them as not available"),
        ));
    }
    out
}

fn w_is_zero(w: Option<u64>) -> bool {
    w == Some(0)
}

fn sampled_rule(sampled: bool) -> String {
    if sampled {
        "num_wqe_sampled is missing although latency_sample_interval is written (N > 1)".into()
    } else {
        "num_wqe_sampled is written although latency_sample_interval is absent (N = 1)".into()
    }
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
    fn local_times_parse_and_subtract() {
        assert_eq!(
            parse_local("2026-12-02 11:00:05"),
            Some((2026, 12, 2, 11, 0, 5))
        );
        assert_eq!(parse_local("2026-12-02T11:00:05"), None);
        assert_eq!(parse_local("2026-12-02 11:00:0x"), None);
        assert_eq!(parse_local("2026-13-02 11:00:05"), None);
        assert_eq!(
            local_seconds("2026-12-31 23:59:30", "2027-01-01 00:01:00"),
            Some(90)
        );
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
