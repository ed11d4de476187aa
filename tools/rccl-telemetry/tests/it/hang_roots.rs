//! The root of a hang: the wait-for graph of `stalls` (and the line `summary`, `outliers` and
//! the report share) on the generated hangs of format version 4: a frozen receiver, a rank that
//! stops posting, a dead link, two hangs at once; nothing on healthy, idle or recovered runs.

use crate::common::{run as cli, stdout};
use rccl_telemetry_tool::check::check_inputs;
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, Planted, RunKind};
use rccl_telemetry_tool::hang::{analyse, hang_line, Root};
use rccl_telemetry_tool::load::load_run;
use rccl_telemetry_tool::stalls::{find, StallReport};
use serde_json::Value;
use std::path::Path;

/// The shapes every hang is tried on: (ranks, ranks per host): several hosts of eight, three
/// hosts of four (every rank a peer of every other on its rail), one host of four.
const SHAPES: [(usize, usize); 3] = [(64, 8), (12, 4), (4, 4)];

fn gen(plants: &[Plant], ranks: usize, rph: usize, seed: u64) -> (tempfile::TempDir, Vec<Planted>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks,
        ranks_per_host: rph,
        devices_per_rank: 8,
        seed,
        plants: plants.to_vec(),
        ..Default::default()
    };
    let p = generate_fabric(dir.path(), &o, 2).expect("generate");
    (dir, p)
}

fn stalls_of(dir: &Path) -> StallReport {
    find(&load_run(&[dir.to_path_buf()]), &[])
}

fn rank(p: &Planted) -> String {
    format!("{}:{}", p.host, p.pid)
}

fn nic(p: &Planted) -> String {
    format!("{}:mlx5_{}", p.host, p.device_id)
}

/// How many peers a planted rank has: the QPs towards it are two per peer.
fn peers_of(dir: &Path, p: &Planted) -> usize {
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.join(&p.file)).expect("read")).expect("json");
    v["devices"][0]["peers"].as_array().expect("peers").len()
}

fn assert_checks(dir: &Path, what: &str) {
    let r = check_inputs(&[dir.to_path_buf()]).expect("check");
    assert!(
        r.files > 0 && r.violations.is_empty(),
        "{what}: {:?}",
        r.violations.first()
    );
}

#[test]
fn every_hang_run_passes_check() {
    for plant in Plant::of(RunKind::Hang) {
        for (i, &(ranks, rph)) in SHAPES.iter().enumerate() {
            if plant == Plant::TwoHangs && ranks == 4 {
                continue; // one host: every rank is every other's peer
            }
            let (d, _) = gen(&[plant], ranks, rph, 11 + i as u64);
            assert_checks(d.path(), &format!("{plant} {ranks}/{rph}"));
            let out = cli(&["check", d.path().to_str().expect("utf-8")]);
            assert_eq!(out.status.code(), Some(0), "{plant}: check exits 0");
        }
    }
}

#[test]
fn a_frozen_receiver_is_the_one_root() {
    for seed in 1..=3 {
        for &(ranks, rph) in &SHAPES {
            let (d, p) = gen(&[Plant::FrozenRank], ranks, rph, seed);
            let r = stalls_of(d.path());
            assert_eq!(r.roots_basis, "wait_for");
            assert_eq!(
                r.roots.len(),
                1,
                "{ranks}/{rph} seed {seed}: {:#?}",
                r.roots
            );
            let root = &r.roots[0];
            let peers = peers_of(d.path(), &p[0]);
            assert_eq!(root.kind, "rank");
            assert_eq!(root.ranks, vec![rank(&p[0])]);
            assert_eq!(root.nics, vec![nic(&p[0])]);
            assert!(root.in_files);
            assert_eq!(root.waiting_ranks as usize, peers);
            assert_eq!(root.waiting_qps as usize, 2 * peers);
            assert_eq!(root.stalled_qps, root.waiting_qps);
            assert!(root.errors_by_status.is_empty());
            assert!(root.blocked_ranks >= root.waiting_ranks);
            assert!(root.since.is_some());
            assert!(
                root.evidence.contains("older than the first wait on it"),
                "{}",
                root.evidence
            );
        }
    }
}

#[test]
fn the_waiting_ranks_behind_a_frozen_one_are_not_roots() {
    // On eight hosts a rail has ranks two hops from the frozen one, stalled towards its
    // peers (who wait themselves): they must lead to the frozen rank, not be named.
    let mut chained = 0;
    for seed in 1..=6 {
        let (d, p) = gen(&[Plant::FrozenRank], 64, 8, seed);
        let r = stalls_of(d.path());
        let root = &r.roots[0];
        assert_eq!(r.roots.len(), 1);
        assert_eq!(root.ranks, vec![rank(&p[0])]);
        if r.waiting_ranks > root.waiting_ranks as usize {
            chained += 1;
            assert_eq!(root.blocked_ranks as usize, r.waiting_ranks);
            assert!(
                root.evidence.contains("blocked behind it"),
                "{}",
                root.evidence
            );
        }
    }
    assert!(chained > 0, "no seed made a chain of waits");
}

#[test]
fn a_frozen_rank_without_a_file_is_named_by_its_nic() {
    let (d, p) = gen(&[Plant::FrozenRank], 64, 8, 2);
    std::fs::remove_file(d.path().join(&p[0].file)).expect("rm");
    let r = stalls_of(d.path());
    assert_eq!(r.roots.len(), 1, "{:#?}", r.roots);
    let root = &r.roots[0];
    assert!(!root.in_files);
    assert!(root.ranks.is_empty());
    // The IPv4-mapped GID of the planted NIC: ::ffff:10.<host>.<dev>.1
    let host: usize = p[0]
        .host
        .trim_start_matches("gpu_node_")
        .parse()
        .expect("host");
    let ip = format!("10.{host}.{}.1", p[0].device_id);
    assert_eq!(root.nics.len(), 1);
    assert!(
        root.nics[0].contains(&ip) && root.nics[0].contains("not in the files"),
        "{:?}",
        root.nics
    );
    assert!(root.evidence.contains("no file of it"), "{}", root.evidence);
}

#[test]
fn a_rank_that_stops_posting_is_named_from_the_quiet_links() {
    // Nothing is stalled or errored anywhere: only the quiet-links rule can name it.
    for seed in 1..=3 {
        for &(ranks, rph) in &SHAPES {
            let (d, p) = gen(&[Plant::StoppedPosting], ranks, rph, seed);
            let r = stalls_of(d.path());
            assert_eq!(r.stalled_qps, 0);
            assert_eq!(r.errored_qps, 0);
            assert_eq!(r.roots_basis, "quiet", "{ranks}/{rph}: {:?}", r.no_root);
            assert_eq!(r.roots.len(), 1, "{:#?}", r.roots);
            let root = &r.roots[0];
            let peers = peers_of(d.path(), &p[0]);
            if peers == 1 {
                // One link went quiet first: both its ends are named.
                assert_eq!(root.kind, "quiet_link");
                assert!(root.ranks.contains(&rank(&p[0])), "{:?}", root.ranks);
            } else {
                assert_eq!(root.kind, "quiet_end");
                assert_eq!(root.ranks, vec![rank(&p[0])]);
                assert_eq!(root.nics, vec![nic(&p[0])]);
                assert_eq!(root.quiet_links.len(), peers, "{:?}", root.quiet_links);
                assert!(root.quiet_links.iter().all(|l| l.contains(&rank(&p[0]))));
            }
            let out = cli(&["stalls", d.path().to_str().expect("utf-8")]);
            assert_eq!(out.status.code(), Some(1), "a root named: exit 1");
            assert!(stdout(&out).contains("from the last-progress times"));
        }
    }
}

#[test]
fn a_dead_link_is_a_cycle_with_its_errors_at_both_ends() {
    for seed in 1..=3 {
        for &(ranks, rph) in &SHAPES {
            let (d, p) = gen(&[Plant::DeadLink], ranks, rph, seed);
            let r = stalls_of(d.path());
            // No QP is stalled: without the errors in the graph there would be no edge at all.
            assert_eq!(r.stalled_qps, 0);
            assert_eq!(r.roots_basis, "wait_for", "errors are edges of the graph");
            assert_eq!(r.roots.len(), 1, "{:#?}", r.roots);
            let root: &Root = &r.roots[0];
            assert_eq!(root.kind, "cycle");
            let b = p[0].peer.clone().expect("peer");
            let mut want = vec![nic(&p[0]), b];
            want.sort();
            assert_eq!(root.nics, want);
            assert!(root.ranks.contains(&rank(&p[0])) && root.ranks.len() == 2);
            // Two QPs each way, each with one RETRY_EXC_ERR and its flushed WRs.
            assert_eq!(root.errored_qps, 4);
            assert_eq!(root.errors_by_status.get("RETRY_EXC_ERR"), Some(&4));
            assert!(root
                .errors_by_status
                .get("WR_FLUSH_ERR")
                .is_some_and(|n| *n >= 16));
            assert!(root
                .first_error
                .as_deref()
                .is_some_and(|e| e.starts_with("RETRY_EXC_ERR at ")));
        }
    }
}

#[test]
fn two_independent_hangs_give_two_roots() {
    for seed in 1..=3 {
        for &(ranks, rph) in &SHAPES[..2] {
            let (d, p) = gen(&[Plant::TwoHangs], ranks, rph, seed);
            assert_eq!(p.len(), 2);
            let r = stalls_of(d.path());
            let mut got: Vec<String> = r.roots.iter().flat_map(|x| x.ranks.clone()).collect();
            got.sort();
            let mut want: Vec<String> = p.iter().map(rank).collect();
            want.sort();
            assert_eq!(got, want, "{ranks}/{rph} seed {seed}");
            assert!(r.roots.iter().all(|x| x.kind == "rank"));
            let line = hang_line(&load_run(&[d.path().to_path_buf()])).expect("line");
            assert!(line.starts_with("Hang: 2 roots: "), "{line}");
        }
    }
}

#[test]
fn healthy_idle_and_recovered_runs_name_no_root() {
    for seed in 1..=3 {
        // A recovered stall (final files) and a healthy v3 run: no hang at all, no line.
        for (plant, v4) in [
            (&[Plant::RecoveredHang][..], true),
            (&[Plant::RecoveredStall], false),
            (&[], false),
        ] {
            let (d, _) = gen(plant, 12, 4, seed);
            let r = stalls_of(d.path());
            assert!(r.roots.is_empty(), "{plant:?}: {:#?}", r.roots);
            assert_eq!(r.no_root, None, "{plant:?}");
            let run = load_run(&[d.path().to_path_buf()]);
            assert_eq!(hang_line(&run), None, "{plant:?}");
            if v4 {
                assert!(r
                    .longest_per_rank
                    .iter()
                    .all(|s| s.longest_stall_ms == 7_500));
                assert!(!r.longest_per_rank.is_empty());
            }
            for cmd in ["summary", "outliers", "stalls"] {
                let out = cli(&[cmd, d.path().to_str().expect("utf-8")]);
                assert!(
                    !stdout(&out).contains("Hang"),
                    "{plant:?} {cmd}: {}",
                    stdout(&out)
                );
                // The recovered run's RNR NAK counters are an outlier of their own, not a hang.
                if cmd != "outliers" || plant.is_empty() {
                    assert_eq!(out.status.code(), Some(0), "{plant:?} {cmd}");
                }
            }
        }
        // Snapshots of a job idle between phases: every link went quiet at once.
        let (d, _) = gen(&[Plant::Idle], 64, 8, seed);
        let r = stalls_of(d.path());
        assert!(r.roots.is_empty(), "{:#?}", r.roots);
        let why = r.no_root.expect("says why");
        assert!(why.contains("went quiet within one check"), "{why}");
    }
}

#[test]
fn stalled_qps_without_peers_say_why_no_root() {
    let (d, _) = gen(&[Plant::FrozenRank], 12, 4, 1);
    for f in std::fs::read_dir(d.path()).expect("dir").flatten() {
        let p = f.path();
        if p.extension().is_none_or(|x| x != "json") || p.ends_with("planted.json") {
            continue;
        }
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("j");
        for c in v["devices"][0]["channels"]
            .as_array_mut()
            .expect("channels")
        {
            for q in c["queue_pairs"].as_array_mut().expect("qps") {
                q["peer"] = Value::Null;
            }
        }
        std::fs::write(&p, serde_json::to_vec(&v).expect("ser")).expect("write");
    }
    let r = stalls_of(d.path());
    assert!(r.roots.is_empty());
    let why = r.no_root.expect("why");
    assert!(why.contains("none of their peers can be told"), "{why}");
    let out = cli(&["stalls", d.path().to_str().expect("utf-8")]);
    assert!(stdout(&out).contains("No root of the hang can be named"));
}

#[test]
fn stalls_json_carries_the_roots_and_every_command_the_line() {
    let (d, p) = gen(&[Plant::FrozenRank], 64, 8, 4);
    let dir = d.path().to_str().expect("utf-8");
    let out = cli(&["stalls", "--json", dir]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["roots_basis"], "wait_for");
    let roots = v["roots"].as_array().expect("roots");
    assert_eq!(roots.len(), 1);
    for k in [
        "kind",
        "ranks",
        "nics",
        "in_files",
        "waiting_qps",
        "waiting_ranks",
        "stalled_qps",
        "errored_qps",
        "blocked_ranks",
        "since",
        "errors_by_status",
        "first_error",
        "quiet_links",
        "evidence",
    ] {
        assert!(
            roots[0].get(k).is_some(),
            "roots[0] has no {k}: {}",
            roots[0]
        );
    }
    assert_eq!(roots[0]["ranks"][0], rank(&p[0]));
    let want = format!("Hang: 1 root: {} ({})", rank(&p[0]), nic(&p[0]));
    let out = cli(&["summary", "--wide", dir]);
    assert!(stdout(&out).contains(&want), "summary: {}", stdout(&out));
    // outliers: the root is its first row, critical, named by its NIC, the stalled QPs
    // waiting on it folded in.
    let out = cli(&["outliers", "--wide", dir]);
    let text = stdout(&out);
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("1 "));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no first row: {text}"));
    assert!(
        first.contains("critical") && first.contains("hang root") && first.contains(&nic(&p[0])),
        "{text}"
    );
    let pid = rank(&p[0]).rsplit_once(':').unwrap().1.to_string();
    assert!(first.contains(&pid), "the root's pid first: {first}");
    let evidence = lines.next().unwrap_or_default();
    assert!(
        evidence.contains(&rank(&p[0])),
        "the evidence names the rank: {evidence}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a root is something that stands out"
    );
    let html = d.path().join("r.html");
    let out = cli(&["report", "-o", html.to_str().expect("utf-8"), dir]);
    assert_eq!(out.status.code(), Some(1), "a hang is critical");
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("<td>Hang</td>") && page.contains(&rank(&p[0])));
}

#[test]
fn hang_plants_go_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks: 12,
        ranks_per_host: 4,
        plants: vec![Plant::FrozenRank, Plant::SlowNic],
        ..Default::default()
    };
    let e = generate_fabric(dir.path(), &o, 2).expect_err("refused");
    assert!(e.contains("goes alone"), "{e}");
    let r = analyse(&load_run(&[dir.path().to_path_buf()]));
    assert!(r.roots.is_empty());
}
