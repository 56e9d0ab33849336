//! The protocols a run can use, by id, and the one place their types are erased: a
//! [`Protocol`] becomes an [`AnyProtocol`], its parsed parameters a [`Deployment`], its
//! started servers a [`Connector`]. The runner sees only these; a protocol never imports
//! this file, so adding one is its folder plus one line in [`Registry::builtin`].

use crate::protocol::{parse_params, LockClient, ParamError, Protocol};
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

    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError> {
        let params: P::Params = parse_params(params)?;
        self.validate(&params)?;
        let protocol = self.clone();
        Ok(Box::new(Configured { protocol, params }))
    }
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

    fn start(&self, world: &World) -> Arc<dyn Connector> {
        let servers = self.protocol.start(&self.params, world);
        Arc::new(Started {
            protocol: self.protocol.clone(),
            params: self.params.clone(),
            servers,
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ids_are_the_scenario_names() {
        let ids = Registry::builtin().ids();
        let expected = [
            "etcd",
            "redlock",
            "replicated-redis",
            "single-redis",
            "zookeeper",
        ];
        assert_eq!(ids, expected);
    }

    #[test]
    fn configure_parses_and_validates_once_naming_the_field() {
        let r = Registry::builtin();
        let redis = r.get("single-redis").expect("registered");
        let e = redis
            .configure(&toml::toml! { ttl_msec = 1 })
            .err()
            .unwrap();
        assert_eq!(e.field.as_deref(), Some("ttl_msec"));
        let e = redis.configure(&toml::toml! { ttl_ms = 0 }).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("ttl_ms"));
        let d = redis
            .configure(&toml::Table::new())
            .expect("defaults are valid");
        assert_eq!(d.servers(), ["redis"]);
    }
}
