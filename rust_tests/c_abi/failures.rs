//! Bad input and failures: an unwritable directory, a malformed environment (defaults and one
//! line each), and internal failures forced at each entry point: contained, logged in one
//! line, and the process exits normally.

use super::common::*;
use super::sim::*;

#[test]
fn unwritable_directory_is_one_line_and_a_normal_exit() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no/such/dir");
    let (o, _) = run_sim(
        d.path(),
        &[],
        &[("RCCL_TELEMETRY_OUTPUT_DIR", missing.to_str().unwrap())],
    );
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("rccl-telemetry: cannot write"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(missing.to_str().unwrap()) && lines[0].contains("No such file"),
        "{err}"
    );
    assert!(err.contains("rcclTelemetryFlush returned -1"), "{err}");
    assert!(telemetry_files(d.path()).is_empty());
}

#[test]
fn malformed_environment_gets_defaults_and_one_line_each() {
    let d = tempfile::tempdir().unwrap();
    let (o, t) = run_sim(
        d.path(),
        &[],
        &[
            ("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "lots"),
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "-5"),
            ("RCCL_TELEMETRY_LATENCY_SAMPLE", "0"),
            ("RCCL_TELEMETRY_SAMPLE_MS", "99999999999999999999999"),
        ],
    );
    let err = stderr(&o);
    for var in [
        "HISTOGRAM_BUCKETS",
        "HISTOGRAM_INTERVAL_NS",
        "LATENCY_SAMPLE",
        "SAMPLE_MS",
    ] {
        let n = err
            .lines()
            .filter(|l| l.contains(&format!("RCCL_TELEMETRY_{var}=")))
            .count();
        assert_eq!(n, 1, "{var}: {err}");
    }
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, false);
    assert_eq!(u(&f["histogram_interval_ns"]), 30_000);
    let q = &f["devices"][0]["channels"][0]["queue_pairs"][0];
    assert_eq!(q["wqe_completion_histogram"].as_array().unwrap().len(), 5);
}

#[test]
fn internal_failures_are_contained_and_logged() {
    for (fault, expect_file, needle) in [
        ("init_error", false, "telemetry could not start (forced by RCCL_TELEMETRY_TEST_FAULT=init_error)"),
        ("init_panic", false, "telemetry could not start (internal error: forced by RCCL_TELEMETRY_TEST_FAULT=init_panic"),
        ("setup_panic", true, "internal error in rcclTelemetrySetupChannel contained"),
        ("flush_panic", false, "internal error in rcclTelemetryFlush contained"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let tally = d.path().join("tally.json");
        let o = run(
            ibcast_sim(),
            &[tally.to_str().unwrap()],
            &[("RCCL_TELEMETRY_ENABLE", "1"), ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()), ("RCCL_TELEMETRY_TEST_FAULT", fault)],
        );
        let err = stderr(&o);
        assert!(err.contains(needle), "{fault}: {err}");
        assert!(err.lines().filter(|l| !l.starts_with("ibcast_sim")).all(|l| l.starts_with("rccl-telemetry: ")), "{fault}: {err}");
        // The process always finishes normally: no abort, no signal.
        assert!(o.status.code().is_some(), "{fault}: {:?}", o.status);
        assert_eq!(telemetry_files(d.path()).len(), usize::from(expect_file), "{fault}");
        if expect_file {
            // SetupChannel failed for every QP: no slots, so no counts, but a valid file.
            let f = only_file(d.path());
            assert_eq!(f["devices"].as_array().unwrap().len(), 2);
        }
    }
}
