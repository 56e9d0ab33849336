//! Faults on the wire that are not cuts: `loss` windows and `delay_spike`s, live.
//! - **loss**: the proxies lose chunks as TCP experiences it, resent after the RTO
//!   ([`crate::proxy::LossPlan`]); the plan is the whole run's, known from the schedule before
//!   the start, so that a resend is lost with the probability in force when it leaves. The
//!   nemesis only records each window's start and end, as the simulator does.
//! - **delay_spike**: the sender's links to its receivers stall one way, from that sender only
//!   (a one-way stall, as `--partition stall` cuts), and heal after `duration_ms`: what it sent
//!   meanwhile arrives then, in order. At a named point the client stops itself, the nemesis
//!   stalls its links and lets it go on at once: the write it was about to send leaves on time
//!   and lands late.

use super::{show, Action, Live};
use crate::clock;
use crate::deploy::Deployment;
use crate::proxy::{CutMode, LossPlan, LossWindow};
use crate::refuse::Cuts;
use locksim_check::{Event, Op};
use locksim_scenarios::Prepared;
use locksim_sim::fault::{delay_spike, Loss};
use locksim_sim::Fault;
use std::sync::Arc;

/// The run's loss over time, from `[network] loss_probability` and the `loss` faults of the
/// schedule (scripted and drawn), with the run's zero at `start_ns`; `None` if nothing is
/// ever lost. A window ends at the liveness phase, which has no loss period (as in the
/// simulator, where the network's own probability still applies then). The proxies between
/// servers lose by it from now on; a client's proxies get it when they are made.
pub(super) fn loss_plan(
    prepared: &Prepared,
    faults: &[Fault],
    start_ns: u64,
    deployment: &Deployment,
) -> Option<Arc<LossPlan>> {
    let duration_ms = prepared.scenario.duration_ms;
    let mut windows: Vec<LossWindow> = faults
        .iter()
        .filter_map(|f| match f {
            Fault::Loss(l) => Some(LossWindow {
                at_ms: l.at_ms,
                until_ms: (l.at_ms + l.duration_ms).min(duration_ms),
                probability: l.probability,
            }),
            _ => None,
        })
        .collect();
    // Stable: of two windows starting together, the later listed replaces the earlier.
    windows.sort_by_key(|w| w.at_ms);
    let plan = LossPlan {
        start_ns,
        base: prepared.scenario.network.loss_probability,
        windows,
    };
    let plan = (!plan.lossless()).then(|| Arc::new(plan))?;
    for proxy in deployment.peer_proxies.values().flatten() {
        proxy.lose(plan.clone());
    }
    Some(plan)
}

impl Live<'_> {
    /// A loss window starts: the proxies already lose chunks by the plan; record it, and its
    /// end unless a later window replaces it first.
    pub(super) fn loss_window(&mut self, loss: &Loss) {
        assert!(self.loss.is_some() || loss.probability == 0.0, "planned");
        self.loss_epoch += 1;
        let event = Event::nemesis(Op::Loss)
            .value(loss.duration_ms as i64)
            .detail(format!(
                "loss probability {} (TCP: a lost chunk is resent after the RTO)",
                loss.probability
            ));
        self.recorder.record(event);
        let epoch = self.loss_epoch;
        let end_ns = self.fault_now() + loss.duration_ms * 1_000_000;
        self.at(end_ns, Action::LossOver { epoch });
    }

    pub(super) fn loss_over(&mut self, epoch: u64) {
        if epoch == self.loss_epoch {
            let over = Event::nemesis(Op::Loss).detail("loss period over");
            self.recorder.record(over);
        }
    }

    /// Holds what `sender` sends to `to` (every other node if empty) for `duration_ms`: its
    /// links stall one way and heal then ([`Action::Flush`]).
    pub(super) fn delay_spike(&mut self, sender: &str, to: &[String], duration_ms: u64, why: &str) {
        let Some(receivers) = delay_spike::receivers(&sender.to_owned(), to) else {
            return;
        };
        let clients = self.prepared.scenario.workload.client_names();
        let servers = self.prepared.deployment.servers();
        let protocol = &self.prepared.scenario.protocol.name;
        let links = crate::refuse::spike_links(sender, &receivers, &clients, &servers, protocol)
            .expect("checked before the run");
        self.switch(&links, Some(CutMode::Stall));
        let detail = format!("{sender} -> {}", delay_spike::to_words(&receivers));
        let event = Event::nemesis(Op::Hold)
            .target(sender)
            .value(duration_ms as i64)
            .detail(format!("{detail}; {why}; stalled: {}", show(&links)));
        self.recorder.record(event);
        let node = sender.to_owned();
        let end_ns = self.fault_now() + duration_ms * 1_000_000;
        self.at(
            end_ns,
            Action::Flush {
                links,
                node,
                detail,
            },
        );
    }

    /// A delay spike ends: its links move on, what they held first.
    pub(super) fn flush(&mut self, links: &Cuts, node: &str, detail: String) {
        self.switch(links, None);
        let event = Event::nemesis(Op::Flush).target(node).detail(detail);
        self.recorder.record(event);
    }

    /// Client `who` stopped itself at a point where a delay spike fires (`duration_ms`, to
    /// `to`): stall its links, then let it go on (unless a pause of its own holds it meanwhile).
    pub(super) fn spike_at_point(
        &mut self,
        who: &str,
        (duration_ms, to): (u64, &[String]),
        why: &str,
        stopped_ns: u64,
    ) {
        let resolved: Option<Vec<String>> = to.iter().map(|n| self.resolve(n)).collect();
        match resolved {
            Some(to) => self.delay_spike(who, &to, duration_ms, why),
            None => self.note(format!(
                "delay spike {why} skipped: a receiver's role is vacant"
            )),
        }
        if self.paused.contains_key(who) {
            return;
        }
        if let Some(proc) = self.proc_of(who) {
            proc.signal(libc::SIGCONT);
        }
        let stopped_us = clock::since(stopped_ns).as_micros();
        let note = Event::nemesis(Op::Note).target(who).detail(format!(
            "{who} stopped itself {stopped_us} µs {why} while its links were held"
        ));
        self.recorder.record(note);
    }
}
