//! The file written as it is read (`rank_file::write_to`, what Flush, exit and snapshots do)
//! is, byte for byte, the whole model serialised (`rank_file::build` + `to_writer`), on a
//! state that touches every key: several devices (one with unknown channel ids, one with no
//! channel), QPs of each role, sampled latencies, peers past a channel's per-peer cap, error
//! completions, a stalled QP, QPs' settings (whole and in part), untracked QPs, a channel that spans several slot segments; in
//! the hooks' mode and, in a child process of this test, in the verbs interposer's mode (its
//! per-QP counters). The two-pass path (a channel whose reads cannot be held) is held to
//! the same bytes. The stall clock is injected, so both writes see one state.

mod common;

use std::ffi::CString;
use std::process::Command;

use rccl_telemetry::capi::*;
use rccl_telemetry::{rank_file, registry, stall_detector};

const MS: u64 = 1_000_000;
const WALL0: u64 = 1_796_210_131_000_000_000;
const VERBS_CHILD: &str = "RCCL_TELEMETRY_TEST_STREAM_VERBS";

fn gid(host: u8, nic: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, host, 0, nic]
}

/// Devices 0, 3 and 31 with traffic of every kind; device 7 registered but never set up.
fn populate() {
    let tr = CString::new("IB-CAST").unwrap();
    for (d, name) in [(0, "mlx5_0"), (3, "mlx5_3"), (7, "mlx5_7"), (31, "mlx5_31")] {
        let n = CString::new(name).unwrap();
        // SAFETY: valid strings.
        assert_eq!(
            unsafe { rcclTelemetryRegisterDevice(d, n.as_ptr(), tr.as_ptr()) },
            d
        );
    }
    rcclTelemetryMarkChannelsUnknown(31);
    for (d, chs, qps) in [(0, 6, 9), (3, 2, 3000), (31, 2, 2)] {
        for ch in 0..chs {
            let mut n = 0;
            // SAFETY: n is writable.
            let first = unsafe { rcclTelemetrySetupChannel(d, ch * 5, qps, &mut n) };
            assert_eq!((first, n), (0, qps));
            for i in 0..qps {
                // Data, CTS, and every fifth QP never told its role.
                if i % 5 != 4 {
                    rcclTelemetrySetQpRole(d, ch * 5, i, i32::from(i % 5 != 3));
                }
                let q = rcclTelemetryResolveQp(d, ch * 5, i);
                if (i + ch) % 7 == 6 {
                    continue; // an inactive QP
                }
                // SAFETY: resolved handles; GIDs of 16 bytes.
                unsafe {
                    for k in 0..(1 + i % 4) {
                        let t = rcclTelemetryPostTs(q);
                        rcclTelemetryQpSendPosted(q, k % 2);
                        rcclTelemetryWqeSize(d, 4096u64 << (k + i % 3) as u32);
                        rcclTelemetryQpWqeComplete(q, t);
                    }
                    rcclTelemetryQpRecvPosted(q);
                    rcclTelemetryQpCtsSent(q, i % 2);
                    if i % 11 == 0 {
                        rcclTelemetryQpSlotMiss(q);
                    }
                    // Ten remote NICs on device 0's channels, 267 on device 3's: past the
                    // per-channel cap of the hooks and of the interposer.
                    if i % 3 != 2 {
                        let nic = i % if d == 3 { 400 } else { 10 };
                        let (l, r) = (
                            gid(1, d as u8 + 1),
                            gid(2 + (nic / 200) as u8, (nic % 200) as u8 + 1),
                        );
                        let lid = if d == 3 && i % 17 == 0 { 9 } else { 0 };
                        rcclTelemetryQpSetPeer(
                            q,
                            0x100 + i as u32,
                            l.as_ptr().cast(),
                            0,
                            0x900 + i as u32,
                            if lid != 0 {
                                std::ptr::null()
                            } else {
                                r.as_ptr().cast()
                            },
                            lid,
                        );
                    }
                    // Settings on some QPs: the whole struct, or only its path MTU.
                    if i % 5 == 1 {
                        let a = rcclTelemetryQpAttrs {
                            size: if i % 2 == 0 {
                                12
                            } else {
                                std::mem::size_of::<rcclTelemetryQpAttrs>()
                            },
                            pathMtu: 1024 << (i % 3),
                            trafficClass: if i == 6 { 0 } else { 106 },
                            timeout: 18,
                            retryCnt: 7,
                            rnrRetry: 7,
                            minRnrTimer: 12,
                            ..Default::default()
                        };
                        assert_eq!(rcclTelemetryQpSetAttrs(q, &a), 0);
                    }
                    if d == 0 && i == 4 {
                        rcclTelemetryQpCqError(q, 12, 0x81);
                        rcclTelemetryQpCqError(q, 5, 0);
                    }
                }
                // Index forms on some.
                if i % 13 == 0 {
                    rcclTelemetryWqePosted(d, ch * 5, i, 1);
                    rcclTelemetryWriteWqe(d, ch * 5, i, 0);
                    rcclTelemetryCtsSent(d, ch * 5, i, 1);
                }
            }
            rcclTelemetryRequestCompleted(d, ch * 5);
            rcclTelemetryBytes(d, 1, 1 << 20);
            rcclTelemetryBytes(d, 0, 1 << 19);
            rcclTelemetryAddCqPolls(d, 17);
        }
        rcclTelemetryCqError(d);
    }
    let mut n = 0;
    // SAFETY: n is writable. Out of range: untracked on the device.
    assert_eq!(unsafe { rcclTelemetrySetupChannel(0, 512, 4, &mut n) }, -1);
    // An inactive QP gets IB-CAST's pair, never completed: stalled after the threshold.
    let q = rcclTelemetryResolveQp(0, 5, 5);
    // SAFETY: a resolved handle.
    unsafe {
        rcclTelemetryPostTs(q);
        rcclTelemetryQpSendPosted(q, 0);
        rcclTelemetryQpSendPosted(q, 1);
    }
    for ms in [0, 500, 1000, 1500] {
        stall_detector::tick_at(1_000 * MS + ms * MS, WALL0 + ms * MS);
    }
}

/// The three ways of writing the file, on the state as it is now.
fn three_ways() -> [Vec<u8>; 3] {
    let rt = rccl_telemetry::runtime().expect("on");
    let end = WALL0 + 2_000 * MS;
    let mut whole = Vec::new();
    let model = rank_file::build(&rt.id, end, None, true, "rcclTelemetryFlush").unwrap();
    rank_file::to_writer(&mut whole, &model).unwrap();
    whole.push(b'\n');
    let mut one = Vec::new();
    rank_file::write_to(&mut one, &rt.id, end, None, true, "rcclTelemetryFlush").unwrap();
    let mut two = Vec::new();
    rank_file::write_to_two_passes(&mut two, &rt.id, end, None, true, "rcclTelemetryFlush")
        .unwrap();
    [whole, one, two]
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let from = at.saturating_sub(200);
    format!(
        "lengths {} and {}, first difference at byte {at}:\n--- whole model\n{}\n--- stream\n{}",
        a.len(),
        b.len(),
        String::from_utf8_lossy(&a[from..(at + 200).min(a.len())]),
        String::from_utf8_lossy(&b[from..(at + 200).min(b.len())])
    )
}

fn check_same_bytes(verbs: bool) {
    let out = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe {
        std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
        std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", out.path());
        std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
        std::env::set_var("RCCL_TELEMETRY_STALL_MS", "1000");
        std::env::set_var("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "7");
    }
    stall_detector::manual_clock();
    if verbs {
        registry::enable_verbs_keys();
    }
    assert_eq!(rcclTelemetryInit(), 0);
    // The library keeps panic messages for its own boundary; this test wants them printed.
    drop(std::panic::take_hook());
    populate();
    let [whole, one, two] = three_ways();
    let text = String::from_utf8(whole.clone()).unwrap();
    // The state reached what it is meant to exercise (in the interposer's mode stalls come
    // from its own send-queue records, which the hooks do not keep).
    if !verbs {
        assert!(text.contains("\"stalled\": true"), "no stalled QP");
    }
    for key in [
        "\"first_cq_error\": {",
        "\"num_qps_shared\"",
        "\"role\": null",
        "\"role\": \"cts\"",
        "\"num_channels\": null",
        "\"lid\": 9",
        "\"num_qp_untracked\": 4",
    ] {
        assert!(text.contains(key), "the state lacks {key}");
    }
    assert_eq!(text.contains("\"num_send_wqe\""), verbs);
    assert!(one == whole, "one pass: {}", first_difference(&whole, &one));
    assert!(
        two == whole,
        "two passes: {}",
        first_difference(&whole, &two)
    );
    // And it is what Flush writes: a valid file with the same devices.
    assert_eq!(rcclTelemetryFlush(), 0);
    let files = common::telemetry_files(out.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let flushed = common::load_valid(&files[0]);
    let model: serde_json::Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(flushed["devices"], model["devices"]);
}

#[test]
fn the_stream_is_the_whole_model_byte_for_byte() {
    if std::env::var_os(VERBS_CHILD).is_some() {
        return check_same_bytes(true);
    }
    check_same_bytes(false);
}

/// The same in the verbs interposer's mode, which is per process: in a child.
#[test]
fn the_stream_is_the_whole_model_byte_for_byte_with_verbs_keys() {
    if std::env::var_os(VERBS_CHILD).is_some() {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_stream_is_the_whole_model_byte_for_byte",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(VERBS_CHILD, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
