//! Stall detection's families and their renderer (the live textfile only; the JSON-to-text
//! export has no stalls to show). Separate because the stall detector feeds them, not the
//! counters.

use super::data::Rank;
use super::families::{fam, Family, Kind::Gauge, Scope as S};
use super::syntax::{header, labels, prom_f64, sample};

/// Stall detection's families (the live textfile only; docs/operators.md, "Stalled queue pairs").
pub const WQE_OUTSTANDING: Family = fam(
    "wqe_outstanding",
    Gauge,
    "Send WRs outstanding on the device's QPs at the stall detector's last check (hooks: WRITE_WITH_IMM postings not yet completed; preload: the send record).",
    S::Device,
    &[],
);
pub const STALLED_QPS: Family = fam(
    "stalled_qps",
    Gauge,
    "QPs with a completion expected and none for at least RCCL_TELEMETRY_STALL_MS.",
    S::Device,
    &[],
);
/// The labels of a stalled QP's series, after the device's.
pub const STALLED_QP_LABELS: &[&str] = &[
    "channel",
    "comm",
    "comm_rank",
    "comm_nranks",
    "qp",
    "qp_num",
    "peer_gid",
    "peer_qp_num",
];
pub const QP_STALLED_SECONDS: Family = fam(
    "qp_stalled_seconds",
    Gauge,
    "How long this stalled QP has had work outstanding and no completion (only stalled QPs have a series).",
    S::Device,
    STALLED_QP_LABELS,
);
pub const QP_STALL_OUTSTANDING: Family = fam(
    "qp_stall_outstanding",
    Gauge,
    "Send WRs outstanding on this stalled QP (only stalled QPs have a series).",
    S::Device,
    STALLED_QP_LABELS,
);
pub const STALLED_QP_SERIES_DROPPED: Family = fam(
    "stalled_qp_series_dropped",
    Gauge,
    "Stalled QPs beyond the cap of per-QP series (they count in rccl_telemetry_stalled_qps, without a series of their own).",
    S::Rank,
    &[],
);

/// Stalled QP series written at most per rank (the longest-stalled first).
pub const MAX_STALLED_QP_SERIES: usize = 64;

/// One stalled QP, for its series. Unknown label values are empty (which Prometheus reads as
/// an absent label).
#[derive(Debug, Clone, Default)]
pub struct StalledQp {
    pub channel: String,
    /// The communicator of its channel (None: the process-wide calls').
    pub comm: Option<super::data::CommLabels>,
    pub qp: u64,
    pub qp_num: Option<u32>,
    pub peer_gid: Option<String>,
    pub peer_qp_num: Option<u32>,
    pub outstanding: u64,
    pub stalled_s: f64,
}

/// One device's stall numbers.
#[derive(Debug, Clone, Default)]
pub struct DevStall {
    pub name: String,
    pub hw_type: String,
    pub outstanding: u64,
    pub stalled: u64,
    pub qps: Vec<StalledQp>,
}

/// Writes the stall families of one rank; per-QP series for at most [`MAX_STALLED_QP_SERIES`]
/// QPs, the longest-stalled first. Returns how many stalled QPs got no series.
pub fn render_stalls(r: &Rank, devs: &[DevStall], out: &mut String) -> usize {
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
    for (f, get) in [
        (
            WQE_OUTSTANDING,
            (|d: &DevStall| d.outstanding) as fn(&DevStall) -> u64,
        ),
        (STALLED_QPS, |d: &DevStall| d.stalled),
    ] {
        header(out, &f.name(), f.help, f.kind);
        for (d, l) in devs.iter().zip(&dev_l) {
            sample(out, &f.name(), l, "", get(d));
        }
    }
    let mut all: Vec<(usize, &StalledQp)> = devs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| d.qps.iter().map(move |q| (i, q)))
        .collect();
    all.sort_by(|a, b| b.1.stalled_s.total_cmp(&a.1.stalled_s));
    let dropped = all.len().saturating_sub(MAX_STALLED_QP_SERIES);
    all.truncate(MAX_STALLED_QP_SERIES);
    if !all.is_empty() {
        let ql: Vec<String> = all
            .iter()
            .map(|(_, q)| {
                let (qp, n, g, pn) = (
                    q.qp.to_string(),
                    q.qp_num.map(|n| n.to_string()),
                    q.peer_gid.clone(),
                    q.peer_qp_num.map(|n| n.to_string()),
                );
                let comm = q.comm.as_ref().map(|m| m.pairs());
                let mut l: Vec<(&str, &str)> = vec![("channel", q.channel.as_str())];
                l.extend(comm.iter().flatten().map(|(k, v)| (*k, v.as_str())));
                l.extend([
                    ("qp", qp.as_str()),
                    ("qp_num", n.as_deref().unwrap_or("")),
                    ("peer_gid", g.as_deref().unwrap_or("")),
                    ("peer_qp_num", pn.as_deref().unwrap_or("")),
                ]);
                labels(&l)
            })
            .collect();
        header(
            out,
            &QP_STALLED_SECONDS.name(),
            QP_STALLED_SECONDS.help,
            Gauge,
        );
        for ((i, q), l) in all.iter().zip(&ql) {
            sample(
                out,
                &QP_STALLED_SECONDS.name(),
                &dev_l[*i],
                l,
                prom_f64(q.stalled_s),
            );
        }
        header(
            out,
            &QP_STALL_OUTSTANDING.name(),
            QP_STALL_OUTSTANDING.help,
            Gauge,
        );
        for ((i, q), l) in all.iter().zip(&ql) {
            sample(
                out,
                &QP_STALL_OUTSTANDING.name(),
                &dev_l[*i],
                l,
                q.outstanding,
            );
        }
    }
    header(
        out,
        &STALLED_QP_SERIES_DROPPED.name(),
        STALLED_QP_SERIES_DROPPED.help,
        Gauge,
    );
    sample(out, &STALLED_QP_SERIES_DROPPED.name(), &rank_l, "", dropped);
    dropped
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::rank;
    use super::*;

    #[test]
    fn stalled_qps_get_series_up_to_the_cap_longest_first() {
        let r = rank(7);
        let q = |i: u64, s: f64| StalledQp {
            channel: "0".into(),
            comm: None,
            qp: i,
            qp_num: Some(100 + i as u32),
            peer_gid: Some("fe80:0000:0000:0000:0000:0000:0000:0001".into()),
            peer_qp_num: None,
            outstanding: 3,
            stalled_s: s,
        };
        let devs = vec![
            DevStall {
                name: "mlx5_0".into(),
                hw_type: "mlx5".into(),
                outstanding: 9,
                stalled: 2,
                qps: vec![
                    q(1, 2.5),
                    StalledQp {
                        comm: Some(super::super::data::CommLabels {
                            hash: "0xfeed".into(),
                            rank: 2,
                            nranks: 4,
                        }),
                        ..q(1, 1.5)
                    },
                ],
            },
            DevStall {
                name: "mlx5_1".into(),
                hw_type: "mlx5".into(),
                outstanding: 0,
                stalled: 0,
                qps: vec![],
            },
        ];
        let mut out = String::new();
        assert_eq!(render_stalls(&r, &devs, &mut out), 0);
        assert!(out.contains("rccl_telemetry_stalled_qps{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_0\",hw_type=\"mlx5\"} 2\n"), "{out}");
        assert!(out.contains("rccl_telemetry_stalled_qps{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_1\",hw_type=\"mlx5\"} 0\n"), "{out}");
        assert!(out.contains("rccl_telemetry_wqe_outstanding{host=\"h1\",pid=\"7\",rank=\"3\",device=\"mlx5_0\",hw_type=\"mlx5\"} 9\n"), "{out}");
        assert!(out.contains(",device=\"mlx5_0\",hw_type=\"mlx5\",channel=\"0\",qp=\"1\",qp_num=\"101\",peer_gid=\"fe80:0000:0000:0000:0000:0000:0000:0001\",peer_qp_num=\"\"} 2.5\n"), "{out}");
        // A communicator's QP 1 on channel 0 too: its labels tell them apart.
        assert!(out.contains(",channel=\"0\",comm=\"0xfeed\",comm_rank=\"2\",comm_nranks=\"4\",qp=\"1\",qp_num=\"101\",peer_gid=\"fe80:0000:0000:0000:0000:0000:0000:0001\",peer_qp_num=\"\"} 1.5\n"), "{out}");
        // Past the cap: the longest stay, the rest are counted.
        let many = vec![DevStall {
            name: "d".into(),
            hw_type: "t".into(),
            outstanding: 1,
            stalled: 70,
            qps: (0..70).map(|i| q(i, i as f64)).collect(),
        }];
        let mut out = String::new();
        assert_eq!(render_stalls(&r, &many, &mut out), 6);
        assert_eq!(
            out.lines()
                .filter(|l| l.starts_with("rccl_telemetry_qp_stalled_seconds{"))
                .count(),
            MAX_STALLED_QP_SERIES
        );
        assert!(
            out.contains("qp=\"69\"") && !out.contains("qp=\"5\""),
            "{out}"
        );
        assert!(
            out.contains(
                "rccl_telemetry_stalled_qp_series_dropped{host=\"h1\",pid=\"7\",rank=\"3\"} 6\n"
            ),
            "{out}"
        );
    }
}
