//! Live Soft-RoCE check, for a machine (or qemu guest) with a real rdma_rxe device:
//! RCCL_TELEMETRY_LIVE_RXE=<ibdev> names the device and RCCL_TELEMETRY_LIVE_TRAFFIC a command
//! that moves RDMA traffic over it (e.g. "/usr/local/bin/rdma_loopback 1"). The device is probed
//! from the real /sys, the baseline is taken, the command runs, and the deltas must show the
//! traffic. Without the variables the test records a visible skip (not required: `make e2e`
//! runs the same check in its qemu guests).

#[path = "skip.rs"]
mod skip;

use rccl_telemetry::hw::{self, HwDevice, HwSettings, HwValue};

#[test]
fn live_rxe_deltas_follow_traffic() {
    let (Ok(dev), Ok(cmd)) = (
        std::env::var("RCCL_TELEMETRY_LIVE_RXE"),
        std::env::var("RCCL_TELEMETRY_LIVE_TRAFFIC"),
    ) else {
        skip::skip(
            "hw_live_rxe::live_rxe_deltas_follow_traffic",
            "set RCCL_TELEMETRY_LIVE_RXE and RCCL_TELEMETRY_LIVE_TRAFFIC",
            false,
            false,
        );
        return;
    };
    let s = HwSettings {
        debug: true,
        ..HwSettings::default()
    };
    let d: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(0, &dev, &s)));
    assert_eq!(d.hw_type(), "rxe");
    assert!(!d.eth_device().is_empty(), "rxe is bound to a netdev");
    d.take_baseline();
    let mut parts = cmd.split_whitespace();
    let status = std::process::Command::new(parts.next().unwrap())
        .args(parts)
        .status()
        .expect("traffic command");
    assert!(status.success(), "traffic command failed: {status}");
    let r = d.final_report();
    for (k, v) in &r {
        eprintln!("live rxe {dev}: {k} = {v:?}");
    }
    let get = |k: &str| match r.iter().find(|(n, _)| *n == k).unwrap().1 {
        HwValue::Scalar(x) => x,
        HwValue::PerPrio(_) => unreachable!(),
    };
    assert!(get("delta_tx_packets") > 0);
    assert!(get("delta_rx_packets") > 0);
    assert!(get("rdma_sends") > 0);
    assert!(get("rdma_recvs") > 0);
    assert_eq!(get("delta_tx_bytes"), -1, "rxe counts no RDMA bytes");
    assert!(get("port_tx_bytes") >= 0, "netdev statistics are readable");
    assert_eq!(r.len(), hw::vocabulary().len());
    eprintln!("LIVE_RXE_OK");
}
