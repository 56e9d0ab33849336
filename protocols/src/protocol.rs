//! The typed template every protocol fills in, and the types its client library speaks.
//!
//! A protocol is one [`Protocol`] implementation: an id, its `[protocol]` parameters as a
//! typed struct (parsed once by [`parse_params`], errors naming the field, then
//! [`Protocol::validate`]d), the server nodes it adds ([`Protocol::start`] returns what its
//! clients need to reach them), and a client library per client node
//! ([`Protocol::connect`], a [`LockClient`]). The registry (`crate::registry`) erases the
//! types once for every protocol; nothing here knows any protocol.

use async_trait::async_trait;
use locksim_sim::{NodeCtx, World};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// A lock protocol: its parameters, its servers, its client and its fault roles.
///
/// Implement this, add the value to a `Registry` (`registry.add(MyProtocol)`) and every
/// scenario, fault, check and report works with it.
pub trait Protocol: Clone + Send + Sync + 'static {
    /// The id used in scenario files (`[protocol] name = "..."`).
    const ID: &'static str;
    /// One line for people.
    const SUMMARY: &'static str;
    /// The `[protocol]` table without `name` (use `#[serde(deny_unknown_fields)]` and
    /// defaults); parsed once, before the run.
    type Params: DeserializeOwned + Clone + Send + Sync + 'static;
    /// What [`Protocol::start`] hands to every client: networks, server node indexes.
    type Servers: Send + Sync + 'static;
    /// The client library, one per client node (and per restart of it).
    type Client: LockClient + 'static;

    /// Checks what serde cannot (ranges, fields that depend on each other); the error names
    /// the field.
    fn validate(&self, params: &Self::Params) -> Result<(), ParamError> {
        let _ = params;
        Ok(())
    }
    /// The names of the server nodes it will add (known before the run, for validating
    /// fault targets).
    fn servers(&self, params: &Self::Params) -> Vec<String>;
    /// Named points in its code where faults can be triggered: `(node, point)`, `node`
    /// being a server name or `client`.
    fn points(&self, params: &Self::Params) -> Vec<(String, &'static str)> {
        let _ = params;
        vec![]
    }
    /// The fault targets it answers when a fault fires (e.g. `@primary`): [`Protocol::start`]
    /// registers an answer for each with [`World::answer_role`]. A scenario naming another
    /// role is refused.
    fn roles(&self, params: &Self::Params) -> Vec<&'static str> {
        let _ = params;
        vec![]
    }
    /// The client libraries a scenario can pick with `[protocol] client = "NAME"`, the
    /// default first. Each profile's `defaults` fill the `[protocol]` keys the scenario does
    /// not set, before the table is parsed; `Params` must then accept the `client` key. A
    /// protocol without profiles (the default) refuses `client`.
    fn clients(&self) -> Vec<ClientProfile> {
        vec![]
    }
    /// How long a grant lasts without renewal, in ms, as configured: the client profile's
    /// defaults and the server's own rounding applied (what reports measure fault sizes
    /// against). `None`: the protocol has no lease.
    fn lease_ms(&self, params: &Self::Params) -> Option<u64> {
        let _ = params;
        None
    }
    /// Adds the server nodes to the world (and answers its roles).
    fn start(&self, params: &Self::Params, world: &World) -> Self::Servers;
    /// The client library of the client node `ctx` (called at every start of the node).
    fn connect(
        &self,
        params: &Self::Params,
        servers: &Self::Servers,
        ctx: &NodeCtx,
    ) -> Self::Client;
}

/// The parameters of a protocol that has none: an empty `[protocol]` table (besides `name`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

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
    /// Asks the servers whether they still hold `grant`, as a library call that reads the
    /// lock's key does (redsync's `Valid()`): what the workload's `check = "ask_servers"`
    /// looks at just before a write. It takes a round trip, and what it answers holds for
    /// the instant each server read its key, not for when the answer arrives. The default,
    /// for a protocol without such a call, answers from [`LockClient::validity`].
    async fn ask_servers(&mut self, grant: &Grant) -> Validity {
        self.validity(grant)
    }
    /// The signal this library raises when it learns, by itself, that `grant` is lost (a
    /// failed automatic extension, an expired session), for the application to abort its
    /// work; called once per grant, right after the acquire. `None` (the default): the
    /// library never tells, and an application waiting for the signal waits in vain.
    fn lost_signal(&mut self, grant: &Grant) -> Option<LostSignal> {
        let _ = grant;
        None
    }
}

/// A client library a protocol can be driven by (`[protocol] client = "NAME"`): its name, what
/// it does, and the `[protocol]` parameters it sets unless the scenario sets them.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientProfile {
    /// The name scenarios use.
    pub name: &'static str,
    /// One line for people: the library, its defaults and what it does with a lost lock.
    pub description: &'static str,
    /// The `[protocol]` keys and values it sets by default.
    pub defaults: toml::Table,
}

/// The lock-lost notification a client library raises (node-redlock's `AbortSignal`, a
/// session's expiry): shared between the library, which raises it once, and the application,
/// which may look at it or await it. Single-threaded, as every client node is.
#[derive(Clone, Debug, Default)]
pub struct LostSignal(Rc<RefCell<SignalState>>);

#[derive(Debug, Default)]
struct SignalState {
    why: Option<String>,
    waiting: Vec<Waker>,
}

impl LostSignal {
    /// A signal not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal (the first reason stays) and wakes whoever awaits it.
    pub fn raise(&self, why: impl Into<String>) {
        let mut state = self.0.borrow_mut();
        if state.why.is_none() {
            state.why = Some(why.into());
        }
        for waker in state.waiting.drain(..) {
            waker.wake();
        }
    }

    /// Why the lock was lost, if the signal was raised.
    pub fn raised(&self) -> Option<String> {
        self.0.borrow().why.clone()
    }

    /// Completes when the signal is raised, with the reason.
    pub async fn wait(&self) -> String {
        std::future::poll_fn(|cx| {
            let mut state = self.0.borrow_mut();
            match &state.why {
                Some(why) => Poll::Ready(why.clone()),
                None => {
                    state.waiting.push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
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
