//! Slot reservation and handle resolution through the C entry points, in process:
//! no fixed cap on QPs per channel, stable addresses, untracked accounting, SwCapture.

use std::ffi::CString;
use std::ptr;

use rccl_telemetry::capi::*;

#[test]
fn slots_handles_and_untracked_accounting() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
    std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", dir.path());
    assert_eq!(rcclTelemetryInit(), 0);
    assert_eq!(rcclTelemetryOn(), 1);
    let name = CString::new("rxe0").unwrap();
    let transport = CString::new("IB-CAST").unwrap();
    unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(3, name.as_ptr(), transport.as_ptr()),
            3
        );
        // The same name again is idempotent; another name on a taken slot is refused.
        assert_eq!(
            rcclTelemetryRegisterDevice(3, name.as_ptr(), transport.as_ptr()),
            3
        );
        let other = CString::new("rxe1").unwrap();
        assert_eq!(
            rcclTelemetryRegisterDevice(3, other.as_ptr(), transport.as_ptr()),
            -1
        );
    }
    // Only device 3 publishes its stripes to the header's inline device forms.
    assert_eq!(published_devices(), vec![3]);

    // 10,000 QPs on one channel, reserved in uneven steps; no slot moves as the arena grows.
    let mut n = 0;
    let mut first_handles = Vec::new();
    let mut next = 0;
    for step in [1, 7, 100, 892, 9000] {
        let first = unsafe { rcclTelemetrySetupChannel(3, 511, step, &mut n) };
        assert_eq!((first, n), (next, step));
        first_handles.push(rcclTelemetryResolveQp(3, 511, first));
        next += step;
    }
    assert_eq!(next, 10_000);
    let all: Vec<*mut _> = (0..10_000)
        .map(|i| rcclTelemetryResolveQp(3, 511, i))
        .collect();
    assert!(all.iter().all(|p| !p.is_null()));
    let mut sorted: Vec<usize> = all.iter().map(|p| *p as usize).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 10_000, "every QP has its own slot");
    for (i, h) in [0, 1, 8, 108, 1000].iter().zip(&first_handles) {
        assert_eq!(rcclTelemetryResolveQp(3, 511, *i), *h, "slot {i} moved");
    }
    assert!(rcclTelemetryResolveQp(3, 511, 10_000).is_null());
    assert!(!rcclTelemetryResolveChannel(3, 511).is_null());
    assert!(rcclTelemetryResolveChannel(3, 510).is_null());

    // Out-of-range channels: the QPs are untracked on the device.
    unsafe {
        assert_eq!(rcclTelemetrySetupChannel(3, 512, 5, &mut n), -1);
        assert_eq!(n, 0);
        assert_eq!(rcclTelemetrySetupChannel(3, -1, 2, ptr::null_mut()), -1);
    }
    // Every QP counts: one send, one completion each, through the handles.
    for &h in &all {
        unsafe {
            let ts = rcclTelemetryPostTs(h);
            rcclTelemetryQpSendPosted(h, 0);
            rcclTelemetryQpWqeComplete(h, ts);
        }
    }
    rcclTelemetryBytes(3, 1, 1 << 40);
    let mut snap = [RcclTelemetrySwSnapshot {
        device_id: -1,
        tx_bytes: 0,
        rx_bytes: 0,
        num_cq_errors: 0,
        wqe_sent: 0,
        recv_wqe: 0,
        wqe_rcvd: 0,
        wqe_completed: 0,
        wqe_sampled: 0,
        wqe_completion_ns_min: 0,
        wqe_completion_ns_max: 0,
        wqe_completion_histogram: [0; 16],
    }; 2];
    assert_eq!(unsafe { rcclTelemetrySwCapture(snap.as_mut_ptr(), 2) }, 1);
    let s = snap[0];
    assert_eq!(
        (
            s.device_id,
            s.tx_bytes,
            s.wqe_sent,
            s.wqe_rcvd,
            s.wqe_completed,
            s.wqe_sampled
        ),
        (3, 1 << 40, 10_000, 10_000, 10_000, 10_000)
    );
    assert_eq!(s.wqe_completion_histogram.iter().sum::<u64>(), 10_000);
    assert_eq!(snap[1].device_id, -1, "only registered devices are written");

    assert_eq!(rcclTelemetryFlush(), 0);
    assert_eq!(rcclTelemetryFlush(), 0, "later calls are no-ops");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["device_id"], 3);
    assert_eq!(d["num_qp_untracked"], 7);
    assert_eq!(d["num_channels"], 1);
    let c = &d["channels"][0];
    assert_eq!(
        (c["id"].as_u64(), c["num_qp_untracked"].as_u64()),
        (Some(511), Some(0))
    );
    assert_eq!(c["queue_pairs"].as_array().unwrap().len(), 10_000);
    assert_eq!(c["num_wqe_sent"], 10_000);
}

fn published_devices() -> Vec<usize> {
    let hot = &rccl_telemetry::hot::rcclTelemetryHotV3;
    (0..32)
        .filter(|&d| {
            !hot.stripes[d]
                .load(std::sync::atomic::Ordering::Relaxed)
                .is_null()
        })
        .collect()
}
