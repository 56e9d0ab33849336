//! An SVG timeline of a counterexample: one lane per node, critical sections as bars,
//! pauses, crashes, clock jumps and partitions where they happened, the resource's accepts
//! and rejects, and the witness events marked.

use locksim_sim::{Event, Kind, Op};
use std::collections::BTreeMap;
use std::fmt::Write;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 90.0;
const LANE: f64 = 30.0;
const TOP: f64 = 34.0;

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Lanes: servers and other nodes first, then clients (`c1`, `c2`, ... in number order),
/// then the resource. The nemesis gets no lane: its faults are drawn on their targets.
fn lanes(history: &[Event]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in history {
        for n in [Some(&e.node), e.target.as_ref()].into_iter().flatten() {
            if n != "nemesis" && !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let client_no = |n: &str| n.strip_prefix('c').and_then(|d| d.parse::<u64>().ok());
    names.sort_by_key(|n| match (n.as_str(), client_no(n)) {
        ("resource", _) => (2, 0, n.clone()),
        (_, Some(i)) => (1, i, String::new()),
        _ => (0, 0, n.clone()),
    });
    names
}

/// The time window to draw: around the witnesses (all of the run if there are none).
fn window(history: &[Event], witness: &[u64]) -> (u64, u64) {
    let times: Vec<u64> = witness
        .iter()
        .filter_map(|i| history.get(*i as usize))
        .map(|e| e.time_ns)
        .collect();
    let (lo, hi) = match (times.iter().min(), times.iter().max()) {
        (Some(lo), Some(hi)) => (*lo, *hi),
        _ => (0, history.last().map_or(1, |e| e.time_ns)),
    };
    let pad = ((hi - lo) / 10).max(50_000_000);
    let end = history.last().map_or(hi, |e| e.time_ns);
    (lo.saturating_sub(pad), (hi + pad).min(end.max(hi + 1)))
}

/// Draws the timeline. `witness` are event indexes to highlight.
pub fn svg(history: &[Event], witness: &[u64]) -> String {
    let lanes = lanes(history);
    let lane_of: BTreeMap<&str, usize> = lanes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let (t0, t1) = window(history, witness);
    let span = (t1 - t0).max(1) as f64;
    let x = |t: u64| LEFT + (t.clamp(t0, t1) - t0) as f64 / span * (WIDTH - LEFT - 10.0);
    let y = |lane: usize| TOP + lane as f64 * LANE;
    let height = TOP + lanes.len() as f64 * LANE + 20.0;
    let is_witness = |i: u64| witness.contains(&i);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    s.push_str(
        r##"<defs><pattern id="hatch" width="6" height="6" patternTransform="rotate(45)" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#eee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>"##,
    );
    // Axis: the end labels are anchored inwards so they are not cut off.
    for k in 0..=5u64 {
        let t = t0 + (span as u64) * k / 5;
        let anchor = match k {
            0 => "start",
            5 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#ddd"/><text x="{0:.1}" y="{3}" text-anchor="{anchor}" fill="#666">{4:.0} ms</text>"##,
            x(t),
            TOP - 6.0,
            height - 18.0,
            TOP - 10.0,
            t as f64 / 1e6
        );
    }
    for (i, name) in lanes.iter().enumerate() {
        let _ = write!(
            s,
            r##"<text x="4" y="{:.1}" fill="#333">{}</text><line x1="{LEFT}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#f0f0f0"/>"##,
            y(i) + LANE / 2.0 + 4.0,
            escape(name),
            y(i) + LANE,
            WIDTH - 10.0,
            y(i) + LANE
        );
    }
    draw_intervals(&mut s, history, &lane_of, &x, &y, &is_witness, t1);
    draw_points(&mut s, history, &lane_of, &x, &y, &is_witness, (t0, t1));
    s.push_str("</svg>");
    s
}

type Scale<'a> = &'a dyn Fn(u64) -> f64;
type LaneY<'a> = &'a dyn Fn(usize) -> f64;

/// A horizontal bar in a lane: a critical section (full height) or a pause (lower band,
/// hatched, drawn over the critical sections so a pause inside one shows both).
struct Bar<'a> {
    lane: usize,
    from: u64,
    to: u64,
    pause: bool,
    witness: bool,
    label: &'a str,
}

fn draw_bar(s: &mut String, b: &Bar, x: Scale, y: LaneY) {
    let (x0, x1) = (x(b.from), x(b.to));
    if x1 - x0 < 0.5 {
        return;
    }
    let (top, h, fill) = if b.pause {
        (LANE / 2.0, LANE / 2.0 - 3.0, "url(#hatch)")
    } else {
        (5.0, LANE - 10.0, "#8ecae6")
    };
    let stroke = if b.witness {
        r##" stroke="#c00" stroke-width="2""##
    } else {
        ""
    };
    let _ = write!(
        s,
        r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"{stroke}><title>{}</title></rect>"#,
        y(b.lane) + top,
        x1 - x0,
        escape(b.label)
    );
    if x1 - x0 > 40.0 && !b.pause {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#123">{}</text>"##,
            x0 + 3.0,
            y(b.lane) + LANE / 2.0 + 4.0,
            escape(b.label)
        );
    }
}

fn draw_intervals(
    s: &mut String,
    history: &[Event],
    lane_of: &BTreeMap<&str, usize>,
    x: Scale,
    y: LaneY,
    is_witness: &dyn Fn(u64) -> bool,
    end: u64,
) {
    let mut open_cs: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut open_pause: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut open_cut: Option<&Event> = None;
    let mut pauses = String::new();
    let close_cs = |s: &mut String, enter: &Event, exit: Option<&Event>| {
        let Some(&lane) = lane_of.get(enter.node.as_str()) else {
            return;
        };
        let label = enter.grant.clone().unwrap_or_default()
            + &enter.token.map_or(String::new(), |t| format!(" token {t}"));
        let bar = Bar {
            lane,
            from: enter.time_ns,
            to: exit.map_or(end, |e| e.time_ns),
            pause: false,
            witness: is_witness(enter.index) || exit.is_some_and(|e| is_witness(e.index)),
            label: &label,
        };
        draw_bar(s, &bar, x, y);
    };
    let mut pause_bar = |lane: usize, from: u64, to: u64, label: &str| {
        let bar = Bar {
            lane,
            from,
            to,
            pause: true,
            witness: false,
            label,
        };
        draw_bar(&mut pauses, &bar, x, y);
    };
    for e in history {
        match e.op {
            Op::CsEnter => {
                open_cs.insert(&e.node, e);
            }
            Op::CsExit => {
                if let Some(enter) = open_cs.remove(e.node.as_str()) {
                    close_cs(s, enter, Some(e));
                }
            }
            Op::Crash => {
                let target = e.target.as_deref().unwrap_or(&e.node);
                if let Some(enter) = open_cs.remove(target) {
                    close_cs(s, enter, Some(e));
                }
                open_pause.remove(target);
            }
            Op::Pause => {
                if let Some(t) = e.target.as_deref() {
                    open_pause.insert(t, e);
                }
            }
            Op::Resume => {
                let t = e.target.as_deref().unwrap_or(&e.node);
                if let (Some(p), Some(&lane)) = (open_pause.remove(t), lane_of.get(t)) {
                    let label = format!("paused {}", p.detail.as_deref().unwrap_or(""));
                    pause_bar(lane, p.time_ns, e.time_ns, &label);
                }
            }
            Op::Partition => open_cut = Some(e),
            Op::Heal => {
                if let Some(p) = open_cut.take() {
                    let (x0, x1) = (x(p.time_ns), x(e.time_ns));
                    let _ = write!(
                        s,
                        r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="8" fill="#f4a261"><title>partition {}</title></rect>"##,
                        TOP - 18.0,
                        (x1 - x0).max(1.0),
                        escape(p.detail.as_deref().unwrap_or(""))
                    );
                }
            }
            _ => {}
        }
    }
    for enter in std::mem::take(&mut open_cs).into_values() {
        close_cs(s, enter, None);
    }
    for (t, p) in open_pause {
        if let Some(&lane) = lane_of.get(t) {
            let until = p.time_ns + p.value.unwrap_or(0).max(0) as u64 * 1_000_000;
            pause_bar(lane, p.time_ns, until.min(end), "paused");
        }
    }
    s.push_str(&pauses);
}

fn draw_points(
    s: &mut String,
    history: &[Event],
    lane_of: &BTreeMap<&str, usize>,
    x: Scale,
    y: LaneY,
    is_witness: &dyn Fn(u64) -> bool,
    (t0, t1): (u64, u64),
) {
    for e in history {
        if e.time_ns < t0 || e.time_ns > t1 {
            continue;
        }
        let lane_name = e.target.as_deref().unwrap_or(&e.node);
        let Some(&lane) = lane_of.get(lane_name) else {
            continue;
        };
        let (cx, cy) = (x(e.time_ns), y(lane) + LANE / 2.0);
        let title = escape(&e.describe());
        let mark = match (&e.op, e.kind) {
            (Op::ResourceAccept, _) => format!(
                r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="4" fill="#2a9d8f"><title>{title}</title></circle><text x="{:.1}" y="{:.1}" fill="#2a9d8f">{}</text>"##,
                cx + 5.0,
                cy - 4.0,
                e.value.map_or(String::new(), |v| format!("={v}"))
            ),
            (Op::ResourceReject, _) => format!(
                r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#c00" font-weight="bold">✕<title>{title}</title></text>"##,
                cy + 4.0
            ),
            (Op::Crash, _) => format!(
                r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#c00" font-size="16">✖<title>{title}</title></text>"##,
                cy + 5.0
            ),
            (Op::Restart, _) => format!(
                r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#2a9d8f" font-size="14">↻<title>{title}</title></text>"##,
                cy + 5.0
            ),
            (Op::ClockJump | Op::ClockDrift, _) => format!(
                r##"<path d="M{cx:.1},{:.1} l5,9 l-10,0 z" fill="#e76f51"><title>{title}</title></path><text x="{:.1}" y="{:.1}" fill="#e76f51">{}</text>"##,
                cy - 9.0,
                cx + 6.0,
                cy - 2.0,
                e.value.map_or(String::new(), |v| if e.op == Op::ClockJump {
                    format!("{v:+} ms")
                } else {
                    format!("{v} ppm")
                })
            ),
            (Op::Event, _) => format!(
                r##"<path d="M{cx:.1},{:.1} v-10 l7,3 l-7,3" stroke="#3a0ca3" fill="#3a0ca3"><title>{title}</title></path><text x="{:.1}" y="{:.1}" fill="#3a0ca3" font-size="9">{}</text>"##,
                cy + 6.0,
                cx + 8.0,
                cy - 2.0,
                escape(e.name.as_deref().unwrap_or("event"))
            ),
            (Op::FsyncStall, _) => format!(
                r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#e76f51" font-size="11">⧗<title>{title}</title></text>"##,
                cy + 4.0
            ),
            (Op::Expire, _) => format!(
                r##"<path d="M{cx:.1},{:.1} l4,4 l-4,4 l-4,-4 z" fill="#6d597a"><title>{title}</title></path>"##,
                cy - 4.0
            ),
            (Op::Write, Kind::Ok | Kind::Fail) if is_witness(e.index) => format!(
                r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="3" fill="#333"><title>{title}</title></circle>"##
            ),
            _ => String::new(),
        };
        s.push_str(&mark);
        if is_witness(e.index) {
            let _ = write!(
                s,
                r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="3,2"/><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#c00" font-size="9">#{}</text>"##,
                y(lane) + 2.0,
                y(lane) + LANE - 2.0,
                y(lane) + LANE + 1.0,
                e.index
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(index: u64, ms: u64, node: &str, kind: Kind, op: Op) -> Event {
        let mut e = Event::new(node, kind, op);
        e.index = index;
        e.time_ns = ms * 1_000_000;
        e
    }

    #[test]
    fn draws_lanes_bars_faults_and_witnesses() {
        let h = vec![
            ev(0, 0, "c1", Kind::Ok, Op::CsEnter).grant("c1#1"),
            ev(1, 10, "nemesis", Kind::Info, Op::Pause)
                .target("c1")
                .value(100),
            ev(2, 50, "c2", Kind::Ok, Op::CsEnter).grant("c2#1"),
            ev(3, 60, "resource", Kind::Info, Op::ResourceAccept).value(1),
            ev(4, 70, "c2", Kind::Ok, Op::CsExit).grant("c2#1"),
            ev(5, 110, "nemesis", Kind::Info, Op::Resume).target("c1"),
            ev(6, 120, "c1", Kind::Ok, Op::CsExit).grant("c1#1"),
            ev(7, 130, "nemesis", Kind::Info, Op::ClockJump)
                .target("redis")
                .value(5000),
        ];
        let svg = svg(&h, &[0, 2, 4, 6]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(lanes(&h), vec!["redis", "c1", "c2", "resource"]);
        // Two CS bars outlined as witnesses, one pause, one accept, one jump, four markers.
        assert_eq!(
            svg.matches(r##"stroke="#c00" stroke-width="2""##).count(),
            2
        );
        assert_eq!(svg.matches("url(#hatch)").count(), 1);
        assert!(svg.contains("+5000 ms"));
        assert_eq!(svg.matches("stroke-dasharray").count(), 4);
        assert!(
            !svg.contains(">nemesis</text>"),
            "faults are drawn on their targets"
        );
    }

    #[test]
    fn protocol_events_are_drawn_on_the_lane_of_the_node_they_concern() {
        let h = vec![
            ev(0, 0, "c1", Kind::Ok, Op::CsEnter).grant("c1#1"),
            ev(1, 10, "sentinel1", Kind::Info, Op::Event)
                .name("failover")
                .target("redis2"),
            ev(2, 20, "c1", Kind::Ok, Op::CsExit).grant("c1#1"),
        ];
        assert_eq!(lanes(&h), vec!["redis2", "sentinel1", "c1"]);
        let svg = svg(&h, &[]);
        assert_eq!(svg.matches(">failover</text>").count(), 1, "{svg}");
    }

    #[test]
    fn escapes_text() {
        assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
    }
}
