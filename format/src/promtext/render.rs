//! The renderer: a run's ranks to the text, scope by scope (the rank's times, the device-only
//! counters, the software counters and histograms at device, channel and QP level). The
//! hardware counters and the stalls have files of their own.

use std::collections::HashSet;

use super::data::{Channel, Counts, Device, QpLatency, Rank};
use super::families::{
    Family, Level, Scope, Scope as S, ACTIVE_CHANNELS, CHANNEL_TOTALS, COMPLETION, COMPLETION_LOG,
    CQ_ERRORS, CQ_POLLS, LAST_WRITE, RX_BYTES, START_TIME, TX_BYTES, WQE_LATENCY,
    WQE_LATENCY_STDDEV,
};
use super::hardware::{hw_families, port_qos_family, qp_settings_family};
use super::syntax::{header, label, labels, prom_f64, sample, unique};
use crate::counters::FIELDS;

/// One series owner at some scope: its labels and its counters.
struct Item<'a> {
    labels: String,
    counts: &'a Counts,
    interval_ns: u64,
    totals: Option<&'a Channel>,
    /// A QP's WQE latency monitor statistics.
    monitor: Option<&'a QpLatency>,
}

/// A used device of a kept rank: the rank's index, the device, its labels.
type Dev<'a> = (usize, &'a Device, String);

/// Writes the families of `ranks` (skipping a rank whose host and pid repeat an earlier
/// one's, which would duplicate series); returns how many were skipped.
pub fn render(ranks: &[Rank], level: Level, out: &mut String) -> usize {
    let mut seen = HashSet::new();
    let mut kept: Vec<&Rank> = Vec::with_capacity(ranks.len());
    for r in ranks {
        if seen.insert((r.host.as_str(), r.pid, r.rank.as_deref())) {
            kept.push(r);
        }
    }
    let skipped = ranks.len() - kept.len();

    // Labels, built once per scope.
    let rank_l: Vec<String> = kept
        .iter()
        .map(|r| {
            let pid = r.pid.to_string();
            let mut p = vec![("host", r.host.as_str()), ("pid", pid.as_str())];
            if let Some(k) = &r.rank {
                p.push(("rank", k.as_str()));
            }
            labels(&p)
        })
        .collect();
    let (devs, dev_counts) = used_devices(&kept, &rank_l);

    rank_times(out, &kept, &rank_l);
    if devs.is_empty() {
        return skipped;
    }
    device_only(out, &devs);

    let dev_items: Vec<Item> = devs
        .iter()
        .zip(&dev_counts)
        .map(|((ri, _, l), c)| Item {
            labels: l.clone(),
            counts: c,
            interval_ns: kept[*ri].hist_interval_ns,
            totals: None,
            monitor: None,
        })
        .collect();
    counts_families(
        out,
        S::Device,
        &dev_items,
        devs.iter().map(|(_, d, _)| DevTotals::of(d)).collect(),
    );
    hw_families(out, &devs);
    qp_settings_family(out, &devs);
    port_qos_family(out, &devs);

    if level >= Level::Channel {
        let (ch_items, qp_items) = channel_and_qp_items(&kept, &devs, level);
        if !ch_items.is_empty() {
            let totals = ch_items
                .iter()
                .map(|i| DevTotals::of_channel(i.totals.expect("a channel")))
                .collect();
            counts_families(out, S::Channel, &ch_items, totals);
        }
        if level >= Level::Qp && !qp_items.is_empty() {
            counts_families(out, S::Qp, &qp_items, Vec::new());
            monitor_families(out, &qp_items);
        }
    }
    skipped
}

/// The devices the kept ranks drove, with their labels, and each one's counts: its channels'
/// and its finalized communicators'.
fn used_devices<'a>(kept: &[&'a Rank], rank_l: &[String]) -> (Vec<Dev<'a>>, Vec<Counts>) {
    let mut dev_counts: Vec<Counts> = Vec::new();
    let mut devs: Vec<Dev> = Vec::new();
    for (ri, r) in kept.iter().enumerate() {
        let used: Vec<&Device> = r.devices.iter().filter(|d| d.is_used()).collect();
        let names = unique(used.iter().map(|d| d.name.clone()));
        for (d, name) in used.into_iter().zip(names) {
            let mut l = rank_l[ri].clone();
            let mut first = l.is_empty();
            label(&mut l, &mut first, "device", &name);
            label(&mut l, &mut first, "hw_type", &d.hw_type);
            let mut total = d.finalized.clone();
            for c in &d.channels {
                total.add(&c.counts);
            }
            dev_counts.push(total);
            devs.push((ri, d, l));
        }
    }
    (devs, dev_counts)
}

/// When telemetry started and when the numbers were taken, per rank (a family only when some
/// rank has it).
fn rank_times(out: &mut String, kept: &[&Rank], rank_l: &[String]) {
    type Get = fn(&Rank) -> Option<f64>;
    let times: [(Family, Get); 2] = [(START_TIME, |r| r.start_s), (LAST_WRITE, |r| r.taken_s)];
    for (f, get) in times {
        if kept.iter().any(|r| get(r).is_some()) {
            header(out, &f.name(), f.help, f.kind);
            for (r, l) in kept.iter().zip(rank_l) {
                if let Some(v) = get(r) {
                    sample(out, &f.name(), l, "", prom_f64(v));
                }
            }
        }
    }
}

/// The families only a device has.
fn device_only(out: &mut String, devs: &[Dev]) {
    type Get = fn(&Device) -> u64;
    let families: [(Family, Get); 5] = [
        (TX_BYTES, |d| d.tx_bytes),
        (RX_BYTES, |d| d.rx_bytes),
        (CQ_ERRORS, |d| d.cq_errors),
        (CQ_POLLS, |d| d.cq_polls),
        (ACTIVE_CHANNELS, |d| d.active_channels),
    ];
    for (f, get) in families {
        let name = f.name();
        header(out, &name, f.help, f.kind);
        for (_, d, l) in devs {
            sample(out, &name, l, "", get(d));
        }
    }
}

/// The series owners below the devices: every channel, and (level QP) every QP.
fn channel_and_qp_items<'a>(
    kept: &[&Rank],
    devs: &[Dev<'a>],
    level: Level,
) -> (Vec<Item<'a>>, Vec<Item<'a>>) {
    let mut ch_items: Vec<Item> = Vec::new();
    let mut qp_items: Vec<Item> = Vec::new();
    for (ri, d, dl) in devs {
        let interval_ns = kept[*ri].hist_interval_ns;
        // Channel ids repeat across communicators: distinct within each one.
        let ids = unique(d.channels.iter().enumerate().map(|(i, c)| {
            let id =
                c.id.map_or_else(|| format!("unknown_{i}"), |id| id.to_string());
            let comm = c.comm.as_ref().map(|m| format!("{}/{}", m.hash, m.rank));
            format!("{}\0{id}", comm.unwrap_or_default())
        }));
        for (c, id) in d.channels.iter().zip(ids) {
            let id = id.split_once('\0').map_or(id.as_str(), |(_, i)| i);
            let mut cl = dl.clone();
            let mut first = cl.is_empty();
            label(&mut cl, &mut first, "channel", id);
            if let Some(m) = &c.comm {
                for (k, v) in m.pairs() {
                    label(&mut cl, &mut first, k, &v);
                }
            }
            if level >= Level::Qp {
                let qids = unique(c.qps.iter().map(|q| q.id.to_string()));
                for (q, qid) in c.qps.iter().zip(qids) {
                    let mut ql = cl.clone();
                    let mut first = ql.is_empty();
                    label(&mut ql, &mut first, "qp", &qid);
                    label(
                        &mut ql,
                        &mut first,
                        "role",
                        q.role.as_deref().unwrap_or("unset"),
                    );
                    qp_items.push(Item {
                        labels: ql,
                        counts: &q.counts,
                        interval_ns,
                        totals: None,
                        monitor: q.monitor.as_ref(),
                    });
                }
            }
            ch_items.push(Item {
                labels: cl,
                counts: &c.counts,
                interval_ns,
                totals: Some(c),
                monitor: None,
            });
        }
    }
    (ch_items, qp_items)
}

/// requests completed, untracked QPs, data and CTS QPs of a device or a channel.
struct DevTotals([u64; 4]);

impl DevTotals {
    fn of(d: &Device) -> DevTotals {
        let s =
            |g: fn(&Channel) -> u64| d.channels.iter().fold(0u64, |a, c| a.saturating_add(g(c)));
        DevTotals([
            s(|c| c.requests_completed).saturating_add(d.finalized_requests),
            d.untracked_qps,
            s(|c| c.data_qps),
            s(|c| c.cts_qps),
        ])
    }
    fn of_channel(c: &Channel) -> DevTotals {
        DevTotals([c.requests_completed, c.untracked_qps, c.data_qps, c.cts_qps])
    }
}

/// The shared counters at one scope, then (device and channel) the totals, then the histograms.
fn counts_families(out: &mut String, scope: Scope, items: &[Item], totals: Vec<DevTotals>) {
    counter_families(out, scope, items);
    if !totals.is_empty() {
        totals_families(out, scope, items, &totals);
    }
    linear_histogram(out, scope, items);
    // QP series have no log-scale histogram.
    if scope != S::Qp {
        log_histogram(out, scope, items);
    }
}

/// The counter table's families: each family's series are its rows', in the table's order, a
/// row's told apart by the value of the family's extra label where it has one.
fn counter_families(out: &mut String, scope: Scope, items: &[Item]) {
    for fam in crate::counters::families() {
        let f = fam.at(scope);
        let name = f.name();
        let rows = FIELDS
            .iter()
            .enumerate()
            .filter(|(_, r)| r.prom.is_some_and(|p| p.family.suffix == fam.suffix));
        if !rows
            .clone()
            .any(|(i, _)| items.iter().any(|it| told(it, i)))
        {
            continue; // an optional counter no item has: no family at all
        }
        header(out, &name, f.help, f.kind);
        let series: Vec<(String, usize)> = FIELDS
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let p = r.prom.filter(|p| p.family.suffix == fam.suffix)?;
                let extra = match (p.label, f.extra.first()) {
                    (Some(v), Some(k)) => format!("{k}=\"{v}\""),
                    _ => String::new(),
                };
                Some((extra, i))
            })
            .collect();
        for it in items {
            for (extra, i) in &series {
                if told(it, *i) {
                    sample(out, &name, &it.labels, extra, it.counts.values[*i]);
                }
            }
        }
    }
}

/// Whether item `it` has counter `i`: every item has the table's always-present rows; an
/// optional row only where it was told (absent, not zero).
fn told(it: &Item, i: usize) -> bool {
    !FIELDS[i].optional || it.counts.present[i]
}

/// Requests completed, untracked QPs and QPs by role of each device or channel.
fn totals_families(out: &mut String, scope: Scope, items: &[Item], totals: &[DevTotals]) {
    for (i, f) in CHANNEL_TOTALS.iter().enumerate() {
        let f = f.at(scope);
        let name = f.name();
        header(out, &name, f.help, f.kind);
        for (it, t) in items.iter().zip(totals) {
            match i {
                0 => sample(out, &name, &it.labels, "", t.0[0]),
                1 => sample(out, &name, &it.labels, "", t.0[1]),
                _ => {
                    sample(out, &name, &it.labels, "role=\"data\"", t.0[2]);
                    sample(out, &name, &it.labels, "role=\"cts\"", t.0[3]);
                }
            }
        }
    }
}

/// The WQE latency monitor's per-QP summary (quantiles, _sum, _count) and standard deviation,
/// in seconds; only QPs with statistics have series.
fn monitor_families(out: &mut String, items: &[Item]) {
    let with: Vec<(&Item, &QpLatency)> = items
        .iter()
        .filter_map(|i| i.monitor.map(|m| (i, m)))
        .collect();
    if with.is_empty() {
        return;
    }
    let name = WQE_LATENCY.name();
    header(out, &name, WQE_LATENCY.help, WQE_LATENCY.kind);
    let (sum, count) = (format!("{name}_sum"), format!("{name}_count"));
    for (it, m) in &with {
        for (q, v) in ["0.5", "0.9", "0.99", "0.999"].iter().zip(m.quantiles_ns) {
            let extra = format!("quantile=\"{q}\"");
            sample(out, &name, &it.labels, &extra, prom_f64(v as f64 / 1e9));
        }
        sample(
            out,
            &sum,
            &it.labels,
            "",
            prom_f64(m.mean_ns * m.count as f64 / 1e9),
        );
        sample(out, &count, &it.labels, "", m.count);
    }
    let name = WQE_LATENCY_STDDEV.name();
    header(out, &name, WQE_LATENCY_STDDEV.help, WQE_LATENCY_STDDEV.kind);
    for (it, m) in &with {
        sample(out, &name, &it.labels, "", prom_f64(m.stddev_ns / 1e9));
    }
}

/// The completion-latency histogram, in seconds; the last bucket is +Inf. The library does
/// not record the sum of the latencies, so _sum is absent (the format allows it).
fn linear_histogram(out: &mut String, scope: Scope, items: &[Item]) {
    let f = COMPLETION.at(scope);
    let name = f.name();
    if !items.iter().any(|i| !i.counts.hist.is_empty()) {
        return;
    }
    header(out, &name, f.help, f.kind);
    let (bucket, count) = (format!("{name}_bucket"), format!("{name}_count"));
    let mut le = String::new();
    for it in items.iter().filter(|i| !i.counts.hist.is_empty()) {
        let h = &it.counts.hist;
        let mut cum = 0u64;
        for (b, c) in h.iter().enumerate() {
            cum = cum.saturating_add(*c);
            le.clear();
            le.push_str("le=\"");
            if b + 1 == h.len() {
                le.push_str("+Inf");
            } else {
                le.push_str(&prom_f64((b as f64 + 1.0) * it.interval_ns as f64 / 1e9));
            }
            le.push('"');
            sample(out, &bucket, &it.labels, &le, cum);
        }
        sample(out, &count, &it.labels, "", cum);
    }
}

/// The log-scale histogram as classic buckets: every series of the family gets the same `le`
/// set (the upper bounds, in seconds, of every bucket non-empty in any of them), so sum by
/// (le) and histogram_quantile work across ranks and devices.
fn log_histogram(out: &mut String, scope: Scope, items: &[Item]) {
    if items.iter().all(|i| i.counts.log_hist.is_empty()) {
        return;
    }
    let f = COMPLETION_LOG.at(scope);
    let name = f.name();
    header(out, &name, f.help, f.kind);
    let bounds: std::collections::BTreeSet<u64> = items
        .iter()
        .flat_map(|i| i.counts.log_hist.iter().filter_map(|b| b.1))
        .collect();
    let (bucket, count) = (format!("{name}_bucket"), format!("{name}_count"));
    for it in items.iter().filter(|i| !i.counts.log_hist.is_empty()) {
        let mut cum = 0u64;
        let mut sorted = it.counts.log_hist.clone();
        sorted.sort_unstable_by_key(|b| b.1.unwrap_or(u64::MAX));
        let mut rest = sorted.iter().peekable();
        for hi in &bounds {
            while let Some(b) = rest.next_if(|b| b.1.is_some_and(|h| h <= *hi)) {
                cum = cum.saturating_add(b.2);
            }
            sample(
                out,
                &bucket,
                &it.labels,
                &format!("le=\"{}\"", prom_f64(*hi as f64 / 1e9)),
                cum,
            );
        }
        let total = it
            .counts
            .log_hist
            .iter()
            .fold(0u64, |a, b| a.saturating_add(b.2));
        sample(out, &bucket, &it.labels, "le=\"+Inf\"", total);
        sample(out, &count, &it.labels, "", total);
    }
}

#[cfg(test)]
mod tests {
    use super::super::families::families;
    use super::super::fixtures::lines;
    use super::*;
    use crate::counters::Field;

    #[test]
    fn log_histogram_series_share_one_le_set_and_sum_channels_into_devices() {
        let mut a = Counts {
            log_hist: vec![(56, Some(59), 3), (1 << 40, None, 1)],
            ..Counts::default()
        };
        let b = Counts {
            log_hist: vec![(64, Some(71), 2), (56, Some(59), 1)],
            ..Counts::default()
        };
        let items = [
            Item {
                labels: "host=\"h\",pid=\"1\"".into(),
                counts: &a,
                interval_ns: 1000,
                totals: None,
                monitor: None,
            },
            Item {
                labels: "host=\"h\",pid=\"2\"".into(),
                counts: &b,
                interval_ns: 1000,
                totals: None,
                monitor: None,
            },
        ];
        let mut out = String::new();
        counts_families(&mut out, S::Device, &items, Vec::new());
        let name = COMPLETION_LOG.name();
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_")))
            .collect();
        assert_eq!(
            lines,
            [
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"0.000000059\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"0.000000071\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"1\",le=\"+Inf\"}} 4"),
                format!("{name}_count{{host=\"h\",pid=\"1\"}} 4"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"0.000000059\"}} 1"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"0.000000071\"}} 3"),
                format!("{name}_bucket{{host=\"h\",pid=\"2\",le=\"+Inf\"}} 3"),
                format!("{name}_count{{host=\"h\",pid=\"2\"}} 3"),
            ],
            "{out}"
        );
        // QP series have no log-scale histogram.
        let mut q = String::new();
        counts_families(&mut q, S::Qp, &items, Vec::new());
        assert!(!q.contains("log_seconds"), "{q}");
        // Adding merges buckets by their lower bound, in order.
        a.add(&b);
        assert_eq!(
            a.log_hist,
            vec![(56, Some(59), 4), (64, Some(71), 2), (1 << 40, None, 1)]
        );
    }

    #[test]
    fn series_carry_the_rank_and_the_scope_labels() {
        let l = lines(Level::Qp);
        let has = |x: &str| l.iter().any(|y| y == x);
        assert!(
            has(
                r#"rccl_telemetry_tx_bytes_total{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 100"#
            ),
            "{l:#?}"
        );
        assert!(has(
            r#"rccl_telemetry_wqes_sent_total{host="h1",pid="8",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 6"#
        ));
        assert!(has(
            r#"rccl_telemetry_channel_qps{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",role="data"} 1"#
        ));
        assert!(has(
            r#"rccl_telemetry_qp_cts_sent_total{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",qp="1",role="unset",signalled="false"} 1"#
        ));
        assert!(has(
            r#"rccl_telemetry_untracked_qps{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 2"#
        ));
        assert!(has(
            r#"rccl_telemetry_qp_wqe_completion_seconds_bucket{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5",channel="3",qp="0",role="data",le="0.00003"} 4"#
        ));
        assert!(has(
            r#"rccl_telemetry_wqe_completion_seconds_count{host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5"} 8"#
        ));
        assert!(has(
            r#"rccl_telemetry_last_write_timestamp_seconds{host="h1",pid="7",rank="3"} 2"#
        ));
        // The unused device is absent; the repeated rank is written once.
        assert!(!l.iter().any(|x| x.contains("mlx5_1")));
        assert_eq!(
            l.iter()
                .filter(|x| x.starts_with("rccl_telemetry_tx_bytes_total{"))
                .count(),
            2
        );
    }

    #[test]
    fn qp_settings_are_one_series_per_distinct_combination_with_its_qp_count() {
        let l = lines(Level::Device);
        let settings: Vec<&String> = l
            .iter()
            .filter(|x| x.starts_with("rccl_telemetry_qp_settings{") && x.contains("pid=\"7\""))
            .collect();
        let dev = r#"host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5""#;
        let empty = r#"timeout="",retry_cnt="",rnr_retry="",min_rnr_timer="""#;
        assert_eq!(
            settings,
            [
                &format!(
                    r#"rccl_telemetry_qp_settings{{{dev},traffic_class="0",sl="",path_mtu="4096",{empty}}} 1"#
                ),
                &format!(
                    r#"rccl_telemetry_qp_settings{{{dev},traffic_class="106",sl="",path_mtu="4096",{empty}}} 2"#
                ),
            ],
            "a QP that told nothing has no series"
        );
        assert_eq!(
            l.iter()
                .filter(|x| x.starts_with("# TYPE rccl_telemetry_qp_settings gauge"))
                .count(),
            1
        );
    }

    #[test]
    fn communicators_channels_are_apart_and_finalized_counts_stay_in_the_device() {
        let mut r = super::super::fixtures::rank(7);
        let d = &mut r.devices[0];
        let mut theirs = d.channels[0].clone();
        theirs.comm = Some(super::super::data::CommLabels {
            hash: "0xb0b".into(),
            rank: 0,
            nranks: 2,
        });
        theirs.counts[Field::num_wqe_sent] = 40;
        d.channels.push(theirs);
        d.finalized = Counts::default();
        d.finalized[Field::num_wqe_sent] = 1000;
        d.finalized_requests = 9;
        let mut out = String::new();
        render(&[r], Level::Qp, &mut out);
        let has = |x: &str| out.lines().any(|l| l == x);
        let dev = r#"host="h1",pid="7",rank="3",device="mlx5_\"0\"",hw_type="mlx5""#;
        assert!(
            has(&format!(
                "rccl_telemetry_channel_wqes_sent_total{{{dev},channel=\"3\"}} 6"
            )),
            "{out}"
        );
        assert!(has(&format!("rccl_telemetry_channel_wqes_sent_total{{{dev},channel=\"3\",comm=\"0xb0b\",comm_rank=\"0\",comm_nranks=\"2\"}} 40")), "{out}");
        assert!(has(&format!("rccl_telemetry_qp_wqes_sent_total{{{dev},channel=\"3\",comm=\"0xb0b\",comm_rank=\"0\",comm_nranks=\"2\",qp=\"0\",role=\"data\"}} 4")), "{out}");
        // The device: its channels' and its finalized communicators'.
        assert!(
            has(&format!("rccl_telemetry_wqes_sent_total{{{dev}}} 1046")),
            "{out}"
        );
        assert!(
            has(&format!(
                "rccl_telemetry_requests_completed_total{{{dev}}} 19"
            )),
            "{out}"
        );
        let series: Vec<&str> = out.lines().filter(|x| !x.starts_with('#')).collect();
        let distinct: HashSet<&str> = series
            .iter()
            .map(|x| x.rsplit_once(' ').unwrap().0)
            .collect();
        assert_eq!(distinct.len(), series.len(), "duplicate series");
    }

    #[test]
    fn an_optional_counter_nothing_told_has_no_series_and_the_monitor_its_summary() {
        let l = lines(Level::Qp);
        assert!(l.contains(&"# TYPE rccl_telemetry_qp_wqe_latency_seconds summary".to_owned()));
        let q99: Vec<&String> = l
            .iter()
            .filter(|x| {
                x.starts_with("rccl_telemetry_qp_wqe_latency_seconds{")
                    && x.contains("quantile=\"0.99\"")
            })
            .collect();
        // One QP of each of the two distinct ranks has the monitor's statistics.
        assert_eq!(q99.len(), 2, "{q99:?}");
        assert!(q99.iter().all(|x| x.ends_with(" 0.000002")), "{q99:?}");
        assert!(l.iter().any(
            |x| x.starts_with("rccl_telemetry_qp_wqe_latency_seconds_count{") && x.ends_with(" 4")
        ));
        let mut r = super::super::fixtures::rank(1);
        for d in &mut r.devices {
            d.finalized.present[Field::num_wqe_slow as usize] = false;
            for c in &mut d.channels {
                c.counts.present[Field::num_wqe_slow as usize] = false;
                for q in &mut c.qps {
                    q.counts.present[Field::num_wqe_slow as usize] = false;
                    q.monitor = None;
                }
            }
        }
        let mut out = String::new();
        render(&[r], Level::Qp, &mut out);
        assert!(
            !out.contains("wqes_slow_total") && !out.contains("wqe_latency"),
            "{out}"
        );
        assert!(
            out.contains("rccl_telemetry_qp_stall_episodes_total{"),
            "told rows stay"
        );
    }

    #[test]
    fn every_family_has_help_and_type_once_and_counters_end_in_total() {
        let l = lines(Level::Qp);
        let mut typed = HashSet::new();
        for x in l.iter().filter_map(|x| x.strip_prefix("# TYPE ")) {
            let (n, k) = x.split_once(' ').unwrap();
            assert!(typed.insert(n.to_owned()), "{n} twice");
            if k == "counter" {
                assert!(n.ends_with("_total"), "{n}");
            }
        }
        for f in families(Level::Qp) {
            assert!(typed.contains(&f.name()), "{} not written", f.name());
        }
        let series: Vec<&String> = l.iter().filter(|x| !x.starts_with('#')).collect();
        let distinct: HashSet<&str> = series
            .iter()
            .map(|x| x.rsplit_once(' ').unwrap().0)
            .collect();
        assert_eq!(distinct.len(), series.len(), "duplicate series");
    }
}
