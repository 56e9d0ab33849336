//! Checking a history recorded by your own system, in your own test suite.
//!
//! Each process of the system under test records its lock steps with its own clock and that
//! clock's error bound (from NTP or chrony, say), and brackets each critical-section
//! boundary it cannot pin to an instant with an `invoke`. `locksim-check` then reports a
//! violation only where two critical sections certainly overlap, and `unknown` where they
//! may. Run it with `cargo run --release -p locksim-check --example own_system`.

use locksim_check::history::{read_jsonl, write_jsonl, History};
use locksim_check::{check, Event, Kind, Op, Property, Verdict};

/// What one process of the system records: events stamped by its local clock.
struct Recorder {
    node: &'static str,
    clock_error_ns: u64,
}

impl Recorder {
    fn record(&self, history: &mut History, local_time_ns: u64, kind: Kind, op: Op, grant: &str) {
        let mut e = Event::new(self.node, kind, op).grant(grant);
        e.index = history.len() as u64;
        e.time_ns = local_time_ns;
        e.clock_error_ns = Some(self.clock_error_ns);
        history.push(e);
    }
}

fn main() {
    let (a, b) = (
        Recorder {
            node: "worker-a",
            clock_error_ns: 2_000_000,
        },
        Recorder {
            node: "worker-b",
            clock_error_ns: 5_000_000,
        },
    );
    let mut h = History::new();
    // worker-a holds the lock from 100 ms to 400 ms by its clock (±2 ms)...
    a.record(&mut h, 100_000_000, Kind::Ok, Op::CsEnter, "a#1");
    // ... worker-b is told it has the lock at 390 ms by its clock (±5 ms) ...
    b.record(&mut h, 390_000_000, Kind::Ok, Op::CsEnter, "b#1");
    // ... and worker-a starts releasing at 395 ms and is done at 400 ms.
    a.record(&mut h, 395_000_000, Kind::Invoke, Op::CsExit, "a#1");
    a.record(&mut h, 400_000_000, Kind::Ok, Op::CsExit, "a#1");
    b.record(&mut h, 600_000_000, Kind::Ok, Op::CsExit, "b#1");

    // Histories travel as JSON Lines; `locksim check FILE` reads the same format.
    let mut file = Vec::new();
    write_jsonl(&h, &mut file).expect("in memory");
    let h = read_jsonl("recorded.jsonl", file.as_slice()).expect("a valid history");

    let report = check(&h);
    let me = report
        .result(Property::MutualExclusion)
        .expect("always decided");
    println!("mutual_exclusion: {}", me.verdict);
    if let Some(reason) = &me.reason {
        println!("  {reason}");
    }
    // 390 ms ± 5 ms may be after 395 ms − 2 ms: the clocks cannot order them.
    assert_eq!(me.verdict, Verdict::Unknown);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_decides_unknown() {
        super::main();
    }
}
