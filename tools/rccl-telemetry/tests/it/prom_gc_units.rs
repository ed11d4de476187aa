//! The prom-gc service and timer (packaging/systemd/), filled in as `make install-prom-gc`
//! fills them: their ExecStart is a command line the tool accepts and that removes a gone
//! rank's file, and `systemd-analyze verify` accepts both units (which it would not with a
//! mistyped key or a missing program).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/systemd")
}

/// The units as `make install-prom-gc` writes them: `bindir` and `textfile_dir` substituted
/// for @BINDIR@ and @TEXTFILE_DIR@, into `dir`; returns the service's and the timer's path.
fn install_units(dir: &Path, bindir: &Path, textfile_dir: &Path) -> (PathBuf, PathBuf) {
    let service = std::fs::read_to_string(packaging().join("rccl-telemetry-prom-gc.service.in"))
        .unwrap()
        .replace("@BINDIR@", bindir.to_str().unwrap())
        .replace("@TEXTFILE_DIR@", textfile_dir.to_str().unwrap());
    assert!(
        !service.contains('@'),
        "a placeholder the install does not fill: {service}"
    );
    let timer = std::fs::read_to_string(packaging().join("rccl-telemetry-prom-gc.timer")).unwrap();
    let (s, t) = (
        dir.join("rccl-telemetry-prom-gc.service"),
        dir.join("rccl-telemetry-prom-gc.timer"),
    );
    std::fs::write(&s, service).unwrap();
    std::fs::write(&t, timer).unwrap();
    (s, t)
}

fn exec_start(service: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(service).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_services_command_removes_a_gone_ranks_file() {
    let units = tempfile::tempdir().unwrap();
    let textdir = tempfile::tempdir().unwrap();
    let bindir = bin().parent().unwrap().to_path_buf();
    let (service, _) = install_units(units.path(), &bindir, textdir.path());
    let host = rccl_telemetry_tool::promgc::this_host();
    // beyond pid_max: no such process
    let gone = textdir
        .path()
        .join(format!("rccl_telemetry_{host}_0_{}.prom", u32::MAX - 1));
    let live = textdir.path().join(format!(
        "rccl_telemetry_{host}_0_{}.prom",
        std::process::id()
    ));
    let other = textdir.path().join("node_cpu.prom");
    for f in [&gone, &live, &other] {
        std::fs::write(f, "x 1\n").unwrap();
    }
    let argv = exec_start(&service);
    assert_eq!(Path::new(&argv[0]), bin(), "{argv:?}");
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{argv:?}: {}", stderr(&out));
    assert!(!gone.exists(), "{}", stdout(&out));
    assert!(live.exists() && other.exists());
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    let test = "systemd_analyze_verify_accepts_the_units";
    if !have("systemd-analyze") {
        return skip(
            test,
            "systemd-analyze not installed (Debian package systemd)",
        );
    }
    let units = tempfile::tempdir().unwrap();
    let textdir = tempfile::tempdir().unwrap();
    let bindir = bin().parent().unwrap().to_path_buf();
    let (service, timer) = install_units(units.path(), &bindir, textdir.path());
    let verify = |paths: &[&Path]| {
        Command::new("systemd-analyze")
            .arg("verify")
            .args(paths)
            .output()
            .expect("run systemd-analyze")
    };
    let out = verify(&[&service, &timer]);
    assert!(
        out.status.success() && stderr(&out).trim().is_empty(),
        "systemd-analyze verify: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // It does look: the same units with the program missing are refused.
    let missing = tempfile::tempdir().unwrap();
    let (service, timer) = install_units(units.path(), missing.path(), textdir.path());
    let out = verify(&[&service, &timer]);
    assert!(
        !out.status.success() && stderr(&out).contains("rccl-telemetry"),
        "a missing program passed: {}",
        stderr(&out)
    );
}
