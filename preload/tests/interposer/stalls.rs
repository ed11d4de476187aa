//! Stall detection over the fake provider (c_tests/preload/verbs_app_stall.c): stalled QPs
//! named, recovered and ended; with RCCL_TELEMETRY_STALL_MS=0 no stall keys and no lines.

use super::common::*;

/// Stall detection over the fake provider (c_tests/preload/verbs_app_stall.c, scenario `stall`):
/// a QP whose signalled WR is not polled for the pause stalls and recovers, one destroyed
/// while outstanding stops being stalled, runs of unsignalled WRs retired by a later
/// completion never stall, and a trailing unsignalled run is outstanding but no stall. The
/// direct and the NCCL-style program must agree.
#[test]
fn stalled_qps_are_named_recovered_and_destroyed_ones_end() {
    let Some(b) = bins("stalled_qps_are_named_recovered_and_destroyed_ones_end") else {
        return;
    };
    const STALL_MS: u64 = 40;
    const PAUSE_MS: u64 = 300;
    for app in [&b.direct, &b.nccl] {
        let r = run(
            app,
            &b,
            &["stall", &PAUSE_MS.to_string()],
            &[("RCCL_TELEMETRY_STALL_MS", "40")],
            true,
        );
        let f = only(&r);
        assert_eq!(f["version"], 5);
        assert_eq!(f["stall_ms"], STALL_MS);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 8);
        let elapsed = r.said["elapsed_ms"].as_u64().unwrap();
        let ms = |i: usize| q[i]["longest_stall_ms"].as_u64().unwrap();
        // p.a: stalled while its completion was held, then drained.
        assert!(
            ms(0) >= STALL_MS && ms(0) <= elapsed,
            "p.a longest {} (elapsed {elapsed})",
            ms(0)
        );
        assert!(q[0]["longest_stall_start"].is_string());
        // r.a: stalled, destroyed while outstanding: no longer stalled, nothing outstanding.
        assert!(
            ms(4) >= STALL_MS && ms(4) <= elapsed,
            "r.a longest {}",
            ms(4)
        );
        // q.a: unsignalled runs retired by later completions never stalled; its trailing
        // unsignalled run is outstanding, with no clock token (the oldest is unsignalled).
        assert_eq!(ms(2), 0, "{}", q[2]);
        assert_eq!(q[2]["num_wqe_outstanding"], 2);
        assert!(q[2]["oldest_outstanding_ms"].is_null());
        // w.a: still stalled when the file is written; its oldest WR is signalled, so its age
        // is known (from its PostTs token); since when it waits; the ongoing stall is its longest.
        assert_eq!(
            (
                q[6]["stalled"].as_bool(),
                q[6]["num_wqe_outstanding"].as_u64()
            ),
            (Some(true), Some(1)),
            "{}",
            q[6]
        );
        assert!(
            q[6]["oldest_outstanding_ms"]
                .as_u64()
                .is_some_and(|a| a >= STALL_MS)
                && q[6]["stalled_since"].is_string(),
            "{}",
            q[6]
        );
        assert_eq!(q[6]["stalled_since"], q[6]["longest_stall_start"]);
        assert!(
            ms(6) >= ms(0),
            "the ongoing stall is the longest: {} < {}",
            ms(6),
            ms(0)
        );
        for (i, x) in q.iter().enumerate() {
            assert!(
                x.get("oldest_outstanding_ms").is_some(),
                "preload files carry oldest_outstanding_ms"
            );
            if i == 6 {
                continue;
            }
            assert_eq!(x["stalled"], false, "QP {i}: {x}");
            assert!(x["stalled_since"].is_null());
            if i != 2 {
                assert_eq!(x["num_wqe_outstanding"], 0, "QP {i}: {x}");
            }
            if i % 2 == 1 {
                assert_eq!(ms(i), 0, "receiving QP {i} never stalls");
            }
        }
        assert_eq!(
            (
                d["num_qps_stalled"].as_u64(),
                d["num_wqe_outstanding"].as_u64()
            ),
            (Some(1), Some(3))
        );
        // One line per episode, naming the device, the QP and the outstanding count.
        let lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("rccl-telemetry: stall: "))
            .collect();
        assert_eq!(lines.len(), 3, "{}", r.stderr);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("device 0 (fake0) channel 0 QP 0 ")
                    && l.contains(": 4 WRs outstanding, no completion for ")),
            "{lines:?}"
        );
        for l in &lines {
            let waited: u64 = l
                .rsplit_once("no completion for ")
                .unwrap()
                .1
                .trim_end_matches(" ms")
                .parse()
                .unwrap();
            assert!(waited >= STALL_MS, "{l}");
        }
        assert!(
            lines
                .iter()
                .any(|l| l.contains("device 0 (fake0) channel 0 QP 4 ")
                    && l.contains(": 1 WRs outstanding")),
            "{lines:?}"
        );
    }
}

/// With RCCL_TELEMETRY_STALL_MS=0 there are no stall keys and no stall lines.
#[test]
fn stall_detection_off_writes_no_stall_keys() {
    let Some(b) = bins("stall_detection_off_writes_no_stall_keys") else {
        return;
    };
    let r = run(
        &b.direct,
        &b,
        &["stall", "60"],
        &[("RCCL_TELEMETRY_STALL_MS", "0")],
        true,
    );
    let f = only(&r);
    assert_eq!(f["stall_ms"], 0);
    let d = dev(f, 0);
    assert!(d.get("num_qps_stalled").is_none() && d.get("num_wqe_outstanding").is_none());
    for x in qps(d) {
        assert!(
            x.get("stalled").is_none() && x.get("longest_stall_ms").is_none(),
            "{x}"
        );
    }
    assert!(!r.stderr.contains("stall:"), "{}", r.stderr);
}

/// Send queues deeper than the detector counts one by one (c_tests/preload/verbs_app_stall.c,
/// scenario `stall-deep`, depth 8,192): 4,104 unsignalled writes with nothing signalled after
/// them are outstanding and no stall (no completion will come), however long they stay; a
/// signalled write among 4,113 entries, past the first 4,096 and never polled, is one.
#[test]
fn a_deep_queue_of_unsignalled_writes_is_no_stall() {
    let Some(b) = bins("a_deep_queue_of_unsignalled_writes_is_no_stall") else {
        return;
    };
    const STALL_MS: u64 = 40;
    for app in [&b.direct, &b.nccl] {
        let r = run(
            app,
            &b,
            &["stall-deep", "300"],
            &[("RCCL_TELEMETRY_STALL_MS", "40")],
            true,
        );
        let f = only(&r);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 4);
        // u.a: 4,104 unsignalled writes, nothing after them.
        assert_eq!(q[0]["num_wqe_outstanding"], 4104, "{}", q[0]);
        assert_eq!(
            (q[0]["stalled"].as_bool(), q[0]["longest_stall_ms"].as_u64()),
            (Some(false), Some(0)),
            "{}",
            q[0]
        );
        assert!(q[0]["oldest_outstanding_ms"].is_null(), "{}", q[0]);
        // v.a: a signalled write behind 4,104 unsignalled ones, 8 more after it.
        assert_eq!(q[2]["num_wqe_outstanding"], 4113, "{}", q[2]);
        assert_eq!(q[2]["stalled"], true, "{}", q[2]);
        assert!(
            q[2]["longest_stall_ms"]
                .as_u64()
                .is_some_and(|ms| ms >= STALL_MS),
            "{}",
            q[2]
        );
        assert_eq!(d["num_qps_stalled"], 1);
        let lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("rccl-telemetry: stall: "))
            .collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        assert!(
            lines[0].contains("channel 0 QP 2 ") && lines[0].contains(": 4113 WRs outstanding"),
            "{lines:?}"
        );
    }
}
