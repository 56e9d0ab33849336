//! `etcd`: etcd's lock recipe (`clientv3/concurrency`'s `Session` and `Mutex`) on a Raft
//! replicated key-value store with etcd's lessor ([`crate::raft`] hosts the peers).
//!
//! How the real system works (etcd `server/lease/lessor.go`, `client/v3/concurrency/
//! session.go` and `mutex.go`, `client/v3/lease.go`):
//! - **Leases.** `LeaseGrant` goes through the Raft log; only the leader's lessor tracks
//!   expiry. It checks every 500 ms and *proposes* a `LeaseRevoke` for each expired lease, so
//!   expiry is an entry in the log that deletes the lease's keys on every member. A keep-alive
//!   (`LeaseKeepAlive`) goes to the leader, which renews the lease in memory (not through the
//!   log). A new leader knows no renewal times: on promotion it extends every lease to
//!   now + election timeout + TTL (`Promote`), so a lease is never revoked before a holder
//!   that kept it alive through the old leader could have noticed.
//! - **Session.** The client grants a lease with the session's TTL and keeps it alive every
//!   TTL/3 (`lease.go`: `nextKeepAlive = now + TTL/3`); the session is over when a keep-alive
//!   finds the lease gone or its TTL passes without one.
//! - **Mutex.** `Lock` puts the key `prefix/<lease id>` attached to the lease in a transaction
//!   (if it does not exist yet) and reads the prefix's key with the lowest create-revision: if
//!   that is its own, it holds the lock. Otherwise it waits for the deletion of every key
//!   with a lower create-revision (`waitDeletes`: watch the last one before its own, and
//!   again) and then **checks that its own key still exists** (`Get`) before returning.
//!   `Unlock` deletes the key. The create-revision is a natural fencing token: it grows with
//!   every write to the store.
//!
//! How it breaks (reproducible here):
//! - **Process pauses** past the TTL (the result every lease shares, Kleppmann 2016): the
//!   lease expires, the key is revoked, the next waiter takes the lock, the paused holder
//!   wakes and writes. The create-revision token and a fencing resource stop the stale write.
//! - **etcd issue #11456** (Jepsen, etcd 3.4.3, 2020): `Lock` returned after `waitDeletes`
//!   without re-checking its own key. A waiter whose lease expired while it waited (a
//!   partition, not a long pause, is enough) finds no lower key and returns as the holder,
//!   though its key is gone and a later waiter holds the lock. Bug variant
//!   `no-lease-recheck-after-wait`; fixed in etcd after that report by the `Get` after waiting.
//!
//! What the model keeps and leaves out: one lock prefix, a flat key space with revisions,
//! leases, the lessor with promotion and a watch on a key's deletion (served by the peer from
//! its applied state, as a long poll). Keep-alives are confirmed by ReadIndex on the leader
//! before they renew (a deposed leader that has not noticed yet cannot renew), and the client
//! counts a lease's TTL from when it *sent* the keep-alive (etcd's Go client counts from the
//! answer, a few ms more optimistic). Left out: compaction, lease checkpointing, auth, gRPC
//! proxies, watch progress notifications.

use crate::raft::client::{Link as RaftLink, Redirect};
use crate::raft::{start_cluster, Env, Handling, HostConfig, Service};
use crate::{
    parse_params, Acquired, Connector, Deployment, Grant, LockClient, Outcome, ParamError,
    Protocol, Validity,
};
use async_trait::async_trait;
use locksim_sim::nemesis::ROLE_LEADER;
use locksim_sim::{NodeCtx, NodeIdx, World};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The lock's key prefix.
pub const PREFIX: &str = "lock/";

/// Correct client, or a known bug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// etcd since the fix of #11456 (the own key is read after waiting).
    #[default]
    Correct,
    /// etcd issue #11456: return from waiting without checking that the own key still exists.
    NoLeaseRecheckAfterWait,
    /// The Raft host acknowledges log entries before they are fsynced.
    AckBeforeFsync,
}

/// The `[protocol]` parameters of `etcd`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Number of Raft peers (3 or 5).
    #[serde(default = "d_peers")]
    pub peers: usize,
    /// The session's lease TTL, in ms.
    #[serde(default = "d_ttl")]
    pub lease_ttl_ms: u64,
    /// How often the leader's lessor looks for expired leases, in ms (etcd: 500).
    #[serde(default = "d_lease_check")]
    pub lease_check_interval_ms: u64,
    /// Correct, or a bug.
    #[serde(default)]
    pub variant: Variant,
    /// Length of a Raft tick, in ms (etcd's `--heartbeat-interval`).
    #[serde(default = "d_tick")]
    pub tick_ms: u64,
    /// Election timeout in ticks (etcd: `--election-timeout` 1000 ms = 10 ticks).
    #[serde(default = "d_election_ticks")]
    pub election_ticks: usize,
    /// Timeout of one request, in ms.
    #[serde(default = "d_request_timeout")]
    pub request_timeout_ms: u64,
    /// How long one watch waits before the client asks again, in ms.
    #[serde(default = "d_watch_poll")]
    pub watch_poll_ms: u64,
    /// Give up acquiring after this long, in ms (the waiter deletes its key).
    #[serde(default = "d_acquire_timeout")]
    pub acquire_timeout_ms: u64,
    /// Chubby's lock-delay, in ms: after the holder's lease expires (not after a clean
    /// release) nobody may take the lock for this long (0 = off).
    #[serde(default)]
    pub lock_delay_ms: u64,
}

fn d_peers() -> usize {
    3
}
fn d_ttl() -> u64 {
    2_000
}
fn d_lease_check() -> u64 {
    500
}
fn d_tick() -> u64 {
    100
}
fn d_election_ticks() -> usize {
    10
}
fn d_request_timeout() -> u64 {
    300
}
fn d_watch_poll() -> u64 {
    1_000
}
fn d_acquire_timeout() -> u64 {
    10_000
}

impl Params {
    fn validate(&self) -> Result<(), ParamError> {
        if self.lease_ttl_ms < 3 {
            return Err(ParamError::field("lease_ttl_ms", "must be at least 3"));
        }
        self.host().validate(&[
            ("lease_check_interval_ms", self.lease_check_interval_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("watch_poll_ms", self.watch_poll_ms),
        ])
    }

    fn host(&self) -> HostConfig {
        let ack_before_fsync = self.variant == Variant::AckBeforeFsync;
        HostConfig::named(
            "etcd",
            self.peers,
            self.tick_ms,
            self.election_ticks,
            ack_before_fsync,
        )
    }
}

/// The `etcd` protocol.
pub struct Etcd;

impl Protocol for Etcd {
    fn id(&self) -> &'static str {
        "etcd"
    }

    fn summary(&self) -> &'static str {
        "etcd's concurrency.Mutex on a Raft key-value store with leases (3 or 5 peers)"
    }

    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError> {
        let params: Params = parse_params(params)?;
        params.validate()?;
        Ok(Box::new(EtcdDeployment { params }))
    }
}

struct EtcdDeployment {
    params: Params,
}

impl Deployment for EtcdDeployment {
    fn servers(&self) -> Vec<String> {
        self.params.host().peers
    }

    fn points(&self) -> Vec<(String, &'static str)> {
        let mut points: Vec<(String, &'static str)> = self
            .servers()
            .into_iter()
            .map(|s| (s, "before_apply"))
            .collect();
        points.push(("client".into(), "after_wait"));
        points
    }

    fn roles(&self) -> Vec<&'static str> {
        vec![ROLE_LEADER]
    }

    fn start(&self, world: &World) -> Arc<dyn Connector> {
        let host = self.params.host();
        let enforce = self.params.variant != Variant::AckBeforeFsync;
        let params = self.params.clone();
        let extend = host.election_timeout();
        let cluster = start_cluster(world, host, enforce, move |_ctx| Kv::new(&params, extend));
        Arc::new(EtcdConnector {
            net: cluster.clients,
            peers: cluster.peers,
            params: self.params.clone(),
        })
    }
}

// ---- the replicated store ----

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
    /// Delete a key.
    Delete {
        /// The key.
        key: String,
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

/// Answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    /// Ask another peer (this one, from 0, if known).
    NotLeader(Option<usize>),
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
    /// A delete was applied (whether the key existed).
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
    /// The watched key is gone.
    Gone,
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
}

/// One peer's store, lessor and watches.
struct Kv {
    rev: u64,
    keys: BTreeMap<String, KeyMeta>,
    /// Leases: TTL and attached keys.
    leases: BTreeMap<u64, (Duration, BTreeSet<String>)>,
    /// While leading: each lease's expiry on this peer's monotonic clock.
    expiry: BTreeMap<u64, Duration>,
    extend: Duration,
    lock_delay: Duration,
    /// While leading: nobody may take the lock before this (local monotonic clock).
    delay_until: Duration,
    /// How many times a revocation removed the lock's owner (replicated state).
    owner_expiries: u64,
    check_every_ticks: u64,
    ticks: u64,
    watches: Vec<Watch>,
    pushes: Vec<(NodeIdx, u64, Resp)>,
}

impl Kv {
    fn new(params: &Params, extend: Duration) -> Self {
        Kv {
            rev: 0,
            keys: BTreeMap::new(),
            leases: BTreeMap::new(),
            expiry: BTreeMap::new(),
            extend,
            lock_delay: Duration::from_millis(params.lock_delay_ms),
            delay_until: Duration::ZERO,
            owner_expiries: 0,
            check_every_ticks: params
                .lease_check_interval_ms
                .div_ceil(params.tick_ms)
                .max(1),
            ticks: 0,
            watches: vec![],
            pushes: vec![],
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

    fn owner(&self) -> Option<u64> {
        self.keys.values().map(|k| k.create_rev).min()
    }

    fn fire_watches(&mut self) {
        let (rev, keys) = (self.rev, &self.keys);
        let (due, waiting): (Vec<Watch>, Vec<Watch>) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|w| {
                rev >= w.min_rev
                    && keys
                        .get(&w.key)
                        .is_none_or(|k| k.create_rev != w.create_rev)
            });
        self.watches = waiting;
        self.pushes
            .extend(due.into_iter().map(|w| (w.from, w.id, Resp::Gone)));
    }

    fn revoke(&mut self, lease: u64, env: &Env) -> Resp {
        self.expiry.remove(&lease);
        let Some((_, keys)) = self.leases.remove(&lease) else {
            return Resp::LeaseNotFound;
        };
        if env.leader {
            env.ctx.event(
                "lease_expired",
                None,
                format!("lease {lease:x} expired: revoked through the log"),
            );
        }
        let owner = self.owner();
        self.rev += 1;
        for key in keys {
            self.keys.remove(&key);
        }
        if self.owner() != owner {
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
                Handling::Propose(Cmd::LeaseGrant { lease, ttl_ms })
            }
            Req::TryAcquire { key, lease } => Handling::Propose(Cmd::TryAcquire { key, lease }),
            Req::Delete { key } => Handling::Propose(Cmd::Delete { key }),
            Req::KeepAlive { .. } | Req::Get { .. } | Req::LastBefore { .. } | Req::LockDelay => {
                Handling::Read(req)
            }
            Req::WatchDelete {
                key,
                create_rev,
                min_rev,
            } => {
                self.watches.push(Watch {
                    from: env.from,
                    id: env.id,
                    key,
                    create_rev,
                    min_rev,
                });
                self.fire_watches();
                Handling::Hold
            }
        }
    }

    fn apply(&mut self, cmd: Cmd, env: &Env) -> Resp {
        let resp = match cmd {
            Cmd::LeaseGrant { lease, ttl_ms } => {
                let ttl = Duration::from_millis(ttl_ms);
                self.leases.insert(lease, (ttl, BTreeSet::new()));
                if env.leader {
                    self.expiry.insert(lease, env.ctx.mono_now() + ttl);
                }
                Resp::Lease { lease }
            }
            Cmd::LeaseRevoke { lease } => self.revoke(lease, env),
            Cmd::TryAcquire { key, lease } => self.try_acquire(key, lease),
            Cmd::Delete { key } => {
                if self.delete(&key) {
                    self.rev += 1;
                }
                Resp::Deleted
            }
        };
        self.fire_watches();
        resp
    }

    fn read(&mut self, req: Req, env: &Env) -> Resp {
        match req {
            Req::KeepAlive { lease } => match self.leases.get(&lease) {
                // Expired here, its revocation is on its way through the log: etcd's Renew
                // waits for it and answers "not found" (a renewal now would be undone).
                Some(_) if env.leader && self.expired(lease, env) => Resp::LeaseNotFound,
                Some((ttl, _)) if env.leader => {
                    self.expiry.insert(lease, env.ctx.mono_now() + *ttl);
                    Resp::KeptAlive
                }
                Some(_) => Resp::NotLeader(None),
                None => Resp::LeaseNotFound,
            },
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

    fn tick(&mut self, env: &Env) -> Vec<Cmd> {
        self.ticks += 1;
        if !env.leader || self.ticks < self.check_every_ticks {
            return vec![];
        }
        self.ticks = 0;
        let now = env.ctx.mono_now();
        self.expiry
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(lease, _)| Cmd::LeaseRevoke { lease: *lease })
            .collect()
    }

    fn role_changed(&mut self, env: &Env) {
        self.expiry.clear();
        if env.leader {
            // etcd's Promote: nobody knows when the old leader last renewed a lease.
            let now = env.ctx.mono_now();
            for (lease, (ttl, _)) in &self.leases {
                self.expiry.insert(*lease, now + self.extend + *ttl);
            }
            // Nor whether a lock-delay was running: once a holder's lease has ever expired,
            // assume one starts now.
            if self.owner_expiries > 0 {
                self.delay_until = now + self.lock_delay;
            }
        }
    }

    fn not_leader(&self, leader: Option<usize>) -> Resp {
        Resp::NotLeader(leader)
    }

    fn take_pushes(&mut self) -> Vec<(NodeIdx, u64, Resp)> {
        std::mem::take(&mut self.pushes)
    }
}

// ---- the client library ----

struct EtcdConnector {
    net: locksim_sim::Net<locksim_sim::rpc::Wire<Req, Resp>>,
    peers: Vec<NodeIdx>,
    params: Params,
}

impl Connector for EtcdConnector {
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient> {
        let timeout = Duration::from_millis(self.params.request_timeout_ms);
        let link = Link::new(ctx, &self.net, &self.peers, self.params.clone(), timeout);
        Box::new(EtcdClient {
            link: Rc::new(link),
            session: Rc::new(RefCell::new(None)),
        })
    }
}

impl Redirect for Resp {
    fn redirect(&self) -> Option<Option<usize>> {
        match self {
            Resp::NotLeader(hint) => Some(*hint),
            _ => None,
        }
    }
}

type Link = RaftLink<Req, Resp, Params>;

/// A live session: its lease and until when the client may count on it (local clock).
struct Session {
    lease: u64,
    valid_until: Duration,
}

type SharedSession = Rc<RefCell<Option<Session>>>;

/// The client library: a session (lease + keep-alive) and the Mutex.
pub struct EtcdClient {
    link: Rc<Link>,
    session: SharedSession,
}

impl EtcdClient {
    /// The session's lease, granting a new one (and starting its keep-alive) if needed.
    async fn lease(&mut self) -> Result<u64, Acquired> {
        if let Some(s) = self.session.borrow().as_ref() {
            return Ok(s.lease);
        }
        let ttl = Duration::from_millis(self.link.params.lease_ttl_ms);
        let sent = self.link.ctx.mono_now();
        let req = Req::LeaseGrant {
            ttl_ms: self.link.params.lease_ttl_ms,
        };
        match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Lease { lease }) => {
                *self.session.borrow_mut() = Some(Session {
                    lease,
                    valid_until: sent + ttl,
                });
                spawn_keep_alive(self.link.clone(), self.session.clone(), lease);
                Ok(lease)
            }
            _ => Err(Acquired::Unknown("no answer to LeaseGrant".into())),
        }
    }

    /// Whether the session is alive on this client's clock.
    fn session_live(&self) -> bool {
        let now = self.link.ctx.mono_now();
        self.session
            .borrow()
            .as_ref()
            .is_some_and(|s| s.valid_until > now)
    }

    fn end_session(&self, why: &str) {
        if self.session.borrow_mut().take().is_some() {
            self.link.ctx.note(format!("session over: {why}"));
        }
    }

    /// `waitDeletes`: until no key under the prefix is older than `mine`.
    async fn wait_deletes(&self, mine: u64, deadline: Duration) -> bool {
        let budget = self.link.request_budget();
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        while self.link.ctx.mono_now() < deadline {
            let req = Req::LastBefore {
                max_create_rev: mine - 1,
            };
            let Some(Resp::Last { found, rev }) = self.link.call(req, budget).await else {
                continue;
            };
            let Some((key, create_rev)) = found else {
                return true;
            };
            let watch = Req::WatchDelete {
                key,
                create_rev,
                min_rev: rev,
            };
            let peer = self.link.peer();
            // A timeout is no error: the watch is asked again (a long poll).
            let _ = self.link.caller.call(peer, watch, poll).await;
        }
        false
    }

    /// The grant, unless (correct client) the session is over on this client's clock: then
    /// the key outlived its session only because the lessor has not revoked it yet, and
    /// `session.Done()` has fired; a correct user does not use the lock.
    async fn checked_grant(&self, key: String, mine: u64) -> Acquired {
        self.sit_out_lock_delay().await;
        if self.link.params.variant == Variant::NoLeaseRecheckAfterWait {
            return self.grant(key, mine);
        }
        self.freshen_lease().await;
        if self.session_live() {
            return self.grant(key, mine);
        }
        let _ = self
            .link
            .call(Req::Delete { key }, self.link.request_budget())
            .await;
        self.end_session("it expired before the lock was ours");
        Acquired::Failed("session expired while acquiring".into())
    }

    /// Renews the lease now if less than half its TTL is left (keep-alives failed for a
    /// while, e.g. across a partition): a lock entered on the last milliseconds of a lease
    /// would be revoked under the critical section.
    async fn freshen_lease(&self) {
        let ttl = Duration::from_millis(self.link.params.lease_ttl_ms);
        let now = self.link.ctx.mono_now();
        let lease = match self.session.borrow().as_ref() {
            Some(s) if s.valid_until < now + ttl / 2 => s.lease,
            _ => return,
        };
        let answer = self.link.call(Req::KeepAlive { lease }, ttl / 3).await;
        let mut session = self.session.borrow_mut();
        match (answer, session.as_mut()) {
            (Some(Resp::KeptAlive), Some(s)) if s.lease == lease => s.valid_until = now + ttl,
            (Some(Resp::LeaseNotFound), Some(s)) if s.lease == lease => s.valid_until = now,
            _ => {}
        }
    }

    /// Waits while the cluster's lock-delay runs (if the protocol has one).
    async fn sit_out_lock_delay(&self) {
        if self.link.params.lock_delay_ms == 0 {
            return;
        }
        let budget = self.link.request_budget();
        while let Some(Resp::DelayLeft(ms)) = self.link.call(Req::LockDelay, budget).await {
            if ms == 0 {
                return;
            }
            self.link.ctx.sleep_local(Duration::from_millis(ms)).await;
        }
    }

    fn grant(&self, key: String, mine: u64) -> Acquired {
        // A session that ended while waiting (only the buggy client gets here) is no longer
        // valid: the grant is born expired, as `session.Done()` would tell.
        let valid_until = Some(
            self.session
                .borrow()
                .as_ref()
                .map_or(Duration::ZERO, |s| s.valid_until),
        );
        Acquired::Granted(Grant {
            token: Some(mine),
            valid_until,
            handle: key,
        })
    }
}

fn spawn_keep_alive(link: Rc<Link>, session: SharedSession, lease: u64) {
    let ctx = link.ctx.clone();
    let ttl = Duration::from_millis(link.params.lease_ttl_ms);
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(ttl / 3).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == lease);
            if !current(&session.borrow()) {
                return;
            }
            let sent = link.ctx.mono_now();
            let answer = link.call(Req::KeepAlive { lease }, ttl / 3).await;
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            match answer {
                Some(Resp::KeptAlive) => s.as_mut().expect("current").valid_until = sent + ttl,
                Some(Resp::LeaseNotFound) => {
                    *s = None;
                    link.ctx.note("session over: the lease is gone");
                    return;
                }
                _ if link.ctx.mono_now() >= s.as_ref().expect("current").valid_until => {
                    *s = None;
                    link.ctx.note("session over: no keep-alive within the TTL");
                    return;
                }
                _ => {}
            }
        }
    });
}

#[async_trait(?Send)]
impl LockClient for EtcdClient {
    async fn acquire(&mut self) -> Acquired {
        let p = self.link.params.clone();
        let deadline = self.link.ctx.mono_now() + Duration::from_millis(p.acquire_timeout_ms);
        let lease = match self.lease().await {
            Ok(lease) => lease,
            Err(outcome) => return outcome,
        };
        let key = format!("{PREFIX}{lease:x}");
        let req = Req::TryAcquire {
            key: key.clone(),
            lease,
        };
        let (mine, owner) = match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Acquired { mine, owner }) => (mine, owner),
            Some(Resp::LeaseNotFound) => {
                self.end_session("the lease is gone");
                return Acquired::Failed("lease not found".into());
            }
            _ => return Acquired::Unknown("no answer to the acquire transaction".into()),
        };
        if mine == owner {
            return self.checked_grant(key, mine).await;
        }
        if !self.wait_deletes(mine, deadline).await {
            let _ = self
                .link
                .call(Req::Delete { key }, self.link.request_budget())
                .await;
            return Acquired::Failed("acquire timeout while waiting".into());
        }
        self.link.ctx.point("after_wait").await;
        if p.variant != Variant::NoLeaseRecheckAfterWait {
            // The fix of #11456: make sure the session is not expired and the key still exists.
            let get = Req::Get { key: key.clone() };
            match self.link.call(get, self.link.request_budget()).await {
                Some(Resp::Key(Some(rev))) if rev == mine => {}
                Some(Resp::Key(_)) => {
                    self.end_session("the key is gone");
                    return Acquired::Failed("session expired while waiting".into());
                }
                _ => return Acquired::Unknown("no answer to the key check".into()),
            }
        }
        self.checked_grant(key, mine).await
    }

    /// The session's validity now: kept alive by keep-alives, gone with the session.
    fn validity(&mut self, grant: &Grant) -> Validity {
        let session = self.session.borrow();
        match session.as_ref() {
            Some(s) if grant.handle == format!("{PREFIX}{:x}", s.lease) => {
                Validity::Until(s.valid_until)
            }
            _ => Validity::Lost("the session is over".into()),
        }
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        let req = Req::Delete {
            key: grant.handle.clone(),
        };
        // Keep trying for a TTL (an election takes about one election timeout).
        let budget = Duration::from_millis(self.link.params.lease_ttl_ms);
        match self.link.call(req, budget).await {
            Some(Resp::Deleted) => Outcome::Ok,
            Some(other) => Outcome::Failed(format!("unexpected answer {other:?}")),
            None => {
                // The key may still be there: locking again would find it and return the
                // same revision, a token for two grants. Abandon the session instead; its
                // lease (and the key) expire on the server.
                self.end_session("the unlock got no answer: session abandoned");
                Outcome::Unknown("no answer to the delete".into())
            }
        }
    }
}
