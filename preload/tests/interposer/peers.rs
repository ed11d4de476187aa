//! Peers: what a program passes to ibv_modify_qp (direct and NCCL-style) is what the file
//! says per QP and per device; with telemetry off modify_qp is a pure call-through; past the
//! hook cap each remote NIC keeps its own histogram.

use serde_json::Value;

use super::common::*;

/// The identity and peer keys of a file's QPs, per device (what both builds must agree on).
fn peer_keys(f: &Value) -> Value {
    let mut out = vec![];
    for d in f["devices"].as_array().unwrap() {
        let mut q = vec![];
        for qp in qps(d) {
            q.push(serde_json::json!({
                "qp_num": qp["qp_num"], "qp_type": qp["qp_type"], "peer": qp["peer"], "local_gid": qp.get("local_gid"),
            }));
        }
        out.push(serde_json::json!({
            "device_id": d["device_id"], "port": d["port"], "gid_index": d["gid_index"], "gid": d["gid"],
            "gid_ip": d["gid_ip"], "lid": d["lid"], "qps": q,
        }));
    }
    Value::Array(out)
}

fn peer(qp_num: u64, gid: Option<&str>, gid_ip: Option<&str>, lid: Option<u64>) -> Value {
    serde_json::json!({"qp_num": qp_num, "gid": gid, "gid_ip": gid_ip, "lid": lid})
}

/// What sc_peers' modify_qp calls set, per QP (fake0's A to F, fake1's G).
fn check_attrs(q: &[Value], q1: &[Value]) {
    // The settings each successful modify_qp's mask carried: RTR's path (the GRH's only with
    // one) and RNR timer, RTS's retries; none for D (UD, no address vector) and E (failed).
    let rtr = serde_json::json!({"traffic_class": 0, "sl": 0, "path_mtu": 1024, "min_rnr_timer": 12,
        "sgid_index": 0, "port": 1, "hop_limit": 64, "max_dest_rd_atomic": 1});
    let rts =
        serde_json::json!({"timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 1});
    let with = |base: &Value, more: &[(&str, Value)]| {
        let mut v = base.clone();
        for (k, x) in more {
            v[*k] = x.clone();
        }
        v
    };
    let rc_rts: Vec<(&str, Value)> = rts
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    assert_eq!(q[0]["attrs"], with(&rtr, &rc_rts), "A");
    let b_attrs = serde_json::json!({"traffic_class": 0, "sl": 0, "path_mtu": 1024, "min_rnr_timer": 12,
        "sgid_index": 1, "hop_limit": 64, "max_dest_rd_atomic": 1});
    assert_eq!(q[1]["attrs"], b_attrs, "B: no port in its AV, no RTS");
    let mut c_more = rc_rts.clone();
    c_more.extend([
        ("traffic_class", Value::from(106)),
        ("sgid_index", Value::from(3)),
    ]);
    assert_eq!(q[2]["attrs"], with(&rtr, &c_more), "C");
    assert!(
        q[3].get("attrs").is_none() && q[4].get("attrs").is_none(),
        "D, E: {} {}",
        q[3],
        q[4]
    );
    assert_eq!(
        q[5]["attrs"],
        serde_json::json!({"traffic_class": 0, "sl": 0, "path_mtu": 1024, "sgid_index": 0, "port": 1, "hop_limit": 64}),
        "F: UC has no RNR or atomics"
    );
    assert_eq!(
        q1[0]["attrs"],
        serde_json::json!({"sl": 0, "path_mtu": 1024, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7,
            "min_rnr_timer": 12, "port": 1, "max_rd_atomic": 1, "max_dest_rd_atomic": 1}),
        "G: no GRH"
    );
}

/// verbs_app's peers scenario (see sc_peers there): what the program passed to ibv_modify_qp
/// is what the file says, per QP and per device.
fn check_peers(r: &Run) {
    let f = only(r);
    assert_eq!(f["version"], 5);
    let d0 = dev(f, 0);
    let q = qps(d0);
    assert_eq!(q.len(), 6);
    let said: Vec<u64> = r.said["qpn0"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    for (i, qp) in q.iter().enumerate() {
        assert_eq!(qp["qp_num"], said[i], "QP {i}: its own number");
    }
    let ll = |last: u8| format!("fe80:0000:0000:0000:5054:00ff:fe12:34{last:02x}");
    let ll_ip = |last: u8| format!("fe80::5054:ff:fe12:34{last:02x}");
    // The device: port 1, GID index 0 (the first QP told, A's).
    assert_eq!(d0["port"], 1);
    assert_eq!(d0["gid_index"], 0);
    assert_eq!(d0["gid"], ll(1));
    assert_eq!(d0["gid_ip"], ll_ip(1));
    assert!(d0["lid"].is_null(), "RoCE: no LID");
    // A: re-connected; the second RTR's peer replaces the first's. Its local GID is the device's.
    assert_eq!(q[0]["qp_type"], "rc");
    assert_eq!(
        q[0]["peer"],
        peer(0x2005, Some(&ll(5)), Some(&ll_ip(5)), None)
    );
    assert!(
        q[0].get("local_gid").is_none(),
        "same GID as the device: {}",
        q[0]
    );
    // B: IPv4-mapped GIDs on both ends, the AV naming no port (INIT's is used); no RTS.
    assert_eq!(q[1]["qp_type"], "rc");
    assert_eq!(
        q[1]["peer"],
        peer(
            0x2002,
            Some("0000:0000:0000:0000:0000:ffff:c0a8:0a02"),
            Some("192.168.10.2"),
            None
        )
    );
    assert_eq!(q[1]["local_gid"], "0000:0000:0000:0000:0000:ffff:c0a8:0a01");
    // C: created with ibv_create_qp_ex, IPv6 GIDs.
    assert_eq!(q[2]["qp_type"], "rc");
    assert_eq!(
        q[2]["peer"],
        peer(
            0x2003,
            Some("fd00:0000:0000:0001:0000:0000:0000:0002"),
            Some("fd00:0:0:1::2"),
            None
        )
    );
    assert_eq!(q[2]["local_gid"], "fd00:0000:0000:0001:0000:0000:0000:0001");
    // D: UD has no single peer.
    assert_eq!(q[3]["qp_type"], "ud");
    assert!(q[3]["peer"].is_null(), "{}", q[3]);
    // E: every RTR failed (the provider's ETIMEDOUT and EINVAL reached the program unchanged:
    // verbs_app checks): nothing recorded.
    assert_eq!(q[4]["qp_type"], "rc");
    assert!(q[4]["peer"].is_null(), "{}", q[4]);
    // F: UC.
    assert_eq!(q[5]["qp_type"], "uc");
    assert_eq!(
        q[5]["peer"],
        peer(0x2004, Some(&ll(4)), Some(&ll_ip(4)), None)
    );
    // fake1: InfiniBand without a GRH: LIDs only.
    let d1 = dev(f, 1);
    let q1 = qps(d1);
    assert_eq!(q1.len(), 1);
    assert_eq!(q1[0]["qp_num"], r.said["qpn1"][0]);
    assert_eq!(q1[0]["qp_type"], "rc");
    assert_eq!(q1[0]["peer"], peer(0x3001, None, None, Some(0x11)));
    assert_eq!(d1["port"], 1);
    assert_eq!(d1["lid"], 7);
    assert!(
        d1["gid"].is_null() && d1["gid_ip"].is_null() && d1["gid_index"].is_null(),
        "{d1}"
    );
    check_attrs(q, q1);
    // The data path still counts as before: A's 5 signalled writes.
    expect(
        "peers A",
        &q[0],
        &[
            ("num_wqe_sent", 5),
            ("num_write_wqe", 5),
            ("num_wqe_rcvd", 5),
            ("num_wqe_completed", 5),
        ],
    );
    // Per device, one entry per remote NIC its QPs are connected to now (A's first peer may
    // stay listed with no QP), with the completions timed towards it: A's 5, to its second.
    let told = |d: &Value| -> Vec<(Value, Value, u64, u64)> {
        d["peers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["num_qps"].as_u64().unwrap() > 0)
            .map(|p| {
                let n = p["wqe_completion_log_histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b[2].as_u64().unwrap())
                    .sum();
                (
                    p["gid"].clone(),
                    p["lid"].clone(),
                    p["num_qps"].as_u64().unwrap(),
                    n,
                )
            })
            .collect()
    };
    let mut p0 = told(d0);
    p0.sort_by_key(|p| p.0.to_string());
    let g = |s: &str| Value::String(s.to_string());
    assert_eq!(
        p0,
        vec![
            (
                g("0000:0000:0000:0000:0000:ffff:c0a8:0a02"),
                Value::Null,
                1,
                0
            ),
            (
                g("fd00:0000:0000:0001:0000:0000:0000:0002"),
                Value::Null,
                1,
                0
            ),
            (g(&ll(4)), Value::Null, 1, 0),
            (g(&ll(5)), Value::Null, 1, 5),
        ]
    );
    assert_eq!(told(d1), vec![(Value::Null, Value::from(0x11), 1, 0)]);
}

#[test]
fn peers_from_modify_qp_direct_and_nccl_style() {
    let Some(b) = bins("peers_from_modify_qp_direct_and_nccl_style") else {
        return;
    };
    let direct = run(&b.direct, &b, &["peers"], &[], true);
    check_peers(&direct);
    assert!(
        direct.said["queries"].as_u64().unwrap() > 0,
        "the interposer read the GID table and the ports"
    );
    let nccl = run(&b.nccl, &b, &["peers"], &[], true);
    check_peers(&nccl);
    assert_eq!(
        peer_keys(only(&direct)),
        peer_keys(only(&nccl)),
        "dlopen + dlvsym records what linking records"
    );
}

#[test]
fn peers_telemetry_off_modify_qp_is_a_pure_call_through() {
    let Some(b) = bins("peers_telemetry_off_modify_qp_is_a_pure_call_through") else {
        return;
    };
    for (app, off_from) in [
        (&b.direct, "librccl_telemetry_preload.so"),
        (&b.nccl, "libibverbs.so.1"),
    ] {
        // verbs_app checks every modify's return code, attr, errno and QP state itself.
        let r = run(app, &b, &["peers"], &[], false);
        assert!(r.files.is_empty());
        assert_eq!(
            r.said["queries"], 0,
            "off: ibv_modify_qp reads nothing of its own"
        );
        // Off, dlvsym hands out libibverbs' own; a linked program's reference is bound to the
        // preload's, which calls straight through.
        assert_eq!(r.said["modify_from"], off_from, "{}", r.said);
        let on = run(app, &b, &["peers"], &[], true);
        assert!(
            on.said["queries"].as_u64().unwrap() > 0,
            "on, it does (so the check above can fail)"
        );
        assert_eq!(
            on.said["modify_from"], "librccl_telemetry_preload.so",
            "{}",
            on.said
        );
        assert_eq!(r.said["qpn0"], on.said["qpn0"]);
    }
}

#[test]
fn peers_wide_each_remote_nic_keeps_its_histogram_past_the_hook_cap() {
    let Some(b) = bins("peers_wide_each_remote_nic_keeps_its_histogram_past_the_hook_cap") else {
        return;
    };
    let n = 12u64;
    assert!(
        n as usize > rccl_telemetry::peers::PEER_HISTS_PER_CHANNEL,
        "the scenario must go past the hooks' cap"
    );
    let r = run(&b.direct, &b, &["peers-wide", &n.to_string()], &[], true);
    let d0 = dev(only(&r), 0);
    // One entry per remote NIC, each with its own QP and exactly its QP's completions (QP i
    // completes i + 1 signalled writes, every one timed at the default N = 1).
    let mut got: Vec<(String, u64, u64)> = d0["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let hist: u64 = p["wqe_completion_log_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[2].as_u64().unwrap())
                .sum();
            assert!(
                p.get("num_qps_shared").is_none(),
                "no NIC shares the 'other peers' histogram: {p}"
            );
            (
                p["gid"].as_str().unwrap().to_owned(),
                p["num_qps"].as_u64().unwrap(),
                hist,
            )
        })
        .collect();
    got.sort();
    let want: Vec<(String, u64, u64)> = (0..n)
        .map(|i| {
            (
                format!("fe80:0000:0000:0000:5054:00ff:fe12:34{:02x}", 0x10 + i),
                1,
                i + 1,
            )
        })
        .collect();
    assert_eq!(got, want);
}
