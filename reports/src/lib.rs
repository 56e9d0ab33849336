//! Reports for locksim: aggregate run results into a comparison (protocol × fault profile),
//! phase diagrams and the catalog's outcomes, and render it as Markdown, JSON, or a
//! self-contained HTML page with plots and a timeline of each counterexample.
//!
//! Two kinds of failure are kept apart everywhere: **overlap** (two clients in the critical
//! section at once: mutual exclusion violated) and **harm** (what a user pays for: the
//! resource accepted a stale or reused token, or an acknowledged update was lost). Fencing and
//! compare-and-set exist to turn overlap into no harm. A property a configuration cannot show
//! (fencing, when no write carried a token) is "n/a", never 0%. Every share carries its 95%
//! Wilson interval ([`stats`]).
//!
//! Reports read run results and histories only, never protocol internals. Aggregation is
//! streaming ([`CellAccumulator`]): a sweep of any length folds into a fixed-size summary, in
//! any order. The JSON is versioned ([`SCHEMA_VERSION`]); readers ignore fields they do not
//! know, and every field added later has a default.

pub mod cost;
pub mod decide;
pub mod html;
pub mod markdown;
pub mod stats;
pub mod timeline;
pub mod tradeoff;
pub mod verdict;

use locksim_scenarios::sweep::SeedResult;
use locksim_sim::{History, Property, Verdict};
use serde::{Deserialize, Serialize};
use stats::{mean_interval, Share};
use std::collections::BTreeMap;

/// The version of `report.json`'s layout: 2 added overlap/harm, intervals, phase diagrams
/// and the catalog; 3 added damage and latent beside harm, the rows with their cost and
/// configuration.
pub const SCHEMA_VERSION: u32 = 3;

/// How many failing seeds a cell remembers (with their replay commands).
pub const FAILING_SEEDS_KEPT: usize = 5;

/// The properties whose violation is harm (what the user pays for), as opposed to overlap.
pub const HARM: [Property; 2] = [Property::Fencing, Property::LostUpdate];

/// The figures of one cell of the matrix: one protocol under one fault profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CellSummary {
    /// The protocol (or protocol configuration) label.
    pub protocol: String,
    /// The fault profile (or scenario) label.
    pub profile: String,
    /// Runs in the cell, errors included.
    pub runs: u64,
    /// The seeds that ran, e.g. `1..=150`.
    pub seeds: String,
    /// Runs in which two grants were in the critical section at once.
    pub overlap: Share,
    /// Runs with harm: a stale or reused token accepted, or an update lost (damage or latent).
    pub harm: Share,
    /// Runs with damage: an acknowledged update lost or a stale write accepted.
    pub damage: Share,
    /// Runs in which fencing's guarantee broke (a token reused by two grants) but no data
    /// was damaged.
    pub latent: Share,
    /// Per property, the runs violating it; `None` (JSON `null`) where the configuration
    /// cannot show it (n/a).
    pub properties: BTreeMap<String, Option<Share>>,
    /// Runs with at least one violation of each property, by property name.
    pub runs_violating: BTreeMap<String, u64>,
    /// Runs whose verdict was `invalid`.
    pub runs_invalid: u64,
    /// Runs whose verdict was `unknown`.
    pub runs_unknown: u64,
    /// Runs that did not complete (a panic in a model).
    pub runs_error: u64,
    /// Writes the resource acknowledged, over all runs.
    pub updates_acked: u64,
    /// Acknowledged updates the final counters do not show, over all runs.
    pub updates_lost: u64,
    /// Writes the resource accepted, over all runs.
    pub writes_accepted: u64,
    /// Writes the resource rejected (stale token, or a compare-and-set that found another
    /// value), over all runs.
    pub writes_rejected: u64,
    /// The first failing seeds, with the commands that replay them.
    pub failing: Vec<FailingSeed>,
    /// The first runs whose verdict was `unknown`, with the checker's reasons.
    pub undecided: Vec<UndecidedSeed>,
    /// Mean acquisitions per run.
    pub acquisitions_mean: f64,
    /// Mean over runs of each run's median acquire latency, in ms.
    pub acquire_latency_ms_p50_mean: f64,
    /// Mean over runs of each run's 99th percentile acquire latency, in ms.
    pub acquire_latency_ms_p99_mean: f64,
    /// 95% interval of `acquire_latency_ms_p50_mean` (Student's, over the runs; `None`
    /// below 2 runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_latency_ms_p50_ci95: Option<[f64; 2]>,
    /// 95% interval of `acquire_latency_ms_p99_mean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_latency_ms_p99_ci95: Option<[f64; 2]>,
    /// 95% interval of `acquisitions_mean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquisitions_ci95: Option<[f64; 2]>,
    /// Largest time anyone wanted the lock while it was free, over all runs, in ms.
    pub wanted_free_ms_max: f64,
    /// Mean per run of the total time someone wanted the lock while it was free, in ms.
    pub wanted_free_ms_mean: f64,
    /// 95% interval of `wanted_free_ms_mean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted_free_ms_ci95: Option<[f64; 2]>,
    /// Messages of the lock itself (the resource's excluded) per acquisition, over all runs
    /// (`None` without acquisitions).
    pub lock_messages_per_acquire: Option<f64>,
    /// Fsyncs of the lock servers per acquisition, over all runs.
    pub server_fsyncs_per_acquire: Option<f64>,
    /// Mean simulated ms per run.
    pub sim_ms_mean: f64,
    /// Runs in which some holder went on as the holder after another client was let in
    /// (a zombie window, `locksim_check::zombie`).
    #[serde(default)]
    pub zombie_runs: u64,
    /// The longest zombie window over all runs, in ms.
    #[serde(default)]
    pub zombie_window_ms_max: f64,
    /// The median, over the runs with a zombie window, of each run's longest, in ms.
    #[serde(default)]
    pub zombie_window_ms_p50: f64,
    /// The row whose runs these figures are, when the matrix says this row's would be the
    /// same under this profile and the cell was not run (`None`: the cell ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
    /// Why the two rows' runs are the same under this profile (with `same_as`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub same_as_why: String,
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

/// A run the checker could not decide (`unknown`), with why, to replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndecidedSeed {
    /// The seed.
    pub seed: u64,
    /// Per undecided property (by name), the checker's reason.
    pub reasons: BTreeMap<String, String>,
    /// The replay command.
    pub replay: String,
}

/// Inserts `item` into `kept` (sorted by seed), keeping the [`FAILING_SEEDS_KEPT`] smallest
/// seeds, so a summary does not depend on the order in which parallel runs finish.
fn keep_smallest<T>(kept: &mut Vec<T>, item: T, seed: u64, seed_of: impl Fn(&T) -> u64) {
    let at = kept.partition_point(|k| seed_of(k) < seed);
    if at < FAILING_SEEDS_KEPT {
        kept.insert(at, item);
        kept.truncate(FAILING_SEEDS_KEPT);
    }
}

impl FailingSeed {
    /// Whether the run did harm (not only overlap).
    pub fn harmed(&self) -> bool {
        HARM.iter()
            .any(|p| self.kinds.iter().any(|k| k == p.name()))
    }
}

impl CellSummary {
    /// The share of runs that violated `property`; `None` where it is n/a.
    pub fn property(&self, property: Property) -> Option<Share> {
        self.properties.get(property.name()).copied().flatten()
    }

    /// Share of runs that violated `property`, in [0, 1] (0 where it is n/a).
    pub fn rate(&self, property: Property) -> f64 {
        self.property(property).map_or(0.0, |s| s.rate())
    }

    /// Share of acknowledged updates lost (a ratio of totals: updates within one run are
    /// not independent, so it has no interval).
    pub fn lost_share(&self) -> Option<f64> {
        (self.updates_acked > 0).then(|| self.updates_lost as f64 / self.updates_acked as f64)
    }

    /// Share of writes the resource rejected.
    pub fn rejected_share(&self) -> Option<f64> {
        let all = self.writes_accepted + self.writes_rejected;
        (all > 0).then(|| self.writes_rejected as f64 / all as f64)
    }

    /// A cell that was not run because its figures are `row`'s under the same profile: a copy
    /// of `of` (the other row's cell), relabelled, without the failing and undecided seeds
    /// (they are the other cell's, listed there).
    pub fn same_as(of: &CellSummary, protocol: &str, why: &str) -> CellSummary {
        CellSummary {
            protocol: protocol.into(),
            same_as: Some(of.protocol.clone()),
            same_as_why: why.into(),
            failing: vec![],
            undecided: vec![],
            ..of.clone()
        }
    }

    /// Whether the cell's figures come from its own runs (not another row's, `same_as`).
    pub fn ran(&self) -> bool {
        self.same_as.is_none()
    }

    /// The intervals an adaptive cell watches before it stops: overlap, harm and damage
    /// (latent is harm without damage, so as narrow as those two allow).
    pub fn watched(&self) -> [Share; 3] {
        [self.overlap, self.harm, self.damage]
    }
}

/// Folds run results into a [`CellSummary`] in constant memory, in any order.
#[derive(Clone, Debug, Default)]
pub struct CellAccumulator {
    summary: CellSummary,
    completed: u64,
    overlap: u64,
    harm: u64,
    damage: u64,
    latent: u64,
    token_writes: u64,
    acquisitions: u64,
    latency_p50_us: u64,
    latency_p99_us: u64,
    wanted_free_us: u64,
    /// Sums of squares of the per-run figures above (and of acquisitions), for intervals.
    acquisitions_sq: u128,
    latency_p50_us_sq: u128,
    latency_p99_us_sq: u128,
    wanted_free_us_sq: u128,
    lock_messages: u64,
    server_fsyncs: u64,
    sim_ms: u64,
    seed_min: Option<u64>,
    seed_max: u64,
    /// Each run's longest zombie window in µs (runs with one), kept sorted.
    zombie_us: Vec<u64>,
}

/// The names of the properties a run violated (`violations` maps a property, by name or
/// typed, to a count).
fn violated_kinds<K: ToString>(violations: &BTreeMap<K, u64>) -> Vec<String> {
    violations
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, _)| k.to_string())
        .collect()
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

    /// Adds one run (a line of a results file); `replay` is the command that replays it.
    pub fn add(&mut self, r: &SeedResult, replay: &str) {
        let s = &mut self.summary;
        s.runs += 1;
        self.seed_min = Some(self.seed_min.map_or(r.seed, |m| m.min(r.seed)));
        self.seed_max = self.seed_max.max(r.seed);
        if r.error.is_some() {
            s.runs_error += 1;
            return;
        }
        self.completed += 1;
        match r.verdict {
            Verdict::Invalid => s.runs_invalid += 1,
            Verdict::Unknown => s.runs_unknown += 1,
            // A run's verdict combines its properties: never n/a, counted as valid anyway.
            Verdict::Valid | Verdict::NotApplicable => {}
        }
        let kinds = violated_kinds(&r.violations);
        for k in &kinds {
            *s.runs_violating.entry(k.clone()).or_insert(0) += 1;
        }
        let failing = FailingSeed {
            seed: r.seed,
            kinds,
            replay: replay.to_owned(),
        };
        self.overlap += u64::from(
            failing
                .kinds
                .iter()
                .any(|k| k == Property::MutualExclusion.name()),
        );
        self.harm += u64::from(failing.harmed());
        // Damage: data suffered (an update lost, a stale write accepted). A fencing violation
        // without it is a reused token that met no overlap: the guarantee broke, latently.
        let lost = failing
            .kinds
            .iter()
            .any(|k| k == Property::LostUpdate.name());
        let damaged = lost || r.stats.stale_accepted > 0;
        self.damage += u64::from(damaged);
        self.latent += u64::from(!damaged && failing.harmed());
        if !failing.kinds.is_empty() {
            keep_smallest(&mut s.failing, failing, r.seed, |f| f.seed);
        }
        if r.verdict == Verdict::Unknown {
            let undecided = UndecidedSeed {
                seed: r.seed,
                reasons: r
                    .reasons
                    .iter()
                    .map(|(p, why)| (p.name().to_owned(), why.clone()))
                    .collect(),
                replay: replay.to_owned(),
            };
            keep_smallest(&mut s.undecided, undecided, r.seed, |u| u.seed);
        }
        self.add_figures(r);
    }

    /// Adds a completed run's figures: writes, grants, latencies, traffic.
    fn add_figures(&mut self, r: &SeedResult) {
        let s = &mut self.summary;
        // Integer sums (µs): the same totals in any order of addition.
        let (st, l) = (&r.stats, &r.stats.liveness);
        self.token_writes += st.writes_with_token;
        s.updates_acked += st.updates_acked;
        s.updates_lost += st.updates_lost;
        s.writes_accepted += l.writes_accepted;
        s.writes_rejected += l.writes_rejected;
        let us = |ms: f64| (ms * 1e3).round() as u64;
        let sq = |x: u64| u128::from(x) * u128::from(x);
        let (p50, p99, free) = (
            us(l.acquire_latency_ms_p50),
            us(l.acquire_latency_ms_p99),
            us(l.wanted_free_ms),
        );
        self.acquisitions += l.acquisitions;
        self.latency_p50_us += p50;
        self.latency_p99_us += p99;
        self.wanted_free_us += free;
        self.acquisitions_sq += sq(l.acquisitions);
        self.latency_p50_us_sq += sq(p50);
        self.latency_p99_us_sq += sq(p99);
        self.wanted_free_us_sq += sq(free);
        // Simulated runs count both; a live one (uncounted: `None`) adds nothing.
        let lock_messages = st
            .messages
            .map(|m| m.saturating_sub(st.resource_messages.unwrap_or(0)));
        self.lock_messages += lock_messages.unwrap_or(0);
        self.server_fsyncs += st.server_fsyncs.unwrap_or(0);
        self.sim_ms += st.sim_ms;
        s.wanted_free_ms_max = s.wanted_free_ms_max.max(l.wanted_free_ms_max);
        if st.zombie_windows > 0 {
            let us = (st.zombie_window_ms_max * 1e3).round() as u64;
            let at = self.zombie_us.partition_point(|x| *x < us);
            self.zombie_us.insert(at, us);
        }
    }

    /// The summary so far.
    pub fn finish(&self) -> CellSummary {
        let mut s = self.summary.clone();
        let n = self.completed;
        if n > 0 {
            let n = n as f64;
            s.acquisitions_mean = self.acquisitions as f64 / n;
            s.acquire_latency_ms_p50_mean = self.latency_p50_us as f64 / 1e3 / n;
            s.acquire_latency_ms_p99_mean = self.latency_p99_us as f64 / 1e3 / n;
            s.wanted_free_ms_mean = self.wanted_free_us as f64 / 1e3 / n;
            s.sim_ms_mean = self.sim_ms as f64 / n;
        }
        let ci = |sum, sum_sq, scale| mean_interval(self.completed, sum, sum_sq, scale);
        s.acquire_latency_ms_p50_ci95 = ci(self.latency_p50_us, self.latency_p50_us_sq, 1e3);
        s.acquire_latency_ms_p99_ci95 = ci(self.latency_p99_us, self.latency_p99_us_sq, 1e3);
        s.acquisitions_ci95 = ci(self.acquisitions, self.acquisitions_sq, 1.0);
        s.wanted_free_ms_ci95 = ci(self.wanted_free_us, self.wanted_free_us_sq, 1e3);
        if self.acquisitions > 0 {
            let per = |x: u64| Some(x as f64 / self.acquisitions as f64);
            s.lock_messages_per_acquire = per(self.lock_messages);
            s.server_fsyncs_per_acquire = per(self.server_fsyncs);
        }
        s.seeds = match self.seed_min {
            Some(lo) if self.seed_max - lo + 1 == s.runs => format!("{lo}..={}", self.seed_max),
            Some(lo) => format!("{} seeds in {lo}..={}", s.runs, self.seed_max),
            None => String::new(),
        };
        s.overlap = Share::of(self.overlap, n);
        s.harm = Share::of(self.harm, n);
        s.damage = Share::of(self.damage, n);
        s.latent = Share::of(self.latent, n);
        assert_eq!(
            self.damage + self.latent,
            self.harm,
            "harm is damage or latent"
        );
        s.zombie_runs = self.zombie_us.len() as u64;
        if let (Some(max), Some(p50)) = (
            self.zombie_us.last(),
            self.zombie_us
                .get(self.zombie_us.len().saturating_sub(1) / 2),
        ) {
            s.zombie_window_ms_max = *max as f64 / 1e3;
            s.zombie_window_ms_p50 = *p50 as f64 / 1e3;
        }
        for p in Property::ALL {
            let k = *s.runs_violating.entry(p.name().into()).or_insert(0);
            // Without a token no stale or reused token can be accepted: not checked, not safe.
            // Without an acknowledged write nothing can be lost.
            let applies = match p {
                Property::Fencing => self.token_writes > 0 || k > 0,
                Property::LostUpdate => s.updates_acked > 0 || s.writes_accepted > 0 || k > 0,
                Property::MutualExclusion => true,
            };
            s.properties
                .insert(p.name().into(), applies.then(|| Share::of(k, n)));
        }
        s
    }
}

/// A counterexample to draw: one failing run's history and its witness events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counterexample {
    /// The protocol label.
    pub protocol: String,
    /// The fault profile label (or the catalog scenario).
    pub profile: String,
    /// The seed.
    pub seed: u64,
    /// The drawn violation's kind (empty if the run has none).
    pub kind: String,
    /// The drawn violation, in words.
    pub description: String,
    /// One line saying what happened, from the history.
    pub caption: String,
    /// Its witness event indexes.
    pub witness: Vec<u64>,
    /// The replay command.
    pub replay: String,
    /// The run's trace hash.
    pub trace_hash: String,
    /// Every node of the run that gets a lane, servers first (all of them, also those the
    /// history never names).
    pub lanes: Vec<String>,
    /// The whole history.
    #[serde(skip)]
    pub history: History,
}

impl Counterexample {
    /// A timeline of a run: its first harm violation if it has one, else its first
    /// violation, else the whole run. `servers` are the deployment's server nodes.
    pub fn from_run(
        (protocol, profile): (&str, &str),
        r: &locksim_scenarios::RunResult,
        history: History,
        servers: &[String],
    ) -> Self {
        let harm = r.violations.iter().find(|v| HARM.contains(&v.kind));
        Self::of_violation(
            (protocol, profile),
            r,
            history,
            servers,
            harm.or(r.violations.first()),
        )
    }

    /// A timeline of a run around the violation `v` (the whole run if `None`).
    pub fn of_violation(
        (protocol, profile): (&str, &str),
        r: &locksim_scenarios::RunResult,
        history: History,
        servers: &[String],
        v: Option<&locksim_sim::checker::Violation>,
    ) -> Self {
        let lanes = timeline::lanes(&history, servers);
        let mut x = Counterexample {
            protocol: protocol.into(),
            profile: profile.into(),
            seed: r.seed,
            kind: v.map_or(String::new(), |v| v.kind.name().into()),
            description: v.map_or(String::new(), |v| v.description.clone()),
            caption: String::new(),
            witness: v.map_or(vec![], |v| v.events.clone()),
            replay: r.replay.clone(),
            trace_hash: r.trace_hash.clone(),
            lanes,
            history,
        };
        x.caption = timeline::caption(&x.history, &x.kind, &x.witness);
        x
    }

    /// The SVG timeline.
    pub fn svg(&self) -> String {
        timeline::svg_with_lanes(&self.history, &self.witness, &self.lanes)
    }
}

/// One point of a phase diagram: the protocol under faults of one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PhasePoint {
    /// The fault's size as a multiple of the protocol's TTL.
    pub ttl_multiple: f64,
    /// The fault's size, in ms.
    pub size_ms: u64,
    /// Runs with overlap.
    pub overlap: Share,
    /// Runs with harm.
    pub harm: Share,
    /// Runs with damage.
    pub damage: Share,
    /// Runs with a latent break of fencing (harm without damage).
    pub latent: Share,
    /// The seeds that ran.
    pub seeds: String,
}

/// A phase diagram: one protocol, one kind of fault, its size swept against the TTL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PhaseSeries {
    /// The protocol label.
    pub protocol: String,
    /// The fault axis: `pause` or `clock_jump`.
    pub axis: String,
    /// The axis in words.
    pub about: String,
    /// The TTL the sizes are multiples of, in ms.
    pub ttl_ms: u64,
    /// The points, by increasing size.
    pub points: Vec<PhasePoint>,
}

/// A catalog scenario's outcome over its seeds, next to what its file expects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CatalogEntry {
    /// The scenario's name.
    pub name: String,
    /// Its protocol id.
    pub protocol: String,
    /// What it shows, from the file.
    pub description: String,
    /// Per property, what `[expect]` says: `holds`, `violated` or `not_applicable`.
    pub expect: BTreeMap<String, String>,
    /// The outcome, as a cell.
    pub outcome: CellSummary,
    /// Runs that met every expectation.
    pub expect_met: Share,
    /// The timeline of its first seed.
    pub timeline: Option<Counterexample>,
    /// Its configuration, to match it to the rows it applies to.
    pub setup: Setup,
    /// The kinds of its scripted faults (`pause`, `crash`, …), to match it to the
    /// requirements it bears on.
    pub fault_kinds: Vec<String>,
}

/// What a lock configuration is, as far as telling apart where a story applies: its
/// protocol, what guards the resource, and the protocol keys that change behaviour (sizes
/// and durations left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Setup {
    /// The protocol id.
    pub protocol: String,
    /// `fencing` (the resource rejects stale tokens), `cas` (compare-and-set writes) or
    /// `none`.
    pub guard: String,
    /// The protocol table's behaviour keys, as TOML values in text.
    pub keys: BTreeMap<String, String>,
}

impl Setup {
    /// Whether the two differ only in what guards the resource.
    pub fn siblings(&self, other: &Setup) -> bool {
        self.protocol == other.protocol && self.keys == other.keys
    }

    /// Whether a story of setup `self` applies to a row of setup `row`.
    pub fn applies_to(&self, row: &Setup) -> bool {
        self.siblings(row) && self.guard == row.guard
    }
}

/// One protocol row of the matrix: its setup and what it costs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Row {
    /// The row's label.
    pub label: String,
    /// Its configuration.
    pub setup: Setup,
    /// What a lock of this row costs, measured by the simulator.
    pub cost: Option<cost::Cost>,
}

/// A whole comparison.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Comparison {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema: u32,
    /// Title of the report.
    pub title: String,
    /// The command that produced it.
    pub command: String,
    /// The seeds, in words (fixed or adaptive).
    pub seeds: String,
    /// Protocol labels, in matrix order, with one line about each.
    pub protocols: Vec<(String, String)>,
    /// The protocol rows with their setup and cost, in matrix order (empty in a report of
    /// sweeps).
    pub rows: Vec<Row>,
    /// The protocol id of each label (e.g. `redlock+fsync` → `redlock`), to match the
    /// catalog's stories to rows.
    pub protocol_ids: BTreeMap<String, String>,
    /// Fault profile labels, in matrix order, with one line about each.
    pub profiles: Vec<(String, String)>,
    /// Every cell.
    pub cells: Vec<CellSummary>,
    /// Phase diagrams.
    pub phase: Vec<PhaseSeries>,
    /// Rows left off some phase axes, with why: (row label, axes left off, why).
    pub phase_left_out: Vec<(String, Vec<String>, String)>,
    /// The catalog's outcomes.
    pub catalog: Vec<CatalogEntry>,
    /// Counterexamples to draw (at most one per cell).
    pub counterexamples: Vec<Counterexample>,
    /// The fault searches of cells that had no known breaking schedule ([`decide`]).
    pub searches: Vec<CellSearch>,
    /// The decision table, as [`decide::table`] derives it from everything above.
    pub decisions: Vec<decide::RequirementRow>,
}

/// A fault search of one cell for a schedule that breaks a requirement: within the cell's
/// own profile (its kinds, ranges and nodes, and the named points of those nodes), a stated
/// budget of cases, each run simulated (no wall clock: the same search finds the same).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CellSearch {
    /// The row label.
    pub protocol: String,
    /// The profile label.
    pub profile: String,
    /// What counts as found: [`decide::Measure`]'s name (`harm` or `overlap`).
    pub wanted: String,
    /// The budget, in words (cases, faults per case, shrink steps, search seed).
    pub budget: String,
    /// Simulated runs it took.
    pub runs: u64,
    /// Why no search ran (empty: it ran), e.g. a profile with no fault for this row.
    pub skipped: String,
    /// The shrunk schedule it found, if any.
    pub found: Option<FoundSchedule>,
}

/// A schedule that breaks a configuration: what it is and how to replay it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FoundSchedule {
    /// The property it violates.
    pub failure: String,
    /// Its faults, in words.
    pub faults: Vec<String>,
    /// The command that replays it.
    pub replay: String,
}

impl Comparison {
    /// The cell for (protocol, profile).
    pub fn cell(&self, protocol: &str, profile: &str) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|c| c.protocol == protocol && c.profile == profile)
    }

    /// The row labelled `label`, if the report has rows.
    pub fn row(&self, label: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.label == label)
    }

    /// The profile the safety-against-cost chart and the time stuck read: `mixed` if the
    /// matrix has it, else its last column.
    pub fn reference_profile(&self) -> Option<&str> {
        reference_of(self.profiles.iter().map(|(p, _)| p.as_str()))
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a comparison serialises")
    }

    /// Reads a report back (fields it does not know are ignored, missing ones default).
    pub fn from_json(text: &str) -> Result<Comparison, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Total runs in the matrix's cells (cells not run, `same_as`, left out).
    pub fn runs(&self) -> u64 {
        self.cells.iter().filter(|c| c.ran()).map(|c| c.runs).sum()
    }

    /// Total runs, phase diagrams and catalog included.
    pub fn runs_all(&self) -> u64 {
        let phase: u64 = self
            .phase
            .iter()
            .flat_map(|s| &s.points)
            .map(|p| p.overlap.n)
            .sum();
        let catalog: u64 = self.catalog.iter().map(|c| c.outcome.runs).sum();
        self.runs() + phase + catalog
    }

    /// The seed counts of the cells, in words: `100` or `100–400`.
    pub fn seed_counts(&self) -> String {
        let ran = || self.cells.iter().filter(|c| c.ran()).map(|c| c.runs);
        let (lo, hi) = (ran().min().unwrap_or(0), ran().max().unwrap_or(0));
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}–{hi}")
        }
    }
}

/// Of these profile labels, the reference one: `mixed` if there, else the last.
pub fn reference_of<'a>(labels: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let labels: Vec<&str> = labels.collect();
    let mixed = labels.iter().find(|p| **p == "mixed");
    mixed.or(labels.last()).copied()
}

/// Formats a rate as a percentage for people.
pub fn percent(rate: f64) -> String {
    stats::pct(rate)
}
