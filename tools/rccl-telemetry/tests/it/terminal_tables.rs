//! The default tables of `summary` and `outliers` fit the terminal (COLUMNS when stdout is
//! not one, 100 when unknown); --wide keeps every column; findings of one kind on one device
//! fold into one row that names the counters.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, RunKind};
use serde_json::Value;

fn planted_run() -> GenRun {
    gen(GenOptions {
        ranks: 64,
        seed: 7,
        samples: 4,
        plants: Plant::of(RunKind::Flat),
        ..Default::default()
    })
}

#[test]
fn default_tables_fit_columns_or_100() {
    let g = planted_run();
    for cmd in ["summary", "outliers"] {
        let wide = stdout(&run_cols(&[cmd, "--wide", g.arg()], None));
        assert!(
            widest(&wide) > 100,
            "{cmd} --wide is narrow already; the test would prove nothing"
        );
        for w in [60usize, 80, 100, 132] {
            let t = stdout(&run_cols(&[cmd, g.arg()], Some(&w.to_string())));
            assert!(
                widest(&t) <= w,
                "{cmd} at COLUMNS={w}: a line of {} chars:\n{t}",
                widest(&t)
            );
            assert!(t.lines().count() > 5, "{cmd}: {t}");
        }
        let t = stdout(&run_cols(&[cmd, g.arg()], None));
        assert!(
            widest(&t) <= 100,
            "{cmd} without COLUMNS: {} chars",
            widest(&t)
        );
        let t = stdout(&run_cols(&[cmd, g.arg()], Some("not-a-number")));
        assert!(
            widest(&t) <= 100,
            "{cmd} with a bad COLUMNS: {} chars",
            widest(&t)
        );
    }
}

#[test]
fn wide_keeps_every_column_and_the_fitted_table_says_what_it_left_out() {
    let g = planted_run();
    let wide = stdout(&run_cols(
        &["summary", "--wide", "--all", g.arg()],
        Some("80"),
    ));
    let header = wide
        .lines()
        .find(|l| l.contains("WQEs sent") && l.contains('┆'))
        .expect("wide header");
    for h in [
        "host",
        "pid",
        "process",
        "roce",
        "hw moved",
        "slot miss",
        "CQ err",
        "untracked",
        "p99",
        "max",
    ] {
        assert!(header.contains(h), "--wide lacks {h}: {header}");
    }
    let fitted = stdout(&run_cols(&["summary", "--all", g.arg()], Some("80")));
    let header = fitted
        .lines()
        .find(|l| l.contains("nic") && l.contains('┆'))
        .expect("fitted header");
    assert!(
        !header.contains("WQEs sent") && !header.contains("process"),
        "{header}"
    );
    assert!(
        fitted.contains("columns left out to fit 80 columns"),
        "{fitted}"
    );
    // The rows are all there: every device's host:NIC in the fitted table.
    let s: Value =
        serde_json::from_slice(&run_cols(&["summary", "--json", g.arg()], None).stdout).unwrap();
    for d in s["devices"].as_array().unwrap() {
        let nic = format!(
            "{}:{}",
            d["host"].as_str().unwrap(),
            d["roce_device"].as_str().unwrap()
        );
        assert!(
            fitted.contains(&nic),
            "{nic} missing from the fitted summary"
        );
    }
}

#[test]
fn findings_of_one_kind_on_one_device_fold_into_one_row_naming_the_counters() {
    let g = gen(GenOptions {
        ranks: 20,
        seed: 9,
        ..Default::default()
    });
    // Every hardware counter of one rank's devices reads -1 (not available).
    let victim = g.files()[3].clone();
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&victim).unwrap()).unwrap();
    let rank = format!("{}:{}", v["host_name"].as_str().unwrap(), v["process_id"]);
    let mut names = Vec::new();
    for d in v["devices"].as_array_mut().unwrap() {
        for (k, c) in d["hw_counters"].as_object_mut().unwrap() {
            if !k.starts_with("delta_") {
                *c = Value::from(-1);
                names.push(k.clone());
            }
        }
    }
    std::fs::write(&victim, serde_json::to_string(&v).unwrap()).unwrap();

    let o: Value =
        serde_json::from_slice(&run_cols(&["outliers", "--json", g.arg()], None).stdout).unwrap();
    let mine: Vec<&Value> = o["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rank"] == rank.as_str() && f["kind"] == "counter_unavailable")
        .collect();
    assert!(
        mine.len() >= 5,
        "expected one JSON finding per counter, got {}",
        mine.len()
    );

    // The row names the device as every row does: host:NIC.
    let nic = mine[0]["culprit"].as_str().unwrap().to_string();
    assert_eq!(
        nic,
        format!(
            "{}:{}",
            v["host_name"].as_str().unwrap(),
            mine[0]["roce_device"].as_str().unwrap()
        )
    );
    let t = stdout(&run_cols(
        &["outliers", "--wide", "--top", "0", g.arg()],
        None,
    ));
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.contains(&nic) && l.contains("counter unavailable"))
        .collect();
    assert_eq!(rows.len(), 1, "one row for {} findings:\n{t}", mine.len());
    assert!(
        rows[0].contains(&format!("({} counters)", mine.len())),
        "{}",
        rows[0]
    );
    for f in &mine {
        let m = f["metric"].as_str().unwrap();
        assert!(rows[0].contains(m), "row does not name {m}: {}", rows[0]);
    }
    assert!(
        t.contains(&format!(
            "{} findings in",
            o["findings"].as_array().unwrap().len()
        )),
        "{t}"
    );
    assert!(!names.is_empty());
}
