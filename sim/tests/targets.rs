//! Fault targets chosen when the fault fires: a role resolved by whoever registered it.

use locksim_sim::history::{Event, Op};
use locksim_sim::{simulate, Fault, Role, SimSpec};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn pause(node: &str, at_ms: u64) -> Fault {
    Fault::Pause(locksim_sim::fault::Pause {
        node: node.into(),
        at_ms: Some(at_ms),
        point: None,
        occurrence: 1,
        duration_ms: 10,
    })
}

/// Nodes `a` and `b`; the role `@leader` is `a` until 100 ms, then `b`, and nobody from
/// 200 ms on (the resolver reads a value the test's "protocol" changes; `usize::MAX` =
/// nobody).
fn run(faults: Vec<Fault>) -> Vec<Event> {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 300,
        faults,
        ..SimSpec::default()
    };
    simulate(&spec, |world| {
        let leader = Arc::new(AtomicUsize::new(0));
        let a = world.add_node("a", Role::Server, |_| async {});
        let b = world.add_node("b", Role::Server, |_| async {});
        leader.store(a, Ordering::Relaxed);
        let view = leader.clone();
        world.answer_role(
            "@leader",
            Arc::new(move |_| Some(view.load(Ordering::Relaxed)).filter(|i| *i != usize::MAX)),
        );
        world.spawn_on_nemesis(async move {
            madsim::time::sleep(std::time::Duration::from_millis(100)).await;
            leader.store(b, Ordering::Relaxed);
            madsim::time::sleep(std::time::Duration::from_millis(100)).await;
            leader.store(usize::MAX, Ordering::Relaxed);
        });
    })
    .unwrap()
    .history
}

#[test]
fn a_role_is_resolved_when_the_fault_fires() {
    let h = run(vec![
        pause("@leader", 50),
        pause("@leader", 150),
        pause("@leader", 250),
    ]);
    let paused: Vec<&str> = h
        .iter()
        .filter(|e| e.op == Op::Pause)
        .map(|e| e.target.as_deref().unwrap())
        .collect();
    assert_eq!(paused, ["a", "b"]);
    assert!(h
        .iter()
        .filter(|e| e.op == Op::Pause)
        .all(|e| e.detail.as_deref() == Some("scheduled on @leader")));
    let skipped: Vec<&str> = h
        .iter()
        .filter(|e| e.op == Op::Note && e.node == "nemesis")
        .filter_map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(
        skipped,
        ["skipped pause @leader at 250 ms for 10 ms: no @leader now"]
    );
}

#[test]
fn a_role_nobody_answers_is_skipped() {
    let h = run(vec![pause("@primary", 50)]);
    assert!(!h.iter().any(|e| e.op == Op::Pause));
    assert!(h.iter().any(|e| e.detail.as_deref()
        == Some("skipped pause @primary at 50 ms for 10 ms: no @primary now")));
}
