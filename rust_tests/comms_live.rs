//! A communicator's live outputs, in process, with the stall detector on an injected clock
//! (`stall_detector::manual_clock`): its channel and QP series carry its labels beside the
//! process-wide calls' channel of the same index; a QP torn down with a WRITE_WITH_IMM in
//! flight is stalled until its communicator is finalized, then forgotten at once (the record
//! keeps the stall, ended at the finalization); the device's counters never go down; the next
//! communicator handed the same channel starts without the stall.

use std::ffi::CString;

use rccl_telemetry::capi::*;
use rccl_telemetry::{latency, rank_file, stall_detector, textfile};
use rccl_telemetry_format::promtext::Level;
use serde_json::Value;

const MS: u64 = 1_000_000;
const WALL0: u64 = 1_796_210_131_000_000_000;

fn snapshot() -> Value {
    let rt = rccl_telemetry::runtime().expect("on");
    let f = rank_file::build(&rt.id, WALL0, None, false, "test").expect("memory");
    let mut out = Vec::new();
    rank_file::to_writer(&mut out, &f).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn series(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(str::to_owned)
        .collect()
}

fn value(line: &str) -> u64 {
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[test]
fn a_finalized_communicators_stall_is_forgotten_and_its_counts_stay() {
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
    let name = CString::new("mlx5_2").unwrap();
    let tr = CString::new("IB-CAST").unwrap();
    let a = rcclTelemetryCommInit(0xfeed, 2, 4);
    assert!(!a.is_null());
    // SAFETY: valid strings, handles from the library.
    let (qa, qd) = unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(0, name.as_ptr(), tr.as_ptr()),
            0
        );
        let mut n = 0;
        assert_eq!(rcclTelemetryCommSetupChannel(a, 0, 1, 2, &mut n), 0);
        assert_eq!(n, 2);
        assert_eq!(rcclTelemetrySetupChannel(0, 1, 2, &mut n), 0);
        rcclTelemetryCommSetQpRole(a, 0, 1, 0, 1);
        let qa = [
            rcclTelemetryCommResolveQp(a, 0, 1, 0),
            rcclTelemetryCommResolveQp(a, 0, 1, 1),
        ];
        let qd = rcclTelemetryResolveQp(0, 1, 0);
        // A's QP 0: IB-CAST's pair, its WRITE_WITH_IMM never completes; QP 1 completes.
        rcclTelemetryQpSendPosted(qa[0], 0);
        rcclTelemetryQpSendPosted(qa[0], 1);
        for _ in 0..3 {
            let t = rcclTelemetryPostTs(qa[1]);
            rcclTelemetryQpSendPosted(qa[1], 1);
            rcclTelemetryQpWqeComplete(qa[1], t);
        }
        // The process-wide calls' channel 1: the same index, its own counts.
        for _ in 0..5 {
            rcclTelemetryQpSendPosted(qd, 0);
        }
        (qa, qd)
    };
    assert!(!qd.is_null() && !qa.contains(&std::ptr::null_mut()));
    // Ticks in the past of the real clock, so the finalization (on the real clock) comes after.
    let base = latency::monotonic_ns() - 60_000 * MS;
    let tick = |ms: u64| stall_detector::tick_at(base + ms * MS, WALL0 + ms * MS);
    tick(0);
    tick(500);
    assert!(tick(1000), "A's QP 0 stalls");

    let text = textfile::render_now(Level::Qp);
    let comm = "comm=\"0xfeed\",comm_rank=\"2\",comm_nranks=\"4\"";
    let stalled = series(&text, "rccl_telemetry_qp_stalled_seconds");
    assert_eq!(stalled.len(), 1, "{text}");
    assert!(
        stalled[0].contains(&format!(",channel=\"1\",{comm},qp=\"0\",")),
        "{}",
        stalled[0]
    );
    assert_eq!(value(&series(&text, "rccl_telemetry_stalled_qps")[0]), 1);
    // Channel 1 twice: the process-wide calls' (no communicator labels) and A's.
    let sent = series(&text, "rccl_telemetry_channel_wqes_sent_total");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].contains(",channel=\"1\"}") && value(&sent[0]) == 5,
        "{sent:?}"
    );
    assert!(
        sent[1].contains(&format!(",channel=\"1\",{comm}}}")) && value(&sent[1]) == 5,
        "{sent:?}"
    );
    let qp_sent = series(&text, "rccl_telemetry_qp_wqes_sent_total");
    assert!(
        qp_sent
            .iter()
            .any(|l| l.contains(&format!("{comm},qp=\"1\",role=\"unset\"}} 3"))),
        "{qp_sent:?}"
    );
    let dev_sent = || {
        value(
            &series(
                &textfile::render_now(Level::Device),
                "rccl_telemetry_wqes_sent_total",
            )[0],
        )
    };
    assert_eq!(dev_sent(), 10);

    // ncclCommDestroy: A's QPs are gone with one WRITE_WITH_IMM in flight.
    // SAFETY: a handle from rcclTelemetryCommInit.
    unsafe { rcclTelemetryCommFinalize(a) };
    let text = textfile::render_now(Level::Qp);
    assert!(
        series(&text, "rccl_telemetry_qp_stalled_seconds").is_empty(),
        "forgotten at once: {text}"
    );
    assert_eq!(value(&series(&text, "rccl_telemetry_stalled_qps")[0]), 0);
    assert_eq!(
        value(&series(&text, "rccl_telemetry_wqe_outstanding")[0]),
        0
    );
    assert!(!text.contains("comm=\"0xfeed\""), "A's series end: {text}");
    assert_eq!(dev_sent(), 10, "the device's counter keeps A's counts");
    assert!(!tick(1500), "nothing stalled any more");

    let f = snapshot();
    let d = &f["devices"][0];
    assert_eq!(d["num_qps_stalled"], 0);
    assert_eq!(d["channels"].as_array().unwrap().len(), 1);
    let r = &d["finalized_comms"][0];
    assert_eq!(r["comm"]["hash"], "0xfeed");
    assert_eq!(
        (
            r["num_qps_stalled"].as_u64(),
            r["num_wqe_outstanding"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert!(r["longest_stall_ms"].as_u64().unwrap() >= 1000, "{r}");
    assert_eq!(
        r["longest_stall_start"],
        rank_file::rfc3339(WALL0),
        "its wait began at the first check"
    );
    assert_eq!(
        (r["num_wqe_sent"].as_u64(), r["num_wqe_completed"].as_u64()),
        (Some(5), Some(3))
    );
    assert_eq!(r["num_data_qp"], 1);

    // The next communicator gets A's channel back, without its stall or its counts.
    let b = rcclTelemetryCommInit(0xbeef, 0, 1);
    // SAFETY: a handle from rcclTelemetryCommInit.
    let qb = unsafe {
        let mut n = 0;
        assert_eq!(rcclTelemetryCommSetupChannel(b, 0, 4, 1, &mut n), 0);
        rcclTelemetryCommResolveQp(b, 0, 4, 0)
    };
    assert_eq!(qb, qa[0], "A's channel memory, handed on");
    tick(2000);
    tick(3500);
    let f = snapshot();
    let d = &f["devices"][0];
    assert_eq!(d["num_qps_stalled"], 0);
    let ch = d["channels"].as_array().unwrap();
    assert_eq!(ch[1]["comm"]["hash"], "0xbeef");
    assert_eq!(ch[1]["id"], 4);
    let q = &ch[1]["queue_pairs"][0];
    assert_eq!(
        (q["num_wqe_sent"].as_u64(), q["stalled"].as_bool()),
        (Some(0), Some(false))
    );
    assert_eq!(q["longest_stall_ms"], 0);
    assert_eq!(rcclTelemetryFlush(), 0);
}
