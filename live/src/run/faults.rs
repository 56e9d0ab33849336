//! The nemesis's verbs (`crate::nemesis::Nemesis`) on a run, and periodic pauses.
//!
//! Periodic pauses: live mode runs the cycles the simulator's definition plans
//! (`locksim_sim::fault::pause_periodic`), each stopped with SIGSTOP for its `on_ms` and timed
//! from the run's start (`at_ms + k × (on_ms + off_ms)`), so a late timer does not shift every
//! later pause. A pause of one `node` draws nothing and its cycles follow from the fault; the
//! picks of one with `targets` are draws of the simulation's own random stream, interleaved
//! with everything else the simulation draws, so live mode takes them from a simulated run
//! of the same (scenario, seed) ([`pause_plans`]): both worlds pause the same targets at the
//! same times.

use super::{Action, Live};
use crate::nemesis::Nemesis;
use locksim_check::{Event, Op};
use locksim_scenarios::Prepared;
use locksim_sim::fault::pause_periodic::{Cycle, PausePeriodic, PausePlan};
use locksim_sim::fault::{Loss, Partition};
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
    let plans = periodic.into_iter().map(|fault| PausePlan {
        cycles: PausePlan::take_cycles(&mut simulated, &fault),
        fault,
    });
    Ok(plans.collect())
}

impl Live<'_> {
    /// Starts a periodic pause (its `node` resolved if it named a role): schedules every cycle
    /// of its plan.
    pub(super) fn pause_periodic(&mut self, fault: &PausePeriodic, why: &str) {
        // `targets` are never resolved before: the fault is the one scheduled.
        for cycle in PausePlan::take_cycles(&mut self.pause_plans, fault) {
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
            None => self.note(cycle.skipped()),
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

impl Nemesis for Live<'_> {
    fn pause(&mut self, node: &str, duration_ms: u64, why: &str) {
        Live::pause(self, node, duration_ms, why);
    }
    fn kill(&mut self, node: &str, restart_after_ms: Option<u64>, why: &str) {
        self.crash(node, restart_after_ms, why);
    }
    fn cut(&mut self, partition: &Partition) {
        self.partition(partition);
    }
    fn stall(&mut self, sender: &str, to: &[String], duration_ms: u64, why: &str) {
        self.delay_spike(sender, to, duration_ms, why);
    }
    fn loss(&mut self, loss: &Loss) {
        self.loss_window(loss);
    }
    fn pause_periodic(&mut self, fault: &PausePeriodic, why: &str) {
        Live::pause_periodic(self, fault, why);
    }
    fn jump_clock(&mut self, node: &str, delta_ms: i64) {
        let moved = self.shims.get_mut(node).map(|c| c.jump(delta_ms));
        self.clock_moved(node, moved, Event::nemesis(Op::ClockJump).value(delta_ms));
    }
    fn drift_clock(&mut self, node: &str, drift_ppm: i64) {
        let moved = self.shims.get_mut(node).map(|c| c.drift(drift_ppm));
        self.clock_moved(node, moved, Event::nemesis(Op::ClockDrift).value(drift_ppm));
    }
    fn hold_fsyncs(&mut self, node: &str, duration_ms: u64) {
        let until_ns = self.fault_now() + duration_ms * 1_000_000;
        let held = self.shims.get_mut(node).map(|c| c.hold_fsyncs(until_ns));
        let event = Event::nemesis(Op::FsyncStall).value(duration_ms as i64);
        self.clock_moved(node, held, event);
    }
}

impl Live<'_> {
    /// Records a fault of `node`'s shim (its clock, its fsyncs) as the simulator does, or why
    /// it was not applied.
    fn clock_moved(&mut self, node: &str, moved: Option<std::io::Result<()>>, event: Event) {
        match moved {
            Some(Ok(())) => self.recorder.record(event.target(node)),
            Some(Err(e)) => self.note(format!("{node}'s shim file could not be written: {e}")),
            None => self.note(format!("{node} has no shim live: skipped")),
        }
    }
}
