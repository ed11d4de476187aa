//! Objects coming and going: a destroyed QP's record kept while a poller is inside it, a
//! context reopened at a closed one's address, QP churn under a progress thread, devices
//! closed and reopened keeping their ids, and 100k QPs created and destroyed staying bounded.

use super::common::*;

/// A poller stopped inside the last completion of QP X (the hooks build, on the fake's cue),
/// X destroyed, Y created deeper, the poller resumed: X's record is not Y's while the poller
/// is in it, so X's completion is X's and Y's counts are exact (recycling the record at once
/// left Y's head past its tail: one of Y's completions unmatched, or a retire loop spinning).
#[test]
fn a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it() {
    let Some(b) = bins("a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it") else {
        return;
    };
    let hooked = Bins {
        so: b.hooks.clone(),
        ..b
    };
    for app in [&hooked.direct, &hooked.nccl] {
        let r = run(app, &hooked, &["reuse", "10"], &[], true);
        let f = only(&r);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0]["qp_num"], r.said["x"]);
        assert_eq!(q[1]["qp_num"], r.said["y"]);
        expect(
            "reuse X",
            &q[0],
            &[
                ("num_wqe_sent", 1),
                ("num_write_wqe", 1),
                ("num_wqe_rcvd", 1),
                ("num_wqe_completed", 1),
            ],
        );
        expect(
            "reuse Y",
            &q[1],
            &[
                ("num_wqe_sent", 10),
                ("num_write_wqe", 10),
                ("num_wqe_rcvd", 10),
                ("num_wqe_completed", 10),
            ],
        );
        assert_eq!(d["num_wc_unknown_qp"], 0);
    }
}

/// A context closed by one thread (held inside the provider's close after the context is
/// freed) and a device opened by another that gets the same address: the new context's QPs
/// are device 1's from the start and survive the close (the stale entry took them before).
#[test]
fn a_context_reopened_at_a_closed_ones_address_is_its_own_device() {
    let Some(b) = bins("a_context_reopened_at_a_closed_ones_address_is_its_own_device") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["reopen-race"], &[], true);
        let f = only(&r);
        let one = [
            ("num_wqe_sent", 10),
            ("num_write_wqe", 4),
            ("num_write_imm_wqe", 1),
            ("num_send_wqe", 2),
            ("num_read_wqe", 1),
            ("num_atomic_wqe", 2),
            ("num_wqe_rcvd", 1),
            ("num_wqe_completed", 1),
            ("num_wqe_retired_unsignalled", 9),
        ];
        let q0 = qps(dev(f, 0));
        assert_eq!(q0.len(), 2, "device 0: the closed context's pair only");
        expect("closed A", &q0[0], &one);
        expect(
            "closed B",
            &q0[1],
            &[
                ("num_recv_wqe", 3),
                ("num_wqe_rcvd", 3),
                ("num_wqe_completed", 3),
            ],
        );
        let q1 = qps(dev(f, 1));
        assert_eq!(q1.len(), 2, "device 1: the reopened context's pair");
        let two: Vec<(&str, u64)> = one.iter().map(|(k, v)| (*k, 2 * v)).collect();
        expect("reopened A", &q1[0], &two);
        expect(
            "reopened B",
            &q1[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
    }
}

/// QPs created, posted to and destroyed at once while another thread polls their shared CQ:
/// each completion counts exactly once, on its QP (looked up before the destroy) or as of an
/// unknown QP (after), never on another QP; no hang, no crash. A stress of the limbo under
/// real threads (the recycling race is too narrow to hit here reliably: the deterministic
/// interleaving is a_destroyed_qps_record_is_not_reused_while_a_poller_is_inside_it).
#[test]
fn qp_churn_under_a_progress_thread_counts_each_completion_once() {
    let Some(b) = bins("qp_churn_under_a_progress_thread_counts_each_completion_once") else {
        return;
    };
    let n = 15_000u64;
    let r = run(&b.direct, &b, &["churn", &n.to_string()], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    assert_eq!(q.len() as u64, n);
    let (mut rcvd, mut completed) = (0, 0);
    for (i, qp) in q.iter().enumerate() {
        let got = qp["num_wqe_rcvd"].as_u64().unwrap();
        assert!(got <= 1, "QP {i} got {got} completions (in {qp})");
        assert_eq!(qp["num_wqe_sent"], 1);
        assert_eq!(qp["num_wqe_completed"], qp["num_wqe_rcvd"], "QP {i}: {qp}");
        rcvd += got;
        completed += qp["num_wqe_completed"].as_u64().unwrap();
    }
    assert_eq!(rcvd, completed);
    assert_eq!(rcvd + d["num_wc_unknown_qp"].as_u64().unwrap(), n);
}

#[test]
fn devices_closed_and_reopened_keep_their_list_order_ids() {
    let Some(b) = bins("devices_closed_and_reopened_keep_their_list_order_ids") else {
        return;
    };
    let r = run(&b.nccl, &b, &["reopen"], &[], true);
    let f = only(&r);
    let d0 = dev(f, 0);
    let d1 = dev(f, 1);
    assert_eq!(d0["roce_device"], "fake0");
    assert_eq!(d1["roce_device"], "fake1");
    assert_eq!(qps(d0).len(), 2);
    // fake1 opened twice: a new slot per QP of the second opening.
    let q1 = qps(d1);
    assert_eq!(q1.len(), 4);
    for (i, rounds) in [(0, 1), (2, 2)] {
        expect(
            "reopen A",
            &q1[i],
            &[
                ("num_wqe_sent", 10 * rounds),
                ("num_write_wqe", 4 * rounds),
                ("num_write_imm_wqe", rounds),
                ("num_send_wqe", 2 * rounds),
                ("num_read_wqe", rounds),
                ("num_atomic_wqe", 2 * rounds),
                ("num_wqe_rcvd", rounds),
                ("num_wqe_completed", rounds),
                ("num_wqe_retired_unsignalled", 9 * rounds),
            ],
        );
        expect(
            "reopen B",
            &q1[i + 1],
            &[
                ("num_recv_wqe", 3 * rounds),
                ("num_wqe_rcvd", 3 * rounds),
                ("num_wqe_completed", 3 * rounds),
            ],
        );
    }
    expect(
        "reopen fake1",
        d1,
        &[("cq_poll_count", polls(&r, 1)), ("rx_bytes", 3 * 2100)],
    );
}

#[test]
fn hundred_thousand_qps_created_and_destroyed_stay_bounded() {
    let Some(b) = bins("hundred_thousand_qps_created_and_destroyed_stay_bounded") else {
        return;
    };
    let n = 100_000u64;
    let r = run(&b.direct, &b, &["qploop", "100000"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    // 16384 slots per device (the pair's 2 QPs take the first two), the rest untracked but
    // still counted at device level.
    assert_eq!(q.len(), 16384);
    expect(
        "qploop device",
        d,
        &[
            ("num_qp_untracked", n + 2 - 16384),
            ("tx_bytes", 8 * n),
            ("cq_poll_count", polls(&r, 0)),
        ],
    );
    assert_eq!(sizes(d), vec![(8, n)]);
    for (i, qp) in q.iter().enumerate().skip(2) {
        expect(
            &format!("qploop QP {i}"),
            qp,
            &[
                ("num_wqe_sent", 1),
                ("num_write_wqe", 1),
                ("num_wqe_rcvd", 1),
                ("num_wqe_completed", 1),
            ],
        );
    }
    let (mid, end) = (
        r.said["rss_mid_kib"].as_i64().unwrap(),
        r.said["rss_end_kib"].as_i64().unwrap(),
    );
    assert!(
        mid > 0 && end - mid < 4096,
        "RSS grew from {mid} KiB (QP 20000) to {end} KiB (QP 100000)"
    );
    // The fake spreads QP numbers over the 24-bit space (each QP in another 256-number leaf):
    // the lookup's leaves follow the live QPs (lookup pages kept for every number ever used
    // reached ~140 MiB here). What remains is the 16384 slots (5 MiB) and the engine.
    let start = r.said["rss_start_kib"].as_i64().unwrap();
    assert!(
        end - start < 24 * 1024,
        "RSS grew from {start} KiB (2 QPs) to {end} KiB (QP 100000)"
    );
}

/// A QP created while another thread destroys one with the same `ibv_qp` address and QPN
/// (the fake recycles both; the destroying thread held inside the provider's destroy, the QP
/// gone, on the fake's cue): the new QP is not taken for a nested create of the old one, and
/// the destroy, returning, does not free the new QP's record: X's write counts on X, Y's
/// three on Y, and no completion is of a QP the interposer does not know.
#[test]
fn a_qp_created_at_a_destroyed_ones_address_and_number_is_its_own() {
    let Some(b) = bins("a_qp_created_at_a_destroyed_ones_address_and_number_is_its_own") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["destroy-race"], &[], true);
        let f = only(&r);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 3, "X, its peer, Y: {q:?}");
        let one = |n: u64| {
            [
                ("num_wqe_sent", n),
                ("num_write_wqe", n),
                ("num_wqe_rcvd", n),
                ("num_wqe_completed", n),
            ]
        };
        expect("destroyed X", &q[0], &one(1));
        expect("X's peer", &q[1], &one(0));
        expect("Y, at X's address and number", &q[2], &one(3));
        assert_eq!(q[0]["qp_num"], q[2]["qp_num"]);
        assert_eq!(d["num_wc_unknown_qp"], 0);
    }
}
