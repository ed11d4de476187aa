//! Files the writer's types can produce, built from them directly: `full` (every optional key
//! present, every nullable key with a value), `nulls` (every nullable key null) and `bare`
//! (every key the writer may leave out left out). A new field of a writer type fails to
//! compile here until it is given a value in each, which is what keeps the contract test
//! complete: the union of the three is every key the writer can emit.

use rccl_telemetry_format::vocab::{self, Kind};
use rccl_telemetry_format::write::*;

const GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
const TIME: &str = "2026-12-02T11:00:00.123456789Z";

fn t() -> String {
    TIME.to_owned()
}

fn ip() -> GidIp {
    GidIp("10.0.0.2".parse().unwrap())
}

fn log() -> LogBuckets {
    LogBuckets(vec![(1000, Some(1119), 3), (16_106_127_360, None, 1)])
}

fn hw(v: i64) -> HwCounters {
    HwCounters(
        vocab::VOCAB
            .iter()
            .map(|k| {
                let x = match k.kind {
                    Kind::Scalar => HwValue::Scalar(v),
                    Kind::PerPrio => HwValue::PerPrio([v; 8]),
                };
                (k.name, x)
            })
            .collect(),
    )
}

fn statuses() -> StatusCounts {
    StatusCounts(vec![
        ("RETRY_EXC_ERR".into(), 1),
        ("WR_FLUSH_ERR".into(), 63),
    ])
}

fn verbs() -> VerbsCounters {
    VerbsCounters {
        num_send_wqe: 1,
        num_read_wqe: 2,
        num_atomic_wqe: 3,
        num_other_wqe: 4,
        num_wqe_retired_unsignalled: 5,
        num_wqe_track_full: 6,
    }
}

/// Which of the three files a part is built for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Full,
    Nulls,
    Bare,
}
use Shape::*;

fn qp(shape: Shape, which: usize) -> QpReport {
    let (full, nulls) = (shape == Full, shape == Nulls);
    QpReport {
        id: which as u64,
        role: (!nulls).then_some("data"),
        counts: counts(1, full),
        latency: latency(nulls, vec![3, 1, 0, 0, 0]),
        verbs: full.then(verbs),
        identity: (shape != Bare).then(|| QpIdentity {
            qp_num: full.then_some(4660),
            local_gid: full.then_some(GidText(GID)),
            // nulls: the first QP has no peer, the second one a peer nothing is known of
            peer: (full || which == 1).then(|| QpPeerReport {
                qp_num: 77,
                gid: full.then_some(GidText(GID)),
                gid_ip: full.then(ip),
                lid: full.then_some(7),
            }),
            qp_type: full.then_some("rc"),
        }),
        stall: (shape != Bare).then(|| QpStallReport {
            num_wqe_outstanding: 1,
            oldest_outstanding_ms: Some(full.then_some(12)),
            stalled: full,
            stalled_since: full.then(t),
            longest_stall_ms: 1500,
            longest_stall_start: full.then(t),
        }),
        errors: (shape != Bare).then(|| QpErrorReport {
            cq_errors: statuses(),
            first_cq_error: (full || which == 1).then(|| first_error(nulls)),
            qp_state: full.then_some("ERR"),
            last_post_time: full.then(t),
            last_completion_time: full.then(t),
        }),
        monitor: (shape != Bare).then(|| QpMonitorReport {
            port: full.then_some(1),
            local_lid: full.then_some(3),
            wqe_completion_ns_mean: full.then_some(1500.5),
            wqe_completion_ns_stddev: full.then_some(20.25),
            wqe_completion_ns_p50: full.then_some(1400),
            wqe_completion_ns_p90: full.then_some(2000),
            wqe_completion_ns_p99: full.then_some(9000),
            wqe_completion_ns_p999: full.then_some(90_000),
        }),
        // nulls: only what a QP's RTR transition tells
        attrs: (shape != Bare).then(|| QpAttrsReport {
            traffic_class: Some(106),
            sl: Some(3),
            path_mtu: Some(4096),
            timeout: full.then_some(18),
            retry_cnt: full.then_some(7),
            rnr_retry: full.then_some(7),
            min_rnr_timer: Some(12),
            sgid_index: Some(3),
            port: Some(1),
            hop_limit: Some(255),
            max_rd_atomic: full.then_some(1),
            max_dest_rd_atomic: Some(1),
        }),
    }
}

/// A QP's counts times `k` (a channel of two such QPs has k = 2).
fn counts(k: u64, full: bool) -> WqeCounts {
    WqeCounts {
        num_wqe_sent: 10 * k,
        num_recv_wqe: 5 * k,
        num_wqe_rcvd: 15 * k,
        num_wqe_completed: 10 * k,
        num_wqe_sampled: full.then_some(4 * k),
        num_cts_sent: 3 * k,
        num_cts_sent_signalled: k,
        num_cts_sent_unsignalled: 2 * k,
        num_slot_miss: k,
        num_write_wqe: 5 * k,
        num_write_imm_wqe: 5 * k,
        num_wqe_slow: full.then_some(k),
        num_stalls: full.then_some(2 * k),
    }
}

/// Latency extremes of -1 (nothing sampled) or 900 ns and 90 us, and the histogram `hist`.
fn latency(none: bool, hist: Vec<u64>) -> CompletionLatency {
    CompletionLatency {
        wqe_completion_ns_min: if none { -1 } else { 900 },
        wqe_completion_ns_max: if none { -1 } else { 90_000 },
        wqe_completion_histogram: hist,
    }
}

fn channel(shape: Shape) -> ChannelReport {
    let full = shape == Full;
    ChannelReport {
        id: (shape != Nulls).then_some(0),
        counts: counts(2, full),
        num_req_completed: 10,
        num_data_qp: 2,
        num_cts_qp: 0,
        num_qp_untracked: 0,
        latency: latency(false, vec![6, 2, 0, 0, 0]),
        queue_pairs: vec![qp(shape, 0), qp(shape, 1)],
        wqe_completion_log_histogram: (shape != Bare).then(log),
        verbs: full.then(verbs),
        comm: (shape != Nulls).then(comm_ref),
    }
}

fn comm_ref() -> CommRef {
    CommRef::new(1, 0x5eed_cafe, 0, 8)
}

fn first_error(inner_null: bool) -> FirstErrorReport {
    FirstErrorReport {
        status: "RETRY_EXC_ERR".into(),
        status_code: 12,
        vendor_err: 129,
        time: t(),
        opcode: (!inner_null).then_some("RDMA_WRITE"),
        bytes: (!inner_null).then_some(65536),
        age_ms: (!inner_null).then_some(7),
    }
}

fn peer(full: bool) -> PeerReport {
    PeerReport {
        gid: full.then_some(GidText(GID)),
        gid_ip: full.then(ip),
        lid: full.then_some(9),
        num_qps: 2,
        num_qps_shared: full.then_some(1),
        wqe_completion_log_histogram: full.then(log),
    }
}

/// A finalized communicator's record: nulls has the record past the cap (comm null) with no
/// first error (`which` 0), and one whose first error has no channel, QP number or peer (1).
fn finalized(shape: Shape, which: usize) -> FinalizedCommReport {
    let (full, nulls) = (shape == Full, shape == Nulls && which == 0);
    FinalizedCommReport {
        comm: (!nulls).then(comm_ref),
        num_comms: if nulls { 3 } else { 1 },
        num_channels: 1,
        num_qps: 2,
        counts: counts(2, full),
        num_req_completed: 10,
        num_data_qp: 2,
        num_cts_qp: 0,
        num_qp_untracked: 0,
        latency: latency(nulls, vec![6, 2, 0, 0, 0]),
        wqe_completion_log_histogram: (shape != Bare).then(log),
        verbs: full.then(verbs),
        peers: if shape == Bare {
            vec![]
        } else {
            vec![FinalizedPeerReport {
                peer: peer(full),
                counts: counts(2, full),
                latency: latency(nulls, vec![6, 2, 0, 0, 0]),
                stall: (shape != Bare).then(|| finalized_stall(full)),
            }]
        },
        cq_errors: statuses(),
        // the second nulls record: a first error whose QP has no channel, number or peer.
        first_cq_error: (!nulls).then(|| FinalizedFirstErrorReport {
            error: first_error(!full),
            channel: full.then_some(0),
            qp: 1,
            qp_num: full.then_some(4661),
            peer: full.then(|| QpPeerReport {
                qp_num: 78,
                gid: Some(GidText(GID)),
                gid_ip: Some(ip()),
                lid: Some(9),
            }),
        }),
        stall: (shape != Bare).then(|| finalized_stall(full)),
        queue_pairs: if shape == Bare {
            vec![]
        } else {
            vec![FinalizedQpReport {
                channel: full.then_some(0),
                qp: qp(shape, usize::from(full)),
            }]
        },
        num_qps_unlisted: u64::from(full),
    }
}

fn finalized_stall(full: bool) -> FinalizedStallReport {
    FinalizedStallReport {
        num_wqe_outstanding: 1,
        num_qps_stalled: 1,
        longest_stall_ms: 1500,
        longest_stall_start: full.then(t),
    }
}

fn device(shape: Shape) -> DeviceReport {
    let (full, bare) = (shape == Full, shape == Bare);
    DeviceReport {
        device_id: 0,
        roce_device: "mlx5_0".into(),
        eth_device: "eth0".into(),
        hw_type: "mlx5",
        tx_bytes: 1 << 20,
        rx_bytes: 1 << 20,
        num_cq_errors: 64,
        cq_poll_count: 100,
        num_channels: (shape != Nulls).then_some(1),
        active_channels: 1,
        num_qp_untracked: 0,
        wqe_size_stats: vec![SizeStat {
            max_wqe_size: 65536,
            num_wqe: 20,
        }],
        channels: vec![channel(shape)],
        hw_counters: hw(if full { 5 } else { -1 }),
        wqe_completion_log_histogram: (!bare).then(log),
        verbs: full.then_some(DeviceVerbsReport {
            num_srq_recv_wqe: 1,
            num_wc_unknown_qp: 2,
        }),
        port: full.then_some(1),
        gid_index: full.then_some(3),
        gid: full.then_some(GidText(GID)),
        gid_ip: full.then(ip),
        lid: full.then_some(7),
        peers: if bare { vec![] } else { vec![peer(full)] },
        stall: (!bare).then_some(DeviceStallReport {
            num_wqe_outstanding: 2,
            num_qps_stalled: 1,
        }),
        cq_errors_by_status: statuses(),
        finalized_comms: match shape {
            Full => vec![finalized(Full, 0)],
            Nulls => vec![finalized(Nulls, 0), finalized(Nulls, 1)],
            Bare => vec![],
        },
        num_wqe_slow: full.then_some(2),
        num_stalls: full.then_some(4),
        port_qos: if full {
            PortQosReport {
                active_mtu: Some(4096),
                pfc_enabled: Some(vec![3]),
                dscp_priority: Some([(26, 3), (46, 5)].into_iter().collect()),
            }
        } else {
            PortQosReport::default()
        },
    }
}

/// A whole file of the given shape.
pub fn file(shape: Shape) -> FileReport {
    let full = shape == Full;
    FileReport {
        version: rccl_telemetry_format::FORMAT_VERSION,
        host_name: "node-a".into(),
        process_name: "all_reduce_perf".into(),
        process_id: 4242,
        start_time: t(),
        end_time: t(),
        is_final: full,
        trigger: "exit".into(),
        transport: (shape != Nulls).then(|| "IB-CAST".into()),
        histogram_interval_ns: 30_000,
        latency_sample_interval: full.then_some(4),
        devices: vec![device(shape)],
        hw_samples: full.then(|| {
            vec![SampleReport {
                device_id: 0,
                timestamp_ns: 1_796_209_200_000_000_000,
                counters: SampleCounters(vec![("cnp_sent", 3), ("num_qps_stalled", 0)]),
            }]
        }),
        hw_samples_dropped: full.then_some(0),
        stall_ms: 1000,
        rank: (shape != Nulls).then_some(3),
        communicators: if shape == Bare {
            vec![]
        } else {
            vec![CommunicatorReport {
                comm: comm_ref(),
                init_time: t(),
                finalize_time: full.then(t),
            }]
        },
        slow_threshold_ns: if full { 100_000 } else { 0 },
        source: full.then_some("nccl_log"),
    }
}
