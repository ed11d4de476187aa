//! How a channel and a queue pair are read: every key of the object at one level, then moved
//! into the model, whose [`Counters`] are a struct of their own. The model serialises them with
//! `#[serde(flatten)]`, which is cheap when writing; reading a flattened struct makes serde
//! buffer every key of the object before it fills any field, which took most of a file's parse
//! time (the QPs are most of a file). Keys, defaults and what is required are the model's.

use super::{
    Channel, CommRef, Counters, LatencyStats, LogBucket, QpAttrs, QpError, QpMonitor, QpPeer,
    QueuePair, Text,
};
use crate::counters::{with_rows, wqe_counts};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A wire struct: the object's own keys before the counters, the table's rows
/// ([`crate::counters`]), then the rest. A key's default and whether it is required are its
/// type's, as the model's (an `Option` missing is None).
macro_rules! wire_struct {
    ([$name:ident { $($pre:tt)* } { $($post:tt)* }] $( $(#[doc = $doc:literal])+ $key:ident : $t:ty, since $v:literal, prom($($p:tt)*); )*) => {
        #[derive(Deserialize)]
        pub struct $name {
            $($pre)*
            $($key: $t,)*
            $($post)*
        }
    };
}

/// The model's counters of a wire struct, moved out of it.
macro_rules! counters {
    ($w:ident) => {
        wqe_counts!(with_rows Counters, $w, Counters {
            wqe_completion_ns_min: $w.wqe_completion_ns_min,
            wqe_completion_ns_max: $w.wqe_completion_ns_max,
            wqe_completion_histogram: $w.wqe_completion_histogram,
            num_wqe_retired_unsignalled: $w.num_wqe_retired_unsignalled,
            ..Counters::default()
        })
    };
}

wqe_counts!(wire_struct ChannelWire {
    id: Option<u64>,
} {
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
});

impl From<ChannelWire> for Channel {
    fn from(w: ChannelWire) -> Channel {
        Channel {
            id: w.id,
            counters: counters!(w),
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

wqe_counts!(wire_struct QueuePairWire {
    id: u64,
    role: Option<super::Text>,
} {
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
    #[serde(default)]
    wqe_completion_ns_mean: Option<f64>,
    #[serde(default)]
    wqe_completion_ns_stddev: Option<f64>,
    #[serde(default)]
    wqe_completion_ns_p50: Option<u64>,
    #[serde(default)]
    wqe_completion_ns_p90: Option<u64>,
    #[serde(default)]
    wqe_completion_ns_p99: Option<u64>,
    #[serde(default)]
    wqe_completion_ns_p999: Option<u64>,
    #[serde(default)]
    attrs: Option<QpAttrs>,
});

impl From<QueuePairWire> for QueuePair {
    fn from(w: QueuePairWire) -> QueuePair {
        QueuePair {
            id: w.id,
            role: w.role,
            counters: counters!(w),
            qp_num: w.qp_num,
            local_gid: w.local_gid,
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
            monitor: {
                let stats = w.wqe_completion_ns_mean.map(|mean| LatencyStats {
                    wqe_completion_ns_mean: mean,
                    wqe_completion_ns_stddev: w.wqe_completion_ns_stddev.unwrap_or(0.0),
                    wqe_completion_ns_p50: w.wqe_completion_ns_p50.unwrap_or(0),
                    wqe_completion_ns_p90: w.wqe_completion_ns_p90.unwrap_or(0),
                    wqe_completion_ns_p99: w.wqe_completion_ns_p99.unwrap_or(0),
                    wqe_completion_ns_p999: w.wqe_completion_ns_p999.unwrap_or(0),
                });
                let attrs = w.attrs.filter(|a| *a != QpAttrs::default());
                (w.port.is_some() || w.local_lid.is_some() || stats.is_some() || attrs.is_some())
                    .then(|| {
                        Box::new(QpMonitor {
                            port: w.port,
                            local_lid: w.local_lid,
                            stats,
                            attrs,
                        })
                    })
            },
        }
    }
}
