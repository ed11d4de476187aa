//! The report plots a version-2 run's latency from the log-scale histogram on a log axis
//! (ticks at powers of ten, evenly spaced), says which histogram each figure came from, and
//! keeps the linear plot, labelled with its bucket width, for version-1 files.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};
use rccl_telemetry_tool::stats::fmt_ns;
use serde_json::Value;

/// Each figure of kind `kind`: its SVG's (x, text) of every <text> element, and its caption.
fn figures(html: &str, kind: &str) -> Vec<(Vec<(f64, String)>, String)> {
    html.split(&format!("data-chart=\"{kind}\">"))
        .skip(1)
        .map(|f| {
            let f = f.split("</figure>").next().unwrap();
            let texts = f
                .split("<text")
                .skip(1)
                .filter_map(|t| {
                    let (attrs, rest) = t.split_once('>')?;
                    let x = attrs
                        .split("x=\"")
                        .nth(1)?
                        .split('"')
                        .next()?
                        .parse::<f64>()
                        .ok()?;
                    Some((
                        x,
                        rest.split("</text>")
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_string(),
                    ))
                })
                .collect();
            let cap = f
                .split("<figcaption>")
                .nth(1)
                .and_then(|c| c.split("</figcaption>").next())
                .unwrap_or("")
                .to_string();
            (texts, cap)
        })
        .collect()
}

fn report(g: &GenRun) -> (String, Value) {
    let p = g.path().join("report.html");
    let out = run(&["report", "-o", p.to_str().unwrap(), g.arg()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!std::fs::read_to_string(&p)
        .unwrap()
        .contains("could not be drawn"));
    let s: Value = serde_json::from_slice(&run(&["summary", "--json", g.arg()]).stdout).unwrap();
    (std::fs::read_to_string(p).unwrap(), s)
}

/// The decade ticks of a log-axis figure, as (x, exponent): labels equal to fmt_ns(10^e).
fn decade_ticks(texts: &[(f64, String)]) -> Vec<(f64, i32)> {
    texts
        .iter()
        .filter_map(|(x, t)| {
            (0..=11)
                .find(|e| fmt_ns(10f64.powi(*e)) == *t)
                .map(|e| (*x, e))
        })
        .collect()
}

#[test]
fn version_2_report_plots_the_log_scale_histogram_on_a_log_axis() {
    let g = gen(GenOptions {
        ranks: 8,
        seed: 12,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    to_version2(&g);
    let (html, s) = report(&g);
    // The summary table gives the log-scale percentiles (the summary's p50) and no linear row.
    let p50 = s["log_latency"]["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["q"] == 0.5)
        .and_then(|p| p["estimate_ns"].as_f64())
        .expect("the summary's log-scale p50");
    assert!(
        html.contains("<td>Latency (log-scale, within") && !html.contains("<td>Latency (bucket"),
        "summary table rows"
    );
    assert!(
        html.contains(&format!("p50 {}  p90", fmt_ns(p50))),
        "p50 {p50}"
    );
    // Every histogram plot comes from the log-scale histogram; no linear one is left.
    assert_eq!(
        html.matches("data-chart=\"latency-run\"").count(),
        0,
        "a linear run plot in a version-2 report"
    );
    assert_eq!(
        html.matches("data-chart=\"latency-device\"").count(),
        0,
        "a linear device plot in a version-2 report"
    );
    let run_figs = figures(&html, "latency-run-log");
    let dev_figs = figures(&html, "latency-device-log");
    assert_eq!(run_figs.len(), 1);
    assert!(!dev_figs.is_empty());
    let buckets = s["log_latency"]["buckets"]
        .as_array()
        .expect("log_latency.buckets");
    let lo = buckets
        .iter()
        .map(|b| b[0].as_u64().unwrap())
        .min()
        .unwrap() as f64;
    let hi = buckets
        .iter()
        .map(|b| b[1].as_u64().unwrap_or(b[0].as_u64().unwrap()))
        .max()
        .unwrap() as f64;
    for (i, (texts, cap)) in run_figs.iter().chain(dev_figs.iter()).enumerate() {
        assert!(
            texts.iter().any(|(_, t)| t.contains("log-scale histogram")),
            "figure {i}: title does not name the histogram: {texts:?}"
        );
        assert!(
            cap.contains("log-scale histogram")
                && cap.contains("relative error &lt;= 12.5%")
                && cap.contains("log latency axis"),
            "figure {i}: {cap}"
        );
        assert!(!cap.contains("bucket width"), "figure {i}: {cap}");
        let ticks = decade_ticks(texts);
        assert!(
            ticks.len() >= 2,
            "figure {i}: decade ticks {ticks:?} in {texts:?}"
        );
        // Consecutive powers of ten, left to right, evenly spaced: a log axis.
        assert!(
            ticks
                .windows(2)
                .all(|w| w[1].1 == w[0].1 + 1 && w[1].0 > w[0].0),
            "figure {i}: {ticks:?}"
        );
        let gap = ticks[1].0 - ticks[0].0;
        assert!(
            ticks
                .windows(2)
                .all(|w| ((w[1].0 - w[0].0) - gap).abs() <= 1.5),
            "figure {i}: uneven decades {ticks:?}"
        );
        // No other x labels: the bucket-edge labels of the linear plot are gone.
        assert!(
            !texts.iter().any(|(_, t)| t == "\u{221e}"),
            "figure {i}: a linear open-bucket label"
        );
        if i == 0 {
            // The run's axis spans its buckets.
            assert!(
                10f64.powi(ticks[0].1) <= lo.max(1.0) && 10f64.powi(ticks.last().unwrap().1) >= hi,
                "{ticks:?} vs {lo}..{hi}"
            );
        }
    }
    // The heat map's columns are the log-scale histogram's too, on decade ticks, and it says
    // so; the linear buckets are not drawn.
    let hm = figures(&html, "latency-heatmap");
    assert_eq!(hm.len(), 1);
    assert!(
        hm[0].1.contains("log-scale histogram") && !hm[0].1.contains("bucket width"),
        "{}",
        hm[0].1
    );
    let ticks = decade_ticks(&hm[0].0);
    assert!(
        ticks.len() >= 2
            && ticks
                .windows(2)
                .all(|w| w[1].1 == w[0].1 + 1 && w[1].0 > w[0].0),
        "{ticks:?}"
    );
    assert!(!hm[0].0.iter().any(|(_, t)| t.starts_with("&lt;")));
    // Only the device a finding names gets a histogram of its own: the planted tail.
    let p = g
        .planted
        .iter()
        .find(|p| p.kind == Plant::Tail)
        .expect("tail planted");
    assert_eq!(
        dev_figs.len(),
        1,
        "an unflagged device's histogram is drawn"
    );
    assert!(
        dev_figs[0]
            .1
            .contains(&format!("{}:{} device {}", p.host, p.pid, p.device_id)),
        "{}",
        dev_figs[0].1
    );
}

#[test]
fn version_1_report_keeps_the_linear_plot_labelled_with_its_bucket_width() {
    let g = gen(GenOptions {
        ranks: 8,
        seed: 12,
        plants: vec![Plant::Tail],
        ..Default::default()
    });
    let (html, s) = report(&g);
    assert!(s.get("log_latency").is_none());
    // All there is is the linear histogram: the summary table gives its figures.
    assert!(
        html.contains("<td>Latency (bucket") && !html.contains("<td>Latency (log-scale"),
        "summary table rows"
    );
    assert!(
        !html.contains("data-chart=\"latency-run-log\"")
            && !html.contains("data-chart=\"latency-device-log\"")
    );
    let w = fmt_ns(s["latency"][0]["histogram_interval_ns"].as_u64().unwrap() as f64);
    let run_figs = figures(&html, "latency-run");
    let dev_figs = figures(&html, "latency-device");
    assert_eq!(run_figs.len(), 1);
    assert!(!dev_figs.is_empty());
    for (i, (texts, cap)) in run_figs.iter().chain(dev_figs.iter()).enumerate() {
        assert!(
            cap.contains("linear histogram") && cap.contains(&format!("bucket width {w}")),
            "figure {i}: {cap}"
        );
        assert!(!cap.contains("log-scale"), "figure {i}: {cap}");
        if i == 0 {
            // Bucket-edge ticks: 0, one width, ..., and the open end.
            let labels: Vec<&str> = texts.iter().map(|t| t.1.as_str()).collect();
            assert!(
                labels.contains(&"0")
                    && labels.contains(&w.as_str())
                    && labels.contains(&"\u{221e}"),
                "{labels:?}"
            );
        }
    }
}
