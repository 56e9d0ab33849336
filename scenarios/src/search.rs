//! Property-based fault search: proptest generates fault schedules within bounds taken from
//! a scenario, runs each, and when a safety property breaks, shrinks the schedule to a
//! small counterexample that is saved as a runnable scenario file.
//!
//! - [`FaultSpace`] is what may be tried, derived from the scenario: the run's duration, the
//!   nodes by role (servers from the protocol's [`Deployment`], clients from the workload),
//!   the named points each node passes ([`crate::workload::POINTS`] and
//!   [`Deployment::points`]), and the kinds and ranges of the scenario's `[faults_random]`
//!   profile (every kind, with the profile's default ranges, when the profile is off).
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

/// The faults a search may try: kinds, targets, named points and ranges.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpace {
    /// Faults start in `0..duration_ms`.
    pub duration_ms: u64,
    /// The kinds that may be generated.
    pub kinds: Vec<FaultKind>,
    /// Nodes that may be paused.
    pub pause_nodes: Vec<String>,
    /// Shortest and longest pause, in ms.
    pub pause_ms: (u64, u64),
    /// Nodes that may crash.
    pub crash_nodes: Vec<String>,
    /// Shortest and longest downtime before the restart, in ms.
    pub crash_down_ms: (u64, u64),
    /// Nodes that may be isolated.
    pub partition_nodes: Vec<String>,
    /// Shortest and longest partition, in ms.
    pub partition_ms: (u64, u64),
    /// Nodes whose clocks may jump or drift.
    pub clock_nodes: Vec<String>,
    /// Largest clock jump, in ms.
    pub clock_jump_ms_max: u64,
    /// Whether clocks may jump backwards.
    pub clock_jump_backward: bool,
    /// Largest drift, in ppm either way.
    pub clock_drift_ppm_max: i64,
    /// Message loss probability during a loss period.
    pub loss_rate: f64,
    /// Longest loss period, in ms.
    pub loss_ms_max: u64,
    /// Nodes whose disks may stall.
    pub fsync_stall_nodes: Vec<String>,
    /// Longest fsync stall, in ms.
    pub fsync_stall_ms_max: u64,
    /// The named points each node passes (clients: the workload's and the protocol
    /// client's; servers: the protocol's).
    pub points: BTreeMap<String, Vec<String>>,
    /// Point-triggered faults fire on passage `1..=occurrence_max`.
    pub occurrence_max: u32,
    /// At most this many faults per schedule (at least one).
    pub faults_max: usize,
}

/// Point-triggered faults fire on one of the first this-many passages.
pub const OCCURRENCE_MAX: u32 = 3;

impl FaultSpace {
    /// The space a scenario allows, with at most `faults_max` faults per schedule.
    pub fn of(prepared: &Prepared, faults_max: usize) -> FaultSpace {
        let s = &prepared.scenario;
        let p = &s.faults_random;
        let servers = prepared.deployment.servers();
        let clients = s.workload.client_names();
        let nodes = p.node_choices(&Targets {
            servers: servers.clone(),
            clients: clients.clone(),
        });
        let mut points: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let protocol_points = prepared.deployment.points();
        for client in &clients {
            let own = protocol_points.iter().filter(|(n, _)| n == "client");
            let names = POINTS.iter().copied().chain(own.map(|(_, p)| *p));
            points.insert(client.clone(), names.map(str::to_owned).collect());
        }
        for (node, point) in protocol_points.iter().filter(|(n, _)| servers.contains(n)) {
            points
                .entry(node.clone())
                .or_default()
                .push(point.to_string());
        }
        let mut space = FaultSpace {
            duration_ms: s.duration_ms,
            kinds: vec![],
            pause_nodes: nodes.pause,
            pause_ms: (p.pause_ms_min, p.pause_ms_max),
            crash_nodes: nodes.crash,
            crash_down_ms: (p.crash_down_ms_min, p.crash_down_ms_max),
            partition_nodes: nodes.partition,
            partition_ms: (p.partition_ms_min, p.partition_ms_max),
            clock_nodes: nodes.clock,
            clock_jump_ms_max: p.clock_jump_ms_max.max(1),
            clock_jump_backward: p.clock_jump_backward,
            clock_drift_ppm_max: p.clock_drift_ppm_max.max(1),
            loss_rate: p.loss_rate,
            loss_ms_max: p.loss_ms_max.max(1),
            fsync_stall_nodes: nodes.fsync_stall,
            fsync_stall_ms_max: p.fsync_stall_ms_max.max(1),
            points,
            occurrence_max: OCCURRENCE_MAX,
            faults_max: faults_max.max(1),
        };
        space.kinds = allowed_kinds(p)
            .into_iter()
            .filter(|k| !space.targets(*k).is_some_and(|t| t.is_empty()))
            .collect();
        space
    }

    /// The nodes a kind targets (None for loss, which targets links).
    fn targets(&self, kind: FaultKind) -> Option<&Vec<String>> {
        match kind {
            FaultKind::Pause => Some(&self.pause_nodes),
            FaultKind::Crash => Some(&self.crash_nodes),
            FaultKind::Partition => Some(&self.partition_nodes),
            FaultKind::ClockJump | FaultKind::ClockDrift => Some(&self.clock_nodes),
            FaultKind::FsyncStall => Some(&self.fsync_stall_nodes),
            FaultKind::Loss => None,
        }
    }

    /// `(node, point)` for every named point of these nodes.
    fn points_of(&self, nodes: &[String]) -> Vec<(String, String)> {
        nodes
            .iter()
            .flat_map(|n| {
                let points = self.points.get(n).into_iter().flatten();
                points.map(move |p| (n.clone(), p.clone()))
            })
            .collect()
    }

    /// One fault of `kind`, anywhere in the space.
    pub fn fault(&self, kind: FaultKind) -> BoxedStrategy<Fault> {
        let at = 0..self.duration_ms.max(1);
        let nodes =
            |kind| proptest::sample::select(self.targets(kind).cloned().unwrap_or_default());
        match kind {
            FaultKind::Pause => {
                let (lo, hi) = self.pause_ms;
                let timed = (nodes(kind), at, lo..=hi).prop_map(|(node, at, d)| Fault::Pause {
                    node,
                    at_ms: Some(at),
                    point: None,
                    occurrence: 1,
                    duration_ms: d,
                });
                let pointed = self.at_point(&self.pause_nodes).map(|p| {
                    (p, lo..=hi)
                        .prop_map(|((node, point, occurrence), d)| Fault::Pause {
                            node,
                            at_ms: None,
                            point: Some(point),
                            occurrence,
                            duration_ms: d,
                        })
                        .boxed()
                });
                either(timed.boxed(), pointed)
            }
            FaultKind::Crash => {
                let (lo, hi) = self.crash_down_ms;
                let timed = (nodes(kind), at, lo..=hi).prop_map(|(node, at, down)| Fault::Crash {
                    node,
                    at_ms: Some(at),
                    point: None,
                    occurrence: 1,
                    restart_after_ms: Some(down),
                });
                let pointed = self.at_point(&self.crash_nodes).map(|p| {
                    (p, lo..=hi)
                        .prop_map(|((node, point, occurrence), down)| Fault::Crash {
                            node,
                            at_ms: None,
                            point: Some(point),
                            occurrence,
                            restart_after_ms: Some(down),
                        })
                        .boxed()
                });
                either(timed.boxed(), pointed)
            }
            FaultKind::Partition => {
                let (lo, hi) = self.partition_ms;
                (nodes(kind), at, lo..=hi, any::<bool>())
                    .prop_map(|(node, at, d, one_way)| Fault::Partition {
                        at_ms: at,
                        duration_ms: d,
                        isolate: vec![node],
                        groups: vec![],
                        one_way,
                    })
                    .boxed()
            }
            FaultKind::ClockJump => {
                let backward = if self.clock_jump_backward {
                    any::<bool>().boxed()
                } else {
                    Just(false).boxed()
                };
                (nodes(kind), at, 1..=self.clock_jump_ms_max as i64, backward)
                    .prop_map(|(node, at, ms, back)| Fault::ClockJump {
                        node,
                        at_ms: at,
                        delta_ms: if back { -ms } else { ms },
                    })
                    .boxed()
            }
            FaultKind::ClockDrift => (nodes(kind), at, 1..=self.clock_drift_ppm_max, any::<bool>())
                .prop_map(|(node, at, ppm, slow)| Fault::ClockDrift {
                    node,
                    at_ms: at,
                    drift_ppm: if slow { -ppm } else { ppm },
                })
                .boxed(),
            FaultKind::Loss => {
                let rate = self.loss_rate;
                (at, 1..=self.loss_ms_max)
                    .prop_map(move |(at, d)| Fault::Loss {
                        at_ms: at,
                        duration_ms: d,
                        probability: rate,
                    })
                    .boxed()
            }
            FaultKind::FsyncStall => (nodes(kind), at, 1..=self.fsync_stall_ms_max)
                .prop_map(|(node, at, d)| Fault::FsyncStall {
                    node,
                    at_ms: at,
                    duration_ms: d,
                })
                .boxed(),
        }
    }

    /// `(node, point, occurrence)` among these nodes' named points, if they have any.
    fn at_point(&self, nodes: &[String]) -> Option<BoxedStrategy<(String, String, u32)>> {
        let points = self.points_of(nodes);
        (!points.is_empty()).then(|| {
            (proptest::sample::select(points), 1..=self.occurrence_max)
                .prop_map(|((node, point), occurrence)| (node, point, occurrence))
                .boxed()
        })
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
        let at = format!("at 0..{} ms", self.duration_ms);
        let points = |nodes: &[String]| {
            let mut names: Vec<String> =
                self.points_of(nodes).into_iter().map(|(_, p)| p).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                String::new()
            } else {
                format!(
                    " or at a named point ({}) on passage 1..={}",
                    names.join(", "),
                    self.occurrence_max
                )
            }
        };
        self.kinds
            .iter()
            .map(|kind| match kind {
                FaultKind::Pause => format!(
                    "pause {} for {}..={} ms, {at}{}",
                    self.pause_nodes.join(", "),
                    self.pause_ms.0,
                    self.pause_ms.1,
                    points(&self.pause_nodes)
                ),
                FaultKind::Crash => format!(
                    "crash {}, restart after {}..={} ms, {at}{}",
                    self.crash_nodes.join(", "),
                    self.crash_down_ms.0,
                    self.crash_down_ms.1,
                    points(&self.crash_nodes)
                ),
                FaultKind::Partition => format!(
                    "partition isolating one of {} for {}..={} ms, {at}",
                    self.partition_nodes.join(", "),
                    self.partition_ms.0,
                    self.partition_ms.1
                ),
                FaultKind::ClockJump => format!(
                    "clock jump on {} by up to {}{} ms, {at}",
                    self.clock_nodes.join(", "),
                    if self.clock_jump_backward { "±" } else { "+" },
                    self.clock_jump_ms_max
                ),
                FaultKind::ClockDrift => format!(
                    "clock drift on {} up to ±{} ppm, {at}",
                    self.clock_nodes.join(", "),
                    self.clock_drift_ppm_max
                ),
                FaultKind::Loss => format!(
                    "message loss {} for 1..={} ms, {at}",
                    self.loss_rate, self.loss_ms_max
                ),
                FaultKind::FsyncStall => format!(
                    "fsync stall on {} for 1..={} ms, {at}",
                    self.fsync_stall_nodes.join(", "),
                    self.fsync_stall_ms_max
                ),
            })
            .collect()
    }
}

/// The profile, or when the scenario has no `[faults_random]` at all, the ranges a written
/// but empty one has. (`FaultProfile::default()` is all zeros, not the file format's
/// defaults: `pause_ms_max` 0 instead of 2000.)
/// The kinds a profile allows: those with a probability, or every kind if it has none.
fn allowed_kinds(p: &FaultProfile) -> Vec<FaultKind> {
    if !p.is_active() {
        return FaultKind::ALL.to_vec();
    }
    let probability = |k| match k {
        FaultKind::Pause => p.pause_probability,
        FaultKind::Crash => p.crash_probability,
        FaultKind::Partition => p.partition_probability,
        FaultKind::ClockJump => p.clock_jump_probability,
        FaultKind::ClockDrift => p.clock_drift_probability,
        FaultKind::Loss => p.loss_probability,
        FaultKind::FsyncStall => p.fsync_stall_probability,
    };
    FaultKind::ALL
        .into_iter()
        .filter(|k| probability(*k) > 0.0)
        .collect()
}

/// A point-triggered or a time-triggered fault. Point first: proptest shrinks a choice
/// towards its first alternative, and a fault at a named point does not depend on the
/// timing of everything before it, so it survives the removal of other faults where a timed
/// one often stops hitting the critical section it hit.
fn either(
    timed: BoxedStrategy<Fault>,
    pointed: Option<BoxedStrategy<Fault>>,
) -> BoxedStrategy<Fault> {
    match pointed {
        Some(pointed) => prop_oneof![pointed, timed].boxed(),
        None => timed,
    }
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
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            cases: 256,
            seed: 0,
            swarm: true,
            faults_max: 4,
            shrink_steps_max: 2_000,
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
    if let Some(&failure) = failures(&result).first() {
        outcome.found = Some(Found {
            failure,
            case: 0,
            original: baseline.clone(),
            schedule: baseline,
            result,
            shrink_steps: 0,
        });
        outcome.runs = runs.count;
        return Ok(outcome);
    }
    for case in 1..=options.cases {
        let mut tree = strategy
            .new_tree(&mut runner)
            .expect("fault strategies never reject");
        let original = tree.current();
        let result = runs.run(&original);
        outcome.cases = case;
        progress(Progress {
            cases: case,
            shrink_steps: 0,
            runs: runs.count,
        });
        let Some(&failure) = failures(&result).first() else {
            continue;
        };
        let mut found = Found {
            failure,
            case,
            original: original.clone(),
            schedule: original,
            result,
            shrink_steps: 0,
        };
        shrink(&mut tree, &mut found, &mut runs, options, &mut progress);
        drop_faults(&mut found, &mut runs, options, &mut progress);
        outcome.found = Some(found);
        break;
    }
    outcome.runs = runs.count;
    Ok(outcome)
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

#[cfg(test)]
mod tests {
    use super::*;
    use locksim_protocols::Registry;

    fn prepared(extra: &str) -> Prepared {
        let text = format!(
            "duration_ms = 2000\n[protocol]\nname = \"single-redis\"\nttl_ms = 500\n{extra}"
        );
        Scenario::parse(&text, "t.toml")
            .unwrap()
            .prepare("t.toml", &Registry::builtin())
            .unwrap()
    }

    #[test]
    fn the_space_follows_the_profile_and_the_roles() {
        let p = prepared("[faults_random]\npause_probability = 0.1\npause_ms_max = 900\n");
        let space = FaultSpace::of(&p, 3);
        assert_eq!(space.kinds, vec![FaultKind::Pause]);
        assert_eq!(space.pause_nodes, vec!["c1", "c2"]);
        assert_eq!(space.pause_ms, (50, 900));
        assert_eq!(space.points["c1"], POINTS.to_vec());
        assert_eq!(space.points["redis"], vec!["before_reply"]);
        let all = FaultSpace::of(&prepared(""), 3);
        assert_eq!(all.kinds, FaultKind::ALL.to_vec());
        assert_eq!(
            all.pause_ms,
            (50, 2_000),
            "the file format's default ranges"
        );
        assert_eq!(all.clock_jump_ms_max, 2_000);
        assert!(all.clock_jump_backward);
    }

    #[test]
    fn generated_schedules_stay_in_bounds_and_validate() {
        let p = prepared("");
        let space = FaultSpace::of(&p, 5);
        let nodes = crate::scenario::node_names(&p.scenario, p.deployment.as_ref());
        let mut runner = runner(7);
        for swarm in [true, false] {
            let strategy = space.schedule(swarm);
            for _ in 0..200 {
                let s = strategy.new_tree(&mut runner).unwrap().current();
                assert!((1..=5).contains(&s.faults.len()));
                assert!(s.seed < SEED_LIMIT);
                for f in &s.faults {
                    f.validate(&nodes).unwrap();
                    assert!(f.at_ms().is_none_or(|t| t < 2000), "{f:?}");
                }
            }
        }
    }

    #[test]
    fn generation_is_a_function_of_the_seed() {
        let space = FaultSpace::of(&prepared(""), 4);
        let draw = |seed| {
            let mut runner = runner(seed);
            let strategy = space.schedule(true);
            (0..20)
                .map(|_| strategy.new_tree(&mut runner).unwrap().current())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn swarm_cases_use_subsets_of_the_kinds() {
        let space = FaultSpace::of(&prepared(""), 6);
        let mut runner = runner(1);
        let strategy = space.schedule(true);
        let narrow = (0..100)
            .filter(|_| {
                let s = strategy.new_tree(&mut runner).unwrap().current();
                let mut kinds: Vec<FaultKind> = s.faults.iter().map(Fault::kind).collect();
                kinds.sort();
                kinds.dedup();
                kinds.len() < 3
            })
            .count();
        assert!(
            narrow > 30,
            "only {narrow} of 100 swarm cases used few kinds"
        );
    }

    #[test]
    fn the_counterexample_round_trips_through_toml() {
        let p = prepared("[faults_random]\npause_probability = 0.1\n");
        let schedule = Schedule {
            seed: 42,
            faults: vec![Fault::Pause {
                node: "c1".into(),
                at_ms: None,
                point: Some("before_write".into()),
                occurrence: 1,
                duration_ms: 1500,
            }],
        };
        let failure = Failure::Violation(Property::MutualExclusion);
        let s = counterexample(&p, &schedule, failure, "cex", "found");
        let text = toml::to_string(&s).unwrap();
        let back = Scenario::parse(&text, "cex.toml").unwrap();
        assert_eq!(back, s);
        assert!(!back.faults_random.is_active());
        assert_eq!(
            back.expect.unwrap().mutual_exclusion,
            Some(Expectation::Violated)
        );
    }
}
