//! The library inside RCCL's process (c_tests/logger.c): every line goes through a logger with
//! NCCL's `ncclDebugLogger_t` signature once one is set (warnings at NCCL_LOG_WARN, the line
//! that says the signal handlers were installed at NCCL_LOG_INFO, subsystem NCCL_NET, the
//! library's file and line), back to stderr once it is removed; rcclTelemetryInit tells
//! started, off, finished (after the final file, and in a forked child) and failed apart. As
//! C, and as C++ (RCCL's language) with the cast the header documents.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::*;

fn logger_c() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| c_program("logger"))
}

/// The same program as C++17, as RCCL builds, with warnings as errors.
fn logger_cxx() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = logger_c().with_file_name("c_abi_logger_cxx");
        let lib = lib_dir();
        let status =
            std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
                .args([
                    "-std=c++17",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-O2",
                    "-x",
                    "c++",
                ])
                .arg(root().join("c_tests/logger.c"))
                .arg("-I")
                .arg(root().join("include"))
                .arg("-o")
                .arg(&out)
                .arg(format!("-L{}", lib.display()))
                .arg("-lrccl_telemetry")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .status()
                .expect("a C++ compiler (c++) is needed for this test");
        assert!(status.success(), "compiling c_tests/logger.c as C++");
        out
    })
}

fn run_logger(prog: &Path, mode: &str, env: &[(&str, &str)]) -> (Output, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut full = vec![("RCCL_TELEMETRY_OUTPUT_DIR", dir.path().to_str().unwrap())];
    full.extend_from_slice(env);
    let o = run(prog, &[mode], &full);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = stderr(&o);
    (o, out, err)
}

/// The logger's lines: (level, flags, file, line, message).
fn logged(out: &str) -> Vec<(i32, String, String, u32, String)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("LOG "))
        .map(|l| {
            let mut f = l.splitn(4, ' ');
            let level = f.next().unwrap().parse().unwrap();
            let flags = f.next().unwrap().to_owned();
            let (file, line) = f.next().unwrap().rsplit_once(':').unwrap();
            (
                level,
                flags,
                file.to_owned(),
                line.parse().unwrap(),
                f.next().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_line_goes_through_the_logger_and_init_tells_each_state() {
    for prog in [logger_c(), logger_cxx()] {
        let (o, out, err) = run_logger(
            prog,
            "on",
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_STALL_MS", "soon"),
            ],
        );
        assert!(o.status.success(), "{out}\n{err}");
        let lines = logged(&out);
        // A bad variable at Init: a warning, through the logger.
        let warn = lines
            .iter()
            .find(|l| l.4.contains("RCCL_TELEMETRY_STALL_MS"))
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!((warn.0, warn.1.as_str()), (2, "0x10"), "{warn:?}");
        assert!(warn.2.ends_with(".rs") && warn.3 > 0, "{warn:?}");
        // A normal start says nothing of its signal handlers (see the next test).
        assert!(!out.contains("signal handlers"), "{out}");
        // The first refused registration through the logger, the second on stderr.
        assert!(
            lines.iter().any(|l| l.0 == 2 && l.4 == "rccl-telemetry: rcclTelemetryRegisterDevice(0): no device name; not registered"),
            "{out}"
        );
        assert!(
            lines.iter().all(|l| l.4.starts_with("rccl-telemetry: ")),
            "{out}"
        );
        assert!(!out.contains("RegisterDevice(1)"), "{out}");
        let err_lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            err_lines[0],
            "rccl-telemetry: rcclTelemetryRegisterDevice(1): no device name; not registered",
            "{err}"
        );
        // The forked child says that it is one (on stderr: the logger was removed).
        assert!(
            err_lines[1..].iter().all(|l| l.contains("is a fork of")),
            "{err}"
        );
        // Started, then finished after Flush, and finished in a forked child.
        let results: Vec<&str> = out.lines().filter(|l| !l.starts_with("LOG ")).collect();
        assert_eq!(
            results,
            ["init 0", "flush 0", "init 2", "child init 2"],
            "{out}"
        );
    }
}

/// The signal handlers' line: information, through the logger, only under RCCL_TELEMETRY_DEBUG.
#[test]
fn the_signal_handlers_line_is_debug_information() {
    for prog in [logger_c(), logger_cxx()] {
        let (o, out, err) = run_logger(
            prog,
            "init",
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_DEBUG", "1"),
            ],
        );
        assert!(o.status.success(), "{out}\n{err}");
        let lines = logged(&out);
        // The signal handlers: one line of information (under RCCL_TELEMETRY_DEBUG).
        let sig: Vec<_> = lines
            .iter()
            .filter(|l| l.4.contains("signal handlers"))
            .collect();
        assert_eq!(sig.len(), 1, "{out}");
        assert_eq!(sig[0].0, 3);
        assert!(
            sig[0].4.starts_with(
                "rccl-telemetry: signal handlers installed for SIGTERM, SIGINT, SIGHUP, SIGQUIT: "
            ),
            "{}",
            sig[0].4
        );
        assert_eq!(err, "", "nothing on stderr with a logger");
    }
}

/// A logger that calls back into the library on every line (c_tests/logger.c `reenter`):
/// each call returns at once with what it returns while telemetry is off, from inside Init's
/// own line (said while Init holds its lock) and a refused registration's; the run completes
/// and writes its file. (A hang here is the failure: the test waits for the process.)
#[test]
fn a_logger_that_calls_back_gets_every_call_returned_at_once() {
    for prog in [logger_c(), logger_cxx()] {
        let (o, out, err) = run_logger(
            prog,
            "reenter",
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_STALL_MS", "soon"),
            ],
        );
        assert!(o.status.success(), "{out}\n{err}");
        let reentered: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("reentered "))
            .collect();
        // Init's warning and the refused registration's.
        assert_eq!(reentered.len(), 2, "{out}");
        assert!(
            reentered
                .iter()
                .all(|l| *l == "reentered init 1 flush 0 param 0 comm NULL capture -1"),
            "{out}"
        );
        let results: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("init ") || l.starts_with("flush "))
            .collect();
        assert_eq!(results, ["init 0", "flush 0"], "{out}");
        assert_eq!(err, "", "{err}");
    }
}

#[test]
fn init_says_off_and_failed_through_the_logger() {
    let (o, out, err) = run_logger(logger_c(), "init", &[]);
    assert!(o.status.success());
    assert_eq!(
        (out.as_str(), err.as_str()),
        ("init 1\n", ""),
        "off: nothing said"
    );
    let (o, out, err) = run_logger(
        logger_c(),
        "init",
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_TEST_FAULT", "init_error"),
        ],
    );
    assert!(o.status.success());
    assert!(out.ends_with("init -1\n"), "{out}");
    let lines = logged(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0].0, 2);
    assert!(
        lines[0].4.starts_with("rccl-telemetry: telemetry could not start (forced by RCCL_TELEMETRY_TEST_FAULT=init_error)"),
        "{out}"
    );
    assert_eq!(err, "", "nothing on stderr with a logger");
}
