//! Parses the same per-rank files into the tool's model with serde_json, simd-json and
//! sonic-rs, one thread, the files read into memory first (so that no parser waits on the
//! disk), several rounds each, the parsers interleaved round by round, and checks that every
//! parser gives the same model (compared as the JSON it serialises back to).
//!
//! usage: parser-bench DIR [ROUNDS]   (DIR: rccl_telemetry_*.json files)

use rccl_telemetry_format::read::TelemetryFile;
use std::time::Instant;

type Parse = fn(&[u8], &mut Vec<u8>) -> Result<TelemetryFile, String>;

fn with_serde_json(b: &[u8], _: &mut Vec<u8>) -> Result<TelemetryFile, String> {
    serde_json::from_slice(b).map_err(|e| e.to_string())
}

fn with_simd_json(b: &[u8], scratch: &mut Vec<u8>) -> Result<TelemetryFile, String> {
    // simd-json parses in place: it needs a mutable copy of the bytes (counted in its time).
    scratch.clear();
    scratch.extend_from_slice(b);
    simd_json::serde::from_slice(scratch).map_err(|e| e.to_string())
}

fn with_sonic_rs(b: &[u8], _: &mut Vec<u8>) -> Result<TelemetryFile, String> {
    sonic_rs::from_slice(b).map_err(|e| e.to_string())
}

const PARSERS: [(&str, Parse); 3] = [
    ("serde_json", with_serde_json),
    ("simd-json", with_simd_json),
    ("sonic-rs", with_sonic_rs),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: parser-bench DIR [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut files: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("the directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rccl_telemetry_") && n.ends_with(".json"))
        })
        .map(|p| std::fs::read(p).expect("a readable file"))
        .collect();
    files.sort();
    let bytes: usize = files.iter().map(Vec::len).sum();
    if files.is_empty() {
        eprintln!("parser-bench: no rccl_telemetry_*.json in {dir}");
        std::process::exit(2);
    }
    // The same model from every parser, file by file.
    let mut scratch = Vec::new();
    let mut differ = 0usize;
    for f in &files {
        let want = serde_json::to_string(&with_serde_json(f, &mut scratch).expect("serde_json"))
            .expect("serialise");
        for (name, parse) in &PARSERS[1..] {
            match parse(f, &mut scratch) {
                Ok(m) if serde_json::to_string(&m).expect("serialise") == want => {}
                Ok(_) => {
                    differ += 1;
                    eprintln!("parser-bench: {name} gives another model for a file");
                }
                Err(e) => {
                    differ += 1;
                    eprintln!("parser-bench: {name} fails on a file: {e}");
                }
            }
        }
    }
    let mut times = vec![Vec::new(); PARSERS.len()];
    for round in 0..rounds {
        for k in 0..PARSERS.len() {
            let i = (k + round) % PARSERS.len();
            let parse = PARSERS[i].1;
            let t = Instant::now();
            for f in &files {
                std::hint::black_box(parse(f, &mut scratch).expect("parsed once already"));
            }
            times[i].push(t.elapsed().as_secs_f64());
        }
    }
    println!(
        "{} files, {:.1} MB, {rounds} rounds, one thread; median of the rounds (min .. max)",
        files.len(),
        bytes as f64 / 1e6
    );
    let base = median(times[0].clone());
    for (i, (name, _)) in PARSERS.iter().enumerate() {
        let m = median(times[i].clone());
        let lo = times[i].iter().copied().fold(f64::INFINITY, f64::min);
        let hi = times[i].iter().copied().fold(0.0, f64::max);
        println!(
            "  {name:<11} {m:7.3} s ({lo:.3} .. {hi:.3})  {:6.1} MB/s  x{:.2} of serde_json's time",
            bytes as f64 / 1e6 / m,
            m / base
        );
    }
    println!("models differing from serde_json's: {differ}");
    if differ > 0 {
        std::process::exit(1);
    }
}
