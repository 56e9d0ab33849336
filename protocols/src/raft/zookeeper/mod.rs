//! `zookeeper`: ZooKeeper's lock recipe (ephemeral sequential nodes, each waiter watching
//! only the next-lower one) with sessions, on the same replicated-log host as `etcd`
//! ([`crate::raft`]).
//!
//! How the real system works (ZooKeeper Programmer's Guide, "ZooKeeper Sessions" and
//! "Recipes and Solutions: Locks"; Curator's `InterProcessMutex` and Tech Note 10):
//! - **Sessions.** A client's session has a timeout; the client sends a ping when it has been
//!   idle for a third of it. The leader's session tracker expires a session nobody touched
//!   for the timeout and proposes `closeSession` through the atomic broadcast, which deletes
//!   the session's ephemeral nodes on every server. A new leader gives every session a fresh
//!   timeout.
//! - **Connection states.** A client that hears nothing for two thirds of the timeout
//!   considers its connection lost (`Disconnected`; Curator: `SUSPENDED`) and tries other
//!   servers; within the timeout its session may still be alive (`RECONNECTED`), after it the
//!   server answers `Expired` (Curator: `LOST`). Curator's advice: on `SUSPENDED`, assume the
//!   lock may be lost until `RECONNECTED`.
//! - **Lock recipe.** Create `/lock/lock-` with `EPHEMERAL_SEQUENTIAL` (the server appends a
//!   monotonically increasing 10-digit sequence), list the children; the lowest sequence holds
//!   the lock; otherwise `exists` with a watch on the next-lower node only (no herd effect),
//!   and list again when it is deleted. Unlock deletes the node. The sequence (or the node's
//!   creation zxid) is a fencing token.
//!
//! How it breaks (reproducible here):
//! - **Session expiry during a pause** (Curator Tech Note 10): a holder paused past its
//!   session timeout loses its ephemeral node; the next waiter takes the lock; the paused
//!   holder wakes and writes. The sequence as token and a fencing resource stop the write.
//! - **Ignoring `SUSPENDED`** (bug variant `ignore-suspended`): the client keeps writing
//!   while it cannot reach the ensemble, trusting the lock until it hears `Expired`, which it
//!   cannot hear while cut off; its session expires meanwhile.
//!
//! What the model keeps and leaves out: ZooKeeper replicates with Zab, not Raft; both are a
//! leader-based, totally ordered log with majority commit, and the recipe depends only on
//! that. Pings go to the leader (confirmed by ReadIndex) instead of to the connected server,
//! which in ZooKeeper relays session touches to the leader. Left out: the data tree beyond one
//! lock directory, ACLs, observers, local sessions, `sync`.

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

/// Correct client, or a known bug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Treats a suspended connection as "may no longer hold the lock" (Curator's advice).
    #[default]
    Correct,
    /// Trusts the lock until it hears that the session expired.
    IgnoreSuspended,
}

/// The `[protocol]` parameters of `zookeeper`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Number of servers (3 or 5).
    #[serde(default = "d_peers")]
    pub peers: usize,
    /// The session timeout, in ms.
    #[serde(default = "d_session_timeout")]
    pub session_timeout_ms: u64,
    /// Correct, or a bug.
    #[serde(default)]
    pub variant: Variant,
    /// Length of a tick of the replicated log, in ms.
    #[serde(default = "d_tick")]
    pub tick_ms: u64,
    /// Election timeout in ticks.
    #[serde(default = "d_election_ticks")]
    pub election_ticks: usize,
    /// Timeout of one request, in ms.
    #[serde(default = "d_request_timeout")]
    pub request_timeout_ms: u64,
    /// How long one watch waits before the client asks again, in ms.
    #[serde(default = "d_watch_poll")]
    pub watch_poll_ms: u64,
    /// Give up acquiring after this long, in ms (the waiter deletes its node).
    #[serde(default = "d_acquire_timeout")]
    pub acquire_timeout_ms: u64,
}

fn d_peers() -> usize {
    3
}
fn d_session_timeout() -> u64 {
    3_000
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
        if self.session_timeout_ms < 3 {
            return Err(ParamError::field(
                "session_timeout_ms",
                "must be at least 3",
            ));
        }
        self.host().validate(&[
            ("request_timeout_ms", self.request_timeout_ms),
            ("watch_poll_ms", self.watch_poll_ms),
        ])
    }

    fn host(&self) -> HostConfig {
        HostConfig::named("zk", self.peers, self.tick_ms, self.election_ticks, false)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }
}

/// The `zookeeper` protocol.
pub struct ZooKeeper;

impl Protocol for ZooKeeper {
    fn id(&self) -> &'static str {
        "zookeeper"
    }

    fn summary(&self) -> &'static str {
        "ZooKeeper's lock recipe: sessions, ephemeral sequential nodes, watch the next-lower"
    }

    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError> {
        let params: Params = parse_params(params)?;
        params.validate()?;
        Ok(Box::new(ZkDeployment { params }))
    }
}

struct ZkDeployment {
    params: Params,
}

impl Deployment for ZkDeployment {
    fn servers(&self) -> Vec<String> {
        self.params.host().peers
    }

    fn points(&self) -> Vec<(String, &'static str)> {
        self.servers()
            .into_iter()
            .map(|s| (s, "before_apply"))
            .collect()
    }

    fn roles(&self) -> Vec<&'static str> {
        vec![ROLE_LEADER]
    }

    fn start(&self, world: &World) -> Arc<dyn Connector> {
        let cluster = start_cluster(world, self.params.host(), true, |_ctx| Tree::default());
        Arc::new(ZkConnector {
            net: cluster.clients,
            peers: cluster.peers,
            params: self.params.clone(),
        })
    }
}

// ---- the replicated tree ----

/// Client requests.
#[derive(Clone, Debug)]
pub enum Req {
    /// Open a session with this timeout.
    CreateSession {
        /// In ms.
        timeout_ms: u64,
    },
    /// Touch a session (leader, after a ReadIndex confirmation).
    Ping {
        /// The session.
        session: u64,
    },
    /// Create `/lock/lock-<seq>`, ephemeral, owned by `session`.
    Create {
        /// The owner.
        session: u64,
    },
    /// List the lock's children (linearizable).
    Children,
    /// Answer when `name` is gone, once the tree reached `min_zxid` (`exists` + watch).
    Watch {
        /// The node.
        name: String,
        /// The zxid the children were listed at.
        min_zxid: u64,
    },
    /// Delete a node.
    Delete {
        /// The node.
        name: String,
    },
}

/// Answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    /// Ask another server (this one, from 0, if known).
    NotLeader(Option<usize>),
    /// A session was opened.
    Session(u64),
    /// The session was touched.
    Pong,
    /// No such session: it expired.
    Expired,
    /// The node created, and its sequence.
    Created(String, u64),
    /// The children by sequence, and the zxid they were read at.
    Children(Vec<(String, u64)>, u64),
    /// The watched node is gone.
    Gone,
    /// A delete was applied.
    Deleted,
}

impl Redirect for Resp {
    fn redirect(&self) -> Option<Option<usize>> {
        match self {
            Resp::NotLeader(hint) => Some(*hint),
            _ => None,
        }
    }
}

/// Commands in the log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Cmd {
    /// A session.
    CreateSession {
        /// Its id.
        session: u64,
        /// Its timeout, in ms.
        timeout_ms: u64,
    },
    /// The leader's session tracker expired it.
    CloseSession {
        /// The session.
        session: u64,
    },
    /// See [`Req::Create`].
    Create {
        /// The owner.
        session: u64,
    },
    /// Delete a node.
    Delete {
        /// The node.
        name: String,
    },
}

struct Watch {
    from: NodeIdx,
    id: u64,
    name: String,
    min_zxid: u64,
}

/// One server's copy of the lock directory, its session tracker and watches.
#[derive(Default)]
struct Tree {
    zxid: u64,
    /// The directory's sequence counter (its `cversion`).
    cversion: u64,
    /// Children: name → sequence.
    nodes: BTreeMap<String, u64>,
    /// Sessions: timeout and ephemeral nodes.
    sessions: BTreeMap<u64, (Duration, BTreeSet<String>)>,
    /// While leading: each session's expiry on this server's monotonic clock.
    expiry: BTreeMap<u64, Duration>,
    watches: Vec<Watch>,
    pushes: Vec<(NodeIdx, u64, Resp)>,
}

impl Tree {
    fn delete(&mut self, name: &str) -> bool {
        if self.nodes.remove(name).is_none() {
            return false;
        }
        for (_, ephemerals) in self.sessions.values_mut() {
            ephemerals.remove(name);
        }
        true
    }

    fn fire_watches(&mut self) {
        let (zxid, nodes) = (self.zxid, &self.nodes);
        let (due, waiting): (Vec<Watch>, Vec<Watch>) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|w| zxid >= w.min_zxid && !nodes.contains_key(&w.name));
        self.watches = waiting;
        self.pushes
            .extend(due.into_iter().map(|w| (w.from, w.id, Resp::Gone)));
    }

    fn close_session(&mut self, session: u64, env: &Env) -> Resp {
        self.expiry.remove(&session);
        let Some((_, ephemerals)) = self.sessions.remove(&session) else {
            return Resp::Expired;
        };
        if env.leader {
            env.ctx.event(
                "session_expired",
                None,
                format!("session {session:x} expired: closed through the log"),
            );
        }
        self.zxid += 1;
        for name in ephemerals {
            self.nodes.remove(&name);
        }
        Resp::Deleted
    }

    /// Whether the leader's session tracker holds `session` expired.
    fn expired(&self, session: u64, env: &Env) -> bool {
        self.expiry
            .get(&session)
            .is_some_and(|until| *until <= env.ctx.mono_now())
    }

    fn create(&mut self, session: u64) -> Resp {
        let Some((_, ephemerals)) = self.sessions.get_mut(&session) else {
            return Resp::Expired;
        };
        self.zxid += 1;
        self.cversion += 1;
        let seq = self.cversion;
        let name = format!("lock-{seq:010}");
        ephemerals.insert(name.clone());
        self.nodes.insert(name.clone(), seq);
        Resp::Created(name, seq)
    }
}

impl Service for Tree {
    type Req = Req;
    type Resp = Resp;
    type Cmd = Cmd;

    fn handle(&mut self, req: Req, env: &Env) -> Handling<Cmd, Req, Resp> {
        match req {
            Req::CreateSession { timeout_ms } => {
                let session = madsim::rand::thread_rng().gen::<u64>() >> 1;
                Handling::Propose(Cmd::CreateSession {
                    session,
                    timeout_ms,
                })
            }
            Req::Create { session } => Handling::Propose(Cmd::Create { session }),
            Req::Delete { name } => Handling::Propose(Cmd::Delete { name }),
            Req::Ping { .. } | Req::Children => Handling::Read(req),
            Req::Watch { name, min_zxid } => {
                self.watches.push(Watch {
                    from: env.from,
                    id: env.id,
                    name,
                    min_zxid,
                });
                self.fire_watches();
                Handling::Hold
            }
        }
    }

    fn apply(&mut self, cmd: Cmd, env: &Env) -> Resp {
        let resp = match cmd {
            Cmd::CreateSession {
                session,
                timeout_ms,
            } => {
                let timeout = Duration::from_millis(timeout_ms);
                self.sessions.insert(session, (timeout, BTreeSet::new()));
                if env.leader {
                    self.expiry.insert(session, env.ctx.mono_now() + timeout);
                }
                Resp::Session(session)
            }
            Cmd::CloseSession { session } => self.close_session(session, env),
            Cmd::Create { session } => self.create(session),
            Cmd::Delete { name } => {
                if self.delete(&name) {
                    self.zxid += 1;
                }
                Resp::Deleted
            }
        };
        self.fire_watches();
        resp
    }

    fn read(&mut self, req: Req, env: &Env) -> Resp {
        match req {
            Req::Ping { session } => match self.sessions.get(&session) {
                // Expired here, its closeSession is on its way through the log: ZooKeeper's
                // session tracker no longer lets it be touched.
                Some(_) if env.leader && self.expired(session, env) => Resp::Expired,
                Some((timeout, _)) if env.leader => {
                    self.expiry.insert(session, env.ctx.mono_now() + *timeout);
                    Resp::Pong
                }
                Some(_) => Resp::NotLeader(None),
                None => Resp::Expired,
            },
            Req::Children => {
                let children = self.nodes.iter().map(|(n, s)| (n.clone(), *s)).collect();
                Resp::Children(children, self.zxid)
            }
            other => unreachable!("not a read: {other:?}"),
        }
    }

    fn tick(&mut self, env: &Env) -> Vec<Cmd> {
        if !env.leader {
            return vec![];
        }
        let now = env.ctx.mono_now();
        self.expiry
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(session, _)| Cmd::CloseSession { session: *session })
            .collect()
    }

    fn role_changed(&mut self, env: &Env) {
        self.expiry.clear();
        if env.leader {
            // A new leader's session tracker starts every session afresh.
            let now = env.ctx.mono_now();
            for (session, (timeout, _)) in &self.sessions {
                self.expiry.insert(*session, now + *timeout);
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

struct ZkConnector {
    net: locksim_sim::Net<locksim_sim::rpc::Wire<Req, Resp>>,
    peers: Vec<NodeIdx>,
    params: Params,
}

impl Connector for ZkConnector {
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient> {
        let timeout = Duration::from_millis(self.params.request_timeout_ms);
        let link = Link::new(ctx, &self.net, &self.peers, self.params.clone(), timeout);
        Box::new(ZkClient {
            link: Rc::new(link),
            session: Rc::default(),
        })
    }
}

type Link = RaftLink<Req, Resp, Params>;

/// A session as the client sees it.
struct Session {
    id: u64,
    /// When the last ping that was answered was sent (local clock).
    heard: Duration,
    /// Whether the client already noted its connection lost.
    suspended: bool,
}

type SharedSession = Rc<RefCell<Option<Session>>>;

/// The client library: a session kept alive by pings, and the lock recipe.
pub struct ZkClient {
    link: Rc<Link>,
    session: SharedSession,
}

impl ZkClient {
    async fn session(&mut self) -> Result<u64, Acquired> {
        if let Some(s) = self.session.borrow().as_ref() {
            return Ok(s.id);
        }
        let sent = self.link.ctx.mono_now();
        let req = Req::CreateSession {
            timeout_ms: self.link.params.session_timeout_ms,
        };
        match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Session(id)) => {
                *self.session.borrow_mut() = Some(Session {
                    id,
                    heard: sent,
                    suspended: false,
                });
                spawn_pinger(self.link.clone(), self.session.clone(), id);
                Ok(id)
            }
            _ => Err(Acquired::Unknown("no answer to createSession".into())),
        }
    }

    fn end_session(&self, why: &str) {
        if self.session.borrow_mut().take().is_some() {
            self.link.ctx.note(format!("session over: {why}"));
        }
    }

    /// The recipe's loop: list the children, hold the lock if ours is the lowest, else watch
    /// the next-lower node. `None` if our node is gone or time ran out.
    async fn wait_turn(&self, mine: &str, deadline: Duration) -> Option<()> {
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        while self.link.ctx.mono_now() < deadline {
            let Some(Resp::Children(children, zxid)) = self
                .link
                .call(Req::Children, self.link.request_budget())
                .await
            else {
                continue;
            };
            let position = children.iter().position(|(name, _)| name == mine)?;
            let Some(position) = position.checked_sub(1) else {
                return Some(());
            };
            let watch = Req::Watch {
                name: children[position].0.clone(),
                min_zxid: zxid,
            };
            // A timeout is no error: the watch is asked again (a long poll).
            let _ = self.link.caller.call(self.link.peer(), watch, poll).await;
        }
        None
    }

    async fn delete(&self, name: String) -> Option<Resp> {
        let budget = self.link.params.timeout();
        self.link.call(Req::Delete { name }, budget).await
    }
}

fn spawn_pinger(link: Rc<Link>, session: SharedSession, id: u64) {
    let ctx = link.ctx.clone();
    let timeout = link.params.timeout();
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(timeout / 3).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.id == id);
            if !current(&session.borrow()) {
                return;
            }
            let sent = link.ctx.mono_now();
            let answer = link.call(Req::Ping { session: id }, timeout / 3).await;
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            let live = s.as_mut().expect("current");
            match answer {
                Some(Resp::Pong) => {
                    if std::mem::take(&mut live.suspended) {
                        link.ctx.note("connection restored: session alive");
                    }
                    live.heard = sent;
                }
                Some(Resp::Expired) => {
                    *s = None;
                    link.ctx.note("session expired (LOST)");
                    return;
                }
                _ if !live.suspended && link.ctx.mono_now() >= live.heard + timeout * 2 / 3 => {
                    live.suspended = true;
                    link.ctx.note("connection lost (SUSPENDED)");
                }
                _ => {}
            }
        }
    });
}

#[async_trait(?Send)]
impl LockClient for ZkClient {
    async fn acquire(&mut self) -> Acquired {
        let deadline =
            self.link.ctx.mono_now() + Duration::from_millis(self.link.params.acquire_timeout_ms);
        let session = match self.session().await {
            Ok(id) => id,
            Err(outcome) => return outcome,
        };
        let create = Req::Create { session };
        let (name, seq) = match self.link.call(create, self.link.request_budget()).await {
            Some(Resp::Created(name, seq)) => (name, seq),
            Some(Resp::Expired) => {
                self.end_session("expired");
                return Acquired::Failed("session expired".into());
            }
            _ => return Acquired::Unknown("no answer to create".into()),
        };
        if self.wait_turn(&name, deadline).await.is_none() {
            let _ = self.delete(name).await;
            return Acquired::Failed("gave up waiting (or the node is gone)".into());
        }
        let grant = Grant {
            token: Some(seq),
            valid_until: None,
            handle: name,
        };
        if !self.validity(&grant).holds_at(self.link.ctx.mono_now()) {
            let _ = self.delete(grant.handle).await;
            return Acquired::Failed("connection lost while acquiring".into());
        }
        Acquired::Granted(grant)
    }

    /// Correct: the lock holds while the connection does (two thirds of the timeout after
    /// the last answered ping); `ignore-suspended`: until the client hears `Expired`.
    fn validity(&mut self, _grant: &Grant) -> Validity {
        let session = self.session.borrow();
        let Some(s) = session.as_ref() else {
            return Validity::Lost("the session expired".into());
        };
        match self.link.params.variant {
            Variant::Correct => Validity::Until(s.heard + self.link.params.timeout() * 2 / 3),
            Variant::IgnoreSuspended => Validity::Indefinite,
        }
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        match self.delete(grant.handle.clone()).await {
            Some(Resp::Deleted) => Outcome::Ok,
            Some(other) => Outcome::Failed(format!("unexpected answer {other:?}")),
            None => {
                // Our node may still be there: leave it to the session's expiry.
                self.end_session("the delete got no answer: session abandoned");
                Outcome::Unknown("no answer to the delete".into())
            }
        }
    }
}
