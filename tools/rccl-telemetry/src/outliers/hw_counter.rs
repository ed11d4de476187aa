//! Problem hardware counters (`hw_counter`): CNPs, ECN marks, PFC pauses, drops, retransmits
//! and the like (`hwclass` says which counters are problems) well above the run's, one
//! population per counter name. Statistical: robust z >= `threshold`; practical: at least
//! `min_ratio` the median and `min_events` (10) events above it, so a counter whose median is
//! 0 is not flagged for one stray event.

use super::{count, vs_median, with_stats, Dev, Finding, Input, Kind};
use crate::hwclass::classify;
use crate::model::HwValue;
use crate::stats::{fmt_count, Robust};
use std::collections::BTreeSet;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let names: BTreeSet<&str> = x
        .devs
        .iter()
        .flat_map(|d| d.dev.hw_counters.keys())
        .collect();
    for name in names {
        let cat = classify(name);
        if !cat.is_problem() {
            continue;
        }
        let have: Vec<(&Dev, f64, &HwValue)> = x
            .devs
            .iter()
            .filter_map(|d| {
                let v = d.dev.hw_counters.get(name)?;
                v.total().map(|t| (d, t as f64, v))
            })
            .collect();
        if have.len() < x.opt.min_population {
            continue;
        }
        let vals: Vec<f64> = have.iter().map(|(_, v, _)| *v).collect();
        let Some(r) = Robust::of(&vals, 1.0) else {
            continue;
        };
        for (d, v, hv) in &have {
            let z = r.z(*v);
            if z >= x.opt.threshold
                && *v >= x.opt.min_ratio * r.median
                && *v - r.median >= x.opt.min_events
            {
                let mut f = with_stats(d.finding(Kind::HwCounter, name, *v), &r, z);
                f.category = Some(cat);
                f.evidence = format!(
                    "{} counter {name} = {}{} {} (MAD {:.0}, robust z {:+.1}) over {} devices{}",
                    cat.label(),
                    fmt_count(*v as u64),
                    per_prio(hv),
                    vs_median(*v, r.median, count),
                    r.mad,
                    z,
                    r.n,
                    per_gib(d, *v)
                );
                out.push(f);
            }
        }
    }
    out
}

/// " [prio3=12 prio5=1]": the priorities a per-priority counter moved on.
fn per_prio(v: &HwValue) -> String {
    match v {
        HwValue::PerPrio(a) => {
            let nz: Vec<String> = a
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0)
                .map(|(i, v)| format!("prio{i}={}", fmt_count(*v as u64)))
                .collect();
            format!(" [{}]", nz.join(" "))
        }
        _ => String::new(),
    }
}

/// "; 3.2 per GiB moved", when the device's byte counters moved.
fn per_gib(d: &Dev, v: f64) -> String {
    let moved = d
        .dev
        .hw("delta_tx_bytes")
        .unwrap_or(0)
        .saturating_add(d.dev.hw("delta_rx_bytes").unwrap_or(0));
    if moved > 0 {
        format!(
            "; {:.1} per GiB moved",
            v / (moved as f64 / (1u64 << 30) as f64)
        )
    } else {
        String::new()
    }
}
