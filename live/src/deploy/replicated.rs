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

/// `SENTINEL DEBUG` with the model's periods (Redis 7.0 has no config-file directive for
/// them): whether the Sentinel at `addr` took them.
fn sentinel_periods(addr: SocketAddr, periods: Periods) -> Configure {
    Arc::new(move || {
        let ms = |v: u64| v.to_string();
        let (ping, info) = (ms(periods.ping_ms), ms(periods.info_ms));
        let (publish, ask) = (ms(periods.publish_ms), ms(periods.ask_ms));
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
        ];
        resp::call(addr, &argv, Duration::from_millis(300)).is_ok_and(|r| r == Reply::Ok)
    })
}

/// Ready when it has the model's periods and knows every replica and every other Sentinel
/// (so that a failover can find a majority from the run's first second).
fn sentinel_probe(addr: SocketAddr, p: &Params) -> Probe {
    let (replicas, sentinels) = (p.replicas, p.sentinels);
    let periods = sentinel_periods(addr, p.sentinel_periods());
    Box::new(move || {
        periods()
            && sentinel_master(addr).is_some_and(|f| {
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

/// The deployment: Redis nodes first (`redis1` primary), then the Sentinels.
pub fn plan(p: Params, dir: &Path, delays: Delays) -> anyhow::Result<Deployment> {
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
    let mut servers = vec![];
    for (name, port) in names.iter().zip(&ports) {
        let sentinel = sentinels.contains(name);
        let mut node = if sentinel {
            let config = sentinel_config(&p, (*port, announced(name)), first);
            let probe = sentinel_probe(loopback(*port), &p);
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
    Ok(d)
}

/// The client addresses of those of `servers` named in `names`.
fn addrs(servers: &[(Server, SocketAddr)], names: &[String]) -> Vec<String> {
    let named = servers.iter().filter(|(s, _)| names.contains(&s.name));
    named.map(|(_, addr)| addr.to_string()).collect()
}
