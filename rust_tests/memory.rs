//! No abort, whatever memory does (c_tests/memory_limit.c under `ulimit -v`): a SetupChannel
//! of INT_MAX QPs is refused with one line and the file is written; a process that has used
//! up every byte its limit allows still writes its file (from Flush, or from the exit
//! handler), says in one line each what it dropped, and exits with its own status.

mod common;
#[path = "skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

/// The limit: `ulimit -v 1500000` (KiB).
const LIMIT_KIB: &str = "1500000";

/// Runs memory_limit with `args` under the limit, in `dir`; None (a visible skip) when the
/// shell cannot set the limit.
fn run_limited(test: &str, args: &[&str], dir: &Path) -> Option<Output> {
    static PROG: OnceLock<PathBuf> = OnceLock::new();
    let prog = PROG.get_or_init(|| c_program("memory_limit"));
    let probe = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -v {LIMIT_KIB}")])
        .status()
        .unwrap();
    if !probe.success() {
        skip::skip(test, "the shell cannot set ulimit -v here", false, true);
        return None;
    }
    let script = format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\"");
    let mut sh_args = vec!["-c", &script, prog.to_str().unwrap()];
    sh_args.extend_from_slice(args);
    let out = command(
        Path::new("sh"),
        &sh_args,
        &[
            ("RCCL_TELEMETRY_ENABLE", "1"),
            ("RCCL_TELEMETRY_OUTPUT_DIR", dir.to_str().unwrap()),
        ],
    )
    .output()
    .unwrap();
    Some(out)
}

fn the_file(dir: &Path) -> Value {
    let files = telemetry_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    load_valid(&files[0])
}

fn lines(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), stderr(o))
}

#[test]
fn a_setup_of_int_max_qps_is_refused_in_one_line_and_the_file_written() {
    let dir = tempfile::tempdir().unwrap();
    let Some(o) = run_limited("memory::int_max", &["huge"], dir.path()) else {
        return;
    };
    let (out, err) = lines(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_eq!(out, "granted 0\nflush 0\n", "{err}");
    let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(
        refusals,
        ["rccl-telemetry: rcclTelemetrySetupChannel(0, 1, 2147483647): refused, more than 65536 QPs in one call; they are counted in num_qp_untracked (later refusals are counted without a line)"],
        "{err}"
    );
    let others: Vec<&str> = err.lines().filter(|l| !l.contains("refused")).collect();
    assert!(others.is_empty(), "nothing else is said: {err}");
    let f = the_file(dir.path());
    let ch = &f["devices"][0]["channels"][0];
    assert_eq!(ch["id"], 1);
    assert_eq!(ch["num_qp_untracked"], 2_147_483_647u64);
    assert_eq!(ch["queue_pairs"].as_array().unwrap().len(), 0);
    assert_eq!(f["devices"][0]["num_qp_untracked"], 2_147_483_647u64);
}

fn exhausted(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let test = format!("memory::exhausted_{mode}");
    let Some(o) = run_limited(&test, &["exhaust", mode], dir.path()) else {
        return;
    };
    let (out, err) = lines(&o);
    // The program's own status, not an abort (134) nor a signal.
    assert_eq!(o.status.code(), Some(42), "{out}\n{err}");
    let granted: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("granted "))
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    assert!(granted < 65536, "memory was left: {out}");
    if mode == "flush" {
        assert!(out.contains("flush 0\n"), "{out}\n{err}");
    }
    // The last channel could not be created, or got fewer slots than it asked for.
    let created = !err.contains("rccl-telemetry: out of memory: rcclTelemetrySetupChannel(0, 3, 65536): the channel could not be created; its 65536 QPs are counted in the device's num_qp_untracked (later shortfalls are counted without a line)");
    if created {
        let line = format!("rccl-telemetry: out of memory: rcclTelemetrySetupChannel(0, 3, 65536): granted {granted} of 65536 QP slots; the other {} are counted in num_qp_untracked (later shortfalls are counted without a line)", 65536 - granted);
        assert!(err.contains(&line), "not said: {line}\n{err}");
    }
    for said in [
        "rccl-telemetry: telemetry file: not enough memory to hold one read of the QPs of ",
        "rccl-telemetry: memory ran out: ",
    ] {
        assert!(err.contains(said), "not said: {said}\n{err}");
    }
    assert!(
        !err.contains("internal error") && !err.contains("panicked"),
        "{err}"
    );
    // Each thing dropped is said once.
    for l in err.lines() {
        assert_eq!(err.matches(l).count(), 1, "said twice: {l}\n{err}");
    }
    let f = the_file(dir.path());
    assert_eq!(f["final"], true);
    assert_eq!(
        f["trigger"],
        if mode == "flush" {
            "rcclTelemetryFlush"
        } else {
            "exit"
        }
    );
    let d = &f["devices"][0];
    let chs = d["channels"].as_array().unwrap();
    for c in &chs[..3] {
        let qps = c["queue_pairs"].as_array().unwrap();
        assert_eq!(qps.len(), 4000);
        assert_eq!(u(&c["num_wqe_sent"]), 4000);
        assert_eq!(u(&c["num_wqe_completed"]), 4000);
        assert_eq!(u(&c["num_recv_wqe"]), 4000);
        assert_eq!((u(&c["num_data_qp"]), u(&c["num_cts_qp"])), (3000, 1000));
        assert_eq!(qps[3999]["first_cq_error"]["status"], "RETRY_EXC_ERR");
    }
    assert_eq!(chs.len(), 3 + usize::from(created));
    if created {
        assert_eq!(
            chs[3]["queue_pairs"].as_array().unwrap().len() as u64,
            granted
        );
    }
    assert_eq!(u(&d["num_qp_untracked"]), 65536 - granted);
    assert_eq!(u(&d["tx_bytes"]), 4096);
}

#[test]
fn with_every_byte_used_flush_writes_the_file_and_the_status_is_the_programs() {
    exhausted("flush");
}

#[test]
fn with_every_byte_used_the_exit_handler_writes_the_file_and_the_status_is_the_programs() {
    exhausted("exit");
}
