//! The tests of `src/zombie.rs`.

use locksim_check::history::{Event, Kind, Op};
use locksim_check::zombie::*;

fn ev(index: u64, ms: u64, node: &str, kind: Kind, op: Op, grant: &str) -> Event {
    let mut e = Event::new(node, kind, op);
    e.index = index;
    e.time_ns = ms * 1_000_000;
    if !grant.is_empty() {
        e.grant = Some(grant.into());
    }
    e
}

/// c1 enters at 0; c2 enters at 100 (c1 overtaken); c1 then writes at 250 without
/// knowing, or learns at 150 that its lock is lost.
fn story(knows: bool) -> Vec<Event> {
    let mut h = vec![
        ev(0, 0, "c1", Kind::Ok, Op::CsEnter, "c1#1"),
        ev(1, 100, "c2", Kind::Ok, Op::CsEnter, "c2#1"),
        ev(2, 120, "c2", Kind::Ok, Op::CsExit, "c2#1"),
    ];
    if knows {
        let mut note = ev(3, 150, "c1", Kind::Info, Op::Note, "c1#1");
        note.detail = Some("lock lost (expired): work aborted".into());
        h.push(note);
    } else {
        h.push(ev(3, 250, "c1", Kind::Invoke, Op::Write, "c1#1"));
    }
    h.push(ev(4, 300, "c1", Kind::Ok, Op::CsExit, "c1#1"));
    h
}

#[test]
fn a_holder_that_never_knew_is_exposed_until_its_last_write() {
    let w = zombie_windows(&story(false));
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].grant.as_str(), w[0].knew), ("c1#1", false));
    assert_eq!(w[0].ms(), 150.0);
    assert_eq!(max_and_p50_ms(&w), (150.0, 150.0));
}

#[test]
fn a_holder_that_learns_is_exposed_until_it_learns() {
    let w = zombie_windows(&story(true));
    assert_eq!(w.len(), 1);
    assert!(w[0].knew);
    assert_eq!(w[0].ms(), 50.0);
}

#[test]
fn sections_that_do_not_overlap_have_no_window() {
    let h = vec![
        ev(0, 0, "c1", Kind::Ok, Op::CsEnter, "c1#1"),
        ev(1, 10, "c1", Kind::Invoke, Op::Write, "c1#1"),
        ev(2, 20, "c1", Kind::Ok, Op::CsExit, "c1#1"),
        ev(3, 30, "c2", Kind::Ok, Op::CsEnter, "c2#1"),
        ev(4, 40, "c2", Kind::Ok, Op::CsExit, "c2#1"),
    ];
    assert!(zombie_windows(&h).is_empty());
    assert_eq!(max_and_p50_ms(&[]), (0.0, 0.0));
}

/// The window opens at the earliest other grant's enter inside the section, whichever
/// order the sections come in; enters at the section's own bounds do not count.
#[test]
fn the_window_opens_at_the_earliest_enter_inside() {
    let h = vec![
        ev(0, 0, "c1", Kind::Ok, Op::CsEnter, "c1#1"),
        ev(1, 0, "c4", Kind::Ok, Op::CsEnter, "c4#1"),
        ev(2, 5, "c4", Kind::Ok, Op::CsExit, "c4#1"),
        ev(3, 60, "c2", Kind::Ok, Op::CsEnter, "c2#1"),
        ev(4, 70, "c3", Kind::Ok, Op::CsEnter, "c3#1"),
        ev(5, 80, "c2", Kind::Ok, Op::CsExit, "c2#1"),
        ev(6, 90, "c3", Kind::Ok, Op::CsExit, "c3#1"),
        ev(7, 250, "c1", Kind::Invoke, Op::Write, "c1#1"),
        ev(8, 300, "c1", Kind::Ok, Op::CsExit, "c1#1"),
    ];
    let w = zombie_windows(&h);
    let c1: Vec<_> = w.iter().filter(|w| w.grant == "c1#1").collect();
    assert_eq!(c1.len(), 1);
    assert_eq!((c1[0].lost_ns, c1[0].end_ns), (60_000_000, 250_000_000));
    assert!(
        w.iter().all(|w| w.grant != "c4#1"),
        "c4 left before c1 wrote again"
    );
}
