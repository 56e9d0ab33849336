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
//!   link silent for `timeout_ms`, or whose primary's process is gone (its connection reset,
//!   [`locksim_sim::World::refuses`]), is down; the replica connects again, sending `PSYNC`,
//!   on its `replicationCron`, once a second (a process's own phase, drawn at its start), so
//!   a primary back from a crash gets its replicas up to a second later; `REPLICAOF` and a
//!   start connect at once. The stream is applied in offset order (TCP delivers in order;
//!   our network may reorder, so a replica holds early batches back and asks again for a
//!   gap that does not fill).
//!
//! Not modelled: transfer time of a full resync, the backlog's size limit (here it keeps the
//! whole run), chained replicas, `min-replicas-to-write`.

use super::store::{Effect, ReplInfo, Store};
use locksim_sim::{Net, NodeIdx};
use rand::Rng;
use std::collections::BTreeMap;
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
    /// disk (`link::CONF`; `REPLICAOF` + `CONFIG REWRITE`), so a restarted node comes back in the
    /// role it last had.
    pub role: ReplRole,
}

/// What a node does after a replication message: send `reply` back to its sender, answer
/// the clients blocked in `WAIT` that are now satisfied, and note a full resync.
#[derive(Debug, Default)]
pub struct Received {
    /// The answer to the sender.
    pub reply: Option<ReplMsg>,
    /// `(client, request id, count)` for each `WAIT` that is now answered.
    pub waiters: Vec<(NodeIdx, u64, i64)>,
    /// After a full resync that changed something: `(keys dropped, keys loaded)`.
    pub resynced: Option<(usize, usize)>,
    /// Whether a replica took in its primary's stream or a full resync: what its AOF
    /// appends (a replica feeds its AOF with what it applies).
    pub applied: bool,
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
    /// This process's run id (`INFO`'s `run_id`), drawn at its start.
    run_id: u64,
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
    /// When the link to the primary last went down (Redis' `repl_down_since`): `None` while
    /// it is up, before it first came up, and on a primary.
    down_since: Option<Duration>,
    heard: Duration,
    early: BTreeMap<u64, Vec<Effect>>,
    behind_since: Option<Duration>,
    /// Under `appendfsync always`, the offset the node's AOF has synced, which its
    /// acknowledgements never pass: Redis writes them after `beforeSleep`'s sync. `None`:
    /// they report the offset applied (no AOF, or `everysec`).
    aof_synced: Option<u64>,
}

fn fresh_replid() -> u64 {
    madsim::rand::thread_rng().gen()
}

impl Replication {
    /// A node starting (or restarting) in `role` at local time `now`, with an empty history.
    pub fn new(role: ReplRole, now: Duration) -> Self {
        Replication {
            role,
            run_id: madsim::rand::thread_rng().gen(),
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
            down_since: None,
            heard: now,
            early: BTreeMap::new(),
            behind_since: None,
            aof_synced: None,
        }
    }

    /// The AOF has synced the stream up to `offset` (under `appendfsync always`): from the
    /// first call on, acknowledgements report no more than that.
    pub fn synced_to(&mut self, offset: u64) {
        self.aof_synced = Some(offset);
    }

    /// An acknowledgement made again after the AOF synced what it answers (`ack` is made
    /// with the reply, before the sync): as it stands now, if the link is still up.
    pub fn ack_after_sync(&self, ack: ReplMsg) -> Option<ReplMsg> {
        match ack {
            ReplMsg::Ack { .. } => self.synced.then(|| self.ack()),
            other => Some(other),
        }
    }

    /// The offset an acknowledgement reports: what is applied, or under `appendfsync
    /// always`, what of it the AOF has synced.
    fn ack_offset(&self) -> u64 {
        self.aof_synced.map_or(self.offset, |s| s.min(self.offset))
    }

    /// The node's role.
    pub fn role(&self) -> ReplRole {
        self.role
    }

    /// What `INFO replication` says at local time `now`.
    pub fn info(&self, now: Duration) -> ReplInfo {
        match self.role {
            ReplRole::Primary => ReplInfo {
                following: None,
                link_up: true,
                link_down_s: None,
                offset: self.offset,
                run_id: Some(self.run_id),
            },
            ReplRole::Replica { primary } => ReplInfo {
                following: Some(primary),
                link_up: self.synced,
                link_down_s: (self.down_since)
                    .filter(|_| !self.synced)
                    .map(|since| now.saturating_sub(since).as_secs()),
                offset: self.offset,
                run_id: Some(self.run_id),
            },
        }
    }

    /// The backlog holds exactly the offsets after `backlog_start` up to `offset`.
    fn assert_backlog(&self) {
        assert_eq!(
            self.backlog_start + self.backlog.len() as u64,
            self.offset,
            "the backlog ends at the offset"
        );
    }

    fn append(&mut self, ops: &[Effect]) {
        let before = self.offset;
        self.backlog.extend_from_slice(ops);
        self.offset += ops.len() as u64;
        assert!(
            self.offset >= before,
            "replication offsets only move forward"
        );
        self.assert_backlog();
    }

    /// A primary's history and its replicas: where [`ReplMsg::Stream`]s go.
    pub fn stream_targets(&self) -> Option<(u64, Vec<NodeIdx>)> {
        let replid = self.replid?;
        Some((replid, self.replicas.keys().copied().collect()))
    }

    /// The offset this node has applied (or, as a primary, written).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// `PSYNC` with what this node has: the message a replica sends its primary.
    pub fn psync(&self) -> ReplMsg {
        assert!(
            matches!(self.role, ReplRole::Replica { .. }),
            "only a replica asks for the stream"
        );
        ReplMsg::Psync {
            replid: self.replid,
            offset: self.offset,
        }
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
        self.down_since = None;
        self.early.clear();
        self.behind_since = None;
        assert!(
            self.replid != self.previous.map(|(r, _)| r),
            "a new history"
        );
        self.assert_backlog();
        true
    }

    /// `REPLICAOF primary`: follow it (keeping the data set until the primary sends its
    /// own). False if already following it.
    pub fn follow(&mut self, primary: NodeIdx, now: Duration) -> bool {
        if self.role == (ReplRole::Replica { primary }) {
            return false;
        }
        // A primary has no link to lose (Redis' `repl_down_since` is 0 on one).
        if self.role != ReplRole::Primary {
            self.lose_link(now);
        }
        self.role = ReplRole::Replica { primary };
        self.replicas.clear();
        // Clients blocked in WAIT on this node stay blocked until their timeout, as in Redis.
        self.synced = false;
        self.heard = now;
        self.early.clear();
        self.behind_since = None;
        true
    }

    /// The link to the primary is gone (timed out, or dropped for another primary): stamped
    /// if it was up, as Redis' `replicationHandleMasterDisconnection` stamps
    /// `repl_down_since`.
    fn lose_link(&mut self, now: Duration) {
        if self.synced {
            self.down_since = Some(now);
        }
        self.synced = false;
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
        assert_eq!(self.role, ReplRole::Primary, "only a primary answers PSYNC");
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
        assert!(
            matches!(self.role, ReplRole::Replica { .. }),
            "only a replica applies a stream"
        );
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

    /// The waiter `key` whose `WAIT` timed out, answered with the count now: `(client,
    /// request id, count)`; `None` if it was answered already.
    pub fn time_out_waiter(&mut self, key: u64) -> Option<(NodeIdx, u64, i64)> {
        let w = self.waiters.remove(&key)?;
        Some((w.client, w.id, self.acked(w.target)))
    }

    /// How many replicas acknowledged `target`.
    fn acked(&self, target: u64) -> i64 {
        self.replicas.values().filter(|l| l.acked >= target).count() as i64
    }

    /// Adds a primary's own expiries (`DEL`s) to the stream.
    pub fn expired(&mut self, ops: &[Effect]) {
        assert_eq!(self.role, ReplRole::Primary, "replicas never expire keys");
        self.append(ops);
    }

    /// Adds `client`'s write to the stream and remembers its offset (what the client's
    /// `WAIT` waits for).
    pub fn wrote(&mut self, client: NodeIdx, ops: &[Effect]) {
        assert_eq!(self.role, ReplRole::Primary, "replicas refuse writes");
        assert!(
            !ops.is_empty(),
            "only a write that changed something is streamed"
        );
        self.append(ops);
        self.last_write.insert(client, self.offset);
    }

    /// `WAIT replicas` from `client`: the count now if it is enough, or the key of a new
    /// waiter.
    pub fn wait(&mut self, client: NodeIdx, id: u64, replicas: u32) -> Result<i64, u64> {
        assert_eq!(
            self.role,
            ReplRole::Primary,
            "WAIT on a replica is an error reply"
        );
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

    /// What the ping period sends: heartbeats from a primary; from a replica,
    /// acknowledgements, or `PSYNC` again for a gap in a stream that stalled. A replica whose
    /// primary's process is gone (`primary_gone`: its connection reset) or whose link has been
    /// silent for the timeout loses the link, and connects again only on its
    /// [`Replication::reconnect`].
    pub fn tick(
        &mut self,
        now: Duration,
        config: &ReplicationConfig,
        primary_gone: bool,
    ) -> Vec<(NodeIdx, ReplMsg)> {
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
                if primary_gone || now.saturating_sub(self.heard) > timeout {
                    self.lose_link(now);
                }
                if !self.synced {
                    return vec![];
                }
                let msg = match self.replid {
                    Some(replid) if !stuck => ReplMsg::Ack {
                        replid,
                        offset: self.ack_offset(),
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

    /// `replicationCron`'s reconnection, once a second: a replica whose link is down asks its
    /// primary for the stream again (`PSYNC`).
    pub fn reconnect(&mut self) -> Option<(NodeIdx, ReplMsg)> {
        let ReplRole::Replica { primary } = self.role else {
            return None;
        };
        if self.synced {
            return None;
        }
        self.behind_since = None;
        Some((primary, self.psync()))
    }

    /// A replication message from `from`, at local time `now`: applied to this node's state
    /// and data set; what to send back is in the result (IO stays with the caller).
    pub fn receive(
        &mut self,
        store: &mut Store,
        from: NodeIdx,
        msg: ReplMsg,
        now: Duration,
    ) -> Received {
        let from_my_primary = self.role == ReplRole::Replica { primary: from };
        let primary = self.role == ReplRole::Primary;
        let offset_before = self.offset;
        // A full resync may move a replica back: to a new primary that is behind it.
        let resync = from_my_primary && matches!(msg, ReplMsg::FullResync { .. });
        let mut received = match msg {
            ReplMsg::Psync { replid, offset } if primary => Received {
                reply: Some(self.answer_psync(from, replid, offset, store, now)),
                ..Received::default()
            },
            ReplMsg::Ack { replid, offset } if primary => self.on_ack(from, replid, offset, now),
            ReplMsg::FullResync {
                replid,
                offset,
                snapshot,
            } if from_my_primary => self.on_full_resync(store, replid, offset, snapshot, now),
            ReplMsg::Continue { replid, start, ops } if from_my_primary && start == self.offset => {
                self.on_continue(store, replid, start, ops, now)
            }
            ReplMsg::Stream { replid, start, ops }
                if from_my_primary && self.synced && self.replid == Some(replid) =>
            {
                self.on_stream(store, start, ops, now)
            }
            _ => Received::default(),
        };
        received.applied = !primary && (resync || self.offset != offset_before);
        if !resync {
            assert!(
                self.offset >= offset_before,
                "replication offsets only move forward"
            );
        }
        self.assert_backlog();
        received
    }

    /// `REPLCONF ACK`: the replica's progress, and the `WAIT`s it satisfies.
    fn on_ack(&mut self, from: NodeIdx, replid: u64, offset: u64, now: Duration) -> Received {
        if self.replid == Some(replid) {
            let link = self.replicas.entry(from).or_insert(Link {
                acked: 0,
                heard: now,
            });
            link.acked = link.acked.max(offset);
            link.heard = now;
        }
        Received {
            waiters: self.satisfied_waiters(),
            ..Received::default()
        }
    }

    /// The primary's whole data set replaces the replica's.
    fn on_full_resync(
        &mut self,
        store: &mut Store,
        replid: u64,
        offset: u64,
        snapshot: Store,
        now: Duration,
    ) -> Received {
        let dropped = store.len();
        *store = snapshot;
        self.replid = Some(replid);
        self.offset = offset;
        if let Some(synced) = &mut self.aof_synced {
            // A new history, none of it synced yet (the caller syncs the new data set).
            *synced = 0;
        }
        self.backlog_start = offset;
        self.backlog.clear();
        self.previous = None;
        self.early.clear();
        self.synced = true;
        self.down_since = None;
        self.heard = now;
        self.behind_since = None;
        let loaded = store.len();
        Received {
            reply: Some(self.ack()),
            resynced: (dropped + loaded > 0).then_some((dropped, loaded)),
            ..Received::default()
        }
    }

    /// `+CONTINUE`: adopt the primary's history and apply what was missing.
    fn on_continue(
        &mut self,
        store: &mut Store,
        replid: u64,
        start: u64,
        ops: Vec<Effect>,
        now: Duration,
    ) -> Received {
        self.replid = Some(replid);
        self.synced = true;
        self.down_since = None;
        self.heard = now;
        self.behind_since = None;
        self.early.clear();
        self.apply_stream(store, start, ops);
        Received {
            reply: Some(self.ack()),
            ..Received::default()
        }
    }

    /// The stream, or a heartbeat (no ops: then `start` is the primary's offset).
    fn on_stream(
        &mut self,
        store: &mut Store,
        start: u64,
        ops: Vec<Effect>,
        now: Duration,
    ) -> Received {
        self.heard = now;
        if !ops.is_empty() {
            self.apply_stream(store, start, ops);
            return Received {
                reply: Some(self.ack()),
                ..Received::default()
            };
        }
        // A heartbeat: behind if the primary is further than what we applied.
        if start <= self.offset {
            self.behind_since = None;
        } else if self.behind_since.is_none() {
            self.behind_since = Some(now);
        }
        Received::default()
    }

    fn ack(&self) -> ReplMsg {
        assert!(
            self.synced,
            "a replica acknowledges only a stream it follows"
        );
        ReplMsg::Ack {
            replid: self.replid.expect("synced"),
            offset: self.ack_offset(),
        }
    }
}
