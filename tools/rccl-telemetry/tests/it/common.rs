//! Helpers shared by the integration tests.
#![allow(dead_code)]

use rccl_telemetry_tool::generate::{generate, GenOptions, Planted};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rccl-telemetry"))
}

/// Runs the binary; panics only if it cannot be started.
pub fn run(args: &[&str]) -> Output {
    let out = Command::new(bin()).args(args).output().expect("run rccl-telemetry");
    assert_ne!(out.status.code(), Some(101), "rccl-telemetry panicked: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.code().is_some(), "rccl-telemetry died from a signal");
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A generated run in a fresh temporary directory.
pub struct GenRun {
    pub dir: tempfile::TempDir,
    pub planted: Vec<Planted>,
}

impl GenRun {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn arg(&self) -> &str {
        self.dir.path().to_str().expect("utf-8 temp path")
    }
    /// The files of the run, sorted.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("rccl_telemetry_")))
            .collect();
        v.sort();
        v
    }
}

pub fn gen(o: GenOptions) -> GenRun {
    let dir = tempfile::tempdir().expect("tempdir");
    let planted = generate(dir.path(), &o).expect("generate");
    GenRun { dir, planted }
}

/// Is an external program on PATH?
pub fn have(program: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {program} >/dev/null 2>&1")).status().is_ok_and(|s| s.success())
}

#[path = "../../../../rust_tests/skip.rs"]
mod visible_skip;

/// Records a visible skip (rust_tests/skip.rs): a SKIP line on stderr and in the skip log.
/// Required under CI, which installs every tool these tests use.
pub fn skip(test: &str, why: &str) {
    visible_skip::skip(&format!("rccl-telemetry-tool::{test}"), why, false, true);
}
