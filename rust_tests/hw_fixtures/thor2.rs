//! thor2 (bnxt_re with bnxt_en ethtool) in each hw_counters naming generation: upstream 6.17
//! (with its gauges), upstream 6.18, and Broadcom's out-of-tree driver.

use super::hw_tree::{names, Tree};
use super::rig::*;
use rccl_telemetry::hw::{self, HwDevice, HwReport};

/// bnxt_re in one naming generation, plus bnxt_en ethtool.
fn thor2_rig<'a>(t: &'a Tree, gen: &str, ib: &str, nd: &str, with_pma: bool) -> Rig<'a> {
    t.pci_ibdev(ib, "bnxt_en", "0000:31:00.0", nd);
    t.gid_ndev(ib, 1, 0, nd);
    let mut r = Rig::new(t, ib, nd);
    r.add(S::Hw, &names(gen));
    if with_pma {
        r.add(S::Pma, &names("bnxt_re_ib_counters"));
    }
    r.add(S::Eth, &names("bnxt_en_ethtool"));
    r
}

fn thor2_common(e: &dyn Fn(&str) -> E) -> Vec<(&'static str, E)> {
    let sum_cos = (0..8)
        .map(|c| inc(S::Eth, &format!("rx_discard_packets_cos{c}")))
        .sum();
    vec![
        ("port_tx_bytes", e("tx_bytes")),
        ("port_rx_bytes", e("rx_bytes")),
        ("port_tx_packets", e("tx_good_frames")),
        ("port_rx_packets", e("rx_good_frames")),
        ("port_rx_discards", E::S(sum_cos)),
        ("rx_buffer_passed_thres", e("rx_buffer_passed_threshold")),
        ("pfc_rx_frames_total", e("rx_pfc_frames")),
        ("pfc_tx_frames_total", e("tx_pfc_frames")),
        ("link_down_events", e("link_down_events")),
        ("rx_fcs_errors", e("rx_fcs_err_frames")),
        ("phy_symbol_errors", e("rx_pcs_symbol_err")),
        ("fec_corrected_bits", e("rx_corrected_bits")),
        (
            "pfc_rx_frames",
            prio(|p| inc(S::Eth, &format!("rx_pfc_ena_frames_pri{p}"))),
        ),
        (
            "pfc_tx_frames",
            prio(|p| inc(S::Eth, &format!("tx_pfc_ena_frames_pri{p}"))),
        ),
        (
            "pfc_rx_pause_duration_us",
            prio(|p| inc(S::Eth, &format!("pfc_pri{p}_rx_duration_us"))),
        ),
        (
            "pfc_tx_pause_duration_us",
            prio(|p| inc(S::Eth, &format!("pfc_pri{p}_tx_duration_us"))),
        ),
        (
            "prio_rx_bytes",
            prio(|p| inc(S::Eth, &format!("rx_bytes_pri{p}"))),
        ),
        (
            "prio_tx_bytes",
            prio(|p| inc(S::Eth, &format!("tx_bytes_pri{p}"))),
        ),
        (
            "prio_rx_packets",
            prio(|p| inc(S::Eth, &format!("rx_packets_pri{p}"))),
        ),
        (
            "prio_tx_packets",
            prio(|p| inc(S::Eth, &format!("tx_packets_pri{p}"))),
        ),
    ]
}

/// The hw_counters names of upstream 6.18 and of Broadcom's out-of-tree driver, which differ
/// only in the name of the CNPs sent (`cnp_sent`).
fn thor2_hw_names(h: &dyn Fn(&str) -> E, cnp_sent: &str) -> Vec<(&'static str, E)> {
    vec![
        ("delta_tx_bytes", h("tx_bytes")),
        ("delta_rx_bytes", h("rx_bytes")),
        ("delta_tx_packets", h("tx_pkts")),
        ("delta_rx_packets", h("rx_pkts")),
        ("cnp_sent", h(cnp_sent)),
        ("cnp_handled", h("rp_cnp_handled")),
        ("ecn_marked_pkts", h("np_ecn_marked_roce_packets")),
        ("local_ack_timeout_err", h("local_ack_timeout_err")),
        ("retry_exceeded_err", h("max_retry_exceeded")),
        ("packet_seq_err", h("packet_seq_err")),
        ("out_of_sequence", h("out_of_sequence")),
        ("implied_nak_seq_err", h("implied_nak_seq_err")),
        ("duplicate_request", h("duplicate_request")),
        ("rnr_nak_retry_err", h("rnr_nak_retry_err")),
        ("req_cqe_error", h("req_cqe_error")),
        ("resp_cqe_error", h("resp_cqe_error")),
        ("req_remote_access_errors", h("req_remote_access_errors")),
        ("resp_remote_access_errors", h("resp_remote_access_errors")),
        ("out_of_buffer", h("out_of_buffer")),
        ("rdma_sends", h("tx_send_req")),
        ("rdma_recvs", h("rx_send_req")),
        ("rx_write_requests", h("rx_write_requests")),
        ("rx_read_requests", h("rx_read_requests")),
        ("tx_roce_errors", h("tx_roce_errors")),
        ("rx_roce_discards", h("rx_roce_discards")),
    ]
}

fn run_rig(r: &mut Rig, ib: &str) -> HwReport {
    r.write();
    let dev = leak(HwDevice::probe(1, ib, &r.t.settings()));
    assert_eq!(dev.hw_type(), "thor2");
    assert_eq!(dev.eth_device(), r.netdev);
    dev.take_baseline();
    r.bump_all();
    r.write();
    let rep = dev.final_report();
    hw::testing::set_fake_ethtool(&r.netdev, None);
    rep
}

/// A thor2 naming generation with PMA counters whose hw_counters names are
/// `thor2_hw_names(cnp_sent)`: every vocabulary key maps as expected.
fn check_thor2_generation(gen: &str, ib: &str, nd: &str, cnp_sent: &str) {
    let t = Tree::new();
    let mut r = thor2_rig(&t, gen, ib, nd, true);
    let rep = run_rig(&mut r, ib);
    let h = |n: &str| E::S(inc(S::Hw, n));
    let e = |n: &str| E::S(inc(S::Eth, n));
    let mut exp = thor2_common(&e);
    exp.extend(thor2_hw_names(&h, cnp_sent));
    check(&rep, &exp);
}

#[test]
fn thor2_upstream_6_18_names() {
    check_thor2_generation("bnxt_re_ge_6_18", "bnxt_re0", "fxbnxt618", "np_cnp_pkts");
}

#[test]
fn thor2_upstream_6_17_names_and_gauges() {
    let t = Tree::new();
    let (ib, nd) = ("bnxt_re1", "fxbnxt617");
    // Before 6.15 there is no counters/ (PMA) directory at all.
    let mut r = thor2_rig(&t, "bnxt_re_le_6_17", ib, nd, false);
    r.write();
    let dev = leak(HwDevice::probe(1, ib, &t.settings()));
    dev.take_baseline();
    r.bump_all();
    // Resource gauges go down as QPs are destroyed; they are not counters and must not
    // turn anything into a reset.
    for g in [
        "active_qps",
        "active_rc_qps",
        "watermark_qps",
        "db_fifo_register",
    ] {
        r.set(S::Hw, g, 0);
    }
    r.write();
    let rep = dev.final_report();
    hw::testing::set_fake_ethtool(nd, None);
    let h = |n: &str| E::S(inc(S::Hw, n));
    let e = |n: &str| E::S(inc(S::Eth, n));
    let sum = |ns: &[&str]| E::S(ns.iter().map(|n| inc(S::Hw, n)).sum());
    let mut exp = thor2_common(&e);
    exp.extend([
        ("delta_tx_bytes", h("tx_bytes")),
        ("delta_rx_bytes", h("rx_bytes")),
        ("delta_tx_packets", h("tx_pkts")),
        ("delta_rx_packets", h("rx_pkts")),
        ("cnp_sent", h("tx_cnp_pkts")),
        ("cnp_handled", h("rx_cnp_pkts")),
        ("ecn_marked_pkts", h("rx_ecn_marked_pkts")),
        ("local_ack_timeout_err", h("to_retransmits")),
        ("retry_exceeded_err", h("max_retry_exceeded")),
        ("packet_seq_err", h("seq_err_naks_rcvd")),
        ("out_of_sequence", h("oos_drop_count")),
        ("implied_nak_seq_err", h("missing_resp")),
        ("duplicate_request", h("dup_req")),
        ("rnr_nak_retry_err", h("rnr_naks_rcvd")),
        (
            "req_cqe_error",
            sum(&[
                "bad_resp_err",
                "local_qp_op_err",
                "local_protection_err",
                "mem_mgmt_op_err",
                "remote_invalid_req_err",
                "remote_access_err",
                "remote_op_err",
            ]),
        ),
        ("resp_cqe_error", sum(&["res_cmp_err", "res_cq_load_err"])),
        ("req_remote_access_errors", h("remote_access_err")),
        (
            "resp_remote_access_errors",
            sum(&["res_rx_no_perm", "res_tx_no_perm"]),
        ),
        ("out_of_buffer", h("rx_out_of_buffer")),
        ("rdma_sends", h("tx_send_req")),
        ("rdma_recvs", h("rx_send_req")),
        ("rx_write_requests", h("rx_write_req")),
        ("rx_read_requests", h("rx_read_req")),
        ("tx_roce_errors", h("tx_roce_errors")),
        ("rx_roce_discards", h("rx_roce_discards")),
    ]);
    check(&rep, &exp);
}

#[test]
fn thor2_broadcom_out_of_tree_names() {
    // delta_rx_bytes: the primary rx_bytes beats rx_good_bytes, which is also present.
    check_thor2_generation(
        "bnxt_re_out_of_tree",
        "bnxt_re2",
        "fxbnxtoot",
        "np_cnp_sent",
    );
}
