//! The header's inline hooks against the library (c_tests/inline_equiv.c): the same layouts,
//! the same log-scale bucket index, and the same counts as the exported handle functions
//! and the index forms after the same calls.

use super::common::*;
use super::sim::*;

use serde_json::Value;
use std::path::Path;

/// c_tests/inline_equiv.c, compiled once per test binary (the tests run in parallel).
fn inline_equiv() -> &'static Path {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| c_program("inline_equiv"))
}

#[test]
fn inline_layouts_match_the_library() {
    let prog = inline_equiv();
    let o = run(prog, &["layout"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let header: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    let library: Vec<(String, usize)> = rccl_telemetry::inline_abi::layout()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(
        header, library,
        "the header's mirrors and the library's layouts differ"
    );
}

#[test]
fn inline_log_index_matches_the_library() {
    let o = run(inline_equiv(), &["logindex"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let mut n = 0;
    let mut seen = std::collections::BTreeSet::new();
    let mut raw_checked = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 3, "line {l:?}");
        let (v, i): (u64, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let want = rccl_telemetry::loghist::clamp_index(v, rccl_telemetry::loghist::LOG_BUCKETS);
        assert_eq!(
            i, want,
            "value {v}: the header says bucket {i}, the library {want}"
        );
        // The unclamped form the sampled path uses below 2^32 ns (no clamp there).
        if v < 1 << 61 {
            let raw: usize = f[2].parse().unwrap();
            let want = rccl_telemetry::loghist::bucket_index(v);
            assert_eq!(
                raw, want,
                "value {v}: the header's raw index is {raw}, the library's {want}"
            );
            if v <= u64::from(u32::MAX) {
                assert_eq!(raw, i, "value {v} below 2^32 ns needs no clamp");
            }
            raw_checked += 1;
        } else {
            assert_eq!(f[2], "-", "line {l:?}");
        }
        seen.insert(i);
        n += 1;
    }
    assert!(n > 100_000, "{n} values");
    assert!(raw_checked > 100_000, "{raw_checked} raw values");
    assert_eq!(
        seen.len(),
        rccl_telemetry::loghist::LOG_BUCKETS,
        "every stored bucket was reached"
    );
}

/// Device 0 (inline hooks), device 1 (exported handle functions) and device 2 (index forms)
/// after the same calls: every counter is the same on all three; latency min and max differ
/// only by the time between the calls.
/// With `exact_hist` false the histograms are compared by their sums: a token stored at
/// posting is read a few ns apart on the two paths, which can straddle a narrow bucket's edge.
/// Returns (histogram buckets, buckets with counts).
fn check_inline_matches_calls(
    env: &[(&str, &str)],
    seed: &str,
    exact_hist: bool,
) -> (usize, usize) {
    let prog = inline_equiv();
    let d = tempfile::tempdir().unwrap();
    let mut full = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
    ];
    full.extend_from_slice(env);
    let o = run(prog, &["run", seed], &full);
    assert!(o.status.success(), "inline_equiv: {}", stderr(&o));
    let f = only_file(d.path());
    let strip = |v: &Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().unwrap();
        for k in [
            "device_id",
            "roce_device",
            "eth_device",
            "hw_type",
            "hw_counters",
        ] {
            o.remove(k);
        }
        let lat = |o: &mut serde_json::Map<String, Value>| {
            if !exact_hist {
                let sum: u64 = o["wqe_completion_histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(u)
                    .sum();
                o.insert("wqe_completion_histogram".into(), sum.into());
            }
            let min = o.remove("wqe_completion_ns_min").unwrap();
            let max = o.remove("wqe_completion_ns_max").unwrap();
            (min.as_i64().unwrap(), max.as_i64().unwrap())
        };
        // Log-scale buckets are 1/8 wide: two readings of one latency moments apart often
        // land in neighbouring buckets, so compare totals here (the index itself is compared
        // exactly by inline_log_index_matches_the_library), and check that every sampled
        // completion is in both histograms.
        let dev_log = log_total(&o["wqe_completion_log_histogram"]);
        o.insert("wqe_completion_log_histogram".into(), dev_log.into());
        let mut lats = vec![];
        let mut ch_log = 0;
        for c in o["channels"].as_array_mut().unwrap() {
            let co = c.as_object_mut().unwrap();
            let total = log_total(&co["wqe_completion_log_histogram"]);
            let seed: u64 = match &co["wqe_completion_histogram"] {
                Value::Array(a) => a.iter().map(u).sum(),
                n => u(n),
            };
            assert_eq!(
                total, seed,
                "the channel's log-scale histogram counts every sampled completion"
            );
            ch_log += total;
            co.insert("wqe_completion_log_histogram".into(), total.into());
            lats.push(lat(co));
            for q in co["queue_pairs"].as_array_mut().unwrap() {
                lats.push(lat(q.as_object_mut().unwrap()));
            }
        }
        assert_eq!(
            ch_log, dev_log,
            "the device's log-scale histogram is its channels' sum"
        );
        (v, lats)
    };
    let devs = f["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 3);
    let (a, la) = strip(&devs[0]);
    let (b, lb) = strip(&devs[1]);
    let (c, lc) = strip(&devs[2]);
    assert_eq!(
        a, b,
        "inline hooks (device 0) and functions (device 1) counted differently"
    );
    assert_eq!(
        b, c,
        "handle forms (device 1) and index forms (device 2) counted differently"
    );
    let hist = devs[0]["channels"][0]["wqe_completion_histogram"]
        .as_array()
        .unwrap();
    assert!(
        u(&a["tx_bytes"]) > 0 && hist.iter().map(u).sum::<u64>() > 0,
        "{a}"
    );
    for ((amin, amax), (bmin, bmax)) in la.iter().zip(&lb).chain(lb.iter().zip(&lc)) {
        assert_eq!((*amin < 0, *amax < 0), (*bmin < 0, *bmax < 0));
        // The two calls of a pair read the clock moments apart (a generous bound, so a
        // descheduled thread cannot fail it; a wrong tick conversion is off by far more).
        assert!(amin.abs_diff(*bmin) < 1_000_000_000, "min {amin} vs {bmin}");
        assert!(amax.abs_diff(*bmax) < 1_000_000_000, "max {amax} vs {bmax}");
    }
    (hist.len(), hist.iter().filter(|n| u(n) > 0).count())
}

#[test]
fn inline_hooks_count_like_the_functions() {
    // Tokens in ns, an odd interval of about 1 s and 16 buckets: constructed tokens land half
    // an interval inside every bucket, on both paths.
    let mono = [
        ("RCCL_TELEMETRY_CLOCK", "monotonic"),
        ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "1000000007"),
        ("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "16"),
    ];
    // Constructed tokens reach back 17.5 intervals: only on a clock that has run that long.
    let (buckets, filled) = check_inline_matches_calls(&mono, "1", true);
    let uptime_s: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    if uptime_s > 30.0 {
        assert_eq!(
            (buckets, filled),
            (16, 16),
            "constructed tokens fill every bucket"
        );
    }
    // A power-of-two interval (the divider's other shape), 1-in-4 sampling, the default clock.
    check_inline_matches_calls(
        &[
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "1073741824"),
            ("RCCL_TELEMETRY_LATENCY_SAMPLE", "4"),
        ],
        "2",
        true,
    );
    // Defaults (30 us buckets, narrow enough for stored tokens to straddle an edge).
    check_inline_matches_calls(&[], "3", false);
    // An interval of 1 ns (no division at all): every latency lands in the last bucket.
    check_inline_matches_calls(
        &[
            ("RCCL_TELEMETRY_CLOCK", "monotonic"),
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "1"),
        ],
        "4",
        true,
    );
}
