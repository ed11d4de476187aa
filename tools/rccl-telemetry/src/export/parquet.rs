//! `export --format parquet`: the run as tidy Parquet tables, one file per table, for DuckDB,
//! Spark, Trino and pyarrow.
//!
//! Written with the `parquet` crate's low-level column writers (no arrow): every table is built
//! column by column in memory ([`Table`]) and written a row group of [`ROW_GROUP_ROWS`] rows
//! at a time, Snappy-compressed.
//! The schema is versioned ([`SCHEMA_VERSION`], a column of every table and the file metadata
//! key [`SCHEMA_VERSION_KEY`]); the columns are documented in the tool's README ("Parquet
//! export"). Types are the ones every engine reads without a cast: BOOLEAN, INT32, INT64,
//! DOUBLE, UTF8 strings, and INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true) (Spark 3 rejects
//! NANOS timestamps, so the exact nanoseconds are kept in a plain INT64 column beside them).
//! A hardware counter or latency the file gives as -1 ("not available") is NULL, never 0.
//!
//! Each table is one entry in [`TABLES`]: a name and a function that fills it from a group of
//! rank files (and the links `links::join` found between the job's files).
//!
//! The module is four files: this one (jobs, hive partitions, which file each table goes to,
//! and the parallel write), `schema.rs` (every table's columns and types), `table.rs` (a table
//! in memory and its Parquet column writers) and `tables.rs` (what fills each table from the
//! rank files).

use crate::hwclass::classify;
use crate::links::Link;
use crate::load::{Loaded, Run};
use crate::model::{parse_timestamp_ns, Counters, Device, TelemetryFile};
use crate::summary::Latency;
use ::parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use ::parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::types::Type;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod schema;
mod table;
mod tables;
pub use schema::*;
pub use table::*;
pub use tables::*;

// ---------------------------------------------------------------------------------------------
// Jobs, partitions, files

/// The keys `--partition` can split the dataset by: the job, and the UTC date the job
/// started (for a month of jobs: `date,job`). Host is a column of every table, never a
/// directory: one file per host is a few kilobytes, and engines pay per file.
pub const PARTITION_KEYS: &[&str] = &["date", "job"];

/// The job a rank file belongs to: the name of the directory holding it.
pub fn job_of(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    abs.parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// The date of a file's `start_time`, `YYYY-MM-DD`: UTC for the library's files, the local
/// date as written for the in-tree engine's; None when the text is not a date.
pub fn start_date(start_time: &str) -> Option<String> {
    let d = start_time.get(..10)?;
    let b = d.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10))
        .then(|| d.to_string())
}

/// A value as a hive directory name's right-hand side: letters, digits, '.', '_' and '-' as
/// they are, any other byte as %XX (as Hive and Spark escape partition values).
pub fn hive_escape(s: &str) -> String {
    if s.is_empty() {
        return "__HIVE_DEFAULT_PARTITION__".into();
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What `export --format parquet` was asked for.
pub struct Options {
    pub dir: PathBuf,
    /// The job of every file (default: each file's directory name).
    pub job: Option<String>,
    /// Partition keys, in directory order (a subset of [`PARTITION_KEYS`]).
    pub partition: Vec<String>,
}

/// What was written.
#[derive(Debug, Default)]
pub struct Written {
    pub files: Vec<PathBuf>,
    /// Rows per table, summed over the partitions.
    pub rows: BTreeMap<&'static str, usize>,
}

/// Writes the tables. Without partitions: DIR/<table>.parquet. With `--partition date,job`:
/// DIR/<table>/date=<date>/job=<job>/<table>.parquet, so each table is a hive-partitioned
/// dataset of its own (what Spark, Trino and DuckDB expect), one file per table and job, and
/// several jobs exported into one DIR form one dataset; exporting a job again replaces its
/// files.
pub fn write(run: &Run, o: &Options) -> Result<Written, String> {
    let files = &run.files;
    let mut keys: Vec<&'static str> = Vec::new();
    for p in &o.partition {
        let Some(k) = PARTITION_KEYS.iter().find(|k| **k == p.as_str()) else {
            let why = if p == "host" {
                "host is a column of every table, not a directory"
            } else {
                "not a partition key"
            };
            return Err(format!("--partition {p}: {why} (use job, or date,job)"));
        };
        if keys.contains(k) {
            return Err(format!("--partition names {p} twice"));
        }
        keys.push(k);
    }
    if o.dir.exists() && !o.dir.is_dir() {
        return Err(format!("{} exists and is not a directory", o.dir.display()));
    }
    let jobs: Vec<String> = files
        .iter()
        .map(|l| o.job.clone().unwrap_or_else(|| job_of(&l.path)))
        .collect();
    // The links of each job: QPs are joined within a job, never across jobs.
    let job_names: std::collections::BTreeSet<&String> = jobs.iter().collect();
    let reports: BTreeMap<&String, crate::links::LinkReport> = if job_names.len() <= 1 {
        job_names
            .iter()
            .map(|j| (*j, crate::links::join(run)))
            .collect()
    } else {
        job_names
            .iter()
            .map(|j| {
                let files: Vec<Loaded> = files
                    .iter()
                    .zip(&jobs)
                    .filter(|(_, jj)| jj == j)
                    .map(|(l, _)| l.clone())
                    .collect();
                (
                    *j,
                    crate::links::join(&Run {
                        files,
                        bad: Vec::new(),
                        found: 0,
                        ..Default::default()
                    }),
                )
            })
            .collect()
    };
    // A job's date is the earliest start date of its files, so a job that runs past midnight
    // stays in one directory.
    let mut dates: BTreeMap<&String, String> = BTreeMap::new();
    for (l, job) in files.iter().zip(&jobs) {
        let d = start_date(&l.file.start_time).unwrap_or_else(|| "unknown".into());
        let e = dates.entry(job).or_insert_with(|| d.clone());
        if d < *e {
            *e = d;
        }
    }
    let key_of = |job: &String| -> Vec<String> {
        keys.iter()
            .map(|k| {
                if *k == "job" {
                    job.clone()
                } else {
                    dates.get(job).cloned().unwrap_or_else(|| "unknown".into())
                }
            })
            .collect()
    };
    // Group the files by their partition values (one group without partitions).
    let mut groups: BTreeMap<Vec<String>, Group<'_>> = BTreeMap::new();
    for (l, job) in files.iter().zip(&jobs) {
        let rank_file = l.path.file_name().map_or_else(
            || l.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        groups.entry(key_of(job)).or_default().ranks.push(Rank {
            job,
            rank_file,
            loaded: l,
        });
    }
    for (job, rep) in &reports {
        for link in &rep.links {
            groups
                .entry(key_of(job))
                .or_default()
                .links
                .push((job.as_str(), link));
        }
    }
    if groups.is_empty() && keys.is_empty() {
        // No rank file: the tables still get written, empty, with their schema.
        groups.insert(Vec::new(), Group::default());
    }
    let tasks: Vec<(&Vec<String>, &Group<'_>, &(&str, Builder))> = groups
        .iter()
        .flat_map(|(k, g)| TABLES.iter().map(move |t| (k, g, t)))
        .collect();
    let results: Vec<Result<(PathBuf, &'static str, usize), String>> = tasks
        .par_iter()
        .map(|(key, group, (name, build))| {
            let path = if keys.is_empty() {
                o.dir.join(format!("{name}.parquet"))
            } else {
                let mut d = o.dir.join(name);
                for (k, v) in keys.iter().zip(key.iter()) {
                    d.push(format!("{k}={}", hive_escape(v)));
                }
                d.join(format!("{name}.parquet"))
            };
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let mut table = Table::create(name, columns(name), &path, &keys)?;
            build(group, &mut table);
            let rows = table.finish()?;
            Ok((path, *name, rows))
        })
        .collect();
    let mut w = Written::default();
    for r in results {
        let (p, name, rows) = r?;
        w.files.push(p);
        *w.rows.entry(name).or_default() += rows;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_the_identifiers_first_and_unique_names() {
        for (name, _) in TABLES {
            let cols = columns(name);
            let ids = if *name == "links" { LINK_IDS } else { IDS };
            assert!(cols.len() > ids.len(), "{name}");
            for (c, id) in cols.iter().zip(ids) {
                assert_eq!(c.name, id.name, "{name}");
            }
            let mut names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            names.sort();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "{name} repeats a column");
        }
    }

    #[test]
    fn a_start_date_is_the_text_s_date() {
        assert_eq!(
            start_date("2026-12-02T23:59:59.5Z").as_deref(),
            Some("2026-12-02")
        );
        assert_eq!(
            start_date("2026-12-02 11:00:00").as_deref(),
            Some("2026-12-02")
        );
        assert_eq!(start_date("12/02/2026"), None);
        assert_eq!(start_date(""), None);
    }

    #[test]
    fn hive_values_escape_what_a_path_cannot_hold() {
        assert_eq!(hive_escape("node-01.cluster_a"), "node-01.cluster_a");
        assert_eq!(hive_escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(hive_escape(""), "__HIVE_DEFAULT_PARTITION__");
    }

    #[test]
    fn bad_partition_keys_are_refused() {
        let dir = std::env::temp_dir().join("rccl-telemetry-parquet-unit");
        for p in [
            vec!["rank".to_string()],
            vec!["host".into()],
            vec!["job".into(), "job".into()],
        ] {
            let o = Options {
                dir: dir.clone(),
                job: None,
                partition: p,
            };
            assert!(write(&Run::default(), &o).is_err());
        }
    }
}
