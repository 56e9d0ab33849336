//! The replicated store: keys with revisions, leases and the leader's lessor, watches on a
//! key's deletion; a [`Service`] applied from the Raft log.

use super::params::{Lessor, Params, TtlRounding};
use crate::raft::client::Refusal;
use crate::raft::host::{Env, Handling, Service};
use locksim_sim::NodeIdx;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Client requests.
#[derive(Clone, Debug)]
pub enum Req {
    /// Grant a lease with this TTL.
    LeaseGrant {
        /// TTL in ms.
        ttl_ms: u64,
    },
    /// Renew a lease (leader only, after a ReadIndex confirmation).
    KeepAlive {
        /// The lease.
        lease: u64,
    },
    /// The Mutex's acquire transaction: put `key` with `lease` unless it exists; read the
    /// prefix's owner.
    TryAcquire {
        /// The waiter's key.
        key: String,
        /// The session's lease.
        lease: u64,
    },
    /// Delete a key (`Mutex.Unlock`), by its name or only at its create-revision.
    Delete {
        /// The key, and the create-revision it must have to be deleted, if any.
        key: DeleteKey,
    },
    /// Read a key (linearizable).
    Get {
        /// The key.
        key: String,
    },
    /// The prefix's key with the highest create-revision at most `max_create_rev`
    /// (linearizable; `waitDeletes`).
    LastBefore {
        /// The bound.
        max_create_rev: u64,
    },
    /// How long the lock-delay still runs (linearizable).
    LockDelay,
    /// Revoke a lease: its keys go with it (`LeaseRevoke`).
    LeaseRevoke {
        /// The lease.
        lease: u64,
    },
    /// Answer when `key` (created at `create_rev`) is gone, once the store reached `min_rev`.
    WatchDelete {
        /// The key.
        key: String,
        /// Its create-revision when it was read.
        create_rev: u64,
        /// The revision it was read at.
        min_rev: u64,
    },
}

/// The key a [`Req::Delete`] removes: by its name (etcd's `Mutex.Unlock`), or, with
/// `if_create_rev`, only while it has that create-revision (the transaction of etcd-io/etcd
/// PR #22115, `If(CreateRevision(key) == myRev).Then(Delete(key))`). It reads as the key's
/// name (`Deref<Target = str>`); live mode's etcd link sends either form (`links::etcd`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteKey {
    /// The key's name.
    pub name: String,
    /// Delete only the key created at this revision.
    pub if_create_rev: Option<u64>,
}

impl From<String> for DeleteKey {
    fn from(name: String) -> Self {
        DeleteKey {
            name,
            if_create_rev: None,
        }
    }
}

impl std::ops::Deref for DeleteKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.name
    }
}

/// Answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    /// The member cannot serve this now: it knows no leader, or the leader changed under a
    /// read or a forwarded request (etcd's `ErrNoLeader`, `ErrLeaderChanged`); try another.
    NotLeader,
    /// A lease was granted.
    Lease {
        /// Its id.
        lease: u64,
    },
    /// The lease was renewed.
    KeptAlive,
    /// No such lease (expired or revoked).
    LeaseNotFound,
    /// The acquire transaction: the waiter's key's and the owner's create-revisions.
    Acquired {
        /// The waiter's key's create-revision.
        mine: u64,
        /// The lowest create-revision under the prefix.
        owner: u64,
    },
    /// A delete was applied (whether the key existed, or matched its create-revision).
    Deleted,
    /// A key's create-revision, if it exists.
    Key(Option<u64>),
    /// `LastBefore`'s answer and the store's revision.
    Last {
        /// The key and its create-revision.
        found: Option<(String, u64)>,
        /// The revision read at.
        rev: u64,
    },
    /// The watched key is gone, by the delete (or the new key) at this revision.
    Gone {
        /// The event's revision.
        rev: u64,
    },
    /// The lock-delay runs this much longer, in ms.
    DelayLeft(u64),
}

/// Commands in the log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Cmd {
    /// A lease with this id and TTL.
    LeaseGrant {
        /// Its id.
        lease: u64,
        /// TTL in ms.
        ttl_ms: u64,
    },
    /// The leader's lessor found the lease expired.
    LeaseRevoke {
        /// The lease.
        lease: u64,
    },
    /// A client revoked the lease.
    Revoke {
        /// The lease.
        lease: u64,
    },
    /// See [`Req::TryAcquire`].
    TryAcquire {
        /// The key.
        key: String,
        /// The lease.
        lease: u64,
    },
    /// Delete a key.
    Delete {
        /// The key.
        key: String,
    },
    /// The leader's lessor wrote leases' remaining TTLs (etcd's `LeaseCheckpoint` request):
    /// `(lease, remaining ms)`, 0 clearing it.
    LeaseCheckpoint {
        /// The checkpoints.
        checkpoints: Vec<(u64, u64)>,
    },
    /// A keep-alive of a checkpointed lease: etcd's `Renew` first clears the remaining TTL
    /// through the log (a checkpoint of 0), then renews.
    RenewCheckpointed {
        /// The lease.
        lease: u64,
    },
    /// Delete a key only if it was created at `create_rev` (etcd-io/etcd PR #22115's Unlock).
    DeleteIfCreated {
        /// The key.
        key: String,
        /// Its create-revision when the Mutex acquired it.
        create_rev: u64,
    },
}

struct KeyMeta {
    create_rev: u64,
}

struct Watch {
    from: NodeIdx,
    id: u64,
    key: String,
    create_rev: u64,
    min_rev: u64,
    /// Caught up with the store: it fires as an event is applied. A watch from a revision
    /// the store has reached starts unsynced (`watchableStore.watch`: `synced := startRev >
    /// currentRev || startRev == 0`) and fires only when `syncWatchersLoop` replays what it
    /// missed, every [`WATCH_SYNC_MS`], then is synced.
    synced: bool,
    /// The revision at which the key was first seen gone (while unsynced, the event the
    /// catch-up will deliver).
    gone_at: Option<u64>,
}

/// How often a member's `syncWatchersLoop` catches up its unsynced watches, in ms
/// (`mvcc/watchable_store.go`: `100 * time.Millisecond`).
const WATCH_SYNC_MS: u64 = 100;

/// One peer's store, lessor and watches.
pub struct Kv {
    rev: u64,
    keys: BTreeMap<String, KeyMeta>,
    /// Leases: TTL and attached keys.
    leases: BTreeMap<u64, (Duration, BTreeSet<String>)>,
    /// While leading: each lease's expiry on this peer's monotonic clock.
    expiry: BTreeMap<u64, Duration>,
    /// Leases' checkpointed remaining TTLs (replicated; none while unset, etcd's 0).
    remaining: BTreeMap<u64, Duration>,
    /// While leading, with checkpoints on: when each lease's next checkpoint is due (etcd's
    /// `leaseCheckpointHeap`: a lease may be in it twice).
    checkpoints_due: BTreeSet<(Duration, u64)>,
    extend: Duration,
    /// The server's TTL policy (etcd's whole seconds and minimum TTL, or as asked).
    params: Params,
    lock_delay: Duration,
    /// While leading: nobody may take the lock before this (local monotonic clock).
    delay_until: Duration,
    /// How many times a revocation removed the lock's owner (replicated state).
    owner_expiries: u64,
    check_every_ticks: u64,
    /// Raft ticks' worth of time since the lessor last looked (see [`Kv::tick`]); it starts
    /// anywhere in the interval, as a member that was running before the run has looked at
    /// any time in the last one.
    ticks: u64,
    /// When the last tick came (local monotonic clock).
    last_tick: Option<Duration>,
    /// Leading, and the lessor promoted: only then does it track and revoke leases.
    promoted: bool,
    watches: Vec<Watch>,
    /// When `syncWatchersLoop` last ran (local monotonic clock).
    watches_synced_at: Option<Duration>,
    pushes: Vec<(NodeIdx, u64, Resp)>,
    /// Keep-alives that came to this leader before its lessor's promotion, answered at it:
    /// `(who asked, request id, lease)`.
    held_renewals: Vec<(NodeIdx, u64, u64)>,
}

impl Kv {
    /// A fresh store: leases renewed on promotion by `extend`. Its lessor's phase is drawn
    /// from the run's random stream.
    pub fn new(params: &Params, extend: Duration) -> Self {
        let check_every_ticks = params
            .lease_check_interval_ms
            .div_ceil(params.tick_ms)
            .max(1);
        Kv {
            rev: 0,
            keys: BTreeMap::new(),
            leases: BTreeMap::new(),
            expiry: BTreeMap::new(),
            remaining: BTreeMap::new(),
            checkpoints_due: BTreeSet::new(),
            extend,
            params: params.clone(),
            lock_delay: Duration::from_millis(params.lock_delay_ms),
            delay_until: Duration::ZERO,
            owner_expiries: 0,
            check_every_ticks,
            ticks: madsim::rand::thread_rng().gen_range(0..check_every_ticks),
            last_tick: None,
            promoted: false,
            watches: vec![],
            watches_synced_at: None,
            pushes: vec![],
            held_renewals: vec![],
        }
    }

    /// Every key is attached to exactly one live lease and every attached key exists: a key
    /// never outlives its lease's revocation. The lessor tracks only live leases.
    fn assert_leases(&self) {
        let mut attached = 0;
        for (_, keys) in self.leases.values() {
            attached += keys.len();
            assert!(
                keys.iter().all(|k| self.keys.contains_key(k)),
                "a lease's key exists"
            );
        }
        assert_eq!(attached, self.keys.len(), "every key has one lease");
        assert!(
            self.expiry.keys().all(|l| self.leases.contains_key(l)),
            "the lessor never tracks a revoked lease"
        );
        assert!(
            self.remaining.keys().all(|l| self.leases.contains_key(l)),
            "a checkpoint goes with its lease"
        );
    }

    /// A lease's TTL as a new leader would restore it: the checkpointed remaining TTL if
    /// there is one, else the full TTL (`Lease.getRemainingTTL`).
    fn remaining_ttl(&self, lease: u64) -> Option<Duration> {
        let (ttl, _) = self.leases.get(&lease)?;
        Some(self.remaining.get(&lease).copied().unwrap_or(*ttl))
    }

    /// etcd's `scheduleCheckpointIfNeeded`: with checkpoints on, a lease whose remaining TTL
    /// exceeds the interval (in whole seconds, as etcd compares them) gets its next
    /// checkpoint an interval from now.
    fn schedule_checkpoint(&mut self, lease: u64, now: Duration) {
        if !self.params.lease_checkpoint {
            return;
        }
        let interval_ms = self.params.checkpoint_interval_ms();
        let floor = Duration::from_secs(interval_ms / 1_000);
        if self.remaining_ttl(lease).is_some_and(|r| r > floor) {
            let due = now + Duration::from_millis(interval_ms);
            self.checkpoints_due.insert((due, lease));
        }
    }

    /// A remaining TTL as etcd writes it: rounded up to whole seconds (`math.Ceil`) where
    /// TTLs are etcd's, to the millisecond where they are exact.
    fn rounded_up(&self, d: Duration) -> u64 {
        let ms = d.as_nanos().div_ceil(1_000_000) as u64;
        match self.params.ttl_rounding {
            TtlRounding::Etcd => ms.div_ceil(1_000) * 1_000,
            TtlRounding::Exact => ms,
        }
    }

    /// etcd's `findDueScheduledCheckpoints`: the due checkpoints of live, unexpired leases
    /// whose remaining TTL is below their TTL, in one `LeaseCheckpoint` entry.
    fn due_checkpoints(&mut self, now: Duration) -> Option<Cmd> {
        let mut checkpoints = vec![];
        while let Some(&(due, lease)) = self.checkpoints_due.first() {
            if due > now {
                break;
            }
            self.checkpoints_due.pop_first();
            let (Some((ttl, _)), Some(&until)) = (self.leases.get(&lease), self.expiry.get(&lease))
            else {
                continue;
            };
            if until <= now {
                continue;
            }
            let left_ms = self.rounded_up(until - now);
            if left_ms < ttl.as_millis() as u64 {
                checkpoints.push((lease, left_ms));
            }
        }
        assert!(
            checkpoints.iter().all(|(_, left)| *left > 0),
            "a checkpoint of 0 only clears (Renew)"
        );
        (!checkpoints.is_empty()).then_some(Cmd::LeaseCheckpoint { checkpoints })
    }

    /// Applies a `LeaseCheckpoint` (etcd's `lessor.Checkpoint`): every member keeps the
    /// remaining TTL for a promotion; the leader schedules the lease's next checkpoint.
    fn checkpoint(&mut self, checkpoints: Vec<(u64, u64)>, env: &Env) -> Resp {
        let now = env.ctx.mono_now();
        for (lease, left_ms) in checkpoints {
            if !self.leases.contains_key(&lease) {
                continue;
            }
            match left_ms {
                0 => self.remaining.remove(&lease),
                ms => self.remaining.insert(lease, Duration::from_millis(ms)),
            };
            if env.leader && self.promoted {
                self.schedule_checkpoint(lease, now);
            }
        }
        Resp::Deleted
    }

    /// A keep-alive of a checkpointed lease, once its clearing checkpoint is applied.
    fn renew_checkpointed(&mut self, lease: u64, env: &Env) -> Resp {
        self.checkpoint(vec![(lease, 0)], env);
        match self.leases.get(&lease) {
            None => Resp::LeaseNotFound,
            Some(_) if !(env.leader && self.promoted) => Resp::NotLeader,
            Some(_) if self.expired(lease, env) => Resp::LeaseNotFound,
            Some((ttl, _)) => {
                self.expiry.insert(lease, env.ctx.mono_now() + *ttl);
                Resp::KeptAlive
            }
        }
    }

    fn delete(&mut self, key: &str) -> bool {
        let Some(_) = self.keys.remove(key) else {
            return false;
        };
        for (_, keys) in self.leases.values_mut() {
            keys.remove(key);
        }
        true
    }

    /// The fixed Unlock's transaction: the key goes only if it is the incarnation the Mutex
    /// acquired; a newer one (the same session locked again) stays, and the leader says so.
    fn delete_if_created(&mut self, key: &str, create_rev: u64, env: &Env) -> Resp {
        match self.keys.get(key).map(|k| k.create_rev) {
            Some(rev) if rev == create_rev => {
                self.delete(key);
                self.rev += 1;
            }
            Some(rev) if env.leader => {
                let why = format!("{key} created at {rev}, not {create_rev}: nothing deleted");
                env.ctx.event("unlock_compare_failed", None, why);
            }
            _ => {}
        }
        Resp::Deleted
    }

    fn owner(&self) -> Option<u64> {
        self.keys.values().map(|k| k.create_rev).min()
    }

    /// `syncWatchersLoop`, on this member's timer: every [`WATCH_SYNC_MS`] the unsynced
    /// watches catch up (firing for a delete they missed) and are synced from then on.
    fn sync_watches(&mut self, now: Duration) {
        let period = Duration::from_millis(WATCH_SYNC_MS);
        if self
            .watches_synced_at
            .is_some_and(|t| now.saturating_sub(t) < period)
        {
            return;
        }
        self.watches_synced_at = Some(now);
        if self.watches.iter().all(|w| w.synced) {
            return;
        }
        self.watches.iter_mut().for_each(|w| w.synced = true);
        self.fire_watches();
    }

    /// Answers the synced watches whose key is gone; an unsynced one keeps the revision it
    /// was first seen gone at, for its catch-up.
    fn fire_watches(&mut self) {
        let (rev, keys) = (self.rev, &self.keys);
        for w in &mut self.watches {
            let gone = rev >= w.min_rev
                && keys
                    .get(&w.key)
                    .is_none_or(|k| k.create_rev != w.create_rev);
            if gone {
                w.gone_at.get_or_insert(rev);
            }
        }
        let (due, waiting): (Vec<Watch>, Vec<Watch>) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|w| w.synced && w.gone_at.is_some());
        self.watches = waiting;
        self.pushes.extend(due.into_iter().map(|w| {
            let rev = w.gone_at.expect("a due watch saw its key gone");
            (w.from, w.id, Resp::Gone { rev })
        }));
    }

    /// Revokes `lease` and deletes its keys: it `expired` (the lessor) or a client asked.
    fn revoke(&mut self, lease: u64, expired: bool, env: &Env) -> Resp {
        self.expiry.remove(&lease);
        self.remaining.remove(&lease);
        let Some((_, keys)) = self.leases.remove(&lease) else {
            return Resp::LeaseNotFound;
        };
        if env.leader && expired {
            env.ctx.event(
                "lease_expired",
                None,
                format!("lease {lease:x} expired: revoked through the log"),
            );
        }
        let owner = self.owner();
        // One write transaction deleting the lease's keys: like any etcd transaction it
        // takes a revision only if it changed something (a lease with no key takes none).
        if !keys.is_empty() {
            self.rev += 1;
        }
        for key in keys {
            self.keys.remove(&key);
        }
        assert!(
            !self.expiry.contains_key(&lease),
            "revoked: never renewed again"
        );
        if self.owner() != owner && expired {
            self.owner_expiries += 1;
            if env.leader && !self.lock_delay.is_zero() {
                // The holder's lease expired: it may still think it holds the lock.
                self.delay_until = env.ctx.mono_now() + self.lock_delay;
                env.ctx
                    .event("lock_delay", None, "the holder's lease expired");
            }
        }
        Resp::Deleted
    }

    /// etcd's `lessor.Renew` on the role this member last saw: after a ReadIndex ([`Kv::read`]),
    /// or without one (before PR #13690, and a stuck loop's). `None` if the lease expired
    /// here (Renew waits for its revocation).
    fn renew_locally(&mut self, lease: u64, env: &Env) -> Option<Resp> {
        if !(env.leader && self.promoted) {
            return Some(Resp::NotLeader);
        }
        let Some((ttl, _)) = self.leases.get(&lease) else {
            return Some(Resp::LeaseNotFound);
        };
        if self.expired(lease, env) {
            return None;
        }
        self.expiry.insert(lease, env.ctx.mono_now() + *ttl);
        Some(Resp::KeptAlive)
    }

    /// The answer to a keep-alive renewed here now: [`Kv::renew_locally`]'s, a lease expired
    /// here answered "not found" (its revocation is on its way through the log).
    fn renewal(&mut self, lease: u64, env: &Env) -> Resp {
        self.renew_locally(lease, env)
            .unwrap_or(Resp::LeaseNotFound)
    }

    /// Whether the leader's lessor holds `lease` expired.
    fn expired(&self, lease: u64, env: &Env) -> bool {
        self.expiry
            .get(&lease)
            .is_some_and(|until| *until <= env.ctx.mono_now())
    }

    fn try_acquire(&mut self, key: String, lease: u64) -> Resp {
        if !self.keys.contains_key(&key) {
            let Some((_, attached)) = self.leases.get_mut(&lease) else {
                return Resp::LeaseNotFound;
            };
            attached.insert(key.clone());
            self.rev += 1;
            self.keys.insert(
                key.clone(),
                KeyMeta {
                    create_rev: self.rev,
                },
            );
        }
        let mine = self.keys[&key].create_rev;
        assert!(
            mine <= self.rev,
            "a key's revision was the store's at its creation"
        );
        Resp::Acquired {
            mine,
            owner: self.owner().expect("the waiter's key exists"),
        }
    }
}

impl Service for Kv {
    type Req = Req;
    type Resp = Resp;
    type Cmd = Cmd;

    fn handle(&mut self, req: Req, env: &Env) -> Handling<Cmd, Req, Resp> {
        match req {
            Req::LeaseGrant { ttl_ms } => {
                let lease = madsim::rand::thread_rng().gen::<u64>() >> 1;
                let ttl_ms = self.params.granted_ttl_ms(ttl_ms);
                Handling::Propose(Cmd::LeaseGrant { lease, ttl_ms })
            }
            Req::TryAcquire { key, lease } => Handling::Propose(Cmd::TryAcquire { key, lease }),
            Req::Delete { key } => Handling::Propose(match key.if_create_rev {
                None => Cmd::Delete { key: key.name },
                Some(create_rev) => Cmd::DeleteIfCreated {
                    key: key.name,
                    create_rev,
                },
            }),
            Req::LeaseRevoke { lease } => Handling::Propose(Cmd::Revoke { lease }),
            // A member's lessor is not the primary: it forwards the renewal to the leader
            // (`EtcdServer.LeaseRenew`, over the peers' HTTP), as the model's lock-delay,
            // which only the leader keeps.
            Req::KeepAlive { .. } | Req::LockDelay if !env.leader => Handling::Forward(req),
            // Not primary yet: etcd's `LeaseRenew` tries again until the lessor is promoted
            // (within its request timeout), and the client waits on its stream.
            Req::KeepAlive { lease } if !self.promoted => {
                self.held_renewals.push((env.from, env.id, lease));
                Handling::Hold
            }
            // etcd's Renew of a checkpointed lease clears its remaining TTL through the log
            // first (so a new leader does not restore it after this renewal).
            Req::KeepAlive { lease } if self.remaining.contains_key(&lease) => {
                Handling::Propose(Cmd::RenewCheckpointed { lease })
            }
            // Before etcd's PR #13690 the leader renews at once, on the role it last saw.
            Req::KeepAlive { lease } if self.params.lessor == Lessor::LocalRole => {
                Handling::Reply(self.renewal(lease, env))
            }
            Req::KeepAlive { .. } | Req::Get { .. } | Req::LastBefore { .. } | Req::LockDelay => {
                Handling::Read(req)
            }
            Req::WatchDelete {
                key,
                create_rev,
                min_rev,
            } => {
                let synced = min_rev > self.rev || min_rev == 0;
                self.watches.push(Watch {
                    from: env.from,
                    id: env.id,
                    key,
                    create_rev,
                    min_rev,
                    synced,
                    gone_at: None,
                });
                self.fire_watches();
                Handling::Hold
            }
        }
    }

    fn apply(&mut self, cmd: Cmd, env: &Env) -> Resp {
        let rev_before = self.rev;
        let resp = match cmd {
            Cmd::LeaseGrant { lease, ttl_ms } => {
                let ttl = Duration::from_millis(ttl_ms);
                self.leases.insert(lease, (ttl, BTreeSet::new()));
                // Before its promotion the lessor keeps a new lease forever (`l.forever()` in
                // `lessor.Grant`); the promotion starts its clock with every other.
                if env.leader && self.promoted {
                    self.expiry.insert(lease, env.ctx.mono_now() + ttl);
                    self.schedule_checkpoint(lease, env.ctx.mono_now());
                }
                Resp::Lease { lease }
            }
            Cmd::LeaseRevoke { lease } => self.revoke(lease, true, env),
            Cmd::Revoke { lease } => self.revoke(lease, false, env),
            Cmd::TryAcquire { key, lease } => self.try_acquire(key, lease),
            Cmd::Delete { key } => {
                if self.delete(&key) {
                    self.rev += 1;
                }
                Resp::Deleted
            }
            Cmd::LeaseCheckpoint { checkpoints } => self.checkpoint(checkpoints, env),
            Cmd::RenewCheckpointed { lease } => self.renew_checkpointed(lease, env),
            Cmd::DeleteIfCreated { key, create_rev } => {
                self.delete_if_created(&key, create_rev, env)
            }
        };
        assert!(
            self.rev >= rev_before,
            "revisions (the fencing tokens) only grow"
        );
        self.assert_leases();
        self.fire_watches();
        resp
    }

    fn read(&mut self, req: Req, env: &Env) -> Resp {
        match req {
            // Confirmed by ReadIndex (only a leader that opened its term serves reads, so its
            // lessor is promoted). Expired here, the lease's revocation is on its way through
            // the log: etcd's Renew waits for it and answers "not found" (a renewal now would
            // be undone).
            Req::KeepAlive { lease } => {
                assert!(
                    env.leader && self.promoted,
                    "a confirmed read is served by a leader whose lessor is promoted"
                );
                self.renewal(lease, env)
            }
            Req::Get { key } => Resp::Key(self.keys.get(&key).map(|k| k.create_rev)),
            Req::LastBefore { max_create_rev } => Resp::Last {
                found: self
                    .keys
                    .iter()
                    .filter(|(_, k)| k.create_rev <= max_create_rev)
                    .max_by_key(|(_, k)| k.create_rev)
                    .map(|(key, k)| (key.clone(), k.create_rev)),
                rev: self.rev,
            },
            Req::LockDelay => {
                let left = self.delay_until.saturating_sub(env.ctx.mono_now());
                Resp::DelayLeft(left.as_millis() as u64)
            }
            other => unreachable!("not a read: {other:?}"),
        }
    }

    /// etcd's lessor `runLoop` looks every 500 ms on a timer of its own (`time.After`), not
    /// on raft's ticker: raft's ticker drops the ticks a paused or stalled peer missed, but
    /// the lessor's timer, overdue when the peer wakes, fires at once. So a tick after a gap
    /// counts the ticks' worth of time the gap held (at least one), and a peer woken from a
    /// pause longer than the interval revokes its expired leases on its first tick, before
    /// anything its clients sent in the pause is answered.
    fn tick(&mut self, env: &Env) -> Vec<Cmd> {
        let now = env.ctx.mono_now();
        self.sync_watches(now);
        let tick = Duration::from_millis(self.params.tick_ms);
        let elapsed = self.last_tick.map_or(1, |last| {
            let gap = now.saturating_sub(last).as_nanos() / tick.as_nanos().max(1);
            (gap as u64).max(1)
        });
        self.last_tick = Some(now);
        self.ticks += elapsed;
        if !env.leader || !self.promoted || self.ticks < self.check_every_ticks {
            return vec![];
        }
        self.ticks = 0;
        self.assert_leases();
        let mut cmds: Vec<Cmd> = (self.expiry.iter())
            .filter(|(_, until)| **until <= now)
            .map(|(lease, _)| Cmd::LeaseRevoke { lease: *lease })
            .collect();
        // etcd's `runLoop`: revoke the expired leases, then write the due checkpoints.
        cmds.extend(self.due_checkpoints(now));
        cmds
    }

    /// A new leader's lessor starts empty and revokes nothing: it is promoted when the leader
    /// applies the first entry of its term ([`Service::term_opened`]).
    fn role_changed(&mut self, _env: &Env) {
        self.expiry.clear();
        self.checkpoints_due.clear();
        self.promoted = false;
        for (from, id, _) in std::mem::take(&mut self.held_renewals) {
            self.pushes.push((from, id, Resp::NotLeader));
        }
    }

    /// etcd's `Promote`, called from `applyEntryNormal` (`server/etcdserver/server.go`) when
    /// the leader applies the empty entry of its term, not at the role change: only then has
    /// it applied every grant and revocation of the terms before.
    fn term_opened(&mut self, env: &Env) {
        assert!(env.leader, "only a leader opens a term");
        assert!(!self.promoted, "one promotion per term");
        self.promoted = true;
        // Nobody knows when the old leader last renewed a lease: each gets a full TTL, or its
        // checkpointed remaining TTL (`Lease.refresh(extend)`), and its next checkpoint.
        let now = env.ctx.mono_now();
        let leases: Vec<u64> = self.leases.keys().copied().collect();
        for lease in leases {
            let ttl = self.remaining_ttl(lease).expect("a live lease");
            self.expiry.insert(lease, now + self.extend + ttl);
            self.schedule_checkpoint(lease, now);
        }
        // Nor whether a lock-delay was running: once a holder's lease has ever expired,
        // assume one starts now.
        if self.owner_expiries > 0 {
            self.delay_until = now + self.lock_delay;
        }
        // The keep-alives that waited for the promotion are renewed now.
        for (from, id, lease) in std::mem::take(&mut self.held_renewals) {
            let resp = self.renewal(lease, env);
            self.pushes.push((from, id, resp));
        }
    }

    /// An etcd member's gRPC handlers and lessor timer run outside its Raft loop.
    fn serves_outside_loop(&self) -> bool {
        true
    }

    /// With the Raft loop stuck, a lessor that trusts its role (`lessor = "local-role"`)
    /// still renews its clients' leases; one that ensures its leadership first cannot (the
    /// ReadIndex needs the loop), and the keep-alive waits.
    fn handle_stuck(&mut self, req: &Req, env: &Env) -> Option<Resp> {
        match req {
            Req::KeepAlive { lease } if self.params.lessor == Lessor::LocalRole => {
                self.renew_locally(*lease, env)
            }
            _ => None,
        }
    }

    /// With the Raft loop stuck, the lessor's timer still finds leases expired by its own
    /// clock; trusting its role, it revokes them once the loop runs again (etcd-io/etcd#12528).
    /// Ensuring its leadership first, it revokes nothing (PR #16822).
    fn tick_stuck(&mut self, env: &Env) -> Vec<Cmd> {
        match self.params.lessor {
            Lessor::LocalRole => self.tick(env),
            Lessor::EnsureLeadership => vec![],
        }
    }

    fn take_pushes(&mut self) -> Vec<(NodeIdx, u64, Resp)> {
        std::mem::take(&mut self.pushes)
    }
}

impl Refusal for Resp {
    fn not_leader() -> Self {
        Resp::NotLeader
    }

    fn refused(&self) -> bool {
        matches!(self, Resp::NotLeader)
    }
}
