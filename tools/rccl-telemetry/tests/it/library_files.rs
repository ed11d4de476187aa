//! Files written by the library itself, not by the generator, go through every command:
//! (1) child processes of this test binary link the library and drive its C ABI the way the
//! IB-CAST transport does, one rank each; (2) when `make` has built the C simulator
//! (build/ibcast_sim, as `make demo` and `make test` do), its files are checked too.

use crate::common::*;
use rccl_telemetry::capi::*;
use serde_json::Value;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHILD_RANK: &str = "RCCL_TELEMETRY_TOOL_TEST_RANK";
const RANKS: usize = 8;
const REQUESTS: u64 = 300;
const CHANNELS: i32 = 2;
const CQ_ERROR_RANK: usize = 3;
const SKEW_RANK: usize = 5;

fn request_bytes(rank: usize) -> u64 {
    if rank == SKEW_RANK {
        8 * 65536
    } else {
        65536
    }
}

/// One rank: registers two NICs, drives one over two channels (two data QPs and a CTS QP
/// each), then flushes. Run only as a child (the parent sets CHILD_RANK).
#[test]
#[ignore = "a helper: library_files_pass_check_and_every_command runs it as a child process"]
fn child_rank() {
    let rank: usize = std::env::var(CHILD_RANK)
        .expect("run by the parent test")
        .parse()
        .expect("rank");
    assert_eq!(rcclTelemetryInit(), 0);
    assert_eq!(
        rcclTelemetryOn(),
        1,
        "RCCL_TELEMETRY_ENABLE=1 is set by the parent"
    );
    let transport = CString::new("IB-CAST").unwrap();
    for dev in 0..2 {
        let name = CString::new(format!("mlx5_{dev}")).unwrap();
        assert_eq!(
            unsafe { rcclTelemetryRegisterDevice(dev, name.as_ptr(), transport.as_ptr()) },
            dev
        );
    }
    let dev = 0;
    for ch in 0..CHANNELS {
        let mut n = 0;
        let first = unsafe { rcclTelemetrySetupChannel(dev, ch, 3, &mut n) };
        assert!(first >= 0 && n == 3, "SetupChannel gave {first} / {n}");
        for q in 0..3 {
            rcclTelemetrySetQpRole(dev, ch, first + q, (q < 2) as i32);
        }
        let qps: Vec<_> = (0..3)
            .map(|q| rcclTelemetryResolveQp(dev, ch, first + q))
            .collect();
        assert!(qps.iter().all(|q| !q.is_null()));
        let chan = rcclTelemetryResolveChannel(dev, ch);
        assert!(!chan.is_null());
        let size = request_bytes(rank);
        for r in 0..REQUESTS {
            let data = qps[(r % 2) as usize];
            let cts = qps[2];
            let signalled = (r % 4 == 0) as i32;
            unsafe {
                rcclTelemetryQpRecvPosted(data);
                rcclTelemetryQpCtsSent(cts, signalled);
                for (i, qp) in qps[..2].iter().enumerate() {
                    rcclTelemetryWqeSize(dev, size / 2);
                    let ts = rcclTelemetryPostTs(*qp);
                    rcclTelemetryQpSendPosted(*qp, (i == 1) as i32);
                    rcclTelemetryQpWqeComplete(*qp, ts);
                }
                rcclTelemetryBytes(dev, 1, size);
                rcclTelemetryQpWqeComplete(data, 0);
                rcclTelemetryBytes(dev, 0, size);
                if signalled == 1 {
                    rcclTelemetryQpWqeComplete(cts, 0);
                }
                rcclTelemetryChRequestCompleted(chan);
            }
        }
        rcclTelemetryAddCqPolls(dev, REQUESTS * 3);
    }
    if rank == CQ_ERROR_RANK {
        for _ in 0..9 {
            rcclTelemetryCqError(dev);
        }
    }
    assert_eq!(rcclTelemetryFlush(), 0);
}

pub(crate) fn spawn_ranks(dir: &Path) -> Vec<u32> {
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..RANKS)
        .map(|rank| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "library_files::child_rank",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_RANK, rank.to_string())
                .env("RCCL_TELEMETRY_ENABLE", "1")
                .env("RCCL_TELEMETRY_OUTPUT_DIR", dir)
                .env("RCCL_TELEMETRY_LATENCY_SAMPLE", "4")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a rank")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let pid = c.id();
            let out = c.wait_with_output().expect("rank");
            assert!(
                out.status.success(),
                "rank {pid} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            pid
        })
        .collect()
}

#[test]
fn library_files_pass_check_and_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pids = spawn_ranks(dir.path());
    let d = dir.path().to_str().unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), RANKS, "one file per rank: {files:?}");

    // The library's own files satisfy the committed schema and every invariant.
    let out = run(&["check", d]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "library output fails check:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");

    let s: Value =
        serde_json::from_slice(&run(&["summary", "--json", d]).stdout).expect("summary json");
    assert_eq!(s["files"], RANKS);
    assert_eq!(
        s["devices_used"], RANKS,
        "device 1 is registered but never driven"
    );
    assert_eq!(s["devices_registered"], 2 * RANKS);
    let per_rank = |rank| REQUESTS * CHANNELS as u64 * request_bytes(rank);
    let tx: u64 = (0..RANKS).map(per_rank).sum();
    assert_eq!(s["tx_bytes"].as_u64(), Some(tx));
    assert_eq!(s["rx_bytes"].as_u64(), Some(tx));
    assert_eq!(
        s["num_wqe_sent"].as_u64(),
        Some(RANKS as u64 * CHANNELS as u64 * REQUESTS * 2)
    );
    assert_eq!(
        s["num_wqe_completed"].as_u64(),
        Some(RANKS as u64 * CHANNELS as u64 * REQUESTS * 2)
    );
    assert_eq!(s["num_cq_errors"].as_u64(), Some(9));
    assert_eq!(s["latency_sample_intervals"], serde_json::json!([4]));
    // One completion in 4 is sampled: the histograms hold a quarter of the completions.
    let sampled = s["latency"][0]["latency"]["samples"]
        .as_u64()
        .expect("samples");
    assert_eq!(sampled, RANKS as u64 * CHANNELS as u64 * REQUESTS * 2 / 4);

    // The planted CQ errors and byte skew are found on the right processes (latency is real
    // time here, so nothing is asserted about it).
    let o: Value =
        serde_json::from_slice(&run(&["outliers", "--json", d]).stdout).expect("outliers json");
    let findings = o["findings"].as_array().expect("findings");
    let found = |kind: &str, pid: u32| {
        findings
            .iter()
            .any(|f| f["kind"] == kind && f["pid"] == pid)
    };
    assert!(found("cq_errors", pids[CQ_ERROR_RANK]), "{findings:#?}");
    assert!(found("tx_byte_skew", pids[SKEW_RANK]), "{findings:#?}");
    for f in findings
        .iter()
        .filter(|f| f["kind"] == "cq_errors" || f["kind"].as_str().unwrap().ends_with("byte_skew"))
    {
        assert!(
            f["pid"] == pids[CQ_ERROR_RANK] || f["pid"] == pids[SKEW_RANK],
            "unexpected {f:#}"
        );
    }

    // Exports and the report work on them too.
    let prom = stdout(&run(&["export", "--format", "prometheus", d]));
    assert!(prom.contains("rccl_telemetry_tx_bytes_total{"), "{prom}");
    let csv = run(&["export", "--format", "csv", d]);
    assert_eq!(csv.status.code(), Some(0));
    let html = dir.path().join("r.html");
    let rep = run(&["report", "-o", html.to_str().unwrap(), d]);
    // CQ errors are critical: the report says so and exits 1.
    assert_eq!(rep.status.code(), Some(1), "{}", stderr(&rep));
    assert!(stderr(&rep).contains("1 critical"), "{}", stderr(&rep));
    assert!(!std::fs::read_to_string(&html)
        .unwrap()
        .contains("could not be drawn"));

    check_log_histogram(dir.path(), sampled);
}

/// Version-2 files (the library's) carry the log-scale histogram: summary, export (Prometheus
/// classic buckets, CSV rows) use it and say so; stripped back to version 1 they work as before.
fn check_log_histogram(dir: &Path, sampled: u64) {
    let d = dir.to_str().unwrap();
    let s: Value =
        serde_json::from_slice(&run(&["summary", "--json", d]).stdout).expect("summary json");
    let l = &s["log_latency"];
    assert_eq!(l["histogram"], "wqe_completion_log_histogram", "{s:#}");
    assert_eq!(
        (l["devices"].as_u64(), l["devices_without"].as_u64()),
        (Some(RANKS as u64), Some(0))
    );
    assert_eq!(
        l["latency"]["samples"].as_u64(),
        Some(sampled),
        "every sampled completion is in both histograms"
    );
    let ps = l["latency"]["percentiles"].as_array().expect("percentiles");
    assert_eq!(ps.len(), 4);
    for p in ps {
        let e = p["relative_error"]
            .as_f64()
            .expect("a log-scale percentile states its relative error");
        assert!((0.0..=0.125).contains(&e), "{p}");
        let (lo, hi) = (
            p["lower_ns"].as_f64().unwrap(),
            p["upper_ns"].as_f64().unwrap(),
        );
        assert!(
            lo <= p["estimate_ns"].as_f64().unwrap() && p["estimate_ns"].as_f64().unwrap() <= hi,
            "{p}"
        );
    }
    assert!(
        s["latency"][0]["latency"]["percentiles"][0]
            .get("relative_error")
            .is_none(),
        "linear figures keep their bucket width"
    );
    assert!(s["log_percentile_method"]
        .as_str()
        .unwrap()
        .contains("12.5%"));
    // The text shows the log-scale figures; the linear ones of the same completions only
    // with --linear.
    let text = stdout(&run(&["summary", d]));
    assert!(
        text.contains("Latency (log-scale histogram, within ")
            && !text.contains("Latency (bucket 30.0 µs"),
        "{text}"
    );
    let text = stdout(&run(&["summary", "--linear", d]));
    assert!(
        text.contains("Latency (log-scale histogram, within ")
            && text.contains("Latency (bucket 30.0 µs"),
        "{text}"
    );

    // Prometheus: one classic histogram family, the same le set on every series, cumulative.
    let prom = stdout(&run(&["export", "--format", "prometheus", d]));
    let name = "rccl_telemetry_wqe_completion_log_seconds";
    assert!(prom.contains(&format!("# TYPE {name} histogram")), "{prom}");
    let mut les: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut count_sum = 0u64;
    for line in prom.lines().filter(|l| l.starts_with(name)) {
        let (series, v) = line.rsplit_once(' ').unwrap();
        if series.starts_with(&format!("{name}_count")) {
            count_sum += v.parse::<u64>().unwrap();
            continue;
        }
        let (labels, le) = series.split_once(",le=").unwrap();
        les.entry(labels.to_string())
            .or_default()
            .push(le.to_string());
    }
    // One device series per rank (host, pid), all with the same le set.
    assert!(!les.is_empty(), "{prom}");
    let first = les.values().next().unwrap().clone();
    assert!(
        les.values().all(|l| *l == first) && first.last().unwrap() == "\"+Inf\"}",
        "{les:?}"
    );
    assert_eq!(count_sum, sampled);

    // CSV: one row per non-empty bucket per device and channel; the device rows sum to the sample.
    let csv = stdout(&run(&["export", "--format", "csv", d]));
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .filter(|l| l.contains(",wqe_completion_log_histogram,"))
        .map(|l| l.split(',').collect())
        .collect();
    let dev_sum: u64 = rows
        .iter()
        .filter(|r| r.contains(&"device"))
        .map(|r| r.last().unwrap().parse::<u64>().unwrap())
        .sum();
    let ch_sum: u64 = rows
        .iter()
        .filter(|r| r.contains(&"channel"))
        .map(|r| r.last().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!((dev_sum, ch_sum), (sampled, sampled));

    // The same files as version 1 (no log-scale keys): no trace of it, the rest unchanged.
    let v1 = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["version"] = 1.into();
        for dev in v["devices"].as_array_mut().unwrap() {
            dev.as_object_mut()
                .unwrap()
                .remove("wqe_completion_log_histogram");
            for c in dev["channels"].as_array_mut().unwrap() {
                c.as_object_mut()
                    .unwrap()
                    .remove("wqe_completion_log_histogram");
            }
        }
        std::fs::write(
            v1.path().join(p.file_name().unwrap()),
            serde_json::to_vec(&v).unwrap(),
        )
        .unwrap();
    }
    let d1 = v1.path().to_str().unwrap();
    let out = run(&["check", d1]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let s1: Value =
        serde_json::from_slice(&run(&["summary", "--json", d1]).stdout).expect("summary json");
    assert!(s1.get("log_latency").is_none() && s1.get("log_percentile_method").is_none());
    assert_eq!(
        s1["latency"], s["latency"],
        "the linear figures do not depend on the log-scale histogram"
    );
    assert!(!stdout(&run(&["summary", d1])).contains("log-scale"));
    assert!(!stdout(&run(&["export", "--format", "prometheus", d1])).contains(name));
    assert!(
        !stdout(&run(&["export", "--format", "csv", d1])).contains("wqe_completion_log_histogram")
    );
}

/// The C simulator `make` builds: `make demo` runs it with telemetry on.
fn ibcast_sim() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("RCCL_TELEMETRY_IBCAST_SIM") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/ibcast_sim");
    p.exists().then_some(p)
}

#[test]
fn ibcast_sim_files_pass_check_and_show_the_untracked_qps() {
    let Some(sim) = ibcast_sim() else {
        return skip(
            "ibcast_sim_files_pass_check_and_show_the_untracked_qps",
            "build/ibcast_sim not built (make c-tests)",
        );
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tallies = tempfile::tempdir().expect("tempdir");
    // (options, RCCL_TELEMETRY_LATENCY_SAMPLE); without channel ids the simulator takes one channel.
    let variants: [(&[&str], &str); 4] = [
        (&["--channels", "4"], "1"),
        (&["--channels", "1", "--unknown-channels"], "1"),
        (&["--channels", "4", "--bad-calls"], "16"),
        (&["--channels", "4", "--threads"], "4"),
    ];
    let mut children = Vec::new();
    for (i, (extra, n)) in variants.iter().enumerate() {
        let tally = tallies.path().join(format!("tally_{i}.json"));
        let mut args: Vec<String> = vec![tally.display().to_string()];
        args.extend(["--devices", "2", "--data-qps", "2", "--requests", "200"].map(String::from));
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(&sim)
            .args(&args)
            .env("RCCL_TELEMETRY_ENABLE", "1")
            .env("RCCL_TELEMETRY_OUTPUT_DIR", dir.path())
            .env("RCCL_TELEMETRY_LATENCY_SAMPLE", n)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ibcast_sim");
        children.push(child);
    }
    let pids: Vec<u32> = children
        .into_iter()
        .map(|c| {
            let pid = c.id();
            let out = c.wait_with_output().expect("ibcast_sim");
            assert!(
                out.status.success(),
                "ibcast_sim {pid} failed its own checks: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            pid
        })
        .collect();
    let d = dir.path().to_str().unwrap();
    // ibcast_sim's QPs name simulated peers (10.0.1.x) that no process of this test is:
    // `--partial` says the set is knowingly incomplete, so only the files' soundness is judged.
    let out = run(&["check", "--partial", d]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "ibcast_sim output fails check:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    let s: Value =
        serde_json::from_slice(&run(&["summary", "--json", d]).stdout).expect("summary json");
    assert_eq!(s["files"], 4);
    assert!(
        s["num_qp_untracked"].as_u64() > Some(0),
        "--bad-calls sets up QPs on an out-of-range channel"
    );
    let o: Value =
        serde_json::from_slice(&run(&["outliers", "--json", d]).stdout).expect("outliers json");
    let untracked: Vec<&Value> = o["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "untracked_qps")
        .collect();
    assert!(
        !untracked.is_empty() && untracked.iter().all(|f| f["pid"] == pids[2]),
        "{untracked:#?}"
    );
}
