//! What a finalized communicator's record keeps for the analysis, in process, with the stall
//! detector on an injected clock (`stall_detector::manual_clock`): per remote NIC, the sums of
//! its QPs towards it, exactly what those QPs' rows added up to before the finalization; its
//! first error with the QP it came on (channel, slot, QPN, peer); and the rows of its errored
//! and stalled QPs, with their identity.

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;

use rccl_telemetry::capi::*;
use rccl_telemetry::{rank_file, stall_detector};
use serde_json::Value;

const MS: u64 = 1_000_000;
const WALL0: u64 = 1_796_210_131_000_000_000;

fn snapshot() -> Value {
    let rt = rccl_telemetry::runtime().expect("on");
    let f = rank_file::build(&rt.id, WALL0, None, false, "test").expect("memory");
    let mut out = Vec::new();
    rank_file::to_writer(&mut out, &f).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn gid(last: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, last]
}

/// The keys a link is summed from.
const SUMMED: [&str; 4] = [
    "num_wqe_sent",
    "num_wqe_completed",
    "num_wqe_rcvd",
    "num_write_imm_wqe",
];

/// Per remote GID: QPs and the summed keys, from a live file's QP rows.
fn by_peer_from_rows(v: &Value) -> BTreeMap<String, (u64, Vec<u64>, Vec<u64>)> {
    let mut m: BTreeMap<String, (u64, Vec<u64>, Vec<u64>)> = BTreeMap::new();
    for c in v["devices"][0]["channels"].as_array().unwrap() {
        for q in c["queue_pairs"].as_array().unwrap() {
            let g = q["peer"]["gid"].as_str().unwrap().to_owned();
            let e = m.entry(g).or_insert((0, vec![0; SUMMED.len()], Vec::new()));
            e.0 += 1;
            for (i, k) in SUMMED.iter().enumerate() {
                e.1[i] += q[k].as_u64().unwrap();
            }
            let h: Vec<u64> = q["wqe_completion_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            if e.2.is_empty() {
                e.2 = vec![0; h.len()];
            }
            for (a, b) in e.2.iter_mut().zip(h) {
                *a += b;
            }
        }
    }
    m
}

#[test]
fn a_finalized_record_keeps_each_links_sums_and_its_errored_and_stalled_qps() {
    let out = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe {
        std::env::set_var("RCCL_TELEMETRY_ENABLE", "1");
        std::env::set_var("RCCL_TELEMETRY_OUTPUT_DIR", out.path());
        std::env::set_var("RCCL_TELEMETRY_SIGNALS", "0");
        std::env::set_var("RCCL_TELEMETRY_STALL_MS", "1000");
    }
    stall_detector::manual_clock();
    assert_eq!(rcclTelemetryInit(), 0);
    drop(std::panic::take_hook());
    let name = CString::new("mlx5_0").unwrap();
    let tr = CString::new("IB-CAST").unwrap();
    let comm = rcclTelemetryCommInit(0xf1a1, 0, 3);
    assert!(!comm.is_null());
    let local = gid(1);
    // Channel 0: QPs 0, 1 towards NIC A (.2), 2, 3 towards NIC B (.3); channel 1: QP 0
    // towards A, QP 1 towards B. QP k of channel c posts 3 + 2k + c WRITE_WITH_IMMs.
    let peer_of = |ch: i32, qp: i32| {
        if ch == 0 {
            2 + qp as u8 / 2
        } else {
            2 + qp as u8
        }
    };
    let mut qps = Vec::new();
    // SAFETY: valid strings; handles from the library; GIDs of 16 bytes.
    unsafe {
        assert_eq!(
            rcclTelemetryRegisterDevice(0, name.as_ptr(), tr.as_ptr()),
            0
        );
        for (ch, n) in [(0, 4), (1, 2)] {
            let mut got = 0;
            assert_eq!(rcclTelemetryCommSetupChannel(comm, 0, ch, n, &mut got), 0);
            assert_eq!(got, n);
            for qp in 0..n {
                let q = rcclTelemetryCommResolveQp(comm, 0, ch, qp);
                let remote = gid(peer_of(ch, qp));
                let qpn = 100 + 10 * ch as u32 + qp as u32;
                rcclTelemetryQpSetPeer(
                    q,
                    qpn,
                    local.as_ptr().cast(),
                    0,
                    qpn + 1000,
                    remote.as_ptr().cast(),
                    0,
                );
                for _ in 0..3 + 2 * qp + ch {
                    let t = rcclTelemetryPostTs(q);
                    rcclTelemetryQpSendPosted(q, 1);
                    rcclTelemetryQpWqeComplete(q, t);
                }
                qps.push((ch, qp, q));
            }
        }
    }
    let q = |ch: i32, qp: i32| qps.iter().find(|x| (x.0, x.1) == (ch, qp)).unwrap().2;
    // Channel 0's QP 3 posts a WRITE_WITH_IMM that never completes: stalled at the third check.
    // SAFETY: handles from the library.
    unsafe { rcclTelemetryQpSendPosted(q(0, 3), 1) };
    stall_detector::tick_at(1_000 * MS, WALL0);
    stall_detector::tick_at(1_500 * MS, WALL0 + 500 * MS);
    stall_detector::tick_at(2_600 * MS, WALL0 + 1_600 * MS);
    // Channel 1's QP 1 fails: RETRY_EXC_ERR, then a flush.
    // SAFETY: handles from the library.
    unsafe {
        rcclTelemetryQpCqError(q(1, 1), 12, 0x81);
        rcclTelemetryQpCqError(q(1, 1), 5, 0);
    }
    let live = snapshot();
    let rows = by_peer_from_rows(&live);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        live["devices"][0]["channels"][0]["queue_pairs"][3]["stalled"],
        true
    );

    // SAFETY: a handle from rcclTelemetryCommInit.
    unsafe { rcclTelemetryCommFinalize(comm) };
    let fin = snapshot();
    let d = &fin["devices"][0];
    assert_eq!(d["channels"].as_array().unwrap().len(), 0, "no QP row left");
    let rec = &d["finalized_comms"][0];
    assert_eq!(rec["num_qps"], 6);

    // Each remote NIC's sums are its QPs' rows summed.
    let peers = rec["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 2);
    for p in peers {
        let g = p["gid"].as_str().unwrap();
        let (n, sums, hist) = &rows[g];
        assert_eq!(p["num_qps"].as_u64().unwrap(), *n, "{g}");
        for (i, k) in SUMMED.iter().enumerate() {
            assert_eq!(p[k].as_u64().unwrap(), sums[i], "{g} {k}");
        }
        let h: Vec<u64> = p["wqe_completion_histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(&h, hist, "{g}");
        // NIC B (.3) has the stalled QP: its stall ended at the finalization.
        let b = g.ends_with("0003");
        assert_eq!(p["num_qps_stalled"], u64::from(b), "{g}");
        assert_eq!(p["num_wqe_outstanding"], u64::from(b), "{g}");
    }
    // A's: channel 0's QPs 0 (3 WRs) and 1 (5), channel 1's QP 0 (4).
    let a = peers.iter().find(|p| p["gid_ip"] == "10.0.0.2").unwrap();
    assert_eq!(a["num_wqe_sent"], 3 + 5 + 4);

    // The first error names its QP.
    let e = &rec["first_cq_error"];
    assert_eq!(e["status"], "RETRY_EXC_ERR");
    assert_eq!(
        (&e["channel"], &e["qp"], &e["qp_num"]),
        (&1.into(), &1.into(), &111.into())
    );
    assert_eq!(e["peer"]["qp_num"], 1111);
    assert_eq!(e["peer"]["gid_ip"], "10.0.0.3");

    // The errored and the stalled QP keep their rows, identity included.
    let kept = rec["queue_pairs"].as_array().unwrap();
    assert_eq!(rec["num_qps_unlisted"], 0);
    let at: Vec<(u64, u64, u64)> = kept
        .iter()
        .map(|q| {
            (
                q["channel"].as_u64().unwrap(),
                q["id"].as_u64().unwrap(),
                q["qp_num"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(at, [(0, 3, 103), (1, 1, 111)]);
    let stalled = &kept[0];
    assert_eq!(stalled["stalled"], true);
    assert_eq!(stalled["peer"]["qp_num"], 1103);
    assert_eq!(stalled["stalled_since"], rank_file::rfc3339(WALL0));
    let errored = &kept[1];
    assert_eq!(errored["cq_errors"]["RETRY_EXC_ERR"], 1);
    assert_eq!(errored["cq_errors"]["WR_FLUSH_ERR"], 1);
    assert_eq!(errored["first_cq_error"]["status"], "RETRY_EXC_ERR");
    assert_eq!(errored["num_wqe_sent"], 3 + 2 + 1);

    // The file as written: valid against the schema, the same record.
    assert_eq!(rcclTelemetryFlush(), 0);
    let files = common::telemetry_files(out.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let written = common::load_valid(&files[0]);
    assert_eq!(
        written["devices"][0]["finalized_comms"],
        d["finalized_comms"]
    );
}
