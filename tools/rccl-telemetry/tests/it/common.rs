//! Helpers shared by the integration tests.
#![allow(dead_code)]

use rccl_telemetry_tool::generate::{generate, GenOptions, Planted};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A file of RCCL's in-tree engine from tests/fixtures/intree (written by hand from
/// INTREE_FORMAT.md, never by our writer).
pub fn intree_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/intree")
        .join(name)
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rccl-telemetry"))
}

/// Runs the binary; panics only if it cannot be started.
pub fn run(args: &[&str]) -> Output {
    let out = Command::new(bin())
        .args(args)
        .output()
        .expect("run rccl-telemetry");
    assert_ne!(
        out.status.code(),
        Some(101),
        "rccl-telemetry panicked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.code().is_some(),
        "rccl-telemetry died from a signal"
    );
    out
}

/// Runs the binary as a terminal `columns` wide would (`None`: no COLUMNS at all); the
/// command must exit 0 or 1 (1: it found something).
pub fn run_cols(args: &[&str], columns: Option<&str>) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    match columns {
        Some(w) => c.env("COLUMNS", w),
        None => c.env_remove("COLUMNS"),
    };
    let out = c.output().expect("run rccl-telemetry");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The widest line of a text, in characters.
pub fn widest(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
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
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rccl_telemetry_"))
            })
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

/// Turns a generated run's files into version 2: each channel's linear buckets moved into
/// log-scale buckets at their midpoints (the open last bucket's completions at the channel's
/// max), as the library's `wqe_completion_log_histogram` would hold them.
pub fn to_version2(g: &GenRun) {
    use rccl_telemetry::loghist::{bucket_bounds, clamp_index, LOG_BUCKETS};
    use serde_json::Value;
    for p in g.files() {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
        let w = v["histogram_interval_ns"].as_u64().unwrap();
        v["version"] = 2.into();
        for d in v["devices"].as_array_mut().unwrap() {
            for c in d["channels"].as_array_mut().unwrap() {
                let mut counts = [0u64; LOG_BUCKETS];
                let lin = c["wqe_completion_histogram"].as_array().unwrap().clone();
                let max = c["wqe_completion_ns_max"].as_i64().unwrap();
                for (b, n) in lin.iter().enumerate() {
                    let ns = if b + 1 == lin.len() && max >= 0 {
                        max as u64
                    } else {
                        b as u64 * w + w / 2
                    };
                    counts[clamp_index(ns, LOG_BUCKETS)] += n.as_u64().unwrap();
                }
                let sparse: Vec<Value> = (0..LOG_BUCKETS)
                    .filter(|&i| counts[i] > 0)
                    .map(|i| {
                        let (lo, hi) = bucket_bounds(i);
                        serde_json::json!([
                            lo,
                            if i + 1 < LOG_BUCKETS {
                                Value::from(hi)
                            } else {
                                Value::Null
                            },
                            counts[i]
                        ])
                    })
                    .collect();
                c["wqe_completion_log_histogram"] = Value::Array(sparse);
            }
        }
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    }
}

/// Is an external program on PATH?
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success())
}

#[path = "../../../../rust_tests/skip.rs"]
mod visible_skip;

/// Records a visible skip (rust_tests/skip.rs): a SKIP line on stderr and in the skip log.
/// Required under CI, which installs every tool these tests use.
pub fn skip(test: &str, why: &str) {
    visible_skip::skip(&format!("rccl-telemetry-tool::{test}"), why, false, true);
}

/// Records a visible skip of a test whose dependency CI does not install either (e.g. pyspark):
/// never required.
pub fn skip_optional(test: &str, why: &str) {
    visible_skip::skip(&format!("rccl-telemetry-tool::{test}"), why, false, false);
}
