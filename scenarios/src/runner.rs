//! Turns (scenario, seed) into a [`RunResult`]: builds the world, runs it, checks the
//! history.

use crate::scenario::{Prepared, Scenario};
use crate::workload::{client_loop, Check, CheckShadow, Holders};
use locksim_check::checker::check_interpreted;
use locksim_check::interpret::interpret;
use locksim_check::zombie::zombie_windows_in;
use locksim_protocols::resource;
use locksim_sim::checker::{Liveness, Updates, Violation};
use locksim_sim::fault::pause_periodic::PausePlan;
use locksim_sim::history::{format_hash, trace_hash, History, Kind, Op};
use locksim_sim::nemesis::{Targets, ROLE_HOLDER};
use locksim_sim::{simulate, Fault, Property, Role, SimOutcome, SimSpec, Verdict, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What a run watches for the scenarios that share it (see [`Prepared::run_shared`]): one
/// resource shadow and one check shadow per other scenario, in the same order.
#[derive(Clone, Default)]
struct Shadows {
    resource: Vec<resource::Shadow>,
    checks: Vec<CheckShadow>,
}

/// At most this many violations are kept per kind in a result (the counts are complete): the
/// checker's own cap, so text, `--json` and results files show the same witnesses.
pub const WITNESSES_KEPT: usize = locksim_sim::checker::WITNESSES_MAX;

/// Everything one run says, as `locksim run --json` prints it and sweeps store it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The scenario's name.
    pub scenario: String,
    /// The protocol id.
    pub protocol: String,
    /// The seed.
    pub seed: u64,
    /// valid / invalid / unknown (worst of the properties).
    pub verdict: Verdict,
    /// Per-property verdicts.
    pub properties: BTreeMap<Property, Verdict>,
    /// Why a property is `unknown`, for each that is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<Property, String>,
    /// Violations with witness event indexes (at most [`WITNESSES_KEPT`] per kind).
    pub violations: Vec<Violation>,
    /// Number of violations per violated property, all of them.
    pub violation_counts: BTreeMap<Property, u64>,
    /// Stable hash of the history: same (scenario, seed), same hash.
    pub trace_hash: String,
    /// Figures of the run.
    pub stats: Stats,
    /// Whether the scenario's `[expect]` was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ExpectResult>,
    /// The command that replays this run.
    pub replay: String,
    /// Set if the run did not complete (a panic in a model: a bug to report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunResult {
    /// Whether a safety property was violated.
    pub fn violated(&self) -> bool {
        self.verdict == Verdict::Invalid
    }
}

/// Whether the expectations held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectResult {
    /// All expectations met.
    pub met: bool,
    /// Those that were not, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
}

/// Figures of one run (all deterministic: no wall-clock time in here).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Events in the history.
    pub events: u64,
    /// Simulated time, in ms.
    pub sim_ms: u64,
    /// Faults in the schedule (scripted + drawn from the profile).
    pub faults: u64,
    /// Of those, the faults that fired: a fault at a point whose passage never came, or on
    /// a role nobody had, did not (`None`: not counted, as in a live run).
    #[serde(default)]
    pub faults_fired: Option<u64>,
    /// Messages sent (`None`: not counted, as in a live run, where the servers' own traffic
    /// is out of sight; reports say "n/a", never 0).
    pub messages: Option<u64>,
    /// Messages lost, cut by partitions, or sent to dead nodes (`None`: not counted).
    pub messages_dropped: Option<u64>,
    /// Of the messages sent, those to or from the resource (the rest are the lock's own).
    #[serde(default)]
    pub resource_messages: Option<u64>,
    /// Fsyncs the lock servers started (`None`: not counted, as in a live run).
    #[serde(default)]
    pub server_fsyncs: Option<u64>,
    /// Fencing violations that were stale writes accepted (the rest reused a token).
    #[serde(default)]
    pub stale_accepted: u64,
    /// Liveness figures from the checker.
    pub liveness: Liveness,
    /// Writes that carried a fencing token: with none, the run cannot show a fencing
    /// violation, and reports say "n/a" rather than "0%".
    #[serde(default)]
    pub writes_with_token: u64,
    /// Writes the resource acknowledged (each one increment of the counter).
    #[serde(default)]
    pub updates_acked: u64,
    /// Increments the counter's final value does not show (0 if it shows them all): the
    /// checker's count, over the writes the resource applied or acknowledged, whichever is
    /// more (so an applied but unacknowledged write cannot hide a lost one).
    #[serde(default)]
    pub updates_lost: u64,
    /// Grants whose holder went on as the holder after another client was let in (see
    /// `locksim_check::zombie`).
    #[serde(default)]
    pub zombie_windows: u64,
    /// The longest such window, in ms (0 without any).
    #[serde(default)]
    pub zombie_window_ms_max: f64,
    /// The median window, in ms (0 without any).
    #[serde(default)]
    pub zombie_window_ms_p50: f64,
}

impl Stats {
    /// Adds the resource's figures: token-carrying writes from the history, acknowledged and
    /// lost updates as the checker counted them (one definition of a lost update, not two).
    fn count_updates(&mut self, history: &History, updates: &Updates) {
        self.writes_with_token = history
            .iter()
            .filter(|e| e.op == Op::Write && e.kind == Kind::Invoke && e.token.is_some())
            .count() as u64;
        self.updates_acked = updates.writes_acknowledged;
        self.updates_lost = updates.updates_lost;
    }
}

impl Prepared {
    /// The simulated world's nodes by index: the nemesis, the deployment's servers in the
    /// order it adds them, the resource, then the clients. Live mode hands a client process
    /// the same table, so what a client derives from its node index (the Raft peer it asks
    /// first, its one endpoint when pinned) is the same in both worlds; every simulated run
    /// asserts that its world's table is this one.
    pub fn node_table(&self) -> Vec<String> {
        let mut table = vec![locksim_sim::history::NEMESIS.to_owned()];
        table.extend(self.deployment.servers());
        table.push(resource::RESOURCE.to_owned());
        table.extend(self.scenario.workload.client_names());
        table
    }

    /// The full fault schedule of a seed: the scripted faults plus those the random
    /// profile draws for it.
    pub fn faults_for(&self, seed: u64) -> Vec<Fault> {
        let s = &self.scenario;
        let mut faults = s.faults.clone();
        if s.faults_random.is_active() {
            let targets = Targets {
                servers: self.deployment.servers(),
                clients: s.workload.client_names(),
            };
            faults.extend(s.faults_random.generate(seed, s.duration_ms, &targets));
        }
        faults
    }

    /// The command that replays a seed of this scenario.
    pub fn replay_command(&self, seed: u64) -> String {
        format!("locksim run {} --seed {seed}", self.path)
    }

    /// The periodic pauses a simulated run of `seed` starts, each with the cycles it ran: when,
    /// what it picked among its `targets`, for how long. The picks come from the simulation's
    /// own random stream, interleaved with everything else it draws, so only the run can tell
    /// them; live mode follows them, so that both worlds pause the same targets at the same
    /// times. An error if the simulation panicked.
    pub fn pause_plans(&self, seed: u64) -> Result<Vec<PausePlan>, String> {
        let (result, outcome) = self.simulate(seed, self.faults_for(seed), Shadows::default());
        outcome.map(|o| o.pause_plans).ok_or_else(|| {
            let error = result.error.unwrap_or_default();
            format!("{}: seed {seed}: {error}", self.path)
        })
    }

    /// Runs one seed.
    pub fn run(&self, seed: u64) -> RunResult {
        self.run_with_history(seed).0
    }

    /// Runs one seed and also returns its history.
    pub fn run_with_history(&self, seed: u64) -> (RunResult, History) {
        self.run_faults_with_history(seed, self.faults_for(seed))
    }

    /// Runs one seed with this exact fault schedule instead of the scenario's own (scripted
    /// faults and random profile), as a fault search does.
    pub fn run_faults(&self, seed: u64, faults: Vec<Fault>) -> RunResult {
        self.run_faults_with_history(seed, faults).0
    }

    /// Runs one seed with this exact fault schedule and also returns its history.
    pub fn run_faults_with_history(&self, seed: u64, faults: Vec<Fault>) -> (RunResult, History) {
        let (result, outcome) = self.simulate(seed, faults, Shadows::default());
        (result, outcome.map(|o| o.history).unwrap_or_default())
    }

    /// Runs one seed of this scenario and, from the same run, the results of `others`:
    /// scenarios that differ from this one only in their `[resource]` rules and their
    /// `[workload] check` (`before_write` or `never`), and in name, description and
    /// `[expect]`; see [`Prepared::run_key`]. The resource watches each other's rules
    /// ([`resource::Shadow`]) and the clients each other's check ([`CheckShadow`]); while
    /// they would have answered every write and decided every write as this run did, the
    /// other's run is this run event for event, and only its judging is its own. `None` for
    /// each other that would have answered or decided a write differently (run it on its
    /// own). The results are those of separate runs, exactly.
    pub fn run_shared(
        &self,
        seed: u64,
        others: &[&Prepared],
    ) -> (RunResult, Vec<Option<RunResult>>) {
        if !others.is_empty() {
            let key = self.run_key();
            assert!(
                others.iter().all(|o| o.run_key() == key),
                "only scenarios that differ in their resource and check share a run"
            );
        }
        let faults = self.faults_for(seed);
        let count = faults.len() as u64;
        let shadows = Shadows {
            resource: (others.iter())
                .map(|o| resource::Shadow::new(o.scenario.resource.rules()))
                .collect(),
            checks: (others.iter())
                .map(|o| CheckShadow::new(o.scenario.workload.check))
                .collect(),
        };
        let (result, outcome) = self.simulate(seed, faults, shadows.clone());
        assert_eq!(
            result.stats.faults, count,
            "the run had this seed's schedule"
        );
        let shared = others
            .iter()
            .zip(shadows.resource.iter().zip(&shadows.checks))
            .map(|(other, (resource, check))| {
                outcome
                    .as_ref()
                    .filter(|_| !resource.diverged() && !check.diverged())?;
                Some(other.judged_as(&result))
            })
            .collect();
        (result, shared)
    }

    /// This scenario's result of a run that was `lead`'s event for event (a shared run): the
    /// same history has the same verdicts, witnesses, trace hash and figures, so they are
    /// copied rather than judged again (judging is a twentieth of a run's CPU); the name, the
    /// replay command and whether the `[expect]` was met are this scenario's own.
    fn judged_as(&self, lead: &RunResult) -> RunResult {
        assert!(lead.error.is_none(), "a failed run is shared with nobody");
        assert_eq!(
            lead.protocol, self.scenario.protocol.name,
            "one run key, one protocol"
        );
        let verdict_of = |p| lead.properties.get(&p).copied().unwrap_or(Verdict::Valid);
        RunResult {
            scenario: self.scenario.name.clone(),
            replay: self.replay_command(lead.seed),
            expect: self.expect_result(verdict_of, &lead.stats),
            ..lead.clone()
        }
    }

    /// Whether the scenario's `[expect]` was met by a run with these verdicts and figures
    /// (liveness, faults fired; `None` without an `[expect]`).
    fn expect_result(
        &self,
        verdict_of: impl Fn(Property) -> Verdict,
        stats: &Stats,
    ) -> Option<ExpectResult> {
        let expect = self.scenario.expect.as_ref()?;
        let mut mismatches = expect.mismatches(verdict_of);
        mismatches.extend(expect.liveness_mismatches(&stats.liveness));
        mismatches.extend(expect.fault_mismatches(stats.faults_fired.unwrap_or(0), stats.faults));
        Some(ExpectResult {
            met: mismatches.is_empty(),
            mismatches,
        })
    }

    /// What decides a run apart from the resource's rules and the application's check: two
    /// scenarios with the same key differ only in `[resource]`, `[workload] check` (between
    /// `before_write` and `never`), name, description, default seed, `[expect]` and
    /// `[validation]`, and can share runs ([`Prepared::run_shared`]).
    pub fn run_key(&self) -> String {
        let mut canonical = self.scenario.clone();
        canonical.name.clear();
        canonical.description.clear();
        canonical.seed = 0;
        canonical.resource = Default::default();
        if canonical.workload.check.can_be_shadowed() {
            canonical.workload.check = Check::BeforeWrite;
        }
        canonical.expect = None;
        canonical.validation = None;
        // JSON, not the fingerprint's TOML: the key is only compared, never stored, and
        // `run_shared` checks it on every shared run (TOML cost a hundredth of a run).
        let text = serde_json::to_string(&canonical).expect("a scenario serialises");
        format_hash(locksim_sim::history::stable_hash(text.as_bytes()))
    }

    /// Simulates one seed with `faults`, the resource and the clients watching `shadows`;
    /// the result is judged, or carries the run's error (and there is no outcome).
    fn simulate(
        &self,
        seed: u64,
        faults: Vec<Fault>,
        shadows: Shadows,
    ) -> (RunResult, Option<SimOutcome>) {
        let s = &self.scenario;
        let spec = SimSpec {
            seed,
            duration_ms: s.duration_ms,
            heal_ms: s.heal_ms,
            network: s.network.clone(),
            clocks: s.clocks.clone(),
            disk: s.disk.clone(),
            faults,
        };
        let outcome = simulate(&spec, |world| self.deploy(world, shadows));
        let mut result = self.empty_result(seed, spec.faults.len() as u64);
        match outcome {
            Ok(o) => {
                self.judge(&mut result, &o);
                (result, Some(o))
            }
            Err(e) => {
                result.error = Some(e.to_string());
                (result, None)
            }
        }
    }

    /// Starts the protocol's servers, the resource and one node per client running the
    /// workload (each watching `shadows`), and answers `@holder`.
    fn deploy(&self, world: &World, shadows: Shadows) {
        let s = &self.scenario;
        let connector = self.deployment.start(world);
        let resource = resource::start_watching(world, s.resource.rules(), shadows.resource);
        let holders = Holders::default();
        let view = holders.clone();
        world.answer_role(ROLE_HOLDER, Arc::new(move |world| view.holder(world)));
        for name in s.workload.client_names() {
            let (connector, resource) = (connector.clone(), resource.clone());
            let workload = s.workload.clone();
            let grants = Arc::new(AtomicU64::new(0));
            let (holders, checks) = (holders.clone(), shadows.checks.clone());
            world.add_node(&name, Role::Client, move |ctx| {
                client_loop(
                    ctx,
                    connector.clone(),
                    resource.clone(),
                    workload.clone(),
                    grants.clone(),
                    holders.clone(),
                    checks.clone(),
                )
            });
        }
        assert_eq!(
            world.node_names(),
            self.node_table(),
            "the world's nodes, by index"
        );
    }

    /// The result of `history`, a run of this scenario on `seed` with `faults` faults in its
    /// schedule, judged as every run is ([`Prepared::judge_history`]): what a live run, whose
    /// history comes from real servers, reports. The figures the history does not tell
    /// (trace hash, run time, messages, fsyncs) are left for the caller (`None` for counts).
    pub fn judged(&self, seed: u64, faults: u64, history: &History) -> RunResult {
        let mut result = self.empty_result(seed, faults);
        self.judge_history(&mut result, history);
        result
    }

    /// A result for `seed` before the run's history is checked.
    fn empty_result(&self, seed: u64, faults: u64) -> RunResult {
        RunResult {
            scenario: self.scenario.name.clone(),
            protocol: self.scenario.protocol.name.clone(),
            seed,
            verdict: Verdict::Unknown,
            properties: BTreeMap::new(),
            reasons: BTreeMap::new(),
            violations: vec![],
            violation_counts: BTreeMap::new(),
            trace_hash: String::new(),
            stats: Stats {
                faults,
                ..Stats::default()
            },
            expect: None,
            replay: self.replay_command(seed),
            error: None,
        }
    }

    /// Checks the simulated run's history into `result` ([`Prepared::judge_history`]) and
    /// adds what only a simulation knows: trace hash, simulated time, messages and fsyncs.
    fn judge(&self, result: &mut RunResult, outcome: &SimOutcome) {
        // Set before the history is judged: the expectation may name the faults that fired.
        result.stats.faults_fired = Some(outcome.faults_fired);
        self.judge_history(result, &outcome.history);
        result.trace_hash = format_hash(trace_hash(&outcome.history));
        result.stats.sim_ms = outcome.sim_ms;
        let net = &outcome.net;
        result.stats.messages = Some(net.sent);
        result.stats.messages_dropped = Some(net.lost + net.cut + net.to_dead);
        result.stats.resource_messages = Some(net.resource);
        result.stats.server_fsyncs = Some(outcome.server_fsyncs);
    }

    /// Checks a history into `result`, simulated or live alike: verdicts, witnesses, the
    /// figures the history tells (events, stale writes accepted, liveness, updates, zombie
    /// windows), and whether the scenario's `expect` was met.
    pub fn judge_history(&self, result: &mut RunResult, history: &History) {
        // One interpretation for the checker and the zombie windows: both read the sections.
        let interpretation = interpret(history);
        let mut report = check_interpreted(history, &interpretation);
        result.verdict = report.verdict;
        result.properties = report.verdicts();
        result.reasons = report.reasons();
        result.violation_counts = report.violation_counts();
        result.violations = std::mem::take(&mut report.violations);
        result.stats.events = history.len() as u64;
        result.stats.stale_accepted = report.fencing.stale_accepted;
        result.stats.liveness = report.liveness.clone();
        result.stats.count_updates(history, &report.updates);
        let windows = zombie_windows_in(history, &interpretation.sections);
        let (max_ms, p50_ms) = locksim_check::zombie::max_and_p50_ms(&windows);
        result.stats.zombie_windows = windows.len() as u64;
        result.stats.zombie_window_ms_max = max_ms;
        result.stats.zombie_window_ms_p50 = p50_ms;
        result.expect = self.expect_result(|p| report.property(p), &result.stats);
    }
}

/// Runs `f` on a thread of its own and waits for it; wrap each run in it when one thread
/// runs many. Runs that share a thread are not independent: std seeds a thread's `HashMap`
/// keys once, from inside the first simulation that asks (madsim issue #240), so a fresh
/// thread per run keeps a result a function of (scenario, seed) alone, the same as
/// `locksim run` sees it in a new process. A thread costs microseconds; a run milliseconds.
pub fn isolated<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Loads and prepares a scenario file with the given protocols.
pub fn load(
    path: &str,
    registry: &locksim_protocols::Registry,
) -> Result<Prepared, crate::ScenarioError> {
    Scenario::load(path)?.prepare(path, registry)
}
