//! The data path: chains of posts with unsignalled runs and refused WRs (direct and
//! NCCL-style, sampled and not), error completions on a shared CQ, many threads on the same
//! QPs, SRQ receives, and a full send record: every counter checked exactly.

use super::common::*;

fn check_chain(r: &Run, iters: u64, sample: u64) {
    assert_eq!(
        r.said["pristine"], 0,
        "enabled: the context's ops are wrapped"
    );
    let f = only(r);
    assert_eq!(f["transport"], "verbs-preload");
    let d = dev(f, 0);
    let q = qps(d);
    assert_eq!(q.len(), 2);
    // QP A: iters chains of 10 (4 writes, 1 write-imm, 2 sends, 1 read, 2 atomics; only the
    // last signalled), then a chain refused at its 2nd WR (1 write posted), a single WR refused
    // (nothing), 1 signalled write, and an unsignalled write retired by a signalled one.
    expect(
        "chain A",
        &q[0],
        &[
            ("num_wqe_sent", 10 * iters + 4),
            ("num_write_wqe", 4 * iters + 4),
            ("num_write_imm_wqe", iters),
            ("num_send_wqe", 2 * iters),
            ("num_read_wqe", iters),
            ("num_atomic_wqe", 2 * iters),
            ("num_wqe_rcvd", iters + 2),
            ("num_wqe_completed", iters + 2),
            ("num_wqe_retired_unsignalled", 9 * iters + 2),
        ],
    );
    // QP B: 3 receives per chain (write-imm, 2 sends), all completed.
    expect(
        "chain B",
        &q[1],
        &[
            ("num_recv_wqe", 3 * iters),
            ("num_wqe_rcvd", 3 * iters),
            ("num_wqe_completed", 3 * iters),
        ],
    );
    // 1 in `sample` signalled sends is timed: positions 0, N, 2N, ... of iters + 2.
    assert_eq!(hist_sum(&q[0]), (iters + 2).div_ceil(sample));
    // The channel's log-scale histogram holds the same sampled completions.
    let log: u64 = f["devices"][0]["channels"][0]["wqe_completion_log_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[2].as_u64().unwrap())
        .sum();
    assert_eq!(log, hist_sum(&q[0]) + hist_sum(&q[1]));
    assert!(q[0]["wqe_completion_ns_min"].as_i64().unwrap() >= 0);
    assert_eq!(hist_sum(&q[1]), 0, "receives have no latency");
    expect(
        "chain device",
        d,
        &[
            (
                "tx_bytes",
                iters * (100 + 200 + 300 + 400 + 500 + 600 + 700 + 8 + 8 + 1000) + 4 * 64,
            ),
            ("rx_bytes", iters * (500 + 600 + 1000)),
            ("num_cq_errors", 0),
            ("cq_poll_count", polls(r, 0)),
            ("num_qp_untracked", 0),
            ("num_srq_recv_wqe", 0),
            ("num_wc_unknown_qp", 0),
        ],
    );
    assert_eq!(
        sizes(d),
        vec![
            (8, 2 * iters),
            (64, 4),
            (128, iters),
            (256, iters),
            (512, 3 * iters),
            (1024, 3 * iters)
        ]
    );
    // 2 polls per round (one completion on A, three on B), the last two writes' (one each), 2 empty.
    assert_eq!(polls(r, 0), 2 * iters + 4);
}

#[test]
fn chains_unsignalled_runs_and_refused_posts_direct_and_nccl_style() {
    let Some(b) = bins("chains_unsignalled_runs_and_refused_posts_direct_and_nccl_style") else {
        return;
    };
    let direct = run(&b.direct, &b, &["chain", "200"], &[], true);
    check_chain(&direct, 200, 1);
    let nccl = run(&b.nccl, &b, &["chain", "200"], &[], true);
    check_chain(&nccl, 200, 1);
    assert_eq!(
        counters(only(&direct)),
        counters(only(&nccl)),
        "dlopen + dlvsym counts what linking counts"
    );
    let sampled = run(
        &b.nccl,
        &b,
        &["chain", "200"],
        &[("RCCL_TELEMETRY_LATENCY_SAMPLE", "16")],
        true,
    );
    check_chain(&sampled, 200, 16);
    assert_eq!(
        only(&sampled)["devices"][0]["channels"][0]["queue_pairs"][0]["num_wqe_sampled"],
        13
    );
    // At N = 8 the last write is sampled only if the refused single WR gave its sampling
    // position back (position 200 of 0..=201).
    let sampled = run(
        &b.direct,
        &b,
        &["chain", "200"],
        &[("RCCL_TELEMETRY_LATENCY_SAMPLE", "8")],
        true,
    );
    check_chain(&sampled, 200, 8);
    assert_eq!(
        only(&sampled)["devices"][0]["channels"][0]["queue_pairs"][0]["num_wqe_sampled"],
        26
    );
}

#[test]
fn error_completions_on_a_shared_cq_and_unknown_qps() {
    let Some(b) = bins("error_completions_on_a_shared_cq_and_unknown_qps") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["errors"], &[], true);
        let d = dev(only(&r), 0);
        let q = qps(d);
        // 5 good signalled writes; then 4 WRs (3 unsignalled) of which the first fails and the
        // rest flush, with A's 2 receives; then a receive and an unsignalled write, flushed.
        expect(
            "errors A",
            &q[0],
            &[
                ("num_wqe_sent", 10),
                ("num_write_wqe", 10),
                ("num_recv_wqe", 3),
                ("num_wqe_rcvd", 13),
                ("num_wqe_completed", 13),
            ],
        );
        assert_eq!(hist_sum(&q[0]), 5, "only successful completions are timed");
        expect("errors B", &q[1], &[]);
        expect(
            "errors device",
            d,
            &[
                ("num_cq_errors", 8),
                ("num_wc_unknown_qp", 1),
                ("cq_poll_count", polls(&r, 0)),
                ("tx_bytes", 320),
                ("rx_bytes", 0),
            ],
        );
        // By status: the failed write (unsignalled: no clock reading, no age), then flushes.
        let errs = serde_json::json!({"WR_FLUSH_ERR": 7, "REM_ACCESS_ERR": 1});
        assert_eq!(q[0]["cq_errors"], errs);
        assert_eq!(d["cq_errors_by_status"], errs);
        let e = &q[0]["first_cq_error"];
        assert_eq!(
            (&e["status"], &e["opcode"], &e["bytes"], &e["age_ms"]),
            (
                &serde_json::json!("REM_ACCESS_ERR"),
                &serde_json::json!("RDMA_WRITE"),
                &serde_json::json!(32),
                &serde_json::Value::Null
            ),
            "{e}"
        );
        assert!(q[1]["first_cq_error"].is_null());
    }
}

#[test]
fn many_threads_post_and_poll_the_same_qps() {
    let Some(b) = bins("many_threads_post_and_poll_the_same_qps") else {
        return;
    };
    let (iters, threads) = (5000u64, 4u64);
    let r = run(&b.direct, &b, &["threads", "5000", "4"], &[], true);
    let d = dev(only(&r), 0);
    for q in qps(d) {
        expect(
            "threads QP",
            q,
            &[
                ("num_wqe_sent", 4 * threads * iters),
                ("num_write_wqe", 4 * threads * iters),
                ("num_wqe_rcvd", threads * iters),
                ("num_wqe_completed", threads * iters),
                ("num_wqe_retired_unsignalled", 3 * threads * iters),
            ],
        );
    }
    expect(
        "threads device",
        d,
        &[
            ("tx_bytes", 2 * 4 * threads * iters * 16),
            ("cq_poll_count", polls(&r, 0)),
        ],
    );
}

#[test]
fn srq_receives_are_counted_per_device_and_completed_per_qp() {
    let Some(b) = bins("srq_receives_are_counted_per_device_and_completed_per_qp") else {
        return;
    };
    let r = run(&b.nccl, &b, &["srq", "100"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    expect(
        "srq A",
        &q[0],
        &[
            ("num_wqe_sent", 100),
            ("num_send_wqe", 100),
            ("num_wqe_rcvd", 100),
            ("num_wqe_completed", 100),
        ],
    );
    expect(
        "srq B",
        &q[1],
        &[("num_wqe_rcvd", 100), ("num_wqe_completed", 100)],
    );
    expect(
        "srq device",
        d,
        &[
            ("num_srq_recv_wqe", 100),
            ("rx_bytes", 25600),
            ("tx_bytes", 25600),
        ],
    );
}

/// Two QPs sharing an SRQ take its receives interleaved: each QP's receive completions are
/// counted and completed on it whatever their order (never matched by posting order).
#[test]
fn srq_receives_taken_out_of_order_by_two_qps_complete_on_each() {
    let Some(b) = bins("srq_receives_taken_out_of_order_by_two_qps_complete_on_each") else {
        return;
    };
    let r = run(&b.direct, &b, &["srq-shared", "99"], &[], true);
    let d = dev(only(&r), 0);
    let q = qps(d);
    assert_eq!(q.len(), 4);
    expect(
        "srq A1",
        &q[0],
        &[
            ("num_wqe_sent", 66),
            ("num_send_wqe", 66),
            ("num_wqe_rcvd", 66),
            ("num_wqe_completed", 66),
        ],
    );
    expect(
        "srq A2",
        &q[1],
        &[
            ("num_wqe_sent", 33),
            ("num_send_wqe", 33),
            ("num_wqe_rcvd", 33),
            ("num_wqe_completed", 33),
        ],
    );
    expect(
        "srq B1",
        &q[2],
        &[("num_wqe_rcvd", 66), ("num_wqe_completed", 66)],
    );
    expect(
        "srq B2",
        &q[3],
        &[("num_wqe_rcvd", 33), ("num_wqe_completed", 33)],
    );
    expect(
        "srq device",
        d,
        &[
            ("num_srq_recv_wqe", 99),
            ("rx_bytes", 99 * 128),
            ("tx_bytes", 99 * 128),
            ("num_wc_unknown_qp", 0),
        ],
    );
}

#[test]
fn a_full_send_record_is_counted_not_mismatched() {
    let Some(b) = bins("a_full_send_record_is_counted_not_mismatched") else {
        return;
    };
    // The provider reports a send queue of 1 (a record of 64) and takes 101 WRs.
    let r = run(
        &b.direct,
        &b,
        &["full"],
        &[("FAKEVERBS_SEND_WR_CAP", "1")],
        true,
    );
    let q = qps(dev(only(&r), 0));
    expect(
        "full A",
        &q[0],
        &[
            ("num_wqe_sent", 102),
            ("num_write_wqe", 102),
            ("num_wqe_track_full", 37),
            ("num_wqe_retired_unsignalled", 100),
            ("num_wqe_rcvd", 2),
            ("num_wqe_completed", 1),
        ],
    );
}
