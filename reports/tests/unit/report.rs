//! The tests of `src/lib.rs`.

use locksim_reports::*;
use locksim_scenarios::sweep::SeedResult;
use locksim_scenarios::Stats;
use locksim_sim::{Property, Verdict};
use stats::Share;

fn line(seed: u64, kinds: &[&str], token_writes: u64) -> SeedResult {
    SeedResult {
        seed,
        scenario: "s".into(),
        scenario_hash: String::new(),
        path: String::new(),
        protocol: "p".into(),
        verdict: if kinds.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        },
        violations: Property::ALL
            .into_iter()
            .filter(|p| kinds.contains(&p.name()))
            .map(|p| (p, 2))
            .collect(),
        reasons: Default::default(),
        trace_hash: String::new(),
        stats: Stats {
            writes_with_token: token_writes,
            updates_acked: 10,
            updates_lost: u64::from(kinds.contains(&"lost_update")),
            ..Stats::default()
        },
        expect_met: None,
        expect_unmet: vec![],
        error: None,
    }
}

#[test]
fn undecided_runs_keep_their_reasons_and_the_smallest_seeds_in_any_order() {
    let undecided = |seed: u64| SeedResult {
        verdict: Verdict::Unknown,
        reasons: [(Property::MutualExclusion, format!("why {seed}"))].into(),
        ..line(seed, &[], 0)
    };
    let (mut fwd, mut back) = (
        CellAccumulator::new("p", "f"),
        CellAccumulator::new("p", "f"),
    );
    for seed in 1..=8 {
        let r = if seed % 2 == 0 {
            undecided(seed)
        } else {
            line(seed, &[], 0)
        };
        fwd.add(&r, &format!("replay {seed}"));
    }
    for seed in (1..=8).rev() {
        let r = if seed % 2 == 0 {
            undecided(seed)
        } else {
            line(seed, &[], 0)
        };
        back.add(&r, &format!("replay {seed}"));
    }
    let s = fwd.finish();
    assert_eq!(s, back.finish());
    assert_eq!(s.runs_unknown, 4);
    let seeds: Vec<u64> = s.undecided.iter().map(|u| u.seed).collect();
    assert_eq!(seeds, [2, 4, 6, 8]);
    assert_eq!(s.undecided[1].reasons["mutual_exclusion"], "why 4");
    assert_eq!(s.undecided[1].replay, "replay 4");
    let c = Comparison {
        cells: vec![s],
        ..Comparison::default()
    };
    for page in [markdown::render(&c), html::render(&c)] {
        assert!(page.contains("Undecided runs"), "{page}");
        assert!(page.contains("mutual_exclusion: why 6"), "{page}");
        assert!(page.contains("replay 8"), "{page}");
    }
    let back = Comparison::from_json(&c.to_json()).unwrap();
    assert_eq!(back.cells[0].undecided, c.cells[0].undecided);
}

#[test]
fn overlap_and_harm_are_kept_apart_and_fencing_without_tokens_is_na() {
    let mut a = CellAccumulator::new("p", "f");
    a.add(&line(1, &["mutual_exclusion"], 0), "r1");
    a.add(&line(2, &["mutual_exclusion", "lost_update"], 0), "r2");
    a.add(&line(3, &[], 0), "r3");
    let c = a.finish();
    assert_eq!((c.overlap.k, c.harm.k, c.overlap.n), (2, 1, 3));
    assert_eq!(c.property(Property::Fencing), None, "no token: n/a");
    assert_eq!(c.property(Property::LostUpdate), Some(Share::of(1, 3)));
    assert_eq!((c.updates_acked, c.updates_lost), (30, 1));
    assert_eq!(c.seeds, "1..=3");
    let mut b = CellAccumulator::new("p", "f");
    b.add(&line(1, &["mutual_exclusion"], 5), "r1");
    assert_eq!(
        b.finish().property(Property::Fencing),
        Some(Share::of(0, 1))
    );
}

#[test]
fn damage_is_a_lost_update_or_a_stale_write_and_latent_is_fencing_broken_without_it() {
    let stale = |seed: u64| {
        let mut r = line(seed, &["fencing"], 3);
        r.stats.stale_accepted = 1;
        r
    };
    let mut a = CellAccumulator::new("p", "f");
    a.add(
        &line(1, &["fencing"], 3),
        "reused token, nothing lost: latent",
    );
    a.add(
        &line(2, &["fencing", "mutual_exclusion"], 3),
        "overlap, no loss: latent",
    );
    a.add(&stale(3), "stale write accepted: damage");
    a.add(
        &line(4, &["fencing", "lost_update"], 3),
        "reused and lost: damage",
    );
    a.add(&line(5, &["mutual_exclusion"], 3), "overlap only: neither");
    let c = a.finish();
    assert_eq!(
        (c.damage.k, c.latent.k, c.harm.k, c.overlap.k),
        (2, 2, 4, 2)
    );
    assert_eq!(c.damage.n, 5);
    assert!(c.damage.lo > 0.0 && c.damage.hi < 1.0, "{:?}", c.damage);
}

#[test]
fn the_summary_does_not_depend_on_the_order_of_the_runs() {
    let lines: Vec<SeedResult> = (1..=20)
        .map(|s| match s % 3 {
            0 => line(s, &["mutual_exclusion"], 1),
            1 => line(s, &["fencing"], 1),
            _ => line(s, &[], 1),
        })
        .collect();
    let mut fwd = CellAccumulator::new("p", "f");
    let mut rev = CellAccumulator::new("p", "f");
    for l in &lines {
        fwd.add(l, "r");
    }
    for l in lines.iter().rev() {
        rev.add(l, "r");
    }
    assert_eq!(fwd.finish(), rev.finish());
    let seeds: Vec<u64> = fwd.finish().failing.iter().map(|f| f.seed).collect();
    assert_eq!(seeds, vec![1, 3, 4, 6, 7]);
}

#[test]
fn the_json_round_trips_and_tolerates_unknown_and_missing_fields() {
    let mut a = CellAccumulator::new("p", "f");
    a.add(&line(1, &["lost_update"], 0), "r");
    let c = Comparison {
        schema: SCHEMA_VERSION,
        title: "t".into(),
        cells: vec![a.finish()],
        phase: vec![PhaseSeries {
            protocol: "p".into(),
            axis: "pause".into(),
            ttl_ms: 2000,
            points: vec![PhasePoint {
                ttl_multiple: 0.5,
                size_ms: 1000,
                overlap: Share::of(3, 10),
                harm: Share::of(1, 10),
                damage: Share::of(1, 10),
                latent: Share::of(0, 10),
                seeds: "1..=10".into(),
            }],
            ..PhaseSeries::default()
        }],
        ..Comparison::default()
    };
    let back = Comparison::from_json(&c.to_json()).unwrap();
    assert_eq!(back, c);
    let mut v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    v["a_field_from_the_future"] = serde_json::json!(1);
    v.as_object_mut().unwrap().remove("catalog");
    let back = Comparison::from_json(&v.to_string()).unwrap();
    assert_eq!(back, c);
}
