//! The deployment a scenario's `[protocol]` describes, as real servers: which binaries,
//! which arguments, which ports, and how to answer roles such as `@leader`.

pub mod cluster;
pub mod redis_server;
pub mod replicated;
pub mod servers;
pub mod shim;
pub mod zookeeper;

use crate::deploy::cluster::peer_proxies;
pub use crate::deploy::cluster::{Deployment, ServerInfo};
use crate::deploy::redis_server::{redis_args, redis_probe};
use crate::deploy::servers::{find_binary, loopback, output_of, version_in, Probe, Server};
use crate::procs::free_port;
use crate::proxy::Delays;
use crate::spec::LockSpec;
use locksim_protocols::parse_params;
use locksim_protocols::raft::etcd;
use locksim_protocols::redis::redlock;
use locksim_protocols::redis::server::Persistence;
use locksim_protocols::redis::single as single_redis;
use locksim_scenarios::Prepared;
use locksim_sim::nemesis::{ROLE_LEADER, ROLE_PRIMARY};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// How long `@leader` waits for a cluster in an election to have a leader again.
const LEADER_WAIT: Duration = Duration::from_millis(1_500);
/// How often it asks meanwhile.
const LEADER_POLL: Duration = Duration::from_millis(100);

impl Deployment {
    /// The server named `name`.
    pub fn server_mut(&mut self, name: &str) -> Option<&mut Server> {
        self.servers.iter_mut().find(|s| s.name == name)
    }

    /// Who has `role` now (`@leader`), asking the servers; None if nobody or unknown.
    pub fn resolve_role(&self, role: &str) -> Option<String> {
        if role == ROLE_PRIMARY && matches!(self.lock, LockSpec::ReplicatedRedis { .. }) {
            return crate::deploy::replicated::primary(&self.client_addrs, &self.peer_proxies);
        }
        if role != ROLE_LEADER {
            return None;
        }
        let ask: fn(&[(String, SocketAddr)]) -> Option<String> = match self.lock {
            LockSpec::Etcd { .. } => etcd_leader,
            LockSpec::ZooKeeper { .. } => crate::deploy::zookeeper::leader,
            _ => return None,
        };
        // A real cluster can be between leaders when the fault is due (an election after a
        // pause takes a few timeouts on a loaded machine); the fault then hits the next
        // leader, if one is elected within `LEADER_WAIT`, as a nemesis that asks again would.
        let start_ns = crate::clock::now_ns();
        loop {
            if let Some(leader) = ask(&self.client_addrs) {
                return Some(leader);
            }
            if crate::clock::since(start_ns) >= LEADER_WAIT {
                return None;
            }
            crate::clock::sleep(LEADER_POLL);
        }
    }

    /// The fsyncs the servers have made so far, summed: each etcd member's WAL syncs by its
    /// own counter (`etcd_disk_wal_fsync_duration_seconds_count` on `/metrics`), each
    /// ZooKeeper server's transaction-log syncs by its own (`zk_cnt_fsynctime` in `mntr`),
    /// both from zero at a start; each Redis server's and Sentinel's syncs of its files by
    /// the log its shim keeps over its restarts (`INFO` has no such count). None where one
    /// of them did not answer (stopped, gone) or runs without the shim.
    pub fn fsyncs(&self) -> Option<u64> {
        let asked = |count: fn(SocketAddr) -> Option<u64>| {
            self.client_addrs.iter().map(|(_, addr)| count(*addr)).sum()
        };
        match self.lock {
            LockSpec::Etcd { .. } => asked(etcd_wal_fsyncs),
            LockSpec::ZooKeeper { .. } => asked(crate::deploy::zookeeper::log_fsyncs),
            _ => (self.servers.iter())
                .map(|s| s.power_loss.as_ref()?.syncs())
                .sum(),
        }
    }

    /// Whether a server's fsync count starts again from zero when it restarts (etcd's and
    /// ZooKeeper's own counters do; the Redis shim's log goes on).
    pub fn fsyncs_restart_from_zero(&self) -> bool {
        matches!(
            self.lock,
            LockSpec::Etcd { .. } | LockSpec::ZooKeeper { .. }
        )
    }
}

/// An etcd member's WAL fsyncs so far, from its Prometheus metrics.
fn etcd_wal_fsyncs(addr: SocketAddr) -> Option<u64> {
    let text = crate::links::http::get(addr, "/metrics", Duration::from_secs(1)).ok()?;
    metric(&text, "etcd_disk_wal_fsync_duration_seconds_count")
}

/// The value of the counter `name` in `text`, one `NAME VALUE` a line (as Prometheus's text
/// format and ZooKeeper's `mntr` write them), as a whole number.
pub fn metric(text: &str, name: &str) -> Option<u64> {
    let value = text.lines().find_map(|line| {
        let (key, value) = line.split_once(char::is_whitespace)?;
        (key == name).then_some(value)
    })?;
    Some(value.trim().parse::<f64>().ok()? as u64)
}

/// Seeds the latency draws of the proxies between servers, apart from the clients' proxies.
const PEER_DELAY_SEED: u64 = 0x5e7e_5e7e;

/// The real deployment for `prepared`, with data directories under `dir`; the proxies between
/// servers add the scenario's latency, drawn from `seed`.
pub fn plan(prepared: &Prepared, dir: &Path, seed: u64) -> anyhow::Result<Deployment> {
    let scenario = &prepared.scenario;
    let names = prepared.deployment.servers();
    let peers = Delays::between_servers(&scenario.network, seed ^ PEER_DELAY_SEED);
    match scenario.protocol.name.as_str() {
        "single-redis" => single_redis(params(prepared)?, dir),
        "redlock" => redlock(params(prepared)?, dir),
        "replicated-redis" => {
            crate::deploy::replicated::plan(params(prepared)?, dir, peers, seed)
        }
        "etcd" => etcd(params(prepared)?, &names, dir, peers),
        "zookeeper" => crate::deploy::zookeeper::plan(params(prepared)?, &names, dir, peers),
        other => Err(crate::Refused(format!(
            "protocol `{other}` has no live deployment yet (live mode runs single-redis, redlock, replicated-redis, etcd and zookeeper)"
        ))
        .into()),
    }
}

/// The scenario's protocol parameters as the simulator's `configure` reads them: the client
/// profile's defaults under the keys the file does not set (node-redlock's 11 tries,
/// redis-py's 0.1 s poll, ...).
pub fn params<P: serde::de::DeserializeOwned>(prepared: &Prepared) -> anyhow::Result<P> {
    let protocol = &prepared.scenario.protocol;
    let registry = locksim_protocols::Registry::builtin();
    let profiles = (registry.get(&protocol.name)).map_or(vec![], |p| p.clients());
    let params = locksim_protocols::registry::with_client_defaults(&profiles, &protocol.params)?;
    Ok(parse_params(&params)?)
}

/// Independent redis-servers `names` on free loopback ports (the i-th with `persistence(i)`),
/// for clients of `lock(their addresses)`.
fn redis_instances(
    names: &[String],
    persistence: impl Fn(usize) -> Persistence,
    active_expire_interval_ms: u64,
    dir: &Path,
    lock: impl FnOnce(Vec<String>) -> LockSpec,
) -> anyhow::Result<Deployment> {
    let program = find_binary("redis-server", "redis-server")?;
    let version = version_in(&output_of(&program, &["--version"]));
    let mut servers = vec![];
    for (i, name) in names.iter().enumerate() {
        let port = free_port()?;
        let args = redis_args(port, persistence(i), active_expire_interval_ms);
        let server = Server::new(
            name,
            dir.join(name),
            program.clone(),
            args,
            redis_probe(port),
        )?;
        servers.push((server, loopback(port)));
    }
    let addrs = servers.iter().map(|(_, a)| a.to_string()).collect();
    let mut d = Deployment::new(lock(addrs), BTreeMap::new());
    for (server, addr) in servers {
        d.add(server, "redis-server", Some(&version), addr);
    }
    Ok(d)
}

fn single_redis(params: single_redis::Params, dir: &Path) -> anyhow::Result<Deployment> {
    let names = [single_redis::SERVER.to_owned()];
    let (persistence, interval) = (params.persistence, params.active_expire_interval_ms);
    redis_instances(
        &names,
        |_| persistence,
        interval,
        dir,
        |mut addrs| LockSpec::SingleRedis {
            params,
            server: addrs.pop().unwrap_or_default(),
        },
    )
}

/// `instances` independent redis-servers (`redis1`, ...), each with its own persistence.
/// The client runs the model's Redlock client, bug variants included: they are choices of
/// the client's code, which live mode runs as the model does.
fn redlock(params: redlock::Params, dir: &Path) -> anyhow::Result<Deployment> {
    let (names, p) = (params.names(), params.clone());
    let persistence = |i| p.persistence.get(i);
    redis_instances(
        &names,
        persistence,
        p.active_expire_interval_ms,
        dir,
        |servers| LockSpec::Redlock { params, servers },
    )
}

/// A member's status: (its member id, the leader it knows), from etcd's maintenance API.
fn etcd_status(addr: SocketAddr) -> Option<(String, String)> {
    let v = crate::links::http::call(
        addr,
        "/v3/maintenance/status",
        &json!({}),
        Duration::from_millis(300),
    )
    .ok()?;
    let id = v["header"]["member_id"].as_str()?.to_owned();
    let leader = v["leader"].as_str().filter(|l| *l != "0")?.to_owned();
    Some((id, leader))
}

/// The member that leads now: the one a majority of the members name as leader (a resumed
/// old leader may still name itself for a moment).
fn etcd_leader(addrs: &[(String, SocketAddr)]) -> Option<String> {
    let statuses: Vec<(String, String, String)> = addrs
        .iter()
        .filter_map(|(name, addr)| {
            etcd_status(*addr).map(|(id, leader)| (name.clone(), id, leader))
        })
        .collect();
    let followed = |leader: &str| statuses.iter().filter(|(_, _, l)| l == leader).count();
    statuses
        .iter()
        .find(|(_, id, _)| followed(id) > addrs.len() / 2)
        .map(|(name, _, _)| name.clone())
}

/// The command line of the etcd member `name` listening on `client` and `peer`, known to
/// its peers at `advertised` (its peer proxy).
fn etcd_member_args(
    params: &etcd::Params,
    name: &str,
    (client, peer): (u16, u16),
    advertised: SocketAddr,
    cluster: &str,
) -> Vec<String> {
    let election_ms = params.tick_ms * params.election_ticks as u64;
    // No value has a space in it: names, ports, URLs and numbers.
    let line = format!(
        "--name {name} --data-dir data --listen-client-urls http://127.0.0.1:{client} \
         --advertise-client-urls http://127.0.0.1:{client} \
         --listen-peer-urls http://127.0.0.1:{peer} \
         --initial-advertise-peer-urls http://{advertised} --initial-cluster {cluster} \
         --initial-cluster-state new --initial-cluster-token locksim-live \
         --heartbeat-interval {} --election-timeout {election_ms} --pre-vote={}",
        params.tick_ms, params.pre_vote
    );
    let mut args: Vec<String> = line.split_whitespace().map(String::from).collect();
    if params.lease_checkpoint {
        // The interval has no flag: the binary checkpoints every 5 min (`refuse::etcd`).
        args.push("--experimental-enable-lease-checkpoint".into());
    }
    args
}

fn etcd(
    params: etcd::Params,
    names: &[String],
    dir: &Path,
    peers: Delays,
) -> anyhow::Result<Deployment> {
    let program = find_binary("etcd", "etcd-server")?;
    let version = version_in(&output_of(&program, &["--version"]));
    let ports: Vec<(u16, u16)> = names
        .iter()
        .map(|_| Ok((free_port()?, free_port()?)))
        .collect::<anyhow::Result<_>>()?;
    // One proxy in front of each member's peer port, which every other member dials: etcd
    // derives member ids from the peer URLs, so all members must name a member by one URL.
    let peer_ports: Vec<Vec<u16>> = ports.iter().map(|(_, peer)| vec![*peer]).collect();
    let peer_proxies = peer_proxies(names, &peer_ports, peers)?;
    let cluster: Vec<String> = names
        .iter()
        .map(|n| format!("{n}=http://{}", peer_proxies[n][0].addr))
        .collect();
    let lock = LockSpec::Etcd {
        params: params.clone(),
        endpoints: vec![],
    };
    let mut d = Deployment::new(lock, peer_proxies);
    for (name, (client, peer)) in names.iter().zip(&ports) {
        let advertised = d.peer_proxies[name][0].addr;
        let cluster = cluster.join(",");
        let args = etcd_member_args(&params, name, (*client, *peer), advertised, &cluster);
        let addr = loopback(*client);
        let probe: Probe = Box::new(move || etcd_status(addr).is_some());
        let server = Server::new(name, dir.join(name), program.clone(), args, probe)?;
        d.add(server, "etcd", Some(&version), addr);
    }
    let endpoints = d.addrs();
    d.lock = LockSpec::Etcd { params, endpoints };
    Ok(d)
}

#[cfg(test)]
mod tests {
    /// A counter is read by its whole name, in either server's format; a longer name that
    /// starts with it, a comment or a missing counter is not it.
    #[test]
    fn a_counter_is_read_by_its_whole_name() {
        let etcd = "# HELP etcd_disk_wal_fsync_duration_seconds The latency\n\
                    etcd_disk_wal_fsync_duration_seconds_sum 0.25\n\
                    etcd_disk_wal_fsync_duration_seconds_count 620\n";
        let count = super::metric(etcd, "etcd_disk_wal_fsync_duration_seconds_count");
        assert_eq!(count, Some(620));
        let zk = "zk_cnt_fsynctime_other\t5\nzk_cnt_fsynctime\t896\nzk_sum_fsynctime\t40\n";
        assert_eq!(super::metric(zk, "zk_cnt_fsynctime"), Some(896));
        assert_eq!(super::metric(zk, "zk_cnt_fsync"), None);
        assert_eq!(super::metric("", "zk_cnt_fsynctime"), None);
    }

    /// A real member runs with the model's `pre_vote` (etcd 3.4's own default is false, the
    /// model's true): the flag is on its command line either way.
    #[test]
    fn an_etcd_member_runs_with_the_models_pre_vote() {
        let addr: std::net::SocketAddr = "127.0.0.1:2380".parse().expect("an address");
        for (pre_vote, flag) in [(true, "--pre-vote=true"), (false, "--pre-vote=false")] {
            let text = format!("pre_vote = {pre_vote}");
            let params: super::etcd::Params = toml::from_str(&text).expect("etcd's parameters");
            let args = super::etcd_member_args(&params, "etcd1", (2379, 2380), addr, "c");
            assert!(
                args.iter().any(|a| a == flag),
                "expected {flag} in {args:?}"
            );
        }
    }
}
