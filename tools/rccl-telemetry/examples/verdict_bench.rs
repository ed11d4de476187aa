//! `make verdict-bench`: the labelled verdict benchmark (`rccl_telemetry_tool::verdict_bench`).
//! Generates every applicable run of the grid (classes x sizes x noise models x seeds) under
//! WORK, one at a time per worker, asks `outliers` about each, and prints precision and recall
//! per class against the targets; `--json FILE` writes the figures (bench/verdict-results.json).
//!
//! Usage: verdict_bench WORK [--json FILE] [--seeds N]
//! Exit status: 0 when every target is met, 1 when one is missed, 2 on a failure.

use rayon::prelude::*;
use rccl_telemetry_tool::verdict_bench::{grid, missed, render, run_case, score, Case, NOISES};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// NICs and NICs per host: 3 hosts of one NIC to 64 hosts of eight.
const SIZES: [(usize, usize); 4] = [(3, 1), (12, 4), (64, 8), (128, 8)];
/// The largest size, under jitter and for one seed (all-to-all: 512 files of 504 QPs, 211 MB).
const LARGEST: (usize, usize) = (512, 8);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().map(PathBuf::from) else {
        eprintln!("usage: verdict_bench WORK [--json FILE] [--seeds N]");
        return ExitCode::from(2);
    };
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seeds: u64 = opt("--seeds").and_then(|s| s.parse().ok()).unwrap_or(3);
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
    let mut ok = Vec::new();
    for o in outs {
        match o {
            Ok(o) => ok.push(o),
            Err(e) => {
                eprintln!("verdict_bench: {e}");
                return ExitCode::from(2);
            }
        }
    }
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
    let miss = missed(&s);
    if let Some(path) = opt("--json") {
        let v = serde_json::json!({
            "what": "verdict benchmark: generated runs with one planted culprit (or none) under noise, scored per class",
            "date": std::env::var("VERDICT_BENCH_DATE").ok(),
            "commit": std::env::var("VERDICT_BENCH_COMMIT").ok(),
            "seconds": secs,
            "targets": {"precision": rccl_telemetry_tool::verdict_bench::MIN_PRECISION, "recall": rccl_telemetry_tool::verdict_bench::MIN_RECALL, "healthy_runs": rccl_telemetry_tool::verdict_bench::MIN_HEALTHY_RUNS},
            "missed": miss,
            "score": s,
        });
        if let Err(e) = std::fs::write(
            &path,
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
        ) {
            eprintln!("verdict_bench: cannot write {path}: {e}");
            return ExitCode::from(2);
        }
    }
    if miss.is_empty() && s.healthy_runs >= rccl_telemetry_tool::verdict_bench::MIN_HEALTHY_RUNS {
        println!("\nEvery target met.");
        ExitCode::SUCCESS
    } else {
        println!("\nTargets missed: {}", miss.join("; "));
        ExitCode::from(1)
    }
}
