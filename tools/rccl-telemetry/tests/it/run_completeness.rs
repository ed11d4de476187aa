//! What a directory holds besides one whole job: ranks whose files are missing, the files of
//! two jobs, a later process with a reused pid; and a whole single job, which says nothing of
//! these.

use crate::common::{run, stderr, stdout};
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant};
use std::path::{Path, PathBuf};

/// A generated run with peers (rail topology, RCCL's shape) in a new directory.
fn fabric(ranks: usize, seed: u64, plants: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks,
        seed,
        plants: plants
            .iter()
            .map(|p| Plant::from_name(p).expect("a plant"))
            .collect(),
        ..Default::default()
    };
    generate_fabric(dir.path(), &o, 2).expect("generate");
    dir
}

fn rank_files(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rccl_telemetry_"))
        })
        .collect();
    v.sort();
    v
}

/// Copies a run's rank files into `to`, an hour later ("T11:" becomes "T12:"), each name with
/// `suffix` before ".json"; with `rename_hosts`, on other hosts too.
fn copy_later(from: &Path, to: &Path, suffix: &str, rename_hosts: bool) {
    for p in rank_files(from) {
        let mut text = std::fs::read_to_string(&p)
            .expect("read")
            .replace("T11:", "T12:");
        if rename_hosts {
            text = text.replace("gpu_node_", "gpu_late_");
        }
        let name = p.file_name().and_then(|n| n.to_str()).expect("name");
        let name = name.replace(".json", &format!("{suffix}.json"));
        std::fs::write(to.join(name), text).expect("write");
    }
}

fn arg(d: &Path) -> &str {
    d.to_str().expect("utf-8")
}

/// 51 of 256 rank files gone: every command says so, `check` exits 1 (0 with --partial).
#[test]
fn missing_rank_files_are_said_by_every_command() {
    let d = fabric(256, 1, &[]);
    for (i, p) in rank_files(d.path()).iter().enumerate() {
        if i % 5 == 2 && i < 255 {
            std::fs::remove_file(p).expect("remove");
        }
    }
    assert_eq!(rank_files(d.path()).len(), 205);
    let s = run(&["summary", "--wide", arg(d.path())]);
    assert_eq!(s.status.code(), Some(0));
    let t = stdout(&s);
    assert!(
        t.contains("Missing: 51 of the 256 peer NICs the files name are in no file"),
        "{t}"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["summary", "--json", arg(d.path())]).stdout).expect("json");
    assert_eq!(j["incomplete"]["peer_nics_missing"], 51);
    assert_eq!(
        j["incomplete"]["missing_first"].as_array().map(Vec::len),
        Some(5)
    );

    let o = run(&["outliers", "--wide", arg(d.path())]);
    let t = stdout(&o);
    assert!(t.contains("Missing files: 51 of the 256 peer NICs"), "{t}");
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(d.path())]).stdout).expect("json");
    assert_eq!(j["caveats"][0]["kind"], "missing_files");
    assert_eq!(j["incomplete"]["peer_nics_missing"], 51);

    let c = run(&["check", arg(d.path())]);
    assert_eq!(c.status.code(), Some(1), "{}", stderr(&c));
    assert!(
        stdout(&c).starts_with("incomplete run: 51 of the 256"),
        "{}",
        stdout(&c)
    );
    assert_eq!(
        run(&["check", "--partial", arg(d.path())]).status.code(),
        Some(0)
    );
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["check", "--json", arg(d.path())]).stdout).expect("json");
    assert_eq!(j["incomplete"]["peer_nics_missing"], 51);

    let html = d.path().join("r.html");
    let r = run(&["report", "-o", arg(&html), arg(d.path())]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let h = std::fs::read_to_string(&html).expect("html");
    assert!(
        h.contains("data-caveat=\"missing_files\""),
        "no caveat in the report"
    );
}

/// A finding about a NIC whose peers are missing says it is less sure.
#[test]
fn a_verdict_beside_a_missing_peer_says_it_is_less_sure() {
    let d = fabric(32, 2, &["slow_nic"]);
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).expect("read")).expect("json")
    };
    let planted = read(&d.path().join("planted.json"));
    let file = planted[0]["file"].as_str().expect("file").to_string();
    let dev = planted[0]["device_id"].as_u64().expect("device");
    let files = rank_files(d.path());
    let c = read(&d.path().join(&file));
    let culprit = c["devices"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["device_id"] == dev))
        .expect("the culprit's device");
    let peer_gid = culprit["peers"][0]["gid"].clone();
    assert!(peer_gid.is_string(), "{c}");
    // The file of the culprit's first peer goes.
    let peer = files
        .iter()
        .find(|p| {
            read(p)["devices"]
                .as_array()
                .is_some_and(|ds| ds.iter().any(|x| x["gid"] == peer_gid))
        })
        .expect("the peer's file");
    let slow_nic = |j: &serde_json::Value| -> (String, f64) {
        j["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["kind"] == "slow_nic")
            .map(|f| {
                let e = f["evidence"].as_str().unwrap_or("").to_string();
                (e, f["confidence"].as_f64().expect("confidence"))
            })
            .expect("the slow NIC is named")
    };
    let whole: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(d.path())]).stdout).expect("json");
    let (_, sure_whole) = slow_nic(&whole);
    std::fs::remove_file(peer).expect("remove");
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(d.path())]).stdout).expect("json");
    let (slow, sure) = slow_nic(&j);
    let named = culprit["peers"].as_array().expect("peers").len();
    assert!(
        slow.contains(&format!(
            "(less sure: 1 of its {named} peers are in no file)"
        )),
        "{slow}"
    );
    // The confidence falls by the share of its peers that are gone.
    let want = sure_whole * (named - 1) as f64 / named as f64;
    assert!(
        (sure - want).abs() < 1e-9,
        "{sure} against {want} ({sure_whole} whole)"
    );
    assert_eq!(j["caveats"][0]["kind"], "missing_files");
    assert_eq!(j["incomplete"]["peer_nics_missing"], 1);
}

/// Two jobs' files in one directory, an hour apart on other hosts: every command says so,
/// and the second job's slow NIC is diagnosed in its own job as it is alone.
#[test]
fn two_jobs_in_one_directory_are_told_apart() {
    let a = fabric(32, 1, &[]);
    let b = fabric(32, 2, &["slow_nic"]);
    let alone: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(b.path())]).stdout).expect("json");
    copy_later(b.path(), a.path(), "_b", true);
    let s = stdout(&run(&["summary", "--wide", arg(a.path())]));
    assert!(
        s.contains(
            "Jobs: the files are of 2 jobs (no overlap in time): job 1: 32 files on 4 hosts"
        ),
        "{s}"
    );
    let st = stdout(&run(&["stalls", "--wide", arg(a.path())]));
    assert!(st.contains("Jobs: the files are of 2 jobs"), "{st}");
    let o = run(&["outliers", "--wide", arg(a.path())]);
    assert_eq!(o.status.code(), Some(1));
    let t = stdout(&o);
    assert!(
        t.contains("Job 1 of 2: 32 files") && t.contains("Job 2 of 2: 32 files"),
        "{t}"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(a.path())]).stdout).expect("json");
    assert_eq!(j["jobs"]["jobs"].as_array().map(Vec::len), Some(2));
    let reports = j["reports"].as_array().expect("reports");
    assert_eq!(reports[0]["findings"].as_array().map(Vec::len), Some(0));
    let kinds = |r: &serde_json::Value| -> Vec<String> {
        r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| format!("{} {}", f["kind"], f["culprit"]))
            .collect()
    };
    let second: Vec<String> = kinds(&reports[1])
        .into_iter()
        .map(|k| k.replace("gpu_late_", "gpu_node_"))
        .collect();
    assert_eq!(second, kinds(&alone));
    let html = a.path().join("r.html");
    run(&["report", "-o", arg(&html), arg(a.path())]);
    let h = std::fs::read_to_string(&html).expect("html");
    assert!(h.contains("data-caveat=\"several_jobs\""), "no jobs caveat");
}

/// A generated hang run (format version 4, with peers) in a new directory.
fn hang_run(plant: Plant, seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks: 12,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed,
        plants: vec![plant],
        ..Default::default()
    };
    generate_fabric(dir.path(), &o, 2).expect("generate");
    dir
}

/// The roots `stalls --json` names: (kind, ranks, evidence).
fn roots(d: &Path) -> Vec<(String, String, String)> {
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["stalls", "--json", arg(d)]).stdout).expect("json");
    j["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("").to_string(),
                r["ranks"].to_string(),
                r["evidence"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Two jobs' hangs in one directory, an hour apart on other hosts: each job's root is named
/// as when its files are alone (one job's end is not the other's quiet link), said of its job.
#[test]
fn two_jobs_hangs_are_rooted_per_job() {
    let a = hang_run(Plant::StoppedPosting, 1);
    let b = hang_run(Plant::FrozenRank, 2);
    // As `copy_later` moves the second job: an hour later, on other hosts.
    let later = |s: &str| s.replace("gpu_node_", "gpu_late_").replace("T11:", "T12:");
    let job = |n: usize, rs: Vec<(String, String, String)>, moved: bool| {
        rs.into_iter()
            .map(|(k, r, e)| {
                let (r, e) = if moved {
                    (later(&r), later(&e))
                } else {
                    (r, e)
                };
                (k, r, format!("job {n}: {e}"))
            })
            .collect::<Vec<_>>()
    };
    let mut want = job(1, roots(a.path()), false);
    want.extend(job(2, roots(b.path()), true));
    assert!(want.len() >= 2, "{want:?}");
    copy_later(b.path(), a.path(), "_b", true);
    let both = roots(a.path());
    assert_eq!(both, want);
}

/// A job run again three days later on the same hosts, reusing every pid: each process is a
/// rank of its own (no file replaces another), and the two runs are two jobs.
#[test]
fn a_reused_pid_is_another_rank() {
    let a = fabric(16, 1, &[]);
    let b = fabric(16, 1, &[]);
    for p in rank_files(b.path()) {
        let t = std::fs::read_to_string(&p)
            .expect("read")
            .replace("2026-12-02T", "2026-12-05T");
        std::fs::write(&p, t).expect("write");
    }
    copy_later(b.path(), a.path(), "_later", false);
    let s = run(&["summary", "--json", arg(a.path())]);
    assert!(!stderr(&s).contains("skipped"), "{}", stderr(&s));
    let j: serde_json::Value = serde_json::from_slice(&s.stdout).expect("json");
    assert_eq!(j["files"], 32);
    assert_eq!(j["jobs"]["pids_reused"], 16);
    let st = run(&["stalls", "--json", arg(a.path())]);
    assert!(!stderr(&st).contains("skipped"), "{}", stderr(&st));
    let j: serde_json::Value = serde_json::from_slice(&st.stdout).expect("json");
    assert_eq!(j["files"], 32);
}

/// A whole single job says nothing new: no missing line, no jobs line, no new JSON key, and
/// `check` exits 0.
#[test]
fn a_whole_job_says_nothing_new() {
    let d = fabric(64, 3, &[]);
    let s = run(&["summary", arg(d.path())]);
    let t = stdout(&s);
    assert!(!t.contains("Missing:") && !t.contains("Jobs:"), "{t}");
    let j: serde_json::Value =
        serde_json::from_slice(&run(&["summary", "--json", arg(d.path())]).stdout).expect("json");
    assert!(j.get("incomplete").is_none() && j.get("jobs").is_none());
    let o: serde_json::Value =
        serde_json::from_slice(&run(&["outliers", "--json", arg(d.path())]).stdout).expect("json");
    assert!(o.get("incomplete").is_none() && o.get("jobs").is_none());
    assert!(o["caveats"].as_array().is_some_and(Vec::is_empty), "{o}");
    let c = run(&["check", arg(d.path())]);
    assert_eq!(c.status.code(), Some(0));
    assert_eq!(stdout(&c), "");
}
