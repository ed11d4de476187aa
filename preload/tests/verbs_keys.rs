//! The engine side of the interposer, in its own process: the verbs keys appear in the file,
//! after the slot's own keys, with the counts the C side stored; the per-device QP cap counts
//! what it drops in num_qp_untracked.
use std::sync::atomic::Ordering::Relaxed;

use rccl_telemetry_preload_engine::*;

#[test]
fn verbs_keys_and_qp_cap() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
    std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", dir.path());
    std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
    assert_eq!(rtp_init(), 1);
    let dev = unsafe { rtp_register_device(0, c"fake0".as_ptr()) };
    assert_eq!(dev, 0);
    let mut ext = std::ptr::null();
    let slot = unsafe { rtp_qp_slot(dev, &mut ext) };
    assert!(!slot.is_null() && !ext.is_null());
    let e = unsafe { &*ext };
    e.read_wqe.fetch_add(7, Relaxed);
    e.retired_unsignalled.fetch_add(99, Relaxed);
    rtp_srq_recv(dev, 5);
    rtp_wc_unknown(dev, 2);
    for _ in 1..MAX_QPS_PER_DEVICE + 3 {
        unsafe { rtp_qp_slot(dev, std::ptr::null_mut()) };
    }
    assert_eq!(rccl_telemetry::capi::rcclTelemetryFlush(), 0);
    let f = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(f).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["transport"], "verbs-preload");
    let d = &v["devices"][0];
    assert_eq!(d["num_srq_recv_wqe"], 5);
    assert_eq!(d["num_wc_unknown_qp"], 2);
    assert_eq!(d["num_qp_untracked"], 3);
    assert!(d["num_channels"].is_null());
    let q = &d["channels"][0]["queue_pairs"][0];
    assert_eq!(q["num_read_wqe"], 7);
    assert_eq!(q["num_wqe_retired_unsignalled"], 99);
    // In file order (serde_json's Value sorts keys, so read the text).
    let hist = text.find("\"wqe_completion_histogram\"").unwrap();
    let send = text.find("\"num_send_wqe\"").unwrap();
    assert!(send > hist, "verbs keys come after the slot's own");
    assert_eq!(d["channels"][0]["num_read_wqe"], 7);
}
