//! Stall detection over the hooks, in process, with an injected clock (`stall_detector::manual_clock`
//! and `stall_detector::tick_at`): no sleeping. An IB-CAST-shaped QP whose WRITE_WITH_IMM does not
//! complete stalls after RCCL_TELEMETRY_STALL_MS and appears in the live textfile with its
//! labels and in a snapshot; its completion ends the stall, which disappears from the next
//! textfile while the snapshot keeps its duration. CTS without a completion hook, receives
//! waiting for the peer, and QPs whose posts complete never stall.

use std::ffi::CString;

use rccl_telemetry::capi::*;
use rccl_telemetry::counters::RcclQpStats;
use rccl_telemetry::{rank_file, stall_detector, textfile};
use rccl_telemetry_format::promtext::Level;
use serde_json::Value;

const MS: u64 = 1_000_000;
const WALL0: u64 = 1_796_210_131_000_000_000;

fn snapshot() -> Value {
    let rt = rccl_telemetry::runtime().expect("on");
    let f = rank_file::build(
        &rt.id,
        WALL0,
        rccl_telemetry::sampler::snapshot(),
        false,
        "test",
    )
    .unwrap();
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

/// Device 0 ("mlx5_4"), channel 2 with four QPs: one whose posts complete, IB-CAST's pair
/// without its completion (with its peer told), signalled CTS with no completion hook call,
/// and receives waiting for the peer.
fn four_qps() -> Vec<*mut RcclQpStats> {
    let name = CString::new("mlx5_4").unwrap();
    let tr = CString::new("IB-CAST").unwrap();
    // SAFETY: valid strings; the handles are the library's.
    unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(0, name.as_ptr(), tr.as_ptr()),
            0
        );
        let mut n = 0;
        assert_eq!(rcclTelemetrySetupChannel(0, 2, 4, &mut n), 0);
        assert_eq!(n, 4);
    }
    let q: Vec<_> = (0..4).map(|i| rcclTelemetryResolveQp(0, 2, i)).collect();
    // SAFETY: resolved handles.
    unsafe {
        // QP 0: posts that complete.
        for _ in 0..3 {
            let t = rcclTelemetryPostTs(q[0]);
            rcclTelemetryQpSendPosted(q[0], 0);
            rcclTelemetryQpSendPosted(q[0], 1);
            rcclTelemetryQpWqeComplete(q[0], t);
        }
        // QP 1: IB-CAST's pair (a plain write and the signalled WRITE_WITH_IMM), no completion.
        rcclTelemetryPostTs(q[1]);
        rcclTelemetryQpSendPosted(q[1], 0);
        rcclTelemetryQpSendPosted(q[1], 1);
        let (lgid, rgid) = (
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1u8],
            [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2],
        );
        rcclTelemetryQpSetPeer(
            q[1],
            4660,
            lgid.as_ptr().cast(),
            0,
            77,
            rgid.as_ptr().cast(),
            0,
        );
        // QP 2: signalled CTS with no completion hook call (RCCL's call sites).
        for _ in 0..5 {
            rcclTelemetryQpCtsSent(q[2], 1);
        }
        // QP 3: receives waiting for the peer.
        rcclTelemetryQpRecvPosted(q[3]);
    }
    q
}

/// A snapshot whose hw_samples rows carry device 0's outstanding WRs and stalled QPs, one of
/// them with the stall (liveness only: it waits for a row taken after the stall was declared).
fn snapshot_with_a_stalled_row() -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let f = snapshot();
        let rows = f["hw_samples"]
            .as_array()
            .expect("hw_samples with RCCL_TELEMETRY_SAMPLE_MS")
            .clone();
        if rows.iter().any(|r| r["counters"]["num_qps_stalled"] == 1) {
            let r = rows
                .iter()
                .rev()
                .find(|r| r["counters"]["num_qps_stalled"] == 1)
                .unwrap();
            assert_eq!(
                (
                    r["device_id"].as_u64(),
                    r["counters"]["num_wqe_outstanding"].as_u64()
                ),
                (Some(0), Some(1)),
                "{r}"
            );
            assert!(
                rows.iter()
                    .all(|r| r["counters"]["num_qps_stalled"].is_u64()),
                "every row has the stall counters"
            );
            return f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no hw_samples row with the stall in 60 s: {rows:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_stall_appears_and_disappears_and_its_duration_stays() {
    let out = tempfile::tempdir().unwrap();
    let promdir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe {
        std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
        std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", out.path());
        std::env::set_var("RCCL_TELEMETRY_PROMETHEUS_DIR", promdir.path());
        std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
        std::env::set_var("RCCL_TELEMETRY_STALL_MS", "1000");
        std::env::set_var("RCCL_TELEMETRY_SAMPLE_MS", "1");
    }
    stall_detector::manual_clock();
    assert_eq!(rcclTelemetryInit(), 0);
    // The library keeps panic messages for its own boundary; this test wants them printed.
    drop(std::panic::take_hook());
    let q = four_qps();
    let tick = |ms: u64| stall_detector::tick_at(1_000 * MS + ms * MS, WALL0 + ms * MS);
    assert!(!tick(0));
    assert!(!tick(500));
    let text = textfile::render_now(Level::Channel);
    assert!(
        series(&text, "rccl_telemetry_qp_stalled_seconds").is_empty(),
        "not yet: {text}"
    );
    assert!(tick(1000), "the stall set changed at the threshold");
    assert!(!tick(1500));

    // The live textfile names it.
    let path = textfile::write_now().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let dev = "device=\"mlx5_4\",hw_type=";
    let stalled = series(&text, "rccl_telemetry_stalled_qps");
    assert!(
        stalled.len() == 1 && stalled[0].contains(dev) && stalled[0].ends_with(" 1"),
        "{stalled:?}"
    );
    let out_g = series(&text, "rccl_telemetry_wqe_outstanding");
    assert!(out_g.len() == 1 && out_g[0].ends_with(" 1"), "{out_g:?}");
    let per_qp = series(&text, "rccl_telemetry_qp_stalled_seconds");
    assert_eq!(per_qp.len(), 1, "{text}");
    assert!(per_qp[0].contains(",channel=\"2\",qp=\"1\",qp_num=\"4660\",peer_gid=\"0000:0000:0000:0000:0000:ffff:0a00:0002\",peer_qp_num=\"77\"} 1.5"), "{}", per_qp[0]);
    let per_qp_out = series(&text, "rccl_telemetry_qp_stall_outstanding");
    assert!(
        per_qp_out.len() == 1 && per_qp_out[0].ends_with(" 1"),
        "{per_qp_out:?}"
    );
    assert!(
        text.contains("rccl_telemetry_stalled_qp_series_dropped{")
            && series(&text, "rccl_telemetry_stalled_qp_series_dropped")[0].ends_with(" 0")
    );

    // hw_samples rows carry the device's outstanding WRs and stalled QPs.
    let f = snapshot_with_a_stalled_row();
    // A snapshot names it, since when, and the ongoing duration.
    assert_eq!(
        (f["version"].as_u64(), f["stall_ms"].as_u64()),
        (Some(5), Some(1000))
    );
    let d = &f["devices"][0];
    assert_eq!(
        (
            d["num_qps_stalled"].as_u64(),
            d["num_wqe_outstanding"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let qps = d["channels"][0]["queue_pairs"].as_array().unwrap();
    assert_eq!(qps[1]["stalled"], true);
    assert_eq!(qps[1]["stalled_since"], rank_file::rfc3339(WALL0));
    assert_eq!(qps[1]["longest_stall_ms"], 1500);
    assert_eq!(qps[1]["longest_stall_start"], rank_file::rfc3339(WALL0));
    assert!(qps[1].get("oldest_outstanding_ms").is_none());
    for i in [0, 2, 3] {
        assert_eq!(
            (
                qps[i]["stalled"].as_bool(),
                qps[i]["num_wqe_outstanding"].as_u64()
            ),
            (Some(false), Some(0)),
            "QP {i}"
        );
    }

    // The completion ends it: gone from the next textfile, its duration kept.
    // SAFETY: a resolved handle.
    unsafe { rcclTelemetryQpWqeComplete(q[1], 1) };
    assert!(tick(2000), "the stall set changed when it ended");
    let text = std::fs::read_to_string(textfile::write_now().unwrap()).unwrap();
    assert!(
        series(&text, "rccl_telemetry_qp_stalled_seconds").is_empty(),
        "{text}"
    );
    assert!(series(&text, "rccl_telemetry_stalled_qps")[0].ends_with(" 0"));
    let f = snapshot();
    let q1 = &f["devices"][0]["channels"][0]["queue_pairs"][1];
    assert_eq!(
        (q1["stalled"].as_bool(), q1["longest_stall_ms"].as_u64()),
        (Some(false), Some(2000))
    );
    assert!(q1["stalled_since"].is_null());
    assert_eq!(f["devices"][0]["num_qps_stalled"], 0);
    assert_eq!(rcclTelemetryFlush(), 0);
}
