//! Helpers shared by the integration tests: find the C programs of c_tests/ that make built
//! against the library exactly as RCCL would (the committed header, the shared object with
//! its symbol versions), run them, and check what they wrote against the committed JSON Schema.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `make lib` links the library and `make test-bins` puts the C programs.
fn release_dir() -> PathBuf {
    root().join("target/release")
}

fn mtime(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
}

/// The newest modification time under `dir` (recursively), or of the file itself.
fn newest(p: &Path) -> std::time::SystemTime {
    let mut t = mtime(p);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            t = t.max(newest(&e.path()));
        }
    }
    t
}

/// The sources of the shared object: every directory of `src/` (the version script
/// included), the format crate's, and the build script; then the staticlib cargo built
/// from them, which `make lib` links.
pub const LIB_INPUTS: &[&str] = &[
    "src",
    "format/src",
    "build.rs",
    "target/release/librccl_telemetry.a",
];

/// The directory of the shared object `make lib` links (`librccl_telemetry.so` and its SONAME
/// link): the C programs run with it. `cargo test` builds the Rust side only; the library and
/// the C programs are make's (`make test-bins`, which `make test` runs first), and a test
/// refuses a library older than any of its sources rather than silently test old code.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = release_dir();
        let so = dir.join("librccl_telemetry.so");
        assert!(
            so.exists(),
            "{} was not built: run `make test-bins` first (`make test` does)",
            so.display()
        );
        let built = mtime(&so);
        for input in LIB_INPUTS {
            assert!(
                built >= newest(&root().join(input)),
                "{} is older than {input}: run `make test-bins` first (`make test` does)",
                so.display()
            );
        }
        dir
    })
}

/// A C test program as make builds it (`make test-bins`): build/<name>, from
/// c_tests/<name>.c, or from c_tests/<base>.c with the inline hooks off for <base>_calls,
/// with the header's stubs for <base>_stubs and its loader for <base>_dlopen.
/// Refused when missing or older than its source or the header.
pub fn c_program(name: &str) -> PathBuf {
    lib_dir();
    let prog = root().join("build").join(name);
    let base = ["_calls", "_dlopen", "_stubs"]
        .iter()
        .fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
    let src = root().join("c_tests").join(format!("{base}.c"));
    assert!(
        prog.exists(),
        "{} was not built: run `make test-bins` first (`make test` does)",
        prog.display()
    );
    for input in [src, root().join("include/rccl_telemetry.h")] {
        assert!(
            mtime(&prog) >= mtime(&input),
            "{} is older than {}: run `make test-bins` first (`make test` does)",
            prog.display(),
            input.display()
        );
    }
    prog
}

pub fn ibcast_sim() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| c_program("ibcast_sim"))
}

/// A command for `prog` with a clean RCCL_TELEMETRY_* environment plus `env`.
pub fn command(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(prog);
    c.args(args);
    // The termination signals as a program started from a shell has them: a test run in the
    // background of a non-interactive shell inherits SIGINT and SIGQUIT ignored, and the
    // library rightly leaves an ignored signal alone, which would change what it says.
    // SAFETY: signal() is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("RCCL_TELEMETRY_") {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Runs a program with a clean RCCL_TELEMETRY_* environment plus `env`.
pub fn run(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    command(prog, args, env).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The telemetry files in a directory.
pub fn telemetry_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rccl_telemetry_")
        })
        .collect();
    v.sort();
    v
}

pub fn schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let s: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("schema/rccl_telemetry.schema.json")).unwrap(),
        )
        .unwrap();
        jsonschema::validator_for(&s).expect("the schema compiles")
    })
}

/// Reads a telemetry file, checks it against the schema, and returns it.
pub fn load_valid(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    let errors: Vec<String> = schema()
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} violates the schema:\n{}",
        path.display(),
        errors.join("\n")
    );
    v
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}
