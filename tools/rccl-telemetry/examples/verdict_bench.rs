//! `make verdict-bench`: the labelled verdict benchmark (`rccl_telemetry_tool::verdict_bench`).
//! Generates every applicable run of the grid (classes x sizes x noise models x seeds) under
//! WORK, one at a time per worker, asks `outliers` about each, and prints precision and recall
//! per class against the targets; `--json FILE` writes the figures (bench/verdict-results.json).
//!
//! Then the scenarios (`verdict_bench::scenario`): every class on the rail, ring, tree and
//! all-to-all topologies from 2 to 4,096 ranks, planted by the generator or by editing healthy
//! files, every row judged (a healthy neighbour's latency tail is a wrong row), in a second
//! table.
//!
//! Usage: verdict_bench WORK [--json FILE] [--seeds N] [--scenarios-only]
//! Exit status: 0 when every target is met, 1 when one is missed, 2 on a failure.

use rayon::prelude::*;
use rccl_telemetry_tool::verdict_bench::scenario::{self, Planting, Scenario, PLANTINGS};
use rccl_telemetry_tool::verdict_bench::{grid, missed, render, run_case, score, Case, NOISES};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// NICs and NICs per host: 3 hosts of one NIC to 64 hosts of eight.
const SIZES: [(usize, usize); 4] = [(3, 1), (12, 4), (64, 8), (128, 8)];
/// The largest size, under jitter and for one seed (all-to-all: 512 files of 504 QPs, 211 MB).
const LARGEST: (usize, usize) = (512, 8);

/// The scenarios' sizes (ranks, ranks per host): 2 ranks, a rail of four hosts, two hosts of
/// eight, four of eight, 32 hosts; all-to-all's largest is 128 (its links grow with the square).
const SCENARIO_SIZES: [(usize, usize); 5] = [(2, 1), (4, 1), (16, 8), (32, 8), (256, 8)];
const ALLTOALL_SIZES: [(usize, usize); 5] = [(2, 1), (4, 1), (16, 8), (32, 8), (128, 8)];
const SCENARIO_NOISES: [&str; 3] = ["none", "jitter", "deschedule"];
/// 4,096 ranks (512 hosts of 8) on the rail, ring and tree shapes, under jitter, seed 1.
const HUGE: (usize, usize) = (4096, 8);
const HUGE_PLANTINGS: [Planting; 7] = [
    Planting::Healthy,
    Planting::Generated("slow_nic"),
    Planting::NicBoth,
    Planting::NicTail,
    Planting::Link,
    Planting::Host,
    Planting::AttrsTclass,
];

/// Every scenario of the benchmark.
fn scenarios(seeds: &[u64]) -> Vec<Scenario> {
    let mut v = scenario::matrix(
        &["rail", "ring", "tree"],
        &SCENARIO_SIZES,
        &PLANTINGS,
        &SCENARIO_NOISES,
        seeds,
    );
    v.extend(scenario::matrix(
        &["alltoall"],
        &ALLTOALL_SIZES,
        &PLANTINGS,
        &SCENARIO_NOISES,
        seeds,
    ));
    v.extend(scenario::matrix(
        &["rail", "ring", "tree"],
        &[HUGE],
        &HUGE_PLANTINGS,
        &["jitter"],
        &[1],
    ));
    v
}

/// Runs the scenarios under WORK and prints their table; the table's JSON and the targets
/// it misses.
fn run_scenarios(
    work: &std::path::Path,
    seeds: &[u64],
) -> Result<(serde_json::Value, Vec<String>), String> {
    let list = scenarios(seeds);
    let t0 = Instant::now();
    let out: Vec<Result<_, String>> = list
        .par_iter()
        .enumerate()
        .map(|(i, s)| {
            let dir = work.join(format!("scenario{i}"));
            let r = scenario::run(s, &dir);
            let _ = std::fs::remove_dir_all(&dir);
            r
        })
        .collect();
    let verdicts: Vec<scenario::Verdict> = out.into_iter().collect::<Result<_, _>>()?;
    let t = scenario::score(&verdicts);
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "
Scenarios: {} runs (rail, ring and tree at {}; all-to-all at {}; noise {}; seeds 1..{}; {}/{} on rail, ring and tree under jitter, seed 1) in {secs:.0} s\n",
        verdicts.len(),
        sizes_text(&SCENARIO_SIZES),
        sizes_text(&ALLTOALL_SIZES),
        SCENARIO_NOISES.join(", "),
        seeds.len(),
        HUGE.0,
        HUGE.1
    );
    print!("{}", scenario::render(&t));
    for v in verdicts.iter().filter(|v| !v.right()) {
        let s = &v.scenario;
        let rows: Vec<String> = v
            .rows
            .iter()
            .map(|r| {
                format!(
                    "{} {} ({}{})",
                    r.kind,
                    r.culprit,
                    r.sure,
                    if r.wrong { ", wrong" } else { "" }
                )
            })
            .collect();
        println!(
            "  missed or wrong: {} {} {}/{} seed {} noise {}: expected {:?}; rows [{}]",
            s.planting.name(),
            s.topology,
            s.nics,
            s.per_host,
            s.seed,
            s.noise,
            v.expected
                .iter()
                .map(|e| e.1[0].as_str())
                .collect::<Vec<_>>(),
            rows.join("; ")
        );
    }
    let miss = scenario::missed(&t);
    let json = serde_json::json!({
        "what": "scenarios: every class on rail, ring, tree and all-to-all, planted by the generator or by editing healthy files, every row judged",
        "seconds": secs,
        "targets": {"precision": scenario::MIN_PRECISION, "recall": scenario::MIN_RECALL},
        "missed": miss,
        "score": t,
    });
    Ok((json, miss))
}

fn sizes_text(s: &[(usize, usize)]) -> String {
    s.iter()
        .map(|(n, p)| format!("{n}/{p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The generated grid (every class x size x noise model x seed, all-to-all): its table, its
/// JSON and the targets it misses.
fn run_grid(
    work: &std::path::Path,
    seeds: u64,
) -> Result<(serde_json::Value, Vec<String>), String> {
    let seed_list: Vec<u64> = (1..=seeds).collect();
    let mut cases: Vec<Case> = grid(&SIZES, &NOISES, &seed_list);
    cases.extend(grid(&[LARGEST], &["jitter"], &[1]));
    let t0 = Instant::now();
    let outs: Vec<Result<_, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            let dir = work.join(format!("run{i}"));
            let r = run_case(c, &dir);
            let _ = std::fs::remove_dir_all(&dir);
            r
        })
        .collect();
    let ok: Vec<_> = outs.into_iter().collect::<Result<_, _>>()?;
    let s = score(&ok);
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} runs ({} sizes from {} to {} NICs, noise models {}, seeds 1..{seeds}; {}/{} NICs under jitter, seed 1) in {secs:.0} s\n",
        ok.len(),
        SIZES.len() + 1,
        SIZES[0].0,
        LARGEST.0,
        NOISES.join(", "),
        LARGEST.0,
        LARGEST.1
    );
    print!("{}", render(&s));
    for o in ok.iter().filter(|o| {
        if o.case.class.plant.is_none() {
            o.findings > 0
        } else {
            !o.named() || o.rows.iter().any(|r| !r.2)
        }
    }) {
        println!(
            "  missed or wrong: {} {}/{} seed {} noise {}: rows {:?}",
            o.case.class.name, o.case.nics, o.case.per_host, o.case.seed, o.case.noise, o.rows
        );
    }
    let mut miss = missed(&s);
    if s.healthy_runs < rccl_telemetry_tool::verdict_bench::MIN_HEALTHY_RUNS {
        miss.push(format!("{} healthy runs", s.healthy_runs));
    }
    let v = serde_json::json!({
        "what": "verdict benchmark: generated runs with one planted culprit (or none) under noise, scored per class",
        "date": std::env::var("VERDICT_BENCH_DATE").ok(),
        "commit": std::env::var("VERDICT_BENCH_COMMIT").ok(),
        "seconds": secs,
        "targets": {"precision": rccl_telemetry_tool::verdict_bench::MIN_PRECISION, "recall": rccl_telemetry_tool::verdict_bench::MIN_RECALL, "healthy_runs": rccl_telemetry_tool::verdict_bench::MIN_HEALTHY_RUNS},
        "missed": miss,
        "score": s,
    });
    Ok((v, miss))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().map(PathBuf::from) else {
        eprintln!("usage: verdict_bench WORK [--json FILE] [--seeds N] [--scenarios-only]");
        return ExitCode::from(2);
    };
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seeds: u64 = opt("--seeds").and_then(|s| s.parse().ok()).unwrap_or(3);
    let grid = if args.iter().any(|a| a == "--scenarios-only") {
        Ok((serde_json::Value::Null, Vec::new()))
    } else {
        run_grid(&work, seeds)
    };
    // The scenarios take two seeds: their matrix is forty times the grid's.
    let scenario_seeds: Vec<u64> = (1..=seeds.min(2)).collect();
    let both = grid.and_then(|g| Ok((g, run_scenarios(&work, &scenario_seeds)?)));
    let ((mut v, grid_miss), (scenarios, scenario_miss)) = match both {
        Ok(x) => x,
        Err(e) => {
            eprintln!("verdict_bench: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = opt("--json") {
        if v.is_null() {
            v = serde_json::json!({});
        }
        if let Some(o) = v.as_object_mut() {
            o.insert("scenarios".into(), scenarios);
        }
        if let Err(e) = std::fs::write(
            &path,
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
        ) {
            eprintln!("verdict_bench: cannot write {path}: {e}");
            return ExitCode::from(2);
        }
    }
    let miss: Vec<String> = grid_miss.into_iter().chain(scenario_miss).collect();
    if miss.is_empty() {
        println!("\nEvery target met.");
        ExitCode::SUCCESS
    } else {
        println!("\nTargets missed: {}", miss.join("; "));
        ExitCode::from(1)
    }
}
