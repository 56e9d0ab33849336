//! What a deployment of real servers is, apart from how each system builds one (`deploy`,
//! `zookeeper`, `replicated`), so that the builders and the dispatch import it without a ring.

use crate::deploy::servers::{loopback, Server};
use crate::proxy::{Delays, Proxy};
use crate::spec::LockSpec;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// A server software and the version it reports (`redis-server` `7.0.15`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    /// The node name in the run.
    pub name: String,
    /// The software.
    pub software: String,
    /// Its version, as it reports it.
    pub version: String,
}

/// Real servers for a scenario, not yet started.
pub struct Deployment {
    /// The servers, by node name as the scenario names them.
    pub servers: Vec<Server>,
    /// What each server is.
    pub infos: Vec<ServerInfo>,
    /// What clients need to reach them.
    pub lock: LockSpec,
    /// Each server's client address, for asking who leads.
    pub client_addrs: Vec<(String, SocketAddr)>,
    /// The proxies in front of each server that the other servers dial (by the server's
    /// name), where their links go through proxies (an etcd member's peer URL; a ZooKeeper
    /// server's quorum and election ports).
    pub peer_proxies: BTreeMap<String, Vec<Proxy>>,
    /// How long after every server is ready the clients start, in ms: the run's clock then
    /// stands at a phase of the servers' timers drawn from the seed, not at the one the
    /// readiness check ends at (a Sentinel is ready once it has heard the others' first
    /// hellos, on the same timer as its pings).
    pub settle_ms: u64,
}

impl Deployment {
    /// No servers yet, for clients of `lock` (whose addresses the builder fills in at the end).
    pub fn new(lock: LockSpec, peer_proxies: BTreeMap<String, Vec<Proxy>>) -> Deployment {
        Deployment {
            servers: vec![],
            infos: vec![],
            lock,
            client_addrs: vec![],
            peer_proxies,
            settle_ms: 0,
        }
    }

    /// Adds `server`, `software` at `version` (`None`: asked once it runs), reached at `addr`.
    pub fn add(&mut self, server: Server, software: &str, version: Option<&str>, addr: SocketAddr) {
        if let Some(version) = version {
            self.infos.push(ServerInfo {
                name: server.name.clone(),
                software: software.into(),
                version: version.into(),
            });
        }
        self.client_addrs.push((server.name.clone(), addr));
        self.servers.push(server);
    }

    /// The client addresses of the servers added so far, in their order.
    pub fn addrs(&self) -> Vec<String> {
        self.client_addrs
            .iter()
            .map(|(_, a)| a.to_string())
            .collect()
    }
}

/// A proxy in front of each of `ports[i]` for server `names[i]` (its peer ports, which the
/// other servers dial), by name; each asks who opened a connection, so that a cut between
/// two servers stops only their connections ([`Proxy::cut_from`]), and draws its latency
/// from its own stream ([`Delays::nth`], numbered in order).
pub fn peer_proxies(
    names: &[String],
    ports: &[Vec<u16>],
    delays: Delays,
) -> anyhow::Result<BTreeMap<String, Vec<Proxy>>> {
    assert_eq!(names.len(), ports.len(), "peer ports per server");
    let (mut proxies, mut n) = (BTreeMap::new(), 0);
    for (name, ports) in names.iter().zip(ports) {
        let mut list = vec![];
        for port in ports {
            list.push(Proxy::identifying(loopback(*port), delays.nth(n))?);
            n += 1;
        }
        proxies.insert(name.clone(), list);
    }
    Ok(proxies)
}
