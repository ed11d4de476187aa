//! Prometheus text (validated by promtool) and the tidy CSV / NDJSON (loaded by DuckDB).
//! Tests that need an external tool print a SKIP line when it is absent; CI installs them.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, RunKind};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};

fn sample_run() -> GenRun {
    gen(GenOptions {
        ranks: 24,
        seed: 12,
        samples: 4,
        plants: Plant::of(RunKind::Flat),
        ..Default::default()
    })
}

#[test]
fn prometheus_text_follows_the_conventions() {
    let g = sample_run();
    let out = run(&["export", "--format", "prometheus", g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut label_names = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(
                types.insert(name.into(), kind.into()).is_none(),
                "TYPE {name} twice"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series value");
        assert!(value.parse::<f64>().is_ok() || value == "+Inf", "{line}");
        assert!(seen.insert(series.to_string()), "duplicate series {series}");
        let name = series.split('{').next().expect("name");
        let family = types
            .keys()
            .filter(|f| {
                name == f.as_str()
                    || name
                        .strip_prefix(f.as_str())
                        .is_some_and(|s| ["_bucket", "_count", "_sum"].contains(&s))
            })
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("{name} has no TYPE line before it"));
        if types[family] == "counter" {
            assert!(
                family.ends_with("_total"),
                "counter {family} must end in _total"
            );
        }
        if let Some(labels) = series.split_once('{').map(|(_, l)| l.trim_end_matches('}')) {
            for kv in labels.split("\",") {
                label_names.insert(kv.split('=').next().expect("label").to_string());
            }
        }
    }
    // One set of series per rank (host and pid), as the library's live textfile; device and
    // channel series by default, per-QP series only with --level qp; never a file or process.
    for needed in ["host", "pid", "device", "hw_type", "channel"] {
        assert!(
            label_names.contains(needed),
            "label {needed} missing: {label_names:?}"
        );
    }
    for forbidden in ["qp", "file", "process"] {
        assert!(
            !label_names.contains(forbidden),
            "label {forbidden} found: {label_names:?}"
        );
    }
    // Base units.
    assert!(types.contains_key("rccl_telemetry_tx_bytes_total"));
    assert_eq!(
        types
            .get("rccl_telemetry_wqe_completion_seconds")
            .map(String::as_str),
        Some("histogram")
    );
    assert!(
        !types
            .keys()
            .any(|k| k.contains("_ns") || k.contains("nanoseconds")),
        "{types:?}"
    );
    // The planted -1 is absent rather than exported as a negative count.
    assert!(
        !text
            .lines()
            .any(|l| !l.starts_with('#') && l.ends_with(" -1")),
        "a -1 leaked into the exposition"
    );
    // Totals agree with the summary.
    let s: serde_json::Value =
        serde_json::from_slice(&run(&["summary", "--json", g.arg()]).stdout).expect("json");
    let tx: f64 = text
        .lines()
        .filter(|l| l.starts_with("rccl_telemetry_tx_bytes_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(tx, s["tx_bytes"].as_f64().unwrap());
}

#[test]
fn promtool_accepts_the_exposition() {
    if !have("promtool") {
        return skip(
            "promtool_accepts_the_exposition",
            "promtool not installed (Debian package prometheus)",
        );
    }
    let g = sample_run();
    for level in ["device", "channel", "qp"] {
        let text = run(&[
            "export",
            "--format",
            "prometheus",
            "--level",
            level,
            g.arg(),
        ])
        .stdout;
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn promtool");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&text)
            .expect("write to promtool");
        let out = child.wait_with_output().expect("promtool");
        assert!(
            out.status.success(),
            "promtool check metrics failed at --level {level}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // It must also reject a broken exposition, or the check above proves nothing.
    let mut bad = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    bad.stdin
        .take()
        .expect("stdin")
        .write_all(b"# TYPE x counter\nx{a=\"1\" 3\n")
        .expect("write");
    assert!(!bad.wait().expect("wait").success());
}

#[test]
fn csv_round_trips_through_the_csv_crate_with_the_file_totals() {
    let g = sample_run();
    let out = run(&["export", "--format", "csv", g.arg()]);
    assert_eq!(out.status.code(), Some(0));
    let mut r = csv::Reader::from_reader(out.stdout.as_slice());
    let headers = r.headers().expect("header").clone();
    let col = |n: &str| {
        headers
            .iter()
            .position(|h| h == n)
            .unwrap_or_else(|| panic!("column {n}"))
    };
    let (scope, metric, value) = (col("scope"), col("metric"), col("value"));
    let mut tx = 0u64;
    let mut rows = 0;
    for rec in r.records() {
        let rec = rec.expect("record");
        assert_eq!(rec.len(), headers.len(), "rectangular");
        rows += 1;
        if &rec[scope] == "device" && &rec[metric] == "tx_bytes" {
            tx += rec[value].parse::<u64>().expect("integer");
        }
        if !rec[value].is_empty() {
            assert!(
                rec[value].parse::<i64>().expect("integer value") >= 0,
                "negative value in {rec:?}"
            );
        }
    }
    let files: u64 = g
        .files()
        .iter()
        .map(|p| {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            v["devices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["tx_bytes"].as_u64().unwrap())
                .sum::<u64>()
        })
        .sum();
    assert_eq!(tx, files);
    // The levels nest: fewer rows at the device level.
    let dev = run(&["export", "--format", "csv", "--level", "device", g.arg()]);
    let dev_rows = stdout(&dev).lines().count() - 1;
    assert!(dev_rows < rows, "{dev_rows} < {rows}");
    // NDJSON has the same rows.
    let nd = run(&["export", "--format", "ndjson", g.arg()]);
    let nd_text = stdout(&nd);
    assert_eq!(nd_text.lines().count(), rows);
    for l in nd_text.lines().take(50) {
        let v: serde_json::Value = serde_json::from_str(l).expect("each line is JSON");
        assert!(v.is_object());
    }
}

#[test]
fn duckdb_loads_csv_and_ndjson_and_the_totals_match() {
    let py = if have("python3") { "python3" } else { "python" };
    let ok = Command::new(py)
        .args(["-c", "import duckdb"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return skip(
            "duckdb_loads_csv_and_ndjson_and_the_totals_match",
            "python3 with duckdb not installed (pip install duckdb)",
        );
    }
    let g = sample_run();
    let csv = g.path().join("run.csv");
    let nd = g.path().join("run.ndjson");
    for (fmt, p) in [("csv", &csv), ("ndjson", &nd)] {
        let out = run(&[
            "export",
            "--format",
            fmt,
            "-o",
            p.to_str().unwrap(),
            g.arg(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/load_tidy.py");
    let out = Command::new(py)
        .args([script, g.arg(), csv.to_str().unwrap(), nd.to_str().unwrap()])
        .output()
        .expect("python");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).matches(" ok").count() >= 18);
}
