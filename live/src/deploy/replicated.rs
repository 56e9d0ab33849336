//! `replicated-redis` on loopback: a primary (`redis1`) and its replicas (`REPLICAOF`), each a
//! `redis-server` with a config file of its own (Sentinel rewrites it at a failover, so a
//! restarted node keeps the role it last had), and `sentinels` Sentinels (`redis-server
//! sentinel.conf --sentinel`, package `redis-server`) watching them. Every node and Sentinel
//! has a proxy of locksim's own in front of it and is known to the others by it only: a node
//! announces its proxy to its primary (`replica-announce-ip`/`-port`, which the primary's
//! `INFO` reports and the Sentinels discover the replicas by), a replica replicates from its
//! primary's proxy, the Sentinels monitor the primary at its proxy and announce their own
//! (`sentinel announce-ip`/`-port`, in their hello messages). Sentinel then finds every
//! replica replicating from the address it knows the primary by (no `+fix-slave-config`),
//! and at a failover it repoints the replicas at the promoted node's announced address, its
//! proxy: replication and Sentinel links all go through proxies, before and after a failover,
//! and a partition cuts them by pair ([`crate::proxy::Proxy::cut_from`]).

use crate::deploy::cluster::{peer_proxies, Deployment};
use crate::deploy::redis_server::redis_args;
use crate::deploy::servers::{
    find_binary, loopback, output_of, version_in, Configure, Probe, Server,
};
use crate::links::resp;
use crate::procs::free_port;
use crate::proxy::{Delays, Proxy};
use crate::spec::LockSpec;
use locksim_protocols::redis::replicated::Params;
use locksim_protocols::redis::sentinel::Periods;
use locksim_protocols::redis::store::Reply;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The node that starts as primary.
pub const FIRST_PRIMARY: &str = "redis1";
/// The name the Sentinels monitor the primary by.
pub const MASTER_NAME: &str = "mymaster";

/// A Redis config file's lines from `redis-server`'s `--name value` arguments.
fn config_lines(args: &[String]) -> Vec<String> {
    args.chunks(2)
        .map(|kv| {
            let value = if kv[1].is_empty() { "\"\"" } else { &kv[1] };
            format!("{} {value}", kv[0].trim_start_matches("--"))
        })
        .collect()
}

/// Whole seconds, at least 1 (Redis's replication timeouts are in seconds).
fn secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// The config of one Redis node listening on `port`, known to the others at `announced` (its
/// proxy); `primary` is where a replica replicates from.
fn redis_config(
    p: &Params,
    (port, announced): (u16, SocketAddr),
    primary: Option<SocketAddr>,
) -> String {
    let mut lines = config_lines(&redis_args(
        port,
        p.persistence,
        p.active_expire_interval_ms,
    ));
    lines.extend([
        format!("repl-timeout {}", secs(p.replication_timeout_ms)),
        format!(
            "repl-ping-replica-period {}",
            secs(p.replication_ping_interval_ms)
        ),
        // Redis 7 waits 5 s for more replicas before a diskless full sync by default.
        "repl-diskless-sync-delay 0".into(),
        format!("replica-announce-ip {}", announced.ip()),
        format!("replica-announce-port {}", announced.port()),
    ]);
    if let Some(primary) = primary {
        lines.push(format!("replicaof {} {}", primary.ip(), primary.port()));
    }
    lines.join("\n") + "\n"
}

fn sentinel_config(
    p: &Params,
    (port, announced): (u16, SocketAddr),
    primary: SocketAddr,
) -> String {
    let quorum = p.quorum();
    let (down_ms, failover_ms) = (p.down_after_ms, p.failover_timeout_ms);
    format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir .\nlogfile \"\"\n\
         sentinel announce-ip {}\nsentinel announce-port {}\n\
         sentinel monitor {MASTER_NAME} {} {} {quorum}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {down_ms}\n\
         sentinel failover-timeout {MASTER_NAME} {failover_ms}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        announced.ip(),
        announced.port(),
        primary.ip(),
        primary.port(),
    )
}

/// `SENTINEL master mymaster` as (field, value) pairs, or None.
fn sentinel_master(addr: SocketAddr) -> Option<Vec<(String, String)>> {
    let argv = ["SENTINEL", "master", MASTER_NAME];
    let flat = resp::call_strings(addr, &argv, Duration::from_millis(300)).ok()?;
    Some(
        flat.chunks(2)
            .filter(|kv| kv.len() == 2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect(),
    )
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `SENTINEL DEBUG` with the model's periods and TILT settings (Redis 7.0 has no config-file directive for
/// them): whether the Sentinel at `addr` took them.
fn sentinel_periods(addr: SocketAddr, periods: Periods) -> Configure {
    Arc::new(move || {
        let ms = |v: u64| v.to_string();
        let (ping, info) = (ms(periods.ping_ms), ms(periods.info_ms));
        let (publish, ask) = (ms(periods.publish_ms), ms(periods.ask_ms));
        let (trigger, tilt) = (ms(periods.tilt_trigger_ms), ms(periods.tilt_period_ms));
        let argv = [
            "SENTINEL",
            "DEBUG",
            "ping-period",
            &ping,
            "info-period",
            &info,
            "publish-period",
            &publish,
            "ask-period",
            &ask,
            "tilt-trigger",
            &trigger,
            "tilt-period",
            &tilt,
        ];
        resp::call(addr, &argv, Duration::from_millis(300)).is_ok_and(|r| r == Reply::Ok)
    })
}

/// Ready when it knows every replica and every other Sentinel (so that a failover can find
/// a majority from the run's first second); its periods are its [`Server::configure`], which
/// readiness applies first.
fn sentinel_probe(addr: SocketAddr, replicas: usize, sentinels: usize) -> Probe {
    Box::new(move || {
        sentinel_master(addr).is_some_and(|f| {
            field(&f, "num-slaves") == Some(&replicas.to_string())
                && field(&f, "num-other-sentinels") == Some(&(sentinels - 1).to_string())
        })
    })
}

/// The node the Sentinels' newest configuration (highest `config-epoch`) names primary (by
/// its announced address: its proxy in `peers`).
pub fn primary(
    client_addrs: &[(String, SocketAddr)],
    peers: &BTreeMap<String, Vec<Proxy>>,
) -> Option<String> {
    let port = client_addrs
        .iter()
        .filter(|(name, _)| name.starts_with("sentinel"))
        .filter_map(|(_, addr)| sentinel_master(*addr))
        .filter_map(|f| {
            let epoch: u64 = field(&f, "config-epoch")?.parse().ok()?;
            let port: u16 = field(&f, "port")?.parse().ok()?;
            Some((epoch, port))
        })
        .max()?
        .1;
    peers
        .iter()
        .find(|(name, proxies)| name.starts_with("redis") && proxies[0].addr.port() == port)
        .map(|(name, _)| name.clone())
}

/// One server running `redis-server` with a config file written into its directory.
fn server(
    name: &str,
    dir: &Path,
    config: (&str, String),
    extra: &[&str],
    probe: Probe,
) -> anyhow::Result<Server> {
    let program = find_binary("redis-server", "redis-server")?;
    let home: PathBuf = dir.join(name);
    std::fs::create_dir_all(&home)?;
    std::fs::write(home.join(config.0), config.1)?;
    let mut args = vec![config.0.to_owned()];
    args.extend(extra.iter().map(|s| s.to_string()));
    Server::new(name, home, program, args, probe)
}

/// `INFO replication` of the node at `addr`, or an empty string.
fn replication_info(addr: SocketAddr) -> String {
    match resp::call(addr, &["INFO", "replication"], Duration::from_millis(300)) {
        Ok(Reply::Bulk(text)) => text,
        _ => String::new(),
    }
}

/// Ready when its replication is: the primary lists every replica online, a replica's link
/// to it is up.
fn redis_probe(addr: SocketAddr, replicas: Option<usize>) -> Probe {
    Box::new(move || {
        let info = replication_info(addr);
        match replicas {
            Some(n) => {
                (0..n).all(|i| info.contains(&format!("slave{i}:")))
                    && info.matches("state=online").count() == n
            }
            None => info.contains("master_link_status:up"),
        }
    })
}

/// Seeds the draws of the Sentinels' start times and of the run's phase.
const PHASE_SEED: u64 = 0x5e41_1e15;

/// The deployment: Redis nodes first (`redis1` primary), then the Sentinels, each started
/// at a time drawn within a ping period, and the run's clock a time so drawn after they are
/// ready: as the model's sentinels, each pings at a phase of its own, drawn from the seed
/// (started together, and the run started when their first hellos are heard, the real
/// Sentinels' pings would stand at the same phase of the run every time).
pub fn plan(p: Params, dir: &Path, delays: Delays, seed: u64) -> anyhow::Result<Deployment> {
    let program = find_binary("redis-server", "redis-server")?;
    let version = version_in(&output_of(&program, &["--version"]));
    let (redis, sentinels) = (p.redis_names(), p.sentinel_names());
    let names = [redis.clone(), sentinels.clone()].concat();
    let ports: Vec<u16> = names
        .iter()
        .map(|_| free_port())
        .collect::<anyhow::Result<_>>()?;
    // Every node and Sentinel is known to the others by the proxy in front of it.
    let one_each: Vec<Vec<u16>> = ports.iter().map(|p| vec![*p]).collect();
    let peers = peer_proxies(&names, &one_each, delays)?;
    let announced = |name: &str| peers[name][0].addr;
    let first = announced(FIRST_PRIMARY);
    let (mut starts_ms, settle_ms) = phases(&p, seed);
    let mut servers = vec![];
    for (name, port) in names.iter().zip(&ports) {
        let sentinel = sentinels.contains(name);
        let mut node = if sentinel {
            let config = sentinel_config(&p, (*port, announced(name)), first);
            let probe = sentinel_probe(loopback(*port), p.replicas, p.sentinels);
            let mut node = server(name, dir, ("sentinel.conf", config), &["--sentinel"], probe)?;
            node.configure = Some(sentinel_periods(loopback(*port), p.sentinel_periods()));
            node
        } else {
            let (upstream, replicas) = match name.as_str() {
                FIRST_PRIMARY => (None, Some(p.replicas)),
                _ => (Some(first), None),
            };
            let config = redis_config(&p, (*port, announced(name)), upstream);
            let probe = redis_probe(loopback(*port), replicas);
            server(name, dir, ("redis.conf", config), &[], probe)?
        };
        node.after_others = sentinel;
        if sentinel {
            node.start_after_ms = starts_ms.pop().expect("a start per Sentinel");
        }
        servers.push((node, loopback(*port)));
    }
    // The Sentinels name each node by its announced address, its proxy.
    let lock = LockSpec::ReplicatedRedis {
        real: redis.iter().map(|n| announced(n).to_string()).collect(),
        servers: addrs(&servers, &redis),
        sentinels: addrs(&servers, &sentinels),
        params: p,
    };
    let mut d = Deployment::new(lock, peers);
    for (server, addr) in servers {
        d.add(server, "redis-server", Some(&version), addr);
    }
    d.settle_ms = settle_ms;
    Ok(d)
}

/// When each Sentinel starts after the first wave is ready, and how long after they are
/// all ready the run starts, in ms: each drawn from `seed` within the ping period (a
/// sentinel pings a node whose last answer is older than min(ping period, down-after)).
fn phases(p: &Params, seed: u64) -> (Vec<u64>, u64) {
    let mut draws = ChaCha8Rng::seed_from_u64(seed ^ PHASE_SEED);
    let ping_period_ms = p.sentinel_ping_period_ms.min(p.down_after_ms);
    let mut draw = || draws.gen_range(0..ping_period_ms);
    let starts_ms = (0..p.sentinels).map(|_| draw()).collect();
    (starts_ms, draw())
}

/// The client addresses of those of `servers` named in `names`.
fn addrs(servers: &[(Server, SocketAddr)], names: &[String]) -> Vec<String> {
    let named = servers.iter().filter(|(s, _)| names.contains(&s.name));
    named.map(|(_, addr)| addr.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Sentinels start apart and the run at a phase of their pings, each drawn from the
    /// seed within the ping period: the same for a seed, other for another.
    #[test]
    fn each_sentinel_starts_and_the_run_settles_at_a_phase_drawn_from_the_seed() {
        let p: Params = locksim_protocols::parse_params(&toml::toml! {
            sentinels = 3
            down_after_ms = 700
        })
        .unwrap();
        let draws: Vec<(Vec<u64>, u64)> = (1..=20).map(|seed| phases(&p, seed)).collect();
        for (seed, (starts, settle)) in (1..).zip(&draws) {
            assert_eq!(starts.len(), 3, "seed {seed}: a start per Sentinel");
            let all = starts.iter().chain([settle]);
            assert!(
                all.clone().all(|ms| *ms < 700),
                "seed {seed}: {starts:?} {settle}"
            );
            assert_eq!(
                phases(&p, seed),
                (starts.clone(), *settle),
                "seed {seed} again"
            );
        }
        let distinct: std::collections::BTreeSet<&Vec<u64>> = draws.iter().map(|d| &d.0).collect();
        assert_eq!(
            distinct.len(),
            draws.len(),
            "every seed its own starts: {draws:?}"
        );
    }
}
