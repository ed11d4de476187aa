//! `check` reports each broken rule in one line, with the file and the JSON Pointer.

use crate::common::*;
use rccl_telemetry_tool::generate::GenOptions;
use serde_json::{json, Value};
use std::path::PathBuf;

/// A valid file of rank 0 (its used device is devices[0]; channel 0 has QPs data, data, cts).
fn base(latency_sample: u64) -> Value {
    let g = gen(GenOptions {
        ranks: 1,
        seed: 4,
        hw_type: "ainic".into(),
        latency_sample,
        samples: 3,
        ..Default::default()
    });
    let f = g.files()[0].clone();
    serde_json::from_slice(&std::fs::read(f).expect("read")).expect("json")
}

/// Writes `v` as a rank file, runs check, returns (exit code, stdout lines, file path).
fn check_value(v: &Value) -> (Option<i32>, Vec<String>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path: PathBuf = dir.path().join("rccl_telemetry_host_a_1000_42.json");
    std::fs::write(&path, serde_json::to_vec_pretty(v).expect("ser")).expect("write");
    let out = run(&["check", dir.path().to_str().expect("utf-8")]);
    let lines = stdout(&out).lines().map(str::to_string).collect();
    (out.status.code(), lines, path.display().to_string())
}

/// Asserts one mutation yields a violation at `pointer` whose message contains `needle`.
fn expect_violation(
    mut v: Value,
    mutate: impl FnOnce(&mut Value),
    pointer: &str,
    kind: &str,
    needle: &str,
) {
    mutate(&mut v);
    let (code, lines, file) = check_value(&v);
    assert_eq!(
        code,
        Some(1),
        "exit status for a violation at {pointer}: {lines:#?}"
    );
    let prefix = format!("{file}: {pointer}: {kind}: ");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&prefix) && l.contains(needle)),
        "expected a line starting {prefix:?} containing {needle:?}, got {lines:#?}"
    );
}

#[test]
fn the_unmodified_file_is_valid() {
    for n in [1, 8] {
        let (code, lines, _) = check_value(&base(n));
        assert_eq!(code, Some(0), "{lines:#?}");
        assert!(lines.is_empty());
    }
}

#[test]
fn channel_totals_must_equal_the_sums_over_their_qps() {
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/devices/0/channels/1/num_wqe_sent").unwrap() = json!(1),
        "/devices/0/channels/1/num_wqe_sent",
        "invariant",
        "summed over its 3 queue pairs",
    );
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/num_slot_miss")
                .unwrap() = json!(0)
        },
        "/devices/0/channels/0/num_slot_miss",
        "invariant",
        "channel total 0",
    );
    expect_violation(
        base(1),
        |v| {
            let b = v
                .pointer_mut("/devices/0/channels/2/wqe_completion_histogram/1")
                .unwrap();
            *b = json!(b.as_u64().unwrap() + 1);
            let c = v
                .pointer_mut("/devices/0/channels/2/num_wqe_completed")
                .unwrap();
            *c = json!(c.as_u64().unwrap() + 1);
            let r = v.pointer_mut("/devices/0/channels/2/num_wqe_rcvd").unwrap();
            *r = json!(r.as_u64().unwrap() + 1);
        },
        "/devices/0/channels/2/wqe_completion_histogram/1",
        "invariant",
        "summed over its queue pairs",
    );
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/wqe_completion_ns_max")
                .unwrap() = json!(119_999)
        },
        "/devices/0/channels/0/wqe_completion_ns_max",
        "invariant",
        "max over its queue pairs",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/devices/0/channels/0/num_data_qp").unwrap() = json!(3),
        "/devices/0/channels/0/num_data_qp",
        "invariant",
        "role \"data\"",
    );
}

#[test]
fn histogram_sums_must_equal_the_sampled_count() {
    expect_violation(
        base(1),
        |v| {
            let b = v
                .pointer_mut("/devices/0/channels/0/queue_pairs/0/wqe_completion_histogram/0")
                .unwrap();
            *b = json!(b.as_u64().unwrap() + 5);
        },
        "/devices/0/channels/0/queue_pairs/0/wqe_completion_histogram",
        "invariant",
        "num_wqe_completed is",
    );
    expect_violation(
        base(16),
        |v| {
            let s = v
                .pointer_mut("/devices/0/channels/3/queue_pairs/1/num_wqe_sampled")
                .unwrap();
            *s = json!(s.as_u64().unwrap() + 1);
        },
        "/devices/0/channels/3/queue_pairs/1/wqe_completion_histogram",
        "invariant",
        "num_wqe_sampled is",
    );
}

#[test]
fn cts_split_and_completion_counts_are_checked_per_qp() {
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/1/queue_pairs/2/num_cts_sent_signalled")
                .unwrap() = json!(0)
        },
        "/devices/0/channels/1/queue_pairs/2/num_cts_sent",
        "invariant",
        "num_cts_sent_unsignalled",
    );
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/queue_pairs/1/num_wqe_rcvd")
                .unwrap() = json!(0)
        },
        "/devices/0/channels/0/queue_pairs/1/num_wqe_completed",
        "invariant",
        "> num_wqe_rcvd 0",
    );
}

#[test]
fn sampled_keys_appear_exactly_when_the_interval_is_above_one() {
    expect_violation(
        base(1),
        |v| {
            v.as_object_mut()
                .unwrap()
                .insert("latency_sample_interval".into(), json!(16))
                .map_or((), |_| ())
        },
        "/devices/0/channels/0",
        "invariant",
        "num_wqe_sampled is missing",
    );
    expect_violation(
        base(16),
        |v| {
            v.as_object_mut()
                .unwrap()
                .remove("latency_sample_interval")
                .map_or((), |_| ())
        },
        "/devices/0/channels/0/queue_pairs/0/num_wqe_sampled",
        "invariant",
        "is present although",
    );
    expect_violation(
        base(16),
        |v| *v.pointer_mut("/latency_sample_interval").unwrap() = json!(12),
        "/latency_sample_interval",
        "invariant",
        "not a power of two",
    );
}

#[test]
fn latency_extremes_must_match_the_histogram() {
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/queue_pairs/0/wqe_completion_ns_min")
                .unwrap() = json!(95_000);
        },
        "/devices/0/channels/0/queue_pairs/0/wqe_completion_ns_min",
        "invariant",
        "first non-empty bucket is 0",
    );
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/queue_pairs/2/wqe_completion_ns_min")
                .unwrap() = json!(10)
        },
        "/devices/0/channels/0/queue_pairs/2/wqe_completion_ns_min",
        "invariant",
        "one is -1",
    );
}

#[test]
fn hardware_values_are_minus_one_or_non_negative() {
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/devices/0/hw_counters/cnp_sent").unwrap() = json!(-2),
        "/devices/0/hw_counters/cnp_sent",
        "schema",
        "",
    );
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/hw_counters/pfc_rx_frames")
                .unwrap() = json!([0, 0, 0])
        },
        "/devices/0/hw_counters/pfc_rx_frames",
        "schema",
        "",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/hw_samples/1/counters/cnp_sent").unwrap() = json!(-5),
        "/hw_samples/1/counters/cnp_sent",
        "schema",
        "",
    );
}

#[test]
fn device_and_file_level_rules() {
    expect_violation(
        base(1),
        |v| {
            *v.pointer_mut("/devices/0/channels/0/num_qp_untracked")
                .unwrap() = json!(3)
        },
        "/devices/0/num_qp_untracked",
        "invariant",
        "summed over its channels",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/end_time").unwrap() = json!("2020-01-01T00:00:00.000000000Z"),
        "/end_time",
        "invariant",
        "before start_time",
    );
    expect_violation(
        base(1),
        |v| {
            v.as_object_mut()
                .unwrap()
                .remove("hw_samples_dropped")
                .map_or((), |_| ())
        },
        "/hw_samples_dropped",
        "invariant",
        "must appear together",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/hw_samples/2/timestamp_ns").unwrap() = json!(5),
        "/hw_samples/2/timestamp_ns",
        "invariant",
        "goes backwards",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/start_time").unwrap() = json!("yesterday"),
        "/start_time",
        "schema",
        "",
    );
    expect_violation(
        base(1),
        |v| *v.pointer_mut("/devices/0/hw_type").unwrap() = json!("cx7"),
        "/devices/0/hw_type",
        "schema",
        "",
    );
    expect_violation(
        base(1),
        |v| {
            v.pointer_mut("/devices/0")
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove("tx_bytes")
                .map_or((), |_| ())
        },
        "/devices/0",
        "schema",
        "tx_bytes",
    );
}

#[test]
fn unknown_top_level_keys_are_flagged_by_the_schema_but_still_analysed() {
    let mut v = base(1);
    v.as_object_mut()
        .unwrap()
        .insert("snapshot".into(), json!("final"));
    let (code, lines, file) = check_value(&v);
    assert_eq!(code, Some(1));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{file}: /: schema: ")) && l.contains("snapshot")),
        "{lines:#?}"
    );
    // The other commands read it as usual.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rccl_telemetry_h_1000_1.json");
    std::fs::write(&path, serde_json::to_vec(&v).expect("ser")).expect("write");
    let out = run(&["summary", "--json", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(s["files"], 1);
}

#[test]
fn every_violation_is_one_line_and_the_json_form_agrees() {
    let mut v = base(1);
    *v.pointer_mut("/devices/0/channels/1/num_wqe_sent").unwrap() = json!(1);
    *v.pointer_mut("/devices/0/hw_counters/cnp_sent").unwrap() = json!(-7);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rccl_telemetry_h_1000_1.json");
    std::fs::write(&path, serde_json::to_vec(&v).expect("ser")).expect("write");
    let text = run(&["check", path.to_str().expect("utf-8")]);
    let json_out = run(&["check", "--json", path.to_str().expect("utf-8")]);
    assert_eq!(json_out.status.code(), Some(1));
    let r: Value = serde_json::from_slice(&json_out.stdout).expect("json");
    let n = r["violations"].as_array().expect("violations").len();
    assert_eq!(stdout(&text).lines().count(), n);
    assert!(n >= 2);
    for line in stdout(&text).lines() {
        assert!(line.starts_with(path.to_str().expect("utf-8")), "{line}");
    }
}

#[test]
fn channel_ids_are_per_communicator_and_communicators_are_listed() {
    let comm = |id: u64, hash: &str| json!({"id": id, "hash": hash, "rank": 0, "nranks": 2});
    let listed = |c: Value| {
        let mut c = c;
        c["init_time"] = json!("2026-12-02T11:00:00.000000000Z");
        c["finalize_time"] = Value::Null;
        c
    };
    // Channel 0 of the process-wide calls and channel 0 of two communicators: valid.
    let with_comms = |v: &mut Value| {
        let ch0 = v.pointer("/devices/0/channels/0").unwrap().clone();
        let chans = v
            .pointer_mut("/devices/0/channels")
            .unwrap()
            .as_array_mut()
            .unwrap();
        for (id, hash) in [(1, "0xa"), (2, "0xb")] {
            let mut c = ch0.clone();
            c["comm"] = comm(id, hash);
            chans.push(c);
        }
        v["communicators"] = json!([listed(comm(1, "0xa")), listed(comm(2, "0xb"))]);
    };
    let mut v = base(1);
    with_comms(&mut v);
    let (code, lines, _) = check_value(&v);
    assert_eq!(code, Some(0), "{lines:#?}");
    let n = v["devices"][0]["channels"].as_array().unwrap().len();
    // The same communicator's channel 0 twice.
    expect_violation(
        v.clone(),
        |v| {
            let c = v
                .pointer(&format!("/devices/0/channels/{}", n - 1))
                .unwrap()
                .clone();
            v.pointer_mut("/devices/0/channels")
                .unwrap()
                .as_array_mut()
                .unwrap()
                .push(c);
        },
        &format!("/devices/0/channels/{n}/id"),
        "invariant",
        "channel id 0 appears twice in communicator 0xb rank 0/2 on this device",
    );
    // A channel's communicator missing from the list, or named otherwise there.
    expect_violation(
        v.clone(),
        |v| v["communicators"].as_array_mut().unwrap().truncate(1),
        &format!("/devices/0/channels/{}/comm", n - 1),
        "invariant",
        "is not in communicators",
    );
    expect_violation(
        v,
        |v| v["communicators"][1]["rank"] = json!(1),
        &format!("/devices/0/channels/{}/comm", n - 1),
        "invariant",
        "in communicators",
    );
}
