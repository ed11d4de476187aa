//! The channel totals both formats' checkers compare with the sum of their queue pairs'
//! parts.

/// A channel counter: its name, the channel's value, and how to read it from a queue pair's
/// counters `P`.
pub(super) type Summed<P> = (&'static str, u64, fn(&P) -> u64);

/// (pointer, message) for each channel total that is not the (saturating) sum of its queue
/// pairs' parts; `part` reaches a queue pair's counters. Shared by both formats' checkers.
pub(super) fn channel_sum_errors<Q, P>(
    cp: &str,
    qps: &[Q],
    part: impl Fn(&Q) -> &P,
    fields: &[Summed<P>],
) -> Vec<(String, String)> {
    fields
        .iter()
        .filter_map(|&(name, total, g)| {
            let s = qps.iter().fold(0u64, |s, q| s.saturating_add(g(part(q))));
            sum_error(cp, qps.len(), name, total, s)
        })
        .collect()
}

/// (pointer, message) when a channel's total of `name` is not `s`, the sum over its `qps`
/// queue pairs.
pub(super) fn sum_error(
    cp: &str,
    qps: usize,
    name: &str,
    total: u64,
    s: u64,
) -> Option<(String, String)> {
    (total != s).then(|| {
        (
            format!("{cp}/{name}"),
            format!("channel total {total} != {s} summed over its {qps} queue pairs"),
        )
    })
}
