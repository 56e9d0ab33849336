//! Lock protocols for locksim: servers, client libraries, and the fenced resource.
//!
//! # Adding your own protocol
//! A protocol is three small pieces, all public so that a protocol can live in its own crate:
//! 1. a [`Protocol`]: an id (used as `protocol.name` in scenario files) and
//!    [`Protocol::configure`], which parses the scenario's `[protocol]` table (use
//!    [`parse_params`] for errors that name the field) into a
//! 2. [`Deployment`]: the names of its server nodes and named points, and
//!    [`Deployment::start`], which adds the server nodes to the [`World`] and returns a
//! 3. [`Connector`], which gives each client node a [`LockClient`]: `acquire`, `release`
//!    and optionally `extend` and `validity` (for grants whose validity changes after the
//!    grant: keep-alives, pushes, sessions; see [`locksim_sim::rpc`] for connections with
//!    server push).
//!
//! Servers talk over [`locksim_sim::rpc`]; clients time everything with their node's
//! monotonic clock ([`NodeCtx::mono_now`]). Register the protocol in a [`Registry`] and run
//! scenarios with it; `examples/custom_protocol.rs` in the repository is a complete example.

pub mod etcd;
pub mod raft;
pub mod redis;
pub mod redlock;
pub mod replicated_redis;
pub mod resource;
pub mod single_redis;
pub mod zookeeper;

use async_trait::async_trait;
use locksim_sim::{NodeCtx, World};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A lock held by a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token, if the protocol gives one.
    pub token: Option<u64>,
    /// Until when (on the client's monotonic clock) the client may assume it holds the lock;
    /// `None` = no expiry.
    pub valid_until: Option<Duration>,
    /// The protocol's own handle on the lock (e.g. the random value stored in Redis).
    pub handle: String,
}

/// How far a held lock may be trusted, as the client library knows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Until this instant of the client's monotonic clock (a TTL, a lease).
    Until(Duration),
    /// No expiry: a lock without TTL, or one held by a session that is up.
    Indefinite,
    /// The lock is gone: the lease was revoked, the session expired (why).
    Lost(String),
}

impl Validity {
    /// Whether the lock may still be trusted at `now` (client monotonic time).
    pub fn holds_at(&self, now: Duration) -> bool {
        match self {
            Validity::Until(until) => now < *until,
            Validity::Indefinite => true,
            Validity::Lost(_) => false,
        }
    }
}

/// The outcome of an acquire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The client holds the lock.
    Granted(Grant),
    /// The client definitely does not hold the lock (e.g. gave up after its timeout).
    Failed(String),
    /// The client does not know (its last request timed out); it does not enter.
    Unknown(String),
}

/// The outcome of a release or extend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It took effect.
    Ok,
    /// It definitely did not take effect (e.g. the lock was no longer ours).
    Failed(String),
    /// Nobody knows (the request timed out).
    Unknown(String),
}

/// A client library for one lock, used by one client node.
#[async_trait(?Send)]
pub trait LockClient {
    /// Tries to take the lock (with the protocol's own retries and timeout).
    async fn acquire(&mut self) -> Acquired;
    /// Gives the lock back.
    async fn release(&mut self, grant: &Grant) -> Outcome;
    /// Extends the lease; on success updates `grant.valid_until`.
    async fn extend(&mut self, grant: &mut Grant) -> Outcome {
        let _ = grant;
        Outcome::Failed("this protocol cannot extend a lock".into())
    }
    /// How far `grant` may be trusted now. The workload asks just before it writes, so a
    /// protocol whose grants change after the fact (a lease kept alive in the background, a
    /// revocation pushed by the server, a session lost with its connection) answers from
    /// what it has learned meanwhile. The default reads `grant.valid_until`.
    fn validity(&mut self, grant: &Grant) -> Validity {
        match grant.valid_until {
            Some(until) => Validity::Until(until),
            None => Validity::Indefinite,
        }
    }
}

/// Gives each client node its [`LockClient`].
pub trait Connector: Send + Sync {
    /// A client for the node `ctx` (called at every start of the node).
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient>;
}

/// A configured protocol, ready to be started in a world.
pub trait Deployment: Send + Sync {
    /// The names of the server nodes it will add (known before the run, for validating
    /// fault targets).
    fn servers(&self) -> Vec<String>;
    /// Named points in its code where faults can be triggered, by role: `(node, point)`,
    /// `node` being a server name or `client`.
    fn points(&self) -> Vec<(String, &'static str)> {
        vec![]
    }
    /// The fault targets it answers when a fault fires (e.g. `@primary`): [`Deployment::start`]
    /// registers an answer for each with [`World::answer_role`]. A scenario naming another
    /// role is refused.
    fn roles(&self) -> Vec<&'static str> {
        vec![]
    }
    /// Adds the server nodes to the world (and answers its roles) and returns the connector
    /// for clients.
    fn start(&self, world: &World) -> Arc<dyn Connector>;
}

/// A lock protocol.
pub trait Protocol: Send + Sync {
    /// The id used in scenario files (`[protocol] name = "..."`).
    fn id(&self) -> &'static str;
    /// One line for people.
    fn summary(&self) -> &'static str;
    /// Parses the `[protocol]` table (without `name`).
    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError>;
}

/// A protocol parameter that is wrong: which field and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// The field, as written in the `[protocol]` table (None if it concerns the table).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ParamError {
    /// An error about one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        ParamError {
            field: Some(field.into()),
            message: format!("protocol.{field}: {}", message.into()),
        }
    }
}

/// Deserialises a `[protocol]` table into `T` (use `#[serde(deny_unknown_fields)]` on it),
/// naming the offending field on error.
pub fn parse_params<T: DeserializeOwned>(params: &toml::Table) -> Result<T, ParamError> {
    serde_path_to_error::deserialize(toml::Value::Table(params.clone())).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().message().trim().to_owned();
        // An unknown or missing field is named in the message; otherwise the path names it.
        let field = quoted_field(&message).or_else(|| (path != ".").then_some(path));
        ParamError {
            message: match &field {
                Some(f) => format!("protocol.{f}: {message}"),
                None => format!("[protocol]: {message}"),
            },
            field,
        }
    })
}

/// The field an `unknown field `x`` / `missing field `x`` message is about.
fn quoted_field(message: &str) -> Option<String> {
    if !message.contains("field `") {
        return None;
    }
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_owned())
}

/// The protocols a run can use, by id.
#[derive(Clone, Default)]
pub struct Registry {
    protocols: BTreeMap<&'static str, Arc<dyn Protocol>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The protocols that ship with locksim.
    pub fn builtin() -> Self {
        let mut r = Self::new();
        r.add(Arc::new(single_redis::SingleRedis));
        r.add(Arc::new(replicated_redis::ReplicatedRedis));
        r.add(Arc::new(redlock::Redlock));
        r.add(Arc::new(etcd::Etcd));
        r.add(Arc::new(zookeeper::ZooKeeper));
        r
    }

    /// Adds (or replaces) a protocol.
    pub fn add(&mut self, protocol: Arc<dyn Protocol>) -> &mut Self {
        self.protocols.insert(protocol.id(), protocol);
        self
    }

    /// The protocol with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Protocol>> {
        self.protocols.get(id)
    }

    /// All ids, sorted.
    pub fn ids(&self) -> Vec<&'static str> {
        self.protocols.keys().copied().collect()
    }
}
