//! Asynchronous replication from a primary to its replicas, as Redis does it (redis.io,
//! "Redis replication"; `PSYNC` with two history ids since Redis 4.0).
//!
//! - The primary answers the client first and streams the command's *effects* to its
//!   replicas afterwards: a `SET k v PX ttl` travels as `SET k v PXAT when` (absolute expiry),
//!   an expired key as `DEL k` ([`Effect`]). Each replica link has its own lag (the primary's
//!   output buffer, drawn per message from `lag_ms_min..=lag_ms_max`, then the network), so a
//!   primary that dies right after answering takes the write with it. That is the window
//!   Sentinel failover loses locks in (Redis docs, "Distributed locks", on replication; aphyr,
//!   "Call me maybe: Redis", 2013).
//! - Every node numbers the stream it has seen: a history id (`replid`) and an offset (one
//!   per effect here, bytes in Redis). A replica that (re)connects sends `PSYNC replid
//!   offset`; the primary continues the stream if that history is in its backlog, or else
//!   sends its whole data set: a full resync, which throws away whatever the replica had that
//!   the primary does not.
//! - A promoted replica starts a new history but remembers the old one up to its offset
//!   (`replid2`), so the other replicas continue partially. A demoted primary that took writes
//!   the promoted replica never saw is further along the old history: it gets a full resync
//!   and those writes are lost, as in real Redis.
//! - Replicas acknowledge their offset (`REPLCONF ACK`) after each batch and every ping
//!   period; `WAIT n timeout` counts those acknowledgements for the client's last write. A
//!   link silent for `timeout_ms` is down; the replica then sends `PSYNC` again. The stream is
//!   applied in offset order (TCP delivers in order; our network may reorder, so a replica
//!   holds early batches back and asks again for a gap that does not fill).
//!
//! Not modelled: transfer time of a full resync, the backlog's size limit (here it keeps the
//! whole run), chained replicas, `min-replicas-to-write`.

use super::server::Node;
use super::store::{wait_timeout, Cmd, Effect, ReplInfo, Reply, Store};
use futures::StreamExt;
use locksim_sim::rpc::Caller;
use locksim_sim::{Net, NodeCtx, NodeIdx};
use rand::Rng;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// The replication stream's message family.
pub type ReplNet = Net<ReplMsg>;

/// What primaries and replicas say to each other.
#[derive(Clone, Debug)]
pub enum ReplMsg {
    /// Replica → primary: `PSYNC replid offset` ("continue my copy of this history"); `None`
    /// if it has no copy yet.
    Psync {
        /// The history the replica has.
        replid: Option<u64>,
        /// How much of it.
        offset: u64,
    },
    /// Primary → replica: the whole data set at `offset` of history `replid`.
    FullResync {
        /// The primary's history.
        replid: u64,
        /// Where the stream continues from.
        offset: u64,
        /// The data set.
        snapshot: Store,
    },
    /// Primary → replica: `+CONTINUE`: adopt history `replid` and apply `ops` after `start`.
    Continue {
        /// The primary's history.
        replid: u64,
        /// The replica's offset the ops follow.
        start: u64,
        /// The missing effects.
        ops: Vec<Effect>,
    },
    /// Primary → replica: effects at offsets `start + 1 ..` (a heartbeat if `ops` is empty:
    /// then `start` is the primary's offset).
    Stream {
        /// The primary's history.
        replid: u64,
        /// The offset the ops follow.
        start: u64,
        /// The effects.
        ops: Vec<Effect>,
    },
    /// Replica → primary: `REPLCONF ACK offset`.
    Ack {
        /// The replica's history.
        replid: u64,
        /// How much of it the replica has applied.
        offset: u64,
    },
}

/// How replication behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// Shortest delay before the primary sends a write to a replica, in local ms.
    pub lag_ms_min: u64,
    /// Longest such delay, in local ms.
    pub lag_ms_max: u64,
    /// Period of the primary's heartbeat and the replicas' acknowledgements, in local ms
    /// (Redis: `repl-ping-replica-period` 10 s, `REPLCONF ACK` every second).
    pub ping_interval_ms: u64,
    /// A link silent for this long is down (Redis: `repl-timeout`, 60 s), in local ms.
    pub timeout_ms: u64,
}

/// A node's replication role, as its config file says (it survives a crash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplRole {
    /// Accepts writes and streams them to its replicas.
    Primary,
    /// Follows `primary` and refuses writes.
    Replica {
        /// The node it follows.
        primary: NodeIdx,
    },
}

/// What a replicated node needs besides its data set.
#[derive(Clone)]
pub struct Replicated {
    /// The replication stream's network.
    pub net: ReplNet,
    /// Lag, heartbeat, timeout.
    pub config: ReplicationConfig,
    /// The role the node starts in. Sentinel rewrites it in the config file on the node's
    /// disk ([`CONF`]; `REPLICAOF` + `CONFIG REWRITE`), so a restarted node comes back in the
    /// role it last had.
    pub role: ReplRole,
}

/// The config file on a Redis node's disk: its replication role.
pub const CONF: &str = "redis.conf";

/// The role a node starts in: as its config file says, or as it was deployed.
pub(super) fn configured_role(ctx: &NodeCtx, replicated: &Replicated) -> ReplRole {
    ctx.disk().last(CONF).unwrap_or(replicated.role)
}

/// `CONFIG REWRITE`: the new role goes to the config file, synced in the background.
fn rewrite_config(ctx: &NodeCtx, role: ReplRole) {
    let disk = ctx.disk();
    disk.put(CONF, role);
    drop(disk.fsync());
}

/// A client blocked in `WAIT`.
struct Waiter {
    client: NodeIdx,
    id: u64,
    target: u64,
    replicas: u32,
}

/// A replica as its primary knows it.
struct Link {
    acked: u64,
    heard: Duration,
}

/// One node's replication state (lost in a crash, except its role).
pub struct Replication {
    role: ReplRole,
    replid: Option<u64>,
    offset: u64,
    /// The history this one continues and up to which offset (`replid2`).
    previous: Option<(u64, u64)>,
    /// `backlog[i]` is the effect at offset `backlog_start + i + 1`.
    backlog_start: u64,
    backlog: Vec<Effect>,
    // As a primary.
    replicas: BTreeMap<NodeIdx, Link>,
    last_write: BTreeMap<NodeIdx, u64>,
    waiters: BTreeMap<u64, Waiter>,
    next_waiter: u64,
    // As a replica.
    synced: bool,
    heard: Duration,
    early: BTreeMap<u64, Vec<Effect>>,
    behind_since: Option<Duration>,
}

fn fresh_replid() -> u64 {
    madsim::rand::thread_rng().gen()
}

impl Replication {
    /// A node starting (or restarting) in `role` at local time `now`, with an empty history.
    pub fn new(role: ReplRole, now: Duration) -> Self {
        Replication {
            role,
            replid: (role == ReplRole::Primary).then(fresh_replid),
            offset: 0,
            previous: None,
            backlog_start: 0,
            backlog: vec![],
            replicas: BTreeMap::new(),
            last_write: BTreeMap::new(),
            waiters: BTreeMap::new(),
            next_waiter: 0,
            synced: false,
            heard: now,
            early: BTreeMap::new(),
            behind_since: None,
        }
    }

    /// The node's role.
    pub fn role(&self) -> ReplRole {
        self.role
    }

    /// What `INFO replication` says.
    pub fn info(&self) -> ReplInfo {
        match self.role {
            ReplRole::Primary => ReplInfo {
                following: None,
                link_up: true,
                offset: self.offset,
            },
            ReplRole::Replica { primary } => ReplInfo {
                following: Some(primary),
                link_up: self.synced,
                offset: self.offset,
            },
        }
    }

    fn append(&mut self, ops: &[Effect]) {
        self.backlog.extend_from_slice(ops);
        self.offset += ops.len() as u64;
    }

    /// `REPLICAOF NO ONE`: start a new history that continues the current one. False if
    /// already a primary.
    pub fn promote(&mut self) -> bool {
        if self.role == ReplRole::Primary {
            return false;
        }
        self.previous = self.replid.map(|r| (r, self.offset));
        self.replid = Some(fresh_replid());
        self.role = ReplRole::Primary;
        self.early.clear();
        self.behind_since = None;
        true
    }

    /// `REPLICAOF primary`: follow it (keeping the data set until the primary sends its
    /// own). False if already following it.
    pub fn follow(&mut self, primary: NodeIdx, now: Duration) -> bool {
        if self.role == (ReplRole::Replica { primary }) {
            return false;
        }
        self.role = ReplRole::Replica { primary };
        self.replicas.clear();
        self.synced = false;
        self.heard = now;
        self.early.clear();
        self.behind_since = None;
        true
    }

    fn in_backlog(&self, offset: u64) -> bool {
        offset >= self.backlog_start && offset <= self.offset
    }

    /// The primary's answer to `PSYNC replid offset` from `replica`.
    fn answer_psync(
        &mut self,
        replica: NodeIdx,
        replid: Option<u64>,
        offset: u64,
        store: &Store,
        now: Duration,
    ) -> ReplMsg {
        let me = self.replid.expect("a primary has a history");
        let same = replid == Some(me);
        let continues_previous = self
            .previous
            .is_some_and(|(old, upto)| replid == Some(old) && offset <= upto);
        self.replicas.insert(
            replica,
            Link {
                acked: 0,
                heard: now,
            },
        );
        if (same || continues_previous) && self.in_backlog(offset) {
            let from = (offset - self.backlog_start) as usize;
            ReplMsg::Continue {
                replid: me,
                start: offset,
                ops: self.backlog[from..].to_vec(),
            }
        } else {
            ReplMsg::FullResync {
                replid: me,
                offset: self.offset,
                snapshot: store.clone(),
            }
        }
    }

    /// Applies the stream from offset `start` on; keeps batches that arrive early.
    fn apply_stream(&mut self, store: &mut Store, start: u64, ops: Vec<Effect>) {
        if start > self.offset {
            self.early.insert(start, ops);
            return;
        }
        let skip = (self.offset - start) as usize;
        for op in ops.iter().skip(skip) {
            store.apply(op);
        }
        if skip < ops.len() {
            self.append(&ops[skip..]);
        }
        while let Some(entry) = self.early.first_entry() {
            if *entry.key() > self.offset {
                break;
            }
            let (start, ops) = entry.remove_entry();
            self.apply_stream(store, start, ops);
        }
    }

    /// How many replicas acknowledged `target`.
    fn acked(&self, target: u64) -> i64 {
        self.replicas.values().filter(|l| l.acked >= target).count() as i64
    }

    /// Adds a primary's own expiries (`DEL`s) to the stream.
    pub fn expired(&mut self, ops: &[Effect]) {
        self.append(ops);
    }

    /// Adds `client`'s write to the stream and remembers its offset (what the client's
    /// `WAIT` waits for).
    pub fn wrote(&mut self, client: NodeIdx, ops: &[Effect]) {
        self.append(ops);
        self.last_write.insert(client, self.offset);
    }

    /// `WAIT replicas` from `client`: the count now if it is enough, or the key of a new
    /// waiter.
    fn wait(&mut self, client: NodeIdx, id: u64, replicas: u32) -> Result<i64, u64> {
        let target = self.last_write.get(&client).copied().unwrap_or(0);
        let count = self.acked(target);
        if count >= replicas as i64 {
            return Ok(count);
        }
        let key = self.next_waiter;
        self.next_waiter += 1;
        self.waiters.insert(
            key,
            Waiter {
                client,
                id,
                target,
                replicas,
            },
        );
        Err(key)
    }

    /// The waiters whose replicas have now acknowledged: `(client, request id, count)`.
    fn satisfied_waiters(&mut self) -> Vec<(NodeIdx, u64, i64)> {
        let ready: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| self.acked(w.target) >= w.replicas as i64)
            .map(|(k, _)| *k)
            .collect();
        ready
            .into_iter()
            .map(|k| {
                let w = self.waiters.remove(&k).expect("listed above");
                (w.client, w.id, self.acked(w.target))
            })
            .collect()
    }

    /// What the ping period sends: heartbeats from a primary, acknowledgements or a new
    /// `PSYNC` from a replica.
    fn tick(&mut self, now: Duration, config: &ReplicationConfig) -> Vec<(NodeIdx, ReplMsg)> {
        let timeout = Duration::from_millis(config.timeout_ms);
        match self.role {
            ReplRole::Primary => {
                self.replicas
                    .retain(|_, l| now.saturating_sub(l.heard) <= timeout);
                let replid = self.replid.expect("a primary has a history");
                self.replicas
                    .keys()
                    .map(|r| {
                        let beat = ReplMsg::Stream {
                            replid,
                            start: self.offset,
                            ops: vec![],
                        };
                        (*r, beat)
                    })
                    .collect()
            }
            ReplRole::Replica { primary } => {
                let patience = Duration::from_millis(2 * config.ping_interval_ms);
                let stuck = self
                    .behind_since
                    .is_some_and(|since| now.saturating_sub(since) >= patience);
                if now.saturating_sub(self.heard) > timeout {
                    self.synced = false;
                }
                let msg = match self.replid {
                    Some(replid) if self.synced && !stuck => ReplMsg::Ack {
                        replid,
                        offset: self.offset,
                    },
                    replid => {
                        self.behind_since = None;
                        ReplMsg::Psync {
                            replid,
                            offset: self.offset,
                        }
                    }
                };
                vec![(primary, msg)]
            }
        }
    }
}

/// Redis 7.0's answer to `WAIT` on a replica.
const ERR_WAIT_ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also \
    note that since Redis 4.0 if a replica is configured to be writable (which is not the \
    default) writes to replicas are just local and are not propagated.";

/// Handles `INFO`, `REPLICAOF` and `WAIT` on a replicated node; `None` if the reply comes
/// later (a blocked `WAIT`).
pub(super) fn command(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    replicated: &Replicated,
    client: NodeIdx,
    id: u64,
    cmd: &Cmd,
) -> Option<Reply> {
    let mut n = node.borrow_mut();
    let repl = n.repl.as_mut().expect("a replicated node");
    match cmd {
        Cmd::Info => Some(Reply::Info(repl.info())),
        Cmd::ReplicaOf { primary: None } => {
            if repl.promote() {
                rewrite_config(ctx, ReplRole::Primary);
                let detail = format!("promoted to primary at offset {}", repl.offset);
                ctx.event("promoted", None, detail);
            }
            Some(Reply::Ok)
        }
        Cmd::ReplicaOf {
            primary: Some(primary),
        } => {
            let was_primary = repl.role == ReplRole::Primary;
            if repl.follow(*primary, ctx.mono_now()) {
                rewrite_config(ctx, repl.role);
                let psync = ReplMsg::Psync {
                    replid: repl.replid,
                    offset: repl.offset,
                };
                replicated.net.send(ctx.idx(), *primary, psync);
                let detail = format!("now a replica of {}", ctx.world().name(*primary));
                if was_primary {
                    ctx.event("demoted", None, detail);
                } else {
                    ctx.note(detail);
                }
            }
            Some(Reply::Ok)
        }
        Cmd::Wait {
            replicas,
            timeout_ms,
        } => {
            if repl.role != ReplRole::Primary {
                return Some(Reply::Error(ERR_WAIT_ON_REPLICA.into()));
            }
            let timeout = match wait_timeout(*timeout_ms) {
                Ok(timeout) => timeout,
                Err(error) => return Some(error),
            };
            match (repl.wait(client, id, *replicas), timeout) {
                (Ok(count), _) => Some(Reply::Int(count)),
                // No timeout: blocks until enough replicas acknowledge, however long.
                (Err(_), None) => None,
                (Err(key), Some(timeout)) => {
                    let (ctx2, node2, caller2) = (ctx.clone(), node.clone(), caller.clone());
                    ctx.spawn(async move {
                        ctx2.sleep_local(timeout).await;
                        let mut n = node2.borrow_mut();
                        let repl = n.repl.as_mut().expect("a replicated node");
                        if let Some(w) = repl.waiters.remove(&key) {
                            caller2.reply(w.client, w.id, Reply::Int(repl.acked(w.target)));
                        }
                    });
                    None
                }
            }
        }
        _ => unreachable!("data commands go to the store"),
    }
}

/// Sends a primary's new effects (at offsets `start + 1 ..`) to each of its replicas after
/// that link's lag.
pub(super) fn feed(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    replicated: &Replicated,
    start: u64,
    ops: Vec<Effect>,
) {
    let (replid, replicas): (u64, Vec<NodeIdx>) = {
        let n = node.borrow();
        let repl = n.repl.as_ref().expect("a replicated node");
        let Some(replid) = repl.replid else { return };
        (replid, repl.replicas.keys().copied().collect())
    };
    let config = &replicated.config;
    for replica in replicas {
        let msg = ReplMsg::Stream {
            replid,
            start,
            ops: ops.clone(),
        };
        let lag_ms = madsim::rand::thread_rng().gen_range(config.lag_ms_min..=config.lag_ms_max);
        if lag_ms == 0 {
            replicated.net.send(ctx.idx(), replica, msg);
            continue;
        }
        let (ctx2, net) = (ctx.clone(), replicated.net.clone());
        ctx.spawn(async move {
            ctx2.sleep_local(Duration::from_millis(lag_ms)).await;
            net.send(ctx2.idx(), replica, msg);
        });
    }
}

/// Starts a replicated node's replication tasks: the stream's inbox and the ping period. A
/// replica asks for the stream at once.
pub(super) fn spawn(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    replicated: &Replicated,
) {
    let inbox = replicated.net.bind(ctx);
    if let Some(repl) = &node.borrow().repl {
        if let ReplRole::Replica { primary } = repl.role {
            let psync = ReplMsg::Psync {
                replid: repl.replid,
                offset: repl.offset,
            };
            replicated.net.send(ctx.idx(), primary, psync);
        }
    }
    let (ctx2, node2, caller2, r2) = (
        ctx.clone(),
        node.clone(),
        caller.clone(),
        replicated.clone(),
    );
    ctx.spawn(async move {
        let mut inbox = inbox;
        while let Some(envelope) = inbox.next().await {
            // A replica's copy of the lock changes with its primary's stream: in the history
            // too, so a timeline shows what each replica would hand over at a failover.
            let before = super::server::lock_snapshot(&node2.borrow().store);
            receive(&ctx2, &node2, &caller2, &r2, envelope.from, envelope.msg);
            super::server::record_lock_changes(&ctx2, &before, &node2.borrow().store);
        }
    });
    let (ctx3, node3, r3) = (ctx.clone(), node.clone(), replicated.clone());
    ctx.spawn(async move {
        let period = Duration::from_millis(r3.config.ping_interval_ms);
        loop {
            ctx3.sleep_local(period).await;
            let msgs = {
                let mut n = node3.borrow_mut();
                let repl = n.repl.as_mut().expect("a replicated node");
                repl.tick(ctx3.mono_now(), &r3.config)
            };
            for (to, msg) in msgs {
                r3.net.send(ctx3.idx(), to, msg);
            }
        }
    });
}

fn receive(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    replicated: &Replicated,
    from: NodeIdx,
    msg: ReplMsg,
) {
    let now = ctx.mono_now();
    let mut n = node.borrow_mut();
    let Node { store, repl } = &mut *n;
    let repl = repl.as_mut().expect("a replicated node");
    let from_my_primary = repl.role == ReplRole::Replica { primary: from };
    let reply = match msg {
        ReplMsg::Psync { replid, offset } if repl.role == ReplRole::Primary => {
            Some(repl.answer_psync(from, replid, offset, store, now))
        }
        ReplMsg::Ack { replid, offset } if repl.role == ReplRole::Primary => {
            if repl.replid == Some(replid) {
                let link = repl.replicas.entry(from).or_insert(Link {
                    acked: 0,
                    heard: now,
                });
                link.acked = link.acked.max(offset);
                link.heard = now;
            }
            for (client, id, count) in repl.satisfied_waiters() {
                caller.reply(client, id, Reply::Int(count));
            }
            None
        }
        ReplMsg::FullResync {
            replid,
            offset,
            snapshot,
        } if from_my_primary => {
            let dropped = store.len();
            *store = snapshot;
            repl.replid = Some(replid);
            repl.offset = offset;
            repl.backlog_start = offset;
            repl.backlog.clear();
            repl.previous = None;
            repl.early.clear();
            repl.synced = true;
            repl.heard = now;
            repl.behind_since = None;
            if dropped + store.len() > 0 {
                let name = ctx.world().name(from);
                let loaded = store.len();
                let detail = format!(
                    "full resync from {name}: data set replaced ({dropped} keys dropped, \
                     {loaded} loaded)"
                );
                ctx.note(detail);
            }
            Some(ack(repl))
        }
        ReplMsg::Continue { replid, start, ops } if from_my_primary && start == repl.offset => {
            repl.replid = Some(replid);
            repl.synced = true;
            repl.heard = now;
            repl.behind_since = None;
            repl.early.clear();
            repl.apply_stream(store, start, ops);
            Some(ack(repl))
        }
        ReplMsg::Stream { replid, start, ops }
            if from_my_primary && repl.synced && repl.replid == Some(replid) =>
        {
            repl.heard = now;
            if ops.is_empty() {
                // A heartbeat: behind if the primary is further than what we applied.
                if start <= repl.offset {
                    repl.behind_since = None;
                } else if repl.behind_since.is_none() {
                    repl.behind_since = Some(now);
                }
                None
            } else {
                repl.apply_stream(store, start, ops);
                Some(ack(repl))
            }
        }
        _ => None,
    };
    drop(n);
    if let Some(msg) = reply {
        replicated.net.send(ctx.idx(), from, msg);
    }
}

fn ack(repl: &Replication) -> ReplMsg {
    ReplMsg::Ack {
        replid: repl.replid.expect("synced"),
        offset: repl.offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::store::{Entry, Value};

    fn put(key: &str, value: &str) -> Effect {
        Effect::Put {
            key: key.into(),
            entry: Entry {
                value: Value::Str(value.into()),
                expire_at_ms: None,
            },
        }
    }

    /// Replication ids are random: the tests run inside a seeded runtime.
    fn sim<T>(f: impl FnOnce() -> T) -> T {
        madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default())
            .block_on(async move { f() })
    }

    fn sync(primary: &mut Replication, store: &Store, replica: &mut Replication) -> Store {
        let now = Duration::ZERO;
        let msg = primary.answer_psync(9, replica.replid, replica.offset, store, now);
        match msg {
            ReplMsg::FullResync {
                replid,
                offset,
                snapshot,
            } => {
                replica.replid = Some(replid);
                replica.offset = offset;
                replica.backlog_start = offset;
                snapshot
            }
            other => panic!("expected a full resync, got {other:?}"),
        }
    }

    #[test]
    fn stream_applies_in_offset_order() {
        sim(|| {
            let mut primary = Replication::new(ReplRole::Primary, Duration::ZERO);
            let mut replica = Replication::new(ReplRole::Replica { primary: 0 }, Duration::ZERO);
            let mut store = sync(&mut primary, &Store::new(), &mut replica);
            primary.wrote(1, &[put("a", "1")]);
            primary.wrote(1, &[put("b", "2")]);
            // The second batch overtakes the first on the network.
            replica.apply_stream(&mut store, 1, vec![put("b", "2")]);
            assert_eq!(replica.offset, 0);
            replica.apply_stream(&mut store, 0, vec![put("a", "1")]);
            assert_eq!(replica.offset, 2);
            assert_eq!(store.len(), 2);
            // A duplicate changes nothing.
            replica.apply_stream(&mut store, 0, vec![put("a", "1")]);
            assert_eq!(replica.offset, 2);
        });
    }

    #[test]
    fn promoted_replica_continues_others_but_not_a_diverged_primary() {
        sim(|| {
            let now = Duration::ZERO;
            let mut old = Replication::new(ReplRole::Primary, now);
            let mut a = Replication::new(ReplRole::Replica { primary: 0 }, now);
            let mut b = Replication::new(ReplRole::Replica { primary: 0 }, now);
            let mut old_store = Store::new();
            let mut a_store = sync(&mut old, &old_store, &mut a);
            let _ = sync(&mut old, &old_store, &mut b);
            old.wrote(5, &[put("x", "1")]);
            a.apply_stream(&mut a_store, 0, vec![put("x", "1")]);
            // The old primary takes a write nobody receives, then a is promoted.
            old.wrote(5, &[put("lock", "c1")]);
            old_store.apply(&put("lock", "c1"));
            assert!(a.promote());
            // b is behind a on the same history: it continues.
            let answer = a.answer_psync(2, b.replid, b.offset, &a_store, now);
            assert!(
                matches!(&answer, ReplMsg::Continue { start: 0, ops, .. } if ops.len() == 1),
                "{answer:?}"
            );
            // The old primary is ahead of a on that history: full resync, its write is lost.
            old.follow(1, now);
            let answer = a.answer_psync(0, old.replid, old.offset, &a_store, now);
            let ReplMsg::FullResync { snapshot, .. } = answer else {
                panic!("expected a full resync, got {answer:?}");
            };
            assert!(snapshot.entry("lock").is_none());
        });
    }

    #[test]
    fn wait_counts_acknowledgements_of_the_clients_last_write() {
        sim(|| {
            let now = Duration::ZERO;
            let mut primary = Replication::new(ReplRole::Primary, now);
            for r in [1, 2] {
                primary.answer_psync(r, None, 0, &Store::new(), now);
            }
            primary.wrote(7, &[put("lock", "c7")]);
            assert_eq!(primary.wait(7, 42, 1), Err(0));
            primary.replicas.get_mut(&2).unwrap().acked = 1;
            assert_eq!(primary.satisfied_waiters(), vec![(7, 42, 1)]);
            assert_eq!(primary.wait(7, 43, 1), Ok(1));
            assert_eq!(primary.wait(7, 44, 2), Err(1));
        });
    }
}
