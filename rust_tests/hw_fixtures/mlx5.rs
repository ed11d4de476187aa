//! mlx5: every delta through wraps and resets, the fallback to the PMA words without ethtool,
//! and device-level hw_counters in switchdev mode.

use super::hw_tree::{names, Tree};
use super::rig::*;
use rccl_telemetry::hw::{self, HwDevice, HwValue};

#[test]
fn mlx5_every_delta_wrap_and_reset() {
    let t = Tree::new();
    let (ib, nd) = ("mlx5_0", "fxmlx5a");
    t.pci_ibdev(ib, "mlx5_core", "0000:17:00.0", nd);
    t.gid_ndev(ib, 1, 0, nd);
    t.gid_ndev(ib, 1, 1, nd);
    let mut r = Rig::new(&t, ib, nd);
    r.add(S::Hw, &names("mlx5_ib_hw_counters"));
    r.add(S::Pma, &names("mlx5_ib_counters"));
    // PFC is enabled on priorities 3 and 5 only, so mlx5 prints only their pause names;
    // an old kernel prints one storm name with a trailing space.
    let eth: Vec<String> = names("mlx5_ethtool")
        .into_iter()
        .filter(|n| {
            let pfc_name = n.contains("_pause") && n.contains("prio");
            !pfc_name || n.contains("prio3") || n.contains("prio5")
        })
        .map(|n| {
            if n == "tx_pause_storm_error_events" {
                format!("{n} ")
            } else {
                n
            }
        })
        .collect();
    assert!(
        eth.iter().position(|n| n == "rx_symbol_err_phy")
            < eth.iter().position(|n| n == "rx_pcs_symbol_err_phy"),
        "the fallback is listed before the primary"
    );
    r.add(S::Eth, &eth);
    t.hw_text(ib, "lifespan", "10\n");
    // A 32-bit Q counter about to wrap, a 64-bit congestion counter that will go backwards,
    // a 32-bit ethtool counter about to wrap.
    r.set(S::Hw, "out_of_buffer", 4_294_967_000);
    r.set(S::Hw, "np_cnp_sent", 5_000);
    r.set(S::Eth, "link_down_events_phy", 4_294_967_295);
    r.write();

    let dev = leak(HwDevice::probe(3, ib, &t.settings()));
    assert_eq!(dev.hw_type(), "mlx5");
    assert_eq!(dev.eth_device(), nd);
    dev.take_baseline();

    r.bump_all();
    r.set(S::Hw, "out_of_buffer", 200);
    r.set(S::Hw, "np_cnp_sent", 10);
    r.set(S::Eth, "link_down_events_phy", 3);
    t.hw_text(ib, "lifespan", "5\n");
    r.write();

    let h = |n: &str| E::S(inc(S::Hw, n));
    let e = |n: &str| E::S(inc(S::Eth, n));
    let p35 = |tmpl: &str| {
        prio(|p| {
            if p == 3 || p == 5 {
                inc(S::Eth, &tmpl.replace("{p}", &p.to_string()))
            } else {
                -1
            }
        })
    };
    // The per-priority traffic counters are printed for every priority, PFC or not.
    let every = |tmpl: &str| prio(|p| inc(S::Eth, &tmpl.replace("{p}", &p.to_string())));
    check(
        &dev.final_report(),
        &[
            ("delta_tx_bytes", e("tx_vport_rdma_unicast_bytes")),
            ("delta_rx_bytes", e("rx_vport_rdma_unicast_bytes")),
            ("delta_tx_packets", e("tx_vport_rdma_unicast_packets")),
            ("delta_rx_packets", e("rx_vport_rdma_unicast_packets")),
            ("port_tx_bytes", e("tx_bytes_phy")),
            ("port_rx_bytes", e("rx_bytes_phy")),
            ("port_tx_packets", e("tx_packets_phy")),
            ("port_rx_packets", e("rx_packets_phy")),
            ("cnp_sent", E::S(-1)), // went backwards: reset
            ("cnp_handled", h("rp_cnp_handled")),
            ("cnp_ignored", h("rp_cnp_ignored")),
            ("ecn_marked_pkts", h("np_ecn_marked_roce_packets")),
            ("local_ack_timeout_err", h("local_ack_timeout_err")),
            ("retry_exceeded_err", h("req_transport_retries_exceeded")),
            ("rnr_retry_exceeded_err", h("req_rnr_retries_exceeded")),
            ("packet_seq_err", h("packet_seq_err")),
            ("out_of_sequence", h("out_of_sequence")),
            ("implied_nak_seq_err", h("implied_nak_seq_err")),
            ("duplicate_request", h("duplicate_request")),
            ("rnr_nak_retry_err", h("rnr_nak_retry_err")),
            ("req_cqe_error", h("req_cqe_error")),
            ("resp_cqe_error", h("resp_cqe_error")),
            ("req_remote_access_errors", h("req_remote_access_errors")),
            ("resp_remote_access_errors", h("resp_remote_access_errors")),
            ("out_of_buffer", E::S(4_294_967_296 - 4_294_967_000 + 200)), // wrapped once
            ("rx_write_requests", h("rx_write_requests")),
            ("rx_read_requests", h("rx_read_requests")),
            ("port_rx_discards", e("rx_discards_phy")),
            ("rx_buffer_passed_thres", e("rx_buffer_passed_thres_phy")),
            (
                "pfc_rx_frames_total",
                E::S(inc(S::Eth, "rx_prio3_pause") + inc(S::Eth, "rx_prio5_pause")),
            ),
            (
                "pfc_tx_frames_total",
                E::S(inc(S::Eth, "tx_prio3_pause") + inc(S::Eth, "tx_prio5_pause")),
            ),
            ("pause_storm_events", e("tx_pause_storm_error_events")),
            ("link_down_events", E::S(4)), // 32-bit ethtool counter wrapped
            ("rx_fcs_errors", e("rx_crc_errors_phy")),
            ("phy_symbol_errors", e("rx_pcs_symbol_err_phy")),
            ("fec_corrected_bits", e("rx_corrected_bits_phy")),
            ("pfc_rx_frames", p35("rx_prio{p}_pause")),
            ("pfc_tx_frames", p35("tx_prio{p}_pause")),
            ("pfc_rx_pause_duration_us", p35("rx_prio{p}_pause_duration")),
            ("pfc_tx_pause_duration_us", p35("tx_prio{p}_pause_duration")),
            ("prio_rx_bytes", every("rx_prio{p}_bytes")),
            ("prio_tx_bytes", every("tx_prio{p}_bytes")),
            ("prio_rx_packets", every("rx_prio{p}_packets")),
            ("prio_tx_packets", every("tx_prio{p}_packets")),
            ("prio_rx_discards", every("rx_prio{p}_discards")),
        ],
    );
    hw::testing::set_fake_ethtool(nd, None);
}

#[test]
fn mlx5_without_ethtool_falls_back_to_pma_words() {
    let t = Tree::new();
    // A netdev that does not exist here: the real ioctl fails, ethtool keys are unavailable.
    let (ib, nd) = ("mlx5_1", "nosuchnet9");
    t.pci_ibdev(ib, "mlx5_core", "0000:17:00.1", nd);
    let mut r = Rig::new(&t, ib, nd);
    r.add(S::Hw, &names("mlx5_ib_hw_counters"));
    r.add(S::Pma, &names("mlx5_ib_counters"));
    r.text(S::Pma, "port_rcv_packets", "N/A (no PMA)\n");
    r.write();
    let dev = leak(HwDevice::probe(0, ib, &t.settings()));
    assert_eq!(dev.eth_device(), nd, "device/net fallback");
    dev.take_baseline();
    r.bump_all();
    r.write();
    let rep = dev.final_report();
    let get = |k: &str| rep.iter().find(|(n, _)| *n == k).unwrap().1.clone();
    assert_eq!(
        get("delta_tx_bytes"),
        HwValue::Scalar(4 * inc(S::Pma, "port_xmit_data"))
    );
    assert_eq!(
        get("delta_rx_bytes"),
        HwValue::Scalar(4 * inc(S::Pma, "port_rcv_data"))
    );
    assert_eq!(
        get("delta_tx_packets"),
        HwValue::Scalar(inc(S::Pma, "port_xmit_packets"))
    );
    assert_eq!(
        get("delta_rx_packets"),
        HwValue::Scalar(-1),
        "N/A (no PMA) is unavailable, not zero"
    );
    assert_eq!(get("port_tx_bytes"), HwValue::Scalar(-1));
    assert_eq!(get("pfc_rx_frames"), HwValue::PerPrio([-1; 8]));
    assert_eq!(get("cnp_sent"), HwValue::Scalar(inc(S::Hw, "np_cnp_sent")));
}

#[test]
fn mlx5_switchdev_device_level_hw_counters() {
    let t = Tree::new();
    let (ib, nd) = ("mlx5_2", "nosuchnet8");
    t.pci_ibdev(ib, "mlx5_core", "0000:17:00.2", nd);
    let mut r = Rig::new(&t, ib, nd);
    r.add(S::DevHw, &names("mlx5_ib_hw_counters"));
    r.write();
    let dev = leak(HwDevice::probe(0, ib, &t.settings()));
    dev.take_baseline();
    r.bump_all();
    r.write();
    let rep = dev.final_report();
    let get = |k: &str| rep.iter().find(|(n, _)| *n == k).unwrap().1.clone();
    assert_eq!(
        get("cnp_sent"),
        HwValue::Scalar(inc(S::DevHw, "np_cnp_sent"))
    );
    assert_eq!(
        get("out_of_buffer"),
        HwValue::Scalar(inc(S::DevHw, "out_of_buffer"))
    );
}
