//! Truncated, empty, non-JSON, wrong-version and unreadable files: one line each with the
//! path, counted, skipped; the good files are still analysed.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, RunKind};

/// A run of 6 good files plus one of each kind of bad file. Returns the run and the bad paths.
fn run_with_bad_files() -> (GenRun, Vec<(String, &'static str)>) {
    let g = gen(GenOptions {
        ranks: 6,
        seed: 8,
        ..Default::default()
    });
    let good = std::fs::read(&g.files()[0]).expect("read");
    let d = g.path();
    let mut bad = Vec::new();
    let mut put = |name: &str, bytes: &[u8], why: &'static str| {
        let p = d.join(name);
        std::fs::write(&p, bytes).expect("write");
        bad.push((p.display().to_string(), why));
    };
    put(
        "rccl_telemetry_trunc_1000_1.json",
        &good[..good.len() / 2],
        "truncated JSON",
    );
    put("rccl_telemetry_empty_1000_2.json", b"", "empty file");
    put("rccl_telemetry_blank_1000_3.json", b"  \n\t", "empty file");
    put(
        "rccl_telemetry_text_1000_4.json",
        b"this is not json\n",
        "not JSON",
    );
    put(
        "rccl_telemetry_binary_1000_5.json",
        &[0xff, 0xfe, 0x00, 0x7b, 0x22],
        "not JSON",
    );
    let mut v2: serde_json::Value = serde_json::from_slice(&good).expect("json");
    v2["version"] = serde_json::json!(99);
    put(
        "rccl_telemetry_v99_1000_6.json",
        &serde_json::to_vec(&v2).expect("ser"),
        "unsupported version 99",
    );
    put(
        "rccl_telemetry_array_1000_7.json",
        b"[1,2,3]",
        "top level is not an object",
    );
    let mut shape: serde_json::Value = serde_json::from_slice(&good).expect("json");
    shape["devices"] = serde_json::json!("none");
    put(
        "rccl_telemetry_shape_1000_8.json",
        &serde_json::to_vec(&shape).expect("ser"),
        "not a telemetry file",
    );
    // Unreadable even for root: a directory and a dangling symlink with the right names.
    let dir_path = d.join("rccl_telemetry_dir_1000_9.json");
    std::fs::create_dir(&dir_path).expect("mkdir");
    bad.push((
        dir_path.display().to_string(),
        "not a regular file (a directory)",
    ));
    let link = d.join("rccl_telemetry_link_1000_10.json");
    std::os::unix::fs::symlink(d.join("does-not-exist"), &link).expect("symlink");
    bad.push((link.display().to_string(), "cannot read"));
    (g, bad)
}

#[test]
fn every_command_reports_counts_and_skips_bad_files() {
    let (g, bad) = run_with_bad_files();
    let out_file = g.path().join("r.html");
    let commands: Vec<Vec<String>> = vec![
        vec!["summary".into(), "--json".into(), g.arg().into()],
        vec!["outliers".into(), g.arg().into()],
        vec![
            "export".into(),
            "--format".into(),
            "csv".into(),
            g.arg().into(),
        ],
        vec![
            "export".into(),
            "--format".into(),
            "prometheus".into(),
            g.arg().into(),
        ],
        vec![
            "report".into(),
            "-o".into(),
            out_file.display().to_string(),
            g.arg().into(),
        ],
    ];
    for cmd in commands {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let out = run(&args);
        let err = stderr(&out);
        // Inputs were skipped: 4 added to the command's 0 or 1.
        assert!(
            matches!(out.status.code(), Some(4) | Some(5)),
            "{cmd:?}: {err}"
        );
        for (path, why) in &bad {
            let lines: Vec<&str> = err.lines().filter(|l| l.contains(path.as_str())).collect();
            assert_eq!(
                lines.len(),
                1,
                "{cmd:?}: exactly one line for {path}: {err}"
            );
            assert!(
                lines[0].contains(why),
                "{cmd:?}: {path} should say {why:?}: {}",
                lines[0]
            );
        }
        assert!(
            err.contains(&format!("skipped {} of {} files", bad.len(), bad.len() + 6)),
            "{cmd:?}: {err}"
        );
    }
    let s: serde_json::Value =
        serde_json::from_slice(&run(&["summary", "--json", g.arg()]).stdout).expect("json");
    assert_eq!(s["files"], 6);
    assert_eq!(s["files_skipped"].as_u64(), Some(bad.len() as u64));
}

#[test]
fn check_counts_bad_files_as_violations() {
    let (g, bad) = run_with_bad_files();
    let out = run(&["check", g.arg()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for (path, _) in &bad {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{path}: "))),
            "{path} missing from:\n{text}"
        );
    }
    // The v2 file and the wrong-shape one are JSON: reported, not crashed on; the rest unreadable.
    let err = stderr(&out);
    assert!(
        err.contains(&format!("checked {} files: 6 valid", bad.len() + 6)),
        "{err}"
    );
}

#[test]
fn nothing_readable_is_exit_status_two() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("rccl_telemetry_x_1_1.json"), b"{").expect("write");
    for cmd in ["summary", "outliers"] {
        let out = run(&[cmd, d.path().to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        assert!(stderr(&out).contains("truncated JSON"), "{}", stderr(&out));
    }
    let empty = tempfile::tempdir().expect("tempdir");
    let out = run(&["check", empty.path().to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["summary", "/nonexistent/path/for/this/test"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/nonexistent/path/for/this/test"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directory_ignores_files_with_other_names() {
    let g = gen(GenOptions {
        ranks: 3,
        seed: 8,
        ..Default::default()
    });
    // planted.json is in the directory too and must not be read.
    std::fs::write(g.path().join("notes.txt"), b"hello").expect("write");
    let out = run(&["summary", "--json", g.arg()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "", "no file should be reported as skipped");
}

/// Thousands of bad files: stderr names the first few, counts the rest by reason in one line
/// and stays a screen long; the good files are still analysed and the status says inputs
/// were skipped.
#[test]
fn thousands_of_bad_files_give_a_bounded_stderr() {
    let g = gen(GenOptions {
        ranks: 4,
        seed: 9,
        ..Default::default()
    });
    for i in 0..3000 {
        let body: &[u8] = if i % 3 == 0 { b"" } else { b"not json" };
        std::fs::write(
            g.path().join(format!("rccl_telemetry_bad_{i}_1.json")),
            body,
        )
        .expect("write");
    }
    let out = run(&["summary", g.arg()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines.len() <= 25, "{} lines: {err}", lines.len());
    let named = lines.iter().filter(|l| l.contains(": skipped: ")).count();
    assert_eq!(named, rccl_telemetry_tool::load::BAD_NAMED, "{err}");
    let rest = lines
        .iter()
        .find_map(|l| l.strip_prefix("rccl-telemetry: and 2,980 more inputs skipped, not named: "))
        .unwrap_or_else(|| panic!("no count of the rest: {err}"));
    let counted: u64 = rest
        .split(", ")
        .map(|part| {
            let (n, kind) = part.split_once(' ').expect("count and kind");
            assert!(matches!(kind, "not_json" | "empty"), "{part}");
            n.replace(',', "").parse::<u64>().expect("count")
        })
        .sum();
    assert_eq!(counted, 2980, "{rest}");
    assert!(err.contains("skipped 3000 of 3004 files"), "{err}");
}

/// A plant that is none is refused by the command line, which lists the plants; a plant of the
/// other kind of run (with or without --peers) by `generate`, which names those of its run.
/// Nothing is written either way.
#[test]
fn generate_refuses_a_plant_it_cannot_plant() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path().join("run");
    let dir = dir.to_str().expect("utf-8");
    let out = run(&["generate", "--plant", "cnp,bogus", dir]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("invalid value 'bogus' for '--plant"), "{e}");
    let names = Plant::of(RunKind::Flat)
        .into_iter()
        .chain(Plant::of(RunKind::Hang))
        .map(|p| p.as_str());
    for name in std::iter::once("all").chain(names) {
        assert!(
            e.contains(&format!(" {name},")) || e.contains(&format!(" {name}]")),
            "{name}: {e}"
        );
    }
    let out = run(&["generate", "--plant", "slow_nic", dir]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("slow_nic is a plant of runs with peers"),
        "{}",
        stderr(&out)
    );
    let out = run(&["generate", "--peers", "--plant", "cnp", dir]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("cnp is a plant of runs without peers; with --peers: slow_nic,"),
        "{e}"
    );
    assert!(!d.path().join("run").exists());
}
