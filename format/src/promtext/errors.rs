//! Error completions by status: each device's counts, and one set of series per errored QP
//! naming its peer (the live textfile only, as the stall families). Separate because the
//! per-QP error table feeds them, not the counters.

use super::data::Rank;
use super::families::{fam, Family, Kind::Counter, Kind::Gauge, Scope as S};
use super::syntax::{header, labels, prom_f64, sample};

pub const CQ_ERRORS_BY_STATUS: Family = fam(
    "cq_errors_by_status_total",
    Counter,
    "Completions drained with an error status, by status (enum ibv_wc_status without IBV_WC_); rccl_telemetry_cq_errors_total counts every error, these the ones whose status was told.",
    S::Device,
    &["status"],
);
/// The labels of an errored QP's series, after the device's.
pub const ERRORED_QP_LABELS: &[&str] = &[
    "channel",
    "comm",
    "comm_rank",
    "comm_nranks",
    "qp",
    "qp_num",
    "peer_gid",
    "peer_qp_num",
];
pub const QP_CQ_ERRORS: Family = fam(
    "qp_cq_errors_total",
    Counter,
    "Error completions of this QP, by status (only QPs that had one have a series).",
    S::Device,
    &[
        "channel",
        "comm",
        "comm_rank",
        "comm_nranks",
        "qp",
        "qp_num",
        "peer_gid",
        "peer_qp_num",
        "status",
    ],
);
pub const QP_FIRST_CQ_ERROR: Family = fam(
    "qp_first_cq_error_timestamp_seconds",
    Gauge,
    "When this QP's first error completion was counted; its status is the label (only QPs that had one have a series).",
    S::Device,
    &[
        "channel",
        "comm",
        "comm_rank",
        "comm_nranks",
        "qp",
        "qp_num",
        "peer_gid",
        "peer_qp_num",
        "status",
    ],
);
pub const ERRORED_QP_SERIES_DROPPED: Family = fam(
    "errored_qp_series_dropped",
    Gauge,
    "Errored QPs beyond the cap of per-QP series (they count in rccl_telemetry_cq_errors_by_status_total, without series of their own).",
    S::Rank,
    &[],
);

/// Errored QPs given series at most per rank (the earliest first errors first: they are
/// nearest to the cause; the flushes follow).
pub const MAX_ERRORED_QP_SERIES: usize = 64;

/// One errored QP, for its series. Unknown label values are empty.
#[derive(Debug, Clone, Default)]
pub struct ErroredQp {
    pub channel: String,
    /// The communicator of its channel (None: the process-wide calls').
    pub comm: Option<super::data::CommLabels>,
    pub qp: u64,
    pub qp_num: Option<u32>,
    pub peer_gid: Option<String>,
    pub peer_qp_num: Option<u32>,
    /// (status name, count), in the enum's order.
    pub by_status: Vec<(String, u64)>,
    pub first_status: String,
    pub first_s: f64,
}

/// One device's errors.
#[derive(Debug, Clone, Default)]
pub struct DevErrors {
    pub name: String,
    pub hw_type: String,
    /// (status name, count), in the enum's order.
    pub by_status: Vec<(String, u64)>,
    pub qps: Vec<ErroredQp>,
}

/// Writes the error families of one rank: the device counts by status (a family with no
/// sample when nothing failed) and series for at most [`MAX_ERRORED_QP_SERIES`] errored QPs.
/// Returns how many errored QPs got no series.
pub fn render_errors(r: &Rank, devs: &[DevErrors], out: &mut String) -> usize {
    if devs.is_empty() {
        return 0;
    }
    let pid = r.pid.to_string();
    let mut base = vec![("host", r.host.as_str()), ("pid", pid.as_str())];
    if let Some(k) = &r.rank {
        base.push(("rank", k.as_str()));
    }
    let rank_l = labels(&base);
    let dev_l: Vec<String> = devs
        .iter()
        .map(|d| {
            labels(
                &[
                    base.clone(),
                    vec![("device", d.name.as_str()), ("hw_type", d.hw_type.as_str())],
                ]
                .concat(),
            )
        })
        .collect();
    header(
        out,
        &CQ_ERRORS_BY_STATUS.name(),
        CQ_ERRORS_BY_STATUS.help,
        Counter,
    );
    for (d, l) in devs.iter().zip(&dev_l) {
        for (s, n) in &d.by_status {
            sample(
                out,
                &CQ_ERRORS_BY_STATUS.name(),
                l,
                &labels(&[("status", s.as_str())]),
                n,
            );
        }
    }
    let mut all: Vec<(usize, &ErroredQp)> = devs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| d.qps.iter().map(move |q| (i, q)))
        .collect();
    all.sort_by(|a, b| a.1.first_s.total_cmp(&b.1.first_s));
    let dropped = all.len().saturating_sub(MAX_ERRORED_QP_SERIES);
    all.truncate(MAX_ERRORED_QP_SERIES);
    if !all.is_empty() {
        let ql: Vec<String> = all
            .iter()
            .map(|(_, q)| {
                let (qp, n, pn) = (
                    q.qp.to_string(),
                    q.qp_num.map(|n| n.to_string()),
                    q.peer_qp_num.map(|n| n.to_string()),
                );
                let comm = q.comm.as_ref().map(|m| m.pairs());
                let mut l: Vec<(&str, &str)> = vec![("channel", q.channel.as_str())];
                l.extend(comm.iter().flatten().map(|(k, v)| (*k, v.as_str())));
                l.extend([
                    ("qp", qp.as_str()),
                    ("qp_num", n.as_deref().unwrap_or("")),
                    ("peer_gid", q.peer_gid.as_deref().unwrap_or("")),
                    ("peer_qp_num", pn.as_deref().unwrap_or("")),
                ]);
                labels(&l)
            })
            .collect();
        let status = |s: &str| labels(&[("status", s)]);
        header(out, &QP_CQ_ERRORS.name(), QP_CQ_ERRORS.help, Counter);
        for ((i, q), l) in all.iter().zip(&ql) {
            for (s, n) in &q.by_status {
                let extra = format!("{l},{}", status(s));
                sample(out, &QP_CQ_ERRORS.name(), &dev_l[*i], &extra, n);
            }
        }
        header(
            out,
            &QP_FIRST_CQ_ERROR.name(),
            QP_FIRST_CQ_ERROR.help,
            Gauge,
        );
        for ((i, q), l) in all.iter().zip(&ql) {
            let extra = format!("{l},{}", status(&q.first_status));
            sample(
                out,
                &QP_FIRST_CQ_ERROR.name(),
                &dev_l[*i],
                &extra,
                prom_f64(q.first_s),
            );
        }
    }
    header(
        out,
        &ERRORED_QP_SERIES_DROPPED.name(),
        ERRORED_QP_SERIES_DROPPED.help,
        Gauge,
    );
    sample(out, &ERRORED_QP_SERIES_DROPPED.name(), &rank_l, "", dropped);
    dropped
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::rank;
    use super::*;

    fn q(i: u64, first_s: f64) -> ErroredQp {
        ErroredQp {
            channel: "0".into(),
            comm: None,
            qp: i,
            qp_num: Some(200 + i as u32),
            peer_gid: Some("fe80:0000:0000:0000:0000:0000:0000:0002".into()),
            peer_qp_num: Some(300),
            by_status: vec![("WR_FLUSH_ERR".into(), 7), ("RETRY_EXC_ERR".into(), 1)],
            first_status: "RETRY_EXC_ERR".into(),
            first_s,
        }
    }

    #[test]
    fn errored_qps_get_series_naming_the_peer_up_to_the_cap_earliest_first() {
        let r = rank(7);
        let devs = vec![
            DevErrors {
                name: "rxe0".into(),
                hw_type: "rxe".into(),
                by_status: vec![("WR_FLUSH_ERR".into(), 7), ("RETRY_EXC_ERR".into(), 1)],
                qps: vec![q(3, 1.5)],
            },
            DevErrors {
                name: "rxe1".into(),
                hw_type: "rxe".into(),
                by_status: vec![],
                qps: vec![],
            },
        ];
        let mut out = String::new();
        assert_eq!(render_errors(&r, &devs, &mut out), 0);
        let dev0 = "host=\"h1\",pid=\"7\",rank=\"3\",device=\"rxe0\",hw_type=\"rxe\"";
        assert!(
            out.contains(&format!(
                "rccl_telemetry_cq_errors_by_status_total{{{dev0},status=\"RETRY_EXC_ERR\"}} 1\n"
            )),
            "{out}"
        );
        assert!(
            !out.contains("device=\"rxe1\""),
            "no error, no sample: {out}"
        );
        let qp = "channel=\"0\",qp=\"3\",qp_num=\"203\",peer_gid=\"fe80:0000:0000:0000:0000:0000:0000:0002\",peer_qp_num=\"300\"";
        assert!(
            out.contains(&format!(
                "rccl_telemetry_qp_cq_errors_total{{{dev0},{qp},status=\"WR_FLUSH_ERR\"}} 7\n"
            )),
            "{out}"
        );
        assert!(out.contains(&format!("rccl_telemetry_qp_first_cq_error_timestamp_seconds{{{dev0},{qp},status=\"RETRY_EXC_ERR\"}} 1.5\n")), "{out}");
        assert!(
            out.contains(
                "rccl_telemetry_errored_qp_series_dropped{host=\"h1\",pid=\"7\",rank=\"3\"} 0\n"
            ),
            "{out}"
        );
        // Past the cap: the earliest first errors stay, the rest are counted.
        let many = vec![DevErrors {
            name: "d".into(),
            hw_type: "t".into(),
            by_status: vec![("RETRY_EXC_ERR".into(), 70)],
            qps: (0..70).map(|i| q(i, 100.0 - i as f64)).collect(),
        }];
        let mut out = String::new();
        assert_eq!(render_errors(&r, &many, &mut out), 6);
        let firsts = out
            .lines()
            .filter(|l| l.starts_with("rccl_telemetry_qp_first_cq_error_timestamp_seconds{"))
            .count();
        assert_eq!(firsts, MAX_ERRORED_QP_SERIES);
        assert!(
            out.contains("qp=\"69\"") && !out.contains("qp=\"5\""),
            "{out}"
        );
        assert!(
            out.contains(
                "rccl_telemetry_errored_qp_series_dropped{host=\"h1\",pid=\"7\",rank=\"3\"} 6\n"
            ),
            "{out}"
        );
    }
}
