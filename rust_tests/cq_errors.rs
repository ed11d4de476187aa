//! Error completions per QP over the hooks, in process: rcclTelemetryQpCqError with every
//! `ibv_wc_status` (and one value the enum lacks) lands in the QP's "cq_errors" and
//! "first_cq_error", the device's "cq_errors_by_status" and num_cq_errors, and the live
//! textfile's series naming the peer; a QP's first error and a stall's first check make the
//! writer thread write a snapshot ("trigger": "cq_error" / "stall"); the last-progress times
//! are the stall detector's checks (an injected clock: `stall_detector::manual_clock`).

mod common;
#[path = "skip.rs"]
mod skip;

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use rccl_telemetry::capi::*;
use rccl_telemetry::cq_errors::STATUS_NAMES;
use rccl_telemetry::{rank_file, stall_detector, textfile};
use serde_json::Value;

const MS: u64 = 1_000_000;
const WALL0: u64 = 1_796_210_131_000_000_000;
/// Statuses 1..=23 on QPs 1..=23, and 99 (no such status) on QP 24.
const UNKNOWN_STATUS: i32 = 99;

fn series(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(str::to_owned)
        .collect()
}

/// Waits (liveness only, up to a minute) for the rank's file to be a snapshot written on
/// `trigger` that satisfies `ready`, and returns it, checked against the schema.
fn snapshot_on(dir: &Path, trigger: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(p) = common::telemetry_files(dir)
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "json"))
        {
            if let Ok(text) = std::fs::read_to_string(&p) {
                if let Ok(v) = serde_json::from_str::<Value>(&text) {
                    if v["trigger"] == trigger && ready(&v) {
                        assert_eq!(v["final"], false);
                        return common::load_valid(&p);
                    }
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot with trigger {trigger} in 60 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn errors_by_qp_and_status_with_their_snapshots() {
    let out = tempfile::tempdir().unwrap();
    let promdir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe {
        std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
        std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", out.path());
        std::env::set_var("RCCL_TELEMETRY_PROMETHEUS_DIR", promdir.path());
        std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
        std::env::set_var("RCCL_TELEMETRY_STALL_MS", "1000");
    }
    stall_detector::manual_clock();
    assert_eq!(rcclTelemetryInit(), 0);
    drop(std::panic::take_hook());
    let name = CString::new("rxe0").unwrap();
    let tr = CString::new("IB-CAST").unwrap();
    // SAFETY: valid strings and out-pointer.
    unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(0, name.as_ptr(), tr.as_ptr()),
            0
        );
        let mut n = 0;
        assert_eq!(rcclTelemetrySetupChannel(0, 1, 26, &mut n), 0);
        assert_eq!(n, 26);
    }
    let q: Vec<_> = (0..26).map(|i| rcclTelemetryResolveQp(0, 1, i)).collect();
    let rgid = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
    // SAFETY: resolved handles; GIDs of 16 bytes.
    unsafe {
        // QP 0 works: a post and its completion, before the detector's first check.
        let t = rcclTelemetryPostTs(q[0]);
        rcclTelemetryQpSendPosted(q[0], 1);
        rcclTelemetryQpWqeComplete(q[0], t);
        // QP 12's peer, for its series.
        rcclTelemetryQpSetPeer(
            q[12],
            4660,
            std::ptr::null(),
            0,
            77,
            rgid.as_ptr().cast(),
            0,
        );
    }
    stall_detector::tick_at(1_000 * MS, WALL0);
    // A stall's first check: the writer writes a snapshot that says so, at once (the first
    // triggered one). Before the errors: a trigger inside the gap after a snapshot waits for
    // it and coalesces with the others, named by an error if there is one; an error snapshot
    // still pending (a QP's first error counted after the writer took the first) would take
    // this stall's name.
    // SAFETY: a resolved handle.
    unsafe {
        rcclTelemetryPostTs(q[25]);
        rcclTelemetryQpSendPosted(q[25], 1);
    }
    stall_detector::tick_at(1_500 * MS, WALL0 + 500 * MS);
    assert!(stall_detector::tick_at(2_500 * MS, WALL0 + 1_500 * MS));
    let f = snapshot_on(out.path(), "stall", |_| true);
    let q25 = &f["devices"][0]["channels"][0]["queue_pairs"][25];
    assert_eq!(q25["stalled"], true);
    assert_eq!(q25["last_post_time"], rank_file::rfc3339(WALL0 + 500 * MS));
    assert!(q25["last_completion_time"].is_null());
    assert_eq!(f["devices"][0]["num_cq_errors"], 0);
    // SAFETY: resolved handles (and NULL, a no-op).
    unsafe {
        rcclTelemetryQpCqError(std::ptr::null_mut(), 12, 0);
        for s in 1..=23 {
            rcclTelemetryQpCqError(q[s as usize], s, 0x1000 + s as u32);
        }
        rcclTelemetryQpCqError(q[24], UNKNOWN_STATUS, 0);
        // QP 12 then flushes two more WRs; an error with no QP counts on the device only.
        rcclTelemetryQpCqError(q[12], 5, 0);
        rcclTelemetryQpCqError(q[12], 5, 0);
        rcclTelemetryCqError(0);
    }

    // A QP's first error: the writer writes a snapshot on its own (a gap after the stall's,
    // while the errors after it are still being counted; those make the next one, a gap later).
    let f = snapshot_on(out.path(), "cq_error", |v| {
        v["devices"][0]["num_cq_errors"] == 23 + 1 + 2 + 1
    });
    assert_eq!(f["version"], 5);
    let d = &f["devices"][0];
    assert_eq!(d["num_cq_errors"], 23 + 1 + 2 + 1);
    let by = d["cq_errors_by_status"].as_object().unwrap();
    for name in STATUS_NAMES.iter().skip(1) {
        let want = if *name == "WR_FLUSH_ERR" { 3 } else { 1 };
        assert_eq!(by[*name], want, "{name}: {by:?}");
    }
    assert_eq!(by["UNKNOWN_99"], 1);
    assert!(!by.contains_key("SUCCESS"));
    let qps = d["channels"][0]["queue_pairs"].as_array().unwrap();
    assert_eq!(qps[0]["cq_errors"], serde_json::json!({}));
    assert!(qps[0]["first_cq_error"].is_null() && qps[0]["qp_state"].is_null());
    // The first check saw QP 0's post and completion.
    assert_eq!(qps[0]["last_post_time"], rank_file::rfc3339(WALL0));
    assert_eq!(qps[0]["last_completion_time"], rank_file::rfc3339(WALL0));
    assert!(qps[1]["last_post_time"].is_null());
    for s in 1..=23usize {
        let e = &qps[s]["first_cq_error"];
        assert_eq!(e["status"], STATUS_NAMES[s], "QP {s}");
        assert_eq!(e["status_code"], s as u64);
        assert_eq!(e["vendor_err"], 0x1000 + s as u64);
        assert!(e["time"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(e["opcode"].is_null() && e["bytes"].is_null() && e["age_ms"].is_null());
        assert_eq!(qps[s]["qp_state"], "ERR");
    }
    assert_eq!(
        qps[12]["cq_errors"],
        serde_json::json!({"WR_FLUSH_ERR": 2, "RETRY_EXC_ERR": 1})
    );
    assert_eq!(qps[24]["first_cq_error"]["status"], "UNKNOWN_99");

    // The textfile: by status per device, and the errored QPs naming their peer.
    let text = std::fs::read_to_string(textfile::write_now().unwrap()).unwrap();
    let dev = series(&text, "rccl_telemetry_cq_errors_by_status_total");
    assert_eq!(dev.len(), 24, "{dev:?}");
    assert!(
        dev.iter()
            .any(|l| l.contains("status=\"WR_FLUSH_ERR\"") && l.ends_with(" 3")),
        "{dev:?}"
    );
    let per_qp = series(&text, "rccl_telemetry_qp_cq_errors_total");
    let q12: Vec<_> = per_qp.iter().filter(|l| l.contains("qp=\"12\"")).collect();
    assert_eq!(q12.len(), 2, "{per_qp:?}");
    assert!(q12.iter().all(|l| l.contains(
        "qp_num=\"4660\",peer_gid=\"0000:0000:0000:0000:0000:ffff:0a00:0002\",peer_qp_num=\"77\""
    )));
    assert_eq!(
        series(&text, "rccl_telemetry_qp_first_cq_error_timestamp_seconds").len(),
        24
    );
    assert!(series(&text, "rccl_telemetry_errored_qp_series_dropped")[0].ends_with(" 0"));

    assert_eq!(rcclTelemetryFlush(), 0);
    // After the final write: inert.
    // SAFETY: a resolved handle.
    unsafe { rcclTelemetryQpCqError(q[0], 12, 0) };
}

#[test]
fn status_names_are_the_system_headers_enum() {
    let path = "/usr/include/infiniband/verbs.h";
    let Ok(h) = std::fs::read_to_string(path) else {
        skip::skip(
            "status_names_are_the_system_headers_enum",
            &format!("{path} missing (libibverbs-dev)"),
            false,
            true,
        );
        return;
    };
    let start = h.find("enum ibv_wc_status {").expect("enum ibv_wc_status");
    let body = &h[start..start + h[start..].find('}').unwrap()];
    let names: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("IBV_WC_"))
        .map(|l| l.trim_end_matches(','))
        .collect();
    assert_eq!(names, STATUS_NAMES, "{body}");
}
