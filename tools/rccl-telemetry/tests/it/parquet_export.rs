//! `export --format parquet`: every table read back with DuckDB and with pyarrow
//! (tests/parquet_check.py) and compared with `summary --json`, for generated runs, the
//! library's own files and the in-tree fixtures; a tree of jobs queried as one dataset; the
//! README's worked example run for real. Needs Python's duckdb and pyarrow: a SKIP otherwise
//! (required under CI, whose pip line installs both).

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant, RunKind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/parquet_check.py");
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");

/// python3 with duckdb and pyarrow, or None after recording the skip.
fn python(test: &str) -> Option<&'static str> {
    let py = if have("python3") { "python3" } else { "python" };
    let ok = Command::new(py)
        .args(["-c", "import duckdb, pyarrow"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(py)
    } else {
        skip(
            test,
            "python3 with duckdb and pyarrow not installed (pip install duckdb pyarrow)",
        );
        None
    }
}

fn export(args: &[&str]) {
    let mut a = vec!["export", "--format", "parquet"];
    a.extend_from_slice(args);
    let out = run(&a);
    assert_eq!(
        out.status.code(),
        Some(0),
        "export {args:?}: {}",
        stderr(&out)
    );
}

fn summary(dir: &Path) -> Value {
    let out = run(&["summary", "--json", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("summary json")
}

fn dir_name(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

/// Runs the checker over `out` against the summaries of `jobs` (job id -> run directory).
fn check(py: &str, out: &Path, jobs: &BTreeMap<String, PathBuf>, partitioned: bool) -> String {
    let summaries: BTreeMap<&String, Value> = jobs
        .iter()
        .map(|(j, d)| {
            let links = run(&["links", "--json", d.to_str().unwrap()]);
            assert_eq!(links.status.code(), Some(0), "{}", stderr(&links));
            let links: Value = serde_json::from_slice(&links.stdout).expect("links json");
            (
                j,
                serde_json::json!({"summary": summary(d), "links": links, "dir": d}),
            )
        })
        .collect();
    let sp = out.with_extension("summaries.json");
    std::fs::write(&sp, serde_json::to_vec(&summaries).unwrap()).unwrap();
    let o = Command::new(py)
        .args([
            SCRIPT,
            "check",
            out.to_str().unwrap(),
            sp.to_str().unwrap(),
            if partitioned { "1" } else { "0" },
        ])
        .output()
        .expect("python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(text.contains("all ok"), "{text}");
    // Every table, and every job's comparisons, were made.
    assert_eq!(
        text.matches("read by duckdb and pyarrow").count(),
        9,
        "{text}"
    );
    assert_eq!(text.matches("stalled QPs ok").count(), jobs.len(), "{text}");
    assert_eq!(
        text.matches("agree with summary --json ok").count(),
        jobs.len(),
        "{text}"
    );
    text
}

#[test]
fn generated_runs_read_back_in_duckdb_and_pyarrow_as_the_summary_says() {
    let Some(py) = python("generated_runs_read_back_in_duckdb_and_pyarrow_as_the_summary_says")
    else {
        return;
    };
    let plants = Plant::of(RunKind::Flat);
    // Version 1 with samples and every anomaly (-1 counters, untracked QPs, a snapshot); a
    // version-2 run (log-scale histograms); thor2, whose single channel has no id.
    let runs = [
        gen(GenOptions {
            ranks: 40,
            seed: 3,
            samples: 5,
            plants: plants.clone(),
            ..Default::default()
        }),
        {
            let g = gen(GenOptions {
                ranks: 24,
                seed: 4,
                samples: 2,
                plants: vec![Plant::Tail, Plant::Unavailable],
                ..Default::default()
            });
            to_version2(&g);
            g
        },
        gen(GenOptions {
            ranks: 16,
            seed: 5,
            hw_type: "thor2".into(),
            plants: vec![Plant::Cnp],
            ..Default::default()
        }),
    ];
    // Version 3 with peers: the links table (as `links` joins them) and the stalls table (a
    // link stalled now, another whose stall ended), in a separate test below.
    for g in &runs {
        let out = g.path().join("parquet");
        export(&["-o", out.to_str().unwrap(), g.arg()]);
        let jobs = BTreeMap::from([(dir_name(g.path()), g.path().to_path_buf())]);
        check(py, &out, &jobs, false);
    }
    // The planted -1 counters are NULLs in hw_counters (and the checker found no negative value).
    let out = runs[0].path().join("parquet");
    let py_null = Command::new(py)
        .args(["-c", &format!("import duckdb; print(duckdb.sql(\"select count(*) from '{}/hw_counters.parquet' where value is null\").fetchall()[0][0])", out.display())])
        .output()
        .expect("python");
    let nulls: u64 = String::from_utf8_lossy(&py_null.stdout)
        .trim()
        .parse()
        .expect("a count");
    assert!(nulls > 0, "the planted unavailable counters should be NULL");
}

#[test]
fn links_and_stalls_of_a_run_with_peers_read_back() {
    let Some(py) = python("links_and_stalls_of_a_run_with_peers_read_back") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let mut jobs = BTreeMap::new();
    for (job, plants) in [
        ("night-1", "stall,slow_link"),
        ("night-2", "recovered_stall,missing_peer"),
    ] {
        let dir = root.path().join(job);
        let out = run(&[
            "generate",
            "--peers",
            "--ranks",
            "24",
            "--plant",
            plants,
            dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        jobs.insert(job.to_string(), dir);
    }
    let out = root.path().join("parquet");
    for dir in jobs.values() {
        export(&[
            "-o",
            out.to_str().unwrap(),
            "--partition",
            "job",
            dir.to_str().unwrap(),
        ]);
    }
    let text = check(py, &out, &jobs, true);
    // Both nights had a stall: the stalled QPs are in the table, not just counted as zero.
    assert!(!text.contains("and 0 stalled QPs ok"), "{text}");
    assert!(!text.contains(": 0 links and"), "{text}");
}

#[test]
fn library_files_and_intree_files_read_back_as_two_jobs() {
    let Some(py) = python("library_files_and_intree_files_read_back_as_two_jobs") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("lib-job");
    std::fs::create_dir(&lib).unwrap();
    crate::library_files::spawn_ranks(&lib);
    let intree = root.path().join("intree-job");
    std::fs::create_dir(&intree).unwrap();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/intree");
    std::fs::copy(
        fixtures.join("rccl_telemetry_n1_1000_42.json"),
        intree.join("rccl_telemetry_n1_1000_42.json"),
    )
    .unwrap();
    std::fs::copy(
        fixtures.join("sampled_rccl_telemetry_n3_1000_45.json"),
        intree.join("rccl_telemetry_n3_1000_45.json"),
    )
    .unwrap();
    let out = root.path().join("parquet");
    export(&[
        "-o",
        out.to_str().unwrap(),
        lib.to_str().unwrap(),
        intree.to_str().unwrap(),
    ]);
    let jobs = BTreeMap::from([
        ("lib-job".to_string(), lib),
        ("intree-job".to_string(), intree),
    ]);
    check(py, &out, &jobs, false);
}

/// Three nights of jobs on the same four hosts, in version 2 (log-scale histograms), each
/// exported into one tree with `--partition date,job`, one night a day; the second night has a
/// NIC with a CNP storm and one with a latency tail.
struct JobTree {
    root: tempfile::TempDir,
    jobs: BTreeMap<String, PathBuf>,
    planted: Vec<rccl_telemetry_tool::generate::Planted>,
    _runs: Vec<GenRun>,
}

/// Moves a run's start and end times to another day (the time of day kept).
fn set_date(g: &GenRun, date: &str) {
    for p in g.files() {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        for k in ["start_time", "end_time"] {
            let t = v[k].as_str().unwrap().to_string();
            v[k] = format!("{date}{}", &t[10..]).into();
        }
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    }
}

impl JobTree {
    fn new() -> JobTree {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("telemetry");
        let mut jobs = BTreeMap::new();
        let mut planted = Vec::new();
        let mut runs = Vec::new();
        for (i, plants) in [vec![], vec![Plant::Cnp, Plant::Tail], vec![]]
            .into_iter()
            .enumerate()
        {
            let date = format!("2026-12-0{}", i + 1);
            let job = format!("job-{date}");
            let g = gen(GenOptions {
                ranks: 32,
                seed: 10 + i as u64,
                plants,
                samples: 2,
                ..Default::default()
            });
            to_version2(&g);
            set_date(&g, &date);
            planted.extend(g.planted.iter().cloned());
            // One export per job into the same tree, as a nightly job would.
            export(&[
                "-o",
                out.to_str().unwrap(),
                "--partition",
                "date,job",
                "--job",
                &job,
                g.arg(),
            ]);
            jobs.insert(job, g.path().to_path_buf());
            runs.push(g);
        }
        JobTree {
            root,
            jobs,
            planted,
            _runs: runs,
        }
    }

    fn out(&self) -> PathBuf {
        self.root.path().join("telemetry")
    }

    /// The (host, roce_device) of the NIC planted with `kind`.
    fn nic(&self, kind: Plant) -> (String, String) {
        let s = summary(&self.jobs["job-2026-12-02"]);
        let p = self.planted.iter().find(|p| p.kind == kind).unwrap();
        let d = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| {
                d["host"] == p.host.as_str() && d["pid"] == p.pid && d["device_id"] == p.device_id
            })
            .unwrap();
        (
            p.host.clone(),
            d["roce_device"].as_str().unwrap().to_string(),
        )
    }

    /// Runs a worked-example script; its JSON rows.
    fn example(&self, py: &str, args: &[&str]) -> Vec<Value> {
        let o = Command::new(py)
            .args(args)
            .arg(self.out())
            .output()
            .expect("python");
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON row"))
            .collect()
    }

    /// The example's answer: the planted NICs first by p99 and by CNP rate, seen in every job.
    fn assert_finds_the_planted_nics(&self, rows: &[Value]) {
        assert!(!rows.is_empty() && rows.len() <= 20, "{rows:#?}");
        let top = |rank_col: &str| {
            let r = rows
                .iter()
                .find(|r| r[rank_col] == 1)
                .unwrap_or_else(|| panic!("no {rank_col} 1: {rows:#?}"));
            (
                r["host"].as_str().unwrap().to_string(),
                r["roce_device"].as_str().unwrap().to_string(),
            )
        };
        assert_eq!(top("p99_rank"), self.nic(Plant::Tail), "{rows:#?}");
        assert_eq!(top("cnp_rank"), self.nic(Plant::Cnp), "{rows:#?}");
        assert!(rows.iter().all(|r| r["jobs"] == 3), "{rows:#?}");
    }
}

/// The rows' identity and ranks, for comparing engines.
fn ranks_of(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "{} {} {} {} {}",
                r["host"], r["roce_device"], r["jobs"], r["p99_rank"], r["cnp_rank"]
            )
        })
        .collect()
}

#[test]
fn a_tree_of_jobs_is_one_dataset_and_the_worked_example_finds_the_planted_nics() {
    let Some(py) =
        python("a_tree_of_jobs_is_one_dataset_and_the_worked_example_finds_the_planted_nics")
    else {
        return;
    };
    let t = JobTree::new();
    // Hive layout: a directory per table, then date=, then job=; one file per table and job.
    for (i, job) in t.jobs.keys().enumerate() {
        let dir = t
            .out()
            .join(format!("devices/date=2026-12-0{}/job={job}", i + 1));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["devices.parquet"], "{}", dir.display());
    }
    check(py, &t.out(), &t.jobs, true);
    // The README's DuckDB query, as written there, over the tree.
    let rows = t.example(py, &[SCRIPT, "example", README]);
    t.assert_finds_the_planted_nics(&rows);
    // Its p99 is the log-scale histogram's (these files have both; the linear one's is
    // higher wherever the tail reaches the open last bucket).
    let sql = format!(
        "select host, roce_device, max(log_latency_p99_ns), max(latency_p99_ns) \
         from read_parquet('{}/devices/**/*.parquet', hive_partitioning = true) \
         where used group by all",
        t.out().display()
    );
    let o = Command::new(py)
        .args([
            "-c",
            &format!("import duckdb, json\nfor r in duckdb.sql({sql:?}).fetchall(): print(json.dumps(r))"),
        ])
        .output()
        .expect("python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let worst: BTreeMap<(String, String), (f64, f64)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                (v[0].as_str().unwrap().into(), v[1].as_str().unwrap().into()),
                (v[2].as_f64().unwrap(), v[3].as_f64().unwrap()),
            )
        })
        .collect();
    let mut lower = 0;
    for r in &rows {
        let key = (
            r["host"].as_str().unwrap().to_string(),
            r["roce_device"].as_str().unwrap().to_string(),
        );
        let (log, lin) = worst[&key];
        assert_eq!(r["worst_p99_ns"].as_f64(), Some(log), "{key:?}");
        lower += usize::from(log < lin);
    }
    assert!(lower > 0, "the linear p99 is never higher: {worst:?}");
}

#[test]
fn the_spark_sql_example_gives_the_rows_duckdb_gives() {
    let test = "the_spark_sql_example_gives_the_rows_duckdb_gives";
    let Some(py) = python(test) else { return };
    if !Command::new(py)
        .args(["-c", "import pyspark"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        || !have("java")
    {
        return skip(
            test,
            "pyspark or java not installed (Debian package openjdk-17-jre-headless, pip install 'pyspark>=4,<5')",
        );
    }
    let t = JobTree::new();
    let spark = t.example(
        py,
        &[
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/parquet_spark.py"),
            README,
        ],
    );
    t.assert_finds_the_planted_nics(&spark);
    let duck = t.example(py, &[SCRIPT, "example", README]);
    assert_eq!(ranks_of(&spark), ranks_of(&duck));
}

#[test]
fn bad_parquet_arguments_get_one_line_and_exit_2() {
    let g = gen(GenOptions {
        ranks: 2,
        ..Default::default()
    });
    let file = g.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    for args in [
        vec!["export", "--format", "parquet", g.arg()],
        vec![
            "export",
            "--format",
            "parquet",
            "-o",
            file.to_str().unwrap(),
            g.arg(),
        ],
        vec![
            "export",
            "--format",
            "parquet",
            "--partition",
            "rank",
            "-o",
            "/tmp/unused-rt-parquet",
            g.arg(),
        ],
        vec!["export", "--format", "csv", "--partition", "job", g.arg()],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("rccl-telemetry: "), "{err}");
    }
    assert!(
        !Path::new("/tmp/unused-rt-parquet").exists(),
        "a refused export must not write"
    );
}

/// The README's schema names every column the export writes, with its type, in its table's row
/// (the shared counters in their own row, the identifiers in the paragraph above the table).
#[test]
fn the_readme_schema_names_every_column_with_its_type() {
    use rccl_telemetry_tool::export::parquet::{columns, Kind, IDS, LINK_IDS, TABLES};
    let readme = std::fs::read_to_string(README).expect("README");
    let start = readme.find("**Schema, version").expect("schema paragraph");
    let schema = &readme[start..];
    let schema = &schema[..schema.find("**Worked example").expect("end of the schema")];
    let row = |name: &str| -> &str {
        let at = schema
            .find(&format!("| `{name}` |"))
            .or_else(|| schema.find(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no schema row for {name}"));
        schema[at..].lines().next().expect("row")
    };
    let paragraph = &schema[..schema.find("| table |").expect("schema table")];
    for (table, _) in TABLES {
        let mut text = row(table).to_string();
        if matches!(*table, "channels" | "qps") {
            text.push_str(row("counters (channels, qps)"));
        }
        let ids = if *table == "links" { LINK_IDS } else { IDS };
        for c in columns(table) {
            let own = !ids.iter().any(|i| i.name == c.name);
            let (where_, hay) = if own {
                (*table, text.as_str())
            } else {
                ("the identifiers' paragraph", paragraph)
            };
            let at = hay
                .find(&format!("`{}`", c.name))
                .unwrap_or_else(|| panic!("{table}.{} is not in {where_}", c.name));
            // Its type is named after it, before the next column's type (or the row's end).
            if own {
                let after = &hay[at..];
                let label = c.kind.label();
                let kind_at = after.find(label).unwrap_or(usize::MAX);
                let other = [
                    Kind::Bool,
                    Kind::I32,
                    Kind::I64,
                    Kind::F64,
                    Kind::Str,
                    Kind::TsMicros,
                ]
                .iter()
                .filter(|k| **k != c.kind && !label.contains(k.label()))
                .filter_map(|k| after.find(k.label()))
                .min()
                .unwrap_or(usize::MAX);
                assert!(
                    kind_at < other,
                    "{table}.{}: the README names another type before {label}",
                    c.name
                );
            }
        }
    }
}
