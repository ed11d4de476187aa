//! Files with several communicators, written by the library itself (a child process of this
//! test binary drives its C ABI as RCCL does): `check` accepts them, `summary` shows the
//! communicators apart and counts the finalized one, `export --format prometheus` keeps two
//! communicators' channel 0 apart (no duplicate series).

use crate::common::*;
use rccl_telemetry::capi::*;
use rccl_telemetry::counters::{RcclChannelStats, RcclQpStats};
use serde_json::Value;
use std::ffi::CString;
use std::process::Command;

const CHILD: &str = "RCCL_TELEMETRY_TOOL_TEST_COMMS";

/// Posts `n` sends on every QP of a channel and completes them (sampled), one request.
fn drive(qps: &[*mut RcclQpStats], ch: *mut RcclChannelStats, n: u64) {
    for &q in qps {
        for _ in 0..n {
            // SAFETY: handles from the library.
            unsafe {
                let t = rcclTelemetryPostTs(q);
                rcclTelemetryQpSendPosted(q, 1);
                rcclTelemetryQpWqeComplete(q, t);
            }
        }
    }
    // SAFETY: a handle from the library.
    unsafe { rcclTelemetryChRequestCompleted(ch) };
}

/// One rank with the process-wide calls' channel 0, communicator 0xa (channels 0 and 1,
/// finalized before the flush) and communicator 0xb (channel 0, live).
#[test]
#[ignore = "a helper: communicators_apart_in_check_summary_and_export runs it as a child process"]
fn child_with_communicators() {
    std::env::var(CHILD).expect("run by the parent test");
    assert_eq!(rcclTelemetryInit(), 0);
    let name = CString::new("mlx5_0").unwrap();
    let tr = CString::new("IB-CAST").unwrap();
    // SAFETY: valid strings and handles from the library.
    unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(0, name.as_ptr(), tr.as_ptr()),
            0
        );
        let mut n = 0;
        assert_eq!(rcclTelemetrySetupChannel(0, 0, 2, &mut n), 0);
        let own: Vec<_> = (0..2).map(|i| rcclTelemetryResolveQp(0, 0, i)).collect();
        drive(&own, rcclTelemetryResolveChannel(0, 0), 5);
        let a = rcclTelemetryCommInit(0xa, 0, 2);
        let b = rcclTelemetryCommInit(0xb, 1, 4);
        for ch in 0..2 {
            assert_eq!(rcclTelemetryCommSetupChannel(a, 0, ch, 2, &mut n), 0);
            let qps: Vec<_> = (0..2)
                .map(|i| rcclTelemetryCommResolveQp(a, 0, ch, i))
                .collect();
            drive(&qps, rcclTelemetryCommResolveChannel(a, 0, ch), 7);
        }
        assert_eq!(rcclTelemetryCommSetupChannel(b, 0, 0, 2, &mut n), 0);
        let qps: Vec<_> = (0..2)
            .map(|i| rcclTelemetryCommResolveQp(b, 0, 0, i))
            .collect();
        drive(&qps, rcclTelemetryCommResolveChannel(b, 0, 0), 11);
        rcclTelemetryCommFinalize(a);
    }
    assert_eq!(rcclTelemetryFlush(), 0);
}

#[test]
fn communicators_apart_in_check_summary_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "communicators::child_with_communicators",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("RCCL_TELEMETRY_ENABLE", "1")
        .env("RCCL_TELEMETRY_OUTPUT_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = dir.path().to_str().unwrap();

    let c = run(&["check", d]);
    assert_eq!(c.status.code(), Some(0), "{}{}", stdout(&c), stderr(&c));

    let s: Value = serde_json::from_slice(&run(&["summary", "--json", d]).stdout).unwrap();
    // Every WQE posted: 2 x 5 process-wide, 2 x 2 x 7 by 0xa (finalized), 2 x 11 by 0xb.
    assert_eq!(s["num_wqe_sent"].as_u64(), Some(10 + 28 + 22));
    let rows: Vec<(String, String, u64, u64)> = s["communicators"]
        .as_array()
        .expect("communicators rows")
        .iter()
        .map(|r| {
            (
                r["comm"]["hash"].as_str().unwrap_or("").to_owned(),
                r["state"].as_str().unwrap().to_owned(),
                r["channels"].as_u64().unwrap(),
                r["num_wqe_sent"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (String::new(), "process-wide".into(), 1, 10),
            ("0xb".into(), "live".into(), 1, 22),
            ("0xa".into(), "finalized".into(), 2, 28),
        ]
    );
    let text = stdout(&run_cols(&["summary", d], Some("200")));
    assert!(text.contains("Communicators"), "{text}");
    assert!(
        text.contains("0xa rank 0/2") && text.contains("0xb rank 1/4"),
        "{text}"
    );

    let prom = stdout(&run(&["export", "--format", "prometheus", d]));
    let series: Vec<&str> = prom.lines().filter(|l| !l.starts_with('#')).collect();
    let distinct: std::collections::HashSet<&str> = series
        .iter()
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    assert_eq!(distinct.len(), series.len(), "duplicate series:\n{prom}");
    assert!(
        prom.lines()
            .any(|l| l.starts_with("rccl_telemetry_channel_wqes_sent_total{")
                && l.contains("channel=\"0\",comm=\"0xb\",comm_rank=\"1\",comm_nranks=\"4\"}")
                && l.ends_with(" 22")),
        "{prom}"
    );
    assert!(
        prom.lines()
            .any(|l| l.starts_with("rccl_telemetry_wqes_sent_total{") && l.ends_with(" 60")),
        "the device's counter counts the finalized communicator too:\n{prom}"
    );
}
