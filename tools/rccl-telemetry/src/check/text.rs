//! `check` for people: one line per violation while they fit a screen; beyond, the counts
//! first, then one line per kind of violation (its place and message with the numbers
//! generalised) naming the first few files and how many more.
//!
//! Separate from `check` (schema and invariants) because it only prints the report; `--all`
//! and `--json` keep every violation.

use crate::check::{CheckReport, Violation};
use crate::layout::Layout;
use crate::plain::fit;
use std::collections::BTreeMap;
use std::path::Path;

/// Beyond this many violation lines the output is grouped.
pub const SCREEN_LINES: usize = 32;
/// Groups shown in the grouped view.
pub const GROUPS_SHOWN: usize = 16;
/// Files named per group.
pub const FILES_NAMED: usize = 3;

/// Violations of one kind at one place (array indices as *) with one message (numbers as N).
#[derive(Debug, Clone)]
pub struct Group {
    pub kind: &'static str,
    pub path: String,
    pub message: String,
    pub count: usize,
    /// The files, in the order met, each once.
    pub files: Vec<String>,
}

/// A JSON pointer with its array indices as "*": /devices/*/channels/*/num_wqe_sent.
pub fn generalise_path(p: &str) -> String {
    if p.is_empty() {
        return "/".into();
    }
    p.split('/')
        .map(|s| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                "*"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A message with every run of digits as "N" (and its first line only).
pub fn generalise_message(m: &str) -> String {
    let m = m.lines().next().unwrap_or("");
    let mut out = String::with_capacity(m.len());
    let mut in_digits = false;
    for c in m.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

/// Groups the violations, most frequent first (then by kind, place and message).
pub fn groups(items: &[&Violation]) -> Vec<Group> {
    let mut map: BTreeMap<(&'static str, String, String), Group> = BTreeMap::new();
    for v in items {
        let key = (
            v.kind,
            generalise_path(&v.path),
            generalise_message(&v.message),
        );
        let g = map.entry(key.clone()).or_insert_with(|| Group {
            kind: v.kind,
            path: key.1.clone(),
            message: key.2.clone(),
            count: 0,
            files: Vec::new(),
        });
        g.count += 1;
        if g.files.last() != Some(&v.file) && !g.files.contains(&v.file) {
            g.files.push(v.file.clone());
        }
    }
    let mut v: Vec<Group> = map.into_values().collect();
    v.sort_by_key(|g| std::cmp::Reverse(g.count));
    v
}

fn file_name(f: &str) -> &str {
    Path::new(f)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(f)
}

/// "      N files: a.json, b.json, +N more": as many names (up to FILES_NAMED) as fit.
fn files_line(files: &[String], layout: Layout) -> String {
    let limit = match layout {
        Layout::Fit(w) => w,
        Layout::Wide => usize::MAX,
    };
    let head = format!(
        "      {} file{}: ",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    let tail = |named: usize| {
        let more = files.len() - named;
        if more > 0 {
            format!(", +{more} more")
        } else {
            String::new()
        }
    };
    let mut named: Vec<&str> = Vec::new();
    for f in files.iter().take(FILES_NAMED) {
        let mut trial = named.clone();
        trial.push(file_name(f));
        let line = format!("{head}{}{}", trial.join(", "), tail(trial.len()));
        if !named.is_empty() && line.chars().count() > limit {
            break;
        }
        named = trial;
    }
    fit(
        &format!("{head}{}{}", named.join(", "), tail(named.len())),
        layout,
    )
}

/// The report for people: every line (small, or `all`), else the grouped view.
pub fn render(report: &CheckReport, all: bool, layout: Layout) -> String {
    let mut out = render_files(report, all, layout);
    for m in report.incomplete.iter().flat_map(|c| c.lines()) {
        out.push_str(&layout.wrap(&format!("incomplete run: {m}")));
        out.push('\n');
    }
    out
}

/// The violations and limitations of the files.
fn render_files(report: &CheckReport, all: bool, layout: Layout) -> String {
    let items: Vec<&Violation> = report
        .violations
        .iter()
        .chain(&report.limitations)
        .collect();
    let mut out = String::new();
    if all || items.len() <= SCREEN_LINES {
        for v in &items {
            out.push_str(&v.line());
            out.push('\n');
        }
        return out;
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &report.violations {
        *kinds.entry(v.kind).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let with = report.files - report.files_valid - report.files_unreadable;
    let mut head = format!(
        "Checked {} files: {} valid, {} with violations, {} unreadable; {} violations ({})",
        report.files,
        report.files_valid,
        with,
        report.files_unreadable,
        report.violations.len(),
        kinds.join(", ")
    );
    if !report.limitations.is_empty() {
        head.push_str(&format!(
            "; {} in-tree limitations",
            report.limitations.len()
        ));
    }
    out.push_str(&layout.wrap(&head));
    out.push('\n');
    let g = groups(&items);
    out.push_str(&layout.wrap(&format!(
        "{} kinds of violation (place and message alike, numbers as N), most frequent first:",
        g.len()
    )));
    out.push('\n');
    for x in g.iter().take(GROUPS_SHOWN) {
        out.push_str(&fit(
            &format!("  {} x {}: {}: {}", x.count, x.kind, x.path, x.message),
            layout,
        ));
        out.push('\n');
        out.push_str(&files_line(&x.files, layout));
        out.push('\n');
    }
    if g.len() > GROUPS_SHOWN {
        out.push_str(&format!("  +{} more kinds\n", g.len() - GROUPS_SHOWN));
    }
    out.push_str(&layout.wrap("Every violation, one line each: --all; as JSON: --json."));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(file: &str, path: &str, message: &str) -> Violation {
        Violation {
            file: file.into(),
            path: path.into(),
            kind: "invariant",
            message: message.into(),
        }
    }

    #[test]
    fn paths_and_messages_generalise() {
        assert_eq!(
            generalise_path("/devices/0/channels/12/num_wqe_sent"),
            "/devices/*/channels/*/num_wqe_sent"
        );
        assert_eq!(generalise_path(""), "/");
        assert_eq!(
            generalise_message("channel total 16645 != 16644 summed over its 12 queue pairs"),
            "channel total N != N summed over its N queue pairs"
        );
    }

    #[test]
    fn alike_violations_fold_into_one_group_counting_files_once() {
        let a = v("a.json", "/devices/0/x", "1 != 2");
        let b = v("a.json", "/devices/1/x", "3 != 4");
        let c = v("b.json", "/devices/0/x", "5 != 6");
        let d = v("b.json", "/y", "other");
        let g = groups(&[&a, &b, &c, &d]);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].count, 3);
        assert_eq!(g[0].files, vec!["a.json", "b.json"]);
        assert_eq!(g[1].path, "/y");
    }

    proptest! {
        /// Grouping loses no violation: the counts add up to the input.
        #[test]
        fn group_counts_add_up(items in proptest::collection::vec((0u8..4, 0u8..3, 0u32..1000), 0..80)) {
            let vs: Vec<Violation> = items
                .iter()
                .map(|(f, p, n)| v(&format!("f{f}.json"), &format!("/devices/{n}/k{p}"), &format!("value {n}")))
                .collect();
            let refs: Vec<&Violation> = vs.iter().collect();
            let g = groups(&refs);
            prop_assert_eq!(g.iter().map(|x| x.count).sum::<usize>(), vs.len());
            prop_assert!(g.len() <= 3);
        }
    }
}
