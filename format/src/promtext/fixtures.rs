//! Test data shared by the renderers' tests: a rank with one used and one unused device.

use super::data::{Channel, Counts, Device, Hw, PortQos, Qp, QpLatency, QpSettings, Rank};
use super::families::Level;
use super::render::render;
use crate::counters::{Field, N};

pub(super) fn counts(n: u64) -> Counts {
    let mut c = Counts {
        hist: vec![n, 0, 1],
        log_hist: vec![(56, Some(59), n), (1 << 40, None, 1)],
        ..Counts::default()
    };
    for (f, v) in [
        (Field::num_wqe_sent, n),
        (Field::num_recv_wqe, n),
        (Field::num_wqe_rcvd, 2 * n),
        (Field::num_wqe_completed, n),
        (Field::num_cts_sent_signalled, 1),
        (Field::num_cts_sent_unsignalled, n - 1),
        (Field::num_slot_miss, 0),
        (Field::num_write_wqe, n),
        (Field::num_write_imm_wqe, 0),
        (Field::num_wqe_slow, 1),
        (Field::num_stalls, 0),
    ] {
        c[f] = v;
    }
    c.present = [true; N];
    c
}

pub(super) fn rank(pid: u64) -> Rank {
    let qps = vec![
        Qp {
            id: 0,
            role: Some("data".into()),
            counts: counts(4),
            monitor: Some(QpLatency {
                count: 4,
                mean_ns: 1500.0,
                stddev_ns: 20.5,
                quantiles_ns: [1400, 1600, 2000, 2000],
            }),
        },
        Qp {
            id: 1,
            role: None,
            counts: counts(2),
            monitor: None,
        },
    ];
    let mut total = Counts::default();
    for q in &qps {
        total.add(&q.counts);
    }
    let ch = Channel {
        id: Some(3),
        comm: None,
        counts: total,
        requests_completed: 5,
        data_qps: 1,
        cts_qps: 0,
        untracked_qps: 0,
        qps,
    };
    let used = Device {
        id: 0,
        name: "mlx5_\"0\"".into(),
        hw_type: "mlx5".into(),
        tx_bytes: 100,
        rx_bytes: 50,
        cq_errors: 0,
        cq_polls: 9,
        active_channels: 1,
        untracked_qps: 2,
        hw: vec![
            ("cnp_sent".into(), Hw::Scalar(7)),
            (
                "pfc_rx_pause_duration_us".into(),
                Hw::PerPrio(vec![-1, 3, -1, -1, -1, -1, -1, -1]),
            ),
            ("rx_fcs_errors".into(), Hw::Scalar(-1)),
        ],
        channels: vec![ch],
        finalized: Counts::default(),
        finalized_requests: 0,
        finalized_qps: 0,
        qp_settings: QpSettings::tally([
            QpSettings {
                traffic_class: Some(106),
                path_mtu: Some(4096),
                ..QpSettings::default()
            },
            QpSettings::default(),
            QpSettings {
                traffic_class: Some(0),
                path_mtu: Some(4096),
                ..QpSettings::default()
            },
            QpSettings {
                traffic_class: Some(106),
                path_mtu: Some(4096),
                ..QpSettings::default()
            },
        ]),
        port_qos: PortQos {
            active_mtu: Some(4096),
            pfc_enabled: Some(vec![3]),
            dscp_priority: Some(vec![(26, 3), (46, 5)]),
        },
    };
    let unused = Device {
        id: 1,
        name: "mlx5_1".into(),
        tx_bytes: 0,
        rx_bytes: 0,
        channels: vec![],
        ..used.clone()
    };
    Rank {
        host: "h1".into(),
        pid,
        rank: Some("3".into()),
        start_s: Some(1.5),
        taken_s: Some(2.0),
        hist_interval_ns: 30_000,
        devices: vec![used, unused],
    }
}

/// The lines of three ranks (one a repeat of the first) at `level`.
pub(super) fn lines(level: Level) -> Vec<String> {
    let mut s = String::new();
    assert_eq!(render(&[rank(7), rank(8), rank(7)], level, &mut s), 1);
    s.lines().map(str::to_owned).collect()
}
