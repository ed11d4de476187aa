//! Helpers shared by the integration tests: build the C programs in c_tests/ against the
//! library exactly as RCCL would (the generated header, the shared object), run them, and
//! check what they wrote against the committed JSON Schema.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// target/<profile>, where cargo put the cdylib this test run was built with.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// A directory holding the library under its SONAME, as an installed copy would.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let so = profile_dir().join("librccl_telemetry.so");
        assert!(
            so.exists(),
            "{} was not built: run `cargo build --release` first (`make test` does)",
            so.display()
        );
        // cargo test builds the rlib, not the cdylib: refuse to test a shared object older
        // than the sources rather than silently test old code.
        let built = std::fs::metadata(&so).and_then(|m| m.modified()).unwrap();
        let newest_src = std::fs::read_dir(root().join("src"))
            .unwrap()
            .chain(std::fs::read_dir(root().join("src/hw")).unwrap())
            .filter_map(|e| e.ok()?.metadata().ok()?.modified().ok())
            .max()
            .unwrap();
        assert!(
            built >= newest_src,
            "{} is older than src/: run `cargo build --release` first (`make test` does)",
            so.display()
        );
        let dir = profile_dir().join("c_abi_lib");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["librccl_telemetry.so", "librccl_telemetry.so.0"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&so, &link).unwrap();
        }
        dir
    })
}

/// Compiles c_tests/<name>.c (C11, warnings as errors) once per test binary.
pub fn c_program(name: &str, extra: &[&str]) -> PathBuf {
    let out = profile_dir().join(format!(
        "c_abi_{name}{}",
        extra.join("").replace(['-', '='], "_")
    ));
    let src = root().join("c_tests").join(format!("{name}.c"));
    let lib = lib_dir();
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-g"])
        .args(extra)
        .arg("-I")
        .arg(root().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg("-lrccl_telemetry")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpthread")
        .status()
        .expect("a C compiler (cc) is needed for the C tests");
    assert!(status.success(), "compiling {}", src.display());
    out
}

pub fn ibcast_sim() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| c_program("ibcast_sim", &[]))
}

/// A command for `prog` with a clean RCCL_TELEMETRY_* environment plus `env`.
pub fn command(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(prog);
    c.args(args);
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
