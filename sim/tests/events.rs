//! Protocol events: a history op with a name, written and read as JSON Lines, ignored by the
//! checker.

use locksim_sim::checker::check;
use locksim_sim::history::{read_jsonl, write_jsonl, Event, Kind, Op};

fn at(index: u64, ms: u64, event: Event) -> Event {
    Event {
        index,
        time_ns: ms * 1_000_000,
        ..event
    }
}

/// Two clients whose critical sections overlap, with or without protocol events between.
fn history(with_events: bool) -> Vec<Event> {
    let mut h = vec![
        (0, Event::new("c1", Kind::Ok, Op::CsEnter).grant("c1#1")),
        (10, Event::new("c2", Kind::Ok, Op::CsEnter).grant("c2#1")),
        (20, Event::new("c1", Kind::Ok, Op::CsExit).grant("c1#1")),
        (30, Event::new("c2", Kind::Ok, Op::CsExit).grant("c2#1")),
    ];
    if with_events {
        let failover = Event::new("sentinel1", Kind::Info, Op::Event)
            .name("failover")
            .target("redis2")
            .detail("+switch-master redis1 -> redis2");
        h.insert(1, (5, failover));
        h.insert(
            3,
            (
                15,
                Event::new("redis1", Kind::Info, Op::Event).name("demoted"),
            ),
        );
    }
    h.into_iter()
        .enumerate()
        .map(|(i, (ms, e))| at(i as u64, ms, e))
        .collect()
}

#[test]
fn the_checker_ignores_protocol_events() {
    let (plain, with) = (check(&history(false)), check(&history(true)));
    assert_eq!(plain.verdict, with.verdict);
    assert_eq!(plain.violations.len(), 1);
    assert_eq!(with.violations.len(), 1);
    assert_eq!(plain.liveness, with.liveness);
}

#[test]
fn events_round_trip_through_json_lines_with_their_name() {
    let h = history(true);
    let mut out = Vec::new();
    write_jsonl(&h, &mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.contains(r#""op":"event""#) && text.contains(r#""name":"failover""#));
    assert_eq!(read_jsonl("h.jsonl", &out[..]).unwrap(), h);
    assert!(
        h[1].describe().contains("event failover target=redis2"),
        "{}",
        h[1].describe()
    );
}
