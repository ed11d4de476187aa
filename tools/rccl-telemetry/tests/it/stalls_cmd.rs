//! `stalls`: stalled QPs of snapshot files grouped by link, the longest stall per rank of
//! final files, and the live textfiles' stall series.

use crate::common::{run as cli, stdout};
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant};
use rccl_telemetry_tool::load::load_run;
use rccl_telemetry_tool::stalls::{find, parse_prom_line};

fn gen(
    plants: &[Plant],
    seed: u64,
) -> (
    tempfile::TempDir,
    Vec<rccl_telemetry_tool::generate::Planted>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks: 12,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed,
        plants: plants.to_vec(),
        ..Default::default()
    };
    let p = generate_fabric(dir.path(), &o, 2).expect("generate");
    (dir, p)
}

#[test]
fn a_hang_snapshot_names_the_stalled_link_both_ends() {
    for seed in 1..=3 {
        let (d, p) = gen(&[Plant::Stall], seed);
        let run = load_run(&[d.path().to_path_buf()]);
        let r = find(&run, &[]);
        assert_eq!(r.snapshots, 12);
        assert_eq!(r.stalled_qps, 2);
        let a = format!("{}:mlx5_{}", p[0].host, p[0].device_id);
        let b = p[0].peer.clone().expect("peer");
        let mut ends: Vec<(String, String)> = r
            .groups
            .iter()
            .map(|g| (g.src.clone(), g.dst.clone()))
            .collect();
        ends.sort();
        let mut want = vec![(a.clone(), b.clone()), (b, a)];
        want.sort();
        assert_eq!(ends, want);
        for g in &r.groups {
            assert_eq!(g.outstanding, 12);
            assert_eq!(g.longest_ms, Some(30_000));
            assert_eq!(g.waiting_ranks.len(), 1);
            assert_eq!(g.peer_ranks.len(), 1);
        }
        let out = cli(&["stalls", d.path().to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(1), "stalled now: exit 1");
    }
}

#[test]
fn a_recovered_run_still_shows_its_worst_pause() {
    let (d, _p) = gen(&[Plant::RecoveredStall], 4);
    let run = load_run(&[d.path().to_path_buf()]);
    let r = find(&run, &[]);
    assert_eq!(r.stalled_qps, 0);
    assert_eq!(r.longest_per_rank.len(), 2);
    assert!(r.longest_per_rank.iter().all(|s| s.is_final
        && s.longest_stall_ms == 7_500
        && s.start.is_some()
        && s.peer.is_some()));
    let out = cli(&["summary", d.path().to_str().expect("utf-8")]);
    assert!(
        stdout(&out).contains("longest stall of the run 7.50 s"),
        "{}",
        stdout(&out)
    );
    let (d, _p) = gen(&[], 4);
    let r = find(&load_run(&[d.path().to_path_buf()]), &[]);
    assert!(r.groups.is_empty() && r.longest_per_rank.is_empty());
}

#[test]
fn textfile_series_are_read_and_joined() {
    let (d, p) = gen(&[], 2);
    let run = load_run(&[d.path().to_path_buf()]);
    // A peer that is in the files: take a real QP's peer identity.
    let f = &run.files[0].file;
    let q = &f.devices[0]
        .channels
        .iter()
        .find(|c| !c.queue_pairs.is_empty())
        .expect("ch")
        .queue_pairs[0];
    let peer = q.peer.clone().expect("peer");
    let prom = d.path().join("rccl_telemetry_x.prom");
    let text = format!(
        "# HELP rccl_telemetry_stalled_qps QPs stalled\n# TYPE rccl_telemetry_stalled_qps gauge\n\
rccl_telemetry_stalled_qps{{host=\"{h}\",pid=\"{pid}\",rank=\"\",device=\"mlx5_0\",hw_type=\"mlx5\"}} 2\n\
rccl_telemetry_qp_stalled_seconds{{host=\"{h}\",pid=\"{pid}\",rank=\"\",device=\"mlx5_0\",hw_type=\"mlx5\",channel=\"1\",qp=\"3\",qp_num=\"77\",peer_gid=\"{g}\",peer_qp_num=\"{qpn}\"}} 4.5\n\
rccl_telemetry_qp_stall_outstanding{{host=\"{h}\",pid=\"{pid}\",rank=\"\",device=\"mlx5_0\",hw_type=\"mlx5\",channel=\"1\",qp=\"3\",qp_num=\"77\",peer_gid=\"{g}\",peer_qp_num=\"{qpn}\"}} 9\n\
garbage line {{\n",
        h = f.host_name,
        pid = f.process_id,
        g = peer.gid.as_deref().unwrap_or_default(),
        qpn = peer.qp_num
    );
    std::fs::write(&prom, text).expect("write");
    let r = find(&run, std::slice::from_ref(&prom));
    assert_eq!(r.prom_stalled_qps_gauge, Some(2));
    assert_eq!(r.stalled_qps, 1);
    let g = &r.groups[0];
    assert_eq!(g.longest_ms, Some(4_500));
    assert_eq!(g.outstanding, 9);
    assert!(!g.dst.contains("not in the files"), "{}", g.dst);
    assert_eq!(r.prom_problems.len(), 1);
    // A directory of textfiles alone works too.
    let only = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&prom, only.path().join("a.prom")).expect("copy");
    let out = cli(&["stalls", "--json", only.path().to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["stalled_qps"], 1);
    assert!(v["groups"][0]["dst"]
        .as_str()
        .is_some_and(|s| s.contains("not in the files")));
    let _ = p;
}

#[test]
fn prom_lines_parse_with_escapes() {
    let (n, l, v) = parse_prom_line(r#"rccl_telemetry_x{a="b\"c",d="e\\f"} 1.5"#).expect("line");
    assert_eq!(n, "rccl_telemetry_x");
    assert_eq!(l["a"], "b\"c");
    assert_eq!(l["d"], "e\\f");
    assert_eq!(v, 1.5);
    assert_eq!(parse_prom_line("up 1").map(|x| x.2), Some(1.0));
    assert!(parse_prom_line("# HELP x").is_none());
    assert!(parse_prom_line("x{a=b} 1").is_none());
    assert!(parse_prom_line("x{a=\"b\"").is_none());
}
