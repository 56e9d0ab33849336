//! Liveness figures and the liveness phase: what a stuck lock looks like, and how healing
//! everything at the end brings the system back.

use locksim_protocols::Registry;
use locksim_scenarios::{RunResult, Scenario};
use locksim_sim::Verdict;

fn run(text: &str, seed: u64) -> RunResult {
    Scenario::parse(text, "inline")
        .unwrap()
        .prepare("inline", &Registry::builtin())
        .unwrap()
        .run(seed)
}

fn holder_crashes(variant: &str) -> String {
    format!(
        r#"
duration_ms = 6000
[protocol]
name = "single-redis"
ttl_ms = 1000
variant = "{variant}"
[workload]
clients = 2
[[faults]]
kind = "crash"
node = "c1"
point = "after_acquire"
"#
    )
}

#[test]
fn a_lock_without_ttl_is_stuck_when_its_holder_dies() {
    for seed in 1..=10 {
        let stuck = run(&holder_crashes("no-ttl"), seed);
        assert_eq!(stuck.verdict, Verdict::Valid, "stuck is not unsafe");
        // c1 dies holding the lock; c2 waits for the rest of the run.
        assert!(
            stuck.stats.liveness.wanted_free_ms_max > 4_000.0,
            "seed {seed}: {:?}",
            stuck.stats.liveness
        );
        let ttl = run(&holder_crashes("correct"), seed);
        assert_eq!(ttl.verdict, Verdict::Valid);
        // With a TTL the lock is free again after at most ~ttl.
        assert!(
            ttl.stats.liveness.wanted_free_ms_max < 1_200.0,
            "seed {seed}: {:?}",
            ttl.stats.liveness
        );
        assert!(ttl.stats.liveness.acquisitions > stuck.stats.liveness.acquisitions + 10);
    }
}

#[test]
fn the_liveness_phase_undoes_every_fault() {
    let text = |heal_ms: u64| {
        format!(
            r#"
duration_ms = 2000
heal_ms = {heal_ms}
[protocol]
name = "single-redis"
ttl_ms = 500
[[faults]]
kind = "crash"
node = "redis"
at_ms = 1000
[[faults]]
kind = "partition"
at_ms = 500
duration_ms = 100000
isolate = ["c2"]
"#
        )
    };
    for seed in 1..=5 {
        let without = run(&text(0), seed);
        let with = run(&text(2000), seed);
        assert_eq!(with.verdict, Verdict::Valid);
        // After the heal at 2 s the server is back and both clients acquire again.
        assert!(
            with.stats.liveness.acquisitions > without.stats.liveness.acquisitions + 5,
            "seed {seed}: {} vs {}",
            with.stats.liveness.acquisitions,
            without.stats.liveness.acquisitions
        );
        assert_eq!(with.stats.sim_ms, 4000);
    }
}
