//! What every scenario of the interposer tests shares: finding the built programs (a missing
//! one is a visible, required skip), running one under LD_PRELOAD over the fake provider and
//! validating each file it wrote against the schema, and the assertions on a file's devices,
//! QPs and counters. Separate so that each concern's module holds only its scenarios.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::skip;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub struct Bins {
    pub so: PathBuf,
    pub direct: PathBuf,
    pub nccl: PathBuf,
    pub fake_dir: PathBuf,
    pub static_app: PathBuf,
    /// The same interposer with the fake provider's cues inside its own sections.
    pub hooks: PathBuf,
}

pub fn bins(test: &str) -> Option<Bins> {
    let r = root();
    let b = Bins {
        so: r.join("target/release/librccl_telemetry_preload.so"),
        direct: r.join("build/preload/verbs_app"),
        nccl: r.join("build/preload/verbs_app_nccl"),
        fake_dir: r.join("build/preload/fakeverbs"),
        static_app: r.join("build/preload/verbs_app_static"),
        hooks: r.join("build/preload/librccl_telemetry_preload_hooks.so"),
    };
    for p in [
        &b.so,
        &b.direct,
        &b.nccl,
        &b.fake_dir,
        &b.static_app,
        &b.hooks,
    ] {
        if !p.exists() {
            // `make test` builds them first: a missing one is a broken build, not an
            // environment this machine lacks.
            skip::skip(
                test,
                &format!(
                    "{} missing: run `make preload preload-test-bins`",
                    p.display()
                ),
                true,
                true,
            );
            return None;
        }
    }
    Some(b)
}

pub fn schema() -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let s: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("schema/rccl_telemetry.schema.json")).unwrap(),
        )
        .unwrap();
        jsonschema::validator_for(&s).expect("the schema compiles")
    })
}

pub struct Run {
    /// The program's own account (its last stdout line).
    pub said: Value,
    /// The telemetry files written.
    pub files: Vec<Value>,
    pub stderr: String,
}

pub fn run(app: &Path, b: &Bins, args: &[&str], env: &[(&str, &str)], enable: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(app);
    c.args(args)
        .env("LD_PRELOAD", &b.so)
        .env("LD_LIBRARY_PATH", &b.fake_dir)
        .env("RCCL_TELEMETRY_OUTPUT_DIR", dir.path())
        .env("RCCL_TELEMETRY_SIGNALS", "0")
        .env_remove("RCCL_TELEMETRY_LATENCY_SAMPLE")
        .env_remove("RCCL_TELEMETRY_ENABLE");
    if enable {
        c.env("RCCL_TELEMETRY_ENABLE", "1");
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\nstdout: {stdout}\nstderr: {stderr}",
        app.display(),
        out.status
    );
    let said = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{stdout}: {e}"));
    let mut files = vec![];
    let mut paths: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in paths {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let errors: Vec<String> = schema()
            .iter_errors(&v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} violates the schema:\n{}",
            p.display(),
            errors.join("\n")
        );
        files.push(v);
    }
    Run {
        said,
        files,
        stderr,
    }
}

pub fn only(r: &Run) -> &Value {
    assert_eq!(r.files.len(), 1, "one file expected; stderr: {}", r.stderr);
    &r.files[0]
}

pub fn dev(f: &Value, id: u64) -> &Value {
    f["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device_id"] == id)
        .unwrap_or_else(|| panic!("no device {id}"))
}

pub fn qps(d: &Value) -> &Vec<Value> {
    let ch = d["channels"].as_array().unwrap();
    assert_eq!(
        ch.len(),
        1,
        "the interposer's QPs sit in one unknown channel"
    );
    assert!(ch[0]["id"].is_null());
    ch[0]["queue_pairs"].as_array().unwrap()
}

/// Asserts the listed keys of a QP (or device) object; every other counter of the QP is 0.
pub fn expect(what: &str, o: &Value, want: &[(&str, u64)]) {
    for (k, v) in want {
        assert_eq!(o[*k], *v, "{what}: {k} (in {o})");
    }
    const COUNTERS: &[&str] = &[
        "num_wqe_sent",
        "num_recv_wqe",
        "num_wqe_rcvd",
        "num_wqe_completed",
        "num_write_wqe",
        "num_write_imm_wqe",
        "num_send_wqe",
        "num_read_wqe",
        "num_atomic_wqe",
        "num_other_wqe",
        "num_wqe_retired_unsignalled",
        "num_wqe_track_full",
        "num_cts_sent",
        "num_slot_miss",
    ];
    if o.get("num_wqe_sent").is_some() {
        for k in COUNTERS {
            if !want.iter().any(|(w, _)| w == k) {
                assert_eq!(o[*k], 0, "{what}: {k} (in {o})");
            }
        }
    }
}

pub fn sizes(d: &Value) -> Vec<(u64, u64)> {
    d["wqe_size_stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["max_wqe_size"].as_u64().unwrap(),
                s["num_wqe"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub fn polls(r: &Run, dev: usize) -> u64 {
    r.said["polls"][dev].as_u64().unwrap()
}

/// The counters of a file without what varies run to run (times, pid, latencies).
pub fn counters(f: &Value) -> Value {
    let mut f = f.clone();
    for k in ["start_time", "end_time", "process_id", "process_name"] {
        f.as_object_mut().unwrap().remove(k);
    }
    for d in f["devices"].as_array_mut().unwrap() {
        // Latencies are real time: their buckets differ run to run (the totals are checked).
        d.as_object_mut()
            .unwrap()
            .remove("wqe_completion_log_histogram");
        for c in d["channels"].as_array_mut().unwrap() {
            let strip = |o: &mut serde_json::Map<String, Value>| {
                for k in [
                    "wqe_completion_ns_min",
                    "wqe_completion_ns_max",
                    "wqe_completion_histogram",
                    "wqe_completion_log_histogram",
                    // wall-clock readings (the stall detector's checks, the first error)
                    "last_post_time",
                    "last_completion_time",
                ] {
                    o.remove(k);
                }
                if let Some(e) = o.get_mut("first_cq_error").and_then(Value::as_object_mut) {
                    e.remove("time");
                    e.remove("age_ms");
                }
            };
            strip(c.as_object_mut().unwrap());
            for q in c["queue_pairs"].as_array_mut().unwrap() {
                strip(q.as_object_mut().unwrap());
            }
        }
    }
    f
}

pub fn hist_sum(q: &Value) -> u64 {
    q["wqe_completion_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}
