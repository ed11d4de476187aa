//! Slot misses (`slot_miss`): CTS FIFO slot misses well above the run's. A polling race, noisy
//! by nature: the ratio rule (and `min_events` above the median) keeps ordinary noise out.

use super::{count, vs_median, with_stats, Finding, Input, Kind};
use crate::stats::{fmt_count, Robust};

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    if !x.statistical() {
        return out;
    }
    let vals: Vec<f64> = x
        .devs
        .iter()
        .map(|d| d.dev.sum_counters(|c| c.num_slot_miss) as f64)
        .collect();
    let Some(r) = Robust::of(&vals, 1.0) else {
        return out;
    };
    for (d, &v) in x.devs.iter().zip(&vals) {
        let z = r.z(v);
        if z >= x.opt.threshold
            && v >= x.opt.min_ratio * r.median
            && v - r.median >= x.opt.min_events
        {
            let mut f = with_stats(d.finding(Kind::SlotMiss, "num_slot_miss", v), &r, z);
            f.evidence = format!(
                "{} CTS FIFO slot misses {} (MAD {:.0}, robust z {:+.1}) over {} devices",
                fmt_count(v as u64),
                vs_median(v, r.median, count),
                r.mad,
                z,
                r.n
            );
            out.push(f);
        }
    }
    out
}
