//! The engine's peer entries (rtp_qp_set_type / rtp_qp_set_local / rtp_qp_set_peer), in their
//! own process: what the C side passes (raw GIDs or NULL, -1 for an unknown port or GID index,
//! a type name) is what the file says; NULL slots and unknown names are harmless.
use rccl_telemetry_preload_engine::*;

#[test]
fn peer_entries_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
    std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", dir.path());
    std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
    assert_eq!(rtp_init(), 1);
    let dev = unsafe { rtp_register_device(0, c"fake0".as_ptr()) };
    assert_eq!(dev, 0);
    let slots: Vec<_> = (0..4)
        .map(|_| unsafe { rtp_qp_slot(dev, std::ptr::null_mut()) })
        .collect();
    assert!(slots.iter().all(|s| !s.is_null()));
    let local: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x01,
    ];
    let remote: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
    let zero = [0u8; 16];
    unsafe {
        // NULL slots and NULL names: no-ops.
        rtp_qp_set_type(std::ptr::null(), c"rc".as_ptr());
        rtp_qp_set_type(slots[0], std::ptr::null());
        rtp_qp_set_local(std::ptr::null(), 1, 1);
        rtp_qp_set_peer(
            std::ptr::null(),
            1,
            local.as_ptr(),
            0,
            1,
            0,
            2,
            remote.as_ptr(),
            0,
        );
        // QP 0: RoCE, told twice (the second replaces the first).
        rtp_qp_set_type(slots[0], c"rc".as_ptr());
        rtp_qp_set_local(slots[0], 0x100, -1);
        rtp_qp_set_peer(
            slots[0],
            0x100,
            local.as_ptr(),
            0,
            1,
            0,
            0x999,
            local.as_ptr(),
            0,
        );
        rtp_qp_set_peer(
            slots[0],
            0x100,
            local.as_ptr(),
            0,
            1,
            0,
            0x2001,
            remote.as_ptr(),
            0,
        );
        // QP 1: a type this build does not know.
        rtp_qp_set_type(slots[1], c"some_future_type".as_ptr());
        rtp_qp_set_local(slots[1], 0x101, 1);
        // QP 2: LID only, port and GID index unknown, an all-zero remote GID (= none).
        rtp_qp_set_type(slots[2], c"uc".as_ptr());
        rtp_qp_set_peer(
            slots[2],
            0x102,
            std::ptr::null(),
            7,
            -1,
            -1,
            0x3001,
            zero.as_ptr(),
            0x11,
        );
        // QP 3: UD, no peer.
        rtp_qp_set_type(slots[3], c"ud".as_ptr());
        rtp_qp_set_local(slots[3], 0x103, 1);
    }
    assert_eq!(rccl_telemetry::capi::rcclTelemetryFlush(), 0);
    let f = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
    let d = &v["devices"][0];
    let q = d["channels"][0]["queue_pairs"].as_array().unwrap();
    assert_eq!(q[0]["qp_type"], "rc");
    assert_eq!(q[0]["qp_num"], 0x100);
    assert_eq!(
        q[0]["peer"],
        serde_json::json!({"qp_num": 0x2001, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0002", "gid_ip": "10.0.0.2", "lid": null})
    );
    assert_eq!(d["port"], 1);
    assert_eq!(d["gid_index"], 0);
    assert_eq!(d["gid"], "fe80:0000:0000:0000:5054:00ff:fe12:3401");
    assert_eq!(q[1]["qp_type"], "other");
    assert_eq!(q[1]["qp_num"], 0x101);
    assert!(q[1]["peer"].is_null());
    assert_eq!(q[2]["qp_type"], "uc");
    assert_eq!(q[2]["qp_num"], 0x102);
    assert_eq!(
        q[2]["peer"],
        serde_json::json!({"qp_num": 0x3001, "gid": null, "gid_ip": null, "lid": 0x11})
    );
    assert_eq!(q[3]["qp_type"], "ud");
    assert!(q[3]["peer"].is_null());
}
