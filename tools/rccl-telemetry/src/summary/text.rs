//! `summary` for people: the header (run, totals, latency), then either today's table (one
//! row per rank and device, for runs that fit a screen, or with `--all`) or the fleet view
//! (distributions, hosts, the rows that stand out) for larger runs.
//!
//! Separate from `summary` (the model and its aggregation) so the JSON and the text can be
//! read apart; the fleet figures themselves come from `summary::fleet`.

use crate::layout::{col, table, Column, Layout};
use crate::plain::{fit, plain_table};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns};
use crate::summary::fleet::{row_latency, Distribution, StandOut, Unit};
use crate::summary::{fmt_percentile, format_note, percentiles_line, Summary};

/// Beyond this many table rows (rank x device) the summary prints the fleet view instead of
/// the table: 32 rows and the header fill about one screen of 50 lines.
pub const SCREEN_ROWS: usize = 32;
/// Rows that stand out, shown in the fleet view (all of them are in --json).
pub const STAND_OUT_SHOWN: usize = 12;
/// Hosts that stand out, shown in the fleet view.
pub const HOSTS_SHOWN: usize = 2;
/// Names of the quiet counters (moved everywhere, no tail) named in the fleet view.
pub const QUIET_NAMED: usize = 2;

/// How the text is laid out and what it shows.
#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    pub layout: Layout,
    /// Every row (today's table) however large the run.
    pub all: bool,
    /// The linear histogram's latency figures (the log-scale ones are the default when a
    /// file has them).
    pub linear: bool,
}

impl TextOptions {
    pub fn new(layout: Layout) -> TextOptions {
        TextOptions {
            layout,
            all: false,
            linear: false,
        }
    }
}

fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// The device table's columns; the drop rank says which go first when the terminal is narrow.
const DEVICE_COLUMNS: [Column; 20] = [
    col("nic", false, 0).whole(),
    col("host", false, 0),
    col("pid", true, 5),
    col("process", false, 6),
    col("format", false, 2),
    col("dev", true, 0),
    col("roce", false, 5),
    col("hw", false, 4),
    col("tx", true, 0),
    col("tx%", true, 2),
    col("rx", true, 0),
    col("rx%", true, 2),
    col("WQEs sent", true, 3),
    col("CQ err", true, 1),
    col("untracked", true, 1),
    col("slot miss", true, 7),
    col("p50", true, 0),
    col("p99", true, 0),
    col("max", true, 3),
    col("hw moved", true, 2),
];

const HW_COLUMNS: [Column; 8] = [
    col("counter", false, 0),
    col("kind", false, 2),
    col("moved on", true, 0),
    col("n/a on", true, 1),
    col("total", true, 0),
    col("median", true, 1),
    col("max", true, 0),
    col("max at", false, 0),
];

/// Renders the summary for people, unwrapped.
pub fn render_text(s: &Summary) -> String {
    render_text_layout(s, Layout::Wide)
}

/// Renders the summary for people within `layout` (the default view for the run's size).
pub fn render_text_layout(s: &Summary, layout: Layout) -> String {
    render_with(s, &TextOptions::new(layout))
}

/// Which latency figures a rendering shows, (log-scale, linear): the log-scale ones when the
/// files have them, the linear ones when asked for or when some (or all) devices have nothing
/// else. The summary's text and the report's summary table both follow it.
pub fn latency_views(s: &Summary, linear_asked: bool) -> (bool, bool) {
    match &s.log_latency {
        None => (false, true),
        Some(l) => (true, linear_asked || l.devices_without > 0),
    }
}

/// Renders the summary for people: the table when it fits a screen (or with `all`), else the
/// fleet view.
pub fn render_with(s: &Summary, o: &TextOptions) -> String {
    let layout = o.layout;
    let (show_log, show_linear) = latency_views(s, o.linear);
    let mut out = String::new();
    render_header(s, layout, show_log, show_linear, &mut out);
    out.push('\n');
    let comm_rows = if o.all { usize::MAX } else { SCREEN_ROWS };
    if !o.all && s.devices.len() > SCREEN_ROWS {
        render_fleet(s, o, &mut out);
        out.push_str(&crate::summary::comms::render(
            &s.communicators,
            layout,
            comm_rows,
        ));
        return out;
    }

    render_device_table(s, o, &mut out);
    if !s.communicators.is_empty() {
        out.push('\n');
        out.push_str(&crate::summary::comms::render(
            &s.communicators,
            layout,
            comm_rows,
        ));
    }
    if !s.hw_counters_moved.is_empty() {
        out.push('\n');
        render_hw_moved(s, layout, &mut out);
    }
    out.push('\n');
    line(
        &mut out,
        layout,
        method_note(s, show_log, show_linear, o.linear, true),
    );
    out
}

/// Appends a line of text, wrapped to the layout.
fn line(out: &mut String, layout: Layout, text: String) {
    out.push_str(&layout.wrap(&text));
    out.push('\n');
}

/// Appends the header: the run, its devices, time, writers, totals and latency.
fn render_header(s: &Summary, layout: Layout, show_log: bool, show_linear: bool, out: &mut String) {
    let types: Vec<String> = s
        .hw_types
        .iter()
        .map(|(k, v)| format!("{k} x{v}"))
        .collect();
    let formats: Vec<String> = s.formats.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    line(
        out,
        layout,
        format!(
            "Run: {} rank files ({} skipped; format {}) on {} hosts; process {}; transport {}",
            s.files,
            s.files_skipped,
            formats.join(", "),
            s.hosts,
            s.processes.join(", "),
            s.transports.join(", ")
        ),
    );
    line(
        out,
        layout,
        format!(
            "Devices: {} used of {} registered ({}); latency_sample_interval {}",
            s.devices_used,
            s.devices_registered,
            if types.is_empty() {
                "none".into()
            } else {
                types.join(", ")
            },
            s.latency_sample_intervals
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let (Some(a), Some(b)) = (&s.start_time, &s.end_time) {
        line(
            out,
            layout,
            format!("Time: {a} .. {b} ({:.3} s)", s.duration_s.unwrap_or(0.0)),
        );
    }
    if let Some(n) = format_note(s) {
        line(out, layout, format!("Note: {n}"));
    }
    if let Some(j) = &s.jobs {
        line(out, layout, format!("Jobs: {}", j.line()));
    }
    for m in s.incomplete.iter().flat_map(|c| c.lines()) {
        line(out, layout, format!("Missing: {m}"));
    }
    let triggers: Vec<String> = s
        .triggers
        .iter()
        .map(|(k, v)| format!("{k} x{v}"))
        .collect();
    let mut written = format!("Written by: {}", triggers.join(", "));
    if s.files_final < s.files {
        written.push_str(&format!(
            "; {} of {} files are snapshots of live processes (final=false): their counters cover part of the run",
            s.files - s.files_final,
            s.files
        ));
    }
    line(out, layout, written);
    line(
        out,
        layout,
        format!(
            "Totals: tx {} rx {}, {} WQEs sent, {} completed, {} CQ errors, {} untracked QPs, {} slot misses",
            fmt_bytes(s.tx_bytes as f64),
            fmt_bytes(s.rx_bytes as f64),
            fmt_count(s.num_wqe_sent),
            fmt_count(s.num_wqe_completed),
            fmt_count(s.num_cq_errors),
            fmt_count(s.num_qp_untracked),
            fmt_count(s.num_slot_miss)
        ),
    );
    if let Some(n) = s.num_wqe_slow {
        line(out, layout, slow_line(s, n));
    }
    if s.hw_samples > 0 || s.hw_samples_dropped > 0 {
        line(
            out,
            layout,
            format!(
                "hw_samples: {} kept, {} dropped",
                s.hw_samples, s.hw_samples_dropped
            ),
        );
    }
    render_latency_lines(s, layout, show_log, show_linear, out);
}

/// Appends the run's latency percentiles: the log-scale ones and the linear ones shown.
fn render_latency_lines(
    s: &Summary,
    layout: Layout,
    show_log: bool,
    show_linear: bool,
    out: &mut String,
) {
    if let Some(l) = s.log_latency.as_ref().filter(|_| show_log) {
        line(
            out,
            layout,
            format!(
                "Latency (log-scale histogram, within {:.1}%, {} devices{}, {} sampled completions): {}",
                l.latency.max_relative_error().unwrap_or(0.125) * 100.0,
                l.devices,
                if l.devices_without > 0 { format!(" ({} more without one)", l.devices_without) } else { String::new() },
                fmt_count(l.latency.samples),
                percentiles_line(&l.latency),
            ),
        );
    }
    for l in s.latency.iter().filter(|_| show_linear) {
        line(
            out,
            layout,
            format!(
                "Latency (bucket {}, {} devices, {} sampled completions): {}",
                fmt_ns(l.histogram_interval_ns as f64),
                l.devices,
                fmt_count(l.latency.samples),
                percentiles_line(&l.latency),
            ),
        );
    }
}

/// Appends today's table: one row per rank and device, with the columns the layout fits.
fn render_device_table(s: &Summary, o: &TextOptions, out: &mut String) {
    let layout = o.layout;
    let rows: Vec<Vec<String>> = s
        .devices
        .iter()
        .map(|r| {
            vec![
                format!("{}:{}", r.host, r.roce_device),
                r.host.clone(),
                r.pid.to_string(),
                r.process.clone(),
                r.format.to_string(),
                r.device_id.to_string(),
                r.roce_device.clone(),
                r.hw_type.clone(),
                fmt_bytes(r.tx_bytes as f64),
                pct(r.tx_share),
                fmt_bytes(r.rx_bytes as f64),
                pct(r.rx_share),
                fmt_count(r.num_wqe_sent),
                fmt_count(r.num_cq_errors),
                fmt_count(r.num_qp_untracked),
                fmt_count(r.num_slot_miss),
                fmt_percentile(row_latency(r, o.linear).get(0.5)),
                fmt_percentile(row_latency(r, o.linear).get(0.99)),
                r.latency.max_ns.map_or("-".into(), |m| fmt_ns(m as f64)),
                r.hw_counters_moved.to_string(),
            ]
        })
        .collect();
    // Wide: host, pid, device id and RoCE name apart; fitted: one "nic" column (host:NIC), as
    // every finding names it, with the pid beside it (the first to go when narrow). One format
    // in the run: the Run line says it, and the column is only worth its width when the run
    // mixes them.
    let wide = layout == Layout::Wide;
    let shown = |i: usize| match DEVICE_COLUMNS[i].header {
        "nic" => !wide,
        "host" | "roce" => wide,
        "format" => wide || s.formats.len() > 1,
        _ => true,
    };
    let cols: Vec<Column> = (0..DEVICE_COLUMNS.len())
        .filter(|i| shown(*i))
        .map(|i| DEVICE_COLUMNS[i])
        .collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .filter(|(i, _)| shown(*i))
                .map(|(_, x)| x.clone())
                .collect()
        })
        .collect();
    let (t, gone) = table(&cols, &rows, layout);
    out.push_str(&t);
    out.push('\n');
    if !gone.is_empty() {
        line(
            out,
            layout,
            format!(
                "(columns left out to fit {} columns: {}; --wide or --json shows them)",
                layout_width(layout),
                gone.join(", ")
            ),
        );
    }
}

/// Appends the table of the hardware counters that moved.
fn render_hw_moved(s: &Summary, layout: Layout, out: &mut String) {
    line(
        out,
        layout,
        "Hardware counters that moved (deltas over the run, used devices only):".into(),
    );
    let rows: Vec<Vec<String>> = s
        .hw_counters_moved
        .iter()
        .map(|h| {
            vec![
                h.name.clone(),
                h.category.label().to_string(),
                format!("{}/{}", h.devices_moved, h.devices_reporting),
                h.devices_unavailable.to_string(),
                fmt_count(h.total.max(0) as u64),
                fmt_count(h.median.max(0.0).round() as u64),
                fmt_count(h.max.max(0) as u64),
                h.max_at.clone(),
            ]
        })
        .collect();
    let (t, _) = table(&HW_COLUMNS, &rows, layout);
    out.push_str(&t);
    out.push('\n');
}

/// What the latency figures shown are worth, in a sentence or two; docs/operators.md has the
/// rest (and --json both methods in full).
pub fn method_note(
    s: &Summary,
    show_log: bool,
    show_linear: bool,
    linear_asked: bool,
    see_docs: bool,
) -> String {
    let mut parts = Vec::new();
    if show_log {
        let e = s
            .log_latency
            .as_ref()
            .and_then(|l| l.latency.max_relative_error())
            .unwrap_or(0.125);
        parts.push(format!(
            "Log-scale percentiles are within {:.1}% of the truth{}.",
            e * 100.0,
            if linear_asked || show_linear {
                ""
            } else {
                " (--linear adds the linear histogram's)"
            }
        ));
    }
    if show_linear {
        parts.push(
            "Linear percentiles are within one bucket width (histogram_interval_ns); >= marks a lower bound."
                .to_string(),
        );
    }
    if s.latency_sample_intervals.iter().any(|n| *n > 1) {
        parts.push("With 1-in-N latency sampling the max understates the tail.".to_string());
    }
    if see_docs {
        parts.push("See docs/operators.md.".to_string());
    }
    parts.join(" ")
}

fn layout_width(l: Layout) -> usize {
    match l {
        Layout::Fit(w) => w,
        Layout::Wide => 0,
    }
}

const DIST_COLUMNS: [Column; 7] = [
    col("across rows", false, 0),
    col("moved", true, 2),
    col("min", true, 1),
    col("p50", true, 0),
    col("p99", true, 0),
    col("max", true, 0),
    col("max at", false, 3),
];

fn dist_label(d: &Distribution) -> String {
    match (d.metric.as_str(), d.source) {
        ("tx_bytes", _) => "tx bytes".into(),
        ("rx_bytes", _) => "rx bytes".into(),
        ("num_wqe_sent", _) => "WQEs sent".into(),
        ("num_cq_errors", _) => "CQ errors".into(),
        ("num_qp_untracked", _) => "untracked QPs".into(),
        ("num_slot_miss", _) => "slot misses".into(),
        ("latency_p50_ns", Some(src)) => format!("p50 latency{}", source_tag(src)),
        ("latency_p99_ns", Some(src)) => format!("p99 latency{}", source_tag(src)),
        (name, _) => match d.category {
            Some(c) => format!("{name} ({})", c.label()),
            None => name.to_string(),
        },
    }
}

fn source_tag(src: &str) -> &'static str {
    if src == "linear" {
        " (linear)"
    } else {
        ""
    }
}

fn dist_row(d: &Distribution) -> Vec<String> {
    let moved = if d.unit == Unit::Count {
        format!("{}/{}", d.nonzero, d.n)
    } else {
        String::new()
    };
    vec![
        dist_label(d),
        moved,
        d.unit.fmt(d.min),
        d.unit.fmt(d.p50),
        d.unit.fmt(d.p99),
        d.unit.fmt(d.max),
        if d.max > d.p99 || d.unit == Unit::Count {
            d.max_at.clone()
        } else {
            String::new()
        },
    ]
}

/// "who: reason; reason" within the width, the reasons that do not fit counted.
fn stand_out_line(s: &StandOut, who_width: usize, layout: Layout) -> String {
    let prefix = format!("  {:<who_width$}  ", s.who);
    let mut text = prefix.clone();
    let limit = match layout {
        Layout::Fit(w) => w,
        Layout::Wide => usize::MAX,
    };
    for (i, r) in s.reasons.iter().enumerate() {
        let more = s.reasons.len() - i - 1;
        let sep = if i == 0 { "" } else { "; " };
        let tail = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        let next = format!("{text}{sep}{}", r.text);
        if i > 0 && (next.chars().count() + tail.chars().count()) > limit {
            text.push_str(&format!(" (+{} more)", more + 1));
            break;
        }
        text = next;
    }
    fit(&text, layout)
}

/// The view for runs beyond a screen: distributions across the rows, hosts, what stands out.
fn render_fleet(s: &Summary, o: &TextOptions, out: &mut String) {
    let layout = o.layout;
    let f = &s.fleet;
    let line = |out: &mut String, text: String| {
        out.push_str(&layout.wrap(&text));
        out.push('\n');
    };
    let (show_log, show_linear) = latency_views(s, o.linear);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut quiet = Vec::new();
    // A driver's aliases (pfc_rx_frames and pfc_rx_frames_total) read the same on every
    // device: one row names both.
    let mut shown_dists: Vec<&Distribution> = Vec::new();
    for d in &f.distributions {
        if d.category.is_some() {
            if let Some(k) = shown_dists
                .iter()
                .position(|e| e.category.is_some() && same_figures(e, d))
            {
                rows[k][0] = format!("{} = {}", shown_dists[k].metric, d.metric);
                continue;
            }
        }
        let shown = match (d.metric.as_str(), d.source) {
            (_, Some("log-scale")) => show_log,
            (_, Some(_)) => show_linear,
            ("num_cq_errors" | "num_qp_untracked" | "num_slot_miss", _) => d.nonzero > 0,
            _ if d.category.is_some() && !d.has_tail() => {
                quiet.push(d.metric.clone());
                false
            }
            _ => true,
        };
        if shown {
            rows.push(dist_row(d));
            shown_dists.push(d);
        }
    }
    // The first column's header says what the rows are: the used devices, one per rank and
    // device.
    let title = format!("{} rank x device rows", f.rows);
    let (t, _) = plain_table(&DIST_COLUMNS, Some(&title), &rows, layout);
    out.push_str(&t);
    if !quiet.is_empty() {
        let more = quiet.len().saturating_sub(QUIET_NAMED);
        line(
            out,
            fit(
                &format!(
                    "  {} more counters moved everywhere without a tail: {}{}",
                    quiet.len(),
                    quiet[..quiet.len().min(QUIET_NAMED)].join(", "),
                    if more > 0 {
                        format!(", +{more}")
                    } else {
                        String::new()
                    }
                ),
                layout,
            ),
        );
    }

    let h = &f.hosts;
    // The hosts' latency is the one the stand-outs are judged on (log-scale when present).
    let hd = |m: &str| h.distributions.iter().find(|d| d.metric == m);
    let mut host_line = format!("Hosts: {} (sums over each host's devices)", h.hosts);
    for (m, label) in [
        ("tx_bytes", "tx"),
        ("latency_p99_ns", "worst p99"),
        ("num_cq_errors", "CQ errors"),
    ] {
        if let Some(d) = hd(m).filter(|d| m != "num_cq_errors" || d.nonzero > 0) {
            host_line.push_str(&format!(
                "; {label} min {} p50 {} max {}",
                d.unit.fmt(d.min),
                d.unit.fmt(d.p50),
                d.unit.fmt(d.max)
            ));
        }
    }
    if h.stand_out.len() > HOSTS_SHOWN {
        host_line.push_str(&format!(
            "; {} hosts stand out, the first {HOSTS_SHOWN}:",
            h.stand_out.len()
        ));
    }
    line(out, host_line);
    if !h.stand_out.is_empty() {
        let w = h
            .stand_out
            .iter()
            .take(HOSTS_SHOWN)
            .map(|x| x.who.chars().count())
            .max()
            .unwrap_or(0);
        for x in h.stand_out.iter().take(HOSTS_SHOWN) {
            out.push_str(&stand_out_line(x, w, layout));
            out.push('\n');
        }
    }

    if f.stand_out.is_empty() {
        line(out, "No row stands out from the median.".into());
    } else {
        line(
            out,
            if f.stand_out.len() > STAND_OUT_SHOWN {
                format!(
                    "Rows that stand out: {} of {}, the first {STAND_OUT_SHOWN} (furthest from the median; \
                     outliers ranks them all):",
                    f.stand_out.len(),
                    f.rows
                )
            } else {
                format!(
                    "Rows that stand out: {} of {} (furthest from the median first):",
                    f.stand_out.len(),
                    f.rows
                )
            },
        );
        let w = f
            .stand_out
            .iter()
            .take(STAND_OUT_SHOWN)
            .map(|x| x.who.chars().count())
            .max()
            .unwrap_or(0);
        for x in f.stand_out.iter().take(STAND_OUT_SHOWN) {
            out.push_str(&stand_out_line(x, w, layout));
            out.push('\n');
        }
    }
    line(out, method_note(s, show_log, show_linear, o.linear, false));
    line(
        out,
        format!(
            "Every row: --all (the {}-row table) or --json (complete). How to read it: docs/operators.md",
            s.devices.len()
        ),
    );
}

/// Two counters whose figures agree everywhere (a driver's aliases).
fn same_figures(a: &Distribution, b: &Distribution) -> bool {
    (a.n, a.nonzero, a.max_at.as_str(), a.min_at.as_str())
        == (b.n, b.nonzero, b.max_at.as_str(), b.min_at.as_str())
        && [a.min, a.p50, a.p99, a.max] == [b.min, b.p50, b.p99, b.max]
}

/// The WQE latency monitor's line: the slow completions, the threshold(s), the device with most.
fn slow_line(s: &Summary, n: u64) -> String {
    let thr: Vec<String> = s
        .slow_thresholds_ns
        .iter()
        .map(|t| format!("{t} ns"))
        .collect();
    let mut l = format!(
        "Slow WQEs (WQE latency monitor, above {}): {}",
        if thr.is_empty() {
            "its threshold".to_owned()
        } else {
            thr.join(", ")
        },
        fmt_count(n)
    );
    let worst = s
        .devices
        .iter()
        .filter(|r| r.used)
        .filter_map(|r| r.num_wqe_slow.map(|v| (v, r)))
        .filter(|(v, _)| *v > 0)
        .max_by_key(|(v, _)| *v);
    if let Some((v, r)) = worst {
        l.push_str(&format!(
            ", most on {} pid {} {}: {}",
            r.host,
            r.pid,
            r.roce_device,
            fmt_count(v)
        ));
    }
    l
}
