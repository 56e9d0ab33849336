//! A replicated Redis node's side of replication, around the pure [`Replication`] state
//! machine: its tasks (the stream's inbox, the ping period), feeding the replicas after each
//! write, and the server commands `INFO`, `REPLICAOF` and `WAIT`.

use super::aof;
use super::node::{lock_snapshot, record_lock_changes, Node};
use super::replication::{ReplMsg, ReplRole, Replicated, Replication};
use super::server::Persistence;
use super::store::{wait_timeout, Cmd, Effect, Reply};
use futures::StreamExt;
use locksim_sim::rpc::Caller;
use locksim_sim::{NodeCtx, NodeIdx};
use rand::Rng;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The config file on a Redis node's disk: its replication role.
pub const CONF: &str = "redis.conf";

/// The role a node starts in: as its config file says, or as it was deployed.
pub fn configured_role(ctx: &NodeCtx, replicated: &Replicated) -> ReplRole {
    ctx.disk().last(CONF).unwrap_or(replicated.role)
}

/// `CONFIG REWRITE`: the new role goes to the config file, synced in the background.
fn rewrite_config(ctx: &NodeCtx, role: ReplRole) {
    let disk = ctx.disk();
    disk.put(CONF, role);
    drop(disk.fsync());
}

/// Redis 7.0's answer to `WAIT` on a replica.
const ERR_WAIT_ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also \
    note that since Redis 4.0 if a replica is configured to be writable (which is not the \
    default) writes to replicas are just local and are not propagated.";

/// Handles `INFO`, `REPLICAOF` and `WAIT` on a replicated node; `None` if the reply comes
/// later (a blocked `WAIT`).
pub fn command(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    replicated: &Replicated,
    (client, id): (NodeIdx, u64),
    cmd: &Cmd,
) -> Option<Reply> {
    let mut n = node.borrow_mut();
    let repl = n.replication_mut();
    match cmd {
        Cmd::Info => Some(Reply::Info(repl.info(ctx.mono_now()))),
        Cmd::ReplicaOf { primary: None } => {
            promote(ctx, repl);
            Some(Reply::Ok)
        }
        Cmd::ReplicaOf {
            primary: Some(primary),
        } => {
            follow(ctx, repl, replicated, *primary);
            Some(Reply::Ok)
        }
        Cmd::Wait {
            replicas,
            timeout_ms,
        } => {
            drop(n);
            wait(ctx, node, caller, (client, id), *replicas, *timeout_ms)
        }
        _ => unreachable!("data commands go to the store"),
    }
}

/// `REPLICAOF NO ONE`.
fn promote(ctx: &NodeCtx, repl: &mut Replication) {
    if repl.promote() {
        rewrite_config(ctx, ReplRole::Primary);
        let detail = format!("promoted to primary at offset {}", repl.offset());
        ctx.event("promoted", None, detail);
    }
    assert_eq!(repl.role(), ReplRole::Primary);
}

/// `REPLICAOF primary`: follow it and ask for its stream at once.
fn follow(ctx: &NodeCtx, repl: &mut Replication, replicated: &Replicated, primary: NodeIdx) {
    let was_primary = repl.role() == ReplRole::Primary;
    if repl.follow(primary, ctx.mono_now()) {
        rewrite_config(ctx, repl.role());
        replicated.net.send(ctx.idx(), primary, repl.psync());
        let detail = format!("now a replica of {}", ctx.world().name(primary));
        if was_primary {
            ctx.event("demoted", None, detail);
        } else {
            ctx.note(detail);
        }
    }
    assert_eq!(repl.role(), ReplRole::Replica { primary });
}

/// `WAIT replicas timeout_ms`: the count now, or later (at the timeout, or when enough
/// replicas acknowledged).
fn wait(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    (client, id): (NodeIdx, u64),
    replicas: u32,
    timeout_ms: u64,
) -> Option<Reply> {
    let mut n = node.borrow_mut();
    let repl = n.replication_mut();
    if repl.role() != ReplRole::Primary {
        return Some(Reply::Error(ERR_WAIT_ON_REPLICA.into()));
    }
    let timeout = match wait_timeout(timeout_ms) {
        Ok(timeout) => timeout,
        Err(error) => return Some(error),
    };
    match (repl.wait(client, id, replicas), timeout) {
        (Ok(count), _) => Some(Reply::Int(count)),
        // No timeout: blocks until enough replicas acknowledge, however long.
        (Err(_), None) => None,
        (Err(key), Some(timeout)) => {
            let (ctx2, node2, caller2) = (ctx.clone(), node.clone(), caller.clone());
            ctx.spawn(async move {
                ctx2.sleep_local(timeout).await;
                let mut n = node2.borrow_mut();
                let repl = n.replication_mut();
                if let Some((client, id, count)) = repl.time_out_waiter(key) {
                    caller2.reply(client, id, Reply::Int(count));
                }
            });
            None
        }
    }
}

/// Sends a primary's new effects (at offsets `start + 1 ..`) to each of its replicas after
/// that link's lag.
pub fn feed(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    replicated: &Replicated,
    start: u64,
    ops: Vec<Effect>,
) {
    let Some((replid, replicas)) = node.borrow().replication().stream_targets() else {
        return;
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

/// Starts a replicated node's replication tasks: the stream's inbox, the ping period and
/// `replicationCron`'s reconnection. A replica asks for the stream at once.
pub fn spawn(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    replicated: &Replicated,
    persistence: Persistence,
) {
    let inbox = replicated.net.bind(ctx);
    if let Some(repl) = &node.borrow().repl {
        if let ReplRole::Replica { primary } = repl.role() {
            replicated.net.send(ctx.idx(), primary, repl.psync());
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
            let before = lock_snapshot(&node2.borrow().store);
            let from = envelope.from;
            let (applied, reply) = receive(&ctx2, &node2, &caller2, from, envelope.msg);
            record_lock_changes(&ctx2, &before, &node2.borrow().store);
            let reply = match applied {
                true => append_applied(&ctx2, &node2, persistence, reply).await,
                false => reply,
            };
            if let Some(msg) = reply {
                r2.net.send(ctx2.idx(), from, msg);
            }
        }
    });
    let (ctx3, node3, r3) = (ctx.clone(), node.clone(), replicated.clone());
    ctx.spawn(async move {
        let period = Duration::from_millis(r3.config.ping_interval_ms);
        loop {
            ctx3.sleep_local(period).await;
            let msgs = {
                let mut n = node3.borrow_mut();
                let repl = n.replication_mut();
                let gone = match repl.role() {
                    ReplRole::Replica { primary } => ctx3.world().refuses(ctx3.idx(), primary),
                    ReplRole::Primary => false,
                };
                repl.tick(ctx3.mono_now(), &r3.config, gone)
            };
            for (to, msg) in msgs {
                r3.net.send(ctx3.idx(), to, msg);
            }
        }
    });
    spawn_cron(ctx, node, replicated);
}

/// `replicationCron`'s reconnection: once a second, a replica whose link is down asks its
/// primary for the stream again.
fn spawn_cron(ctx: &NodeCtx, node: &Rc<RefCell<Node>>, replicated: &Replicated) {
    let (ctx, node, replicated) = (ctx.clone(), node.clone(), replicated.clone());
    ctx.clone().spawn(async move {
        // A process started some time before: its cron's phase is anyone's.
        let phase_ms = madsim::rand::thread_rng().gen_range(0..REPL_CRON_MS);
        ctx.sleep_local(Duration::from_millis(phase_ms)).await;
        loop {
            let msg = {
                let mut n = node.borrow_mut();
                n.replication_mut().reconnect()
            };
            if let Some((to, msg)) = msg {
                replicated.net.send(ctx.idx(), to, msg);
            }
            ctx.sleep_local(Duration::from_millis(REPL_CRON_MS)).await;
        }
    });
}

/// The period of Redis's `replicationCron` (`run_with_period(1000)` in `serverCron`), in
/// ms: where a replica whose link is down connects again.
const REPL_CRON_MS: u64 = 1_000;

/// A replica's AOF takes in what it applied (Redis feeds it the stream, and rewrites it after
/// a full resync), synced by the replica's own `appendfsync`; under `always` before its
/// answer goes (`beforeSleep` syncs the AOF before it writes replies), so the answer, an
/// acknowledgement made with the stream, is made again with the offset now on disk.
async fn append_applied(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    persistence: Persistence,
    reply: Option<ReplMsg>,
) -> Option<ReplMsg> {
    let offset = node.borrow().replication().offset();
    aof::appended(ctx, node, persistence).await;
    if persistence != Persistence::Always {
        return reply;
    }
    let mut n = node.borrow_mut();
    let repl = n.replication_mut();
    repl.synced_to(offset);
    reply.and_then(|msg| repl.ack_after_sync(msg))
}

/// One replication message: the state machine decides, this answers the `WAIT`s it
/// satisfies and notes a resync. Whether the node's data set took in the stream or a
/// resync, and the answer to the sender (sent by the caller, after the AOF has it).
fn receive(
    ctx: &NodeCtx,
    node: &Rc<RefCell<Node>>,
    caller: &Caller<Cmd, Reply>,
    from: NodeIdx,
    msg: ReplMsg,
) -> (bool, Option<ReplMsg>) {
    let received = {
        let mut n = node.borrow_mut();
        let Node { store, repl, .. } = &mut *n;
        let repl = repl.as_mut().expect("a replicated node");
        repl.receive(store, from, msg, ctx.mono_now())
    };
    for (client, id, count) in received.waiters {
        caller.reply(client, id, Reply::Int(count));
    }
    if let Some((dropped, loaded)) = received.resynced {
        let name = ctx.world().name(from);
        ctx.note(format!(
            "full resync from {name}: data set replaced ({dropped} keys dropped, {loaded} \
             loaded)"
        ));
    }
    (received.applied, received.reply)
}
