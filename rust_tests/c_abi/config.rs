//! Configuration: latency sampling moves only the latency fields, the log-scale histogram
//! off removes its keys and changes nothing else, the linear histogram's shape follows its
//! variables, and telemetry is on only for RCCL_TELEMETRY_ENABLE=1.

use super::common::*;
use super::sim::*;

use serde_json::Value;

#[test]
fn sampling_moves_only_the_latency_fields() {
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().retain(|k, _| k == "devices");
        for d in v["devices"].as_array_mut().unwrap() {
            d.as_object_mut()
                .unwrap()
                .remove("wqe_completion_log_histogram");
            for p in d["peers"].as_array_mut().unwrap() {
                p.as_object_mut()
                    .unwrap()
                    .remove("wqe_completion_log_histogram");
            }
            for c in d["channels"].as_array_mut().unwrap() {
                let o = c.as_object_mut().unwrap();
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                    "num_wqe_sampled",
                    "wqe_completion_log_histogram",
                ] {
                    o.remove(k);
                }
                for q in o["queue_pairs"].as_array_mut().unwrap() {
                    let o = q.as_object_mut().unwrap();
                    for k in [
                        "wqe_completion_ns_min",
                        "wqe_completion_ns_max",
                        "wqe_completion_histogram",
                        "num_wqe_sampled",
                        // wall-clock readings of the stall detector's checks
                        "last_post_time",
                        "last_completion_time",
                    ] {
                        o.remove(k);
                    }
                }
            }
        }
        v
    };
    let mut files = Vec::new();
    for n in ["1", "16", "5"] {
        let d = tempfile::tempdir().unwrap();
        let (o, t) = run_sim(
            d.path(),
            &["--requests", "200"],
            &[("RCCL_TELEMETRY_LATENCY_SAMPLE", n)],
        );
        let f = only_file(d.path());
        let effective = if n == "5" { 8 } else { n.parse().unwrap() };
        check_against_tally(&f, &t, effective, false);
        if n == "5" {
            let err = stderr(&o);
            assert!(
                err.contains("RCCL_TELEMETRY_LATENCY_SAMPLE=5") && err.contains(" 8 "),
                "{err}"
            );
        }
        if effective > 1 {
            // 1 in N by posting position: each QP sampled ceil(posted / N) of its WQEs.
            for dev in f["devices"].as_array().unwrap() {
                for c in dev["channels"].as_array().unwrap() {
                    for q in c["queue_pairs"].as_array().unwrap() {
                        let posted = u(&q["num_wqe_sent"]);
                        assert_eq!(u(&q["num_wqe_sampled"]), posted.div_ceil(effective));
                    }
                }
            }
        }
        files.push(strip(f));
    }
    assert_eq!(
        files[0], files[1],
        "N=1 and N=16 differ outside the latency fields"
    );
    assert_eq!(files[0], files[2]);
}

#[test]
fn log_histogram_off_leaves_no_key_and_changes_nothing_else() {
    let mut files = Vec::new();
    for on in ["1", "0"] {
        let d = tempfile::tempdir().unwrap();
        let (_, t) = run_sim(
            d.path(),
            &["--requests", "200"],
            &[("RCCL_TELEMETRY_LOG_HISTOGRAM", on)],
        );
        let mut f = only_file(d.path());
        if on == "1" {
            check_against_tally(&f, &t, 1, false);
        }
        f.as_object_mut()
            .unwrap()
            .retain(|k, _| k == "devices" || k == "version");
        let mut keys = 0;
        for dev in f["devices"].as_array_mut().unwrap() {
            keys += u64::from(
                dev.as_object_mut()
                    .unwrap()
                    .remove("wqe_completion_log_histogram")
                    .is_some(),
            );
            for p in dev["peers"].as_array_mut().unwrap() {
                keys += u64::from(
                    p.as_object_mut()
                        .unwrap()
                        .remove("wqe_completion_log_histogram")
                        .is_some(),
                );
            }
            for c in dev["channels"].as_array_mut().unwrap() {
                let o = c.as_object_mut().unwrap();
                keys += u64::from(o.remove("wqe_completion_log_histogram").is_some());
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                ] {
                    o.remove(k);
                }
                for q in o["queue_pairs"].as_array_mut().unwrap() {
                    assert!(
                        q.get("wqe_completion_log_histogram").is_none(),
                        "no per-QP key: {q}"
                    );
                    for k in [
                        "wqe_completion_ns_min",
                        "wqe_completion_ns_max",
                        "wqe_completion_histogram",
                        "last_post_time",
                        "last_completion_time",
                    ] {
                        q.as_object_mut().unwrap().remove(k);
                    }
                }
            }
        }
        assert_eq!(
            keys > 0,
            on == "1",
            "RCCL_TELEMETRY_LOG_HISTOGRAM={on}: {keys} log-scale keys"
        );
        files.push(f);
    }
    assert_eq!(
        files[0], files[1],
        "the log-scale histogram changes no other key"
    );
}

#[test]
fn histogram_shape_follows_the_configuration() {
    let d = tempfile::tempdir().unwrap();
    let (_, t) = run_sim(
        d.path(),
        &[],
        &[
            ("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "16"),
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "1"),
        ],
    );
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, false);
    assert_eq!(u(&f["histogram_interval_ns"]), 1);
    let h = f["devices"][0]["channels"][0]["wqe_completion_histogram"]
        .as_array()
        .unwrap();
    assert_eq!(h.len(), 16);
    // With 1 ns buckets every real completion latency lands in the last bucket or near it.
    assert!(u(&h[15]) > 0, "{h:?}");
}

#[test]
fn disabled_unless_exactly_one() {
    for (v, lines) in [
        (None, 0),
        (Some("0"), 0),
        (Some("true"), 1),
        (Some("yes"), 1),
    ] {
        let d = tempfile::tempdir().unwrap();
        let tally = d.path().join("tally.json");
        let mut env = vec![("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap())];
        if let Some(v) = v {
            env.push(("RCCL_TELEMETRY_ENABLE", v));
        }
        let o = run(ibcast_sim(), &[tally.to_str().unwrap()], &env);
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            err.lines()
                .filter(|l| l.starts_with("rccl-telemetry: "))
                .count(),
            lines,
            "{v:?}: {err}"
        );
        assert!(telemetry_files(d.path()).is_empty(), "{v:?}");
    }
}
