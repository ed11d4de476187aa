//! CQ errors (`cq_errors`): completions drained with an error status. Any is worth a line (a
//! failed completion fails its collective: critical); the score says how unusual. Files of
//! version 4 add the errors per QP: by status, and the first with its time and the QP's
//! state. The rule of "any nonzero count" is shared with `untracked`.

use super::{with_stats, Finding, Input, Kind};
use crate::model::{parse_timestamp_ns, Device};
use crate::stats::{fmt_count, Robust};
use std::collections::BTreeMap;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = device_counts(x);
    for f in &mut out {
        let dev = x
            .devs
            .iter()
            .find(|d| d.path == f.file && Some(d.dev.device_id) == f.device_id);
        if let Some(d) = dev {
            f.evidence.push_str(&per_qp(d.dev));
        }
    }
    out
}

/// "; on 4 QPs: RETRY_EXC_ERR x4, WR_FLUSH_ERR x20; first RETRY_EXC_ERR at T on QP 3 (QPN
/// 16048), state ERR", from the version-4 keys; empty without them.
fn per_qp(d: &Device) -> String {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    let mut qps = 0u64;
    let mut first: Option<(i128, String)> = None;
    for q in d.all_qps() {
        if q.cq_error_total() == 0 && q.first_cq_error.is_none() {
            continue;
        }
        qps += 1;
        for (k, n) in q.cq_errors.iter().flat_map(|m| m.iter()) {
            *by.entry(k.as_str()).or_default() += n;
        }
        if let Some(e) = &q.first_cq_error {
            let t = parse_timestamp_ns(&e.time).unwrap_or(i128::MAX);
            if first.as_ref().is_none_or(|(t0, _)| t < *t0) {
                first = Some((
                    t,
                    format!(
                        "{} at {} on QP {}{}{}",
                        e.status,
                        e.time,
                        q.id,
                        q.qp_num.map_or(String::new(), |n| format!(" (QPN {n})")),
                        q.qp_state
                            .as_deref()
                            .map_or(String::new(), |s| format!(", state {s}")),
                    ) + &super::qp_lint::mismatch_note(d, q),
                ));
            }
        }
    }
    if qps == 0 {
        return String::new();
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = v.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    format!(
        "; on {qps} QP{}{}{}",
        if qps == 1 { "" } else { "s" },
        if list.is_empty() {
            String::new()
        } else {
            format!(": {}", list.join(", "))
        },
        first.map_or(String::new(), |f| format!("; first {}", f.1))
    )
}

fn device_counts(x: &Input) -> Vec<Finding> {
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
