//! What a person sees first and reads off the report: the page opens with the verdict and the
//! findings and keeps the run's summary for after the evidence; a flagged device stays a named
//! band of the latency heat map however many thin rows there are; the byte axis ticks at round
//! numbers of a binary unit; the hardware table separates thousands in every figure.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};

fn report(g: &GenRun) -> String {
    let html = g.path().join("report.html");
    let out = run(&["report", "-o", html.to_str().expect("utf-8"), g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
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

/// The ids of the page's sections, in page order.
fn sections(html: &str) -> Vec<String> {
    html.split("<h2 id=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next().map(str::to_owned))
        .collect()
}

fn texts(fragment: &str) -> Vec<String> {
    fragment
        .split("<text")
        .skip(1)
        .filter_map(|t| {
            let (_, rest) = t.split_once('>')?;
            Some(rest.split("</text>").next()?.trim().to_string())
        })
        .collect()
}

#[test]
fn the_page_opens_with_the_findings_then_the_evidence_then_the_run() {
    let g = gen(GenOptions {
        ranks: 24,
        seed: 8,
        samples: 6,
        plants: vec![Plant::Tail, Plant::Skew, Plant::Cnp],
        ..Default::default()
    });
    let html = report(&g);
    let ids = sections(&html);
    let at = |id: &str| {
        ids.iter()
            .position(|x| x == id)
            .unwrap_or_else(|| panic!("no section {id}: {ids:?}"))
    };
    // The verdict (what is wrong, in a few lines and rows) and then the findings table.
    assert_eq!(ids[..2], ["verdict", "outliers"], "{ids:?}");
    for evidence in ["latency", "skew", "hw", "samples"] {
        assert!(at(evidence) < at("summary"), "{ids:?}");
    }
    assert!(at("summary") < at("devices"), "{ids:?}");
    // Nothing is drawn before the findings table, and a line of links names every section.
    let findings = html.find("<table id=\"findings\">").expect("findings");
    assert!(
        !html[..findings].contains("<svg"),
        "a chart before the findings"
    );
    let nav = section(&html, "<nav>", "</nav>");
    for id in &ids {
        assert!(
            nav.contains(&format!("href=\"#{id}\"")),
            "{id} not in {nav}"
        );
    }
    // Of the per-device histograms, only the flagged device's is drawn.
    let tail = g.planted.iter().find(|p| p.kind == Plant::Tail).unwrap();
    let devs: Vec<&str> = html
        .split("data-chart=\"latency-device\">")
        .skip(1)
        .collect();
    assert_eq!(devs.len(), 1);
    assert!(devs[0].contains(&format!(
        "{}:{} device {}",
        tail.host, tail.pid, tail.device_id
    )));
}

/// 600 ranks, one used device each: beyond --max-devices (512), rows about a pixel high; the
/// tail's device is a row of its own at the top, a line of text high, and named in red.
#[test]
fn a_flagged_device_is_a_band_of_its_own_among_hundreds_of_thin_rows() {
    let g = gen(GenOptions {
        ranks: 600,
        seed: 9,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    let html = report(&g);
    let fig = section(&html, "data-chart=\"latency-heatmap\"", "</figure>");
    let tail = g.planted.iter().find(|p| p.kind == Plant::Tail).unwrap();
    let name = format!("{}:{} d{}", tail.host, tail.pid, tail.device_id);
    let label = fig
        .split("<text")
        .find(|t| t.contains(&format!(">{name}<")))
        .expect("the flagged row is named");
    assert!(label.contains("fill=\"#b00\""), "{label}");
    let heights: Vec<(f64, bool)> = fig
        .split("<rect")
        .skip(1)
        .filter(|r| r.contains("fill=\"rgb(") && !r.contains("stroke"))
        .map(|r| {
            let h: f64 = r
                .split("height=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (h, r.contains("fill=\"rgb(255,"))
        })
        .collect();
    let red: Vec<f64> = heights.iter().filter(|h| h.1).map(|h| h.0).collect();
    let blue: Vec<f64> = heights.iter().filter(|h| !h.1).map(|h| h.0).collect();
    assert!(!red.is_empty() && red.iter().all(|h| *h >= 14.0), "{red:?}");
    assert!(blue.iter().all(|h| *h < 3.0), "thin rows expected");
    // The flagged band comes first: the first cell drawn is red.
    assert!(heights[0].1);
}

#[test]
fn byte_ticks_are_round_numbers_of_one_binary_unit() {
    let g = gen(GenOptions {
        ranks: 16,
        seed: 3,
        plants: vec![Plant::Skew],
        ..Default::default()
    });
    let html = report(&g);
    let fig = section(&html, "data-chart=\"byte-skew\"", "</figure>");
    let ticks: Vec<(f64, String)> = texts(fig)
        .iter()
        .filter_map(|t| {
            let (v, unit) = t.split_once(' ')?;
            ["B", "KiB", "MiB", "GiB", "TiB"]
                .contains(&unit)
                .then(|| Some((v.parse::<f64>().ok()?, unit.to_string())))?
        })
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    assert!(ticks.iter().all(|t| t.1 == ticks[0].1), "{ticks:?}");
    let step = ticks[1].0 - ticks[0].0;
    let mantissa = step / 10f64.powf(step.log10().floor());
    assert!(
        [1.0, 2.0, 2.5, 5.0]
            .iter()
            .any(|m| (m - mantissa).abs() < 1e-9),
        "step {step} in {ticks:?}"
    );
    assert!(
        ticks
            .windows(2)
            .all(|w| (w[1].0 - w[0].0 - step).abs() < 1e-9),
        "{ticks:?}"
    );
}

#[test]
fn every_figure_of_the_hardware_table_separates_thousands() {
    let g = gen(GenOptions {
        ranks: 16,
        seed: 2,
        plants: vec![Plant::Cnp, Plant::Drops],
        ..Default::default()
    });
    let html = report(&g);
    let table = section(&html, "<h2 id=\"hw\">", "</table>");
    let cells: Vec<&str> = table
        .split("<td class=\"n\">")
        .skip(1)
        .filter_map(|c| c.split("</td>").next())
        .collect();
    assert!(cells.len() > 20, "{}", cells.len());
    assert!(
        cells.iter().any(|c| c.contains(',')),
        "no figure reached a thousand"
    );
    for c in &cells {
        for part in c.split('/') {
            let digits = part.trim_start_matches('-');
            let whole = digits.split('.').next().unwrap();
            assert!(
                whole.split(',').enumerate().all(|(i, g)| g.len() <= 3
                    && (i == 0 || g.len() == 3)
                    && g.chars().all(|ch| ch.is_ascii_digit())),
                "{c:?}"
            );
        }
    }
}
