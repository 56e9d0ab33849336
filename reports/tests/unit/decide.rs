//! The tests of `src/decide.rs`.

use locksim_reports::cost::Cost;
use locksim_reports::decide::*;
use locksim_reports::stats::Share;
use locksim_reports::{CellSearch, FailingSeed, Row, Setup};
use locksim_reports::{CellSummary, Comparison, FoundSchedule};

fn row(label: &str, guard: &str, ms: f64) -> Row {
    Row {
        label: label.into(),
        setup: Setup {
            protocol: "p".into(),
            guard: guard.into(),
            ..Setup::default()
        },
        cost: Some(Cost {
            acquire_ms_p50: ms,
            acquire_ms_p99: ms,
            ..Cost::default()
        }),
    }
}

/// A cell with `harm` runs of `n` (damage, each with a failing seed) and `overlap` runs.
fn cell(row: &str, profile: &str, harm: u64, overlap: u64, n: u64) -> CellSummary {
    let failing = (1..=harm.max(overlap).min(2))
        .map(|seed| FailingSeed {
            seed,
            kinds: if harm > 0 {
                vec!["mutual_exclusion".into(), "lost_update".into()]
            } else {
                vec!["mutual_exclusion".into()]
            },
            replay: format!("locksim run {row}--{profile}.toml --seed {seed}"),
        })
        .collect();
    CellSummary {
        protocol: row.into(),
        profile: profile.into(),
        runs: n,
        damage: Share::of(harm, n),
        latent: Share::of(0, n),
        harm: Share::of(harm, n),
        overlap: Share::of(overlap, n),
        failing,
        ..CellSummary::default()
    }
}

fn search(row: &str, profile: &str, wanted: Measure, found: bool) -> CellSearch {
    CellSearch {
        protocol: row.into(),
        profile: profile.into(),
        wanted: wanted.name().into(),
        budget: "16 cases".into(),
        runs: 16,
        found: found.then(|| FoundSchedule {
            failure: "lost_update".into(),
            faults: vec!["pause c1 at before_write for 3000 ms".into()],
            replay: format!("locksim run search/{row}.toml"),
        }),
        ..CellSearch::default()
    }
}

fn comparison(cells: Vec<CellSummary>, searches: Vec<CellSearch>) -> Comparison {
    let labels = ["plain", "fenced", "slow"];
    Comparison {
        protocols: labels
            .iter()
            .map(|l| (l.to_string(), String::new()))
            .collect(),
        profiles: ["none", "client-pauses", "mixed"]
            .iter()
            .map(|p| (p.to_string(), String::new()))
            .collect(),
        rows: vec![
            row("plain", "none", 2.0),
            row("fenced", "fencing", 2.5),
            Row {
                setup: Setup {
                    protocol: "q".into(),
                    ..row("slow", "none", 9.0).setup
                },
                ..row("slow", "none", 9.0)
            },
        ],
        cells,
        searches,
        ..Comparison::default()
    }
}

fn decisions(c: &Comparison, requirement: &str) -> Vec<Decision> {
    let t = table(c);
    let r = t
        .iter()
        .find(|r| r.requirement.contains(requirement))
        .unwrap();
    r.decisions.clone()
}

fn grades(c: &Comparison, requirement: &str) -> Vec<Grade> {
    decisions(c, requirement)
        .iter()
        .map(|d| d.grade.unwrap())
        .collect()
}

/// Every row runs clean under every profile but "plain" under pauses with `harm` of 100.
fn cells(harm: u64) -> Vec<CellSummary> {
    let mut cells = vec![];
    for r in ["plain", "fenced", "slow"] {
        for p in ["none", "client-pauses", "mixed"] {
            let h = if (r, p) == ("plain", "client-pauses") {
                harm
            } else {
                0
            };
            cells.push(cell(r, p, h, 0, 100));
        }
    }
    cells
}

fn searched_clean() -> Vec<CellSearch> {
    let mut all = vec![];
    for r in ["plain", "fenced", "slow"] {
        for p in ["client-pauses", "mixed"] {
            all.push(search(r, p, Measure::Harm, false));
        }
        all.push(search(r, "mixed", Measure::Overlap, false));
    }
    all
}

#[test]
fn a_known_schedule_is_never_graded_safe_however_rare() {
    // Random pauses broke "plain" in 3 of 100 runs: a schedule (its seed) and a share.
    let c = comparison(cells(3), searched_clean());
    let d = &decisions(&c, "clients may stop")[0];
    assert_eq!(d.grade, Some(Grade::Breaks));
    let known = d.schedule.as_ref().unwrap();
    assert!(known.schedule.replay.contains("--seed 1"), "{known:?}");
    assert_eq!(d.share, Some(Share::of(3, 100)));
    // No random run broke it, but a search did: it can break (rarely), not ✔.
    let mut searches = searched_clean();
    searches[0] = search("plain", "client-pauses", Measure::Harm, true);
    let c = comparison(cells(0), searches);
    let d = &decisions(&c, "clients may stop")[0];
    assert_eq!(d.grade, Some(Grade::CanBreakRarely));
    assert!(
        d.evidence.contains("fault search of plain"),
        "{}",
        d.evidence
    );
    assert!(
        d.evidence.contains("replay: locksim run search/plain.toml"),
        "{}",
        d.evidence
    );
    assert!(!d.fits(0.0), "◐ does not meet \"never\"");
    // Nothing anywhere: ✔, naming the budget and the upper bound.
    let c = comparison(cells(0), searched_clean());
    let d = &decisions(&c, "clients may stop")[0];
    assert_eq!(d.grade, Some(Grade::NoBreakFound));
    assert!(
        d.evidence.contains("16 cases") && d.evidence.contains("upper bound 4%"),
        "{}",
        d.evidence
    );
    // Without the search the cell was not exercised, whatever the share says.
    let c = comparison(cells(0), vec![]);
    assert_eq!(grades(&c, "clients may stop")[0], Grade::NotExercised);
}

#[test]
fn a_story_of_the_rows_configuration_with_the_requirements_faults_is_a_schedule() {
    let story = |name: &str, guard: &str, kinds: &[&str]| locksim_reports::CatalogEntry {
        name: name.into(),
        setup: Setup {
            protocol: "p".into(),
            guard: guard.into(),
            ..Setup::default()
        },
        fault_kinds: kinds.iter().map(|k| k.to_string()).collect(),
        outcome: cell("p", name, 5, 5, 5),
        ..locksim_reports::CatalogEntry::default()
    };
    let mut c = comparison(cells(0), searched_clean());
    // A story with a partition too is not one of pauses alone; a fenced story that still
    // broke bears on the unguarded row.
    c.catalog = vec![
        story("pause-and-partition", "none", &["pause", "partition"]),
        story("fenced-pause", "fencing", &["pause"]),
    ];
    let d = decisions(&c, "clients may stop");
    assert_eq!(d[0].grade, Some(Grade::CanBreakRarely));
    let source = &d[0].schedule.as_ref().unwrap().source;
    assert!(
        source.starts_with("catalog story fenced-pause (with fencing"),
        "{source}"
    );
    assert_eq!(
        d[1].grade,
        Some(Grade::CanBreakRarely),
        "the fenced row's own story"
    );
    let never = decisions(&c, "never reach");
    assert!(never[0]
        .schedule
        .as_ref()
        .unwrap()
        .source
        .contains("pause-and-partition"));
    // Cells a story or a run already breaks need no search; the others do.
    let needed = searches_needed(&c);
    assert!(!needed.contains(&("plain".into(), "client-pauses".into(), Measure::Harm)));
    assert!(needed.contains(&("slow".into(), "client-pauses".into(), Measure::Harm)));
}

#[test]
fn a_tolerated_share_is_graded_by_its_interval_and_undecided_when_it_straddles() {
    let mut cs = cells(0);
    let at = |cs: &[CellSummary], r: &str| {
        cs.iter()
            .position(|x| x.protocol == r && x.profile == "mixed")
            .unwrap()
    };
    let (plain, fenced, slow) = (at(&cs, "plain"), at(&cs, "fenced"), at(&cs, "slow"));
    cs[plain] = cell("plain", "mixed", 0, 30, 100); // 30% (22–40%): above 10%
    cs[fenced] = cell("fenced", "mixed", 0, 8, 100); // 8% (4–15%): straddles
    cs[slow] = cell("slow", "mixed", 0, 4, 400); // 1% (0.4–2.5%): below
    let c = comparison(cs, searched_clean());
    assert_eq!(
        grades(&c, "idempotent"),
        [Grade::Breaks, Grade::Undecided, Grade::CanBreakRarely]
    );
    assert_eq!(
        decisions(&c, "idempotent")[1].word(),
        "? undecided at 100 runs"
    );
    assert!(decisions(&c, "idempotent")[2].fits(RARE_OVERLAP));
    assert_eq!(
        grades(&c, "latency"),
        [Grade::Fast, Grade::Fast, Grade::Slower]
    );
}

#[test]
fn an_unguarded_row_that_breaks_names_its_guarded_sibling_and_the_bottom_line_follows() {
    let c = comparison(cells(3), searched_clean());
    let d = &decisions(&c, "clients may stop")[0];
    assert_eq!(d.with_guard, Some(("fencing".into(), "fenced".into())));
    assert_eq!(d.word(), "✘ breaks (✔ with fencing)");
    let bottom = bottom_line(&c);
    assert_eq!(bottom[0].0, "must never double-write");
    assert!(
        bottom[0]
            .1
            .starts_with("fenced (careful client) (no break found, 4% of runs at most)"),
        "{bottom:?}"
    );
    let rare = bottom.iter().find(|(n, _)| n.contains("latency")).unwrap();
    assert!(
        rare.1.starts_with("plain") && !rare.1.contains("slow"),
        "{rare:?}"
    );
}

#[test]
fn column_groups_keep_a_protocols_rows_together_and_fit_the_width() {
    let labels = [
        "single/a",
        "single/b",
        "single+f",
        "repl",
        "repl+w",
        "redlock",
        "redlock+f",
        "etcd",
        "zk",
    ];
    assert_eq!(column_groups(&labels, 5), [0..5, 5..9]);
    assert_eq!(column_groups(&labels, 3), [0..3, 3..5, 5..8, 8..9]);
    let all = column_groups(&labels, 9);
    assert_eq!(
        (all.len(), all[0].clone()),
        (1, 0..9),
        "one group holds all"
    );
    // A protocol with more rows than fit is cut; the rest still packs.
    assert_eq!(column_groups(&labels[..3], 2), [0..2, 2..3]);
    assert_eq!(column_groups(&[], 4), Vec::<std::ops::Range<usize>>::new());
}
