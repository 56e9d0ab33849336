//! The fenced resource: the storage a lock protects (Kleppmann 2016's "storage service").
//!
//! It holds a counter and the highest fencing token it has accepted. Clients read the
//! counter and write `value` with their token. With fencing `off` it accepts every write,
//! like most storage; with fencing `on` it rejects a write whose token is lower than the
//! highest it has seen, which is what makes a lock safe even when a paused client wakes up
//! and writes after its lease expired. Every decision goes into the history.
//!
//! With `mode = "cas"` a write is a compare-and-set instead: it carries the value its writer
//! read, and the resource applies it only if the counter still holds that value, as a
//! database transaction or etcd's guarded `txn` (`If(value == read) Then(put)`) would. This is
//! the literature's alternative to a lock (Kleppmann 2016, "Making the lock safe with fencing";
//! the etcd docs on transactions): a lost update becomes impossible whatever the lock does, at
//! the price of rejected writes that the client must retry.
//!
//! The resource is durable: it stands for a database that commits (writes and fsyncs) on
//! its node's disk before it acknowledges, so a crash of its node loses no acknowledged
//! write. Its own durability is not what locksim tests.

use futures::StreamExt;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::rpc::{endpoint, Caller, Links, RpcError, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The resource's node name.
pub const RESOURCE: &str = "resource";

/// Whether the resource checks tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fencing {
    /// Accept every write (most storage).
    #[default]
    Off,
    /// Reject writes whose token is below the highest accepted so far.
    On,
}

/// How the resource applies a write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteMode {
    /// Overwrite the counter (a plain `put`).
    #[default]
    Plain,
    /// Compare-and-set: apply only if the counter still holds the value the writer read.
    Cas,
}

/// A request to the resource (live mode sends it as a line of JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceReq {
    /// Read the counter.
    Read,
    /// Write the counter.
    Write {
        /// The new value.
        value: i64,
        /// The writer's fencing token, if it has one.
        token: Option<u64>,
        /// The writer's grant, for the history.
        grant: String,
        /// The value the writer read (a compare-and-set applies only if it is still there).
        expected: Option<i64>,
    },
}

/// The resource's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceResp {
    /// The counter's value.
    Value(i64),
    /// The write was applied.
    Accepted,
    /// The write was refused: a stale token, or a compare-and-set whose value changed.
    Rejected {
        /// The highest token seen so far.
        highest: u64,
    },
}

type ResourceNet = Net<Wire<ResourceReq, ResourceResp>>;

/// The file on the resource's disk that holds its state.
const STATE_FILE: &str = "resource.db";

/// What the resource holds: the counter and the highest token accepted. The one home of its
/// rules ([`ResourceState::answer`]): the model's node and live mode's resource server both
/// answer by it, each with its own disk.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ResourceState {
    value: i64,
    highest_token: Option<u64>,
}

/// How the resource checks writes: `[resource]` in a scenario.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceRules {
    /// Token checks.
    pub fencing: Fencing,
    /// Plain writes or compare-and-set.
    pub mode: WriteMode,
}

/// Rules a run's resource watches without applying them. The resource's answers are the only
/// way its rules reach the rest of the world, so as long as these rules would have answered
/// every write exactly as the applied ones did, the run is, event for event, the run these
/// rules would have given: one run then stands for two rows of a comparison that differ only
/// in their `[resource]`.
#[derive(Clone, Debug)]
pub struct Shadow {
    /// The rules watched.
    pub rules: ResourceRules,
    diverged: Arc<AtomicBool>,
}

impl Shadow {
    /// Watches `rules`.
    pub fn new(rules: ResourceRules) -> Shadow {
        Shadow {
            rules,
            diverged: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the rules would have answered some write differently (a refusal where the
    /// applied rules accepted, or the other way round, or another reason).
    pub fn diverged(&self) -> bool {
        self.diverged.load(Ordering::Relaxed)
    }
}

/// Adds the resource node to the world; returns a handle for clients.
pub fn start(world: &World, rules: ResourceRules) -> ResourceHandle {
    start_watching(world, rules, vec![])
}

/// [`start`], and the resource also watches each of `shadows` (see [`Shadow`]).
pub fn start_watching(world: &World, rules: ResourceRules, shadows: Vec<Shadow>) -> ResourceHandle {
    let net: ResourceNet = Net::new(world);
    let server_net = net.clone();
    let node = world.add_node(RESOURCE, Role::Resource, move |ctx| {
        serve(ctx, server_net.clone(), rules, shadows.clone())
    });
    ResourceHandle {
        links: Links::Sim(net),
        node,
    }
}

/// Why a write is refused, if it is: a stale token, or (compare-and-set) a value that
/// changed since the writer read it.
fn refusal(
    rules: ResourceRules,
    s: &ResourceState,
    token: Option<u64>,
    expected: Option<i64>,
) -> Option<String> {
    if let (Fencing::On, Some(t), Some(h)) = (rules.fencing, token, s.highest_token) {
        if t < h {
            return Some(format!("token below highest seen ({h})"));
        }
    }
    match (rules.mode, expected) {
        (WriteMode::Cas, Some(e)) if e != s.value => Some(format!(
            "compare-and-set failed: the value is {}, not the {e} read",
            s.value
        )),
        _ => None,
    }
}

async fn serve(ctx: NodeCtx, net: ResourceNet, rules: ResourceRules, shadows: Vec<Shadow>) {
    let disk = ctx.disk();
    let mut state: ResourceState = disk.last(STATE_FILE).unwrap_or_default();
    let (caller, mut requests) = endpoint(&net, &ctx);
    while let Some(req) = requests.next().await {
        let (resp, event) = state.answer(rules, &shadows, req.body);
        if resp == ResourceResp::Accepted {
            disk.put(STATE_FILE, state.clone());
            // Committed before it is acknowledged.
            disk.fsync().await;
        }
        if let Some(event) = event {
            ctx.record_event(event);
        }
        caller.reply(req.from, req.id, resp);
    }
}

impl ResourceState {
    /// The answer to `req` under `rules`, applied; for a write, the event the history records
    /// (accepted, or rejected with the reason), to record once the write is durable. Each of
    /// `shadows` notes whether its rules would have decided otherwise.
    pub fn answer(
        &mut self,
        rules: ResourceRules,
        shadows: &[Shadow],
        req: ResourceReq,
    ) -> (ResourceResp, Option<Event>) {
        let (value, token, grant, expected) = match req {
            ResourceReq::Read => return (ResourceResp::Value(self.value), None),
            ResourceReq::Write {
                value,
                token,
                grant,
                expected,
            } => (value, token, grant, expected),
        };
        let event = Event::new(RESOURCE, Kind::Info, Op::ResourceAccept)
            .grant(grant)
            .token(token)
            .value(value);
        let refused = refusal(rules, self, token, expected);
        for shadow in shadows {
            if refusal(shadow.rules, self, token, expected) != refused {
                shadow.diverged.store(true, Ordering::Relaxed);
            }
        }
        if let Some(why) = refused {
            let highest = self.highest_token.unwrap_or(0);
            let rejected = Event {
                op: Op::ResourceReject,
                detail: Some(why),
                ..event
            };
            return (ResourceResp::Rejected { highest }, Some(rejected));
        }
        if let (Fencing::On, Some(t)) = (rules.fencing, token) {
            assert!(self.highest_token.is_none_or(|h| t >= h), "a stale token");
        }
        self.value = value;
        if let Some(t) = token {
            self.highest_token = Some(self.highest_token.map_or(t, |h| h.max(t)));
        }
        assert!(token <= self.highest_token, "the highest token only grows");
        (ResourceResp::Accepted, Some(event))
    }
}

/// Where clients find the resource.
#[derive(Clone)]
pub struct ResourceHandle {
    links: Links<ResourceReq, ResourceResp>,
    node: NodeIdx,
}

impl ResourceHandle {
    /// A client for the node `ctx` (call at every start of the node).
    pub fn connect(&self, ctx: &NodeCtx) -> ResourceClient {
        ResourceClient {
            caller: self.links.caller(ctx),
            node: self.node,
        }
    }

    /// The resource as a live client reaches it: through `links`, as node `node`.
    pub fn live(links: Links<ResourceReq, ResourceResp>, node: NodeIdx) -> ResourceHandle {
        ResourceHandle { links, node }
    }
}

/// A client of the resource.
pub struct ResourceClient {
    caller: Caller<ResourceReq, ResourceResp>,
    node: NodeIdx,
}

/// The outcome of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Applied.
    Accepted,
    /// Refused: stale token, or (compare-and-set) the value changed since it was read.
    Rejected,
    /// No answer in time: it may or may not have been applied.
    Unknown,
}

impl ResourceClient {
    /// Reads the counter.
    pub async fn read(&self, timeout: Duration) -> Result<i64, RpcError> {
        match self
            .caller
            .call(self.node, ResourceReq::Read, timeout)
            .await?
        {
            ResourceResp::Value(v) => Ok(v),
            other => unreachable!("the resource answers a read with a value, not {other:?}"),
        }
    }

    /// Writes the counter; `expected` is the value the writer read (a compare-and-set
    /// resource applies the write only if it is still there; a plain one ignores it).
    pub async fn write(
        &self,
        value: i64,
        token: Option<u64>,
        expected: Option<i64>,
        grant: &str,
        timeout: Duration,
    ) -> WriteOutcome {
        let req = ResourceReq::Write {
            value,
            token,
            grant: grant.into(),
            expected,
        };
        match self.caller.call(self.node, req, timeout).await {
            Ok(ResourceResp::Accepted) => WriteOutcome::Accepted,
            Ok(ResourceResp::Rejected { .. }) => WriteOutcome::Rejected,
            Ok(ResourceResp::Value(_)) => unreachable!("a write is not answered with a value"),
            Err(RpcError::Timeout) => WriteOutcome::Unknown,
        }
    }
}
