//! The summary's fleet aggregates: distributions across the rank x device rows (min / p50 /
//! p99 / max), the same per host, and the rows and hosts that stand out from the median.
//!
//! Separate from `summary` (which reads the files into rows and totals) because this is only
//! statistics over those rows; `summary::text` prints it for runs too large for one table.

use crate::hwclass::{classify, Category};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns, median, Robust};
use crate::summary::{DeviceRow, Latency};
use serde::Serialize;
use std::collections::BTreeMap;

/// Robust z-score a value must reach to stand out (as `outliers`' default).
pub const STAND_OUT_Z: f64 = 3.5;
/// Bytes and WQEs: the least relative distance from the median.
pub const STAND_OUT_SKEW: f64 = 0.10;
/// Latency: the least ratio to the median (or its inverse, for a row faster than the rest).
pub const STAND_OUT_LATENCY_RATIO: f64 = 1.25;
/// Counters: the least ratio to a non-zero median.
pub const STAND_OUT_COUNT_RATIO: f64 = 2.0;
/// Fewest values a metric needs before anything can stand out from it.
pub const MIN_POPULATION: usize = 5;

/// What a metric counts, for formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    Count,
    Ns,
}

impl Unit {
    pub fn fmt(self, v: f64) -> String {
        match self {
            Unit::Bytes => fmt_bytes(v),
            Unit::Count => fmt_count(v.max(0.0).round() as u64),
            Unit::Ns => fmt_ns(v),
        }
    }
}

/// One metric across a population (rank x device rows, or hosts).
#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    /// tx_bytes, rx_bytes, num_wqe_sent, num_cq_errors, num_qp_untracked, num_slot_miss,
    /// latency_p50_ns, latency_p99_ns, or a hardware counter's name.
    pub metric: String,
    pub unit: Unit,
    /// Latency only: "log-scale" (wqe_completion_log_histogram) or "linear".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// Hardware counters only: the counter's category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Rows (or hosts) with a value.
    pub n: usize,
    /// Of those, the ones above zero.
    pub nonzero: usize,
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub min_at: String,
    pub max_at: String,
}

impl Distribution {
    /// Nearest-rank percentiles over `(value, who)`; None when there are no values.
    pub fn of(metric: &str, unit: Unit, values: &[(f64, String)]) -> Option<Distribution> {
        if values.is_empty() {
            return None;
        }
        let mut v: Vec<&(f64, String)> = values.iter().collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let q = |q: f64| v[nearest_rank(v.len(), q)].0;
        Some(Distribution {
            metric: metric.to_string(),
            unit,
            source: None,
            category: None,
            n: v.len(),
            nonzero: v.iter().filter(|x| x.0 > 0.0).count(),
            min: v[0].0,
            p50: q(0.5),
            p99: q(0.99),
            max: v[v.len() - 1].0,
            min_at: v[0].1.clone(),
            max_at: v[v.len() - 1].1.clone(),
        })
    }

    /// A counter's distribution has a tail worth a row of its own: it moved on fewer than
    /// half the rows, or its max is well past its p99 or its median.
    pub fn has_tail(&self) -> bool {
        self.nonzero * 2 < self.n || self.max > 2.0 * self.p99 || self.max > 4.0 * self.p50
    }
}

/// Index of the nearest-rank `q` quantile in a sorted slice of `n` (> 0) values.
pub fn nearest_rank(n: usize, q: f64) -> usize {
    let r = (q * n as f64).ceil() as usize;
    r.clamp(1, n) - 1
}

/// One reason a row (or host) stands out.
#[derive(Debug, Clone, Serialize)]
pub struct Reason {
    pub metric: String,
    pub value: f64,
    pub median: f64,
    pub z: f64,
    /// "p99 4.1x the median (372 µs)", "tx 31% below the median (5.52 GiB)".
    pub text: String,
}

/// A row or host that stands out, with every reason, strongest first.
#[derive(Debug, Clone, Serialize)]
pub struct StandOut {
    /// "host:NIC (pid P)", or the host.
    pub who: String,
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<u32>,
    /// The largest |robust z| of its reasons (ranking key).
    pub score: f64,
    pub reasons: Vec<Reason>,
}

/// Per-host aggregates: each host's sums over its used devices (the worst p99 of them).
#[derive(Debug, Clone, Serialize)]
pub struct HostFold {
    pub hosts: usize,
    pub distributions: Vec<Distribution>,
    pub stand_out: Vec<StandOut>,
}

/// The run across its rank x device rows (used devices only).
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub rows: usize,
    /// How a value is judged to stand out.
    pub rule: String,
    pub distributions: Vec<Distribution>,
    pub hosts: HostFold,
    /// Rows furthest from the median (above or below), strongest first; every one of them.
    pub stand_out: Vec<StandOut>,
}

/// One metric's values per item (None: the item has no value for it).
struct Metric {
    name: String,
    label: String,
    unit: Unit,
    source: Option<&'static str>,
    category: Option<Category>,
    values: Vec<Option<f64>>,
}

/// The value a latency column shows: the estimate, or the lower edge of an open bucket.
fn latency_value(l: &Latency, q: f64) -> Option<f64> {
    l.get(q).map(|p| {
        if p.open_bucket {
            p.lower_ns
        } else {
            p.estimate_ns
        }
    })
}

/// The latency figures a row shows: the log-scale ones when it has them, unless `linear`.
pub fn row_latency(r: &DeviceRow, linear: bool) -> &Latency {
    match (&r.log_latency, linear) {
        (Some(l), false) => l,
        _ => &r.latency,
    }
}

fn ratio_text(label: &str, x: f64, med: f64, unit: Unit) -> String {
    match unit {
        Unit::Bytes => {
            let d = x / med - 1.0;
            format!(
                "{label} {:.0}% {} the median ({})",
                d.abs() * 100.0,
                if d < 0.0 { "below" } else { "above" },
                unit.fmt(x)
            )
        }
        Unit::Ns => format!("{label} {:.1}x the median ({})", x / med, unit.fmt(x)),
        Unit::Count if med > 0.0 => {
            format!("{label} {}, {:.1}x the median", unit.fmt(x), x / med)
        }
        Unit::Count => format!("{label} {} (median 0)", unit.fmt(x)),
    }
}

/// Why item `i` stands out on `m` (None when it does not).
fn reason(m: &Metric, r: &Robust, x: f64) -> Option<Reason> {
    let z = r.z(x);
    if z.abs() < STAND_OUT_Z {
        return None;
    }
    let med = r.median;
    let meaningful = match m.unit {
        Unit::Bytes => med > 0.0 && (x / med - 1.0).abs() >= STAND_OUT_SKEW,
        Unit::Ns => {
            med > 0.0
                && (x / med >= STAND_OUT_LATENCY_RATIO || x / med <= 1.0 / STAND_OUT_LATENCY_RATIO)
        }
        Unit::Count => x > 0.0 && z > 0.0 && x >= STAND_OUT_COUNT_RATIO * med,
    };
    meaningful.then(|| Reason {
        metric: m.name.clone(),
        value: x,
        median: med,
        z,
        text: ratio_text(&m.label, x, med, m.unit),
    })
}

/// Items that stand out on any metric, strongest first.
fn stand_out(
    metrics: &[Metric],
    who: &[(String, String, Option<i64>, Option<u32>)],
) -> Vec<StandOut> {
    let mut reasons: Vec<Vec<Reason>> = vec![Vec::new(); who.len()];
    for m in metrics {
        let vals: Vec<f64> = m.values.iter().flatten().copied().collect();
        if vals.len() < MIN_POPULATION {
            continue;
        }
        let med = median(&vals).unwrap_or(0.0);
        // A floor on the spread: 1% of the median for bytes and latency, one event for counts (half where the median
        // is 0: two events where the rest have none stand out, one does not),
        // so a population that agrees to the byte does not turn noise into a finding.
        let floor = match m.unit {
            Unit::Count if med == 0.0 => 0.5,
            Unit::Count => 1.0,
            _ => (0.01 * med.abs()).max(1.0),
        };
        let Some(r) = Robust::of(&vals, floor) else {
            continue;
        };
        for (i, v) in m.values.iter().enumerate() {
            if let Some(x) = v {
                if let Some(re) = reason(m, &r, *x) {
                    reasons[i].push(re);
                }
            }
        }
    }
    let mut out: Vec<StandOut> = reasons
        .into_iter()
        .zip(who)
        .filter(|(r, _)| !r.is_empty())
        .map(|(mut r, (w, host, pid, dev))| {
            r.sort_by(|a, b| b.z.abs().total_cmp(&a.z.abs()));
            StandOut {
                who: w.clone(),
                host: host.clone(),
                pid: *pid,
                device_id: *dev,
                score: r[0].z.abs(),
                reasons: r,
            }
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.who.cmp(&b.who)));
    out
}

fn distributions(
    metrics: &[Metric],
    who: &[(String, String, Option<i64>, Option<u32>)],
) -> Vec<Distribution> {
    metrics
        .iter()
        .filter_map(|m| {
            let vals: Vec<(f64, String)> = m
                .values
                .iter()
                .zip(who)
                .filter_map(|(v, w)| v.map(|x| (x, w.0.clone())))
                .collect();
            Distribution::of(&m.name, m.unit, &vals).map(|mut d| {
                d.source = m.source;
                d.category = m.category;
                d
            })
        })
        .collect()
}

fn metric(name: &str, label: &str, unit: Unit, values: Vec<Option<f64>>) -> Metric {
    Metric {
        name: name.to_string(),
        label: label.to_string(),
        unit,
        source: None,
        category: None,
        values,
    }
}

/// Who an item is: (its name, its host, its pid, its device id).
type ItemWho = (String, String, Option<i64>, Option<u32>);

/// Builds the fleet aggregates from the used rows. `hw` holds, per hardware counter, each
/// row's delta over the run (by row index; rows where it is -1 are absent).
pub fn build(rows: &[DeviceRow], hw: &BTreeMap<String, Vec<(usize, i64)>>) -> Fleet {
    let used: Vec<(usize, &DeviceRow)> = rows.iter().enumerate().filter(|(_, r)| r.used).collect();
    let who: Vec<ItemWho> = used
        .iter()
        .map(|(_, r)| {
            (
                format!("{}:{} (pid {})", r.host, r.roce_device, r.pid),
                r.host.clone(),
                Some(r.pid),
                Some(r.device_id),
            )
        })
        .collect();
    let any_log = used.iter().any(|(_, r)| r.log_latency.is_some());
    let mut metrics = row_metrics(&used, any_log);
    metrics.extend(hw_metrics(&used, hw));
    // Stand-outs are judged on the figures the table shows: log-scale latency when the run
    // has it (the linear ones add nothing but a coarser view of the same completions).
    let judged: Vec<&Metric> = metrics
        .iter()
        .filter(|m| {
            m.source.is_none() || m.source == Some(if any_log { "log-scale" } else { "linear" })
        })
        .collect();
    let judged: Vec<Metric> = judged.into_iter().map(clone_metric).collect();
    let stand = stand_out(&judged, &who);
    Fleet {
        rows: used.len(),
        rule: format!(
            "a value stands out when its robust z-score (median and MAD) reaches {STAND_OUT_Z} and it is \
             {:.0}% off the median (bytes), {STAND_OUT_LATENCY_RATIO}x or 1/{STAND_OUT_LATENCY_RATIO} of it \
             (latency), or {STAND_OUT_COUNT_RATIO}x it (counts); at least {MIN_POPULATION} values",
            STAND_OUT_SKEW * 100.0
        ),
        distributions: distributions(&metrics, &who),
        hosts: host_fold(&used, &judged),
        stand_out: stand,
    }
}

/// The metrics every row has: bytes, WQEs, latency (log-scale and linear) and the counters.
fn row_metrics(used: &[(usize, &DeviceRow)], any_log: bool) -> Vec<Metric> {
    let col = |f: &dyn Fn(&DeviceRow) -> Option<f64>| -> Vec<Option<f64>> {
        used.iter().map(|(_, r)| f(r)).collect()
    };
    let mut metrics = vec![
        metric(
            "tx_bytes",
            "tx",
            Unit::Bytes,
            col(&|r| Some(r.tx_bytes as f64)),
        ),
        metric(
            "rx_bytes",
            "rx",
            Unit::Bytes,
            col(&|r| Some(r.rx_bytes as f64)),
        ),
        metric(
            "num_wqe_sent",
            "WQEs sent",
            Unit::Bytes,
            col(&|r| Some(r.num_wqe_sent as f64)),
        ),
    ];
    // WQEs are a count, judged like bytes (a share of the work).
    metrics[2].unit = Unit::Count;
    let mut latency = |source: &'static str, linear: bool| {
        for (q, name, label) in [
            (0.5, "latency_p50_ns", "p50"),
            (0.99, "latency_p99_ns", "p99"),
        ] {
            let mut m = metric(
                name,
                label,
                Unit::Ns,
                col(&|r| {
                    let l = row_latency(r, linear);
                    if linear || r.log_latency.is_some() || !any_log {
                        latency_value(l, q)
                    } else {
                        // A log-scale distribution holds the rows that have the histogram; a
                        // mixed run's others are in the linear one.
                        None
                    }
                }),
            );
            m.source = Some(source);
            metrics.push(m);
        }
    };
    if any_log {
        latency("log-scale", false);
    }
    latency("linear", true);
    for (name, label, f) in [
        (
            "num_cq_errors",
            "CQ errors",
            (|r: &DeviceRow| r.num_cq_errors) as fn(&DeviceRow) -> u64,
        ),
        ("num_qp_untracked", "untracked QPs", |r: &DeviceRow| {
            r.num_qp_untracked
        }),
        ("num_slot_miss", "slot misses", |r: &DeviceRow| {
            r.num_slot_miss
        }),
    ] {
        metrics.push(metric(
            name,
            label,
            Unit::Count,
            col(&|r| Some(f(r) as f64)),
        ));
    }
    metrics
}

/// The metrics of the hardware counters that moved somewhere, each with its category.
fn hw_metrics(
    used: &[(usize, &DeviceRow)],
    hw: &BTreeMap<String, Vec<(usize, i64)>>,
) -> Vec<Metric> {
    let index: BTreeMap<usize, usize> =
        used.iter().enumerate().map(|(k, (i, _))| (*i, k)).collect();
    let mut metrics = Vec::new();
    for (name, vals) in hw {
        if !vals.iter().any(|(_, v)| *v > 0) {
            continue;
        }
        let mut values = vec![None; used.len()];
        for (i, v) in vals {
            if let Some(k) = index.get(i) {
                values[*k] = Some(*v as f64);
            }
        }
        let mut m = metric(name, name, Unit::Count, values);
        m.category = Some(classify(name));
        metrics.push(m);
    }
    metrics
}

/// Hosts: each host's sums of the judged metrics, and the worst p99 of its devices.
fn host_fold(used: &[(usize, &DeviceRow)], judged: &[Metric]) -> HostFold {
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (k, (_, r)) in used.iter().enumerate() {
        by_host.entry(r.host.as_str()).or_default().push(k);
    }
    let host_who: Vec<ItemWho> = by_host
        .keys()
        .map(|h| (h.to_string(), h.to_string(), None, None))
        .collect();
    let fold = |m: &Metric, worst: bool| -> Metric {
        let values = by_host
            .values()
            .map(|ks| {
                let v: Vec<f64> = ks.iter().filter_map(|k| m.values[*k]).collect();
                if v.is_empty() {
                    None
                } else if worst {
                    Some(v.iter().copied().fold(f64::MIN, f64::max))
                } else {
                    Some(v.iter().sum())
                }
            })
            .collect();
        Metric {
            values,
            ..clone_metric(m)
        }
    };
    let host_metrics: Vec<Metric> = judged
        .iter()
        .map(|m| {
            let mut h = fold(m, m.unit == Unit::Ns);
            if h.unit == Unit::Ns {
                h.label = format!("worst {}", h.label);
            }
            h
        })
        .collect();
    let host_dists: Vec<Distribution> = distributions(&host_metrics, &host_who)
        .into_iter()
        .filter(|d| d.category.is_none())
        .collect();
    HostFold {
        hosts: by_host.len(),
        distributions: host_dists,
        stand_out: stand_out(&host_metrics, &host_who),
    }
}

fn clone_metric(m: &Metric) -> Metric {
    Metric {
        name: m.name.clone(),
        label: m.label.clone(),
        unit: m.unit,
        source: m.source,
        category: m.category,
        values: m.values.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nearest_rank_picks_the_expected_element() {
        assert_eq!(nearest_rank(1, 0.5), 0);
        assert_eq!(nearest_rank(100, 0.5), 49);
        assert_eq!(nearest_rank(100, 0.99), 98);
        assert_eq!(nearest_rank(100, 1.0), 99);
        assert_eq!(nearest_rank(4, 0.0), 0);
    }

    #[test]
    fn distribution_names_where_min_and_max_are() {
        let v: Vec<(f64, String)> = (0..10).map(|i| (i as f64, format!("r{i}"))).collect();
        let d = Distribution::of("x", Unit::Count, &v).unwrap();
        assert_eq!((d.min, d.p50, d.max), (0.0, 4.0, 9.0));
        assert_eq!((d.min_at.as_str(), d.max_at.as_str()), ("r0", "r9"));
        assert_eq!(d.nonzero, 9);
        assert!(Distribution::of("x", Unit::Count, &[]).is_none());
    }

    fn who(n: usize) -> Vec<(String, String, Option<i64>, Option<u32>)> {
        (0..n)
            .map(|i| (format!("h{i}"), format!("h{i}"), None, None))
            .collect()
    }

    #[test]
    fn a_skewed_item_stands_out_and_a_uniform_population_does_not() {
        let mut vals: Vec<Option<f64>> = (0..50).map(|i| Some(1000.0 + (i % 5) as f64)).collect();
        let quiet = metric("tx_bytes", "tx", Unit::Bytes, vals.clone());
        assert!(stand_out(&[quiet], &who(50)).is_empty());
        vals[7] = Some(600.0);
        let m = metric("tx_bytes", "tx", Unit::Bytes, vals);
        let s = stand_out(&[m], &who(50));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].who, "h7");
        assert!(
            s[0].reasons[0].text.starts_with("tx 40% below the median"),
            "{:?}",
            s[0]
        );
    }

    #[test]
    fn a_counter_that_moved_once_stands_out_with_a_zero_median() {
        let mut vals = vec![Some(0.0); 40];
        vals[3] = Some(42.0);
        let s = stand_out(
            &[metric("cnp_sent", "cnp_sent", Unit::Count, vals)],
            &who(40),
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].reasons[0].text, "cnp_sent 42 (median 0)");
    }

    #[test]
    fn too_few_values_never_stand_out() {
        let vals = vec![Some(1.0), Some(1.0), Some(1000.0)];
        assert!(stand_out(&[metric("x", "x", Unit::Count, vals)], &who(3)).is_empty());
    }

    proptest! {
        /// p50 and p99 lie between min and max and in order, whatever the values.
        #[test]
        fn percentiles_are_ordered(v in proptest::collection::vec(-1e12f64..1e12, 1..200)) {
            let vals: Vec<(f64, String)> = v.iter().map(|x| (*x, String::new())).collect();
            let d = Distribution::of("x", Unit::Count, &vals).unwrap();
            prop_assert!(d.min <= d.p50 && d.p50 <= d.p99 && d.p99 <= d.max);
            prop_assert_eq!(d.n, v.len());
        }

        /// Nothing stands out of a population whose values are all equal.
        #[test]
        fn equal_values_never_stand_out(x in 0f64..1e12, n in 5usize..60) {
            let m = metric("tx_bytes", "tx", Unit::Bytes, vec![Some(x); n]);
            prop_assert!(stand_out(&[m], &who(n)).is_empty());
        }
    }
}
