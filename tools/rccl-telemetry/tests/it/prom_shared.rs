//! The library's live textfile and `export --format prometheus` are one definition: a child
//! process drives the library's C ABI, renders its live series (channel and QP depth) and
//! writes its textfile, then flushes its JSON file; the tool's export of that JSON file must
//! be the same text, line for line, but for the time each was taken and the tool's run-wide
//! families.

use crate::common::*;
use rccl_telemetry::capi::*;
use rccl_telemetry_format::promtext::Level;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHILD: &str = "RCCL_TELEMETRY_TOOL_TEST_PROM_DIR";
const HANG: &str = "RCCL_TELEMETRY_TOOL_TEST_PROM_HANG";

#[test]
#[ignore = "a helper: the_live_textfile_and_the_export_are_the_same_text runs it as a child process"]
fn child_prom_rank() {
    let dir = PathBuf::from(std::env::var(CHILD).expect("run by the parent test"));
    assert_eq!(rcclTelemetryInit(), 0);
    assert_eq!(rcclTelemetryOn(), 1);
    let transport = CString::new("IB-CAST").unwrap();
    for dev in 0..2 {
        let name = CString::new(format!("mlx5_{dev}")).unwrap();
        assert_eq!(
            unsafe { rcclTelemetryRegisterDevice(dev, name.as_ptr(), transport.as_ptr()) },
            dev
        );
    }
    for ch in 0..2 {
        let mut n = 0;
        let first = unsafe { rcclTelemetrySetupChannel(0, ch, 3, &mut n) };
        assert!(first >= 0 && n == 3);
        for q in 0..3 {
            rcclTelemetrySetQpRole(0, ch, first + q, (q < 2) as i32);
        }
        let qps: Vec<_> = (0..3)
            .map(|q| rcclTelemetryResolveQp(0, ch, first + q))
            .collect();
        let chan = rcclTelemetryResolveChannel(0, ch);
        for r in 0..(50 + 25 * ch as u64) {
            unsafe {
                rcclTelemetryQpRecvPosted(qps[(r % 2) as usize]);
                rcclTelemetryQpCtsSent(qps[2], (r % 3 == 0) as i32);
                if r % 7 == 0 {
                    rcclTelemetryQpSlotMiss(qps[2]);
                }
                let ts = rcclTelemetryPostTs(qps[0]);
                rcclTelemetryQpSendPosted(qps[0], (r % 2) as i32);
                rcclTelemetryQpWqeComplete(qps[0], ts);
                rcclTelemetryBytes(0, 1, 4096 * (r + 1));
                rcclTelemetryBytes(0, 0, 1000);
                rcclTelemetryChRequestCompleted(chan);
            }
        }
        rcclTelemetryAddCqPolls(0, 77);
    }
    rcclTelemetryCqError(0);
    // Nothing moves from here on: the live renderings and the JSON file see the same slots.
    std::fs::write(
        dir.join("live_channel.txt"),
        rccl_telemetry::textfile::render_now(Level::Channel),
    )
    .unwrap();
    std::fs::write(
        dir.join("live_qp.txt"),
        rccl_telemetry::textfile::render_now(Level::Qp),
    )
    .unwrap();
    let written = rccl_telemetry::textfile::write_now().expect("the textfile");
    assert_eq!(written.parent(), Some(dir.as_path()));
    std::fs::copy(&written, dir.join("live_file.txt")).unwrap();
    if std::env::var_os(HANG).is_some() {
        println!("PROM-RANK-READY");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1)); // until SIGKILL
        }
    }
    assert_eq!(rcclTelemetryFlush(), 0);
    assert!(!written.exists(), "the textfile outlived the final write");
}

/// The lines that must agree: the timestamp gauge's value masked, the tool's run-wide families dropped.
fn comparable(text: &str) -> Vec<String> {
    let run_wide = [
        "rccl_telemetry_ranks",
        "rccl_telemetry_files_skipped",
        "rccl_telemetry_run_start_timestamp_seconds",
        "rccl_telemetry_run_end_timestamp_seconds",
    ];
    text.lines()
        .filter(|l| {
            let name = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .unwrap_or(l);
            let name = name.split(['{', ' ']).next().unwrap_or("");
            !run_wide.contains(&name)
        })
        .map(|l| {
            if l.starts_with("rccl_telemetry_last_write_timestamp_seconds{") {
                format!("{} <time>", l.rsplit_once(' ').unwrap().0)
            } else {
                l.to_owned()
            }
        })
        .collect()
}

fn export(dir: &Path, level: &str) -> String {
    let out = run(&[
        "export",
        "--format",
        "prometheus",
        "--level",
        level,
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
}

fn child(dir: &Path, sysfs: &Path) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(&exe);
    cmd.args([
        "--exact",
        "prom_shared::child_prom_rank",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, dir)
    .env("RCCL_TELEMETRY_ENABLE", "1")
    .env("RCCL_TELEMETRY_OUTPUT_DIR", dir)
    .env("RCCL_TELEMETRY_PROMETHEUS_DIR", dir)
    .env("RCCL_TELEMETRY_SYSFS_ROOT", sysfs)
    .env_remove(HANG)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for v in rccl_telemetry::textfile::RANK_VARS {
        cmd.env_remove(v); // the JSON file has no rank: the library must not add one here
    }
    cmd
}

#[test]
fn the_live_textfile_and_the_export_are_the_same_text() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let out = child(dir.path(), sysfs.path()).output().unwrap();
    assert!(
        out.status.success(),
        "child: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();

    let live = comparable(&read("live_channel.txt"));
    assert!(
        live.len() > 100
            && live
                .iter()
                .any(|l| l.starts_with("rccl_telemetry_channel_slot_misses_total{")),
        "{live:#?}"
    );
    assert_eq!(
        comparable(&read("live_file.txt")),
        live,
        "the file is the channel-depth rendering"
    );
    let exported = comparable(&export(dir.path(), "channel"));
    assert_eq!(
        exported, live,
        "export --level channel differs from the live textfile"
    );
    let exported_qp = comparable(&export(dir.path(), "qp"));
    assert_eq!(
        exported_qp,
        comparable(&read("live_qp.txt")),
        "export --level qp differs from the live per-QP textfile"
    );
    // The default depth of the export is the textfile's.
    let out = run(&[
        "export",
        "--format",
        "prometheus",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(comparable(&stdout(&out)), live);
}

#[test]
fn prom_gc_removes_the_file_of_a_killed_rank_and_keeps_a_live_one() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    /// Kills the hanging child even when an assertion fails first.
    struct Reaper(std::process::Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut c = Reaper(
        child(dir.path(), sysfs.path())
            .env(HANG, "1")
            .spawn()
            .unwrap(),
    );
    // The harness prints its own lines first (and "test ... " before the ready line).
    let mut out = std::io::BufReader::new(c.0.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("PROM-RANK-READY") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before it was ready"
        );
    }
    let prom: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "prom"))
        .collect();
    assert_eq!(prom.len(), 1);
    // A file a live rank owns: this test process's pid, on this host.
    let host = rccl_telemetry_tool::promgc::this_host();
    let live = dir.path().join(format!(
        "rccl_telemetry_{host}_0_{}.prom",
        std::process::id()
    ));
    std::fs::write(&live, "x 1\n").unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["prom-gc", d]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).is_empty(),
        "nothing is stale while the rank runs: {}",
        stdout(&out)
    );
    // SIGKILL: the library cannot remove its file. The rank is not reaped yet (a launcher
    // waits for it when it gets round to it): a zombie, whose file must go all the same.
    c.0.kill().unwrap();
    let stat = format!("/proc/{}/stat", c.0.id());
    let zombie = || {
        std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    for _ in 0..1000 {
        if zombie() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(zombie(), "the killed rank never showed as a zombie");
    assert!(prom[0].exists());
    let dry = run(&["prom-gc", "--dry-run", d]);
    assert!(stdout(&dry).contains("would remove") && prom[0].exists());
    let out = run(&["prom-gc", d]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains(&prom[0].display().to_string()) && said.contains("not running"),
        "{said}"
    );
    assert!(!prom[0].exists() && live.exists());
    c.0.wait().unwrap();
}
