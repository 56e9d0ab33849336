//! The `[protocol]` parameters of `etcd`.

use crate::protocol::ParamError;
use crate::raft::host::HostConfig;
use serde::{Deserialize, Serialize};

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

/// Which peer a client talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientEndpoint {
    /// It talks to one member and moves to the next when a call fails (no answer in
    /// `request_timeout_ms`, or "no leader"): clientv3 with every member as an endpoint, its
    /// balancer skipping a failed one. (`"leader"`, this option's name before members served
    /// reads and keep-alives themselves, is read as `"any"`.)
    #[default]
    #[serde(alias = "leader")]
    Any,
    /// It talks to one member, which forwards to the leader: a client given one endpoint
    /// (Jepsen's jetcd clients, one per node).
    Pinned,
}

/// Where the Mutex runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockApi {
    /// In the client: `client/v3/concurrency`'s `Session` and `Mutex`.
    #[default]
    Concurrency,
    /// On the member, behind the `v3lock` `Lock` RPC (`server/etcdserver/api/v3lock`), as
    /// jetcd's `Lock` client calls it: the member runs the same `Mutex` on the caller's lease
    /// (an orphaned session: no keep-alive of its own, no `Done()`), so the client learns
    /// nothing of its lease while it waits. The re-check after waiting is the variant's.
    LockRpc,
}

/// The client library a user locks with (`[protocol] client`), as profiles
/// ([`super::profile::profiles`]): each fills the `[protocol]` keys the scenario does not set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Library {
    /// The model's careful client (the default, as every file before profiles): the Mutex of
    /// `client/v3/concurrency` whose session renews a lease with less than half its TTL left
    /// and refuses a lock on a session expired on its own clock; validity on its own clock.
    #[default]
    Careful,
    /// `client/v3/concurrency` of etcd 3.4.3: `Lock` returns after `waitDeletes` without
    /// reading its own key (#11456); `Session.Done()` is all the user has.
    #[serde(rename = "etcd-concurrency-3.4")]
    Concurrency34,
    /// `client/v3/concurrency` of etcd 3.5: `Lock` reads its own key after waiting and fails
    /// with `ErrSessionExpired` if it is gone; `Session.Done()` is all the user has.
    #[serde(rename = "etcd-concurrency-3.5")]
    Concurrency35,
    /// `etcdctl lock` of etcd 3.4 (`etcdctl/ctlv3/command/lock_command.go`): 3.4's session
    /// and `Mutex`, then a `Get` of its own key once `Lock` returns, exiting with "lock lost
    /// on init" if it is gone, so a waiter whose key went with its lease does not hold: the
    /// effect of 3.5's re-read, from the command around the library.
    #[serde(rename = "etcdctl-3.4")]
    Etcdctl34,
    /// jetcd's `Lock` client: the member-side Lock RPC on a lease the client keeps alive
    /// with jetcd's keep-alive (`lock_api = "lock-rpc"`).
    JetcdLock,
}

impl Library {
    /// Whether this is etcd's Go `client/v3` (its lease client and `Session.Done()`).
    pub fn is_go(self) -> bool {
        matches!(
            self,
            Library::Concurrency34 | Library::Concurrency35 | Library::Etcdctl34
        )
    }
}

/// How `Mutex.Unlock` deletes the lock's key (`[protocol] unlock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unlock {
    /// etcd's `Mutex.Unlock` (`client/v3/concurrency/mutex.go`, every release to 3.6):
    /// `Delete(myKey)`, by the key's name only. A late or retried Unlock deletes whatever key
    /// has that name now: after the same session locked again, its newer key
    /// (etcd-io/etcd#22082).
    #[default]
    Delete,
    /// The fix of etcd-io/etcd PR #22115: one transaction,
    /// `If(CreateRevision(myKey) == myRev).Then(Delete(myKey))` (`Mutex.IsOwner`): an Unlock
    /// of an older incarnation of the key deletes nothing.
    DeleteIfOwner,
}

/// With `lease_per_acquire`, what becomes of an acquire's lease once its Unlock is answered,
/// or its acquire failed (`[protocol] lease_after`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseAfter {
    /// Revoked (Jepsen's `release!`, and `acquire!` when it fails).
    #[default]
    Revoke,
    /// Left to lapse a TTL after its last keep-alive, its keep-alive stopped: `etcdctl lock`,
    /// a process per acquire that exits without closing its session (`lockUntilSignal` never
    /// calls `s.Close()`), so each lease costs the cluster its expiry's revocation too.
    Lapse,
}

/// Whether the leader's lessor confirms the leadership before it renews or revokes a lease
/// (`[protocol] lessor`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lessor {
    /// etcd 3.5.11+ (and 3.4 with the backports): a keep-alive renews only after a ReadIndex
    /// confirms this member still leads (`ensureLeadership` in `LeaseRenew`, PR #13690, 3.5.3),
    /// and expired leases are revoked only if it does (`revokeExpiredLeases`, PR #16822; 3.4:
    /// PR #17465). A member whose Raft loop is stuck answers no keep-alive and revokes nothing.
    #[default]
    EnsureLeadership,
    /// Before those fixes (etcd-io/etcd#12528, #15247): the lessor trusts the role the Raft
    /// loop last gave it. A leader renews a keep-alive in memory at once, and while its loop
    /// is stuck (a `loop_stall`) it goes on answering its clients' keep-alives and its timer
    /// goes on finding leases expired; once the loop runs again, those revocations are
    /// proposed, and Raft forwards them to the new leader, which commits them.
    LocalRole,
}

/// How the server takes a lease's TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TtlRounding {
    /// As asked, to the millisecond (the model's convenience; the default).
    #[default]
    Exact,
    /// As etcd: TTLs are whole seconds (`LeaseGrantRequest.TTL` is in seconds) and at least
    /// the minimum TTL, `(3 * election_ticks / 2) * tick_ms` rounded up to a second
    /// (`minTTL` in `server/etcdserver/server.go`, `MinLeaseTTL` in `lessor.Grant`): 2 s with
    /// the default 100 ms x 10 ticks. A shorter lease is silently granted the minimum.
    Etcd,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
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
    /// Chubby's lock-delay (Burrows 2006, section 2.4; etcd has none), in ms: after the
    /// holder's lease expires (not after a clean release) nobody may take the lock for this
    /// long (0 = off).
    #[serde(default)]
    pub lock_delay_ms: u64,
    /// Which peer the client talks to.
    #[serde(default, skip_serializing_if = "is_default")]
    pub client_endpoint: ClientEndpoint,
    /// A fresh lease for every acquire, revoked after the unlock (Jepsen's `acquire!` and
    /// `release!`) or left to lapse (`lease_after`), instead of one session for the client's
    /// life.
    #[serde(default, skip_serializing_if = "is_default")]
    pub lease_per_acquire: bool,
    /// With `lease_per_acquire`: what becomes of an acquire's lease after it (without, the
    /// session lasts the client's life and this says nothing: a profile may set it for a
    /// file that turns `lease_per_acquire` off).
    #[serde(default, skip_serializing_if = "is_default")]
    pub lease_after: LeaseAfter,
    /// Where the Mutex runs.
    #[serde(default, skip_serializing_if = "is_default")]
    pub lock_api: LockApi,
    /// How the server takes `lease_ttl_ms`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub ttl_rounding: TtlRounding,
    /// The client library (`[protocol] client`; its profile's defaults fill the keys not set).
    #[serde(default, skip_serializing_if = "is_default")]
    pub client: Library,
    /// etcd's `--experimental-enable-lease-checkpoint` (3.4+; off by default, as in etcd): the
    /// leader writes leases' remaining TTLs through the log, and a new leader restores them
    /// instead of a full TTL ([`super::kv`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub lease_checkpoint: bool,
    /// etcd's `LeaseCheckpointInterval` (server setting, no flag of the binary), in ms (default 5 min, etcd's): how
    /// long after a lease's last checkpoint (or grant, or promotion) the next is due. Only a
    /// lease whose remaining TTL exceeds this interval in whole seconds is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_checkpoint_interval_ms: Option<u64>,
    /// `Unlock`'s deadline (the application's context), in ms; unset, one TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlock_timeout_ms: Option<u64>,
    /// What the application does when `Unlock` got no answer by its deadline. Unset: it
    /// abandons the session (its lease and key expire on the server). Set: it keeps the
    /// session, locks again with it (the same key name), and calls the old `Mutex`'s `Unlock`
    /// again this long after, in the background, and again after each unanswered try, while
    /// that session lasts (etcd-io/etcd#22082's retry), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlock_retry_after_ms: Option<u64>,
    /// How `Unlock` deletes the key.
    #[serde(default, skip_serializing_if = "is_default")]
    pub unlock: Unlock,
    /// Whether the lessor confirms the leadership before renewing or revoking.
    #[serde(default, skip_serializing_if = "is_default")]
    pub lessor: Lessor,
    /// etcd's `--pre-vote`: true, etcd 3.5's default; false, etcd 3.4's, where a member cut
    /// off and back unseats the leader with the terms it raised campaigning alone.
    #[serde(default = "d_pre_vote", skip_serializing_if = "is_pre_vote_default")]
    pub pre_vote: bool,
}

fn d_pre_vote() -> bool {
    true
}
fn is_pre_vote_default(pre_vote: &bool) -> bool {
    *pre_vote == d_pre_vote()
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

/// etcd's `defaultLeaseCheckpointInterval` (`server/lease/lessor.go`): 5 minutes.
pub const LEASE_CHECKPOINT_INTERVAL_MS_DEFAULT: u64 = 300_000;

impl Params {
    /// Checks the values serde cannot; the error names the field.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.lease_ttl_ms < 3 {
            return Err(ParamError::field("lease_ttl_ms", "must be at least 3"));
        }
        if self.ttl_rounding == TtlRounding::Etcd && !self.lease_ttl_ms.is_multiple_of(1_000) {
            let why = "must be whole seconds with ttl_rounding = \"etcd\" (etcd's TTLs are in s)";
            return Err(ParamError::field("lease_ttl_ms", why));
        }
        self.check_library()?;
        if self.lease_checkpoint_interval_ms.is_some() && !self.lease_checkpoint {
            let why = "sets the interval of checkpoints that are off: add lease_checkpoint = true";
            return Err(ParamError::field("lease_checkpoint_interval_ms", why));
        }
        self.host().validate(&[
            ("lease_check_interval_ms", self.lease_check_interval_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("watch_poll_ms", self.watch_poll_ms),
            (
                "lease_checkpoint_interval_ms",
                self.checkpoint_interval_ms(),
            ),
            ("unlock_timeout_ms", self.unlock_timeout_ms.unwrap_or(1)),
            (
                "unlock_retry_after_ms",
                self.unlock_retry_after_ms.unwrap_or(1),
            ),
        ])
    }

    /// `Unlock`'s deadline: `unlock_timeout_ms`, or one TTL (an election takes about one
    /// election timeout).
    pub fn unlock_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.unlock_timeout_ms.unwrap_or(self.ttl_ms()))
    }

    /// The lease checkpoint interval, in ms (etcd's default unless set).
    pub fn checkpoint_interval_ms(&self) -> u64 {
        (self.lease_checkpoint_interval_ms).unwrap_or(LEASE_CHECKPOINT_INTERVAL_MS_DEFAULT)
    }

    /// Refuses a library asked to do what it does not: the Go Mutex runs in the client, jetcd's
    /// behind the Lock RPC; 3.5 always reads its key after waiting, 3.4 never does.
    fn check_library(&self) -> Result<(), ParamError> {
        let rpc = self.lock_api == LockApi::LockRpc;
        let no_recheck = self.variant == Variant::NoLeaseRecheckAfterWait;
        let why = match self.client {
            Library::Concurrency34 | Library::Concurrency35 | Library::Etcdctl34 if rpc => {
                "etcd-concurrency runs the Mutex in the client: lock_api must be \"concurrency\""
            }
            Library::JetcdLock if !rpc => {
                "jetcd-lock calls the Lock RPC: lock_api must be \"lock-rpc\""
            }
            Library::Concurrency34 if self.variant == Variant::Correct => {
                "etcd-concurrency-3.4 does not read its key after waiting (#11456): variant \
                 \"correct\" is etcd-concurrency-3.5"
            }
            Library::Concurrency35 if no_recheck => {
                "etcd-concurrency-3.5 reads its key after waiting: variant \
                 \"no-lease-recheck-after-wait\" is etcd-concurrency-3.4"
            }
            Library::Etcdctl34 if no_recheck => {
                "etcdctl-3.4 reads its key once Lock returns (\"lock lost on init\"): variant \
                 \"no-lease-recheck-after-wait\" is etcd-concurrency-3.4"
            }
            _ => return Ok(()),
        };
        let field = if why.contains("lock_api") {
            "lock_api"
        } else {
            "variant"
        };
        Err(ParamError::field(field, why))
    }

    /// Whether `Lock` reads its own key after `waitDeletes` (the fix of #11456).
    pub fn rechecks_after_wait(&self) -> bool {
        self.variant != Variant::NoLeaseRecheckAfterWait && self.client != Library::Concurrency34
    }

    /// etcd's minimum lease TTL, in ms: `(3 * election_ticks / 2)` ticks, rounded up to a
    /// whole second.
    pub fn min_ttl_ms(&self) -> u64 {
        let ticks = (3 * self.election_ticks as u64) / 2;
        (ticks * self.tick_ms).div_ceil(1_000) * 1_000
    }

    /// The TTL the server grants a lease asked for with `requested_ms`, in ms.
    pub fn granted_ttl_ms(&self, requested_ms: u64) -> u64 {
        match self.ttl_rounding {
            TtlRounding::Exact => requested_ms,
            TtlRounding::Etcd => (requested_ms.div_ceil(1_000) * 1_000).max(self.min_ttl_ms()),
        }
    }

    /// The session's lease TTL as granted, in ms (what the client keeps alive: etcd's client
    /// reads it from the grant's answer).
    pub fn ttl_ms(&self) -> u64 {
        self.granted_ttl_ms(self.lease_ttl_ms)
    }

    /// The Raft host of the cluster.
    pub fn host(&self) -> HostConfig {
        let ack_before_fsync = self.variant == Variant::AckBeforeFsync;
        HostConfig {
            pre_vote: self.pre_vote,
            times_out_proposals: true,
            ..HostConfig::named(
                "etcd",
                self.peers,
                self.tick_ms,
                self.election_ticks,
                ack_before_fsync,
            )
        }
    }
}
