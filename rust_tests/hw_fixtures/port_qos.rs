//! The port's active MTU (from its netdev's MTU, by the driver family's rule) and its DCB
//! settings (PFC-enabled priorities, the DSCP-to-priority map), read once at the device's
//! first use; each absent where the system does not expose it.

use super::hw_tree::Tree;
use super::rig::*;
use rccl_telemetry::hw::{self, HwDevice};

#[test]
fn mlx5_port_with_pfc_and_a_dscp_map() {
    let t = Tree::new();
    let (ib, nd) = ("mlx5_4", "fxqos0");
    t.pci_ibdev(ib, "mlx5_core", "0000:18:00.0", nd);
    t.gid_ndev(ib, 1, 0, nd);
    t.netattr(nd, "mtu", 9000);
    hw::testing::set_fake_dcb(nd, Some(hw::testing::dcb_reply_lossless_prio3(nd)));
    let dev = leak(HwDevice::probe(0, ib, &t.settings()));
    // Not read before the device's first use.
    assert_eq!(dev.port_qos(), Default::default());
    dev.take_baseline();
    hw::testing::set_fake_dcb(nd, None);
    let q = dev.port_qos();
    assert_eq!(
        q.active_mtu,
        Some(4096),
        "9000 less 96 bytes of RoCE headers"
    );
    assert_eq!(q.pfc_enabled, Some(vec![3]));
    let map = q.dscp_priority.expect("a DSCP map");
    assert_eq!(map.len(), 64);
    assert_eq!(map.get(&26), Some(&3));
    assert_eq!(map.get(&46), Some(&5));
    // Read once: a later change of the netdev is not seen.
    t.netattr(nd, "mtu", 1500);
    dev.take_baseline();
    assert_eq!(dev.port_qos().active_mtu, Some(4096));
}

#[test]
fn a_netdev_without_dcb_has_no_qos_keys_but_its_mtu() {
    let t = Tree::new();
    // The netdev does not exist on this machine: the kernel answers ENODEV, as it answers
    // EOPNOTSUPP for a netdev without DCB (veth, virtio): absent, never empty.
    let (ib, nd) = ("bnxt_re7", "nosuchnet7");
    t.pci_ibdev(ib, "bnxt_en", "0000:31:00.7", nd);
    t.gid_ndev(ib, 1, 0, nd);
    t.netattr(nd, "mtu", 1500);
    let dev = leak(HwDevice::probe(1, ib, &t.settings()));
    dev.take_baseline();
    let q = dev.port_qos();
    assert_eq!(q.active_mtu, Some(1024));
    assert_eq!(q.pfc_enabled, None);
    assert_eq!(q.dscp_priority, None);
}

#[test]
fn soft_roce_mtu_and_unsupported_device() {
    let t = Tree::new();
    t.rxe_ibdev("rxe5", "nosuchnet5");
    t.netattr("nosuchnet5", "mtu", 4200);
    let dev = leak(HwDevice::probe(2, "rxe5", &t.settings()));
    dev.take_baseline();
    let q = dev.port_qos();
    assert_eq!(q.active_mtu, Some(4096), "rxe: 4200 less 80 bytes");
    assert_eq!((q.pfc_enabled, q.dscp_priority), (None, None));

    // An unsupported driver: no rule for its MTU.
    t.pci_ibdev("irdma3", "irdma", "0000:40:00.0", "nosuchnet6");
    t.netattr("nosuchnet6", "mtu", 9000);
    let dev = leak(HwDevice::probe(3, "irdma3", &t.settings()));
    dev.take_baseline();
    assert_eq!(dev.port_qos().active_mtu, None);
}
