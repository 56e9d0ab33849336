//! A Redis server node: the [`Store`] behind the simulated network, with its wall clock,
//! active expiry, persistence and restart delay; optionally a primary or replica
//! ([`super::replication`], [`super::link`]).

use super::aof::{self, Everysec, AOF};
use super::link;
use super::node::{record_expired, record_key, Node};
use super::replication::{Replicated, Replication};
use super::store::{standalone_wait, ActiveExpiry, Cmd, Deferred, Effect, ReplInfo, Reply, Store};
use futures::StreamExt;
use locksim_sim::rpc::{endpoint, Caller, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The message family Redis clients and servers speak.
pub type RedisNet = Net<Wire<Cmd, Reply>>;

/// What survives a crash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Persistence {
    /// Nothing: a restarted server is empty (no AOF, no recent RDB snapshot).
    #[default]
    None,
    /// AOF with `appendfsync everysec`: synced in the background once a wall-clock second
    /// ([`aof`]); writes since the last fsync are lost.
    Everysec,
    /// AOF with `appendfsync always`: every change is on disk before the reply (a command
    /// that changed nothing, a `SET NX` that found the key, is neither appended nor synced).
    Always,
}

/// How a server node behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// What survives a crash.
    pub persistence: Persistence,
    /// Period of the active expiry cycle ([`ActiveExpiry`]), in local ms (Redis `hz 10` =
    /// 100 ms).
    pub active_expire_interval_ms: u64,
    /// After a crash, refuse service for this long, in local ms (antirez's delayed restart).
    pub restart_delay_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            persistence: Persistence::None,
            active_expire_interval_ms: 100,
            restart_delay_ms: 0,
        }
    }
}

/// Adds a Redis server node called `name`. Its data set goes to its disk as
/// `config.persistence` says, so a crash keeps what the last completed fsync covered.
pub fn start_server(world: &World, name: &str, net: &RedisNet, config: ServerConfig) -> NodeIdx {
    start(world, name, net, config, None)
}

/// Adds a Redis node that takes part in replication, in the role `replicated.role` says.
pub fn start_replicated_server(
    world: &World,
    name: &str,
    net: &RedisNet,
    config: ServerConfig,
    replicated: Replicated,
) -> NodeIdx {
    start(world, name, net, config, Some(replicated))
}

fn start(
    world: &World,
    name: &str,
    net: &RedisNet,
    config: ServerConfig,
    replicated: Option<Replicated>,
) -> NodeIdx {
    let starts = Arc::new(AtomicU64::new(0));
    let net = net.clone();
    world.add_node(name, Role::Server, move |ctx| {
        let restarted = starts.fetch_add(1, Ordering::Relaxed) > 0;
        serve(
            ctx,
            net.clone(),
            config.clone(),
            restarted,
            replicated.clone(),
        )
    })
}

/// The answer of a standalone server to a server command; `None` if it comes later.
fn standalone_command(
    ctx: &NodeCtx,
    caller: &Caller<Cmd, Reply>,
    (client, id): (NodeIdx, u64),
    cmd: &Cmd,
) -> Option<Reply> {
    let deferred = match cmd {
        Cmd::Info => Deferred::Now(Reply::Info(ReplInfo {
            following: None,
            link_up: true,
            link_down_s: None,
            offset: 0,
            run_id: None,
        })),
        Cmd::Wait {
            replicas,
            timeout_ms,
        } => standalone_wait(*replicas, *timeout_ms),
        _ => Deferred::Now(Reply::Error("ERR this server does not replicate".into())),
    };
    match deferred {
        Deferred::Now(reply) => Some(reply),
        Deferred::Never => None,
        Deferred::After { delay, reply } => {
            let (ctx2, caller2) = (ctx.clone(), caller.clone());
            ctx.spawn(async move {
                ctx2.sleep_local(delay).await;
                caller2.reply(client, id, reply);
            });
            None
        }
    }
}

/// The clients blocked in `BLPOP`, per list key, each as (client, request id), served first
/// come first served as Redis serves them; a key is listed only while someone waits on it.
/// They go with the incarnation: a crash drops them.
type Blocked = Rc<RefCell<BTreeMap<String, VecDeque<(NodeIdx, u64)>>>>;

/// One incarnation of a Redis node: what its request loop needs.
struct Serving {
    ctx: NodeCtx,
    config: ServerConfig,
    replicated: Option<Replicated>,
    node: Rc<RefCell<Node>>,
    caller: Caller<Cmd, Reply>,
    blocked: Blocked,
}

async fn serve(
    ctx: NodeCtx,
    net: RedisNet,
    config: ServerConfig,
    restarted: bool,
    replicated: Option<Replicated>,
) {
    let store = recover(&ctx, &config, restarted).await;
    let (caller, mut requests) = endpoint(&net, &ctx);
    let mut repl = (replicated.as_ref())
        .map(|r| Replication::new(link::configured_role(&ctx, r), ctx.mono_now()));
    if let (Some(repl), Persistence::Always) = (&mut repl, config.persistence) {
        repl.synced_to(0); // Acknowledgements report only what the AOF has synced.
    }
    let everysec = Everysec::started(ctx.wall_ms());
    let node = Rc::new(RefCell::new(Node {
        store,
        repl,
        everysec,
    }));
    if let Some(r) = &replicated {
        link::spawn(&ctx, &node, &caller, r, config.persistence);
    }
    spawn_active_expiry(&ctx, &node, replicated.as_ref(), &config);
    if config.persistence == Persistence::Everysec {
        aof::spawn_everysec_turns(&ctx, &node);
    }
    let server = Serving {
        ctx,
        config,
        replicated,
        node,
        caller,
        blocked: Blocked::default(),
    };
    let mut expired = Vec::new();
    while let Some(req) = requests.next().await {
        if req.body.is_server_command() {
            server.server_command(req.from, req.id, &req.body);
        } else {
            server
                .data_command(req.from, req.id, &req.body, &mut expired)
                .await;
        }
    }
}

/// The data set a (re)started node begins with, after its restart delay.
async fn recover(ctx: &NodeCtx, config: &ServerConfig, restarted: bool) -> Store {
    let store = match config.persistence {
        Persistence::None => Store::new(),
        Persistence::Everysec | Persistence::Always => ctx.disk().last(AOF).unwrap_or_default(),
    };
    if restarted && config.restart_delay_ms > 0 {
        // Not listening yet: requests sent meanwhile are refused (dropped).
        ctx.sleep_local(Duration::from_millis(config.restart_delay_ms))
            .await;
        ctx.note("accepting commands again");
    }
    if restarted {
        // What survived the crash: the lock keys this server holds again.
        for (key, entry) in store.lock_entries() {
            record_key(ctx, key, Some(entry));
        }
    }
    assert!(
        config.persistence != Persistence::None || store.is_empty(),
        "without persistence a (re)started server is empty"
    );
    store
}

impl Serving {
    /// `PING`, `INFO`, `REPLICAOF`, `WAIT`, `BLPOP`: answered now, or later by a task.
    fn server_command(&self, from: NodeIdx, id: u64, cmd: &Cmd) {
        let (ctx, caller) = (&self.ctx, &self.caller);
        let reply = match (&self.replicated, cmd) {
            // Whatever the node's role.
            (_, Cmd::Ping) => Some(Reply::Bulk("PONG".into())),
            (None, Cmd::Blpop { key, timeout_s }) => self.blpop((from, id), key, *timeout_s),
            // Only python-redis-lock sends it, and only on single-redis.
            (Some(_), Cmd::Blpop { .. }) => Some(Reply::Error(
                "ERR BLPOP is modelled on a standalone server only".into(),
            )),
            (None, _) => standalone_command(ctx, caller, (from, id), cmd),
            (Some(r), _) => link::command(ctx, &self.node, caller, r, (from, id), cmd),
        };
        if let Some(reply) = reply {
            caller.reply(from, id, reply);
        }
    }

    /// `BLPOP key timeout`: the list's head now, or the client waits in line for the next
    /// push ([`Serving::wake`]) until `timeout_s` on the server's clock (then nil).
    fn blpop(&self, waiter: (NodeIdx, u64), key: &str, timeout_s: u64) -> Option<Reply> {
        let mut expired = vec![];
        let popped = (self.node.borrow_mut().store).lpop(key, self.ctx.wall_ms(), &mut expired);
        record_expired(&self.ctx, &expired);
        match popped {
            Err(error) => return Some(Reply::Error(error)),
            Ok(Some(head)) => return Some(Reply::Bulk(head)),
            Ok(None) => {}
        }
        let mut blocked = self.blocked.borrow_mut();
        blocked.entry(key.to_owned()).or_default().push_back(waiter);
        if timeout_s > 0 {
            let (ctx, caller, blocked) =
                (self.ctx.clone(), self.caller.clone(), self.blocked.clone());
            let (key, timeout) = (key.to_owned(), Duration::from_secs(timeout_s));
            self.ctx.spawn(async move {
                ctx.sleep_local(timeout).await;
                let mut blocked = blocked.borrow_mut();
                let Some(line) = blocked.get_mut(&key) else {
                    return;
                };
                if let Some(at) = line.iter().position(|w| *w == waiter) {
                    line.remove(at);
                    caller.reply(waiter.0, waiter.1, Reply::Nil);
                }
                if line.is_empty() {
                    blocked.remove(&key);
                }
            });
        }
        None
    }

    /// Serves the clients blocked on `keys` from what was pushed, first come first served.
    fn wake(&self, keys: &[&str]) {
        let mut blocked = self.blocked.borrow_mut();
        for key in keys {
            let Some(line) = blocked.get_mut(*key) else {
                continue;
            };
            while let Some(&(client, id)) = line.front() {
                let mut expired = vec![];
                let now_ms = self.ctx.wall_ms();
                let popped = (self.node.borrow_mut().store).lpop(key, now_ms, &mut expired);
                record_expired(&self.ctx, &expired);
                let Ok(Some(head)) = popped else {
                    break;
                };
                line.pop_front();
                self.caller.reply(client, id, Reply::Bulk(head));
            }
            if line.is_empty() {
                blocked.remove(*key);
            }
        }
    }

    /// A data command: run it, note what it did to the lock key, persist, answer, and then
    /// stream its effects to the replicas.
    async fn data_command(&self, from: NodeIdx, id: u64, cmd: &Cmd, expired: &mut Vec<String>) {
        let ctx = &self.ctx;
        expired.clear();
        let lock_key = cmd.lock_key();
        let before = lock_key.and_then(|k| self.node.borrow().store.entry(k).cloned());
        let persistence = self.config.persistence;
        let appending = persistence != Persistence::None;
        let (reply, effects) =
            (self.node.borrow_mut()).exec(cmd, ctx.wall_ms(), expired, appending);
        record_expired(ctx, expired);
        if let Some(key) = lock_key {
            let after = self.node.borrow().store.entry(key).cloned();
            if before.map(|e| e.value) != after.as_ref().map(|e| e.value.clone()) {
                record_key(ctx, key, after.as_ref());
            }
        }
        if !effects.is_empty() {
            // Only a command that changed the data set (or expired a key it touched) is
            // appended: a `SET NX` that finds the key writes nothing. Live, the real server's
            // syncs per grant under `always` said so: 2.0 against the 3.9 of a model that
            // synced every write command.
            aof::appended(ctx, &self.node, persistence).await;
        }
        ctx.point("before_reply").await;
        self.caller.reply(from, id, reply);
        // A push (python-redis-lock's release signal) serves who waits in `BLPOP`.
        if cmd.is_write() && !self.blocked.borrow().is_empty() {
            self.wake(&cmd.keys());
        }
        if let (Some(r), false) = (&self.replicated, effects.is_empty()) {
            let start = {
                let mut n = self.node.borrow_mut();
                let repl = n.replication_mut();
                let start = repl.offset();
                repl.wrote(from, &effects);
                assert_eq!(repl.offset(), start + effects.len() as u64);
                start
            };
            // The client has its answer; the replicas do not have the write yet.
            ctx.point("before_replicate").await;
            link::feed(ctx, &self.node, r, start, effects);
        }
    }
}

/// The active expiry cycle: deletes keys found due, appends their `DEL`s to the AOF and
/// streams them to the replicas.
fn spawn_active_expiry(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    replicated: Option<&Replicated>,
    config: &ServerConfig,
) {
    let (period_ms, persistence) = (config.active_expire_interval_ms, config.persistence);
    if period_ms == 0 {
        return;
    }
    let (ctx2, node, replicated) = (ctx.clone(), node.clone(), replicated.cloned());
    ctx.spawn(async move {
        let mut active = ActiveExpiry::default();
        loop {
            ctx2.sleep_local(Duration::from_millis(period_ms)).await;
            // Replicas never expire keys: they wait for their primary's DEL.
            if !node.borrow().is_primary() {
                continue;
            }
            let due = active.cycle(&mut node.borrow_mut().store, ctx2.wall_ms());
            record_expired(&ctx2, &due);
            if !due.is_empty() {
                aof::appended(&ctx2, &node, persistence).await;
            }
            if let (Some(r), false) = (&replicated, due.is_empty()) {
                let dels: Vec<Effect> = due.into_iter().map(|key| Effect::Del { key }).collect();
                let start = {
                    let mut n = node.borrow_mut();
                    let repl = n.replication_mut();
                    let start = repl.offset();
                    repl.expired(&dels);
                    start
                };
                link::feed(&ctx2, &node, r, start, dels);
            }
        }
    });
}
