//! The library driven through its C ABI by c_tests/ibcast_sim.c, an IB-CAST-shaped
//! simulation that keeps its own tally: every value in the file is checked against it.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

const SIZE_MAX: [u64; 66] = {
    let mut m = [0u64; 66];
    let mut k = 1;
    while k < 65 {
        m[k] = 1u64 << (k - 1);
        k += 1;
    }
    m[65] = u64::MAX;
    m
};

/// Every software counter of `file` equals the simulation's `tally`.
fn check_against_tally(file: &Value, tally: &Value, sample_n: u64, unknown_channels: bool) {
    let fd = file["devices"].as_array().unwrap();
    let td = tally["devices"].as_array().unwrap();
    assert_eq!(fd.len(), td.len());
    assert_eq!(file["transport"], "IB-CAST");
    assert_eq!(file.get("latency_sample_interval").is_some(), sample_n > 1);
    if sample_n > 1 {
        assert_eq!(u(&file["latency_sample_interval"]), sample_n);
    }
    assert_eq!(file["version"], 3);
    for (f, t) in fd.iter().zip(td) {
        for k in [
            "device_id",
            "roce_device",
            "tx_bytes",
            "rx_bytes",
            "num_cq_errors",
            "cq_poll_count",
            "num_qp_untracked",
        ] {
            assert_eq!(f[k], t[k], "device key {k}");
        }
        check_identity(f, t);
        // Hardware counters belong to the hw module; here each key is a number >= -1.
        for (k, v) in f["hw_counters"].as_object().unwrap() {
            let ok = v.as_i64().is_some_and(|x| x >= -1)
                || v.as_array()
                    .is_some_and(|a| a.iter().all(|x| x.as_i64().unwrap() >= -1));
            assert!(ok, "hw_counters.{k} = {v}");
        }
        let want_sizes: Vec<(u64, u64)> = t["size_buckets"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, n)| u(n) > 0)
            .map(|(b, n)| (SIZE_MAX[b], u(n)))
            .collect();
        let got_sizes: Vec<(u64, u64)> = f["wqe_size_stats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (u(&s["max_wqe_size"]), u(&s["num_wqe"])))
            .collect();
        assert_eq!(got_sizes, want_sizes);

        let fch = f["channels"].as_array().unwrap();
        let tch = t["channels"].as_array().unwrap();
        assert_eq!(fch.len(), tch.len());
        if unknown_channels {
            assert!(f["num_channels"].is_null());
        } else {
            assert_eq!(u(&f["num_channels"]), tch.len() as u64);
        }
        let active = tch
            .iter()
            .filter(|c| u(&c["num_req_completed"]) > 0)
            .count() as u64;
        assert_eq!(u(&f["active_channels"]), active);
        for (fc, tc) in fch.iter().zip(tch) {
            if unknown_channels {
                assert!(fc["id"].is_null());
            } else {
                assert_eq!(fc["id"], tc["id"]);
            }
            assert_eq!(fc["num_req_completed"], tc["num_req_completed"]);
            let fq = fc["queue_pairs"].as_array().unwrap();
            let tq = tc["queue_pairs"].as_array().unwrap();
            assert_eq!(fq.len(), tq.len());
            let mut sums = std::collections::BTreeMap::<&str, u64>::new();
            let (mut data, mut cts, mut hist_sum) = (0, 0, 0);
            for (i, (q, tqp)) in fq.iter().zip(tq).enumerate() {
                assert_eq!(u(&q["id"]), i as u64);
                assert_eq!(q["role"], tqp["role"]);
                for k in [
                    "num_wqe_sent",
                    "num_recv_wqe",
                    "num_wqe_rcvd",
                    "num_wqe_completed",
                    "num_cts_sent_signalled",
                    "num_cts_sent_unsignalled",
                    "num_slot_miss",
                    "num_write_wqe",
                    "num_write_imm_wqe",
                ] {
                    assert_eq!(q[k], tqp[k], "qp {i} key {k}");
                    *sums.entry(k).or_default() += u(&q[k]);
                }
                assert_eq!(
                    u(&q["num_cts_sent"]),
                    u(&q["num_cts_sent_signalled"]) + u(&q["num_cts_sent_unsignalled"])
                );
                let h: u64 = q["wqe_completion_histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(u)
                    .sum();
                assert_eq!(h, u(&tqp["sampled"]), "qp {i}: histogram sum is the sample");
                assert_eq!(q.get("num_wqe_sampled").is_some(), sample_n > 1);
                if sample_n > 1 {
                    assert_eq!(u(&q["num_wqe_sampled"]), h);
                }
                let (mn, mx) = (
                    q["wqe_completion_ns_min"].as_i64().unwrap(),
                    q["wqe_completion_ns_max"].as_i64().unwrap(),
                );
                if h == 0 {
                    assert_eq!((mn, mx), (-1, -1));
                } else {
                    assert!(0 <= mn && mn <= mx, "qp {i}: min {mn} max {mx}");
                }
                // A clean run leaves nothing outstanding and never stalls (hooks: WRITE_WITH_IMM
                // postings against completions; CTS and receives are not counted).
                assert_eq!(
                    (
                        u(&q["num_wqe_outstanding"]),
                        &q["stalled"],
                        u(&q["longest_stall_ms"])
                    ),
                    (0, &Value::Bool(false), 0),
                    "qp {i}"
                );
                assert!(
                    q.get("oldest_outstanding_ms").is_none(),
                    "a hooks file has no oldest_outstanding_ms"
                );
                hist_sum += h;
                data += u64::from(q["role"] == "data");
                cts += u64::from(q["role"] == "cts");
            }
            for (k, s) in &sums {
                assert_eq!(u(&fc[*k]), *s, "channel total {k} is the sum over its QPs");
            }
            assert_eq!(
                u(&fc["num_cts_sent"]),
                sums["num_cts_sent_signalled"] + sums["num_cts_sent_unsignalled"]
            );
            let ch_hist: u64 = fc["wqe_completion_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(u)
                .sum();
            assert_eq!(ch_hist, hist_sum);
            assert_eq!(
                log_total(&fc["wqe_completion_log_histogram"]),
                hist_sum,
                "channel {:?}: the log-scale histogram counts every sampled completion",
                fc["id"]
            );
            assert_eq!((u(&fc["num_data_qp"]), u(&fc["num_cts_qp"])), (data, cts));
            assert_eq!(u(&fc["num_qp_untracked"]), 0);
        }
    }
}

/// Version 3: the identities rcclTelemetryQpSetPeer told (the last call of each QP), the
/// device's local GID, and one peer NIC per device whose histogram holds every sampled
/// completion of the device (every QP of the simulation has a peer).
fn check_identity(f: &Value, t: &Value) {
    let dev = f["device_id"].as_u64().unwrap();
    for k in ["gid", "gid_ip"] {
        assert_eq!(f[k], t[k], "device {dev} key {k}");
    }
    for k in ["port", "gid_index", "lid"] {
        assert!(f[k].is_null(), "device {dev}: the hooks do not tell {k}");
    }
    let mut qps = 0;
    let mut sampled = 0;
    for (fc, tc) in f["channels"]
        .as_array()
        .unwrap()
        .iter()
        .zip(t["channels"].as_array().unwrap())
    {
        for (q, tq) in fc["queue_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(tc["queue_pairs"].as_array().unwrap())
        {
            assert_eq!(q["qp_num"], tq["qp_num"]);
            assert_eq!(
                q["peer"], tq["peer"],
                "the second rcclTelemetryQpSetPeer replaced the first"
            );
            assert!(
                q.get("local_gid").is_none(),
                "same GID as the device: no local_gid"
            );
            assert!(q.get("qp_type").is_none(), "qp_type only in preload files");
            qps += 1;
            sampled += u(&tq["sampled"]);
        }
    }
    let peers = f["peers"].as_array().unwrap();
    assert_eq!(
        peers.len(),
        1,
        "device {dev}: one peer NIC (the wrong peer first told had no completion): {peers:?}"
    );
    let p = &peers[0];
    let tq = &t["channels"][0]["queue_pairs"][0]["peer"];
    assert_eq!(
        (&p["gid"], &p["gid_ip"], &p["lid"]),
        (&tq["gid"], &tq["gid_ip"], &Value::Null)
    );
    assert_eq!(u(&p["num_qps"]), qps);
    assert!(p.get("num_qps_shared").is_none());
    if let Some(h) = p.get("wqe_completion_log_histogram") {
        assert_eq!(
            log_total(h),
            sampled,
            "device {dev}: the peer's histogram holds every sampled completion"
        );
        assert_eq!(log_total(h), log_total(&f["wqe_completion_log_histogram"]));
    }
}

/// The keys of the first object whose keys sit at `depth` in the file's layout (one key a
/// line, two spaces an indent), in the file's order.
fn keys_at(text: &str, depth: usize) -> Vec<String> {
    let pad = " ".repeat(2 * depth);
    let mut keys: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&pad).filter(|r| r.starts_with('"')) else {
            continue;
        };
        let k = rest[1..].split('"').next().unwrap().to_owned();
        if keys.contains(&k) {
            break; // the next object at this depth
        }
        keys.push(k);
    }
    keys
}

#[test]
fn version_3_keys_follow_every_older_key() {
    // With stall detection on (the default) its keys come last; with it off they are absent.
    for (stall_ms, dev_stall, qp_stall) in [
        (
            "1000",
            &["num_wqe_outstanding", "num_qps_stalled"][..],
            &[
                "num_wqe_outstanding",
                "stalled",
                "stalled_since",
                "longest_stall_ms",
                "longest_stall_start",
            ][..],
        ),
        ("0", &[][..], &[][..]),
    ] {
        let d = tempfile::tempdir().unwrap();
        run_sim(
            d.path(),
            &["--requests", "50"],
            &[("RCCL_TELEMETRY_STALL_MS", stall_ms)],
        );
        let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
        let top = keys_at(&text, 1);
        assert_eq!(top.last().map(String::as_str), Some("stall_ms"), "{top:?}");
        let dev = keys_at(&text, 2);
        let at = dev.iter().position(|k| k == "port").unwrap();
        let want: Vec<&str> = ["port", "gid_index", "gid", "gid_ip", "lid", "peers"]
            .iter()
            .chain(dev_stall)
            .copied()
            .collect();
        assert_eq!(dev[at..], want, "{dev:?}");
        assert!(
            dev[..at].iter().any(|k| k == "hw_counters")
                && dev[..at]
                    .iter()
                    .any(|k| k == "wqe_completion_log_histogram")
        );
        let qp = keys_at(&text, 4);
        let want: Vec<&str> = ["qp_num", "peer"].iter().chain(qp_stall).copied().collect();
        assert_eq!(qp[qp.len() - want.len()..], want, "{qp:?}");
        assert_eq!(qp[0], "id");
        let peer = keys_at(&text, 5);
        assert_eq!(peer, ["qp_num", "gid", "gid_ip", "lid"]);
        // The device's peers entries: the keys under the device's "peers" list.
        let at = text.find("\"peers\": [").unwrap();
        assert_eq!(
            keys_at(&text[at..], 3)[..5],
            [
                "gid",
                "gid_ip",
                "lid",
                "num_qps",
                "wqe_completion_log_histogram"
            ]
        );
    }
}

fn run_sim(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::Output, Value) {
    run_sim_with(ibcast_sim(), dir, args, env)
}

/// ibcast_sim built with RCCL_TELEMETRY_NO_INLINE: every hook is a call into the library.
fn ibcast_sim_calls() -> &'static Path {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| c_program("ibcast_sim", &["-DRCCL_TELEMETRY_NO_INLINE"]))
}

fn run_sim_with(
    prog: &Path,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, Value) {
    let tally = dir.join("tally.json");
    let out_dir = dir.to_str().unwrap();
    let mut full_env = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", out_dir),
    ];
    full_env.extend_from_slice(env);
    let mut all_args = vec![tally.to_str().unwrap()];
    all_args.extend_from_slice(args);
    let o = run(prog, &all_args, &full_env);
    assert!(
        o.status.success(),
        "{} failed: {}",
        prog.display(),
        stderr(&o)
    );
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&tally).unwrap()).unwrap();
    (o, t)
}

fn only_file(dir: &Path) -> Value {
    let files = telemetry_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let v = load_valid(&files[0]);
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        name,
        format!(
            "rccl_telemetry_{}_{uid}_{}.json",
            v["host_name"].as_str().unwrap(),
            v["process_id"]
        )
    );
    v
}

#[test]
fn every_counter_matches_the_simulation() {
    // Through the header's inline hooks, and through the exported functions.
    for prog in [ibcast_sim(), ibcast_sim_calls()] {
        let d = tempfile::tempdir().unwrap();
        let (o, t) = run_sim_with(prog, d.path(), &["--bad-calls"], &[]);
        let f = only_file(d.path());
        check_against_tally(&f, &t, 1, false);
        // Bad calls are silent no-ops, except the refused registrations, which say why.
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 3, "{err}");
        assert!(
            err.lines().all(|l| l.starts_with("rccl-telemetry: ")),
            "{err}"
        );
        // At N = 1 the file bears no trace of sampling.
        let text = std::fs::read_to_string(&telemetry_files(d.path())[0]).unwrap();
        assert!(!text.contains("sampled") && !text.contains("latency_sample_interval"));
    }
}

/// c_tests/inline_equiv.c, compiled once per test binary (the tests run in parallel).
fn inline_equiv() -> &'static Path {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| c_program("inline_equiv", &[]))
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

/// The total count of a file's sparse log-scale histogram ([lo, hi, count] triples), after
/// checking its buckets are the library's, in order.
fn log_total(v: &Value) -> u64 {
    let mut last = None;
    v.as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let b = b.as_array().unwrap();
            let lo = u(&b[0]);
            let i = rccl_telemetry::loghist::bucket_index(lo);
            let (blo, bhi) = rccl_telemetry::loghist::bucket_bounds(i);
            assert_eq!(lo, blo, "{b:?}");
            if i + 1 < rccl_telemetry::loghist::LOG_BUCKETS {
                assert_eq!(u(&b[1]), bhi, "{b:?}")
            } else {
                assert!(b[1].is_null(), "{b:?}")
            }
            assert!(last < Some(i), "buckets in increasing order: {v}");
            last = Some(i);
            assert!(u(&b[2]) > 0, "only non-empty buckets: {b:?}");
            u(&b[2])
        })
        .sum()
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

#[test]
fn sampling_moves_only_the_latency_fields() {
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().retain(|k, _| k == "devices");
        for d in v["devices"].as_array_mut().unwrap() {
            d.as_object_mut()
                .unwrap()
                .remove("wqe_completion_log_histogram");
            for p in d["peers"].as_array_mut().unwrap() {
                p.as_object_mut()
                    .unwrap()
                    .remove("wqe_completion_log_histogram");
            }
            for c in d["channels"].as_array_mut().unwrap() {
                let o = c.as_object_mut().unwrap();
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                    "num_wqe_sampled",
                    "wqe_completion_log_histogram",
                ] {
                    o.remove(k);
                }
                for q in o["queue_pairs"].as_array_mut().unwrap() {
                    let o = q.as_object_mut().unwrap();
                    for k in [
                        "wqe_completion_ns_min",
                        "wqe_completion_ns_max",
                        "wqe_completion_histogram",
                        "num_wqe_sampled",
                    ] {
                        o.remove(k);
                    }
                }
            }
        }
        v
    };
    let mut files = Vec::new();
    for n in ["1", "16", "5"] {
        let d = tempfile::tempdir().unwrap();
        let (o, t) = run_sim(
            d.path(),
            &["--requests", "200"],
            &[("RCCL_TELEMETRY_LATENCY_SAMPLE", n)],
        );
        let f = only_file(d.path());
        let effective = if n == "5" { 8 } else { n.parse().unwrap() };
        check_against_tally(&f, &t, effective, false);
        if n == "5" {
            let err = stderr(&o);
            assert!(
                err.contains("RCCL_TELEMETRY_LATENCY_SAMPLE=5") && err.contains(" 8 "),
                "{err}"
            );
        }
        if effective > 1 {
            // 1 in N by posting position: each QP sampled ceil(posted / N) of its WQEs.
            for dev in f["devices"].as_array().unwrap() {
                for c in dev["channels"].as_array().unwrap() {
                    for q in c["queue_pairs"].as_array().unwrap() {
                        let posted = u(&q["num_wqe_sent"]);
                        assert_eq!(u(&q["num_wqe_sampled"]), posted.div_ceil(effective));
                    }
                }
            }
        }
        files.push(strip(f));
    }
    assert_eq!(
        files[0], files[1],
        "N=1 and N=16 differ outside the latency fields"
    );
    assert_eq!(files[0], files[2]);
}

#[test]
fn log_histogram_off_leaves_no_key_and_changes_nothing_else() {
    let mut files = Vec::new();
    for on in ["1", "0"] {
        let d = tempfile::tempdir().unwrap();
        let (_, t) = run_sim(
            d.path(),
            &["--requests", "200"],
            &[("RCCL_TELEMETRY_LOG_HISTOGRAM", on)],
        );
        let mut f = only_file(d.path());
        if on == "1" {
            check_against_tally(&f, &t, 1, false);
        }
        f.as_object_mut()
            .unwrap()
            .retain(|k, _| k == "devices" || k == "version");
        let mut keys = 0;
        for dev in f["devices"].as_array_mut().unwrap() {
            keys += u64::from(
                dev.as_object_mut()
                    .unwrap()
                    .remove("wqe_completion_log_histogram")
                    .is_some(),
            );
            for p in dev["peers"].as_array_mut().unwrap() {
                keys += u64::from(
                    p.as_object_mut()
                        .unwrap()
                        .remove("wqe_completion_log_histogram")
                        .is_some(),
                );
            }
            for c in dev["channels"].as_array_mut().unwrap() {
                let o = c.as_object_mut().unwrap();
                keys += u64::from(o.remove("wqe_completion_log_histogram").is_some());
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                ] {
                    o.remove(k);
                }
                for q in o["queue_pairs"].as_array_mut().unwrap() {
                    assert!(
                        q.get("wqe_completion_log_histogram").is_none(),
                        "no per-QP key: {q}"
                    );
                    for k in [
                        "wqe_completion_ns_min",
                        "wqe_completion_ns_max",
                        "wqe_completion_histogram",
                    ] {
                        q.as_object_mut().unwrap().remove(k);
                    }
                }
            }
        }
        assert_eq!(
            keys > 0,
            on == "1",
            "RCCL_TELEMETRY_LOG_HISTOGRAM={on}: {keys} log-scale keys"
        );
        files.push(f);
    }
    assert_eq!(
        files[0], files[1],
        "the log-scale histogram changes no other key"
    );
}

#[test]
fn threads_with_concurrent_capture_and_flush_are_exact() {
    // Mid-run Flush: a valid file; afterwards SwCapture, On and SetupChannel are inert (checked in C).
    let d = tempfile::tempdir().unwrap();
    run_sim(
        d.path(),
        &["--threads", "--channels", "8", "--requests", "3000"],
        &[],
    );
    only_file(d.path());
    // No explicit Flush: the exit handler writes every count after the threads joined.
    for prog in [ibcast_sim(), ibcast_sim_calls()] {
        let d = tempfile::tempdir().unwrap();
        let (_, t) = run_sim_with(
            prog,
            d.path(),
            &[
                "--threads",
                "--channels",
                "8",
                "--requests",
                "3000",
                "--no-flush",
            ],
            &[],
        );
        check_against_tally(&only_file(d.path()), &t, 1, false);
    }
}

#[test]
fn unknown_channel_ids_are_null() {
    let d = tempfile::tempdir().unwrap();
    let (_, t) = run_sim(d.path(), &["--unknown-channels", "--channels", "1"], &[]);
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, true);
}

#[test]
fn unwritable_directory_is_one_line_and_a_normal_exit() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no/such/dir");
    let (o, _) = run_sim(
        d.path(),
        &[],
        &[("RCCL_TELEMETRY_OUTPUT_DIR", missing.to_str().unwrap())],
    );
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("rccl-telemetry: cannot write"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(missing.to_str().unwrap()) && lines[0].contains("No such file"),
        "{err}"
    );
    assert!(err.contains("rcclTelemetryFlush returned -1"), "{err}");
    assert!(telemetry_files(d.path()).is_empty());
}

#[test]
fn disabled_unless_exactly_one() {
    for (v, lines) in [
        (None, 0),
        (Some("0"), 0),
        (Some("true"), 1),
        (Some("yes"), 1),
    ] {
        let d = tempfile::tempdir().unwrap();
        let tally = d.path().join("tally.json");
        let mut env = vec![("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap())];
        if let Some(v) = v {
            env.push(("RCCL_TELEMETRY_ENABLE", v));
        }
        let o = run(ibcast_sim(), &[tally.to_str().unwrap()], &env);
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            err.lines()
                .filter(|l| l.starts_with("rccl-telemetry: "))
                .count(),
            lines,
            "{v:?}: {err}"
        );
        assert!(telemetry_files(d.path()).is_empty(), "{v:?}");
    }
}

#[test]
fn malformed_environment_gets_defaults_and_one_line_each() {
    let d = tempfile::tempdir().unwrap();
    let (o, t) = run_sim(
        d.path(),
        &[],
        &[
            ("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "lots"),
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "-5"),
            ("RCCL_TELEMETRY_LATENCY_SAMPLE", "0"),
            ("RCCL_TELEMETRY_SAMPLE_MS", "99999999999999999999999"),
        ],
    );
    let err = stderr(&o);
    for var in [
        "HISTOGRAM_BUCKETS",
        "HISTOGRAM_INTERVAL_NS",
        "LATENCY_SAMPLE",
        "SAMPLE_MS",
    ] {
        let n = err
            .lines()
            .filter(|l| l.contains(&format!("RCCL_TELEMETRY_{var}=")))
            .count();
        assert_eq!(n, 1, "{var}: {err}");
    }
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, false);
    assert_eq!(u(&f["histogram_interval_ns"]), 30_000);
    let q = &f["devices"][0]["channels"][0]["queue_pairs"][0];
    assert_eq!(q["wqe_completion_histogram"].as_array().unwrap().len(), 5);
}

#[test]
fn histogram_shape_follows_the_configuration() {
    let d = tempfile::tempdir().unwrap();
    let (_, t) = run_sim(
        d.path(),
        &[],
        &[
            ("RCCL_TELEMETRY_HISTOGRAM_BUCKETS", "16"),
            ("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "1"),
        ],
    );
    let f = only_file(d.path());
    check_against_tally(&f, &t, 1, false);
    assert_eq!(u(&f["histogram_interval_ns"]), 1);
    let h = f["devices"][0]["channels"][0]["wqe_completion_histogram"]
        .as_array()
        .unwrap();
    assert_eq!(h.len(), 16);
    // With 1 ns buckets every real completion latency lands in the last bucket or near it.
    assert!(u(&h[15]) > 0, "{h:?}");
}

#[test]
fn internal_failures_are_contained_and_logged() {
    for (fault, expect_file, needle) in [
        ("init_error", false, "telemetry could not start (forced by RCCL_TELEMETRY_TEST_FAULT=init_error)"),
        ("init_panic", false, "telemetry could not start (internal error: forced by RCCL_TELEMETRY_TEST_FAULT=init_panic"),
        ("setup_panic", true, "internal error in rcclTelemetrySetupChannel contained"),
        ("flush_panic", false, "internal error in rcclTelemetryFlush contained"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let tally = d.path().join("tally.json");
        let o = run(
            ibcast_sim(),
            &[tally.to_str().unwrap()],
            &[("RCCL_TELEMETRY_ENABLE", "1"), ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()), ("RCCL_TELEMETRY_TEST_FAULT", fault)],
        );
        let err = stderr(&o);
        assert!(err.contains(needle), "{fault}: {err}");
        assert!(err.lines().filter(|l| !l.starts_with("ibcast_sim")).all(|l| l.starts_with("rccl-telemetry: ")), "{fault}: {err}");
        // The process always finishes normally: no abort, no signal.
        assert!(o.status.code().is_some(), "{fault}: {:?}", o.status);
        assert_eq!(telemetry_files(d.path()).len(), usize::from(expect_file), "{fault}");
        if expect_file {
            // SetupChannel failed for every QP: no slots, so no counts, but a valid file.
            let f = only_file(d.path());
            assert_eq!(f["devices"].as_array().unwrap().len(), 2);
        }
    }
}
