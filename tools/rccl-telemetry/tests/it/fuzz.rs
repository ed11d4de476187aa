//! Fuzzing the parser and every analysis behind it: no input may panic.

use crate::common::*;
use proptest::prelude::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};
use rccl_telemetry_tool::load::{self, Loaded, Run};
use rccl_telemetry_tool::{check, export, outliers, report, summary};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;

/// Two small valid files (with hw_samples and sampled latency) to mutate.
fn seeds() -> &'static Vec<Vec<u8>> {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let a = gen(GenOptions {
            ranks: 1,
            seed: 1,
            hw_type: "ainic".into(),
            latency_sample: 4,
            samples: 2,
            devices_per_rank: 2,
            plants: vec![Plant::CqErrors],
            ..Default::default()
        });
        let b = gen(GenOptions {
            ranks: 1,
            seed: 2,
            devices_per_rank: 1,
            ..Default::default()
        });
        [a, b]
            .iter()
            .map(|g| std::fs::read(&g.files()[0]).expect("read"))
            .collect()
    })
}

/// Runs everything the tool does with a parsed file; must not panic.
fn analyse_all(l: Loaded) {
    let _ = check::invariants(&l.file);
    // A run of the file three times, so the statistical rules have a population.
    let run = Run {
        files: vec![l.clone(), l.clone(), l.clone(), l.clone(), l],
        bad: Vec::new(),
        found: 5,
        ..Default::default()
    };
    let s = summary::summarize(&run, true);
    let _ = summary::render_text(&s);
    let o = outliers::find(&run, &outliers::Options::default());
    let _ = outliers::render_text(&o, 0);
    let _ = export::prometheus(&run);
    let mut sink = Vec::new();
    let _ = export::write_tidy(&run, export::Level::Qp, false, &mut sink);
    let _ = export::write_tidy(&run, export::Level::Qp, true, &mut sink);
    let _ = report::render(
        rccl_telemetry_tool::context::RunContext::new(&run),
        &s,
        &o,
        16,
    );
}

fn try_bytes(bytes: &[u8]) {
    if let Ok(l) = load::parse_bytes(Path::new("fuzz.json"), bytes) {
        analyse_all(l);
    }
}

/// A JSON value that stresses the typed model: extremes, wrong types, odd strings.
fn weird_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(-2)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e300)),
        Just(json!(0.5)),
        Just(json!("")),
        Just(json!("ünïcödé\u{0}")),
        Just(json!([])),
        Just(json!([-1, -1, -1, -1, -1, -1, -1, -1])),
        Just(json!({})),
        Just(json!(true)),
        any::<i64>().prop_map(|v| json!(v)),
        any::<u32>().prop_map(|v| json!(v)),
    ]
}

/// Every path to a value inside `v` (object keys and array indices).
fn paths(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                paths(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{prefix}/{i}");
                out.push(p.clone());
                paths(c, p, out);
            }
        }
        _ => {}
    }
}

/// Cases per property: 256 in the normal suite, more with FUZZ_CASES=N for a longer hunt.
fn fuzz_cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        try_bytes(&bytes);
    }

    #[test]
    fn truncations_and_byte_flips_never_panic(which in 0usize..2, cut in any::<prop::sample::Index>(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8)) {
        let mut b = seeds()[which].clone();
        for (i, x) in flips {
            let n = b.len();
            b[i.index(n)] = x;
        }
        try_bytes(&b);
        let n = b.len();
        try_bytes(&b[..cut.index(n)]);
    }

    #[test]
    fn replaced_values_never_panic(which in 0usize..2, picks in proptest::collection::vec((any::<prop::sample::Index>(), weird_value()), 1..6)) {
        let mut v: Value = serde_json::from_slice(&seeds()[which]).expect("seed is JSON");
        for (pick, new) in picks {
            let mut ps = Vec::new();
            paths(&v, String::new(), &mut ps);
            if ps.is_empty() { break; }
            let p = &ps[pick.index(ps.len())];
            if let Some(slot) = v.pointer_mut(p) { *slot = new; }
        }
        try_bytes(&serde_json::to_vec(&v).expect("serialise"));
    }
}

#[test]
fn deep_nesting_and_huge_numbers_are_reported_not_crashed_on() {
    let deep = "[".repeat(100_000);
    assert!(load::parse_bytes(Path::new("deep.json"), deep.as_bytes()).is_err());
    let huge = br#"{"version": 1, "host_name": "h", "process_name": "p", "process_id": 99999999999999999999999}"#;
    assert!(load::parse_bytes(Path::new("huge.json"), huge).is_err());
}

#[test]
fn the_binary_survives_a_directory_of_mutated_files() {
    // Whole-process check: every command over many broken files exits 0, 1 or 2, never 101.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(99);
    for i in 0..60 {
        let mut b = seeds()[i % 2].clone();
        match i % 3 {
            0 => b.truncate(rng.usize(0..b.len())),
            1 => {
                for _ in 0..rng.usize(1..20) {
                    let n = b.len();
                    b[rng.usize(0..n)] = rng.u8(..);
                }
            }
            _ => {
                let s = String::from_utf8_lossy(&b)
                    .replace("\"num_wqe_sent\": ", "\"num_wqe_sent\": -")
                    .replace("1,", "-1,");
                b = s.into_bytes();
            }
        }
        std::fs::write(
            dir.path().join(format!("rccl_telemetry_m_1000_{i}.json")),
            b,
        )
        .expect("write");
    }
    let d = dir.path().to_str().expect("utf-8");
    let html = dir.path().join("r.html");
    for args in [
        vec!["summary", d],
        vec!["summary", "--json", d],
        vec!["check", d],
        vec!["outliers", d],
        vec!["export", "--format", "ndjson", d],
        vec!["export", "--format", "prometheus", d],
        vec!["report", "-o", html.to_str().expect("utf-8"), d],
    ] {
        let out = run(&args);
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "{args:?}: {:?} {}",
            out.status,
            stderr(&out)
        );
    }
}
