//! The sampler's bounded buffer overflowed (`samples_dropped`): the time series has gaps.

use super::{rank_finding, Finding, Input, Kind};
use crate::stats::fmt_count;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    for l in &x.run.files {
        if let Some(n) = l.file.hw_samples_dropped.filter(|n| *n > 0) {
            let kept = l.file.hw_samples.as_ref().map_or(0, Vec::len);
            let mut f = rank_finding(l, Kind::SamplesDropped, "hw_samples_dropped", n as f64);
            f.score = x.opt.threshold;
            f.evidence = format!(
                "{} hw_samples dropped ({} kept): the time series has gaps",
                fmt_count(n),
                fmt_count(kept as u64)
            );
            out.push(f);
        }
    }
    out
}
