//! `pause_periodic`: pause a target for `on_ms`, let it run for `off_ms`, and again, from
//! `at_ms` until `until_ms` (a cycle starts only before `until_ms`). The target is a node, a
//! role (resolved once, when the first cycle starts), or a group, `@servers` or `@clients`,
//! whose nodes are paused and resumed together: Jepsen's etcd nemesis, which stops every
//! member at once and lets them all go, so that elections and leases race on wake-up.
//!
//! With `targets` instead of `node`, each pause picks its target afresh from the list (from
//! the run's seed), a role resolved at that instant: Jepsen's `jepsen.nemesis.combined` (0.1.16,
//! `db-generators`) draws `(rand-nth pause-targets)` for every `:pause`, and the etcd test
//! (jepsen-io/etcd 0.1.0, `etcd.clj`) sets `:pause {:targets [:primaries :all]}` with
//! `:interval 5`: `targets = ["@leader", "@servers"]`, `on_ms = off_ms = 5000`.
//!
//! What a cycle is, for both worlds: [`PausePeriodic::starts_ms`] times them and
//! [`PausePeriodic::cycle`] picks each one's target. The simulator draws each pick from its
//! own random stream as the cycle starts and records the cycles it ran
//! ([`crate::SimOutcome::pause_plans`]); live mode (`live/src/run/faults.rs`) stops the same
//! targets at the same times with SIGSTOP and SIGCONT, its picks taken from the simulated run
//! of the same (scenario, seed), since no other stream can tell where the simulation's
//! draws fall.

use super::draw::{pick, Draw};
use super::drawing::Drawing;
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::{NodeIdx, Role};
use crate::roles::{is_role, ROLE_CLIENTS, ROLE_SERVERS};
use crate::world::World;
use locksim_check::history::Op;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "pause_periodic"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PausePeriodic {
    /// A node, a role (`@leader`), or a group (`@servers`, `@clients`) paused as one; empty
    /// when `targets` is given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// Each pause picks one of these (nodes, roles resolved when that pause starts, or
    /// groups); exclusive with `node`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// When the first pause starts, in true ms since the start.
    pub at_ms: u64,
    /// No pause starts at or after this, in true ms since the start.
    pub until_ms: u64,
    /// How long each pause lasts, in true ms.
    pub on_ms: u64,
    /// How long the target runs between pauses, in true ms.
    pub off_ms: u64,
}

impl Spec for PausePeriodic {
    type Random = Random;
    const GROUPS: bool = true;
    // Its events are `pause` and `resume`, drawn as pauses.
    const DRAWINGS: &'static [Drawing] = &[];

    fn at_ms(&self) -> Option<u64> {
        Some(self.at_ms)
    }
    fn nodes(&self) -> Vec<&String> {
        let node = (!self.node.is_empty()).then_some(&self.node);
        node.into_iter().chain(&self.targets).collect()
    }
    // `targets` stay names: each pause resolves the role it picks when it starts.
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        let node = (!self.node.is_empty()).then_some(&mut self.node);
        node.into_iter().collect()
    }
    fn check(&self) -> Result<(), String> {
        if self.node.is_empty() == self.targets.is_empty() {
            return Err("give exactly one of `node` and `targets`".into());
        }
        if self.until_ms <= self.at_ms {
            return Err("`until_ms` must come after `at_ms`".into());
        }
        if self.on_ms == 0 || self.off_ms == 0 {
            return Err("`on_ms` and `off_ms` must be positive".into());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let (on, off) = (self.on_ms, self.off_ms);
        let (from, until) = (self.at_ms, self.until_ms);
        let node = match self.targets.as_slice() {
            [] => self.node.clone(),
            targets => format!("one of {}", targets.join(", ")),
        };
        format!("pause {node} for {on} ms every {} ms from {from} ms to {until} ms", on + off)
    }
    fn apply(&self, world: &World, why: &str) {
        let (fault, w, why) = (self.clone(), world.clone(), why.to_owned());
        let plan = world.start_plan(self.clone());
        world.spawn_on_nemesis(async move {
            let mut last_ms = None;
            for at_ms in fault.starts_ms() {
                if let Some(last_ms) = last_ms {
                    madsim::time::sleep(Duration::from_millis(at_ms - last_ms)).await;
                }
                last_ms = Some(at_ms);
                // Drawn as the cycle starts, from the simulation's stream (its place in that
                // stream is part of every trace hash of a run with `targets`).
                let cycle = fault.cycle(at_ms, |len| madsim::rand::thread_rng().gen_range(0..len));
                w.record_cycle(plan, cycle.clone());
                let why = cycle.why(&fault, &why);
                // A group is looked up every cycle: a node added since is paused too.
                match fault.resolve(&w, &cycle.target) {
                    Some(idxs) => idxs.into_iter().for_each(|idx| w.pause(idx, fault.on(), &why)),
                    None => w.record_fault(Op::Note, None, cycle.skipped()),
                }
            }
        });
    }
}

/// One cycle of a periodic pause, as both worlds run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// When it starts, in true ms since the start of the run.
    pub at_ms: u64,
    /// What it pauses: a node, a role (resolved when it starts) or a group.
    pub target: String,
    /// How long it pauses, in ms.
    pub on_ms: u64,
    /// Which of the fault's `targets` it picked (None: the fault names one `node`).
    pub pick: Option<usize>,
}

impl Cycle {
    /// Why its pause happened, for the history: `scheduled`, and which target it picked.
    pub fn why(&self, fault: &PausePeriodic, scheduled: &str) -> String {
        match self.pick {
            None => scheduled.to_owned(),
            Some(_) => format!(
                "{scheduled}; this pause picked {} of {}",
                self.target,
                fault.targets.join(", ")
            ),
        }
    }

    /// The note of a cycle whose role nobody held when it started.
    pub fn skipped(&self) -> String {
        format!("skipped a pause: no {}", self.target)
    }
}

/// A periodic pause of a run and the cycles it ran (see [`crate::SimOutcome::pause_plans`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PausePlan {
    /// The fault, as scheduled (its `targets` unresolved).
    pub fault: PausePeriodic,
    /// Its cycles, in time order.
    pub cycles: Vec<Cycle>,
}

impl PausePlan {
    /// The cycles of `fault`: its own for a fixed node, else those of its plan among `plans`
    /// (taken out: each plan serves the one fault it was drawn for).
    pub fn take_cycles(plans: &mut Vec<PausePlan>, fault: &PausePeriodic) -> Vec<Cycle> {
        fault.node_cycles().unwrap_or_else(|| {
            match plans.iter().position(|p| p.fault == *fault) {
                Some(i) => plans.remove(i).cycles,
                None => vec![],
            }
        })
    }
}

impl PausePeriodic {
    fn on(&self) -> Duration {
        Duration::from_millis(self.on_ms)
    }

    /// When each cycle starts, in true ms since the start of the run: `at_ms`, then every
    /// `on_ms + off_ms` while before `until_ms`. The same in both worlds (live mode times each
    /// from the run's start, so a late timer does not shift the later ones).
    pub fn starts_ms(&self) -> impl Iterator<Item = u64> + '_ {
        let period_ms = self.on_ms + self.off_ms;
        let starts = (0..).map(move |k| self.at_ms + k * period_ms);
        starts.take_while(|at_ms| *at_ms < self.until_ms)
    }

    /// The cycle that starts at `at_ms`: its target is `node`, or one of `targets` at the
    /// index `pick(targets.len())` returns (called once per cycle, only with `targets`).
    pub fn cycle(&self, at_ms: u64, pick: impl FnOnce(usize) -> usize) -> Cycle {
        let pick = (!self.targets.is_empty()).then(|| pick(self.targets.len()));
        let target = match pick {
            Some(i) => self.targets[i].clone(),
            None => self.node.clone(),
        };
        Cycle {
            at_ms,
            target,
            on_ms: self.on_ms,
            pick,
        }
    }

    /// Every cycle of a periodic pause of one `node`, which draws nothing; None with
    /// `targets`, whose picks only the simulated run can tell ([`PausePlan`]).
    pub fn node_cycles(&self) -> Option<Vec<Cycle>> {
        if !self.targets.is_empty() {
            return None;
        }
        // `cycle` calls the pick only with `targets`.
        Some(self.starts_ms().map(|at_ms| self.cycle(at_ms, |_| 0)).collect())
    }

    /// The nodes `target` names now: every node of a group, the node holding a role (None if
    /// nobody does), or the one node.
    fn resolve(&self, world: &World, target: &str) -> Option<Vec<NodeIdx>> {
        let role = match target {
            ROLE_SERVERS => Role::Server,
            ROLE_CLIENTS => Role::Client,
            role if is_role(role) => return world.who(role).map(|idx| vec![idx]),
            node => return Some(vec![world.node(node).expect("fault targets are validated")]),
        };
        let names = world.names(role);
        Some(names.iter().filter_map(|n| world.node(n)).collect())
    }
}

/// `[faults_random]` keys of periodic pauses: each pauses one node of the list for a few
/// cycles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a periodic pause starts.
    #[serde(default)]
    pub pause_periodic_probability: f64,
    /// Longest pause of a cycle, in ms (from 1).
    #[serde(default = "d_ms_max")]
    pub pause_periodic_on_ms_max: u64,
    /// Longest run between pauses, in ms (from 1).
    #[serde(default = "d_ms_max")]
    pub pause_periodic_off_ms_max: u64,
    /// Most cycles (from 1).
    #[serde(default = "d_cycles_max")]
    pub pause_periodic_cycles_max: u64,
    /// Nodes that may be paused periodically (default: the servers).
    #[serde(default)]
    pub pause_periodic_nodes: Vec<String>,
}

fn d_ms_max() -> u64 {
    500
}
fn d_cycles_max() -> u64 {
    5
}

impl Default for Random {
    fn default() -> Self {
        Random {
            pause_periodic_probability: 0.0,
            pause_periodic_on_ms_max: d_ms_max(),
            pause_periodic_off_ms_max: d_ms_max(),
            pause_periodic_cycles_max: d_cycles_max(),
            pause_periodic_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = PausePeriodic;

    fn probability(&self) -> f64 {
        self.pause_periodic_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("pause_periodic_probability", self.probability())?;
        check_range("pause_periodic_on_ms", 1, self.pause_periodic_on_ms_max)?;
        check_range("pause_periodic_off_ms", 1, self.pause_periodic_off_ms_max)?;
        check_range("pause_periodic_cycles", 1, self.pause_periodic_cycles_max)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "pause_periodic_nodes",
            list: Some(&self.pause_periodic_nodes),
            default: DefaultNodes::Servers,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> PausePeriodic {
        let node = pick(d, &space.nodes);
        let at_ms = space.at(d);
        let on_ms = d.u64_in(1, self.pause_periodic_on_ms_max);
        let off_ms = d.u64_in(1, self.pause_periodic_off_ms_max);
        let cycles = d.u64_in(1, self.pause_periodic_cycles_max);
        PausePeriodic {
            node,
            targets: vec![],
            at_ms,
            until_ms: at_ms + (cycles - 1) * (on_ms + off_ms) + 1,
            on_ms,
            off_ms,
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "pause {} for 1..={} ms every +1..={} ms, 1..={} times, {}",
            space.nodes.join(", "),
            self.pause_periodic_on_ms_max,
            self.pause_periodic_off_ms_max,
            self.pause_periodic_cycles_max,
            space.describe_when()
        )
    }
}
