//! `report.html` in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs; `LOCKSIM_CHROMIUM` names another binary) loads the page. The test fails on any
//! console message, checks that the sections and their SVG drawings are in the parsed page,
//! and saves full-page screenshots, 1200 and 800 px wide, under `target/tmp/`.

mod common;

use common::tools;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Chromium, or `None` where it is missing and the test skips (it fails instead under `CI`).
fn chromium(test: &str) -> Option<String> {
    tools::require(
        test,
        &["chromium", "chromium-browser", "google-chrome"],
        Some("LOCKSIM_CHROMIUM"),
        "`apt-get install -y chromium`, as .ci/run does, or set LOCKSIM_CHROMIUM",
    )
}

/// Loads `page` headless in `chromium`; returns (the parsed page as HTML, the console
/// messages).
fn load(chromium: &str, page: &Path, extra: &[&str]) -> (String, Vec<String>) {
    let url = format!("file://{}", page.display());
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(extra)
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "{}", common::stderr(&out));
    let console = common::stderr(&out)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    (common::stdout(&out), console)
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

#[test]
fn a_console_error_is_caught() {
    let Some(chromium) = chromium("browser::a_console_error_is_caught") else {
        return;
    };
    // The detector itself: a page that logs an error must be caught.
    let page = tmp().join("console-canary.html");
    std::fs::write(
        &page,
        "<!doctype html><p>x</p><script>console.error('canary')</script>",
    )
    .unwrap();
    let (_, console) = load(&chromium, &page, &["--dump-dom"]);
    assert!(console.iter().any(|l| l.contains("canary")), "{console:?}");
}

/// Full-page height: the page's content fits in this many px at the narrowest width.
fn page_height(html: &str) -> u32 {
    // SVGs carry their heights; text and tables are bounded generously per element.
    let svg: f64 = html
        .split("<svg ")
        .skip(1)
        .filter_map(|s| {
            s.split("height=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .sum::<f64>();
    // Upper bounds per element at 800 px (a verdict item wraps to several lines).
    let blocks: f64 = [("<tr", 30.0), ("<li>", 80.0), ("<p>", 40.0), ("<p ", 40.0)]
        .into_iter()
        .chain([("<h2", 70.0), ("<h3", 45.0)])
        .map(|(tag, px)| html.matches(tag).count() as f64 * px)
        .sum();
    (svg + blocks + 200.0).min(40_000.0) as u32
}

/// Every table and every chart of the report (timelines aside) has a one-line legend right
/// under it.
fn legends_under_every_table_and_chart(html: &str) {
    let note = "<p class=\"note\">";
    let tables = html.matches("</table></div>").count();
    let after_tables = html.matches(&format!("</table></div>{note}")).count();
    assert_eq!(after_tables, tables, "a table without its legend");
    for class in ["chart", "tradeoff"] {
        let at = html.find(&format!("class=\"{class}\"")).unwrap();
        let end = at + html[at..].find("</svg>").unwrap() + "</svg>".len();
        assert!(html[end..].starts_with(note), "the {class} has no legend");
    }
    let phase_end = html.rfind("class=\"phase\"").unwrap();
    let grid_end = phase_end + html[phase_end..].find("</svg></div>").unwrap() + 12;
    assert!(
        html[grid_end..].starts_with(note),
        "the phase diagrams have no legend"
    );
}

#[test]
fn the_report_loads_in_chromium_with_every_section_and_no_console_error() {
    let test = "browser::the_report_loads_in_chromium_with_every_section_and_no_console_error";
    let Some(chromium) = chromium(test) else {
        return;
    };
    let dir = tmp().join("browser-report");
    let _ = std::fs::remove_dir_all(&dir);
    let out = common::in_repo(&[
        "compare",
        "--seeds",
        "2",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let page = dir.join("report.html").canonicalize().unwrap();
    let (dom, console) = load(&chromium, &page, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:?}");
    for id in [
        "decide",
        "verdict",
        "cost",
        "tradeoff",
        "harm",
        "ranking",
        "chart",
        "phase",
        "catalog",
        "timelines",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "section {id} is missing"
        );
    }
    let count = |class: &str| {
        dom.matches(&format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{class}\""
        ))
        .count()
    };
    assert_eq!(count("chart"), 1);
    assert_eq!(count("tradeoff"), 1);
    // The decision table comes first, a cell per requirement and row, each with evidence.
    let decide = dom.find("id=\"decide\"").unwrap();
    assert!(decide < dom.find("id=\"verdict\"").unwrap());
    let answers = ["class=\"meets\"", "class=\"fails\"", "class=\"only\""]
        .iter()
        .map(|c| dom.matches(c).count())
        .sum::<usize>();
    let rows = std::fs::read_to_string(common::repo("scenarios/compare/matrix.toml"))
        .unwrap()
        .matches("[[protocols]]")
        .count();
    assert_eq!(answers % rows, 0, "{answers} answers for {rows} rows");
    assert!(answers >= 4 * rows, "{answers} answers for {rows} rows");
    assert!(count("phase") >= 2, "phase diagrams: {}", count("phase"));
    assert!(count("timeline") >= 2, "timelines: {}", count("timeline"));
    assert!(
        dom.contains("<rect") && dom.contains("<polyline"),
        "drawn marks"
    );

    let html = std::fs::read_to_string(&page).unwrap();
    legends_under_every_table_and_chart(&html);
    let height = page_height(&html);
    for width in [1200, 800] {
        let shot = tmp().join(format!("report-{width}.png"));
        let _ = std::fs::remove_file(&shot);
        let size = format!("--window-size={width},{height}");
        let file = format!("--screenshot={}", shot.display());
        let (_, console) = load(&chromium, &page, &[&size, &file]);
        assert!(console.is_empty(), "console messages: {console:?}");
        let png = std::fs::read(&shot).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{} is a PNG", shot.display());
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        assert_eq!(w, width, "screenshot width");
    }
}
