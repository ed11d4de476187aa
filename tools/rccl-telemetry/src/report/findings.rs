//! The report's verdict (its first screen) and its findings table: one row per culprit
//! (host:NIC, pid secondary), folded as `outliers` folds them, most severe first.
//!
//! Separate from report.rs (the page's layout and charts) because this part says what is
//! wrong: it is what an operator reads first, and it must never read as an all-clear when a
//! job hung, when the run is too small to tell, or when a finding is critical.

use super::{esc, rows_by_kind, REPORT_FINDING_ROWS};
use crate::outliers::{OutlierReport, Row, Severity};
use std::fmt::Write as _;

/// Rows the verdict shows (the most severe); the findings table below has the rest.
pub const VERDICT_ROWS: usize = 8;

/// The CSS of this part, added to the page's style.
pub const STYLE: &str = ".verdict{font-size:15px;padding:.5em .8em;border-left:6px solid #2a7}.verdict.critical{border-color:#c00;background:#fde0e0}.verdict.warning{border-color:#e90;background:#fff3d6}\n\
    .caveat{font-size:13px;padding:.3em .8em;border-left:6px solid #888;background:#f2f2f2;max-width:1200px}td.sev-critical{color:#b00;font-weight:bold}td.sev-warning{color:#a60}\n";

fn pids(r: &Row) -> String {
    r.pids
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One table row: number, severity, score, finding, culprit, pids, evidence.
fn row_html(i: usize, r: &Row, class: &str) -> String {
    format!(
        "<tr{class}><td class=\"n\">{}</td><td class=\"sev-{}\">{}</td><td class=\"n\">{:.1}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
        i + 1,
        r.severity.as_str(),
        r.severity.as_str(),
        r.score,
        esc(&r.what),
        esc(&r.culprit),
        esc(&pids(r)),
        esc(&r.evidence)
    )
}

const HEADER: &str = "<tr><th>#</th><th>severity</th><th>score</th><th>finding</th><th>culprit (host:NIC)</th><th>pid</th><th>evidence</th></tr>\n";

/// The first screen: what is wrong (critical first), and what cannot be told; a run with
/// nothing says so with the rules it was judged by.
pub fn verdict(o: &OutlierReport) -> String {
    let mut h = String::new();
    let (class, line) = if o.rows.is_empty() {
        (
            "ok",
            format!(
                "Nothing found on {} ranks ({} used devices): no hang, stall or error, and nothing past both the statistical rule (robust z >= {}) and the practical ones.",
                o.ranks, o.devices, o.threshold
            ),
        )
    } else {
        let top: Vec<String> = o
            .rows
            .iter()
            .take(3)
            .map(|r| format!("{} {}", r.kind.label(), r.culprit))
            .collect();
        (
            if o.critical > 0 {
                "critical"
            } else if o.warning > 0 {
                "warning"
            } else {
                "ok"
            },
            format!(
                "{} critical, {} warning, {} info ({} findings in {} rows): {}{}.",
                o.critical,
                o.warning,
                o.info,
                o.findings.len(),
                o.rows.len(),
                top.join("; "),
                if o.rows.len() > 3 { "; ..." } else { "" }
            ),
        )
    };
    let _ = writeln!(
        h,
        "<h2 id=\"verdict\">Verdict</h2>\n<p class=\"verdict {class}\" id=\"verdict-line\">{}</p>",
        esc(&line)
    );
    for c in &o.caveats {
        let what = c.title();
        let _ = writeln!(
            h,
            "<p class=\"caveat\" data-caveat=\"{}\">{what}: {}</p>",
            esc(c.kind),
            esc(&c.evidence)
        );
    }
    let first: Vec<&Row> = o
        .rows
        .iter()
        .filter(|r| r.severity != Severity::Info)
        .take(VERDICT_ROWS)
        .collect();
    if !first.is_empty() {
        h.push_str("<table id=\"verdict-rows\">");
        h.push_str(HEADER);
        for (i, r) in first.iter().enumerate() {
            h.push_str(&row_html(i, r, ""));
        }
        h.push_str("</table>\n");
    }
    h
}

/// The findings table: every row up to `REPORT_FINDING_ROWS`, the rest counted by kind.
pub fn section(h: &mut String, o: &OutlierReport, aggregated: &mut Vec<String>) {
    let rows = &o.rows;
    let _ = writeln!(
        h,
        "<h2 id=\"outliers\">Findings</h2>\n<p>{} findings in {} rows on {} of {} ranks ({} critical, {} warning, {} info; robust z &gt;= {}, median and MAD over {} used devices, with the practical rules of the README); one row per culprit, named host:NIC, with every finding about it.</p>",
        o.findings.len(),
        rows.len(),
        o.ranks_flagged,
        o.ranks,
        o.critical,
        o.warning,
        o.info,
        o.threshold,
        o.devices
    );
    if rows.is_empty() {
        return;
    }
    h.push_str("<table id=\"findings\">");
    h.push_str(HEADER);
    for (i, r) in rows.iter().take(REPORT_FINDING_ROWS).enumerate() {
        h.push_str(&row_html(i, r, " class=\"flag\""));
    }
    h.push_str("</table>\n");
    if rows.len() > REPORT_FINDING_ROWS {
        let rest = rows_by_kind(&rows[REPORT_FINDING_ROWS..]);
        let line = format!(
            "{} more rows not shown (the {REPORT_FINDING_ROWS} most severe are above): {}. `rccl-telemetry outliers --top 0` lists them all.",
            rows.len() - REPORT_FINDING_ROWS,
            rest
        );
        let _ = writeln!(
            h,
            "<p class=\"note\" id=\"findings-rest\">{}</p>",
            esc(&line)
        );
        aggregated.push(format!(
            "the findings table shows the {REPORT_FINDING_ROWS} most severe of {} rows, the rest counted by kind",
            rows.len()
        ));
    }
}
