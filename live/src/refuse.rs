//! What live mode cannot do, refused before anything starts (exit 2), never faked.

use crate::proxy::{CutMode, Dir};
use locksim_protocols::raft::etcd;
use locksim_protocols::redis::replicated;
use locksim_scenarios::workload::Check;
use locksim_scenarios::Prepared;
use locksim_sim::fault::Partition;
use locksim_sim::nemesis::{is_role, ROLE_CLIENTS, ROLE_HOLDER};
use locksim_sim::net::{PartitionMode, CONNECTION_TIMEOUT_MS_DEFAULT};
use locksim_sim::nodes::ArmedPoint;
use locksim_sim::{Fault, FaultKind};

/// A scenario live mode refuses: the message names the fault (or parameter) and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Why live mode cannot inject a fault of this kind, if it cannot: the reason the kind's
/// own file gives (`locksim_sim::fault::spec::ApplyIn`, which live mode implements for each
/// kind it applies, in `nemesis.rs`).
pub fn why_not(kind: FaultKind) -> Option<&'static str> {
    kind.cannot_in::<dyn crate::nemesis::Nemesis>()
}

/// What locksim's own live client (the protocol's own client code, every profile and option
/// as the simulator runs them) cannot run of client `profile`, and why.
fn own_client(profile: Option<&str>) -> Option<String> {
    (profile == Some("redis-py-shared-token")).then(|| {
        "\"redis-py-shared-token\" is one redis-py Lock object shared by the threads of one \
         process; live mode runs each client in a process of its own, so no two share it: \
         run it in the simulator"
            .into()
    })
}

/// locksim's own live client runs what [`own_client`] allows; with `library`, the client
/// profile's real library, where it has a driver ([`crate::client::driver`]).
fn workload_and_client(prepared: &Prepared, library: bool) -> Result<(), Refused> {
    let w = &prepared.scenario.workload;
    let (profile, driver) = crate::client::driver::of_scenario(&prepared.scenario);
    if library {
        if let Some(d) = driver {
            if w.check == Check::AskServers && !d.asks_servers {
                let asking: Vec<&str> = (crate::client::driver::DRIVERS.iter())
                    .filter(|d| d.asks_servers)
                    .map(|d| d.profile)
                    .collect();
                return Err(Refused(format!(
                    "{}: workload.check = \"ask_servers\": the {} driver has no call that asks \
                     the servers (only {} drive one); use another check",
                    prepared.path,
                    d.profile,
                    asking.join(", ")
                )));
            }
            return match d.no_signal {
                Some(why) if w.check != Check::Never => Err(Refused(format!(
                    "{}: workload.check: live --library runs {} with no lost-lock signal to \
                     check: {why}; use check = \"never\"",
                    prepared.path, d.profile
                ))),
                _ => Ok(()),
            };
        }
        let named = profile.map_or("none: locksim's own client".into(), |p| format!("\"{p}\""));
        return Err(Refused(format!(
            "{}: protocol.client = {named}: live --library runs a real library only where it \
             has a driver ({}); this profile is modelled only: run it in the simulator, or \
             live without --library",
            prepared.path,
            crate::client::driver::profiles()
        )));
    }
    match own_client(profile) {
        None => Ok(()),
        Some(why) => {
            let hint = driver.map_or(String::new(), |d| {
                format!(" (its real library runs with live --library, {})", d.path)
            });
            Err(Refused(format!(
                "{}: protocol.client: {why}{hint}",
                prepared.path
            )))
        }
    }
}

/// The model's protocol parameters, with the client profile's defaults (as the deployment
/// reads them).
fn typed<P: serde::de::DeserializeOwned>(prepared: &Prepared) -> Result<P, Refused> {
    crate::deploy::params(prepared)
        .map_err(|e| Refused(format!("{}: protocol: {e}", prepared.path)))
}

/// A parameter's value as the file writes it (`"local-role"`).
fn named(value: impl serde::Serialize) -> String {
    serde_json::to_string(&value).expect("a parameter's value serialises")
}

/// What a real etcd cannot be of the model's server: a bug variant, a TTL of a fraction of a
/// second, settings the binary has no flag for, the model's lessor before etcd's fixes; and
/// with `library` any Unlock key, since a real library runs its own Unlock (locksim's own
/// client sends either Unlock, PR #22115's transaction included, `links::etcd`).
fn etcd_server(prepared: &Prepared, library: bool) -> Result<Option<String>, Refused> {
    use etcd::{Lessor, Variant};
    let p: etcd::Params = typed(prepared)?;
    let unlock_keys = ["unlock", "unlock_timeout_ms", "unlock_retry_after_ms"];
    let raw = &prepared.scenario.protocol.params;
    let unlock_set = unlock_keys
        .iter()
        .find(|key| library && raw.contains_key(**key));
    Ok(Some(if p.variant == Variant::AckBeforeFsync {
        "protocol.variant = \"ack-before-fsync\" is a bug of the model's server: a real etcd \
         fsyncs before it acknowledges"
            .into()
    } else if !p.lease_ttl_ms.is_multiple_of(1000) {
        let ms = p.lease_ttl_ms;
        format!("protocol.lease_ttl_ms = {ms}: a real etcd lease's TTL is whole seconds")
    } else if p.checkpoint_interval_ms() != etcd::LEASE_CHECKPOINT_INTERVAL_MS_DEFAULT {
        "protocol.lease_checkpoint_interval_ms: the etcd binary has no flag for it \
         (LeaseCheckpointInterval is a server setting; 5 min)"
            .into()
    } else if p.lock_delay_ms != 0 {
        "protocol.lock_delay_ms: etcd has no lock-delay (it is Chubby's)".into()
    } else if p.lessor != Lessor::EnsureLeadership {
        format!(
            "protocol.lessor = {}: a real etcd's lessor is its release's, which no key changes",
            named(p.lessor)
        )
    } else if let Some(key) = unlock_set {
        format!("protocol.{key}: live --library runs the real library's own Unlock, which it does not change")
    } else {
        return Ok(None);
    }))
}

/// What real Sentinels cannot be: the model's mistake of promoting a lagging replica (the
/// client's mistakes run live: the model's own client runs).
fn sentinels(prepared: &Prepared) -> Result<Option<String>, Refused> {
    let p: replicated::Params = typed(prepared)?;
    Ok(
        (p.variant == replicated::Variant::LaggingReplicaPromoted).then(|| {
            "protocol.variant = \"lagging-replica-promoted\" is a mistake of the model's \
         Sentinels: live mode runs real ones, which rank replicas by priority and then offset"
                .into()
        }),
    )
}

/// What a real ZooKeeper ensemble cannot be: a Raft election timeout of its own (a real
/// server detects a silent leader after `syncLimit` ticks, which `sync_limit_ticks` sets in
/// both worlds).
fn zookeeper_server(prepared: &Prepared) -> Option<String> {
    let set = prepared
        .scenario
        .protocol
        .params
        .contains_key("election_ticks");
    set.then(|| {
        "protocol.election_ticks: a real ZooKeeper server has no election timeout; a \
         follower drops a silent leader after syncLimit ticks (set sync_limit_ticks, which \
         both worlds run)"
            .into()
    })
}

/// What the real servers cannot be of the model's servers (and of etcd's Unlock), refused by
/// the parameter's name.
fn real_servers(prepared: &Prepared, library: bool) -> Result<(), Refused> {
    let why = match prepared.scenario.protocol.name.as_str() {
        "etcd" => etcd_server(prepared, library)?,
        "replicated-redis" => sentinels(prepared)?,
        "zookeeper" => zookeeper_server(prepared),
        _ => None,
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Refused(format!(
            "{}: {why}; run it in the simulator",
            prepared.path
        ))),
    }
}

/// Keys that choose which release of a library the model is, a bug or its fix: with
/// `library` the real library runs and its release decides, so such a key is refused.
/// `session_retry` (CURATOR-604's bug or its fix: what an acquire does after its session
/// expired), set at all; kazoo's `ping_clock` other than `"wall"` (2.11.0's, python-zk/kazoo
/// PR #742, where the installed kazoo is 2.10.0, `.ci/run`); node-redlock's
/// `expiration_from` other than `"call"` (PR #276, never released: npm's is 5.0.0-beta.2).
fn release_keys(prepared: &Prepared, library: bool) -> Result<(), Refused> {
    use locksim_protocols::raft::zookeeper::{self, profile::Library, profile::PingClock};
    let s = &prepared.scenario;
    let raw = |key: &str| s.protocol.params.get(key).and_then(|v| v.as_str());
    if library && raw("expiration_from").is_some_and(|from| from != "call") {
        return Err(Refused(format!(
            "{}: protocol.expiration_from = \"granting-try\" is node-redlock PR #276's, never \
             released: live --library runs the installed redlock 5.0.0-beta.2, which dates a \
             lock from its acquire() call; run it in the simulator, or live without --library",
            prepared.path
        )));
    }
    if !library || s.protocol.name != "zookeeper" {
        return Ok(());
    }
    let p: zookeeper::Params = typed(prepared)?;
    let why = if s.protocol.params.contains_key("session_retry") {
        "protocol.session_retry: live --library runs the real library, whose version decides \
         what an acquire does after its session expired"
    } else if p.client == Library::Kazoo && p.ping_clock != PingClock::Wall {
        "protocol.ping_clock = \"monotonic\" is kazoo 2.11.0's (PR #742): live --library runs \
         the installed kazoo (2.10.0 from .ci/run), which times its pings by the wall clock"
    } else {
        return Ok(());
    };
    Err(Refused(format!(
        "{}: {why}; run it in the simulator, or live without --library",
        prepared.path
    )))
}

/// A real library is one call to locksim: a point inside it (etcd's `after_wait`) cannot be
/// reached, only the workload's own ([`locksim_scenarios::workload::POINTS`]).
fn library_points(prepared: &Prepared, seed: u64) -> Result<(), Refused> {
    let faults = prepared.faults_for(seed);
    let inside = faults.iter().filter_map(Fault::armed_point).find(|p| {
        !locksim_scenarios::workload::POINTS.contains(&p.point.as_str())
            && prepared.scenario.workload.client_names().contains(&p.node)
    });
    match inside {
        Some(p) => Err(Refused(format!(
            "{}: the point `{}` of {} is inside the client library: live --library runs the \
             real library, which has no named points; use a workload point ({}) or `at_ms`",
            prepared.path,
            p.point,
            p.node,
            locksim_scenarios::workload::POINTS.join(", ")
        ))),
        None => Ok(()),
    }
}

/// Checks the scenario and every fault live mode would apply on `seed`: the scripted ones and
/// those its random profile draws (by the simulator's own draw, `Prepared::faults_for`).
/// A kind live mode cannot inject is refused as soon as the profile can draw it, whatever
/// the seed; a drawn fault it cannot apply (a partition it has no proxies for) is refused
/// for the seed that draws it, named with its number and in words.
pub fn check(prepared: &Prepared, seed: u64, mode: CutMode, library: bool) -> Result<(), Refused> {
    let s = &prepared.scenario;
    workload_and_client(prepared, library)?;
    real_servers(prepared, library)?;
    release_keys(prepared, library)?;
    if library {
        library_points(prepared, seed)?;
    }
    network(prepared)?;
    cut_mode(prepared, mode)?;
    if s.expect.as_ref().is_some_and(|e| e.faults_fired.is_some()) {
        // Live mode counts the faults it schedules, not those that fired: an expectation
        // it cannot judge is refused, not passed.
        return Err(Refused(format!(
            "{}: expect.faults_fired: live mode does not count the faults that fired; run \
             it in the simulator",
            prepared.path
        )));
    }
    clocks(prepared, library)?;
    let profile = &s.faults_random;
    for kind in FaultKind::ALL.iter().copied() {
        if let (true, Some(why)) = (profile.probability(kind) > 0.0, why_not(kind)) {
            return Err(Refused(format!(
                "{}: faults_random draws {:?} faults: {why}",
                prepared.path,
                kind.name()
            )));
        }
    }
    let scripted = s.faults.len();
    for (i, fault) in prepared.faults_for(seed).iter().enumerate() {
        let name = match i.checked_sub(scripted) {
            None => format!("faults[{i}]"),
            Some(k) => format!(
                "faults_random's fault {} on seed {seed} ({})",
                k + 1,
                fault.describe()
            ),
        };
        check_fault(prepared, fault, mode, library).map_err(|why| {
            let kind = fault.kind().name();
            Refused(format!(
                "{}: {name} (kind = {kind:?}): {why}",
                prepared.path
            ))
        })?;
    }
    Ok(())
}

/// `[clocks]`: a node's fixed drift and offset run live on the nodes whose clocks live mode
/// moves; drawn ones (`drift_ppm_max`, `offset_ms_max`) are drawn inside the simulation.
fn clocks(prepared: &Prepared, library: bool) -> Result<(), Refused> {
    let clocks = &prepared.scenario.clocks;
    let refused = |why: String| Err(Refused(format!("{}: {why}", prepared.path)));
    if clocks.drift_ppm_max != 0 || clocks.offset_ms_max != 0 {
        return refused(
            "[clocks] drift_ppm_max and offset_ms_max are drawn per node inside the \
             simulation, which a live run does not run; set each node's under \
             [clocks.nodes.NAME], or run it in the simulator"
                .into(),
        );
    }
    for node in clocks.nodes.keys() {
        if let Some(why) = crate::deploy::shim::why_not_movable(prepared, node, library) {
            return refused(format!(
                "[clocks.nodes.{node}]: {why}; run it in the simulator"
            ));
        }
    }
    Ok(())
}

/// Why live mode cannot apply `fault`, if it cannot.
fn check_fault(
    prepared: &Prepared,
    fault: &Fault,
    mode: CutMode,
    library: bool,
) -> Result<(), String> {
    if let Some(why) = why_not(fault.kind()) {
        return Err(why.into());
    }
    let clients = prepared.scenario.workload.client_names();
    let (servers, protocol) = (prepared.deployment.servers(), &prepared.scenario.protocol);
    match fault {
        Fault::ClockJump(locksim_sim::fault::ClockJump { node, .. })
        | Fault::ClockDrift(locksim_sim::fault::ClockDrift { node, .. }) => {
            if let Some(why) = crate::deploy::shim::why_not_movable(prepared, node, library) {
                return Err(format!("{why}; run it in the simulator"));
            }
        }
        Fault::FsyncStall(locksim_sim::fault::FsyncStall { node, .. }) => {
            if let Some(why) = crate::deploy::shim::why_not_stalled(prepared, node) {
                return Err(format!("{why}; run it in the simulator"));
            }
        }
        Fault::Partition(p) => {
            partition_links(p, &clients, &servers, mode, &protocol.name)?;
        }
        Fault::DelaySpike(d) => {
            spike_links(&d.node, &d.to, &clients, &servers, &protocol.name)?;
        }
        _ => {}
    }
    if library {
        if let Some(why) = thread_stopped_at_a_time(prepared, fault) {
            return Err(why);
        }
    }
    if let Some(ArmedPoint { node, point, .. }) = fault.armed_point() {
        if !clients.contains(&node) {
            return Err(format!(
                "the point `{point}` is inside the server `{node}`: a real server has no named \
                 points (it runs its own code, not the model's steps), so nothing can stop it \
                 there; use `at_ms`"
            ));
        }
    }
    Ok(())
}

/// A pause or crash at a time (not at a point) of a client whose real library cannot be
/// stopped one client at a time ([`crate::client::driver::Driver::why_not_stopped_at_a_time`]).
fn thread_stopped_at_a_time(prepared: &Prepared, fault: &Fault) -> Option<String> {
    let (_, driver) = crate::client::driver::of_scenario(&prepared.scenario);
    let why = driver?.why_not_stopped_at_a_time()?;
    let stops = matches!(
        fault,
        Fault::Pause(_) | Fault::PausePeriodic(_) | Fault::Crash(_)
    );
    if !stops || fault.armed_point().is_some() {
        return None;
    }
    let clients = prepared.scenario.workload.client_names();
    let is_client =
        |n: &&str| clients.iter().any(|c| c == n) || [ROLE_HOLDER, ROLE_CLIENTS].contains(n);
    let node = fault.nodes().into_iter().find(is_client)?;
    Some(format!(
        "`{node}` runs {} (--library): {why}",
        driver?.profile
    ))
}

/// `[network]` duplication: a TCP link never hands its application a message twice. (Its
/// `loss_probability` runs live as TCP experiences loss: resends after the RTO.)
fn network(prepared: &Prepared) -> Result<(), Refused> {
    let net = &prepared.scenario.network;
    let p = net.duplicate_probability;
    if p > 0.0 {
        return Err(Refused(format!(
            "{}: network.duplicate_probability = {p}: live links are TCP connections, which \
             never hand the application a message twice; run it in the simulator",
            prepared.path
        )));
    }
    let servers = prepared.deployment.servers();
    let between_servers = net
        .links
        .iter()
        .find(|l| servers.contains(&l.from) && servers.contains(&l.to));
    if let Some(link) = between_servers {
        return Err(Refused(format!(
            "{}: network.links {} -> {}: live mode proxies a server's peer links through one \
             proxy in front of it, which adds the scenario's default latency to every link \
             between servers, not one pair's own; run it in the simulator",
            prepared.path, link.from, link.to
        )));
    }
    Ok(())
}

/// `[network] partition = "delay"` holds a cut link's messages until the heal: live mode's
/// proxies do that with `--partition stall` (TCP then retransmits as in the simulator), not
/// with `--partition reset`, which is the simulator's `drop`. A `connection_timeout_ms` of its
/// own cannot be applied: live connections time out by the machine's kernel.
pub fn cut_mode(prepared: &Prepared, mode: CutMode) -> Result<(), Refused> {
    let network = &prepared.scenario.network;
    if network.partition != PartitionMode::Delay {
        return Ok(());
    }
    if mode == CutMode::Reset {
        return Err(Refused(format!(
            "{}: network.partition = \"delay\" holds a cut link's bytes until the heal, but \
             --partition reset closes its connections (the simulator's \"drop\"); use \
             --partition stall",
            prepared.path
        )));
    }
    if network.connection_timeout_ms != CONNECTION_TIMEOUT_MS_DEFAULT {
        return Err(Refused(format!(
            "{}: network.connection_timeout_ms: live connections time out by the machine's \
             kernel (net.ipv4.tcp_retries2), not by the scenario; run it in the simulator",
            prepared.path
        )));
    }
    Ok(())
}

/// A proxied client link a partition cuts: (client, server or `resource`), and which way
/// (`None`: both).
pub type Cut = (String, String, Option<Dir>);

/// The links a partition cuts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cuts {
    /// Links of clients.
    pub clients: Vec<Cut>,
    /// Traffic between servers, as directed (from, to) pairs.
    pub servers: Vec<(String, String)>,
}

/// Whether live mode proxies the links between a protocol's servers (`Ok(true)`: etcd's, ZooKeeper's, replicated Redis's),
/// or they carry nothing to cut (`Ok(false)`: independent Redis servers), or why it cannot
/// cut them.
pub fn server_links(protocol: &str) -> Result<bool, &'static str> {
    match protocol {
        "single-redis" | "redlock" => Ok(false),
        "etcd" | "zookeeper" | "replicated-redis" => Ok(true),
        _ => Err("live mode has no proxies between this protocol's servers"),
    }
}

/// Keeps the cuts between servers live mode can make: none to make between independent
/// Redis servers, an error where it has no proxies (naming the role, if one is cut).
fn servers_cut(links: &mut Cuts, protocol: &str, role: Option<&str>) -> Result<(), String> {
    match server_links(protocol) {
        Ok(true) => Ok(()),
        Ok(false) => {
            links.servers.clear();
            Ok(())
        }
        Err(why) if !links.servers.is_empty() || role.is_some() => {
            let (a, b) = links.servers.first().cloned().unwrap_or_default();
            let what = role.map_or(format!("it cuts {a} from {b}"), |r| {
                format!("`{r}` is a server role")
            });
            Err(format!("{what}: {why}"))
        }
        Err(_) => Ok(()),
    }
}

/// The links a delay spike holds: those carrying what `sender` sends to `to` (every other
/// node if empty), one way, as a one-way stall from `sender` heals (a client's requests up
/// its proxies, a server's answers down its clients' proxies and its traffic to the other
/// servers by its identified connections); an error if live mode has no proxies there.
pub fn spike_links(
    sender: &str,
    to: &[String],
    clients: &[String],
    servers: &[String],
    protocol: &str,
) -> Result<Cuts, String> {
    let others: Vec<String> = to.iter().filter(|n| *n != sender).cloned().collect();
    let (isolate, groups) = match to.is_empty() {
        true => (vec![sender.to_owned()], vec![]),
        false => (vec![], vec![vec![sender.to_owned()], others]),
    };
    let one_way = Partition {
        at_ms: 0,
        duration_ms: 0,
        isolate,
        groups,
        one_way: true,
    };
    partition_links(&one_way, clients, servers, CutMode::Stall, protocol)
}

/// The links a partition cuts; an error if it would cut links live mode has no proxy on
/// (between servers of some protocols), or cut one way with `--partition reset` (a reset
/// closes a connection both ways).
pub fn partition_links(
    p: &Partition,
    clients: &[String],
    servers: &[String],
    mode: CutMode,
    protocol: &str,
) -> Result<Cuts, String> {
    if p.one_way && mode == CutMode::Reset {
        return Err(
            "`one_way`: a reset closes a connection both ways (use --partition stall, \
                    which holds one direction)"
                .into(),
        );
    }
    let is_client = |n: &str| clients.iter().any(|c| c == n) || n == ROLE_HOLDER;
    let named: Vec<&String> = p.isolate.iter().chain(p.groups.iter().flatten()).collect();
    let role = named.iter().find(|n| is_role(n) && !is_client(n));
    let mut links = Cuts::default();
    for a in servers {
        for b in servers.iter().filter(|b| *b != a && p.cuts(a, b)) {
            links.servers.push((a.clone(), b.clone()));
        }
    }
    servers_cut(&mut links, protocol, role.map(|r| r.as_str()))?;
    let mut nodes: Vec<String> = clients.iter().chain(servers).cloned().collect();
    nodes.push(locksim_protocols::resource::RESOURCE.into());
    for n in named {
        if !nodes.contains(n) {
            nodes.push(n.clone());
        }
    }
    for a in nodes.iter().filter(|n| is_client(n)) {
        for b in nodes.iter().filter(|n| !is_client(n)) {
            let dir = match (p.cuts(a, b), p.cuts(b, a)) {
                (true, true) => None,
                (true, false) => Some(Dir::Up),
                (false, true) => Some(Dir::Down),
                (false, false) => continue,
            };
            links.clients.push((a.clone(), b.clone(), dir));
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reported-bug files of the Redis profiles run on locksim's own live client, as
    /// `redsync-pre-61`'s do (their commands are `GET`, the scripts and the delay spikes live
    /// mode applies), and `--library` refuses them where no real library has a driver.
    #[test]
    fn the_reported_redis_profile_files_run_on_the_own_client_only() {
        for file in [
            "redsync-71-extend-after-expiry",
            "redsync-72-valid-after-expiry",
            "redsync-147-restarts-without-persistence",
            "redlock-rb-36-extend-sets-an-expired-key",
        ] {
            let prepared = catalog(file);
            check(&prepared, 1, CutMode::Stall, false).unwrap_or_else(|e| panic!("{e}"));
            let refused = check(&prepared, 1, CutMode::Stall, true).unwrap_err();
            assert!(refused.0.contains("modelled only"), "{refused}");
        }
        // python-redis-lock's runs on both: its real library has a driver.
        let prepared = catalog("python-redis-lock-85-renewal-starved");
        for library in [false, true] {
            check(&prepared, 1, CutMode::Stall, library).unwrap_or_else(|e| panic!("{e}"));
        }
        // redis-py's Lock shared by threads runs with its real library only: locksim's own
        // clients are processes, the library's driver runs them as its threads.
        let prepared = catalog("redis-py-416-shared-lock-token");
        let refused = check(&prepared, 1, CutMode::Stall, false).unwrap_err();
        assert!(refused.0.contains("a process of its own"), "{refused}");
        check(&prepared, 1, CutMode::Stall, true).unwrap_or_else(|e| panic!("{e}"));
    }

    /// What real servers cannot be is refused before anything starts, naming the file and
    /// the parameter (these were refused only once the run had begun deploying).
    #[test]
    fn the_model_servers_settings_a_real_server_cannot_have_are_refused_by_name() {
        let registry = locksim_protocols::Registry::builtin();
        let catalog = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/catalog/");
        for (file, library, says) in [
            (
                "raft-ack-before-fsync",
                false,
                "protocol.variant = \"ack-before-fsync\"",
            ),
            ("etcd-lock-delay", false, "protocol.lock_delay_ms"),
            (
                "etcd-lease-checkpoint-dead-lease-expires",
                false,
                "lease_checkpoint_interval_ms",
            ),
            (
                "etcd-15247-stuck-leader-renews-keep-alives",
                false,
                "lessor = \"local-role\"",
            ),
            (
                "etcd-22082-unlock-retry-deletes-new-lock-fixed",
                true,
                "real library's own Unlock",
            ),
            (
                "redis-replicated-lagging-replica-promoted",
                false,
                "lagging-replica-promoted",
            ),
        ] {
            let path = format!("{catalog}{file}.toml");
            let prepared = locksim_scenarios::load(&path, &registry).unwrap();
            let Err(Refused(why)) = real_servers(&prepared, library) else {
                panic!("{file} (library {library}): not refused");
            };
            assert!(
                why.starts_with(&path) && why.contains(says),
                "{file}: expected {says:?} after the path, observed {why}"
            );
        }
        let healthy = format!("{catalog}etcd-healthy.toml");
        let prepared = locksim_scenarios::load(&healthy, &registry).unwrap();
        assert!(real_servers(&prepared, true).is_ok());
        // ZooKeeper's failure detection is syncLimit, in both worlds; a Raft timeout is the
        // model's alone.
        let mut zk = self::catalog("zookeeper-healthy");
        assert!(real_servers(&zk, false).is_ok());
        zk.scenario
            .protocol
            .params
            .insert("election_ticks".into(), 20.into());
        let Err(Refused(why)) = real_servers(&zk, false) else {
            panic!("a ZooKeeper election_ticks: not refused");
        };
        assert!(why.contains("set sync_limit_ticks"), "{why}");
    }

    /// With `--library` the installed release decides: a key that picks a ZooKeeper
    /// library's release is refused (any `session_retry`; kazoo's 2.11.0 `ping_clock`), and
    /// the model of the installed kazoo (`ping_clock = "wall"`, its profile's default) runs.
    #[test]
    fn keys_that_pick_a_library_release_are_refused_with_the_real_library() {
        for file in [
            "zookeeper-kazoo-722-clock-step-back",
            "node-redlock-296-lock-born-expired",
        ] {
            check(&catalog(file), 1, CutMode::Stall, true).unwrap_or_else(|e| panic!("{e}"));
        }
        for (file, says) in [
            (
                "zookeeper-kazoo-722-clock-step-back-fixed",
                "ping_clock = \"monotonic\"",
            ),
            ("zookeeper-curator-604-owner-checked", "session_retry"),
            ("node-redlock-296-lock-born-expired-fixed", "5.0.0-beta.2"),
        ] {
            let prepared = catalog(file);
            check(&prepared, 1, CutMode::Stall, false).unwrap_or_else(|e| panic!("{e}"));
            let Err(Refused(why)) = release_keys(&prepared, true) else {
                panic!("{file}: not refused with --library");
            };
            assert!(
                why.contains(says),
                "{file}: expected {says:?}, observed {why}"
            );
        }
    }

    #[test]
    fn live_mode_refuses_the_kinds_whose_files_say_it_cannot_with_their_reasons() {
        for kind in FaultKind::ALL.iter().copied() {
            let why = why_not(kind);
            match kind {
                FaultKind::LoopStall => {
                    let why = why.expect("refused");
                    assert!(
                        why.contains("cannot stop a real server's event loop"),
                        "{why}"
                    );
                }
                _ => assert_eq!(why, None, "{kind:?} is applied live"),
            }
            if let Some(why) = why {
                assert!(why.ends_with("run it in the simulator"), "{why}");
            }
        }
    }

    /// A catalog file.
    fn catalog(file: &str) -> Prepared {
        let registry = locksim_protocols::Registry::builtin();
        let catalog = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/catalog/");
        locksim_scenarios::load(&format!("{catalog}{file}.toml"), &registry)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// A scenario of `protocol` (with `extra` keys) and one fault (its `[[faults]]` keys).
    fn with_fault(protocol: &str, extra: &str, fault: &str) -> Prepared {
        let text = format!(
            "name = \"t\"\nduration_ms = 1000\n[protocol]\nname = \"{protocol}\"\n{extra}\n\
             [[faults]]\n{fault}\nat_ms = 10\n"
        );
        let dir = crate::rundir::RunDir::create().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, &text).unwrap();
        let registry = locksim_protocols::Registry::builtin();
        locksim_scenarios::load(path.to_str().unwrap(), &registry)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn jump(protocol: &str, node: &str, extra: &str) -> Prepared {
        let fault = format!("kind = \"clock_jump\"\nnode = \"{node}\"\ndelta_ms = 5000");
        with_fault(protocol, extra, &fault)
    }

    fn stall(protocol: &str, node: &str) -> Prepared {
        let fault = format!("kind = \"fsync_stall\"\nnode = \"{node}\"\nduration_ms = 500");
        with_fault(protocol, "", &fault)
    }

    /// Clock faults run live on real Redis servers (a Sentinel's too), locksim's own clients
    /// and ZooKeeper's wall clocks, and a real library's wall clock steps; fsync stalls on
    /// Redis servers.
    #[test]
    fn clocks_and_fsyncs_move_live_where_the_shim_reaches() {
        let files = [
            "redis-single-clock-jump",
            "redlock-clock-jump",
            "redlock-no-drift-allowance",
        ];
        let mut accepted: Vec<(String, Prepared)> =
            files.map(|f| (f.to_owned(), catalog(f))).into();
        accepted.push(("stall redis".into(), stall("single-redis", "redis")));
        accepted.push((
            "stall @primary".into(),
            stall("replicated-redis", "@primary"),
        ));
        // A Sentinel's clock, `@primary`'s whoever it is then, and locksim's own clients'.
        for (protocol, node) in [
            ("replicated-redis", "sentinel1"),
            ("replicated-redis", "@primary"),
            ("single-redis", "c1"),
            ("single-redis", "@holder"),
            ("zookeeper", "zk1"),
        ] {
            accepted.push((format!("jump {node}"), jump(protocol, node, "")));
        }
        for (what, prepared) in accepted {
            check(&prepared, 1, CutMode::Stall, false).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        // A real library's wall clock steps (its process runs under the client's shim).
        for (protocol, client) in [
            ("single-redis", "redis-py"),
            ("redlock", "node-redlock"),
            ("zookeeper", "kazoo"),
        ] {
            let prepared = jump(protocol, "c1", &format!("client = \"{client}\""));
            check(&prepared, 1, CutMode::Stall, true).unwrap_or_else(|e| panic!("{client}: {e}"));
        }
        // Node's, Python's and a JVM's clocks drift too: the shim translates their waits.
        let drift = "kind = \"clock_drift\"\nnode = \"c1\"\ndrift_ppm = 5000";
        for (protocol, client) in [
            ("single-redis", "node-redlock"),
            ("single-redis", "redis-py"),
            ("zookeeper", "curator"),
        ] {
            let prepared = with_fault(protocol, &format!("client = \"{client}\""), drift);
            check(&prepared, 1, CutMode::Stall, true).unwrap_or_else(|e| panic!("{client}: {e}"));
        }
        // And a ZooKeeper server's.
        let drift = "kind = \"clock_drift\"\nnode = \"zk1\"\ndrift_ppm = 5000";
        check(
            &with_fault("zookeeper", "", drift),
            1,
            CutMode::Stall,
            false,
        )
        .unwrap();
    }

    /// Clock faults and fsync stalls are refused by name where the shim does not reach
    /// (etcdctl's clock, an etcd member, a ZooKeeper server's fsyncs, the resource, a client's
    /// disk) and when the simulation draws the clocks.
    #[test]
    fn clocks_and_fsyncs_the_shim_cannot_reach_are_refused_by_name() {
        // etcdctl's clock does not move at all.
        let prepared = jump("etcd", "c1", "client = \"etcdctl-3.4\"");
        let Err(Refused(why)) = check(&prepared, 1, CutMode::Stall, true) else {
            panic!("etcdctl's clock moved");
        };
        assert!(why.contains("etcdctl is a Go program"), "{why}");
        for (prepared, says) in [
            (
                jump("single-redis", "resource", ""),
                "`resource` is neither",
            ),
            (
                stall("etcd", "etcd1"),
                "calls fsync by the system call itself",
            ),
            (stall("zookeeper", "zk1"), "ZooKeeper preallocates"),
            (stall("single-redis", "c1"), "`c1` is not a server"),
            (jump("etcd", "etcd1", ""), "Go program"),
            (
                jump("single-redis", "redis", "[clocks]\ndrift_ppm_max = 100"),
                "drawn per node inside the simulation",
            ),
        ] {
            let Err(Refused(why)) = check(&prepared, 1, CutMode::Stall, false) else {
                panic!("not refused: {says}");
            };
            assert!(why.contains(says), "expected {says:?}, observed {why}");
        }
    }
}
