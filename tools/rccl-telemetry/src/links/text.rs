//! `links` for people: the slowest links first (one row per ordered NIC pair), beyond `--top`
//! folded per host pair, then the QPs whose peer is in no file and the ambiguous ones.
//!
//! Separate from `links` (joining QPs to their peers) so the join reads without the printing.

use super::report::{Link, LinkLatency, LinkReport};
use crate::layout::{col, table, Column, Layout};
use crate::stats::{fmt_bytes, fmt_count, fmt_ns, median};
use std::collections::{BTreeMap, BTreeSet};

const LINK_COLUMNS: [Column; 11] = [
    col("src", false, 0).whole(),
    col("dst", false, 0).whole(),
    col("QPs", true, 3),
    col("WRs sent", true, 2),
    col("rcvd@dst", true, 4),
    col("≈bytes", true, 3),
    col("p50", true, 2),
    col("p99", true, 0),
    col("±", true, 4),
    col("stalled", true, 1),
    col("longest stall", true, 3),
];

fn lat_cell(v: Option<f64>, open: bool) -> String {
    match v {
        Some(x) if open => format!(">= {}", fmt_ns(x)),
        Some(x) => fmt_ns(x),
        None => "-".into(),
    }
}

fn err_cell(l: &Option<LinkLatency>) -> String {
    match l {
        Some(LinkLatency {
            relative_error: Some(r),
            ..
        }) => format!("{:.1}%", r * 100.0),
        Some(LinkLatency {
            bucket_ns: Some(w), ..
        }) => fmt_ns(*w as f64),
        _ => "-".into(),
    }
}

/// Renders the links for people: the join's headline, the `top` links by p99 (0 = all),
/// per host pair when there are more links than that, and the unmatched and ambiguous QPs.
pub fn render_text(r: &LinkReport, top: usize, layout: Layout) -> String {
    let mut out = layout.wrap(&r.headline());
    out.push('\n');
    let mut order: Vec<&Link> = r.links.iter().collect();
    order.sort_by(|a, b| {
        let pa = a.latency.as_ref().and_then(|l| l.p99_ns).unwrap_or(-1.0);
        let pb = b.latency.as_ref().and_then(|l| l.p99_ns).unwrap_or(-1.0);
        pb.total_cmp(&pa)
            .then_with(|| (a.src_nic, a.dst_nic).cmp(&(b.src_nic, b.dst_nic)))
    });
    let n = if top == 0 {
        order.len()
    } else {
        top.min(order.len())
    };
    if n > 0 {
        let sources: BTreeSet<&str> = r
            .links
            .iter()
            .filter_map(|l| l.latency.as_ref().map(|x| x.source))
            .collect();
        out.push_str(&layout.wrap(&format!(
            "Latency at the sending side, from {} (±: a log histogram's relative error, or a linear histogram's bucket width). ≈bytes: the device's tx bytes shared by WRs.",
            if sources.is_empty() { "no histogram".to_string() } else { sources.into_iter().collect::<Vec<_>>().join(" and ") }
        )));
        out.push('\n');
        let cells: Vec<Vec<String>> = order
            .iter()
            .take(n)
            .map(|l| {
                let lat = &l.latency;
                vec![
                    format!("{}:{}", l.src.host, l.src.device),
                    format!("{}:{}", l.dst.host, l.dst.device),
                    l.qps.to_string(),
                    fmt_count(l.wrs_sent),
                    fmt_count(l.wrs_received_by_dst),
                    fmt_bytes(l.tx_bytes_est as f64),
                    lat_cell(lat.as_ref().and_then(|x| x.p50_ns), false),
                    lat_cell(
                        lat.as_ref().and_then(|x| x.p99_ns),
                        lat.as_ref().is_some_and(|x| x.p99_open),
                    ),
                    err_cell(lat),
                    l.qps_stalled.map_or("-".into(), |v| v.to_string()),
                    l.longest_stall_ms.map_or("-".into(), |v| {
                        if v == 0 {
                            "0".into()
                        } else {
                            fmt_ns(v as f64 * 1e6)
                        }
                    }),
                ]
            })
            .collect();
        out.push_str(&table(&LINK_COLUMNS, &cells, layout).0);
        out.push('\n');
        if let Some(l) = slow_links(r, top) {
            out.push_str(&layout.wrap(&l));
            out.push('\n');
        }
        if n < order.len() {
            out.push_str(&format!("... and {} more links, slowest first above (--top 0 shows all, --json has every link)\n", order.len() - n));
            out.push_str(&host_pairs(r, top, layout));
        }
    }
    if !r.unmatched.is_empty() {
        out.push_str(&layout.wrap(&format!("{} QPs name a peer that is in no file (a rank without a file, or files of several runs mixed):", fmt_count(r.qps_unmatched))));
        out.push('\n');
        for u in r
            .unmatched
            .iter()
            .take(if top == 0 { usize::MAX } else { top })
        {
            let remote = u
                .remote_gid
                .clone()
                .or(u.remote_lid.map(|l| format!("LID {l}")))
                .unwrap_or_else(|| "no GID or LID".into());
            let qpns: Vec<String> = u.remote_qp_nums.iter().map(|q| q.to_string()).collect();
            out.push_str(&format!(
                "  {}:{} ({} QPs) -> {} QPN {}{}\n",
                u.host,
                u.device,
                u.qps,
                remote,
                qpns.join(","),
                if (u.qps as usize) > u.remote_qp_nums.len() {
                    ",..."
                } else {
                    ""
                }
            ));
        }
    }
    if !r.ambiguous.is_empty() {
        out.push_str(&layout.wrap(&format!("{} QPs name a peer claimed by several QPs (reused QPNs: files of different runs?), joined to none:", r.ambiguous.len())));
        out.push('\n');
        for a in r
            .ambiguous
            .iter()
            .take(if top == 0 { usize::MAX } else { top })
        {
            let remote = a
                .remote_gid
                .clone()
                .or(a.remote_lid.map(|l| format!("LID {l}")))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {}:{} {} -> {} QPN {}: claimed by {}\n",
                a.host,
                a.pid,
                a.device,
                remote,
                a.remote_qp_num,
                a.candidates.join(", ")
            ));
        }
    }
    out
}

/// Links folded per (src host, dst host): count, QPs, WRs, median and worst p99.
fn host_pairs(r: &LinkReport, top: usize, layout: Layout) -> String {
    // (links, QPs, WRs, p99s) per host pair.
    type Acc = (u64, u64, u64, Vec<f64>);
    let mut m: BTreeMap<(&str, &str), Acc> = BTreeMap::new();
    for l in &r.links {
        let e = m
            .entry((l.src.host.as_str(), l.dst.host.as_str()))
            .or_default();
        e.0 += 1;
        e.1 += l.qps;
        e.2 += l.wrs_sent;
        if let Some(p) = l.latency.as_ref().and_then(|x| x.p99_ns) {
            e.3.push(p);
        }
    }
    const COLS: [Column; 6] = [
        col("src host", false, 0).whole(),
        col("dst host", false, 0).whole(),
        col("links", true, 2),
        col("QPs", true, 3),
        col("median p99", true, 0),
        col("worst p99", true, 0),
    ];
    let mut rows: Vec<_> = m.iter().collect();
    let worst = |p: &Vec<f64>| p.iter().copied().reduce(f64::max).unwrap_or(-1.0);
    rows.sort_by(|a, b| worst(&b.1 .3).total_cmp(&worst(&a.1 .3)));
    let shown = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .take(shown)
        .map(|((s, d), (n, q, _w, p))| {
            vec![
                s.to_string(),
                d.to_string(),
                n.to_string(),
                fmt_count(*q),
                median(p).map_or("-".into(), fmt_ns),
                p.iter()
                    .copied()
                    .reduce(f64::max)
                    .map_or("-".into(), fmt_ns),
            ]
        })
        .collect();
    let mut out = format!(
        "Per host pair, worst p99 first ({shown} of {}):\n",
        rows.len()
    );
    out.push_str(&table(&COLS, &cells, layout).0);
    out.push('\n');
    out
}

/// The links with slow WQEs (the WQE latency monitor's num_wqe_slow), most first, as one line;
/// None when no link has any (the monitor off, or nothing above its threshold).
fn slow_links(r: &LinkReport, top: usize) -> Option<String> {
    let mut slow: Vec<&Link> = r
        .links
        .iter()
        .filter(|l| l.wrs_slow.is_some_and(|n| n > 0))
        .collect();
    if slow.is_empty() {
        return None;
    }
    slow.sort_by_key(|l| std::cmp::Reverse(l.wrs_slow));
    let k = if top == 0 {
        slow.len()
    } else {
        top.min(slow.len())
    };
    let items: Vec<String> = slow[..k]
        .iter()
        .map(|l| {
            let p99 = l
                .qp_p99_max_ns
                .map(|p| format!(", a QP's p99 up to {}", fmt_ns(p as f64)))
                .unwrap_or_default();
            format!(
                "{}:{} -> {}:{} {}{p99}",
                l.src.host,
                l.src.device,
                l.dst.host,
                l.dst.device,
                fmt_count(l.wrs_slow.unwrap_or(0))
            )
        })
        .collect();
    let more = slow.len() - k;
    Some(format!(
        "Slow WQEs (the WQE latency monitor, above each file's slow_threshold_ns): {}{}",
        items.join("; "),
        if more > 0 {
            format!("; and {more} more links")
        } else {
            String::new()
        }
    ))
}
