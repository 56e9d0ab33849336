//! The decision table: rows are requirements a reader brings, columns are the matrix's rows,
//! and every answer is derived from measured cells, with the cell and its interval as
//! evidence. Nothing here is written by hand about a protocol.
//!
//! The rules:
//! - A safety requirement ("never", "safe if a server crashes", …) is met where no run of the
//!   cells it reads did damage and none broke fencing's guarantee (latent): a latent break is
//!   damage waiting for an overlap. "Never" reads every profile and also the catalog stories
//!   that apply to the row: a scripted story that does damage shows it can happen. A row
//!   without fencing or compare-and-set that fails, while its sibling with one (same
//!   protocol and settings) meets, says so: "only with fencing".
//! - "A rare double execution is acceptable": met where two clients were inside at once in
//!   at most [`RARE_OVERLAP`] of runs under the reference profile (`mixed`; the share itself,
//!   not its interval).
//! - "Lowest latency": met within [`FAST_FACTOR`] × the fastest row's uncontended median.

use crate::stats::pct;
use crate::{CellSummary, Comparison, Setup};

/// The largest share of runs with overlap that still counts as rare.
pub const RARE_OVERLAP: f64 = 0.10;

/// How far above the fastest uncontended median a row still counts as among the fastest.
pub const FAST_FACTOR: f64 = 1.5;

/// What a requirement reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// No damage and no latent break in any profile.
    SafeEverywhere,
    /// No damage and no latent break under this profile.
    SafeUnder(&'static str),
    /// Overlap in at most [`RARE_OVERLAP`] of runs under the reference profile.
    RareOverlap,
    /// Uncontended median within [`FAST_FACTOR`] of the fastest row's.
    Fastest,
}

/// The requirements, in table order.
const REQUIREMENTS: [(&str, Rule); 6] = [
    (
        "a double write must never reach my data",
        Rule::SafeEverywhere,
    ),
    (
        "a rare double execution is acceptable (idempotent work)",
        Rule::RareOverlap,
    ),
    (
        "must stay safe if a server crashes",
        Rule::SafeUnder("server-crashes"),
    ),
    (
        "clients may stop for seconds (GC, VM migration)",
        Rule::SafeUnder("client-pauses"),
    ),
    (
        "clock jumps happen on my servers",
        Rule::SafeUnder("clock-jumps"),
    ),
    ("lowest latency", Rule::Fastest),
];

/// One answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The row meets the requirement.
    Meets,
    /// It does not.
    Fails,
    /// It does not, but its sibling with this guard (`fencing` or `cas`) does: the row
    /// labelled so.
    OnlyWith {
        /// The sibling's guard.
        guard: String,
        /// The sibling's label.
        row: String,
    },
}

/// An answer with its evidence: the cell and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The answer.
    pub answer: Answer,
    /// The evidence, in words (the cell, the share and its interval).
    pub evidence: String,
}

impl Decision {
    /// The answer in a word or three.
    pub fn word(&self) -> String {
        match &self.answer {
            Answer::Meets => "meets".into(),
            Answer::Fails => "fails".into(),
            Answer::OnlyWith { guard, .. } => format!("only with {guard}"),
        }
    }
}

/// A requirement's row of the table: its text and one decision per matrix row.
pub type RequirementRow = (String, Vec<Decision>);

/// The decision table; requirements the matrix cannot answer (a profile it lacks, no costs)
/// are left out.
pub fn table(c: &Comparison) -> Vec<RequirementRow> {
    REQUIREMENTS
        .iter()
        .filter(|(_, rule)| answerable(c, *rule))
        .map(|(text, rule)| {
            let first: Vec<Decision> = c
                .protocols
                .iter()
                .map(|(r, _)| judge(c, *rule, r))
                .collect();
            let decisions = c
                .protocols
                .iter()
                .zip(&first)
                .map(|((row, _), d)| with_sibling(c, row, d, &first))
                .collect();
            (text.to_string(), decisions)
        })
        .collect()
}

fn answerable(c: &Comparison, rule: Rule) -> bool {
    match rule {
        Rule::SafeUnder(p) => c.profiles.iter().any(|(x, _)| x == p),
        Rule::Fastest => fastest_ms(c).is_some(),
        Rule::SafeEverywhere | Rule::RareOverlap => !c.cells.is_empty(),
    }
}

fn setup_of<'a>(c: &'a Comparison, row: &str) -> Option<&'a Setup> {
    c.row(row).map(|r| &r.setup)
}

/// A failing unguarded row whose guarded sibling meets: "only with" that guard.
fn with_sibling(c: &Comparison, row: &str, d: &Decision, first: &[Decision]) -> Decision {
    let unguarded = setup_of(c, row).is_some_and(|s| s.guard == "none");
    if d.answer != Answer::Fails || !unguarded {
        return d.clone();
    }
    let me = setup_of(c, row).expect("checked above");
    let sibling = c.protocols.iter().zip(first).find(|((other, _), o)| {
        o.answer == Answer::Meets
            && setup_of(c, other).is_some_and(|s| s.guard != "none" && s.siblings(me))
    });
    match sibling {
        Some(((other, _), o)) => Decision {
            answer: Answer::OnlyWith {
                guard: setup_of(c, other).expect("found").guard.clone(),
                row: other.clone(),
            },
            evidence: format!("{}; with it ({other}): {}", d.evidence, o.evidence),
        },
        None => d.clone(),
    }
}

fn judge(c: &Comparison, rule: Rule, row: &str) -> Decision {
    let cells: Vec<&CellSummary> = c.cells.iter().filter(|x| x.protocol == row).collect();
    match rule {
        Rule::SafeEverywhere => {
            let told = crate::verdict::stories(c, row);
            let broken = told.iter().find(|e| e.outcome.harm.k > 0);
            match broken {
                Some(e) => Decision {
                    answer: Answer::Fails,
                    evidence: format!(
                        "catalog story {}: damage {}/{}, latent {}/{}",
                        e.name,
                        e.outcome.damage.k,
                        e.outcome.damage.n,
                        e.outcome.latent.k,
                        e.outcome.latent.n
                    ),
                },
                None => safe(&cells),
            }
        }
        Rule::SafeUnder(p) => safe(
            &cells
                .into_iter()
                .filter(|x| x.profile == p)
                .collect::<Vec<_>>(),
        ),
        Rule::RareOverlap => {
            let reference = c.reference_profile().unwrap_or_default();
            rare_overlap(
                &cells
                    .into_iter()
                    .filter(|x| x.profile == reference)
                    .collect::<Vec<_>>(),
            )
        }
        Rule::Fastest => fast(c, row),
    }
}

/// Met where no cell had damage or a latent break; the evidence is the worst cell, or the
/// bound of the safest claim.
fn safe(cells: &[&CellSummary]) -> Decision {
    let worst = cells
        .iter()
        .max_by(|a, b| a.damage.k.cmp(&b.damage.k).then(a.harm.k.cmp(&b.harm.k)));
    let Some(worst) = worst.filter(|w| w.harm.k > 0) else {
        let runs: u64 = cells.iter().map(|x| x.harm.n).sum();
        let bound = cells.iter().map(|x| x.damage.hi).fold(0.0, f64::max);
        let what = match cells {
            [one] => one.profile.clone(),
            _ => format!("{} profiles", cells.len()),
        };
        return Decision {
            answer: if runs > 0 {
                Answer::Meets
            } else {
                Answer::Fails
            },
            evidence: format!(
                "no damage in {runs} runs under {what} (≤ {} per profile, 95%)",
                pct(bound)
            ),
        };
    };
    let mut evidence = format!("{}: damage {}", worst.profile, worst.damage.text());
    if worst.latent.k > 0 {
        evidence += &format!(", latent {}", worst.latent.text());
    }
    Decision {
        answer: Answer::Fails,
        evidence,
    }
}

fn rare_overlap(cells: &[&CellSummary]) -> Decision {
    let worst = cells
        .iter()
        .max_by(|a, b| a.overlap.rate().total_cmp(&b.overlap.rate()));
    let Some(w) = worst else {
        return Decision {
            answer: Answer::Fails,
            evidence: "no runs".into(),
        };
    };
    let rare = w.overlap.n > 0 && w.overlap.rate() <= RARE_OVERLAP;
    Decision {
        answer: if rare { Answer::Meets } else { Answer::Fails },
        evidence: format!("{}: overlap {}", w.profile, w.overlap.text()),
    }
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
    match mine {
        Some(cost) => Decision {
            answer: if cost.acquire_ms_p50 <= best * FAST_FACTOR {
                Answer::Meets
            } else {
                Answer::Fails
            },
            evidence: format!(
                "uncontended p50 {:.1} ms (fastest {best:.1} ms, {best_row})",
                cost.acquire_ms_p50
            ),
        },
        None => Decision {
            answer: Answer::Fails,
            evidence: "no uncontended acquire measured".into(),
        },
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

/// What the decision table's answers mean, in one line.
pub fn legend(c: &Comparison) -> String {
    format!(
        "Each answer is derived from the measured cells named in it (share of runs, 95% \
         interval). Safety rows: met where no run did damage (an acknowledged update lost, a \
         stale write accepted) and none broke fencing's guarantee (latent); \"only with \
         fencing/cas\": the same protocol and settings with that guard meets; \"never\" also \
         reads the catalog stories of the row's configuration. Rare double execution: overlap \
         in at most {} of runs under {}. Lowest latency: uncontended median within \
         {FAST_FACTOR}× the fastest.",
        pct(RARE_OVERLAP),
        c.reference_profile().unwrap_or("the last profile")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Cost;
    use crate::stats::Share;
    use crate::{Row, Setup};

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

    /// A cell with `damage` and `latent` runs of 100 and `overlap` runs.
    fn cell(row: &str, profile: &str, damage: u64, latent: u64, overlap: u64) -> CellSummary {
        CellSummary {
            protocol: row.into(),
            profile: profile.into(),
            runs: 100,
            damage: Share::of(damage, 100),
            latent: Share::of(latent, 100),
            harm: Share::of(damage + latent, 100),
            overlap: Share::of(overlap, 100),
            ..CellSummary::default()
        }
    }

    fn comparison(cells: Vec<CellSummary>) -> Comparison {
        let labels = ["plain", "fenced", "slow"];
        Comparison {
            protocols: labels
                .iter()
                .map(|l| (l.to_string(), String::new()))
                .collect(),
            profiles: ["none", "server-crashes"]
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
            ..Comparison::default()
        }
    }

    fn answers(c: &Comparison, requirement: &str) -> Vec<Answer> {
        let t = table(c);
        let (_, d) = t.iter().find(|(r, _)| r.contains(requirement)).unwrap();
        d.iter().map(|d| d.answer.clone()).collect()
    }

    #[test]
    fn every_answer_follows_from_the_cells() {
        let mut cells = vec![];
        for r in ["plain", "fenced", "slow"] {
            cells.push(cell(r, "none", 0, 0, 0));
        }
        cells.push(cell("plain", "server-crashes", 5, 0, 30));
        cells.push(cell("fenced", "server-crashes", 0, 0, 30));
        cells.push(cell("slow", "server-crashes", 2, 0, 3));
        let c = comparison(cells.clone());
        let only = Answer::OnlyWith {
            guard: "fencing".into(),
            row: "fenced".into(),
        };
        // A profile the matrix lacks is no requirement; one it has is answered per row.
        assert!(table(&c).iter().all(|(r, _)| !r.contains("clock jumps")));
        assert_eq!(
            answers(&c, "server crashes"),
            [only.clone(), Answer::Meets, Answer::Fails],
            "slow has no guarded sibling: it simply fails"
        );
        assert_eq!(
            answers(&c, "idempotent"),
            [Answer::Fails, Answer::Fails, Answer::Meets]
        );
        assert_eq!(
            answers(&c, "latency"),
            [Answer::Meets, Answer::Meets, Answer::Fails]
        );
        // A latent break fails a safety requirement too, and the evidence names it.
        cells[4] = cell("fenced", "server-crashes", 0, 40, 30);
        let c = comparison(cells);
        assert_eq!(answers(&c, "never reach")[1], Answer::Fails);
        let t = table(&c);
        let evidence = &t[0].1[1].evidence;
        assert!(evidence.contains("latent 40%"), "{evidence}");
        assert_eq!(
            answers(&c, "never reach")[0],
            Answer::Fails,
            "no sibling meets"
        );
    }

    #[test]
    fn never_also_reads_the_catalog_stories_of_the_rows_configuration() {
        let mut cells = vec![];
        for r in ["plain", "fenced", "slow"] {
            cells.push(cell(r, "none", 0, 0, 0));
            cells.push(cell(r, "server-crashes", 0, 0, 0));
        }
        let mut c = comparison(cells);
        assert_eq!(
            answers(&c, "never reach"),
            [Answer::Meets, Answer::Meets, Answer::Meets]
        );
        // A GC-pause story of the unguarded setup did damage; the fenced one only overlapped.
        let story = |name: &str, guard: &str, damage: u64| crate::CatalogEntry {
            name: name.into(),
            setup: Setup {
                protocol: "p".into(),
                guard: guard.into(),
                ..Setup::default()
            },
            outcome: CellSummary {
                damage: Share::of(damage, 5),
                harm: Share::of(damage, 5),
                overlap: Share::of(5, 5),
                ..CellSummary::default()
            },
            ..crate::CatalogEntry::default()
        };
        c.catalog = vec![
            story("gc-pause", "none", 5),
            story("gc-pause-fenced", "fencing", 0),
        ];
        let only = Answer::OnlyWith {
            guard: "fencing".into(),
            row: "fenced".into(),
        };
        assert_eq!(
            answers(&c, "never reach"),
            [only, Answer::Meets, Answer::Meets]
        );
        let t = table(&c);
        assert!(
            t[0].1[0]
                .evidence
                .contains("catalog story gc-pause: damage 5/5"),
            "{t:?}"
        );
        // The story is not about a server crash: that requirement reads its cell only.
        assert_eq!(answers(&c, "server crashes")[0], Answer::Meets);
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
}
