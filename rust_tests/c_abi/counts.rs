//! Every counter against the simulation's tally: through the inline hooks and the exported
//! functions, with threads capturing and flushing concurrently, and with unknown channel ids.

use super::common::*;
use super::sim::*;

#[test]
fn every_counter_matches_the_simulation() {
    // Through the header's inline hooks, and through the exported functions.
    for prog in [ibcast_sim(), ibcast_sim_calls()] {
        let d = tempfile::tempdir().unwrap();
        let (o, t) = run_sim_with(prog, d.path(), &["--bad-calls"], &[]);
        let f = only_file(d.path());
        check_against_tally(&f, &t, 1, false);
        // Bad calls are silent no-ops, except the refused registrations, which say why; a
        // normal start says nothing (the signal handlers' line is RCCL_TELEMETRY_DEBUG's).
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 3, "{err}");
        assert!(!err.contains("signal handlers"), "{err}");
        assert!(
            err.lines().all(|l| l.starts_with("rccl-telemetry: ")),
            "{err}"
        );
        // At N = 1 the file bears no trace of sampling.
        let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
        assert!(!text.contains("sampled") && !text.contains("latency_sample_interval"));
    }
}

#[test]
fn threads_with_concurrent_capture_and_flush_are_exact() {
    // Mid-run Flush: a valid file; afterwards SwCapture, On and SetupChannel are inert (checked in C).
    let d = tempfile::tempdir().unwrap();
    run_sim(
        d.path(),
        &["--threads", "--channels", "8", "--requests", "3000"],
        &[],
    );
    only_file(d.path());
    // No explicit Flush: the exit handler writes every count after the threads joined.
    for prog in [ibcast_sim(), ibcast_sim_calls()] {
        let d = tempfile::tempdir().unwrap();
        let (_, t) = run_sim_with(
            prog,
            d.path(),
            &[
                "--threads",
                "--channels",
                "8",
                "--requests",
                "3000",
                "--no-flush",
            ],
            &[],
        );
        check_against_tally(&only_file(d.path()), &t, 1, false);
    }
}

#[test]
fn unknown_channel_ids_are_null() {
    let d = tempfile::tempdir().unwrap();
    let (_, t) = run_sim(d.path(), &["--unknown-channels", "--channels", "1"], &[]);
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, true);
}
