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
//!   timeout. The tracker works in ticks (`tickTime`, `ZooKeeperServer.java`): a session's
//!   timeout must lie within 2 and 20 ticks (the server negotiates it into that range), and
//!   `ExpiryQueue.java` rounds each expiry up to the end of its tick bucket
//!   (`roundToNextInterval`), waking once a tick to expire a whole bucket.
//! - **Connection states.** A client that hears nothing for two thirds of the timeout, or
//!   whose server closes its connection (the server's process died; a follower that loses
//!   its leader closes every client connection, `Learner.shutdown` → `closeAllConnections`),
//!   considers its connection lost (`Disconnected`; Curator: `SUSPENDED`) and tries other
//!   servers; within the timeout its session may still be alive (`RECONNECTED`), after it the
//!   server answers `Expired` (Curator: `LOST`). Curator's advice: on `SUSPENDED`, assume the
//!   lock may be lost until `RECONNECTED`. `ClientCnxn` reconnects after a random sleep below
//!   a second, each try bounded by the connect timeout (session timeout / servers), and the
//!   server's answer to the `ConnectRequest` tells at once whether the session lives: the
//!   first connection after a heal learns `Expired`. Requests made while Disconnected wait
//!   in `ClientCnxn`'s outgoing queue and go once the connection is back.
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
//! - **The recipe's known mistakes** (bug variants): `watch-parent` (every waiter watches the
//!   parent: each change wakes them all, the herd effect), `persistent` (persistent nodes: a
//!   dead holder never lets go), `check-then-create` (create only after seeing no children,
//!   then hold: two steps, not atomic).
//! - **Client libraries** ([`profile`]): the raw client hears `Expired` only from a server;
//!   Curator injects `LOST` a session timeout after `SUSPENDED` even while cut off, and finds
//!   a create whose reply was lost by its protection GUID.
//! - **An acquire carried into a new session** (CURATOR-604, apache/curator#1121;
//!   CURATOR-498, apache/curator#1018): Curator's retry loop counts `SESSIONEXPIRED` as
//!   retryable (`RetryLoop`), so an `InterProcessMutex` acquire whose session expired goes on
//!   in the session of a new ZooKeeper handle with the name, protection GUID included, of the
//!   node it already created (`findProtectedNodeInForeground` after a lost create, or the
//!   lock loop's `getChildren`). A ZooKeeper server answers reads from its own state
//!   (Programmer's Guide, "Consistency Guarantees": a client may see a stale view; `sync`
//!   catches its server up), and the leader's session tracker closes a session through the
//!   atomic broadcast, which a follower applies after the leader. So the follower the client
//!   reconnected to can still list the dead session's node, which the leader has already
//!   deleted and given the lock away for: Curator takes it as its own, and if it is the
//!   lowest, holds the lock beside the new holder (`session_retry = "by-guid"`, with
//!   `local_reads`). The same happens on any server while the servers still keep the old
//!   session (CURATOR-604's "about to be deleted lock node of previous session": Curator
//!   injects LOST on its own clock, and a new leader gives every session a fresh timeout):
//!   the node is listed until the old session expires, and the next waiter then gets the
//!   lock. The fix checks the node's owner against the current session
//!   (`ProtectedMode.validateFoundNode`, the fix of CURATOR-498; the `ephemeralOwner` check of
//!   LeaderLatch, CURATOR-696, which CURATOR-604 asks for in the lock):
//!   `session_retry = "owner-checked"`.
//!
//! What the model keeps and leaves out: ZooKeeper's election is Fast Leader Election, which
//! a follower starts as soon as its socket to the dead leader closes and which settles after
//! 200 ms; the Raft host's followers do the same when the leader's process dies
//! ([`crate::raft::host::HostConfig::electing_when_the_leader_dies`]). A follower that
//! hears nothing from a live leader drops it after `syncLimit` ticks of `tickTime`
//! (`sync_limit_ticks`; the read timeout `Learner.syncWithLeader` sets on its socket, and a
//! leader that hears from no quorum for as long steps down); the model's Raft times out
//! after the same span, each follower one tick later per follower of a higher id, so the
//! highest campaigns first and wins in one round, as Fast Leader Election elects it
//! ([`crate::raft::host::HostConfig::timing_out_by_rank`]; a Raft leader checks its quorum
//! once an election timeout, so an isolated leader steps down up to twice that after the
//! cut). Until then a cut-off follower answers its clients' pings from its own session
//! table while the leader expires their sessions: a session shorter than `syncLimit` ×
//! `tickTime` and a ping interval can be granted to another before its holder hears a word
//! (`zookeeper-sync-limit-past-session`). The tracker's buckets (`tick_time_ms`, by default a
//! tenth of the session timeout) are looked at on every tick of the replicated log
//! (`tick_ms`), so a bucket expires up to one such tick late. ZooKeeper replicates with Zab,
//! not Raft; both are a leader-based, totally ordered log with majority commit, and the
//! recipe depends only on that. A client is connected to one server (first `ctx.idx() %
//! peers`, so clients spread over the ensemble; each reconnection tries the next one, as
//! `StaticHostProvider` does, passing over a server that is down or has no leader), and its
//! connection closes when that server's process dies or the server loses its leader
//! ([`crate::raft::host::HostConfig::closing_clients_when_leaderless`]; a cut-off follower
//! after `syncLimit` ticks, above). Every request goes on that
//! connection, to that server, as in ZooKeeper: a follower answers a ping itself from the
//! sessions it has applied and relays the touch to the leader (one relay a ping, where
//! `LearnerSessionTracker` passes its touches on with its next ping of the leader); it
//! forwards a write, a session's creation included, to the leader and answers once it has
//! applied it (`FollowerRequestProcessor`, `CommitProcessor`), so a session's later reads
//! there come after its writes and after all the log held before them (a dead session's
//! close among it); watches are set, and fire, on that server. A request waits on its
//! connection until it is answered or the connection is lost (`ConnectionLoss`: the server
//! closed it, or the pinger heard nothing for two thirds of the timeout), at most a session
//! timeout; the library's retry goes on the next connection. A client cut off from its own
//! server alone is suspended by its pings' silence and moves on; one cut off from the leader
//! alone is served by its own server. Child listings are linearizable by default (the
//! server asks the leader for its commit index, ReadIndex, and answers once it applied up to
//! it), which no ZooKeeper read is; with `local_reads` the server answers them from its own
//! applied state, as ZooKeeper does. The catalog's CURATOR-604 files
//! (`zookeeper-curator-604-*`) read linearizably and open the
//! new session while the servers still keep the old one (a new leader's fresh timeouts):
//! its node is listed because it still exists. A reconnection that learns of an expired
//! session is an attach answered `Expired` before the next request (`ClientCnxn`
//! re-attaching the session; a follower asks the leader, `Learner.validateSession`, whose
//! tracker says expired once the session's expiry has passed, before its close is applied
//! anywhere; a follower that answered from its own applied state took back a session the
//! leader had expired but not yet closed, and its holder overlapped the next when the close
//! came); with `session_retry` the client then opens a
//! new session and goes on. The owner check compares the session that created the node,
//! which the client knows, with the current one, instead of reading the node's
//! `ephemeralOwner` from the server: the same answer for the client's own nodes. Left out:
//! the data tree beyond one lock directory, ACLs, observers, local sessions, `sync`.

pub mod client;
pub mod params;
pub mod profile;
pub mod tree;

use crate::protocol::{ClientProfile, ParamError, Protocol};
use crate::raft::client::Link;
use crate::raft::host::{start_cluster, Cluster};
use client::ZkClient;
use locksim_sim::nemesis::ROLE_LEADER;
use locksim_sim::{NodeCtx, World};
pub use params::{Params, Variant};
use std::time::Duration;
use tree::{Req, Resp, Tree};

/// The `zookeeper` protocol.
#[derive(Clone, Copy, Debug)]
pub struct ZooKeeper;

impl Protocol for ZooKeeper {
    const ID: &'static str = "zookeeper";
    const SUMMARY: &'static str =
        "ZooKeeper's lock recipe: sessions, ephemeral sequential nodes, watch the next-lower";
    type Params = Params;
    type Servers = Cluster<Req, Resp>;
    type Client = ZkClient;

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        params.validate()
    }

    fn clients(&self) -> Vec<ClientProfile> {
        profile::profiles()
    }

    fn lease_ms(&self, params: &Params) -> Option<u64> {
        Some(params.session_timeout_ms)
    }

    fn servers(&self, params: &Params) -> Vec<String> {
        params.host().peers
    }

    fn points(&self, params: &Params) -> Vec<(String, &'static str)> {
        let mut points: Vec<(String, &'static str)> = (self.servers(params).into_iter())
            .map(|s| (s, "before_apply"))
            .collect();
        if params.variant == Variant::CheckThenCreate {
            points.push(("client".into(), client::CHECK_THEN_CREATE_POINT));
        }
        points
    }

    fn roles(&self, _: &Params) -> Vec<&'static str> {
        vec![ROLE_LEADER]
    }

    fn start(&self, params: &Params, world: &World) -> Cluster<Req, Resp> {
        let (tick_time, local) = (params.tick_time(), params.local_reads);
        start_cluster(world, params.host(), true, move |_ctx| {
            Tree::new(tick_time).with_local_reads(local)
        })
    }

    fn connect(&self, params: &Params, cluster: &Cluster<Req, Resp>, ctx: &NodeCtx) -> ZkClient {
        let timeout = Duration::from_millis(params.request_timeout_ms);
        let link = Link::new(
            ctx,
            &cluster.clients,
            &cluster.peers,
            params.clone(),
            timeout,
        );
        ZkClient::new(link)
    }
}
