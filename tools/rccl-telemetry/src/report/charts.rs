//! The report's SVG charts, drawn with plotters: the linear and log-scale latency histograms,
//! the devices x buckets heat map, the hw_samples time series and the byte skew. Separate from
//! report.rs (the page) so the page's layout reads apart from the drawing, and the axis helpers
//! the tests check are in one place.

use super::*;
use plotters::coord::types::RangedCoordf64;

pub(super) const FLAG: RGBColor = RGBColor(214, 39, 40);
pub(super) const BLUE: RGBColor = RGBColor(31, 119, 180);
pub(super) const ORANGE: RGBColor = RGBColor(255, 127, 14);
pub(super) const GREY: RGBColor = RGBColor(150, 150, 150);

pub(super) type DrawResult<T> = Result<T, String>;

/// Drawing size of a chart that shares a row with one other (histograms, time series): the
/// page scales it to half its width (CSS), so text keeps about its drawn size on a wide screen.
pub(super) const HALF: (u32, u32) = (660, 300);
/// Drawing width of a chart that has a row to itself (heat map, byte skew).
pub(super) const WIDE_W: u32 = 1360;

pub(super) fn e2s<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// A histogram drawn behind another as a grey outline: the whole run's, so a device's shape
/// reads against it.
#[derive(Clone, Copy)]
pub(super) enum Behind<'a> {
    Linear(&'a [u64]),
    Log(&'a [crate::model::LogBucket]),
}

/// Shares (%) of a linear histogram's buckets.
fn linear_shares(hist: &[u64]) -> Vec<f64> {
    let total: u64 = crate::stats::hist_total(hist).max(1);
    hist.iter()
        .map(|c| *c as f64 / total as f64 * 100.0)
        .collect()
}

/// A bar chart of one histogram (share of completions per bucket), with another one's
/// shares outlined over it when `behind` is a linear histogram of the same buckets.
pub(super) fn histogram_svg(
    title: &str,
    hist: &[u64],
    width_ns: u64,
    behind: Option<Behind>,
    (w, h): (u32, u32),
    color: RGBColor,
) -> DrawResult<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let shares = linear_shares(hist);
        let over: Vec<f64> = match behind {
            Some(Behind::Linear(b)) if b.len() == hist.len() => linear_shares(b),
            _ => Vec::new(),
        };
        let ymax = shares
            .iter()
            .chain(&over)
            .cloned()
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.1;
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
            .y_label_formatter(&share_label)
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
        chart
            .draw_series(
                over.iter()
                    .enumerate()
                    .filter(|(_, s)| **s > 0.0)
                    .map(|(b, s)| {
                        Rectangle::new(
                            [(b as f64 + 0.08, 0.0), (b as f64 + 0.92, *s)],
                            RUN_OUTLINE.stroke_width(2),
                        )
                    }),
            )
            .map_err(e2s)?;
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// The outline of the run's histogram behind a device's.
pub(super) const RUN_OUTLINE: RGBColor = RGBColor(70, 70, 70);

/// Where a latency sits on the log axis of [`log_histogram_svg`]: log10 of the ns (the axis
/// starts at 1 ns; the exact 0 ns bucket is drawn as a thin bar there).
pub(super) fn log_x(ns: f64) -> f64 {
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
pub(super) fn log_bucket_end(b: &crate::model::LogBucket) -> f64 {
    match b.1.get() {
        Some(hi) => hi as f64 + 1.0,
        None => b.0 as f64 * 1.125,
    }
}

/// The tick labels of the log axis: one per power of ten.
pub fn log_axis_labels(buckets: &[crate::model::LogBucket]) -> Vec<String> {
    let (a, b) = log_axis_decades(buckets);
    (a..=b).map(|e| fmt_ns(10f64.powi(e))).collect()
}

/// Each non-empty bucket of a log-scale histogram as (log10 lo, log10 end, % share).
fn log_shares(buckets: &[crate::model::LogBucket]) -> Vec<(f64, f64, f64)> {
    let total: u64 = buckets
        .iter()
        .fold(0u64, |s, b| s.saturating_add(b.2))
        .max(1);
    buckets
        .iter()
        .filter(|b| b.2 > 0)
        .map(|b| {
            (
                log_x(b.0 as f64),
                log_bucket_end(b).log10(),
                b.2 as f64 / total as f64 * 100.0,
            )
        })
        .collect()
}

/// A bar chart of one log-scale histogram (share of completions per bucket) on a log latency
/// axis, ticks at powers of ten; each bar spans its bucket's bounds. With `behind` a
/// log-scale histogram, its shares are outlined over the bars on the same axis.
pub(super) fn log_histogram_svg(
    title: &str,
    buckets: &[crate::model::LogBucket],
    behind: Option<Behind>,
    (w, h): (u32, u32),
    color: RGBColor,
) -> DrawResult<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let shares = log_shares(buckets);
        let over_buckets: &[crate::model::LogBucket] = match behind {
            Some(Behind::Log(b)) => b,
            _ => &[],
        };
        let over = log_shares(over_buckets);
        let ymax = shares
            .iter()
            .chain(&over)
            .map(|s| s.2)
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.1;
        let (a, b) = if over.is_empty() {
            log_axis_decades(buckets)
        } else {
            let (a0, b0) = log_axis_decades(buckets);
            let (a1, b1) = log_axis_decades(over_buckets);
            (a0.min(a1), b0.max(b1))
        };
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
            .y_label_formatter(&share_label)
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
        // Narrow buckets (the exact ones below 16 ns) still get a visible bar.
        let bar = |(x0, x1, s): &(f64, f64, f64)| [(*x0, 0.0), (x1.max(x0 + 0.01), *s)];
        chart
            .draw_series(
                shares
                    .iter()
                    .map(|v| Rectangle::new(bar(v), color.filled())),
            )
            .map_err(e2s)?;
        chart
            .draw_series(
                over.iter()
                    .map(|v| Rectangle::new(bar(v), RUN_OUTLINE.stroke_width(1))),
            )
            .map_err(e2s)?;
        root.present().map_err(e2s)?;
    }
    Ok(buf)
}

/// What a log-scale histogram's figure says about where it came from.
pub const LOG_HIST_LABEL: &str =
    "log-scale histogram (wqe_completion_log_histogram), relative error <= 12.5%";

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

/// One device's line in a time-series chart: its label, (seconds, value) points, flagged.
pub(super) type SeriesLine = (String, Vec<(f64, f64)>, bool);

/// One line per device for one sampled counter; flagged ranks in red, the rest grey.
pub(super) fn series_svg(counter: &str, lines: &[SeriesLine]) -> DrawResult<String> {
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

/// The plotting area both byte-skew charts draw on.
pub(super) type SkewChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The binary unit a byte axis up to `max` bytes is drawn in: (bytes per unit, its name),
/// the largest of B, KiB, MiB, ... that `max` reaches, so ticks fall on round numbers of it.
pub fn byte_axis_unit(max: f64) -> (f64, &'static str) {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut i = 0;
    while i + 1 < UNITS.len() && max >= 1024f64.powi(i as i32 + 1) {
        i += 1;
    }
    (1024f64.powi(i as i32), UNITS[i])
}

/// A tick label of a byte axis drawn in `unit`: "200 MiB", "2.5 GiB" (no trailing zeros).
pub fn byte_tick_label(v: f64, unit: &str) -> String {
    let t = format!("{v:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t} {unit}")
}

/// The frame both byte-skew charts share: bytes on the y axis up to the largest tx or rx of
/// `points`, in the binary unit that keeps its ticks round (`draw` gets the bytes per unit
/// to divide by), one x column per `per` devices in rank order (labelled with its first
/// device), and the run's tx and rx medians dashed across, drawn after `draw` has added the
/// marks.
pub(super) fn skew_frame(
    points: &[(String, f64, f64, bool)],
    per: usize,
    caption: &str,
    x_desc: &str,
    x_labels: usize,
    (median_tx, median_rx): (f64, f64),
    draw: impl FnOnce(&mut SkewChart, f64) -> DrawResult<()>,
) -> DrawResult<String> {
    let per = per.max(1);
    let n = points.len().div_ceil(per).max(1);
    let top = points
        .iter()
        .map(|p| p.1.max(p.2))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.08;
    let (unit, unit_name) = byte_axis_unit(top);
    let ymax = top / unit;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDE_W, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(e2s)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)
            .map_err(e2s)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .x_labels(x_labels)
            // Columns are whole numbers: a tick between two of them gets no label (rounding
            // 0.5 and 1.5 would repeat 0, 0, 1, 1, 2, 2).
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 && *x >= 0.0 {
                    format!("{:.0}", x * per as f64)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| byte_tick_label(*y, unit_name))
            .draw()
            .map_err(e2s)?;
        draw(&mut chart, unit)?;
        for (m, c) in [(median_tx, BLUE), (median_rx, ORANGE)] {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(-0.5, m / unit), (n as f64 - 0.5, m / unit)],
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

/// tx and rx bytes per device in rank order, with the median; flagged devices in red.
pub(super) fn skew_svg(
    points: &[(String, f64, f64, bool)],
    median_tx: f64,
    median_rx: f64,
) -> DrawResult<String> {
    let n = points.len().max(1);
    skew_frame(
        points,
        1,
        "Bytes per rank and device (blue tx, orange rx, dashed: median; red: flagged)",
        "device, numbered in rank (host, pid) order",
        skew_ticks(n).len().max(2),
        (median_tx, median_rx),
        |chart, unit| {
            let r = if n > 200 { 2 } else { 3 };
            chart
                .draw_series(points.iter().enumerate().map(|(i, p)| {
                    Circle::new(
                        (i as f64, p.1 / unit),
                        r,
                        if p.3 { FLAG.filled() } else { BLUE.filled() },
                    )
                }))
                .map_err(e2s)?;
            chart
                .draw_series(points.iter().enumerate().map(|(i, p)| {
                    TriangleMarker::new(
                        (i as f64, p.2 / unit),
                        r,
                        if p.3 { FLAG.filled() } else { ORANGE.filled() },
                    )
                }))
                .map_err(e2s)?;
            Ok(())
        },
    )
}

/// A share axis's tick label: whole percents as integers, plotters' half and fifth steps with
/// one decimal (with `{:.0}` a 0-5 % axis read 0, 0, 1, 1, 2, 2, ...).
fn share_label(y: &f64) -> String {
    if (y - y.round()).abs() < 1e-9 {
        format!("{y:.0}")
    } else {
        format!("{y:.1}")
    }
}

#[cfg(test)]
mod share_label_tests {
    use super::share_label;

    #[test]
    fn fractional_ticks_keep_a_decimal_and_whole_ones_none() {
        // plotters' ticks on a 0-5 % axis: each label distinct, whole percents bare.
        let ticks = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5];
        let labels: Vec<String> = ticks.iter().map(share_label).collect();
        assert_eq!(labels[..4], ["0", "0.5", "1", "1.5"]);
        let mut d = labels.clone();
        d.dedup();
        assert_eq!(d.len(), labels.len(), "{labels:?}");
        assert_eq!(share_label(&12.0), "12");
        assert_eq!(share_label(&0.2), "0.2");
    }
}

#[cfg(test)]
mod byte_axis_tests {
    use super::*;

    #[test]
    fn the_unit_is_the_largest_the_axis_reaches() {
        assert_eq!(byte_axis_unit(0.0), (1.0, "B"));
        assert_eq!(byte_axis_unit(1023.0), (1.0, "B"));
        assert_eq!(byte_axis_unit(1024.0), (1024.0, "KiB"));
        assert_eq!(byte_axis_unit(600.0 * 1048576.0), (1048576.0, "MiB"));
        assert_eq!(byte_axis_unit(13.0 * 1073741824.0).1, "GiB");
        assert_eq!(byte_tick_label(200.0, "MiB"), "200 MiB");
        assert_eq!(byte_tick_label(2.5, "GiB"), "2.5 GiB");
        assert_eq!(byte_tick_label(0.0, "GiB"), "0 GiB");
    }

    /// The 530 MiB demo: ticks at whole hundreds of MiB, not at 95.37 MiB (10^8 bytes).
    #[test]
    fn skew_ticks_fall_on_round_mebibytes() {
        let m = 530.92 * 1048576.0;
        let pts: Vec<(String, f64, f64, bool)> =
            (0..8).map(|i| (format!("r{i}"), m, m, false)).collect();
        let svg = skew_svg(&pts, m, m).unwrap();
        let labels: Vec<f64> = svg
            .split("<text")
            .filter_map(|t| t.split_once('>')?.1.split("</text>").next())
            .filter_map(|t| t.trim().strip_suffix(" MiB")?.parse().ok())
            .collect();
        assert!(labels.len() >= 4, "{labels:?}");
        assert!(labels.iter().all(|v| v % 100.0 == 0.0), "{labels:?}");
    }
}
