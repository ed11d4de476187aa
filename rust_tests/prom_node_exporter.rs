//! The live Prometheus textfile with the real thing: Debian's prometheus-node-exporter on a
//! loopback port collects RCCL_TELEMETRY_PROMETHEUS_DIR with its textfile collector while a
//! C rank (c_tests/prom_rank.c) runs with traffic; its series are scraped from /metrics with
//! the expected values and labels, `promtool check metrics` accepts the file, and after
//! SIGTERM the series are gone from the next scrape. Also: an unusable directory is one line
//! and nothing else, SIGKILL leaves a file whose timestamp stops moving, and the real
//! Prometheus server, scraping node_exporter with the shipped rules
//! (packaging/prometheus/), fires and resolves the stall alert around a stalled QP.

mod common;
#[path = "skip.rs"]
mod skip;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REQUESTS: u64 = 200;
const RANK_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "RANK",
];

fn which(p: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(p))
            .find(|f| f.is_file())
    })
}

/// Kills the child when dropped (a failing assertion must not leave node_exporter running).
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET /metrics over plain HTTP/1.0; None while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let (head, rest) = body.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.")
        .then(|| rest.to_owned())
        .filter(|_| head.contains(" 200 "))
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the one series named `name` whose labels include every `want` pair.
fn value(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let hits: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| {
            want.iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert!(
        hits.len() <= 1,
        "{name} {want:?} matches {} series",
        hits.len()
    );
    hits.first().copied()
}

/// c_tests/prom_rank.c, compiled once per test binary (the tests run in parallel).
fn prom_rank() -> &'static Path {
    static PROG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROG.get_or_init(|| c_program("prom_rank"))
}

fn rank(
    prom_dir: &Path,
    out_dir: &Path,
    sysfs: &Path,
    extra: &[(&str, &str)],
) -> (Child, BufReader<std::process::ChildStdout>) {
    let prog = prom_rank();
    let mut env = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", out_dir.to_str().unwrap()),
        ("RCCL_TELEMETRY_PROMETHEUS_DIR", prom_dir.to_str().unwrap()),
        ("RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S", "1"),
        // No NIC under this root: every hardware counter is unavailable.
        ("RCCL_TELEMETRY_SYSFS_ROOT", sysfs.to_str().unwrap()),
    ];
    env.extend_from_slice(extra);
    let mut cmd = command(prog, &[&REQUESTS.to_string()], &env);
    for v in RANK_VARS {
        if !extra.iter().any(|(k, _)| *k == v) {
            cmd.env_remove(v);
        }
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, out)
}

fn prom_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "prom"))
        .collect();
    v.sort();
    v
}

/// node_exporter with only its textfile collector, reading `textdir`, on a free loopback port;
/// killed when the returned guard drops.
fn start_exporter(exporter: &Path, textdir: &Path) -> (u16, Reaper) {
    let port = free_port();
    let child = Command::new(exporter)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--collector.disable-defaults")
        .arg("--collector.textfile")
        .arg(format!(
            "--collector.textfile.directory={}",
            textdir.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (port, Reaper(child))
}
/// promtool accepts the textfile as written (and rejects a broken one, or this proves nothing).
fn promtool_accepts(promtool: &Path, file: &Path) {
    let check = |bytes: &[u8]| {
        let mut c = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(bytes).unwrap();
        c.wait_with_output().unwrap()
    };
    let text = std::fs::read(file).unwrap();
    let o = check(&text);
    assert!(
        o.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!check(b"# TYPE x counter\nx{a=\"1\" 3\n").status.success());
}

/// The first scrape with the rank's series: its labels and mlx5_0's known values, no per-QP
/// series, no -1, a last write of now. Returns that write's time and mlx5_1's WQEs sent.
fn assert_the_first_scrape(m: &str, pid: &str) -> (f64, f64) {
    let dev0 = [("pid", pid), ("rank", "3"), ("device", "mlx5_0")];
    let bytes = (2 * REQUESTS * 65536) as f64;
    assert_eq!(
        value(m, "rccl_telemetry_tx_bytes_total", &dev0),
        Some(bytes)
    );
    assert_eq!(
        value(m, "rccl_telemetry_rx_bytes_total", &dev0),
        Some(bytes)
    );
    assert_eq!(
        value(m, "rccl_telemetry_wqes_sent_total", &dev0),
        Some((4 * REQUESTS) as f64)
    );
    assert_eq!(
        value(m, "rccl_telemetry_recv_wqes_posted_total", &dev0),
        Some((2 * REQUESTS) as f64)
    );
    assert_eq!(
        value(
            m,
            "rccl_telemetry_rdma_writes_total",
            &[dev0[0], dev0[2], ("immediate", "true")]
        ),
        Some((2 * REQUESTS) as f64)
    );
    assert_eq!(
        value(
            m,
            "rccl_telemetry_cts_sent_total",
            &[dev0[0], dev0[2], ("signalled", "true")]
        ),
        Some((2 * REQUESTS.div_ceil(4)) as f64)
    );
    assert_eq!(
        value(
            m,
            "rccl_telemetry_qps",
            &[dev0[0], dev0[2], ("role", "data")]
        ),
        Some(4.0)
    );
    for ch in ["0", "1"] {
        assert_eq!(
            value(
                m,
                "rccl_telemetry_channel_wqes_sent_total",
                &[dev0[0], dev0[2], ("channel", ch)]
            ),
            Some((2 * REQUESTS) as f64)
        );
        assert_eq!(
            value(
                m,
                "rccl_telemetry_channel_requests_completed_total",
                &[dev0[0], dev0[2], ("channel", ch)]
            ),
            Some(REQUESTS as f64)
        );
    }
    let count = value(m, "rccl_telemetry_wqe_completion_seconds_count", &dev0).unwrap();
    assert_eq!(
        value(
            m,
            "rccl_telemetry_wqe_completion_seconds_bucket",
            &[dev0[0], dev0[2], ("le", "+Inf")]
        ),
        Some(count)
    );
    // Per-QP series only on request; unavailable hardware counters are flagged, never -1.
    assert!(
        !m.contains("rccl_telemetry_qp_"),
        "per-QP series without RCCL_TELEMETRY_PROMETHEUS_QP=1"
    );
    assert_eq!(
        value(
            m,
            "rccl_telemetry_hw_available",
            &[dev0[0], dev0[2], ("counter", "cnp_sent")]
        ),
        Some(0.0)
    );
    assert!(
        !m.lines()
            .any(|l| l.contains(&format!("pid=\"{pid}\"")) && l.ends_with(" -1")),
        "a -1 was exported"
    );
    let t1 = value(m, "rccl_telemetry_last_write_timestamp_seconds", &[dev0[0]])
        .expect("last write gauge");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - t1).abs() < 120.0,
        "last write {t1} is not now ({now})"
    );
    let busy0 = value(
        m,
        "rccl_telemetry_wqes_sent_total",
        &[dev0[0], ("device", "mlx5_1")],
    )
    .expect("mlx5_1 is driven");
    (t1, busy0)
}

#[test]
fn node_exporter_serves_the_live_rank_and_drops_it_after_sigterm() {
    let test = "node_exporter_serves_the_live_rank_and_drops_it_after_sigterm";
    let (Some(exporter), Some(promtool)) = (which("prometheus-node-exporter"), which("promtool"))
    else {
        return skip::skip(
            test,
            "prometheus-node-exporter or promtool not installed (Debian packages prometheus-node-exporter, prometheus)",
            false,
            true,
        );
    };
    let textdir = tempfile::tempdir().unwrap();
    let outdir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let (port, exporter) = start_exporter(&exporter, textdir.path());
    let first = wait_for("node_exporter to listen", 30, || scrape(port));
    assert!(
        !first.contains("rccl_telemetry_"),
        "nothing of ours before the rank starts"
    );

    let (child, _out) = rank(
        textdir.path(),
        outdir.path(),
        sysfs.path(),
        &[("SLURM_PROCID", "3")],
    );
    let mut child = Reaper(child);
    let pid = child.0.id().to_string();
    let file = wait_for("the textfile", 30, || prom_files(textdir.path()).pop());
    let name = file.file_name().unwrap().to_str().unwrap().to_owned();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert!(
        name.starts_with("rccl_telemetry_") && name.ends_with(&format!("_{uid}_{pid}.prom")),
        "{name}"
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644,
        "node_exporter's user must read it"
    );

    promtool_accepts(&promtool, &file);

    // The scrape has our series, with the rank's labels and mlx5_0's known values.
    let m = wait_for("our series in a scrape", 30, || {
        scrape(port).filter(|m| m.contains(&format!("pid=\"{pid}\"")))
    });
    assert_eq!(
        value(&m, "node_textfile_scrape_error", &[]),
        Some(0.0),
        "node_exporter could not read the file"
    );
    let (t1, busy0) = assert_the_first_scrape(&m, &pid);
    let dev0 = [("pid", pid.as_str()), ("rank", "3"), ("device", "mlx5_0")];
    let bytes = (2 * REQUESTS * 65536) as f64;

    // Live: mlx5_1 keeps moving and the timestamp with it; mlx5_0 stays put.
    let m2 = wait_for("a newer write", 30, || {
        scrape(port).filter(|m| {
            value(m, "rccl_telemetry_last_write_timestamp_seconds", &[dev0[0]])
                .is_some_and(|t| t > t1)
        })
    });
    assert!(
        value(
            &m2,
            "rccl_telemetry_wqes_sent_total",
            &[dev0[0], ("device", "mlx5_1")]
        )
        .unwrap()
            > busy0
    );
    assert_eq!(
        value(&m2, "rccl_telemetry_tx_bytes_total", &dev0),
        Some(bytes)
    );

    // SIGTERM: the final JSON file is written, the textfile removed, the series gone.
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let status = child.0.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "the default action still ends the rank"
    );
    assert!(
        prom_files(textdir.path()).is_empty(),
        "textfile left behind: {:?}",
        prom_files(textdir.path())
    );
    let json = load_valid(&telemetry_files(outdir.path())[0]);
    assert_eq!(json["final"], true);
    let after = scrape(port).expect("scrape after SIGTERM");
    assert!(
        !after.contains(&format!("pid=\"{pid}\"")),
        "series of the ended rank still served"
    );
    assert_eq!(value(&after, "node_textfile_scrape_error", &[]), Some(0.0));
    drop(exporter);
}

#[test]
fn per_qp_series_on_request_and_a_stale_file_after_sigkill() {
    let textdir = tempfile::tempdir().unwrap();
    let outdir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let (child, _out) = rank(
        textdir.path(),
        outdir.path(),
        sysfs.path(),
        &[("RCCL_TELEMETRY_PROMETHEUS_QP", "1")],
    );
    let mut child = Reaper(child);
    let pid = child.0.id().to_string();
    let file = wait_for("the textfile", 30, || prom_files(textdir.path()).pop());
    let text = wait_for("a complete textfile", 30, || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|t| t.contains("rccl_telemetry_qp_"))
    });
    // Three QPs on each of mlx5_0's two channels; without a launcher variable, no rank label.
    let qps: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("rccl_telemetry_qp_wqes_sent_total{") && l.contains("device=\"mlx5_0\"")
        })
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    assert_eq!(qps.len(), 6, "{qps:#?}");
    assert!(
        !text.contains("rank=\""),
        "a rank label with no launcher variable set"
    );
    assert!(text.contains(&format!("pid=\"{pid}\"")));
    assert!(text.contains("role=\"cts\"") && text.contains("role=\"data\""));

    // SIGKILL: nothing runs, so the file stays; its timestamp no longer moves.
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGKILL) }, 0);
    child.0.wait().unwrap();
    let before = std::fs::read_to_string(&file).expect("the stale file is still there");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "rewritten after SIGKILL?"
    );
    assert!(before.contains("rccl_telemetry_last_write_timestamp_seconds{"));
}

#[test]
fn an_unusable_directory_is_one_line_and_the_json_file_is_still_written() {
    let outdir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let not_a_dir = outdir.path().join("plain-file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let (child, _out) = rank(&not_a_dir, outdir.path(), sysfs.path(), &[]);
    let mut child = Reaper(child);
    std::thread::sleep(Duration::from_millis(2500)); // two intervals
                                                     // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    child.0.wait().unwrap();
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("plain-file")).collect();
    assert_eq!(
        lines.len(),
        1,
        "one line at Init, and the failing writes quiet: {err}"
    );
    assert!(lines[0].contains("Prometheus directory"), "{err}");
    assert_eq!(
        load_valid(&telemetry_files(outdir.path())[0])["final"],
        true
    );
}

/// A stalled QP through the real node_exporter: with the textfile's interval at an hour, the
/// file is written because the set of stalled QPs changed; the scrape shows the device's
/// gauges and the QP's series with its labels; after the completion the series is gone from
/// the next scrape, and the final file keeps the stall's duration; one stderr line named it.
#[test]
fn a_stalled_qp_shows_in_the_scrape_and_goes_when_it_completes() {
    let test = "a_stalled_qp_shows_in_the_scrape_and_goes_when_it_completes";
    let Some(exporter) = which("prometheus-node-exporter") else {
        return skip::skip(
            test,
            "prometheus-node-exporter not installed (Debian package prometheus-node-exporter)",
            false,
            true,
        );
    };
    let textdir = tempfile::tempdir().unwrap();
    let outdir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let (port, exporter) = start_exporter(&exporter, textdir.path());
    wait_for("node_exporter to listen", 30, || scrape(port));
    let prog = prom_rank();
    let env = [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", outdir.path().to_str().unwrap()),
        (
            "RCCL_TELEMETRY_PROMETHEUS_DIR",
            textdir.path().to_str().unwrap(),
        ),
        ("RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S", "3600"),
        ("RCCL_TELEMETRY_SYSFS_ROOT", sysfs.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_STALL_MS", "300"),
    ];
    let mut cmd = command(prog, &["20", "stall"], &env);
    for v in RANK_VARS {
        cmd.env_remove(v);
    }
    let mut child = Reaper(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = child.0.id().to_string();
    let dev0 = [("pid", pid.as_str()), ("device", "mlx5_0")];
    let qp = [dev0[0], dev0[1], ("channel", "2"), ("qp", "0")];
    let m = wait_for("the stalled QP in a scrape", 30, || {
        scrape(port).filter(|m| value(m, "rccl_telemetry_stalled_qps", &dev0) == Some(1.0))
    });
    assert_eq!(value(&m, "node_textfile_scrape_error", &[]), Some(0.0));
    assert!(
        value(&m, "rccl_telemetry_qp_stalled_seconds", &qp).is_some_and(|s| s >= 0.3),
        "{m}"
    );
    assert_eq!(
        value(&m, "rccl_telemetry_qp_stall_outstanding", &qp),
        Some(1.0)
    );
    let named = [
        qp[0],
        qp[2],
        ("qp_num", "4660"),
        ("peer_gid", "fe80:0000:0000:0000:0000:0000:0000:0002"),
        ("peer_qp_num", "77"),
    ];
    assert_eq!(
        value(&m, "rccl_telemetry_qp_stall_outstanding", &named),
        Some(1.0),
        "the QP and its peer are named"
    );
    assert_eq!(
        value(&m, "rccl_telemetry_wqe_outstanding", &dev0),
        Some(1.0)
    );
    assert_eq!(
        value(
            &m,
            "rccl_telemetry_stalled_qps",
            &[dev0[0], ("device", "mlx5_1")]
        ),
        Some(0.0)
    );

    child
        .0
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"complete\n")
        .unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "completed\n");
    let m = wait_for("the stall gone from a scrape", 30, || {
        scrape(port).filter(|m| value(m, "rccl_telemetry_stalled_qps", &dev0) == Some(0.0))
    });
    assert_eq!(
        value(&m, "rccl_telemetry_qp_stalled_seconds", &qp),
        None,
        "{m}"
    );

    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    child.0.wait().unwrap();
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let named: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("rccl-telemetry: stall: "))
        .collect();
    assert_eq!(named.len(), 1, "{err}");
    assert!(named[0].contains("device 0 (mlx5_0) channel 2 QP 0 (qp_num 4660), peer gid fe80:0000:0000:0000:0000:0000:0000:0002 qp_num 77: 1 WRs outstanding"), "{}", named[0]);
    let json = load_valid(&telemetry_files(outdir.path())[0]);
    let ch2 = json["devices"][0]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == 2)
        .unwrap()
        .clone();
    let q = &ch2["queue_pairs"][0];
    assert_eq!(q["stalled"], false);
    assert!(q["longest_stall_ms"].as_u64().unwrap() >= 300, "{q}");
    assert_eq!(json["devices"][0]["num_qps_stalled"], 0);
    drop(exporter);
}

/// GET `path` from a loopback HTTP server; the body of a 200 answer, None otherwise.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let (head, rest) = body.split_once("\r\n\r\n")?;
    head.contains(" 200 ").then(|| rest.to_owned())
}

/// A PromQL expression as a query-string value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The raw samples (Prometheus's timestamp in s, value) of the one series `selector`
/// matches over the last 10 minutes; empty when none does.
fn samples(port: u16, selector: &str) -> Vec<(f64, f64)> {
    let q = urlencode(&format!("{selector}[10m]"));
    let Some(body) = http_get(port, &format!("/api/v1/query?query={q}")) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    assert!(
        result.len() <= 1,
        "{selector} matches {} series",
        result.len()
    );
    result
        .first()
        .and_then(|r| r["values"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Prometheus on loopback, scraping node_exporter every second and evaluating the shipped
/// rules every `eval` s: ready, the rules loaded, node_exporter scraped. Its port and process.
fn start_prometheus(
    prometheus: &Path,
    promdir: &Path,
    exporter_port: u16,
    eval: f64,
) -> (u16, Reaper) {
    let rules = root().join("packaging/prometheus/rccl-telemetry.rules.yml");
    let config = promdir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: {eval}s\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n",
            rules.display()
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(promdir.join("prometheus.log")).unwrap();
    let server = Reaper(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                promdir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for("Prometheus to be ready", 60, || http_get(port, "/-/ready"));
    // The shipped rules loaded, and node_exporter scraped.
    let rules_api = wait_for("the rules to load", 30, || {
        http_get(port, "/api/v1/rules").filter(|r| r.contains("RcclTelemetryQpStalled"))
    });
    assert!(!rules_api.contains("\"health\":\"err\""), "{rules_api}");
    wait_for("a scrape of node_exporter", 30, || {
        samples(port, "up{job=\"node\"}")
            .last()
            .is_some_and(|s| s.1 == 1.0)
            .then_some(())
    });
    (port, server)
}

/// The shipped stall alert on the real Prometheus server: node_exporter serves a live rank's
/// textfile, Prometheus (loopback, scraping every second, evaluating
/// packaging/prometheus/rccl-telemetry.rules.yml every EVAL s) fires RcclTelemetryQpStalled
/// for the rank's device when one of its QPs stalls, and resolves it when the QP completes.
/// "Within two evaluation intervals" is read in Prometheus's own timestamps: the first
/// scraped sample that shows the stall (or its end) against the evaluations of the ALERTS
/// series, so a slow machine delays both alike.
#[test]
fn the_stall_alert_fires_and_resolves_in_prometheus() {
    const EVAL: f64 = 2.0;
    let test = "the_stall_alert_fires_and_resolves_in_prometheus";
    let (Some(exporter), Some(prometheus)) =
        (which("prometheus-node-exporter"), which("prometheus"))
    else {
        return skip::skip(
            test,
            "prometheus-node-exporter or prometheus not installed (Debian packages prometheus-node-exporter, prometheus)",
            false,
            true,
        );
    };
    let textdir = tempfile::tempdir().unwrap();
    let outdir = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let promdir = tempfile::tempdir().unwrap();
    let (exporter_port, exporter) = start_exporter(&exporter, textdir.path());
    wait_for("node_exporter to listen", 30, || scrape(exporter_port));

    let (port, server) = start_prometheus(&prometheus, promdir.path(), exporter_port, EVAL);
    let log = || std::fs::read_to_string(promdir.path().join("prometheus.log")).unwrap_or_default();

    let env = [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", outdir.path().to_str().unwrap()),
        (
            "RCCL_TELEMETRY_PROMETHEUS_DIR",
            textdir.path().to_str().unwrap(),
        ),
        ("RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S", "1"),
        ("RCCL_TELEMETRY_SYSFS_ROOT", sysfs.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_STALL_MS", "300"),
    ];
    let mut cmd = command(prom_rank(), &["20", "stall"], &env);
    for v in RANK_VARS {
        cmd.env_remove(v);
    }
    let mut child = Reaper(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = child.0.id().to_string();
    let stalled = format!("rccl_telemetry_stalled_qps{{pid=\"{pid}\",device=\"mlx5_0\"}}");
    let firing = format!(
        "ALERTS{{alertname=\"RcclTelemetryQpStalled\",alertstate=\"firing\",pid=\"{pid}\"}}"
    );

    // Fires: the alert names the rank's device, and Prometheus's first firing evaluation is
    // within two intervals of the first sample that showed the stall.
    let stall_alerts = || {
        let body = http_get(port, "/api/v1/alerts")?;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let ours: Vec<serde_json::Value> = v["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| {
                a["labels"]["alertname"] == "RcclTelemetryQpStalled"
                    && a["labels"]["pid"] == pid.as_str()
            })
            .cloned()
            .collect();
        Some(ours)
    };
    let ours = wait_for("RcclTelemetryQpStalled to fire", 60, || {
        stall_alerts().filter(|a| !a.is_empty())
    });
    assert_eq!(ours.len(), 1, "{ours:?}");
    let a = &ours[0];
    assert_eq!(a["labels"]["device"], "mlx5_0", "{a}");
    assert_eq!(a["labels"]["severity"], "critical", "{a}");
    assert_eq!(a["state"], "firing", "{a}");
    assert!(
        a["annotations"]["summary"]
            .as_str()
            .unwrap()
            .contains("has 1 stalled QP(s)"),
        "{a}"
    );
    let seen = samples(port, &stalled);
    let first_stalled = seen.iter().find(|s| s.1 > 0.0).expect("a stalled sample").0;
    let fired = wait_for("the ALERTS series", 30, || {
        samples(port, &firing).first().copied()
    });
    assert!(
        fired.0 >= first_stalled && fired.0 - first_stalled <= 2.0 * EVAL + 1e-3,
        "first stalled sample at {first_stalled}, first firing evaluation at {}",
        fired.0
    );

    // Resolves: once the QP completes, the alert is gone within two evaluations of the
    // first sample without the stall.
    child
        .0
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"complete\n")
        .unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "completed\n");
    wait_for("RcclTelemetryQpStalled to resolve", 60, || {
        stall_alerts().filter(|a| a.is_empty())
    });
    let seen = samples(port, &stalled);
    let cleared = seen
        .iter()
        .find(|s| s.0 > first_stalled && s.1 == 0.0)
        .expect("a sample after the stall ended")
        .0;
    let last_firing = samples(port, &firing).last().expect("firing samples").0;
    assert!(
        last_firing < cleared + 2.0 * EVAL + 1e-3,
        "the stall ended in the sample at {cleared}, the alert still fired at {last_firing}"
    );
    assert!(
        !log().contains("level=error"),
        "Prometheus logged errors:\n{}",
        log()
    );
    drop(child);
    drop(server);
    drop(exporter);
}
