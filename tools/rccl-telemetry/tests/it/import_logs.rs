//! `import`: NCCL/RCCL debug logs into rank files every command reads. The logs are those
//! `generate --as-nccl-log` writes and a short excerpt written by hand from NCCL's and RCCL's
//! format strings (tests/fixtures/nccl_logs/excerpt.log: two ranks interleaved in one file,
//! the three forms of the error completion, the monitor's three lines, a malformed and a cut
//! line).

use crate::common::{run, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn excerpt() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl_logs/excerpt.log")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `generate --as-nccl-log` into a fresh directory.
fn logs(args: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut a = vec!["generate", "--as-nccl-log", "--seed", "3"];
    a.extend_from_slice(args);
    a.push(s(d.path()));
    let o = run(&a);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    d
}

fn log_files(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// Imports `inputs` into a fresh directory; returns it and the JSON report.
fn import(inputs: &[PathBuf]) -> (tempfile::TempDir, Value) {
    let out = tempfile::tempdir().unwrap();
    let mut a = vec!["import", "--json", "-o", s(out.path())];
    a.extend(inputs.iter().map(|p| s(p)));
    let o = run(&a);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (out, serde_json::from_str(&stdout(&o)).unwrap())
}

fn read(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

fn qp<'a>(f: &'a Value, dev: &str, qpn: u64) -> &'a Value {
    f["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["roce_device"] == dev)
        .flat_map(|d| d["channels"][0]["queue_pairs"].as_array().unwrap())
        .find(|q| q["qp_num"] == qpn)
        .unwrap_or_else(|| panic!("no QP {qpn} on {dev}"))
}

#[test]
fn the_excerpt_reads_every_kind_and_names_the_malformed_line() {
    let (out, r) = import(&[excerpt()]);
    let known = &r["known"];
    for (k, n) in [
        ("using", 2),
        ("comm_init", 4),
        ("wqe_slow", 1),
        ("wqe_stall", 2),
        ("cqe_error", 1),
        ("completion_error", 2),
        ("wqe_summary", 4),
    ] {
        assert_eq!(known[k], n, "{k}: {r}");
    }
    assert_eq!(r["lines"], 22);
    assert_eq!(r["skipped"], 5, "{r}");
    assert_eq!(r["malformed"]["wqe_summary"], 1);
    let bad = r["malformed_lines"][0].as_str().unwrap();
    assert!(
        bad.ends_with("excerpt.log:24: wqe_summary: n=\"51x0\" is not a number"),
        "{bad}"
    );
    assert_eq!(r["oob_hosts"]["10.10.0.2<39011>"], "nodeB");
    assert_eq!(r["qps_with_peer"], 4, "{r}");
    assert_eq!(r["written"].as_array().unwrap().len(), 2);

    let a = read(out.path(), "rccl_telemetry_nodeA_0_2001.json");
    assert_eq!(a["source"], "nccl_log");
    assert_eq!(a["rank"], 0);
    assert_eq!(a["communicators"][0]["hash"], "0x9e0a6c1f2b3d4e5f");
    assert_eq!(a["slow_threshold_ns"], 100_000);
    let d = &a["devices"][1];
    assert_eq!(d["roce_device"], "mlx5_1");
    assert_eq!(d["num_channels"], Value::Null, "no channel split in a log");
    assert_eq!(d["channels"][0]["id"], Value::Null);
    assert_eq!(d["gid_ip"], "192.168.11.1");
    assert!(
        d["hw_counters"]
            .as_object()
            .unwrap()
            .values()
            .all(|v| v == -1 || v.as_array().is_some_and(|a| a.iter().all(|x| x == -1))),
        "hardware counters absent (-1), not zero"
    );
    // The old form of the error names no QP: the CQE line before it does.
    let q = qp(&a, "mlx5_1", 1123);
    assert_eq!(q["cq_errors"]["RETRY_EXC_ERR"], 1);
    assert_eq!(q["first_cq_error"]["vendor_err"], 129);
    assert_eq!(q["first_cq_error"]["opcode"], "RDMA_WRITE");
    assert_eq!(
        q["first_cq_error"]["time"],
        "2026-12-05T03:14:07.000000000Z"
    );
    assert_eq!(q["qp_state"], "ERR");
    assert_eq!(q["peer"]["qp_num"], 2210);
    assert_eq!(q["num_wqe_completed"], 5120);
    assert_eq!(q["num_wqe_slow"], 7);
    assert_eq!(q["wqe_completion_ns_p99"], 120_500);
    assert_eq!(q["wqe_completion_ns_max"], 2_150_000);
    // The receive QP's peer is implied: the one send QP of nodeB that names it.
    assert_eq!(qp(&a, "mlx5_1", 1127)["peer"]["qp_num"], 2214);

    let b = read(out.path(), "rccl_telemetry_nodeB_0_3001.json");
    let q = qp(&b, "mlx5_1", 2214);
    assert_eq!(q["cq_errors"]["RETRY_EXC_ERR"], 1);
    assert_eq!(q["stalled"], true);
    assert_eq!(q["num_wqe_outstanding"], 4);
    assert_eq!(q["longest_stall_ms"], 2250);
    assert_eq!(
        q["num_stalls"], 1,
        "two lines of one stuck WR are one episode"
    );
    assert_eq!(b["stall_ms"], 1);
}

/// Every command reads the imported files, and says what a log cannot give.
#[test]
fn every_command_reads_imported_files() {
    let d = logs(&[
        "--ranks",
        "4",
        "--ranks-per-host",
        "2",
        "--plant",
        "cq_errors",
    ]);
    let (out, _) = import(&log_files(d.path()));
    let dir = s(out.path());
    let pq = tempfile::tempdir().unwrap();
    let html = out.path().join("r.html");
    for args in [
        vec!["summary", dir],
        vec!["summary", "--json", dir],
        vec!["links", dir],
        vec!["outliers", dir],
        vec!["stalls", dir],
        vec!["export", "--format", "csv", dir],
        vec!["export", "--format", "ndjson", dir],
        vec!["export", "--format", "prometheus", dir],
        vec!["export", "--format", "parquet", "-o", s(pq.path()), dir],
        vec!["report", "-o", s(&html), dir],
    ] {
        let o = run(&args);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&o)
        );
        let e = stderr(&o);
        assert!(
            e.contains("source nccl_log"),
            "{args:?} says nothing of the import: {e}"
        );
        assert!(!e.contains("skipped"), "{args:?}: {e}");
    }
    // What a log cannot give is said beside the verdict too, not only on stderr.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("data-caveat=\"imported_logs\""),
        "the report's caveats"
    );
    let o = run(&["outliers", "--json", dir]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["caveats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "imported_logs"),
        "{}",
        v["caveats"]
    );
    assert!(stdout(&run(&["outliers", dir])).contains("From logs: imported from NCCL/RCCL"));
    // The schema knows every key an import writes: the files check clean.
    let o = run(&["check", "--json", dir]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["violations"], serde_json::json!([]), "{v}");
}

/// Issue 47 item 5: a 2-host log with RETRY_EXC_ERR completions on both ends.
#[test]
fn retry_exc_on_both_ends_names_both_hosts_their_nics_and_the_status() {
    let d = logs(&[
        "--ranks",
        "2",
        "--ranks-per-host",
        "1",
        "--plant",
        "cq_errors",
    ]);
    let (out, _) = import(&log_files(d.path()));
    let o = run(&["outliers", "--json", s(out.path())]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let findings = v["findings"].as_array().unwrap();
    for host in ["gpu-node-000", "gpu-node-001"] {
        let f = findings
            .iter()
            .find(|f| f["kind"] == "cq_errors" && f["host"] == host)
            .unwrap_or_else(|| panic!("no cq_errors finding on {host}: {v}"));
        let ev = f["evidence"].as_str().unwrap();
        assert!(ev.contains("RETRY_EXC_ERR"), "{ev}");
        assert_eq!(f["roce_device"], "mlx5_0", "{f}");
    }
    let root = findings
        .iter()
        .find(|f| f["kind"] == "hang_root")
        .expect("a hang root");
    let ev = root["evidence"].as_str().unwrap();
    for w in ["gpu-node-000", "gpu-node-001", "RETRY_EXC_ERR"] {
        assert!(ev.contains(w), "{w} not in {ev}");
    }
}

/// Issue 47 item 5: eight ranks whose monitor lines show one slow link: that link, nothing else.
#[test]
fn one_slow_link_of_eight_ranks_is_named_alone() {
    let d = logs(&[
        "--ranks",
        "8",
        "--ranks-per-host",
        "1",
        "--plant",
        "slow_link",
    ]);
    let planted: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("planted.json")).unwrap())
            .unwrap();
    assert_eq!(planted[0]["peer"], "gpu-node-007:mlx5_0");
    let (out, _) = import(&log_files(d.path()));
    let o = run(&["outliers", "--json", s(out.path())]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["kind"] == "slow_link"),
        "only the link: {findings:?}"
    );
    let ev = findings[0]["evidence"].as_str().unwrap();
    assert!(
        ev.starts_with("gpu-node-000:mlx5_0 -> gpu-node-007:mlx5_0")
            || ev.starts_with("gpu-node-007:mlx5_0 -> gpu-node-000:mlx5_0"),
        "{ev}"
    );
}

/// All ranks interleaved in one file give the files one log per rank gives.
#[test]
fn interleaved_logs_give_the_same_files() {
    let d = logs(&[
        "--ranks",
        "4",
        "--ranks-per-host",
        "2",
        "--plant",
        "cq_errors",
    ]);
    let files = log_files(d.path());
    let (per_rank, _) = import(&files);
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let mut lines: Vec<std::str::Lines> = texts.iter().map(|t| t.lines()).collect();
    let mut one = String::new();
    loop {
        let mut any = false;
        for l in lines.iter_mut() {
            if let Some(x) = l.next() {
                one.push_str(x);
                one.push('\n');
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let joined = d.path().join("all.txt");
    std::fs::write(&joined, one).unwrap();
    let (interleaved, r) = import(&[joined]);
    assert_eq!(r["written"].as_array().unwrap().len(), 4);
    for f in std::fs::read_dir(per_rank.path()).unwrap() {
        let name = f.unwrap().file_name();
        let a = std::fs::read_to_string(per_rank.path().join(&name)).unwrap();
        let b = std::fs::read_to_string(interleaved.path().join(&name)).unwrap();
        assert_eq!(a, b, "{name:?}");
    }
}

/// Whatever a log holds (lines cut, bytes changed), every file `import` writes loads.
#[test]
fn damaged_logs_never_give_a_file_the_readers_reject() {
    let d = logs(&[
        "--ranks",
        "4",
        "--ranks-per-host",
        "2",
        "--plant",
        "cq_errors,slow_link",
    ]);
    let text = std::fs::read(&log_files(d.path())[0]).unwrap();
    let mut rng = fastrand::Rng::with_seed(47);
    for round in 0..6 {
        let mut t = text.clone();
        for _ in 0..200 {
            let i = rng.usize(0..t.len());
            match rng.u8(0..3) {
                0 => t[i] = b"=| <>:0x9\n"[rng.usize(0..10)],
                1 => {
                    t.remove(i);
                }
                _ => t.insert(i, b'\n'),
            }
        }
        let p = d.path().join(format!("damaged{round}.txt"));
        std::fs::write(&p, &t).unwrap();
        let out = tempfile::tempdir().unwrap();
        let o = run(&["import", "-o", s(out.path()), s(&p)]);
        if o.status.code() != Some(0) {
            continue;
        }
        let run = rccl_telemetry_tool::load::load_run(&[out.path().to_path_buf()]);
        assert!(run.bad.is_empty(), "round {round}: {:?}", run.bad);
        let o = crate::common::run(&["outliers", s(out.path())]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    }
}
