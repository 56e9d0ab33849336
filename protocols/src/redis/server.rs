//! A Redis server node: the [`Store`] behind the simulated network, with its wall clock,
//! active expiry, persistence and restart delay; optionally a primary or replica
//! ([`replication`]).

use super::replication::{self, ReplRole, Replicated, Replication};
use super::store::{
    standalone_wait, ActiveExpiry, Cmd, Deferred, Effect, Entry, ReplInfo, Reply, Store, Value,
};
use futures::StreamExt;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::rpc::{endpoint, Caller, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The file on a Redis node's disk that holds its data set (the AOF, kept as an image of the
/// data set it rebuilds: what a restart loads).
pub const AOF: &str = "appendonly.aof";

/// The message family Redis clients and servers speak.
pub type RedisNet = Net<Wire<Cmd, Reply>>;

/// What survives a crash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Persistence {
    /// Nothing: a restarted server is empty (no AOF, no recent RDB snapshot).
    #[default]
    None,
    /// AOF with `appendfsync everysec`: writes since the last fsync are lost.
    Everysec,
    /// AOF with `appendfsync always`: every write is on disk before the reply.
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
    /// Period of the `everysec` fsync, in local ms.
    pub fsync_interval_ms: u64,
    /// After a crash, refuse service for this long, in local ms (antirez's delayed restart).
    pub restart_delay_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            persistence: Persistence::None,
            active_expire_interval_ms: 100,
            fsync_interval_ms: 1000,
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

/// A Redis node's state: its data set and, if it replicates, its replication state.
pub(super) struct Node {
    /// The data set.
    pub store: Store,
    /// `None` on a standalone server.
    pub repl: Option<Replication>,
}

impl Node {
    fn is_primary(&self) -> bool {
        self.repl
            .as_ref()
            .is_none_or(|r| r.role() == ReplRole::Primary)
    }

    /// Runs a data command: on a replica, reads only; on a primary (or a standalone server),
    /// anything. Returns the reply and the effects to propagate.
    fn exec(&mut self, cmd: &Cmd, now_ms: i64, expired: &mut Vec<String>) -> (Reply, Vec<Effect>) {
        if self.repl.is_none() {
            return (self.store.exec(cmd, now_ms, expired), vec![]);
        }
        match cmd {
            _ if self.is_primary() => self.store.exec_with_effects(cmd, now_ms, expired),
            Cmd::Get { key } => (self.store.get_readonly(key, now_ms), vec![]),
            _ => (
                Reply::Error("READONLY You can't write against a read only replica.".into()),
                vec![],
            ),
        }
    }
}

fn record_expired(ctx: &NodeCtx, keys: &[String]) {
    for key in keys {
        ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Expire).detail(key.clone()));
    }
}

/// Records the server's own view of a lock key changing (`key K = VALUE` or `key K deleted`),
/// so a timeline can show who holds the lock on each server from `SET` to delete or expiry.
fn record_key(ctx: &NodeCtx, key: &str, entry: Option<&Entry>) {
    let detail = match entry.map(|e| &e.value) {
        Some(Value::Str(v)) => format!("key {key} = {v}"),
        Some(Value::Int(v)) => format!("key {key} = {v}"),
        None => format!("key {key} deleted"),
    };
    ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Note).detail(detail));
}

/// The lock keys of a data set and their values, to see what a step changed.
pub(super) fn lock_snapshot(store: &Store) -> BTreeMap<String, Value> {
    store
        .lock_entries()
        .map(|(k, e)| (k.to_owned(), e.value.clone()))
        .collect()
}

/// Records every lock key whose value changed since `before` (a replica applying its
/// primary's stream or a full resync), as [`record_key`] does for commands.
pub(super) fn record_lock_changes(ctx: &NodeCtx, before: &BTreeMap<String, Value>, store: &Store) {
    let after = lock_snapshot(store);
    for (key, value) in &after {
        if before.get(key) != Some(value) {
            record_key(ctx, key, store.entry(key));
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        record_key(ctx, key, None);
    }
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
            offset: 0,
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

async fn serve(
    ctx: NodeCtx,
    net: RedisNet,
    config: ServerConfig,
    restarted: bool,
    replicated: Option<Replicated>,
) {
    let disk = ctx.disk();
    let store = match config.persistence {
        Persistence::None => Store::new(),
        Persistence::Everysec | Persistence::Always => disk.last(AOF).unwrap_or_default(),
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
            record_key(&ctx, key, Some(entry));
        }
    }
    let (caller, mut requests) = endpoint(&net, &ctx);
    let repl = replicated
        .as_ref()
        .map(|r| Replication::new(replication::configured_role(&ctx, r), ctx.mono_now()));
    let node = Rc::new(RefCell::new(Node { store, repl }));
    if let Some(r) = &replicated {
        replication::spawn(&ctx, &node, &caller, r);
    }
    spawn_active_expiry(
        &ctx,
        &node,
        replicated.as_ref(),
        config.active_expire_interval_ms,
    );
    if config.persistence == Persistence::Everysec {
        let (ctx2, node2, period) = (ctx.clone(), node.clone(), config.fsync_interval_ms);
        let disk2 = disk.clone();
        ctx.spawn(async move {
            loop {
                ctx2.sleep_local(Duration::from_millis(period)).await;
                // Redis' background thread: the fsync proceeds while commands run on.
                disk2.put(AOF, node2.borrow().store.clone());
                drop(disk2.fsync());
            }
        });
    }
    let mut expired = Vec::new();
    while let Some(req) = requests.next().await {
        if req.body.is_server_command() {
            let reply = match &replicated {
                None => standalone_command(&ctx, &caller, (req.from, req.id), &req.body),
                Some(r) => {
                    replication::command(&ctx, &node, &caller, r, req.from, req.id, &req.body)
                }
            };
            if let Some(reply) = reply {
                caller.reply(req.from, req.id, reply);
            }
            continue;
        }
        expired.clear();
        let lock_key = req.body.lock_key();
        let before = lock_key.and_then(|k| node.borrow().store.entry(k).cloned());
        let (reply, effects) = node
            .borrow_mut()
            .exec(&req.body, ctx.wall_ms(), &mut expired);
        record_expired(&ctx, &expired);
        if let Some(key) = lock_key {
            let after = node.borrow().store.entry(key).cloned();
            if before.map(|e| e.value) != after.as_ref().map(|e| e.value.clone()) {
                record_key(&ctx, key, after.as_ref());
            }
        }
        if config.persistence == Persistence::Always && req.body.is_write() {
            // `appendfsync always`: on disk before the reply, and nothing runs meanwhile.
            disk.put(AOF, node.borrow().store.clone());
            disk.fsync().await;
        }
        ctx.point("before_reply").await;
        caller.reply(req.from, req.id, reply);
        if let (Some(r), false) = (&replicated, effects.is_empty()) {
            let start = {
                let mut n = node.borrow_mut();
                let repl = n.repl.as_mut().expect("a replicated node");
                let start = repl.info().offset;
                repl.wrote(req.from, &effects);
                start
            };
            // The client has its answer; the replicas do not have the write yet.
            ctx.point("before_replicate").await;
            replication::feed(&ctx, &node, r, start, effects);
        }
    }
}

fn spawn_active_expiry(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    replicated: Option<&Replicated>,
    period_ms: u64,
) {
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
            if let (Some(r), false) = (&replicated, due.is_empty()) {
                let dels: Vec<Effect> = due.into_iter().map(|key| Effect::Del { key }).collect();
                let start = {
                    let mut n = node.borrow_mut();
                    let repl = n.repl.as_mut().expect("a replicated node");
                    let start = repl.info().offset;
                    repl.expired(&dels);
                    start
                };
                replication::feed(&ctx2, &node, r, start, dels);
            }
        }
    });
}
