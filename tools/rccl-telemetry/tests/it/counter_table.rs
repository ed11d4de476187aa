//! Every row of the counter table (`rccl_telemetry_format::counters`) in every output of the
//! tool that lists the counters: the tidy CSV (channel and QP rows), the Parquet tables'
//! columns, and `check`'s channel sums. (The file's writer and reader and the Prometheus text
//! are held to the same table by the format crate's contract test.)

use crate::common::*;
use rccl_telemetry_format::counters::FIELDS;
use rccl_telemetry_tool::export::parquet::columns;
use rccl_telemetry_tool::generate::GenOptions;
use serde_json::Value;

/// A run with every row present (latency sampling on: the optional num_wqe_sampled too; the
/// WQE latency monitor's rows, which the generator does not write, added as version 5 files
/// have them: every QP one slow WQE and no stall, a channel its QPs' sums).
fn run_with_every_row() -> GenRun {
    let g = gen(GenOptions {
        ranks: 1,
        seed: 4,
        latency_sample: 4,
        ..Default::default()
    });
    for p in g.files() {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
        v["version"] = 5.into();
        v["slow_threshold_ns"] = 100_000.into();
        for d in v["devices"].as_array_mut().expect("devices") {
            for c in d["channels"].as_array_mut().expect("channels") {
                let qps = c["queue_pairs"].as_array_mut().expect("qps");
                for q in qps.iter_mut() {
                    q["num_wqe_slow"] = 1.into();
                    q["num_stalls"] = 0.into();
                }
                let n = qps.len() as u64;
                c["num_wqe_slow"] = n.into();
                c["num_stalls"] = 0.into();
            }
        }
        std::fs::write(&p, serde_json::to_vec(&v).expect("ser")).expect("write");
    }
    g
}

#[test]
fn every_row_is_a_metric_of_the_csv_at_channel_and_qp_level() {
    let g = run_with_every_row();
    let out = run(&["export", "--format", "csv", "--level", "qp", g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let head = rows.headers().expect("a header").clone();
    let at = |name: &str| head.iter().position(|h| h == name).expect(name);
    let (scope, metric) = (at("scope"), at("metric"));
    let seen: std::collections::BTreeSet<(String, String)> = rows
        .records()
        .map(|r| {
            let r = r.expect("a row");
            (r[scope].to_owned(), r[metric].to_owned())
        })
        .collect();
    for r in FIELDS {
        for s in ["channel", "qp"] {
            assert!(
                seen.contains(&(s.to_owned(), r.key.to_owned())),
                "no {s} row of {}",
                r.key
            );
        }
    }
}

#[test]
fn every_row_is_a_column_of_the_channels_and_qps_tables() {
    for table in ["channels", "qps"] {
        let cols = columns(table);
        for r in FIELDS {
            let c = cols
                .iter()
                .find(|c| c.name == r.key)
                .unwrap_or_else(|| panic!("{table} has no column {}", r.key));
            assert_eq!(c.nullable, r.optional, "{table}.{}", r.key);
        }
    }
}

#[test]
fn check_sums_every_row_over_a_channels_queue_pairs() {
    let g = run_with_every_row();
    let file = &g.files()[0];
    let mut v: Value = serde_json::from_slice(&std::fs::read(file).expect("read")).expect("json");
    // The used device's first channel, each of its totals one more than its QPs' sum.
    let d = (v["devices"].as_array().expect("devices").iter())
        .position(|d| !d["channels"].as_array().expect("channels").is_empty())
        .expect("a device with channels");
    let ch = &mut v["devices"][d]["channels"][0];
    for r in FIELDS {
        let n = ch[r.key].as_u64().unwrap_or_else(|| panic!("no {}", r.key));
        ch[r.key] = (n + 1).into();
    }
    std::fs::write(file, serde_json::to_vec(&v).expect("ser")).expect("write");
    let out = run(&["check", g.arg()]);
    let text = stdout(&out);
    for r in FIELDS {
        let pointer = format!("/devices/{d}/channels/0/{}: ", r.key);
        assert!(
            text.lines()
                .any(|l| l.contains(&pointer) && l.contains("summed over its")),
            "check did not sum {}:\n{text}",
            r.key
        );
    }
}
