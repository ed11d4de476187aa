//! Verdicts an operator can trust: nothing named on a healthy run with ordinary
//! jitter, every class named once by its NIC (one direction, host-side delay included), "too
//! few to tell" said rather than a silent all-clear, a hung job critical and first, and the
//! verdict benchmark's targets on a small grid.

use crate::common::*;
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, Planted};
use rccl_telemetry_tool::load::load_run;
use rccl_telemetry_tool::outliers::{find, Kind, Options, OutlierReport, Severity};
use rccl_telemetry_tool::verdict_bench::{grid, missed, render, run_case, score, NOISES};
use serde_json::Value;

fn fabric(o: GenOptions) -> (tempfile::TempDir, Vec<Planted>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = generate_fabric(dir.path(), &o, 1).expect("generate");
    (dir, p)
}

fn outliers_of(dir: &std::path::Path, opt: &Options) -> OutlierReport {
    let run = load_run(&[dir.to_path_buf()]);
    assert!(run.bad.is_empty(), "{:?}", run.bad);
    find(&run, opt)
}

fn six_hosts(seed: u64, plants: &[Plant]) -> GenOptions {
    GenOptions {
        ranks: 6,
        ranks_per_host: 1,
        devices_per_rank: 1,
        seed,
        noise: vec!["jitter".into()],
        plants: plants.to_vec(),
        ..Default::default()
    }
}

/// The issue's six hosts (one process each) under scheduling jitter: the rule without the
/// tail's weight names a latency tail on healthy devices (p99 2-4x the run's, robust z 4-27,
/// from about 1,600 completions), as the issue saw on the library; with it, nothing.
#[test]
fn the_issues_jittery_six_host_runs_name_nothing() {
    let old_rule = Options {
        min_tail_share: 0.0,
        ..Default::default()
    };
    let mut reproduced = 0;
    for seed in 1..=8 {
        let (d, _) = fabric(six_hosts(seed, &[]));
        let old = outliers_of(d.path(), &old_rule);
        reproduced += usize::from(old.findings.iter().any(|f| f.kind == Kind::LatencyTail));
        let new = outliers_of(d.path(), &Options::default());
        assert!(new.findings.is_empty(), "seed {seed}: {:#?}", new.findings);
        let out = run(&["outliers", d.path().to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    }
    assert!(
        reproduced >= 2,
        "the jitter model reproduces the issue's false positive on {reproduced} of 8 runs only"
    );
}

/// One direction, and a process polling late, each named as its own class by its NIC: never
/// as a slow NIC, never twice.
#[test]
fn one_way_and_host_side_delay_are_named_by_their_nic() {
    for seed in 1..=3 {
        let (d, p) = fabric(six_hosts(seed, &[Plant::SlowLinkOneWay]));
        let a = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
        let b = p[0].peer.clone().expect("peer");
        let r = outliers_of(d.path(), &Options::default());
        assert_eq!(r.rows.len(), 1, "{:#?}", r.rows);
        assert_eq!(r.rows[0].kind, Kind::SlowLinkOneWay);
        assert_eq!(r.rows[0].culprit, format!("{a} -> {b}"));
        assert!(
            r.rows[0].evidence.contains("is normal"),
            "{}",
            r.rows[0].evidence
        );

        let (d, p) = fabric(six_hosts(seed, &[Plant::HostSideDelay]));
        let nic = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
        let r = outliers_of(d.path(), &Options::default());
        assert_eq!(r.rows.len(), 1, "{:#?}", r.rows);
        assert_eq!(r.rows[0].kind, Kind::HostSideDelay);
        assert_eq!(r.rows[0].culprit, nic);
        assert_eq!(r.rows[0].pids.first(), Some(&p[0].pid));
        assert!(!r.findings.iter().any(|f| f.kind == Kind::SlowNic));
        // Its latency tail is the same culprit: one row, both findings in it.
        if r.findings.len() > 1 {
            assert!(
                r.rows[0].kinds.contains(&Kind::LatencyTail),
                "{:#?}",
                r.rows
            );
        }
    }
}

/// A real run, the e2e trio's `host_delay` of 2026-12-07 (tests/fixtures/host_delay_trio): b's
/// rank stopped in bursts, its own completions 54x the healthy links', and one of its peers'
/// links towards it 2.9x (its receives reposted late), so its column's median sat at 2.04x,
/// just over `min_ratio`. The column is still far nearer the healthy level than the row: a
/// host-side delay, not a slow NIC (which e2e named it before the row was weighed against it).
#[test]
fn a_column_far_nearer_healthy_than_the_row_is_a_host_side_delay() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host_delay_trio");
    let r = outliers_of(&dir, &Options::default());
    assert_eq!(r.rows.len(), 1, "{:#?}", r.rows);
    assert_eq!(
        r.rows[0].kind,
        Kind::HostSideDelay,
        "{}",
        r.rows[0].evidence
    );
    assert_eq!(r.rows[0].culprit, "e2e-b:rxe0");
    assert!(
        r.rows[0].evidence.contains("(its column: p50 18.37 ms")
            && r.rows[0].evidence.contains("1 of 2 slow"),
        "{}",
        r.rows[0].evidence
    );
    assert!(!r.findings.iter().any(|f| f.kind == Kind::SlowNic));
    // A second run of the same scenario (tests/fixtures/host_delay_trio_2): both of b's
    // peers' links towards it 2.3-2.5x, so its whole column passes as slow, its row 75x.
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/host_delay_trio_2");
    let r = outliers_of(&dir, &Options::default());
    assert_eq!(r.rows.len(), 1, "{:#?}", r.rows);
    assert_eq!(
        r.rows[0].kind,
        Kind::HostSideDelay,
        "{}",
        r.rows[0].evidence
    );
    assert_eq!(r.rows[0].culprit, "e2e-b:rxe0");
    assert!(
        r.rows[0].evidence.contains("2 of 2 slow"),
        "{}",
        r.rows[0].evidence
    );
}

/// Rewrites the per-peer log histograms of every file in `dir`: the bucket bounds of each peer
/// entry `pick(file's host, peer's gid_ip)` chooses, through `scale`.
fn rescale_peers(
    dir: &std::path::Path,
    pick: impl Fn(&str, &str) -> bool,
    scale: impl Fn(u64, bool) -> u64,
) {
    for e in std::fs::read_dir(dir).expect("dir") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "json") || path.ends_with("planted.json") {
            continue;
        }
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let host = v["host_name"].as_str().unwrap_or_default().to_string();
        for d in v["devices"].as_array_mut().expect("devices") {
            for p in d["peers"].as_array_mut().into_iter().flatten() {
                if !pick(&host, p["gid_ip"].as_str().unwrap_or_default()) {
                    continue;
                }
                for b in p["wqe_completion_log_histogram"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                {
                    b[0] = Value::from(scale(b[0].as_u64().unwrap(), false));
                    if let Some(hi) = b[1].as_u64() {
                        b[1] = Value::from(scale(hi, true));
                    }
                }
            }
        }
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    }
}

/// Multiplies every latency a file reports towards (or from) host `h` by 4: the per-peer log
/// histograms of `h`'s own files, and the other files' towards `h`'s NICs (10.h.*).
fn slow_down_host(dir: &std::path::Path, h: &str, ip_prefix: &str) {
    rescale_peers(
        dir,
        |host, ip| host == h || ip.starts_with(ip_prefix),
        |x, hi| if hi { x * 4 + 3 } else { x * 4 },
    );
}

/// Divides by `div` every latency host `from`'s files report towards the NICs at `ip_prefix`.
fn speed_up_link(dir: &std::path::Path, from: &str, ip_prefix: &str, div: u64) {
    rescale_peers(
        dir,
        |host, ip| host == from && ip.starts_with(ip_prefix),
        |x, _| x / div,
    );
}

/// A process polling late also reposts its receives late: a peer's writes towards it meet
/// receiver-not-ready retries now and then, and one cell of its column comes out 2-3x slow (as
/// a -> b did beside a starved b in one e2e run: 2.2x, robust z 6.6) while the column as a
/// whole stays healthy. That cell is the host-side delay's doing: one row, no one-way link.
#[test]
fn a_slow_cell_towards_a_late_poller_is_its_doing_not_a_one_way_link() {
    for seed in 1..=3 {
        let (d, p) = fabric(six_hosts(seed, &[Plant::HostSideDelay]));
        let nic = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
        let idx: u32 = p[0].host.trim_start_matches("gpu_node_").parse().unwrap();
        let peer = (0..6)
            .map(|i| format!("gpu_node_{i:03}"))
            .find(|h| *h != p[0].host)
            .unwrap();
        let prefix = format!("10.{idx}.");
        rescale_peers(
            d.path(),
            |host, ip| host == peer && ip.starts_with(&prefix),
            |x, hi| if hi { x * 3 + 2 } else { x * 3 },
        );
        let r = outliers_of(d.path(), &Options::default());
        assert_eq!(r.rows.len(), 1, "seed {seed}: {:#?}", r.rows);
        assert_eq!(r.rows[0].kind, Kind::HostSideDelay);
        assert_eq!(r.rows[0].culprit, nic);
        assert!(!r.findings.iter().any(|f| f.kind == Kind::SlowLinkOneWay));
    }
}

/// A one-way limit's reverse carries little (its sender waits for the credits the slow
/// direction brings) and runs 10x fast on an idle path, as in the e2e's `oneway`; one more link
/// happens to be as fast. The reverse is the slow direction's doing, not a faster tier: the one
/// way is still named, where counting it made two fast links, a "fast group" that named nothing.
#[test]
fn a_one_way_limits_fast_reverse_is_not_a_faster_tier() {
    for seed in 1..=3 {
        let (d, p) = fabric(six_hosts(seed, &[Plant::SlowLinkOneWay]));
        let a = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
        let b = p[0].peer.clone().expect("peer");
        let b_host = b.split(':').next().unwrap().to_string();
        let ip = |h: &str| {
            let idx: u32 = h.trim_start_matches("gpu_node_").parse().unwrap();
            format!("10.{idx}.")
        };
        let others: Vec<String> = (0..6)
            .map(|i| format!("gpu_node_{i:03}"))
            .filter(|h| *h != p[0].host && *h != b_host)
            .collect();
        speed_up_link(d.path(), &b_host, &ip(&p[0].host), 10);
        speed_up_link(d.path(), &others[0], &ip(&others[1]), 10);
        let r = outliers_of(d.path(), &Options::default());
        assert_eq!(
            r.rows.len(),
            1,
            "seed {seed}: {:#?} {:#?}",
            r.rows,
            r.caveats
        );
        assert_eq!(r.rows[0].kind, Kind::SlowLinkOneWay);
        assert_eq!(r.rows[0].culprit, format!("{a} -> {b}"));
    }
}

/// A slow host of two, and two slow hosts of four: the matrix cannot tell, and says so in one
/// line with its evidence; nothing is named from a baseline that is itself slow.
#[test]
fn too_few_to_tell_is_said_never_a_silent_all_clear() {
    let two = GenOptions {
        ranks: 8,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed: 4,
        plants: vec![Plant::SlowHost],
        ..Default::default()
    };
    let (d, _) = fabric(two);
    let r = outliers_of(d.path(), &Options::default());
    assert!(r.rows.is_empty(), "{:#?}", r.rows);
    assert_eq!(r.caveats.len(), 1, "{:?}", r.caveats);
    assert_eq!(r.caveats[0].kind, "too_few_to_tell");
    assert!(r.caveats[0]
        .evidence
        .starts_with("2 hosts (gpu_node_000 and gpu_node_001)"));
    let out = run(&["outliers", d.path().to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("Too few to tell: 2 hosts")),
        "{text}"
    );
    let v: Value =
        serde_json::from_slice(&run(&["outliers", "--json", d.path().to_str().unwrap()]).stdout)
            .unwrap();
    assert_eq!(v["caveats"][0]["kind"], "too_few_to_tell");

    for seed in 1..=3 {
        let four = GenOptions {
            ranks: 8,
            ranks_per_host: 2,
            devices_per_rank: 2,
            seed,
            plants: vec![Plant::SlowHost],
            ..Default::default()
        };
        let (d, p) = fabric(four);
        // A second slow host beside the planted one.
        let other = (0..4)
            .map(|h| format!("gpu_node_{h:03}"))
            .find(|h| *h != p[0].host)
            .expect("another host");
        let idx = other
            .trim_start_matches("gpu_node_")
            .parse::<u32>()
            .unwrap();
        slow_down_host(d.path(), &other, &format!("10.{idx}."));
        let r = outliers_of(d.path(), &Options::default());
        assert!(
            !r.rows.iter().any(|w| w.kind.is_culprit()),
            "seed {seed}: named from a slow baseline: {:#?}",
            r.rows
        );
        assert!(
            r.caveats.iter().any(|c| c.kind == "too_few_to_tell"
                && c.evidence
                    .contains("faster than the level the others share")),
            "seed {seed}: {:?}",
            r.caveats
        );
    }
}

/// A hung job: its root and stalled QPs are critical findings, first in `outliers` (exit 1)
/// and on the report's first screen (exit 1), before the summary.
#[test]
fn a_hung_job_is_critical_and_first() {
    let o = GenOptions {
        ranks: 32,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed: 2,
        plants: vec![Plant::FrozenRank],
        ..Default::default()
    };
    let (d, p) = fabric(o);
    let nic = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
    let dir = d.path().to_str().expect("utf-8");
    let v: Value = serde_json::from_slice(&run(&["outliers", "--json", dir]).stdout).unwrap();
    assert_eq!(v["rows"][0]["kind"], "hang_root", "{:#}", v["rows"]);
    assert_eq!(v["rows"][0]["severity"], "critical");
    assert_eq!(v["rows"][0]["culprit"], nic.as_str());
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "hang_root");
    assert!(kinds.contains(&"stalled_qps"), "{kinds:?}");
    // The stalled QPs waiting on the root fold into its row.
    assert!(v["rows"][0]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "stalled_qps"));
    assert_eq!(run(&["outliers", dir]).status.code(), Some(1));

    let html = d.path().join("r.html");
    let out = run(&["report", "-o", html.to_str().unwrap(), dir]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    let verdict = page.find("id=\"verdict\"").expect("verdict section");
    let summary = page.find("id=\"summary\"").expect("summary section");
    assert!(verdict < summary, "the verdict comes first");
    let first = &page[verdict..summary];
    assert!(
        first.contains("verdict critical") && first.contains("hang root"),
        "{first}"
    );
    assert!(first.contains(&nic), "{first}");

    // A run whose stalled QPs name no peer: no root, and the caveat says why, with the stalls
    // still critical findings.
    let (d, _) = fabric(GenOptions {
        ranks: 12,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed: 3,
        plants: vec![Plant::Stall],
        ..Default::default()
    });
    let r = outliers_of(d.path(), &Options::default());
    assert_eq!(r.rows[0].severity, Severity::Critical, "{:#?}", r.rows);
    assert!(r
        .findings
        .iter()
        .any(|f| f.kind == Kind::StalledQps || f.kind == Kind::HangRoot));
}

/// The verdict benchmark on a small grid (3 and 12 NICs, every noise model, two seeds): the
/// targets `make verdict-bench` holds at every size, asserted.
#[test]
fn the_verdict_grid_meets_its_targets() {
    let cases = grid(&[(3, 1), (12, 4)], &NOISES, &[1, 2]);
    let work = tempfile::tempdir().expect("tempdir");
    let outs: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| run_case(c, &work.path().join(format!("r{i}"))).expect("case"))
        .collect();
    let s = score(&outs);
    assert!(s.healthy_runs >= 20, "{}", render(&s));
    assert!(missed(&s).is_empty(), "{:?}\n{}", missed(&s), render(&s));
}

/// The scenarios' CI subset (`make verdict-bench` runs the whole matrix): every class on the
/// rail, ring, tree and all-to-all topologies, at 2 ranks, a rail of four hosts, two hosts of
/// eight (every NIC's only link joins the other host: one finding names both ends), six hosts
/// of four and four of eight (two slow NICs on one rail of four hosts), planted by the generator and by editing healthy files (a NIC's row, column,
/// both, its tail only; a link, one way, a host, two NICs of a rail, a late poller with a slow
/// link), under jitter. Every row is judged: a healthy neighbour's latency tail is a wrong row.
#[test]
fn the_scenarios_meet_their_targets_on_every_topology() {
    use rccl_telemetry_tool::verdict_bench::scenario;
    let topologies = ["rail", "ring", "tree", "alltoall"];
    let list = scenario::matrix(
        &topologies,
        &[(2, 1), (4, 1), (16, 8), (24, 4), (32, 8)],
        &scenario::PLANTINGS,
        &["jitter"],
        &[1],
    );
    let work = tempfile::tempdir().expect("tempdir");
    let verdicts: Vec<_> = list
        .iter()
        .enumerate()
        .map(|(i, s)| scenario::run(s, &work.path().join(format!("s{i}"))).expect("scenario"))
        .collect();
    let t = scenario::score(&verdicts);
    for class in scenario::CLASSES {
        assert!(
            t.classes.iter().any(|c| c.class == class && c.runs >= 4),
            "{class}: {}",
            scenario::render(&t)
        );
    }
    assert_eq!(t.by_topology.len(), topologies.len());
    let wrong: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.right())
        .map(|v| format!("{:?}: {:?}", v.scenario, v.rows))
        .collect();
    assert!(
        scenario::missed(&t).is_empty(),
        "{:?}\n{}\n{}",
        scenario::missed(&t),
        scenario::render(&t),
        wrong.join("\n")
    );
}
