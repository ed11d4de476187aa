//! How a channel and a queue pair are read: every key of the object at one level, then moved
//! into the model, whose [`Counters`] are a struct of their own. The model serialises them with
//! `#[serde(flatten)]`, which is cheap when writing; reading a flattened struct makes serde
//! buffer every key of the object before it fills any field, which took most of a file's parse
//! time (the QPs are most of a file). Keys, defaults and what is required are the model's.

use super::{Channel, CommRef, Counters, LogBucket, QpError, QpPeer, QueuePair, Text};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
pub struct ChannelWire {
    id: Option<u64>,
    num_wqe_sent: u64,
    num_recv_wqe: u64,
    num_wqe_rcvd: u64,
    num_wqe_completed: u64,
    #[serde(default)]
    num_wqe_sampled: Option<u64>,
    num_cts_sent: u64,
    num_cts_sent_signalled: u64,
    num_cts_sent_unsignalled: u64,
    num_slot_miss: u64,
    num_write_wqe: u64,
    num_write_imm_wqe: u64,
    wqe_completion_ns_min: i64,
    wqe_completion_ns_max: i64,
    wqe_completion_histogram: Vec<u64>,
    #[serde(default)]
    num_wqe_retired_unsignalled: Option<u64>,
    num_req_completed: u64,
    num_data_qp: u64,
    num_cts_qp: u64,
    num_qp_untracked: u64,
    queue_pairs: Vec<QueuePair>,
    #[serde(default)]
    wqe_completion_log_histogram: Option<Vec<LogBucket>>,
    #[serde(default)]
    comm: Option<CommRef>,
}

impl From<ChannelWire> for Channel {
    fn from(w: ChannelWire) -> Channel {
        Channel {
            id: w.id,
            counters: Counters {
                num_wqe_sent: w.num_wqe_sent,
                num_recv_wqe: w.num_recv_wqe,
                num_wqe_rcvd: w.num_wqe_rcvd,
                num_wqe_completed: w.num_wqe_completed,
                num_wqe_sampled: w.num_wqe_sampled,
                num_cts_sent: w.num_cts_sent,
                num_cts_sent_signalled: w.num_cts_sent_signalled,
                num_cts_sent_unsignalled: w.num_cts_sent_unsignalled,
                num_slot_miss: w.num_slot_miss,
                num_write_wqe: w.num_write_wqe,
                num_write_imm_wqe: w.num_write_imm_wqe,
                wqe_completion_ns_min: w.wqe_completion_ns_min,
                wqe_completion_ns_max: w.wqe_completion_ns_max,
                wqe_completion_histogram: w.wqe_completion_histogram,
                num_wqe_retired_unsignalled: w.num_wqe_retired_unsignalled,
            },
            num_req_completed: w.num_req_completed,
            num_data_qp: w.num_data_qp,
            num_cts_qp: w.num_cts_qp,
            num_qp_untracked: w.num_qp_untracked,
            queue_pairs: w.queue_pairs,
            wqe_completion_log_histogram: w.wqe_completion_log_histogram,
            comm: w.comm,
            dropped_qps: 0,
        }
    }
}

#[derive(Deserialize)]
pub struct QueuePairWire {
    id: u64,
    role: Option<super::Text>,
    num_wqe_sent: u64,
    num_recv_wqe: u64,
    num_wqe_rcvd: u64,
    num_wqe_completed: u64,
    #[serde(default)]
    num_wqe_sampled: Option<u64>,
    num_cts_sent: u64,
    num_cts_sent_signalled: u64,
    num_cts_sent_unsignalled: u64,
    num_slot_miss: u64,
    num_write_wqe: u64,
    num_write_imm_wqe: u64,
    wqe_completion_ns_min: i64,
    wqe_completion_ns_max: i64,
    wqe_completion_histogram: Vec<u64>,
    #[serde(default)]
    num_wqe_retired_unsignalled: Option<u64>,
    #[serde(default)]
    qp_num: Option<u64>,
    #[serde(default)]
    local_gid: Option<Text>,
    #[serde(default)]
    port: Option<u64>,
    #[serde(default)]
    local_lid: Option<u64>,
    #[serde(default)]
    peer: Option<QpPeer>,
    #[serde(default)]
    qp_type: Option<Text>,
    #[serde(default)]
    num_ud_peers: Option<u64>,
    #[serde(default)]
    num_wqe_outstanding: Option<u64>,
    #[serde(default)]
    oldest_outstanding_ms: Option<u64>,
    #[serde(default)]
    stalled: Option<bool>,
    #[serde(default)]
    stalled_since: Option<Box<str>>,
    #[serde(default)]
    longest_stall_ms: Option<u64>,
    #[serde(default)]
    longest_stall_start: Option<Box<str>>,
    #[serde(default)]
    cq_errors: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    first_cq_error: Option<QpError>,
    #[serde(default)]
    qp_state: Option<Text>,
    #[serde(default)]
    last_post_time: Option<Box<str>>,
    #[serde(default)]
    last_completion_time: Option<Box<str>>,
}

impl From<QueuePairWire> for QueuePair {
    fn from(w: QueuePairWire) -> QueuePair {
        QueuePair {
            id: w.id,
            role: w.role,
            counters: Counters {
                num_wqe_sent: w.num_wqe_sent,
                num_recv_wqe: w.num_recv_wqe,
                num_wqe_rcvd: w.num_wqe_rcvd,
                num_wqe_completed: w.num_wqe_completed,
                num_wqe_sampled: w.num_wqe_sampled,
                num_cts_sent: w.num_cts_sent,
                num_cts_sent_signalled: w.num_cts_sent_signalled,
                num_cts_sent_unsignalled: w.num_cts_sent_unsignalled,
                num_slot_miss: w.num_slot_miss,
                num_write_wqe: w.num_write_wqe,
                num_write_imm_wqe: w.num_write_imm_wqe,
                wqe_completion_ns_min: w.wqe_completion_ns_min,
                wqe_completion_ns_max: w.wqe_completion_ns_max,
                wqe_completion_histogram: w.wqe_completion_histogram,
                num_wqe_retired_unsignalled: w.num_wqe_retired_unsignalled,
            },
            qp_num: w.qp_num,
            local_gid: w.local_gid,
            port: w.port,
            local_lid: w.local_lid,
            peer: w.peer,
            qp_type: w.qp_type,
            num_ud_peers: w.num_ud_peers,
            num_wqe_outstanding: w.num_wqe_outstanding,
            oldest_outstanding_ms: w.oldest_outstanding_ms,
            stalled: w.stalled,
            stalled_since: w.stalled_since,
            longest_stall_ms: w.longest_stall_ms,
            longest_stall_start: w.longest_stall_start,
            cq_errors: w.cq_errors.map(Box::new),
            first_cq_error: w.first_cq_error.map(Box::new),
            qp_state: w.qp_state,
            last_post_time: w.last_post_time,
            last_completion_time: w.last_completion_time,
        }
    }
}
