//! Telemetry that survives the runs that need it most: termination signals, an earlier or a
//! later application handler, SIGKILL with interval snapshots, snapshots on demand, fork,
//! dlclose, and exit while threads still call hooks (c_tests/survive.c, c_tests/dlclose.c).

mod common;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn survive() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| c_program("survive"))
}

fn spawn(
    mode: &str,
    dir: &Path,
    env: &[(&str, &str)],
) -> (Child, BufReader<std::process::ChildStdout>) {
    let dir = dir.to_str().unwrap();
    let mut full_env = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
    ];
    full_env.extend_from_slice(env);
    let mut child = command(survive(), &[mode], &full_env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n", "{mode}");
    (child, out)
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

fn wait(mut child: Child, out: &mut BufReader<std::process::ChildStdout>) -> (ExitStatus, String) {
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(out, &mut rest).unwrap();
    (status, rest)
}

fn term_signal(s: &ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(s)
}

/// The one file in `dir`, valid against the schema, with traffic counted.
fn the_file(dir: &Path) -> Value {
    let files = telemetry_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let v = load_valid(&files[0]);
    assert!(u(&v["devices"][0]["channels"][0]["num_wqe_sent"]) > 0);
    v
}

#[test]
fn each_termination_signal_leaves_the_final_file() {
    for (sig, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGQUIT, "SIGQUIT"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let (child, mut out) = spawn("busy", d.path(), &[]);
        signal(&child, sig);
        let (status, _) = wait(child, &mut out);
        // The default action still happens: the process dies of the signal.
        assert_eq!(term_signal(&status), Some(sig), "{name}: {status:?}");
        let v = the_file(d.path());
        assert_eq!(
            (v["final"].as_bool(), v["trigger"].as_str()),
            (Some(true), Some(name))
        );
    }
}

/// A SIGTERM aimed at the thread inside rcclTelemetryCommFinalize (raised there, while it
/// holds the section every file write needs; the test fault `finalize_sigterm`) waits until
/// the call is out of it: the file is written, no temporary is left, and the process dies of
/// the signal. c_tests/comm_sim.c `two` finalizes communicator A, then would go on.
#[test]
fn a_sigterm_inside_comm_finalize_still_leaves_the_file() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let o = run(
        &c_program("comm_sim"),
        &["two"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir),
            ("RCCL_TELEMETRY_TEST_FAULT", "finalize_sigterm"),
        ],
    );
    assert_eq!(
        term_signal(&o.status),
        Some(libc::SIGTERM),
        "{}",
        stderr(&o)
    );
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "a temporary was left: {names:?}"
    );
    let files = telemetry_files(d.path());
    assert_eq!(files.len(), 1, "{names:?}\n{}", stderr(&o));
    let v = load_valid(&files[0]);
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("SIGTERM"))
    );
    // A's counts are in the file, folded into its record: the finalization completed first.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("\"finalized_comms\""), "{text}");
}

#[test]
fn signals_off_means_no_handler() {
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("busy", d.path(), &[("RCCL_TELEMETRY_SIGNALS", "0")]);
    signal(&child, libc::SIGTERM);
    let (status, _) = wait(child, &mut out);
    assert_eq!(term_signal(&status), Some(libc::SIGTERM));
    assert!(telemetry_files(d.path()).is_empty());
}

#[test]
fn an_earlier_handler_is_chained_to() {
    // It calls exit(): our snapshot is written first, then the exit handler writes the final.
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("own-handler-exit", d.path(), &[]);
    signal(&child, libc::SIGTERM);
    let (status, rest) = wait(child, &mut out);
    assert_eq!(status.code(), Some(7), "{status:?}");
    assert!(rest.contains("own handler called"));
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("exit"))
    );

    // It calls _exit(): no exit handler runs, so the snapshot taken before it is what is left.
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("own-handler-_exit", d.path(), &[]);
    signal(&child, libc::SIGTERM);
    let (status, rest) = wait(child, &mut out);
    assert_eq!(status.code(), Some(9), "{status:?}");
    assert!(rest.contains("own handler called"));
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(false), Some("SIGTERM"))
    );
}

#[test]
fn a_later_handler_keeps_working() {
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("late-handler", d.path(), &[]);
    signal(&child, libc::SIGTERM);
    let (status, rest) = wait(child, &mut out);
    assert!(
        rest.contains("late handler called") && rest.contains("stopped"),
        "{rest}"
    );
    assert_eq!(status.code(), Some(5));
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("exit"))
    );
}

#[test]
fn sigkill_leaves_the_last_interval_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn(
        "busy",
        d.path(),
        &[("RCCL_TELEMETRY_FLUSH_INTERVAL_S", "1")],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while seen.len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(f) = telemetry_files(d.path()).first() {
            let v = load_valid(f);
            let end = v["end_time"].as_str().unwrap().to_owned();
            if seen.last() != Some(&end) {
                assert_eq!(
                    (v["final"].as_bool(), v["trigger"].as_str()),
                    (Some(false), Some("interval"))
                );
                seen.push(end);
            }
        }
    }
    assert_eq!(seen.len(), 2, "two interval snapshots within 20 s");
    signal(&child, libc::SIGKILL);
    let (status, _) = wait(child, &mut out);
    assert_eq!(term_signal(&status), Some(libc::SIGKILL));
    let v = the_file(d.path());
    assert_eq!(v["final"].as_bool(), Some(false));
    // No temporary file is left beside it either.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn snapshot_signal_writes_without_stopping_the_process() {
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn(
        "busy",
        d.path(),
        &[("RCCL_TELEMETRY_SNAPSHOT_SIGNAL", "SIGUSR1")],
    );
    signal(&child, libc::SIGUSR1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while telemetry_files(d.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(false), Some("SIGUSR1"))
    );
    // Still running: a second snapshot, then SIGTERM writes the final file.
    let first = u(&v["devices"][0]["channels"][0]["num_wqe_sent"]);
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, libc::SIGTERM);
    let (status, _) = wait(child, &mut out);
    assert_eq!(term_signal(&status), Some(libc::SIGTERM));
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("SIGTERM"))
    );
    assert!(u(&v["devices"][0]["channels"][0]["num_wqe_sent"]) > first);
}

#[test]
fn a_forked_child_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let o = run(
        survive(),
        &["fork"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
        ],
    );
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
    // The child says what it is, once, where a user sees it.
    assert_eq!(
        stderr(&o).matches("is a fork of").count(),
        1,
        "{}",
        stderr(&o)
    );
    let v = the_file(d.path());
    // The parent's file holds the parent's counts only: 1000 posts, not the child's 1000 more.
    assert_eq!(u(&v["devices"][0]["channels"][0]["num_wqe_sent"]), 1000);
    let files = telemetry_files(d.path());
    assert!(files[0]
        .to_string_lossy()
        .ends_with(&format!("_{}.json", v["process_id"])));
}

#[test]
fn exit_while_threads_call_hooks() {
    for _ in 0..5 {
        let d = tempfile::tempdir().unwrap();
        let (child, mut out) = spawn(
            "exit-racing",
            d.path(),
            &[("RCCL_TELEMETRY_SAMPLE_MS", "1")],
        );
        let (status, _) = wait(child, &mut out);
        assert_eq!(status.code(), Some(0), "{status:?}");
        let v = the_file(d.path());
        assert_eq!(v["final"].as_bool(), Some(true));
    }
}

#[test]
fn dlclose_leaves_the_library_loaded_and_working() {
    let prog = c_program("dlclose");
    let d = tempfile::tempdir().unwrap();
    let lib = lib_dir().join("librccl_telemetry.so");
    let o = run(
        &prog,
        &[lib.to_str().unwrap()],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
            ("RCCL_TELEMETRY_SAMPLE_MS", "5"),
            ("RCCL_TELEMETRY_FLUSH_INTERVAL_S", "60"),
            ("RCCL_TELEMETRY_SNAPSHOT_SIGNAL", "USR2"),
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("SIGTERM handled: 1") && text.contains("libm loaded: 1"),
        "{text} {}",
        stderr(&o)
    );
    assert_eq!(
        term_signal(&o.status),
        Some(libc::SIGTERM),
        "{text} {}",
        stderr(&o)
    );
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("SIGTERM"))
    );
    assert_eq!(u(&v["devices"][0]["channels"][0]["num_wqe_sent"]), 123 + 77);
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&dynamic.stdout).contains("NODELETE"),
        "the library is not linked -z nodelete"
    );
}

/// Reads stdout lines until `want`.
fn read_until(out: &mut BufReader<std::process::ChildStdout>, want: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no '{want}' line");
        if line.trim_end() == want {
            return;
        }
    }
}

#[test]
fn an_application_that_sigwaits_gets_its_signal() {
    // Our threads block every signal: the kernel can only deliver SIGTERM to sigwait.
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("sigwait", d.path(), &[]);
    read_until(&mut out, "blocked");
    signal(&child, libc::SIGTERM);
    let (status, rest) = wait(child, &mut out);
    assert!(rest.contains("sigwait got SIGTERM"), "{rest}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("exit"))
    );
}

#[test]
fn a_termination_signal_during_the_final_write_lets_it_finish() {
    // 32x128x16 slots: the write takes long enough for the signal to land in it.
    for (i, delay_ms) in [0u64, 5, 20, 50, 100, 200].iter().enumerate() {
        let d = tempfile::tempdir().unwrap();
        let (child, mut out) = spawn("flush-big", d.path(), &[]);
        read_until(&mut out, "flushing");
        std::thread::sleep(Duration::from_millis(*delay_ms));
        signal(
            &child,
            if i % 2 == 0 {
                libc::SIGTERM
            } else {
                libc::SIGINT
            },
        );
        let (status, _) = wait(child, &mut out);
        assert!(
            term_signal(&status).is_some(),
            "try {i}: it still dies of the signal: {status:?}"
        );
        let files = telemetry_files(d.path());
        assert_eq!(files.len(), 1, "try {i} ({delay_ms} ms): {files:?}");
        let v = load_valid(&files[0]);
        assert_eq!(v["final"].as_bool(), Some(true), "try {i}");
        assert_eq!(v["devices"].as_array().unwrap().len(), 32);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }
}

#[test]
fn every_entry_point_is_inert_after_flush_and_the_file_is_not_rewritten() {
    let d = tempfile::tempdir().unwrap();
    let o = run(
        survive(),
        &["after-flush"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = the_file(d.path());
    assert_eq!(
        (v["final"].as_bool(), v["trigger"].as_str()),
        (Some(true), Some("rcclTelemetryFlush"))
    );
    assert_eq!(
        v["devices"].as_array().unwrap().len(),
        1,
        "no device registered after Flush"
    );
    let ch = &v["devices"][0]["channels"][0];
    assert_eq!(
        u(&ch["num_wqe_sent"]),
        100,
        "nothing counted after Flush reached the file"
    );
    assert_eq!(v["devices"][0]["tx_bytes"], 0);
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let o = run(
        survive(),
        &["after-flush"],
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", d.path().to_str().unwrap()),
        ],
    );
    assert!(o.status.success());
    let f = &telemetry_files(d.path())[0];
    assert_eq!(
        std::fs::metadata(f).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_final_name_taken_by_something_else_gets_the_fallback_name_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let (child, mut out) = spawn("busy", d.path(), &[]);
    // The rank's own final name, planted as a directory (as another user's file in a sticky
    // /tmp would be: rename cannot replace it).
    let host = {
        let mut b = [0u8; 256];
        // SAFETY: b is writable.
        unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) };
        String::from_utf8_lossy(&b[..b.iter().position(|&c| c == 0).unwrap()]).into_owned()
    };
    // SAFETY: getuid cannot fail.
    let name = format!(
        "rccl_telemetry_{host}_{}_{}.json",
        unsafe { libc::getuid() },
        child.id()
    );
    std::fs::create_dir(d.path().join(&name)).unwrap();
    // And the temporary names the library used to predict.
    for k in 0..4 {
        std::fs::write(
            d.path().join(format!(".{name}.{}.{k}.tmp", child.id())),
            "planted",
        )
        .unwrap();
    }
    signal(&child, libc::SIGTERM);
    let mut err = String::new();
    let mut child = child;
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let (status, _) = wait(child, &mut out);
    assert_eq!(term_signal(&status), Some(libc::SIGTERM));
    let stem = name.trim_end_matches(".json");
    let alt: Vec<_> = telemetry_files(d.path())
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(alt.len(), 1, "{alt:?}");
    let alt_name = alt[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        alt_name.starts_with(&format!("{stem}.")) && alt_name.ends_with(".json"),
        "{alt_name}"
    );
    let v = load_valid(&alt[0]);
    assert_eq!(v["final"].as_bool(), Some(true));
    assert!(
        err.contains("could not be taken") && err.contains(&alt_name),
        "{err}"
    );
}
