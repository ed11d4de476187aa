//! `report`: one self-contained HTML page (inline CSS and SVG, no script, no network). It opens
//! with the verdict (`findings.rs`: what is critical, what cannot be told) and the findings, one
//! row per culprit; then the evidence to check them against: the NIC-by-NIC heat map of the
//! links (files with peers), completion latency per device (a heat map, and the histograms of
//! the devices a finding names over the run's), the byte skew across ranks, the hardware
//! counters that moved and their time series (hw_samples); then the run's summary and every
//! device.
//!
//! This file lays out the page, one function per section; `findings.rs` writes the verdict and
//! the findings table, `charts.rs` draws the SVG charts, `latency.rs` the latency section,
//! `matrix.rs` the NIC-by-NIC matrix, `samples.rs` the time series, and `scale.rs` what the page
//! aggregates for runs larger than it can show.

use crate::context::RunContext;
use crate::load::Run;
use crate::model::parse_timestamp_ns;
use crate::outliers::OutlierReport;
use crate::stats::{fmt_bytes, fmt_count, fmt_ns};
use crate::summary::{fmt_percentile, Summary};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

mod charts;
mod findings;
pub mod latency;
mod matrix;
mod samples;
pub mod scale;
pub use charts::{
    byte_axis_unit, byte_tick_label, heatmap_label_rows, heatmap_row_height, log_axis_decades,
    log_axis_labels, nice_step, skew_ticks, LOG_HIST_LABEL,
};
use charts::{
    e2s, histogram_svg, log_histogram_svg, skew_svg, DrawResult, BLUE, FLAG, HALF, ORANGE,
};
pub use matrix::*;

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
        *by.entry(r.kind.as_str()).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{} x{n}", k.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders the whole page: what ranks first (the verdict, then the findings), then the evidence
/// a person checks them against (the links, latency per device, bytes, hardware counters,
/// their time series), then the run as a whole and every device.
///
/// Of the run's shared analyses the page reads the links (its matrix) and the hang (its line in
/// the summary): it takes them from the context, gives back the rest (the QP index) and draws
/// them first, so the rest of the page is drawn without the links and the wait-for graph in
/// memory.
pub fn render(cx: RunContext, s: &Summary, o: &OutlierReport, max_devices: usize) -> String {
    let run = cx.run();
    let (links, hang) = cx.into_links_and_hang();
    let hang = crate::hang::one_line(&hang);
    let matrix = matrix_section_with(&links, &o.findings);
    drop(links);
    // What the page shows aggregated instead of row by row (large runs), stated above the
    // evidence.
    let mut aggregated: Vec<String> = Vec::new();
    let mut h = String::new();
    head(&mut h);
    h.push_str(NAV_MARK);
    h.push_str(&findings::verdict(o));
    findings::section(&mut h, o, &mut aggregated);
    h.push_str(AGGREGATED_MARK);
    h.push_str(&matrix);
    latency::section(&mut h, s, o, max_devices, &mut aggregated);
    skew_section(&mut h, s, o, &mut aggregated);
    hw_section(&mut h, s);
    qp_settings_section(&mut h, o);
    samples::section(&mut h, run, o, max_devices, &mut aggregated);
    summary_section(&mut h, hang.as_deref(), s);
    devices_section(&mut h, s, o, &mut aggregated);
    if !run.bad.is_empty() {
        h.push_str("<h2 id=\"skipped\">Skipped files</h2>\n<ul>\n");
        for b in &run.bad {
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
    let nav = nav(&h);
    h.replacen(AGGREGATED_MARK, &note, 1)
        .replacen(NAV_MARK, &nav, 1)
}

/// The document's head, style and title.
fn head(h: &mut String) {
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rccl-telemetry report</title>\n<style>\n");
    h.push_str(
        "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1400px}h1{font-size:1.5em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}\n\
         nav{font-size:13px;color:#555;margin-bottom:.5em}nav a{color:#1f77b4;text-decoration:none;margin-right:.9em}\n\
         table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px}th{background:#f0f0f0}\n\
         td.n{text-align:right;font-variant-numeric:tabular-nums}tr.flag td{background:#fde0e0}.kv td:first-child{font-weight:bold}\n\
         figure.chart{display:inline-block;margin:6px;border:1px solid #eee;vertical-align:top;box-sizing:border-box}figcaption{font-size:11px;color:#555;padding:2px 6px;max-width:880px}\n\
         figure.half{width:calc(50% - 18px)}figure.wide{width:calc(100% - 14px)}figure.half svg,figure.wide svg{display:block;width:100%;height:auto}figure.half figcaption,figure.wide figcaption{max-width:none}\n\
         .note{font-size:12px;color:#555;max-width:1000px}.err{color:#b00}details{margin:.5em 0}\n\
         .hm figure{display:none}#hm-p99:checked~figure.hm-p99{display:inline-block}#hm-bytes:checked~figure.hm-bytes{display:inline-block}\n",
    );
    h.push_str(findings::STYLE);
    h.push_str("</style></head><body>\n<h1>rccl-telemetry report</h1>\n");
}

/// Where the line of links to the sections goes, filled in once the page is written.
const NAV_MARK: &str = "<!--nav-->";

/// One line of links to the page's sections, in page order, from their headings.
fn nav(h: &str) -> String {
    let links: Vec<String> = h
        .split("<h2 id=\"")
        .skip(1)
        .filter_map(|rest| {
            let (id, rest) = rest.split_once("\">")?;
            let (title, _) = rest.split_once("</h2>")?;
            Some(format!("<a href=\"#{id}\">{title}</a>"))
        })
        .collect();
    format!("<nav>{}</nav>\n", links.join(""))
}

/// The run as a whole: the summary table, its notes and the run's completion-latency
/// histogram (log-scale when the files have it; the linear one where they do not).
fn summary_section(h: &mut String, hang: Option<&str>, s: &Summary) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"kv\">\n");
    summary_rows(h, hang, s);
    h.push_str("</table>\n");
    // The latency figures follow the summary's rule: log-scale when the files have it, the
    // linear histogram's only when it is all there is (or some devices lack a log histogram).
    let (show_log, show_linear) = crate::summary::text::latency_views(s, false);
    if let Some(n) = crate::summary::format_note(s) {
        let _ = writeln!(h, "<p class=\"note\" id=\"format-note\">{}.</p>", esc(&n));
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">{}</p>",
        esc(&crate::summary::text::method_note(
            s,
            show_log,
            show_linear,
            true,
            false
        ))
    );
    if let Some(l) = &s.log_latency {
        figure(
            h,
            "latency-run-log",
            &format!(
                "All {} used devices with a {LOG_HIST_LABEL}; log latency axis; the last bucket (from 16.1 s) is open-ended{}.",
                l.devices,
                if l.devices_without > 0 { format!("; {} devices without one are in the linear plot", l.devices_without) } else { String::new() }
            ),
            log_histogram_svg(&format!("Whole run, log-scale histogram ({} devices)", l.devices), &l.buckets, None, HALF, BLUE),
        );
    }
    // The linear plot stays for runs (or the part of a mixed run) without the log-scale one.
    if s.log_latency.as_ref().is_none_or(|l| l.devices_without > 0) {
        for l in &s.latency {
            figure(
                h,
                "latency-run",
                &format!("All used devices, linear histogram (wqe_completion_histogram), bucket width {}; the last bucket is open-ended.", fmt_ns(l.histogram_interval_ns as f64)),
                histogram_svg(&format!("Whole run ({} devices), bucket {}", l.devices, fmt_ns(l.histogram_interval_ns as f64)), &l.histogram, l.histogram_interval_ns, None, HALF, BLUE),
            );
        }
    }
}

/// The rows of the summary table.
fn summary_rows(h: &mut String, hang: Option<&str>, s: &Summary) {
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(&v));
    };
    let counted = |m: &BTreeMap<&str, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    kv(
        "Rank files",
        format!("{} read, {} skipped", s.files, s.files_skipped),
    );
    kv("Formats", counted(&s.formats));
    kv("Hosts", fmt_count(s.hosts as u64));
    kv("Process", s.processes.join(", "));
    kv("Transport", s.transports.join(", "));
    let hw: BTreeMap<&str, usize> = s.hw_types.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    kv(
        "Devices",
        format!(
            "{} used of {} registered; {}",
            fmt_count(s.devices_used as u64),
            fmt_count(s.devices_registered as u64),
            counted(&hw)
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
    // The root of a hang: the line `stalls`, `summary` and `outliers` share (`crate::hang`).
    if let Some(l) = hang {
        kv("Hang", l.trim_start_matches("Hang: ").to_string());
    }
    kv(
        "latency_sample_interval",
        s.latency_sample_intervals
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    let (_, show_linear) = crate::summary::text::latency_views(s, false);
    let percentiles = |l: &crate::summary::Latency| {
        format!(
            "{}, over {} sampled completions",
            crate::summary::percentiles_line(l),
            fmt_count(l.samples)
        )
    };
    if let Some(l) = &s.log_latency {
        kv(
            &format!(
                "Latency (log-scale, within {:.1}%)",
                l.latency.max_relative_error().unwrap_or(0.125) * 100.0
            ),
            percentiles(&l.latency),
        );
    }
    for l in s.latency.iter().filter(|_| show_linear) {
        kv(
            &format!(
                "Latency (bucket {})",
                fmt_ns(l.histogram_interval_ns as f64)
            ),
            percentiles(&l.latency),
        );
    }
}

/// Bytes per device in rank order, against the run's medians; byte-skew findings in red.
fn skew_section(h: &mut String, s: &Summary, o: &OutlierReport, aggregated: &mut Vec<String>) {
    h.push_str("<h2 id=\"skew\">Byte skew across ranks</h2>\n");
    let pts: Vec<(String, f64, f64, bool)> = s
        .devices
        .iter()
        .filter(|r| r.used)
        .map(|r| {
            let rank = format!("{}:{}", r.host, r.pid);
            let flagged = o.findings.iter().any(|f| {
                f.rank == rank
                    && f.device_id == Some(r.device_id)
                    && matches!(
                        f.kind,
                        crate::outliers::Kind::TxByteSkew | crate::outliers::Kind::RxByteSkew
                    )
            });
            (rank, r.tx_bytes as f64, r.rx_bytes as f64, flagged)
        })
        .collect();
    if pts.is_empty() {
        h.push_str("<p>No device moved any bytes.</p>\n");
        return;
    }
    let tx: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let rx: Vec<f64> = pts.iter().map(|p| p.2).collect();
    let mt = crate::stats::median(&tx).unwrap_or(0.0);
    let mr = crate::stats::median(&rx).unwrap_or(0.0);
    figure(
        h,
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

/// The hardware counters that moved, each with its spread over the devices.
fn hw_section(h: &mut String, s: &Summary) {
    if s.hw_counters_moved.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"hw\">Hardware counters that moved</h2>\n<table><tr><th>counter</th><th>kind</th><th>moved on</th><th>n/a on</th><th>total</th><th>median</th><th>max</th><th>max at</th></tr>\n");
    for c in &s.hw_counters_moved {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&c.name),
            esc(c.category.label()),
            fmt_count(c.devices_moved as u64),
            fmt_count(c.devices_reporting as u64),
            fmt_count(c.devices_unavailable as u64),
            fmt_signed(c.total as f64),
            fmt_signed(c.median),
            fmt_signed(c.max as f64),
            esc(&c.max_at)
        );
    }
    h.push_str("</table>\n");
}

/// Each NIC's QP settings (QP lint, files of version 5): the run's distinct combinations with
/// the NICs and QPs that have each, then the NICs whose QPs disagree or differ from their
/// peers, with those QPs. Absent when no QP told its settings.
fn qp_settings_section(h: &mut String, o: &OutlierReport) {
    if o.qp_settings.is_empty() {
        return;
    }
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let cells = |a: &crate::model::QpAttrs| {
        [
            opt(a.traffic_class.map(u32::from)),
            opt(a.sl.map(u32::from)),
            opt(a.path_mtu),
            opt(a.timeout.map(u32::from)),
            opt(a.retry_cnt.map(u32::from)),
            opt(a.rnr_retry.map(u32::from)),
            opt(a.min_rnr_timer.map(u32::from)),
        ]
        .map(|c| format!("<td class=\"n\">{c}</td>"))
        .concat()
    };
    let mut combos: std::collections::BTreeMap<crate::model::QpAttrs, (u64, u64)> =
        std::collections::BTreeMap::new();
    for n in &o.qp_settings {
        for s in &n.settings {
            let e = combos.entry(s.attrs).or_default();
            e.0 += 1;
            e.1 += s.qps;
        }
    }
    h.push_str("<h2 id=\"qp-settings\">QP settings</h2>\n<table><tr><th>traffic class</th><th>SL</th><th>path MTU</th><th>timeout</th><th>retry_cnt</th><th>rnr_retry</th><th>min_rnr_timer</th><th>NICs</th><th>QPs</th></tr>\n");
    for (a, (nics, qps)) in &combos {
        let _ = writeln!(
            h,
            "<tr>{}<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            cells(a),
            fmt_count(*nics),
            fmt_count(*qps)
        );
    }
    h.push_str("</table>\n");
    let odd: Vec<_> = o
        .qp_settings
        .iter()
        .filter(|n| n.settings.len() > 1 || !n.differing.is_empty())
        .collect();
    if odd.is_empty() {
        let _ = writeln!(
            h,
            "<p>Every one of the {} NICs' QPs agree with each other and with their peers.</p>",
            fmt_count(o.qp_settings.len() as u64)
        );
        return;
    }
    h.push_str("<table><tr><th>NIC</th><th>settings: QPs</th><th>QPs that differ</th></tr>\n");
    for n in odd {
        let settings: Vec<String> = n
            .settings
            .iter()
            .map(|s| {
                let a = &s.attrs;
                format!(
                    "class {} SL {} MTU {} timeout {} retry {} rnr {} timer {}: {}",
                    opt(a.traffic_class.map(u32::from)),
                    opt(a.sl.map(u32::from)),
                    opt(a.path_mtu),
                    opt(a.timeout.map(u32::from)),
                    opt(a.retry_cnt.map(u32::from)),
                    opt(a.rnr_retry.map(u32::from)),
                    opt(a.min_rnr_timer.map(u32::from)),
                    fmt_count(s.qps)
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.nic),
            esc(&settings.join("; ")),
            esc(&n.differing.join("; "))
        );
    }
    h.push_str("</table>\n");
}

/// A counter's figure with thousands separators, whatever its sign; a median between two
/// counts keeps its half ("1,896.5").
pub fn fmt_signed(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let a = v.abs();
    let whole = fmt_count(a.trunc() as u64);
    let frac = a - a.trunc();
    if frac >= 0.05 {
        format!("{sign}{whole}.{}", ((frac * 10.0).round() as u64).min(9))
    } else {
        format!("{sign}{whole}")
    }
}

/// The per-device table, folded; beyond DEVICE_TABLE_MAX devices, per host.
fn devices_section(h: &mut String, s: &Summary, o: &OutlierReport, aggregated: &mut Vec<String>) {
    let flagged: BTreeSet<(String, Option<u32>)> = o
        .findings
        .iter()
        .map(|f| (f.rank.clone(), f.device_id))
        .collect();
    let is_flagged = |r: &crate::summary::DeviceRow| {
        flagged.contains(&(format!("{}:{}", r.host, r.pid), Some(r.device_id)))
    };
    const DEVICE_HEADER: &str = "<tr><th>host</th><th>pid</th><th>dev</th><th>roce</th><th>hw</th><th>tx</th><th>rx</th><th>WQEs sent</th><th>CQ err</th><th>untracked</th><th>p50</th><th>p99</th><th>max</th></tr>\n";
    let device_row = |r: &crate::summary::DeviceRow| {
        format!(
            "<tr{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
            if is_flagged(r) { " class=\"flag\"" } else { "" },
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
        aggregated.push(scale::device_section(
            h,
            &s.devices,
            &is_flagged,
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
}

/// Where the note on what the page aggregated goes, filled in once the page is written.
const AGGREGATED_MARK: &str = "<!--aggregated-->";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_figures_keep_their_separators_and_halves() {
        assert_eq!(fmt_signed(556_713_968.0), "556,713,968");
        assert_eq!(fmt_signed(1896.5), "1,896.5");
        assert_eq!(fmt_signed(-1.0), "-1");
        assert_eq!(fmt_signed(0.0), "0");
        assert_eq!(fmt_signed(f64::NAN), "-");
    }

    #[test]
    fn the_nav_lists_the_sections_in_order() {
        let h = "<h2 id=\"outliers\">Outliers</h2>x<h2 id=\"skew\">Byte skew</h2>";
        assert_eq!(
            nav(h),
            "<nav><a href=\"#outliers\">Outliers</a><a href=\"#skew\">Byte skew</a></nav>\n"
        );
    }
}
