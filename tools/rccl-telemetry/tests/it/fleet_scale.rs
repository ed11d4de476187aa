//! Fleet-sized runs (1,024 and 4,096 ranks): `summary`, `check` and `outliers` print one
//! screen (counts and distributions first, then the rows that matter, planted anomalies
//! among them); `--all` and `--json` still hold every row.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, Planted};
use serde_json::Value;
use std::process::Output;

/// Runs the binary as a 100-column terminal would see it.
fn run100(args: &[&str]) -> Output {
    run_cols(args, Some("100"))
}

/// Every anomaly `generate --plant all` plants (without hw_samples).
fn planted_fleet(ranks: usize) -> GenRun {
    gen(GenOptions {
        ranks,
        seed: 1,
        plants: Plant::all(false, 0),
        ..Default::default()
    })
}

/// The plants that move a figure the summary shows (bytes, latency, errors, counters).
const SUMMARY_PLANTS: [Plant; 10] = [
    Plant::Tail,
    Plant::Skew,
    Plant::CqErrors,
    Plant::Untracked,
    Plant::SlotMiss,
    Plant::Cnp,
    Plant::Pfc,
    Plant::Drops,
    Plant::Retransmit,
    Plant::OutOfSequence,
];

/// How the summary names a row: host:NIC, the pid beside it.
fn row_label(p: &Planted) -> String {
    format!("{}:mlx5_{} (pid {})", p.host, p.device_id, p.pid)
}

/// The fleet view of a planted run: at most 50 lines of at most 100 columns, the planted rows
/// among those that stand out, and the way to the full table.
fn assert_one_screen(g: &GenRun, ranks: usize) {
    let text = stdout(&run100(&["summary", g.arg()]));
    let lines = text.lines().count();
    assert!(
        lines <= 50,
        "{ranks} ranks: {lines} lines (more than a screen):\n{text}"
    );
    assert!(widest(&text) <= 100, "{ranks} ranks: too wide:\n{text}");
    assert!(!text.contains('┆'), "no per-row table by default:\n{text}");
    let (_, stand_out) = text
        .split_once("Rows that stand out")
        .unwrap_or_else(|| panic!("no stand-out section:\n{text}"));
    for p in g
        .planted
        .iter()
        .filter(|p| SUMMARY_PLANTS.contains(&p.kind))
    {
        assert!(
            stand_out.contains(&row_label(p)),
            "planted {} at {} is not among the rows that stand out:\n{text}",
            p.kind,
            row_label(p)
        );
    }
    for want in [
        "rank x device rows",
        "tx bytes",
        "p99 latency",
        "CQ errors",
        "Hosts: ",
        "--all",
        "--json",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
}

#[test]
fn summary_of_4096_ranks_fits_one_screen_and_all_lists_every_row() {
    let g = planted_fleet(4096);
    assert_one_screen(&g, 4096);

    // --json: every row, today's keys, and the aggregates under "fleet".
    let s: Value = serde_json::from_slice(&run100(&["summary", "--json", g.arg()]).stdout)
        .expect("summary --json");
    let devices = s["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 4096);
    assert_eq!(s["fleet"]["rows"], 4096);
    assert_eq!(s["fleet"]["hosts"]["hosts"], 512);
    let tx = s["fleet"]["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "tx_bytes")
        .expect("tx distribution");
    let mut txs: Vec<u64> = devices
        .iter()
        .map(|d| d["tx_bytes"].as_u64().unwrap())
        .collect();
    txs.sort_unstable();
    assert_eq!(tx["min"].as_f64().unwrap(), txs[0] as f64);
    assert_eq!(tx["max"].as_f64().unwrap(), txs[4095] as f64);
    assert_eq!(tx["p50"].as_f64().unwrap(), txs[2047] as f64);
    let skew = g.planted.iter().find(|p| p.kind == Plant::Skew).unwrap();
    assert!(s["fleet"]["stand_out"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["who"] == row_label(skew).as_str()));

    // outliers: counts by kind first, then the strongest rows, two lines each, in one screen.
    let text = stdout(&run100(&["outliers", g.arg()]));
    assert!(text.lines().count() <= 50, "outliers: {text}");
    assert!(widest(&text) <= 100, "outliers: {text}");
    assert!(
        text.lines().nth(1).unwrap().starts_with("By kind: "),
        "{text}"
    );
    for p in g.planted.iter().filter(|p| {
        SUMMARY_PLANTS.contains(&p.kind) || [Plant::Unavailable, Plant::Snapshot].contains(&p.kind)
    }) {
        // Rows name the device host:NIC.
        let nic = format!("{}:mlx5_{}", p.host, p.device_id);
        assert!(
            text.contains(&nic),
            "outliers lacks planted {} at {nic}:\n{text}",
            p.kind
        );
    }
    let rows: usize = text
        .split(" rows on ")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("N findings in M rows");
    let all = stdout(&run100(&["outliers", "--all", g.arg()]));
    let numbered = all
        .lines()
        .filter(|l| {
            // A row's first line has its severity: first (# is left out at 100 columns), or
            // after the row's number (the evidence under the table, where it would be narrow).
            l.strip_prefix('│').is_some_and(|r| {
                r.split('┆')
                    .take(2)
                    .any(|c| ["critical", "warning", "info"].contains(&c.trim()))
            })
        })
        .count();
    assert_eq!(numbered, rows, "outliers --all has every row:\n{all}");

    // --all: today's table, one row per rank and device.
    let all = stdout(&run100(&["summary", "--all", g.arg()]));
    let table_rows = all.lines().filter(|l| l.starts_with("│ gpu_node_")).count();
    assert_eq!(table_rows, 4096, "--all lists every row");
    for d in devices.iter().step_by(97) {
        let nic = format!(
            "{}:{}",
            d["host"].as_str().unwrap(),
            d["roce_device"].as_str().unwrap()
        );
        assert!(all.contains(&nic), "{nic} missing from --all");
    }
}

#[test]
fn summary_of_1024_ranks_fits_one_screen_and_small_runs_keep_the_table() {
    let g = planted_fleet(1024);
    assert_one_screen(&g, 1024);

    // 32 rows: the table, as before (and nothing of the fleet view).
    let small = gen(GenOptions {
        ranks: 32,
        seed: 3,
        ..Default::default()
    });
    let text = stdout(&run100(&["summary", small.arg()]));
    let rows = text
        .lines()
        .filter(|l| l.starts_with("│ gpu_node_"))
        .count();
    assert_eq!(rows, 32, "{text}");
    assert!(!text.contains("Rows that stand out"), "{text}");
    // 33 rows: the fleet view.
    let over = gen(GenOptions {
        ranks: 33,
        seed: 3,
        ..Default::default()
    });
    let text = stdout(&run100(&["summary", over.arg()]));
    assert!(text.contains("33 rank x device rows"), "{text}");
    assert!(!text.contains('┆'), "{text}");
}

#[test]
fn version2_runs_show_the_log_scale_figures_and_linear_only_on_request() {
    let g = gen(GenOptions {
        ranks: 40,
        seed: 5,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    to_version2(&g);
    let text = stdout(&run100(&["summary", g.arg()]));
    assert!(text.contains("p99 latency "), "{text}");
    assert!(!text.contains("(linear)"), "{text}");
    assert!(!text.contains("Latency (bucket"), "{text}");
    assert!(text.contains("--linear adds"), "{text}");
    let text = stdout(&run100(&["summary", "--linear", g.arg()]));
    assert!(text.contains("p99 latency (linear)"), "{text}");
    assert!(text.contains("Latency (bucket"), "{text}");
    // The table's p50/p99 columns follow: log-scale by default, linear with --linear.
    let s: Value = serde_json::from_slice(&run100(&["summary", "--json", g.arg()]).stdout).unwrap();
    let d = &s["devices"][0];
    let (host, pid) = (d["host"].as_str().unwrap(), d["pid"].as_i64().unwrap());
    let row = |text: &str| -> String {
        text.lines()
            .find(|l| {
                l.contains(&format!("{host}:{pid}"))
                    || (l.contains(host) && l.contains(&pid.to_string()))
            })
            .unwrap_or_else(|| panic!("no row for {host}:{pid}:\n{text}"))
            .to_string()
    };
    let fmt = |v: &Value| rccl_telemetry_tool::stats::fmt_ns(v.as_f64().unwrap());
    let log_p50 = fmt(&d["log_latency"]["percentiles"][0]["estimate_ns"]);
    let lin_p50 = fmt(&d["latency"]["percentiles"][0]["estimate_ns"]);
    assert_ne!(
        log_p50, lin_p50,
        "the test needs the two estimates to differ"
    );
    let all = stdout(&run100(&["summary", "--all", "--wide", g.arg()]));
    assert!(row(&all).contains(&log_p50), "{}", row(&all));
    let all = stdout(&run100(&[
        "summary",
        "--all",
        "--wide",
        "--linear",
        g.arg(),
    ]));
    assert!(row(&all).contains(&lin_p50), "{}", row(&all));
}

#[test]
fn check_of_4096_files_counts_first_and_groups_the_violations() {
    let g = gen(GenOptions {
        ranks: 4096,
        seed: 2,
        ..Default::default()
    });
    let files = g.files();
    // 30 truncated files and 30 with a negative byte count; the other 4,036 are healthy.
    let mut touched = Vec::new();
    for (i, f) in files
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 64 == 5)
        .take(60)
    {
        if touched.len() < 30 {
            std::fs::write(f, b"{\"version\": ").unwrap();
        } else {
            let mut v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            v["devices"][0]["tx_bytes"] = Value::from(-5);
            std::fs::write(f, serde_json::to_vec(&v).unwrap()).unwrap();
        }
        touched.push((i, f.clone()));
    }
    let j: Value =
        serde_json::from_slice(&run100(&["check", "--json", g.arg()]).stdout).expect("check json");
    let violations = j["violations"].as_array().unwrap().len();
    assert!(
        violations > 32,
        "the test needs more than a screen: {violations}"
    );

    let out = run100(&["check", g.arg()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.lines().count() <= 50, "{text}");
    assert!(widest(&text) <= 100, "{text}");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("Checked 4096 files: 4036 valid, 30 with violations, 30 unreadable;"),
        "{text}"
    );
    assert!(text.contains(&format!("{violations} violations")), "{text}");
    assert!(
        text.contains("30 files: ") && text.contains(" more"),
        "{text}"
    );
    // Nothing about a healthy file.
    let healthy = files[0].file_name().unwrap().to_str().unwrap();
    assert!(!text.contains(healthy), "{text}");

    // --all: one line per violation, as before.
    let all = stdout(&run100(&["check", "--all", g.arg()]));
    assert_eq!(all.lines().count(), violations, "{all}");
}
