//! Histories from real systems: boundaries known only within a window (a clock error bound,
//! or an invoke before the boundary). Violations only where sections certainly overlap,
//! `unknown` where they may; and the overlap counts against a brute-force count.

use locksim_check::history::{Event, Kind, Op};
use locksim_check::{check, Property, Verdict};
use proptest::prelude::*;

/// Makes an event at `time_ns`, optionally on a local clock with this error bound.
fn ev(node: &str, kind: Kind, op: Op, grant: &str, time_ns: u64, error_ns: u64) -> Event {
    let mut e = Event::new(node, kind, op).grant(grant);
    e.time_ns = time_ns;
    e.clock_error_ns = (error_ns > 0).then_some(error_ns);
    e
}

fn indexed(mut h: Vec<Event>) -> Vec<Event> {
    h.sort_by_key(|e| e.time_ns);
    for (i, e) in h.iter_mut().enumerate() {
        e.index = i as u64;
    }
    h
}

fn me(h: &[Event]) -> (Verdict, u64) {
    let r = check(h);
    let p = r.result(Property::MutualExclusion).unwrap();
    (p.verdict, p.violation_count)
}

#[test]
fn clock_error_makes_a_short_overlap_unknown_and_a_long_one_invalid() {
    // c1 in [0, 100 µs), c2 from 90 µs: 10 µs of overlap by the clocks.
    let h = |error_ns| {
        indexed(vec![
            ev("c1", Kind::Ok, Op::CsEnter, "c1#1", 0, error_ns),
            ev("c1", Kind::Ok, Op::CsExit, "c1#1", 100_000, error_ns),
            ev("c2", Kind::Ok, Op::CsEnter, "c2#1", 90_000, error_ns),
            ev("c2", Kind::Ok, Op::CsExit, "c2#1", 200_000, error_ns),
        ])
    };
    assert_eq!(me(&h(0)), (Verdict::Invalid, 1));
    assert_eq!(
        me(&h(4_000)),
        (Verdict::Invalid, 1),
        "±4 µs leaves 2 µs certain"
    );
    assert_eq!(
        me(&h(5_000)),
        (Verdict::Unknown, 0),
        "±5 µs: they may only touch"
    );
    assert_eq!(me(&h(60_000)), (Verdict::Unknown, 0));
}

#[test]
fn invoke_windows_around_boundaries() {
    // c1 starts releasing at 10 ms and is done at 30 ms; c2 is granted at 20 ms.
    let exit_window = indexed(vec![
        ev("c1", Kind::Ok, Op::CsEnter, "c1#1", 0, 0),
        ev("c1", Kind::Invoke, Op::CsExit, "c1#1", 10_000_000, 0),
        ev("c2", Kind::Ok, Op::CsEnter, "c2#1", 20_000_000, 0),
        ev("c1", Kind::Ok, Op::CsExit, "c1#1", 30_000_000, 0),
        ev("c2", Kind::Ok, Op::CsExit, "c2#1", 40_000_000, 0),
    ]);
    let r = check(&exit_window);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Unknown);
    assert!(r.reasons()[&Property::MutualExclusion].contains("between 10.000ms and 30.000ms"));
    // c2 started acquiring at 5 ms, got it at 8 ms, while c1 held it certainly until 10 ms.
    let enter_window = indexed(vec![
        ev("c1", Kind::Ok, Op::CsEnter, "c1#1", 0, 0),
        ev("c2", Kind::Invoke, Op::CsEnter, "c2#1", 5_000_000, 0),
        ev("c2", Kind::Ok, Op::CsEnter, "c2#1", 8_000_000, 0),
        ev("c1", Kind::Ok, Op::CsExit, "c1#1", 10_000_000, 0),
        ev("c2", Kind::Ok, Op::CsExit, "c2#1", 40_000_000, 0),
    ]);
    let r = check(&enter_window);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    assert_eq!(r.violations[0].events, vec![0, 1, 2, 3, 4]);
}

/// One generated critical section of a client, as offsets on its own timeline.
#[derive(Clone, Debug)]
struct Cs {
    gap: u64,
    len: u64,
    enter_invoke: Option<u64>,
    exit_invoke: Option<u64>,
    certain: bool,
    grant: u8,
    error_ns: u64,
}

fn cs() -> impl Strategy<Value = Cs> {
    (
        0..6u64,
        0..8u64,
        prop::option::of(0..4u64),
        prop::option::of(0..4u64),
        prop::bool::weighted(0.8),
        0..6u8,
        prop_oneof![Just(0u64), 0..3u64],
    )
        .prop_map(
            |(gap, len, enter_invoke, exit_invoke, certain, grant, error_ns)| Cs {
                gap,
                len,
                enter_invoke,
                exit_invoke,
                certain,
                grant,
                error_ns,
            },
        )
}

/// A section's windows as the brute force sees them: (enter lo, enter hi, exit lo, exit hi).
type Windows = (u64, u64, u64, u64);

/// Builds the history of `clients`; the last section of a client may stay open (`open`),
/// or be left with only its exit invoked. Returns the history and each section's grant,
/// certainty and windows, `u64::MAX` standing for "the end of the history".
fn build(clients: &[(Vec<Cs>, u8)]) -> (Vec<Event>, Vec<(u8, bool, Windows)>) {
    let (mut h, mut sections) = (vec![], vec![]);
    for (c, (list, open)) in clients.iter().enumerate() {
        let node = format!("c{c}");
        let mut t = 0;
        for (k, s) in list.iter().enumerate() {
            let grant = format!("g{}", s.grant);
            let err = s.error_ns;
            let e = |kind, op, t| ev(&node, kind, op, &grant, t, err);
            t += s.gap;
            let enter_lo = t.saturating_sub(err);
            if let Some(d) = s.enter_invoke {
                h.push(e(Kind::Invoke, Op::CsEnter, t));
                t += d;
            }
            let kind = if s.certain { Kind::Ok } else { Kind::Info };
            h.push(e(kind, Op::CsEnter, t));
            let enter_hi = t + err;
            t += s.len;
            let last = k + 1 == list.len();
            let (exit_lo, exit_hi) = match (last, *open % 3) {
                (true, 1) => (u64::MAX, u64::MAX),
                (true, 2) => {
                    h.push(e(Kind::Invoke, Op::CsExit, t));
                    (t.saturating_sub(err), u64::MAX)
                }
                _ => {
                    let lo = t.saturating_sub(err);
                    if let Some(d) = s.exit_invoke {
                        h.push(e(Kind::Invoke, Op::CsExit, t));
                        t += d;
                    }
                    h.push(e(Kind::Ok, Op::CsExit, t));
                    (lo, t + err)
                }
            };
            sections.push((s.grant, s.certain, (enter_lo, enter_hi, exit_lo, exit_hi)));
        }
    }
    (indexed(h), sections)
}

/// Every pair, compared directly: (certain overlaps, possible overlaps).
fn brute_force(h: &[Event], sections: &[(u8, bool, Windows)]) -> (u64, u64) {
    let end = h.iter().map(|e| e.time_window_ns().1).max().unwrap_or(0);
    // A section not left by the end is inside at the history's last instant too.
    let fix = |t: u64| if t == u64::MAX { end + 1 } else { t };
    let (mut certain, mut possible) = (0, 0);
    for (i, (ga, ca, a)) in sections.iter().enumerate() {
        for (gb, cb, b) in &sections[i + 1..] {
            if ga == gb {
                continue;
            }
            if a.0.max(b.0) < fix(a.3).min(fix(b.3)) {
                possible += 1;
            }
            if *ca && *cb && a.1.max(b.1) < fix(a.2).min(fix(b.2)) {
                certain += 1;
            }
        }
    }
    (certain, possible)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn overlap_counts_match_a_brute_force_count(
        clients in prop::collection::vec((prop::collection::vec(cs(), 0..5), 0..3u8), 1..7)
    ) {
        let (h, sections) = build(&clients);
        let (certain, possible) = brute_force(&h, &sections);
        let r = check(&h);
        let p = r.result(Property::MutualExclusion).unwrap();
        prop_assert_eq!(p.violation_count, certain);
        let witnesses = r.violations.iter().filter(|v| v.kind == Property::MutualExclusion);
        prop_assert_eq!(witnesses.count() as u64, certain.min(5));
        let expected = if certain > 0 {
            Verdict::Invalid
        } else if h.is_empty() {
            // No events: nothing to check, never a clean bill.
            prop_assert_eq!(p.reason.as_deref(), Some("no events: nothing to check"));
            Verdict::Unknown
        } else if possible > 0 {
            Verdict::Unknown
        } else {
            Verdict::Valid
        };
        prop_assert_eq!(p.verdict, expected);
        if expected == Verdict::Unknown && !h.is_empty() {
            let reason = p.reason.as_deref().unwrap_or_default();
            let prefix = format!("{} pair", possible - certain);
            prop_assert!(reason.starts_with(&prefix), "{}", reason);
        }
    }
}

#[test]
fn a_crash_during_an_exit_ends_the_section_no_later_than_the_exit_began() {
    // c1 starts leaving at 10 ms and crashes at 30 ms; c2 enters at 20 ms: c1 may have left.
    let mut crash = ev("nemesis", Kind::Info, Op::Crash, "", 30_000_000, 0);
    crash.grant = None;
    crash.target = Some("c1".into());
    let h = indexed(vec![
        ev("c1", Kind::Ok, Op::CsEnter, "c1#1", 0, 0),
        ev("c1", Kind::Invoke, Op::CsExit, "c1#1", 10_000_000, 0),
        ev("c2", Kind::Ok, Op::CsEnter, "c2#1", 20_000_000, 0),
        crash,
        ev("c2", Kind::Ok, Op::CsExit, "c2#1", 40_000_000, 0),
    ]);
    assert_eq!(me(&h), (Verdict::Unknown, 0));
}
