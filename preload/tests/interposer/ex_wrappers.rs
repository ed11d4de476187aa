//! The extended verbs: QPs built with the ibv_qp_ex builders and CQs polled through
//! ibv_cq_ex, and a cq_ex whose provider refuses the flags the interposer adds (left alone).

use super::common::*;

#[test]
fn qp_ex_builders_and_cq_ex_polling() {
    let Some(b) = bins("qp_ex_builders_and_cq_ex_polling") else {
        return;
    };
    let n = 50;
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["ex", "50"], &[], true);
        let d = dev(only(&r), 0);
        let q = qps(d);
        // Per round: a session of 3 unsignalled writes of 64 B and a signalled send of 100+28 B;
        // an aborted session; B's receive; one completion per start/end on each CQ.
        expect(
            "ex A",
            &q[0],
            &[
                ("num_wqe_sent", 4 * n),
                ("num_write_wqe", 3 * n),
                ("num_send_wqe", n),
                ("num_wqe_rcvd", n),
                ("num_wqe_completed", n),
                ("num_wqe_retired_unsignalled", 3 * n),
            ],
        );
        expect(
            "ex B",
            &q[1],
            &[
                ("num_recv_wqe", n),
                ("num_wqe_rcvd", n),
                ("num_wqe_completed", n),
            ],
        );
        expect(
            "ex device",
            d,
            &[
                ("tx_bytes", n * 320),
                ("rx_bytes", n * 128),
                ("cq_poll_count", polls(&r, 0)),
            ],
        );
        assert_eq!(sizes(d), vec![(64, 3 * n), (128, n)]);
    }
}

#[test]
fn cq_ex_whose_provider_refuses_the_added_flags_is_left_alone() {
    let Some(b) = bins("cq_ex_whose_provider_refuses_the_added_flags_is_left_alone") else {
        return;
    };
    // The provider takes BYTE_LEN only (what the program asks for): the CQ is made with the
    // program's flags, stays the provider's own, and its completions are not counted.
    let r = run(
        &b.direct,
        &b,
        &["ex", "5"],
        &[("FAKEVERBS_WC_FLAGS_ALLOWED", "1")],
        true,
    );
    assert!(
        r.stderr.contains("ibv_cq_ex without qp_num"),
        "{}",
        r.stderr
    );
    let d = dev(only(&r), 0);
    let q = qps(d);
    expect(
        "refused A",
        &q[0],
        &[
            ("num_wqe_sent", 20),
            ("num_write_wqe", 15),
            ("num_send_wqe", 5),
        ],
    );
    expect("refused B", &q[1], &[("num_recv_wqe", 5)]);
    expect("refused device", d, &[("cq_poll_count", 0)]);
}
