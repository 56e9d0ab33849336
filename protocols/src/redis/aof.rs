//! The append-only file: when each `appendfsync` policy makes a change durable, as Redis 7.0's
//! `flushAppendOnlyFile` (`src/aof.c`) does.
//!
//! Redis appends only what a command changed (what it propagates: a `SET NX` that found the
//! key, or a compare-and-delete of another client's key, appends nothing), and the expiry
//! cycle's `DEL`s. Each event-loop turn (`beforeSleep`, at least every 100 ms with the default
//! `hz 10`) writes what was appended to the file, then:
//!
//! - `always`: syncs it before any reply of that turn goes out.
//! - `everysec`: starts a background sync if the **wall-clock second** (`server.unixtime`) is
//!   past the last sync's (`aof_last_fsync`, set to the start time at boot), and none is in
//!   progress; a turn with nothing new still syncs what an earlier turn wrote and left
//!   unsynced (redis/redis#6053, for the race #5985 found). Nothing changed, nothing synced:
//!   an idle server does not sync. The last sync's second moves on even when a sync in
//!   progress made this one wait (redis/redis#8612 discusses it).
//!
//! Because the comparison is of wall-clock seconds, a server clock stepped *back* by N seconds
//! syncs nothing for N seconds: a crash then loses N seconds of writes, not one
//! (`scenarios/catalog/redis-single-everysec-clock-back.toml`, met live on Redis 7.0). Later
//! Redis counts milliseconds instead (redis/redis#13041), still on the wall clock.
//!
//! Simplified: the file is kept as an image of the data set (what a restart rebuilds), put
//! when it is synced; a write postponed behind a slow sync (up to 2 s) is not drawn, as the
//! page cache it would reach is lost on a crash anyway. A replica appends what it applies
//! of its primary's stream, as Redis propagates its primary's commands to its own AOF, and
//! after a full resync puts the new data set (Redis rewrites its AOF then,
//! `restartAOFAfterSYNC`; the model syncs it as one change, not after a rewrite's time), so
//! a replica that crashes comes back with what it had synced. Under `always` a replica
//! answers its primary after the sync, and every acknowledgement it sends, the periodic one
//! too, says no more than its AOF has synced, as Redis's `beforeSleep` syncs the AOF before
//! it writes replies (`Replication::synced_to`; live on Redis 7.0,
//! `live/scenarios/redis-replicated-replica-fsync-stall-wait.toml`). Simplified: the rest
//! of a node's work is not held behind an `always` sync, as Redis's blocked event loop
//! would hold it (a primary's other clients, a replica's timers).

use super::node::Node;
use super::server::Persistence;
use locksim_sim::NodeCtx;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The file on a Redis node's disk that holds its data set (the AOF, kept as an image of the
/// data set it rebuilds: what a restart loads).
pub const AOF: &str = "appendonly.aof";

/// How often an idle Redis event loop turns: `serverCron` at the default `hz 10`, in ms.
pub const EVENT_LOOP_TURN_MS: u64 = 100;

/// `appendfsync everysec`'s state: whether something written is not yet synced, the
/// wall-clock second of the last sync started, and whether one is in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Everysec {
    unsynced: bool,
    last_fsync_s: i64,
    in_progress: bool,
}

impl Everysec {
    /// A server started at `wall_ms` (Redis sets `aof_last_fsync` to its start time).
    pub fn started(wall_ms: i64) -> Self {
        Everysec {
            last_fsync_s: wall_ms.div_euclid(1000),
            ..Everysec::default()
        }
    }
}

/// A change was appended (a command's effects, the expiry cycle's deletions). `always`: on
/// disk before the reply (the caller awaits the sync, as Redis blocks its event loop);
/// `everysec`: written, and synced in the background if a new second has come.
pub async fn appended(ctx: &NodeCtx, node: &Rc<RefCell<Node>>, persistence: Persistence) {
    match persistence {
        Persistence::None => {}
        Persistence::Always => {
            let disk = ctx.disk();
            disk.put(AOF, node.borrow().store.clone());
            disk.fsync().await;
        }
        Persistence::Everysec => {
            node.borrow_mut().everysec.unsynced = true;
            turn(ctx, node);
        }
    }
}

/// One event-loop turn under `everysec`: a background sync of what is written and unsynced,
/// if the wall-clock second is past the last sync's and none is in progress.
fn turn(ctx: &NodeCtx, node: &Rc<RefCell<Node>>) {
    let now_s = ctx.wall_ms().div_euclid(1000);
    let mut n = node.borrow_mut();
    let state = n.everysec;
    if !state.unsynced || now_s <= state.last_fsync_s {
        return;
    }
    n.everysec.last_fsync_s = now_s;
    if state.in_progress {
        return; // Redis moves the second on all the same (redis/redis#8612).
    }
    n.everysec.unsynced = false;
    n.everysec.in_progress = true;
    let disk = ctx.disk();
    disk.put(AOF, n.store.clone());
    let (synced, node) = (disk.fsync(), node.clone());
    ctx.spawn(async move {
        synced.await;
        node.borrow_mut().everysec.in_progress = false;
    });
}

/// `everysec`: the turns of an idle event loop, which sync what earlier turns left unsynced.
pub fn spawn_everysec_turns(ctx: &NodeCtx, node: &Rc<RefCell<Node>>) {
    let (ctx2, node) = (ctx.clone(), node.clone());
    ctx.spawn(async move {
        loop {
            ctx2.sleep_local(Duration::from_millis(EVENT_LOOP_TURN_MS))
                .await;
            turn(&ctx2, &node);
        }
    });
}
