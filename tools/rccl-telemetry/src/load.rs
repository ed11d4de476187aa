//! Finding the input files and reading them in parallel.
//!
//! Every path given on the command line is a file (taken whatever its name), a directory (its
//! rccl_telemetry_*.json files, not recursive) or a glob pattern. A file that cannot be used
//! is reported in one line with its path and the reason, counted and skipped; nothing here
//! panics on any input.

use crate::model::{SourceFormat, TelemetryFile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde_json::Value;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The file-name pattern the library writes.
pub fn is_telemetry_name(name: &str) -> bool {
    name.starts_with("rccl_telemetry_") && name.ends_with(".json")
}

/// Expands the command-line inputs into a sorted, de-duplicated list of files.
/// Inputs that name nothing are returned as problems (one line each).
pub fn expand_inputs(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<BadFile>) {
    let mut files = Vec::new();
    let mut bad = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input);
        match meta {
            Ok(m) if m.is_dir() => match std::fs::read_dir(input) {
                Ok(rd) => {
                    for entry in rd.flatten() {
                        let name = entry.file_name();
                        let Some(name) = name.to_str() else { continue };
                        if is_telemetry_name(name) {
                            files.push(entry.path());
                        }
                    }
                }
                Err(e) => bad.push(BadFile::new(
                    input,
                    BadKind::Unreadable,
                    format!("cannot list directory: {e}"),
                )),
            },
            Ok(_) => files.push(input.clone()),
            Err(e) => {
                let s = input.to_string_lossy();
                if s.contains(['*', '?', '[']) {
                    match glob::glob(&s) {
                        Ok(paths) => {
                            let before = files.len();
                            for p in paths {
                                match p {
                                    Ok(p) if p.is_file() => files.push(p),
                                    Ok(_) => {}
                                    Err(e) => bad.push(BadFile::new(
                                        e.path(),
                                        BadKind::Unreadable,
                                        format!("cannot read: {}", e.error()),
                                    )),
                                }
                            }
                            if files.len() == before {
                                bad.push(BadFile::new(
                                    input,
                                    BadKind::Missing,
                                    "pattern matches no file".into(),
                                ));
                            }
                        }
                        Err(e) => bad.push(BadFile::new(
                            input,
                            BadKind::Missing,
                            format!("bad glob pattern: {e}"),
                        )),
                    }
                } else {
                    bad.push(BadFile::new(
                        input,
                        BadKind::Missing,
                        format!("cannot open: {e}"),
                    ));
                }
            }
        }
    }
    files.sort();
    files.dedup();
    (files, bad)
}

/// Why a file was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BadKind {
    Missing,
    Unreadable,
    Empty,
    Truncated,
    NotJson,
    WrongVersion,
    WrongShape,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BadFile {
    pub path: PathBuf,
    pub kind: BadKind,
    pub reason: String,
}

impl BadFile {
    pub fn new(path: &Path, kind: BadKind, reason: String) -> BadFile {
        BadFile {
            path: path.to_path_buf(),
            kind,
            reason,
        }
    }

    /// The one line printed for this file.
    pub fn line(&self) -> String {
        format!("{}: skipped: {}", self.path.display(), self.reason)
    }
}

/// A file read as JSON whose version is 1 or 2, or "1.0" (the in-tree engine); not yet checked for shape.
pub struct RawFile {
    pub path: PathBuf,
    pub value: Value,
    pub format: SourceFormat,
}

/// A file that parsed into the typed model.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub file: TelemetryFile,
}

/// Reads one file's bytes into a JSON value whose "version" is 1, 2 or "1.0".
pub fn read_raw(path: &Path) -> Result<RawFile, BadFile> {
    let bytes =
        std::fs::read(path).map_err(|e| BadFile::new(path, BadKind::Unreadable, unreadable(&e)))?;
    parse_raw(path, &bytes)
}

/// Why a file cannot be read; a permission error says what to do about it (the library
/// writes its files mode 0600, readable by the job's user only).
pub fn unreadable(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!("cannot read: {e} (rank files are mode 0600: read them as the job's user, or see \"Who can read the files\" in docs/operators.md)")
    } else {
        format!("cannot read: {e}")
    }
}

/// Parses bytes into a JSON value whose "version" is 1 or 2 (ours) or "1.0" (the in-tree engine's);
/// never panics.
pub fn parse_raw(path: &Path, bytes: &[u8]) -> Result<RawFile, BadFile> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(BadFile::new(path, BadKind::Empty, "empty file".into()));
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            let eof = e.classify() == serde_json::error::Category::Eof;
            let (kind, what) = match e.classify() {
                serde_json::error::Category::Eof => (BadKind::Truncated, "truncated JSON"),
                serde_json::error::Category::Io => (BadKind::Unreadable, "cannot read"),
                _ => (BadKind::NotJson, "not JSON"),
            };
            // An in-tree file broken by its own writer gets the reason, not just the parser's words.
            if let Some(why) = crate::intree::diagnose_unparsable(bytes, eof) {
                return Err(BadFile::new(path, kind, format!("{why} ({e})")));
            }
            return Err(BadFile::new(path, kind, format!("{what} ({e})")));
        }
    };
    let Some(obj) = value.as_object() else {
        return Err(BadFile::new(
            path,
            BadKind::WrongShape,
            "not a telemetry file: top level is not an object".into(),
        ));
    };
    let version = obj.get("version");
    let format = match (version, version.and_then(SourceFormat::of_version)) {
        (_, Some(format)) => format,
        (Some(v), None) => {
            return Err(BadFile::new(
                path,
                BadKind::WrongVersion,
                format!("unsupported version {v} (this tool reads versions 1 to 4, and \"1.0\" of RCCL's in-tree engine)"),
            ))
        }
        (None, None) => {
            return Err(BadFile::new(path, BadKind::WrongVersion, "no \"version\" key (not a telemetry file?)".into()))
        }
    };
    Ok(RawFile {
        path: path.to_path_buf(),
        value,
        format,
    })
}

/// Turns a version-1, version-2 or in-tree JSON value into the typed model.
pub fn to_typed(raw: RawFile) -> Result<Loaded, BadFile> {
    if raw.format == SourceFormat::InTree {
        return match crate::intree::to_model(&raw.value) {
            Ok(file) => Ok(Loaded {
                path: raw.path,
                file,
            }),
            Err(e) => Err(BadFile::new(&raw.path, BadKind::WrongShape, e)),
        };
    }
    let format = raw.format;
    match serde_json::from_value::<TelemetryFile>(raw.value) {
        Ok(mut file) => {
            file.format = format;
            Ok(Loaded {
                path: raw.path,
                file,
            })
        }
        Err(e) => Err(BadFile::new(
            &raw.path,
            BadKind::WrongShape,
            format!("not a telemetry file: {e}"),
        )),
    }
}

/// Parses bytes all the way to the typed model; the fuzz target.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Loaded, BadFile> {
    parse_raw(path, bytes).and_then(to_typed)
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub fn progress(len: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::hidden());
    if std::io::stderr().is_terminal() && len > 1 {
        pb.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} files, {eta} left")
        {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_prefix(what.to_string());
    }
    pb
}

/// Everything read from the inputs: the good files (sorted by host, pid, path) and the skipped ones.
#[derive(Debug, Default)]
pub struct Run {
    pub files: Vec<Loaded>,
    pub bad: Vec<BadFile>,
    /// How many files were found (good + bad, not counting inputs that named nothing).
    pub found: usize,
}

/// Reads every input in parallel into the typed model.
pub fn load_run(inputs: &[PathBuf]) -> Run {
    let (paths, mut bad) = expand_inputs(inputs);
    let pb = progress(paths.len(), "reading");
    let results: Vec<Result<Loaded, BadFile>> = paths
        .par_iter()
        .map(|p| {
            let r = read_raw(p).and_then(to_typed);
            pb.inc(1);
            r
        })
        .collect();
    pb.finish_and_clear();
    let mut files = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Ok(l) => files.push(l),
            Err(b) => bad.push(b),
        }
    }
    files.sort_by(|a, b| {
        (a.file.host_name.as_str(), a.file.process_id, &a.path).cmp(&(
            b.file.host_name.as_str(),
            b.file.process_id,
            &b.path,
        ))
    });
    Run {
        found: paths.len(),
        files,
        bad,
    }
}

/// Prints the one-line diagnostics for skipped files and a count, on stderr.
pub fn report_bad(run_bad: &[BadFile], found: usize) {
    for b in run_bad {
        eprintln!("rccl-telemetry: {}", b.line());
    }
    let skipped = run_bad
        .iter()
        .filter(|b| b.kind != BadKind::Missing)
        .count();
    if skipped > 0 {
        eprintln!("rccl-telemetry: skipped {skipped} of {found} files");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file another user's job wrote (mode 0600) says what to do; other errors say only
    /// what happened.
    #[test]
    fn a_permission_error_points_to_what_to_do() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let line = unreadable(&denied);
        assert!(line.starts_with("cannot read: "), "{line}");
        assert!(
            line.contains("mode 0600") && line.contains("docs/operators.md"),
            "{line}"
        );
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!unreadable(&missing).contains("0600"));
    }
}
