//! The canonical hardware-counter vocabulary, as data: one row per key of a device's
//! "hw_counters" (its name, kind, unit and meaning, which the file, the Prometheus families,
//! the schema and the docs take from here) with where each driver exposes it, which the
//! library's `hw` reads. Name and sources are one row so that a counter is added in one place.
//!
//! Every device emits every key of [`VOCAB`], in this order, whatever its driver.
//! For each key and driver the table lists alternatives in priority order: the first
//! alternative whose raw counters were read both at the baseline and at the flush wins,
//! so a primary name always beats its aliases and fallbacks, whatever order the kernel
//! lists them in. An alternative with several terms is their sum. A name holding `{p}`
//! (or `{c}`) is a template: in a per-priority key it is the priority of that entry; in a
//! scalar key it is summed over 0..=7 (over the instances present, since mlx5 prints
//! per-priority PFC names only for priorities with PFC enabled).
//!
//! The names come from /work/shared/data/nic_counters.json (mlx5, bnxt_re in its three
//! naming generations, ionic firmware names) and from the kernel's rdma_rxe counter table.

/// Where a raw counter is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Src {
    /// ETHTOOL_GSTRINGS / ETHTOOL_GSTATS on the RoCE device's netdev.
    Ethtool,
    /// `class/infiniband/<dev>/ports/<p>/hw_counters/<name>`, else the device-level
    /// `class/infiniband/<dev>/hw_counters/<name>` (mlx5 switchdev).
    HwCounters,
    /// `class/infiniband/<dev>/ports/<p>/counters/<name>` (IB PerfMgmt / PMA).
    PmaCounters,
    /// `class/net/<netdev>/statistics/<name>`.
    NetStat,
    /// `class/net/<netdev>/<name>` (e.g. carrier_down_count).
    NetAttr,
}

impl Src {
    /// Sources the sampler may read (IB sysfs only).
    pub fn is_ib_sysfs(self) -> bool {
        matches!(self, Src::HwCounters | Src::PmaCounters)
    }

    pub fn label(self) -> &'static str {
        match self {
            Src::Ethtool => "ethtool",
            Src::HwCounters => "hw_counters",
            Src::PmaCounters => "counters",
            Src::NetStat => "net statistics",
            Src::NetAttr => "net",
        }
    }
}

/// One raw counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub src: Src,
    pub name: &'static str,
    /// Multiply the raw delta by this (4 for the PMA `*_data` 4-byte words).
    pub scale: u64,
    /// The raw counter is 32 bits wide and wraps at 2^32.
    pub wrap32: bool,
}

/// One alternative: the sum of its terms.
pub type Alt = &'static [Term];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Scalar,
    PerPrio,
}

/// Index of a driver family in [`Key::map`].
pub const MLX5: usize = 0;
pub const THOR2: usize = 1;
pub const AINIC: usize = 2;
pub const RXE: usize = 3;
pub const NUM_DRIVERS: usize = 4;

/// The file's "hw_type" of each driver family, by its index above, then that of a device no
/// family supports.
pub const HW_TYPES: [&str; NUM_DRIVERS + 1] = ["mlx5", "thor2", "ainic", "rxe", "unsupported"];

/// The first keys of the vocabulary: every version's file has them (the schema requires them).
pub const SEED_KEYS: usize = 4;

/// One canonical key.
#[derive(Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: &'static str,
    pub meaning: &'static str,
    /// Part of the sampler's small congestion set (read from IB sysfs only).
    pub sampled: bool,
    /// The first file version whose devices have the key (a reader of an older file finds it
    /// absent, not -1).
    pub since: u32,
    /// Alternatives per driver: [mlx5, thor2, ainic, rxe]; empty = not exposed (-1).
    pub map: [&'static [Alt]; NUM_DRIVERS],
}

const fn eth(name: &'static str) -> Term {
    Term {
        src: Src::Ethtool,
        name,
        scale: 1,
        wrap32: false,
    }
}
const fn eth32(name: &'static str) -> Term {
    Term {
        src: Src::Ethtool,
        name,
        scale: 1,
        wrap32: true,
    }
}
const fn hw(name: &'static str) -> Term {
    Term {
        src: Src::HwCounters,
        name,
        scale: 1,
        wrap32: false,
    }
}
const fn hw32(name: &'static str) -> Term {
    Term {
        src: Src::HwCounters,
        name,
        scale: 1,
        wrap32: true,
    }
}
const fn pma(name: &'static str, scale: u64) -> Term {
    Term {
        src: Src::PmaCounters,
        name,
        scale,
        wrap32: false,
    }
}
const fn nstat(name: &'static str) -> Term {
    Term {
        src: Src::NetStat,
        name,
        scale: 1,
        wrap32: false,
    }
}
const fn nattr(name: &'static str) -> Term {
    Term {
        src: Src::NetAttr,
        name,
        scale: 1,
        wrap32: false,
    }
}

const NONE: &[Alt] = &[];

/// The vocabulary, in emission order. The four keys the schema requires come first.
pub static VOCAB: &[Key] = &[
    Key {
        name: "delta_tx_bytes",
        kind: Kind::Scalar,
        unit: "bytes",
        meaning: "RDMA (RoCE) bytes transmitted by this function, as the NIC counts them",
        sampled: false,
        since: 1,
        map: [
            &[
                &[eth("tx_vport_rdma_unicast_bytes")],
                &[pma("port_xmit_data", 4)],
            ],
            &[
                &[hw("tx_bytes")],
                &[hw("tx_roce_only_bytes")],
                &[pma("port_xmit_data", 4)],
            ],
            &[&[hw("tx_rdma_ucast_bytes")]],
            NONE,
        ],
    },
    Key {
        name: "delta_rx_bytes",
        kind: Kind::Scalar,
        unit: "bytes",
        meaning: "RDMA (RoCE) bytes received by this function, as the NIC counts them",
        sampled: false,
        since: 1,
        map: [
            &[
                &[eth("rx_vport_rdma_unicast_bytes")],
                &[pma("port_rcv_data", 4)],
            ],
            &[
                &[hw("rx_bytes")],
                &[hw("rx_roce_good_bytes")],
                &[hw("rx_good_bytes")],
                &[hw("rx_roce_only_bytes")],
                &[pma("port_rcv_data", 4)],
            ],
            &[&[hw("rx_rdma_ucast_bytes")]],
            NONE,
        ],
    },
    Key {
        name: "delta_tx_packets",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RDMA (RoCE) packets transmitted by this function",
        sampled: true,
        since: 1,
        map: [
            &[
                &[eth("tx_vport_rdma_unicast_packets")],
                &[pma("port_xmit_packets", 1)],
            ],
            &[
                &[hw("tx_pkts")],
                &[hw("tx_roce_only_pkts")],
                &[pma("port_xmit_packets", 1)],
            ],
            &[&[hw("tx_rdma_ucast_pkts")]],
            &[&[hw("sent_pkts")]],
        ],
    },
    Key {
        name: "delta_rx_packets",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RDMA (RoCE) packets received by this function",
        sampled: true,
        since: 1,
        map: [
            &[
                &[eth("rx_vport_rdma_unicast_packets")],
                &[pma("port_rcv_packets", 1)],
            ],
            &[
                &[hw("rx_pkts")],
                &[hw("rx_roce_good_pkts")],
                &[hw("rx_good_pkts")],
                &[pma("port_rcv_packets", 1)],
            ],
            &[&[hw("rx_rdma_ucast_pkts")]],
            &[&[hw("rcvd_pkts")]],
        ],
    },
    Key {
        name: "port_tx_bytes",
        kind: Kind::Scalar,
        unit: "bytes",
        meaning: "All bytes the port transmitted (MAC level, RDMA and everything else)",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("tx_bytes_phy")]],
            &[&[eth("tx_bytes")]],
            &[&[eth("octets_tx_ok")]],
            &[&[nstat("tx_bytes")]],
        ],
    },
    Key {
        name: "port_rx_bytes",
        kind: Kind::Scalar,
        unit: "bytes",
        meaning: "All bytes the port received (MAC level, RDMA and everything else)",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_bytes_phy")]],
            &[&[eth("rx_bytes")]],
            &[&[eth("octets_rx_ok")]],
            &[&[nstat("rx_bytes")]],
        ],
    },
    Key {
        name: "port_tx_packets",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "All frames the port transmitted",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("tx_packets_phy")]],
            &[&[eth("tx_good_frames")]],
            &[&[eth("frames_tx_ok")]],
            &[&[nstat("tx_packets")]],
        ],
    },
    Key {
        name: "port_rx_packets",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "All frames the port received",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_packets_phy")]],
            &[&[eth("rx_good_frames")]],
            &[&[eth("frames_rx_ok")]],
            &[&[nstat("rx_packets")]],
        ],
    },
    Key {
        name: "cnp_sent",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "CNPs sent by the notification point (this NIC saw ECN-marked packets)",
        sampled: true,
        since: 1,
        map: [
            &[&[hw("np_cnp_sent")]],
            &[
                &[hw("np_cnp_pkts")],
                &[hw("np_cnp_sent")],
                &[hw("tx_cnp_pkts")],
            ],
            &[&[hw("tx_rdma_cnp_pkts")]],
            NONE,
        ],
    },
    Key {
        name: "cnp_handled",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "CNPs received and acted on by the reaction point (this NIC was throttled)",
        sampled: true,
        since: 1,
        map: [
            &[&[hw("rp_cnp_handled")]],
            &[&[hw("rp_cnp_handled")], &[hw("rx_cnp_pkts")]],
            &[&[hw("rx_rdma_cnp_pkts")]],
            NONE,
        ],
    },
    Key {
        name: "cnp_ignored",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "CNPs received but ignored by the reaction point",
        sampled: true,
        since: 1,
        map: [&[&[hw("rp_cnp_ignored")]], NONE, NONE, NONE],
    },
    Key {
        name: "ecn_marked_pkts",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "ECN CE-marked RoCE packets received",
        sampled: true,
        since: 1,
        map: [
            &[&[hw("np_ecn_marked_roce_packets")]],
            &[
                &[hw("np_ecn_marked_roce_packets")],
                &[hw("rx_ecn_marked_pkts")],
            ],
            &[&[hw("rx_rdma_ecn_pkts")]],
            NONE,
        ],
    },
    Key {
        name: "local_ack_timeout_err",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Requester ACK-timer expirations (each one retransmits)",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("local_ack_timeout_err")]],
            &[&[hw("local_ack_timeout_err")], &[hw("to_retransmits")]],
            &[&[hw("tx_rdma_ack_timeout")]],
            NONE,
        ],
    },
    Key {
        name: "retransmitted_pkts",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RDMA packets retransmitted",
        sampled: true,
        since: 1,
        map: [NONE, NONE, &[&[hw("tx_rdma_retx_pkts")]], NONE],
    },
    Key {
        name: "completer_retry_err",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Requester retry rounds (ACK timeout or sequence NAK), Soft-RoCE only",
        sampled: true,
        since: 1,
        map: [NONE, NONE, NONE, &[&[hw("completer_retry_err")]]],
    },
    Key {
        name: "retry_exceeded_err",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Transport retry limit exceeded (the QP went to error)",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("req_transport_retries_exceeded")]],
            &[&[hw("max_retry_exceeded")]],
            &[&[hw("req_tx_retry_excd_err")]],
            &[&[hw("retry_exceeded_err")]],
        ],
    },
    Key {
        name: "rnr_retry_exceeded_err",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "RNR retry limit exceeded",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("req_rnr_retries_exceeded")]],
            NONE,
            NONE,
            &[&[hw("retry_rnr_exceeded_err")]],
        ],
    },
    Key {
        name: "packet_seq_err",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "NAK-sequence-error packets received by the requester",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("packet_seq_err")]],
            &[&[hw("packet_seq_err")], &[hw("seq_err_naks_rcvd")]],
            &[&[hw("req_rx_pkt_seq_err")]],
            &[&[hw("rcvd_seq_err")]],
        ],
    },
    Key {
        name: "out_of_sequence",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "Out-of-sequence (PSN gap) packets received by the responder",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("out_of_sequence")]],
            &[&[hw("out_of_sequence")], &[hw("oos_drop_count")]],
            &[&[hw("resp_rx_outouf_seq")]],
            &[&[hw("out_of_seq_request")]],
        ],
    },
    Key {
        name: "implied_nak_seq_err",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Implied NAKs detected by the requester",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("implied_nak_seq_err")]],
            &[&[hw("implied_nak_seq_err")], &[hw("missing_resp")]],
            &[&[hw("req_rx_impl_nak_seq_err")]],
            NONE,
        ],
    },
    Key {
        name: "duplicate_request",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "Duplicate requests received by the responder",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("duplicate_request")]],
            &[&[hw("duplicate_request")], &[hw("dup_req")]],
            &[&[hw("resp_rx_dup_request")]],
            &[&[hw("duplicate_request")]],
        ],
    },
    Key {
        name: "rnr_nak_retry_err",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RNR NAKs received by the requester",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("rnr_nak_retry_err")]],
            &[&[hw("rnr_nak_retry_err")], &[hw("rnr_naks_rcvd")]],
            &[&[hw("req_rx_rnr_retry_err")]],
            &[&[hw("rcvd_rnr_err")]],
        ],
    },
    Key {
        name: "rnr_nak_sent",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RNR NAKs sent by the responder (no receive WQE posted)",
        sampled: false,
        since: 1,
        map: [
            NONE,
            NONE,
            &[&[hw("resp_tx_rnr_retry_err")]],
            &[&[hw("send_rnr_err")]],
        ],
    },
    Key {
        name: "req_cqe_error",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Requester completions with error",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("req_cqe_error")]],
            &[
                &[hw("req_cqe_error")],
                &[
                    hw("bad_resp_err"),
                    hw("local_qp_op_err"),
                    hw("local_protection_err"),
                    hw("mem_mgmt_op_err"),
                    hw("req_remote_invalid_request"),
                    hw("req_remote_access_errors"),
                    hw("remote_op_err"),
                ],
                &[
                    hw("bad_resp_err"),
                    hw("local_qp_op_err"),
                    hw("local_protection_err"),
                    hw("mem_mgmt_op_err"),
                    hw("remote_invalid_req_err"),
                    hw("remote_access_err"),
                    hw("remote_op_err"),
                ],
            ],
            &[&[hw("req_rx_cqe_err")]],
            NONE,
        ],
    },
    Key {
        name: "resp_cqe_error",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Responder completions with error",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("resp_cqe_error")]],
            &[
                &[hw("resp_cqe_error")],
                &[hw("res_cmp_err"), hw("res_cq_load_err")],
            ],
            &[&[hw("resp_rx_cqe_err")]],
            NONE,
        ],
    },
    Key {
        name: "req_remote_access_errors",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Remote access errors seen by the requester",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("req_remote_access_errors")]],
            &[
                &[hw("req_remote_access_errors")],
                &[hw("remote_access_err")],
            ],
            &[&[hw("req_rx_rmt_acc_err")]],
            NONE,
        ],
    },
    Key {
        name: "resp_remote_access_errors",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Remote access errors detected by the responder",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("resp_remote_access_errors")]],
            &[
                &[hw("resp_remote_access_errors")],
                &[hw("res_rx_no_perm"), hw("res_tx_no_perm")],
            ],
            &[&[hw("resp_tx_rmt_acc_err")]],
            NONE,
        ],
    },
    Key {
        name: "out_of_buffer",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "Packets dropped because the QP/SRQ had no receive WQE",
        sampled: true,
        since: 1,
        map: [
            &[&[hw32("out_of_buffer")]],
            &[&[hw("out_of_buffer")], &[hw("rx_out_of_buffer")]],
            &[&[hw("resp_rx_outof_buf")]],
            NONE,
        ],
    },
    Key {
        name: "rdma_sends",
        kind: Kind::Scalar,
        unit: "operations",
        meaning: "SEND operations transmitted (requester side)",
        sampled: false,
        since: 1,
        map: [NONE, &[&[hw("tx_send_req")]], NONE, &[&[hw("rdma_sends")]]],
    },
    Key {
        name: "rdma_recvs",
        kind: Kind::Scalar,
        unit: "operations",
        meaning: "SEND operations received (responder side)",
        sampled: false,
        since: 1,
        map: [NONE, &[&[hw("rx_send_req")]], NONE, &[&[hw("rdma_recvs")]]],
    },
    Key {
        name: "rx_write_requests",
        kind: Kind::Scalar,
        unit: "operations",
        meaning: "RDMA WRITE requests received by the responder",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("rx_write_requests")]],
            &[&[hw("rx_write_requests")], &[hw("rx_write_req")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "rx_read_requests",
        kind: Kind::Scalar,
        unit: "operations",
        meaning: "RDMA READ requests received by the responder",
        sampled: false,
        since: 1,
        map: [
            &[&[hw32("rx_read_requests")]],
            &[&[hw("rx_read_requests")], &[hw("rx_read_req")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "ack_deferred",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Completer runs deferred to a work queue (Soft-RoCE only)",
        sampled: false,
        since: 1,
        map: [NONE, NONE, NONE, &[&[hw("ack_deferred")]]],
    },
    Key {
        name: "tx_roce_errors",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "RoCE packets the device failed to transmit",
        sampled: false,
        since: 1,
        map: [NONE, &[&[hw("tx_roce_errors")]], NONE, &[&[hw("send_err")]]],
    },
    Key {
        name: "rx_roce_discards",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "Received RoCE packets discarded by the device",
        sampled: false,
        since: 1,
        map: [
            NONE,
            &[&[hw("rx_roce_discards")], &[hw("rx_roce_drops")]],
            &[&[hw("rx_rdma_mtu_discard_pkts")]],
            NONE,
        ],
    },
    Key {
        name: "port_rx_discards",
        kind: Kind::Scalar,
        unit: "packets",
        meaning: "Received frames the port discarded (all traffic)",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_discards_phy")]],
            &[
                &[eth("rx_discard_packets_cos{c}")],
                &[eth("rx_stat_discard")],
            ],
            &[&[eth("frames_rx_dropped")]],
            &[&[nstat("rx_dropped")]],
        ],
    },
    Key {
        name: "rx_buffer_passed_thres",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Port receive buffer passed its almost-full threshold",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_buffer_passed_thres_phy")]],
            &[&[eth("rx_buffer_passed_threshold")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "pfc_rx_frames_total",
        kind: Kind::Scalar,
        unit: "frames",
        meaning: "PFC pause frames received, all priorities",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_prio{p}_pause")]],
            &[&[eth("rx_pfc_frames")]],
            &[&[eth("frames_rx_pripause")]],
            NONE,
        ],
    },
    Key {
        name: "pfc_tx_frames_total",
        kind: Kind::Scalar,
        unit: "frames",
        meaning: "PFC pause frames transmitted, all priorities",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("tx_prio{p}_pause")]],
            &[&[eth("tx_pfc_frames")]],
            &[&[eth("frames_tx_pripause")]],
            NONE,
        ],
    },
    Key {
        name: "pause_storm_events",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "PFC pause-storm events (the NIC stopped honouring pause)",
        sampled: false,
        since: 1,
        map: [
            &[
                &[eth("tx_pause_storm_error_events")],
                &[eth("tx_pause_storm_warning_events")],
            ],
            NONE,
            NONE,
            NONE,
        ],
    },
    Key {
        name: "link_down_events",
        kind: Kind::Scalar,
        unit: "events",
        meaning: "Link down events",
        sampled: false,
        since: 1,
        map: [
            &[
                &[eth32("link_down_events_phy")],
                &[nattr("carrier_down_count")],
            ],
            &[&[eth("link_down_events")], &[nattr("carrier_down_count")]],
            &[&[nattr("carrier_down_count")]],
            &[&[hw("link_downed")], &[nattr("carrier_down_count")]],
        ],
    },
    Key {
        name: "rx_fcs_errors",
        kind: Kind::Scalar,
        unit: "frames",
        meaning: "Frames received with a bad FCS/CRC",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_crc_errors_phy")]],
            &[&[eth("rx_fcs_err_frames")]],
            &[&[eth("frames_rx_bad_fcs")]],
            &[&[nstat("rx_crc_errors")]],
        ],
    },
    Key {
        name: "phy_symbol_errors",
        kind: Kind::Scalar,
        unit: "errors",
        meaning: "PHY/PCS symbol errors",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_pcs_symbol_err_phy")], &[eth("rx_symbol_err_phy")]],
            &[&[eth("rx_pcs_symbol_err")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "fec_corrected_bits",
        kind: Kind::Scalar,
        unit: "bits",
        meaning: "Bits corrected by FEC",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_corrected_bits_phy")]],
            &[&[eth("rx_corrected_bits")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "pfc_rx_frames",
        kind: Kind::PerPrio,
        unit: "frames",
        meaning: "PFC pause frames received, per priority 0..7",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_prio{p}_pause")]],
            &[&[eth("rx_pfc_ena_frames_pri{p}")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "pfc_tx_frames",
        kind: Kind::PerPrio,
        unit: "frames",
        meaning: "PFC pause frames transmitted, per priority 0..7",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("tx_prio{p}_pause")]],
            &[&[eth("tx_pfc_ena_frames_pri{p}")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "pfc_rx_pause_duration_us",
        kind: Kind::PerPrio,
        unit: "microseconds",
        meaning: "Time the port was paused by received PFC, per priority 0..7",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("rx_prio{p}_pause_duration")]],
            &[&[eth("pfc_pri{p}_rx_duration_us")]],
            &[&[eth("rx_pripause_{p}_1us_count")]],
            NONE,
        ],
    },
    Key {
        name: "pfc_tx_pause_duration_us",
        kind: Kind::PerPrio,
        unit: "microseconds",
        meaning: "Time the port paused its peer with PFC, per priority 0..7",
        sampled: false,
        since: 1,
        map: [
            &[&[eth("tx_prio{p}_pause_duration")]],
            &[&[eth("pfc_pri{p}_tx_duration_us")]],
            &[&[eth("tx_pripause_{p}_1us_count")]],
            NONE,
        ],
    },
    Key {
        name: "prio_rx_bytes",
        kind: Kind::PerPrio,
        unit: "bytes",
        meaning: "Bytes the port received, per priority 0..7 (all traffic of that priority)",
        sampled: false,
        since: 5,
        map: [
            &[&[eth("rx_prio{p}_bytes")]],
            &[&[eth("rx_bytes_pri{p}")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "prio_tx_bytes",
        kind: Kind::PerPrio,
        unit: "bytes",
        meaning: "Bytes the port transmitted, per priority 0..7 (all traffic of that priority)",
        sampled: false,
        since: 5,
        map: [
            &[&[eth("tx_prio{p}_bytes")]],
            &[&[eth("tx_bytes_pri{p}")]],
            NONE,
            NONE,
        ],
    },
    Key {
        name: "prio_rx_packets",
        kind: Kind::PerPrio,
        unit: "packets",
        meaning: "Frames the port received, per priority 0..7",
        sampled: false,
        since: 5,
        map: [
            &[&[eth("rx_prio{p}_packets")]],
            &[&[eth("rx_packets_pri{p}")]],
            &[&[eth("frames_rx_pri_{p}")]],
            NONE,
        ],
    },
    Key {
        name: "prio_tx_packets",
        kind: Kind::PerPrio,
        unit: "packets",
        meaning: "Frames the port transmitted, per priority 0..7",
        sampled: false,
        since: 5,
        map: [
            &[&[eth("tx_prio{p}_packets")]],
            &[&[eth("tx_packets_pri{p}")]],
            &[&[eth("frames_tx_pri_{p}")]],
            NONE,
        ],
    },
    Key {
        name: "prio_rx_discards",
        kind: Kind::PerPrio,
        unit: "packets",
        meaning: "Received frames the port discarded, per priority 0..7",
        sampled: false,
        since: 5,
        map: [&[&[eth("rx_prio{p}_discards")]], NONE, NONE, NONE],
    },
];

/// The canonical names, in emission order.
pub fn names() -> &'static [&'static str] {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| VOCAB.iter().map(|k| k.name).collect())
}

/// The canonical names of one kind, in emission order.
pub fn names_of(kind: Kind) -> impl Iterator<Item = &'static str> {
    VOCAB.iter().filter(move |k| k.kind == kind).map(|k| k.name)
}

/// Position of a canonical name in [`VOCAB`].
pub fn index_of(name: &str) -> Option<usize> {
    VOCAB.iter().position(|k| k.name == name)
}

/// True when the name is a template (`{p}` or `{c}`).
pub fn is_template(name: &str) -> bool {
    name.contains("{p}") || name.contains("{c}")
}

/// A template with its placeholder replaced by `i`.
pub fn expand(name: &str, i: usize) -> String {
    let d = char::from(b'0' + (i as u8 % 10));
    name.replace("{p}", d.encode_utf8(&mut [0u8; 4]))
        .replace("{c}", d.encode_utf8(&mut [0u8; 4]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_schema_keys_lead() {
        let n = names();
        let set: HashSet<_> = n.iter().collect();
        assert_eq!(set.len(), n.len(), "duplicate vocabulary key");
        assert_eq!(
            &n[..4],
            &[
                "delta_tx_bytes",
                "delta_rx_bytes",
                "delta_tx_packets",
                "delta_rx_packets"
            ]
        );
    }

    #[test]
    fn nine_per_priority_arrays_after_the_scalars() {
        let kinds: Vec<Kind> = VOCAB.iter().map(|k| k.kind).collect();
        let first_prio = kinds.iter().position(|k| *k == Kind::PerPrio).unwrap();
        assert!(kinds[first_prio..].iter().all(|k| *k == Kind::PerPrio));
        assert_eq!(kinds.len() - first_prio, 9);
    }

    #[test]
    fn per_prio_keys_use_templates_and_scalars_sum_them_only_knowingly() {
        for k in VOCAB {
            for alts in k.map.iter() {
                for alt in alts.iter() {
                    assert!(!alt.is_empty(), "{}: empty alternative", k.name);
                    for t in alt.iter() {
                        if k.kind == Kind::PerPrio {
                            assert!(
                                is_template(t.name),
                                "{}: {} is not per-priority",
                                k.name,
                                t.name
                            );
                        }
                        assert!(t.scale >= 1);
                        assert!(!t.name.contains('/') && !t.name.is_empty());
                    }
                }
            }
        }
    }

    #[test]
    fn keys_a_later_version_added_come_after_the_older_ones_of_their_kind() {
        assert!(VOCAB[..SEED_KEYS].iter().all(|k| k.since == 1));
        for kind in [Kind::Scalar, Kind::PerPrio] {
            let of: Vec<u32> = VOCAB
                .iter()
                .filter(|k| k.kind == kind)
                .map(|k| k.since)
                .collect();
            assert!(of.windows(2).all(|w| w[0] <= w[1]), "{kind:?}: {of:?}");
        }
        assert_eq!(VOCAB.iter().filter(|k| k.since == 5).count(), 5);
    }

    #[test]
    fn sampled_keys_have_an_ib_sysfs_source_somewhere() {
        for k in VOCAB.iter().filter(|k| k.sampled) {
            let any = k
                .map
                .iter()
                .flat_map(|a| a.iter())
                .any(|alt| alt.iter().all(|t| t.src.is_ib_sysfs()));
            assert!(any, "{} is sampled but never read from IB sysfs", k.name);
        }
    }

    #[test]
    fn rxe_maps_all_fifteen_port_counters() {
        let rxe_names: HashSet<&str> = VOCAB
            .iter()
            .flat_map(|k| k.map[RXE].iter())
            .flat_map(|alt| alt.iter())
            .filter(|t| t.src == Src::HwCounters)
            .map(|t| t.name)
            .collect();
        for n in [
            "sent_pkts",
            "rcvd_pkts",
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_rnr_err",
            "send_rnr_err",
            "rcvd_seq_err",
            "ack_deferred",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "completer_retry_err",
            "send_err",
            "link_downed",
            "rdma_sends",
            "rdma_recvs",
        ] {
            assert!(rxe_names.contains(n), "rxe counter {n} is not mapped");
        }
    }

    #[test]
    fn expand_replaces_either_placeholder() {
        assert_eq!(expand("rx_prio{p}_pause", 3), "rx_prio3_pause");
        assert_eq!(
            expand("rx_discard_packets_cos{c}", 7),
            "rx_discard_packets_cos7"
        );
        assert_eq!(expand("plain", 1), "plain");
    }
}
