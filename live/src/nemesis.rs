//! The nemesis's verbs, live: what live mode does to its servers, clients and links, and how
//! each fault kind the simulator defines (`locksim_sim::fault`) is applied through them,
//! one [`ApplyIn`] impl per kind. A kind live mode cannot apply says so in its own file, with
//! the reason (`simulator_only!`), and [`crate::refuse`] reads it there (`why_not`); a kind
//! that does neither does not compile (`Fault::apply_in` needs one or the other for every
//! kind). The verbs are implemented by the run (`run/faults.rs`).

use locksim_sim::fault::spec::ApplyIn;
use locksim_sim::fault::{
    ClockDrift, ClockJump, Crash, DelaySpike, FsyncStall, Loss, Partition, Pause, PausePeriodic,
};

/// What live mode's nemesis can do; each verb records its history events and undoes itself
/// after the fault's duration.
pub trait Nemesis {
    /// SIGSTOP to the node's process, SIGCONT after `duration_ms`.
    fn pause(&mut self, node: &str, duration_ms: u64, why: &str);
    /// SIGKILL, and a restart after `restart_after_ms` if given.
    fn kill(&mut self, node: &str, restart_after_ms: Option<u64>, why: &str);
    /// The proxies on the links the partition separates stall or reset them; healed after
    /// its `duration_ms`.
    fn cut(&mut self, partition: &Partition);
    /// A one-way stall of the links carrying what `sender` sends to `to` (every other node if
    /// empty), let go after `duration_ms`.
    fn stall(&mut self, sender: &str, to: &[String], duration_ms: u64, why: &str);
    /// A loss window: the proxies' loss plan has it already; this records it, on and off.
    fn loss(&mut self, loss: &Loss);
    /// The cycles of a periodic pause, each a [`Nemesis::pause`] at its planned time.
    fn pause_periodic(&mut self, fault: &PausePeriodic, why: &str);
    /// Steps a node's wall clock by `delta_ms` (its moved clock, `deploy::shim`).
    fn jump_clock(&mut self, node: &str, delta_ms: i64);
    /// Sets a node's clock rate to `drift_ppm` from now on.
    fn drift_clock(&mut self, node: &str, drift_ppm: i64);
    /// Holds a server's fsyncs for `duration_ms` (its shim, `deploy::shim`).
    fn hold_fsyncs(&mut self, node: &str, duration_ms: u64);
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for Pause {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), why: &str) {
        nemesis.pause(&self.node, self.duration_ms, why);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for Crash {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), why: &str) {
        nemesis.kill(&self.node, self.restart_after_ms, why);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for Partition {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), _why: &str) {
        nemesis.cut(self);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for Loss {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), _why: &str) {
        nemesis.loss(self);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for DelaySpike {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), why: &str) {
        nemesis.stall(&self.node, &self.to, self.duration_ms, why);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for PausePeriodic {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), why: &str) {
        nemesis.pause_periodic(self, why);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for ClockJump {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), _why: &str) {
        nemesis.jump_clock(&self.node, self.delta_ms);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for ClockDrift {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), _why: &str) {
        nemesis.drift_clock(&self.node, self.drift_ppm);
    }
}

impl<'n> ApplyIn<dyn Nemesis + 'n> for FsyncStall {
    fn apply_in(&self, nemesis: &mut (dyn Nemesis + 'n), _why: &str) {
        nemesis.hold_fsyncs(&self.node, self.duration_ms);
    }
}
