//! Communicator contexts through the C ABI, driven by c_tests/comm_sim.c (built against the
//! generated header as RCCL would): two communicators and the process-wide calls on one
//! (device, channel) stay apart in the file; 300 lifetimes of 4 devices x 8 channels x 8 QPs
//! keep the RSS and the file bounded and the totals exact; a finalized communicator's handles
//! are inert and a late count is its own; with telemetry off every Comm call is a no-op.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

fn comm_sim() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| c_program("comm_sim"))
}

/// Runs comm_sim `args` with telemetry on into a fresh directory; returns the directory, the
/// run's output and its one file (checked against the schema).
fn run_on(args: &[&str], env: &[(&str, &str)]) -> (tempfile::TempDir, std::process::Output, Value) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap().to_owned();
    let mut all = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir.as_str()),
    ];
    all.extend_from_slice(env);
    let out = run(comm_sim(), args, &all);
    assert!(
        out.status.success(),
        "comm_sim {args:?}: {}\n{}",
        stderr(&out),
        String::from_utf8_lossy(&out.stdout)
    );
    let files = telemetry_files(d.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let v = load_valid(&files[0]);
    (d, out, v)
}

/// (communicator hash or "", channel id) -> the channel, for device `dev`.
fn channels(v: &Value, dev: usize) -> Vec<(String, u64, &Value)> {
    v["devices"][dev]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let comm = c["comm"]["hash"].as_str().unwrap_or("").to_owned();
            (comm, u(&c["id"]), c)
        })
        .collect()
}

/// Sum of a counter over a device's channels and finalized records: the device's total.
fn device_total(v: &Value, dev: usize, key: &str) -> u64 {
    let d = &v["devices"][dev];
    let live: u64 = d["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u(&c[key]))
        .sum();
    let gone: u64 = d["finalized_comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u(&c[key]))
        .sum();
    live + gone
}

#[test]
fn two_communicators_on_one_channel_stay_apart() {
    let (_d, _, v) = run_on(&["two"], &[]);
    let ch = channels(&v, 0);
    let got: Vec<(&str, u64, u64)> = ch
        .iter()
        .map(|(comm, id, c)| (comm.as_str(), *id, u(&c["num_wqe_sent"])))
        .collect();
    // The process-wide calls' channels first, then B's (A is finalized): 11 a QP, 7 + 1.
    assert_eq!(
        got,
        [("", 0, 22), ("", 1, 22), ("0xb0b", 0, 16), ("0xb0b", 1, 16)]
    );
    for (comm, _, c) in &ch {
        assert_eq!(c["queue_pairs"].as_array().unwrap().len(), 2);
        if comm.is_empty() {
            assert!(c["comm"].is_null());
        } else {
            assert_eq!(
                (u(&c["comm"]["rank"]), u(&c["comm"]["nranks"])),
                (0, 2),
                "{c}"
            );
            assert_eq!(u(&c["num_data_qp"]) + u(&c["num_cts_qp"]), 2);
        }
    }
    // A: one record on device 0, every counter of its 2 channels x 2 QPs.
    let f = v["devices"][0]["finalized_comms"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    let a = &f[0];
    assert_eq!(a["comm"]["hash"], "0xa11ce");
    assert_eq!((u(&a["comm"]["rank"]), u(&a["comm"]["nranks"])), (1, 4));
    for (k, want) in [
        ("num_comms", 1),
        ("num_channels", 2),
        ("num_qps", 4),
        ("num_data_qp", 2),
        ("num_cts_qp", 2),
        ("num_wqe_sent", 12),
        ("num_write_imm_wqe", 12),
        ("num_wqe_completed", 12),
        ("num_req_completed", 2),
    ] {
        assert_eq!(u(&a[k]), want, "{k}");
    }
    let hist: u64 = a["wqe_completion_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .sum();
    assert_eq!(hist, 12, "every completion of A sampled");
    // Totals: everything posted on the device, live and finalized.
    assert_eq!(
        device_total(&v, 0, "num_wqe_sent"),
        2 * 2 * (3 + 7 + 11) + 4
    );
    // The communicators: A finalized, B live, in creation order.
    let comms = v["communicators"].as_array().unwrap();
    let listed: Vec<(&str, bool)> = comms
        .iter()
        .map(|c| (c["hash"].as_str().unwrap(), c["finalize_time"].is_null()))
        .collect();
    assert_eq!(listed, [("0xa11ce", false), ("0xb0b", true)]);
    assert_eq!(u(&comms[0]["id"]) + 1, u(&comms[1]["id"]));
}

#[test]
fn lifetimes_are_bounded_and_exact() {
    let (d, out, v) = run_on(&["lifetimes"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tally: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let rss = tally["rss_kib"].as_array().unwrap();
    let (at20, at300) = (u(&rss[0]), u(&rss[1]));
    eprintln!("comm_sim lifetimes: RSS {at20} KiB after lifetime 20, {at300} KiB after 300");
    assert!(at20 > 0, "no RSS reading");
    assert!(at300 < at20 + 32 * 1024, "RSS {at20} KiB -> {at300} KiB");
    let file = telemetry_files(d.path()).pop().unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    eprintln!("comm_sim lifetimes: file {size} bytes");
    assert!(size < 32 << 20, "file of {size} bytes");
    let devs = tally["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 4);
    for (i, t) in devs.iter().enumerate() {
        // 300 x 8 channels x 8 QPs x 4 WQEs.
        assert_eq!(u(&t["wqe_sent"]), 300 * 8 * 8 * 4);
        assert_eq!(device_total(&v, i, "num_wqe_sent"), u(&t["wqe_sent"]));
        assert_eq!(
            device_total(&v, i, "num_wqe_completed"),
            u(&t["wqe_completed"])
        );
        assert_eq!(device_total(&v, i, "num_req_completed"), 300 * 8);
        let dev = &v["devices"][i];
        assert!(dev["channels"].as_array().unwrap().is_empty());
        let f = dev["finalized_comms"].as_array().unwrap();
        assert_eq!(f.len(), 300, "one record per lifetime");
        assert!(f
            .iter()
            .all(|r| u(&r["num_qps"]) == 64 && u(&r["num_channels"]) == 8));
        // Their peers: three remote NICs a device, 64 QPs between them, latency for each.
        let peers = f[299]["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 3, "{peers:?}");
        assert_eq!(peers.iter().map(|p| u(&p["num_qps"])).sum::<u64>(), 64);
        // The device's log-scale histogram keeps every lifetime's sampled completions.
        let log: u64 = dev["wqe_completion_log_histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| u(&b[2]))
            .sum();
        assert_eq!(log, u(&t["wqe_completed"]));
    }
    assert_eq!(v["communicators"].as_array().unwrap().len(), 300);
}

#[test]
fn a_finalized_communicators_handles_are_inert() {
    let (_d, out, v) = run_on(&["stale"], &[]);
    let err = stderr(&out);
    assert_eq!(
        err.matches("rank is not in 0..nRanks-1").count(),
        3,
        "one line per refused CommInit: {err}"
    );
    assert_eq!(
        err.matches("finalized or unknown; ignored").count(),
        1,
        "said once: {err}"
    );
    assert!(
        err.lines().all(|l| l.starts_with("rccl-telemetry: ")),
        "{err}"
    );
    let f = v["devices"][0]["finalized_comms"].as_array().unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["comm"]["hash"], "0xaaa");
    // 5 a QP, and 2 more through the handle kept past the finalization: all A's.
    assert_eq!(u(&f[0]["num_wqe_sent"]), 2 * 5 + 2);
    assert_eq!(u(&f[0]["num_qps"]), 2);
    let ch = channels(&v, 0);
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].0, "0xbbb");
    assert_eq!(u(&ch[0].2["num_wqe_sent"]), 2 * 9, "B's counts are its own");
}

#[test]
fn with_telemetry_off_every_comm_call_is_a_no_op() {
    for mode in ["two", "stale"] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let out = run(comm_sim(), &[mode], &[("RCCL_TELEMETRY_OUTPUT_DIR", dir)]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        assert!(telemetry_files(d.path()).is_empty());
    }
    let out = run(
        comm_sim(),
        &["lifetimes", "--lifetimes", "25", "--devices", "1"],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn lifetimes_on_threads_while_the_writer_reads_lose_nothing_and_past_the_cap_are_summed() {
    let prom = tempfile::tempdir().unwrap();
    let (_d, out, v) = run_on(
        &["threads"],
        &[
            ("RCCL_TELEMETRY_STALL_MS", "10"),
            ("RCCL_TELEMETRY_FLUSH_INTERVAL_S", "1"),
            (
                "RCCL_TELEMETRY_PROMETHEUS_DIR",
                prom.path().to_str().unwrap(),
            ),
            ("RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S", "1"),
        ],
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
    // 4 threads x 2000 lifetimes, one device each: the newest 1024 keep a record, the rest
    // are summed per device; every WQE is counted once.
    let comms = v["communicators"].as_array().unwrap();
    assert_eq!(comms.len(), 1024);
    assert!(comms.iter().all(|c| !c["finalize_time"].is_null()));
    let mut kept = 0;
    for dev in 0..4 {
        let f = v["devices"][dev]["finalized_comms"].as_array().unwrap();
        let (named, summed): (Vec<&Value>, Vec<&Value>) =
            f.iter().partition(|r| !r["comm"].is_null());
        assert!(summed.len() <= 1, "one record past the cap a device");
        let n = named.len() as u64 + summed.iter().map(|r| u(&r["num_comms"])).sum::<u64>();
        assert_eq!(n, 2000, "device {dev}: every lifetime in a record");
        kept += named.len();
        assert_eq!(device_total(&v, dev, "num_wqe_sent"), 2000 * 4 * 4 * 4);
        assert_eq!(device_total(&v, dev, "num_req_completed"), 0);
    }
    assert_eq!(kept, 1024);
}
