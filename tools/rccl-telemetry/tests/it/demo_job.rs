//! `make demo`'s workload (c_tests/demo_job.sh: 8 ranks of build/ibcast_sim on two simulated
//! hosts, through the real library, with one NIC planted 6x slower on every link and the only
//! one with CQ errors and with CNPs in its fixture sysfs counters): `outliers` must name that
//! NIC and nothing else, `links` must rank its links slowest, and the HTML report must name it.

use super::common::{run, skip, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C simulator `make c-tests` builds (or RCCL_TELEMETRY_IBCAST_SIM).
fn ibcast_sim() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("RCCL_TELEMETRY_IBCAST_SIM") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/ibcast_sim");
    p.exists().then_some(p)
}

fn json(args: &[&str]) -> Value {
    let o = run(args);
    serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stderr(&o)))
}

#[test]
fn demo_job_outliers_links_and_report_name_the_planted_slow_nic() {
    let Some(sim) = ibcast_sim() else {
        return skip(
            "demo_job_outliers_links_and_report_name_the_planted_slow_nic",
            "build/ibcast_sim not built (make c-tests)",
        );
    };
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("out");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../c_tests/demo_job.sh");
    let o = Command::new("sh")
        .arg(&script)
        .arg(&sim)
        .arg(&out)
        .arg(work.path().join("work"))
        .arg("200")
        .output()
        .expect("run sh");
    assert!(
        o.status.success(),
        "demo_job.sh failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let d = out.to_str().unwrap();
    assert_eq!(run(&["check", d]).status.code(), Some(0));

    // The planted NIC is rank 5's device 0 (GID ::ffff:10.0.5.1), under whatever host name the
    // script could give it; every rank drives one NIC of its own.
    let mut files = 0;
    let mut slow: Option<(String, String)> = None;
    // cnp_sent of the slow NIC, and of the others.
    let (mut slow_cnp, mut other_cnp) = (0, Vec::new());
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        files += 1;
        let devs = v["devices"].as_array().unwrap();
        assert_eq!(devs.len(), 1, "{}", p.display());
        assert_eq!(devs[0]["hw_type"], "mlx5", "the fixture tree is read");
        let cnp = devs[0]["hw_counters"]["cnp_sent"].as_i64().unwrap();
        if devs[0]["gid_ip"] == "10.0.5.1" {
            slow_cnp = cnp;
            let host = v["host_name"].as_str().unwrap().to_owned();
            slow = Some((host, devs[0]["roce_device"].as_str().unwrap().to_owned()));
        } else {
            other_cnp.push(cnp);
        }
    }
    assert_eq!(files, 8, "one file per rank");
    let (host, dev) = slow.expect("a file for rank 5 (GID 10.0.5.1)");
    let label = format!("{host}:{dev}");
    assert!(
        other_cnp.iter().all(|c| *c > 0 && 10 * c < slow_cnp),
        "cnp_sent: slow NIC {slow_cnp}, others {other_cnp:?}"
    );

    // outliers: one row, the slow NIC's (a slow NIC first, its CQ errors and counters folded
    // into it), and every finding is about that NIC (the quiet majority has nothing to
    // report); exit 1 because it found something. Findings are ranked by severity, so the
    // critical CQ errors come before the slow_nic finding in the flat list.
    assert_eq!(run(&["outliers", d]).status.code(), Some(1));
    let r = json(&["outliers", "--json", d]);
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["kind"], "slow_nic", "{:#}", rows[0]);
    assert_eq!(rows[0]["culprit"], label.as_str(), "{:#}", rows[0]);
    let findings = r["findings"].as_array().unwrap();
    let slow_nic = findings
        .iter()
        .find(|f| f["kind"] == "slow_nic")
        .unwrap_or_else(|| panic!("no slow_nic finding: {findings:#?}"));
    assert_eq!(slow_nic["rank"], label.as_str());
    for f in findings {
        assert_eq!(
            (f["host"].as_str(), f["roce_device"].as_str()),
            (Some(host.as_str()), Some(dev.as_str())),
            "a finding about another NIC: {f:#}"
        );
    }
    assert!(
        findings.iter().any(|f| f["kind"] == "cq_errors"),
        "the planted CQ errors are not found: {findings:#?}"
    );
    assert!(
        findings.iter().any(|f| f["kind"] == "hw_counter"),
        "the slow NIC's CNPs are not found: {findings:#?}"
    );

    // links: the 8 links with the slow NIC at one end are the 8 with the highest p99.
    let l = json(&["links", "--json", d]);
    let mut links: Vec<(f64, bool)> = l["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let end = |s: &str| k[s]["host"] == host.as_str() && k[s]["device"] == dev.as_str();
            let p99 = k["latency"]["p99_ns"]
                .as_f64()
                .expect("every link has a p99");
            (p99, end("src") || end("dst"))
        })
        .collect();
    assert_eq!(
        links.len(),
        32,
        "4 NICs of one host x 4 of the other, both ways"
    );
    links.sort_by(|a, b| b.0.total_cmp(&a.0));
    assert!(
        links[..8].iter().all(|x| x.1) && links[8..].iter().all(|x| !x.1),
        "{links:?}"
    );
    assert!(stdout(&run(&["links", d])).contains(&label));

    // The healthy links' median completion is microseconds, not nanoseconds.
    let mut p50: Vec<f64> = l["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["latency"]["p50_ns"].as_f64())
        .collect();
    p50.sort_by(f64::total_cmp);
    let median = p50[p50.len() / 2];
    assert!(
        (1_000.0..50_000.0).contains(&median),
        "median p50 {median} ns"
    );

    let html = work.path().join("report.html");
    // The report exits 1: the slow NIC's CQ errors are a critical finding.
    let o = run(&["report", "-o", html.to_str().unwrap(), d]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("{label} is slow towards most of its peers")),
        "the report does not name {label} as a slow NIC"
    );
}
