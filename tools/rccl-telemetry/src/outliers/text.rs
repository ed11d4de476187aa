//! `outliers` for people: the findings folded into one row per kind and device, counted by
//! kind first, then the strongest rows.
//!
//! Separate from `outliers` (the rules that find them) so the statistics read without the
//! rendering.

use super::{Finding, Kind, OutlierReport};
use crate::layout::{col, table, Column, Layout};
use serde::Serialize;
use std::collections::BTreeMap;

/// One row of the findings table: the findings of one kind on one device (or rank file),
/// folded together so a device whose 17 counters all read -1 is one row naming them.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The highest score of the folded findings.
    pub score: f64,
    pub kind: Kind,
    pub what: String,
    pub rank: String,
    pub device_id: Option<u32>,
    /// The metrics (counters) folded into this row, strongest first.
    pub metrics: Vec<String>,
    pub evidence: String,
}

fn what(f: &Finding) -> String {
    match f.category {
        Some(c) if f.kind == Kind::HwCounter => format!("{} ({})", c.label(), f.metric),
        _ => format!("{} ({})", f.kind.label(), f.metric),
    }
}

/// Folds the (score-ordered) findings: one row per kind and device (or rank file), at the
/// place of its strongest finding.
pub fn fold(findings: &[Finding]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut members: Vec<Vec<&Finding>> = Vec::new();
    let mut index: BTreeMap<(Kind, &str, &str, Option<u32>), usize> = BTreeMap::new();
    for f in findings {
        let key = (f.kind, f.rank.as_str(), f.file.as_str(), f.device_id);
        match index.get(&key) {
            Some(&i) => members[i].push(f),
            None => {
                index.insert(key, rows.len());
                members.push(vec![f]);
                rows.push(Row {
                    score: f.score,
                    kind: f.kind,
                    what: String::new(),
                    rank: f.rank.clone(),
                    device_id: f.device_id,
                    metrics: Vec::new(),
                    evidence: String::new(),
                });
            }
        }
    }
    for (r, m) in rows.iter_mut().zip(&members) {
        r.score = m.iter().map(|f| f.score).fold(f64::NEG_INFINITY, f64::max);
        r.metrics = m.iter().map(|f| f.metric.clone()).collect();
        if m.len() == 1 {
            r.what = what(m[0]);
            r.evidence = m[0].evidence.clone();
        } else {
            let mut cats: Vec<&str> = m
                .iter()
                .filter_map(|f| f.category.map(|c| c.label()))
                .collect();
            cats.sort_unstable();
            cats.dedup();
            r.what = if r.kind == Kind::HwCounter && cats.len() == 1 {
                format!("{} ({} counters)", cats[0], m.len())
            } else {
                format!("{} ({} counters)", r.kind.label(), m.len())
            };
            r.evidence = format!(
                "{} counters: {}. Strongest: {}",
                m.len(),
                r.metrics.join(", "),
                m[0].evidence
            );
        }
    }
    rows
}

const FINDING_COLUMNS: [Column; 6] = [
    col("#", true, 1),
    col("score", true, 0),
    col("finding", false, 0),
    col("rank", false, 0).whole(),
    col("dev", true, 0),
    col("evidence", false, 0),
];

/// Renders the findings for people (wide); `top` limits the rows (0 = all).
pub fn render_text(r: &OutlierReport, top: usize) -> String {
    render_text_layout(r, top, Layout::Wide)
}

/// Beyond this many used devices the default view is two lines per row (evidence cut to fit)
/// so a fleet-sized run fits a screen.
pub const SCREEN_DEVICES: usize = 32;
/// Rows shown by default: in the one-line view, and in the table.
pub const TOP_COMPACT: usize = 20;
pub const TOP_TABLE: usize = 50;

/// How the findings are printed.
#[derive(Debug, Clone, Copy)]
pub struct OutlierText {
    pub layout: Layout,
    /// Rows shown (0 = all); None: the default of the view.
    pub top: Option<usize>,
    /// Every row in the table with its whole evidence, however large the run.
    pub all: bool,
}

/// Renders the findings for people within `layout`, one row per kind and device; `top`
/// limits the rows (0 = all).
pub fn render_text_layout(r: &OutlierReport, top: usize, layout: Layout) -> String {
    render_with(
        r,
        &OutlierText {
            layout,
            top: Some(top),
            all: false,
        },
    )
}

/// The rows counted by kind (hardware counters by category), most rows first:
/// "drop 1, retransmit 1 (2 findings), latency tail 1".
pub fn by_kind(rows: &[Row]) -> String {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in rows {
        let k = r
            .what
            .split(" (")
            .next()
            .unwrap_or(r.kind.as_str())
            .to_string();
        let e = counts.entry(k).or_default();
        e.0 += 1;
        e.1 += r.metrics.len();
    }
    let mut v: Vec<(String, (usize, usize))> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(k, (rows, findings))| {
            if findings > rows {
                format!("{k} {rows} ({findings} findings)")
            } else {
                format!("{k} {rows}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders the findings: counts by kind first, then the strongest rows (one line each when
/// the run is beyond a screen, else the table with the whole evidence).
pub fn render_with(r: &OutlierReport, o: &OutlierText) -> String {
    let layout = o.layout;
    let rows = fold(&r.findings);
    let mut out = layout.wrap(&format!(
        "{} findings in {} rows on {} of {} ranks ({} used devices; robust z >= {}, median/MAD)",
        r.findings.len(),
        rows.len(),
        r.ranks_flagged,
        r.ranks,
        r.devices,
        r.threshold
    ));
    out.push('\n');
    if r.findings.is_empty() {
        return out;
    }
    out.push_str(&layout.wrap(&format!("By kind: {}", by_kind(&rows))));
    out.push('\n');
    let compact = !o.all && r.devices > SCREEN_DEVICES;
    let top = match (o.all, o.top) {
        (true, _) => 0,
        (false, Some(t)) => t,
        (false, None) if compact => TOP_COMPACT,
        (false, None) => TOP_TABLE,
    };
    let n = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                format!("{:.1}", f.score),
                f.what.clone(),
                f.rank.clone(),
                f.device_id.map_or("-".into(), |d| d.to_string()),
                f.evidence.clone(),
            ]
        })
        .collect();
    if compact {
        // Two lines a row: the row, then its evidence (cut to fit).
        let heads: Vec<Vec<String>> = cells.iter().map(|c| c[..5].to_vec()).collect();
        let (t, _) = crate::plain::plain_table(&FINDING_COLUMNS[..5], None, &heads, layout);
        for (i, l) in t.lines().enumerate() {
            out.push_str(l);
            out.push('\n');
            if let Some(c) = i.checked_sub(1).and_then(|k| cells.get(k)) {
                out.push_str(&crate::plain::fit(&format!("      {}", c[5]), layout));
                out.push('\n');
            }
        }
    } else {
        let (t, _) = table(&FINDING_COLUMNS, &cells, layout);
        out.push_str(&t);
        out.push('\n');
    }
    if n < rows.len() {
        out.push_str(&layout.wrap(&format!(
            "... and {} more rows (--all or --top 0 shows all, --json every finding)",
            rows.len() - n
        )));
        out.push('\n');
    }
    if compact && matches!(layout, Layout::Fit(_)) {
        out.push_str(&layout.wrap(
            "Evidence cut to fit: --all prints the table with the whole evidence, --wide the lines uncut.",
        ));
        out.push('\n');
    }
    out
}
