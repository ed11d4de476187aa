//! CQ errors (`cq_errors`): completions drained with an error status. Any is worth a line; the
//! score says how unusual. The rule of "any nonzero count" is shared with `untracked`.

use super::{with_stats, Finding, Input, Kind};
use crate::model::Device;
use crate::stats::{fmt_count, Robust};

pub(super) fn find(x: &Input) -> Vec<Finding> {
    each_nonzero(
        x,
        Kind::CqErrors,
        "num_cq_errors",
        |d| d.num_cq_errors,
        |v, affected, n| {
            format!(
            "{} completions drained with an error status ({affected} of {n} devices have CQ errors)",
            fmt_count(v as u64),
        )
        },
    )
}

/// One finding per device whose count is nonzero, scored by its robust z but never below
/// `threshold + 2`; `evidence(value, devices affected, devices)` says it.
pub(super) fn each_nonzero(
    x: &Input,
    kind: Kind,
    metric: &str,
    get: fn(&Device) -> u64,
    evidence: fn(f64, usize, usize) -> String,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let vals: Vec<f64> = x.devs.iter().map(|d| get(d.dev) as f64).collect();
    let r = Robust::of(&vals, 1.0);
    for (d, &v) in x.devs.iter().zip(&vals) {
        if v <= 0.0 {
            continue;
        }
        let mut f = d.finding(kind, metric, v);
        if let Some(r) = &r {
            let z = r.z(v);
            f = with_stats(f, r, z);
            f.score = z.max(x.opt.threshold + 2.0);
        } else {
            f.score = x.opt.threshold + 2.0;
        }
        let affected = vals.iter().filter(|v| **v > 0.0).count();
        f.evidence = evidence(v, affected, x.devs.len());
        out.push(f);
    }
    out
}
