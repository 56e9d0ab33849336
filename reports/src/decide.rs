//! The decision table: rows are requirements a reader brings, columns are the matrix's rows,
//! and every answer is derived from measured cells, with its evidence and the command that
//! replays it. Nothing here is written by hand about a protocol.
//!
//! A safety requirement is graded from two kinds of evidence:
//! - *Can it break?* A known schedule that breaks the row under the requirement's faults: a
//!   run of the requirement's cells that did (its seed replays it), a catalog story of the
//!   row's configuration whose scripted faults are all of the requirement's kinds, or a
//!   schedule the fault search found in the cell within its stated budget
//!   ([`crate::CellSearch`]; [`searches_needed`] says which cells `compare` searches).
//! - *How often?* The share of the cell's random runs that broke (the worst cell, for a
//!   requirement that reads several), with its 95% interval.
//!
//! Each requirement states its tolerance, a share of runs: 0 for "never". The grades:
//! **✘ breaks** (a schedule is known and the share's lower bound is above the tolerance; for
//! tolerance 0, some run broke), **◐ can break, rarely** (a schedule is known and the share's
//! upper bound is below the tolerance; for tolerance 0, no random run broke), **✔ no break
//! found** (no schedule: no run broke, no story, and the search found none within its budget;
//! the share's upper bound below the tolerance), else **undecided at N runs**; **cannot be
//! exercised** where the profile gives the search nothing to try on the row. "Rarely under
//! random faults" is never printed as safe.

use crate::stats::{pct, Share};
use crate::{CatalogEntry, CellSummary, Comparison, FoundSchedule, Setup};
use serde::{Deserialize, Serialize};

/// The largest share of runs with overlap that still counts as rare.
pub const RARE_OVERLAP: f64 = 0.10;

/// How far above the fastest uncontended median a row still counts as among the fastest.
pub const FAST_FACTOR: f64 = 1.5;

/// What breaks a requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Harm: damage (an update lost, a stale write accepted) or fencing's guarantee broken.
    Harm,
    /// Overlap: two clients inside at once.
    Overlap,
}

impl Measure {
    /// Its name, as [`crate::CellSearch::wanted`] says it.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Harm => "harm",
            Measure::Overlap => "overlap",
        }
    }

    fn share(self, cell: &CellSummary) -> Share {
        match self {
            Measure::Harm => cell.harm,
            Measure::Overlap => cell.overlap,
        }
    }

    fn seed_breaks(self, f: &crate::FailingSeed) -> bool {
        match self {
            Measure::Harm => f.harmed(),
            Measure::Overlap => f.kinds.iter().any(|k| k == "mutual_exclusion"),
        }
    }
}

/// Which cells of a row a requirement reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cells {
    /// Every profile.
    All,
    /// This profile only.
    Under(&'static str),
    /// The reference profile ([`Comparison::reference_profile`]).
    Reference,
}

/// What a requirement reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// Breaks measured by `measure` in `cells`, against `tolerance`; a catalog story bears
    /// on it when its scripted faults are all of `kinds` (empty: any).
    Safety {
        measure: Measure,
        cells: Cells,
        kinds: &'static [&'static str],
        tolerance: f64,
    },
    /// Uncontended median within [`FAST_FACTOR`] of the fastest row's.
    Fastest,
}

/// The requirements, in table order.
const REQUIREMENTS: [(&str, &str, Rule); 6] = [
    (
        "a double write must never reach my data",
        "never",
        Rule::Safety {
            measure: Measure::Harm,
            cells: Cells::All,
            kinds: &[],
            tolerance: 0.0,
        },
    ),
    (
        "a rare double execution is acceptable (idempotent work)",
        "rare",
        Rule::Safety {
            measure: Measure::Overlap,
            cells: Cells::Reference,
            kinds: &[],
            tolerance: RARE_OVERLAP,
        },
    ),
    (
        "must stay safe if a server crashes",
        "crash",
        Rule::Safety {
            measure: Measure::Harm,
            cells: Cells::Under("server-crashes"),
            kinds: &["crash"],
            tolerance: 0.0,
        },
    ),
    (
        "clients may stop for seconds (GC, VM migration)",
        "pause",
        Rule::Safety {
            measure: Measure::Harm,
            cells: Cells::Under("client-pauses"),
            kinds: &["pause"],
            tolerance: 0.0,
        },
    ),
    (
        "clock jumps happen on my servers",
        "clock",
        Rule::Safety {
            measure: Measure::Harm,
            cells: Cells::Under("clock-jumps"),
            kinds: &["clock_jump"],
            tolerance: 0.0,
        },
    ),
    ("lowest latency", "fast", Rule::Fastest),
];

/// A grade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grade {
    /// A schedule breaks it and random faults break it more often than tolerated.
    Breaks,
    /// A schedule breaks it; random faults break it less often than tolerated.
    CanBreakRarely,
    /// No schedule within the search budget; the share's upper bound below the tolerance.
    NoBreakFound,
    /// The interval straddles the tolerance at the cap.
    Undecided,
    /// The profile gives the search nothing to try on this row.
    NotExercised,
    /// Among the fastest.
    Fast,
    /// Slower than [`FAST_FACTOR`] × the fastest.
    Slower,
}

impl Grade {
    /// Its mark: ✘, ◐, ✔ or ?.
    pub fn mark(self) -> &'static str {
        match self {
            Grade::Breaks | Grade::Slower => "✘",
            Grade::CanBreakRarely => "◐",
            Grade::NoBreakFound | Grade::Fast => "✔",
            Grade::Undecided | Grade::NotExercised => "?",
        }
    }

    /// Its words.
    pub fn words(self) -> &'static str {
        match self {
            Grade::Breaks => "breaks",
            Grade::CanBreakRarely => "can break, rarely",
            Grade::NoBreakFound => "no break found",
            Grade::Undecided => "undecided",
            Grade::NotExercised => "cannot be exercised",
            Grade::Fast => "among the fastest",
            Grade::Slower => "slower",
        }
    }
}

/// A schedule known to break a row, with where it comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Known {
    /// Where from: `seed 3 of single-redis · client-pauses`, `catalog story NAME`, `fault
    /// search of … (budget)`.
    pub source: String,
    /// The schedule (its faults in words, or the property a seed violated).
    pub schedule: FoundSchedule,
}

/// One answer with its evidence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Decision {
    /// The row's label.
    pub row: String,
    /// The grade.
    pub grade: Option<Grade>,
    /// How often: the share of runs that broke, in the cell named by `profile`.
    pub share: Option<Share>,
    /// The profile of that cell.
    pub profile: String,
    /// A schedule known to break the row under the requirement's faults.
    pub schedule: Option<Known>,
    /// The search budget that found nothing (for ✔), in words.
    pub searched: String,
    /// Where the row fails and its sibling with a guard does not: the guard and the row.
    pub with_guard: Option<(String, String)>,
    /// The evidence, in words.
    pub evidence: String,
}

impl Decision {
    /// The grade in a mark and a few words (`undecided at 400 runs`).
    pub fn word(&self) -> String {
        let Some(g) = self.grade else {
            return String::new();
        };
        let mut w = format!("{} {}", g.mark(), g.words());
        if g == Grade::Undecided {
            w += &format!(" at {} runs", self.share.map_or(0, |s| s.n));
        }
        if let Some((guard, _)) = &self.with_guard {
            w += &format!(" (✔ with {guard})");
        }
        w
    }

    /// Whether the row fits the requirement: ✔, or ◐ where the tolerance is above 0.
    pub fn fits(&self, tolerance: f64) -> bool {
        match self.grade {
            Some(Grade::NoBreakFound | Grade::Fast) => true,
            Some(Grade::CanBreakRarely) => tolerance > 0.0,
            _ => false,
        }
    }
}

/// A requirement's row of the table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequirementRow {
    /// The requirement, in words.
    pub requirement: String,
    /// The requirement in a word, for narrow tables (`never`, `crash`, …).
    pub short: String,
    /// The share of runs it tolerates (0: never); `None` for latency.
    pub tolerance: Option<f64>,
    /// What it reads, in words.
    pub reads: String,
    /// One decision per matrix row, in matrix order.
    pub decisions: Vec<Decision>,
}

/// The decision table (what `report.json` carries, else derived now); requirements the
/// matrix cannot answer (a profile it lacks, no costs) are left out.
pub fn of(c: &Comparison) -> Vec<RequirementRow> {
    if c.decisions.is_empty() {
        table(c)
    } else {
        c.decisions.clone()
    }
}

/// Derives the decision table from the cells, the catalog and the searches.
pub fn table(c: &Comparison) -> Vec<RequirementRow> {
    REQUIREMENTS
        .iter()
        .filter(|(_, _, rule)| answerable(c, *rule))
        .map(|(text, short, rule)| {
            let first: Vec<Decision> = c
                .protocols
                .iter()
                .map(|(r, _)| judge(c, *rule, r))
                .collect();
            let decisions = first.iter().map(|d| with_sibling(c, d, &first)).collect();
            let (tolerance, reads) = match rule {
                Rule::Safety {
                    measure,
                    cells,
                    tolerance,
                    ..
                } => (Some(*tolerance), reads(c, *measure, *cells, *tolerance)),
                Rule::Fastest => (
                    None,
                    format!("uncontended median within {FAST_FACTOR}× the fastest"),
                ),
            };
            RequirementRow {
                requirement: text.to_string(),
                short: short.to_string(),
                tolerance,
                reads,
                decisions,
            }
        })
        .collect()
}

fn reads(c: &Comparison, measure: Measure, cells: Cells, tolerance: f64) -> String {
    let under = match cells {
        Cells::All => "every profile".to_string(),
        Cells::Under(p) => display_profile(p).to_string(),
        Cells::Reference => display_profile(c.reference_profile().unwrap_or_default()).into(),
    };
    let tolerated = if tolerance == 0.0 {
        "tolerance: never".to_string()
    } else {
        format!("tolerance: {} of runs", pct(tolerance))
    };
    format!("{} under {under}; {tolerated}", measure.name())
}

fn answerable(c: &Comparison, rule: Rule) -> bool {
    match rule {
        Rule::Safety {
            cells: Cells::Under(p),
            ..
        } => c.profiles.iter().any(|(x, _)| x == p),
        Rule::Fastest => fastest_ms(c).is_some(),
        Rule::Safety { .. } => !c.cells.is_empty(),
    }
}

fn setup_of<'a>(c: &'a Comparison, row: &str) -> Option<&'a Setup> {
    c.row(row).map(|r| &r.setup)
}

/// A row that does not fit, unguarded, whose guarded sibling (same protocol and settings)
/// finds no break: the answer names that sibling.
fn with_sibling(c: &Comparison, d: &Decision, first: &[Decision]) -> Decision {
    let unguarded = setup_of(c, &d.row).is_some_and(|s| s.guard == "none");
    let failing = matches!(d.grade, Some(Grade::Breaks | Grade::CanBreakRarely));
    if !failing || !unguarded {
        return d.clone();
    }
    let me = setup_of(c, &d.row).expect("checked above");
    let sibling = first.iter().find(|o| {
        o.grade == Some(Grade::NoBreakFound)
            && setup_of(c, &o.row).is_some_and(|s| s.guard != "none" && s.siblings(me))
    });
    let Some(o) = sibling else {
        return d.clone();
    };
    let guard = setup_of(c, &o.row).expect("found").guard.clone();
    Decision {
        with_guard: Some((guard, o.row.clone())),
        evidence: format!("{}; with it ({}): {}", d.evidence, o.row, o.evidence),
        ..d.clone()
    }
}

/// The cells of `row` that `cells` reads.
fn cells_of<'a>(c: &'a Comparison, cells: Cells, row: &str) -> Vec<&'a CellSummary> {
    let reference = c.reference_profile().unwrap_or_default();
    c.cells
        .iter()
        .filter(|x| x.protocol == row)
        .filter(|x| match cells {
            Cells::All => true,
            Cells::Under(p) => x.profile == p,
            Cells::Reference => x.profile == reference,
        })
        .collect()
}

/// The catalog stories of the row's configuration that break it by `measure` with scripted
/// faults all of `kinds` (any, if empty). A story of the same configuration with a guard
/// (fencing, compare-and-set) that still broke bears on the row without one: a guard only
/// rejects writes, so without it the same writes are accepted.
fn stories<'a>(
    c: &'a Comparison,
    row: &str,
    measure: Measure,
    kinds: &[&str],
) -> Vec<&'a CatalogEntry> {
    let Some(setup) = setup_of(c, row) else {
        return vec![];
    };
    let bears = |e: &&CatalogEntry| {
        e.setup.siblings(setup) && (e.setup.guard == setup.guard || setup.guard == "none")
    };
    let fits = |e: &&CatalogEntry| {
        kinds.is_empty() || e.fault_kinds.iter().all(|k| kinds.contains(&k.as_str()))
    };
    c.catalog
        .iter()
        .filter(bears)
        .filter(|e| measure.share(&e.outcome).k > 0)
        .filter(fits)
        .collect()
}

/// A schedule known to break `row` in these cells, or by a story: a failing seed first (it
/// is the cell's own), then a story, then a search's find.
fn known(
    c: &Comparison,
    measure: Measure,
    kinds: &[&str],
    cells: &[&CellSummary],
    searched: bool,
) -> Option<Known> {
    for cell in cells {
        if let Some(f) = cell.failing.iter().find(|f| measure.seed_breaks(f)) {
            return Some(Known {
                source: format!(
                    "seed {} of {} · {}",
                    f.seed,
                    cell.protocol,
                    display_profile(&cell.profile)
                ),
                schedule: FoundSchedule {
                    failure: f.kinds.join(", "),
                    faults: vec![format!("random {} faults", display_profile(&cell.profile))],
                    replay: f.replay.clone(),
                },
            });
        }
    }
    let row = cells.first().map(|x| x.protocol.as_str())?;
    if let Some(e) = stories(c, row, measure, kinds).first() {
        let replay = e
            .outcome
            .failing
            .first()
            .map_or(String::new(), |f| f.replay.clone());
        let guarded = match e.setup.guard.as_str() {
            "none" => String::new(),
            guard => format!(" (with {guard}, which did not stop it)"),
        };
        return Some(Known {
            source: format!("catalog story {}{guarded}", e.name),
            schedule: FoundSchedule {
                failure: format!(
                    "damage {}/{}, latent {}/{}, overlap {}/{}",
                    e.outcome.damage.k,
                    e.outcome.damage.n,
                    e.outcome.latent.k,
                    e.outcome.latent.n,
                    e.outcome.overlap.k,
                    e.outcome.overlap.n
                ),
                faults: e.fault_kinds.clone(),
                replay,
            },
        });
    }
    cells.iter().filter(|_| searched).find_map(|cell| {
        let s = search_of(c, measure, cell)?;
        let found = s.found.clone()?;
        Some(Known {
            source: format!(
                "fault search of {} · {} ({})",
                cell.protocol,
                display_profile(&cell.profile),
                s.budget
            ),
            schedule: found,
        })
    })
}

fn search_of<'a>(
    c: &'a Comparison,
    measure: Measure,
    cell: &CellSummary,
) -> Option<&'a crate::CellSearch> {
    c.searches.iter().find(|s| {
        s.protocol == cell.protocol && s.profile == cell.profile && s.wanted == measure.name()
    })
}

/// The cells `compare` should search, with what for: every cell a safety requirement reads
/// that no run or story of its kinds already breaks, in matrix order (`compare` records a
/// cell whose profile has no faults as skipped).
pub fn searches_needed(c: &Comparison) -> Vec<(String, String, Measure)> {
    let mut needed: Vec<(String, String, Measure)> = vec![];
    for (_, _, rule) in REQUIREMENTS {
        let Rule::Safety {
            measure,
            cells,
            kinds,
            ..
        } = rule
        else {
            continue;
        };
        for (row, _) in &c.protocols {
            for cell in cells_of(c, cells, row) {
                let key = (cell.protocol.clone(), cell.profile.clone(), measure);
                let broken = known(c, measure, kinds, &[cell], false);
                if broken.is_none() && !needed.contains(&key) {
                    needed.push(key);
                }
            }
        }
    }
    needed
}

fn judge(c: &Comparison, rule: Rule, row: &str) -> Decision {
    match rule {
        Rule::Safety {
            measure,
            cells,
            kinds,
            tolerance,
        } => {
            let cells = cells_of(c, cells, row);
            safety(c, row, measure, kinds, tolerance, &cells)
        }
        Rule::Fastest => fast(c, row),
    }
}

/// Whether the share is below the tolerance (for 0: no run broke).
fn below(share: &Share, tolerance: f64) -> bool {
    if tolerance == 0.0 {
        share.k == 0
    } else {
        share.hi < tolerance
    }
}

fn above(share: &Share, tolerance: f64) -> bool {
    if tolerance == 0.0 {
        share.k > 0
    } else {
        share.lo > tolerance
    }
}

fn safety(
    c: &Comparison,
    row: &str,
    measure: Measure,
    kinds: &[&str],
    tolerance: f64,
    cells: &[&CellSummary],
) -> Decision {
    let worst = cells.iter().max_by(|a, b| {
        let (x, y) = (measure.share(a), measure.share(b));
        x.k.cmp(&y.k).then(y.n.cmp(&x.n))
    });
    let Some(worst) = worst.filter(|w| measure.share(w).n > 0) else {
        return Decision {
            row: row.into(),
            grade: Some(Grade::NotExercised),
            evidence: "no runs".into(),
            ..Decision::default()
        };
    };
    let share = measure.share(worst);
    let how_often = format!(
        "{} {} under {}",
        measure.name(),
        share.text(),
        display_profile(&worst.profile)
    );
    let schedule = known(c, measure, kinds, cells, true);
    let (searched, unsearched) = searched_in(c, measure, cells);
    let (grade, evidence) = match &schedule {
        Some(k) if above(&share, tolerance) => (Grade::Breaks, breaks_text(k, &how_often)),
        Some(k) if below(&share, tolerance) => (Grade::CanBreakRarely, breaks_text(k, &how_often)),
        Some(k) => (Grade::Undecided, breaks_text(k, &how_often)),
        None if unsearched => (
            Grade::NotExercised,
            format!("{how_often}; the profile gives the fault search nothing to try on this row"),
        ),
        None if below(&share, tolerance) => (
            Grade::NoBreakFound,
            format!(
                "no schedule found by the fault search ({searched}); {how_often} (upper bound {})",
                pct(share.hi)
            ),
        ),
        None => (
            Grade::Undecided,
            format!("no schedule found ({searched}); {how_often}"),
        ),
    };
    Decision {
        row: row.into(),
        grade: Some(grade),
        share: Some(share),
        profile: worst.profile.clone(),
        searched: if schedule.is_none() {
            searched
        } else {
            String::new()
        },
        schedule,
        with_guard: None,
        evidence,
    }
}

/// What the fault search tried in `cells` (each searched cell's profile and budget), and
/// whether it tried nothing: a cell it could not search (its profile gives it no fault for
/// this row) leaves a requirement of that one cell unexercised.
fn searched_in(c: &Comparison, measure: Measure, cells: &[&CellSummary]) -> (String, bool) {
    let ran: Vec<&crate::CellSearch> = cells
        .iter()
        .filter_map(|x| search_of(c, measure, x))
        .filter(|s| s.skipped.is_empty())
        .collect();
    let unsearched = ran.is_empty() || (cells.len() == 1 && ran.len() < cells.len());
    let searched = ran
        .iter()
        .map(|s| format!("{}: {}", display_profile(&s.profile), s.budget))
        .collect::<Vec<_>>()
        .join("; ");
    (searched, unsearched)
}

fn breaks_text(k: &Known, how_often: &str) -> String {
    format!(
        "breaks by {} ({}); {how_often}; replay: {}",
        k.source, k.schedule.failure, k.schedule.replay
    )
}

/// The fastest row's uncontended median, in ms, with its label.
pub fn fastest_ms(c: &Comparison) -> Option<(f64, String)> {
    c.rows
        .iter()
        .filter_map(|r| {
            Some((
                r.cost.as_ref().filter(|x| x.measured())?.acquire_ms_p50,
                r.label.clone(),
            ))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

fn fast(c: &Comparison, row: &str) -> Decision {
    let (best, best_row) = fastest_ms(c).expect("answerable");
    let mine = c
        .row(row)
        .and_then(|r| r.cost.as_ref())
        .filter(|x| x.measured());
    let (grade, evidence) = match mine {
        Some(cost) => (
            if cost.acquire_ms_p50 <= best * FAST_FACTOR {
                Grade::Fast
            } else {
                Grade::Slower
            },
            format!(
                "uncontended p50 {:.1} ms (fastest {best:.1} ms, {best_row})",
                cost.acquire_ms_p50
            ),
        ),
        None => (Grade::Slower, "no uncontended acquire measured".into()),
    };
    Decision {
        row: row.into(),
        grade: Some(grade),
        evidence,
        ..Decision::default()
    }
}

/// The bottom line: per common need, the rows that fit it, derived from the decision
/// table, with each row's figure (the share of runs that broke and its interval) as
/// evidence; (need, answer) pairs.
pub fn bottom_line(c: &Comparison) -> Vec<(String, String)> {
    bottom_line_brief(c, usize::MAX)
}

/// [`bottom_line`] naming at most `rows_max` rows per need (those with the lowest upper
/// bound first) and how many more fit: the terminal's summary.
pub fn bottom_line_brief(c: &Comparison, rows_max: usize) -> Vec<(String, String)> {
    let t = of(c);
    let find = |needle: &str| t.iter().find(|r| r.requirement.contains(needle));
    fn fit(r: &RequirementRow) -> Vec<&Decision> {
        let tolerance = r.tolerance.unwrap_or(0.0);
        r.decisions.iter().filter(|d| d.fits(tolerance)).collect()
    }
    let mut lines = vec![];
    let needs = [
        ("must never double-write", "never reach"),
        ("servers crash", "server crashes"),
        (
            "clients stop for seconds (GC, VM migration)",
            "clients may stop",
        ),
        ("servers' clocks jump", "clock jumps"),
    ];
    for (need, needle) in needs {
        if let Some(r) = find(needle) {
            lines.push((need.to_string(), answer(c, r, &fit(r), rows_max)));
        }
    }
    if let (Some(rare), Some(fast)) = (find("idempotent"), find("latency")) {
        let quick: Vec<&str> = fit(fast).iter().map(|d| d.row.as_str()).collect();
        let both: Vec<&Decision> = fit(rare)
            .into_iter()
            .filter(|d| quick.contains(&d.row.as_str()))
            .collect();
        let need = "a rare double execution is fine and latency matters";
        lines.insert(1, (need.to_string(), answer(c, rare, &both, rows_max)));
    }
    lines
}

/// The rows that fit, each with its figure (at most `rows_max`, the lowest upper bounds
/// first, and how many more); or, where none does, what the rows show.
fn answer(c: &Comparison, r: &RequirementRow, fits: &[&Decision], rows_max: usize) -> String {
    if fits.is_empty() {
        let breaks = r
            .decisions
            .iter()
            .filter(|d| d.grade == Some(Grade::Breaks))
            .count();
        let rarely = r
            .decisions
            .iter()
            .filter(|d| d.grade == Some(Grade::CanBreakRarely));
        return format!(
            "no row of the matrix ({breaks} of {} break, {} can break rarely; {})",
            r.decisions.len(),
            rarely.count(),
            r.reads
        );
    }
    let mut shown = fits.to_vec();
    if shown.len() > rows_max {
        shown.sort_by(|a, b| {
            let hi = |d: &Decision| d.share.map_or(f64::INFINITY, |s| s.hi);
            hi(a).total_cmp(&hi(b))
        });
        shown.truncate(rows_max);
    }
    let mut rows: Vec<String> = shown
        .iter()
        .map(|d| match d.share {
            Some(s) => format!(
                "{} ({}, {} of runs at most)",
                display_row(c, &d.row),
                d.grade.map_or("", Grade::words),
                pct(s.hi)
            ),
            None => display_row(c, &d.row),
        })
        .collect();
    if fits.len() > shown.len() {
        let more = fits.len() - shown.len();
        rows.push(format!(
            "and {more} more {}",
            if more == 1 { "row" } else { "rows" }
        ));
    }
    format!("{} [{}]", rows.join("; "), r.reads)
}

/// The profile without faults, as the reports name it.
pub const NO_FAULTS: &str = "no faults";

/// A profile's label as the decision table and the bottom line show it: `none` is "no
/// faults" (so "safe under none" cannot read as "never safe").
pub fn display_profile(label: &str) -> &str {
    if label == "none" {
        NO_FAULTS
    } else {
        label
    }
}

/// A row's label as the decision table and the bottom line show it: a row on the
/// protocol's default client (no `client` key) says so, `(careful client)`: the client that
/// checks its lease before every write.
pub fn display_row(c: &Comparison, label: &str) -> String {
    match setup_of(c, label) {
        Some(s) if !s.protocol.is_empty() && !s.keys.contains_key("client") => {
            format!("{label} (careful client)")
        }
        _ => label.to_string(),
    }
}

/// A row's protocol: its label's part before the first `/` or `+`.
fn family(label: &str) -> &str {
    label.split(['/', '+']).next().unwrap_or(label)
}

/// At most this many of the matrix's rows side by side in one decision table: more would
/// make a reader scroll sideways away from the requirement each answer belongs to.
pub const MAX_COLUMNS: usize = 7;

/// The matrix's rows cut into the column groups of the decision table, in order: a
/// protocol's rows (its labels' part before the first `/` or `+`) stay together, and
/// neighbouring protocols share a group while it has at most `max` columns; a protocol with
/// more rows than that is cut into groups of `max`.
pub fn column_groups(labels: &[&str], max: usize) -> Vec<std::ops::Range<usize>> {
    assert!(max > 0, "a group has at least one column");
    let mut families: Vec<std::ops::Range<usize>> = vec![];
    for (i, l) in labels.iter().enumerate() {
        match families.last_mut() {
            Some(f) if family(labels[f.start]) == family(l) && f.len() < max => f.end = i + 1,
            _ => families.push(i..i + 1),
        }
    }
    let mut groups: Vec<std::ops::Range<usize>> = vec![];
    for f in families {
        match groups.last_mut() {
            Some(g) if g.len() + f.len() <= max => g.end = f.end,
            _ => groups.push(f),
        }
    }
    groups
}

/// What the decision table's answers mean, in one paragraph (beside the table).
pub fn legend(c: &Comparison) -> String {
    format!(
        "Each safety answer weighs two kinds of evidence. Can it break? A schedule known to \
         break the row under the requirement's faults: a run of its cells that did, a catalog \
         story of the row's configuration with only those faults, or a schedule the fault \
         search found in the cell within the budget stated. How often? The share of the \
         cell's random runs that broke, with its 95% interval (the worst cell where several \
         are read). Harm: damage (an acknowledged update lost, a stale write accepted) or \
         fencing's guarantee broken (a token reused); overlap: two clients inside at once. \
         ✘ breaks: a schedule is known and the share's lower bound is above the tolerance \
         (for \"never\": some run broke). ◐ can break, rarely: a schedule is known and the \
         share's upper bound is below the tolerance (for \"never\": no random run broke; \
         still a break). ✔ no break found: no schedule within the search budget, upper bound \
         below the tolerance. \"(✔ with fencing)\": the same protocol and settings with that \
         guard finds no break. Rare double execution: overlap under {} in at most {} of runs. \
         Lowest latency: uncontended median within {FAST_FACTOR}× the fastest.",
        display_profile(c.reference_profile().unwrap_or("the last profile")),
        pct(RARE_OVERLAP),
    )
}
