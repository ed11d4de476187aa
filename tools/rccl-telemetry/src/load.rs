//! Finding the input files and reading them in parallel.
//!
//! Every path given on the command line is a file (taken whatever its name), a directory (its
//! rccl_telemetry_*.json files, not recursive) or a glob pattern (`expand`). A file that cannot
//! be used is reported in one line with its path and the reason, counted and skipped; nothing
//! here panics, hangs or grows without bound on any input:
//!
//! - only regular files are read (a FIFO, a device or a socket with a telemetry name is
//!   skipped, and opening never blocks), each at most [`max_file_bytes`] (`--max-file-size`);
//! - the files are read in parallel, with at most [`IN_FLIGHT_BYTES`] (or one file at the
//!   cap, if larger) of file text in memory at once (`budget`);
//! - a file is parsed straight into the typed model; only a file that does not parse so is
//!   parsed again as plain JSON, to say why in one line (the key path as a JSON Pointer);
//! - a rank present in two files (same host, pid and start time: a copy, a snapshot beside
//!   its final file) is counted once, from its latest file, and the other is named; a later
//!   process with the same host and pid is another rank ([`ranks`]).

pub mod addr;
mod budget;
pub mod expand;
pub mod prune;
pub mod ranks;

pub use expand::{expand_inputs, is_telemetry_name};
pub use prune::Keep;

use crate::model::{SourceFormat, TelemetryFile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde_json::Value;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest file read by default (`--max-file-size`): 512 MiB, 2.7 times the largest file
/// the library writes in its benchmark (32 devices x 512 channels x 16 QPs: 192 MB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 512 << 20;

/// File text in memory at once over all reading threads, unless one file at the cap is more.
pub const IN_FLIGHT_BYTES: u64 = 1 << 30;

static MAX_FILE_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_FILE_BYTES);
static BUDGET: std::sync::OnceLock<budget::Budget> = std::sync::OnceLock::new();

/// Sets the size cap (`--max-file-size`); call before reading anything.
pub fn set_max_file_bytes(bytes: u64) {
    MAX_FILE_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// The size past which a file is skipped.
pub fn max_file_bytes() -> u64 {
    MAX_FILE_BYTES.load(Ordering::Relaxed)
}

fn budget() -> &'static budget::Budget {
    BUDGET.get_or_init(|| budget::Budget::new(IN_FLIGHT_BYTES.max(max_file_bytes())))
}

/// Parses a size: bytes, or with a K, M, G or T suffix (powers of 1024; "512M", "2G").
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{s:?}: the unit is K, M, G or T")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with K, M, G or T)"))?;
    n.checked_mul(1u64 << shift)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{s:?} is not a size between 1 byte and 16 EiB"))
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
    /// A FIFO, a device, a socket or a directory: never opened for reading.
    NotRegular,
    /// Larger than `--max-file-size`.
    TooLarge,
    /// A second name of a file, or a second file of one rank (host, pid and start time):
    /// counted once.
    Duplicate,
}

impl BadKind {
    /// True when the data of the input is missing from the analysis (everything but a
    /// duplicate, whose rank is counted from its other file): such a skip sets the exit
    /// status's [`SKIPPED_EXIT_BIT`].
    pub fn loses_data(self) -> bool {
        self != BadKind::Duplicate
    }
}

/// Added to a command's exit status (0 or 1 becomes 4 or 5) when inputs were skipped.
pub const SKIPPED_EXIT_BIT: u8 = 4;

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
    /// The addresses of the file's QPs, while the run's QP index is being built from a pruned
    /// read ([`Keep::Hang`]); None otherwise.
    pub qp_claims: Option<prune::FileClaims>,
    /// Who the file is reached by and names, taken before its QPs were pruned (None: the
    /// file holds every QP, and `completeness::reach_of` takes it from the file).
    pub reach: Option<crate::completeness::Reach>,
}

/// Opens a regular file without blocking (a FIFO swapped in after the check) and reads at
/// most the size cap, holding its size in the reading budget until the permit is dropped.
pub fn read_bytes(path: &Path) -> Result<(Vec<u8>, impl Drop), BadFile> {
    use std::os::unix::fs::OpenOptionsExt;
    let cap = max_file_bytes();
    // stat first: a FIFO or a device is never opened (opening one can block or act).
    let meta = std::fs::metadata(path)
        .map_err(|e| BadFile::new(path, BadKind::Unreadable, unreadable(&e)))?;
    not_regular(path, &meta)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| BadFile::new(path, BadKind::Unreadable, unreadable(&e)))?;
    let meta = f
        .metadata()
        .map_err(|e| BadFile::new(path, BadKind::Unreadable, unreadable(&e)))?;
    not_regular(path, &meta)?;
    let too_large = |n: u64| {
        BadFile::new(
            path,
            BadKind::TooLarge,
            format!(
                "{} bytes, over the --max-file-size cap of {} bytes",
                crate::stats::fmt_count(n),
                crate::stats::fmt_count(cap)
            ),
        )
    };
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let permit = budget().take(meta.len());
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    (&f).take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BadFile::new(path, BadKind::Unreadable, unreadable(&e)))?;
    if bytes.len() as u64 > cap {
        // It grew while being read.
        return Err(too_large(bytes.len() as u64));
    }
    Ok((bytes, permit))
}

fn not_regular(path: &Path, m: &std::fs::Metadata) -> Result<(), BadFile> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        return Ok(());
    }
    let what = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(BadFile::new(
        path,
        BadKind::NotRegular,
        format!("not a regular file ({what}): not read"),
    ))
}

/// Reads one file's bytes into a JSON value whose "version" is 1 to 5, or "1.0".
pub fn read_raw(path: &Path) -> Result<RawFile, BadFile> {
    let (bytes, _permit) = read_bytes(path)?;
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
    raw_from_value(path, value)
}

/// A parsed JSON value as a telemetry file: a top-level object whose "version" is 1 to 5, or
/// "1.0" (the in-tree engine's).
pub fn raw_from_value(path: &Path, value: Value) -> Result<RawFile, BadFile> {
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
                format!("unsupported version {v} (this tool reads versions 1 to 5, and \"1.0\" of RCCL's in-tree engine)"),
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
                qp_claims: None,
                reach: None,
            }),
            Err(e) => Err(BadFile::new(&raw.path, BadKind::WrongShape, e)),
        };
    }
    let format = raw.format;
    match typed_from_value(raw.value) {
        Ok(mut file) => {
            file.format = format;
            Ok(Loaded {
                path: raw.path,
                file,
                qp_claims: None,
                reach: None,
            })
        }
        Err(e) => Err(BadFile::new(
            &raw.path,
            BadKind::WrongShape,
            format!("not a telemetry file: {e}"),
        )),
    }
}

/// The typed model of a JSON value; the error names the key as a JSON Pointer
/// ("/devices/0/tx_bytes: invalid value: integer `-5`, expected u64").
pub fn typed_from_value(v: Value) -> Result<TelemetryFile, String> {
    serde_path_to_error::deserialize::<_, TelemetryFile>(v).map_err(|e| {
        let p = pointer(e.path());
        let inner = e.into_inner();
        if p.is_empty() {
            inner.to_string()
        } else {
            format!("{p}: {inner}")
        }
    })
}

/// A serde_path_to_error path as a JSON Pointer ("" for the document).
pub fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut s = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => s.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                s.push('/');
                s.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Enum { variant } => {
                s.push('/');
                s.push_str(variant);
            }
            Segment::Unknown => s.push_str("/?"),
        }
    }
    s
}

/// Gives back what the parse's growing vectors left unused (a vector doubles as it is read:
/// up to half of a QP list or a histogram is spare capacity). On an all-to-all run of 1,024
/// ranks (1.04 M QPs) the loaded model's peak falls from 2,465 to 2,256 MiB for `summary`.
fn fit(file: &mut TelemetryFile) {
    for d in &mut file.devices {
        d.channels.shrink_to_fit();
        for c in &mut d.channels {
            c.queue_pairs.shrink_to_fit();
            for q in &mut c.queue_pairs {
                q.counters.wqe_completion_histogram.shrink_to_fit();
            }
        }
        if let Some(peers) = &mut d.peers {
            peers.shrink_to_fit();
            for h in peers
                .iter_mut()
                .filter_map(|p| p.wqe_completion_log_histogram.as_mut())
            {
                h.shrink_to_fit();
            }
        }
    }
}

/// Parses bytes all the way to the typed model; the fuzz target. Straight into the model
/// first (three to four times faster than through a JSON value); a file that does not parse
/// so (the in-tree engine's, a broken one, an unknown version) takes the slow path, which says
/// why.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Loaded, BadFile> {
    if let Ok(mut file) = serde_json::from_slice::<TelemetryFile>(bytes) {
        fit(&mut file);
        let format = SourceFormat::of_version(&Value::from(file.version));
        if let Some(format) = format.filter(|f| *f != SourceFormat::InTree) {
            file.format = format;
            return Ok(Loaded {
                path: path.to_path_buf(),
                file,
                qp_claims: None,
                reach: None,
            });
        }
    }
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

/// Everything read from the inputs: the good files (sorted by host, pid, start time, path) and
/// the skipped ones.
#[derive(Debug, Default)]
pub struct Run {
    pub files: Vec<Loaded>,
    pub bad: Vec<BadFile>,
    /// How many files were found (good + bad, not counting inputs that named nothing; a
    /// second name of one file and a symlink loop count as found and skipped).
    pub found: usize,
    /// The index of every QP of the files, built while reading when their QPs were pruned
    /// ([`Keep::Hang`]): [`qp_index`] returns it. None when the files hold every QP.
    pub qp_index: Option<addr::QpIndex>,
    /// Which QPs the files hold: [`Keep::All`] unless QPs were dropped while reading.
    pub kept: Keep,
}

/// The run's QP index: the one built while reading when its QPs were pruned, else indexed
/// from its QPs ([`addr::index_files`]).
pub fn qp_index(run: &Run) -> std::borrow::Cow<'_, addr::QpIndex> {
    if let Some(idx) = &run.qp_index {
        return std::borrow::Cow::Borrowed(idx);
    }
    // Every QP with a QPN is in the files unless they were read for the hang alone.
    debug_assert!(
        matches!(run.kept, Keep::All | Keep::Links),
        "a pruned run without its QP index"
    );
    std::borrow::Cow::Owned(addr::index_files(run.files.iter().map(|l| &l.file)))
}

/// Reads every input in parallel into the typed model.
pub fn load_run(inputs: &[PathBuf]) -> Run {
    load_run_keeping(inputs, Keep::All)
}

/// Reads every input in parallel, each file pruned to what `keep` asks for as soon as it is
/// parsed (see [`prune`]).
pub fn load_run_keeping(inputs: &[PathBuf], keep: Keep) -> Run {
    let (paths, mut bad) = expand_inputs(inputs);
    let found = paths.len() + bad.iter().filter(|b| b.kind != BadKind::Missing).count();
    let pb = progress(paths.len(), "reading");
    let results: Vec<Result<Loaded, BadFile>> = paths
        .par_iter()
        .map(|p| {
            let r = read_bytes(p)
                .and_then(|(bytes, _permit)| parse_bytes(p, &bytes))
                .map(|mut l| {
                    if keep != Keep::All {
                        l.reach = Some(crate::completeness::Reach::of(&l.file));
                    }
                    l.qp_claims = prune::prune(&mut l.file, keep);
                    l
                });
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
    files.sort_by(|a, b| ranks::sort_key(a).cmp(&ranks::sort_key(b)));
    let mut files = one_file_per_rank(files, &mut bad);
    let qp_index = (keep == Keep::Hang).then(|| {
        prune::index(files.iter_mut().filter_map(|l| {
            let claims = l.qp_claims.take()?;
            Some((&l.file, claims))
        }))
    });
    Run {
        found,
        files,
        bad,
        qp_index,
        kept: keep,
    }
}

/// The latest file of each rank (host, pid, start time: [`ranks`]) by [`ranks::when`], the
/// first on a tie: the index in `files` of the file every analysis reads the rank from. A run
/// the load read holds one file per rank already; a run put together by hand (a test, a fuzz
/// case) may hold more.
pub fn latest_per_rank(files: &[Loaded]) -> std::collections::BTreeMap<ranks::RankKey, usize> {
    ranks::latest_per_rank(files)
}

/// Keeps one file per rank (host, pid, start time: [`ranks`]) of files sorted by rank: the
/// latest (end_time, a final file on a tie, then the first path), as the hang analysis picks;
/// the others are named as duplicates. Two files of one rank would double its links and make
/// its peers ambiguous; a later process with the same host and pid is another rank.
fn one_file_per_rank(files: Vec<Loaded>, bad: &mut Vec<BadFile>) -> Vec<Loaded> {
    let when = |l: &Loaded| ranks::when(&l.file);
    let mut out: Vec<Loaded> = Vec::with_capacity(files.len());
    let mut group: Vec<Loaded> = Vec::new();
    let mut flush = |group: &mut Vec<Loaded>, out: &mut Vec<Loaded>| {
        if group.len() > 1 {
            let keep = (0..group.len())
                .rev()
                .max_by_key(|&i| when(&group[i]))
                .unwrap_or(0);
            let kept = group.swap_remove(keep);
            for d in group.drain(..) {
                let why = match when(&kept).cmp(&when(&d)) {
                    std::cmp::Ordering::Greater if when(&kept).0 > when(&d).0 => "it ends later",
                    std::cmp::Ordering::Greater => "it is the final file",
                    _ => "the same end time: the first by path",
                };
                bad.push(BadFile::new(
                    &d.path,
                    BadKind::Duplicate,
                    format!(
                        "the same rank ({}:{}) as {}: counted once, from that file ({why})",
                        d.file.host_name,
                        d.file.process_id,
                        kept.path.display()
                    ),
                ));
            }
            out.push(kept);
        } else {
            out.append(group);
        }
    };
    for l in files {
        let same = group
            .last()
            .is_some_and(|g| ranks::same_rank(&g.file, &l.file));
        if !same {
            flush(&mut group, &mut out);
        }
        group.push(l);
    }
    flush(&mut group, &mut out);
    out
}

/// Skipped files named one line each on stderr; past these, only counted by reason, so a
/// directory of 20,000 bad files gives a screen, not 20,000 lines.
pub const BAD_NAMED: usize = 20;

/// Prints the diagnostics for skipped files on stderr: the first [`BAD_NAMED`] one line each,
/// the rest counted by reason, then the count of files skipped.
pub fn report_bad(run_bad: &[BadFile], found: usize) {
    for line in bad_lines(run_bad) {
        eprintln!("rccl-telemetry: {line}");
    }
    let skipped = run_bad
        .iter()
        .filter(|b| b.kind != BadKind::Missing)
        .count();
    let dups = run_bad
        .iter()
        .filter(|b| b.kind == BadKind::Duplicate)
        .count();
    if skipped > 0 {
        let of_which = if dups > 0 {
            format!(" ({dups} a second file of a rank or a second name of a file, counted once)")
        } else {
            String::new()
        };
        eprintln!("rccl-telemetry: skipped {skipped} of {found} files{of_which}");
    }
}

/// The lines `report_bad` prints before its count: one a file for the first [`BAD_NAMED`],
/// then one that counts the rest by kind ("and 19,980 more: 19,000 not_json, 980 truncated").
pub fn bad_lines(run_bad: &[BadFile]) -> Vec<String> {
    let mut lines: Vec<String> = run_bad.iter().take(BAD_NAMED).map(BadFile::line).collect();
    let rest = &run_bad[run_bad.len().min(BAD_NAMED)..];
    if !rest.is_empty() {
        let mut by_kind: Vec<(BadKind, usize)> = Vec::new();
        for b in rest {
            match by_kind.iter_mut().find(|(k, _)| *k == b.kind) {
                Some((_, n)) => *n += 1,
                None => by_kind.push((b.kind, 1)),
            }
        }
        by_kind.sort_by_key(|k| std::cmp::Reverse(k.1));
        let kinds: Vec<String> = by_kind
            .iter()
            .map(|(k, n)| {
                let name = serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                format!("{} {name}", crate::stats::fmt_count(*n as u64))
            })
            .collect();
        lines.push(format!(
            "and {} more inputs skipped, not named: {}",
            crate::stats::fmt_count(rest.len() as u64),
            kinds.join(", ")
        ));
    }
    lines
}

/// True when an input's data is missing from the analysis (an input that named nothing, a
/// file that could not be used; not a duplicate): the command adds [`SKIPPED_EXIT_BIT`].
pub fn lost_inputs(run_bad: &[BadFile]) -> bool {
    run_bad.iter().any(|b| b.kind.loses_data())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thousands of bad inputs name the first few and count the rest by reason.
    #[test]
    fn many_bad_files_give_a_bounded_report() {
        let bad: Vec<BadFile> = (0..20_000)
            .map(|i| {
                let kind = if i % 10 == 0 {
                    BadKind::Truncated
                } else {
                    BadKind::NotJson
                };
                BadFile::new(
                    Path::new(&format!("f{i}.json")),
                    kind,
                    format!("reason {i}"),
                )
            })
            .collect();
        let lines = bad_lines(&bad);
        assert_eq!(lines.len(), BAD_NAMED + 1);
        assert_eq!(lines[0], "f0.json: skipped: reason 0");
        assert_eq!(
            lines[BAD_NAMED],
            "and 19,980 more inputs skipped, not named: 17,982 not_json, 1,998 truncated"
        );
        assert_eq!(bad_lines(&bad[..3]).len(), 3);
    }

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
