//! A directory mixing this library's files (v1) with files of RCCL's in-tree engine
//! (intree-1.0, fixtures written by hand from INTREE_FORMAT.md) through every command.

use crate::common::*;
use rccl_telemetry_tool::generate::GenOptions;
use rccl_telemetry_tool::intree::LIMITATIONS;
use serde_json::Value;

/// 6 generated v1 ranks (with hw_samples) and 2 in-tree files (one with hw_samples).
fn mixed() -> GenRun {
    let g = gen(GenOptions {
        ranks: 6,
        seed: 5,
        samples: 3,
        ..Default::default()
    });
    std::fs::copy(
        intree_fixture("rccl_telemetry_n1_1000_42.json"),
        g.path().join("rccl_telemetry_n1_1000_42.json"),
    )
    .unwrap();
    std::fs::copy(
        intree_fixture("sampled_rccl_telemetry_n3_1000_45.json"),
        g.path().join("rccl_telemetry_n3_1000_45.json"),
    )
    .unwrap();
    g
}

fn json(args: &[&str]) -> Value {
    let out = run(args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stderr(&out)))
}

#[test]
fn summary_shows_the_format_per_file_and_keeps_local_times_out_of_the_span() {
    let g = mixed();
    let s = json(&["summary", "--json", g.arg()]);
    assert_eq!(s["files"], 8);
    assert_eq!(s["formats"]["v1"], 6);
    assert_eq!(s["formats"]["intree-1.0"], 2);
    assert_eq!(s["files_without_wall_clock"], 2);
    let devs = s["devices"].as_array().unwrap();
    let fmt_of = |host: &str| {
        devs.iter()
            .find(|d| d["host"] == host)
            .map(|d| d["format"].clone())
    };
    assert_eq!(fmt_of("n1"), Some(Value::from("intree-1.0")));
    assert_eq!(fmt_of("n3"), Some(Value::from("intree-1.0")));
    assert_eq!(fmt_of("gpu_node_000"), Some(Value::from("v1")));
    // The span comes from the v1 files only (UTC); the in-tree local times are not in it.
    assert!(
        s["start_time"].as_str().unwrap().ends_with('Z'),
        "{}",
        s["start_time"]
    );

    let t = stdout(&run(&["summary", "--wide", g.arg()]));
    assert!(t.contains("format intree-1.0 x2, v1 x6"), "{t}");
    assert!(t.contains("Note: 2 of 8 files are in-tree"), "{t}");
    assert!(t.contains("CLOCK_MONOTONIC"), "{t}");
    let row = t
        .lines()
        .find(|l| l.contains(" n1 "))
        .unwrap_or_else(|| panic!("no n1 row:\n{t}"));
    assert!(row.contains("intree-1.0"), "{row}");
    // Fitted to a terminal, a mixed run keeps the format column.
    let out = std::process::Command::new(bin())
        .args(["summary", g.arg()])
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    let t = stdout(&out);
    assert!(
        t.lines()
            .any(|l| l.contains("format") && l.contains("rank")),
        "{t}"
    );
}

#[test]
fn check_validates_each_format_by_its_own_rules_and_names_the_in_tree_limits() {
    let g = mixed();
    let out = run(&["check", g.arg()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let e = stderr(&out);
    assert!(e.contains("checked 8 files: 8 valid"), "{e}");
    assert!(e.contains("2 in-tree (intree-1.0) files"), "{e}");
    for l in LIMITATIONS {
        assert!(e.contains(l), "limitation not printed: {l}\n{e}");
    }
    let r = json(&["check", "--json", g.arg()]);
    assert_eq!(r["files_intree"], 2);
    assert_eq!(
        r["intree_format_limitations"].as_array().unwrap().len(),
        LIMITATIONS.len()
    );
    // A v1-only run says nothing about the in-tree format.
    let v1 = gen(GenOptions {
        ranks: 3,
        seed: 5,
        ..Default::default()
    });
    assert!(!stderr(&run(&["check", v1.arg()])).contains("in-tree"));

    // A counter reset (negative delta) and a file broken by an unescaped host name, beside the others.
    std::fs::copy(
        intree_fixture("reset_rccl_telemetry_n1_1000_44.json"),
        g.path().join("rccl_telemetry_n1_1000_44.json"),
    )
    .unwrap();
    std::fs::copy(
        intree_fixture("quote_rccl_telemetry_n2_1000_43.json"),
        g.path().join("rccl_telemetry_n2_1000_43.json"),
    )
    .unwrap();
    let r = json(&["check", "--json", g.arg()]);
    assert_eq!(r["files"], 10);
    assert_eq!(r["files_unreadable"], 1);
    let v = r["violations"].as_array().unwrap();
    assert!(
        v.iter()
            .any(|x| x["path"] == "/devices/0/hw_counters/oos_drop_count"
                && x["message"].as_str().unwrap().contains("negative delta")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|x| x["kind"] == "unreadable"
                && x["message"].as_str().unwrap().contains("host name")),
        "{v:?}"
    );
    assert_eq!(run(&["check", g.arg()]).status.code(), Some(1));
    // The other commands skip the unreadable file with its reason and read the rest (exit 4:
    // an input was skipped).
    let out = run(&["summary", "--json", g.arg()]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("host name"), "{}", stderr(&out));
}

#[test]
fn outliers_export_and_report_read_both_formats() {
    let g = mixed();
    let out = run(&["outliers", "--json", g.arg()]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["ranks"], 8);
    assert!(o["devices"].as_u64().unwrap() >= 8);
    assert!(matches!(
        run(&["outliers", g.arg()]).status.code(),
        Some(0 | 1)
    ));

    // CSV: a format column; the in-tree rows (hw samples too) say intree-1.0.
    let out = run(&["export", "--format", "csv", g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut r = csv::Reader::from_reader(out.stdout.as_slice());
    let h = r.headers().unwrap().clone();
    let col = |n: &str| {
        h.iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("column {n}"))
    };
    let (cf, ch, cs) = (col("format"), col("host"), col("scope"));
    let mut seen = std::collections::BTreeSet::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        let want = if rec[ch].starts_with("gpu_node") {
            "v1"
        } else {
            "intree-1.0"
        };
        assert_eq!(&rec[cf], want, "{rec:?}");
        seen.insert((rec[ch].to_string(), rec[cs].to_string()));
    }
    assert!(
        seen.contains(&("n3".into(), "hw_sample".into())),
        "in-tree hw_samples exported"
    );
    assert!(seen.contains(&("n1".into(), "qp".into())));

    let out = run(&["export", "--format", "ndjson", g.arg()]);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["format"] == "intree-1.0")
            && lines.iter().all(|l| l["format"].is_string())
    );

    let out = run(&["export", "--format", "prometheus", g.arg()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("host=\"n1\""),
        "in-tree file missing from the exposition"
    );

    let html_path = g.path().join("report.html");
    let out = run(&["report", "-o", html_path.to_str().unwrap(), g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("intree-1.0 x2, v1 x6"), "formats row");
    assert!(html.contains("id=\"format-note\""));
    let origin = html
        .split("id=\"time-origin\"")
        .nth(1)
        .expect("time origin stated")
        .split("</p>")
        .next()
        .unwrap();
    assert!(
        origin.contains("CLOCK_MONOTONIC") && origin.contains("1 in-tree file"),
        "{origin}"
    );
    assert!(origin.contains("run's first sample"), "{origin}");
}
