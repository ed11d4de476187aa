//! The HTML report is self-contained, has every chart, and renders in headless Chromium to a
//! page that is not blank and shows the charts' colours.

use crate::common::*;
use rccl_telemetry_tool::generate::{GenOptions, Plant};
use std::process::Command;

fn make_report() -> (GenRun, String, std::path::PathBuf) {
    let g = gen(GenOptions {
        ranks: 48,
        seed: 21,
        samples: 8,
        plants: vec![Plant::Tail, Plant::Cnp, Plant::Skew, Plant::CqErrors],
        ..Default::default()
    });
    let html_path = g.path().join("report.html");
    let out = run(&["report", "-o", html_path.to_str().unwrap(), g.arg()]);
    // The planted CQ errors are critical: exit 1.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let html = std::fs::read_to_string(&html_path).expect("report written");
    (g, html, html_path)
}

#[test]
fn report_is_self_contained_and_has_every_section_and_chart() {
    let (g, html, _) = make_report();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in ["<script", "<link", "<img", "<iframe", "@import", "src="] {
        assert!(!html.contains(forbidden), "report contains {forbidden}");
    }
    // The only URLs allowed are XML namespace names, which are never fetched.
    let stripped = html
        .replace("http://www.w3.org/2000/svg", "")
        .replace("http://www.w3.org/1999/xlink", "");
    assert!(
        !stripped.contains("http://") && !stripped.contains("https://"),
        "a URL in the report"
    );
    for id in [
        "summary", "outliers", "latency", "samples", "skew", "devices",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "section {id}");
    }
    for kind in [
        "latency-run",
        "latency-device",
        "latency-heatmap",
        "hw-samples",
        "byte-skew",
    ] {
        let n = html.matches(&format!("data-chart=\"{kind}\"")).count();
        assert!(n >= 1, "chart {kind} missing");
    }
    // Each figure holds an SVG with real content (bars, cells, lines or markers).
    let figures: Vec<&str> = html.split("<figure class=\"chart ").skip(1).collect();
    assert!(figures.len() >= 5, "only {} figures", figures.len());
    for fig in figures {
        let fig = fig.split("</figure>").next().unwrap();
        assert!(fig.contains("<svg"), "figure without svg");
        let marks = fig.matches("<rect").count()
            + fig.matches("<polyline").count()
            + fig.matches("<circle").count()
            + fig.matches("<polygon").count();
        assert!(marks >= 5, "a chart with only {marks} marks");
    }
    assert!(
        !html.contains("could not be drawn"),
        "a chart failed to draw"
    );
    // The planted ranks are in the outliers table.
    for p in &g.planted {
        assert!(
            html.contains(&format!("{}:{}", p.host, p.pid)),
            "{} missing from the report",
            p.kind
        );
    }
}

/// The headless browser on this machine, if any.
fn browser() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| have(b))
}

/// Renders `html` headless at `width`x`height` with no network (the page must not need one)
/// into `png_path`; returns the decoded pixels and their channels (3 or 4).
fn screenshot(
    browser: &str,
    html: &std::path::Path,
    png_path: &std::path::Path,
    width: u32,
    height: u32,
) -> (Vec<u8>, usize) {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            // Any network request would fail: the page must not need one.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            &format!("--user-data-dir={}", profile.path().display()),
            &format!("--window-size={width},{height}"),
            &format!("--screenshot={}", png_path.display()),
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("run chromium");
    assert!(
        png_path.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("open png"),
    ));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    let channels = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf.truncate(info.buffer_size());
    (buf, channels)
}

/// Counts pixels within `tol` of `c` in an RGBA or RGB PNG.
fn count_colour(data: &[u8], channels: usize, c: (u8, u8, u8), tol: i32) -> usize {
    data.chunks(channels)
        .filter(|p| {
            (p[0] as i32 - c.0 as i32).abs() <= tol
                && (p[1] as i32 - c.1 as i32).abs() <= tol
                && (p[2] as i32 - c.2 as i32).abs() <= tol
        })
        .count()
}

#[test]
fn chromium_renders_the_report_with_its_charts() {
    let Some(browser) = browser() else {
        return skip(
            "chromium_renders_the_report_with_its_charts",
            "chromium not installed (Debian package chromium)",
        );
    };
    let (g, _, html_path) = make_report();
    let (data, channels) = screenshot(browser, &html_path, &g.path().join("shot.png"), 1400, 6000);
    let data = &data[..];
    let pixels = data.len() / channels;
    let white = count_colour(data, channels, (255, 255, 255), 3);
    let non_white = pixels - white;
    assert!(
        non_white * 100 / pixels >= 5,
        "page looks blank: {non_white} of {pixels} pixels are not white"
    );
    // The histogram bars (blue), the flagged tail device (red) and the heatmap are drawn.
    let blue = count_colour(data, channels, (31, 119, 180), 10);
    let red = count_colour(data, channels, (214, 39, 40), 10);
    assert!(blue > 2_000, "only {blue} blue chart pixels");
    assert!(red > 500, "only {red} red (flagged) chart pixels");
    // And the DOM chromium built holds the charts.
    let profile = tempfile::tempdir().expect("profile dir");
    let dom = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
            &format!("file://{}", html_path.display()),
        ])
        .output()
        .expect("run chromium --dump-dom");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.matches("<svg").count() >= 10,
        "rendered DOM has {} svgs",
        dom.matches("<svg").count()
    );
    assert!(dom.contains("data-chart=\"byte-skew\""));
}

/// The NIC-by-NIC heat map of a run with a planted slow link: the two cells of the link are
/// drawn in the darkest red (4x the median and more), and nothing else is.
#[test]
fn chromium_shows_the_slow_link_in_the_heat_map() {
    let Some(browser) = browser() else {
        return skip(
            "chromium_shows_the_slow_link_in_the_heat_map",
            "chromium not installed (Debian package chromium)",
        );
    };
    let shot = |plants: &[Plant]| -> usize {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = GenOptions {
            ranks: 16,
            ranks_per_host: 4,
            devices_per_rank: 4,
            seed: 3,
            plants: plants.to_vec(),
            ..Default::default()
        };
        rccl_telemetry_tool::generate::generate_fabric(dir.path(), &o, 2).expect("generate");
        let html = dir.path().join("r.html");
        let out = run(&[
            "report",
            "-o",
            html.to_str().expect("utf-8"),
            dir.path().to_str().expect("utf-8"),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let (data, channels) = screenshot(browser, &html, &dir.path().join("shot.png"), 1400, 2000);
        count_colour(&data, channels, (140, 0, 20), 12)
    };
    let slow = shot(&[Plant::SlowLink]);
    let clean = shot(&[]);
    assert!(slow > 150, "only {slow} dark red pixels for the slow link");
    assert_eq!(clean, 0, "a clean run has no dark red cell");
}
