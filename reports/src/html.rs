//! The comparison as one self-contained HTML page: no scripts, no external files. Sections
//! (each with an `id`): `decide` (the decision table), `verdict`, `cost` (with the
//! safety-against-cost chart, `tradeoff`), `harm` (the headline table: damage, latent,
//! overlap), `ranking`, `chart`, `phase`, `catalog`, `details`, `liveness`, `timelines`. Every
//! table and chart has a one-line legend under it (`p.note`).

use crate::cost::figure_ci;
use crate::decide;
use crate::markdown::{
    catalog_agrees, catalog_outcome, latent_text, lost_text, not_run, property_text, rejected_text,
    same_as_text, zombie_text, CATALOG_LEGEND, COST_LEGEND, DEFINITIONS, DETAILS_LEGEND,
    HEADLINE_LEGEND, LIVENESS_LEGEND, NOT_RUN_LEGEND, PHASE_LEGEND, RANKING_LEGEND,
};
use crate::stats::{pct, Share};
use crate::timeline::{escape, Labels};
use crate::verdict::{group_text, ranking, verdicts};
use crate::{CellSummary, Comparison, Counterexample, PhaseSeries};
use locksim_scenarios::RunResult;
use locksim_sim::{Event, Property};
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 10px;color:#222;line-height:1.4}\
.wide{overflow-x:auto}table{border-collapse:collapse;margin:1em 0}\
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
td small{color:#555;white-space:nowrap}\
code{background:#f4f4f4;padding:1px 3px;word-break:break-all}.cx{margin:1.5em 0;border-top:1px solid #ddd}\
svg{max-width:100%;height:auto}.grid{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:1em}\
.note{font-size:90%;color:#555;margin-top:-0.6em}.ev{font-size:85%;color:#444}\
td.meets{background:#e9f5ec}td.fails{background:#fbe3e4}td.only{background:#fff4d6}\
table.decide{table-layout:fixed;width:100%}table.decide th:first-child{width:11em}\
table.decide th{overflow-wrap:anywhere}table.decide td{text-align:left;overflow-wrap:anywhere}\
table.decide small{white-space:normal;display:block;font-size:80%}\
.legend{display:flex;flex-wrap:wrap;gap:0 1.2em}.legend span{white-space:nowrap}.nw{white-space:nowrap}\
table.details{font-size:88%}\
.same{color:#666;font-style:italic;background:#f4f4f4;text-align:left}.caption{font-style:italic}";

/// What the timeline's marks mean.
const LEGEND: &str = "<p class=\"legend\"><span>▮ critical section (red outline: witness)</span>\
    <span>▨ paused</span><span>grey band: down</span><span>✖ crash</span><span>○ restart</span>\
    <span>▲ clock jump (◀ at the left edge: before the window)</span><span>◆ key expired</span>\
    <span>● write accepted (=value)</span><span>✕ write rejected</span>\
    <span>■ protocol event</span><span>orange band: partition</span>\
    <span>thin coloured band on a server: the client its lock key names there (set → deleted or expired)</span></p>";

const HARM_COLOUR: &str = "#c1121f";
const LATENT_COLOUR: &str = "#7b2cbf";
const OVERLAP_COLOUR: &str = "#f4a261";

/// A one-line legend under a table or chart.
fn note(s: &mut String, text: &str) {
    let _ = write!(s, "<p class=\"note\">{}</p>", escape(text));
}

/// Background colour for a harm rate: pale green at 0, deepening red towards 1.
fn heat(rate: f64) -> String {
    if rate == 0.0 {
        return "#e9f5ec".into();
    }
    let light = 90.0 - 45.0 * rate.sqrt();
    format!("hsl(0,70%,{light:.0}%)")
}

/// A share with its interval; the interval may wrap under its figure, so that a table of
/// them fits the page.
fn share_cell(label: &str, s: &Share) -> String {
    format!(
        "<span class=\"nw\">{label} <b>{}</b></span> <small>({}–{})</small>",
        pct(s.rate()),
        pct(s.lo),
        pct(s.hi)
    )
}

fn latent_cell(cell: &CellSummary) -> String {
    match cell.property(Property::Fencing) {
        None => "<span class=\"nw\">latent <small>n/a</small></span>".into(),
        Some(_) => share_cell("latent", &cell.latent),
    }
}

fn headline_table(s: &mut String, c: &Comparison) {
    s.push_str("<div class=\"wide\"><table><tr><th>protocol</th>");
    for (p, _) in &c.profiles {
        let _ = write!(s, "<th>{}</th>", escape(decide::display_profile(p)));
    }
    s.push_str("</tr>");
    for (proto, _) in &c.protocols {
        let _ = write!(s, "<tr><td>{}</td>", escape(proto));
        for (profile, _) in &c.profiles {
            match c.cell(proto, profile) {
                Some(cell) if !cell.ran() => {
                    let _ = write!(
                        s,
                        "<td class=\"same\" title=\"{}\">{}</td>",
                        escape(&cell.same_as_why),
                        escape(&same_as_text(cell))
                    );
                }
                Some(cell) => {
                    let _ = write!(
                        s,
                        "<td style=\"background:{}\" title=\"{} runs, seeds {}\">{}<br>{}<br>{}</td>",
                        heat(cell.damage.rate()),
                        cell.runs,
                        escape(&cell.seeds),
                        share_cell("damage", &cell.damage),
                        latent_cell(cell),
                        share_cell("overlap", &cell.overlap),
                    );
                }
                None => s.push_str("<td>–</td>"),
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table></div>");
    note(s, HEADLINE_LEGEND);
}

/// A cell's label in the chart: `row · profile`, and `(= ROW)` for a cell not run.
pub fn chart_label(cell: &CellSummary) -> String {
    let profile = decide::display_profile(&cell.profile);
    match &cell.same_as {
        None => format!("{} · {profile}", cell.protocol),
        Some(row) => format!("{} · {profile} (= {row})", cell.protocol),
    }
}

/// A cell's three bars: damage, latent and overlap, each `None` where the configuration
/// cannot show it (n/a: latent without fencing tokens; damage, without tokens and without
/// an acknowledged write).
fn chart_bars(cell: &CellSummary) -> [(Option<&Share>, &'static str, &'static str); 3] {
    let fencing = cell.property(Property::Fencing).is_some();
    let lost = cell.property(Property::LostUpdate).is_some();
    [
        (
            (fencing || lost).then_some(&cell.damage),
            HARM_COLOUR,
            "damage",
        ),
        (fencing.then_some(&cell.latent), LATENT_COLOUR, "latent"),
        (Some(&cell.overlap), OVERLAP_COLOUR, "overlap"),
    ]
}

/// The bar chart's share lines (0–100% by 25%) with their labels, `(left, plot)` the plot's
/// x and width, `h` the drawing's height.
fn chart_grid(s: &mut String, labels: &mut Labels, (left, plot): (f64, f64), h: f64) {
    for k in 0..=4 {
        let x = left + plot * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="0" x2="{x:.1}" y2="{:.1}" stroke="#eee"/>"##,
            h - 20.0
        );
        let text = format!("{}%", k * 25);
        labels.place(&text, &[(x, h - 6.0)], "middle", 11.0, "#666");
    }
}

/// Horizontal bars with 95% whiskers: per cell, damage (red), latent (purple), overlap
/// (orange).
pub fn chart(c: &Comparison) -> String {
    let (w, left, right, row) = (800.0, 270.0, 60.0, 40.0);
    let plot = w - left - right;
    let h = c.cells.len().max(1) as f64 * row + 30.0;
    let mut labels = Labels::new(w, h);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    chart_grid(&mut s, &mut labels, (left, plot), h);
    let bar = |s: &mut String,
               labels: &mut Labels,
               y: f64,
               sh: &Share,
               colour: &str,
               what: &str| {
        let (x1, lo, hi) = (
            left + plot * sh.rate(),
            left + plot * sh.lo,
            left + plot * sh.hi,
        );
        let _ = write!(
            s,
            r##"<rect x="{left}" y="{y:.1}" width="{:.1}" height="9" fill="{colour}"><title>{what}: {}</title></rect><path d="M{lo:.1},{:.1} H{hi:.1} M{lo:.1},{:.1} v6 M{hi:.1},{:.1} v6" stroke="#333"/>"##,
            (x1 - left).max(0.0),
            escape(&sh.text()),
            y + 4.5,
            y + 1.5,
            y + 1.5
        );
        labels.place(
            &pct(sh.rate()),
            &[(hi + 4.0, y + 9.0)],
            "start",
            10.0,
            "#333",
        );
    };
    for (i, cell) in c.cells.iter().enumerate() {
        let y = i as f64 * row + 4.0;
        let name = chart_label(cell);
        labels.place_shrinking(&name, (left - 8.0, y + 20.0), "end", 11.0, "#222");
        for (k, (share, colour, what)) in chart_bars(cell).into_iter().enumerate() {
            let at = y + 11.0 * k as f64;
            match share {
                Some(share) => bar(&mut s, &mut labels, at, share, colour, what),
                // Not a 0% bar: nothing was measured.
                None => {
                    let _ = write!(
                        s,
                        r##"<text x="{left}" y="{:.1}" font-size="9" fill="#666" class="na">n/a<title>{what} n/a: the configuration cannot show it</title></text>"##,
                        at + 8.5
                    );
                }
            }
        }
    }
    s.push_str(&labels.finish());
    s.push_str("</svg>");
    s
}

/// The geometry of a phase diagram: size, margins, and the scales of fault size (as a
/// multiple of the TTL, log scale) and of shares.
struct PhaseFrame {
    w: f64,
    h: f64,
    l: f64,
    r: f64,
    t: f64,
    b: f64,
}

impl PhaseFrame {
    const MULTIPLE_MIN: f64 = 0.1;
    const MULTIPLE_MAX: f64 = 4.0;

    fn x(&self, multiple: f64) -> f64 {
        let (lo, hi) = (Self::MULTIPLE_MIN.log10(), Self::MULTIPLE_MAX.log10());
        let at = multiple.max(Self::MULTIPLE_MIN).log10();
        self.l + (at - lo) / (hi - lo) * (self.w - self.l - self.r)
    }

    fn y(&self, rate: f64) -> f64 {
        self.t + (1.0 - rate) * (self.h - self.t - self.b)
    }
}

/// One small phase diagram: harm and overlap against the fault's size (log scale), with
/// their 95% intervals as bands and the TTL marked.
fn phase_svg(series: &PhaseSeries) -> String {
    let f = PhaseFrame {
        w: 260.0,
        h: 180.0,
        l: 44.0,
        r: 10.0,
        t: 20.0,
        b: 30.0,
    };
    let (w, h) = (f.w, f.h);
    let mut labels = Labels::new(w, h);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="phase" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="10">"#
    );
    labels.place_shrinking(&series.protocol, (f.l, 12.0), "start", 11.0, "#222");
    phase_grid(&mut s, &mut labels, &f);
    for (colour, get) in [
        (
            OVERLAP_COLOUR,
            (|p: &crate::PhasePoint| p.overlap) as fn(&crate::PhasePoint) -> Share,
        ),
        (LATENT_COLOUR, |p: &crate::PhasePoint| p.latent),
        (HARM_COLOUR, |p: &crate::PhasePoint| p.damage),
    ] {
        let pts: Vec<(f64, Share)> = series
            .points
            .iter()
            .map(|p| (f.x(p.ttl_multiple), get(p)))
            .collect();
        phase_curve(&mut s, &f, &pts, colour);
    }
    s.push_str(&labels.finish());
    s.push_str("</svg>");
    s
}

/// The share lines (0, 50%, 100%) and the size ticks, 1× TTL dashed.
fn phase_grid(s: &mut String, labels: &mut Labels, f: &PhaseFrame) {
    let (w, h, l, r, t, b) = (f.w, f.h, f.l, f.r, f.t, f.b);
    for k in [0.0, 0.5, 1.0] {
        let _ = write!(
            s,
            r##"<line x1="{l}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#eee"/>"##,
            f.y(k),
            w - r
        );
        labels.place(&pct(k), &[(l - 8.0, f.y(k) + 3.0)], "end", 10.0, "#666");
    }
    for m in [0.1, 0.25, 0.5, 1.0, 2.0, 4.0] {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{t}" x2="{0:.1}" y2="{1:.1}" stroke="{2}"{3}/>"##,
            f.x(m),
            h - b,
            if m == 1.0 { "#999" } else { "#eee" },
            if m == 1.0 {
                r#" stroke-dasharray="3,2""#
            } else {
                ""
            }
        );
        let text = format!("{m}×");
        labels.place(&text, &[(f.x(m), h - b + 12.0)], "middle", 10.0, "#666");
    }
    labels.place("size / TTL", &[(w - r, h - 4.0)], "end", 10.0, "#666");
}

/// One share's curve: its 95% band, its line, a dot per point with its figure as tooltip.
fn phase_curve(s: &mut String, f: &PhaseFrame, pts: &[(f64, Share)], colour: &str) {
    if pts.is_empty() {
        return;
    }
    let upper: Vec<String> = pts
        .iter()
        .map(|(px, sh)| format!("{px:.1},{:.1}", f.y(sh.hi)))
        .collect();
    let lower: Vec<String> = pts
        .iter()
        .rev()
        .map(|(px, sh)| format!("{px:.1},{:.1}", f.y(sh.lo)))
        .collect();
    let line: Vec<String> = pts
        .iter()
        .map(|(px, sh)| format!("{px:.1},{:.1}", f.y(sh.rate())))
        .collect();
    let _ = write!(
        s,
        r#"<polygon points="{} {}" fill="{colour}" fill-opacity="0.18"/><polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
        upper.join(" "),
        lower.join(" "),
        line.join(" ")
    );
    for (px, sh) in pts {
        let _ = write!(
            s,
            r#"<circle cx="{px:.1}" cy="{:.1}" r="2.5" fill="{colour}"><title>{}</title></circle>"#,
            f.y(sh.rate()),
            escape(&sh.text())
        );
    }
}

fn phase_section(s: &mut String, c: &Comparison) {
    s.push_str(
        "<h2 id=\"phase\">Phase diagrams</h2><p>Share of runs with <b style=\"color:#c1121f\">damage</b>, \
         with a <b style=\"color:#7b2cbf\">latent</b> break of fencing and with <b style=\"color:#e07a2f\">overlap</b> \
         (bands: 95% intervals) against the fault's size as a multiple of the protocol's TTL (log \
         scale; dashed: 1× TTL).</p>",
    );
    let mut axes: Vec<(&str, &str)> = vec![];
    for series in &c.phase {
        if !axes.iter().any(|(a, _)| *a == series.axis) {
            axes.push((&series.axis, &series.about));
        }
    }
    for (axis, about) in axes {
        let _ = write!(s, "<h3>{}</h3><div class=\"grid\">", escape(about));
        for series in c.phase.iter().filter(|x| x.axis == axis) {
            s.push_str(&phase_svg(series));
        }
        s.push_str("</div>");
    }
    note(s, PHASE_LEGEND);
    if !c.phase_left_out.is_empty() {
        s.push_str("<p class=\"note\">Rows without a diagram on an axis:</p><ul class=\"note\">");
        for (row, axes, why) in &c.phase_left_out {
            let (row, axes, why) = (escape(row), escape(&axes.join(", ")), escape(why));
            let _ = write!(s, "<li>{row} ({axes}): {why}</li>");
        }
        s.push_str("</ul>");
    }
}

fn catalog_section(s: &mut String, c: &Comparison) {
    s.push_str(
        "<h2 id=\"catalog\">The catalog</h2><p>Each story from the literature, over its seeds: \
         what its file expects → how many runs violated it (red: they disagree; <i>n/a</i>: the \
         property cannot be shown, e.g. fencing without tokens).</p><div class=\"wide\"><table><tr>\
         <th>scenario</th><th>protocol</th><th>seeds</th><th>mutual exclusion</th><th>fencing</th>\
         <th>lost update</th><th>expect met</th></tr>",
    );
    for e in &c.catalog {
        let _ = write!(
            s,
            "<tr><td><a href=\"#cat-{0}\">{0}</a></td><td>{1}</td><td>{2}</td>",
            escape(&e.name),
            escape(&e.protocol),
            escape(&e.outcome.seeds)
        );
        for p in Property::ALL {
            let (expect, seen) = catalog_outcome(e, p);
            let bad = !catalog_agrees(e, p);
            let _ = write!(
                s,
                "<td{}>{} → {}</td>",
                if bad {
                    " style=\"background:#fdd\""
                } else {
                    ""
                },
                escape(&expect),
                escape(&seen)
            );
        }
        let _ = write!(s, "<td>{}/{}</td></tr>", e.expect_met.k, e.expect_met.n);
    }
    s.push_str("</table></div>");
    note(s, CATALOG_LEGEND);
    for e in &c.catalog {
        let _ = write!(
            s,
            "<div class=\"cx\" id=\"cat-{}\"><h3>{}</h3><p>{}</p>",
            escape(&e.name),
            escape(&e.name),
            escape(&e.description)
        );
        if let Some(x) = &e.timeline {
            s.push_str(&timeline_block(x));
        }
        s.push_str("</div>");
    }
}

fn timeline_block(x: &Counterexample) -> String {
    let what = if x.kind.is_empty() {
        String::new()
    } else {
        format!(
            "<p><b>{}</b>: {}</p>",
            escape(&x.kind),
            escape(&x.description)
        )
    };
    format!(
        "<p class=\"caption\">Seed {}: {}</p>{what}<p>Replay: <code>{}</code> (trace {})</p>{}",
        x.seed,
        escape(&x.caption),
        escape(&x.replay),
        escape(&x.trace_hash),
        x.svg()
    )
}

/// The zombie window of a cell as [`zombie_text`] says it, its figures and its runs each kept
/// on one line.
fn zombie_html(cell: &CellSummary) -> String {
    let text = escape(&zombie_text(cell));
    match text.split_once(" (") {
        Some((figures, runs)) => {
            format!("<span class=\"nw\">{figures}</span> <span class=\"nw\">({runs}</span>")
        }
        None => text,
    }
}

/// A row label that may wrap after its `/` and `+` (`single-redis/<wbr>redsync`), so a wide
/// table fits the page without breaking inside a name.
fn breakable(label: &str) -> String {
    escape(label).replace('/', "/<wbr>").replace('+', "+<wbr>")
}

fn details_table(s: &mut String, c: &Comparison) {
    s.push_str(
        "<h2 id=\"details\">Each property</h2><div class=\"wide\"><table class=\"details\"><tr><th>protocol</th>\
         <th>profile</th><th>seeds</th><th>damage</th><th>latent</th>\
         <th title=\"a holder going on after another client was let in: longest, median of each run's longest, runs with one\">zombie window</th>\
         <th>mutual exclusion</th><th>fencing</th>\
         <th>lost update</th><th title=\"acknowledged updates the final counter does not show\">acked updates lost</th>\
         <th title=\"stale tokens and failed compare-and-sets\">writes rejected</th><th>unknown</th><th>errors</th></tr>",
    );
    for cell in &c.cells {
        if !cell.ran() {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td class=\"same\" colspan=\"11\">{}</td></tr>",
                breakable(&cell.protocol),
                escape(&cell.profile),
                escape(&same_as_text(cell))
            );
            continue;
        }
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            breakable(&cell.protocol),
            escape(&cell.profile),
            escape(&cell.seeds),
            escape(&cell.damage.text()),
            escape(&latent_text(cell)),
            zombie_html(cell),
            escape(&property_text(cell, Property::MutualExclusion)),
            escape(&property_text(cell, Property::Fencing)),
            escape(&property_text(cell, Property::LostUpdate)),
            escape(&lost_text(cell)),
            escape(&rejected_text(cell)),
            cell.runs_unknown,
            cell.runs_error
        );
    }
    s.push_str("</table></div>");
    note(s, DETAILS_LEGEND);
    let not_run = not_run(c);
    if !not_run.is_empty() {
        note(s, NOT_RUN_LEGEND);
        s.push_str("<ul>");
        for (row, same_as, why, profiles) in not_run {
            let _ = write!(
                s,
                "<li>{} under {}: same as {}. {}</li>",
                escape(&row),
                escape(&profiles.join(", ")),
                escape(&same_as),
                escape(&why)
            );
        }
        s.push_str("</ul>");
    }
}

/// Runs whose verdict was `unknown`, with the checker's reasons and their replay commands.
fn undecided_section(s: &mut String, c: &Comparison) {
    let cells: Vec<_> = c.cells.iter().filter(|c| !c.undecided.is_empty()).collect();
    if cells.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"undecided\">Undecided runs (verdict unknown)</h2><ul>");
    for cell in cells {
        for u in &cell.undecided {
            let why: Vec<String> = u.reasons.iter().map(|(p, r)| format!("{p}: {r}")).collect();
            let _ = write!(
                s,
                "<li>{} under {}, seed {}: {} <code>{}</code></li>",
                escape(&cell.protocol),
                escape(&cell.profile),
                u.seed,
                escape(&why.join("; ")),
                escape(&u.replay)
            );
        }
    }
    s.push_str("</ul>");
}

fn liveness_table(s: &mut String, cells: &[CellSummary]) {
    s.push_str(
        "<h2 id=\"liveness\">Liveness</h2><div class=\"wide\"><table><tr><th>protocol</th><th>profile</th><th>runs</th>\
         <th title=\"mean acquisitions per run\">grants/run</th>\
         <th title=\"mean of each run's median acquire latency\">acquire p50 ms</th>\
         <th title=\"longest time anyone waited while no live client held the lock\">longest wait ms</th></tr>",
    );
    for cell in cells {
        if !cell.ran() {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td class=\"same\" colspan=\"4\">{}</td></tr>",
                escape(&cell.protocol),
                escape(&cell.profile),
                escape(&same_as_text(cell))
            );
            continue;
        }
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td></tr>",
            escape(&cell.protocol),
            escape(&cell.profile),
            cell.runs,
            cell.acquisitions_mean,
            cell.acquire_latency_ms_p50_mean,
            cell.wanted_free_ms_max,
        );
    }
    s.push_str("</table></div>");
    note(s, LIVENESS_LEGEND);
}

/// Bold the defined words of [`DEFINITIONS`] (written with `**` for Markdown).
fn definitions_html() -> String {
    let parts: Vec<String> = escape(DEFINITIONS)
        .split("**")
        .enumerate()
        .map(|(i, p)| {
            if i % 2 == 1 {
                format!("<b>{p}</b>")
            } else {
                p.to_string()
            }
        })
        .collect();
    parts.concat().replace('`', "")
}

fn top(s: &mut String, c: &Comparison) {
    let _ = write!(s, "<h1>{}</h1>", escape(&c.title));
    bottom_section(s, c);
    let _ = write!(
        s,
        "<p>{} runs in the matrix ({} per cell; {}), {} in all with the phase \
         diagrams and the catalog. Produced by <code>{}</code>. Every share has its 95% Wilson \
         interval; every failing seed replays exactly with the command shown.</p><p>{}</p>",
        c.runs(),
        escape(&c.seed_counts()),
        escape(&c.seeds),
        c.runs_all(),
        escape(&c.command),
        definitions_html()
    );
    decision_section(s, c);
    s.push_str("<h2 id=\"verdict\">Verdict</h2><ul>");
    for v in verdicts(c) {
        let _ = write!(
            s,
            "<li><b>{}</b>: {}.<br><span class=\"ev\">Evidence: {}.</span></li>",
            escape(&v.protocol),
            escape(&v.sentence()),
            escape(&v.evidence())
        );
    }
    s.push_str("</ul>");
}

/// The bottom line: per common need, the rows that fit it, each line linking to the
/// decision table it is derived from.
fn bottom_section(s: &mut String, c: &Comparison) {
    let lines = decide::bottom_line(c);
    if lines.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"bottom\">Bottom line</h2><ul class=\"bottom\">");
    for (need, answer) in lines {
        let _ = write!(
            s,
            "<li><b>{}</b>: {} <a href=\"#decide\">(evidence)</a></li>",
            escape(&need),
            escape(&answer)
        );
    }
    s.push_str("</ul>");
}

/// The decision table: requirements × rows, each answer with its evidence as the cell's
/// small print; the rows in groups that fit the page side by side (`decide::column_groups`);
/// the definitions beside it.
fn decision_section(s: &mut String, c: &Comparison) {
    let rows = decide::of(c);
    if rows.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"decide\">What to choose</h2>");
    note(s, &decide::legend(c));
    let labels: Vec<&str> = c.protocols.iter().map(|(p, _)| p.as_str()).collect();
    for group in decide::column_groups(&labels, decide::MAX_COLUMNS) {
        s.push_str("<div class=\"wide\"><table class=\"decide\"><tr><th>requirement</th>");
        for p in &labels[group.clone()] {
            let _ = write!(s, "<th>{}</th>", escape(&decide::display_row(c, p)));
        }
        s.push_str("</tr>");
        for r in &rows {
            let _ = write!(
                s,
                "<tr><td>{}<small>{}</small></td>",
                escape(&r.requirement),
                escape(&r.reads)
            );
            for d in &r.decisions[group.clone()] {
                decision_cell(s, d);
            }
            s.push_str("</tr>");
        }
        s.push_str("</table></div>");
        note(
            s,
            &format!(
                "Configurations {}–{} of {}: ✘ breaks, ◐ can break rarely, ✔ no break found, ? undecided \
                 or not exercised; each cell's small print is its evidence.",
                group.start + 1,
                group.end,
                labels.len()
            ),
        );
    }
}

fn decision_cell(s: &mut String, d: &decide::Decision) {
    use decide::Grade;
    let class = match d.grade {
        Some(Grade::Breaks | Grade::Slower) => "fails",
        Some(Grade::CanBreakRarely) => "only",
        Some(Grade::NoBreakFound | Grade::Fast) => "meets",
        _ => "undecided",
    };
    let _ = write!(
        s,
        "<td class=\"{class}\" title=\"{ev}\"><b>{}</b><small>{ev}</small></td>",
        escape(&d.word()),
        ev = escape(&d.evidence)
    );
}

/// The cost table and the safety-against-cost chart.
fn cost_section(s: &mut String, c: &Comparison) {
    if !c.rows.iter().any(|r| r.cost.is_some()) {
        return;
    }
    s.push_str(
        "<h2 id=\"cost\">Cost</h2><div class=\"wide\"><table><tr><th>protocol</th>\
         <th>acquire p50 ms</th><th>acquire p99 ms</th><th>handoffs/s</th>\
         <th>messages/acquire</th><th>fsyncs/acquire</th><th>stuck ms/s</th><th>runs</th>",
    );
    let live = crate::markdown::has_live_cost(c);
    s.push_str(if live {
        "<th>loopback live · sim p50 ms</th></tr>"
    } else {
        "</tr>"
    });
    for r in &c.rows {
        let Some(x) = &r.cost else { continue };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td>\
             <td title=\"under {}\">{}</td><td>{}</td>",
            escape(&r.label),
            figure_ci(Some(x.acquire_ms_p50), x.acquire_ms_p50_ci95, 1),
            figure_ci(Some(x.acquire_ms_p99), x.acquire_ms_p99_ci95, 1),
            figure_ci(x.handoffs_per_s, x.handoffs_per_s_ci95, 1),
            x.messages_per_acquire,
            x.fsyncs_per_acquire,
            escape(&x.stuck_profile),
            figure_ci(x.stuck_ms_per_s, x.stuck_ms_per_s_ci95, 0),
            x.runs
        );
        if live {
            let _ = write!(s, "<td>{}</td>", escape(&crate::markdown::live_cell(x)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table></div>");
    note(s, COST_LEGEND);
    if live {
        note(s, crate::markdown::LIVE_COST_LEGEND);
    }
    if let Some(profile) = c.reference_profile() {
        let _ = write!(
            s,
            "<h3 id=\"tradeoff\">Safety against cost (damage under {})</h3>",
            escape(profile)
        );
        s.push_str(&crate::tradeoff::svg(c, profile));
        note(s, &crate::tradeoff::legend(profile));
    }
}

/// The whole page.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>",
        escape(&c.title)
    );
    top(&mut s, c);
    cost_section(&mut s, c);
    s.push_str("<h2 id=\"harm\">Damage, latent and overlap: share of runs (95% interval)</h2>");
    headline_table(&mut s, c);
    s.push_str("<h2 id=\"ranking\">Ranking by damage</h2><ul>");
    for (profile, groups) in ranking(c) {
        let g: Vec<String> = groups.iter().map(|(r, n)| group_text(*r, n)).collect();
        let _ = write!(
            s,
            "<li>{}: {}</li>",
            escape(&profile),
            escape(&g.join(" · "))
        );
    }
    s.push_str("</ul>");
    note(&mut s, RANKING_LEGEND);
    s.push_str(
        "<h2 id=\"chart\">Damage (red), latent (purple) and overlap (orange), with 95% intervals</h2>",
    );
    s.push_str(&chart(c));
    note(&mut s, CHART_LEGEND);
    rest(&mut s, c);
    s.push_str("</body></html>");
    s
}

/// The legend under the bar chart.
const CHART_LEGEND: &str = "Per cell (row · profile): bars are shares of the cell's runs, \
    whiskers their 95% Wilson intervals.";

/// Everything after the chart: phase diagrams, catalog, details, descriptions, liveness,
/// counterexamples.
fn rest(s: &mut String, c: &Comparison) {
    if !c.phase.is_empty() {
        phase_section(s, c);
    }
    if !c.catalog.is_empty() {
        catalog_section(s, c);
    }
    details_table(s, c);
    undecided_section(s, c);
    s.push_str("<h2>Protocols</h2><ul>");
    for (p, d) in &c.protocols {
        let _ = write!(s, "<li><b>{}</b>: {}</li>", escape(p), escape(d));
    }
    s.push_str("</ul><h2>Fault profiles</h2><ul>");
    for (p, d) in &c.profiles {
        let _ = write!(s, "<li><b>{}</b>: {}</li>", escape(p), escape(d));
    }
    s.push_str("</ul>");
    liveness_table(s, &c.cells);
    if !c.counterexamples.is_empty() {
        s.push_str("<h2 id=\"timelines\">Counterexamples</h2>");
        s.push_str(LEGEND);
        for x in &c.counterexamples {
            let _ = write!(
                s,
                "<div class=\"cx\"><h3>{} under {}</h3>{}</div>",
                escape(&x.protocol),
                escape(&x.profile),
                timeline_block(x)
            );
        }
    }
}

/// A page with the timeline of one run: around its first violation's witnesses (as `locksim
/// run` lists them), or the whole run if it has none. `title` names the run; `about` says what it shows; `servers` are the
/// deployment's server nodes (each gets a lane).
pub fn run_page(
    title: &str,
    about: &str,
    run: &RunResult,
    history: &[Event],
    servers: &[String],
) -> String {
    let first = run.violations.first();
    let x = Counterexample::of_violation(("", ""), run, history.to_vec(), servers, first);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1><p>{a}</p>{LEGEND}{block}</body></html>",
        t = escape(title),
        a = escape(about),
        block = timeline_block(&x),
    )
}
