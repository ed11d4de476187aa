//! librccl_telemetry_preload.so on the host, over the fake libibverbs.so.1
//! (c_tests/preload/fake_verbs.c): the scenarios of c_tests/preload/verbs_app*.c, run with
//! the program linked against libibverbs and loading it the way NCCL's ibvwrap does
//! (dlopen + dlvsym), each file validated against the schema and checked for exact counts.
//! `make test` builds the programs (`make preload preload-test-bins`) before running this.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "../../rust_tests/skip.rs"]
mod skip;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Bins {
    so: PathBuf,
    direct: PathBuf,
    nccl: PathBuf,
    fake_dir: PathBuf,
    static_app: PathBuf,
    /// The same interposer with the fake provider's cues inside its own sections.
    hooks: PathBuf,
}

fn bins(test: &str) -> Option<Bins> {
    let r = root();
    let b = Bins {
        so: r.join("target/release/librccl_telemetry_preload.so"),
        direct: r.join("build/preload/verbs_app"),
        nccl: r.join("build/preload/verbs_app_nccl"),
        fake_dir: r.join("build/preload/fakeverbs"),
        static_app: r.join("build/preload/verbs_app_static"),
        hooks: r.join("build/preload/librccl_telemetry_preload_hooks.so"),
    };
    for p in [
        &b.so,
        &b.direct,
        &b.nccl,
        &b.fake_dir,
        &b.static_app,
        &b.hooks,
    ] {
        if !p.exists() {
            // `make test` builds them first: a missing one is a broken build, not an
            // environment this machine lacks.
            skip::skip(
                test,
                &format!(
                    "{} missing: run `make preload preload-test-bins`",
                    p.display()
                ),
                true,
                true,
            );
            return None;
        }
    }
    Some(b)
}

fn schema() -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let s: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("schema/rccl_telemetry.schema.json")).unwrap(),
        )
        .unwrap();
        jsonschema::validator_for(&s).expect("the schema compiles")
    })
}

struct Run {
    /// The program's own account (its last stdout line).
    said: Value,
    /// The telemetry files written.
    files: Vec<Value>,
    stderr: String,
}

fn run(app: &Path, b: &Bins, args: &[&str], env: &[(&str, &str)], enable: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(app);
    c.args(args)
        .env("LD_PRELOAD", &b.so)
        .env("LD_LIBRARY_PATH", &b.fake_dir)
        .env("RCCL_TELEMETRY_OUTPUT_DIR", dir.path())
        .env("RCCL_TELEMETRY_SIGNALS", "0")
        .env_remove("RCCL_TELEMETRY_LATENCY_SAMPLE")
        .env_remove("RCCL_TELEMETRY_ENABLE");
    if enable {
        c.env("RCCL_TELEMETRY_ENABLE", "1");
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\nstdout: {stdout}\nstderr: {stderr}",
        app.display(),
        out.status
    );
    let said = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{stdout}: {e}"));
    let mut files = vec![];
    let mut paths: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in paths {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let errors: Vec<String> = schema()
            .iter_errors(&v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} violates the schema:\n{}",
            p.display(),
            errors.join("\n")
        );
        files.push(v);
    }
    Run {
        said,
        files,
        stderr,
    }
}

fn only(r: &Run) -> &Value {
    assert_eq!(r.files.len(), 1, "one file expected; stderr: {}", r.stderr);
    &r.files[0]
}

fn dev(f: &Value, id: u64) -> &Value {
    f["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device_id"] == id)
        .unwrap_or_else(|| panic!("no device {id}"))
}

fn qps(d: &Value) -> &Vec<Value> {
    let ch = d["channels"].as_array().unwrap();
    assert_eq!(
        ch.len(),
        1,
        "the interposer's QPs sit in one unknown channel"
    );
    assert!(ch[0]["id"].is_null());
    ch[0]["queue_pairs"].as_array().unwrap()
}

/// Asserts the listed keys of a QP (or device) object; every other counter of the QP is 0.
fn expect(what: &str, o: &Value, want: &[(&str, u64)]) {
    for (k, v) in want {
        assert_eq!(o[*k], *v, "{what}: {k} (in {o})");
    }
    const COUNTERS: &[&str] = &[
        "num_wqe_sent",
        "num_recv_wqe",
        "num_wqe_rcvd",
        "num_wqe_completed",
        "num_write_wqe",
        "num_write_imm_wqe",
        "num_send_wqe",
        "num_read_wqe",
        "num_atomic_wqe",
        "num_other_wqe",
        "num_wqe_retired_unsignalled",
        "num_wqe_track_full",
        "num_cts_sent",
        "num_slot_miss",
    ];
    if o.get("num_wqe_sent").is_some() {
        for k in COUNTERS {
            if !want.iter().any(|(w, _)| w == k) {
                assert_eq!(o[*k], 0, "{what}: {k} (in {o})");
            }
        }
    }
}

fn sizes(d: &Value) -> Vec<(u64, u64)> {
    d["wqe_size_stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["max_wqe_size"].as_u64().unwrap(),
                s["num_wqe"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn polls(r: &Run, dev: usize) -> u64 {
    r.said["polls"][dev].as_u64().unwrap()
}

/// The counters of a file without what varies run to run (times, pid, latencies).
fn counters(f: &Value) -> Value {
    let mut f = f.clone();
    for k in ["start_time", "end_time", "process_id", "process_name"] {
        f.as_object_mut().unwrap().remove(k);
    }
    for d in f["devices"].as_array_mut().unwrap() {
        // Latencies are real time: their buckets differ run to run (the totals are checked).
        d.as_object_mut()
            .unwrap()
            .remove("wqe_completion_log_histogram");
        for c in d["channels"].as_array_mut().unwrap() {
            let strip = |o: &mut serde_json::Map<String, Value>| {
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                    "wqe_completion_log_histogram",
                ] {
                    o.remove(k);
                }
            };
            strip(c.as_object_mut().unwrap());
            for q in c["queue_pairs"].as_array_mut().unwrap() {
                strip(q.as_object_mut().unwrap());
            }
        }
    }
    f
}

fn hist_sum(q: &Value) -> u64 {
    q["wqe_completion_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

fn check_chain(r: &Run, iters: u64, sample: u64) {
    assert_eq!(
        r.said["pristine"], 0,
        "enabled: the context's ops are wrapped"
    );
    let f = only(r);
    assert_eq!(f["transport"], "verbs-preload");
    let d = dev(f, 0);
    let q = qps(d);
    assert_eq!(q.len(), 2);
    // QP A: iters chains of 10 (4 writes, 1 write-imm, 2 sends, 1 read, 2 atomics; only the
    // last signalled), then a chain refused at its 2nd WR (1 write posted), a single WR refused
    // (nothing), 1 signalled write, and an unsignalled write retired by a signalled one.
    expect(
        "chain A",
        &q[0],
        &[
            ("num_wqe_sent", 10 * iters + 4),
            ("num_write_wqe", 4 * iters + 4),
            ("num_write_imm_wqe", iters),
            ("num_send_wqe", 2 * iters),
            ("num_read_wqe", iters),
            ("num_atomic_wqe", 2 * iters),
            ("num_wqe_rcvd", iters + 2),
            ("num_wqe_completed", iters + 2),
            ("num_wqe_retired_unsignalled", 9 * iters + 2),
        ],
    );
    // QP B: 3 receives per chain (write-imm, 2 sends), all completed.
    expect(
        "chain B",
        &q[1],
        &[
            ("num_recv_wqe", 3 * iters),
            ("num_wqe_rcvd", 3 * iters),
            ("num_wqe_completed", 3 * iters),
        ],
    );
    // 1 in `sample` signalled sends is timed: positions 0, N, 2N, ... of iters + 2.
    assert_eq!(hist_sum(&q[0]), (iters + 2).div_ceil(sample));
    // The channel's log-scale histogram holds the same sampled completions.
    let log: u64 = f["devices"][0]["channels"][0]["wqe_completion_log_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[2].as_u64().unwrap())
        .sum();
    assert_eq!(log, hist_sum(&q[0]) + hist_sum(&q[1]));
    assert!(q[0]["wqe_completion_ns_min"].as_i64().unwrap() >= 0);
    assert_eq!(hist_sum(&q[1]), 0, "receives have no latency");
    expect(
        "chain device",
        d,
        &[
            (
                "tx_bytes",
                iters * (100 + 200 + 300 + 400 + 500 + 600 + 700 + 8 + 8 + 1000) + 4 * 64,
            ),
            ("rx_bytes", iters * (500 + 600 + 1000)),
            ("num_cq_errors", 0),
            ("cq_poll_count", polls(r, 0)),
            ("num_qp_untracked", 0),
            ("num_srq_recv_wqe", 0),
            ("num_wc_unknown_qp", 0),
        ],
    );
    assert_eq!(
        sizes(d),
        vec![
            (8, 2 * iters),
            (64, 4),
            (128, iters),
            (256, iters),
            (512, 3 * iters),
            (1024, 3 * iters)
        ]
    );
    // 2 polls per round (one completion on A, three on B), the last two writes' (one each), 2 empty.
    assert_eq!(polls(r, 0), 2 * iters + 4);
}

#[test]
fn chains_unsignalled_runs_and_refused_posts_direct_and_nccl_style() {
    let Some(b) = bins("chains_unsignalled_runs_and_refused_posts_direct_and_nccl_style") else {
        return;
    };
    let direct = run(&b.direct, &b, &["chain", "200"], &[], true);
    check_chain(&direct, 200, 1);
    let nccl = run(&b.nccl, &b, &["chain", "200"], &[], true);
    check_chain(&nccl, 200, 1);
    assert_eq!(
        counters(only(&direct)),
        counters(only(&nccl)),
        "dlopen + dlvsym counts what linking counts"
    );
    let sampled = run(
        &b.nccl,
        &b,
        &["chain", "200"],
        &[("RCCL_TELEMETRY_LATENCY_SAMPLE", "16")],
        true,
    );
    check_chain(&sampled, 200, 16);
    assert_eq!(
        only(&sampled)["devices"][0]["channels"][0]["queue_pairs"][0]["num_wqe_sampled"],
        13
    );
    // At N = 8 the last write is sampled only if the refused single WR gave its sampling
    // position back (position 200 of 0..=201).
    let sampled = run(
        &b.direct,
        &b,
        &["chain", "200"],
        &[("RCCL_TELEMETRY_LATENCY_SAMPLE", "8")],
        true,
    );
    check_chain(&sampled, 200, 8);
    assert_eq!(
        only(&sampled)["devices"][0]["channels"][0]["queue_pairs"][0]["num_wqe_sampled"],
        26
    );
}

#[test]
fn error_completions_on_a_shared_cq_and_unknown_qps() {
    let Some(b) = bins("error_completions_on_a_shared_cq_and_unknown_qps") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["errors"], &[], true);
        let d = dev(only(&r), 0);
        let q = qps(d);
        // 5 good signalled writes; then 4 WRs (3 unsignalled) of which the first fails and the
        // rest flush, with A's 2 receives; then a receive and an unsignalled write, flushed.
        expect(
            "errors A",
            &q[0],
            &[
                ("num_wqe_sent", 10),
                ("num_write_wqe", 10),
                ("num_recv_wqe", 3),
                ("num_wqe_rcvd", 13),
                ("num_wqe_completed", 13),
            ],
        );
        assert_eq!(hist_sum(&q[0]), 5, "only successful completions are timed");
        expect("errors B", &q[1], &[]);
        expect(
            "errors device",
            d,
            &[
                ("num_cq_errors", 8),
                ("num_wc_unknown_qp", 1),
                ("cq_poll_count", polls(&r, 0)),
                ("tx_bytes", 320),
                ("rx_bytes", 0),
            ],
        );
    }
}

#[test]
fn qp_ex_builders_and_cq_ex_polling() {
    let Some(b) = bins("qp_ex_builders_and_cq_ex_polling") else {
        return;
    };
    let n = 50;
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["ex", "50"], &[], true);
        let d = dev(only(&r), 0);
        let q = qps(d);
        // Per round: a session of 3 unsignalled writes of 64 B and a signalled send of 100+28 B;
        // an aborted session; B's receive; one completion per start/end on each CQ.
        expect(
            "ex A",
            &q[0],
            &[
                ("num_wqe_sent", 4 * n),
                ("num_write_wqe", 3 * n),
                ("num_send_wqe", n),
                ("num_wqe_rcvd", n),
                ("num_wqe_completed", n),
                ("num_wqe_retired_unsignalled", 3 * n),
            ],
        );
        expect(
            "ex B",
            &q[1],
            &[
                ("num_recv_wqe", n),
                ("num_wqe_rcvd", n),
                ("num_wqe_completed", n),
            ],
        );
        expect(
            "ex device",
            d,
            &[
                ("tx_bytes", n * 320),
                ("rx_bytes", n * 128),
                ("cq_poll_count", polls(&r, 0)),
            ],
        );
        assert_eq!(sizes(d), vec![(64, 3 * n), (128, n)]);
    }
}

#[test]
fn cq_ex_whose_provider_refuses_the_added_flags_is_left_alone() {
    let Some(b) = bins("cq_ex_whose_provider_refuses_the_added_flags_is_left_alone") else {
        return;
    };
    // The provider takes BYTE_LEN only (what the program asks for): the CQ is made with the
    // program's flags, stays the provider's own, and its completions are not counted.
    let r = run(
        &b.direct,
        &b,
        &["ex", "5"],
        &[("FAKEVERBS_WC_FLAGS_ALLOWED", "1")],
        true,
    );
    assert!(
        r.stderr.contains("ibv_cq_ex without qp_num"),
        "{}",
        r.stderr
    );
    let d = dev(only(&r), 0);
    let q = qps(d);
    expect(
        "refused A",
        &q[0],
        &[
            ("num_wqe_sent", 20),
            ("num_write_wqe", 15),
            ("num_send_wqe", 5),
        ],
    );
    expect("refused B", &q[1], &[("num_recv_wqe", 5)]);
    expect("refused device", d, &[("cq_poll_count", 0)]);
}

#[test]
fn many_threads_post_and_poll_the_same_qps() {
    let Some(b) = bins("many_threads_post_and_poll_the_same_qps") else {
        return;
    };
    let (iters, threads) = (5000u64, 4u64);
    let r = run(&b.direct, &b, &["threads", "5000", "4"], &[], true);
    let d = dev(only(&r), 0);
    for q in qps(d) {
        expect(
            "threads QP",
            q,
            &[
                ("num_wqe_sent", 4 * threads * iters),
                ("num_write_wqe", 4 * threads * iters),
                ("num_wqe_rcvd", threads * iters),
                ("num_wqe_completed", threads * iters),
                ("num_wqe_retired_unsignalled", 3 * threads * iters),
            ],
        );
    }
    expect(
        "threads device",
        d,
        &[
            ("tx_bytes", 2 * 4 * threads * iters * 16),
            ("cq_poll_count", polls(&r, 0)),
        ],
    );
}

#[test]
fn fork_child_is_not_counted_with_and_without_fork_init() {
    let Some(b) = bins("fork_child_is_not_counted_with_and_without_fork_init") else {
        return;
    };
    for mode in ["0", "1"] {
        let r = run(&b.direct, &b, &["fork", mode], &[], true);
        // The parent's file only: 2 chain rounds; the child's round on the parent's QP and
        // its own device are in no file.
        let f = only(&r);
        assert_eq!(f["process_id"], r.said["pid"]);
        assert_eq!(
            f["devices"].as_array().unwrap().len(),
            1,
            "fake1 was opened by the child only"
        );
        let q = qps(dev(f, 0));
        expect(
            "fork A",
            &q[0],
            &[
                ("num_wqe_sent", 20),
                ("num_write_wqe", 8),
                ("num_write_imm_wqe", 2),
                ("num_send_wqe", 4),
                ("num_read_wqe", 2),
                ("num_atomic_wqe", 4),
                ("num_wqe_rcvd", 2),
                ("num_wqe_completed", 2),
                ("num_wqe_retired_unsignalled", 18),
            ],
        );
        expect(
            "fork B",
            &q[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
    }
}

/// A fork while another thread holds the interposer's global lock (creating an ibv_qp_ex QP,
/// stopped on cue inside the provider): the child destroys and closes everything without
/// hanging (verbs_app fails on a hang); the parent's counts go on unaffected.
#[test]
fn fork_while_another_thread_holds_the_lock_leaves_a_child_that_can_close() {
    let Some(b) = bins("fork_while_another_thread_holds_the_lock_leaves_a_child_that_can_close")
    else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["fork-locked"], &[], true);
        let f = only(&r);
        assert_eq!(f["process_id"], r.said["pid"]);
        let q = qps(dev(f, 0));
        assert_eq!(q.len(), 3, "A, B and the QP created across the fork");
        expect(
            "fork-locked A",
            &q[0],
            &[
                ("num_wqe_sent", 20),
                ("num_write_wqe", 8),
                ("num_write_imm_wqe", 2),
                ("num_send_wqe", 4),
                ("num_read_wqe", 2),
                ("num_atomic_wqe", 4),
                ("num_wqe_rcvd", 2),
                ("num_wqe_completed", 2),
                ("num_wqe_retired_unsignalled", 18),
            ],
        );
        expect(
            "fork-locked B",
            &q[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
        expect("fork-locked C", &q[2], &[]);
    }
}

/// A poller stopped inside the last completion of QP X (the hooks build, on the fake's cue),
/// X destroyed, Y created deeper, the poller resumed: X's record is not Y's while the poller
/// is in it, so X's completion is X's and Y's counts are exact (recycling the record at once
/// left Y's head past its tail: one of Y's completions unmatched, or a retire loop spinning).
#[test]
fn a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it() {
    let Some(b) = bins("a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it") else {
        return;
    };
    let hooked = Bins {
        so: b.hooks.clone(),
        ..b
    };
    for app in [&hooked.direct, &hooked.nccl] {
        let r = run(app, &hooked, &["reuse", "10"], &[], true);
        let f = only(&r);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0]["qp_num"], r.said["x"]);
        assert_eq!(q[1]["qp_num"], r.said["y"]);
        expect(
            "reuse X",
            &q[0],
            &[
                ("num_wqe_sent", 1),
                ("num_write_wqe", 1),
                ("num_wqe_rcvd", 1),
                ("num_wqe_completed", 1),
            ],
        );
        expect(
            "reuse Y",
            &q[1],
            &[
                ("num_wqe_sent", 10),
                ("num_write_wqe", 10),
                ("num_wqe_rcvd", 10),
                ("num_wqe_completed", 10),
            ],
        );
        assert_eq!(d["num_wc_unknown_qp"], 0);
    }
}

/// A context closed by one thread (held inside the provider's close after the context is
/// freed) and a device opened by another that gets the same address: the new context's QPs
/// are device 1's from the start and survive the close (the stale entry took them before).
#[test]
fn a_context_reopened_at_a_closed_ones_address_is_its_own_device() {
    let Some(b) = bins("a_context_reopened_at_a_closed_ones_address_is_its_own_device") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["reopen-race"], &[], true);
        let f = only(&r);
        let one = [
            ("num_wqe_sent", 10),
            ("num_write_wqe", 4),
            ("num_write_imm_wqe", 1),
            ("num_send_wqe", 2),
            ("num_read_wqe", 1),
            ("num_atomic_wqe", 2),
            ("num_wqe_rcvd", 1),
            ("num_wqe_completed", 1),
            ("num_wqe_retired_unsignalled", 9),
        ];
        let q0 = qps(dev(f, 0));
        assert_eq!(q0.len(), 2, "device 0: the closed context's pair only");
        expect("closed A", &q0[0], &one);
        expect(
            "closed B",
            &q0[1],
            &[
                ("num_recv_wqe", 3),
                ("num_wqe_rcvd", 3),
                ("num_wqe_completed", 3),
            ],
        );
        let q1 = qps(dev(f, 1));
        assert_eq!(q1.len(), 2, "device 1: the reopened context's pair");
        let two: Vec<(&str, u64)> = one.iter().map(|(k, v)| (*k, 2 * v)).collect();
        expect("reopened A", &q1[0], &two);
        expect(
            "reopened B",
            &q1[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
    }
}

/// QPs created, posted to and destroyed at once while another thread polls their shared CQ:
/// each completion counts exactly once, on its QP (looked up before the destroy) or as of an
/// unknown QP (after), never on another QP; no hang, no crash. A stress of the limbo under
/// real threads (the recycling race is too narrow to hit here reliably: the deterministic
/// interleaving is a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it).
#[test]
fn qp_churn_under_a_progress_thread_counts_each_completion_once() {
    let Some(b) = bins("qp_churn_under_a_progress_thread_counts_each_completion_once") else {
        return;
    };
    let n = 15_000u64;
    let r = run(&b.direct, &b, &["churn", &n.to_string()], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    assert_eq!(q.len() as u64, n);
    let (mut rcvd, mut completed) = (0, 0);
    for (i, qp) in q.iter().enumerate() {
        let got = qp["num_wqe_rcvd"].as_u64().unwrap();
        assert!(got <= 1, "QP {i} got {got} completions (in {qp})");
        assert_eq!(qp["num_wqe_sent"], 1);
        assert_eq!(qp["num_wqe_completed"], qp["num_wqe_rcvd"], "QP {i}: {qp}");
        rcvd += got;
        completed += qp["num_wqe_completed"].as_u64().unwrap();
    }
    assert_eq!(rcvd, completed);
    assert_eq!(rcvd + d["num_wc_unknown_qp"].as_u64().unwrap(), n);
}

#[test]
fn devices_closed_and_reopened_keep_their_list_order_ids() {
    let Some(b) = bins("devices_closed_and_reopened_keep_their_list_order_ids") else {
        return;
    };
    let r = run(&b.nccl, &b, &["reopen"], &[], true);
    let f = only(&r);
    let d0 = dev(f, 0);
    let d1 = dev(f, 1);
    assert_eq!(d0["roce_device"], "fake0");
    assert_eq!(d1["roce_device"], "fake1");
    assert_eq!(qps(d0).len(), 2);
    // fake1 opened twice: a new slot per QP of the second opening.
    let q1 = qps(d1);
    assert_eq!(q1.len(), 4);
    for (i, rounds) in [(0, 1), (2, 2)] {
        expect(
            "reopen A",
            &q1[i],
            &[
                ("num_wqe_sent", 10 * rounds),
                ("num_write_wqe", 4 * rounds),
                ("num_write_imm_wqe", rounds),
                ("num_send_wqe", 2 * rounds),
                ("num_read_wqe", rounds),
                ("num_atomic_wqe", 2 * rounds),
                ("num_wqe_rcvd", rounds),
                ("num_wqe_completed", rounds),
                ("num_wqe_retired_unsignalled", 9 * rounds),
            ],
        );
        expect(
            "reopen B",
            &q1[i + 1],
            &[
                ("num_recv_wqe", 3 * rounds),
                ("num_wqe_rcvd", 3 * rounds),
                ("num_wqe_completed", 3 * rounds),
            ],
        );
    }
    expect(
        "reopen fake1",
        d1,
        &[("cq_poll_count", polls(&r, 1)), ("rx_bytes", 3 * 2100)],
    );
}

#[test]
fn hundred_thousand_qps_created_and_destroyed_stay_bounded() {
    let Some(b) = bins("hundred_thousand_qps_created_and_destroyed_stay_bounded") else {
        return;
    };
    let n = 100_000u64;
    let r = run(&b.direct, &b, &["qploop", "100000"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    // 16384 slots per device (the pair's 2 QPs take the first two), the rest untracked but
    // still counted at device level.
    assert_eq!(q.len(), 16384);
    expect(
        "qploop device",
        d,
        &[
            ("num_qp_untracked", n + 2 - 16384),
            ("tx_bytes", 8 * n),
            ("cq_poll_count", polls(&r, 0)),
        ],
    );
    assert_eq!(sizes(d), vec![(8, n)]);
    for (i, qp) in q.iter().enumerate().skip(2) {
        expect(
            &format!("qploop QP {i}"),
            qp,
            &[
                ("num_wqe_sent", 1),
                ("num_write_wqe", 1),
                ("num_wqe_rcvd", 1),
                ("num_wqe_completed", 1),
            ],
        );
    }
    let (mid, end) = (
        r.said["rss_mid_kib"].as_i64().unwrap(),
        r.said["rss_end_kib"].as_i64().unwrap(),
    );
    assert!(
        mid > 0 && end - mid < 4096,
        "RSS grew from {mid} KiB (QP 20000) to {end} KiB (QP 100000)"
    );
    // The fake spreads QP numbers over the 24-bit space (each QP in another 256-number leaf):
    // the lookup's leaves follow the live QPs (lookup pages kept for every number ever used
    // reached ~140 MiB here). What remains is the 16384 slots (5 MiB) and the engine.
    let start = r.said["rss_start_kib"].as_i64().unwrap();
    assert!(
        end - start < 24 * 1024,
        "RSS grew from {start} KiB (2 QPs) to {end} KiB (QP 100000)"
    );
}

#[test]
fn srq_receives_are_counted_per_device_and_completed_per_qp() {
    let Some(b) = bins("srq_receives_are_counted_per_device_and_completed_per_qp") else {
        return;
    };
    let r = run(&b.nccl, &b, &["srq", "100"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    expect(
        "srq A",
        &q[0],
        &[
            ("num_wqe_sent", 100),
            ("num_send_wqe", 100),
            ("num_wqe_rcvd", 100),
            ("num_wqe_completed", 100),
        ],
    );
    expect(
        "srq B",
        &q[1],
        &[("num_wqe_rcvd", 100), ("num_wqe_completed", 100)],
    );
    expect(
        "srq device",
        d,
        &[
            ("num_srq_recv_wqe", 100),
            ("rx_bytes", 25600),
            ("tx_bytes", 25600),
        ],
    );
}

/// Two QPs sharing an SRQ take its receives interleaved: each QP's receive completions are
/// counted and completed on it whatever their order (never matched by posting order).
#[test]
fn srq_receives_taken_out_of_order_by_two_qps_complete_on_each() {
    let Some(b) = bins("srq_receives_taken_out_of_order_by_two_qps_complete_on_each") else {
        return;
    };
    let r = run(&b.direct, &b, &["srq-shared", "99"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    assert_eq!(q.len(), 4);
    expect(
        "srq A1",
        &q[0],
        &[
            ("num_wqe_sent", 66),
            ("num_send_wqe", 66),
            ("num_wqe_rcvd", 66),
            ("num_wqe_completed", 66),
        ],
    );
    expect(
        "srq A2",
        &q[1],
        &[
            ("num_wqe_sent", 33),
            ("num_send_wqe", 33),
            ("num_wqe_rcvd", 33),
            ("num_wqe_completed", 33),
        ],
    );
    expect(
        "srq B1",
        &q[2],
        &[("num_wqe_rcvd", 66), ("num_wqe_completed", 66)],
    );
    expect(
        "srq B2",
        &q[3],
        &[("num_wqe_rcvd", 33), ("num_wqe_completed", 33)],
    );
    expect(
        "srq device",
        d,
        &[
            ("num_srq_recv_wqe", 99),
            ("rx_bytes", 99 * 128),
            ("tx_bytes", 99 * 128),
            ("num_wc_unknown_qp", 0),
        ],
    );
}

#[test]
fn a_full_send_record_is_counted_not_mismatched() {
    let Some(b) = bins("a_full_send_record_is_counted_not_mismatched") else {
        return;
    };
    // The provider reports a send queue of 1 (a record of 64) and takes 101 WRs.
    let r = run(
        &b.direct,
        &b,
        &["full"],
        &[("FAKEVERBS_SEND_WR_CAP", "1")],
        true,
    );
    let q = qps(dev(only(&r), 0));
    expect(
        "full A",
        &q[0],
        &[
            ("num_wqe_sent", 102),
            ("num_write_wqe", 102),
            ("num_wqe_track_full", 37),
            ("num_wqe_retired_unsignalled", 100),
            ("num_wqe_rcvd", 2),
            ("num_wqe_completed", 1),
        ],
    );
}

#[test]
fn disabled_leaves_every_table_alone_and_writes_nothing() {
    let Some(b) = bins("disabled_leaves_every_table_alone_and_writes_nothing") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["disabled"], &[], false);
        assert_eq!(
            r.said["pristine"], 1,
            "ops, verbs_context, cq_ex and qp_ex are the provider's"
        );
        assert!(r.files.is_empty());
        let r = run(app, &b, &["disabled"], &[], true);
        assert_eq!(
            r.said["pristine"], 0,
            "enabled, the tables are wrapped (so the check above can fail)"
        );
        assert_eq!(r.files.len(), 1);
    }
}

#[test]
fn a_static_program_is_not_caught() {
    let Some(b) = bins("a_static_program_is_not_caught") else {
        return;
    };
    // LD_PRELOAD does not apply to a statically linked program: it runs as without it.
    let r = run(&b.static_app, &b, &["chain", "10"], &[], true);
    assert_eq!(r.said["polls"][0], 24); // 2 * 10 + 4, as check_chain counts them
    assert_eq!(r.said["pristine"], 1, "nothing wrapped");
    assert!(r.files.is_empty());
}

#[test]
fn dlsym_rtld_next_and_default_stay_relative_to_the_caller() {
    let Some(b) = bins("dlsym_rtld_next_and_default_stay_relative_to_the_caller") else {
        return;
    };
    for enable in [true, false] {
        for app in [&b.direct, &b.nccl] {
            let r = run(app, &b, &["dlnext"], &[], enable);
            assert_eq!(r.said["next_is_default"], 1, "{}", r.said);
            assert_eq!(
                r.said["next_from"], "librccl_telemetry_preload.so",
                "{}",
                r.said
            );
        }
    }
}

/// The identity and peer keys of a file's QPs, per device (what both builds must agree on).
fn peer_keys(f: &Value) -> Value {
    let mut out = vec![];
    for d in f["devices"].as_array().unwrap() {
        let mut q = vec![];
        for qp in qps(d) {
            q.push(serde_json::json!({
                "qp_num": qp["qp_num"], "qp_type": qp["qp_type"], "peer": qp["peer"], "local_gid": qp.get("local_gid"),
            }));
        }
        out.push(serde_json::json!({
            "device_id": d["device_id"], "port": d["port"], "gid_index": d["gid_index"], "gid": d["gid"],
            "gid_ip": d["gid_ip"], "lid": d["lid"], "qps": q,
        }));
    }
    Value::Array(out)
}

fn peer(qp_num: u64, gid: Option<&str>, gid_ip: Option<&str>, lid: Option<u64>) -> Value {
    serde_json::json!({"qp_num": qp_num, "gid": gid, "gid_ip": gid_ip, "lid": lid})
}

/// verbs_app's peers scenario (see sc_peers there): what the program passed to ibv_modify_qp
/// is what the file says, per QP and per device.
fn check_peers(r: &Run) {
    let f = only(r);
    assert_eq!(f["version"], 3);
    let d0 = dev(f, 0);
    let q = qps(d0);
    assert_eq!(q.len(), 6);
    let said: Vec<u64> = r.said["qpn0"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    for (i, qp) in q.iter().enumerate() {
        assert_eq!(qp["qp_num"], said[i], "QP {i}: its own number");
    }
    let ll = |last: u8| format!("fe80:0000:0000:0000:5054:00ff:fe12:34{last:02x}");
    let ll_ip = |last: u8| format!("fe80::5054:ff:fe12:34{last:02x}");
    // The device: port 1, GID index 0 (the first QP told, A's).
    assert_eq!(d0["port"], 1);
    assert_eq!(d0["gid_index"], 0);
    assert_eq!(d0["gid"], ll(1));
    assert_eq!(d0["gid_ip"], ll_ip(1));
    assert!(d0["lid"].is_null(), "RoCE: no LID");
    // A: re-connected; the second RTR's peer replaces the first's. Its local GID is the device's.
    assert_eq!(q[0]["qp_type"], "rc");
    assert_eq!(
        q[0]["peer"],
        peer(0x2005, Some(&ll(5)), Some(&ll_ip(5)), None)
    );
    assert!(
        q[0].get("local_gid").is_none(),
        "same GID as the device: {}",
        q[0]
    );
    // B: IPv4-mapped GIDs on both ends, the AV naming no port (INIT's is used); no RTS.
    assert_eq!(q[1]["qp_type"], "rc");
    assert_eq!(
        q[1]["peer"],
        peer(
            0x2002,
            Some("0000:0000:0000:0000:0000:ffff:c0a8:0a02"),
            Some("192.168.10.2"),
            None
        )
    );
    assert_eq!(q[1]["local_gid"], "0000:0000:0000:0000:0000:ffff:c0a8:0a01");
    // C: created with ibv_create_qp_ex, IPv6 GIDs.
    assert_eq!(q[2]["qp_type"], "rc");
    assert_eq!(
        q[2]["peer"],
        peer(
            0x2003,
            Some("fd00:0000:0000:0001:0000:0000:0000:0002"),
            Some("fd00:0:0:1::2"),
            None
        )
    );
    assert_eq!(q[2]["local_gid"], "fd00:0000:0000:0001:0000:0000:0000:0001");
    // D: UD has no single peer.
    assert_eq!(q[3]["qp_type"], "ud");
    assert!(q[3]["peer"].is_null(), "{}", q[3]);
    // E: every RTR failed (the provider's ETIMEDOUT and EINVAL reached the program unchanged:
    // verbs_app checks): nothing recorded.
    assert_eq!(q[4]["qp_type"], "rc");
    assert!(q[4]["peer"].is_null(), "{}", q[4]);
    // F: UC.
    assert_eq!(q[5]["qp_type"], "uc");
    assert_eq!(
        q[5]["peer"],
        peer(0x2004, Some(&ll(4)), Some(&ll_ip(4)), None)
    );
    // fake1: InfiniBand without a GRH: LIDs only.
    let d1 = dev(f, 1);
    let q1 = qps(d1);
    assert_eq!(q1.len(), 1);
    assert_eq!(q1[0]["qp_num"], r.said["qpn1"][0]);
    assert_eq!(q1[0]["qp_type"], "rc");
    assert_eq!(q1[0]["peer"], peer(0x3001, None, None, Some(0x11)));
    assert_eq!(d1["port"], 1);
    assert_eq!(d1["lid"], 7);
    assert!(
        d1["gid"].is_null() && d1["gid_ip"].is_null() && d1["gid_index"].is_null(),
        "{d1}"
    );
    // The data path still counts as before: A's 5 signalled writes.
    expect(
        "peers A",
        &q[0],
        &[
            ("num_wqe_sent", 5),
            ("num_write_wqe", 5),
            ("num_wqe_rcvd", 5),
            ("num_wqe_completed", 5),
        ],
    );
    // Per device, one entry per remote NIC its QPs are connected to now (A's first peer may
    // stay listed with no QP), with the completions timed towards it: A's 5, to its second.
    let told = |d: &Value| -> Vec<(Value, Value, u64, u64)> {
        d["peers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["num_qps"].as_u64().unwrap() > 0)
            .map(|p| {
                let n = p["wqe_completion_log_histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b[2].as_u64().unwrap())
                    .sum();
                (
                    p["gid"].clone(),
                    p["lid"].clone(),
                    p["num_qps"].as_u64().unwrap(),
                    n,
                )
            })
            .collect()
    };
    let mut p0 = told(d0);
    p0.sort_by_key(|p| p.0.to_string());
    let g = |s: &str| Value::String(s.to_string());
    assert_eq!(
        p0,
        vec![
            (
                g("0000:0000:0000:0000:0000:ffff:c0a8:0a02"),
                Value::Null,
                1,
                0
            ),
            (
                g("fd00:0000:0000:0001:0000:0000:0000:0002"),
                Value::Null,
                1,
                0
            ),
            (g(&ll(4)), Value::Null, 1, 0),
            (g(&ll(5)), Value::Null, 1, 5),
        ]
    );
    assert_eq!(told(d1), vec![(Value::Null, Value::from(0x11), 1, 0)]);
}

#[test]
fn peers_from_modify_qp_direct_and_nccl_style() {
    let Some(b) = bins("peers_from_modify_qp_direct_and_nccl_style") else {
        return;
    };
    let direct = run(&b.direct, &b, &["peers"], &[], true);
    check_peers(&direct);
    assert!(
        direct.said["queries"].as_u64().unwrap() > 0,
        "the interposer read the GID table and the ports"
    );
    let nccl = run(&b.nccl, &b, &["peers"], &[], true);
    check_peers(&nccl);
    assert_eq!(
        peer_keys(only(&direct)),
        peer_keys(only(&nccl)),
        "dlopen + dlvsym records what linking records"
    );
}

#[test]
fn peers_telemetry_off_modify_qp_is_a_pure_call_through() {
    let Some(b) = bins("peers_telemetry_off_modify_qp_is_a_pure_call_through") else {
        return;
    };
    for (app, off_from) in [
        (&b.direct, "librccl_telemetry_preload.so"),
        (&b.nccl, "libibverbs.so.1"),
    ] {
        // verbs_app checks every modify's return code, attr, errno and QP state itself.
        let r = run(app, &b, &["peers"], &[], false);
        assert!(r.files.is_empty());
        assert_eq!(
            r.said["queries"], 0,
            "off: ibv_modify_qp reads nothing of its own"
        );
        // Off, dlvsym hands out libibverbs' own; a linked program's reference is bound to the
        // preload's, which calls straight through.
        assert_eq!(r.said["modify_from"], off_from, "{}", r.said);
        let on = run(app, &b, &["peers"], &[], true);
        assert!(
            on.said["queries"].as_u64().unwrap() > 0,
            "on, it does (so the check above can fail)"
        );
        assert_eq!(
            on.said["modify_from"], "librccl_telemetry_preload.so",
            "{}",
            on.said
        );
        assert_eq!(r.said["qpn0"], on.said["qpn0"]);
    }
}

#[test]
fn peers_wide_each_remote_nic_keeps_its_histogram_past_the_hook_cap() {
    let Some(b) = bins("peers_wide_each_remote_nic_keeps_its_histogram_past_the_hook_cap") else {
        return;
    };
    let n = 12u64;
    assert!(
        n as usize > rccl_telemetry::peers::PEER_HISTS_PER_CHANNEL,
        "the scenario must go past the hooks' cap"
    );
    let r = run(&b.direct, &b, &["peers-wide", &n.to_string()], &[], true);
    let d0 = dev(only(&r), 0);
    // One entry per remote NIC, each with its own QP and exactly its QP's completions (QP i
    // completes i + 1 signalled writes, every one timed at the default N = 1).
    let mut got: Vec<(String, u64, u64)> = d0["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let hist: u64 = p["wqe_completion_log_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[2].as_u64().unwrap())
                .sum();
            assert!(
                p.get("num_qps_shared").is_none(),
                "no NIC shares the 'other peers' histogram: {p}"
            );
            (
                p["gid"].as_str().unwrap().to_owned(),
                p["num_qps"].as_u64().unwrap(),
                hist,
            )
        })
        .collect();
    got.sort();
    let want: Vec<(String, u64, u64)> = (0..n)
        .map(|i| {
            (
                format!("fe80:0000:0000:0000:5054:00ff:fe12:34{:02x}", 0x10 + i),
                1,
                i + 1,
            )
        })
        .collect();
    assert_eq!(got, want);
}

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
        assert_eq!(f["version"], 3);
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
