//! The replicated tree: sessions, ephemeral sequential nodes under the lock's parent, and
//! watches on a node's deletion; a [`Service`] applied from the Raft log.

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
    /// Open a session with this timeout.
    CreateSession {
        /// In ms.
        timeout_ms: u64,
    },
    /// Touch a session: the leader after a ReadIndex confirmation; a follower at once,
    /// relaying the touch to the leader.
    Ping {
        /// The session.
        session: u64,
    },
    /// Attach a session to a new connection (`ClientCnxn`'s reconnection with the session's
    /// id): the leader touches it, or says it expired, and a follower asks the leader
    /// (`Learner.validateSession`), so a session the leader has expired is not taken back
    /// on a follower that has not yet applied its close.
    Attach {
        /// The session.
        session: u64,
    },
    /// Create `/lock/lock-<seq>` (`_c_<guid>-lock-<seq>` with a protection GUID), owned by
    /// `session`: ephemeral, or persistent (a bug: it outlives the session).
    Create {
        /// The owner.
        session: u64,
        /// Whether the node outlives its session.
        persistent: bool,
        /// Curator's protection GUID, put in the name so a retry can find the node.
        guid: Option<String>,
    },
    /// List the lock's children (linearizable unless `local_reads`).
    Children,
    /// Answer when `name` is gone, once the tree reached `min_zxid` (`exists` + watch).
    Watch {
        /// The node.
        name: String,
        /// The zxid the children were listed at.
        min_zxid: u64,
    },
    /// Answer when the children change after `min_zxid` (`getChildren` + watch, on the
    /// parent).
    WatchChildren {
        /// The zxid the children were listed at.
        min_zxid: u64,
    },
    /// Delete a node.
    Delete {
        /// The node.
        name: String,
    },
    /// Answer `Expired` when `session` closes (at once if this server holds it closed): the
    /// server closes the session's connection when it applies the close, and a client
    /// waiting on its socket (kazoo's `select`) wakes, reconnects and hears that the session
    /// expired. Nothing is sent on a real connection for it.
    AwaitClose {
        /// The session.
        session: u64,
    },
}

/// Answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    /// The server serves clients only under a leader and knows none now, or the leader
    /// changed under a read: the client tries again.
    NotLeader,
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
    /// The watched node is gone (or, for a watch on the children, they changed).
    Gone,
    /// A delete was applied.
    Deleted,
}

impl Refusal for Resp {
    fn not_leader() -> Self {
        Resp::NotLeader
    }

    fn refused(&self) -> bool {
        matches!(self, Resp::NotLeader)
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
        /// Whether the node outlives its session.
        #[serde(default)]
        persistent: bool,
        /// The protection GUID in its name.
        #[serde(default)]
        guid: Option<String>,
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
    /// The node whose deletion it waits for; `None`: any change of the children.
    name: Option<String>,
    min_zxid: u64,
}

impl Watch {
    fn due(&self, zxid: u64, nodes: &BTreeMap<String, u64>) -> bool {
        match &self.name {
            Some(name) => zxid >= self.min_zxid && !nodes.contains_key(name),
            // Only changes to the lock directory move the zxid here.
            None => zxid > self.min_zxid,
        }
    }
}

/// One server's copy of the lock directory, its session tracker and watches.
#[derive(Default)]
pub struct Tree {
    zxid: u64,
    /// The directory's sequence counter (its `cversion`).
    cversion: u64,
    /// Children: name → sequence.
    nodes: BTreeMap<String, u64>,
    /// The children that belong to no session (the `persistent` bug).
    persistent: BTreeSet<String>,
    /// Sessions: timeout and ephemeral nodes.
    sessions: BTreeMap<u64, (Duration, BTreeSet<String>)>,
    /// While leading: each session's expiry on this server's monotonic clock.
    expiry: BTreeMap<u64, Duration>,
    watches: Vec<Watch>,
    /// Held [`Req::AwaitClose`]s: (client, request id, session).
    closes: Vec<(NodeIdx, u64, u64)>,
    pushes: Vec<(NodeIdx, u64, Resp)>,
    /// The server's `tickTime`: the width of a session-expiry bucket (zero: exact expiry).
    tick_time: Duration,
    /// Child listings answered from this server's applied state, leader or not
    /// (ZooKeeper's reads); `false`: after the leader confirmed its commit index (ReadIndex).
    local_reads: bool,
}

impl Tree {
    /// An empty tree whose session tracker expires sessions in buckets of `tick_time`.
    pub fn new(tick_time: Duration) -> Self {
        Tree {
            tick_time,
            ..Tree::default()
        }
    }

    /// The same tree answering child listings from its own applied state, as a ZooKeeper
    /// server answers a read of a client connected to it: a follower that has not yet
    /// applied a session's close still lists that session's ephemeral nodes.
    pub fn with_local_reads(mut self, local_reads: bool) -> Self {
        self.local_reads = local_reads;
        self
    }

    /// The children by sequence, and the zxid they are read at.
    fn children(&self) -> Resp {
        // Sorted by sequence, as the recipe sorts them (a GUID prefix would sort them by
        // name otherwise).
        let mut children: Vec<(String, u64)> =
            self.nodes.iter().map(|(n, s)| (n.clone(), *s)).collect();
        children.sort_by_key(|(_, seq)| *seq);
        Resp::Children(children, self.zxid)
    }

    /// When a session touched now with `timeout` expires: ZooKeeper's
    /// `ExpiryQueue.roundToNextInterval` (`(t / tick + 1) * tick`) puts it at the end of its
    /// tick bucket, so the tracker wakes once a tick and expires a whole bucket; a session
    /// lives between its timeout and a tick more.
    pub fn expiry_after(&self, now: Duration, timeout: Duration) -> Duration {
        let t = now + timeout;
        if self.tick_time.is_zero() {
            return t;
        }
        let tick = self.tick_time.as_nanos();
        let bucket = Duration::from_nanos(((t.as_nanos() / tick + 1) * tick) as u64);
        assert!(
            bucket > t && bucket <= t + self.tick_time,
            "rounded up by at most a tick"
        );
        bucket
    }

    /// Holds the request until the watch fires (at once if it is due already).
    fn watch(
        &mut self,
        name: Option<String>,
        min_zxid: u64,
        env: &Env,
    ) -> Handling<Cmd, Req, Resp> {
        self.watches.push(Watch {
            from: env.from,
            id: env.id,
            name,
            min_zxid,
        });
        self.fire_watches();
        Handling::Hold
    }

    /// Holds the request until `session` closes (answers at once if it is not open here).
    fn await_close(&mut self, session: u64, env: &Env) -> Handling<Cmd, Req, Resp> {
        if !self.sessions.contains_key(&session) {
            return Handling::Reply(Resp::Expired);
        }
        self.closes.push((env.from, env.id, session));
        Handling::Hold
    }

    /// Every node is the ephemeral of exactly one live session and every ephemeral exists:
    /// a session's ephemerals go with it. The tracker follows only live sessions.
    fn assert_sessions(&self) {
        let mut ephemerals = 0;
        for (_, names) in self.sessions.values() {
            ephemerals += names.len();
            assert!(
                names.iter().all(|n| self.nodes.contains_key(n)),
                "an ephemeral exists"
            );
        }
        assert!(
            self.persistent.iter().all(|n| self.nodes.contains_key(n)),
            "a persistent node exists"
        );
        assert_eq!(
            ephemerals + self.persistent.len(),
            self.nodes.len(),
            "every node is persistent or has one session"
        );
        assert!(
            self.expiry.keys().all(|s| self.sessions.contains_key(s)),
            "the tracker never follows a closed session"
        );
    }

    fn delete(&mut self, name: &str) -> bool {
        if self.nodes.remove(name).is_none() {
            return false;
        }
        for (_, ephemerals) in self.sessions.values_mut() {
            ephemerals.remove(name);
        }
        self.persistent.remove(name);
        true
    }

    fn fire_watches(&mut self) {
        let (zxid, nodes) = (self.zxid, &self.nodes);
        let (due, waiting): (Vec<Watch>, Vec<Watch>) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|w| w.due(zxid, nodes));
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
        let closed = self.closes.extract_if(.., |(_, _, s)| *s == session);
        (self.pushes).extend(closed.map(|(from, id, _)| (from, id, Resp::Expired)));
        assert!(
            !self.expiry.contains_key(&session),
            "closed: never touched again"
        );
        Resp::Deleted
    }

    /// A follower answers a ping itself, from the sessions it has applied, and relays the
    /// touch to the leader (`LearnerSessionTracker` passes its touches on with its next ping
    /// of the leader; here one relay a ping). A session whose close this follower applied
    /// has expired.
    fn ping_on_follower(&self, session: u64) -> Handling<Cmd, Req, Resp> {
        match self.sessions.contains_key(&session) {
            true => Handling::Relay(Resp::Pong, session.to_le_bytes().to_vec()),
            false => Handling::Reply(Resp::Expired),
        }
    }

    /// The leader's session tracker touches `session` (unless it expired: its close is on
    /// its way through the log).
    fn touch(&mut self, session: u64, env: &Env) -> Resp {
        let Some((timeout, _)) = self.sessions.get(&session) else {
            return Resp::Expired;
        };
        if self.expired(session, env) {
            return Resp::Expired;
        }
        let until = self.expiry_after(env.ctx.mono_now(), *timeout);
        self.expiry.insert(session, until);
        Resp::Pong
    }

    /// Whether the leader's session tracker holds `session` expired.
    fn expired(&self, session: u64, env: &Env) -> bool {
        self.expiry
            .get(&session)
            .is_some_and(|until| *until <= env.ctx.mono_now())
    }

    fn create(&mut self, session: u64, persistent: bool, guid: Option<String>) -> Resp {
        let Some((_, ephemerals)) = self.sessions.get_mut(&session) else {
            return Resp::Expired;
        };
        self.zxid += 1;
        self.cversion += 1;
        let seq = self.cversion;
        assert!(
            self.nodes.values().all(|s| *s < seq),
            "sequence numbers (the fencing tokens) grow"
        );
        let name = format!("{}{seq:010}", node_prefix(guid.as_deref()));
        if persistent {
            self.persistent.insert(name.clone());
        } else {
            ephemerals.insert(name.clone());
        }
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
            Req::Create {
                session,
                persistent,
                guid,
            } => Handling::Propose(Cmd::Create {
                session,
                persistent,
                guid,
            }),
            Req::Delete { name } => Handling::Propose(Cmd::Delete { name }),
            Req::Children if self.local_reads => Handling::Reply(self.children()),
            Req::Ping { session } if !env.leader => self.ping_on_follower(session),
            Req::Attach { .. } if !env.leader => Handling::Forward(req),
            Req::Ping { .. } | Req::Attach { .. } | Req::Children => Handling::Read(req),
            Req::Watch { name, min_zxid } => self.watch(Some(name), min_zxid, env),
            Req::WatchChildren { min_zxid } => self.watch(None, min_zxid, env),
            Req::AwaitClose { session } => self.await_close(session, env),
        }
    }

    fn apply(&mut self, cmd: Cmd, env: &Env) -> Resp {
        let zxid_before = self.zxid;
        let resp = match cmd {
            Cmd::CreateSession {
                session,
                timeout_ms,
            } => {
                let timeout = Duration::from_millis(timeout_ms);
                self.sessions.insert(session, (timeout, BTreeSet::new()));
                if env.leader {
                    let until = self.expiry_after(env.ctx.mono_now(), timeout);
                    self.expiry.insert(session, until);
                }
                Resp::Session(session)
            }
            Cmd::CloseSession { session } => self.close_session(session, env),
            Cmd::Create {
                session,
                persistent,
                guid,
            } => self.create(session, persistent, guid),
            Cmd::Delete { name } => {
                if self.delete(&name) {
                    self.zxid += 1;
                }
                Resp::Deleted
            }
        };
        assert!(self.zxid >= zxid_before, "zxids only grow");
        self.assert_sessions();
        self.fire_watches();
        resp
    }

    fn read(&mut self, req: Req, env: &Env) -> Resp {
        match req {
            // A leader's read (a follower answers pings itself, and forwards an attach).
            Req::Ping { session } | Req::Attach { session } => {
                assert!(
                    env.leader,
                    "a ping or an attach is read only where it reached the leader"
                );
                self.touch(session, env)
            }
            Req::Children => self.children(),
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
            let renewed: Vec<(u64, Duration)> = (self.sessions.iter())
                .map(|(session, (timeout, _))| (*session, self.expiry_after(now, *timeout)))
                .collect();
            self.expiry.extend(renewed);
        }
    }

    /// A follower's relayed ping: the session is touched.
    fn relayed(&mut self, relay: &[u8], env: &Env) {
        let session = u64::from_le_bytes(relay.try_into().expect("a relayed session id"));
        self.touch(session, env);
    }

    fn take_pushes(&mut self) -> Vec<(NodeIdx, u64, Resp)> {
        std::mem::take(&mut self.pushes)
    }
}

/// A lock node's name before the sequence number the server appends (ten digits): Curator's
/// `_c_GUID-lock-` with its protection, the recipe's `lock-` without. Live mode's link
/// creates its nodes by it.
pub fn node_prefix(guid: Option<&str>) -> String {
    match guid {
        Some(guid) => format!("_c_{guid}-lock-"),
        None => "lock-".to_owned(),
    }
}
