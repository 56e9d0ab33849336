//! The nemesis: the schedule of a run's faults, and the moment each one fires.
//!
//! Before the run, point-triggered faults are armed on their nodes ([`armed_points`]: once,
//! as the node's own [`crate::nodes::PointAction`]). During it, a task on the never-paused
//! nemesis node applies the time-triggered faults in time order ([`start`]); each is first
//! resolved ([`apply`]): a role (`@primary`, `@holder`) becomes whoever has it at this
//! instant, then the kind's file applies it through the world's hooks. The kinds themselves
//! live in [`crate::fault`].

use crate::fault::Fault;
use crate::nodes::ArmedPoint;
use crate::roles::is_group;
use crate::world::World;
use locksim_check::history::Op;
use std::time::Duration;

pub use crate::fault::{describe_fault, FaultKind, FaultProfile, Targets};
pub use crate::roles::{
    is_role, ROLE_CLIENTS, ROLE_HOLDER, ROLE_LEADER, ROLE_PRIMARY, ROLE_SERVERS,
};
pub use crate::world::RoleResolver;

/// The faults of the schedule that wait at named points, as their nodes will arm them.
pub fn armed_points(faults: &[Fault]) -> Vec<ArmedPoint> {
    faults.iter().filter_map(Fault::armed_point).collect()
}

/// Starts the nemesis: applies time-triggered faults before `end_ms`, in time order.
pub(crate) fn start(world: &World, faults: &[Fault], end_ms: u64) {
    let mut timed: Vec<Fault> = faults
        .iter()
        .filter(|f| f.at_ms().is_some_and(|t| t < end_ms))
        .cloned()
        .collect();
    timed.sort_by_key(|f| f.at_ms());
    let w = world.clone();
    world.spawn_on_nemesis(async move {
        for fault in timed {
            let at_ns = fault.at_ms().expect("only timed faults") * 1_000_000;
            let now = w.now_ns();
            if at_ns > now {
                madsim::time::sleep(Duration::from_nanos(at_ns - now)).await;
            }
            apply(&w, &fault);
        }
    });
}

/// Applies one fault now. A role target (`@primary`, `@holder`, ...) is resolved first, so
/// the fault hits whoever has the role at this instant; a fault whose role nobody has is
/// recorded as skipped. Groups (`@servers`) are left to the kinds that take them.
pub fn apply(world: &World, fault: &Fault) {
    match resolve(fault, |role| world.who(role).map(|i| world.name(i))) {
        Ok((concrete, why)) => {
            world.fault_fired();
            concrete.apply(world, &why);
        }
        Err(skipped) => world.record_fault(Op::Note, None, skipped),
    }
}

/// A fault as it applies now, in either world: every role replaced by the node `who` names
/// for it (groups left as they are), and the words of its event (`scheduled`, `scheduled on
/// @holder`); or, if nobody has a role, the note that it was skipped.
pub fn resolve(
    fault: &Fault,
    mut who: impl FnMut(&str) -> Option<String>,
) -> Result<(Fault, String), String> {
    let roles: Vec<&str> = fault
        .nodes()
        .into_iter()
        .filter(|n| resolvable(n))
        .collect();
    let mut missing = None;
    let concrete = fault.map_nodes(|name| {
        if !resolvable(name) {
            return Some(name.to_owned());
        }
        let node = who(name);
        if node.is_none() {
            missing.get_or_insert_with(|| name.to_owned());
        }
        node
    });
    let Some(concrete) = concrete else {
        let role = missing.expect("a role was missing");
        return Err(format!("skipped {}: no {role} now", fault.describe()));
    };
    let why = match roles.is_empty() {
        true => "scheduled".to_owned(),
        false => format!("scheduled on {}", roles.join(", ")),
    };
    Ok((concrete, why))
}

/// A role that the deployment or the workload answers (not a group).
pub fn resolvable(name: &str) -> bool {
    is_role(name) && !is_group(name)
}
