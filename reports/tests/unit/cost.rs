//! The tests of `src/cost.rs`.

use locksim_reports::cost::*;
use locksim_reports::CellSummary;

#[test]
fn cost_reads_each_figure_from_its_own_cell() {
    let one = CellSummary {
        profile: "uncontended".into(),
        runs: 5,
        acquire_latency_ms_p50_mean: 3.0,
        acquire_latency_ms_p99_mean: 7.5,
        lock_messages_per_acquire: Some(4.0),
        server_fsyncs_per_acquire: Some(1.0),
        ..CellSummary::default()
    };
    let calm = CellSummary {
        profile: "none".into(),
        acquisitions_mean: 80.0,
        sim_ms_mean: 10_000.0,
        ..CellSummary::default()
    };
    let mixed = CellSummary {
        profile: "mixed".into(),
        wanted_free_ms_mean: 500.0,
        sim_ms_mean: 10_000.0,
        ..CellSummary::default()
    };
    let c = Cost::of(&one, Some(&calm), Some(&mixed));
    assert_eq!((c.acquire_ms_p50, c.acquire_ms_p99), (3.0, 7.5));
    assert_eq!(c.handoffs_per_s, Some(8.0));
    assert_eq!(c.stuck_ms_per_s, Some(50.0));
    assert_eq!((c.messages_per_acquire, c.fsyncs_per_acquire), (4.0, 1.0));
    assert_eq!((c.contended_profile.as_str(), c.runs), ("none", 5));
    assert_eq!(
        c.acquire_ms_p50_ci95, None,
        "no interval given, none made up"
    );
    assert_eq!(Cost::of(&one, None, None).handoffs_per_s, None);
}

#[test]
fn rates_per_second_carry_their_runs_interval() {
    let one = CellSummary {
        acquire_latency_ms_p50_mean: 3.0,
        acquire_latency_ms_p50_ci95: Some([2.5, 3.5]),
        acquire_latency_ms_p99_mean: 7.5,
        ..CellSummary::default()
    };
    let calm = CellSummary {
        acquisitions_mean: 80.0,
        acquisitions_ci95: Some([70.0, 90.0]),
        sim_ms_mean: 10_000.0,
        ..CellSummary::default()
    };
    let c = Cost::of(&one, Some(&calm), None);
    assert_eq!(c.acquire_ms_p50_ci95, Some([2.5, 3.5]));
    assert_eq!(c.handoffs_per_s_ci95, Some([7.0, 9.0]));
    assert_eq!(
        figure_ci(c.handoffs_per_s, c.handoffs_per_s_ci95, 1),
        "8.0 ±1.0"
    );
    assert_eq!(figure_ci(None, None, 1), "–");
}
