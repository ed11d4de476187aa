//! The WQE latency monitor's keys (format version 5) through the commands: a generated run with
//! peers, one QP of it given slow WQEs and the monitor's statistics as the library writes them;
//! `summary`, `links`, `outliers`, `export` read them, and a run without them reads as before.

use crate::common::{run, stdout};
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Topology};
use serde_json::{json, Value};

const THR: u64 = 100_000;
const SLOW: u64 = 7;
const P99: u64 = 1_000_000;

/// A generated 4-rank run with peers; with `monitor`, every file of version 5 with the
/// monitor on, and the first QP with a peer of the first file slow.
fn run_dir(monitor: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks: 4,
        ranks_per_host: 2,
        devices_per_rank: 2,
        seed: 3,
        topology: Topology::AllToAll,
        ..Default::default()
    };
    generate_fabric(dir.path(), &o, 2).expect("generate");
    if !monitor {
        return dir;
    }
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rccl_telemetry_") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    for (k, p) in files.iter().enumerate() {
        let mut v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["version"] = 5.into();
        v["slow_threshold_ns"] = THR.into();
        let mut planted = k > 0;
        for d in v["devices"].as_array_mut().unwrap() {
            let mut dev_slow = 0;
            for c in d["channels"].as_array_mut().unwrap() {
                let mut ch_slow = 0;
                for q in c["queue_pairs"].as_array_mut().unwrap() {
                    let slow = if !planted && !q["peer"].is_null() {
                        planted = true;
                        q["wqe_completion_ns_mean"] = json!(216_000.0);
                        q["wqe_completion_ns_stddev"] = json!(392_786.5);
                        q["wqe_completion_ns_p50"] = 20_000.into();
                        q["wqe_completion_ns_p90"] = P99.into();
                        q["wqe_completion_ns_p99"] = P99.into();
                        q["wqe_completion_ns_p999"] = P99.into();
                        SLOW
                    } else {
                        0
                    };
                    q["num_wqe_slow"] = slow.into();
                    q["port"] = Value::Null;
                    q["local_lid"] = Value::Null;
                    ch_slow += slow;
                }
                c["num_wqe_slow"] = ch_slow.into();
                dev_slow += ch_slow;
            }
            d["num_wqe_slow"] = dev_slow.into();
        }
        std::fs::write(p, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    dir
}

#[test]
fn summary_and_links_show_the_slow_wqes_and_the_quantiles() {
    let d = run_dir(true);
    let arg = d.path().to_str().unwrap();
    let out = run(&["summary", "--json", arg]);
    assert_eq!(out.status.code(), Some(0));
    let s: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(s["num_wqe_slow"], SLOW);
    assert_eq!(s["slow_thresholds_ns"], json!([THR]));
    let rows = s["devices"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .filter_map(|r| r["num_wqe_slow"].as_u64())
            .sum::<u64>(),
        SLOW
    );
    let t = stdout(&run(&["summary", arg]));
    assert!(
        t.contains(&format!(
            "Slow WQEs (WQE latency monitor, above {THR} ns): {SLOW}, most on "
        )),
        "{t}"
    );

    let out = run(&["links", "--json", arg]);
    assert_eq!(out.status.code(), Some(0));
    let l: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let slow: Vec<&Value> = l["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["wrs_slow"].as_u64().unwrap_or(0) > 0)
        .collect();
    assert_eq!(slow.len(), 1, "one link has the slow QP");
    assert_eq!(slow[0]["wrs_slow"], SLOW);
    assert_eq!(slow[0]["qp_p99_max_ns"], P99);
    let t = stdout(&run(&["links", "--wide", arg]));
    assert!(
        t.contains("Slow WQEs (the WQE latency monitor, above each file's slow_threshold_ns): ")
            && t.contains(&format!(" {SLOW}, a QP's p99 up to ")),
        "{t}"
    );
    let out = run(&["check", arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn exports_carry_the_monitors_keys() {
    let d = run_dir(true);
    let arg = d.path().to_str().unwrap();
    let t = stdout(&run(&[
        "export",
        "--format",
        "prometheus",
        "--level",
        "qp",
        arg,
    ]));
    assert!(
        t.contains("# TYPE rccl_telemetry_qp_wqe_latency_seconds summary"),
        "{t}"
    );
    assert!(t.contains("quantile=\"0.99\"} 0.001\n"), "{t}");
    assert!(t.contains("# TYPE rccl_telemetry_qp_wqe_latency_stddev_seconds gauge"));
    assert!(t.contains("# TYPE rccl_telemetry_qp_wqes_slow_total counter"));
    let t = stdout(&run(&["export", "--format", "csv", "--level", "qp", arg]));
    assert!(
        t.contains(",wqe_completion_ns_p99,") || t.contains("wqe_completion_ns_p99"),
        "{t}"
    );
    assert!(t.contains("num_wqe_slow"), "{t}");
}

#[test]
fn a_run_without_the_monitor_reads_as_before() {
    let d = run_dir(false);
    let arg = d.path().to_str().unwrap();
    let t = stdout(&run(&["summary", arg]));
    assert!(!t.contains("Slow WQEs"), "{t}");
    let s: Value = serde_json::from_str(&stdout(&run(&["summary", "--json", arg]))).unwrap();
    assert!(s.get("num_wqe_slow").is_none() && s.get("slow_thresholds_ns").is_none());
    let t = stdout(&run(&["links", "--wide", arg]));
    assert!(!t.contains("Slow WQEs"), "{t}");
    let t = stdout(&run(&[
        "export",
        "--format",
        "prometheus",
        "--level",
        "qp",
        arg,
    ]));
    assert!(
        !t.contains("wqe_latency_seconds") && !t.contains("wqes_slow_total{"),
        "{t}"
    );
}
