//! The deployment a scenario's `[protocol]` describes, as real servers: which binaries,
//! which arguments, which ports, and how to answer roles such as `@leader`.

use crate::procs::free_port;
use crate::servers::{find_binary, output_of, version_in, Server};
use crate::spec::LockSpec;
use locksim_protocols::redis::Persistence;
use locksim_protocols::{parse_params, single_redis};
use locksim_scenarios::Scenario;
use serde::Serialize;
use std::path::Path;

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
}

impl Deployment {
    /// The server named `name`.
    pub fn server_mut(&mut self, name: &str) -> Option<&mut Server> {
        self.servers.iter_mut().find(|s| s.name == name)
    }

    /// Who has `role` now (`@leader`), asking the servers; None if nobody or unknown.
    pub fn resolve_role(&self, role: &str) -> Option<String> {
        let _ = role;
        None
    }
}

/// The real deployment for `scenario`, with data directories under `dir`.
pub fn plan(scenario: &Scenario, dir: &Path) -> anyhow::Result<Deployment> {
    let params = &scenario.protocol.params;
    match scenario.protocol.name.as_str() {
        "single-redis" => single_redis(parse_params(params)?, dir),
        other => Err(crate::Refused(format!(
            "protocol `{other}` has no live deployment yet (live mode runs single-redis)"
        ))
        .into()),
    }
}

fn redis_probe(port: u16) -> crate::servers::Probe {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    Box::new(move || {
        let mut c = crate::resp::Resp::new(addr);
        let ping = vec!["PING".to_owned()];
        matches!(c.call(&ping, std::time::Duration::from_millis(200)), Ok(locksim_protocols::redis::store::Reply::Bulk(p)) if p == "PONG")
    })
}

/// The arguments of one redis-server on loopback with the model's persistence policy.
pub fn redis_args(port: u16, persistence: Persistence, active_expire_interval_ms: u64) -> Vec<String> {
    let (aof, fsync) = match persistence {
        Persistence::None => ("no", "no"),
        Persistence::Everysec => ("yes", "everysec"),
        Persistence::Always => ("yes", "always"),
    };
    // Redis runs its active expiry `hz` times a second (1..=500).
    let hz = (1000 / active_expire_interval_ms.max(2)).clamp(1, 500);
    let args = [
        "--port", &port.to_string(), "--bind", "127.0.0.1", "--protected-mode", "no",
        "--daemonize", "no", "--dir", ".", "--save", "", "--appendonly", aof,
        "--appendfsync", fsync, "--hz", &hz.to_string(), "--logfile", "",
    ];
    args.iter().map(|s| s.to_string()).collect()
}

fn single_redis(params: single_redis::Params, dir: &Path) -> anyhow::Result<Deployment> {
    if params.variant != single_redis::Variant::Correct {
        return Err(crate::Refused(format!(
            "variant `{:?}` is a bug of the model's client: live mode runs the correct client",
            params.variant
        ))
        .into());
    }
    let program = find_binary("redis-server", "redis-server")?;
    let version = version_in(&output_of(&program, &["--version"]));
    let port = free_port()?;
    let args = redis_args(port, params.persistence, params.active_expire_interval_ms);
    let server = Server::new(single_redis::SERVER, dir.join(single_redis::SERVER), program, args, redis_probe(port))?;
    Ok(Deployment {
        servers: vec![server],
        infos: vec![ServerInfo { name: single_redis::SERVER.into(), software: "redis-server".into(), version }],
        lock: LockSpec::SingleRedis { params, server: format!("127.0.0.1:{port}") },
    })
}
