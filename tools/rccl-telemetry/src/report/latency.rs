//! The report's completion-latency evidence: the devices x latency heat map (log-scale
//! columns when the files have the log-scale histogram, the linear buckets otherwise), with
//! the devices whose latency a finding names in a band of their own at the top, and the
//! histograms of those devices drawn over the run's. Devices no finding names get no
//! histogram of their own: they look like the run's, which `The run` section shows.

use super::charts::{histogram_svg, log_histogram_svg, Behind, FLAG, HALF, WIDE_W};
use super::{esc, figure};
use crate::model::LogBucket;
use crate::outliers::{Kind, OutlierReport};
use crate::stats::fmt_ns;
use crate::summary::{fmt_percentile, DeviceRow, Summary};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Flagged devices whose histograms are drawn; the rest are in the heat map's top band.
pub const DEVICE_PLOTS: usize = 6;
/// Columns per decade of the log-scale heat map (a column spans a factor of 1.78).
pub const LOG_COLUMNS_PER_DECADE: usize = 4;
/// Height of a flagged row of the heat map: always room for its name.
pub const FLAGGED_ROW_PX: f64 = 14.0;

/// A device as (host, pid, device id).
pub type DevKey = (String, i64, u32);

fn key(r: &DeviceRow) -> DevKey {
    (r.host.clone(), r.pid, r.device_id)
}

/// Whether a finding of this kind is about a device's completion latency.
fn is_latency(k: Kind) -> bool {
    matches!(
        k,
        Kind::LatencyTail | Kind::SlowNic | Kind::SlowLink | Kind::SlowHost
    )
}

/// The devices whose completion latency a finding names: a latency tail on the device, or a
/// fabric finding (slow NIC, link, host) naming its NIC.
pub fn latency_flagged(s: &Summary, o: &OutlierReport) -> BTreeSet<DevKey> {
    let mut out = BTreeSet::new();
    for f in o.findings.iter().filter(|f| is_latency(f.kind)) {
        if let (Kind::LatencyTail, Some(d)) = (f.kind, f.device_id) {
            out.insert((f.host.clone(), f.pid, d));
        }
        for (host, nic) in &f.nics {
            for r in s
                .devices
                .iter()
                .filter(|r| r.host == *host && r.roce_device == *nic)
            {
                out.insert(key(r));
            }
        }
    }
    out
}

/// One row of the heat map: its name, the share of its completions in each column, flagged.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatRow {
    pub label: String,
    pub shares: Vec<f64>,
    pub flagged: bool,
}

/// What the heat map's columns are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HeatAxis {
    /// The linear histogram's buckets, `width_ns` wide; the last is open.
    Linear { width_ns: u64 },
    /// [`LOG_COLUMNS_PER_DECADE`] columns per decade from 10^`first_decade` ns.
    Log { first_decade: i32 },
}

/// The decades a set of log-scale histograms spans, as the exponents of ten (first, last).
fn log_decades<'a>(hists: impl Iterator<Item = &'a [LogBucket]>) -> (i32, i32) {
    let (mut lo, mut hi) = (f64::MAX, 1.0f64);
    for b in hists.flatten().filter(|b| b.2 > 0) {
        lo = lo.min((b.0 as f64).max(1.0));
        hi = hi.max(super::charts::log_bucket_end(b));
    }
    let a = if lo == f64::MAX {
        0
    } else {
        lo.log10().floor() as i32
    };
    let b = (hi.log10().ceil() as i32).max(a + 1);
    (a.max(0), b)
}

/// A log-scale histogram as shares of its completions per column, for columns from
/// 10^`first` ns, [`LOG_COLUMNS_PER_DECADE`] per decade, `n` columns. A bucket goes to the
/// column of its geometric middle (buckets are at most 1/8 of their bound wide, columns 78%).
pub fn log_shares(buckets: &[LogBucket], first: i32, n: usize) -> Vec<f64> {
    let mut counts = vec![0u64; n];
    for b in buckets.iter().filter(|b| b.2 > 0) {
        let lo = (b.0 as f64).max(1.0);
        let mid = (lo * super::charts::log_bucket_end(b).max(lo)).sqrt();
        let c = ((mid.log10() - f64::from(first)) * LOG_COLUMNS_PER_DECADE as f64).floor();
        let c = (c.max(0.0) as usize).min(n.saturating_sub(1));
        counts[c] = counts[c].saturating_add(b.2);
    }
    shares(&counts)
}

fn shares(counts: &[u64]) -> Vec<f64> {
    let total = counts.iter().fold(0u64, |s, c| s.saturating_add(*c)).max(1) as f64;
    counts.iter().map(|c| *c as f64 / total).collect()
}

/// The devices a heat map draws, at most `max_devices`: every flagged one (up to the bound),
/// then the first others in rank order; flagged first, each group in rank order.
pub fn pick_rows<'a>(
    eligible: &[&'a DeviceRow],
    flagged: &BTreeSet<DevKey>,
    max_devices: usize,
) -> Vec<(&'a DeviceRow, bool)> {
    let is = |r: &DeviceRow| flagged.contains(&key(r));
    let mut rows: Vec<(&DeviceRow, bool)> = eligible
        .iter()
        .filter(|r| is(r))
        .take(max_devices)
        .map(|r| (*r, true))
        .collect();
    let room = max_devices.saturating_sub(rows.len());
    rows.extend(
        eligible
            .iter()
            .filter(|r| !is(r))
            .take(room)
            .map(|r| (*r, false)),
    );
    let label = |r: &DeviceRow| (r.host.clone(), r.pid, r.device_id);
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| label(a.0).cmp(&label(b.0))));
    rows
}

fn row_label(r: &DeviceRow) -> String {
    format!("{}:{} d{}", r.host, r.pid, r.device_id)
}

/// Appends the section to `h`; what it drew aggregated goes into `aggregated`.
pub(super) fn section(
    h: &mut String,
    s: &Summary,
    o: &OutlierReport,
    max_devices: usize,
    aggregated: &mut Vec<String>,
) {
    let flagged = latency_flagged(s, o);
    h.push_str("<h2 id=\"latency\">Completion latency per device</h2>\n");
    let eligible: Vec<&DeviceRow> = s
        .devices
        .iter()
        .filter(|r| r.used && r.latency.samples > 0)
        .collect();
    if eligible.is_empty() {
        h.push_str("<p>No device sampled any completion.</p>\n");
        return;
    }
    device_histograms(h, s, &eligible, &flagged);
    // The log-scale map for the devices that have the histogram, the linear one for the rest.
    let (with_log, without): (Vec<&DeviceRow>, Vec<&DeviceRow>) =
        eligible.iter().partition(|r| r.log_histogram.is_some());
    if !with_log.is_empty() {
        log_heat_map(h, &with_log, &flagged, max_devices, aggregated);
    }
    if !without.is_empty() {
        linear_heat_map(h, &without, &flagged, max_devices, aggregated);
    }
}

/// The histograms of the devices whose latency a finding names (the highest p99 first, at most
/// [`DEVICE_PLOTS`]), each over the run's histogram of the same kind.
fn device_histograms(
    h: &mut String,
    s: &Summary,
    eligible: &[&DeviceRow],
    flagged: &BTreeSet<DevKey>,
) {
    let mut devs: Vec<&DeviceRow> = eligible
        .iter()
        .filter(|r| flagged.contains(&key(r)))
        .copied()
        .collect();
    if devs.is_empty() {
        h.push_str("<p class=\"note\">No finding names a device's completion latency: every device is in the heat map below, and the run's histogram is under <a href=\"#summary\">Summary</a>.</p>\n");
        return;
    }
    let p99 = |r: &DeviceRow| {
        r.log_latency
            .as_ref()
            .unwrap_or(&r.latency)
            .get(0.99)
            .map_or(0.0, |p| p.estimate_ns)
    };
    devs.sort_by(|a, b| p99(b).total_cmp(&p99(a)));
    let _ = writeln!(
        h,
        "<p class=\"note\">The {} device{} whose latency a finding names{}, in red over the whole run's histogram (grey outline).</p>",
        devs.len().min(DEVICE_PLOTS),
        if devs.len().min(DEVICE_PLOTS) == 1 { "" } else { "s" },
        if devs.len() > DEVICE_PLOTS {
            format!(" (the {DEVICE_PLOTS} highest p99 of {}; all of them head the heat map)", devs.len())
        } else {
            String::new()
        }
    );
    for r in devs.iter().take(DEVICE_PLOTS) {
        let name = format!(
            "{}:{} device {} ({})",
            r.host, r.pid, r.device_id, r.roce_device
        );
        let run_log = s.log_latency.as_ref().map(|l| l.buckets.as_slice());
        if let (Some(lh), Some(ll)) = (&r.log_histogram, &r.log_latency) {
            figure(
                h,
                "latency-device-log",
                &format!(
                    "{name}, {}, log latency axis; p99 {}; grey outline: the whole run",
                    super::LOG_HIST_LABEL,
                    fmt_percentile(ll.get(0.99))
                ),
                log_histogram_svg(
                    &format!(
                        "{}:{} dev {}, log-scale histogram",
                        r.host, r.pid, r.device_id
                    ),
                    lh,
                    run_log.map(Behind::Log),
                    HALF,
                    FLAG,
                ),
            );
            continue;
        }
        let run_linear = s
            .latency
            .iter()
            .find(|l| l.histogram_interval_ns == r.histogram_interval_ns)
            .map(|l| Behind::Linear(&l.histogram));
        figure(
            h,
            "latency-device",
            &format!(
                "{name}, linear histogram, bucket width {}; p99 {}; grey outline: the whole run",
                fmt_ns(r.histogram_interval_ns as f64),
                fmt_percentile(r.latency.get(0.99))
            ),
            histogram_svg(
                &format!("{}:{} dev {}", r.host, r.pid, r.device_id),
                &r.histogram,
                r.histogram_interval_ns,
                run_linear,
                HALF,
                FLAG,
            ),
        );
    }
}

fn note_drawn(aggregated: &mut Vec<String>, what: &str, shown: usize, of: usize) {
    if shown < of {
        aggregated.push(format!(
            "the {what} heat map draws {shown} of {of} devices (every flagged one, then the first in rank order; --max-devices)"
        ));
    }
}

fn band_note(rows: &[(&DeviceRow, bool)], of: usize) -> String {
    let nf = rows.iter().filter(|r| r.1).count();
    let shown = rows.len();
    let mut s = if nf > 0 {
        format!(
            "{nf} device{} whose latency a finding names on top (red), then {} in rank order",
            if nf == 1 { "" } else { "s" },
            shown - nf
        )
    } else {
        format!("{shown} devices in rank order")
    };
    if shown < of {
        let _ = write!(
            s,
            " ({shown} of {of}: every flagged one, then the first others)"
        );
    }
    s
}

fn log_heat_map(
    h: &mut String,
    eligible: &[&DeviceRow],
    flagged: &BTreeSet<DevKey>,
    max_devices: usize,
    aggregated: &mut Vec<String>,
) {
    let rows = pick_rows(eligible, flagged, max_devices);
    let (a, b) = log_decades(rows.iter().filter_map(|r| r.0.log_histogram.as_deref()));
    let n = (b - a) as usize * LOG_COLUMNS_PER_DECADE;
    let heat: Vec<HeatRow> = rows
        .iter()
        .map(|(r, f)| HeatRow {
            label: row_label(r),
            shares: log_shares(r.log_histogram.as_deref().unwrap_or(&[]), a, n),
            flagged: *f,
        })
        .collect();
    note_drawn(aggregated, "latency", rows.len(), eligible.len());
    figure(
        h,
        "latency-heatmap",
        &format!(
            "{}; log-scale histogram (wqe_completion_log_histogram), {LOG_COLUMNS_PER_DECADE} columns per decade of latency; colour: the share of the device's completions, log scale.",
            band_note(&rows, eligible.len())
        ),
        Ok(heatmap_svg(&heat, HeatAxis::Log { first_decade: a })),
    );
}

fn linear_heat_map(
    h: &mut String,
    eligible: &[&DeviceRow],
    flagged: &BTreeSet<DevKey>,
    max_devices: usize,
    aggregated: &mut Vec<String>,
) {
    // One bucket width per map: the narrowest the devices have.
    let Some(w) = eligible.iter().map(|r| r.histogram_interval_ns).min() else {
        return;
    };
    let same: Vec<&DeviceRow> = eligible
        .iter()
        .filter(|r| r.histogram_interval_ns == w)
        .copied()
        .collect();
    let rows = pick_rows(&same, flagged, max_devices);
    let heat: Vec<HeatRow> = rows
        .iter()
        .map(|(r, f)| HeatRow {
            label: row_label(r),
            shares: shares(&r.histogram),
            flagged: *f,
        })
        .collect();
    note_drawn(aggregated, "linear latency", rows.len(), same.len());
    figure(
        h,
        "latency-heatmap",
        &format!(
            "{}; linear histogram (wqe_completion_histogram), bucket width {}{}; colour: the share of the device's completions, log scale.",
            band_note(&rows, same.len()),
            fmt_ns(w as f64),
            if same.len() < eligible.len() {
                format!(" ({} devices of other bucket widths left out)", eligible.len() - same.len())
            } else {
                String::new()
            }
        ),
        Ok(heatmap_svg(&heat, HeatAxis::Linear { width_ns: w })),
    );
}

/// Colour of a cell: its share on a log scale (0.01% pale, 100% full), red for flagged rows.
fn cell_colour(share: f64, flagged: bool) -> String {
    let t = ((share.log10() + 4.0) / 4.0).clamp(0.05, 1.0);
    let fade = |full: f64| (255.0 - (255.0 - full) * t).round() as u8;
    if flagged {
        format!("rgb(255,{},{})", fade(0.0), fade(0.0))
    } else {
        format!("rgb({},{},255)", fade(0.0), fade(102.0))
    }
}

/// The heat map as SVG: flagged rows first, each [`FLAGGED_ROW_PX`] high and named, then a
/// gap, then the other rows as high as 600 px allows (named every few rows when thin).
pub fn heatmap_svg(rows: &[HeatRow], axis: HeatAxis) -> String {
    let ncols = rows
        .iter()
        .map(|r| r.shares.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let nf = rows.iter().filter(|r| r.flagged).count();
    let nu = rows.len() - nf;
    let uh = super::charts::heatmap_row_height(nu);
    let longest = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(8);
    let x0 = (longest.clamp(8, 48) as f64 * 7.0 + 14.0).round();
    let x1 = f64::from(WIDE_W) - 34.0;
    let cw = (x1 - x0) / ncols as f64;
    let top = 44.0;
    let gap = if nf > 0 && nu > 0 { 10.0 } else { 0.0 };
    let band_u = top + nf as f64 * FLAGGED_ROW_PX + gap;
    let bottom = band_u + nu as f64 * uh;
    let height = bottom + 34.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDE_W}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDE_W} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
    );
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">Completion latency per device (row = device, colour = share of its completions)</text>",
        f64::from(WIDE_W) / 2.0
    );
    legend(&mut s, x1);
    let ys: Vec<(f64, f64)> = {
        let (mut f, mut u) = (0usize, 0usize);
        rows.iter()
            .map(|r| {
                if r.flagged {
                    f += 1;
                    (top + (f - 1) as f64 * FLAGGED_ROW_PX, FLAGGED_ROW_PX)
                } else {
                    u += 1;
                    (band_u + (u - 1) as f64 * uh, uh)
                }
            })
            .collect()
    };
    let _ = write!(
        s,
        "<rect x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#bbb\"/>",
        x1 - x0,
        bottom - top
    );
    for (r, (y, rh)) in rows.iter().zip(&ys) {
        for (c, share) in r.shares.iter().enumerate().filter(|(_, v)| **v > 0.0) {
            let _ = write!(
                s,
                "<rect x=\"{:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"/>",
                x0 + c as f64 * cw,
                cw + 0.05,
                rh + 0.05,
                cell_colour(*share, r.flagged)
            );
        }
    }
    if nf > 0 && nu > 0 {
        let y = band_u - gap / 2.0;
        let _ = write!(s, "<line x1=\"{:.1}\" x2=\"{x1:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>", 4.0);
    }
    // Names: every flagged row, and the others every few rows when they are thin.
    let unflagged: Vec<usize> = (0..rows.len()).filter(|i| !rows[*i].flagged).collect();
    let named: BTreeSet<usize> = super::charts::heatmap_label_rows(nu, uh, &vec![false; nu])
        .into_iter()
        .map(|(_, ri)| unflagged[ri])
        .chain((0..rows.len()).filter(|i| rows[*i].flagged))
        .collect();
    for i in named {
        let (y, rh) = ys[i];
        let r = &rows[i];
        let style = if r.flagged {
            " fill=\"#b00\" font-weight=\"bold\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\"{style}>{}</text>",
            x0 - 5.0,
            y + rh / 2.0,
            esc(&r.label)
        );
    }
    x_axis(&mut s, axis, ncols, (x0, cw), bottom);
    s.push_str("</svg>");
    s
}

/// The colour key: five shares from 0.01% to 100%, right-aligned on the title's line.
fn legend(s: &mut String, right: f64) {
    let shares = [1e-4, 1e-3, 1e-2, 1e-1, 1.0];
    let w = 46.0;
    let x = right - w * shares.len() as f64;
    for (i, v) in shares.iter().enumerate() {
        let xi = x + i as f64 * w;
        let _ = write!(
            s,
            "<rect x=\"{xi:.1}\" y=\"26\" width=\"{w:.0}\" height=\"8\" fill=\"{}\" stroke=\"#ccc\" stroke-width=\"0.5\"/><text x=\"{:.1}\" y=\"23\" text-anchor=\"middle\" font-size=\"9\" fill=\"#555\">{}%</text>",
            cell_colour(*v, false),
            xi + w / 2.0,
            v * 100.0
        );
    }
}

fn x_axis(s: &mut String, axis: HeatAxis, ncols: usize, (x0, cw): (f64, f64), y: f64) {
    let mut tick = |x: f64, label: String| {
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y:.1}\" y2=\"{:.1}\" stroke=\"#000\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            y + 4.0,
            y + 16.0,
            esc(&label)
        );
    };
    match axis {
        HeatAxis::Linear { width_ns } => {
            for b in 0..ncols {
                let label = if b + 1 == ncols {
                    format!(">={}", fmt_ns(b as f64 * width_ns as f64))
                } else {
                    format!("<{}", fmt_ns((b as f64 + 1.0) * width_ns as f64))
                };
                tick(x0 + (b as f64 + 0.5) * cw, label);
            }
        }
        HeatAxis::Log { first_decade } => {
            for d in 0..=ncols / LOG_COLUMNS_PER_DECADE {
                let e = first_decade + d as i32;
                tick(
                    x0 + (d * LOG_COLUMNS_PER_DECADE) as f64 * cw,
                    fmt_ns(10f64.powi(e)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Hi;

    #[test]
    fn log_shares_put_each_bucket_in_its_decade_quarter() {
        // 1 µs .. 1.125 µs sits in [1 µs, 1.78 µs): column 0 of a map from 1 µs; 10 µs in
        // column 4; 100 ms beyond the last column is clamped into it.
        let b: Vec<LogBucket> = vec![
            (1000, Some(1119).into(), 3),
            (10_240, Some(11_263).into(), 1),
            (100_000_000, Hi::OPEN, 4),
        ];
        let v = log_shares(&b, 3, 8);
        assert_eq!(v.len(), 8);
        assert!((v[0] - 3.0 / 8.0).abs() < 1e-12, "{v:?}");
        assert!((v[4] - 1.0 / 8.0).abs() < 1e-12, "{v:?}");
        assert!((v[7] - 4.0 / 8.0).abs() < 1e-12, "{v:?}");
        assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn decades_cover_every_bucket() {
        let a: Vec<LogBucket> = vec![(700, Some(767).into(), 1)];
        let b: Vec<LogBucket> = vec![(2_000_000, Some(2_097_151).into(), 1)];
        assert_eq!(
            log_decades([a.as_slice(), b.as_slice()].into_iter()),
            (2, 7)
        );
        assert_eq!(log_decades(std::iter::empty()), (0, 1));
    }

    fn row(label: &str, flagged: bool) -> HeatRow {
        HeatRow {
            label: label.into(),
            shares: vec![0.5, 0.25, 0.25, 0.0],
            flagged,
        }
    }

    /// At 4,096 ranks a flagged row stays a named band as high as a line of text, whatever
    /// the number of thin rows below it.
    #[test]
    fn a_flagged_row_is_a_named_band_at_the_top_however_many_rows() {
        let mut rows: Vec<HeatRow> = (0..511).map(|i| row(&format!("h:{i} d0"), false)).collect();
        rows.insert(300, row("h:flagged d3", true));
        let svg = heatmap_svg(&rows, HeatAxis::Log { first_decade: 3 });
        let label = svg
            .split("<text")
            .find(|t| t.contains(">h:flagged d3<"))
            .expect("the flagged row is named");
        assert!(label.contains("fill=\"#b00\""));
        // Its cells are FLAGGED_ROW_PX high and come before every other row's.
        let first_cell = svg
            .split("<rect")
            .find(|r| r.contains("fill=\"rgb(255,"))
            .expect("red cells");
        assert!(first_cell.contains(&format!("height=\"{:.2}\"", FLAGGED_ROW_PX + 0.05)));
        let y = |r: &str| -> f64 {
            r.split("y=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let first_blue = svg
            .split("<rect")
            .find(|r| r.contains("fill=\"rgb(") && r.contains(",255)\"") && !r.contains("stroke"))
            .unwrap();
        assert!(y(first_cell) < y(first_blue));
        // Decade ticks: 1 µs at the left edge.
        assert!(svg.contains(">1.0 µs</text>"));
    }

    #[test]
    fn cells_fade_with_their_share() {
        assert_eq!(cell_colour(1.0, false), "rgb(0,102,255)");
        assert_eq!(cell_colour(1.0, true), "rgb(255,0,0)");
        // 0.01% and below: the palest colour, not white.
        assert_eq!(cell_colour(1e-6, false), cell_colour(1e-4, false));
        assert_ne!(cell_colour(1e-4, false), "rgb(255,255,255)");
    }
}
