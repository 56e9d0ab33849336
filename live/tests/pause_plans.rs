//! The same (scenario, seed) pauses the same targets at the same times in both worlds: the
//! plan live mode runs for each periodic pause (`locksim_live::run::pause_plans`) against
//! what the simulated run of that seed did, read from its history. No server is started.

use locksim_protocols::Registry;
use locksim_scenarios::{load, Prepared, Scenario};
use locksim_sim::history::{History, Op};

/// A catalog file, ready to run.
fn catalog(name: &str) -> Prepared {
    let path = format!("{}/../scenarios/catalog/{name}", env!("CARGO_MANIFEST_DIR"));
    load(&path, &Registry::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn parsed(text: &str) -> Prepared {
    Scenario::parse(text, "periodic.toml")
        .and_then(|s| s.prepare("periodic.toml", &Registry::builtin()))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The cycles of the simulated run's periodic pauses: (start ms, what the cycle picked), one
/// entry per cycle, in time order: a pause's `this pause picked X` (a node of its own `node`
/// otherwise), a skipped cycle's `no X`. The nodes of one cycle share its start and its words.
fn simulated_cycles(history: &History) -> Cycles {
    let mut cycles: Cycles = vec![];
    for e in history.iter().filter(|e| e.node == "nemesis") {
        let detail = e.detail.as_deref().unwrap_or_default();
        let picked = match e.op {
            Op::Pause => match detail.split_once("this pause picked ") {
                Some((_, rest)) => rest.split(" of ").next().unwrap().to_owned(),
                None => e.target.clone().unwrap(),
            },
            Op::Note => match detail.strip_prefix("skipped a pause: no ") {
                Some(role) => role.to_owned(),
                None => continue,
            },
            _ => continue,
        };
        let cycle = (e.time_ns / 1_000_000, picked);
        if cycles.last() != Some(&cycle) {
            cycles.push(cycle);
        }
    }
    cycles
}

/// Cycles as (start ms, target).
type Cycles = Vec<(u64, String)>;

/// Live mode's plan of `prepared` on `seed`, beside what the simulated run did.
fn both(prepared: &Prepared, seed: u64) -> (Cycles, Cycles) {
    let plans = locksim_live::run::pause_plans(prepared, seed).unwrap();
    let mut live: Cycles = (plans.iter().flat_map(|p| &p.cycles))
        .map(|c| (c.at_ms, c.target.clone()))
        .collect();
    live.sort();
    let (result, history) = prepared.run_with_history(seed);
    assert!(result.error.is_none(), "{:?}", result.error);
    let sim_ms = result.stats.sim_ms;
    // The simulated run goes on through its liveness phase; live mode stops its pauses at the
    // end of the workload.
    let sim = simulated_cycles(&history);
    let live = live.into_iter().filter(|(t, _)| *t < sim_ms).collect();
    (live, sim)
}

#[test]
fn the_jepsen_nemesis_picks_the_same_targets_at_the_same_times_in_both_worlds() {
    let prepared = catalog("etcd-jepsen-lock-set.toml");
    let mut picks = std::collections::BTreeSet::new();
    for seed in 1..=5 {
        let (live, sim) = both(&prepared, seed);
        // Cycles at 5 s, 15 s, ..., 115 s.
        assert_eq!(live.len(), 12, "seed {seed}: {live:?}");
        assert_eq!(live, sim, "seed {seed}");
        picks.extend(live.into_iter().map(|(_, target)| target));
    }
    let both_targets = ["@leader".to_owned(), "@servers".to_owned()];
    assert_eq!(picks, both_targets.into(), "every target is drawn");
}

#[test]
fn a_pause_of_several_targets_in_a_short_run_follows_the_simulated_draws() {
    // tests/live.rs runs this one against a real redis-server.
    let prepared = parsed(
        "duration_ms = 3000\n[protocol]\nname = \"single-redis\"\nttl_ms = 1000\n\
         [workload]\nclients = 2\ncs_ms_min = 10\ncs_ms_max = 20\n[[faults]]\n\
         kind = \"pause_periodic\"\ntargets = [\"redis\", \"@clients\"]\nat_ms = 500\n\
         until_ms = 2500\non_ms = 300\noff_ms = 200\n",
    );
    for seed in 1..=10 {
        let (live, sim) = both(&prepared, seed);
        let starts: Vec<u64> = live.iter().map(|c| c.0).collect();
        assert_eq!(starts, [500, 1_000, 1_500, 2_000], "seed {seed}");
        assert_eq!(live, sim, "seed {seed}");
    }
}

#[test]
fn a_pause_of_one_node_draws_nothing_and_keeps_the_simulated_times() {
    let prepared = parsed(
        "duration_ms = 3000\n[protocol]\nname = \"single-redis\"\nttl_ms = 1000\n\
         [workload]\nclients = 2\n[[faults]]\nkind = \"pause_periodic\"\nnode = \"c1\"\n\
         at_ms = 250\nuntil_ms = 2000\non_ms = 100\noff_ms = 250\n",
    );
    let (live, sim) = both(&prepared, 3);
    let starts: Vec<u64> = live.iter().map(|c| c.0).collect();
    assert_eq!(starts, [250, 600, 950, 1_300, 1_650]);
    assert_eq!(live, sim);
}
