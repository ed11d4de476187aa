//! The join of QPs into links and the NIC / link / host classification, on generated runs
//! with peers (format version 3), over several sizes and seeds.

use crate::common::{run, run as run_cli, stdout};
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, Planted, Topology};
use rccl_telemetry_tool::links::{join, LinkReport};
use rccl_telemetry_tool::load::{load_run, Run};
use rccl_telemetry_tool::outliers::{find, Options};

fn fabric(
    ranks: usize,
    per_host: usize,
    seed: u64,
    plants: &[Plant],
) -> (tempfile::TempDir, Vec<Planted>, Run) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks,
        ranks_per_host: per_host,
        devices_per_rank: per_host.max(1),
        seed,
        plants: plants.to_vec(),
        // The classification's tests: every NIC sees most of the others.
        topology: Topology::AllToAll,
        ..Default::default()
    };
    let planted = generate_fabric(dir.path(), &o, 2).expect("generate");
    let run = load_run(&[dir.path().to_path_buf()]);
    assert!(run.bad.is_empty(), "{:?}", run.bad);
    (dir, planted, run)
}

/// "host:mlx5_N" of a planted rank.
fn nic_of(p: &Planted) -> String {
    format!("{}:mlx5_{}", p.host, p.device_id)
}

#[test]
fn clean_run_joins_every_qp_both_ways() {
    let (_d, _p, run) = fabric(12, 4, 7, &[]);
    let r = join(&run);
    assert_eq!(r.qps, r.qps_with_peer);
    assert_eq!(r.qps_matched, r.qps, "{}", r.headline());
    assert_eq!((r.qps_unmatched, r.qps_ambiguous), (0, 0));
    assert_eq!(r.nics.len(), 12);
    // 3 hosts of 4 NICs, each NIC connected to the 8 NICs of the other hosts.
    assert_eq!(r.links.len(), 12 * 8);
    for l in &r.links {
        assert_eq!(l.qps, 2);
        // What src sent on the link is what dst's matched QPs say they received (the generator
        // writes num_wqe_rcvd = completions / 8 on both sides of a pair): check the reverse link.
        let back = r
            .links
            .iter()
            .find(|b| b.src_nic == l.dst_nic && b.dst_nic == l.src_nic)
            .expect("reverse link");
        assert_eq!(back.qps, l.qps);
        let lat = l.latency.as_ref().expect("latency");
        assert_eq!(lat.source, "peers_log_histogram");
        assert!(lat.relative_error.is_some_and(|e| e <= 0.125));
        assert!(l.src.gid.is_some() && l.dst.gid_ip.is_some());
    }
    assert!(find(&run, &Options::default()).findings.is_empty());
}

#[test]
fn missing_ambiguous_and_lid_only_peers() {
    let (_d, planted, run) = fabric(
        16,
        4,
        3,
        &[Plant::MissingPeer, Plant::AmbiguousPeer, Plant::LidOnly],
    );
    let r = join(&run);
    let missing = planted
        .iter()
        .find(|p| p.kind == Plant::MissingPeer)
        .expect("missing planted");
    // Every QP that pointed at the missing rank is unmatched, listed under the NIC it came
    // from with the missing NIC's GID (or LID when the missing rank was on the LID-only host).
    let lid_host = &planted
        .iter()
        .find(|p| p.kind == Plant::LidOnly)
        .expect("lid planted")
        .host;
    assert!(r.qps_unmatched > 0);
    assert_eq!(
        r.unmatched.iter().map(|u| u.qps).sum::<u64>(),
        r.qps_unmatched
    );
    assert!(r.unmatched.iter().all(|u| u.host != missing.host));
    if &missing.host == lid_host {
        assert!(r
            .unmatched
            .iter()
            .all(|u| u.remote_gid.is_none() && u.remote_lid.is_some()));
    } else {
        assert!(r.unmatched.iter().all(|u| u.remote_gid.is_some()));
    }
    // 12 other-host ranks x 2 QPs each pointed at the missing one.
    assert_eq!(r.qps_unmatched, 12 * 2);
    // Exactly the QP whose peer's identity is claimed twice is ambiguous, and it names both claimants.
    assert_eq!(r.qps_ambiguous, 1);
    assert_eq!(r.ambiguous[0].candidates.len(), 2);
    let amb = planted
        .iter()
        .find(|p| p.kind == Plant::AmbiguousPeer)
        .expect("ambiguous planted");
    assert!(
        r.ambiguous[0]
            .candidates
            .iter()
            .all(|c| c.starts_with(&amb.host)),
        "{:?}",
        r.ambiguous
    );
    // LID-only NICs still join: they have links, keyed by LID.
    let lid_nics: Vec<_> = r.nics.iter().filter(|n| &n.host == lid_host).collect();
    assert!(!lid_nics.is_empty() && lid_nics.iter().all(|n| n.gid.is_none() && n.lid.is_some()));
    assert!(r
        .links
        .iter()
        .any(|l| &l.src.host == lid_host && l.dst.gid.is_some()));
    assert!(r.links.iter().any(|l| &l.dst.host == lid_host));
    // Nothing else is lost: every QP with a peer is joined, unmatched or ambiguous.
    assert_eq!(
        r.qps_matched + r.qps_unmatched + r.qps_ambiguous,
        r.qps_with_peer
    );
}

/// The fabric findings of a run (kind, the names in the finding's rank column).
fn fabric_findings(run: &Run) -> Vec<(String, String)> {
    let o = find(run, &Options::default());
    o.findings
        .iter()
        .map(|f| (f.kind.to_string(), f.rank.clone()))
        .collect()
}

#[test]
fn classification_names_the_planted_culprit_over_sizes_and_seeds() {
    // (ranks, ranks per host): 3 to 8 hosts, 4 to 8 NICs a host.
    for (ranks, per_host) in [(6, 2), (12, 4), (24, 4), (32, 8)] {
        for seed in 1..=3u64 {
            let (_d, _p, run) = fabric(ranks, per_host, seed, &[]);
            assert_eq!(
                fabric_findings(&run),
                vec![],
                "clean run {ranks}/{per_host} seed {seed}"
            );

            let (_d, p, run) = fabric(ranks, per_host, seed, &[Plant::SlowNic]);
            assert_eq!(
                fabric_findings(&run),
                vec![("slow_nic".to_string(), nic_of(&p[0]))],
                "slow_nic {ranks}/{per_host} seed {seed}"
            );

            let (_d, p, run) = fabric(ranks, per_host, seed, &[Plant::SlowHost]);
            assert_eq!(
                fabric_findings(&run),
                vec![("slow_host".to_string(), p[0].host.clone())],
                "slow_host {ranks}/{per_host} seed {seed}"
            );

            let (_d, p, run) = fabric(ranks, per_host, seed, &[Plant::SlowLink]);
            let a = nic_of(&p[0]);
            let b = p[0].peer.clone().expect("link peer");
            let got = fabric_findings(&run);
            assert_eq!(
                got.len(),
                1,
                "slow_link {ranks}/{per_host} seed {seed}: {got:?}"
            );
            assert_eq!(got[0].0, "slow_link");
            assert!(
                got[0].1 == format!("{a} <-> {b}") || got[0].1 == format!("{b} <-> {a}"),
                "{got:?} vs {a} {b}"
            );
        }
    }
}

#[test]
fn a_slow_link_and_a_slow_nic_together_are_two_findings() {
    for seed in 1..=3u64 {
        let (_d, p, run) = fabric(24, 4, seed, &[Plant::SlowNic, Plant::SlowLink]);
        let got = fabric_findings(&run);
        let nic = p.iter().find(|x| x.kind == Plant::SlowNic).expect("nic");
        assert!(
            got.contains(&("slow_nic".to_string(), nic_of(nic))),
            "{got:?}"
        );
        assert_eq!(
            got.iter().filter(|g| g.0 == "slow_link").count(),
            1,
            "{got:?}"
        );
        assert_eq!(got.len(), 2, "{got:?}");
    }
}

#[test]
fn links_cli_json_and_text() {
    let (d, _p, _run) = fabric(12, 4, 5, &[Plant::SlowLink, Plant::MissingPeer]);
    let out = run(&["links", "--json", d.path().to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let links = v["links"].as_array().expect("links");
    assert!(!links.is_empty());
    for l in links {
        for side in ["src", "dst"] {
            assert!(
                l[side]["host"].is_string()
                    && l[side]["device"].is_string()
                    && l[side]["pids"].is_array()
            );
            assert!(l[side].get("gid").is_some());
        }
        assert_eq!(l["latency"]["source"], "peers_log_histogram");
    }
    assert!(v["qps_unmatched"].as_u64().unwrap_or(0) > 0);
    // The text is bounded: --top rows, then per host pair.
    let out = run(&[
        "links",
        "--top",
        "5",
        "--wide",
        d.path().to_str().expect("utf-8"),
    ]);
    let t = stdout(&out);
    assert!(
        t.contains("more links") && t.contains("Per host pair") && t.contains("in no file"),
        "{t}"
    );
}

#[test]
fn older_files_have_no_links_and_no_fabric_findings() {
    let dir = tempfile::tempdir().expect("tempdir");
    rccl_telemetry_tool::generate::generate(
        dir.path(),
        &GenOptions {
            ranks: 8,
            ..Default::default()
        },
    )
    .expect("gen");
    let run = load_run(&[dir.path().to_path_buf()]);
    let r: LinkReport = join(&run);
    assert!(r.links.is_empty() && r.qps_with_peer == 0);
    assert!(r.headline().contains("older than format version 3"));
}

#[test]
fn linear_histograms_when_there_is_no_per_peer_histogram() {
    // Strip the per-peer histograms (LOG_HISTOGRAM=0): the link falls back to its QPs' linear
    // histograms and says so, with the bucket width as its error.
    let (d, _p, _run) = fabric(12, 4, 2, &[]);
    for e in std::fs::read_dir(d.path()).expect("dir").flatten() {
        let p = e.path();
        if !p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("rccl_telemetry_"))
        {
            continue;
        }
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
        for dev in v["devices"].as_array_mut().expect("devices") {
            for peer in dev["peers"].as_array_mut().expect("peers") {
                peer.as_object_mut()
                    .expect("obj")
                    .remove("wqe_completion_log_histogram");
            }
        }
        std::fs::write(&p, serde_json::to_vec(&v).expect("ser")).expect("write");
    }
    let run = load_run(&[d.path().to_path_buf()]);
    let r = join(&run);
    assert!(!r.links.is_empty());
    for l in &r.links {
        let lat = l.latency.as_ref().expect("latency");
        assert_eq!(lat.source, "qp_linear_histogram");
        assert_eq!(lat.bucket_ns, Some(30_000));
    }
}

#[test]
fn three_nics_as_in_the_e2e_a_slow_path_is_a_link_not_its_ends() {
    for seed in 1..=4u64 {
        let (_d, _p, run) = fabric(3, 1, seed, &[]);
        assert_eq!(fabric_findings(&run), vec![], "seed {seed}");
        let (_d, p, run) = fabric(3, 1, seed, &[Plant::SlowLink]);
        let got = fabric_findings(&run);
        assert_eq!(got.len(), 1, "seed {seed}: {got:?}");
        assert_eq!(got[0].0, "slow_link");
        assert!(
            got[0].1.contains(&nic_of(&p[0]))
                && got[0].1.contains(p[0].peer.as_deref().unwrap_or("?"))
        );
        let (_d, p, run) = fabric(3, 1, seed, &[Plant::SlowNic]);
        assert_eq!(
            fabric_findings(&run),
            vec![("slow_nic".to_string(), nic_of(&p[0]))],
            "seed {seed}"
        );
    }
}

#[test]
fn report_heat_map_outlines_the_culprit_and_aggregates_large_runs() {
    let (d, p, run) = fabric(12, 4, 9, &[Plant::SlowLink]);
    let html = rccl_telemetry_tool::report::matrix_section(&run);
    assert!(
        html.contains("id=\"matrix-p99\"")
            && html.contains("id=\"matrix-bytes\"")
            && html.contains("id=\"hm-bytes\"")
    );
    // The two directions of the slow link are outlined, nothing else.
    assert_eq!(
        html.matches("class=\"culprit\"").count(),
        2,
        "{}",
        &html[..400.min(html.len())]
    );
    // Every NIC is a label, and the slow link's cell is the darkest colour.
    assert!(html.contains(&format!(">{}:mlx5_{}</text>", p[0].host, p[0].device_id)));
    assert!(html.contains(&rccl_telemetry_tool::report::ratio_colour(8.0)));
    drop(d);
    // A clean run: nothing outlined. No peers: no section.
    let (_d, _p, run) = fabric(12, 4, 9, &[]);
    assert_eq!(
        rccl_telemetry_tool::report::matrix_section(&run)
            .matches("class=\"culprit\"")
            .count(),
        0
    );
    let dir = tempfile::tempdir().expect("tempdir");
    rccl_telemetry_tool::generate::generate(
        dir.path(),
        &GenOptions {
            ranks: 4,
            ..Default::default()
        },
    )
    .expect("gen");
    assert_eq!(
        rccl_telemetry_tool::report::matrix_section(&load_run(&[dir.path().to_path_buf()])),
        ""
    );
    // Beyond HEATMAP_MAX_NICS NICs, one row per host.
    const _: () = assert!(rccl_telemetry_tool::report::HEATMAP_MAX_NICS < 320);
    let (_d, _p, run) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = GenOptions {
            ranks: 320,
            ranks_per_host: 8,
            devices_per_rank: 8,
            seed: 1,
            plants: vec![],
            ..Default::default()
        };
        // One QP per pair keeps this large run quick.
        let planted = generate_fabric(dir.path(), &o, 1).expect("generate");
        let run = load_run(&[dir.path().to_path_buf()]);
        (dir, planted, run)
    };
    let html = rccl_telemetry_tool::report::matrix_section(&run);
    assert!(
        html.contains("drawn per host (40 hosts"),
        "{}",
        &html[..600.min(html.len())]
    );
    assert!(html.contains(">gpu_node_039</text>") && !html.contains(">gpu_node_039:mlx5_0</text>"));
}

#[test]
fn export_link_rows() {
    let (d, _p, run) = fabric(6, 2, 1, &[]);
    let r = join(&run);
    let path = d.path().to_str().expect("utf-8");
    let out = run_cli(&["export", "--format", "csv", "--links", path]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("src_host,src_pids,src_device,src_gid"));
    assert_eq!(text.lines().count(), 1 + r.links.len());
    let out = run_cli(&["export", "--format", "ndjson", "--links", path]);
    assert_eq!(stdout(&out).lines().count(), r.links.len());
    let out = run_cli(&["export", "--format", "prometheus", "--links", path]);
    let t = stdout(&out);
    assert_eq!(
        t.lines()
            .filter(|l| l.starts_with("rccl_telemetry_link_p99_completion_seconds{"))
            .count(),
        r.links.len()
    );
    assert!(t.contains("src_host=\"gpu_node_000\"") && t.contains("dst_device=\""));
}
