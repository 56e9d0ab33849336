//! What live mode cannot do, refused before anything starts (exit 2), never faked.

use locksim_scenarios::Prepared;
use locksim_sim::{Fault, FaultKind};

/// A scenario live mode refuses: the message names the fault (or parameter) and why.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Why live mode cannot inject a fault of this kind, if it cannot.
pub fn why_not(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::ClockJump | FaultKind::ClockDrift => Some(
            "live mode cannot move a real server's clock: libfaketime does not reach Go's \
             clock (etcd), Debian's redis-server hangs under it, and stepping the machine's \
             clock would move every process at once; run it in the simulator",
        ),
        FaultKind::FsyncStall => Some(
            "live mode cannot hold a real disk's fsyncs (that needs a fault-injecting \
             filesystem); a SIGKILL loses nothing the kernel already has, so power-loss \
             semantics stay the simulator's; run it in the simulator",
        ),
        FaultKind::Partition | FaultKind::Loss => Some(
            "live mode has no TCP proxy on its links yet, so it cannot cut or lose messages; \
             run it in the simulator",
        ),
        FaultKind::Pause | FaultKind::Crash => None,
    }
}

/// Checks every fault of the scenario (scripted, and the kinds its random profile draws).
pub fn check(prepared: &Prepared) -> Result<(), Refused> {
    let s = &prepared.scenario;
    for (i, fault) in s.faults.iter().enumerate() {
        let kind = fault.kind();
        if let Some(why) = why_not(kind) {
            return Err(Refused(format!(
                "{}: faults[{i}] (kind = {:?}): {why}",
                prepared.path,
                snake(kind)
            )));
        }
        let clients = s.workload.client_names();
        if let Fault::Pause {
            node,
            point: Some(point),
            ..
        }
        | Fault::Crash {
            node,
            point: Some(point),
            ..
        } = fault
        {
            if !clients.contains(node) {
                return Err(Refused(format!(
                    "{}: faults[{i}]: the point `{point}` is inside the server `{node}`: a real server has no named points (use `at_ms`)",
                    prepared.path
                )));
            }
        }
    }
    if s.clocks != locksim_sim::ClockConfig::default() {
        let why = why_not(FaultKind::ClockDrift).expect("refused");
        return Err(Refused(format!(
            "{}: [clocks] sets clock drift or offsets: {why}",
            prepared.path
        )));
    }
    let profile = &s.faults_random;
    let drawn = [
        (FaultKind::ClockJump, profile.clock_jump_probability),
        (FaultKind::ClockDrift, profile.clock_drift_probability),
        (FaultKind::FsyncStall, profile.fsync_stall_probability),
        (FaultKind::Partition, profile.partition_probability),
        (FaultKind::Loss, profile.loss_probability),
    ];
    for (kind, p) in drawn {
        if p > 0.0 {
            let why = why_not(kind).expect("these kinds are refused");
            return Err(Refused(format!(
                "{}: faults_random draws {:?} faults: {why}",
                prepared.path,
                snake(kind)
            )));
        }
    }
    Ok(())
}

fn snake(kind: FaultKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
