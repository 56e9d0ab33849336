//! One simulation stands for the rows of a comparison that differ only in their resource's
//! rules and the application's check (`Prepared::run_shared`). Its results must be exactly
//! those of separate runs, on the seeds where the other rules and check would have answered
//! and decided every write alike (shared) and on those where they would not (left to a run
//! of their own).

use locksim_protocols::Registry;
use locksim_scenarios::{Prepared, Scenario};

/// Single Redis under servers' clock jumps: compare-and-set refuses a write on some seeds
/// and not on others.
const BASE: &str = r#"
duration_ms = 10000

[clocks]
drift_ppm_max = 50

[faults_random]
clock_jump_ms_max = 4000
clock_jump_probability = 0.2
clock_nodes = ["@servers"]

[network]
latency_ms_max = 5.0
latency_ms_min = 1.0

[protocol]
name = "single-redis"
ttl_ms = 2000
"#;

fn prepared(name: &str, extra: &str) -> Prepared {
    prepared_from(BASE, name, extra)
}

/// Both bases' clients: three, short critical sections (`extra` may add to the table).
const WORKLOAD: &str = r#"
[workload]
clients = 3
cs_ms_max = 200
cs_ms_min = 20
think_ms_max = 100
think_ms_min = 10
"#;

fn prepared_from(base: &str, name: &str, extra: &str) -> Prepared {
    let text = format!("name = \"{name}\"\n{base}{WORKLOAD}{extra}");
    let scenario = Scenario::parse(&text, name).unwrap();
    scenario.prepare(name, &Registry::builtin()).unwrap()
}

/// Runs `lead` with `others` sharing on seeds 1..=30 and checks every result against a
/// separate run; returns how many were shared and how many ran on their own.
fn shared_and_own(lead: &Prepared, others: &[&Prepared]) -> (usize, usize) {
    let (mut shared, mut own) = (0, 0);
    for seed in 1..=30 {
        let (first, runs) = lead.run_shared(seed, others);
        assert_eq!(first, lead.run(seed), "seed {seed}: the leading run itself");
        for (p, run) in others.iter().zip(runs) {
            let alone = p.run(seed);
            match run {
                Some(run) => {
                    shared += 1;
                    assert_eq!(
                        run, alone,
                        "seed {seed}: {}'s shared result",
                        p.scenario.name
                    );
                }
                None => {
                    own += 1;
                    assert_ne!(
                        alone.trace_hash, first.trace_hash,
                        "seed {seed}: {}'s run is the same, yet it was not shared",
                        p.scenario.name
                    );
                }
            }
        }
    }
    (shared, own)
}

#[test]
fn shared_results_are_exactly_those_of_separate_runs() {
    let plain = prepared("plain", "");
    let cas = prepared("cas", "[resource]\nmode = \"cas\"\n");
    // Fencing without tokens never refuses a write: always shared.
    let fenced = prepared("fenced", "[resource]\nfencing = \"on\"\n");
    let (shared, own) = shared_and_own(&plain, &[&cas, &fenced]);
    assert!(
        shared > 30,
        "fenced without tokens shares every seed, cas some: {shared}"
    );
    assert!(
        own > 0,
        "compare-and-set refuses a write on some of 30 seeds"
    );
}

#[test]
fn only_scenarios_that_differ_in_their_resource_share_a_run() {
    let plain = prepared("plain", "");
    let cas = prepared("cas", "[resource]\nmode = \"cas\"\n");
    assert_eq!(plain.run_key(), cas.run_key());
    let longer = prepared("longer", "").scenario;
    let mut longer_text = toml::to_string(&longer).unwrap();
    longer_text = longer_text.replace("ttl_ms = 2000", "ttl_ms = 3000");
    let longer = Scenario::parse(&longer_text, "longer")
        .unwrap()
        .prepare("longer", &Registry::builtin())
        .unwrap();
    assert_ne!(
        plain.run_key(),
        longer.run_key(),
        "a longer lease changes the run"
    );
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        plain.run_shared(1, &[&longer])
    }));
    assert!(
        refused.is_err(),
        "a run is not shared with a different protocol"
    );
}

/// redsync on single Redis under clients' pauses: a pause past the lease makes the `Until()`
/// check skip a write on some seeds and not on others.
const PAUSES: &str = r#"
duration_ms = 10000

[faults_random]
pause_ms_max = 4000
pause_ms_min = 100
pause_nodes = ["@clients"]
pause_probability = 0.3

[protocol]
client = "redsync"
name = "single-redis"
ttl_ms = 2000
"#;

#[test]
fn rows_that_differ_in_the_applications_check_share_runs_exactly() {
    let never = prepared_from(PAUSES, "never", "check = \"never\"\n");
    let until = prepared_from(PAUSES, "until", "check = \"before_write\"\n");
    let until_cas = prepared_from(
        PAUSES,
        "until-cas",
        "check = \"before_write\"\n[resource]\nmode = \"cas\"\n",
    );
    assert_eq!(never.run_key(), until.run_key());
    assert_eq!(never.run_key(), until_cas.run_key());
    let (shared, own) = shared_and_own(&never, &[&until, &until_cas]);
    assert!(shared > 10, "most seeds skip no write: {shared} shared");
    assert!(
        own > 0,
        "a pause past the lease skips a write on some of 30 seeds"
    );
    // The other way round: the run that checks leads, the one that never does watches.
    let (shared, own) = shared_and_own(&until, &[&never]);
    assert!(shared > 5 && own > 0, "{shared} shared, {own} on their own");
}

#[test]
fn an_application_that_aborts_on_the_librarys_signal_shares_no_run() {
    let base = PAUSES.replace("\"redsync\"", "\"node-redlock\"");
    let never = prepared_from(&base, "never", "check = \"never\"\n");
    let on_signal = prepared_from(&base, "on-signal", "check = \"on_signal\"\n");
    assert_ne!(
        never.run_key(),
        on_signal.run_key(),
        "aborting on the signal interrupts the work, not only the write"
    );
}
