//! An example of a `proptest!` test over a locksim scenario, using the fault search's
//! public strategies: a safe configuration that no fault schedule may break.
//!
//! Claim (Kleppmann 2016): with fencing tokens from Redis `INCR` and a resource that rejects
//! any token below the highest it has seen, the resource never accepts a stale token, and
//! never one token from two grants, whatever the clients' pauses, crashes, clocks and the
//! network do. (Mutual exclusion and even the counter can still break: fencing orders the
//! writes, not the reads. A crash of a Redis without persistence would reset the token
//! counter, so server crashes are left out of the space below.)

use locksim_protocols::Registry;
use locksim_scenarios::search::{run_schedule, FaultSpace};
use locksim_scenarios::Prepared;
use locksim_sim::Verdict;
use proptest::prelude::*;
use std::sync::OnceLock;

fn fenced() -> &'static Prepared {
    static PREPARED: OnceLock<Prepared> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/catalog/redis-single-gc-pause-fenced.toml"
        );
        locksim_scenarios::load(path, &Registry::builtin()).unwrap()
    })
}

/// Every fault kind (the scenario has no random profile), but only clients crash.
fn space() -> FaultSpace {
    let mut space = FaultSpace::of(fenced(), 4);
    let clients = fenced().scenario.workload.client_names();
    space.restrict(locksim_sim::FaultKind::Crash, clients);
    space
}

proptest! {
    // No failure persistence: a failing case is printed (and can be saved as a scenario with
    // `search::counterexample`), not written to a file behind the user's back.
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fencing_tokens_are_never_accepted_out_of_order(schedule in space().schedule(true)) {
        let result = run_schedule(fenced(), &schedule);
        prop_assert!(result.error.is_none(), "{:?}", result.error);
        prop_assert_eq!(result.properties[&locksim_sim::Property::Fencing], Verdict::Valid, "{:?}", result.violations);
    }
}
