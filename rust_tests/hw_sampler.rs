//! RCCL_TELEMETRY_SAMPLE_MS through the public API, on a Soft-RoCE fixture tree. One test
//! per binary: the sampler is process-global.

#[path = "fixtures/hw_tree.rs"]
mod hw_tree;

use hw_tree::{names, Tree};
use rccl_telemetry::hw::{HwDevice, HwSettings};
use rccl_telemetry::sampler;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn sampler_rows_are_deltas_bounded_and_stop_joins() {
    assert!(sampler::stop().is_none(), "never started");
    assert!(sampler::snapshot().is_none(), "never started");
    let t = Tree::new();
    for (ib, nd) in [("rxe0", "eth0"), ("rxe1", "eth1")] {
        t.rxe_ibdev(ib, nd);
        t.hw_text(ib, "lifespan", "12\n");
        for n in names("rxe_ib_hw_counters") {
            t.hw(ib, &n, 100);
        }
    }
    let s = HwSettings {
        sample_ms: 2,
        ..t.settings()
    };
    let before = now_ns();
    let capacity = 4;
    sampler::start_with_capacity(&s, capacity);
    sampler::start(&s); // a second start while running is ignored

    let used: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(7, "rxe0", &s)));
    let _unused: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(8, "rxe1", &s)));
    used.take_baseline();
    // Traffic with retries after the baseline.
    t.hw("rxe0", "duplicate_request", 130);
    t.hw("rxe0", "completer_retry_err", 109);
    t.hw("rxe0", "rcvd_seq_err", 101);
    // ...under traffic: the packet counts rise with it.
    t.hw("rxe0", "sent_pkts", 150);
    // A counter that goes backwards is -1 in the rows, never negative.
    t.hw("rxe0", "out_of_seq_request", 5);
    // rxe1 is never used: it must never show up.
    t.hw("rxe1", "duplicate_request", 999);

    // Liveness, not timing: wait until every kept row started after the changes above and
    // the buffer overflowed (a pass in flight while we wrote may hold mixed values; the one
    // after it cannot), with a generous cap so a loaded machine cannot make this flaky.
    let n0 = sampler::rows_so_far().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sampler::rows_so_far().unwrap() < n0 + 1 + capacity as u64 {
        assert!(
            Instant::now() < deadline,
            "the sampler produced no rows in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // A snapshot (for snapshot files) copies the rows and leaves the sampler running.
    let snap = sampler::snapshot().expect("running");
    assert_eq!(snap.samples.len(), capacity);
    let seen = sampler::rows_so_far().expect("still running after a snapshot");
    while sampler::rows_so_far().unwrap() == seen {
        assert!(
            Instant::now() < deadline,
            "the sampler stopped after a snapshot"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = sampler::stop().expect("sampler ran");
    let after = now_ns();
    assert!(sampler::stop().is_none(), "stopped once");
    assert!(sampler::snapshot().is_none(), "no snapshot after the stop");

    assert_eq!(
        out.samples.len(),
        capacity,
        "a full buffer keeps exactly its capacity"
    );
    assert!(out.dropped >= 1, "overflow is counted: {}", out.dropped);
    let mut last = 0;
    for row in &out.samples {
        assert_eq!(row.device_id, 7, "only used devices are sampled");
        assert!(row.timestamp_ns >= last, "timestamps never go backwards");
        assert!(
            row.timestamp_ns >= before && row.timestamp_ns <= after,
            "unix ns wall clock"
        );
        last = row.timestamp_ns;
        let keys: Vec<&str> = row.counters.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "delta_tx_packets",
                "delta_rx_packets",
                "completer_retry_err",
                "packet_seq_err",
                "out_of_sequence",
                "duplicate_request",
                "rnr_nak_retry_err"
            ]
        );
        let get = |k: &str| row.counters.iter().find(|(n, _)| *n == k).unwrap().1;
        // The rows are the newest ones, all taken after the changes above.
        assert_eq!(get("duplicate_request"), 30);
        assert_eq!(get("completer_retry_err"), 9);
        assert_eq!(get("packet_seq_err"), 1);
        assert_eq!(get("out_of_sequence"), -1);
        assert_eq!(get("rnr_nak_retry_err"), 0);
        assert_eq!((get("delta_tx_packets"), get("delta_rx_packets")), (50, 0));
    }
}
