//! Finding the input files: every path on the command line is a file (taken whatever its
//! name), a directory (its rccl_telemetry_*.json entries, not recursive) or a glob pattern.
//!
//! Patterns are walked here rather than by the `glob` crate's iterator, which follows a
//! symbolic link back into its own ancestors for ever under `**`: the tree is walked by
//! `walkdir` (links followed, a link to an ancestor reported once as a loop and not entered)
//! and every entry matched against the pattern (`glob::Pattern`, `*` not crossing `/`). Only as
//! deep as the pattern has components, unless it has `**`. A file reached twice (a link to it,
//! or two inputs naming it) is read once: the later names are reported as duplicates.

use super::{BadFile, BadKind};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// The file-name pattern the library writes.
pub fn is_telemetry_name(name: &str) -> bool {
    name.starts_with("rccl_telemetry_") && name.ends_with(".json")
}

fn has_meta(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Expands the command-line inputs into a sorted list of distinct files. Inputs that name
/// nothing, unreadable directories, symlink loops and second names of one file are returned
/// as problems (one line each).
pub fn expand_inputs(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<BadFile>) {
    let mut files = Vec::new();
    let mut bad = Vec::new();
    for input in inputs {
        match std::fs::metadata(input) {
            Ok(m) if m.is_dir() => list_dir(input, &mut files, &mut bad),
            Ok(_) => files.push(input.clone()),
            Err(e) => {
                let s = input.to_string_lossy();
                if has_meta(&s) {
                    expand_glob(input, &s, &mut files, &mut bad);
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
    let files = distinct_files(files, &mut bad);
    (files, bad)
}

/// The rccl_telemetry_*.json entries of one directory (whatever their type: a FIFO or a
/// device there is reported when it is read).
fn list_dir(dir: &Path, files: &mut Vec<PathBuf>, bad: &mut Vec<BadFile>) {
    match std::fs::read_dir(dir) {
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
            dir,
            BadKind::Unreadable,
            format!("cannot list directory: {e}"),
        )),
    }
}

/// Splits a pattern into the directory to walk from (its components before the first with a
/// wildcard; "" for the current directory) and the components from there on.
fn split_pattern(pattern: &str) -> (PathBuf, Vec<String>) {
    let mut base = PathBuf::new();
    let mut rest = Vec::new();
    for c in Path::new(pattern).components() {
        let s = c.as_os_str().to_string_lossy().into_owned();
        if rest.is_empty() && !has_meta(&s) {
            base.push(c);
        } else if !matches!(c, Component::CurDir) {
            rest.push(s);
        }
    }
    (base, rest)
}

fn expand_glob(input: &Path, s: &str, files: &mut Vec<PathBuf>, bad: &mut Vec<BadFile>) {
    let pat = match glob::Pattern::new(s) {
        Ok(p) => p,
        Err(e) => {
            bad.push(BadFile::new(
                input,
                BadKind::Missing,
                format!("bad glob pattern: {e}"),
            ));
            return;
        }
    };
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    let (base, rest) = split_pattern(s);
    let deep = rest.iter().any(|c| c.contains("**"));
    let walk_root = if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base.clone()
    };
    let mut walker = walkdir::WalkDir::new(&walk_root)
        .follow_links(true)
        .min_depth(1)
        .sort_by_file_name();
    if !deep {
        walker = walker.max_depth(rest.len());
    }
    let before = files.len();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e.path().unwrap_or(&walk_root).to_path_buf();
                let path = strip_dot(&base, path);
                let reason = match e.loop_ancestor() {
                    Some(a) => {
                        format!("symbolic link loop (back to {}): not followed", a.display())
                    }
                    None => format!("cannot list: {e}"),
                };
                bad.push(BadFile::new(&path, BadKind::Unreadable, reason));
                continue;
            }
        };
        if entry.file_type().is_dir() {
            continue;
        }
        let path = strip_dot(&base, entry.into_path());
        if pat.matches_path_with(&path, opts) {
            files.push(path);
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

/// A walk from "." yields "./x"; the pattern (relative, without "./") names "x".
fn strip_dot(base: &Path, p: PathBuf) -> PathBuf {
    if base.as_os_str().is_empty() {
        if let Ok(s) = p.strip_prefix(".") {
            return s.to_path_buf();
        }
    }
    p
}

/// Keeps the first name of every file (device and inode); the others are duplicates.
fn distinct_files(files: Vec<PathBuf>, bad: &mut Vec<BadFile>) -> Vec<PathBuf> {
    let mut seen: HashMap<(u64, u64), usize> = HashMap::new();
    let mut out: Vec<PathBuf> = Vec::with_capacity(files.len());
    for p in files {
        // Not stat-able (dangling link, no permission): reported when it is read.
        let Ok(m) = std::fs::metadata(&p) else {
            out.push(p);
            continue;
        };
        if !m.is_file() {
            out.push(p);
            continue;
        }
        match seen.get(&(m.dev(), m.ino())) {
            Some(&i) => {
                let first = out[i].display().to_string();
                bad.push(BadFile::new(
                    &p,
                    BadKind::Duplicate,
                    format!("the same file as {first}: read once"),
                ));
            }
            None => {
                seen.insert((m.dev(), m.ino()), out.len());
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_split_at_their_first_wildcard() {
        assert_eq!(
            split_pattern("runs/*/rccl_telemetry_*.json"),
            (
                PathBuf::from("runs"),
                vec!["*".into(), "rccl_telemetry_*.json".into()]
            )
        );
        assert_eq!(
            split_pattern("/a/b/**/x*.json"),
            (PathBuf::from("/a/b"), vec!["**".into(), "x*.json".into()])
        );
        assert_eq!(
            split_pattern("*.json"),
            (PathBuf::new(), vec!["*.json".into()])
        );
    }

    #[test]
    fn a_symlink_loop_under_double_star_ends_and_is_reported_once() {
        let d = tempfile::tempdir().expect("tempdir");
        let sub = d.path().join("a/b");
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(sub.join("rccl_telemetry_h_1_2.json"), b"{}").expect("write");
        std::os::unix::fs::symlink(d.path().join("a"), sub.join("up")).expect("symlink");
        let pat = d.path().join("**/rccl_telemetry_*.json");
        let (files, bad) = expand_inputs(&[pat]);
        assert_eq!(files, vec![sub.join("rccl_telemetry_h_1_2.json")]);
        let loops: Vec<_> = bad
            .iter()
            .filter(|b| b.reason.contains("symbolic link loop"))
            .collect();
        assert_eq!(loops.len(), 1, "{bad:?}");
    }

    #[test]
    fn a_file_named_twice_is_read_once() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("rccl_telemetry_h_1_2.json");
        std::fs::write(&f, b"{}").expect("write");
        let l = d.path().join("rccl_telemetry_link_1_2.json");
        std::os::unix::fs::symlink(&f, &l).expect("symlink");
        let (files, bad) = expand_inputs(&[d.path().to_path_buf(), f.clone()]);
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].kind, BadKind::Duplicate);
    }

    #[test]
    fn star_does_not_cross_a_directory() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(d.path().join("x/y")).expect("mkdir");
        std::fs::write(d.path().join("x/rccl_telemetry_a_1_1.json"), b"{}").expect("w");
        std::fs::write(d.path().join("x/y/rccl_telemetry_b_1_1.json"), b"{}").expect("w");
        let (files, _) = expand_inputs(&[d.path().join("*/rccl_telemetry_*.json")]);
        assert_eq!(files, vec![d.path().join("x/rccl_telemetry_a_1_1.json")]);
        let (files, _) = expand_inputs(&[d.path().join("**/rccl_telemetry_*.json")]);
        assert_eq!(files.len(), 2, "{files:?}");
    }
}
