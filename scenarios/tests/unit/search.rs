//! The tests of `src/search.rs`.

use locksim_protocols::Registry;
use locksim_scenarios::scenario::{Expectation, Prepared, Scenario};
use locksim_scenarios::search::*;
use locksim_scenarios::workload::POINTS;
use locksim_sim::{Fault, FaultKind, FaultProfile, Property};
use proptest::strategy::Strategy;

fn prepared(extra: &str) -> Prepared {
    let text =
        format!("duration_ms = 2000\n[protocol]\nname = \"single-redis\"\nttl_ms = 500\n{extra}");
    Scenario::parse(&text, "t.toml")
        .unwrap()
        .prepare("t.toml", &Registry::builtin())
        .unwrap()
}

#[test]
fn the_space_follows_the_profile_and_the_roles() {
    let p = prepared("[faults_random]\npause_probability = 0.1\npause_ms_max = 900\n");
    let space = FaultSpace::of(&p, 3);
    assert_eq!(space.kinds, vec![FaultKind::Pause]);
    let pause = &space.spaces[&FaultKind::Pause];
    assert_eq!(pause.nodes, vec!["c1", "c2"]);
    assert_eq!(space.profile.pause.pause_ms_min, 50);
    assert_eq!(space.profile.pause.pause_ms_max, 900);
    assert_eq!(space.points["c1"], POINTS.to_vec());
    assert_eq!(space.points["redis"], vec!["before_reply"]);
    assert!(pause.points.contains(&("c1".into(), "before_write".into())));
    assert!(space.spaces[&FaultKind::Partition].points.is_empty());
    let all = FaultSpace::of(&prepared(""), 3);
    let mut every = FaultKind::ALL.to_vec();
    every.retain(|k| *k != FaultKind::LoopStall);
    assert_eq!(all.kinds, every, "a loop stall is searched when named");
    assert_eq!(
        all.profile,
        FaultProfile::default(),
        "the file format's default ranges"
    );
    assert!(all.describe()[0].starts_with("pause c1, c2 for 50..=2000 ms, at 0..2000 ms"));
}

#[test]
fn the_search_draws_within_the_profile_s_ranges() {
    // The search once kept its own copy of the ranges and ignored `clock_jump_ms_min`.
    let p = prepared(
        "[faults_random]\nclock_jump_probability = 0.1\nclock_jump_ms_min = 700\n\
         clock_jump_ms_max = 900\n",
    );
    let space = FaultSpace::of(&p, 4);
    let strategy = space.schedule(false);
    let mut runner = runner(2);
    for _ in 0..100 {
        for f in strategy.new_tree(&mut runner).unwrap().current().faults {
            let Fault::ClockJump(jump) = f else {
                panic!("only clock jumps: {f:?}")
            };
            assert!((700..=900).contains(&jump.delta_ms.abs()), "{jump:?}");
        }
    }
}

#[test]
fn generated_schedules_stay_in_bounds_and_validate() {
    let p = prepared("");
    let space = FaultSpace::of(&p, 5);
    let nodes = locksim_scenarios::scenario::node_names(&p.scenario, p.deployment.as_ref());
    let mut runner = runner(7);
    for swarm in [true, false] {
        let strategy = space.schedule(swarm);
        for _ in 0..200 {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            assert!((1..=5).contains(&s.faults.len()));
            assert!(s.seed < SEED_LIMIT);
            for f in &s.faults {
                f.validate(&nodes).unwrap();
                assert!(f.at_ms().is_none_or(|t| t < 2000), "{f:?}");
            }
        }
    }
}

#[test]
fn generation_is_a_function_of_the_seed() {
    let space = FaultSpace::of(&prepared(""), 4);
    let draw = |seed| {
        let mut runner = runner(seed);
        let strategy = space.schedule(true);
        (0..20)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

#[test]
fn swarm_cases_use_subsets_of_the_kinds() {
    let space = FaultSpace::of(&prepared(""), 6);
    let mut runner = runner(1);
    let strategy = space.schedule(true);
    let narrow = (0..100)
        .filter(|_| {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            let mut kinds: Vec<FaultKind> = s.faults.iter().map(Fault::kind).collect();
            kinds.sort();
            kinds.dedup();
            kinds.len() < 3
        })
        .count();
    assert!(
        narrow > 30,
        "only {narrow} of 100 swarm cases used few kinds"
    );
}

/// A fenced lock under client pauses overlaps, but its resource rejects every stale
/// write: a search for overlap finds it, a search for harm must pass over those runs.
#[test]
fn a_search_for_some_failures_passes_over_the_others() {
    let p = prepared(
        "tokens = true\n[resource]\nfencing = \"on\"\n[faults_random]\n\
         pause_probability = 0.3\npause_ms_min = 600\npause_ms_max = 1500\n",
    );
    let options = SearchOptions {
        cases: 16,
        shrink_steps_max: 0,
        ..SearchOptions::default()
    };
    let any = search(&p, &options, |_| {}).unwrap();
    let found = any.found.expect("a pause past the TTL overlaps");
    assert_eq!(found.failure, Failure::Violation(Property::MutualExclusion));
    let harm = SearchOptions {
        wanted: vec![
            Failure::Violation(Property::LostUpdate),
            Failure::Violation(Property::Fencing),
        ],
        ..options
    };
    let outcome = search(&p, &harm, |_| {}).unwrap();
    assert_eq!(
        outcome.found, None,
        "fencing turns every overlap into no harm"
    );
    assert_eq!(outcome.cases, 16, "the whole budget was searched");
}

#[test]
fn the_counterexample_round_trips_through_toml() {
    let p = prepared("[faults_random]\npause_probability = 0.1\n");
    let schedule = Schedule {
        seed: 42,
        faults: vec![Fault::Pause(locksim_sim::fault::Pause {
            node: "c1".into(),
            at_ms: None,
            point: Some("before_write".into()),
            occurrence: 1,
            duration_ms: 1500,
        })],
    };
    let failure = Failure::Violation(Property::MutualExclusion);
    let s = counterexample(&p, &schedule, failure, "cex", "found");
    let text = toml::to_string(&s).unwrap();
    let back = Scenario::parse(&text, "cex.toml").unwrap();
    assert_eq!(back, s);
    assert!(!back.faults_random.is_active());
    assert_eq!(
        back.expect.unwrap().mutual_exclusion,
        Some(Expectation::Violated)
    );
}
