//! `pause_periodic` live: the target is stopped (SIGSTOP) for `on_ms`, runs for `off_ms`, and
//! again, from `at_ms` while a cycle can start before `until_ms`, as the simulator's
//! (`locksim_sim::fault::PausePeriodic`): a group (`@servers`, `@clients`) is stopped and
//! let go as one, a role in `node` is resolved once, when the first cycle starts, and with
//! `targets` each cycle picks one afresh (from the run's seed) and resolves it then. The
//! cycles are timed from the schedule (`at_ms + k × (on_ms + off_ms)`), not from when the
//! previous one fired, so a late timer does not shift every later pause.

use super::{Action, Live};
use locksim_check::{Event, Kind, Op};
use locksim_sim::fault::PausePeriodic;
use locksim_sim::nemesis::{ROLE_CLIENTS, ROLE_SERVERS};
use rand::Rng;

/// Mixed into the seed for the picks of periodic pauses, so they are a stream of their own.
pub(super) const PICKS_STREAM: u64 = 0x7061_7573_655f_7065;

impl Live<'_> {
    /// Starts a periodic pause (its `node` already resolved if it named a role).
    pub(super) fn pause_periodic(&mut self, fault: PausePeriodic, why: &str) {
        assert!(fault.on_ms > 0 && fault.off_ms > 0, "validated: {fault:?}");
        self.pause_cycle(fault, why.to_owned());
    }

    /// One cycle: pause the target for `on_ms` now, and schedule the next cycle if it starts
    /// before `until_ms`.
    pub(super) fn pause_cycle(&mut self, fault: PausePeriodic, scheduled: String) {
        let (target, why) = self.pick(&fault, &scheduled);
        match self.group(&target) {
            Some(nodes) => {
                for node in nodes {
                    self.pause(&node, fault.on_ms, &why);
                }
            }
            None => {
                let skipped = Event::new(super::NEMESIS, Kind::Info, Op::Note)
                    .detail(format!("skipped a pause: no {target}"));
                self.recorder.record(skipped);
            }
        }
        let start_ns = self.recorder.start_ns();
        let period_ns = (fault.on_ms + fault.off_ms) * 1_000_000;
        let this_ns = self.cycle_at(&fault);
        let next_ns = this_ns + period_ns;
        if next_ns < start_ns + fault.until_ms * 1_000_000 {
            self.at(next_ns, Action::Cycle(fault, scheduled));
        }
    }

    /// When the cycle due now was scheduled: the latest `at_ms + k × period` not after now.
    fn cycle_at(&self, fault: &PausePeriodic) -> u64 {
        let first_ns = self.recorder.start_ns() + fault.at_ms * 1_000_000;
        let period_ns = (fault.on_ms + fault.off_ms) * 1_000_000;
        let k = self.fault_now().saturating_sub(first_ns) / period_ns;
        first_ns + k * period_ns
    }

    /// This cycle's target and why: `node`, or one of `targets` drawn from the run's seed.
    fn pick(&mut self, fault: &PausePeriodic, scheduled: &str) -> (String, String) {
        if fault.targets.is_empty() {
            return (fault.node.clone(), scheduled.to_owned());
        }
        let target = fault.targets[self.picks.gen_range(0..fault.targets.len())].clone();
        let why = format!(
            "{scheduled}; this pause picked {target} of {}",
            fault.targets.join(", ")
        );
        (target, why)
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
