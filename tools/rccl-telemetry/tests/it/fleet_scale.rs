//! Fleet-sized runs (1,024 and 4,096 ranks): `summary`, `check` and `outliers` print one
//! screen (counts and distributions first, then the rows that matter, planted anomalies
//! among them); `--all` and `--json` still hold every row.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Planted, PLANTS};
use serde_json::Value;
use std::process::{Command, Output};

/// Runs the binary as a 100-column terminal would see it.
fn run100(args: &[&str]) -> Output {
    let out = Command::new(bin())
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .expect("run rccl-telemetry");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn widest(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// Every anomaly `generate --plant all` plants (without hw_samples).
fn planted_fleet(ranks: usize) -> GenRun {
    gen(GenOptions {
        ranks,
        seed: 1,
        plants: PLANTS
            .iter()
            .filter(|p| **p != "samples_dropped")
            .map(|p| p.to_string())
            .collect(),
        ..Default::default()
    })
}

/// The plants that move a figure the summary shows (bytes, latency, errors, counters).
const SUMMARY_PLANTS: [&str; 10] = [
    "tail",
    "skew",
    "cq_errors",
    "untracked",
    "slot_miss",
    "cnp",
    "pfc",
    "drops",
    "retransmit",
    "out_of_sequence",
];

fn row_label(p: &Planted) -> String {
    format!("{}:{} dev {}", p.host, p.pid, p.device_id)
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
        .filter(|p| SUMMARY_PLANTS.contains(&p.kind.as_str()))
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
    let skew = g.planted.iter().find(|p| p.kind == "skew").unwrap();
    assert!(s["fleet"]["stand_out"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["who"] == row_label(skew).as_str()));

    // --all: today's table, one row per rank and device.
    let all = stdout(&run100(&["summary", "--all", g.arg()]));
    let table_rows = all.lines().filter(|l| l.starts_with("│ gpu_node_")).count();
    assert_eq!(table_rows, 4096, "--all lists every row");
    for d in devices.iter().step_by(97) {
        let rank = format!("{}:{}", d["host"].as_str().unwrap(), d["pid"]);
        assert!(all.contains(&rank), "{rank} missing from --all");
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
        plants: vec!["tail".into()],
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
