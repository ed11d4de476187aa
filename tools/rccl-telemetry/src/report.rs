//! `report`: one self-contained HTML page (inline CSS and SVG, no script, no network) with the
//! summary, the outliers, the NIC-by-NIC heat map of the links (files with peers) and three kinds of chart: completion-latency histograms per device,
//! the hw_samples time series, and the byte skew across ranks.

use crate::load::Run;
use crate::model::parse_timestamp_ns;
use crate::outliers::OutlierReport;
use crate::stats::{fmt_bytes, fmt_count, fmt_ns};
use crate::summary::{fmt_percentile, rank_label, Summary};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub mod scale;

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const FLAG: RGBColor = RGBColor(214, 39, 40);
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREY: RGBColor = RGBColor(150, 150, 150);

type DrawResult<T> = Result<T, String>;

/// Drawing size of a chart that shares a row with one other (histograms, time series): the
/// page scales it to half its width (CSS), so text keeps about its drawn size on a wide screen.
const HALF: (u32, u32) = (660, 300);
/// Drawing width of a chart that has a row to itself (heat map, byte skew).
const WIDE_W: u32 = 1360;

fn e2s<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// A bar chart of one histogram (share of completions per bucket).
fn histogram_svg(
    title: &str,
    hist: &[u64],
    width_ns: u64,
    w: u32,
    h: u32,
    color: RGBColor,
) -> DrawResult<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let total: u64 = crate::stats::hist_total(hist).max(1);
        let shares: Vec<f64> = hist
            .iter()
            .map(|c| *c as f64 / total as f64 * 100.0)
            .collect();
        let ymax = shares.iter().cloned().fold(0.0f64, f64::max).max(1.0) * 1.1;
        let n = hist.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
            .map_err(e2s)?;
        // Ticks sit on bucket edges: bar b spans [b*w, (b+1)*w); the last bar is open-ended.
        let labels: Vec<String> = (0..=n)
            .map(|e| {
                if e == n {
                    "\u{221e}".to_string()
                } else if e == 0 {
                    "0".to_string()
                } else {
                    fmt_ns(e as f64 * width_ns as f64)
                }
            })
            .collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor()).abs() < 1e-9 && i < labels.len() {
                    labels[i].clone()
                } else {
                    String::new()
                }
            })
            .y_desc("% of completions")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(e2s)?;
        chart
            .draw_series(shares.iter().enumerate().map(|(b, s)| {
                Rectangle::new(
                    [(b as f64 + 0.08, 0.0), (b as f64 + 0.92, *s)],
                    color.filled(),
                )
            }))
            .map_err(e2s)?;
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// Where a latency sits on the log axis of [`log_histogram_svg`]: log10 of the ns (the axis
/// starts at 1 ns; the exact 0 ns bucket is drawn as a thin bar there).
fn log_x(ns: f64) -> f64 {
    ns.max(1.0).log10()
}

/// The decades the log axis of a log-scale histogram spans, as (first, last) exponents of
/// ten: from the decade of the lowest bucket to the one above the highest (at least one).
pub fn log_axis_decades(buckets: &[crate::model::LogBucket]) -> (i32, i32) {
    let lo = buckets
        .iter()
        .filter(|b| b.2 > 0)
        .map(|b| b.0)
        .min()
        .unwrap_or(1);
    let hi = buckets
        .iter()
        .filter(|b| b.2 > 0)
        .map(log_bucket_end)
        .fold(1.0f64, f64::max);
    let a = (log_x(lo as f64).floor() as i32).max(0);
    let b = (hi.log10().ceil() as i32).max(a + 1);
    (a, b)
}

/// The right edge of a log-scale bucket's bar: one past its inclusive upper bound; the open
/// last bucket is drawn 1/8 of its lower bound wide, like the buckets below it.
fn log_bucket_end(b: &crate::model::LogBucket) -> f64 {
    match b.1 {
        Some(hi) => hi as f64 + 1.0,
        None => b.0 as f64 * 1.125,
    }
}

/// The tick labels of the log axis: one per power of ten.
pub fn log_axis_labels(buckets: &[crate::model::LogBucket]) -> Vec<String> {
    let (a, b) = log_axis_decades(buckets);
    (a..=b).map(|e| fmt_ns(10f64.powi(e))).collect()
}

/// A bar chart of one log-scale histogram (share of completions per bucket) on a log latency
/// axis, ticks at powers of ten; each bar spans its bucket's bounds.
fn log_histogram_svg(
    title: &str,
    buckets: &[crate::model::LogBucket],
    w: u32,
    h: u32,
    color: RGBColor,
) -> DrawResult<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let total: u64 = buckets
            .iter()
            .fold(0u64, |s, b| s.saturating_add(b.2))
            .max(1);
        let shares: Vec<(f64, f64, f64)> = buckets
            .iter()
            .filter(|b| b.2 > 0)
            .map(|b| {
                (
                    log_x(b.0 as f64),
                    log_bucket_end(b).log10(),
                    b.2 as f64 / total as f64 * 100.0,
                )
            })
            .collect();
        let ymax = shares.iter().map(|s| s.2).fold(0.0f64, f64::max).max(1.0) * 1.1;
        let (a, b) = log_axis_decades(buckets);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            // Room for the last decade's label, centred on the right edge.
            .margin_right(24)
            .x_label_area_size(34)
            .y_label_area_size(44)
            .build_cartesian_2d(a as f64..b as f64, 0f64..ymax)
            .map_err(e2s)?;
        // plotters' own ticks on this axis would fall on fractions of a decade: label each
        // power of ten at its place instead.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("% of completions")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(e2s)?;
        let font = ("sans-serif", 11).into_font().color(&BLACK);
        for e in a..b {
            // Unlabelled minor ticks at 2..9 times each power of ten.
            for m in 2..10 {
                let (px, py) = chart.backend_coord(&(e as f64 + (m as f64).log10(), 0.0));
                root.draw(&PathElement::new(vec![(px, py), (px, py + 2)], BLACK))
                    .map_err(e2s)?;
            }
        }
        for e in a..=b {
            let (px, py) = chart.backend_coord(&(e as f64, 0.0));
            root.draw(&PathElement::new(vec![(px, py), (px, py + 4)], BLACK))
                .map_err(e2s)?;
            root.draw(&Text::new(
                fmt_ns(10f64.powi(e)),
                (px, py + 6),
                font.pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(e2s)?;
        }
        chart
            .draw_series(shares.iter().map(|(x0, x1, s)| {
                // Narrow buckets (the exact ones below 16 ns) still get a visible bar.
                let x1 = x1.max(x0 + 0.01);
                Rectangle::new([(*x0, 0.0), (x1, *s)], color.filled())
            }))
            .map_err(e2s)?;
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// What a log-scale histogram's figure says about where it came from.
pub const LOG_HIST_LABEL: &str =
    "log-scale histogram (wqe_completion_log_histogram), relative error <= 12.5%";

/// Devices x buckets: each row is one device's histogram, colour = share of its completions.
/// The smallest of 1, 2, 5, 10, 20, 50, ... that is at least `min`.
pub fn nice_step(min: f64) -> usize {
    let mut base = 1usize;
    loop {
        for m in [1, 2, 5] {
            if (base * m) as f64 >= min {
                return base * m;
            }
        }
        base = base.saturating_mul(10);
    }
}

/// Row height of the heat map: every row gets 12 px (room for its name) up to 100 devices;
/// beyond, the chart stays about 600 px high.
pub fn heatmap_row_height(n_rows: usize) -> f64 {
    if n_rows <= 100 {
        (600.0 / n_rows.max(1) as f64).clamp(12.0, 18.0)
    } else {
        (600.0 / n_rows as f64).max(1.0)
    }
}

/// Where the heat map labels its rows, as (y of the row centre, row index from the top):
/// every row while rows are at least 12 px high, else every `step`-th row; a flagged row is
/// always labelled (an unlabelled row nearer than 12 px to it is left out).
pub fn heatmap_label_rows(n_rows: usize, row_h: f64, flagged: &[bool]) -> Vec<(f64, usize)> {
    let step = nice_step(12.0 / row_h);
    let near = (12.0 / row_h).ceil() as usize;
    let is_flagged = |ri: usize| flagged.get(ri).copied().unwrap_or(false);
    let flagged_rows: Vec<usize> = (0..n_rows).filter(|ri| is_flagged(*ri)).collect();
    let mut rows: Vec<usize> = (0..n_rows)
        .step_by(step)
        .filter(|ri| is_flagged(*ri) || !flagged_rows.iter().any(|f| f.abs_diff(*ri) < near))
        .chain(flagged_rows.iter().copied())
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows.into_iter()
        .map(|ri| ((n_rows - 1 - ri) as f64 + 0.5, ri))
        .collect()
}

/// Tick positions of the byte-skew chart's device axis: integers only, at most about 20.
pub fn skew_ticks(n: usize) -> Vec<f64> {
    let step = nice_step(n as f64 / 20.0);
    (0..n).step_by(step).map(|i| i as f64).collect()
}

fn heatmap_svg(rows: &[(String, Vec<u64>, bool)], width_ns: u64) -> DrawResult<String> {
    let n_rows = rows.len().max(1);
    let n_b = rows.iter().map(|r| r.1.len()).max().unwrap_or(1).max(1);
    let row_h = heatmap_row_height(n_rows);
    let h = (row_h * n_rows as f64) as u32 + 90;
    let flags: Vec<bool> = rows.iter().map(|r| r.2).collect();
    let labelled = heatmap_label_rows(n_rows, row_h, &flags);
    let label_w = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 40) as u32
        * 7
        + 12;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDE_W, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Completion latency per device (row = device, colour = share of its completions)",
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(label_w)
            .build_cartesian_2d(0f64..n_b as f64, 0f64..n_rows as f64)
            .map_err(e2s)?;
        // Labels drawn where they belong (plotters' own ticks fall on "nice" values, not on row
        // or bucket centres): each labelled row's name at its centre, each bucket's edge below it.
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .draw()
            .map_err(e2s)?;
        let font = ("sans-serif", 11).into_font().color(&BLACK);
        for (y, ri) in &labelled {
            let (px, py) = chart.backend_coord(&(0.0, *y));
            let name = rows.get(*ri).map_or("", |r| r.0.as_str());
            root.draw(&Text::new(
                name.to_string(),
                (px - 6, py),
                font.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(e2s)?;
        }
        for b in 0..n_b {
            let label = if b + 1 == n_b {
                format!(">={}", fmt_ns(b as f64 * width_ns as f64))
            } else {
                format!("<{}", fmt_ns((b as f64 + 1.0) * width_ns as f64))
            };
            let (px, py) = chart.backend_coord(&(b as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                label,
                (px, py + 6),
                font.pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(e2s)?;
        }
        let mut cells = Vec::new();
        for (ri, (_, hist, flagged)) in rows.iter().enumerate() {
            let total: u64 = crate::stats::hist_total(hist).max(1);
            let y = (n_rows - 1 - ri) as f64;
            for (b, c) in hist.iter().enumerate() {
                let share = *c as f64 / total as f64;
                // Log scale so a 1% tail is visible next to an 80% mode.
                let t = if share <= 0.0 {
                    0.0
                } else {
                    ((share.log10() + 4.0) / 4.0).clamp(0.05, 1.0)
                };
                let col = if *flagged {
                    RGBColor(255, (255.0 * (1.0 - t)) as u8, (255.0 * (1.0 - t)) as u8)
                } else {
                    RGBColor(
                        (255.0 * (1.0 - t)) as u8,
                        (255.0 * (1.0 - 0.6 * t)) as u8,
                        255,
                    )
                };
                cells.push(Rectangle::new(
                    [(b as f64, y), (b as f64 + 1.0, y + 1.0)],
                    col.filled(),
                ));
            }
        }
        chart.draw_series(cells).map_err(e2s)?;
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// One device's line in a time-series chart: its label, (seconds, value) points, flagged.
type SeriesLine = (String, Vec<(f64, f64)>, bool);

/// One line per device for one sampled counter; flagged ranks in red, the rest grey.
fn series_svg(counter: &str, lines: &[SeriesLine]) -> DrawResult<String> {
    let xmax = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let ymax = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, HALF).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(counter, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(e2s)?;
        chart
            .configure_mesh()
            .x_desc("s since the first sample (see the time origin above)")
            .y_label_formatter(&|y| {
                if ymax < 10.0 {
                    format!("{y:.1}")
                } else {
                    fmt_count(y.max(0.0).round() as u64)
                }
            })
            .draw()
            .map_err(e2s)?;
        // Grey first so the flagged lines stay on top.
        for flagged in [false, true] {
            for (_, pts, f) in lines.iter().filter(|l| l.2 == flagged) {
                let style = if *f {
                    FLAG.stroke_width(2)
                } else {
                    GREY.mix(0.5).stroke_width(1)
                };
                let _ = f;
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), style))
                    .map_err(e2s)?;
            }
        }
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// tx and rx bytes per device in rank order, with the median; flagged devices in red.
fn skew_svg(
    points: &[(String, f64, f64, bool)],
    median_tx: f64,
    median_rx: f64,
) -> DrawResult<String> {
    let n = points.len().max(1);
    let ymax = points
        .iter()
        .map(|p| p.1.max(p.2))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.08;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDE_W, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Bytes per rank and device (blue tx, orange rx, dashed: median; red: flagged)",
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)
            .map_err(e2s)?;
        chart
            .configure_mesh()
            .x_desc("device, numbered in rank (host, pid) order")
            .x_labels(skew_ticks(n).len().max(2))
            // Devices are whole numbers: a tick between two of them gets no label (rounding
            // 0.5 and 1.5 would repeat 0, 0, 1, 1, 2, 2).
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 && *x >= 0.0 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| fmt_bytes(*y))
            .draw()
            .map_err(e2s)?;
        let r = if n > 200 { 2 } else { 3 };
        chart
            .draw_series(points.iter().enumerate().map(|(i, p)| {
                Circle::new(
                    (i as f64, p.1),
                    r,
                    if p.3 { FLAG.filled() } else { BLUE.filled() },
                )
            }))
            .map_err(e2s)?;
        chart
            .draw_series(points.iter().enumerate().map(|(i, p)| {
                TriangleMarker::new(
                    (i as f64, p.2),
                    r,
                    if p.3 { FLAG.filled() } else { ORANGE.filled() },
                )
            }))
            .map_err(e2s)?;
        for (m, c) in [(median_tx, BLUE), (median_rx, ORANGE)] {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(-0.5, m), (n as f64 - 0.5, m)],
                    6,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(e2s)?;
        }
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// Charts that get a row of the page to themselves; the others go two to a row.
const WIDE_CHARTS: [&str; 2] = ["latency-heatmap", "byte-skew"];

fn figure(out: &mut String, kind: &str, caption: &str, svg: DrawResult<String>) {
    match svg {
        Ok(svg) => {
            let size = if WIDE_CHARTS.contains(&kind) {
                "wide"
            } else {
                "half"
            };
            let _ = writeln!(out, "<figure class=\"chart {size}\" data-chart=\"{}\">{svg}<figcaption>{}</figcaption></figure>", esc(kind), esc(caption));
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"err\">chart {} could not be drawn: {}</p>",
                esc(kind),
                esc(&e)
            );
        }
    }
}

/// Rows of the folded findings table the page shows; the rest are counted by kind.
pub const REPORT_FINDING_ROWS: usize = 100;

/// "kind x count" for folded finding rows, most frequent kind first.
pub fn rows_by_kind(rows: &[crate::outliers::Row]) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *by.entry(r.kind).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{} x{n}", k.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders the whole page.
pub fn render(run: &Run, s: &Summary, o: &OutlierReport, max_devices: usize) -> String {
    let flagged: BTreeSet<(String, Option<u32>)> = o
        .findings
        .iter()
        .map(|f| (f.rank.clone(), f.device_id))
        .collect();
    let is_flagged = |rank: &str, dev: u32| flagged.contains(&(rank.to_string(), Some(dev)));
    // What the page shows aggregated instead of row by row (large runs), stated under the summary.
    let mut aggregated: Vec<String> = Vec::new();
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rccl-telemetry report</title>\n<style>\n");
    h.push_str(
        "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1400px}h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}\n\
         table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px}th{background:#f0f0f0}\n\
         td.n{text-align:right;font-variant-numeric:tabular-nums}tr.flag td{background:#fde0e0}.kv td:first-child{font-weight:bold}\n\
         figure.chart{display:inline-block;margin:6px;border:1px solid #eee;vertical-align:top;box-sizing:border-box}figcaption{font-size:11px;color:#555;padding:2px 6px;max-width:880px}\n\
         figure.half{width:calc(50% - 18px)}figure.wide{width:calc(100% - 14px)}figure.half svg,figure.wide svg{display:block;width:100%;height:auto}figure.half figcaption,figure.wide figcaption{max-width:none}\n\
         .note{font-size:12px;color:#555;max-width:1000px}.err{color:#b00}details{margin:.5em 0}\n\
         .hm figure{display:none}#hm-p99:checked~figure.hm-p99{display:inline-block}#hm-bytes:checked~figure.hm-bytes{display:inline-block}\n",
    );
    h.push_str("</style></head><body>\n<h1>rccl-telemetry report</h1>\n");

    // Summary.
    h.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"kv\">\n");
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(&v));
    };
    kv(
        "Rank files",
        format!("{} read, {} skipped", s.files, s.files_skipped),
    );
    kv(
        "Formats",
        s.formats
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    kv("Hosts", s.hosts.to_string());
    kv("Process", s.processes.join(", "));
    kv("Transport", s.transports.join(", "));
    kv(
        "Devices",
        format!(
            "{} used of {} registered; {}",
            s.devices_used,
            s.devices_registered,
            s.hw_types
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let (Some(a), Some(b)) = (&s.start_time, &s.end_time) {
        kv(
            "Time",
            format!("{a} .. {b} ({:.3} s)", s.duration_s.unwrap_or(0.0)),
        );
    }
    kv(
        "Bytes",
        format!(
            "tx {} / rx {}",
            fmt_bytes(s.tx_bytes as f64),
            fmt_bytes(s.rx_bytes as f64)
        ),
    );
    kv(
        "WQEs",
        format!(
            "{} sent, {} completed",
            fmt_count(s.num_wqe_sent),
            fmt_count(s.num_wqe_completed)
        ),
    );
    kv(
        "CQ errors / untracked QPs / slot misses",
        format!(
            "{} / {} / {}",
            fmt_count(s.num_cq_errors),
            fmt_count(s.num_qp_untracked),
            fmt_count(s.num_slot_miss)
        ),
    );
    kv(
        "latency_sample_interval",
        s.latency_sample_intervals
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    for l in &s.latency {
        kv(
            &format!(
                "Latency (bucket {})",
                fmt_ns(l.histogram_interval_ns as f64)
            ),
            format!(
                "p50 {}, p90 {}, p99 {}, p99.9 {}, max {} over {} sampled completions",
                fmt_percentile(l.latency.get(0.5)),
                fmt_percentile(l.latency.get(0.9)),
                fmt_percentile(l.latency.get(0.99)),
                fmt_percentile(l.latency.get(0.999)),
                l.latency.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
                fmt_count(l.latency.samples)
            ),
        );
    }
    h.push_str("</table>\n");
    if let Some(n) = crate::summary::format_note(s) {
        let _ = writeln!(h, "<p class=\"note\" id=\"format-note\">{}.</p>", esc(&n));
    }
    let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(s.percentile_method));
    h.push_str(AGGREGATED_MARK);

    // Outliers, folded as the CLI folds them: one row per kind and device, naming its metrics.
    let rows = crate::outliers::fold(&o.findings);
    let _ = writeln!(
        h,
        "<h2 id=\"outliers\">Outliers</h2>\n<p>{} findings in {} rows on {} of {} ranks (robust z &gt;= {}, median and MAD over {} used devices); one row per kind of finding and device, naming the counters it folds.</p>",
        o.findings.len(),
        rows.len(),
        o.ranks_flagged,
        o.ranks,
        o.threshold,
        o.devices
    );
    if !rows.is_empty() {
        let roce: BTreeMap<(&str, Option<u32>), &str> = o
            .findings
            .iter()
            .filter_map(|f| Some(((f.rank.as_str(), f.device_id), f.roce_device.as_deref()?)))
            .collect();
        h.push_str("<table id=\"findings\"><tr><th>#</th><th>score</th><th>finding</th><th>rank</th><th>device</th><th>evidence</th></tr>\n");
        for (i, r) in rows.iter().take(REPORT_FINDING_ROWS).enumerate() {
            let _ = writeln!(
                h,
                "<tr class=\"flag\"><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                i + 1,
                r.score,
                esc(&r.what),
                esc(&r.rank),
                r.device_id.map_or("-".into(), |d| format!(
                    "{d} ({})",
                    esc(roce.get(&(r.rank.as_str(), Some(d))).copied().unwrap_or(""))
                )),
                esc(&r.evidence)
            );
        }
        h.push_str("</table>\n");
        if rows.len() > REPORT_FINDING_ROWS {
            let rest = rows_by_kind(&rows[REPORT_FINDING_ROWS..]);
            let line = format!(
                "{} more rows not shown (the {REPORT_FINDING_ROWS} strongest are above): {}. `rccl-telemetry outliers --top 0` lists them all.",
                rows.len() - REPORT_FINDING_ROWS,
                rest
            );
            let _ = writeln!(
                h,
                "<p class=\"note\" id=\"findings-rest\">{}</p>",
                esc(&line)
            );
            aggregated.push(format!(
                "the outliers table shows the {REPORT_FINDING_ROWS} strongest of {} rows, the rest counted by kind",
                rows.len()
            ));
        }
    }

    // The NIC-by-NIC matrix (files with peers).
    h.push_str(&matrix_section(run));

    // Charts: latency.
    h.push_str("<h2 id=\"latency\">Completion latency</h2>\n");
    if let Some(l) = &s.log_latency {
        figure(
            &mut h,
            "latency-run-log",
            &format!(
                "All {} used devices with a {LOG_HIST_LABEL}; log latency axis; the last bucket (from 16.1 s) is open-ended{}.",
                l.devices,
                if l.devices_without > 0 { format!("; {} devices without one are in the linear plot", l.devices_without) } else { String::new() }
            ),
            log_histogram_svg(&format!("Whole run, log-scale histogram ({} devices)", l.devices), &l.buckets, HALF.0, HALF.1, BLUE),
        );
    }
    // The linear plot stays for runs (or the part of a mixed run) without the log-scale one.
    if s.log_latency.as_ref().is_none_or(|l| l.devices_without > 0) {
        for l in &s.latency {
            figure(
                &mut h,
                "latency-run",
                &format!("All used devices, linear histogram (wqe_completion_histogram), bucket width {}; the last bucket is open-ended.", fmt_ns(l.histogram_interval_ns as f64)),
                histogram_svg(&format!("Whole run ({} devices), bucket {}", l.devices, fmt_ns(l.histogram_interval_ns as f64)), &l.histogram, l.histogram_interval_ns, HALF.0, HALF.1, BLUE),
            );
        }
    }
    // Per-device: most of interest first (flagged, then by p99).
    let tail_flagged: BTreeSet<(String, Option<u32>)> = o
        .findings
        .iter()
        .filter(|f| f.kind == "latency_tail")
        .map(|f| (f.rank.clone(), f.device_id))
        .collect();
    let is_tail = |rank: &str, dev: u32| tail_flagged.contains(&(rank.to_string(), Some(dev)));
    let mut devs: Vec<(&crate::summary::DeviceRow, bool)> = s
        .devices
        .iter()
        .filter(|r| r.used && r.latency.samples > 0)
        .map(|r| (r, is_tail(&format!("{}:{}", r.host, r.pid), r.device_id)))
        .collect();
    devs.sort_by(|a, b| {
        let p = |r: &crate::summary::DeviceRow| r.latency.get(0.99).map_or(0.0, |p| p.estimate_ns);
        b.1.cmp(&a.1).then(p(b.0).total_cmp(&p(a.0)))
    });
    for (r, flagged) in devs.iter().take(6) {
        let tail = if *flagged {
            ", flagged: latency tail"
        } else {
            ""
        };
        if let (Some(lh), Some(ll)) = (&r.log_histogram, &r.log_latency) {
            figure(
                &mut h,
                "latency-device-log",
                &format!(
                    "{}:{} device {} ({}), {LOG_HIST_LABEL}, log latency axis; p99 {}{tail}",
                    r.host,
                    r.pid,
                    r.device_id,
                    r.roce_device,
                    fmt_percentile(ll.get(0.99))
                ),
                log_histogram_svg(
                    &format!(
                        "{}:{} dev {}, log-scale histogram",
                        r.host, r.pid, r.device_id
                    ),
                    lh,
                    HALF.0,
                    HALF.1,
                    if *flagged { FLAG } else { BLUE },
                ),
            );
            continue;
        }
        figure(
            &mut h,
            "latency-device",
            &format!(
                "{}:{} device {} ({}), linear histogram, bucket width {}; p99 {}{tail}",
                r.host,
                r.pid,
                r.device_id,
                r.roce_device,
                fmt_ns(r.histogram_interval_ns as f64),
                fmt_percentile(r.latency.get(0.99))
            ),
            histogram_svg(
                &format!("{}:{} dev {}", r.host, r.pid, r.device_id),
                &r.histogram,
                r.histogram_interval_ns,
                HALF.0,
                HALF.1,
                if *flagged { FLAG } else { BLUE },
            ),
        );
    }
    let widths: BTreeSet<u64> = devs.iter().map(|d| d.0.histogram_interval_ns).collect();
    if let Some(w) = widths.iter().next() {
        let eligible: Vec<&crate::summary::DeviceRow> = s
            .devices
            .iter()
            .filter(|r| r.used && r.latency.samples > 0 && r.histogram_interval_ns == *w)
            .collect();
        let tail =
            |r: &crate::summary::DeviceRow| is_tail(&format!("{}:{}", r.host, r.pid), r.device_id);
        // Beyond max_devices rows: every flagged device, then the first others in rank order.
        let n_tail = eligible.iter().filter(|r| tail(r)).count().min(max_devices);
        let mut others = max_devices - n_tail;
        let mut rows: Vec<(String, Vec<u64>, bool)> = eligible
            .iter()
            .filter(|r| {
                tail(r)
                    || (others > 0 && {
                        others -= 1;
                        true
                    })
            })
            .take(max_devices)
            .map(|r| {
                (
                    format!("{}:{} d{}", r.host, r.pid, r.device_id),
                    r.histogram.clone(),
                    tail(r),
                )
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let shown = rows.len();
        if shown < eligible.len() {
            aggregated.push(format!(
                "the latency heat map draws {shown} of {} devices (every flagged one, then the first in rank order; --max-devices)",
                eligible.len()
            ));
        }
        figure(
            &mut h,
            "latency-heatmap",
            &format!(
                "{shown} devices in rank order{}, linear histogram (wqe_completion_histogram), bucket width {}; log colour scale; devices with a flagged latency tail in red.",
                if shown < eligible.len() { format!(" ({shown} of {}: every flagged one, then the first others)", eligible.len()) } else { String::new() },
                fmt_ns(*w as f64)
            ),
            heatmap_svg(&rows, *w),
        );
    }

    // Charts: hw_samples.
    h.push_str("<h2 id=\"samples\">Hardware counter time series (hw_samples)</h2>\n");
    // Time origin: wall-clock sample times (v1) share the run's first sample; CLOCK_MONOTONIC
    // ones (in-tree ts_us, time since that host booted) start at their own file's first sample.
    let first_sample = |l: &crate::load::Loaded| {
        l.file
            .hw_samples
            .as_ref()
            .and_then(|v| v.iter().map(|s| s.timestamp_ns).min())
    };
    let run_start = run
        .files
        .iter()
        .filter(|l| l.file.format.has_wall_clock())
        .filter_map(first_sample)
        .min();
    let monotonic_files = run
        .files
        .iter()
        .filter(|l| !l.file.format.has_wall_clock() && first_sample(l).is_some())
        .count();
    let mut series: BTreeMap<String, Vec<SeriesLine>> = BTreeMap::new();
    {
        for l in &run.files {
            let Some(samples) = &l.file.hw_samples else {
                continue;
            };
            let origin = if l.file.format.has_wall_clock() {
                run_start
            } else {
                first_sample(l)
            };
            let Some(t0) = origin else { continue };
            let rank = rank_label(&l.file);
            let mut per: BTreeMap<(u32, &str), Vec<(f64, f64)>> = BTreeMap::new();
            for smp in samples {
                for (k, v) in &smp.counters {
                    if *v >= 0 {
                        per.entry((smp.device_id, k.as_str())).or_default().push((
                            (smp.timestamp_ns.saturating_sub(t0)) as f64 / 1e9,
                            *v as f64,
                        ));
                    }
                }
            }
            for ((dev, k), mut pts) in per {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                // Red only where this very counter was flagged on this device.
                let fl = o
                    .findings
                    .iter()
                    .any(|f| f.rank == rank && f.device_id == Some(dev) && f.metric == k);
                series
                    .entry(k.to_string())
                    .or_default()
                    .push((format!("{rank} d{dev}"), pts, fl));
            }
        }
    }
    if series.is_empty() {
        h.push_str("<p>No hw_samples in these files (the sampler runs only with RCCL_TELEMETRY_SAMPLE_MS &gt; 0).</p>\n");
    } else {
        let _ = writeln!(
            h,
            "<p class=\"note\" id=\"time-origin\">Time origin: {}{}</p>",
            if run_start.is_some() {
                "seconds since the run's first sample for files with wall-clock sample times (v1). "
            } else {
                ""
            },
            if monotonic_files > 0 {
                format!(
                    "{monotonic_files} in-tree file(s) (intree-1.0) time their samples with CLOCK_MONOTONIC ts_us (time since that host booted): each is drawn from its own first sample, so their lines do not line up with other hosts' in time."
                )
            } else {
                String::new()
            }
        );
        let mut cut = 0;
        for (counter, mut lines) in series.into_iter().take(8) {
            let total = lines.len();
            cut = cut.max(total.saturating_sub(max_devices));
            // Keep every flagged line and as many others as fit.
            lines.sort_by_key(|l| !l.2);
            lines.truncate(max_devices);
            figure(
                &mut h,
                "hw-samples",
                &format!("{counter}: delta since the device baseline, {} of {total} devices; red where this counter was flagged.", lines.len()),
                series_svg(&counter, &lines),
            );
        }
        if cut > 0 {
            aggregated.push(format!(
                "each hw_samples chart draws at most {max_devices} device lines, every flagged one first (--max-devices)"
            ));
        }
    }

    // Charts: byte skew.
    h.push_str("<h2 id=\"skew\">Byte skew across ranks</h2>\n");
    let pts: Vec<(String, f64, f64, bool)> = s
        .devices
        .iter()
        .filter(|r| r.used)
        .map(|r| {
            let rank = format!("{}:{}", r.host, r.pid);
            let flagged = o.findings.iter().any(|f| {
                f.rank == rank && f.device_id == Some(r.device_id) && f.kind.ends_with("byte_skew")
            });
            (rank, r.tx_bytes as f64, r.rx_bytes as f64, flagged)
        })
        .collect();
    if pts.is_empty() {
        h.push_str("<p>No device moved any bytes.</p>\n");
    } else {
        let tx: Vec<f64> = pts.iter().map(|p| p.1).collect();
        let rx: Vec<f64> = pts.iter().map(|p| p.2).collect();
        let mt = crate::stats::median(&tx).unwrap_or(0.0);
        let mr = crate::stats::median(&rx).unwrap_or(0.0);
        figure(
            &mut h,
            "byte-skew",
            &format!(
                "{} devices; median tx {}, rx {}.",
                pts.len(),
                fmt_bytes(mt),
                fmt_bytes(mr)
            ),
            if pts.len() > scale::SKEW_MAX_COLUMNS {
                aggregated.push(format!(
                    "the byte-skew chart groups {} devices per column ({} devices)",
                    pts.len().div_ceil(scale::SKEW_MAX_COLUMNS),
                    pts.len()
                ));
                scale::skew_grouped_svg(&pts, mt, mr)
            } else {
                skew_svg(&pts, mt, mr)
            },
        );
    }

    // The per-device table, folded; beyond DEVICE_TABLE_MAX devices, per host.
    const DEVICE_HEADER: &str = "<tr><th>host</th><th>pid</th><th>dev</th><th>roce</th><th>hw</th><th>tx</th><th>rx</th><th>WQEs sent</th><th>CQ err</th><th>untracked</th><th>p50</th><th>p99</th><th>max</th></tr>\n";
    let device_row = |r: &crate::summary::DeviceRow| {
        let fl = is_flagged(&format!("{}:{}", r.host, r.pid), r.device_id);
        format!(
            "<tr{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
            if fl { " class=\"flag\"" } else { "" },
            esc(&r.host),
            r.pid,
            r.device_id,
            esc(&r.roce_device),
            esc(&r.hw_type),
            fmt_bytes(r.tx_bytes as f64),
            fmt_bytes(r.rx_bytes as f64),
            fmt_count(r.num_wqe_sent),
            fmt_count(r.num_cq_errors),
            fmt_count(r.num_qp_untracked),
            esc(&fmt_percentile(r.latency.get(0.5))),
            esc(&fmt_percentile(r.latency.get(0.99))),
            r.latency.max_ns.map_or("-".into(), |m| fmt_ns(m as f64))
        )
    };
    h.push_str("<h2 id=\"devices\">Devices</h2>\n");
    if s.devices.len() > scale::DEVICE_TABLE_MAX {
        let flagged_dev = |r: &crate::summary::DeviceRow| {
            is_flagged(&format!("{}:{}", r.host, r.pid), r.device_id)
        };
        aggregated.push(scale::device_section(
            &mut h,
            &s.devices,
            &flagged_dev,
            DEVICE_HEADER,
            &device_row,
        ));
    } else {
        h.push_str("<details><summary>Per-device table</summary>\n<table>");
        h.push_str(DEVICE_HEADER);
        for r in &s.devices {
            h.push_str(&device_row(r));
        }
        h.push_str("</table></details>\n");
    }
    if !s.hw_counters_moved.is_empty() {
        h.push_str("<h2 id=\"hw\">Hardware counters that moved</h2>\n<table><tr><th>counter</th><th>kind</th><th>moved on</th><th>n/a on</th><th>total</th><th>median</th><th>max</th><th>max at</th></tr>\n");
        for c in &s.hw_counters_moved {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&c.name),
                esc(c.category.label()),
                c.devices_moved,
                c.devices_reporting,
                c.devices_unavailable,
                fmt_count(c.total.max(0) as u64),
                c.median,
                fmt_count(c.max.max(0) as u64),
                esc(&c.max_at)
            );
        }
        h.push_str("</table>\n");
    }
    if let Some(bad) = (!run.bad.is_empty()).then_some(&run.bad) {
        h.push_str("<h2 id=\"skipped\">Skipped files</h2>\n<ul>\n");
        for b in bad {
            let _ = writeln!(h, "<li>{}</li>", esc(&b.line()));
        }
        h.push_str("</ul>\n");
    }
    let generated = run
        .files
        .iter()
        .filter_map(|l| parse_timestamp_ns(&l.file.end_time))
        .max();
    let _ = writeln!(
        h,
        "<p class=\"note\">Generated by rccl-telemetry {} from {} files{}.</p>",
        env!("CARGO_PKG_VERSION"),
        s.files,
        generated.map_or(String::new(), |t| format!(
            ", run ended {}",
            crate::model::format_timestamp_ns(t)
        ))
    );
    h.push_str("</body></html>\n");
    let note = if aggregated.is_empty() {
        String::new()
    } else {
        format!(
            "<p class=\"note\" id=\"aggregated\">Aggregated for size ({} ranks, {} devices): {}.</p>\n",
            s.files,
            s.devices.len(),
            esc(&aggregated.join("; "))
        )
    };
    h.replacen(AGGREGATED_MARK, &note, 1)
}

/// Where the note on what the page aggregated goes, filled in once the page is written.
const AGGREGATED_MARK: &str = "<!--aggregated-->";

// ---------------------------------------------------------------------------------------------
// The NIC-by-NIC matrix (files with peers)

/// NICs beyond which the matrix is drawn per host (one cell per host pair).
pub const HEATMAP_MAX_NICS: usize = 300;

/// Colour of a latency cell: its ratio to the matrix median, pale at or below 1x, through
/// yellow and orange to dark red at 4x and above (log scale).
pub fn ratio_colour(r: f64) -> String {
    let t = if r.is_finite() && r > 1.0 {
        (r.log2() / 2.0).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let stops = [
        (0.0, (236, 244, 236)),
        (0.25, (255, 237, 160)),
        (0.5, (253, 174, 97)),
        (0.75, (230, 85, 50)),
        (1.0, (140, 0, 20)),
    ];
    let mut k = 0;
    while k + 2 < stops.len() && t > stops[k + 1].0 {
        k += 1;
    }
    let (t0, c0) = stops[k];
    let (t1, c1) = stops[k + 1];
    let f = ((t - t0) / (t1 - t0)).clamp(0.0, 1.0);
    let mix = |a: i32, b: i32| (a as f64 + (b - a) as f64 * f).round() as i32;
    format!(
        "rgb({},{},{})",
        mix(c0.0, c1.0),
        mix(c0.1, c1.1),
        mix(c0.2, c1.2)
    )
}

fn bytes_colour(frac: f64) -> String {
    let f = frac.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * f).round() as i32;
    format!(
        "rgb({},{},{})",
        mix(240.0, 8.0),
        mix(245.0, 69.0),
        mix(255.0, 148.0)
    )
}

/// One matrix as SVG: `vals[a][b]` (None: no link), `labels`, the colour of a value, the text
/// of a value (cell titles, drawn for up to 150 rows), and cells to outline.
fn matrix_svg(
    id: &str,
    labels: &[String],
    vals: &[Vec<Option<f64>>],
    colour: &dyn Fn(f64) -> String,
    text: &dyn Fn(f64) -> String,
    outline: &BTreeSet<(usize, usize)>,
) -> String {
    let n = labels.len();
    let cell = (760.0 / n.max(1) as f64).clamp(1.5, 22.0);
    let label_every = ((7.0 / cell).ceil() as usize).max(1);
    let font = (cell * label_every as f64 * 0.8).clamp(5.0, 11.0);
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64;
    let margin = (longest * font * 0.6 + 8.0).min(220.0);
    let size = margin + cell * n as f64 + 10.0;
    let mut s = String::new();
    let _ = write!(s, "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{size:.0}\" height=\"{size:.0}\" font-family=\"sans-serif\" font-size=\"{font:.1}\">");
    let _ = write!(s, "<rect x=\"{margin:.1}\" y=\"{margin:.1}\" width=\"{w:.1}\" height=\"{w:.1}\" fill=\"#f4f4f4\"/>", w = cell * n as f64);
    for (i, l) in labels.iter().enumerate() {
        if i % label_every != 0 {
            continue;
        }
        let c = margin + cell * (i as f64 + 0.5);
        let _ = write!(s, "<text x=\"{:.1}\" y=\"{c:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>", margin - 3.0, esc(l));
        let _ = write!(s, "<text transform=\"translate({c:.1},{:.1}) rotate(-90)\" dominant-baseline=\"middle\">{}</text>", margin - 3.0, esc(l));
    }
    let titles = n <= 150;
    for (a, row) in vals.iter().enumerate() {
        for (b, v) in row.iter().enumerate() {
            let Some(v) = v else { continue };
            let (x, y) = (margin + cell * b as f64, margin + cell * a as f64);
            let _ = write!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell:.2}\" height=\"{cell:.2}\" fill=\"{}\">", colour(*v));
            if titles {
                let _ = write!(
                    s,
                    "<title>{} -&gt; {}: {}</title>",
                    esc(&labels[a]),
                    esc(&labels[b]),
                    esc(&text(*v))
                );
            }
            s.push_str("</rect>");
        }
    }
    // Outlines at least 12 px wide, so a culprit cell of a large matrix still catches the eye.
    let ring = cell.max(12.0);
    for (a, b) in outline {
        let (x, y) = (
            margin + cell * (*b as f64 + 0.5) - ring / 2.0,
            margin + cell * (*a as f64 + 0.5) - ring / 2.0,
        );
        let _ = write!(s, "<rect class=\"culprit\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{ring:.2}\" height=\"{ring:.2}\" fill=\"none\" stroke=\"#000\" stroke-width=\"{:.1}\"/>", (ring / 8.0).clamp(1.2, 2.0));
    }
    s.push_str("</svg>");
    s
}

/// The matrix section: a heat map of per-link p99 latency (sending side) or of bytes,
/// selectable in the page without script (radio buttons and CSS), the culprits outlined.
/// Empty when no file has peers.
pub fn matrix_section(run: &Run) -> String {
    let lr = crate::links::join(run);
    if lr.links.is_empty() {
        return String::new();
    }
    let culprits = crate::outliers::classify_fabric(&lr, &crate::outliers::Options::default());
    let n = lr.nics.len();
    let per_host = n > HEATMAP_MAX_NICS;
    // Rows/columns: NICs sorted by host and device, or hosts.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| {
        (&lr.nics[*a].host, &lr.nics[*a].device).cmp(&(&lr.nics[*b].host, &lr.nics[*b].device))
    });
    let (labels, pos): (Vec<String>, Vec<usize>) = if per_host {
        let hosts: Vec<String> = order
            .iter()
            .map(|i| lr.nics[*i].host.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let pos = (0..n)
            .map(|i| {
                hosts
                    .iter()
                    .position(|h| *h == lr.nics[i].host)
                    .unwrap_or(0)
            })
            .collect();
        (hosts, pos)
    } else {
        let mut pos = vec![0; n];
        for (k, i) in order.iter().enumerate() {
            pos[*i] = k;
        }
        (order.iter().map(|i| lr.nics[*i].label()).collect(), pos)
    };
    let k = labels.len();
    let mut p99: Vec<Vec<Option<f64>>> = vec![vec![None; k]; k];
    let mut bytes: Vec<Vec<Option<f64>>> = vec![vec![None; k]; k];
    for l in &lr.links {
        let (a, b) = (pos[l.src_nic], pos[l.dst_nic]);
        if let Some(p) = l.latency.as_ref().and_then(|x| x.p99_ns) {
            // Per host: the worst link of the host pair, so one slow link still shows.
            p99[a][b] = Some(p99[a][b].map_or(p, |q: f64| q.max(p)));
        }
        bytes[a][b] = Some(bytes[a][b].unwrap_or(0.0) + l.tx_bytes_est as f64);
    }
    let all: Vec<f64> = p99.iter().flatten().flatten().copied().collect();
    let med = crate::stats::median(&all).unwrap_or(1.0).max(1.0);
    let bmax = bytes
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0, f64::max)
        .max(1.0);
    let mut outline = BTreeSet::new();
    for c in &culprits {
        match c.kind {
            "slow_link" => {
                let (a, b) = (pos[c.nics[0]], pos[c.nics[1]]);
                outline.insert((a, b));
                outline.insert((b, a));
            }
            _ => {
                for i in &c.nics {
                    let a = pos[*i];
                    for (b, row) in p99.iter().enumerate().take(k) {
                        if p99[a][b].is_some() {
                            outline.insert((a, b));
                        }
                        if row[a].is_some() {
                            outline.insert((b, a));
                        }
                    }
                }
            }
        }
    }
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<h2 id=\"matrix\">Links: NIC by NIC</h2>\n<p class=\"note\">Row: the sending NIC; column: its peer. {}{}. Culprits named by the outliers are outlined.</p>",
        esc(&lr.headline()),
        if per_host { format!(", drawn per host ({} hosts; more than {HEATMAP_MAX_NICS} NICs): a cell is the worst p99 of the host pair, or its bytes", k) } else { String::new() }
    );
    h.push_str("<div class=\"hm\"><input type=\"radio\" name=\"hm\" id=\"hm-p99\" checked><label for=\"hm-p99\">p99 latency</label> <input type=\"radio\" name=\"hm\" id=\"hm-bytes\"><label for=\"hm-bytes\">bytes</label>\n");
    let _ = writeln!(
        h,
        "<figure class=\"chart hm-p99\">{}<figcaption>p99 completion latency at the sending side, coloured by its ratio to the median link {} (pale 1x, yellow 1.4x, orange 2x, red 2.8x, dark red 4x and more).</figcaption></figure>",
        matrix_svg("matrix-p99", &labels, &p99, &|v| ratio_colour(v / med), &|v| format!("p99 {} ({:.2}x the median)", fmt_ns(v), v / med), &outline),
        esc(&fmt_ns(med))
    );
    let _ = writeln!(
        h,
        "<figure class=\"chart hm-bytes\">{}<figcaption>Bytes sent on the link (the device's tx bytes shared out by its WRs), darker is more; the largest cell is {}.</figcaption></figure></div>",
        matrix_svg("matrix-bytes", &labels, &bytes, &|v| bytes_colour(v / bmax), &|v| fmt_bytes(v), &BTreeSet::new()),
        esc(&fmt_bytes(bmax))
    );
    h
}
