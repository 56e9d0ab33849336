//! The tests of `src/fault/pause_periodic.rs`.

use locksim_sim::fault::pause_periodic::*;
use locksim_sim::fault::{Fault, FaultProfile, Targets};
use locksim_sim::nodes::Role;
use locksim_sim::roles::ROLE_SERVERS;
use locksim_sim::world::World;
use locksim_sim::{simulate, Event, Op, SimSpec};

fn run(node: &str) -> Vec<Event> {
    run_fault(PausePeriodic {
        node: node.into(),
        targets: vec![],
        at_ms: 100,
        until_ms: 1_000,
        on_ms: 100,
        off_ms: 200,
    })
}

/// Runs `fault` on servers s1, s2 and client c1; `@leader` is s2 (and nobody after
/// 1500 ms).
fn run_fault(fault: PausePeriodic) -> Vec<Event> {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 2_000,
        faults: vec![Fault::PausePeriodic(fault)],
        ..SimSpec::default()
    };
    let outcome = simulate(&spec, |world| {
        for name in ["s1", "s2", "c1"] {
            let role = if name == "c1" {
                Role::Client
            } else {
                Role::Server
            };
            world.add_node(name, role, |_| async {});
        }
        let leader = std::sync::Arc::new(|w: &World| {
            (w.now_ns() < 1_500_000_000).then(|| w.node("s2").unwrap())
        });
        world.answer_role("@leader", leader);
    });
    outcome.unwrap().history
}

#[test]
fn each_pause_picks_its_target_and_resolves_a_role_when_it_starts() {
    let h = run_fault(PausePeriodic {
        node: String::new(),
        targets: vec!["@leader".into(), ROLE_SERVERS.into()],
        at_ms: 100,
        until_ms: 1_900,
        on_ms: 50,
        off_ms: 50,
    });
    let paused = pauses(&h, Op::Pause);
    let mut by_start: std::collections::BTreeMap<u64, Vec<&str>> = Default::default();
    for (node, t) in &paused {
        by_start.entry(*t).or_default().push(node);
    }
    let (mut leader_only, mut all) = (0, 0);
    for (t, nodes) in &by_start {
        assert!(
            *t < 1_500,
            "nobody leads after 1500 ms: only a group is paused"
        );
        match nodes.as_slice() {
            ["s2"] => leader_only += 1,
            ["s1", "s2"] => all += 1,
            other => panic!("a pause at {t} ms hit {other:?}"),
        }
    }
    assert!(
        leader_only > 0 && all > 0,
        "{leader_only} leader, {all} all"
    );
    let skipped = h.iter().filter(|e| e.op == Op::Note);
    let no_leader = |e: &&Event| {
        e.detail
            .as_deref()
            .is_some_and(|d| d.contains("no @leader"))
    };
    let skipped = skipped.filter(no_leader).count();
    // Cycles start at 100, 200, ..., 1800 ms: each pauses or is skipped.
    assert_eq!(by_start.len() + skipped, 18, "{skipped} skipped");
    assert!(skipped > 0);
}

fn pauses(history: &[Event], op: Op) -> Vec<(&str, u64)> {
    let events = history.iter().filter(|e| e.op == op);
    events
        .map(|e| (e.target.as_deref().unwrap(), e.time_ns / 1_000_000))
        .collect()
}

#[test]
fn a_group_is_paused_and_resumed_together_every_cycle() {
    let h = run(ROLE_SERVERS);
    let starts = [100, 400, 700];
    let expected: Vec<(&str, u64)> = starts
        .iter()
        .flat_map(|t| [("s1", *t), ("s2", *t)])
        .collect();
    assert_eq!(pauses(&h, Op::Pause), expected);
    let resumed: Vec<(&str, u64)> = expected.iter().map(|(n, t)| (*n, t + 100)).collect();
    assert_eq!(pauses(&h, Op::Resume), resumed);
}

#[test]
fn a_node_is_paused_alone() {
    let h = run("c1");
    assert_eq!(
        pauses(&h, Op::Pause),
        [("c1", 100), ("c1", 400), ("c1", 700)]
    );
}

#[test]
fn validation_takes_groups_and_refuses_empty_cycles() {
    let f = |node: &str, off_ms| {
        Fault::PausePeriodic(PausePeriodic {
            node: node.into(),
            targets: vec![],
            at_ms: 0,
            until_ms: 10,
            on_ms: 1,
            off_ms,
        })
    };
    let known = ["s1".to_string()];
    assert!(f("@servers", 1).validate(&known).is_ok());
    assert!(f("s9", 1)
        .validate(&known)
        .unwrap_err()
        .contains("unknown node"));
    assert!(f("s1", 0)
        .validate(&known)
        .unwrap_err()
        .contains("positive"));
    let mut both = f("s1", 1);
    if let Fault::PausePeriodic(p) = &mut both {
        p.targets = vec!["@servers".into()];
    }
    assert!(both.validate(&known).unwrap_err().contains("exactly one"));
    let mut unknown = f("", 1);
    if let Fault::PausePeriodic(p) = &mut unknown {
        p.targets = vec!["@servers".into(), "s9".into()];
    }
    assert!(unknown
        .validate(&known)
        .unwrap_err()
        .contains("unknown node"));
}

#[test]
fn the_profile_draws_it_within_its_keys_and_only_when_enabled() {
    let targets = Targets {
        servers: vec!["s1".into(), "s2".into()],
        clients: vec!["c1".into()],
    };
    let p: FaultProfile = serde_json::from_str(
        r#"{"pause_periodic_probability": 0.5, "pause_periodic_cycles_max": 3}"#,
    )
    .unwrap();
    let faults = p.generate(4, 10_000, &targets);
    assert!(!faults.is_empty());
    for fault in &faults {
        let Fault::PausePeriodic(f) = fault else {
            panic!("only periodic pauses: {fault:?}")
        };
        assert!(
            f.node.starts_with('s') && (1..=500).contains(&f.on_ms),
            "{f:?}"
        );
        let cycles = (f.until_ms - f.at_ms).div_ceil(f.on_ms + f.off_ms);
        assert!((1..=3).contains(&cycles), "{f:?}");
        fault.validate(&["s1".into(), "s2".into()]).unwrap();
    }
    let off: FaultProfile = serde_json::from_str(r#"{"pause_probability": 0.5}"#).unwrap();
    let pauses_only = off.generate(4, 10_000, &targets);
    assert!(pauses_only.iter().all(|f| matches!(f, Fault::Pause(_))));
}
