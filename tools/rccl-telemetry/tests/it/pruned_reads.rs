//! `summary`, `stalls`, `outliers` and `report` read each file pruned to what they use
//! (`load::prune`): `summary` and `stalls` the devices, channels and QPs the stall report
//! reads; `outliers` and `report` also the QPs and per-peer entries the link join reads. What
//! they print must be what the whole model gives (the summary, text and JSON, with and
//! without the unused devices, and its stall and hang line; the stall report, text and JSON;
//! the outliers, text and JSON; the report's page) on runs of every kind: every hang of format
//! version 4, the fabric plants of version 3, versions 1 and 2, and a directory mixing
//! versions, in-tree files and a second copy of a rank's file.

use crate::common::{gen as gen_flat, intree_fixture, to_version2};
use rccl_telemetry_tool::context::RunContext;
use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, RunKind};
use rccl_telemetry_tool::layout::Layout;
use rccl_telemetry_tool::load::{load_run, load_run_keeping, Keep, Run};
use rccl_telemetry_tool::{outliers, report, stalls, summary};
use std::path::{Path, PathBuf};

fn fabric(dir: &Path, plants: &[Plant], ranks: usize, seed: u64) {
    let o = GenOptions {
        ranks,
        ranks_per_host: 4,
        devices_per_rank: 4,
        seed,
        plants: plants.to_vec(),
        ..Default::default()
    };
    generate_fabric(dir, &o, 2).expect("generate");
}

/// Everything `summary` prints for a run, with and without `--all-devices`.
fn printed(run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for all_devices in [false, true] {
        let s = summary::summarize(run, all_devices);
        out.push(serde_json::to_string_pretty(&s).expect("json"));
        for (all, linear) in [(false, false), (true, true)] {
            out.push(summary::render_with(
                &s,
                &summary::TextOptions {
                    layout: Layout::Wide,
                    all,
                    linear,
                },
            ));
        }
    }
    let st = stalls::find(run, &[]);
    out.push(stalls::one_line(&st).unwrap_or_default());
    // `stalls` itself, which reads the run as `summary` does.
    out.push(serde_json::to_string_pretty(&st).expect("json"));
    out.push(stalls::render_text(&st, 0, Layout::Wide));
    out
}

/// Everything `outliers` and `report` print for a run.
fn printed_outliers(run: &Run) -> Vec<String> {
    let o = outliers::find(run, &outliers::Options::default());
    let s = summary::summarize(run, false);
    vec![
        serde_json::to_string_pretty(&o).expect("json"),
        outliers::render_with(
            &o,
            &outliers::OutlierText {
                layout: Layout::Wide,
                top: None,
                all: true,
            },
        ),
        report::render(RunContext::new(run), &s, &o, 512),
    ]
}

fn held_and_listed(run: &Run) -> (u64, u64) {
    let chans = || {
        run.files
            .iter()
            .flat_map(|l| &l.file.devices)
            .flat_map(|d| &d.channels)
    };
    (
        chans().map(|c| c.queue_pairs.len() as u64).sum(),
        chans().map(|c| c.qp_count()).sum(),
    )
}

/// The pruned reads print what the whole model prints, and hold fewer QPs.
fn assert_same(dir: &Path, what: &str) -> String {
    let inputs = [dir.to_path_buf()];
    let whole = load_run(&inputs);
    assert!(!whole.files.is_empty(), "{what}: no files");
    let expect = printed(&whole);
    let (held, listed) = held_and_listed(&whole);
    assert_eq!(held, listed, "{what}: the whole model holds every QP");
    let expect_outliers = printed_outliers(&whole);
    let links = load_run_keeping(&inputs, Keep::Links);
    let (_, still) = held_and_listed(&links);
    assert_eq!(still, listed, "{what} Links: every QP still counted");
    assert!(
        printed_outliers(&links) == expect_outliers,
        "{what}: outliers or report differ"
    );
    assert!(
        printed(&links) == expect,
        "{what}: summary differs on the links' read"
    );
    for keep in [Keep::Hang, Keep::Nothing] {
        let pruned = load_run_keeping(&inputs, keep);
        assert_eq!(pruned.kept, keep);
        assert_eq!(pruned.qp_index.is_some(), keep == Keep::Hang, "{what}");
        let (held, still) = held_and_listed(&pruned);
        assert_eq!(still, listed, "{what} {keep:?}: every QP still counted");
        if keep == Keep::Nothing {
            assert_eq!(held, 0, "{what}");
        }
        let got = printed(&pruned);
        let json_and_tables = if keep == Keep::Hang { got.len() } else { 6 };
        for (i, (a, b)) in expect.iter().zip(&got).take(json_and_tables).enumerate() {
            assert!(
                a == b,
                "{what} {keep:?}: output {i} differs:\n{a}\n---\n{b}"
            );
        }
    }
    // The stall and hang line, after the summary's six outputs.
    expect[6].clone()
}

#[test]
fn every_hang_reads_the_same_pruned() {
    for plant in Plant::of(RunKind::Hang) {
        let dir = tempfile::tempdir().expect("tempdir");
        fabric(dir.path(), &[plant], 24, 3);
        let line = assert_same(dir.path(), plant.as_str());
        assert!(line.starts_with("Stalls:"), "{plant}: {line}");
        // The analysis had something to read: a root, or why none.
        if plant != Plant::RecoveredHang {
            assert!(line.contains("\nHang: "), "{plant}: {line}");
        }
    }
}

#[test]
fn fabric_plants_and_flat_runs_read_the_same_pruned() {
    let dir = tempfile::tempdir().expect("tempdir");
    fabric(dir.path(), &Plant::of(RunKind::Fabric), 24, 5);
    let whole = load_run(&[dir.path().to_path_buf()]);
    let (held, _) = held_and_listed(&whole);
    let pruned = load_run_keeping(&[dir.path().to_path_buf()], Keep::Hang);
    let (kept, _) = held_and_listed(&pruned);
    // Only the stalled and once-stalled QPs of the stall plants are held.
    assert!(kept > 0 && kept * 10 < held, "{kept} of {held}");
    assert_same(dir.path(), "fabric plants");
    let flat = gen_flat(GenOptions {
        ranks: 24,
        seed: 4,
        plants: Plant::of(RunKind::Flat),
        samples: 3,
        ..Default::default()
    });
    assert_same(flat.path(), "version-1 plants");
    // Version 1 names no QPN or peer: the links' read keeps only the errored or stalled QPs;
    // version 3 every QP.
    let (held, listed) =
        held_and_listed(&load_run_keeping(&[flat.path().to_path_buf()], Keep::Links));
    assert!(held * 4 < listed, "{held} of {listed}");
    let (held, listed) =
        held_and_listed(&load_run_keeping(&[dir.path().to_path_buf()], Keep::Links));
    assert_eq!(held, listed);
    to_version2(&flat);
    assert_same(flat.path(), "version-2 plants");
}

/// Versions 1 to 4 and the in-tree engine's files in one directory, with a second copy of a
/// rank's snapshot: one file per rank is kept, and the QP index is built from that one.
#[test]
fn a_mixed_directory_with_a_copy_reads_the_same_pruned() {
    let dir = tempfile::tempdir().expect("tempdir");
    fabric(dir.path(), &[Plant::FrozenRank], 24, 9);
    let flat = gen_flat(GenOptions {
        ranks: 16,
        seed: 2,
        plants: Plant::of(RunKind::Flat),
        samples: 2,
        ..Default::default()
    });
    for p in flat.files() {
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    for (f, to) in [
        (
            "rccl_telemetry_n1_1000_42.json",
            "rccl_telemetry_n1_1000_42.json",
        ),
        (
            "sampled_rccl_telemetry_n3_1000_45.json",
            "rccl_telemetry_n3_1000_45.json",
        ),
    ] {
        std::fs::copy(intree_fixture(f), dir.path().join(to)).unwrap();
    }
    let mut ranks: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("gpu_node_000"))
        .collect();
    ranks.sort();
    let first = ranks.first().expect("a rank of gpu_node_000").clone();
    std::fs::copy(
        &first,
        dir.path().join(format!(
            "rccl_telemetry_copy_{}",
            first.file_name().unwrap().to_string_lossy()
        )),
    )
    .unwrap();
    let line = assert_same(dir.path(), "mixed");
    assert!(line.contains("\nHang: "), "{line}");
    let run = load_run_keeping(&[dir.path().to_path_buf()], Keep::Hang);
    assert!(run
        .bad
        .iter()
        .any(|b| b.kind == rccl_telemetry_tool::load::BadKind::Duplicate));
    let formats: std::collections::BTreeSet<&str> =
        run.files.iter().map(|l| l.file.format.label()).collect();
    assert!(formats.len() >= 3, "{formats:?}");
}
