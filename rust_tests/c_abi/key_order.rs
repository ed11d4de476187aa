//! The file's key order: version 3's keys come after every older key, and version 4's after
//! those, at the top, per device, per QP and per peer, with and without stall detection.

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
    for (stall_ms, dev_stall, qp_stall) in [
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
        ),
        ("0", &[][..], &[][..]),
    ] {
        let d = tempfile::tempdir().unwrap();
        run_sim(
            d.path(),
            &["--requests", "50"],
            &[("RCCL_TELEMETRY_STALL_MS", stall_ms)],
        );
        let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
        let top = keys_at(&text, 1);
        assert_eq!(top.last().map(String::as_str), Some("stall_ms"), "{top:?}");
        let dev = keys_at(&text, 2);
        let at = dev.iter().position(|k| k == "port").unwrap();
        let want: Vec<&str> = ["port", "gid_index", "gid", "gid_ip", "lid", "peers"]
            .iter()
            .chain(dev_stall)
            .chain(&["cq_errors_by_status"])
            .copied()
            .collect();
        assert_eq!(dev[at..], want, "{dev:?}");
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
