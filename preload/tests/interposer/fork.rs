//! fork(): a child is not counted (with and without ibv_fork_init), and a fork while another
//! thread holds the interposer's lock leaves a child that can still destroy and close.

use super::common::*;

#[test]
fn fork_child_is_not_counted_with_and_without_fork_init() {
    let Some(b) = bins("fork_child_is_not_counted_with_and_without_fork_init") else {
        return;
    };
    for mode in ["0", "1"] {
        let r = run(&b.direct, &b, &["fork", mode], &[], true);
        // The parent's file only: 2 chain rounds; the child's round on the parent's QP and
        // its own device are in no file.
        let f = only(&r);
        assert_eq!(f["process_id"], r.said["pid"]);
        assert_eq!(
            f["devices"].as_array().unwrap().len(),
            1,
            "fake1 was opened by the child only"
        );
        let q = qps(dev(f, 0));
        expect(
            "fork A",
            &q[0],
            &[
                ("num_wqe_sent", 20),
                ("num_write_wqe", 8),
                ("num_write_imm_wqe", 2),
                ("num_send_wqe", 4),
                ("num_read_wqe", 2),
                ("num_atomic_wqe", 4),
                ("num_wqe_rcvd", 2),
                ("num_wqe_completed", 2),
                ("num_wqe_retired_unsignalled", 18),
            ],
        );
        expect(
            "fork B",
            &q[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
    }
}

/// A fork while another thread holds the interposer's global lock (creating an ibv_qp_ex QP,
/// stopped on cue inside the provider): the child destroys and closes everything without
/// hanging (verbs_app fails on a hang); the parent's counts go on unaffected.
#[test]
fn fork_while_another_thread_holds_the_lock_leaves_a_child_that_can_close() {
    let Some(b) = bins("fork_while_another_thread_holds_the_lock_leaves_a_child_that_can_close")
    else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["fork-locked"], &[], true);
        let f = only(&r);
        assert_eq!(f["process_id"], r.said["pid"]);
        let q = qps(dev(f, 0));
        assert_eq!(q.len(), 3, "A, B and the QP created across the fork");
        expect(
            "fork-locked A",
            &q[0],
            &[
                ("num_wqe_sent", 20),
                ("num_write_wqe", 8),
                ("num_write_imm_wqe", 2),
                ("num_send_wqe", 4),
                ("num_read_wqe", 2),
                ("num_atomic_wqe", 4),
                ("num_wqe_rcvd", 2),
                ("num_wqe_completed", 2),
                ("num_wqe_retired_unsignalled", 18),
            ],
        );
        expect(
            "fork-locked B",
            &q[1],
            &[
                ("num_recv_wqe", 6),
                ("num_wqe_rcvd", 6),
                ("num_wqe_completed", 6),
            ],
        );
        expect("fork-locked C", &q[2], &[]);
    }
}
