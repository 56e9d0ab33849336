//! The faults, live: how live mode applies each kind the simulator's fault files define
//! (`locksim_sim::fault`), one [`ApplyIn`] impl per kind. A kind live mode cannot apply says
//! so in its own file, with the reason (`simulator_only!`), and `refuse::why_not` reads it
//! there; a kind that does neither does not compile (`Fault::apply_in` needs one or the other
//! for every kind).
//!
//! - `pause`: SIGSTOP to the node's process, SIGCONT after `duration_ms` ([`Live::pause`]).
//! - `crash`: SIGKILL, and a restart after `restart_after_ms` if given ([`Live::crash`]).
//! - `partition`: the proxies on the links it separates stall or reset them until the heal
//!   ([`Live::partition`]).
//! - `loss`: a window of the run's loss plan, which every proxy applies as TCP experiences
//!   loss, by resends after the RTO; the nemesis only records it (`wire::loss_plan`).
//! - `delay_spike`: a one-way stall of the links carrying what its sender sends, healed after
//!   `duration_ms` (`wire`).
//! - `pause_periodic`: below.
//!
//! Periodic pauses: live mode runs the cycles the simulator's definition plans
//! (`locksim_sim::fault::pause_periodic`), each stopped with SIGSTOP for its `on_ms` and timed
//! from the run's start (`at_ms + k × (on_ms + off_ms)`), so a late timer does not shift every
//! later pause. A pause of one `node` draws nothing and its cycles follow from the fault; the
//! picks of one with `targets` are draws of the simulation's own random stream, interleaved
//! with everything else the simulation draws, so live mode takes them from a simulated run
//! of the same (scenario, seed) ([`pause_plans`]): both worlds pause the same targets at the
//! same times.

use super::{Action, Live, NEMESIS};
use locksim_check::{Event, Kind, Op};
use locksim_scenarios::Prepared;
use locksim_sim::fault::pause_periodic::{Cycle, PausePeriodic, PausePlan};
use locksim_sim::fault::spec::ApplyIn;
use locksim_sim::fault::{Crash, DelaySpike, Loss, Partition, Pause};
use locksim_sim::nemesis::{ROLE_CLIENTS, ROLE_SERVERS};
use locksim_sim::Fault;

/// The plan live mode runs for every periodic pause of `prepared`'s schedule on `seed`, in
/// the schedule's order: the cycles of a pause of one `node` from the fault (its role, if it
/// names one, is resolved when it starts), those of one with `targets` as the simulated run
/// of the same seed ran them (none if that run never started it). The simulation runs on a
/// thread of its own, only if a pause has `targets`: live code never runs inside a madsim
/// runtime.
pub fn pause_plans(prepared: &Prepared, seed: u64) -> anyhow::Result<Vec<PausePlan>> {
    let periodic: Vec<PausePeriodic> = (prepared.faults_for(seed).into_iter())
        .filter_map(|f| match f {
            Fault::PausePeriodic(p) => Some(p),
            _ => None,
        })
        .collect();
    let mut simulated = match periodic.iter().any(|p| !p.targets.is_empty()) {
        true => std::thread::scope(|s| s.spawn(|| prepared.pause_plans(seed)).join())
            .map_err(|_| anyhow::anyhow!("the simulated run of seed {seed} panicked"))?
            .map_err(anyhow::Error::msg)?,
        false => vec![],
    };
    let plans = periodic.into_iter().map(|fault| {
        let cycles = match fault.node_cycles() {
            Some(cycles) => cycles,
            None => match simulated.iter().position(|p| p.fault == fault) {
                Some(i) => simulated.remove(i).cycles,
                None => vec![],
            },
        };
        PausePlan { fault, cycles }
    });
    Ok(plans.collect())
}

impl Live<'_> {
    /// Starts a periodic pause (its `node` resolved if it named a role): schedules every cycle
    /// of its plan.
    pub(super) fn pause_periodic(&mut self, fault: &PausePeriodic, why: &str) {
        let cycles = match fault.node_cycles() {
            Some(cycles) => cycles,
            // `targets` are never resolved before: the fault is the one scheduled.
            None => match self.pause_plans.iter().position(|p| p.fault == *fault) {
                Some(i) => self.pause_plans.remove(i).cycles,
                None => vec![],
            },
        };
        for cycle in cycles {
            let at_ns = self.recorder.start_ns() + cycle.at_ms * 1_000_000;
            let why = cycle.why(fault, why);
            self.at(at_ns, Action::Cycle { cycle, why });
        }
    }

    /// One cycle: pause its target for `on_ms` now.
    pub(super) fn pause_cycle(&mut self, cycle: &Cycle, why: &str) {
        match self.group(&cycle.target) {
            Some(nodes) => {
                for node in nodes {
                    self.pause(&node, cycle.on_ms, why);
                }
            }
            None => {
                let skipped = Event::new(NEMESIS, Kind::Info, Op::Note).detail(cycle.skipped());
                self.recorder.record(skipped);
            }
        }
    }

    /// The nodes `target` names now: every server or client of a group, the node holding a
    /// role (None if nobody does), or the one node.
    fn group(&self, target: &str) -> Option<Vec<String>> {
        match target {
            ROLE_SERVERS => Some(self.prepared.deployment.servers()),
            ROLE_CLIENTS => Some(self.prepared.scenario.workload.client_names()),
            other => self.resolve(other).map(|n| vec![n]),
        }
    }
}

impl ApplyIn<Live<'_>> for Pause {
    fn apply_in(&self, live: &mut Live<'_>, why: &str) {
        live.pause(&self.node, self.duration_ms, why);
    }
}

impl ApplyIn<Live<'_>> for Crash {
    fn apply_in(&self, live: &mut Live<'_>, why: &str) {
        live.crash(&self.node, self.restart_after_ms, why);
    }
}

impl ApplyIn<Live<'_>> for Partition {
    fn apply_in(&self, live: &mut Live<'_>, _why: &str) {
        live.partition(&Fault::Partition(self.clone()), self.duration_ms);
    }
}

impl ApplyIn<Live<'_>> for Loss {
    fn apply_in(&self, live: &mut Live<'_>, _why: &str) {
        live.loss_window(self);
    }
}

impl ApplyIn<Live<'_>> for DelaySpike {
    fn apply_in(&self, live: &mut Live<'_>, why: &str) {
        live.delay_spike(&self.node, &self.to, self.duration_ms, why);
    }
}

impl ApplyIn<Live<'_>> for PausePeriodic {
    fn apply_in(&self, live: &mut Live<'_>, why: &str) {
        live.pause_periodic(self, why);
    }
}
