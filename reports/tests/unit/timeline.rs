//! The tests of `src/timeline.rs`.

use locksim_check::interpret::{interpret, key_note};
use locksim_reports::timeline::*;
use locksim_sim::{Event, Kind, Op};

fn ev(index: u64, ms: u64, node: &str, kind: Kind, op: Op) -> Event {
    let mut e = Event::new(node, kind, op);
    e.index = index;
    e.time_ns = ms * 1_000_000;
    e
}

fn gc_pause_history() -> Vec<Event> {
    vec![
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
    ]
}

/// The critical-section bars of a drawing: (y, x from, x to).
fn cs_bars(svg: &str) -> Vec<(f64, f64, f64)> {
    let attr = |tag: &str, name: &str| -> f64 {
        let at = tag.find(&format!(" {name}=\"")).expect("attribute") + name.len() + 3;
        tag[at..].split('"').next().unwrap().parse().unwrap()
    };
    svg.split("<rect")
        .filter(|tag| tag.contains(r##"fill="#8ecae6""##))
        .map(|tag| {
            let x = attr(tag, "x");
            (attr(tag, "y"), x, x + attr(tag, "width"))
        })
        .collect()
}

#[test]
fn the_drawing_shows_the_sections_the_verdict_rests_on() {
    // c2 asks to enter while c1 is inside, and is refused: it never enters. Drawing
    // every `cs_enter` as an entry would show an overlap the checker rightly denies.
    let refused = vec![
        ev(0, 0, "c1", Kind::Ok, Op::CsEnter).grant("c1#1"),
        ev(1, 30, "c2", Kind::Invoke, Op::CsEnter).grant("c2#1"),
        ev(2, 40, "c2", Kind::Fail, Op::CsEnter).grant("c2#1"),
        ev(3, 100, "c1", Kind::Ok, Op::CsExit).grant("c1#1"),
        ev(4, 200, "c2", Kind::Ok, Op::Acquire),
    ];
    for h in [refused, gc_pause_history()] {
        let report = locksim_sim::check(&h);
        let bars = cs_bars(&svg(&h, &[]));
        assert_eq!(bars.len(), interpret(&h).sections.len());
        let overlap = bars.iter().enumerate().any(|(i, a)| {
            bars[i + 1..]
                .iter()
                .any(|b| a.0 != b.0 && a.1.max(b.1) < a.2.min(b.2))
        });
        let invalid = report.property(locksim_sim::Property::MutualExclusion)
            == locksim_sim::Verdict::Invalid;
        assert_eq!(overlap, invalid, "{bars:?}");
    }
}

#[test]
fn draws_lanes_bars_faults_and_witnesses() {
    let h = gc_pause_history();
    let svg = svg(&h, &[0, 2, 4, 6]);
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    assert_eq!(lanes(&h, &[]), vec!["redis", "c1", "c2", "resource"]);
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
fn every_server_gets_a_lane_in_its_order() {
    let h = gc_pause_history();
    let servers: Vec<String> = ["redis1", "redis2", "redis3"].map(String::from).into();
    let l = lanes(&h, &servers);
    assert_eq!(
        l,
        ["redis1", "redis2", "redis3", "redis", "c1", "c2", "resource"]
    );
    let svg = svg_with_lanes(&h, &[0, 2], &l);
    assert!(
        svg.contains(">redis2</text>"),
        "a silent server has its lane"
    );
}

#[test]
fn each_server_shows_who_holds_the_lock_key_there() {
    let h = vec![
        ev(0, 0, "redis1", Kind::Info, Op::Note).detail("key lock = c1:00ab"),
        ev(1, 0, "redis2", Kind::Info, Op::Note).detail("key lock = c2:00cd"),
        ev(2, 50, "c1", Kind::Ok, Op::CsEnter).grant("c1#1"),
        ev(3, 100, "redis1", Kind::Info, Op::Note).detail("key lock deleted"),
        ev(4, 150, "redis2", Kind::Info, Op::Expire).detail("lock"),
        ev(5, 160, "redis2", Kind::Info, Op::Note).detail("key lock = c1:00ef"),
        ev(6, 200, "c1", Kind::Ok, Op::CsExit).grant("c1#1"),
    ];
    let svg = svg(&h, &[]);
    assert!(
        svg.contains("the lock key holds c1 on redis1 from 0 ms"),
        "{svg}"
    );
    assert!(
        svg.contains("the lock key holds c2 on redis2 from 0 ms"),
        "{svg}"
    );
    assert!(
        svg.contains("the lock key holds c1 on redis2 from 160 ms"),
        "{svg}"
    );
    assert_eq!(svg.matches("the lock key holds").count(), 3);
    assert_eq!(key_note(&h[3]), Some(None));
    assert_eq!(key_note(&h[0]), Some(Some("c1".into())));
}

#[test]
fn ticks_are_round() {
    assert_eq!(
        ticks_ms(5_200_000_000, 8_350_000_000, 6),
        vec![5500, 6000, 6500, 7000, 7500, 8000]
    );
    assert_eq!(
        ticks_ms(0, 10_000_000_000, 5),
        vec![0, 2000, 4000, 6000, 8000, 10000]
    );
    assert!(ticks_ms(0, 30_000_000, 6).iter().all(|t| t % 5 == 0));
}

#[test]
fn a_fault_before_the_window_is_drawn_from_its_edge() {
    let mut h = vec![
        ev(0, 100, "nemesis", Kind::Info, Op::Crash).target("redis"),
        ev(1, 200, "nemesis", Kind::Info, Op::ClockJump)
            .target("redis")
            .value(3000),
    ];
    for (i, e) in gc_pause_history().into_iter().enumerate() {
        h.push(Event {
            index: i as u64 + 2,
            time_ns: e.time_ns + 5_000_000_000,
            ..e
        });
    }
    h.push(ev(10, 9_000, "nemesis", Kind::Info, Op::Restart).target("redis"));
    let svg = svg(&h, &[2, 4]);
    assert!(svg.contains("redis down from 100 ms"), "{svg}");
    assert!(svg.contains("+3000 ms at 200 ms"), "{svg}");
    // A crash and restart just before the window: marked at its edge.
    let mut h2 = h.clone();
    h2.insert(
        2,
        ev(11, 4_850, "nemesis", Kind::Info, Op::Crash).target("c2"),
    );
    h2.insert(
        3,
        ev(12, 4_860, "nemesis", Kind::Info, Op::Restart).target("c2"),
    );
    let svg = svg_with_lanes(&h2, &[4, 6], &lanes(&h2, &[]));
    assert!(svg.contains("crashed at 4850 ms"), "{svg}");
}

/// Every `<text>` of an SVG as a box, computed from its attributes with the placer's
/// own width estimate.
fn text_boxes(svg: &str) -> Vec<TextBox> {
    let attr = |tag: &str, name: &str| -> Option<f64> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[at..].split('"').next()?.parse().ok()
    };
    let mut boxes = vec![];
    for part in svg.split("<text").skip(1) {
        let (tag, rest) = part.split_once('>').unwrap();
        let content = rest.split("</text>").next().unwrap();
        let chars = content
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .chars()
            .count();
        let (x, y) = (attr(tag, "x").unwrap(), attr(tag, "y").unwrap());
        let font = attr(tag, "font-size").unwrap_or(FONT);
        let w = text_width(chars, font);
        let x0 = if tag.contains("\"middle\"") {
            x - w / 2.0
        } else if tag.contains("\"end\"") {
            x - w
        } else {
            x
        };
        boxes.push((x0, y - font, x0 + w, y + font * 0.25));
    }
    boxes
}

#[test]
fn no_two_labels_overlap_or_leave_the_chart() {
    // A crowded history: many accepts, jumps and notes within a few ms on few lanes.
    let mut h = vec![ev(0, 0, "c1", Kind::Ok, Op::CsEnter).grant("c1#1")];
    for i in 1..60u64 {
        let (node, op) = match i % 4 {
            0 => ("resource", Op::ResourceAccept),
            1 => ("nemesis", Op::ClockJump),
            2 => ("redis", Op::Note),
            _ => ("c2", Op::CsEnter),
        };
        let mut e = ev(i, 100 + i * 3, node, Kind::Info, op)
            .value(i as i64 * 1000)
            .grant(format!("c2#{i}"))
            .detail("accepting commands again");
        if node == "nemesis" {
            e = e.target("redis");
        }
        h.push(e);
    }
    h.push(ev(60, 400, "c1", Kind::Ok, Op::CsExit).grant("c1#1"));
    let svg = svg(&h, &[0, 3, 7, 60]);
    let boxes = text_boxes(&svg);
    assert!(boxes.len() > 10, "labels were drawn: {}", boxes.len());
    let height = attr_height(&svg);
    for (i, a) in boxes.iter().enumerate() {
        assert!(
            a.0 >= 0.0 && a.2 <= WIDTH && a.1 >= 0.0 && a.3 <= height,
            "{a:?}"
        );
        for b in &boxes[i + 1..] {
            assert!(!intersects(a, b), "{a:?} and {b:?} overlap");
        }
    }
}

fn attr_height(svg: &str) -> f64 {
    let at = svg.find("height=\"").unwrap() + 8;
    svg[at..].split('"').next().unwrap().parse().unwrap()
}

#[test]
fn captions_say_what_happened() {
    let h = gc_pause_history();
    let c = caption(&h, "mutual_exclusion", &[0, 2, 4, 6]);
    assert_eq!(
        c,
        "c2 entered its critical section at 50 ms while c1 (inside since 0 ms, grant c1#1) \
         had not left it, after c1 paused at 10 ms for 100 ms."
    );
    assert_eq!(caption(&h, "", &[]), "No violation in this run.");
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
    assert_eq!(lanes(&h, &[]), vec!["redis2", "sentinel1", "c1"]);
    let svg = svg(&h, &[]);
    assert_eq!(svg.matches(">failover</text>").count(), 1, "{svg}");
}

#[test]
fn escapes_text() {
    assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
}
