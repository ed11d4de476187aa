//! The report's axes a person reads: the latency heat map names every device row (few
//! devices, 64 devices) and always the flagged ones; the byte-skew chart's device axis never
//! repeats a tick label (0, 0, 1, 1, 2, 2 was the bug).

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};
use serde_json::Value;

/// The text of every <text> element of the figure of kind `kind`.
fn figure_texts(html: &str, kind: &str) -> Vec<String> {
    let fig = html
        .split(&format!("data-chart=\"{kind}\">"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {kind} chart"))
        .split("</figure>")
        .next()
        .unwrap();
    fig.split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>').map(|(_, rest)| {
                rest.split("</text>")
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
        })
        .collect()
}

fn report(g: &GenRun) -> (String, Value) {
    let p = g.path().join("report.html");
    let out = run(&["report", "-o", p.to_str().unwrap(), g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s: Value = serde_json::from_slice(&run(&["summary", "--json", g.arg()]).stdout).unwrap();
    (std::fs::read_to_string(p).unwrap(), s)
}

#[test]
fn heat_map_names_every_row_and_skew_ticks_are_unique_integers() {
    for ranks in [2usize, 3, 5, 64] {
        let g = gen(GenOptions {
            ranks,
            seed: 4,
            plants: if ranks >= 5 {
                vec![Plant::Tail]
            } else {
                vec![]
            },
            ..Default::default()
        });
        let (html, s) = report(&g);
        let texts = figure_texts(&html, "latency-heatmap");
        let devs: Vec<String> = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["latency"]["samples"].as_u64().unwrap_or(0) > 0)
            .map(|d| {
                format!(
                    "{}:{} d{}",
                    d["host"].as_str().unwrap(),
                    d["pid"],
                    d["device_id"]
                )
            })
            .collect();
        assert!(!devs.is_empty());
        for d in &devs {
            let n = texts.iter().filter(|t| *t == d).count();
            assert_eq!(
                n, 1,
                "{ranks} ranks: heat-map row {d} labelled {n} times; labels {texts:?}"
            );
        }
        // The x axis names each latency bucket once.
        let buckets: Vec<&String> = texts
            .iter()
            .filter(|t| t.starts_with("&lt;") || t.starts_with("&gt;="))
            .collect();
        let mut uniq = buckets.clone();
        uniq.dedup();
        assert!(
            buckets.len() >= 2 && uniq.len() == buckets.len(),
            "{buckets:?}"
        );

        let ticks: Vec<i64> = figure_texts(&html, "byte-skew")
            .iter()
            .filter_map(|t| t.parse::<i64>().ok())
            .collect();
        assert!(!ticks.is_empty(), "{ranks} ranks: no device tick labels");
        assert!(
            ticks.windows(2).all(|w| w[0] < w[1]),
            "{ranks} ranks: repeated or unordered ticks {ticks:?}"
        );
        assert!(
            ticks
                .iter()
                .all(|t| *t >= 0 && (*t as usize) < devs.len().max(1)),
            "{ticks:?}"
        );
        assert!(ticks.len() <= 25, "{ticks:?}");
    }
}

#[test]
fn a_flagged_device_is_named_on_the_heat_map_even_when_rows_are_thin() {
    let g = gen(GenOptions {
        ranks: 240,
        seed: 6,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    let (html, _) = report(&g);
    let texts = figure_texts(&html, "latency-heatmap");
    let p = g
        .planted
        .iter()
        .find(|p| p.kind == Plant::Tail)
        .expect("tail planted");
    let want = format!("{}:{} d{}", p.host, p.pid, p.device_id);
    assert_eq!(
        texts.iter().filter(|t| **t == want).count(),
        1,
        "{want} not labelled once"
    );
    let mut names: Vec<&String> = texts.iter().filter(|t| t.contains(':')).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "a row labelled twice");
    assert!(n < 240, "thin rows are labelled every few rows, not all");
}
