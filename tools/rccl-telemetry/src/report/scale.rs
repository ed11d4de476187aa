//! The report at scale: what the page shows instead of one row or one mark per device once a run
//! has more devices than a page can hold: distributions across the devices, one table row per
//! host, the flagged devices one by one, and the byte-skew chart with devices grouped per
//! column. Separate from report.rs (the page's layout and the charts of any run) because these
//! are the aggregations the page says it made, and their bounds are tested on their own.

use super::charts::skew_frame;
use super::{e2s, esc, DrawResult, BLUE, FLAG, ORANGE};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns};
use crate::summary::{DeviceRow, Latency};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Devices beyond which the per-device table becomes one row per host (the flagged devices
/// stay listed one by one, up to [`FLAGGED_ROWS_MAX`]).
pub const DEVICE_TABLE_MAX: usize = 1024;
/// Most flagged devices listed one by one when the table is per host.
pub const FLAGGED_ROWS_MAX: usize = 200;
/// Columns of the byte-skew chart: beyond, consecutive devices share a column.
pub const SKEW_MAX_COLUMNS: usize = 1024;

/// min / p50 / p99 / max of a set of values (nearest rank), and how many there were.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The distribution of `values` (NaN left out); None when there are none.
pub fn dist(values: &[f64]) -> Option<Dist> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Dist {
        n: v.len(),
        min: v[0],
        p50: at(0.5),
        p99: at(0.99),
        max: v[v.len() - 1],
    })
}

/// The latency a device's figures come from: the log-scale histogram's when it has one.
fn best_latency(r: &DeviceRow) -> &Latency {
    r.log_latency.as_ref().unwrap_or(&r.latency)
}

/// One host's devices added up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostRow {
    pub host: String,
    pub ranks: usize,
    pub devices: usize,
    pub devices_used: usize,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_wqe_sent: u64,
    pub num_cq_errors: u64,
    pub num_qp_untracked: u64,
    /// The host's worst device p99 (ns) and which device ("pid dN").
    pub worst_p99: Option<(f64, String)>,
    /// Devices of this host with a finding.
    pub flagged: usize,
}

/// One row per host, in host order; `flagged` tells whether a device has a finding.
pub fn host_rows(devices: &[DeviceRow], flagged: &dyn Fn(&DeviceRow) -> bool) -> Vec<HostRow> {
    let mut by: BTreeMap<&str, (HostRow, std::collections::BTreeSet<i64>)> = BTreeMap::new();
    for r in devices {
        let (h, pids) = by.entry(r.host.as_str()).or_insert_with(|| {
            (
                HostRow {
                    host: r.host.clone(),
                    ..Default::default()
                },
                Default::default(),
            )
        });
        pids.insert(r.pid);
        h.devices += 1;
        h.flagged += usize::from(flagged(r));
        if !r.used {
            continue;
        }
        h.devices_used += 1;
        h.tx_bytes = h.tx_bytes.saturating_add(r.tx_bytes);
        h.rx_bytes = h.rx_bytes.saturating_add(r.rx_bytes);
        h.num_wqe_sent = h.num_wqe_sent.saturating_add(r.num_wqe_sent);
        h.num_cq_errors = h.num_cq_errors.saturating_add(r.num_cq_errors);
        h.num_qp_untracked = h.num_qp_untracked.saturating_add(r.num_qp_untracked);
        if let Some(p) = best_latency(r).get(0.99) {
            if h.worst_p99.as_ref().is_none_or(|w| p.estimate_ns > w.0) {
                h.worst_p99 = Some((p.estimate_ns, format!("{} d{}", r.pid, r.device_id)));
            }
        }
    }
    by.into_values()
        .map(|(mut h, pids)| {
            h.ranks = pids.len();
            h
        })
        .collect()
}

/// The distributions table: each figure across the used devices.
fn dist_table(h: &mut String, used: &[&DeviceRow]) {
    type Get = fn(&DeviceRow) -> Option<f64>;
    type Fmt = fn(f64) -> String;
    let rows: [(&str, Get, Fmt); 9] = [
        ("tx bytes", |r| Some(r.tx_bytes as f64), fmt_bytes),
        ("rx bytes", |r| Some(r.rx_bytes as f64), fmt_bytes),
        (
            "WQEs sent",
            |r| Some(r.num_wqe_sent as f64),
            |v| fmt_count(v as u64),
        ),
        (
            "CQ errors",
            |r| Some(r.num_cq_errors as f64),
            |v| fmt_count(v as u64),
        ),
        (
            "untracked QPs",
            |r| Some(r.num_qp_untracked as f64),
            |v| fmt_count(v as u64),
        ),
        (
            "latency p50",
            |r| best_latency(r).get(0.5).map(|p| p.estimate_ns),
            fmt_ns,
        ),
        (
            "latency p99",
            |r| best_latency(r).get(0.99).map(|p| p.estimate_ns),
            fmt_ns,
        ),
        (
            "latency max",
            |r| best_latency(r).max_ns.map(|m| m as f64),
            fmt_ns,
        ),
        (
            "hw counters moved",
            |r| Some(r.hw_counters_moved as f64),
            |v| fmt_count(v as u64),
        ),
    ];
    h.push_str("<table id=\"device-distributions\"><tr><th>across used devices</th><th>devices</th><th>min</th><th>p50</th><th>p99</th><th>max</th></tr>\n");
    for (name, get, fmt) in rows {
        let vals: Vec<f64> = used.iter().filter_map(|r| get(r)).collect();
        let Some(d) = dist(&vals) else { continue };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(name),
            d.n,
            esc(&fmt(d.min)),
            esc(&fmt(d.p50)),
            esc(&fmt(d.p99)),
            esc(&fmt(d.max))
        );
    }
    h.push_str("</table>\n");
}

/// The device section of a run with more than [`DEVICE_TABLE_MAX`] devices: distributions,
/// the flagged devices, and one row per host (folded). `device_row` renders one device's row of
/// the ordinary table. Returns what it aggregated, for the page's note.
pub fn device_section(
    h: &mut String,
    devices: &[DeviceRow],
    flagged: &dyn Fn(&DeviceRow) -> bool,
    device_header: &str,
    device_row: &dyn Fn(&DeviceRow) -> String,
) -> String {
    let used: Vec<&DeviceRow> = devices.iter().filter(|r| r.used).collect();
    let hosts = host_rows(devices, flagged);
    let _ = writeln!(
        h,
        "<p class=\"note\" id=\"devices-aggregated\">{} devices on {} hosts: more than {DEVICE_TABLE_MAX}, so the table is per host; below, each figure's distribution across the {} used devices, then the flagged devices one by one. <code>rccl-telemetry summary --json</code> or <code>export</code> give every device.</p>",
        devices.len(),
        hosts.len(),
        used.len()
    );
    dist_table(h, &used);
    let fl: Vec<&DeviceRow> = devices.iter().filter(|r| flagged(r)).collect();
    if !fl.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Flagged devices ({}{})</h3>\n<table id=\"flagged-devices\">{device_header}",
            fl.len(),
            if fl.len() > FLAGGED_ROWS_MAX {
                format!(", the first {FLAGGED_ROWS_MAX} in rank order")
            } else {
                String::new()
            }
        );
        for r in fl.iter().take(FLAGGED_ROWS_MAX) {
            h.push_str(&device_row(r));
        }
        h.push_str("</table>\n");
    }
    let _ = writeln!(
        h,
        "<details><summary>Per-host table ({} hosts)</summary>\n<table id=\"hosts\"><tr><th>host</th><th>ranks</th><th>devices used</th><th>tx</th><th>rx</th><th>WQEs sent</th><th>CQ err</th><th>untracked</th><th>worst p99</th><th>at (pid dev)</th><th>flagged devices</th></tr>",
        hosts.len()
    );
    for r in &hosts {
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            if r.flagged > 0 { " class=\"flag\"" } else { "" },
            esc(&r.host),
            r.ranks,
            r.devices_used,
            r.devices,
            fmt_bytes(r.tx_bytes as f64),
            fmt_bytes(r.rx_bytes as f64),
            fmt_count(r.num_wqe_sent),
            fmt_count(r.num_cq_errors),
            fmt_count(r.num_qp_untracked),
            r.worst_p99.as_ref().map_or("-".into(), |w| fmt_ns(w.0)),
            esc(r.worst_p99.as_ref().map_or("", |w| w.1.as_str())),
            r.flagged
        );
    }
    h.push_str("</table></details>\n");
    format!(
        "the device table is one row per host ({} hosts for {} devices) with the distributions across devices and the {} flagged devices",
        hosts.len(),
        devices.len(),
        fl.len().min(FLAGGED_ROWS_MAX)
    )
}

/// (min, median, max) of some values.
type Spread = (f64, f64, f64);

/// One column of the grouped byte-skew chart: `devices` consecutive devices from `first`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkewColumn {
    pub first: usize,
    pub devices: usize,
    pub tx: Spread,
    pub rx: Spread,
}

/// Groups the (label, tx, rx, flagged) points, in their order, into at most `max_cols` columns
/// of equal size (the last may be smaller).
pub fn skew_columns(points: &[(String, f64, f64, bool)], max_cols: usize) -> Vec<SkewColumn> {
    let per = points.len().div_ceil(max_cols.max(1)).max(1);
    let spread = |v: Vec<f64>| -> Spread {
        let d = dist(&v).unwrap_or(Dist {
            n: 0,
            min: 0.0,
            p50: 0.0,
            p99: 0.0,
            max: 0.0,
        });
        (d.min, d.p50, d.max)
    };
    points
        .chunks(per)
        .enumerate()
        .map(|(i, c)| SkewColumn {
            first: i * per,
            devices: c.len(),
            tx: spread(c.iter().map(|p| p.1).collect()),
            rx: spread(c.iter().map(|p| p.2).collect()),
        })
        .collect()
}

/// The byte-skew chart with devices grouped: per column a line from the least to the most
/// bytes of its devices (blue tx, orange rx, side by side) and a dot at their median; every
/// flagged device drawn in red at its column; dashed: the run's medians.
pub fn skew_grouped_svg(
    points: &[(String, f64, f64, bool)],
    median_tx: f64,
    median_rx: f64,
) -> DrawResult<String> {
    let cols = skew_columns(points, SKEW_MAX_COLUMNS);
    let per = cols.first().map_or(1, |c| c.devices.max(1));
    skew_frame(
        points,
        per,
        &format!("Bytes per device, {per} devices per column (line: least to most, dot: median; blue tx, orange rx; red: flagged)"),
        &format!(
            "first device of the column, numbered in rank (host, pid) order ({per} per column)"
        ),
        20,
        (median_tx, median_rx),
        |chart, unit| {
            for (off, pick, colour) in [
                (
                    -0.2,
                    (|c: &SkewColumn| c.tx) as fn(&SkewColumn) -> Spread,
                    BLUE,
                ),
                (0.2, |c: &SkewColumn| c.rx, ORANGE),
            ] {
                chart
                    .draw_series(cols.iter().enumerate().map(|(i, c)| {
                        let (lo, _, hi) = pick(c);
                        PathElement::new(
                            vec![(i as f64 + off, lo / unit), (i as f64 + off, hi / unit)],
                            colour.stroke_width(1),
                        )
                    }))
                    .map_err(e2s)?;
                chart
                    .draw_series(cols.iter().enumerate().map(|(i, c)| {
                        Circle::new((i as f64 + off, pick(c).1 / unit), 2, colour.filled())
                    }))
                    .map_err(e2s)?;
            }
            chart
                .draw_series(
                    points
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| p.3)
                        .flat_map(|(i, p)| {
                            let x = (i / per) as f64;
                            [
                                Circle::new((x - 0.2, p.1 / unit), 3, FLAG.filled()),
                                Circle::new((x + 0.2, p.2 / unit), 3, FLAG.filled()),
                            ]
                        }),
                )
                .map_err(e2s)?;
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_is_nearest_rank_and_skips_nan() {
        let v: Vec<f64> = (1..=100).map(f64::from).chain([f64::NAN]).collect();
        let d = dist(&v).unwrap();
        assert_eq!(
            (d.n, d.min, d.p50, d.p99, d.max),
            (100, 1.0, 50.0, 99.0, 100.0)
        );
        assert_eq!(dist(&[]), None);
        assert_eq!(dist(&[f64::NAN]), None);
        let one = dist(&[7.0]).unwrap();
        assert_eq!((one.min, one.p50, one.p99, one.max), (7.0, 7.0, 7.0, 7.0));
    }

    fn pts(n: usize) -> Vec<(String, f64, f64, bool)> {
        (0..n)
            .map(|i| (format!("r{i}"), i as f64, (n - i) as f64, i % 7 == 0))
            .collect()
    }

    #[test]
    fn skew_columns_cover_every_device_once_within_the_bound() {
        for n in [1usize, 5, 1024, 1025, 4096, 131_072] {
            let p = pts(n);
            let cols = skew_columns(&p, SKEW_MAX_COLUMNS);
            assert!(
                cols.len() <= SKEW_MAX_COLUMNS,
                "{n}: {} columns",
                cols.len()
            );
            assert_eq!(cols.iter().map(|c| c.devices).sum::<usize>(), n);
            let mut next = 0;
            for c in &cols {
                assert_eq!(c.first, next);
                next += c.devices;
                // tx is i: the column spans its first and last device.
                assert_eq!(c.tx.0, c.first as f64);
                assert_eq!(c.tx.2, (c.first + c.devices - 1) as f64);
                assert!(c.tx.0 <= c.tx.1 && c.tx.1 <= c.tx.2);
            }
        }
    }

    #[test]
    fn the_grouped_chart_draws_a_bounded_number_of_marks_and_every_flagged_device() {
        let p = pts(20_000);
        let svg = skew_grouped_svg(&p, 10_000.0, 10_000.0).unwrap();
        let flagged = p.iter().filter(|x| x.3).count();
        let circles = svg.matches("<circle").count();
        let cols = skew_columns(&p, SKEW_MAX_COLUMNS).len();
        assert_eq!(circles, 2 * cols + 2 * flagged);
        assert!(svg.matches("<polyline").count() + svg.matches("<line").count() >= 2 * cols);
    }
}
