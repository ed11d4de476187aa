//! Untracked QPs (`untracked_qps`): QPs that got no stats slot, so their traffic is missing
//! from every counter. Any is worth a line, as CQ errors are.

use super::cq_errors::each_nonzero;
use super::{Finding, Input, Kind};
use crate::stats::fmt_count;

pub(super) fn find(x: &Input) -> Vec<Finding> {
    each_nonzero(
        x,
        Kind::UntrackedQps,
        "num_qp_untracked",
        |d| d.num_qp_untracked,
        |v, affected, n| {
            format!(
            "{} QPs got no stats slot: their traffic is missing from every counter ({affected} of {n} devices have untracked QPs)",
            fmt_count(v as u64),
        )
        },
    )
}
