//! Every export format at every `--level`, on every file version the tool reads: version 1
//! (every plant), version 2 (log-scale histograms), version 3 (peers, a QP stalled now and one
//! whose stall ended: the stall families) and the in-tree engine's files. The Prometheus text
//! must be one exposition (each family's HELP and TYPE once, its samples together, no series
//! twice), pass `promtool check metrics` (plain and `--extended`) and be read by
//! node_exporter's textfile collector on loopback with `node_textfile_scrape_error 0`; CSV is
//! rectangular, NDJSON one object a line with the CSV's rows; every Parquet file reads back
//! with its rows. External programs missing: a visible skip (CI installs them).

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, RunKind};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The inputs: (name, directory holding the files). The generated runs live as long as the
/// returned guards.
fn inputs() -> (Vec<(&'static str, PathBuf)>, Vec<GenRun>) {
    let v1 = gen(GenOptions {
        ranks: 16,
        seed: 21,
        samples: 2,
        plants: Plant::of(RunKind::Flat),
        ..Default::default()
    });
    let v2 = gen(GenOptions {
        ranks: 12,
        seed: 22,
        plants: vec![Plant::Tail, Plant::Unavailable],
        ..Default::default()
    });
    to_version2(&v2);
    let v3 = tempfile::tempdir().unwrap();
    let out = run(&[
        "generate",
        "--peers",
        "--ranks",
        "12",
        "--plant",
        "stall,recovered_stall",
        v3.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v3 = GenRun {
        dir: v3,
        planted: Vec::new(),
    };
    let intree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/intree");
    let list = vec![
        ("v1", v1.path().to_path_buf()),
        ("v2", v2.path().to_path_buf()),
        ("v3", v3.path().to_path_buf()),
        ("intree", intree),
    ];
    (list, vec![v1, v2, v3])
}

/// The exports of one input: (what, Prometheus text).
fn prometheus_exports(dir: &Path) -> Vec<(String, String)> {
    let d = dir.to_str().unwrap();
    let mut v = Vec::new();
    for level in ["device", "channel", "qp"] {
        let out = run(&["export", "--format", "prometheus", "--level", level, d]);
        assert_eq!(out.status.code(), Some(0), "{level}: {}", stderr(&out));
        v.push((format!("--level {level}"), stdout(&out)));
    }
    let out = run(&["export", "--format", "prometheus", "--links", d]);
    assert_eq!(out.status.code(), Some(0), "--links: {}", stderr(&out));
    v.push(("--links".into(), stdout(&out)));
    v
}

/// One exposition: HELP and TYPE at most once per family and before its samples, a family's
/// samples together, no series twice. Returns the families with samples.
fn assert_one_exposition(what: &str, text: &str) -> BTreeSet<String> {
    let (mut help, mut types, mut closed) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut series = BTreeSet::new();
    let mut with_samples = BTreeSet::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        for (prefix, seen) in [("# HELP ", &mut help), ("# TYPE ", &mut types)] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let name = rest.split(' ').next().unwrap().to_string();
                assert!(seen.insert(name.clone()), "{what}: {prefix}{name} twice");
                assert!(!closed.contains(&name), "{what}: {name} split in two");
                if let Some(c) = cur.replace(name.clone()) {
                    if c != name {
                        closed.insert(c);
                    }
                }
            }
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (s, _) = line.rsplit_once(' ').expect("series value");
        assert!(series.insert(s.to_string()), "{what}: series {s} twice");
        let family = cur
            .as_deref()
            .unwrap_or_else(|| panic!("{what}: {s} has no family"));
        let name = s.split('{').next().unwrap();
        assert!(
            name == family
                || ["_bucket", "_count", "_sum"]
                    .iter()
                    .any(|x| name.strip_suffix(x) == Some(family)),
            "{what}: {name} under {family}'s header"
        );
        with_samples.insert(family.to_string());
    }
    with_samples
}

fn promtool(args: &[&str], text: &str) -> std::process::Output {
    let mut c = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    c.wait_with_output().expect("promtool")
}

#[test]
fn prometheus_export_of_every_version_is_one_exposition_promtool_accepts() {
    let (inputs, _keep) = inputs();
    let promtool_ok = have("promtool");
    let mut stall_families = 0;
    for (name, dir) in &inputs {
        for (what, text) in prometheus_exports(dir) {
            let what = format!("{name} {what}");
            let fams = assert_one_exposition(&what, &text);
            if *name == "v3" && !what.contains("links") {
                // The stalled QP is in the export, under the families once named per rank.
                for f in [
                    "rccl_telemetry_wqe_outstanding",
                    "rccl_telemetry_stalled_qps",
                    "rccl_telemetry_stalled_qp_series_dropped",
                    "rccl_telemetry_qp_stalled_seconds",
                ] {
                    assert!(fams.contains(f), "{what}: no {f}");
                }
                stall_families += 1;
            }
            if promtool_ok {
                for args in [
                    &["check", "metrics"][..],
                    &["check", "metrics", "--extended"],
                ] {
                    let o = promtool(args, &text);
                    assert!(
                        o.status.success(),
                        "{what}: promtool {args:?}:\n{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    );
                }
            }
        }
    }
    assert_eq!(stall_families, 3, "the v3 run's three levels");
    if !promtool_ok {
        return skip(
            "prometheus_export_of_every_version_is_one_exposition_promtool_accepts",
            "promtool not installed (Debian package prometheus): structure checked, promtool not run",
        );
    }
    // promtool rejects a repeated HELP, or the loop above proves nothing.
    let twice =
        "# HELP x X.\n# TYPE x gauge\nx{a=\"1\"} 1\n# HELP x X.\n# TYPE x gauge\nx{a=\"2\"} 1\n";
    assert!(!promtool(&["check", "metrics"], twice).status.success());
}

/// Kills the child when dropped.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let (head, rest) = body.split_once("\r\n\r\n")?;
    head.contains(" 200 ").then(|| rest.to_owned())
}

/// `node_textfile_scrape_error`'s value in a scrape.
fn scrape_error(m: &str) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with("node_textfile_scrape_error "))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn node_exporter_reads_the_export_of_every_version() {
    let test = "node_exporter_reads_the_export_of_every_version";
    if !have("prometheus-node-exporter") {
        return skip(
            test,
            "prometheus-node-exporter not installed (Debian package prometheus-node-exporter)",
        );
    }
    let (inputs, _keep) = inputs();
    let textdir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _exporter = Reaper(
        Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            .arg(format!(
                "--collector.textfile.directory={}",
                textdir.path().display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn node_exporter"),
    );
    let end = Instant::now() + Duration::from_secs(30);
    while scrape(port).is_none() {
        assert!(Instant::now() < end, "node_exporter never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut checked = 0;
    for (name, dir) in &inputs {
        for (what, text) in prometheus_exports(dir) {
            // One file at a time: node_exporter reads the directory on every scrape.
            let file = textdir.path().join("export.prom");
            std::fs::write(textdir.path().join(".tmp"), &text).unwrap();
            std::fs::rename(textdir.path().join(".tmp"), &file).unwrap();
            let m = scrape(port).expect("scrape");
            assert_eq!(
                scrape_error(&m),
                Some(0.0),
                "{name} {what}: node_exporter refused the export"
            );
            // And it serves our samples (the first one of the text, as written; files
            // without peers have no link to export, only the families' headers).
            match text.lines().find(|l| !l.starts_with('#') && !l.is_empty()) {
                Some(first) => {
                    let family = first.split(['{', ' ']).next().unwrap();
                    assert!(
                        m.lines().any(|l| l.starts_with(family)),
                        "{name} {what}: {family} not served"
                    );
                }
                None => assert!(
                    what == "--links" && *name != "v3",
                    "{name} {what}: no sample"
                ),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 16);
    // A broken file is refused, or the checks above prove nothing.
    std::fs::write(textdir.path().join("export.prom"), "x{a=\"1\" 3\n").unwrap();
    assert_eq!(scrape_error(&scrape(port).unwrap()), Some(1.0));
}

#[test]
fn csv_ndjson_and_parquet_of_every_version_read_back() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let (inputs, _keep) = inputs();
    for (name, dir) in &inputs {
        let d = dir.to_str().unwrap();
        let mut rows_by_level = BTreeMap::new();
        for level in ["device", "channel", "qp"] {
            let csv_out = run(&["export", "--format", "csv", "--level", level, d]);
            assert_eq!(csv_out.status.code(), Some(0), "{}", stderr(&csv_out));
            let mut r = csv::Reader::from_reader(csv_out.stdout.as_slice());
            let width = r.headers().expect("header").len();
            let mut rows = 0;
            for rec in r.records() {
                assert_eq!(rec.expect("record").len(), width, "{name} {level}");
                rows += 1;
            }
            assert!(rows > 0, "{name} {level}: no rows");
            let nd = run(&["export", "--format", "ndjson", "--level", level, d]);
            assert_eq!(nd.status.code(), Some(0), "{}", stderr(&nd));
            let text = stdout(&nd);
            for l in text.lines() {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                assert!(v.is_object(), "{name} {level}: {l}");
            }
            assert_eq!(text.lines().count(), rows, "{name} {level}: NDJSON rows");
            rows_by_level.insert(level, rows);
        }
        assert!(
            rows_by_level["device"] <= rows_by_level["channel"]
                && rows_by_level["channel"] <= rows_by_level["qp"],
            "{name}: {rows_by_level:?}"
        );
        for fmt in ["csv", "ndjson"] {
            let o = run(&["export", "--links", "--format", fmt, d]);
            assert_eq!(o.status.code(), Some(0), "{name} links {fmt}");
        }
        let pq = tempfile::tempdir().unwrap();
        for partition in [None, Some("job"), Some("date,job")] {
            let out = pq
                .path()
                .join(partition.unwrap_or("flat").replace(',', "-"));
            let mut args = vec!["export", "--format", "parquet", "-o", out.to_str().unwrap()];
            if let Some(p) = partition {
                args.extend(["--partition", p]);
            }
            args.push(d);
            let o = run(&args);
            assert_eq!(o.status.code(), Some(0), "{name} {args:?}: {}", stderr(&o));
            let mut ranks = 0;
            let mut files = 0;
            for f in walk(&out) {
                let r = SerializedFileReader::new(std::fs::File::open(&f).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                let n = r.metadata().file_metadata().num_rows();
                if f.file_name().unwrap() == "ranks.parquet" {
                    ranks += n;
                }
                files += 1;
            }
            assert!(files >= 9, "{name} {partition:?}: {files} files");
            let inputs = std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| {
                    let n = e.as_ref().unwrap().file_name();
                    let n = n.to_str().unwrap();
                    n.starts_with("rccl_telemetry_") && n.ends_with(".json")
                })
                .count();
            assert_eq!(ranks as usize, inputs, "{name} {partition:?}: ranks rows");
        }
    }
}

/// Every *.parquet file under a directory.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out
}
