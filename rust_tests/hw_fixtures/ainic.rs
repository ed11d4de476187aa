//! ainic: the firmware's counter names.

use super::hw_tree::{names, Tree};
use super::rig::*;
use rccl_telemetry::hw::{self, HwDevice};

#[test]
fn ainic_firmware_names() {
    let t = Tree::new();
    let (ib, nd) = ("ionic_0", "fxionic0");
    t.pci_ibdev(ib, "ionic", "0000:09:00.0", nd);
    t.gid_ndev(ib, 1, 0, nd);
    let mut r = Rig::new(&t, ib, nd);
    r.add(S::Hw, &names("ionic_ib_hw_counters"));
    r.add(S::Eth, &names("ionic_ethtool"));
    r.add(S::NetAttr, &["carrier_down_count".to_owned()]);
    r.write();
    let dev = leak(HwDevice::probe(2, ib, &t.settings()));
    assert_eq!(dev.hw_type(), "ainic");
    dev.take_baseline();
    r.bump_all();
    r.write();
    let rep = dev.final_report();
    hw::testing::set_fake_ethtool(nd, None);
    let h = |n: &str| E::S(inc(S::Hw, n));
    let e = |n: &str| E::S(inc(S::Eth, n));
    check(
        &rep,
        &[
            ("delta_tx_bytes", h("tx_rdma_ucast_bytes")),
            ("delta_rx_bytes", h("rx_rdma_ucast_bytes")),
            ("delta_tx_packets", h("tx_rdma_ucast_pkts")),
            ("delta_rx_packets", h("rx_rdma_ucast_pkts")),
            ("port_tx_bytes", e("octets_tx_ok")),
            ("port_rx_bytes", e("octets_rx_ok")),
            ("port_tx_packets", e("frames_tx_ok")),
            ("port_rx_packets", e("frames_rx_ok")),
            ("cnp_sent", h("tx_rdma_cnp_pkts")),
            ("cnp_handled", h("rx_rdma_cnp_pkts")),
            ("ecn_marked_pkts", h("rx_rdma_ecn_pkts")),
            ("local_ack_timeout_err", h("tx_rdma_ack_timeout")),
            ("retransmitted_pkts", h("tx_rdma_retx_pkts")),
            ("retry_exceeded_err", h("req_tx_retry_excd_err")),
            ("packet_seq_err", h("req_rx_pkt_seq_err")),
            ("out_of_sequence", h("resp_rx_outouf_seq")),
            ("implied_nak_seq_err", h("req_rx_impl_nak_seq_err")),
            ("duplicate_request", h("resp_rx_dup_request")),
            ("rnr_nak_retry_err", h("req_rx_rnr_retry_err")),
            ("rnr_nak_sent", h("resp_tx_rnr_retry_err")),
            ("req_cqe_error", h("req_rx_cqe_err")),
            ("resp_cqe_error", h("resp_rx_cqe_err")),
            ("req_remote_access_errors", h("req_rx_rmt_acc_err")),
            ("resp_remote_access_errors", h("resp_tx_rmt_acc_err")),
            ("out_of_buffer", h("resp_rx_outof_buf")),
            ("rx_roce_discards", h("rx_rdma_mtu_discard_pkts")),
            ("port_rx_discards", e("frames_rx_dropped")),
            ("pfc_rx_frames_total", e("frames_rx_pripause")),
            ("pfc_tx_frames_total", e("frames_tx_pripause")),
            (
                "link_down_events",
                E::S(inc(S::NetAttr, "carrier_down_count")),
            ),
            ("rx_fcs_errors", e("frames_rx_bad_fcs")),
            (
                "pfc_rx_pause_duration_us",
                prio(|p| inc(S::Eth, &format!("rx_pripause_{p}_1us_count"))),
            ),
            (
                "pfc_tx_pause_duration_us",
                prio(|p| inc(S::Eth, &format!("tx_pripause_{p}_1us_count"))),
            ),
            (
                "prio_rx_packets",
                prio(|p| inc(S::Eth, &format!("frames_rx_pri_{p}"))),
            ),
            (
                "prio_tx_packets",
                prio(|p| inc(S::Eth, &format!("frames_tx_pri_{p}"))),
            ),
        ],
    );
}
