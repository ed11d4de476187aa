//! rxe (Soft-RoCE): packets from hw_counters, bytes from the netdev's statistics; its rig
//! also serves the driver-independent tests (reading.rs).

use super::hw_tree::{names, Tree};
use super::rig::*;
use rccl_telemetry::hw::HwDevice;

pub fn rxe_rig<'a>(t: &'a Tree, ib: &str, nd: &str) -> Rig<'a> {
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
