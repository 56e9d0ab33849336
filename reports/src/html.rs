//! The comparison as one self-contained HTML page: no scripts, no external files.

use crate::timeline::{escape, svg};
use crate::{percent, Comparison};
use locksim_scenarios::RunResult;
use locksim_sim::Event;
use locksim_sim::Property;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;white-space:nowrap;\
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
code{background:#f4f4f4;padding:1px 3px}.cx{margin:2em 0;border-top:1px solid #ddd}\
.legend span{margin-right:1.5em}";

/// What the timeline's marks mean.
const LEGEND: &str = "<p class=\"legend\"><span>▮ critical section (red outline: witness)</span>\
    <span>▨ paused</span><span>✖ crash</span><span>↻ restart</span><span>▲ clock jump</span>\
    <span>◆ key expired</span><span>● write accepted (=value)</span>\
    <span>✕ write rejected</span><span>orange band: partition</span></p>";

/// Background colour for a violation rate: white at 0, deepening red towards 1.
fn heat(rate: f64) -> String {
    if rate == 0.0 {
        return "#e9f5ec".into();
    }
    let light = 90.0 - 45.0 * rate.sqrt();
    format!("hsl(0,70%,{light:.0}%)")
}

/// A bar chart of the share of runs with any violation, per cell.
fn chart(c: &Comparison) -> String {
    let rows = c.cells.len().max(1) as f64;
    let (w, bar_h, left) = (900.0, 18.0, 330.0);
    let h = rows * (bar_h + 6.0) + 30.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    for k in 0..=4 {
        let x = left + (w - left - 60.0) * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="0" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#666">{}%</text>"##,
            h - 20.0,
            h - 6.0,
            k * 25
        );
    }
    for (i, cell) in c.cells.iter().enumerate() {
        let y = i as f64 * (bar_h + 6.0) + 4.0;
        let rate = cell.invalid_rate();
        let len = (w - left - 60.0) * rate;
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{} · {}</text><rect x="{left}" y="{y:.1}" width="{len:.1}" height="{bar_h}" fill="#d62828"/><text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
            left - 8.0,
            y + 13.0,
            escape(&cell.protocol),
            escape(&cell.profile),
            left + len + 4.0,
            y + 13.0,
            percent(rate)
        );
    }
    s.push_str("</svg>");
    s
}

/// The whole page.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        escape(&c.title)
    );
    let _ = write!(
        s,
        "<h1>{}</h1><p>{} runs: seeds {} for each protocol × fault profile. Produced by \
         <code>{}</code>. Every failing seed replays exactly with the command shown.</p>",
        escape(&c.title),
        c.runs(),
        escape(&c.seeds),
        escape(&c.command)
    );
    let _ = write!(s, "<h2>Share of runs violating mutual exclusion / fencing / lost update</h2><table><tr><th>protocol</th>");
    for (p, _) in &c.profiles {
        let _ = write!(s, "<th>{}</th>", escape(p));
    }
    s.push_str("</tr>");
    for (proto, _) in &c.protocols {
        let _ = write!(s, "<tr><td>{}</td>", escape(proto));
        for (profile, _) in &c.profiles {
            match c.cell(proto, profile) {
                Some(cell) => {
                    let _ = write!(
                        s,
                        "<td style=\"background:{}\" title=\"{} runs\">{} / {} / {}</td>",
                        heat(cell.invalid_rate()),
                        cell.runs,
                        percent(cell.rate(Property::MutualExclusion)),
                        percent(cell.rate(Property::Fencing)),
                        percent(cell.rate(Property::LostUpdate))
                    );
                }
                None => s.push_str("<td>–</td>"),
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table><h2>Runs with any violation</h2>");
    s.push_str(&chart(c));
    s.push_str("<h2>Protocols</h2><ul>");
    for (p, d) in &c.protocols {
        let _ = write!(s, "<li><b>{}</b>: {}</li>", escape(p), escape(d));
    }
    s.push_str("</ul><h2>Fault profiles</h2><ul>");
    for (p, d) in &c.profiles {
        let _ = write!(s, "<li><b>{}</b>: {}</li>", escape(p), escape(d));
    }
    s.push_str("</ul>");
    s.push_str(
        "<h2 id=\"liveness\">Liveness</h2><table><tr><th>protocol</th><th>profile</th><th>runs</th>\
         <th title=\"mean acquisitions per run\">grants/run</th>\
         <th title=\"mean of each run's median acquire latency\">acquire p50 ms</th>\
         <th title=\"longest time anyone waited while no live client held the lock\">longest wait ms</th><th>unknown</th><th>errors</th></tr>",
    );
    for cell in &c.cells {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&cell.protocol),
            escape(&cell.profile),
            cell.runs,
            cell.acquisitions_mean,
            cell.acquire_latency_ms_p50_mean,
            cell.wanted_free_ms_max,
            cell.runs_unknown,
            cell.runs_error
        );
    }
    s.push_str("</table>");
    let failing: Vec<_> = c.cells.iter().filter(|c| !c.failing.is_empty()).collect();
    if !failing.is_empty() {
        s.push_str("<h2>Failing seeds</h2><ul>");
        for cell in failing {
            for f in &cell.failing {
                let _ = write!(
                    s,
                    "<li>{} under {}: seed {} ({}) <code>{}</code></li>",
                    escape(&cell.protocol),
                    escape(&cell.profile),
                    f.seed,
                    escape(&f.kinds.join(", ")),
                    escape(&f.replay)
                );
            }
        }
        s.push_str("</ul>");
    }
    if !c.counterexamples.is_empty() {
        s.push_str("<h2 id=\"counterexamples\">Counterexamples</h2>");
        s.push_str(LEGEND);
        for x in &c.counterexamples {
            let _ = write!(
                s,
                "<div class=\"cx\"><h3>{} under {} — seed {}</h3><p><b>{}</b>: {}</p>\
                 <p>Replay: <code>{}</code> (trace {})</p>{}</div>",
                escape(&x.protocol),
                escape(&x.profile),
                x.seed,
                escape(&x.kind),
                escape(&x.description),
                escape(&x.replay),
                escape(&x.trace_hash),
                svg(&x.history, &x.witness)
            );
        }
    }
    s.push_str("</body></html>");
    s
}

/// A page with the timeline of one run: around its first violation's witnesses, or the whole
/// run if it has none. `title` names the run; `about` says what it shows.
pub fn run_page(title: &str, about: &str, run: &RunResult, history: &[Event]) -> String {
    let what = match run.violations.first() {
        Some(v) => format!(
            "<p><b>{}</b>: {}</p>",
            escape(v.kind.name()),
            escape(&v.description)
        ),
        None => format!("<p>No violation: the verdict is {}.</p>", run.verdict),
    };
    let witness = run.violations.first().map_or(vec![], |v| v.events.clone());
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1><p>{a}</p>{what}\
         <p>Replay: <code>{r}</code> (trace {h})</p>{LEGEND}{svg}</body></html>",
        t = escape(title),
        a = escape(about),
        r = escape(&run.replay),
        h = escape(&run.trace_hash),
        svg = svg(history, &witness),
    )
}
