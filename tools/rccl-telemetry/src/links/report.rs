//! What the join finds: the run's NICs, the links between them with their figures, and the
//! QPs whose peer is in no file or claimed twice.

use super::matrix::LinkMatrix;
use crate::stats::fmt_count;
use serde::Serialize;
use std::sync::Arc;

/// One NIC of the run: a (host, device) pair, whichever ranks drove it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Nic {
    pub host: String,
    pub device: String,
    pub device_id: u32,
    pub pids: Vec<i64>,
    pub gid: Option<String>,
    pub gid_ip: Option<String>,
    pub lid: Option<u64>,
}

impl Nic {
    pub fn label(&self) -> String {
        format!("{}:{}", self.host, self.device)
    }
}

/// Where a link's latency figures come from.
#[derive(Debug, Clone, Serialize)]
pub struct LinkLatency {
    /// "peers_log_histogram" (the sending device's per-peer log histogram) or
    /// "qp_linear_histogram" (the sum of the link's QPs' linear histograms).
    pub source: &'static str,
    /// Log histogram: the most a percentile can be off, relative (<= 1/8).
    pub relative_error: Option<f64>,
    /// Linear histogram: the bucket width, the most a percentile can be off.
    pub bucket_ns: Option<u64>,
    pub samples: u64,
    pub p50_ns: Option<f64>,
    pub p90_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    /// True when p99 lies in the open last bucket (only a lower bound).
    pub p99_open: bool,
    pub max_ns: Option<i64>,
}

/// One end of a link as the JSON names it.
#[derive(Debug, Clone, Serialize)]
pub struct End {
    pub host: String,
    pub pids: Vec<i64>,
    pub device: String,
    pub device_id: u32,
    pub gid: Option<String>,
    pub gid_ip: Option<String>,
    pub lid: Option<u64>,
}

/// An ordered NIC pair: src's QPs whose peers are on dst.
#[derive(Debug, Clone, Serialize)]
pub struct Link {
    /// The ends, shared with every link of the same NIC.
    pub src: Arc<End>,
    pub dst: Arc<End>,
    /// Index of src and dst in [`LinkReport::nics`].
    #[serde(skip)]
    pub src_nic: usize,
    #[serde(skip)]
    pub dst_nic: usize,
    pub qps: u64,
    /// WRs src posted on these QPs (num_wqe_sent) and completed (num_wqe_completed).
    pub wrs_sent: u64,
    pub wrs_completed: u64,
    /// What dst's matched QPs received (num_wqe_rcvd), the same direction seen from the other end.
    pub wrs_received_by_dst: u64,
    /// src's device tx_bytes times this link's share of the device's sent WRs (an estimate: the
    /// format counts bytes per device, not per QP).
    pub tx_bytes_est: u64,
    pub latency: Option<LinkLatency>,
    /// Preload files: sends retired unsignalled by a later completion.
    pub retired_unsignalled: Option<u64>,
    /// Stall keys (version 3): WRs outstanding now, QPs stalled now, the longest stall of any of
    /// the link's QPs.
    pub wrs_outstanding: Option<u64>,
    pub qps_stalled: Option<u64>,
    pub longest_stall_ms: Option<u64>,
    /// The WQE latency monitor (version 5): src's completions above its threshold on these QPs,
    /// and the largest p99 of any one of them (its own, exact to 1/16, over every measured WR).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrs_slow: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_p99_max_ns: Option<u64>,
}

/// QPs of one NIC whose peer is in no file, grouped by the remote NIC they name.
#[derive(Debug, Clone, Serialize)]
pub struct Unmatched {
    pub host: String,
    pub pids: Vec<i64>,
    pub device: String,
    pub remote_gid: Option<String>,
    pub remote_lid: Option<u64>,
    pub qps: u64,
    /// The remote QPNs (the first 16).
    pub remote_qp_nums: Vec<u64>,
}

/// A QP whose peer identity (GID or LID, QPN) is claimed by more than one QP of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Ambiguous {
    pub host: String,
    pub pid: i64,
    pub device: String,
    pub qp_num: Option<u64>,
    pub remote_gid: Option<String>,
    pub remote_lid: Option<u64>,
    pub remote_qp_num: u64,
    /// The QPs claiming that identity: "host:pid device".
    pub candidates: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct LinkReport {
    pub files: usize,
    /// Files of format version 3 (the others have no peers to join).
    pub files_with_peers: usize,
    pub qps: u64,
    /// QPs whose file names a peer.
    pub qps_with_peer: u64,
    pub qps_matched: u64,
    pub qps_unmatched: u64,
    pub qps_ambiguous: u64,
    pub nics: Vec<Nic>,
    pub links: Vec<Link>,
    pub unmatched: Vec<Unmatched>,
    pub ambiguous: Vec<Ambiguous>,
}

impl LinkReport {
    /// The NIC-by-NIC matrix of a per-link value (row = sending NIC, column = peer NIC),
    /// sparse: the links only.
    pub fn sparse_matrix(&self, value: impl Fn(&Link) -> Option<f64>) -> LinkMatrix {
        LinkMatrix::new(
            self.nics.len(),
            self.links.iter().map(|l| (l.src_nic, l.dst_nic, value(l))),
        )
    }

    /// The dense NIC-by-NIC matrix of a per-link value: n x n cells, for small runs only
    /// (16,384 NICs take 4 GiB); [`LinkReport::sparse_matrix`] reads the same.
    pub fn matrix(&self, value: impl Fn(&Link) -> Option<f64>) -> Vec<Vec<Option<f64>>> {
        let n = self.nics.len();
        let mut m = vec![vec![None; n]; n];
        for l in &self.links {
            m[l.src_nic][l.dst_nic] = value(l);
        }
        m
    }

    /// One line on what the join found.
    pub fn headline(&self) -> String {
        let mut s = format!(
            "{} links between {} NICs; {} of {} QPs name a peer: {} joined, {} unmatched (peer in no file), {} ambiguous",
            self.links.len(),
            self.nics.len(),
            fmt_count(self.qps_with_peer),
            fmt_count(self.qps),
            fmt_count(self.qps_matched),
            fmt_count(self.qps_unmatched),
            fmt_count(self.qps_ambiguous)
        );
        if self.files_with_peers < self.files {
            s.push_str(&format!(
                "; {} of {} files are older than format version 3 (no peers)",
                self.files - self.files_with_peers,
                self.files
            ));
        }
        s
    }
}
