//! `compare`'s fault searches: a cell that no run and no catalog story already breaks is
//! searched for a schedule that does, within a small stated budget (cases and shrink steps,
//! each a simulated run: never wall-clock, so the same compare finds the same schedules,
//! sharded or not). A found schedule is saved as a scenario under `OUT/search/` and replays
//! with `locksim run`. Which cells, and what counts as found, is the decision table's
//! business (`locksim_reports::decide::searches_needed`).

use anyhow::Context;
use locksim_reports::decide::{searches_needed, Measure};
use locksim_reports::{CellSearch, Comparison, FoundSchedule};
use locksim_scenarios::search::{counterexample, describe_fault, search, Failure, SearchOptions};
use locksim_scenarios::Prepared;
use locksim_sim::Property;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Cases each cell's search tries.
pub const SEARCH_CASES: u32 = 16;

/// Shrink steps each found schedule may take (a shorter schedule reads better; it breaks
/// the row either way).
pub const SEARCH_SHRINK_STEPS_MAX: u32 = 40;

/// The budget of one cell's search.
pub fn options(measure: Measure) -> SearchOptions {
    let wanted = match measure {
        Measure::Harm => vec![Property::LostUpdate, Property::Fencing],
        Measure::Overlap => vec![Property::MutualExclusion],
    };
    SearchOptions {
        cases: SEARCH_CASES,
        seed: 0,
        shrink_steps_max: SEARCH_SHRINK_STEPS_MAX,
        wanted: wanted.into_iter().map(Failure::Violation).collect(),
        ..SearchOptions::default()
    }
}

fn budget(o: &SearchOptions) -> String {
    format!(
        "{} cases of 1–{} faults from the profile (named points included), shrunk in ≤ {} \
         steps, search seed {}",
        o.cases, o.faults_max, o.shrink_steps_max, o.seed
    )
}

/// Searches every cell the decision table needs searched, on `threads` threads; the results
/// are in the order of [`searches_needed`], whatever the threads do. `cell` gives a cell's
/// prepared scenario by (row, profile).
pub fn searches<'a>(
    c: &Comparison,
    cell: impl Fn(&str, &str) -> Option<&'a Prepared> + Sync,
    out: &Path,
    threads: usize,
) -> anyhow::Result<Vec<CellSearch>> {
    let needed = searches_needed(c);
    let dir = out.join("search");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, anyhow::Result<CellSearch>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((row, profile, measure)) = needed.get(i) else {
                            return mine;
                        };
                        mine.push((i, one(row, profile, *measure, cell(row, profile), &dir)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a search thread does not panic"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// One cell's search.
fn one(
    row: &str,
    profile: &str,
    measure: Measure,
    prepared: Option<&Prepared>,
    dir: &Path,
) -> anyhow::Result<CellSearch> {
    let o = options(measure);
    let mut s = CellSearch {
        protocol: row.into(),
        profile: profile.into(),
        wanted: measure.name().into(),
        budget: budget(&o),
        ..CellSearch::default()
    };
    let Some(prepared) = prepared else {
        s.skipped = "the cell did not run".into();
        return Ok(s);
    };
    if !prepared.scenario.faults_random.is_active() {
        s.skipped = "the profile has no faults".into();
        return Ok(s);
    }
    let outcome = match search(prepared, &o, |_| {}) {
        Ok(outcome) => outcome,
        Err(e) => {
            s.skipped = e.to_string();
            return Ok(s);
        }
    };
    s.runs = outcome.runs;
    let Some(found) = outcome.found else {
        return Ok(s);
    };
    let name = format!("{}--{}", prepared.scenario.name, measure.name());
    let faults: Vec<String> = found.schedule.faults.iter().map(describe_fault).collect();
    let about = format!(
        "Found by compare's fault search of {row} under {profile} ({}): {}.",
        s.budget,
        faults.join("; ")
    );
    let scenario = counterexample(prepared, &found.schedule, found.failure, &name, &about);
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, toml::to_string(&scenario)?)
        .with_context(|| format!("cannot write {}", file.display()))?;
    s.found = Some(FoundSchedule {
        failure: found.failure.to_string(),
        faults,
        replay: format!("locksim run {}", file.display()),
    });
    Ok(s)
}
