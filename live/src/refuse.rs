//! What live mode cannot do, refused before anything starts (exit 2), never faked.

use locksim_scenarios::workload::Check;
use locksim_scenarios::Prepared;
use locksim_sim::nodes::ArmedPoint;
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
        FaultKind::Loss => Some(
            "live mode's TCP proxies cut links but do not drop single messages (TCP would \
             resend them); run it in the simulator",
        ),
        FaultKind::Partition => None,
        FaultKind::Pause | FaultKind::PausePeriodic | FaultKind::Crash => None,
    }
}

/// Live mode's clients run the `careful` library, one write per critical section, checked
/// before it or not at all.
fn workload_and_client(prepared: &Prepared) -> Result<(), Refused> {
    let w = &prepared.scenario.workload;
    if w.check == Check::OnSignal || w.writes_per_cs != 1 {
        return Err(Refused(format!(
            "{}: workload: live mode runs one write per critical section with check = \
             \"before_write\" or \"never\"; run it in the simulator",
            prepared.path
        )));
    }
    let client = prepared.scenario.protocol.params.get("client");
    // Each protocol's default library: the careful Redis client, the raw ZooKeeper one.
    let default = |c: &toml::Value| matches!(c.as_str(), Some("careful" | "zookeeper"));
    if client.is_some_and(|c| !default(c)) {
        return Err(Refused(format!(
            "{}: protocol.client: live mode runs the careful Redis client and the raw \
             ZooKeeper one only; run other client libraries in the simulator",
            prepared.path
        )));
    }
    Ok(())
}

/// Checks every fault of the scenario (scripted, and the kinds its random profile draws).
pub fn check(prepared: &Prepared) -> Result<(), Refused> {
    let s = &prepared.scenario;
    workload_and_client(prepared)?;
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
        if let Fault::Partition(_) = fault {
            partition_links(fault, &clients, &prepared.deployment.servers()).map_err(|why| {
                Refused(format!(
                    "{}: faults[{i}] (kind = \"partition\"): {why}",
                    prepared.path
                ))
            })?;
        }
        if let Some(ArmedPoint { node, point, .. }) = fault.armed_point() {
            if !clients.contains(&node) {
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
    for kind in FaultKind::ALL.iter().copied() {
        if profile.probability(kind) > 0.0 {
            // Random partitions may cut links between servers, which live mode cannot.
            let why = match (kind, why_not(kind)) {
                (_, Some(why)) => why,
                (FaultKind::Partition, None) => "live mode cuts only scripted client links",
                (_, None) => continue,
            };
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

/// The client links a partition cuts, as (client, server or `resource`) pairs; an error if it
/// would cut a link live mode has no proxy on (between servers) or is one-way.
pub fn partition_links(
    fault: &Fault,
    clients: &[String],
    servers: &[String],
) -> Result<Vec<(String, String)>, String> {
    let Fault::Partition(p) = fault else {
        return Ok(vec![]);
    };
    let (isolate, groups, one_way) = (&p.isolate, &p.groups, &p.one_way);
    if *one_way {
        return Err("live mode cuts TCP links both ways: `one_way` is the simulator's".into());
    }
    let mut nodes: Vec<String> = clients.iter().chain(servers).cloned().collect();
    nodes.push(locksim_protocols::resource::RESOURCE.into());
    let side = |n: &str| -> Option<usize> {
        if isolate.is_empty() {
            groups.iter().position(|g| g.iter().any(|x| x == n))
        } else {
            Some(usize::from(isolate.iter().any(|x| x == n)))
        }
    };
    let is_client =
        |n: &str| clients.iter().any(|c| c == n) || n == locksim_sim::nemesis::ROLE_HOLDER;
    let named: Vec<&String> = isolate.iter().chain(groups.iter().flatten()).collect();
    if let Some(role) = named
        .iter()
        .find(|n| locksim_sim::nemesis::is_role(n) && !is_client(n))
    {
        return Err(format!(
            "`{role}` is a server role: live mode has no proxy between servers yet"
        ));
    }
    for n in named {
        if !nodes.contains(n) {
            nodes.push(n.clone());
        }
    }
    let mut links = vec![];
    for a in &nodes {
        for b in &nodes {
            let (Some(sa), Some(sb)) = (side(a), side(b)) else {
                continue;
            };
            if sa == sb || !is_client(a) || is_client(b) {
                continue;
            }
            links.push((a.clone(), b.clone()));
        }
    }
    for a in &nodes {
        for b in &nodes {
            let cut = matches!((side(a), side(b)), (Some(x), Some(y)) if x != y);
            if cut && servers.contains(a) && servers.contains(b) {
                return Err(format!("it cuts {a} from {b}: live mode has no proxy between servers yet (only client links)"));
            }
        }
    }
    Ok(links)
}
