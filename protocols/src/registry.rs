//! The protocols a run can use, by id, and the one place their types are erased: a
//! [`Protocol`] becomes an [`AnyProtocol`], its parsed parameters a [`Deployment`], its
//! started servers a [`Connector`]. The runner sees only these; a protocol never imports
//! this file, so adding one is its folder plus one line in [`Registry::builtin`].

use crate::protocol::{parse_params, ClientProfile, LockClient, ParamError, Protocol};
use crate::raft::etcd::Etcd;
use crate::raft::zookeeper::ZooKeeper;
use crate::redis::redlock::Redlock;
use crate::redis::replicated::ReplicatedRedis;
use crate::redis::single::SingleRedis;
use locksim_sim::{NodeCtx, World};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A protocol of any type: what the registry holds.
pub trait AnyProtocol: Send + Sync {
    /// The id used in scenario files (`[protocol] name = "..."`).
    fn id(&self) -> &'static str;
    /// One line for people.
    fn summary(&self) -> &'static str;
    /// The client libraries `[protocol] client = "NAME"` can pick, the default first.
    fn clients(&self) -> Vec<ClientProfile>;
    /// Parses and validates the `[protocol]` table (without `name`).
    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError>;
}

/// A configured protocol, ready to be started in a world.
pub trait Deployment: Send + Sync {
    /// The names of the server nodes it will add.
    fn servers(&self) -> Vec<String>;
    /// Named points where faults can be triggered: `(node, point)`.
    fn points(&self) -> Vec<(String, &'static str)>;
    /// The fault targets it answers when a fault fires (e.g. `@primary`).
    fn roles(&self) -> Vec<&'static str>;
    /// How long a grant lasts without renewal, in ms, as configured ([`Protocol::lease_ms`]).
    fn lease_ms(&self) -> Option<u64>;
    /// Adds the server nodes to the world and returns the connector for clients.
    fn start(&self, world: &World) -> Arc<dyn Connector>;
}

/// Gives each client node its [`LockClient`].
pub trait Connector: Send + Sync {
    /// A client for the node `ctx` (called at every start of the node).
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient>;
}

impl<P: Protocol> AnyProtocol for P {
    fn id(&self) -> &'static str {
        P::ID
    }

    fn summary(&self) -> &'static str {
        P::SUMMARY
    }

    fn clients(&self) -> Vec<ClientProfile> {
        Protocol::clients(self)
    }

    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError> {
        let params = with_client_defaults(&Protocol::clients(self), params)?;
        let params: P::Params = parse_params(&params)?;
        self.validate(&params)?;
        let protocol = self.clone();
        Ok(Box::new(Configured { protocol, params }))
    }
}

/// The `[protocol]` table with the chosen client profile's defaults under the keys it does
/// not set (`client` absent: the first profile). A protocol without profiles refuses `client`.
pub fn with_client_defaults(
    profiles: &[ClientProfile],
    params: &toml::Table,
) -> Result<toml::Table, ParamError> {
    let names = || {
        let names: Vec<&str> = profiles.iter().map(|p| p.name).collect();
        names.join(", ")
    };
    let profile = match params.get("client") {
        None => match profiles.first() {
            None => return Ok(params.clone()),
            Some(first) => first,
        },
        Some(_) if profiles.is_empty() => {
            return Err(ParamError::field(
                "client",
                "this protocol has no client profiles",
            ))
        }
        Some(toml::Value::String(name)) => {
            let found = profiles.iter().find(|p| p.name == name);
            found.ok_or_else(|| {
                ParamError::field(
                    "client",
                    format!("unknown client `{name}` (known: {})", names()),
                )
            })?
        }
        Some(_) => {
            let why = format!("must be a string, one of: {}", names());
            return Err(ParamError::field("client", why));
        }
    };
    let mut table = params.clone();
    for (key, value) in &profile.defaults {
        table.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok(table)
}

/// A protocol with its parsed parameters.
struct Configured<P: Protocol> {
    protocol: P,
    params: P::Params,
}

impl<P: Protocol> Deployment for Configured<P> {
    fn servers(&self) -> Vec<String> {
        self.protocol.servers(&self.params)
    }

    fn points(&self) -> Vec<(String, &'static str)> {
        self.protocol.points(&self.params)
    }

    fn roles(&self) -> Vec<&'static str> {
        self.protocol.roles(&self.params)
    }

    fn lease_ms(&self) -> Option<u64> {
        self.protocol.lease_ms(&self.params)
    }

    fn start(&self, world: &World) -> Arc<dyn Connector> {
        let servers = self.protocol.start(&self.params, world);
        connector(self.protocol.clone(), self.params.clone(), servers)
    }
}

/// The connector of `protocol`'s clients to `servers`: the simulator's servers, or the real
/// ones a live client reaches (each protocol's `Servers::live`).
pub fn connector<P: Protocol>(
    protocol: P,
    params: P::Params,
    servers: P::Servers,
) -> Arc<dyn Connector> {
    Arc::new(Started {
        protocol,
        params,
        servers,
    })
}

/// A protocol whose servers run.
struct Started<P: Protocol> {
    protocol: P,
    params: P::Params,
    servers: P::Servers,
}

impl<P: Protocol> Connector for Started<P> {
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient> {
        Box::new(self.protocol.connect(&self.params, &self.servers, ctx))
    }
}

/// The protocols a run can use, by id.
#[derive(Clone, Default)]
pub struct Registry {
    protocols: BTreeMap<&'static str, Arc<dyn AnyProtocol>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The protocols that ship with locksim: one line each.
    pub fn builtin() -> Self {
        let mut r = Self::new();
        r.add(SingleRedis);
        r.add(ReplicatedRedis);
        r.add(Redlock);
        r.add(Etcd);
        r.add(ZooKeeper);
        r
    }

    /// Adds (or replaces) a protocol.
    pub fn add<P: Protocol>(&mut self, protocol: P) -> &mut Self {
        self.protocols.insert(P::ID, Arc::new(protocol));
        self
    }

    /// The protocol with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn AnyProtocol>> {
        self.protocols.get(id)
    }

    /// All ids, sorted.
    pub fn ids(&self) -> Vec<&'static str> {
        self.protocols.keys().copied().collect()
    }
}
