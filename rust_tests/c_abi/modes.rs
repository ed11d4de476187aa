//! Telemetry optional at build and at run time: c_tests/header_modes.c, the calls RCCL makes,
//! built linked (build/header_modes), with the header's stubs and no library
//! (header_modes_stubs) and with the header's loader (header_modes_dlopen, and
//! header_modes_dlopen_calls without the inline hooks), run with the library absent, present,
//! and handing out an older or a newer table (the library's test-only
//! RCCL_TELEMETRY_TEST_API_TABLE). Each run checks its own calls' results and tally; here the
//! runs are compared with one another and with what they say.

use super::common::*;

use std::process::{Command, Output};

/// Where the loader finds the library: the directory `make lib` links it in, or nowhere.
fn with_library(c: &mut Command, present: bool) {
    if present {
        c.env("LD_LIBRARY_PATH", lib_dir());
    } else {
        c.env_remove("LD_LIBRARY_PATH");
    }
}

/// Runs a build of header_modes expecting `expect` (on, off, older, v1), checks that it passed
/// and returns its output.
fn run_mode(name: &str, args: &[&str], env: &[(&str, &str)], present: bool) -> Output {
    let mut c = command(&c_program(name), args, env);
    with_library(&mut c, present);
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("header_modes: ok"),
        "{name} {args:?} {env:?}: {out}{}",
        stderr(&o)
    );
    o
}

/// The counts line a run printed.
fn counts(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with("header_modes: counts"))
        .expect("a counts line")
        .to_owned()
}

/// The lines of the loader's own (about the library file).
fn loader_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.contains("librccl_telemetry.so.0"))
        .collect()
}

fn needs_library(name: &str) -> bool {
    let o = Command::new("readelf")
        .args(["-d"])
        .arg(c_program(name))
        .output()
        .expect("readelf (binutils) runs");
    String::from_utf8_lossy(&o.stdout).contains("librccl_telemetry")
}

#[test]
fn the_loader_counts_as_a_linked_build_does() {
    let mut lines = Vec::new();
    for (name, present) in [
        ("header_modes", true),
        ("header_modes_dlopen", true),
        ("header_modes_dlopen_calls", true),
    ] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let o = run_mode(
            name,
            &["on"],
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ],
            present,
        );
        assert!(
            loader_lines(&stderr(&o)).is_empty(),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(telemetry_files(d.path()).len(), 1, "{name} wrote its file");
        lines.push(counts(&o));
    }
    assert!(lines[0].contains("wqe_sent 1001 "), "{}", lines[0]);
    assert_eq!(lines[1], lines[0], "the loader with inline hooks");
    assert_eq!(lines[2], lines[0], "the loader without inline hooks");
    assert!(needs_library("header_modes"));
    assert!(!needs_library("header_modes_dlopen"));
    assert!(!needs_library("header_modes_dlopen_calls"));
}

#[test]
fn stubs_need_no_library_and_stay_off() {
    assert!(!needs_library("header_modes_stubs"));
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let env = [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
    ];
    for present in [false, true] {
        let o = run_mode("header_modes_stubs", &["off"], &env, present);
        assert_eq!(stderr(&o), "", "stubs say nothing");
        assert!(counts(&o).contains("wqe_sent 0 "));
    }
    assert!(telemetry_files(d.path()).is_empty());
}

#[test]
fn without_the_library_the_loader_is_off_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    for name in ["header_modes_dlopen", "header_modes_dlopen_calls"] {
        // Asked for: one warning on stderr, naming the file and why it did not load.
        let o = run_mode(
            name,
            &["off"],
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ],
            false,
        );
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with("rccl-telemetry: librccl_telemetry.so.0 could not be loaded (")
                && err.contains("telemetry is off"),
            "{err}"
        );
        // Not asked for: nothing, unless RCCL_TELEMETRY_DEBUG.
        let o = run_mode(name, &["off"], &[], false);
        assert_eq!(stderr(&o), "", "{name}");
        let o = run_mode(name, &["off"], &[("RCCL_TELEMETRY_DEBUG", "1")], false);
        assert_eq!(loader_lines(&stderr(&o)).len(), 1, "{name}: {}", stderr(&o));
        // Through the logger when one is set: a warning when asked for, else information.
        for (env, level) in [(&[("RCCL_TELEMETRY_ENABLE", "1")][..], 2), (&[][..], 3)] {
            let o = run_mode(name, &["off", "--logger"], env, false);
            assert_eq!(stderr(&o), "", "{name}");
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            let logged = loader_lines(&out);
            assert_eq!(logged.len(), 1, "{out}");
            assert!(
                logged[0].starts_with(&format!("logger: {level}: rccl-telemetry: ")),
                "{out}"
            );
        }
    }
    assert!(telemetry_files(d.path()).is_empty());
}

/// RCCL_TELEMETRY_ENABLE given with rcclTelemetrySetParam before Init, not in the environment
/// (how RCCL passes its rccl.conf values): the loader counts as a linked build does, and
/// without the library its one line is the warning of telemetry asked for.
#[test]
fn enable_given_as_a_parameter_is_as_enable_in_the_environment() {
    let mut lines = Vec::new();
    for (name, present) in [
        ("header_modes", true),
        ("header_modes_dlopen", true),
        ("header_modes_dlopen_calls", true),
    ] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let o = run_mode(
            name,
            &["on", "--enable-param"],
            &[("RCCL_TELEMETRY_OUTPUT_DIR", dir)],
            present,
        );
        assert!(
            loader_lines(&stderr(&o)).is_empty(),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(telemetry_files(d.path()).len(), 1, "{name} wrote its file");
        lines.push(counts(&o));
    }
    assert!(lines[0].contains("wqe_sent 1001 "), "{}", lines[0]);
    assert_eq!(lines[1], lines[0], "the loader with inline hooks");
    assert_eq!(lines[2], lines[0], "the loader without inline hooks");
    for name in ["header_modes_dlopen", "header_modes_dlopen_calls"] {
        let o = run_mode(name, &["off", "--enable-param"], &[], false);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with("rccl-telemetry: librccl_telemetry.so.0 could not be loaded (")
                && err.contains("telemetry is off"),
            "{name}: {err}"
        );
        let o = run_mode(name, &["off", "--logger", "--enable-param"], &[], false);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let logged = loader_lines(&out);
        assert_eq!(
            (stderr(&o).as_str(), logged.len()),
            ("", 1),
            "{name}: {out}"
        );
        assert!(
            logged[0].starts_with("logger: 2: rccl-telemetry: "),
            "{out}"
        );
        // The environment wins: RCCL_TELEMETRY_ENABLE=0 there, the parameter is not asked for.
        let o = run_mode(
            name,
            &["off", "--enable-param"],
            &[("RCCL_TELEMETRY_ENABLE", "0")],
            false,
        );
        assert_eq!(stderr(&o), "", "{name}");
    }
}

#[test]
fn an_older_table_keeps_its_common_part_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let env = [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
        ("RCCL_TELEMETRY_TEST_API_TABLE", "older"),
    ];
    // The communicator calls are off (the program checks CommInit NULL and the rest), every
    // count of the process-wide calls is exact (the program checks its tally).
    let o = run_mode("header_modes_dlopen", &["older"], &env, true);
    let err = stderr(&o);
    let said = loader_lines(&err);
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].contains("provides table version 0, this program's header version 2")
            && said[0].contains("lacks are off"),
        "{err}"
    );
    assert!(counts(&o).contains("wqe_sent 751 "), "{}", counts(&o));
    assert_eq!(telemetry_files(d.path()).len(), 1);
}

/// A library of table version 1 (before rcclTelemetrySetParam): the parameter does nothing
/// (the program checks that SIGTERM got the library's handler), every count is as linked.
#[test]
fn a_table_without_set_param_keeps_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let linked = counts(&run_mode(
        "header_modes",
        &["on"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
        ],
        true,
    ));
    for name in ["header_modes_dlopen", "header_modes_dlopen_calls"] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let env = [
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ("RCCL_TELEMETRY_TEST_API_TABLE", "v1"),
        ];
        let o = run_mode(name, &["v1"], &env, true);
        assert_eq!(counts(&o), linked, "{name}");
        let err = stderr(&o);
        let said = loader_lines(&err);
        assert_eq!(said.len(), 1, "{err}");
        assert!(
            said[0].contains("provides table version 1, this program's header version 2")
                && said[0].contains("the 2 this library lacks are off"),
            "{err}"
        );
    }
}

/// rcclTelemetrySetParam is a default the environment overrides: with RCCL_TELEMETRY_SIGNALS=1
/// in the environment the handlers are installed though the program set 0 (it checks), in
/// every build that takes parameters.
#[test]
fn the_environment_wins_over_a_parameter() {
    for (name, present) in [
        ("header_modes", true),
        ("header_modes_dlopen", true),
        ("header_modes_dlopen_calls", true),
    ] {
        for signals in ["1", "0"] {
            let d = tempfile::tempdir().unwrap();
            let dir = d.path().to_str().unwrap();
            run_mode(
                name,
                &["on"],
                &[
                    ("RCCL_TELEMETRY_ENABLE", "1"),
                    ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
                    ("RCCL_TELEMETRY_SIGNALS", signals),
                ],
                present,
            );
        }
    }
}

#[test]
fn a_newer_table_works_whole_and_says_so_only_under_debug() {
    let linked = {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let env = [
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
        ];
        counts(&run_mode("header_modes", &["on"], &env, true))
    };
    for debug in ["0", "1"] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let env = [
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ("RCCL_TELEMETRY_TEST_API_TABLE", "newer"),
            ("RCCL_TELEMETRY_DEBUG", debug),
        ];
        let o = run_mode("header_modes_dlopen", &["on"], &env, true);
        assert_eq!(counts(&o), linked);
        let err = stderr(&o);
        let said = loader_lines(&err);
        assert_eq!(said.len(), usize::from(debug == "1"), "{err}");
        assert!(said
            .iter()
            .all(|l| l.contains("table version 3") && l.contains("works")));
    }
}

/// c_tests/layout_mix.c: a component built against a header of another inline layout, in a
/// process where telemetry counts, asks for a handle through each function that hands one out.
#[test]
fn no_handle_reaches_a_component_of_another_layout() {
    for call in [
        "commInit",
        "commResolveQp",
        "commResolveChannel",
        "resolveQp",
        "resolveChannel",
    ] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_str().unwrap();
        let o = run(
            &c_program("layout_mix"),
            &[call],
            &[
                ("RCCL_TELEMETRY_ENABLE", "1"),
                ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let err = stderr(&o);
        assert!(
            o.status.success()
                && out.contains("handed the other layout nothing; telemetry stopped"),
            "{call}: {out}{err}"
        );
        let said: Vec<&str> = err.lines().filter(|l| l.contains("layout 99")).collect();
        assert_eq!(said.len(), 1, "{call}: {err}");
    }
}
