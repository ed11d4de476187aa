//! The report's NIC-by-NIC matrix (files of version 3, with peers): per-link p99 latency or
//! bytes as a heat map, per NIC or per host beyond HEATMAP_MAX_NICS, the culprits the outliers
//! name outlined. Separate from the charts because it is hand-written SVG over the joined links.

use super::*;
use crate::outliers::{Finding, Kind};

/// NICs beyond which the matrix is drawn per host (one cell per host pair).
pub const HEATMAP_MAX_NICS: usize = 300;

/// Colour of a latency cell: its ratio to the matrix median, pale at or below 1x, through
/// yellow and orange to dark red at 4x and above (log scale).
pub fn ratio_colour(r: f64) -> String {
    let t = if r.is_finite() && r > 1.0 {
        (r.log2() / 2.0).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let stops = [
        (0.0, (236, 244, 236)),
        (0.25, (255, 237, 160)),
        (0.5, (253, 174, 97)),
        (0.75, (230, 85, 50)),
        (1.0, (140, 0, 20)),
    ];
    let mut k = 0;
    while k + 2 < stops.len() && t > stops[k + 1].0 {
        k += 1;
    }
    let (t0, c0) = stops[k];
    let (t1, c1) = stops[k + 1];
    let f = ((t - t0) / (t1 - t0)).clamp(0.0, 1.0);
    let mix = |a: i32, b: i32| (a as f64 + (b - a) as f64 * f).round() as i32;
    format!(
        "rgb({},{},{})",
        mix(c0.0, c1.0),
        mix(c0.1, c1.1),
        mix(c0.2, c1.2)
    )
}

fn bytes_colour(frac: f64) -> String {
    let f = frac.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * f).round() as i32;
    format!(
        "rgb({},{},{})",
        mix(240.0, 8.0),
        mix(245.0, 69.0),
        mix(255.0, 148.0)
    )
}

/// Font size of the matrix's row and column names: readable whatever the number of NICs.
pub const MATRIX_FONT_PX: f64 = 10.5;

/// Which of `n` rows of `cell` px the matrix names: every k-th, k such that names are at
/// least a line of text apart, and always the `named` ones (the culprits), with the regular
/// names too close to one of those left out.
pub fn matrix_label_rows(n: usize, cell: f64, named: &BTreeSet<usize>) -> Vec<usize> {
    let every = (((MATRIX_FONT_PX + 2.0) / cell).ceil() as usize).max(1);
    let near = |i: usize| named.iter().any(|c| *c != i && c.abs_diff(i) < every);
    let mut rows: Vec<usize> = (0..n)
        .step_by(every)
        .filter(|i| !near(*i))
        .chain(named.iter().copied().filter(|i| *i < n))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// One matrix as SVG: `vals[a][b]` (None: no link), `labels`, the colour of a value, the text
/// of a value (cell titles, drawn for up to 150 rows), cells to outline, and the rows and
/// columns always named (bold, in red).
fn matrix_svg(
    id: &str,
    labels: &[String],
    vals: &[Vec<Option<f64>>],
    colour: &dyn Fn(f64) -> String,
    text: &dyn Fn(f64) -> String,
    (outline, named): (&BTreeSet<(usize, usize)>, &BTreeSet<usize>),
) -> String {
    let n = labels.len();
    let cell = (760.0 / n.max(1) as f64).clamp(1.5, 22.0);
    let font = MATRIX_FONT_PX;
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64;
    let margin = (longest * font * 0.68 + 10.0).min(240.0);
    let size = margin + cell * n as f64 + 10.0;
    let mut s = String::new();
    let _ = write!(s, "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{size:.0}\" height=\"{size:.0}\" font-family=\"sans-serif\" font-size=\"{font:.1}\">");
    let _ = write!(s, "<rect x=\"{margin:.1}\" y=\"{margin:.1}\" width=\"{w:.1}\" height=\"{w:.1}\" fill=\"#f4f4f4\"/>", w = cell * n as f64);
    for i in matrix_label_rows(n, cell, named) {
        let l = &labels[i];
        let style = if named.contains(&i) {
            " fill=\"#b00\" font-weight=\"bold\""
        } else {
            ""
        };
        let c = margin + cell * (i as f64 + 0.5);
        let _ = write!(s, "<text x=\"{:.1}\" y=\"{c:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\"{style}>{}</text>", margin - 3.0, esc(l));
        let _ = write!(s, "<text transform=\"translate({c:.1},{:.1}) rotate(-90)\" dominant-baseline=\"middle\"{style}>{}</text>", margin - 3.0, esc(l));
    }
    let titles = n <= 150;
    for (a, row) in vals.iter().enumerate() {
        for (b, v) in row.iter().enumerate() {
            let Some(v) = v else { continue };
            let (x, y) = (margin + cell * b as f64, margin + cell * a as f64);
            let _ = write!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell:.2}\" height=\"{cell:.2}\" fill=\"{}\">", colour(*v));
            if titles {
                let _ = write!(
                    s,
                    "<title>{} -&gt; {}: {}</title>",
                    esc(&labels[a]),
                    esc(&labels[b]),
                    esc(&text(*v))
                );
            }
            s.push_str("</rect>");
        }
    }
    // Outlines at least 12 px wide, so a culprit cell of a large matrix still catches the eye.
    let ring = cell.max(12.0);
    for (a, b) in outline {
        let (x, y) = (
            margin + cell * (*b as f64 + 0.5) - ring / 2.0,
            margin + cell * (*a as f64 + 0.5) - ring / 2.0,
        );
        let _ = write!(s, "<rect class=\"culprit\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{ring:.2}\" height=\"{ring:.2}\" fill=\"none\" stroke=\"#000\" stroke-width=\"{:.1}\"/>", (ring / 8.0).clamp(1.2, 2.0));
    }
    s.push_str("</svg>");
    s
}

/// The matrix section of a run, with the culprits its outliers (default options) name.
pub fn matrix_section(run: &Run) -> String {
    let cx = RunContext::new(run);
    let o = crate::outliers::find_in(&cx, &crate::outliers::Options::default());
    matrix_section_with(cx.links(), &o.findings)
}

/// The matrix section: a heat map of per-link p99 latency (sending side) or of bytes,
/// selectable in the page without script (radio buttons and CSS), the NICs of the fabric
/// findings (slow NIC, link, host) outlined. Empty when no file has peers.
pub fn matrix_section_with(lr: &crate::links::LinkReport, findings: &[Finding]) -> String {
    if lr.links.is_empty() {
        return String::new();
    }
    let n = lr.nics.len();
    let per_host = n > HEATMAP_MAX_NICS;
    // Rows/columns: NICs sorted by host and device, or hosts.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| {
        (&lr.nics[*a].host, &lr.nics[*a].device).cmp(&(&lr.nics[*b].host, &lr.nics[*b].device))
    });
    let (labels, pos): (Vec<String>, Vec<usize>) = if per_host {
        let hosts: Vec<String> = order
            .iter()
            .map(|i| lr.nics[*i].host.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let pos = (0..n)
            .map(|i| {
                hosts
                    .iter()
                    .position(|h| *h == lr.nics[i].host)
                    .unwrap_or(0)
            })
            .collect();
        (hosts, pos)
    } else {
        let mut pos = vec![0; n];
        for (k, i) in order.iter().enumerate() {
            pos[*i] = k;
        }
        (order.iter().map(|i| lr.nics[*i].label()).collect(), pos)
    };
    let k = labels.len();
    let mut p99: Vec<Vec<Option<f64>>> = vec![vec![None; k]; k];
    let mut bytes: Vec<Vec<Option<f64>>> = vec![vec![None; k]; k];
    for l in &lr.links {
        let (a, b) = (pos[l.src_nic], pos[l.dst_nic]);
        if let Some(p) = l.latency.as_ref().and_then(|x| x.p99_ns) {
            // Per host: the worst link of the host pair, so one slow link still shows.
            p99[a][b] = Some(p99[a][b].map_or(p, |q: f64| q.max(p)));
        }
        bytes[a][b] = Some(bytes[a][b].unwrap_or(0.0) + l.tx_bytes_est as f64);
    }
    let all: Vec<f64> = p99.iter().flatten().flatten().copied().collect();
    let med = crate::stats::median(&all).unwrap_or(1.0).max(1.0);
    let bmax = bytes
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0, f64::max)
        .max(1.0);
    let nic_of: BTreeMap<(&str, &str), usize> = lr
        .nics
        .iter()
        .enumerate()
        .map(|(i, x)| ((x.host.as_str(), x.device.as_str()), i))
        .collect();
    let mut outline = BTreeSet::new();
    let mut named = BTreeSet::new();
    for f in findings {
        let nics: Vec<usize> = f
            .nics
            .iter()
            .filter_map(|(h, d)| nic_of.get(&(h.as_str(), d.as_str())).copied())
            .collect();
        named.extend(nics.iter().map(|i| pos[*i]));
        match f.kind {
            Kind::SlowLink if nics.len() == 2 => {
                let (a, b) = (pos[nics[0]], pos[nics[1]]);
                outline.insert((a, b));
                outline.insert((b, a));
            }
            // One direction: its sender's row, the peer's column.
            Kind::SlowLinkOneWay if nics.len() == 2 => {
                outline.insert((pos[nics[0]], pos[nics[1]]));
            }
            // A process polling late: its own completions, its row only.
            Kind::HostSideDelay | Kind::SlowNic | Kind::SlowHost | Kind::HangRoot => {
                let row_only = f.kind == Kind::HostSideDelay;
                for i in &nics {
                    let a = pos[*i];
                    for (b, row) in p99.iter().enumerate().take(k) {
                        if p99[a][b].is_some() {
                            outline.insert((a, b));
                        }
                        if row[a].is_some() && !row_only {
                            outline.insert((b, a));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<h2 id=\"matrix\">Links: NIC by NIC</h2>\n<p class=\"note\">Row: the sending NIC; column: its peer. {}{}. Culprits named by the outliers are outlined.</p>",
        esc(&lr.headline()),
        if per_host { format!(", drawn per host ({} hosts; more than {HEATMAP_MAX_NICS} NICs): a cell is the worst p99 of the host pair, or its bytes", k) } else { String::new() }
    );
    h.push_str("<div class=\"hm\"><input type=\"radio\" name=\"hm\" id=\"hm-p99\" checked><label for=\"hm-p99\">p99 latency</label> <input type=\"radio\" name=\"hm\" id=\"hm-bytes\"><label for=\"hm-bytes\">bytes</label>\n");
    let _ = writeln!(
        h,
        "<figure class=\"chart hm-p99\">{}<figcaption>p99 completion latency at the sending side, coloured by its ratio to the median link {} (pale 1x, yellow 1.4x, orange 2x, red 2.8x, dark red 4x and more).</figcaption></figure>",
        matrix_svg("matrix-p99", &labels, &p99, &|v| ratio_colour(v / med), &|v| format!("p99 {} ({:.2}x the median)", fmt_ns(v), v / med), (&outline, &named)),
        esc(&fmt_ns(med))
    );
    let _ = writeln!(
        h,
        "<figure class=\"chart hm-bytes\">{}<figcaption>Bytes sent on the link (the device's tx bytes shared out by its WRs), darker is more; the largest cell is {}.</figcaption></figure></div>",
        matrix_svg("matrix-bytes", &labels, &bytes, &|v| bytes_colour(v / bmax), &|v| fmt_bytes(v), (&BTreeSet::new(), &named)),
        esc(&fmt_bytes(bmax))
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 256 NICs in 760 px: names a line of text apart, and always the culprit's, with no
    /// regular name overlapping it.
    #[test]
    fn names_are_a_line_apart_and_the_culprit_is_always_named() {
        let cell = 760.0 / 256.0;
        let culprit: BTreeSet<usize> = [170].into();
        let rows = matrix_label_rows(256, cell, &culprit);
        assert!(rows.contains(&170) && rows.contains(&0));
        assert!(
            rows.windows(2)
                .all(|w| (w[1] - w[0]) as f64 * cell >= MATRIX_FONT_PX),
            "{rows:?}"
        );
        assert!(rows.len() > 40, "{} names", rows.len());
        // Few NICs, wide cells: every one is named.
        assert_eq!(matrix_label_rows(8, 22.0, &BTreeSet::new()).len(), 8);
    }
}
