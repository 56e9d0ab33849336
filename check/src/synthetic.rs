//! Synthetic histories of known shape, for benchmarks and for testing tools that read
//! histories: `clients` clients, each one acquire → critical section (read, write, the
//! resource's accept) → release, ten events per client.

use crate::history::{Event, History, Kind, Op};

/// How the critical sections lie in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One after another: a healthy lock (every property holds).
    Sequential,
    /// All inside at once: a lock that grants everyone (`n·(n−1)/2` overlapping pairs).
    Simultaneous,
}

/// A history of `clients` critical sections, ten events each.
pub fn history(clients: u64, shape: Shape) -> History {
    let mut h = History::with_capacity(clients as usize * 10);
    let mut push = |time_ns: u64, e: Event| {
        let index = h.len() as u64;
        h.push(Event {
            index,
            time_ns,
            ..e
        });
    };
    match shape {
        Shape::Sequential => {
            for c in 0..clients {
                let t = c * 10_000;
                for (step, e) in client_events(c, c as i64 + 1).into_iter().enumerate() {
                    push(t + step as u64 * 1_000, e);
                }
            }
        }
        Shape::Simultaneous => {
            // Every client takes its step k before any takes step k + 1.
            let steps: Vec<[Event; 10]> = (0..clients).map(|c| client_events(c, 1)).collect();
            for step in 0..10 {
                for (c, events) in steps.iter().enumerate() {
                    push(step * 1_000_000 + c as u64, events[step as usize].clone());
                }
            }
        }
    }
    h
}

/// One client's ten events, writing `value`.
fn client_events(client: u64, value: i64) -> [Event; 10] {
    let node = format!("c{}", client + 1);
    let grant = format!("{node}#1");
    let ev = |kind, op| Event::new(node.as_str(), kind, op).grant(grant.as_str());
    [
        Event::new(node.as_str(), Kind::Invoke, Op::Acquire),
        ev(Kind::Ok, Op::Acquire),
        ev(Kind::Ok, Op::CsEnter),
        ev(Kind::Invoke, Op::Read),
        ev(Kind::Ok, Op::Read).value(value - 1),
        ev(Kind::Invoke, Op::Write).value(value),
        Event::new("resource", Kind::Info, Op::ResourceAccept)
            .grant(grant.as_str())
            .value(value),
        ev(Kind::Ok, Op::Write).value(value),
        ev(Kind::Ok, Op::CsExit),
        ev(Kind::Ok, Op::Release),
    ]
}
