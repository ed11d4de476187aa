//! `outliers` for people: the findings folded into one row per kind and device, counted by
//! kind first, then the strongest rows.
//!
//! Separate from `outliers` (the rules that find them) so the statistics read without the
//! rendering.

use super::{Finding, Kind, OutlierReport, Severity};
use crate::layout::{col, table, Column, Layout};
use serde::Serialize;
use std::collections::BTreeMap;

/// One row of the findings table: everything said about one culprit. A NIC's row holds its
/// fabric verdict (slow NIC, host-side delay) with its latency tail, its counters and its
/// errors; a hang root's row the stalled and errored QPs waiting on it; a device whose 17
/// counters all read -1 is one row naming them.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The most severe of the folded findings.
    pub severity: Severity,
    /// The highest score of the folded findings.
    pub score: f64,
    /// How sure the row's verdict is: its head finding's confidence (0 to 1), and in words
    /// ("high", "medium", "low").
    pub confidence: f64,
    pub sure: &'static str,
    /// An ambiguous row (`slow_link_or_nic`): the explanations that fit equally.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<super::Alternative>,
    /// The row's kind: the culprit's (a fabric verdict, a hang root), else its most severe and
    /// strongest finding's.
    pub kind: Kind,
    /// Every kind folded into the row, its own first.
    pub kinds: Vec<Kind>,
    pub what: String,
    /// Who: "host:NIC", "a:NIC <-> b:NIC", "a:NIC -> b:NIC", a host, or "host:pid" for a rank
    /// file that drives several NICs.
    pub culprit: String,
    /// The processes (pids) whose findings are in the row: secondary to the NIC.
    pub pids: Vec<i64>,
    /// The rank ("host:pid") of its first finding, as `--json` findings name it.
    pub rank: String,
    pub device_id: Option<u32>,
    /// The metrics (counters) folded into this row, strongest first.
    pub metrics: Vec<String>,
    /// Findings folded into the row.
    pub findings: usize,
    pub evidence: String,
}

fn what(f: &Finding) -> String {
    match f.category {
        Some(c) if f.kind == Kind::HwCounter => format!("{} ({})", c.label(), f.metric),
        _ if f.kind.is_culprit() || f.kind == Kind::StalledQps => f.kind.label(),
        _ => format!("{} ({})", f.kind.label(), f.metric),
    }
}

/// A kind as a row names it: hardware counters by their category.
fn short(f: &Finding) -> String {
    match f.category {
        Some(c) if f.kind == Kind::HwCounter => c.label().to_string(),
        _ => f.kind.label(),
    }
}

/// The NICs ("host:NIC") a finding is about, as rows match them.
fn nic_labels(f: &Finding) -> Vec<String> {
    if f.nics.is_empty() || f.kind == Kind::SlowLink || f.kind == Kind::SlowLinkOneWay {
        if f.kind.is_culprit() {
            return f.nics.iter().map(|(h, d)| super::nic_label(h, d)).collect();
        }
        return vec![f.culprit.clone()];
    }
    f.nics.iter().map(|(h, d)| super::nic_label(h, d)).collect()
}

/// Whether the culprit `head` explains finding `f`: `f` is about one of its NICs, or (a hang
/// root) comes from a rank waiting on it (its stalled QPs, its errors, its RNR NAKs).
fn claims(head: &Finding, head_nics: &[String], f: &Finding) -> bool {
    if head.kind == Kind::HangRoot && head.behind.contains(&f.rank) {
        return true;
    }
    nic_labels(f).iter().any(|n| head_nics.contains(n))
}

/// Folds the (severity- and score-ordered) findings into one row per culprit, most severe
/// first, then strongest: every culprit finding (a fabric verdict, a hang root) is a row and
/// takes in the findings about its NICs (and a root those of the ranks waiting on it); the
/// other findings fold per NIC (or rank file).
pub fn fold(findings: &[Finding]) -> Vec<Row> {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    let mut heads: Vec<Vec<String>> = Vec::new();
    let mut index: BTreeMap<(bool, Kind, &str), usize> = BTreeMap::new();
    for f in findings.iter().filter(|f| f.kind.is_culprit()) {
        let key = (true, f.kind, f.culprit.as_str());
        match index.get(&key) {
            Some(&g) => groups[g].push(f),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![f]);
                heads.push(nic_labels(f));
            }
        }
    }
    let culprits = groups.len();
    for f in findings.iter().filter(|f| !f.kind.is_culprit()) {
        if let Some(g) = (0..culprits).find(|g| claims(groups[*g][0], &heads[*g], f)) {
            groups[g].push(f);
            continue;
        }
        let key = (false, Kind::Snapshot, f.culprit.as_str());
        match index.get(&key) {
            Some(&g) => groups[g].push(f),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![f]);
            }
        }
    }
    let mut rows: Vec<Row> = groups.iter().map(|m| row(m)).collect();
    rows.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.culprit.cmp(&b.culprit))
    });
    rows
}

/// One row from its findings (the first is its head: a culprit, or the most severe and
/// strongest).
fn row(m: &[&Finding]) -> Row {
    let head = m[0];
    // The findings by kind (hardware counters by category), in order.
    let mut parts: Vec<(String, Vec<&Finding>)> = Vec::new();
    for f in m {
        let k = short(f);
        match parts.iter_mut().find(|(x, _)| *x == k) {
            Some((_, v)) => v.push(f),
            None => parts.push((k, vec![f])),
        }
    }
    let say = |v: &[&Finding]| -> String {
        if v.len() == 1 || v.iter().all(|f| f.metric == v[0].metric) {
            v[0].evidence.clone()
        } else {
            let names: Vec<&str> = v.iter().map(|f| f.metric.as_str()).collect();
            format!(
                "{} counters: {}. Strongest: {}",
                v.len(),
                names.join(", "),
                v[0].evidence
            )
        }
    };
    let (_, own) = &parts[0];
    let mut what_s = if own.len() > 1 && own.iter().any(|f| f.metric != own[0].metric) {
        format!("{} ({} counters)", parts[0].0, own.len())
    } else {
        what(head)
    };
    let mut evidence = say(own);
    if parts.len() > 1 {
        let others: Vec<String> = parts[1..]
            .iter()
            .map(|(k, v)| {
                if v.len() > 1 {
                    format!("{k} ({})", v.len())
                } else {
                    k.clone()
                }
            })
            .collect();
        what_s.push_str(&format!(" + {}", others.join(", ")));
        for (k, v) in &parts[1..] {
            evidence.push_str(&format!("; also {k}: {}", say(v)));
        }
    }
    let mut kinds: Vec<Kind> = Vec::new();
    for f in m {
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    // The culprit's own pid first, then the others' whose findings folded in.
    let mut others: Vec<i64> = m
        .iter()
        .map(|f| f.pid)
        .filter(|p| *p > 0 && *p != head.pid)
        .collect();
    others.sort_unstable();
    others.dedup();
    let pids: Vec<i64> = (head.pid > 0)
        .then_some(head.pid)
        .into_iter()
        .chain(others)
        .collect();
    Row {
        severity: m.iter().map(|f| f.severity).min().unwrap_or(head.severity),
        score: m.iter().map(|f| f.score).fold(f64::NEG_INFINITY, f64::max),
        confidence: head.confidence,
        sure: super::confidence_label(head.confidence),
        alternatives: head.alternatives.clone(),
        kind: head.kind,
        kinds,
        what: what_s,
        culprit: head.culprit.clone(),
        pids,
        rank: head.rank.clone(),
        device_id: head.device_id,
        metrics: m.iter().map(|f| f.metric.clone()).collect(),
        findings: m.len(),
        evidence,
    }
}

const FINDING_COLUMNS: [Column; 8] = [
    col("#", true, 1),
    col("severity", false, 0),
    col("score", true, 0),
    col("sure", false, 0),
    col("finding", false, 0),
    col("culprit", false, 0).whole(),
    col("pid", true, 0),
    col("evidence", false, 0),
];

/// The findings table without its evidence, for the stacked view: the row number is kept.
const STACKED_COLUMNS: [Column; 7] = {
    let f = FINDING_COLUMNS;
    [col("#", true, 0), f[1], f[2], f[3], f[4], f[5], f[6]]
};

/// Narrower than this, an evidence column is a tall strip of a few words a line: the
/// evidence then goes under the table, each at the whole width.
const MIN_EVIDENCE_COLUMN: usize = 40;

/// The stacked view of `cells` (the table's rows, evidence last) within a width, when the
/// table would leave its evidence column fewer than [`MIN_EVIDENCE_COLUMN`] characters: the
/// table of the other columns, then each row's whole evidence under its number, word-wrapped
/// to the width. None when the evidence fits beside the rest (or the layout is wide).
fn stacked(cells: &[Vec<String>], layout: Layout) -> Option<String> {
    let Layout::Fit(w) = layout else {
        return None;
    };
    let heads: Vec<Vec<String>> = cells.iter().map(|c| c[..7].to_vec()).collect();
    let (t, _) = table(&STACKED_COLUMNS, &heads, layout);
    let used = t.lines().next().map_or(0, |l| l.chars().count());
    // The evidence column would take its two borders' worth of the width as well.
    if w.saturating_sub(used + 3) >= MIN_EVIDENCE_COLUMN {
        return None;
    }
    let mut out = t;
    out.push('\n');
    out.push_str("Evidence:\n");
    let pad = cells.len().to_string().len() + 2;
    for c in cells {
        let body = crate::layout::wrap(&c[7], w.saturating_sub(pad).max(20));
        for (i, l) in body.lines().enumerate() {
            if i == 0 {
                out.push_str(&format!("{:>n$}  {l}\n", c[0], n = pad - 2));
            } else {
                out.push_str(&format!("{:pad$}{l}\n", ""));
            }
        }
    }
    Some(out)
}

/// The pids of a row: "6761", "6761 +3".
fn pid_cell(p: &[i64]) -> String {
    match p {
        [] => "-".into(),
        [one] => one.to_string(),
        [one, rest @ ..] => format!("{one} +{}", rest.len()),
    }
}

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

/// The first lines: what was found, by severity, and what the run cannot tell.
pub fn headline(r: &OutlierReport) -> Vec<String> {
    let mut v = vec![format!(
        "{} findings in {} rows on {} of {} ranks ({} used devices): {} critical, {} warning, {} info",
        r.findings.len(),
        r.rows.len(),
        r.ranks_flagged,
        r.ranks,
        r.devices,
        r.critical,
        r.warning,
        r.info
    )];
    for c in &r.caveats {
        let what = c.title();
        v.push(format!("{what}: {}", c.evidence));
    }
    v
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
    let rows = &r.rows;
    let mut out = String::new();
    for l in headline(r) {
        out.push_str(&layout.wrap(&l));
        out.push('\n');
    }
    if r.findings.is_empty() {
        return out;
    }
    out.push_str(&layout.wrap(&format!("By kind: {}", by_kind(rows))));
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
                f.severity.as_str().to_string(),
                format!("{:.1}", f.score),
                f.sure.to_string(),
                f.what.clone(),
                f.culprit.clone(),
                pid_cell(&f.pids),
                f.evidence.clone(),
            ]
        })
        .collect();
    if compact {
        // Two lines a row: the row, then its evidence (cut to fit).
        let heads: Vec<Vec<String>> = cells.iter().map(|c| c[..7].to_vec()).collect();
        let (t, _) = crate::plain::plain_table(&FINDING_COLUMNS[..7], None, &heads, layout);
        for (i, l) in t.lines().enumerate() {
            out.push_str(l);
            out.push('\n');
            if let Some(c) = i.checked_sub(1).and_then(|k| cells.get(k)) {
                out.push_str(&crate::plain::fit(&format!("      {}", c[7]), layout));
                out.push('\n');
            }
        }
    } else if let Some(stacked) = stacked(&cells, layout) {
        out.push_str(&stacked);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [Kind; 8] = [
        Kind::SlowNic,
        Kind::HostSideDelay,
        Kind::LatencyTail,
        Kind::HwCounter,
        Kind::CqErrors,
        Kind::StalledQps,
        Kind::Snapshot,
        Kind::HangRoot,
    ];

    fn finding(kind: Kind, nic: usize, score: f64) -> Finding {
        let (host, dev) = (format!("h{}", nic / 2), format!("mlx5_{}", nic % 2));
        Finding {
            kind,
            severity: kind.severity(),
            culprit: format!("{host}:{dev}"),
            category: None,
            rank: format!("{host}:{}", 100 + nic),
            host: host.clone(),
            pid: 100 + nic as i64,
            file: format!("f{nic}"),
            device_id: Some((nic % 2) as u32),
            roce_device: Some(dev.clone()),
            metric: kind.as_str().into(),
            value: 1.0,
            population: 8,
            median: None,
            mad: None,
            z: None,
            score,
            evidence: format!("{} on {nic}", kind.as_str()),
            confidence: 1.0,
            alternatives: Vec::new(),
            nics: vec![(host, dev)],
            behind: Vec::new(),
        }
    }

    fn cells(what: &str, evidence: &str) -> Vec<Vec<String>> {
        let row = [
            "1",
            "critical",
            "12.8",
            "high",
            what,
            "node-b:mlx5_1",
            "3430",
            evidence,
        ];
        vec![row.iter().map(|c| c.to_string()).collect()]
    }

    #[test]
    fn a_narrow_evidence_column_goes_under_the_table_whole() {
        let long = "node-b:mlx5_1 is slow towards most of its peers (8 of its 8 links): median p50 37.7 µs (6.1x the healthy links' p50 6.1 µs); also cq errors: 44 completions drained with an error status";
        let c = cells(
            "slow nic + cq errors, CNP, ECN, retransmit, out-of-sequence",
            long,
        );
        let s = stacked(&c, Layout::Fit(100)).expect("100 columns leave the evidence too few");
        assert!(s.lines().all(|l| l.chars().count() <= 100), "{s}");
        assert!(!s.contains("evidence"), "no evidence column: {s}");
        let (_, below) = s
            .split_once("Evidence:\n")
            .expect("the evidence under the table");
        assert!(below.starts_with("1  node-b:mlx5_1 is slow"), "{below}");
        let words: Vec<&str> = below.split_whitespace().skip(1).collect();
        assert_eq!(
            words,
            long.split_whitespace().collect::<Vec<_>>(),
            "whole, in order"
        );
        // Wide enough for a 40-column evidence, or a wide layout: the one table.
        assert!(stacked(&cells("slow nic", "short"), Layout::Fit(160)).is_none());
        assert!(stacked(&c, Layout::Wide).is_none());
    }

    #[test]
    fn a_slow_nic_its_tail_and_its_counters_are_one_row() {
        let f = vec![
            finding(Kind::CqErrors, 3, 5.5),
            finding(Kind::SlowNic, 3, 11.9),
            finding(Kind::LatencyTail, 3, 23.3),
            finding(Kind::HwCounter, 3, 8.0),
            finding(Kind::LatencyTail, 4, 6.0),
        ];
        let rows = fold(&f);
        assert_eq!(rows.len(), 2, "{rows:#?}");
        assert_eq!(rows[0].kind, Kind::SlowNic);
        assert_eq!(
            rows[0].severity,
            Severity::Critical,
            "its CQ errors are critical"
        );
        assert_eq!(rows[0].culprit, "h1:mlx5_1");
        assert_eq!(rows[0].findings, 4);
        assert!(rows[0].what.starts_with("slow nic + "), "{}", rows[0].what);
        assert!(
            rows[0].evidence.contains("also latency tail"),
            "{}",
            rows[0].evidence
        );
        assert_eq!(rows[1].culprit, "h2:mlx5_0");
    }

    proptest! {
        /// Every finding lands in exactly one row; rows are most severe first, then strongest;
        /// a culprit's rows are as severe as its most severe finding; one row per culprit (one
        /// per culprit kind when it has several).
        #[test]
        fn folding_keeps_every_finding_in_one_ranked_row(
            spec in proptest::collection::vec((0usize..KINDS.len(), 0usize..6, 0f64..100.0), 0..40)
        ) {
            let mut f: Vec<Finding> = spec.iter().map(|(k, n, s)| finding(KINDS[*k], *n, *s)).collect();
            f.sort_by(|a, b| a.severity.cmp(&b.severity).then(b.score.total_cmp(&a.score)));
            let rows = fold(&f);
            prop_assert_eq!(rows.iter().map(|r| r.findings).sum::<usize>(), f.len());
            for w in rows.windows(2) {
                prop_assert!(w[0].severity < w[1].severity
                    || (w[0].severity == w[1].severity && w[0].score >= w[1].score));
            }
            for r in &rows {
                let of = |c: &str| f.iter().filter(|x| x.culprit == c).collect::<Vec<_>>();
                let members = of(&r.culprit);
                let worst = members.iter().map(|x| x.severity).min();
                let row_worst = rows.iter().filter(|x| x.culprit == r.culprit).map(|x| x.severity).min();
                prop_assert_eq!(row_worst, worst);
                // One row per culprit, or one per culprit kind on it (a hang root and a slow NIC).
                let mut culprit_kinds: Vec<Kind> = members.iter().map(|x| x.kind).filter(|k| k.is_culprit()).collect();
                culprit_kinds.sort_unstable();
                culprit_kinds.dedup();
                let n = rows.iter().filter(|x| x.culprit == r.culprit).count();
                prop_assert!(n <= culprit_kinds.len().max(1), "{} rows for {}", n, r.culprit);
            }
        }
    }
}
