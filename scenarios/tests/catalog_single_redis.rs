//! Every single-Redis catalog scenario meets its `expect` on every one of 25 seeds, and the
//! witnesses are the ones the scenario's story names.

use crate::common;

use locksim_protocols::Registry;
use locksim_scenarios::{load, Prepared, RunResult};
use locksim_sim::history::Op;
use locksim_sim::{Property, Verdict};

const SEEDS: std::ops::RangeInclusive<u64> = 1..=25;

fn catalog(name: &str) -> Prepared {
    let path = format!("{}/catalog/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    load(&path, &Registry::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs every seed, asserts the expectation, and returns the results.
fn meets_expect(name: &str) -> Vec<RunResult> {
    let prepared = catalog(name);
    assert!(prepared.scenario.expect.is_some(), "{name} has no [expect]");
    SEEDS
        .map(|seed| {
            let r = prepared.run(seed);
            assert!(r.error.is_none(), "{name} seed {seed}: {:?}", r.error);
            let e = r.expect.as_ref().unwrap();
            assert!(
                e.met,
                "{name} seed {seed}: {:?}\nreplay: {}",
                e.mismatches, r.replay
            );
            r
        })
        .collect()
}

fn verdict(r: &RunResult, p: Property) -> Verdict {
    r.properties[&p]
}

#[test]
fn healthy() {
    for r in meets_expect("redis-single-healthy") {
        assert_eq!(r.verdict, Verdict::Valid);
        assert!(
            r.stats.liveness.acquisitions > 30,
            "seed {}: the lock barely worked",
            r.seed
        );
    }
}

#[test]
fn gc_pause() {
    for r in meets_expect("redis-single-gc-pause") {
        // The paused holder is c1, and it overlaps with c2.
        let me = r
            .violations
            .iter()
            .find(|v| v.kind == Property::MutualExclusion)
            .unwrap();
        assert!(me.description.contains("c1#1") && me.description.contains("c2#"));
    }
}

#[test]
fn gc_pause_fenced() {
    for r in meets_expect("redis-single-gc-pause-fenced") {
        assert!(
            r.stats.liveness.writes_rejected >= 1,
            "seed {}: nothing fenced",
            r.seed
        );
        assert_eq!(verdict(&r, Property::LostUpdate), Verdict::Valid);
    }
}

#[test]
fn clock_jump() {
    meets_expect("redis-single-clock-jump");
}

#[test]
fn unconditional_release() {
    meets_expect("redis-single-unconditional-release");
}

#[test]
fn get_then_set() {
    meets_expect("redis-single-get-then-set");
}

#[test]
fn crash_without_persistence_forgets_the_lock() {
    meets_expect("redis-single-crash-no-persistence");
}

#[test]
fn a_lock_without_ttl_is_stuck_once_its_holder_dies() {
    for r in meets_expect("redis-single-no-ttl-crash") {
        assert_eq!(r.stats.liveness.acquisitions, 1);
        assert!(
            r.stats.liveness.wanted_free_ms_max > 5_000.0,
            "{:?}",
            r.stats.liveness
        );
    }
}

#[test]
fn crash_with_aof_always_keeps_the_lock() {
    meets_expect("redis-single-crash-aof-always");
}

/// The correct client under the same pause as `unconditional-release` is safe: the
/// violation there comes from the bug, not from the timeline.
#[test]
fn compare_and_delete_release_is_safe_under_the_same_pause() {
    let mut p = catalog("redis-single-unconditional-release");
    p.scenario.protocol.params.remove("variant");
    let p = p.scenario.prepare(&p.path, &Registry::builtin()).unwrap();
    for seed in SEEDS {
        let r = p.run(seed);
        assert_eq!(r.verdict, Verdict::Valid, "seed {seed}: {:?}", r.violations);
    }
}

/// Same workload as `get-then-set` with the correct client (whose acquire is one atomic
/// SET NX, so it has no point between a check and a set to pause at): safe.
#[test]
fn atomic_set_nx_is_safe_under_the_same_pause() {
    let mut p = catalog("redis-single-get-then-set");
    p.scenario.protocol.params.remove("variant");
    p.scenario.faults.clear();
    let p = p.scenario.prepare(&p.path, &Registry::builtin()).unwrap();
    for seed in SEEDS {
        assert_eq!(p.run(seed).verdict, Verdict::Valid, "seed {seed}");
    }
}

#[test]
fn same_seed_same_trace_in_process() {
    let p = catalog("redis-single-gc-pause");
    let a = p.run(7);
    assert_eq!(a, p.run(7));
    assert_ne!(a.trace_hash, p.run(8).trace_hash);
}

/// Every pause of `@holder` hit a client inside its critical section at that instant, and
/// the pauses that found nobody there are recorded as skipped.
fn pauses_hit_the_holder(name: &str) {
    let prepared = catalog(name);
    for seed in 1..=5 {
        let (_, history) = prepared.run_with_history(seed);
        let mut inside = std::collections::BTreeSet::new();
        let mut hits = 0;
        for e in &history {
            match e.op {
                Op::CsEnter => {
                    inside.insert(e.node.clone());
                }
                Op::CsExit => {
                    inside.remove(&e.node);
                }
                Op::Pause => {
                    let target = e.target.as_ref().unwrap();
                    assert!(inside.contains(target), "seed {seed}: {}", e.describe());
                    assert!(e.detail.as_deref().unwrap().contains("@holder"));
                    hits += 1;
                }
                Op::Note if e.node == "nemesis" => {
                    assert!(inside.is_empty(), "seed {seed}: {}", e.describe());
                    assert!(e
                        .detail
                        .as_deref()
                        .unwrap()
                        .starts_with("skipped pause @holder"));
                }
                _ => {}
            }
        }
        assert!(hits > 0, "seed {seed}: no pause hit a holder");
    }
}

#[test]
fn random_pauses_of_the_holder_break_mutual_exclusion() {
    meets_expect("redis-single-pause-holder");
    pauses_hit_the_holder("redis-single-pause-holder");
}

#[test]
fn fencing_holds_under_random_pauses_of_the_holder() {
    for r in meets_expect("redis-single-pause-holder-fenced") {
        assert!(
            r.stats.liveness.writes_rejected > 0,
            "seed {}: fencing never had to reject a paused holder's write",
            r.seed
        );
    }
}

#[test]
fn extending_keeps_a_critical_section_three_ttls_long_safe() {
    for r in meets_expect("redis-single-extend") {
        assert!(r.stats.liveness.writes_accepted >= 3, "seed {}", r.seed);
    }
    let mut prepared = catalog("redis-single-extend");
    let (_, history) = prepared.run_with_history(1);
    let extended = history
        .iter()
        .filter(|e| e.op == Op::Extend && e.kind == locksim_sim::Kind::Ok)
        .count();
    assert!(
        extended >= 9,
        "3 s of work, an extension every 300 ms: {extended}"
    );
    // Without the extensions the lock expires a third of the way in.
    prepared.scenario.workload.extend_every_ms = 0;
    for seed in 1..=5 {
        let r = prepared.run(seed);
        assert_eq!(verdict(&r, Property::MutualExclusion), Verdict::Invalid);
    }
}

/// `story` meets its expect (the lock lost in a crash), and without its faults of `kind` the
/// same crash keeps the lock: mutual exclusion holds on seeds 1..=5.
fn the_crash_keeps_the_lock_without(story: &str, kind: locksim_sim::FaultKind, why: &str) {
    meets_expect(story);
    let mut prepared = catalog(story);
    prepared.scenario.faults.retain(|f| f.kind() != kind);
    for seed in 1..=5 {
        let r = prepared.run(seed);
        assert_eq!(
            verdict(&r, Property::MutualExclusion),
            Verdict::Valid,
            "{story} without its {kind:?}, seed {seed}: {why}"
        );
    }
}

#[test]
fn an_fsync_stall_loses_the_lock_everysec_would_have_saved() {
    the_crash_keeps_the_lock_without(
        "redis-single-fsync-stall",
        locksim_sim::FaultKind::FsyncStall,
        "the next second's sync saves the lock",
    );
}

#[test]
fn a_clock_stepped_back_stops_everysec_syncing_and_a_crash_loses_the_lock() {
    the_crash_keeps_the_lock_without(
        "redis-single-everysec-clock-back",
        locksim_sim::FaultKind::ClockJump,
        "without the step the next second's sync keeps the lock",
    );
}

/// The grants whose write the resource decided on after it had accepted a write of a grant
/// that took the lock later: writes that landed late (Kleppmann's delayed packet).
fn late_writes(h: &locksim_sim::History) -> Vec<String> {
    let decided = |e: &&locksim_sim::Event| {
        matches!(e.op, Op::ResourceAccept | Op::ResourceReject) && e.grant.is_some()
    };
    let entered: Vec<&str> = (h.iter())
        .filter(|e| e.op == Op::CsEnter)
        .filter_map(|e| e.grant.as_deref())
        .collect();
    let order = |g: &str| entered.iter().position(|x| *x == g);
    let mut late = vec![];
    let mut accepted: Vec<&str> = vec![];
    for e in h.iter().filter(decided) {
        let grant = e.grant.as_deref().unwrap();
        if accepted.iter().any(|a| order(a) > order(grant)) {
            late.push(grant.to_owned());
        }
        if e.op == Op::ResourceAccept {
            accepted.push(grant);
        }
    }
    late
}

/// Runs `seed` with its history and asserts the file's `[expect]` is met.
fn run_meeting_expect(prepared: &Prepared, seed: u64) -> locksim_sim::History {
    let (r, h) = prepared.run_with_history(seed);
    let e = r.expect.as_ref().unwrap();
    assert!(
        e.met,
        "seed {seed}: {:?}\nreplay: {}",
        e.mismatches, r.replay
    );
    h
}

/// The delayed write lands after the next holder's on every seed, and only because of the
/// delay spike: without it, no write is late and no property breaks.
#[test]
fn delayed_write() {
    let prepared = catalog("redis-single-delayed-write");
    for seed in SEEDS {
        let h = run_meeting_expect(&prepared, seed);
        let late = late_writes(&h);
        assert!(late.contains(&"c1#1".to_owned()), "seed {seed}: {late:?}");
        assert!(h.iter().any(|e| e.op == Op::Hold && e.node == "nemesis"));
        let (r, h) = prepared.run_faults_with_history(seed, vec![]);
        assert!(
            late_writes(&h).is_empty(),
            "seed {seed}: late without the spike"
        );
        assert_eq!(r.verdict, Verdict::Valid, "seed {seed}");
    }
}

#[test]
fn delayed_write_fenced() {
    let prepared = catalog("redis-single-delayed-write-fenced");
    for seed in SEEDS {
        let h = run_meeting_expect(&prepared, seed);
        // The same late write, rejected.
        let rejected = h
            .iter()
            .any(|e| e.op == Op::ResourceReject && e.grant.as_deref() == Some("c1#1"));
        assert!(rejected, "seed {seed}: c1's late write was not rejected");
        assert!(late_writes(&h).contains(&"c1#1".to_owned()), "seed {seed}");
    }
}

/// Cuts of the holder with TCP keeping the connections: a write lands late on every seed, and
/// the unfenced resource takes it. With `partition = "drop"` (the connection reset) the same
/// cuts lose those writes: nothing lands late and nothing is harmed; with a connection timeout
/// shorter than the cuts, the held writes are dropped at the heal, and nothing is harmed
/// either.
#[test]
fn partition_delayed_write() {
    let file = "redis-single-partition-delayed-write.toml";
    let delay = catalog("redis-single-partition-delayed-write");
    let drop = common::changed(file, "partition = \"delay\"", "partition = \"drop\"");
    let timeout = common::changed(
        file,
        "partition = \"delay\"",
        "partition = \"delay\"\nconnection_timeout_ms = 1_000",
    );
    for seed in SEEDS {
        let (r, h) = delay.run_with_history(seed);
        assert!(r.expect.as_ref().unwrap().met, "{}", common::describe(&r));
        assert!(!late_writes(&h).is_empty(), "seed {seed}: no late write");
        for (what, other) in [("drop", &drop), ("a 1 s connection timeout", &timeout)] {
            let (r, h) = other.run_with_history(seed);
            assert!(late_writes(&h).is_empty(), "seed {seed}: late with {what}");
            assert_eq!(r.verdict, Verdict::Valid, "seed {seed} with {what}");
        }
    }
}

#[test]
fn partition_delayed_write_fenced() {
    let prepared = catalog("redis-single-partition-delayed-write-fenced");
    for seed in SEEDS {
        let (r, h) = prepared.run_with_history(seed);
        assert!(r.expect.as_ref().unwrap().met, "{}", common::describe(&r));
        assert!(!late_writes(&h).is_empty(), "seed {seed}: no late write");
        let rejected = h.iter().any(|e| e.op == Op::ResourceReject);
        assert!(rejected, "seed {seed}: no late write was fenced off");
    }
}
