//! Terminal layout: how wide the default tables may be, a table builder that drops the least
//! important columns (then wraps cells) until no line is wider, and word-wrapped prose.
//!
//! The width is the terminal's when stdout is one, else `COLUMNS`, else 100. `--wide` turns
//! the limit off: every column, nothing wrapped (the full evidence is also in `--json`).

use comfy_table::{
    presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table,
    Width,
};
use std::io::IsTerminal;

/// Width used when neither the terminal nor `COLUMNS` says.
pub const DEFAULT_WIDTH: usize = 100;
/// Narrowest width honoured (a narrower `COLUMNS` is read as this).
pub const MIN_WIDTH: usize = 40;

/// The width the default output must fit: the terminal's (stdout is a terminal), else
/// `COLUMNS`, else 100.
pub fn output_width() -> usize {
    let term = if std::io::stdout().is_terminal() {
        Table::new().width().map(usize::from)
    } else {
        None
    };
    let cols = std::env::var("COLUMNS").ok();
    resolve_width(term, cols.as_deref())
}

/// `output_width` from its inputs: the terminal width if known, else `COLUMNS` if it is a
/// positive number, else `DEFAULT_WIDTH`; never below `MIN_WIDTH`.
pub fn resolve_width(terminal: Option<usize>, columns: Option<&str>) -> usize {
    let w = terminal
        .filter(|w| *w > 0)
        .or_else(|| {
            columns
                .and_then(|c| c.trim().parse::<usize>().ok())
                .filter(|w| *w > 0)
        })
        .unwrap_or(DEFAULT_WIDTH);
    w.max(MIN_WIDTH)
}

/// How a text output is laid out: at most `width` columns, or wide (no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Fit(usize),
    Wide,
}

impl Layout {
    /// `--wide` or the output width.
    pub fn from_flag(wide: bool) -> Layout {
        if wide {
            Layout::Wide
        } else {
            Layout::Fit(output_width())
        }
    }

    /// Word-wraps `text` (one paragraph, or several separated by '\n') to the width.
    pub fn wrap(self, text: &str) -> String {
        match self {
            Layout::Wide => text.to_string(),
            Layout::Fit(w) => wrap(text, w),
        }
    }
}

/// One column of a table: its header, whether it is right-aligned, and its rank (0 = always
/// kept; the highest ranks are dropped first when the table does not fit).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    pub right: bool,
    pub drop_rank: u8,
    /// Never wrapped when the table must wrap (an identifier such as host:pid).
    pub whole: bool,
}

pub const fn col(header: &'static str, right: bool, drop_rank: u8) -> Column {
    Column {
        header,
        right,
        drop_rank,
        whole: false,
    }
}

impl Column {
    /// This column's cells are never wrapped.
    pub const fn whole(mut self) -> Column {
        self.whole = true;
        self
    }
}

fn build(cols: &[Column], keep: &[bool], rows: &[Vec<String>], width: Option<usize>) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.force_no_tty();
    match width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic);
            t.set_width(u16::try_from(w).unwrap_or(u16::MAX));
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    t.set_header(
        cols.iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| Cell::new(c.header))
            .collect::<Vec<_>>(),
    );
    for r in rows {
        t.add_row(
            cols.iter()
                .zip(keep)
                .zip(r)
                .filter(|((_, k), _)| **k)
                .map(|((c, _), v)| {
                    let cell = Cell::new(v);
                    if c.right {
                        cell.set_alignment(CellAlignment::Right)
                    } else {
                        cell
                    }
                })
                .collect::<Vec<_>>(),
        );
    }
    if let Some(w) = width {
        for (i, b) in lower_bounds(cols, keep, rows, w).into_iter().enumerate() {
            if let (Some(b), Some(column)) = (b, t.column_mut(i)) {
                let b = u16::try_from(b).unwrap_or(u16::MAX);
                column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(b)));
            }
        }
    }
    t.to_string()
}

/// The least width of each kept column of a table fitted to `w` (None: comfy-table's choice):
/// identifiers stay whole, and a wrapped column never cuts a word (a host:device name in the
/// evidence), each up to a third of the width: wrapping them helps nobody. When the bounds and
/// the other columns' headers do not fit, the widest word bounds give way first, down to their
/// header; if that is not enough, only the identifiers keep theirs.
fn lower_bounds(
    cols: &[Column],
    keep: &[bool],
    rows: &[Vec<String>],
    w: usize,
) -> Vec<Option<usize>> {
    const PAD: usize = 2; // a cell's padding
    let kept: Vec<(usize, &Column)> = cols
        .iter()
        .enumerate()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(c, _)| c)
        .collect();
    let mut bounds: Vec<Option<usize>> = Vec::with_capacity(kept.len());
    let mut floor = Vec::with_capacity(kept.len());
    for &(ci, c) in &kept {
        let cells = rows.iter().filter_map(|r| r.get(ci));
        let longest = if c.whole {
            cells.map(|v| v.chars().count()).max()
        } else {
            cells
                .flat_map(|v| v.split_whitespace())
                .map(|word| word.chars().count())
                .max()
        }
        .unwrap_or(0);
        let head = c.header.len() + PAD;
        floor.push(head);
        bounds.push(
            (c.whole || longest > c.header.len())
                .then(|| (longest.max(c.header.len()) + PAD).min(w / 3)),
        );
    }
    let need = |b: &[Option<usize>]| -> usize {
        b.iter()
            .zip(&floor)
            .map(|(b, f)| b.unwrap_or(*f))
            .sum::<usize>()
            + b.len()
            + 1
    };
    let mut over = need(&bounds).saturating_sub(w);
    while over > 0 {
        let widest = (0..kept.len())
            .filter(|&i| !kept[i].1.whole && bounds[i].is_some_and(|b| b > floor[i]))
            .max_by_key(|&i| bounds[i]);
        let Some(i) = widest else { break };
        let b = bounds[i].unwrap_or(floor[i]);
        let cut = over.min(b - floor[i]);
        bounds[i] = Some(b - cut);
        over -= cut;
    }
    if over > 0 {
        for (b, &(_, c)) in bounds.iter_mut().zip(&kept) {
            if !c.whole {
                *b = None;
            }
        }
    }
    bounds
}

/// The most characters of one cell a fitted table shows: the table's wrapping (comfy-table's)
/// cuts a long word in time that grows with the square of its length, and no reader of a
/// terminal table wants more. `--wide` and `--json` keep every cell whole.
pub const CELL_MAX_CHARS: usize = 4096;

/// A cell of at most `CELL_MAX_CHARS` as it is; a longer one as its first `CELL_MAX_CHARS`
/// characters and how many it has ("… (16,777,216 characters; --wide or --json: whole)").
fn elide(v: &str) -> std::borrow::Cow<'_, str> {
    match v.char_indices().nth(CELL_MAX_CHARS) {
        None => std::borrow::Cow::Borrowed(v),
        Some((cut, _)) => std::borrow::Cow::Owned(format!(
            "{}… ({} characters; --wide or --json: whole)",
            &v[..cut],
            crate::stats::fmt_count(v.chars().count() as u64)
        )),
    }
}

/// Widest line of `s`, in characters.
pub fn widest(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// Renders `rows` under `cols`. Wide: every column, nothing wrapped. Fit(w): drops columns
/// from the highest `drop_rank` down until the unwrapped table fits in `w`; if the columns
/// that are always kept still do not fit, wraps their cells to `w`. Returns the table and the
/// headers of the columns left out.
pub fn table(cols: &[Column], rows: &[Vec<String>], layout: Layout) -> (String, Vec<&'static str>) {
    let mut keep = vec![true; cols.len()];
    let Layout::Fit(w) = layout else {
        return (build(cols, &keep, rows, None), Vec::new());
    };
    let elided: Vec<Vec<String>>;
    let rows = if rows.iter().flatten().any(|v| v.len() > CELL_MAX_CHARS) {
        elided = rows
            .iter()
            .map(|r| r.iter().map(|v| elide(v).into_owned()).collect())
            .collect();
        &elided
    } else {
        rows
    };
    let mut ranks: Vec<u8> = cols
        .iter()
        .map(|c| c.drop_rank)
        .filter(|r| *r > 0)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    loop {
        let s = build(cols, &keep, rows, None);
        if widest(&s) <= w {
            return (s, dropped(cols, &keep));
        }
        let Some(r) = ranks.pop() else { break };
        for (k, c) in keep.iter_mut().zip(cols) {
            if c.drop_rank == r {
                *k = false;
            }
        }
    }
    (build(cols, &keep, rows, Some(w)), dropped(cols, &keep))
}

fn dropped(cols: &[Column], keep: &[bool]) -> Vec<&'static str> {
    cols.iter()
        .zip(keep)
        .filter(|(_, k)| !**k)
        .map(|(c, _)| c.header)
        .collect()
}

/// Greedy word wrap to `width` columns; a word longer than the width is cut. Keeps existing
/// line breaks and each line's leading indentation.
pub fn wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut out = String::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let ind = indent.chars().count().min(width / 2);
        let mut cur = String::new();
        let mut cur_len = 0usize;
        for word in line.split_whitespace() {
            let chars: Vec<char> = word.chars().collect();
            // What is left of the word to place: a cut word advances `word` past its head
            // (a slice, so a word of millions of characters is placed in linear time).
            let mut word: &[char] = &chars;
            loop {
                let room = if cur_len == 0 {
                    width - ind
                } else {
                    width.saturating_sub(cur_len + 1)
                };
                if word.len() <= room {
                    if cur_len == 0 {
                        cur.push_str(&indent[..ind]);
                        cur_len = ind;
                    } else {
                        cur.push(' ');
                        cur_len += 1;
                    }
                    cur.extend(word.iter());
                    cur_len += word.len();
                    break;
                }
                if cur_len == 0 {
                    // longer than a whole line: cut it
                    let (head, rest) = word.split_at(width - ind);
                    out.push_str(&indent[..ind]);
                    out.extend(head.iter());
                    out.push('\n');
                    word = rest;
                    continue;
                }
                out.push_str(&cur);
                out.push('\n');
                cur.clear();
                cur_len = 0;
            }
        }
        out.push_str(&cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_comes_from_the_terminal_then_columns_then_100() {
        assert_eq!(resolve_width(Some(132), Some("80")), 132);
        assert_eq!(resolve_width(None, Some("80")), 80);
        assert_eq!(resolve_width(None, Some(" 72 ")), 72);
        assert_eq!(resolve_width(None, Some("wide")), DEFAULT_WIDTH);
        assert_eq!(resolve_width(None, Some("0")), DEFAULT_WIDTH);
        assert_eq!(resolve_width(None, None), DEFAULT_WIDTH);
        assert_eq!(resolve_width(None, Some("10")), MIN_WIDTH);
    }

    #[test]
    fn wrap_never_exceeds_the_width_and_keeps_every_word() {
        let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu\n  indented line with words \
                    and averyveryveryverylongwordthatcannotfit";
        for w in [10usize, 17, 30, 80] {
            let s = wrap(text, w);
            assert!(widest(&s) <= w, "{w}: {s}");
            let words: String = s.split_whitespace().collect();
            let want: String = text.split_whitespace().collect();
            assert_eq!(words, want, "{w}");
        }
    }

    #[test]
    fn wrap_cuts_a_word_longer_than_many_lines_into_full_lines() {
        let word = "x".repeat(100_003);
        let s = wrap(&format!("{word} tail"), 80);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 100_003 / 80 + 1);
        assert!(lines[..lines.len() - 1].iter().all(|l| l.len() == 80));
        assert_eq!(
            lines[lines.len() - 1],
            format!("{} tail", "x".repeat(100_003 % 80))
        );
    }

    #[test]
    fn a_fitted_table_shows_a_huge_cell_cut_with_its_length_and_wide_keeps_it_whole() {
        let cols = [col("process", false, 0), col("n", true, 0)];
        let rows = vec![vec!["p".repeat(100_000), "1".into()]];
        let (t, _) = table(&cols, &rows, Layout::Fit(80));
        assert!(widest(&t) <= 80, "{t}");
        assert!(t.contains("100,000 characters"), "{t}");
        let shown = t.chars().filter(|c| *c == 'p').count();
        assert_eq!(shown, CELL_MAX_CHARS + "process".matches('p').count());
        let (wide, _) = table(&cols, &rows, Layout::Wide);
        // Every character of the cell is there (comfy-table folds a line past 65,535).
        assert_eq!(wide.matches('p').count(), 100_000 + 1);
    }

    /// A wrapped column breaks its text between words, never inside a name that fits a
    /// third of the width.
    #[test]
    fn a_wrapped_column_keeps_each_name_whole() {
        let cols = [
            col("severity", false, 0),
            col("finding", false, 0),
            col("culprit", false, 0).whole(),
            col("evidence", false, 0),
        ];
        let evidence = "gpu_node_021:mlx5_0 is slow towards most of its peers; it also explains \
                        the latency tail of gpu_node_009:mlx5_0, gpu_node_010:mlx5_0, \
                        gpu_node_020:mlx5_0 (their completions towards it)";
        let rows = vec![vec![
            "warning".to_string(),
            "slow nic + latency tail".to_string(),
            "gpu_node_021:mlx5_0".to_string(),
            evidence.to_string(),
        ]];
        let (t, _) = table(&cols, &rows, Layout::Fit(80));
        assert!(widest(&t) <= 80, "{t}");
        for name in [
            "gpu_node_021:mlx5_0",
            "gpu_node_009:mlx5_0,",
            "gpu_node_020:mlx5_0",
        ] {
            assert_eq!(
                t.matches(name).count(),
                1 + usize::from(name == "gpu_node_021:mlx5_0"),
                "{name}: {t}"
            );
        }
    }

    #[test]
    fn table_drops_the_highest_ranks_first_then_wraps() {
        let cols = [
            col("name", false, 0),
            col("value", true, 0),
            col("detail", false, 2),
            col("note", false, 1),
        ];
        let rows: Vec<Vec<String>> = (0..5)
            .map(|i| {
                vec![
                    format!("row{i}"),
                    format!("{}", i * 1000),
                    "x".repeat(30),
                    "y".repeat(20),
                ]
            })
            .collect();
        let (wide, gone) = table(&cols, &rows, Layout::Wide);
        assert!(gone.is_empty() && wide.contains("detail") && wide.contains("note"));
        let (t, gone) = table(&cols, &rows, Layout::Fit(widest(&wide) - 1));
        assert_eq!(gone, vec!["detail"]);
        assert!(widest(&t) < widest(&wide) && t.contains("note"));
        let (t, gone) = table(&cols, &rows, Layout::Fit(30));
        assert_eq!(gone, vec!["detail", "note"]);
        assert!(widest(&t) <= 30, "{t}");
        // Only the kept columns, with a very long cell: wrapped, still within the width.
        let long = vec![vec!["n".into(), "z ".repeat(60)]];
        let (t, _) = table(&cols[..2], &long, Layout::Fit(40));
        assert!(widest(&t) <= 40, "{t}");
    }
}
