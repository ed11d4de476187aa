//! The report folds its findings the way `outliers` does, and stays one page at scale: beyond
//! its bounds it shows hosts, distributions and grouped charts, and says what it aggregated.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};
use rccl_telemetry_tool::report::scale::{DEVICE_TABLE_MAX, SKEW_MAX_COLUMNS};

fn report(g: &GenRun) -> String {
    let html = g.path().join("report.html");
    let out = run(&["report", "-o", html.to_str().expect("utf-8"), g.arg()]);
    // Exit 1 exactly when a finding is critical (the planted CQ errors).
    let critical = g.planted.iter().any(|p| p.kind == Plant::CqErrors);
    assert_eq!(
        out.status.code(),
        Some(i32::from(critical)),
        "{}",
        stderr(&out)
    );
    std::fs::read_to_string(&html).expect("report written")
}

/// The part of the page from `start` up to the next `end`.
fn section<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let s = html
        .find(start)
        .unwrap_or_else(|| panic!("{start} missing"));
    let rest = &html[s..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

#[test]
fn a_device_whose_counters_all_read_minus_one_is_one_row_naming_them() {
    let g = gen(GenOptions {
        ranks: 32,
        seed: 5,
        ..Default::default()
    });
    // Every hardware counter of one rank's devices reads -1 (not available).
    let victim = &g.files()[3];
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(victim).expect("read")).expect("json");
    let mut n_counters = 0;
    for d in v["devices"].as_array_mut().expect("devices") {
        for (_, c) in d["hw_counters"].as_object_mut().expect("hw_counters") {
            *c = serde_json::json!(-1);
        }
        n_counters = d["hw_counters"].as_object().expect("hw_counters").len();
    }
    assert!(n_counters > 5, "only {n_counters} counters to fold");
    std::fs::write(victim, serde_json::to_string(&v).expect("json")).expect("write");
    // Rows name the device host:NIC (the one device the rank drove).
    let used = v["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["tx_bytes"].as_u64().unwrap_or(0) > 0)
        .expect("a used device");
    let rank = format!(
        "{}:{}",
        v["host_name"].as_str().unwrap(),
        used["roce_device"].as_str().unwrap()
    );

    let html = report(&g);
    let table = section(&html, "<table id=\"findings\">", "</table>");
    let rows: Vec<&str> = table.split("<tr class=\"flag\">").skip(1).collect();
    let victim_rows: Vec<&&str> = rows.iter().filter(|r| r.contains(&rank)).collect();
    assert_eq!(
        victim_rows.len(),
        1,
        "{} rows for {rank}: {victim_rows:?}",
        victim_rows.len()
    );
    let row = victim_rows[0];
    assert!(row.contains("counter unavailable"), "{row}");
    assert!(
        row.contains("cnp_sent") && row.contains("out_of_sequence"),
        "{row}"
    );
    // The same rows as the CLI's folded table.
    let cli = stdout(&run(&["outliers", g.arg()]));
    let head = cli.lines().next().expect("headline");
    assert!(
        head.contains(&format!("in {} rows", rows.len())),
        "CLI says {head:?}, the page has {} rows",
        rows.len()
    );
    assert!(
        !html.contains("id=\"aggregated\""),
        "a small run is not aggregated"
    );
}

#[test]
fn beyond_the_device_bound_the_page_is_per_host_and_says_so() {
    let ranks = DEVICE_TABLE_MAX + 96;
    let g = gen(GenOptions {
        ranks,
        seed: 9,
        devices_per_rank: 1,
        plants: vec![Plant::Tail, Plant::Skew, Plant::CqErrors],
        ..Default::default()
    });
    let html = report(&g);
    let note = section(&html, "id=\"aggregated\"", "</p>");
    assert!(note.contains("one row per host"), "{note}");
    assert!(note.contains("byte-skew chart groups"), "{note}");
    assert!(html.contains("id=\"device-distributions\""));
    // One row per host (8 ranks a host), none per device but the flagged ones.
    let hosts = section(&html, "<table id=\"hosts\">", "</table>");
    assert_eq!(hosts.matches("<tr").count() - 1, ranks.div_ceil(8));
    let flagged = section(&html, "<table id=\"flagged-devices\">", "</table>");
    for p in &g.planted {
        assert!(
            flagged.contains(&format!(
                "<td>{}</td><td class=\"n\">{}</td>",
                p.host, p.pid
            )),
            "planted {} ({}:{}) not among the flagged devices",
            p.kind,
            p.host,
            p.pid
        );
    }
    assert!(flagged.matches("<tr").count() - 1 <= g.planted.len() + 8);
    // The skew chart: at most SKEW_MAX_COLUMNS columns, two marks each, and the flagged ones.
    let skew = section(&html, "data-chart=\"byte-skew\"", "</figure>");
    let circles = skew.matches("<circle").count();
    assert!(
        circles <= 2 * SKEW_MAX_COLUMNS + 2 * (g.planted.len() + 8),
        "{circles} marks in the skew chart"
    );
    assert!(
        circles >= 2 * (ranks / 2),
        "{circles} marks: columns missing"
    );
}
