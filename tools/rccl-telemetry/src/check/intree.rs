//! `check` for in-tree files (`"version": "1.0"`): the keys and types RCCL's in-tree engine
//! writes, the rules its figures keep, and what such a file cannot tell (limitations, said once
//! per file, never a violation).
//!
//! Separate from `intree` (reading the format onto the model) because checking a file against
//! the format's own rules is a concern of its own, used by `check` only.

use super::sums::{channel_sum_errors, Summed};
use crate::intree::{
    interval, typed, ItChannel, ItDevice, ItFile, ItQp, ALWAYS_DELTAS, PFC_ARRAYS, SAMPLE_CAP,
};
use crate::model::HwValue;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

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

/// A channel total of the in-tree engine: its key, the channel's value, a queue pair's part.
type ChannelSum = (&'static str, fn(&ItChannel) -> u64, fn(&ItQp) -> u64);

/// The channel totals that are sums over the queue pairs: every row of the counter table
/// (`rccl_telemetry_format::counters`) the in-tree engine writes per channel (its
/// CHANNEL_KEYS), under the same names. The engine's keys are RCCL's format, not this table's:
/// a row added to the table is not one of them.
const CHANNEL_SUMS: [ChannelSum; 6] = [
    ("num_wqe_sent", |c| c.num_wqe_sent, |q| q.num_wqe_sent),
    ("num_recv_wqe", |c| c.num_recv_wqe, |q| q.num_recv_wqe),
    ("num_wqe_rcvd", |c| c.num_wqe_rcvd, |q| q.num_wqe_rcvd),
    (
        "num_wqe_completed",
        |c| c.num_wqe_completed,
        |q| q.num_wqe_completed,
    ),
    ("num_cts_sent", |c| c.num_cts_sent, |q| q.num_cts_sent),
    (
        "num_wqe_sampled",
        |c| c.num_wqe_sampled.unwrap_or(0),
        |q| q.num_wqe_sampled.unwrap_or(0),
    ),
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
    key_findings(v, &mut out);
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
    let mut c = Rules {
        sampled: false,
        width: None,
        n_buckets: None,
        minus_one: 0,
        out,
    };
    c.sampled = c.header(&f);
    c.width = interval(&f);
    let mut device_ids = BTreeSet::new();
    for (di, d) in f.devices.iter().enumerate() {
        let dp = format!("/devices/{di}");
        if !device_ids.insert(d.device_id) {
            c.err(
                format!("{dp}/device_id"),
                format!("device_id {} appears twice", d.device_id),
            );
        }
        c.device(&dp, d);
    }
    c.hw_samples(&f);
    if c.minus_one > 0 {
        c.out.push((
            "/devices".into(),
            "limitation",
            format!("{} hardware counter values read -1: in this format that is either \"not available\" or a counter that went back by exactly 1; the tool reads them as not available", c.minus_one),
        ));
    }
    c.out
}

/// The keys of the file, its devices, channels and queue pairs: unknown or missing ones.
fn key_findings(v: &Value, out: &mut Vec<Finding>) {
    keys("", v, TOP_KEYS, "file", out);
    if let Some(devs) = v.get("devices").and_then(Value::as_array) {
        for (di, d) in devs.iter().enumerate() {
            let dp = format!("/devices/{di}");
            keys(&dp, d, DEVICE_KEYS, "device", out);
            for (ci, c) in d
                .get("channels")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let cp = format!("{dp}/channels/{ci}");
                keys(&cp, c, CHANNEL_KEYS, "channel", out);
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
                        out,
                    );
                }
            }
        }
    }
}

/// One typed in-tree file being checked: what its parts are held to, and the findings.
struct Rules {
    /// Whether latency_sample_interval is written (the sampled keys are then expected).
    sampled: bool,
    /// The bucket width the file names (bucket 0's latency_ns).
    width: Option<u64>,
    /// The histograms' bucket count, from the first one seen.
    n_buckets: Option<usize>,
    /// Hardware counter values of -1 (not available, or back by exactly 1).
    minus_one: usize,
    out: Vec<Finding>,
}

impl Rules {
    /// Records a broken invariant.
    fn err(&mut self, p: String, m: String) {
        self.out.push((p, "invariant", m));
    }

    /// The file's own keys: version, pid, times, sampling interval; returns whether the
    /// file is sampled.
    fn header(&mut self, f: &ItFile) -> bool {
        if f.version != "1.0" {
            self.err(
                "/version".into(),
                format!(
                    "version {:?} is not the in-tree engine's \"1.0\"",
                    f.version
                ),
            );
        }
        if f.process_id.is_empty() || !f.process_id.bytes().all(|c| c.is_ascii_digit()) {
            self.err(
                "/process_id".into(),
                format!("process_id {:?} is not a decimal pid", f.process_id),
            );
        }
        for (k, s) in [("start_time", &f.start_time), ("end_time", &f.end_time)] {
            if parse_local(s).is_none() {
                self.err(
                    format!("/{k}"),
                    format!("{k} {s:?} is not \"YYYY-MM-DD HH:MM:SS\""),
                );
            }
        }
        if let (Some(a), Some(b)) = (parse_local(&f.start_time), parse_local(&f.end_time)) {
            if b < a {
                self.err(
                    "/end_time".into(),
                    format!(
                        "end_time {} is before start_time {} (both local times of this host)",
                        f.end_time, f.start_time
                    ),
                );
            }
        }
        match f.latency_sample_interval {
            Some(n) if n < 2 || !n.is_power_of_two() => {
                self.err(
                    "/latency_sample_interval".into(),
                    format!(
                        "{n}: the in-tree engine writes this key only for a power of two N > 1"
                    ),
                );
                true
            }
            Some(_) => true,
            None => false,
        }
    }

    /// A device: its type, that it did something, its untracked QPs, its hardware
    /// counters, then each of its channels.
    fn device(&mut self, dp: &str, d: &ItDevice) {
        if !["ainic", "mlx5", "thor2", "unsupported"].contains(&d.hw_type.as_str()) {
            self.err(
                format!("{dp}/hw_type"),
                format!(
                    "hw_type {:?} is not ainic, mlx5, thor2 or unsupported",
                    d.hw_type
                ),
            );
        }
        if d.tx_bytes == 0 && d.rx_bytes == 0 && d.num_cq_errors == 0 && d.active_channels == 0 {
            self.err(dp.to_string(), "a device with no bytes, no CQ errors and no active channel: the in-tree engine leaves such devices out".into());
        }
        let in_channels = d
            .channels
            .iter()
            .fold(0u64, |s, c| s.saturating_add(c.num_qp_untracked));
        if d.num_qp_untracked < in_channels {
            self.err(
                format!("{dp}/num_qp_untracked"),
                format!(
                    "device num_qp_untracked {} < {in_channels} summed over its channels",
                    d.num_qp_untracked
                ),
            );
        }
        self.hw_counters(dp, d);
        let mut channel_ids = BTreeSet::new();
        for (ci, c) in d.channels.iter().enumerate() {
            let cp = format!("{dp}/channels/{ci}");
            match (c.id, d.num_channels) {
                (Some(id), Some(_)) => {
                    if !channel_ids.insert(id) {
                        self.err(format!("{cp}/id"), format!("channel id {id} appears twice on this device"));
                    }
                }
                (Some(id), None) => self.err(format!("{cp}/id"), format!("channel id {id} on a device whose num_channels is null (channel ids unknown)")),
                (None, Some(n)) => self.err(format!("{cp}/id"), format!("channel id is null on a device with num_channels {n}")),
                (None, None) => {}
            }
            self.channel(&cp, c);
        }
    }

    /// A device's hw_counters: -1 or a delta >= 0; four PFC arrays of 8; the four
    /// byte/packet deltas.
    fn hw_counters(&mut self, dp: &str, d: &ItDevice) {
        for (name, val) in &d.hw_counters {
            let hp = format!(
                "{dp}/hw_counters/{}",
                name.replace('~', "~0").replace('/', "~1")
            );
            let vals: Vec<i64> = match val {
                HwValue::Scalar(x) => {
                    if PFC_ARRAYS.contains(&name.as_str()) {
                        self.err(hp.clone(), format!("{name} is a per-priority array of 8 integers in this format, not a number"));
                    }
                    vec![*x]
                }
                HwValue::PerPrio(a) => {
                    if !PFC_ARRAYS.contains(&name.as_str()) {
                        self.err(
                            hp.clone(),
                            format!(
                                "{name} is an array, but only {} are arrays in this format",
                                PFC_ARRAYS.join(", ")
                            ),
                        );
                    } else if a.len() != 8 {
                        self.err(
                            hp.clone(),
                            format!("per-priority array has {} entries, not 8", a.len()),
                        );
                    }
                    a.clone()
                }
            };
            self.minus_one += vals.iter().filter(|x| **x == -1).count();
            if let Some(x) = vals.iter().find(|x| **x < -1) {
                self.err(
                    hp,
                    format!("negative delta {x}: the counter went backwards during the run (reset, driver reload or wrap); the in-tree engine does no reset handling, so this value is wrong and is read as not available"),
                );
            }
        }
        for k in ALWAYS_DELTAS {
            if !d.hw_counters.contains_key(k) {
                self.err(
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
                self.err(
                    format!("{dp}/hw_counters"),
                    format!(
                        "no {k} array, which the in-tree engine writes for every {} device",
                        d.hw_type
                    ),
                );
            }
        }
    }

    /// A channel: its sampled key, its totals against its QPs', its QP counts by kind,
    /// then each of its QPs.
    fn channel(&mut self, cp: &str, c: &ItChannel) {
        let sampled = self.sampled;
        if c.num_wqe_sampled.is_some() != sampled {
            self.err(format!("{cp}/num_wqe_sampled"), sampled_rule(sampled));
        }
        let qps = &c.queue_pairs;
        let fields: [Summed<ItQp>; 6] =
            CHANNEL_SUMS.map(|(name, total, part)| (name, total(c), part));
        for (p, m) in channel_sum_errors(cp, qps, |q| q, &fields) {
            self.err(p, m);
        }
        let data = qps.iter().filter(|q| q.data_qp).count() as u64;
        let cts = qps.len() as u64 - data;
        if c.num_data_qp != data {
            self.err(
                format!("{cp}/num_data_qp"),
                format!(
                    "num_data_qp {} != {data} queue pairs with data_qp true",
                    c.num_data_qp
                ),
            );
        }
        if c.num_cts_qp != cts {
            self.err(
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
                self.err(format!("{qp}/num_wqe_sampled"), sampled_rule(sampled));
            }
            if q.num_cts_sent_signalled
                .saturating_add(q.num_cts_sent_unsignalled)
                != q.num_cts_sent
            {
                self.err(
                    format!("{qp}/num_cts_sent"),
                    format!("num_cts_sent_signalled {} + num_cts_sent_unsignalled {} != num_cts_sent {}", q.num_cts_sent_signalled, q.num_cts_sent_unsignalled, q.num_cts_sent),
                );
            }
            self.qp_latency(&qp, q);
        }
    }

    /// A QP's latency: its histogram's buckets and their widths, its count of completions,
    /// its min and max in the first and last non-empty buckets.
    fn qp_latency(&mut self, qp: &str, q: &ItQp) {
        let width = self.width;
        let h = &q.wqe_completion_histogram;
        match self.n_buckets {
            None => self.n_buckets = Some(h.len()),
            Some(n) if n != h.len() => self.err(
                format!("{qp}/wqe_completion_histogram"),
                format!(
                    "has {} buckets, other histograms in this file have {n}",
                    h.len()
                ),
            ),
            _ => {}
        }
        if !(1..=16).contains(&h.len()) {
            self.err(
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
                    self.err(
                        format!("{qp}/wqe_completion_histogram/{b}/latency_ns"),
                        format!("latency_ns {} != (b+1) x {w} = {want} (bucket 0 of this file names a {w} ns width)", bucket.latency_ns),
                    );
                }
            }
        }
        if w_is_zero(width) {
            self.err(
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
            self.err(
                format!("{qp}/wqe_completion_histogram"),
                format!("histogram holds {hsum} completions, {what} is {expected}"),
            );
        }
        let (mn, mx) = (q.wqe_completion_ns_min, q.wqe_completion_ns_max);
        if mn < 0 || mx < 0 {
            self.err(format!("{qp}/wqe_completion_ns_min"), format!("min {mn} / max {mx}: this format writes 0, not a negative value, when nothing was measured"));
        } else if hsum == 0 && (mn != 0 || mx != 0) {
            self.err(format!("{qp}/wqe_completion_ns_min"), format!("min {mn} / max {mx} although the histogram is empty (this format writes 0 then)"));
        } else if hsum > 0 && mn > mx {
            self.err(
                format!("{qp}/wqe_completion_ns_min"),
                format!("min {mn} > max {mx}"),
            );
        } else if let (true, Some(w)) = (hsum > 0, width.filter(|w| *w > 0)) {
            let bucket_of = |x: i64| ((x as u64) / w).min(h.len() as u64 - 1) as usize;
            let first = h.iter().position(|b| b.num_wqe > 0).unwrap_or(0);
            let last = h.iter().rposition(|b| b.num_wqe > 0).unwrap_or(0);
            if bucket_of(mn) != first {
                self.err(
                    format!("{qp}/wqe_completion_ns_min"),
                    format!(
                        "min {mn} ns falls in bucket {}, but the first non-empty bucket is {first}",
                        bucket_of(mn)
                    ),
                );
            }
            if bucket_of(mx) != last {
                self.err(
                    format!("{qp}/wqe_completion_ns_max"),
                    format!(
                        "max {mx} ns falls in bucket {}, but the last non-empty bucket is {last}",
                        bucket_of(mx)
                    ),
                );
            }
        }
    }

    /// The hw_samples: each device's in time order, absolute values; and the sampler's cap.
    fn hw_samples(&mut self, f: &ItFile) {
        let Some(samples) = &f.hw_samples else {
            return;
        };
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        for (si, s) in samples.iter().enumerate() {
            let sp = format!("/hw_samples/{si}");
            if let Some(prev) = last.insert(s.device_id, s.ts_us) {
                if s.ts_us < prev {
                    self.err(format!("{sp}/ts_us"), format!("ts_us {} goes backwards (previous sample of device {}: {prev}); CLOCK_MONOTONIC cannot", s.ts_us, s.device_id));
                }
            }
            for (name, x) in &s.counters {
                if *x < -1 {
                    self.err(
                        format!("{sp}/{}", name.replace('~', "~0").replace('/', "~1")),
                        format!("value {x}: samples are absolute counter values, -1 or >= 0"),
                    );
                }
            }
        }
        if samples.len() >= SAMPLE_CAP {
            self.out.push((
                "/hw_samples".into(),
                "limitation",
                format!("{} samples: the in-tree engine stops sampling for good at {SAMPLE_CAP} and records no dropped count, so the rest of the run has no samples", samples.len()),
            ));
        }
    }
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
    use rccl_telemetry_format::counters::FIELDS;

    /// The engine's counter keys are the table's rows of the same names (intree.rs maps them
    /// onto the model's counters by name), and its channel totals are checked for every row
    /// the engine writes per channel.
    #[test]
    fn the_engines_counters_are_rows_of_the_table_and_each_channel_one_is_summed() {
        let is_row = |k: &str| FIELDS.iter().any(|r| r.key == k);
        let channel_own = [
            "num_req_completed",
            "num_data_qp",
            "num_cts_qp",
            "num_qp_untracked",
        ];
        for (k, _) in QP_KEYS.iter().chain(CHANNEL_KEYS) {
            if k.starts_with("num_") && !channel_own.contains(k) {
                assert!(is_row(k), "{k} is not a row of the counter table");
            }
        }
        let mut summed: Vec<&str> = CHANNEL_SUMS.iter().map(|s| s.0).collect();
        let mut rows: Vec<&str> = CHANNEL_KEYS
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| is_row(k))
            .collect();
        summed.sort_unstable();
        rows.sort_unstable();
        assert_eq!(summed, rows);
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
}
