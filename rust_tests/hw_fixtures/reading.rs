//! What is read and when, whatever the driver: a device never used is never read, an
//! allow-list keeps every key and reads only the allowed, an unsupported driver reports -1
//! everywhere, and concurrent first uses take one baseline.

use super::hw_tree::Tree;
use super::rig::*;
use super::rxe::rxe_rig;
use rccl_telemetry::hw::{self, HwDevice, HwSettings, HwValue};

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
