//! The report's hardware-counter time series (`hw_samples`): one chart per counter, a line per
//! device, flagged lines first and red, and where the time origin of each file's samples lies.
//! Apart from the page's layout (`report.rs`) because it is the one section that reads the
//! files' samples rather than the summary.

use super::charts::{series_svg, SeriesLine};
use super::figure;
use crate::load::Run;
use crate::outliers::OutlierReport;
use crate::summary::rank_label;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Appends the section to `h`; what it drew aggregated goes into `aggregated`.
pub(super) fn section(
    h: &mut String,
    run: &Run,
    o: &OutlierReport,
    max_devices: usize,
    aggregated: &mut Vec<String>,
) {
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
                        per.entry((smp.device_id, k)).or_default().push((
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
                h,
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
}
