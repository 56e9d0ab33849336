//! Reports for locksim: aggregate run results into a comparison (protocol × fault profile),
//! and render it as Markdown, JSON, or a self-contained HTML page with plots and a timeline
//! of each counterexample.
//!
//! Reports read run results and histories only, never protocol internals. Aggregation is
//! streaming ([`CellAccumulator`]): a sweep of any length folds into a fixed-size summary.

pub mod html;
pub mod markdown;
pub mod timeline;

use locksim_scenarios::sweep::SeedResult;
use locksim_scenarios::{RunResult, Stats};
use locksim_sim::{History, Property, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many failing seeds a cell remembers (with their replay commands).
pub const FAILING_SEEDS_KEPT: usize = 5;

/// The figures of one cell of the matrix: one protocol under one fault profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// The protocol (or protocol configuration) label.
    pub protocol: String,
    /// The fault profile label.
    pub profile: String,
    /// Runs in the cell.
    pub runs: u64,
    /// Runs with at least one violation of each property, by property name.
    pub runs_violating: BTreeMap<String, u64>,
    /// Runs whose verdict was `invalid`.
    pub runs_invalid: u64,
    /// Runs whose verdict was `unknown`.
    pub runs_unknown: u64,
    /// Runs that did not complete (a panic in a model).
    pub runs_error: u64,
    /// The first failing seeds, with the commands that replay them.
    pub failing: Vec<FailingSeed>,
    /// Mean acquisitions per run.
    pub acquisitions_mean: f64,
    /// Mean over runs of each run's median acquire latency, in ms.
    pub acquire_latency_ms_p50_mean: f64,
    /// Largest time anyone wanted the lock while it was free, over all runs, in ms.
    pub wanted_free_ms_max: f64,
    /// Mean simulated ms per run.
    pub sim_ms_mean: f64,
}

/// A failing run, to replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingSeed {
    /// The seed.
    pub seed: u64,
    /// The violated properties.
    pub kinds: Vec<String>,
    /// The replay command.
    pub replay: String,
}

impl CellSummary {
    /// Share of runs that violated `property`, in [0, 1].
    pub fn rate(&self, property: Property) -> f64 {
        if self.runs == 0 {
            return 0.0;
        }
        self.runs_violating
            .get(property.name())
            .copied()
            .unwrap_or(0) as f64
            / self.runs as f64
    }

    /// Share of runs with any violation.
    pub fn invalid_rate(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.runs_invalid as f64 / self.runs as f64
        }
    }
}

/// What the accumulator needs of a run, whether from a [`RunResult`] or a sweep line.
struct Outcome<'a> {
    seed: u64,
    verdict: Verdict,
    violation_counts: &'a BTreeMap<Property, u64>,
    stats: &'a Stats,
    error: Option<&'a str>,
    replay: &'a str,
}

/// Folds run results into a [`CellSummary`] in constant memory.
#[derive(Clone, Debug, Default)]
pub struct CellAccumulator {
    summary: CellSummary,
    acquisitions: u64,
    latency_p50_us: u64,
    sim_ms: u64,
    completed: u64,
}

impl CellAccumulator {
    /// An empty cell.
    pub fn new(protocol: &str, profile: &str) -> Self {
        CellAccumulator {
            summary: CellSummary {
                protocol: protocol.into(),
                profile: profile.into(),
                ..CellSummary::default()
            },
            ..Self::default()
        }
    }

    /// Adds one run.
    pub fn add(&mut self, r: &RunResult) {
        self.add_outcome(&Outcome {
            seed: r.seed,
            verdict: r.verdict,
            violation_counts: &r.violation_counts,
            stats: &r.stats,
            error: r.error.as_deref(),
            replay: &r.replay,
        });
    }

    /// Adds one line of a sweep's results file; `replay` is the command that replays it.
    pub fn add_seed(&mut self, r: &SeedResult, replay: &str) {
        self.add_outcome(&Outcome {
            seed: r.seed,
            verdict: r.verdict,
            violation_counts: &r.violations,
            stats: &r.stats,
            error: r.error.as_deref(),
            replay,
        });
    }

    fn add_outcome(&mut self, r: &Outcome) {
        let s = &mut self.summary;
        s.runs += 1;
        if r.error.is_some() {
            s.runs_error += 1;
            return;
        }
        self.completed += 1;
        match r.verdict {
            Verdict::Invalid => s.runs_invalid += 1,
            Verdict::Unknown => s.runs_unknown += 1,
            Verdict::Valid => {}
        }
        let kinds: Vec<String> = r
            .violation_counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k.name().to_owned())
            .collect();
        for k in &kinds {
            *s.runs_violating.entry(k.clone()).or_insert(0) += 1;
        }
        if !kinds.is_empty() {
            // Keep the smallest seeds, so the summary does not depend on the order in which
            // parallel runs finish.
            let at = s.failing.partition_point(|f| f.seed < r.seed);
            if at < FAILING_SEEDS_KEPT {
                s.failing.insert(
                    at,
                    FailingSeed {
                        seed: r.seed,
                        kinds,
                        replay: r.replay.to_owned(),
                    },
                );
                s.failing.truncate(FAILING_SEEDS_KEPT);
            }
        }
        // Integer sums (µs): the same totals in any order of addition.
        let l = &r.stats.liveness;
        self.acquisitions += l.acquisitions;
        self.latency_p50_us += (l.acquire_latency_ms_p50 * 1e3).round() as u64;
        self.sim_ms += r.stats.sim_ms;
        s.wanted_free_ms_max = s.wanted_free_ms_max.max(l.wanted_free_ms_max);
    }

    /// The summary so far.
    pub fn finish(&self) -> CellSummary {
        let mut s = self.summary.clone();
        if self.completed > 0 {
            let n = self.completed as f64;
            s.acquisitions_mean = self.acquisitions as f64 / n;
            s.acquire_latency_ms_p50_mean = self.latency_p50_us as f64 / 1e3 / n;
            s.sim_ms_mean = self.sim_ms as f64 / n;
        }
        for p in Property::ALL {
            s.runs_violating.entry(p.name().into()).or_insert(0);
        }
        s
    }
}

/// A counterexample to draw: one failing run's history and its witness events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counterexample {
    /// The protocol label.
    pub protocol: String,
    /// The fault profile label.
    pub profile: String,
    /// The seed.
    pub seed: u64,
    /// The first violation's kind.
    pub kind: String,
    /// The first violation, in words.
    pub description: String,
    /// Its witness event indexes.
    pub witness: Vec<u64>,
    /// The replay command.
    pub replay: String,
    /// The run's trace hash.
    pub trace_hash: String,
    /// The whole history.
    #[serde(skip)]
    pub history: History,
}

impl Counterexample {
    /// A counterexample from a failing run and its history (None if the run did not fail).
    pub fn from_run(
        protocol: &str,
        profile: &str,
        r: &RunResult,
        history: History,
    ) -> Option<Self> {
        let v = r.violations.first()?;
        Some(Counterexample {
            protocol: protocol.into(),
            profile: profile.into(),
            seed: r.seed,
            kind: v.kind.name().into(),
            description: v.description.clone(),
            witness: v.events.clone(),
            replay: r.replay.clone(),
            trace_hash: r.trace_hash.clone(),
            history,
        })
    }
}

/// A whole comparison.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Title of the report.
    pub title: String,
    /// The command that produced it.
    pub command: String,
    /// Seeds run per cell, as a range (e.g. `1..=200`).
    pub seeds: String,
    /// Protocol labels, in matrix order, with one line about each.
    pub protocols: Vec<(String, String)>,
    /// Fault profile labels, in matrix order, with one line about each.
    pub profiles: Vec<(String, String)>,
    /// Every cell.
    pub cells: Vec<CellSummary>,
    /// Counterexamples to draw (at most one per cell).
    pub counterexamples: Vec<Counterexample>,
}

impl Comparison {
    /// The cell for (protocol, profile).
    pub fn cell(&self, protocol: &str, profile: &str) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|c| c.protocol == protocol && c.profile == profile)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a comparison serialises")
    }

    /// Total runs.
    pub fn runs(&self) -> u64 {
        self.cells.iter().map(|c| c.runs).sum()
    }
}

/// Formats a rate as a percentage for people.
pub fn percent(rate: f64) -> String {
    if rate == 0.0 {
        "0%".into()
    } else if rate < 0.001 {
        "<0.1%".into()
    } else {
        format!("{:.1}%", rate * 100.0)
    }
}
