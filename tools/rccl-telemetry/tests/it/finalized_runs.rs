//! A run whose ranks finalized their communicators before exit (RCCL's ncclCommDestroy,
//! PyTorch's destroy_process_group) against the same run left live: the files keep no QP row,
//! only each device's finalized record (its sums per remote NIC, its errored or stalled QPs),
//! and `links`, `outliers` and `stalls` say the same of both.

use crate::common::{run, stdout};
use serde_json::Value;
use std::path::Path;

/// `generate --peers` of one seed into `dir`, finalized or not.
fn generate(dir: &Path, plants: &str, finalized: bool) {
    let d = dir.to_str().expect("utf-8 path");
    let mut args = vec![
        "generate",
        "--peers",
        "--ranks",
        "24",
        "--ranks-per-host",
        "4",
        "--seed",
        "5",
        "--plant",
        plants,
        d,
    ];
    if finalized {
        args.insert(1, "--finalized");
    }
    let o = run(&args);
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
}

fn json(args: &[&str]) -> Value {
    let o = run(args);
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// What the outliers conclude: each row's kinds, culprit, severity and evidence.
fn verdicts(dir: &str) -> Vec<Value> {
    let v = json(&["outliers", "--json", dir]);
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| serde_json::json!([r["kinds"], r["culprit"], r["severity"], r["evidence"]]))
        .collect()
}

/// QP rows of a run's files.
fn qp_rows(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json")
            && p.file_name() != Some("planted.json".as_ref())
        {
            let f: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            for d in f["devices"].as_array().unwrap() {
                for c in d["channels"].as_array().unwrap() {
                    n += c["queue_pairs"].as_array().unwrap().len();
                }
            }
        }
    }
    n
}

#[test]
fn a_finalized_run_has_the_links_and_the_verdicts_of_the_same_run_live() {
    let (live, fin) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plants = "slow_nic,slow_link,recovered_stall";
    generate(live.path(), plants, false);
    generate(fin.path(), plants, true);
    let (l, f) = (live.path().to_str().unwrap(), fin.path().to_str().unwrap());
    assert!(qp_rows(live.path()) > 0);
    assert_eq!(
        qp_rows(fin.path()),
        0,
        "finalized: no channel keeps a QP row"
    );
    let o = run(&["check", f]);
    assert!(o.status.success(), "{}", stdout(&o));

    // The same links, joined from both ends: counts, sums, latency, stalls.
    let (jl, jf) = (json(&["links", "--json", l]), json(&["links", "--json", f]));
    for k in [
        "qps",
        "qps_with_peer",
        "qps_matched",
        "qps_unmatched",
        "qps_ambiguous",
    ] {
        assert_eq!(jl[k], jf[k], "{k}");
    }
    assert!(jl["qps_matched"].as_u64().unwrap() > 0);
    assert_eq!(
        jl["links"].as_array().unwrap().len(),
        jf["links"].as_array().unwrap().len()
    );
    assert_eq!(jl["links"], jf["links"]);
    assert_eq!(stdout(&run(&["links", l])), stdout(&run(&["links", f])));

    // The same verdicts: the slow NIC and the slow link named, with the same evidence.
    let (vl, vf) = (verdicts(l), verdicts(f));
    assert_eq!(vl, vf);
    let kinds: Vec<&str> = vf.iter().filter_map(|r| r[0][0].as_str()).collect();
    assert!(
        kinds.contains(&"slow_nic") && kinds.contains(&"slow_link"),
        "{kinds:?}"
    );

    // The recovered stall stays the run's longest, on the same QP and peer.
    assert_eq!(stdout(&run(&["stalls", l])), stdout(&run(&["stalls", f])));
}

#[test]
fn a_finalized_run_missing_a_rank_counts_the_same_unmatched_qps() {
    let (live, fin) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    generate(live.path(), "missing_peer", false);
    generate(fin.path(), "missing_peer", true);
    let (l, f) = (live.path().to_str().unwrap(), fin.path().to_str().unwrap());
    let (jl, jf) = (json(&["links", "--json", l]), json(&["links", "--json", f]));
    assert!(jl["qps_unmatched"].as_u64().unwrap() > 0);
    for k in ["qps", "qps_with_peer", "qps_matched", "qps_unmatched"] {
        assert_eq!(jl[k], jf[k], "{k}");
    }
    assert_eq!(jl["links"], jf["links"]);
    let remote = |j: &Value| -> Vec<(Value, Value, Value)> {
        j["unmatched"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u["device"].clone(),
                    u["remote_gid"].clone(),
                    u["qps"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(remote(&jl), remote(&jf));
}
