//! An SVG timeline of a run: one lane per node (every server, also those the history never
//! names), critical sections as bars, pauses and downtimes, crashes, clock jumps, key
//! expiries, partitions, the resource's accepts and rejects, protocol events and notes, and
//! the witness events marked. Faults that began before the drawn window and still act in it
//! are drawn from its left edge. Ticks fall on round values.
//!
//! Every text goes through one [`Labels`] placer that tries a few positions and drops a label
//! (its mark keeps a tooltip) rather than let two texts overlap or one leave the chart.

use locksim_check::interpret::{interpret, key_note, target, Downtime, Interval, KeyHold};
use locksim_sim::fault::drawing::{Drawing, Glyph, Shape};
use locksim_sim::{fault, Event, Op};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The drawing's width in SVG units: it is shown at this size (or scaled down to fit), so
/// 800 keeps 11-unit text readable on an 800 px wide screen.
pub const WIDTH: f64 = 800.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 8.0;
const LANE: f64 = 30.0;
const TOP: f64 = 40.0;
/// The labels' font size, px.
pub const FONT: f64 = 11.0;

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The width a text of `chars` characters takes at `font` size, generously (sans-serif
/// averages ~0.55 em per character; digits and capitals are wider).
pub fn text_width(chars: usize, font: f64) -> f64 {
    chars as f64 * font * 0.62
}

/// A placed text's box: x0, y0, x1, y1.
pub type TextBox = (f64, f64, f64, f64);

/// Places texts so that no two overlap and none leaves `[0, width] × [0, height]`.
pub struct Labels {
    placed: Vec<TextBox>,
    width: f64,
    height: f64,
    out: String,
}

impl Labels {
    /// A placer for a drawing of this size.
    pub fn new(width: f64, height: f64) -> Self {
        Labels {
            placed: vec![],
            width,
            height,
            out: String::new(),
        }
    }

    /// Tries each candidate baseline position `(x, y)` (with `anchor` start/middle/end) in
    /// turn and writes the text at the first free one; returns whether it was placed.
    pub fn place(
        &mut self,
        text: &str,
        candidates: &[(f64, f64)],
        anchor: &str,
        font: f64,
        fill: &str,
    ) -> bool {
        let w = text_width(text.chars().count(), font);
        for &(x, y) in candidates {
            let x0 = match anchor {
                "middle" => x - w / 2.0,
                "end" => x - w,
                _ => x,
            };
            let b = (x0, y - font, x0 + w, y + font * 0.25);
            let inside = b.0 >= 0.0 && b.2 <= self.width && b.1 >= 0.0 && b.3 <= self.height;
            if inside && !self.placed.iter().any(|p| intersects(p, &b)) {
                self.placed.push(b);
                let _ = write!(
                    self.out,
                    r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="{font}" fill="{fill}">{}</text>"#,
                    escape(text)
                );
                return true;
            }
        }
        false
    }

    /// Like [`Labels::place`] at one position, trying smaller fonts (down to 8) if the text
    /// does not fit at `font`, then shortening it (with `…`) at 8.
    pub fn place_shrinking(
        &mut self,
        text: &str,
        at: (f64, f64),
        anchor: &str,
        font: f64,
        fill: &str,
    ) -> bool {
        let mut size = font;
        while size >= 8.0 {
            if self.place(text, &[at], anchor, size, fill) {
                return true;
            }
            size -= 1.0;
        }
        let chars: Vec<char> = text.chars().collect();
        (1..chars.len()).rev().any(|keep| {
            let short: String = chars[..keep].iter().collect::<String>() + "…";
            self.place(&short, &[at], anchor, 8.0, fill)
        })
    }

    /// The SVG of every placed text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// Whether two boxes overlap (touching is not overlapping).
pub fn intersects(a: &TextBox, b: &TextBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

fn client_no(n: &str) -> Option<u64> {
    n.strip_prefix('c').and_then(|d| d.parse::<u64>().ok())
}

/// Lanes: `servers` in their order, then other nodes the history names (sentinels, peers),
/// then clients (`c1`, `c2`, … in number order), then the resource. The nemesis gets no
/// lane: its faults are drawn on their targets.
pub fn lanes(history: &[Event], servers: &[String]) -> Vec<String> {
    let mut names: Vec<String> = servers.to_vec();
    for e in history {
        for n in [Some(&e.node), e.target.as_ref()].into_iter().flatten() {
            if n != locksim_check::history::NEMESIS && !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let server_at = |n: &str| servers.iter().position(|s| s == n);
    names.sort_by_key(|n| match (n.as_str(), server_at(n), client_no(n)) {
        (_, Some(i), _) => (0, i as u64, String::new()),
        ("resource", _, _) => (3, 0, n.clone()),
        (_, None, Some(i)) => (2, i, String::new()),
        _ => (1, 0, n.clone()),
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
    let end = history.last().map_or(1, |e| e.time_ns.max(1));
    let (lo, hi) = match (times.iter().min(), times.iter().max()) {
        (Some(lo), Some(hi)) => (*lo, *hi),
        _ => return (0, end),
    };
    let pad = ((hi - lo) / 8).max(100_000_000);
    (lo.saturating_sub(pad), (hi + pad).min(end.max(hi + 1)))
}

/// Round tick values (1, 2 or 5 × 10ⁿ ms apart) inside `[t0, t1]` ns, about `want` of them.
pub fn ticks_ms(t0: u64, t1: u64, want: u32) -> Vec<u64> {
    let span_ms = (t1.saturating_sub(t0) as f64 / 1e6).max(1e-3);
    let raw = span_ms / f64::from(want.max(1));
    let mag = 10f64.powf(raw.log10().floor());
    // The 1-2-5 step whose number of ticks comes closest to `want`.
    let count_off = |step: f64| (span_ms / step - f64::from(want)).abs();
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| (m * mag).max(1.0))
        .min_by(|a, b| count_off(*a).total_cmp(&count_off(*b)))
        .unwrap_or(1.0);
    let step_ms = step.round() as u64;
    let first = (t0 as f64 / 1e6 / step).ceil() as u64 * step_ms;
    (0..)
        .map(|i| first + i * step_ms)
        .take_while(|t| t * 1_000_000 <= t1)
        .collect()
}

/// Draws the timeline with lanes from the history alone.
pub fn svg(history: &[Event], witness: &[u64]) -> String {
    svg_with_lanes(history, witness, &lanes(history, &[]))
}

/// The drawing's frame: time scale and lanes.
struct Frame<'a> {
    t0: u64,
    t1: u64,
    lane_of: BTreeMap<&'a str, usize>,
    witness: &'a [u64],
}

impl Frame<'_> {
    fn x(&self, t: u64) -> f64 {
        let span = (self.t1 - self.t0).max(1) as f64;
        LEFT + (t.clamp(self.t0, self.t1) - self.t0) as f64 / span * (WIDTH - LEFT - RIGHT)
    }

    fn y(lane: usize) -> f64 {
        TOP + lane as f64 * LANE
    }

    fn lane(&self, node: &str) -> Option<usize> {
        self.lane_of.get(node).copied()
    }

    fn is_witness(&self, i: u64) -> bool {
        self.witness.contains(&i)
    }
}

/// Draws the timeline. `witness` are event indexes to highlight; `lanes` the lanes, in
/// order (see [`lanes`]).
pub fn svg_with_lanes(history: &[Event], witness: &[u64], lanes: &[String]) -> String {
    let (t0, t1) = window(history, witness);
    let frame = Frame {
        t0,
        t1,
        lane_of: lanes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect(),
        witness,
    };
    let height = TOP + lanes.len() as f64 * LANE + 22.0;
    let mut labels = Labels::new(WIDTH, height);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="{FONT}">"#
    );
    s.push_str(
        r##"<defs><pattern id="hatch" width="6" height="6" patternTransform="rotate(45)" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#eee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>"##,
    );
    for (i, name) in lanes.iter().enumerate() {
        let y = Frame::y(i);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#eee"/>"##,
            y + LANE,
            WIDTH - RIGHT,
            y + LANE
        );
        labels.place_shrinking(name, (4.0, y + LANE / 2.0 + 4.0), "start", FONT, "#333");
    }
    for t in ticks_ms(t0, t1, 6) {
        let x = frame.x(t * 1_000_000);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#ddd"/>"##,
            TOP - 4.0,
            height - 18.0
        );
        let text = format!("{t} ms");
        labels.place(&text, &[(x, height - 6.0)], "middle", FONT, "#666");
    }
    draw_intervals(&mut s, &mut labels, history, &frame);
    draw_points(&mut s, &mut labels, history, &frame);
    s.push_str(&labels.finish());
    s.push_str("</svg>");
    s
}

/// A horizontal bar in a lane: a critical section (full height), a pause (lower band,
/// hatched) or a downtime (lower band, grey).
#[derive(Clone, Copy, PartialEq)]
enum BarKind {
    Cs,
    Pause,
    Down,
}

struct Bar<'a> {
    lane: usize,
    from: u64,
    to: u64,
    kind: BarKind,
    witness: bool,
    label: &'a str,
}

fn draw_bar(s: &mut String, labels: &mut Labels, b: &Bar, f: &Frame) {
    let (x0, x1) = (f.x(b.from), f.x(b.to));
    if x1 - x0 < 0.5 && b.to < f.t0 {
        return;
    }
    let y = Frame::y(b.lane);
    let (top, h, fill) = match b.kind {
        BarKind::Pause => (LANE / 2.0, LANE / 2.0 - 3.0, "url(#hatch)"),
        BarKind::Down => (LANE / 2.0, LANE / 2.0 - 3.0, "#bbb"),
        BarKind::Cs => (5.0, LANE - 10.0, "#8ecae6"),
    };
    let stroke = if b.witness {
        r##" stroke="#c00" stroke-width="2""##
    } else {
        ""
    };
    let _ = write!(
        s,
        r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"{stroke}><title>{}</title></rect>"#,
        y + top,
        (x1 - x0).max(1.0),
        escape(b.label)
    );
    let room = x1 - x0 - 6.0;
    let text = match b.kind {
        BarKind::Cs => b.label.to_string(),
        BarKind::Pause => "paused".to_string(),
        BarKind::Down => "down".to_string(),
    };
    if text_width(text.chars().count(), 10.0) <= room {
        let ty = if b.kind == BarKind::Cs {
            y + 13.0
        } else {
            y + LANE - 5.0
        };
        labels.place(&text, &[(x0 + 3.0, ty)], "start", 10.0, "#123");
    }
}

/// What the chart body draws from the history's interpretation (critical sections, the
/// lock key's holders, downtimes) and from its fault events (pauses, partitions).
enum Piece<'a> {
    Key(&'a KeyHold),
    Cs(&'a Interval),
    Down(&'a Downtime),
    /// A partition and the heal that ended it.
    Cut(&'a Event, Option<&'a Event>),
    /// A pause and the resume that ended it.
    Pause(&'a Event, Option<&'a Event>),
}

/// Where a piece comes in the drawing: pieces that ended in the order of the event that
/// ended them, then those still open at the end, by kind and by name. The order decides
/// which label gets a contested spot, so it is fixed.
type Order<'a> = (u64, u8, &'a str);

fn order(closed_by: Option<u64>, kind: u8, name: &str) -> Order<'_> {
    (closed_by.unwrap_or(u64::MAX), kind, name)
}

/// Pauses and partitions, with the event that ended each (a crash ends a pause undrawn).
fn fault_pieces(history: &[Event]) -> Vec<(Order<'_>, Piece<'_>)> {
    let mut pieces = vec![];
    let mut pause: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut cuts: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in history {
        let detail = e.detail.as_deref().unwrap_or_default();
        match e.op {
            Op::Crash => {
                pause.remove(target(e));
            }
            Op::Pause => {
                pause.insert(target(e), e);
            }
            Op::Resume => {
                if let Some(p) = pause.remove(target(e)) {
                    pieces.push((order(Some(e.index), 0, ""), Piece::Pause(p, Some(e))));
                }
            }
            Op::Partition => {
                cuts.insert(detail, e);
            }
            Op::Heal => {
                if let Some(p) = cuts.remove(detail) {
                    pieces.push((order(Some(e.index), 2, ""), Piece::Cut(p, Some(e))));
                }
            }
            _ => {}
        }
    }
    let open_pauses = pause
        .into_iter()
        .map(|(n, p)| (order(None, 3, n), Piece::Pause(p, None)));
    let open_cuts = cuts
        .into_iter()
        .map(|(d, p)| (order(None, 2, d), Piece::Cut(p, None)));
    pieces.extend(open_pauses.chain(open_cuts));
    pieces
}

fn draw_cs(s: &mut String, labels: &mut Labels, f: &Frame, i: &Interval) {
    let Some(lane) = f.lane(&i.node) else {
        return;
    };
    let label = i.grant.clone() + &i.token.map_or(String::new(), |t| format!(" token {t}"));
    let (from, to) = i.held_ns();
    let bar = Bar {
        lane,
        from,
        to: if i.open_at_end { f.t1 } else { to },
        kind: BarKind::Cs,
        witness: f.is_witness(i.enter_event) || i.closed_by.is_some_and(|e| f.is_witness(e)),
        label: &label,
    };
    if bar.to >= f.t0 && bar.from <= f.t1 {
        draw_bar(s, labels, &bar, f);
    }
}

fn band(s: &mut String, f: &Frame, kind: BarKind, node: &str, from: u64, to: u64, title: &str) {
    let Some(lane) = f.lane(node) else { return };
    if to < f.t0 || from > f.t1 {
        return;
    }
    let bar = Bar {
        lane,
        from,
        to,
        kind,
        witness: false,
        label: title,
    };
    // Bands carry no text of their own: their tooltips say what they are.
    let mut none = Labels::new(0.0, 0.0);
    draw_bar(s, &mut none, &bar, f);
}

/// A colour per client, so one holder reads the same on every server.
fn holder_colour(holder: &str) -> &'static str {
    const PALETTE: [&str; 6] = [
        "#1d3557", "#e63946", "#2a9d8f", "#8338ec", "#fb8500", "#6a994e",
    ];
    PALETTE[client_no(holder).unwrap_or(0) as usize % PALETTE.len()]
}

/// The band of who holds the lock key on a server, from `from` to `to`.
fn key_band(
    s: &mut String,
    labels: &mut Labels,
    f: &Frame,
    node: &str,
    (from, to): (u64, u64),
    holder: &str,
) {
    let Some(lane) = f.lane(node) else { return };
    if to < f.t0 || from > f.t1 {
        return;
    }
    let (x0, x1) = (f.x(from), f.x(to));
    let y = Frame::y(lane);
    let _ = write!(
        s,
        r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="5" fill="{}"><title>the lock key holds {} on {node} from {:.0} ms</title></rect>"#,
        y + 3.0,
        (x1 - x0).max(1.0),
        holder_colour(holder),
        escape(holder),
        from as f64 / 1e6
    );
    if x1 - x0 > 24.0 {
        labels.place(
            holder,
            &[(x0 + 2.0, y + 19.0)],
            "start",
            9.0,
            holder_colour(holder),
        );
    }
}

/// Draws a piece: bars and key bands into `s`, pause and downtime bands into `bands` (drawn
/// over the bars, after them).
fn draw_piece(s: &mut String, bands: &mut String, labels: &mut Labels, f: &Frame, p: &Piece) {
    match *p {
        Piece::Key(k) => {
            let span = (k.from_ns, k.to_ns.unwrap_or(f.t1));
            key_band(s, labels, f, &k.server, span, &k.holder);
        }
        Piece::Cs(i) => draw_cs(s, labels, f, i),
        Piece::Cut(p, heal) => partition_band(s, f, p, heal.map_or(f.t1, |h| h.time_ns)),
        Piece::Down(d) => {
            let title = match d.to_ns {
                Some(_) => format!("{} down from {:.0} ms", d.node, d.from_ns as f64 / 1e6),
                None => "down".into(),
            };
            let to = d.to_ns.unwrap_or(f.t1);
            band(bands, f, BarKind::Down, &d.node, d.from_ns, to, &title);
        }
        Piece::Pause(p, resume) => {
            let node = target(p);
            let (to, title) = match resume {
                Some(r) => (
                    r.time_ns,
                    format!("{node} paused from {:.0} ms", p.time_ms()),
                ),
                None => {
                    let until = p.time_ns + p.value.unwrap_or(0).max(0) as u64 * 1_000_000;
                    (until.min(f.t1), "paused".into())
                }
            };
            band(bands, f, BarKind::Pause, node, p.time_ns, to, &title);
        }
    }
}

/// Draws critical sections, key holders, downtimes, pauses and partitions. The first three
/// come from the history's interpretation, the one the checker's verdict rests on.
fn draw_intervals(s: &mut String, labels: &mut Labels, history: &[Event], f: &Frame) {
    let it = interpret(history);
    let mut pieces = fault_pieces(history);
    for k in &it.key_holds {
        pieces.push((order(k.closed_by, 0, &k.server), Piece::Key(k)));
    }
    for i in &it.sections {
        pieces.push((order(i.closed_by, 1, &i.node), Piece::Cs(i)));
    }
    for d in &it.downtimes {
        pieces.push((order(d.closed_by, 4, &d.node), Piece::Down(d)));
    }
    pieces.sort_by(|a, b| a.0.cmp(&b.0));
    let mut bands = String::new();
    for (_, piece) in &pieces {
        draw_piece(s, &mut bands, labels, f, piece);
    }
    s.push_str(&bands);
}

fn partition_band(s: &mut String, f: &Frame, p: &Event, end: u64) {
    if end < f.t0 || p.time_ns > f.t1 {
        return;
    }
    let (x0, x1) = (f.x(p.time_ns), f.x(end));
    let _ = write!(
        s,
        r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="6" fill="#f4a261"><title>partition {}</title></rect>"##,
        TOP - 12.0,
        (x1 - x0).max(1.0),
        escape(p.detail.as_deref().unwrap_or(""))
    );
}

/// Per node, the last fault before the window that still acts inside it: a clock change
/// (clocks stay off), or a crash shortly before (what the node lost shapes what follows).
fn faults_before_window<'a>(history: &'a [Event], f: &Frame) -> BTreeMap<&'a str, &'a Event> {
    let mut last = BTreeMap::new();
    let recent = f.t0.saturating_sub(LOOKBACK_NS);
    for e in history.iter().take_while(|e| e.time_ns < f.t0) {
        let acts = match e.op {
            Op::ClockJump | Op::ClockDrift => true,
            Op::Crash => e.time_ns >= recent,
            _ => false,
        };
        if acts {
            last.insert(e.target.as_deref().unwrap_or(&e.node), e);
        }
    }
    last
}

/// The short text next to a point mark, if it has one (a fault's comes from its kind).
fn point_text(e: &Event) -> Option<String> {
    if let Some(d) = fault::drawing(&e.op) {
        return (d.label)(e);
    }
    match e.op {
        Op::ResourceAccept => e.value.map(|v| format!("={v}")),
        Op::Note | Op::Expire | Op::ResourceReject => None,
        _ if is_protocol_event(e) => e.name.clone().or_else(|| e.detail.clone()),
        _ => None,
    }
}

/// Whether an event is something a protocol did inside (a note, or an event kind this
/// drawing does not know, such as newer protocol events): drawn as a small mark.
fn is_protocol_event(e: &Event) -> bool {
    key_note(e).is_none()
        && !matches!(
            e.op,
            Op::Acquire
                | Op::Release
                | Op::Extend
                | Op::CsEnter
                | Op::CsExit
                | Op::Read
                | Op::Write
                | Op::RunEnd
                | Op::Pause
                | Op::Resume
                | Op::Partition
                | Op::Heal
                | Op::Loss
        )
        && !e.op.is_fault()
        && !matches!(e.op, Op::ResourceAccept | Op::ResourceReject | Op::Expire)
}

fn mark(e: &Event, cx: f64, cy: f64, witness: bool) -> String {
    let title = escape(&e.describe());
    if let Some(d) = fault::drawing(&e.op) {
        return fault_mark(d, cx, cy, &title);
    }
    match e.op {
        Op::ResourceAccept => format!(
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="4" fill="#2a9d8f"><title>{title}</title></circle>"##
        ),
        Op::ResourceReject => format!(
            r##"<path d="M{:.1},{:.1} l8,8 m0,-8 l-8,8" stroke="#c00" stroke-width="2"><title>{title}</title></path>"##,
            cx - 4.0,
            cy - 4.0
        ),
        Op::Expire => format!(
            r##"<path d="M{cx:.1},{:.1} l4,4 l-4,4 l-4,-4 z" fill="#6d597a"><title>{title}</title></path>"##,
            cy - 4.0
        ),
        Op::Write if witness => format!(
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="3" fill="#333"><title>{title}</title></circle>"##
        ),
        _ if is_protocol_event(e) => format!(
            r##"<rect x="{:.1}" y="{:.1}" width="6" height="6" fill="#577590"><title>{title}</title></rect>"##,
            cx - 3.0,
            cy + 5.0
        ),
        _ => String::new(),
    }
}

/// A fault event's mark: its kind's glyph for an instant; spans are drawn as bands.
fn fault_mark(d: &Drawing, cx: f64, cy: f64, title: &str) -> String {
    let Shape::Point(glyph) = d.shape else {
        return String::new();
    };
    match glyph {
        Glyph::Cross => format!(
            r##"<path d="M{:.1},{:.1} l10,10 m0,-10 l-10,10" stroke="#c00" stroke-width="3"><title>{title}</title></path>"##,
            cx - 5.0,
            cy - 5.0
        ),
        Glyph::Ring => format!(
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="none" stroke="#2a9d8f" stroke-width="2"><title>{title}</title></circle>"##
        ),
        Glyph::Triangle => format!(
            r##"<path d="M{cx:.1},{:.1} l5,9 l-10,0 z" fill="#e76f51"><title>{title}</title></path>"##,
            cy - 9.0
        ),
        Glyph::Zigzag => format!(
            r##"<path d="M{:.1},{:.1} h8 l-8,10 h8 z" fill="#e76f51"><title>{title}</title></path>"##,
            cx - 4.0,
            cy - 5.0
        ),
    }
}

/// Where a point's text may go: right above, left above, right below, left below.
fn spots(cx: f64, lane_y: f64) -> [(f64, f64, &'static str); 4] {
    [
        (cx + 6.0, lane_y + 11.0, "start"),
        (cx - 6.0, lane_y + 11.0, "end"),
        (cx + 6.0, lane_y + LANE - 3.0, "start"),
        (cx - 6.0, lane_y + LANE - 3.0, "end"),
    ]
}

fn place_point_text(labels: &mut Labels, text: &str, cx: f64, lane_y: f64, fill: &str) {
    for (x, y, anchor) in spots(cx, lane_y) {
        if labels.place(text, &[(x, y)], anchor, 10.0, fill) {
            return;
        }
    }
}

fn draw_points(s: &mut String, labels: &mut Labels, history: &[Event], f: &Frame) {
    // A clock still off from before the window: drawn at its left edge.
    for (node, e) in faults_before_window(history, f) {
        let text = match e.op {
            Op::Crash => Some("crashed".to_string()),
            _ => point_text(e),
        };
        if let (Some(lane), Some(text)) = (f.lane(node), text) {
            let y = Frame::y(lane);
            let _ = write!(
                s,
                r##"<path d="M{LEFT},{:.1} l6,-5 l0,10 z" fill="#e76f51"><title>{}</title></path>"##,
                y + LANE / 2.0,
                escape(&e.describe())
            );
            let text = format!("{text} at {:.0} ms", e.time_ms());
            place_point_text(labels, &text, LEFT + 2.0, y, "#e76f51");
        }
    }
    for e in history {
        if e.time_ns < f.t0 || e.time_ns > f.t1 {
            continue;
        }
        let Some(lane) = f.lane(e.target.as_deref().unwrap_or(&e.node)) else {
            continue;
        };
        let (cx, y) = (f.x(e.time_ns), Frame::y(lane));
        let witness = f.is_witness(e.index);
        s.push_str(&mark(e, cx, y + LANE / 2.0, witness));
        if let Some(text) = point_text(e) {
            let fill = if e.op == Op::ResourceAccept {
                "#1d6f66"
            } else {
                "#9c3d23"
            };
            place_point_text(labels, &text, cx, y, fill);
        }
        if witness {
            let _ = write!(
                s,
                r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="3,2"/>"##,
                y + 2.0,
                y + LANE - 2.0,
            );
            let text = format!("#{}", e.index);
            place_point_text(labels, &text, cx, y, "#c00");
        }
    }
}

fn short(e: &Event) -> String {
    match fault::drawing(&e.op) {
        Some(d) => (d.caption)(e),
        None => format!("{} at {:.0} ms", e.describe(), e.time_ms()),
    }
}

/// The faults that struck `nodes` (or everyone, for partitions and loss) in `[from, to]`.
fn faults_between(history: &[Event], from: u64, to: u64) -> Vec<&Event> {
    history
        .iter()
        .filter(|e| e.time_ns >= from && e.time_ns <= to)
        .filter(|e| e.op.is_fault() && !matches!(e.op, Op::Resume | Op::Heal | Op::Restart))
        .collect()
}

fn cs_enter_before<'a>(history: &'a [Event], node: &str, before: usize) -> Option<&'a Event> {
    history[..before.min(history.len())]
        .iter()
        .rev()
        .find(|e| e.node == node && e.op == Op::CsEnter)
}

/// How far before the first witness a caption looks for a cause, in ns.
const LOOKBACK_NS: u64 = 3_000_000_000;

/// One line saying what happened in a run, from its history and the drawn violation (kind
/// and witness events): who was inside when, what the resource did, and the faults that
/// struck in between.
pub fn caption(history: &[Event], kind: &str, witness: &[u64]) -> String {
    let ev = |i: &u64| history.get(*i as usize);
    let events: Vec<&Event> = witness.iter().filter_map(ev).collect();
    let found = match kind {
        "mutual_exclusion" => overlap_caption(&events),
        "fencing" | "lost_update" if events.len() >= 2 => {
            Some(write_caption(history, kind, events[0], events[1]))
        }
        "" => return "No violation in this run.".into(),
        _ => None,
    };
    let Some((what, from, to)) = found else {
        return String::new();
    };
    let mut faults = faults_between(history, from, to);
    if faults.is_empty() {
        // Nothing struck in between: the cause may have come shortly before (a clock jump
        // that made a key expire early, a crash that lost it).
        let before = faults_between(history, from.saturating_sub(LOOKBACK_NS), from);
        faults.extend(before.last());
    }
    let mut line = what;
    if !faults.is_empty() {
        let shown: Vec<String> = faults.iter().take(3).map(|e| short(e)).collect();
        let more = faults.len().saturating_sub(3);
        let _ = write!(line, ", after {}", shown.join("; "));
        if more > 0 {
            let _ = write!(line, " (and {more} more faults)");
        }
    }
    line.push('.');
    line
}

/// Two clients inside at once: what happened, and the span to look for its cause in.
fn overlap_caption(events: &[&Event]) -> Option<(String, u64, u64)> {
    let enters: Vec<&&Event> = events.iter().filter(|e| e.op == Op::CsEnter).collect();
    let [a, b] = enters[..] else {
        return None;
    };
    let what = format!(
        "{} entered its critical section at {:.0} ms while {} (inside since {:.0} ms, grant {}) \
         had not left it",
        b.node,
        b.time_ms(),
        a.node,
        a.time_ms(),
        a.grant.as_deref().unwrap_or("?")
    );
    Some((what, a.time_ns, b.time_ns))
}

/// A harmful write (`a` the earlier accepted one, `b` the later): what happened, and the
/// span to look for its cause in.
fn write_caption(history: &[Event], kind: &str, a: &Event, b: &Event) -> (String, u64, u64) {
    let who = |e: &Event| e.grant.clone().unwrap_or_else(|| e.node.clone());
    let (b_token, a_token) = (b.token.unwrap_or(0), a.token.unwrap_or(0));
    let (b_ms, a_ms) = (b.time_ms(), a.time_ms());
    let what = if kind == "fencing" && a.token == b.token {
        format!(
            "the resource accepted token {b_token} from {} at {b_ms:.0} ms, a token {} had \
             already used at {a_ms:.0} ms: the token was reused",
            who(b),
            who(a),
        )
    } else if kind == "fencing" {
        format!(
            "the resource accepted token {b_token} from {} at {b_ms:.0} ms after token \
             {a_token} from {} at {a_ms:.0} ms: a stale write",
            who(b),
            who(a),
        )
    } else {
        format!(
            "{} wrote {} at {b_ms:.0} ms, the value {} had written at {a_ms:.0} ms: one \
             increment is lost",
            who(b),
            b.value.unwrap_or(0),
            who(a),
        )
    };
    // The cause lies between the earlier writer's entry and the later write.
    let grant_node = b.grant.as_deref().and_then(|g| g.split('#').next());
    let start = grant_node
        .and_then(|n| cs_enter_before(history, n, b.index as usize))
        .map_or(a.time_ns, |e| e.time_ns.min(a.time_ns));
    (what, start, b.time_ns)
}
