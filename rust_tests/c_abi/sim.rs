//! The simulation and its tally, shared by every c_abi test: running c_tests/ibcast_sim.c
//! (through the inline hooks, or built with RCCL_TELEMETRY_NO_INLINE through the exported
//! functions), taking its one file, and checking every software counter of the file against
//! the tally it kept. Separate so that each concern's module holds only its scenarios.

use super::common::*;

use serde_json::Value;
use std::path::Path;

pub const SIZE_MAX: [u64; 66] = {
    let mut m = [0u64; 66];
    let mut k = 1;
    while k < 65 {
        m[k] = 1u64 << (k - 1);
        k += 1;
    }
    m[65] = u64::MAX;
    m
};

/// Every software counter of `file` equals the simulation's `tally`.
pub fn check_against_tally(file: &Value, tally: &Value, sample_n: u64, unknown_channels: bool) {
    let fd = file["devices"].as_array().unwrap();
    let td = tally["devices"].as_array().unwrap();
    assert_eq!(fd.len(), td.len());
    assert_eq!(file["transport"], "IB-CAST");
    assert_eq!(file.get("latency_sample_interval").is_some(), sample_n > 1);
    if sample_n > 1 {
        assert_eq!(u(&file["latency_sample_interval"]), sample_n);
    }
    assert_eq!(file["version"], 5);
    for (f, t) in fd.iter().zip(td) {
        for k in [
            "device_id",
            "roce_device",
            "tx_bytes",
            "rx_bytes",
            "num_cq_errors",
            "cq_poll_count",
            "num_qp_untracked",
        ] {
            assert_eq!(f[k], t[k], "device key {k}");
        }
        check_identity(f, t);
        // Hardware counters belong to the hw module; here each key is a number >= -1.
        for (k, v) in f["hw_counters"].as_object().unwrap() {
            let ok = v.as_i64().is_some_and(|x| x >= -1)
                || v.as_array()
                    .is_some_and(|a| a.iter().all(|x| x.as_i64().unwrap() >= -1));
            assert!(ok, "hw_counters.{k} = {v}");
        }
        let want_sizes: Vec<(u64, u64)> = t["size_buckets"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, n)| u(n) > 0)
            .map(|(b, n)| (SIZE_MAX[b], u(n)))
            .collect();
        let got_sizes: Vec<(u64, u64)> = f["wqe_size_stats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (u(&s["max_wqe_size"]), u(&s["num_wqe"])))
            .collect();
        assert_eq!(got_sizes, want_sizes);

        let fch = f["channels"].as_array().unwrap();
        let tch = t["channels"].as_array().unwrap();
        assert_eq!(fch.len(), tch.len());
        if unknown_channels {
            assert!(f["num_channels"].is_null());
        } else {
            assert_eq!(u(&f["num_channels"]), tch.len() as u64);
        }
        let active = tch
            .iter()
            .filter(|c| u(&c["num_req_completed"]) > 0)
            .count() as u64;
        assert_eq!(u(&f["active_channels"]), active);
        for (fc, tc) in fch.iter().zip(tch) {
            if unknown_channels {
                assert!(fc["id"].is_null());
            } else {
                assert_eq!(fc["id"], tc["id"]);
            }
            assert_eq!(fc["num_req_completed"], tc["num_req_completed"]);
            let fq = fc["queue_pairs"].as_array().unwrap();
            let tq = tc["queue_pairs"].as_array().unwrap();
            assert_eq!(fq.len(), tq.len());
            let mut sums = std::collections::BTreeMap::<&str, u64>::new();
            let (mut data, mut cts, mut hist_sum) = (0, 0, 0);
            for (i, (q, tqp)) in fq.iter().zip(tq).enumerate() {
                assert_eq!(u(&q["id"]), i as u64);
                assert_eq!(q["role"], tqp["role"]);
                for k in [
                    "num_wqe_sent",
                    "num_recv_wqe",
                    "num_wqe_rcvd",
                    "num_wqe_completed",
                    "num_cts_sent_signalled",
                    "num_cts_sent_unsignalled",
                    "num_slot_miss",
                    "num_write_wqe",
                    "num_write_imm_wqe",
                ] {
                    assert_eq!(q[k], tqp[k], "qp {i} key {k}");
                    *sums.entry(k).or_default() += u(&q[k]);
                }
                assert_eq!(
                    u(&q["num_cts_sent"]),
                    u(&q["num_cts_sent_signalled"]) + u(&q["num_cts_sent_unsignalled"])
                );
                let h: u64 = q["wqe_completion_histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(u)
                    .sum();
                assert_eq!(h, u(&tqp["sampled"]), "qp {i}: histogram sum is the sample");
                assert_eq!(q.get("num_wqe_sampled").is_some(), sample_n > 1);
                if sample_n > 1 {
                    assert_eq!(u(&q["num_wqe_sampled"]), h);
                }
                let (mn, mx) = (
                    q["wqe_completion_ns_min"].as_i64().unwrap(),
                    q["wqe_completion_ns_max"].as_i64().unwrap(),
                );
                if h == 0 {
                    assert_eq!((mn, mx), (-1, -1));
                } else {
                    assert!(0 <= mn && mn <= mx, "qp {i}: min {mn} max {mx}");
                }
                // A clean run leaves nothing outstanding and never stalls (hooks: WRITE_WITH_IMM
                // postings against completions; CTS and receives are not counted).
                assert_eq!(
                    (
                        u(&q["num_wqe_outstanding"]),
                        &q["stalled"],
                        u(&q["longest_stall_ms"])
                    ),
                    (0, &Value::Bool(false), 0),
                    "qp {i}"
                );
                assert!(
                    q.get("oldest_outstanding_ms").is_none(),
                    "a hooks file has no oldest_outstanding_ms"
                );
                hist_sum += h;
                data += u64::from(q["role"] == "data");
                cts += u64::from(q["role"] == "cts");
            }
            for (k, s) in &sums {
                assert_eq!(u(&fc[*k]), *s, "channel total {k} is the sum over its QPs");
            }
            assert_eq!(
                u(&fc["num_cts_sent"]),
                sums["num_cts_sent_signalled"] + sums["num_cts_sent_unsignalled"]
            );
            let ch_hist: u64 = fc["wqe_completion_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(u)
                .sum();
            assert_eq!(ch_hist, hist_sum);
            assert_eq!(
                log_total(&fc["wqe_completion_log_histogram"]),
                hist_sum,
                "channel {:?}: the log-scale histogram counts every sampled completion",
                fc["id"]
            );
            assert_eq!((u(&fc["num_data_qp"]), u(&fc["num_cts_qp"])), (data, cts));
            assert_eq!(u(&fc["num_qp_untracked"]), 0);
        }
    }
}

/// Version 3: the identities rcclTelemetryQpSetPeer told (the last call of each QP), the
/// device's local GID, and one peer NIC per device whose histogram holds every sampled
/// completion of the device (every QP of the simulation has a peer).
pub fn check_identity(f: &Value, t: &Value) {
    let dev = f["device_id"].as_u64().unwrap();
    for k in ["gid", "gid_ip"] {
        assert_eq!(f[k], t[k], "device {dev} key {k}");
    }
    for k in ["port", "gid_index", "lid"] {
        assert!(f[k].is_null(), "device {dev}: the hooks do not tell {k}");
    }
    let mut qps = 0;
    let mut sampled = 0;
    for (fc, tc) in f["channels"]
        .as_array()
        .unwrap()
        .iter()
        .zip(t["channels"].as_array().unwrap())
    {
        for (q, tq) in fc["queue_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(tc["queue_pairs"].as_array().unwrap())
        {
            assert_eq!(q["qp_num"], tq["qp_num"]);
            assert_eq!(
                q["peer"], tq["peer"],
                "the second rcclTelemetryQpSetPeer replaced the first"
            );
            assert!(
                q.get("local_gid").is_none(),
                "same GID as the device: no local_gid"
            );
            assert!(q.get("qp_type").is_none(), "qp_type only in preload files");
            qps += 1;
            sampled += u(&tq["sampled"]);
        }
    }
    let peers = f["peers"].as_array().unwrap();
    assert_eq!(
        peers.len(),
        1,
        "device {dev}: one peer NIC (the wrong peer first told had no completion): {peers:?}"
    );
    let p = &peers[0];
    let tq = &t["channels"][0]["queue_pairs"][0]["peer"];
    assert_eq!(
        (&p["gid"], &p["gid_ip"], &p["lid"]),
        (&tq["gid"], &tq["gid_ip"], &Value::Null)
    );
    assert_eq!(u(&p["num_qps"]), qps);
    assert!(p.get("num_qps_shared").is_none());
    if let Some(h) = p.get("wqe_completion_log_histogram") {
        assert_eq!(
            log_total(h),
            sampled,
            "device {dev}: the peer's histogram holds every sampled completion"
        );
        assert_eq!(log_total(h), log_total(&f["wqe_completion_log_histogram"]));
    }
}

/// The total count of a file's sparse log-scale histogram ([lo, hi, count] triples), after
/// checking its buckets are the library's, in order.
pub fn log_total(v: &Value) -> u64 {
    let mut last = None;
    v.as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let b = b.as_array().unwrap();
            let lo = u(&b[0]);
            let i = rccl_telemetry::loghist::bucket_index(lo);
            let (blo, bhi) = rccl_telemetry::loghist::bucket_bounds(i);
            assert_eq!(lo, blo, "{b:?}");
            if i + 1 < rccl_telemetry::loghist::LOG_BUCKETS {
                assert_eq!(u(&b[1]), bhi, "{b:?}")
            } else {
                assert!(b[1].is_null(), "{b:?}")
            }
            assert!(last < Some(i), "buckets in increasing order: {v}");
            last = Some(i);
            assert!(u(&b[2]) > 0, "only non-empty buckets: {b:?}");
            u(&b[2])
        })
        .sum()
}

pub fn run_sim(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::Output, Value) {
    run_sim_with(ibcast_sim(), dir, args, env)
}

/// ibcast_sim built with RCCL_TELEMETRY_NO_INLINE: every hook is a call into the library.
pub fn ibcast_sim_calls() -> &'static Path {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| c_program("ibcast_sim_calls"))
}

pub fn run_sim_with(
    prog: &Path,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, Value) {
    let tally = dir.join("tally.json");
    let out_dir = dir.to_str().unwrap();
    let mut full_env = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", out_dir),
    ];
    full_env.extend_from_slice(env);
    let mut all_args = vec![tally.to_str().unwrap()];
    all_args.extend_from_slice(args);
    let o = run(prog, &all_args, &full_env);
    assert!(
        o.status.success(),
        "{} failed: {}",
        prog.display(),
        stderr(&o)
    );
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&tally).unwrap()).unwrap();
    (o, t)
}

pub fn only_file(dir: &Path) -> Value {
    let files = telemetry_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let v = load_valid(&files[0]);
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        name,
        format!(
            "rccl_telemetry_{}_{uid}_{}.json",
            v["host_name"].as_str().unwrap(),
            v["process_id"]
        )
    );
    v
}
