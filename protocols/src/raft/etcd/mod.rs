//! `etcd`: etcd's lock recipe (`clientv3/concurrency`'s `Session` and `Mutex`) on a Raft
//! replicated key-value store with etcd's lessor ([`crate::raft`] hosts the peers).
//!
//! How the real system works (etcd `server/lease/lessor.go`, `client/v3/concurrency/
//! session.go` and `mutex.go`, `client/v3/lease.go`):
//! - **Leases.** `LeaseGrant` goes through the Raft log; only the leader's lessor tracks
//!   expiry. It checks every 500 ms (on a timer of its own, whose phase the model draws from
//!   the run's seed) and *proposes* a `LeaseRevoke` for each expired lease, so
//!   expiry is an entry in the log that deletes the lease's keys on every member. A keep-alive
//!   (`LeaseKeepAlive`) goes to the leader, which renews the lease in memory (not through the
//!   log). A new leader knows no renewal times: when it applies the first entry of its term
//!   (`applyEntryNormal` in `server.go`, not at the role change) its lessor is promoted and
//!   extends every lease to now + election timeout + TTL (`Promote`), so a lease is never
//!   revoked before a holder that kept it alive through the old leader could have noticed.
//!   The price (etcd-io/etcd#9395, #9888): every leader change gives every lease a full TTL
//!   again, also one nobody renews any more, so a crashed holder's lock outlives its TTL and
//!   leader changes closer together than the TTL keep it forever.
//! - **Lease checkpointing** (`--experimental-enable-lease-checkpoint`, 3.4+, PR #9924;
//!   `lease_checkpoint = true`, off by default as in etcd): the leader's lessor writes a
//!   lease's remaining TTL through the log (`LeaseCheckpoint`, `checkpointScheduledLeases` in
//!   the 500 ms `runLoop`), every member keeps it (`Checkpoint`), and a promotion restores it
//!   instead of the full TTL (`Lease.refresh`: extend + `getRemainingTTL()`). A checkpoint
//!   is scheduled an interval (the server setting `LeaseCheckpointInterval`, no flag of the etcd binary,
//!   `lease_checkpoint_interval_ms`, default 5 min) after a grant, a promotion or an applied
//!   checkpoint, and only for a lease whose remaining TTL exceeds the interval in whole
//!   seconds (`scheduleCheckpointIfNeeded`): with the default interval no lease of 5 min or
//!   less is ever checkpointed, so a lock's session lease needs an interval below its TTL.
//!   Due checkpoints are skipped for expired leases and ones with a full TTL left
//!   (`findDueScheduledCheckpoints`; rounded up to a second, with `ttl_rounding = "etcd"`,
//!   else to a millisecond). A keep-alive of a checkpointed lease first clears its checkpoint
//!   through the log, then renews (`Renew`). The model is etcd 3.6's lessor (3.4.20+, 3.5.2+): before those, `Promote`
//!   scheduled no checkpoints, so after the first leader change an unrenewed lease kept the
//!   remaining TTL checkpointed before it (PR #13491). A restarted peer re-applies its log,
//!   checkpoints with it, as 3.6 (or `--experimental-enable-lease-checkpoint-persist`) keeps
//!   them in the backend; without persistence a restarted member recovers its leases with no
//!   remaining TTL (#13491, #13508; #17132 reports a full TTL restored on a later leader
//!   change of a cluster whose members were restarted). Left out: the rate limits (1,000
//!   checkpoints a second, 1,000 per entry) and Promote's spreading of piled-up expiries,
//!   both for thousands of leases.
//! - **Session.** The client grants a lease with the session's TTL and keeps it alive every
//!   TTL/3 (`lease.go`: `nextKeepAlive = now + TTL/3`); the session is over when a keep-alive
//!   finds the lease gone or its TTL passes without one.
//! - **Mutex.** `Lock` puts the key `prefix/<lease id>` attached to the lease in a transaction
//!   (if it does not exist yet) and reads the prefix's key with the lowest create-revision: if
//!   that is its own, it holds the lock. Otherwise it waits for the deletion of every key
//!   with a lower create-revision (`waitDeletes`: watch the last one before its own, and
//!   again) and then **checks that its own key still exists** (`Get`) before returning.
//!   `Unlock` deletes the key, by its name only. The create-revision is a natural fencing
//!   token: it grows with every write to the store.
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
//! - **etcd-io/etcd#22082** (2026; the fix proposed in PR #22115): `Unlock` is
//!   `Delete(myKey)` and the key is named after the session's lease, so the same session's
//!   every lock has the same key. An `Unlock` whose Delete commits but whose answer misses
//!   the caller's deadline returns `context.DeadlineExceeded`; the application keeps its
//!   `Session`, locks again with it (a key of the same name, a newer create-revision) and
//!   later retries the old `Unlock`, which deletes the new key: the next waiter is granted
//!   the lock while this client holds it. The Go client does not resend a Delete itself (its
//!   retry interceptor resends a mutation only when it never reached a connection,
//!   `isSafeRetryMutableRPC`): the second Delete is the application's. The fix is one
//!   transaction, `If(CreateRevision(myKey) == myRev).Then(Delete(myKey))`
//!   (`Mutex.IsOwner`). Model: `unlock_timeout_ms` (Unlock's deadline; unset, one TTL),
//!   `unlock_retry_after_ms` (unset, the model's client abandons a session whose Unlock got
//!   no answer, so this cannot happen; set, it keeps the session and calls the old Unlock
//!   again this long later, in the background, until one is answered or the session ends),
//!   `unlock = "delete"` (etcd's, the default) or `"delete-if-owner"` (PR #22115). Where it
//!   simplifies: the application's retry has a fixed interval (a real one backs off), and
//!   within the deadline the model's link resends the Delete to the next member every
//!   `request_timeout_ms` (as it does every request), which changes nothing before the
//!   relock.
//!
//! - **etcd-io/etcd#15247, #12528**: the lessor is demoted only from the Raft loop
//!   (`raftNode.start` in `server/etcdserver/raft.go`), so a leader whose loop is stuck in a
//!   slow `fdatasync` or a starved CPU stays the primary in its lessor's view while the others
//!   elect another. Its gRPC handlers renew its clients' keep-alives in memory (`LeaseRenew`
//!   on `isLeader()`, frozen by the stuck loop): the new leader hears none and revokes those
//!   leases under their holders. Its lessor's timer (`runLoop`, not on the Raft loop) finds
//!   leases expired by its stale renewal times; the revocations are proposed once the loop
//!   runs again, after the member stepped down, and Raft forwards them to the new leader,
//!   which commits them. Fixed by `ensureLeadership` (a ReadIndex) before a renewal (PR
//!   #13690, 3.5.3) and before a revocation (PR #16822, 3.5.11; 3.4: PR #17465). Model: the
//!   `loop_stall` fault stops the loop ([`crate::raft::host`]); `lessor = "local-role"`
//!   answers keep-alives and runs the timer on the frozen role meanwhile, `"ensure-leadership"`
//!   (the default) does neither, since its ReadIndex needs the loop.
//!
//! - **Jepsen's client** (jepsen-io/etcd 0.1.0 `lock.clj`; jetcd 0.4.1 `LeaseImpl.java`;
//!   etcd `server/etcdserver/api/v3lock/lock.go`): the `Lock` RPC runs the same `Mutex` on the
//!   member, on an orphaned session built from the caller's lease, so the member learns nothing
//!   of the caller's keep-alives (`lock_api = "lock-rpc"`). jetcd keeps a lease alive from a
//!   500 ms scheduler (the next keep-alive TTL/3 after an answer) and drops it for good once a
//!   TTL passed without an answer; with a 2 s TTL, a leader pause long enough for an election
//!   drops every client's keep-alive and the new leader revokes every lease. Jepsen grants a
//!   lease per add (`lease_per_acquire`) and gives each client one endpoint
//!   (`client_endpoint = "pinned"`); `catalog/etcd-jepsen-lock-set.toml` is the whole shape.
//!
//! - **A member back from a cut unseats the leader** without pre-vote (etcd 3.4's default,
//!   `--pre-vote` false; etcd-io/etcd#8499; 3.5 turned it on, PR #12770): a member cut off campaigns
//!   alone and raises its term each election timeout; once the cut heals it answers the
//!   leader's heartbeat with that term (etcd's raft does so under check-quorum, so that a
//!   stale member is heard), the leader steps down, and the cluster elects again while no lock
//!   is granted, leases wait and sessions may end. Model: `pre_vote` (default true, 3.5's);
//!   live mode starts the real etcd with the same flag.
//!
//! Where the model simplifies the Lock RPC: the member's `Mutex` steps (the acquire
//! transaction, the wait for older keys' deletes, no re-check) are the same requests, but the
//! model sends them from the client node, where a real member runs them inside itself
//! against its own store. So a paused or cut-off client also pauses its wait (a real member
//! goes on waiting and its answer waits in the client's socket), and the steps cross the
//! client's link, not the member's loopback. Live mode runs the model's client, so it runs
//! this simplification against real members too.
//!
//! What the model keeps and leaves out: one lock prefix, a flat key space with revisions,
//! leases, the lessor with promotion and a watch on a key's deletion (served by the peer from
//! its applied state, as a long poll; one from a revision the store has reached starts
//! unsynced and hears the delete at the member's next 100 ms `syncWatchersLoop`, as in
//! etcd's `watchable_store.go`). A member that does not lead takes a client's write
//! and forwards it to the leader (raft-rs forwards the proposal), answering the client when
//! it applies the entry, as etcd's `processInternalRaftRequestOnce` does: so a write that
//! waited at a paused or cut-off member commits when that member runs again, after the
//! client gave up on it and perhaps sent it elsewhere (etcd-io/etcd#22082's late Delete,
//! seen on real etcd by live mode). As there, the member gives up a write not applied
//! within the request timeout (`ReqTimeout`: 5 s + two election timeouts; a write forwarded
//! to a leader that lost the lead is dropped there, and Raft tells nobody) and answers its
//! client; etcd answers "request timed out", the model its "not leader", and either way the
//! client's link asks again. A member serves a linearizable read itself, through the
//! leader's ReadIndex (`linearizableReadNotify`), and forwards a keep-alive to the leader's
//! lessor and relays its answer (`LeaseRenew`, [`crate::raft::forward`]): it waits on the
//! leader's answer up to etcd's request timeout (5 s and two election timeouts), through a
//! change of leader (a paused old leader that wakes refuses it, and it goes to the new one),
//! and serves one client's keep-alives one at a time, as the member's keep-alive stream
//! does, so a keep-alive forwarded to a paused leader holds up that client's next ones. So a
//! client stays with the member it talks to, as live mode's clients do against real members;
//! it moves to the next member only when its own does not answer in time (a "not leader"
//! answer, an election under way or a read whose leader changed under it, is asked again of
//! the same member); a leader answers a keep-alive that comes before its lessor's promotion
//! at the promotion, as etcd's `LeaseRenew` retries until the lessor is primary. Keep-alives are confirmed by ReadIndex on the leader
//! before they renew (a deposed leader that has not noticed yet cannot renew; with `lessor =
//! "local-role"` the leader renews at once, as before etcd PR #13690), and the client
//! counts a lease's TTL from when it *sent* the keep-alive (etcd's Go client counts from the
//! answer, a few ms more optimistic). Left out: compaction, auth, gRPC proxies, watch
//! progress notifications.

pub mod client;
pub mod kv;
pub mod params;
pub mod profile;

use crate::protocol::{ClientProfile, ParamError, Protocol};
use crate::raft::client::Link;
use crate::raft::host::{start_cluster, Cluster};
use client::EtcdClient;
use kv::{Kv, Req, Resp};
use locksim_sim::nemesis::ROLE_LEADER;
use locksim_sim::{NodeCtx, World};
pub use params::{
    ClientEndpoint, LeaseAfter, Lessor, Library, LockApi, Params, TtlRounding, Unlock, Variant,
    LEASE_CHECKPOINT_INTERVAL_MS_DEFAULT, PREFIX,
};
use std::time::Duration;

/// The `etcd` protocol.
#[derive(Clone, Copy, Debug)]
pub struct Etcd;

impl Protocol for Etcd {
    const ID: &'static str = "etcd";
    const SUMMARY: &'static str =
        "etcd's concurrency.Mutex on a Raft key-value store with leases (3 or 5 peers)";
    type Params = Params;
    type Servers = Cluster<Req, Resp>;
    type Client = EtcdClient;

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        params.validate()
    }

    fn servers(&self, params: &Params) -> Vec<String> {
        params.host().peers
    }

    fn points(&self, params: &Params) -> Vec<(String, &'static str)> {
        let mut points: Vec<(String, &'static str)> = (self.servers(params).into_iter())
            .map(|s| (s, "before_apply"))
            .collect();
        points.push(("client".into(), "after_wait"));
        points
    }

    fn roles(&self, _: &Params) -> Vec<&'static str> {
        vec![ROLE_LEADER]
    }

    fn clients(&self) -> Vec<ClientProfile> {
        profile::profiles()
    }

    fn lease_ms(&self, params: &Params) -> Option<u64> {
        Some(params.ttl_ms())
    }

    fn start(&self, params: &Params, world: &World) -> Cluster<Req, Resp> {
        let host = params.host();
        let enforce = params.variant != Variant::AckBeforeFsync;
        let (params, extend) = (params.clone(), host.election_timeout());
        start_cluster(world, host, enforce, move |_ctx| Kv::new(&params, extend))
    }

    fn connect(&self, params: &Params, cluster: &Cluster<Req, Resp>, ctx: &NodeCtx) -> EtcdClient {
        let timeout = Duration::from_millis(params.request_timeout_ms);
        let link = Link::new(
            ctx,
            &cluster.clients,
            &cluster.peers,
            params.clone(),
            timeout,
        );
        match params.client_endpoint {
            ClientEndpoint::Any => EtcdClient::new(link),
            ClientEndpoint::Pinned => EtcdClient::new(link.pinned()),
        }
    }
}
