//! Error completions under the interposer, over the fake provider: every `ibv_wc_status`, each
//! on a QP of its own, lands in that QP's `cq_errors` and `first_cq_error` with what the send
//! record knew of the failed WR (opcode, bytes, age), the flushes behind it counted by status,
//! the device's `cq_errors_by_status` and `num_cq_errors`.

use super::common::*;
use rccl_telemetry::cq_errors::STATUS_NAMES;

#[test]
fn every_error_status_names_its_qp_and_its_failed_wr() {
    let Some(b) = bins("every_error_status_names_its_qp_and_its_failed_wr") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["errors-all"], &[], true);
        let f = only(&r);
        let d = dev(f, 0);
        let q = qps(d);
        assert_eq!(q.len(), 46, "a pair per status");
        for st in 1..=23usize {
            let (a, peer) = (&q[2 * (st - 1)], &q[2 * (st - 1) + 1]);
            let name = STATUS_NAMES[st];
            let want = if name == "WR_FLUSH_ERR" {
                serde_json::json!({"WR_FLUSH_ERR": 3})
            } else {
                serde_json::json!({name: 1, "WR_FLUSH_ERR": 2})
            };
            assert_eq!(a["cq_errors"], want, "status {st}: {a}");
            let e = &a["first_cq_error"];
            assert_eq!(e["status"], name, "{e}");
            assert_eq!(e["status_code"], st as u64);
            assert_eq!(e["vendor_err"], 0x100 + st as u64);
            assert_eq!(e["opcode"], "RDMA_WRITE", "{e}");
            assert_eq!(e["bytes"], 100 + st as u64, "{e}");
            assert!(
                e["age_ms"].is_u64(),
                "a signalled WR at N=1 has a clock reading: {e}"
            );
            assert_eq!(a["qp_state"], "ERR");
            assert_eq!(peer["cq_errors"], serde_json::json!({}));
            assert!(peer["first_cq_error"].is_null() && peer["qp_state"].is_null());
        }
        assert_eq!(d["num_cq_errors"], 3 * 23);
        let by = d["cq_errors_by_status"].as_object().unwrap();
        assert_eq!(by.len(), 23, "{by:?}");
        for (st, name) in STATUS_NAMES.iter().enumerate().skip(1) {
            let want = if *name == "WR_FLUSH_ERR" {
                2 * 23 + 1
            } else {
                1
            };
            assert_eq!(by[*name], want, "status {st}");
        }
    }
}
