//! The file's key order: version 3's keys come after every older key, version 4's after those
//! and version 5's (the WQE latency monitor's) after those, at the top, per device, per
//! channel, per QP and per peer, with and without stall detection; the communicators' keys
//! (c_tests/comm_sim.c) last of version 4's.

use super::common::*;
use super::sim::*;

/// The keys of the first object whose keys sit at `depth` in the file's layout (one key a
/// line, two spaces an indent), in the file's order.
fn keys_at(text: &str, depth: usize) -> Vec<String> {
    let pad = " ".repeat(2 * depth);
    let mut keys: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&pad).filter(|r| r.starts_with('"')) else {
            continue;
        };
        let k = rest[1..].split('"').next().unwrap().to_owned();
        if keys.contains(&k) {
            break; // the next object at this depth
        }
        keys.push(k);
    }
    keys
}

#[test]
fn version_3_and_4_keys_follow_every_older_key() {
    // With stall detection on (the default) its keys come last; with it off they are absent.
    for (stall_ms, dev_stall, qp_stall, dev_v5) in [
        (
            "1000",
            &["num_wqe_outstanding", "num_qps_stalled"][..],
            &[
                "num_wqe_outstanding",
                "stalled",
                "stalled_since",
                "longest_stall_ms",
                "longest_stall_start",
            ][..],
            &["num_stalls"][..],
        ),
        ("0", &[][..], &[][..], &[][..]),
    ] {
        let d = tempfile::tempdir().unwrap();
        run_sim(
            d.path(),
            &["--requests", "50"],
            &[("RCCL_TELEMETRY_STALL_MS", stall_ms)],
        );
        let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
        let top = keys_at(&text, 1);
        assert_eq!(
            top[top.len() - 4..],
            ["stall_ms", "rank", "communicators", "slow_threshold_ns"],
            "{top:?}"
        );
        let dev = keys_at(&text, 2);
        let at = dev.iter().position(|k| k == "port").unwrap();
        let want: Vec<&str> = ["port", "gid_index", "gid", "gid_ip", "lid", "peers"]
            .iter()
            .chain(dev_stall)
            .chain(&["cq_errors_by_status", "finalized_comms"])
            .chain(dev_v5)
            .copied()
            .collect();
        assert_eq!(dev[at..], want, "{dev:?}");
        let ch_at = text.find("\"channels\": [").unwrap();
        let ch = keys_at(&text[ch_at..], 3);
        assert_eq!(ch.last().map(String::as_str), Some("comm"), "{ch:?}");
        assert!(ch.contains(&"wqe_completion_log_histogram".to_owned()));
        assert!(
            dev[..at].iter().any(|k| k == "hw_counters")
                && dev[..at]
                    .iter()
                    .any(|k| k == "wqe_completion_log_histogram")
        );
        let qp = keys_at(&text, 4);
        let v4 = [
            "cq_errors",
            "first_cq_error",
            "qp_state",
            "last_post_time",
            "last_completion_time",
        ];
        let want: Vec<&str> = ["qp_num", "peer"]
            .iter()
            .chain(qp_stall)
            .chain(&v4)
            .chain(&["port", "local_lid"])
            .copied()
            .collect();
        assert_eq!(qp[qp.len() - want.len()..], want, "{qp:?}");
        assert_eq!(qp[0], "id");
        let peer = keys_at(&text, 5);
        assert_eq!(peer, ["qp_num", "gid", "gid_ip", "lid"]);
        // The device's peers entries: the keys under the device's "peers" list.
        let at = text.find("\"peers\": [").unwrap();
        assert_eq!(
            keys_at(&text[at..], 3)[..5],
            [
                "gid",
                "gid_ip",
                "lid",
                "num_qps",
                "wqe_completion_log_histogram"
            ]
        );
    }
}

#[test]
fn communicator_keys_come_last_and_in_order() {
    let d = tempfile::tempdir().unwrap();
    let prog = c_program("comm_sim");
    let out = run(
        &prog,
        &["two"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
    // The top-level list: a communicator's keys, then its times.
    let at = text.find("\"communicators\": [").unwrap();
    assert_eq!(
        keys_at(&text[at..], 2),
        ["id", "hash", "rank", "nranks", "init_time", "finalize_time"]
    );
    // A channel's communicator.
    let at = text.find("\"comm\": {").unwrap();
    assert_eq!(keys_at(&text[at..], 4), ["id", "hash", "rank", "nranks"]);
    // A finalized record: its communicator and size, a channel's counters in a channel's
    // order, then its peers, errors and stall keys.
    let at = text.find("\"finalized_comms\": [").unwrap();
    let rec = keys_at(&text[at..], 3);
    let want = [
        "comm",
        "num_comms",
        "num_channels",
        "num_qps",
        "num_wqe_sent",
        "num_recv_wqe",
        "num_wqe_rcvd",
        "num_wqe_completed",
        "num_cts_sent",
        "num_cts_sent_signalled",
        "num_cts_sent_unsignalled",
        "num_slot_miss",
        "num_write_wqe",
        "num_write_imm_wqe",
        "num_stalls",
        "num_req_completed",
        "num_data_qp",
        "num_cts_qp",
        "num_qp_untracked",
        "wqe_completion_ns_min",
        "wqe_completion_ns_max",
        "wqe_completion_histogram",
        "wqe_completion_log_histogram",
        "peers",
        "cq_errors",
        "first_cq_error",
        "num_wqe_outstanding",
        "num_qps_stalled",
        "longest_stall_ms",
        "longest_stall_start",
        "queue_pairs",
        "num_qps_unlisted",
    ];
    assert_eq!(rec, want, "{rec:?}");
}
