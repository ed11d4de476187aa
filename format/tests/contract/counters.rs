//! Every row of the counter table (format/src/counters.rs) in every output of this crate: the
//! file the writer writes (every channel, QP and finalized record, in the table's order), the
//! reader's model (and its wire structs), and the Prometheus text at every scope. The tool's
//! outputs (CSV, Parquet, `check`'s sums) have tests of their own that iterate the same table.

use crate::fixture::{file, Shape};
use crate::schema::key_order;
use rccl_telemetry_format::counters::{Field, FIELDS, N};
use rccl_telemetry_format::promtext::{self, Level};
use rccl_telemetry_format::read::{Counters, TelemetryFile};
use serde_json::Value;

/// The objects of a written file that carry the counters, with their paths.
fn counter_objects(v: &Value) -> Vec<(String, &serde_json::Map<String, Value>)> {
    let mut out = Vec::new();
    for (di, d) in v["devices"].as_array().unwrap().iter().enumerate() {
        for (ci, c) in d["channels"].as_array().unwrap().iter().enumerate() {
            out.push((
                format!("/devices/{di}/channels/{ci}"),
                c.as_object().unwrap(),
            ));
            for (qi, q) in c["queue_pairs"].as_array().unwrap().iter().enumerate() {
                out.push((
                    format!("/devices/{di}/channels/{ci}/queue_pairs/{qi}"),
                    q.as_object().unwrap(),
                ));
            }
        }
        for (fi, f) in d["finalized_comms"].as_array().unwrap().iter().enumerate() {
            out.push((
                format!("/devices/{di}/finalized_comms/{fi}"),
                f.as_object().unwrap(),
            ));
        }
    }
    out
}

/// The model's counter structs of a read file, with the same paths.
fn model_counters(f: &TelemetryFile) -> Vec<(String, &Counters)> {
    let mut out = Vec::new();
    for (di, d) in f.devices.iter().enumerate() {
        for (ci, c) in d.channels.iter().enumerate() {
            out.push((format!("/devices/{di}/channels/{ci}"), &c.counters));
            for (qi, q) in c.queue_pairs.iter().enumerate() {
                out.push((
                    format!("/devices/{di}/channels/{ci}/queue_pairs/{qi}"),
                    &q.counters,
                ));
            }
        }
        for (fi, r) in d.finalized_comms.iter().enumerate() {
            out.push((format!("/devices/{di}/finalized_comms/{fi}"), &r.counters));
        }
    }
    out
}

#[test]
fn every_row_is_written_in_the_tables_order_and_read_back() {
    for shape in [Shape::Full, Shape::Nulls, Shape::Bare] {
        let text = serde_json::to_string(&file(shape)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let written = counter_objects(&v);
        assert!(written.len() >= 3, "{shape:?}: no counters to look at");
        let read: TelemetryFile = serde_json::from_str(&text).unwrap();
        let model = model_counters(&read);
        assert_eq!(
            written.iter().map(|w| &w.0).collect::<Vec<_>>(),
            model.iter().map(|m| &m.0).collect::<Vec<_>>()
        );
        for ((at, obj), (_, counters)) in written.iter().zip(&model) {
            for (r, value) in FIELDS.iter().zip(counters.values()) {
                // An optional row is left out when absent (the full file has every one).
                if !(r.optional && shape != Shape::Full) {
                    assert!(obj.contains_key(r.key), "{shape:?}: {at} has no {}", r.key);
                }
                assert_eq!(
                    obj.get(r.key).and_then(Value::as_u64),
                    value,
                    "{shape:?}: {at}/{} read back",
                    r.key
                );
            }
        }
        // In the text, each object has the rows in the table's order.
        let mut objects = 0;
        for (path, keys) in key_order(&text) {
            let at: Vec<usize> = FIELDS
                .iter()
                .filter_map(|r| keys.iter().position(|k| k == r.key))
                .collect();
            if at.is_empty() {
                continue;
            }
            objects += 1;
            assert!(
                at.windows(2).all(|w| w[0] < w[1]),
                "{shape:?}: {path} has the counters out of the table's order: {keys:?}"
            );
        }
        // Channels and QPs (and finalized records, where the shape has them).
        assert!(objects >= 2, "{shape:?}: {objects} objects with counters");
    }
}

/// Counts whose every row has a value of its own (and is told): row i of item k is
/// `base + 100 k + i`.
fn distinct(base: u64) -> promtext::Counts {
    let mut c = promtext::Counts::default();
    for (i, v) in c.values.iter_mut().enumerate() {
        *v = base + i as u64;
    }
    c.present = [true; rccl_telemetry_format::counters::N];
    c
}

#[test]
fn every_row_with_a_family_has_its_series_at_every_scope_and_the_others_none() {
    let qp = promtext::Qp {
        id: 0,
        role: Some("data".into()),
        counts: distinct(7_000_100),
        monitor: None,
    };
    let channel = promtext::Channel {
        id: Some(3),
        comm: None,
        counts: distinct(7_000_200),
        requests_completed: 1,
        data_qps: 1,
        cts_qps: 0,
        untracked_qps: 0,
        qps: vec![qp],
    };
    let device = promtext::Device {
        id: 0,
        name: "mlx5_0".into(),
        hw_type: "mlx5".into(),
        tx_bytes: 1,
        rx_bytes: 1,
        cq_errors: 0,
        cq_polls: 1,
        active_channels: 1,
        untracked_qps: 0,
        hw: Vec::new(),
        channels: vec![channel],
        finalized: distinct(7_000_000),
        finalized_requests: 0,
        finalized_qps: 0,
        qp_settings: Vec::new(),
        port_qos: Default::default(),
    };
    let rank = promtext::Rank {
        host: "h".into(),
        pid: 1,
        rank: None,
        start_s: None,
        taken_s: None,
        hist_interval_ns: 1000,
        devices: vec![device],
    };
    let mut out = String::new();
    promtext::render(&[rank], Level::Qp, &mut out);
    let samples: Vec<(&str, &str)> = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .collect();
    // The device's counts are its channel's plus its finalized communicators'.
    let scopes = [
        ("rccl_telemetry_", 14_000_200u64),
        ("rccl_telemetry_channel_", 7_000_200),
        ("rccl_telemetry_qp_", 7_000_100),
    ];
    for (i, r) in FIELDS.iter().enumerate() {
        for (prefix, base) in scopes {
            let value = (base
                + if prefix == "rccl_telemetry_" {
                    2 * i
                } else {
                    i
                } as u64)
                .to_string();
            let found: Vec<&str> = samples
                .iter()
                .filter(|(_, v)| *v == value)
                .map(|(s, _)| *s)
                .collect();
            let Some(p) = r.prom else {
                assert!(found.is_empty(), "{} has no family, yet {found:?}", r.key);
                continue;
            };
            let name = format!("{prefix}{}", p.family.suffix);
            let label = match (p.label, p.family.extra.first()) {
                (Some(v), Some(k)) => format!("{k}=\"{v}\"}}"),
                _ => "}".into(),
            };
            assert!(
                found
                    .iter()
                    .any(|s| s.starts_with(&format!("{name}{{")) && s.ends_with(&label)),
                "{}: no series {name}{{...{label} {value}:\n{out}",
                r.key
            );
        }
    }
    assert_eq!(N, FIELDS.len());
    assert_eq!(Field::num_wqe_sent as usize, 0);
}
