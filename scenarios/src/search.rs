//! Property-based fault search: proptest generates fault schedules within bounds taken from
//! a scenario, runs each, and when a safety property breaks, shrinks the schedule to a
//! small counterexample that is saved as a runnable scenario file.
//!
//! - [`FaultSpace`] is what may be tried, derived from the scenario: the run's duration, the
//!   nodes by role (servers from the protocol's [`Deployment`], clients from the workload),
//!   the named points each node passes ([`crate::workload::POINTS`] and
//!   [`Deployment::points`]), and the kinds and ranges of the scenario's `[faults_random]`
//!   profile (every kind, with the profile's default ranges, when the profile is off).
//!   Each kind's faults come from the kind's own random draw (`locksim_sim::fault`), the
//!   one the random profile samples, here wrapped as a proptest strategy.
//! - [`FaultSpace::schedule`] is a proptest [`Strategy`] of [`Schedule`]s: a list of timed
//!   or point-triggered faults plus the seed for everything else. Shrinking removes faults,
//!   then shortens durations, moves times earlier, lowers occurrences, prefers faults at
//!   named points to timed ones and earlier nodes and points; the seed does not shrink
//!   (another seed is another run altogether). A last pass tries without each remaining
//!   fault, since proptest never goes back to removing once it shrinks what is left.
//! - **Swarm testing** (Groce et al., "Swarm Testing", ISSTA 2012): each case first draws a
//!   random non-empty subset of the allowed fault kinds and uses only those, so a case is
//!   not always a thin mix of everything and rare combinations get room.
//! - [`search`] drives proptest's value trees itself, with a ChaCha RNG seeded from the
//!   search seed (generation and shrinking are reproducible), no failure persistence (no
//!   files behind the user's back), and shrinking that keeps a candidate only while it
//!   still shows the *same* failure as the first failing case.
//!
//! The strategies are public so that a user can write `proptest!` tests over locksim
//! scenarios; `scenarios/tests/proptest_fencing.rs` in the repository is an example.
//!
//! [`Deployment`]: locksim_protocols::Deployment
//! [`Deployment::points`]: locksim_protocols::Deployment::points

use crate::runner::{isolated, RunResult};
use crate::scenario::{Expect, Expectation, Prepared, Scenario};
use crate::workload::POINTS;
use locksim_sim::fault::spec::Space;
pub use locksim_sim::nemesis::describe_fault;
use locksim_sim::nemesis::Targets;
use locksim_sim::{Fault, FaultKind, FaultProfile, Property};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::{Union, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A fault schedule: the faults of one run, and the seed for everything else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The run's seed (latencies, think times, clocks' initial drift...).
    pub seed: u64,
    /// The faults, in addition to the scenario's scripted ones.
    pub faults: Vec<Fault>,
}

/// Seeds a search draws stay below this, so that they fit in a TOML integer and stay short
/// enough to type.
pub const SEED_LIMIT: u64 = 1 << 32;

/// The faults a search may try: kinds, targets, named points and ranges. Each kind's
/// faults are drawn by the kind's own random draw (the one the scenario's random profile
/// samples), over the whole run and the named points of its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpace {
    /// Faults start in `0..duration_ms`.
    pub duration_ms: u64,
    /// The kinds that may be generated.
    pub kinds: Vec<FaultKind>,
    /// The profile whose ranges bound each kind (the scenario's `[faults_random]`).
    pub profile: FaultProfile,
    /// Where each kind's faults may land: nodes, times, named points.
    pub spaces: BTreeMap<FaultKind, Space>,
    /// The named points each node passes (clients: the workload's and the protocol
    /// client's; servers: the protocol's).
    pub points: BTreeMap<String, Vec<String>>,
    /// At most this many faults per schedule (at least one).
    pub faults_max: usize,
}

/// Point-triggered faults fire on one of the first this-many passages.
pub const OCCURRENCE_MAX: u32 = 3;

impl FaultSpace {
    /// The space a scenario allows, with at most `faults_max` faults per schedule.
    pub fn of(prepared: &Prepared, faults_max: usize) -> FaultSpace {
        let s = &prepared.scenario;
        let profile = s.faults_random.clone();
        let targets = Targets {
            servers: prepared.deployment.servers(),
            clients: s.workload.client_names(),
        };
        let points = named_points(prepared, &targets);
        let at_ms = (0, s.duration_ms.max(1));
        let spaces: BTreeMap<FaultKind, Space> = FaultKind::ALL
            .iter()
            .map(|kind| {
                let mut space = profile.space(*kind, &targets, at_ms);
                if profile.at_points(*kind) {
                    space.points = points_of(&points, &space.nodes);
                    space.occurrence_max = OCCURRENCE_MAX;
                }
                (*kind, space)
            })
            .collect();
        let hits_nobody = |k: &FaultKind| profile.targets_nodes(*k) && spaces[k].nodes.is_empty();
        let kinds = allowed_kinds(&profile)
            .into_iter()
            .filter(|k| !hits_nobody(k))
            .collect();
        FaultSpace {
            duration_ms: s.duration_ms,
            kinds,
            profile,
            spaces,
            points,
            faults_max: faults_max.max(1),
        }
    }

    /// Narrows the nodes `kind` may hit to `nodes` (and its named points to theirs).
    pub fn restrict(&mut self, kind: FaultKind, nodes: Vec<String>) {
        let space = self.spaces.get_mut(&kind).expect("every kind has a space");
        if self.profile.at_points(kind) {
            space.points = points_of(&self.points, &nodes);
        }
        space.nodes = nodes;
    }

    /// One fault of `kind`, anywhere in the space.
    pub fn fault(&self, kind: FaultKind) -> BoxedStrategy<Fault> {
        self.profile.strategy(kind, self.spaces[&kind].clone())
    }

    /// One fault of any of `kinds` (which must be allowed in this space).
    pub fn faults(&self, kinds: &[FaultKind]) -> BoxedStrategy<Fault> {
        assert!(!kinds.is_empty(), "a fault needs at least one kind");
        Union::new(kinds.iter().map(|k| self.fault(*k))).boxed()
    }

    /// Schedules of 1 to `faults_max` faults, time-triggered ones in time order. With
    /// `swarm`, each schedule uses only a random non-empty subset of the kinds.
    pub fn schedule(&self, swarm: bool) -> BoxedStrategy<Schedule> {
        assert!(!self.kinds.is_empty(), "this space allows no fault kind");
        let max = self.faults_max;
        let faults = if swarm && self.kinds.len() > 1 {
            let space = self.clone();
            // Independent flat map: the subset of kinds is not shrunk (the faults are, and
            // removing faults already removes kinds).
            proptest::sample::subsequence(self.kinds.clone(), 1..=self.kinds.len())
                .prop_ind_flat_map(move |kinds| vec(space.faults(&kinds), 1..=max))
                .boxed()
        } else {
            vec(self.faults(&self.kinds), 1..=max).boxed()
        };
        ((0..SEED_LIMIT).no_shrink(), faults)
            .prop_map(|(seed, mut faults)| {
                faults.sort_by_key(Fault::at_ms);
                Schedule { seed, faults }
            })
            .boxed()
    }

    /// The space in words, one line per kind.
    pub fn describe(&self) -> Vec<String> {
        let line = |k: &FaultKind| self.profile.describe_space(*k, &self.spaces[k]);
        self.kinds.iter().map(line).collect()
    }
}

/// The named points each node passes: clients the workload's and the protocol client's,
/// servers the protocol's.
fn named_points(prepared: &Prepared, targets: &Targets) -> BTreeMap<String, Vec<String>> {
    let mut points: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let protocol_points = prepared.deployment.points();
    for client in &targets.clients {
        let own = protocol_points.iter().filter(|(n, _)| n == "client");
        let names = POINTS.iter().copied().chain(own.map(|(_, p)| *p));
        points.insert(client.clone(), names.map(str::to_owned).collect());
    }
    let servers = protocol_points
        .iter()
        .filter(|(n, _)| targets.servers.contains(n));
    for (node, point) in servers {
        points
            .entry(node.clone())
            .or_default()
            .push(point.to_string());
    }
    points
}

/// `(node, point)` for every named point of these nodes.
fn points_of(points: &BTreeMap<String, Vec<String>>, nodes: &[String]) -> Vec<(String, String)> {
    nodes
        .iter()
        .flat_map(|n| {
            let names = points.get(n).into_iter().flatten();
            names.map(move |p| (n.clone(), p.clone()))
        })
        .collect()
}

/// The kinds a profile allows: those with a probability, or, if it has none, every kind but
/// `loop_stall`: that one stops only an etcd member's Raft loop and pauses every other node
/// (a pause, which the search draws anyway), so a search draws it when the profile names it.
fn allowed_kinds(p: &FaultProfile) -> Vec<FaultKind> {
    if !p.is_active() {
        let all = FaultKind::ALL.iter().copied();
        return all.filter(|k| *k != FaultKind::LoopStall).collect();
    }
    let kinds = FaultKind::ALL.iter().copied();
    kinds.filter(|k| p.probability(*k) > 0.0).collect()
}

/// What went wrong in a run, as a search tells failures apart while shrinking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// A safety property was violated.
    Violation(Property),
    /// The simulation panicked: a bug in a protocol model or the harness.
    Panic,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Violation(p) => f.write_str(p.name()),
            Failure::Panic => f.write_str("panic"),
        }
    }
}

/// The failures a run shows, most important first (properties in report order, then a
/// panic).
pub fn failures(result: &RunResult) -> Vec<Failure> {
    let mut found: Vec<Failure> = Property::ALL
        .into_iter()
        .filter(|p| result.violation_counts.get(p).is_some_and(|n| *n > 0))
        .map(Failure::Violation)
        .collect();
    if result.error.is_some() {
        found.push(Failure::Panic);
    }
    found
}

/// Runs a schedule: the scenario's scripted faults plus the schedule's, with the schedule's
/// seed, on a fresh thread (see [`isolated`]). The result's `replay` is empty: a schedule
/// replays from the file [`counterexample`] writes.
pub fn run_schedule(prepared: &Prepared, schedule: &Schedule) -> RunResult {
    let mut faults = prepared.scenario.faults.clone();
    faults.extend(schedule.faults.iter().cloned());
    let mut result = isolated(|| prepared.run_faults(schedule.seed, faults));
    result.replay = String::new();
    result
}

/// The scenario that replays a schedule: the original with the schedule's faults scripted,
/// no random profile, the schedule's seed, and (for a violation) an `[expect]` that the
/// property is violated.
pub fn counterexample(
    prepared: &Prepared,
    schedule: &Schedule,
    failure: Failure,
    name: &str,
    description: &str,
) -> Scenario {
    let mut s = prepared.scenario.clone();
    s.name = name.into();
    s.description = description.into();
    s.seed = schedule.seed;
    s.faults.extend(schedule.faults.iter().cloned());
    s.faults_random = FaultProfile::default();
    s.expect = match failure {
        Failure::Violation(p) => {
            let mut e = Expect::default();
            let slot = match p {
                Property::MutualExclusion => &mut e.mutual_exclusion,
                Property::Fencing => &mut e.fencing,
                Property::LostUpdate => &mut e.lost_update,
            };
            *slot = Some(Expectation::Violated);
            Some(e)
        }
        Failure::Panic => None,
    };
    s
}

/// How a search runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOptions {
    /// How many schedules to try before giving up.
    pub cases: u32,
    /// The search's own seed: the same seed, the same cases and the same shrinking.
    pub seed: u64,
    /// Swarm testing: each case uses a random subset of the fault kinds.
    pub swarm: bool,
    /// At most this many faults per schedule.
    pub faults_max: usize,
    /// Stop shrinking after this many steps (the best counterexample so far is kept).
    pub shrink_steps_max: u32,
    /// The failures that count (empty: every failure). A search for damage passes over a run
    /// that only overlapped, so that "nothing found" means no damage within the budget.
    pub wanted: Vec<Failure>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            cases: 256,
            seed: 0,
            swarm: true,
            faults_max: 4,
            shrink_steps_max: 2_000,
            wanted: vec![],
        }
    }
}

/// Where a search is, for progress displays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Cases generated so far.
    pub cases: u32,
    /// Shrink steps so far (0 until a failure is found).
    pub shrink_steps: u32,
    /// Simulations run so far (a schedule seen before is not run again).
    pub runs: u64,
}

/// A failure a search found, and the schedule it shrank to.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The failure every shrink step kept.
    pub failure: Failure,
    /// Which case (from 1) first failed; 0 when the scenario fails with no added fault.
    pub case: u32,
    /// The failing schedule as generated.
    pub original: Schedule,
    /// The shrunk schedule.
    pub schedule: Schedule,
    /// The run of the shrunk schedule.
    pub result: RunResult,
    /// Shrink steps taken.
    pub shrink_steps: u32,
}

impl Found {
    /// Whether the failure needs no added fault: the scenario's own scripted faults (or
    /// none) already show it.
    pub fn no_added_fault(&self) -> bool {
        self.schedule.faults.is_empty()
    }
}

/// What a search did.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOutcome {
    /// The space it searched.
    pub space: FaultSpace,
    /// Cases generated.
    pub cases: u32,
    /// Simulations run (cases and shrink steps, each distinct schedule once).
    pub runs: u64,
    /// The failure, if one was found.
    pub found: Option<Found>,
}

/// Why a search could not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The scenario allows no fault that has a target.
    #[error(
        "the scenario allows no fault to search: its [faults_random] kinds have no target nodes"
    )]
    EmptySpace,
}

/// Runs each distinct schedule once.
struct Runs<'a> {
    prepared: &'a Prepared,
    seen: BTreeMap<String, RunResult>,
    count: u64,
}

impl SearchOptions {
    /// The first of a run's failures that counts (see [`SearchOptions::wanted`]).
    fn first_wanted(&self, result: &RunResult) -> Option<Failure> {
        let mut found = failures(result).into_iter();
        found.find(|f| self.wanted.is_empty() || self.wanted.contains(f))
    }
}

impl Runs<'_> {
    fn run(&mut self, schedule: &Schedule) -> RunResult {
        let key = serde_json::to_string(schedule).expect("schedules always serialise");
        if let Some(r) = self.seen.get(&key) {
            return r.clone();
        }
        self.count += 1;
        let result = run_schedule(self.prepared, schedule);
        self.seen.insert(key, result.clone());
        result
    }
}

/// Searches for a schedule that breaks a safety property of the scenario, and shrinks the
/// first one found. `progress` is called after every run.
pub fn search(
    prepared: &Prepared,
    options: &SearchOptions,
    mut progress: impl FnMut(Progress),
) -> Result<SearchOutcome, SearchError> {
    let space = FaultSpace::of(prepared, options.faults_max);
    if space.kinds.is_empty() {
        return Err(SearchError::EmptySpace);
    }
    let strategy = space.schedule(options.swarm);
    let mut runner = runner(options.seed);
    let mut runs = Runs {
        prepared,
        seen: BTreeMap::new(),
        count: 0,
    };
    let mut outcome = SearchOutcome {
        space,
        cases: 0,
        runs: 0,
        found: None,
    };
    // A scenario whose own scripted faults already violate a property needs no search: say
    // so, rather than "shrink" to an added fault that plays no part in the failure.
    outcome.found = baseline(prepared, options, &mut runs, &mut progress);
    if outcome.found.is_none() {
        for case in 1..=options.cases {
            let tree = strategy
                .new_tree(&mut runner)
                .expect("fault strategies never reject");
            outcome.cases = case;
            outcome.found = try_case(tree, case, &mut runs, options, &mut progress);
            if outcome.found.is_some() {
                break;
            }
        }
    }
    outcome.runs = runs.count;
    Ok(outcome)
}

/// The scenario with no added fault: found already if it fails.
fn baseline(
    prepared: &Prepared,
    options: &SearchOptions,
    runs: &mut Runs,
    progress: &mut impl FnMut(Progress),
) -> Option<Found> {
    let baseline = Schedule {
        seed: prepared.scenario.seed,
        faults: vec![],
    };
    let result = runs.run(&baseline);
    progress(Progress {
        cases: 0,
        shrink_steps: 0,
        runs: runs.count,
    });
    let failure = options.first_wanted(&result)?;
    Some(Found {
        failure,
        case: 0,
        original: baseline.clone(),
        schedule: baseline,
        result,
        shrink_steps: 0,
    })
}

/// Runs case number `case`; if it fails, shrinks it and returns what it shrank to.
fn try_case(
    mut tree: impl ValueTree<Value = Schedule>,
    case: u32,
    runs: &mut Runs,
    options: &SearchOptions,
    progress: &mut impl FnMut(Progress),
) -> Option<Found> {
    let original = tree.current();
    let result = runs.run(&original);
    progress(Progress {
        cases: case,
        shrink_steps: 0,
        runs: runs.count,
    });
    let failure = options.first_wanted(&result)?;
    let mut found = Found {
        failure,
        case,
        original: original.clone(),
        schedule: original,
        result,
        shrink_steps: 0,
    };
    shrink(&mut tree, &mut found, runs, options, progress);
    drop_faults(&mut found, runs, options, progress);
    Some(found)
}

/// A proptest runner whose RNG depends only on `seed`, with failure persistence off.
pub fn runner(seed: u64) -> TestRunner {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key))
}

/// proptest's shrinking loop (as in `TestRunner::run`): simplify while the candidate still
/// fails, complicate when it passes; a candidate "fails" only with the failure first found.
fn shrink(
    tree: &mut impl ValueTree<Value = Schedule>,
    found: &mut Found,
    runs: &mut Runs,
    options: &SearchOptions,
    progress: &mut impl FnMut(Progress),
) {
    if !tree.simplify() {
        return;
    }
    while found.shrink_steps < options.shrink_steps_max {
        found.shrink_steps += 1;
        let candidate = tree.current();
        let result = runs.run(&candidate);
        progress(Progress {
            cases: found.case,
            shrink_steps: found.shrink_steps,
            runs: runs.count,
        });
        let keep = failures(&result).contains(&found.failure);
        if keep {
            found.schedule = candidate;
            found.result = result;
        }
        let moved = if keep {
            tree.simplify()
        } else {
            tree.complicate()
        };
        if !moved {
            break;
        }
    }
}

/// proptest shrinks a list by removing elements first and then shrinking the ones left, and
/// never goes back to removing: a fault that became unnecessary once the others shrank
/// stays. So, last, try without each fault in turn, until no single fault can go.
fn drop_faults(
    found: &mut Found,
    runs: &mut Runs,
    options: &SearchOptions,
    progress: &mut impl FnMut(Progress),
) {
    let mut removed = true;
    while removed {
        removed = false;
        let mut i = 0;
        while i < found.schedule.faults.len() {
            if found.shrink_steps >= options.shrink_steps_max {
                return;
            }
            found.shrink_steps += 1;
            let mut candidate = found.schedule.clone();
            candidate.faults.remove(i);
            let result = runs.run(&candidate);
            progress(Progress {
                cases: found.case,
                shrink_steps: found.shrink_steps,
                runs: runs.count,
            });
            if failures(&result).contains(&found.failure) {
                found.schedule = candidate;
                found.result = result;
                removed = true;
            } else {
                i += 1;
            }
        }
    }
}
