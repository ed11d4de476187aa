//! Counters that read -1 on some devices of a hw_type but not on others: the minority is
//! flagged (`counter_unavailable`, or `counter_available` when most read -1).

use super::{Dev, Finding, Input, Kind};
use crate::hwclass::classify;
use crate::model::HwValue;
use std::collections::BTreeMap;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut by_type: BTreeMap<&str, Vec<&Dev>> = BTreeMap::new();
    for d in &x.devs {
        by_type.entry(d.dev.hw_type.as_str()).or_default().push(d);
    }
    for (hw_type, group) in &by_type {
        let mut names: BTreeMap<&str, (Vec<&Dev>, Vec<&Dev>)> = BTreeMap::new();
        for d in group {
            for (k, v) in &d.dev.hw_counters {
                let e = names.entry(k).or_default();
                if v.total().is_some() {
                    e.0.push(d)
                } else {
                    e.1.push(d)
                }
            }
        }
        for (name, (avail, unavail)) in names {
            if avail.is_empty() || unavail.is_empty() {
                continue;
            }
            let n = avail.len() + unavail.len();
            let (minority, kind, what) = if unavail.len() <= avail.len() {
                (&unavail, Kind::CounterUnavailable, format!("reads -1 (not available) here but is available on {} of {n} {hw_type} devices", avail.len()))
            } else {
                (
                    &avail,
                    Kind::CounterAvailable,
                    format!(
                        "is available here but reads -1 on {} of {n} {hw_type} devices",
                        unavail.len()
                    ),
                )
            };
            for d in minority {
                let v = d
                    .dev
                    .hw_counters
                    .get(name)
                    .and_then(HwValue::total)
                    .unwrap_or(-1);
                let mut f = d.finding(kind, name, v as f64);
                f.category = Some(classify(name));
                f.population = n;
                // Rarer is more surprising: the score grows as the minority shrinks.
                f.score = x.opt.threshold + (1.0 - minority.len() as f64 / n as f64);
                f.evidence = format!("hw counter {name} {what}");
                out.push(f);
            }
        }
    }
    out
}
