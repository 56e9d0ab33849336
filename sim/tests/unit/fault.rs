//! The tests of `src/fault/mod.rs`.

use locksim_check::history::Op;
use locksim_sim::fault::*;

fn targets() -> Targets {
    Targets {
        servers: vec!["redis".into()],
        clients: vec!["c1".into(), "c2".into()],
    }
}

fn profile(toml_like_json: &str) -> FaultProfile {
    serde_json::from_str(toml_like_json).unwrap()
}

#[test]
fn generation_is_a_function_of_the_seed() {
    let p = profile(
        r#"{"pause_probability": 0.5, "crash_probability": 0.3,
            "clock_jump_probability": 0.2}"#,
    );
    let a = p.generate(7, 10_000, &targets());
    assert_eq!(a, p.generate(7, 10_000, &targets()));
    assert_ne!(a, p.generate(8, 10_000, &targets()));
    assert!(!a.is_empty());
    for f in &a {
        f.validate(&["redis".into(), "c1".into(), "c2".into()])
            .unwrap();
        assert!(f.at_ms().unwrap() < 10_000);
    }
}

#[test]
fn default_targets_follow_roles() {
    let p = profile(r#"{"pause_probability": 1.0, "crash_probability": 1.0}"#);
    for f in p.generate(1, 5_000, &targets()) {
        match f {
            Fault::Pause(f) => assert!(f.node.starts_with('c')),
            Fault::Crash(f) => assert_eq!(f.node, "redis"),
            _ => unreachable!("only pauses and crashes were enabled"),
        }
    }
}

#[test]
fn default_is_an_empty_table() {
    let empty: FaultProfile = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, FaultProfile::default());
    assert!(!FaultProfile::default().is_active());
}

#[test]
fn unknown_and_old_keys_are_refused() {
    let e = serde_json::from_str::<FaultProfile>(r#"{"pause_probabilty": 0.1}"#);
    assert!(e.unwrap_err().to_string().contains("pause_probabilty"));
    // The old name's message is the scenario's rename table's (locksim-scenarios).
    let e = serde_json::from_str::<FaultProfile>(r#"{"loss_probability": 0.1}"#);
    assert!(e.unwrap_err().to_string().contains("loss_probability"));
    let p = profile(r#"{"loss_period_probability": 0.1}"#);
    assert_eq!(p.probability(FaultKind::Loss), 0.1);
}

#[test]
fn role_names_expand_to_the_nodes_of_that_role() {
    let p = profile(
        r#"{"clock_jump_probability": 1.0, "clock_nodes": ["@servers"],
            "pause_probability": 1.0, "pause_nodes": ["@clients", "redis"]}"#,
    );
    assert_eq!(p.nodes(FaultKind::ClockDrift, &targets()), vec!["redis"]);
    let faults = p.generate(3, 20_000, &targets());
    let mut paused = std::collections::BTreeSet::new();
    for f in faults {
        match f {
            Fault::ClockJump(f) => assert_eq!(f.node, "redis"),
            Fault::Pause(f) => {
                paused.insert(f.node);
            }
            _ => unreachable!(),
        }
    }
    assert_eq!(paused.len(), 3, "c1, c2 and redis all drawn: {paused:?}");
}

#[test]
fn validation_names_the_problem() {
    let nodes = vec!["c1".to_string()];
    let pause = |node: &str, point: Option<&str>| {
        Fault::Pause(Pause {
            node: node.into(),
            at_ms: Some(1),
            point: point.map(String::from),
            occurrence: 1,
            duration_ms: 1,
        })
    };
    let e = pause("c9", None).validate(&nodes).unwrap_err();
    assert!(e.contains("unknown node `c9`"), "{e}");
    let e = pause("c1", Some("before_write")).validate(&nodes);
    assert!(e.unwrap_err().contains("exactly one"));
    let e = pause("@servers", None).validate(&nodes).unwrap_err();
    assert!(
        e.contains("unknown role `@servers`"),
        "a pause names no group: {e}"
    );
}

#[test]
fn every_kind_round_trips_through_its_table_and_is_described() {
    let p = profile(
        r#"{"pause_probability": 1, "crash_probability": 1, "partition_probability": 1,
            "clock_jump_probability": 1, "clock_drift_probability": 1,
            "loss_period_probability": 1, "fsync_stall_probability": 1,
            "pause_periodic_probability": 1, "delay_spike_probability": 1,
            "loop_stall_probability": 1}"#,
    );
    let faults = p.generate(5, 2_000, &targets());
    let mut kinds: Vec<FaultKind> = faults.iter().map(Fault::kind).collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds.len(), FaultKind::ALL.len(), "{kinds:?}");
    for f in faults {
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<Fault>(&text).unwrap(), f);
        assert!(!f.describe().is_empty());
    }
}

#[test]
fn a_profile_s_schedule_stays_as_it_was() {
    // Pinned when the kinds moved into files (the same schedule as before, as the trace
    // hashes show): a kind added since must draw nothing while its probability is 0.
    let p = profile(
        r#"{"pause_probability": 0.3, "crash_probability": 0.2,
            "partition_probability": 0.2, "clock_jump_probability": 0.2,
            "clock_drift_probability": 0.2, "loss_period_probability": 0.2,
            "fsync_stall_probability": 0.2}"#,
    );
    let faults = p.generate(7, 4_000, &targets());
    let text: Vec<String> = faults.iter().map(Fault::describe).collect();
    assert_eq!(text, PINNED, "{text:#?}");
}

const PINNED: [&str; 6] = [
    "clock jump on c1 at 94 ms by -1135 ms",
    "pause c1 at 1727 ms for 428 ms",
    "partition at 2447 ms for 1277 ms: isolate redis",
    "message loss 0.5 at 2921 ms for 679 ms",
    "crash redis at 3313 ms, restart after 1039 ms",
    "pause c1 at 3783 ms for 1057 ms",
];

#[test]
fn every_fault_op_has_one_drawing() {
    let ops = [
        Op::Pause,
        Op::Crash,
        Op::Partition,
        Op::ClockJump,
        Op::Loss,
        Op::Hold,
    ];
    for op in ops {
        assert!(drawing(&op).is_some(), "{op:?}");
    }
    assert!(drawing(&Op::CsEnter).is_none());
}

#[test]
fn a_kinds_name_is_its_kind_in_scenario_files() {
    for kind in locksim_sim::FaultKind::ALL.iter().copied() {
        let in_files = serde_json::to_value(kind).unwrap();
        assert_eq!(in_files.as_str(), Some(kind.name()), "{kind:?}");
    }
}
