//! Borderless tables for the fleet views of `summary`, `check` and `outliers`: one line per
//! row, so a run of thousands of ranks still fits a screen.
//!
//! Separate from `layout` (the bordered tables whose cells wrap) because these never wrap:
//! they drop columns, then cut the last text column with "…"; `--wide` and `--json` keep
//! everything.

use crate::layout::{Column, Layout};

/// A borderless table: columns two spaces apart, indented by two, the highest drop ranks left
/// out (then the last text column cut) until every line fits `layout`. `title` replaces the first
/// column's header. Returns the lines and the headers left out.
pub fn plain_table(
    cols: &[Column],
    title: Option<&str>,
    rows: &[Vec<String>],
    layout: Layout,
) -> (String, Vec<&'static str>) {
    let chars = |s: &str| s.chars().count();
    let header: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| match title {
            Some(t) if i == 0 => t.to_string(),
            _ => c.header.to_string(),
        })
        .collect();
    let mut keep = vec![true; cols.len()];
    let mut widths: Vec<usize> = (0..cols.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |x| chars(x)))
                .max()
                .unwrap_or(0)
                .max(chars(&header[i]))
        })
        .collect();
    let total = |keep: &[bool], widths: &[usize]| {
        let n = keep.iter().filter(|k| **k).count();
        2 + widths
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(w, _)| *w)
            .sum::<usize>()
            + 2 * n.saturating_sub(1)
    };
    let mut gone = Vec::new();
    if let Layout::Fit(w) = layout {
        while total(&keep, &widths) > w {
            let Some(i) = (0..cols.len())
                .filter(|i| keep[*i] && cols[*i].drop_rank > 0)
                .max_by_key(|i| (cols[*i].drop_rank, *i))
            else {
                break;
            };
            keep[i] = false;
            gone.push(cols[i].header);
        }
        let t = total(&keep, &widths);
        if t > w {
            // Still too wide: cut the last text column that may be cut (evidence, a name).
            if let Some(i) = (0..cols.len())
                .rev()
                .find(|i| keep[*i] && !cols[*i].right && !cols[*i].whole)
            {
                widths[i] = widths[i].saturating_sub(t - w).max(4);
            }
        }
    }
    let cut = |s: &str, w: usize| -> String {
        if chars(s) <= w {
            s.to_string()
        } else {
            let mut c: String = s.chars().take(w.saturating_sub(1)).collect();
            c.push('…');
            c
        }
    };
    let mut out = String::new();
    for r in std::iter::once(&header).chain(rows) {
        let mut l = String::from(" ");
        for (i, c) in cols.iter().enumerate().filter(|(i, _)| keep[*i]) {
            let v = cut(r.get(i).map_or("", |x| x.as_str()), widths[i]);
            let pad = widths[i] - chars(&v);
            l.push(' ');
            if c.right {
                l.push_str(&" ".repeat(pad));
                l.push_str(&v);
            } else {
                l.push_str(&v);
                l.push_str(&" ".repeat(pad));
            }
            l.push(' ');
        }
        out.push_str(l.trim_end());
        out.push('\n');
    }
    (out, gone)
}

/// One line of at most the layout's width: longer ones end in "…".
pub fn fit(text: &str, layout: Layout) -> String {
    match layout {
        Layout::Fit(w) if text.chars().count() > w => {
            let mut c: String = text.chars().take(w.saturating_sub(1)).collect();
            c.push('…');
            c
        }
        _ => text.to_string(),
    }
}
