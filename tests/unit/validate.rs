//! The tests of `src/validate.rs`.

use locksim::validate::{self, *};
use locksim_check::{Property, Verdict};
use std::collections::BTreeMap;

fn record(scenario: &str, mode: Mode, seed: u64, violated: bool) -> Record {
    let v = if violated {
        Verdict::Invalid
    } else {
        Verdict::Valid
    };
    Record {
        scenario: scenario.into(),
        mode,
        seed,
        properties: Property::ALL.iter().map(|p| (*p, v)).collect(),
        acquisitions: 10,
        acquire_p50_ms: seed as f64,
        acquire_p99_ms: 2.0 * seed as f64,
        updates_acked: 0,
        updates_lost: 0,
        server_fsyncs: None,
        error: None,
    }
}

fn entries() -> Vec<Entry> {
    vec![Entry {
        name: "s".into(),
        protocol: "etcd".into(),
        explanation: BTreeMap::from([("fencing".into(), "because".into())]),
        library: RealLibrary::Own,
    }]
}

/// `live` and `sim` runs, the first `live_k` and `sim_k` of them violating.
fn records_of(live: u64, live_k: u64, sim: u64, sim_k: u64) -> Vec<Record> {
    let mut out: Vec<Record> = (1..=live)
        .map(|s| record("s", Mode::Live, s, s <= live_k))
        .collect();
    out.extend((1..=sim).map(|s| record("s", Mode::Sim, s, s <= sim_k)));
    out
}

#[test]
fn rows_apart_disagree_and_failed_runs_count_apart() {
    // Live: 0 of 10 violate; simulated: 20 of 20. Far apart.
    let mut records = records_of(10, 0, 20, 20);
    records.push(Record::failed("s", Mode::Live, 11, "did not start".into()));
    let rows = validate::rows(&entries(), &records);
    assert_eq!(
        rows.len(),
        3,
        "no acknowledged updates: no updates-lost row"
    );
    assert!(rows.iter().all(|r| r.verdict == RowVerdict::Disagrees));
    assert_eq!(rows[1].explanation.as_deref(), Some("because"));
    assert_eq!((rows[0].live.share.k, rows[0].live.share.n), (0, 10));
    assert_eq!((rows[0].live.runs, rows[0].live.failed), (10, 1));
    assert_eq!(rows[0].live.acquire_p50_ms, 5.5);
    assert_eq!(rows[0].live.acquire_p99_ms, 11.0);
    let json = serde_json::json!({ "rows": rows });
    assert_eq!(
        status(&json, "etcd"),
        "0 of 3 rows agree, 0 inconclusive (too few runs), 1 explained, 2 open (1 scenarios)"
    );
    assert_eq!(status(&json, "redlock"), "not yet validated");
    let md = markdown(&rows, &["redlock".into()], "h");
    assert!(md.contains("s / fencing (live): because") && md.contains("Not yet validated"));
}

#[test]
fn the_real_library_is_a_third_side_judged_against_the_simulator() {
    let mut e = entries();
    e[0].library = RealLibrary::Driver {
        profile: "redis-py".into(),
    };
    // Live and simulated agree (200 runs a side, 10 and 14 violating); the library
    // violates in 100 of 200: it disagrees with the model on its own.
    let mut records = records_of(200, 10, 200, 14);
    records.extend((1..=200).map(|s| record("s", Mode::Library, s, s <= 100)));
    let rows = validate::rows(&e, &records);
    assert!(rows.iter().all(
        |r| r.verdict == RowVerdict::Agrees && r.library_verdict == Some(RowVerdict::Disagrees)
    ));
    assert_eq!(rows[0].library.as_ref().unwrap().share.k, 100);
    let md = markdown(&rows, &[], "h");
    assert!(md.contains("100/200 [43, 57]%"), "{md}");
    assert!(md.contains("s / mutual_exclusion (the real library): no explanation yet"));
    assert!(md.contains("The real libraries against the simulator: 3 rows, 0 agree, 3 disagree"));
    // A profile without a driver says so, and has no library verdict.
    e[0].library = RealLibrary::ModelledOnly {
        profile: "redisson".into(),
    };
    let rows = validate::rows(&e, &records);
    assert!(rows
        .iter()
        .all(|r| r.library.is_none() && r.library_verdict.is_none()));
    assert!(markdown(&rows, &[], "h").contains("modelled only (redisson)"));
    // A profile live mode refuses for this scenario: not run, and the note says why.
    e[0].library = RealLibrary::Refused {
        profile: "etcd-concurrency-3.4".into(),
        why: "s.toml: workload.check: no lost-lock signal".into(),
    };
    let rows = validate::rows(&e, &records);
    assert!(rows.iter().all(|r| r.library_verdict.is_none()));
    let md = markdown(&rows, &[], "h");
    assert!(md.contains("| refused (etcd-concurrency-3.4) |"), "{md}");
    let note = "- s: the real library (etcd-concurrency-3.4) is not run: s.toml: workload.check";
    assert_eq!(md.matches(note).count(), 1, "{md}");
    // A driver whose runs are not in yet: the own client's verdict stands, the library's
    // validates nothing yet.
    e[0].library = RealLibrary::Driver {
        profile: "redis-py".into(),
    };
    let rows = validate::rows(&e, &records_of(200, 10, 200, 14));
    assert!(rows.iter().all(|r| r.validated
        && r.verdict == RowVerdict::Agrees
        && r.library_verdict == Some(RowVerdict::NotValidated)));
    // The library agreeing with the model: the row agrees.
    let mut agreeing: Vec<Record> = (1..=200)
        .map(|s| record("s", Mode::Sim, s, s <= 14))
        .collect();
    agreeing.extend((1..=200).map(|s| record("s", Mode::Library, s, s <= 10)));
    let rows = validate::rows(&e, &agreeing);
    assert!(rows.iter().all(|r| r.validated && r.agrees));
    assert!(
        markdown(&rows, &[], "h").contains("| — | 14/200"),
        "no live column"
    );
}

#[test]
fn latency_agrees_within_a_factor_or_a_few_milliseconds() {
    assert!(latency_agrees(0.8, 2.0), "within the floor");
    assert!(latency_agrees(2529.2, 1290.5), "within the factor");
    assert!(!latency_agrees(25.2, 6.0), "a process per acquire");
    assert!(!latency_agrees(1000.0, 3000.0));
    assert!(latency_agrees(0.0, 900.0), "not measured");
    // Live seeds 1..=16 against simulated 1..=100 (p50 = the seed): 8.5 ms against 50.5.
    let table = validate::rows(&entries(), &records_of(16, 0, 100, 0));
    assert!(table.iter().all(|r| r.latency_agrees == Some(false)));
    assert!(table.iter().all(|r| r.library_latency_agrees.is_none()));
    let md = markdown(&table, &[], "");
    assert!(md.contains("| **differs** |"), "{md}");
    assert!(md.contains("0 of 1 agree, 1 differ: s (live)"), "{md}");
    let close = validate::rows(&entries(), &records_of(16, 0, 16, 0));
    assert!(close.iter().all(|r| r.latency_agrees == Some(true)));
    // A percentile is judged only with the grants a run needs for it.
    let side = |grants: f64, p50: f64, p99: f64| Side {
        runs: 16,
        acquisitions_per_run: grants,
        acquire_p50_ms: p50,
        acquire_p99_ms: p99,
        ..Side::default()
    };
    let one_long_wait = (side(90.0, 6.0, 2287.0), side(103.0, 6.0, 74.5));
    assert_eq!(
        latency_verdict(&one_long_wait.0, &one_long_wait.1),
        Some(true)
    );
    let many = (side(300.0, 6.0, 2287.0), side(300.0, 6.0, 74.5));
    assert_eq!(latency_verdict(&many.0, &many.1), Some(false));
    let few = (side(4.0, 1.5, 2173.0), side(4.0, 82.8, 2185.0));
    assert_eq!(latency_verdict(&few.0, &few.1), None);
}

#[test]
fn server_fsyncs_per_grant_pool_over_the_runs_and_agree_within_a_factor() {
    // Live: 10 grants a run, 60 and 64 fsyncs; simulated: 61 in each run; the library's
    // 100 a run; a live run without a count (a crashed server) counts nothing.
    let counted = |mode: Mode, seed: u64, fsyncs: Option<u64>| Record {
        server_fsyncs: fsyncs,
        ..record("s", mode, seed, false)
    };
    let mut e = entries();
    e[0].library = RealLibrary::Driver {
        profile: "etcdctl-3.4".into(),
    };
    let records = vec![
        counted(Mode::Live, 1, Some(60)),
        counted(Mode::Live, 2, Some(64)),
        counted(Mode::Live, 3, None),
        counted(Mode::Sim, 1, Some(61)),
        counted(Mode::Sim, 2, Some(61)),
        counted(Mode::Library, 1, Some(100)),
    ];
    let rows = validate::rows(&e, &records);
    let r = &rows[0];
    assert_eq!(r.live.fsyncs_per_grant, Some(6.2));
    assert_eq!(r.sim.fsyncs_per_grant, Some(6.1));
    assert_eq!(r.fsyncs_agree, Some(true));
    assert_eq!(
        r.library_fsyncs_agree,
        Some(false),
        "10 a grant against 6.1"
    );
    let md = markdown(&rows, &[], "");
    assert!(
        md.contains("6.2 · 6.1 · 10.0: agrees · **differs** |"),
        "{md}"
    );
    assert!(md.contains("fsyncs per grant (counted live, within a factor 1.5 of the simulated, with 10 grants a run or more): 1 of 2 agree, 1 differ: s (library)"), "{md}");
    // On 3 grants a run a run's fixed costs weigh: the counts are shown, not judged.
    let few: Vec<Record> = (records.iter())
        .map(|r| Record {
            acquisitions: 3,
            ..r.clone()
        })
        .collect();
    let r = &validate::rows(&e, &few)[0];
    assert_eq!((r.fsyncs_agree, r.library_fsyncs_agree), (None, None));
    assert_eq!(
        r.library.as_ref().unwrap().fsyncs_per_grant,
        Some(100.0 / 3.0)
    );
    let md = markdown(std::slice::from_ref(r), &[], "");
    assert!(md.contains(": not judged · not judged |"), "{md}");
    // No world counted (records without a count): n/a, nothing judged.
    let rows = validate::rows(&entries(), &records_of(2, 0, 2, 0));
    assert!(rows.iter().all(|r| r.fsyncs_agree.is_none()));
    let md = markdown(&rows, &[], "");
    assert!(
        md.contains("| n/a |") && !md.contains("Server fsyncs per grant"),
        "{md}"
    );
}

#[test]
fn a_row_never_agrees_by_width_alone() {
    // 0 of 10 live against 3 of 20 simulated: the intervals overlap, but the live one is
    // ±15 points wide: inconclusive, not "agrees".
    let rows = validate::rows(&entries(), &records_of(10, 0, 20, 3));
    assert!(rows
        .iter()
        .all(|r| r.verdict == RowVerdict::Inconclusive && !r.agrees));
    assert!(rows[0].detectable > 0.2, "{}", rows[0].detectable);
    // With power on both sides, close shares agree: 10 of 200 against 14 of 200.
    let rows = validate::rows(&entries(), &records_of(200, 10, 200, 14));
    assert!(rows
        .iter()
        .all(|r| r.verdict == RowVerdict::Agrees && r.agrees));
    // ... and shares further apart than their intervals do not: 10 of 200 against 40.
    let rows = validate::rows(&entries(), &records_of(200, 10, 200, 40));
    assert!(rows.iter().all(|r| r.verdict == RowVerdict::Disagrees));
    let only_failed = vec![
        Record::failed("s", Mode::Live, 1, "no".into()),
        record("s", Mode::Sim, 1, false),
    ];
    let failed_rows = validate::rows(&entries(), &only_failed);
    assert!(failed_rows.iter().all(|r| !r.validated && !r.agrees));
    assert!(markdown(&failed_rows, &[], "h").contains("**not validated**"));
}

#[test]
fn updates_lost_pool_over_runs_with_an_interval_clustered_by_run() {
    // Four live runs losing 10, 30, 10, 30 of 100 acknowledged updates each: 20% pooled,
    // but runs differ far more than 400 independent updates would: the clustered
    // interval is wider than Wilson's over 400.
    let mut records = records_of(4, 0, 4, 0);
    for (r, lost) in records.iter_mut().zip([10, 30, 10, 30, 20, 20, 20, 20]) {
        (r.updates_acked, r.updates_lost) = (100, lost);
    }
    let rows = validate::rows(&entries(), &records);
    let lost = rows.iter().find(|r| r.property == UPDATES_LOST).unwrap();
    assert_eq!((lost.live.share.k, lost.live.share.n), (80, 400));
    let (w_lo, w_hi) = locksim_reports::stats::wilson(80, 400);
    assert!(
        lost.live.half_width() > (w_hi - w_lo) / 2.0,
        "{:?}",
        lost.live
    );
    // The simulated runs all lose 20 of 100: no spread between runs, so Wilson's width.
    assert!((lost.sim.half_width() - (w_hi - w_lo) / 2.0).abs() < 1e-12);
    assert!((lost.live.point() - 0.2).abs() < 1e-12);
    assert_eq!(
        lost.verdict,
        RowVerdict::Inconclusive,
        "4 runs a side: too few"
    );
    // Twelve runs a side, each losing 2 of 100 on both: it agrees.
    let mut twelve = records_of(12, 0, 12, 0);
    for r in &mut twelve {
        (r.updates_acked, r.updates_lost) = (100, 2);
    }
    let rows = validate::rows(&entries(), &twelve);
    let lost = rows.iter().find(|r| r.property == UPDATES_LOST).unwrap();
    assert_eq!(lost.verdict, RowVerdict::Agrees, "{lost:?}");
}
