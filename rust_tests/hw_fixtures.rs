//! Hardware counters through the public API against fixture sysfs trees, one per driver
//! family (mlx5, thor2 in each bnxt_re naming generation, ainic, rxe), built from the real
//! raw names. Every raw counter changes between the baseline and the flush by its own
//! amount, so each expected delta below names the raw counter it must come from.

#[path = "fixtures/hw_tree.rs"]
mod hw_tree;

use hw_tree::{base_of, inc_of, names, Tree};
use rccl_telemetry::hw::{self, HwDevice, HwReport, HwSettings, HwValue};
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum S {
    Hw,
    DevHw,
    Pma,
    Eth,
    NetStat,
    NetAttr,
}

fn v0(s: S, n: &str) -> u64 {
    base_of(&format!("{s:?}:{n}"))
}
fn inc(s: S, n: &str) -> i64 {
    inc_of(&format!("{s:?}:{n}")) as i64
}

/// The raw counters of one device and the files/ethtool answers that carry them.
struct Rig<'a> {
    t: &'a Tree,
    ibdev: String,
    netdev: String,
    vals: BTreeMap<(S, String), u64>,
    /// ethtool names in kernel order, spelled as the kernel prints them.
    eth_printed: Vec<String>,
    texts: Vec<(S, String, String)>,
}

impl<'a> Rig<'a> {
    fn new(t: &'a Tree, ibdev: &str, netdev: &str) -> Rig<'a> {
        Rig {
            t,
            ibdev: ibdev.into(),
            netdev: netdev.into(),
            vals: BTreeMap::new(),
            eth_printed: vec![],
            texts: vec![],
        }
    }
    fn add(&mut self, s: S, list: &[String]) {
        for n in list {
            if s == S::Eth {
                self.eth_printed.push(n.clone());
            }
            self.vals.insert((s, n.trim().to_owned()), v0(s, n.trim()));
        }
    }
    fn set(&mut self, s: S, n: &str, v: u64) {
        self.vals.insert((s, n.to_owned()), v);
    }
    fn text(&mut self, s: S, n: &str, text: &str) {
        self.vals.remove(&(s, n.to_owned()));
        self.texts.push((s, n.to_owned(), text.to_owned()));
    }
    fn bump_all(&mut self) {
        for ((s, n), v) in self.vals.iter_mut() {
            *v += inc(*s, n) as u64;
        }
    }
    fn write(&self) {
        let (ib, nd, t) = (&self.ibdev, &self.netdev, self.t);
        for ((s, n), v) in &self.vals {
            match s {
                S::Hw => t.hw(ib, n, *v),
                S::DevHw => t.dev_hw(ib, n, *v),
                S::Pma => t.pma(ib, n, *v),
                S::NetStat => t.netstat(nd, n, *v),
                S::NetAttr => t.netattr(nd, n, *v),
                S::Eth => {}
            }
        }
        for (s, n, text) in &self.texts {
            match s {
                S::Hw => t.hw_text(ib, n, text),
                S::Pma => t.pma_text(ib, n, text),
                _ => unreachable!(),
            }
        }
        if !self.eth_printed.is_empty() {
            let stats = self
                .eth_printed
                .iter()
                .filter_map(|p| {
                    self.vals
                        .get(&(S::Eth, p.trim().to_owned()))
                        .map(|v| (p.clone(), *v))
                })
                .collect();
            hw::testing::set_fake_ethtool(nd, Some(stats));
        }
    }
}

fn leak(d: HwDevice) -> &'static HwDevice {
    Box::leak(Box::new(d))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum E {
    S(i64),
    P([i64; 8]),
}

fn prio(f: impl Fn(usize) -> i64) -> E {
    E::P(std::array::from_fn(f))
}

/// Every vocabulary key is present, in order; listed keys have the listed value, every
/// other key is -1.
fn check(report: &HwReport, expected: &[(&str, E)]) {
    let keys: Vec<&str> = report.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, hw::vocabulary(), "keys or order differ");
    let exp: HashMap<&str, E> = expected.iter().cloned().collect();
    for k in exp.keys() {
        assert!(hw::vocabulary().contains(k), "test expects unknown key {k}");
    }
    let mut bad = Vec::new();
    for (k, v) in report {
        let want = exp.get(k).copied().unwrap_or(match v {
            HwValue::Scalar(_) => E::S(-1),
            HwValue::PerPrio(_) => E::P([-1; 8]),
        });
        let got = match v {
            HwValue::Scalar(x) => E::S(*x),
            HwValue::PerPrio(a) => E::P(*a),
        };
        if got != want {
            bad.push(format!("{k}: got {got:?}, want {want:?}"));
        }
        match v {
            HwValue::Scalar(x) => assert!(*x >= -1, "{k} negative"),
            HwValue::PerPrio(a) => assert!(a.iter().all(|x| *x >= -1), "{k} negative"),
        }
    }
    assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
}

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
        ],
    );
}

fn rxe_rig<'a>(t: &'a Tree, ib: &str, nd: &str) -> Rig<'a> {
    t.rxe_ibdev(ib, nd);
    t.gid_ndev(ib, 1, 0, nd);
    t.gid_ndev(ib, 1, 1, nd);
    t.hw_text(ib, "lifespan", "12\n");
    let mut r = Rig::new(t, ib, nd);
    r.add(S::Hw, &names("rxe_ib_hw_counters"));
    let stats: Vec<String> = [
        "tx_bytes",
        "rx_bytes",
        "tx_packets",
        "rx_packets",
        "rx_dropped",
        "rx_crc_errors",
    ]
    .map(String::from)
    .to_vec();
    r.add(S::NetStat, &stats);
    r.add(S::NetAttr, &["carrier_down_count".to_owned()]);
    r
}

#[test]
fn rxe_soft_roce() {
    let t = Tree::new();
    let (ib, nd) = ("rxe0", "eth0");
    let mut r = rxe_rig(&t, ib, nd);
    r.write();
    let dev = leak(HwDevice::probe(0, ib, &t.settings()));
    assert_eq!(dev.hw_type(), "rxe");
    assert_eq!(dev.eth_device(), nd);
    dev.take_baseline();
    r.bump_all();
    t.hw_text(ib, "lifespan", "1\n"); // a setting, not a counter: lowering it changes nothing
    r.write();
    let h = |n: &str| E::S(inc(S::Hw, n));
    let n = |x: &str| E::S(inc(S::NetStat, x));
    check(
        &dev.final_report(),
        &[
            // rxe counts packets but no RDMA bytes: the byte deltas are -1 (see README).
            ("delta_tx_packets", h("sent_pkts")),
            ("delta_rx_packets", h("rcvd_pkts")),
            ("port_tx_bytes", n("tx_bytes")),
            ("port_rx_bytes", n("rx_bytes")),
            ("port_tx_packets", n("tx_packets")),
            ("port_rx_packets", n("rx_packets")),
            ("completer_retry_err", h("completer_retry_err")),
            ("retry_exceeded_err", h("retry_exceeded_err")),
            ("rnr_retry_exceeded_err", h("retry_rnr_exceeded_err")),
            ("packet_seq_err", h("rcvd_seq_err")),
            ("out_of_sequence", h("out_of_seq_request")),
            ("duplicate_request", h("duplicate_request")),
            ("rnr_nak_retry_err", h("rcvd_rnr_err")),
            ("rnr_nak_sent", h("send_rnr_err")),
            ("rdma_sends", h("rdma_sends")),
            ("rdma_recvs", h("rdma_recvs")),
            ("ack_deferred", h("ack_deferred")),
            ("tx_roce_errors", h("send_err")),
            ("port_rx_discards", n("rx_dropped")),
            ("link_down_events", h("link_downed")),
            ("rx_fcs_errors", n("rx_crc_errors")),
        ],
    );
}

#[test]
fn device_never_used_is_never_read() {
    let t = Tree::new();
    let mut r = rxe_rig(&t, "rxe1", "eth1");
    r.write();
    let dev = leak(HwDevice::probe(5, "rxe1", &t.settings()));
    r.bump_all();
    r.write();
    check(&dev.final_report(), &[]);
}

#[test]
fn allow_list_keeps_every_key_and_reads_only_the_allowed() {
    let t = Tree::new();
    let mut r = rxe_rig(&t, "rxe2", "eth2");
    r.write();
    let s = HwSettings {
        allow: Some(vec![
            "delta_tx_packets".into(),
            " rdma_sends".into(),
            "no_such_counter".into(),
        ]),
        ..t.settings()
    };
    assert_eq!(
        hw::validate_allow_list(s.allow.as_ref().unwrap()),
        vec!["no_such_counter".to_owned()]
    );
    let dev = leak(HwDevice::probe(0, "rxe2", &s));
    dev.take_baseline();
    r.bump_all();
    r.write();
    check(
        &dev.final_report(),
        &[
            ("delta_tx_packets", E::S(inc(S::Hw, "sent_pkts"))),
            ("rdma_sends", E::S(inc(S::Hw, "rdma_sends"))),
        ],
    );
}

#[test]
fn unsupported_driver_is_all_minus_one() {
    let t = Tree::new();
    t.pci_ibdev("irdma0", "irdma", "0000:50:00.0", "ens9");
    t.hw("irdma0", "ip4InReceives", 1);
    let dev = leak(HwDevice::probe(0, "irdma0", &t.settings()));
    assert_eq!(dev.hw_type(), "unsupported");
    assert_eq!(dev.eth_device(), "ens9");
    dev.take_baseline();
    t.hw("irdma0", "ip4InReceives", 100);
    check(&dev.final_report(), &[]);
}

#[test]
fn concurrent_first_use_takes_one_baseline() {
    let t = Tree::new();
    let mut r = rxe_rig(&t, "rxe3", "eth3");
    r.write();
    let dev = leak(HwDevice::probe(0, "rxe3", &t.settings()));
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| dev.take_baseline());
        }
    });
    r.bump_all();
    r.write();
    // Later first-use calls must not move the baseline.
    dev.take_baseline();
    let rep = dev.final_report();
    let got = rep
        .iter()
        .find(|(k, _)| *k == "delta_tx_packets")
        .unwrap()
        .1
        .clone();
    assert_eq!(got, HwValue::Scalar(inc(S::Hw, "sent_pkts")));
}

#[test]
fn readme_table_is_the_code_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/hw/README.md")).unwrap();
    let table = hw::testing::vocabulary_markdown();
    assert!(
        readme.contains(table.trim()),
        "src/hw/README.md's vocabulary table is stale; regenerate it from hw::testing::vocabulary_markdown():\n{table}"
    );
}
