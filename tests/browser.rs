//! `report.html` in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs; `LOCKSIM_CHROMIUM` names another binary) loads the page. The test fails on any
//! console message, checks that the sections and their SVG drawings are in the parsed page,
//! that at 1280 px no table or figure is wider than the window (nothing scrolls sideways),
//! that the bar chart draws an n/a share as "n/a" and not as a 0% bar, and saves screenshots of
//! the page's first 1,600 px (the decision table), 1200 and 800 px wide, under `target/tmp/`.

use crate::common;

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

/// Appended to a copy of a page: after layout, lists in `<pre id="overflow">` the page's
/// width against the window's and every block (table, figure, paragraph…) that reaches past
/// the window's right edge or scrolls sideways inside its own box.
const OVERFLOW_PROBE: &str = r#"<script>
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth;
  const found = [];
  if (document.documentElement.scrollWidth > vw) {
    found.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
  }
  const blocks = 'table, svg, img, pre, div, p, ul, ol, h1, h2, h3, section, figure';
  document.querySelectorAll(blocks).forEach(e => {
    if (e.parentElement && e.parentElement.closest('svg')) return;
    const r = e.getBoundingClientRect();
    const scrolls = e.scrollWidth > e.clientWidth + 1
      && getComputedStyle(e).overflowX !== 'visible';
    if (r.right > vw + 0.5 || scrolls) {
      let head = e.previousElementSibling;
      while (head && !/^H[1-3]$/.test(head.tagName)) head = head.previousElementSibling;
      found.push(e.tagName.toLowerCase() + ' ' + Math.round(e.scrollWidth) + ' px wide, right edge '
        + Math.round(r.right) + ' px' + (scrolls ? ', scrolls sideways' : '')
        + (head ? ', after "' + head.textContent.slice(0, 60) + '"' : ''));
    }
  });
  const out = document.createElement('pre');
  out.id = 'overflow';
  out.textContent = 'window ' + vw + ' px\n' + found.join('\n');
  document.body.appendChild(out);
});
</script>"#;

/// What [`OVERFLOW_PROBE`] finds in `page` at `width` px: the blocks wider than the window.
fn too_wide(chromium: &str, page: &Path, width: u32) -> Vec<String> {
    let probe = page.with_file_name(format!("overflow-probe-{width}.html"));
    let mut html = std::fs::read_to_string(page).unwrap();
    html.push_str(OVERFLOW_PROBE);
    std::fs::write(&probe, html).unwrap();
    let size = format!("--window-size={width},900");
    let (dom, console) = load(chromium, &probe, &[&size, "--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:?}");
    let start = dom.find("<pre id=\"overflow\">").expect("the probe ran") + 19;
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(format!("window {width} px").as_str()));
    lines.map(String::from).collect()
}

#[test]
fn a_block_wider_than_the_window_is_caught() {
    let Some(chromium) = chromium("browser::a_block_wider_than_the_window_is_caught") else {
        return;
    };
    // The probe itself: a table of 2000 px in a scrolling box, and a fitting page.
    let page = tmp().join("overflow-canary.html");
    std::fs::write(
        &page,
        "<!doctype html><h2>wide</h2><div style=\"overflow-x:auto\">\
         <table style=\"width:2000px\"><tr><td>x</td></tr></table></div>",
    )
    .unwrap();
    let found = too_wide(&chromium, &page, 1280);
    assert!(
        found
            .iter()
            .any(|l| l.contains("scrolls sideways") && l.contains("\"wide\"")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|l| l.starts_with("table 2000 px")),
        "{found:?}"
    );
    std::fs::write(&page, "<!doctype html><p>narrow</p>").unwrap();
    assert_eq!(too_wide(&chromium, &page, 1280), Vec::<String>::new());
}

/// The bar chart's n/a shares, against the report's JSON: per cell, latent is n/a where
/// fencing is (no tokens), damage where fencing and lost update both are; an n/a share is
/// written "n/a", and no bar is drawn for it.
fn n_a_shares_are_not_drawn_as_bars(html: &str, json: &serde_json::Value) {
    let at = html.find("class=\"chart\"").unwrap();
    let chart = &html[at..at + html[at..].find("</svg>").unwrap()];
    let (mut n_a, mut latent_bars) = (0, 0);
    for cell in json["cells"].as_array().unwrap() {
        let p = &cell["properties"];
        let fencing = !p["fencing"].is_null();
        latent_bars += usize::from(fencing);
        n_a += usize::from(!fencing) + usize::from(!fencing && p["lost_update"].is_null());
    }
    assert!(n_a > 0, "the matrix has rows without fencing tokens");
    assert_eq!(chart.matches("class=\"na\">n/a").count(), n_a, "n/a marks");
    assert_eq!(
        chart.matches("<title>latent: ").count(),
        latent_bars,
        "latent bars"
    );
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

/// The parsed page has every section, the decision table first with an answer per
/// requirement and row, and its charts, phase diagrams and timelines drawn.
fn sections_and_drawings(dom: &str) {
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
    sections_and_drawings(&dom);

    let html = std::fs::read_to_string(&page).unwrap();
    legends_under_every_table_and_chart(&html);
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    n_a_shares_are_not_drawn_as_bars(&html, &serde_json::from_str(&json).unwrap());
    let wide = too_wide(&chromium, &page, 1280);
    assert!(
        wide.is_empty(),
        "at 1280 px these are wider than the window ({}):\n{}",
        page.display(),
        wide.join("\n")
    );
    top_screenshots(&chromium, &page);
}

/// Screenshots of the top of `page` (1,600 px: the decision table), 1200 and 800 px wide,
/// under `target/tmp/`: each loads without a console message and is a PNG of its width. Not
/// the whole page: rendering its ~40,000 px twice took 24 of this test's 30 s.
fn top_screenshots(chromium: &str, page: &Path) {
    for width in [1200, 800] {
        let shot = tmp().join(format!("report-{width}.png"));
        let _ = std::fs::remove_file(&shot);
        let size = format!("--window-size={width},1600");
        let file = format!("--screenshot={}", shot.display());
        let (_, console) = load(chromium, page, &[&size, &file]);
        assert!(console.is_empty(), "console messages: {console:?}");
        let png = std::fs::read(&shot).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{} is a PNG", shot.display());
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        assert_eq!(w, width, "screenshot width");
    }
}
