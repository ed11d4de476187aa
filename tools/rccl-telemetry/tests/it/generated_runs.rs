//! Generated runs of hundreds of ranks with planted anomalies: every command must find each
//! anomaly at the rank it was planted on, and nothing anywhere else.

use crate::common::*;
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, RunKind};
use rccl_telemetry_tool::load::load_run;
use rccl_telemetry_tool::outliers;
use serde_json::Value;
use std::collections::BTreeSet;

fn all_plants() -> Vec<Plant> {
    Plant::of(RunKind::Flat)
}

/// Which finding kind (and metric: the counter, when the anomaly shows in one) each planted
/// anomaly must produce, as the plant says.
fn expected(plant: Plant) -> (&'static str, Option<&'static str>) {
    let kind = plant
        .finding()
        .unwrap_or_else(|| panic!("no expectation for {plant}"));
    (kind.as_str(), plant.counter())
}

#[test]
fn outliers_finds_every_planted_anomaly_and_nothing_else() {
    let g = gen(GenOptions {
        ranks: 300,
        seed: 7,
        plants: all_plants(),
        samples: 6,
        ..Default::default()
    });
    assert_eq!(g.planted.len(), all_plants().len());
    let out = run(&["outliers", "--json", g.arg()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "findings must make the exit status 1"
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("outliers --json is JSON");
    let findings = report["findings"].as_array().expect("findings array");
    for p in &g.planted {
        let rank = format!("{}:{}", p.host, p.pid);
        let (kind, metric) = expected(p.kind);
        let hit = findings.iter().any(|f| {
            f["rank"] == rank.as_str()
                && f["kind"] == kind
                && metric.is_none_or(|m| f["metric"] == m)
                && (kind == "samples_dropped"
                    || kind == "snapshot"
                    || f["device_id"] == p.device_id)
                && !f["evidence"].as_str().unwrap_or("").is_empty()
        });
        assert!(
            hit,
            "planted {} on {rank} dev {} not found as {kind}; findings: {findings:#?}",
            p.kind, p.device_id
        );
    }
    let planted_ranks: BTreeSet<String> = g
        .planted
        .iter()
        .map(|p| format!("{}:{}", p.host, p.pid))
        .collect();
    for f in findings {
        let r = f["rank"].as_str().expect("rank");
        assert!(planted_ranks.contains(r), "false positive on {r}: {f:#}");
    }
    assert_eq!(
        report["ranks_flagged"].as_u64(),
        Some(planted_ranks.len() as u64)
    );
    // Ranked: most severe first, then scores never increase down the list.
    let sev = |f: &Value| match f["severity"].as_str().expect("severity") {
        "critical" => 0,
        "warning" => 1,
        "info" => 2,
        s => panic!("unknown severity {s}"),
    };
    let keys: Vec<(i32, f64)> = findings
        .iter()
        .map(|f| (sev(f), -f["score"].as_f64().expect("score")))
        .collect();
    assert!(
        keys.windows(2)
            .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 <= w[1].1)),
        "{keys:?}"
    );
    assert_eq!(findings[0]["kind"], "cq_errors", "the critical one first");

    // The table names the same devices, host:NIC, one row per device.
    let text = run(&["outliers", "--top", "0", g.arg()]);
    assert_eq!(text.status.code(), Some(1));
    let t = stdout(&text);
    for p in &g.planted {
        let nic = format!("{}:mlx5_{}", p.host, p.device_id);
        assert!(t.contains(&nic), "table misses {nic}:\n{t}");
    }
}

/// Every plant of a run with peers that is a finding (a slow NIC, link or host, one direction,
/// a late poller, stalled QPs, a hang's root) is found as its kind, naming the planted culprit.
#[test]
fn every_plant_with_peers_is_found_as_its_kind() {
    let plants = Plant::of(RunKind::Fabric)
        .into_iter()
        .chain(Plant::of(RunKind::Hang))
        .filter(|p| p.finding().is_some());
    for plant in plants {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = GenOptions {
            ranks: 24,
            ranks_per_host: 4,
            devices_per_rank: 4,
            seed: 3,
            plants: vec![plant],
            ..Default::default()
        };
        let planted = generate_fabric(dir.path(), &o, 2).expect("generate");
        let kind = plant.finding().unwrap();
        let r = outliers::find(&load_run(&[dir.path().to_path_buf()]), &Default::default());
        let p = planted.iter().find(|p| p.kind == plant).expect("planted");
        let ends: Vec<&str> = std::iter::once(p.host.as_str())
            .chain(p.peer.as_deref().and_then(|x| x.split(':').next()))
            .collect();
        assert!(
            r.findings
                .iter()
                .any(|f| f.kind == kind && ends.iter().any(|h| f.culprit.contains(h))),
            "{plant} planted at {ends:?} not found as {kind}: {:#?}",
            r.findings
        );
    }
}

/// A fabric run of another driver's NICs names its devices and its culprit as that driver does.
#[test]
fn a_fabric_run_of_another_driver_names_its_devices() {
    for (hw_type, name) in [("thor2", "bnxt_re"), ("ainic", "ionic_"), ("rxe", "rxe")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = GenOptions {
            ranks: 32,
            seed: 2,
            hw_type: hw_type.into(),
            plants: vec![Plant::SlowNic],
            ..Default::default()
        };
        let planted = generate_fabric(dir.path(), &o, 2).expect("generate");
        let d = dir.path().to_str().expect("utf-8");
        let j: serde_json::Value =
            serde_json::from_slice(&run(&["outliers", "--json", d]).stdout).expect("json");
        let rows = j["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 1, "{hw_type}: {j}");
        let f = &rows[0];
        assert_eq!(f["kind"], "slow_nic", "{hw_type}: {j}");
        let want = format!("{}:{name}{}", planted[0].host, planted[0].device_id);
        assert_eq!(f["culprit"], want.as_str(), "{hw_type}");
        assert!(!j.to_string().contains("mlx5_"), "{hw_type}: an mlx5 name");
    }
}

#[test]
fn a_clean_run_has_no_outliers_and_exit_status_zero() {
    for hw_type in ["mlx5", "ainic"] {
        let g = gen(GenOptions {
            ranks: 200,
            seed: 11,
            hw_type: hw_type.into(),
            samples: 4,
            ..Default::default()
        });
        let out = run(&["outliers", g.arg()]);
        assert_eq!(out.status.code(), Some(0), "{hw_type}: {}", stdout(&out));
        assert!(stdout(&out).starts_with("0 findings"), "{}", stdout(&out));
    }
}

#[test]
fn generated_runs_pass_check_including_sampled_latency_and_named_channels() {
    for (hw_type, n) in [("mlx5", 1), ("ainic", 16), ("thor2", 4)] {
        let g = gen(GenOptions {
            ranks: 40,
            seed: 3,
            hw_type: hw_type.into(),
            latency_sample: n,
            plants: all_plants(),
            samples: 3,
            ..Default::default()
        });
        let out = run(&["check", g.arg()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{hw_type} N={n}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_eq!(stdout(&out), "", "no violation lines expected");
        assert!(
            stderr(&out).contains("checked 40 files: 40 valid"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn latency_tail_is_found_with_sampled_histograms() {
    let g = gen(GenOptions {
        ranks: 64,
        seed: 5,
        hw_type: "ainic".into(),
        latency_sample: 16,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    let out = run(&["outliers", "--json", g.arg()]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &g.planted[0];
    let f = &report["findings"][0];
    assert_eq!(f["kind"], "latency_tail");
    assert_eq!(f["rank"], format!("{}:{}", p.host, p.pid));
}

/// The same planted tail, in files turned into version 2: each channel's linear buckets moved
/// into log-scale buckets at their midpoints. outliers then reads the log-scale histogram and
/// says so, and still finds the tail on the planted rank only.
#[test]
fn latency_tail_is_found_in_the_log_scale_histogram() {
    let g = gen(GenOptions {
        ranks: 64,
        seed: 5,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    to_version2(&g);
    let out = run(&["outliers", "--json", g.arg()]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &g.planted[0];
    let tails: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "latency_tail")
        .collect();
    assert_eq!(tails.len(), 1, "{report:#}");
    assert_eq!(tails[0]["rank"], format!("{}:{}", p.host, p.pid));
    assert!(
        tails[0]["evidence"]
            .as_str()
            .unwrap()
            .contains("from the log-scale histogram (within "),
        "{}",
        tails[0]["evidence"]
    );
}

/// Sums a device-level field over every used device, straight from the JSON files.
fn sum_devices(g: &GenRun, field: &str) -> u64 {
    g.files()
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json");
            v["devices"]
                .as_array()
                .expect("devices")
                .iter()
                .map(|d| d[field].as_u64().expect("u64"))
                .sum::<u64>()
        })
        .sum()
}

#[test]
fn summary_json_totals_match_the_files() {
    let g = gen(GenOptions {
        ranks: 120,
        seed: 9,
        plants: all_plants(),
        samples: 5,
        ..Default::default()
    });
    let out = run(&["summary", "--json", g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s: Value = serde_json::from_slice(&out.stdout).expect("summary --json is JSON");
    assert_eq!(s["files"], 120);
    assert_eq!(s["ranks"], 120);
    assert_eq!(s["hosts"], 15);
    assert_eq!(s["devices_used"], 120);
    assert_eq!(s["devices_registered"], 960);
    assert_eq!(s["tx_bytes"].as_u64(), Some(sum_devices(&g, "tx_bytes")));
    assert_eq!(s["rx_bytes"].as_u64(), Some(sum_devices(&g, "rx_bytes")));
    assert_eq!(
        s["num_cq_errors"].as_u64(),
        Some(sum_devices(&g, "num_cq_errors"))
    );
    assert_eq!(
        s["num_qp_untracked"].as_u64(),
        Some(sum_devices(&g, "num_qp_untracked"))
    );
    assert!(s["num_cq_errors"].as_u64() > Some(0));
    // Shares add up to 1 over the used devices.
    let share: f64 = s["devices"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["tx_share"].as_f64().expect("share"))
        .sum();
    assert!((share - 1.0).abs() < 1e-9, "{share}");
    // Every percentile lies inside its bucket, which is at most one bucket wide.
    let width = 30_000.0;
    for r in s["devices"].as_array().expect("rows") {
        let buckets = r["histogram"].as_array().expect("histogram").len();
        for p in r["latency"]["percentiles"].as_array().expect("percentiles") {
            let (lo, est) = (
                p["lower_ns"].as_f64().expect("lo"),
                p["estimate_ns"].as_f64().expect("est"),
            );
            assert!(lo <= est, "{p}");
            let open = p["bucket"].as_u64() == Some(buckets as u64 - 1);
            assert_eq!(p["open_bucket"].as_bool(), Some(open), "{p}");
            let hi = p["upper_ns"].as_f64();
            if open {
                // Closed only by the observed max.
                assert_eq!(hi, r["latency"]["max_ns"].as_f64(), "{p}");
            } else {
                let hi = hi.expect("a closed bucket has an upper edge");
                assert!(est <= hi && hi - lo <= width, "{p}");
            }
        }
    }
    // The moved hw counters include the planted drops, classified as such.
    let moved = s["hw_counters_moved"].as_array().expect("moved");
    let drops = moved
        .iter()
        .find(|h| h["name"] == "port_rx_discards")
        .expect("port_rx_discards moved");
    assert_eq!(drops["category"], "drop");
    assert_eq!(drops["devices_moved"], 1);
    assert!(
        !moved.iter().any(|h| h["name"] == "out_of_buffer"),
        "a counter that never moved is not listed"
    );

    // The people's table (every row: the run is beyond a screen) shows the method and the ranks.
    let text = stdout(&run(&["summary", "--wide", "--all", g.arg()]));
    assert!(text.contains("within one bucket width"), "{text}");
    assert!(text.contains("gpu_node_014"), "{text}");
    assert!(text.contains("Hardware counters that moved"), "{text}");
}

#[test]
fn glob_and_single_file_inputs_work_and_host_comes_from_the_json() {
    let g = gen(GenOptions {
        ranks: 10,
        seed: 2,
        ..Default::default()
    });
    let pattern = format!("{}/rccl_telemetry_gpu_node_001_*.json", g.arg());
    let s: Value =
        serde_json::from_slice(&run(&["summary", "--json", &pattern]).stdout).expect("json");
    assert_eq!(s["files"], 2, "ranks 8 and 9 are on gpu_node_001");
    let one = g.files()[0].clone();
    let s: Value =
        serde_json::from_slice(&run(&["summary", "--json", one.to_str().expect("utf-8")]).stdout)
            .expect("json");
    assert_eq!(s["files"], 1);
    // Host names contain '_': they must come from the JSON, not from splitting the file name.
    assert_eq!(s["devices"][0]["host"], "gpu_node_000");
    let out = run(&["summary", &format!("{}/nothing_*.json", g.arg())]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("matches no file"), "{}", stderr(&out));
}
