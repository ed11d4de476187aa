//! The exposition format's syntax: float values, escaped label values, HELP/TYPE headers and
//! sample lines. Separate from what is written so the renderers only decide which series
//! exist and their values.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::families::{Family, Kind};

/// Formats a float the way the exposition format reads it.
pub fn prom_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

pub(super) fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

pub(super) fn header(out: &mut String, name: &str, help: &str, kind: Kind) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {}", kind.as_str());
}

pub(super) fn label(out: &mut String, first: &mut bool, k: &str, v: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push_str(k);
    out.push_str("=\"");
    escape_into(out, v);
    out.push('"');
}

/// `a="x",b="y"` for the given pairs.
pub(super) fn labels(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let mut first = true;
    for (k, v) in pairs {
        label(&mut s, &mut first, k, v);
    }
    s
}

/// `name{base,extra} value`; `extra` is already formatted (may be empty).
pub(super) fn sample(
    out: &mut String,
    name: &str,
    base: &str,
    extra: &str,
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !base.is_empty() || !extra.is_empty() {
        out.push('{');
        out.push_str(base);
        if !base.is_empty() && !extra.is_empty() {
            out.push(',');
        }
        out.push_str(extra);
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Distinct label values: a repeat gets `#2`, `#3`... (only a malformed file repeats).
pub(super) fn unique(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values
        .map(|v| {
            let mut u = v.clone();
            let mut k = 1;
            while !seen.insert(u.clone()) {
                k += 1;
                u = format!("{v}#{k}");
            }
            u
        })
        .collect()
}

/// Writes a family of plain samples, (label pairs, value), with its HELP and TYPE lines
/// (nothing when there are no samples).
pub fn write_simple(out: &mut String, f: &Family, samples: &[(Vec<(&str, &str)>, String)]) {
    if samples.is_empty() {
        return;
    }
    let name = f.name();
    header(out, &name, f.help, f.kind);
    for (l, v) in samples {
        sample(out, &name, &labels(l), "", v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_get_distinct_labels() {
        assert_eq!(
            unique(["a", "b", "a", "a"].iter().map(|s| s.to_string())),
            vec!["a", "b", "a#2", "a#3"]
        );
    }
}
