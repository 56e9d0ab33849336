//! What a deployment of real servers is, apart from how each system builds one (`deploy`,
//! `zookeeper_deploy`), so that the builders and the dispatch import it without a ring.

use crate::deploy::servers::Server;
use crate::proxy::Proxy;
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
}
