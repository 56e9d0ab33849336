//! The `[protocol]` parameters of `zookeeper`.

use super::profile::{ErrorPolicy, Library, PingClock, SessionRetry};
use crate::protocol::ParamError;
use crate::raft::host::HostConfig;
use serde::{Deserialize, Serialize};
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
    /// Every waiter watches the lock's parent (`getChildren` with a watch) instead of the
    /// next-lower node: each change wakes them all (the herd effect the recipe avoids).
    WatchParent,
    /// Creates persistent sequential nodes instead of ephemeral ones: a holder that dies
    /// never lets go, as nothing deletes its node.
    Persistent,
    /// Lists the children and creates its node only when there are none, then holds the
    /// lock without looking again: the check and the create are two steps, and two
    /// clients that both saw none both hold it.
    CheckThenCreate,
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
    /// ZooKeeper's `syncLimit`, in ticks of `tickTime`: a follower that hears nothing from its
    /// leader for this long drops out (its socket's read timeout, `Learner.syncWithLeader`),
    /// closing its clients' connections, and a leader that hears from no quorum for this long
    /// steps down (`Leader.lead`'s `syncedAckSet` check). Until then a cut-off follower
    /// answers its clients' pings from its own session table.
    #[serde(default = "d_sync_limit_ticks")]
    pub sync_limit_ticks: u64,
    /// Raft's election timeout in ticks of `tick_ms`, the model's stand-in for the failure
    /// detection above. Unset: `sync_limit_ticks × tickTime`, and one tick more for each
    /// follower of a higher id ([`HostConfig::timing_out_by_rank`]). Set: drawn up to twice
    /// it, as raft-rs does (live mode refuses it: a real server has no such timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election_ticks: Option<usize>,
    /// How long one try to open or re-attach a connection, or one ping's try, waits for its
    /// answer, in ms (a request on an open connection waits until the connection is lost).
    #[serde(default = "d_request_timeout")]
    pub request_timeout_ms: u64,
    /// How long one watch waits before the client asks again, in ms.
    #[serde(default = "d_watch_poll")]
    pub watch_poll_ms: u64,
    /// Give up acquiring after this long, in ms (the waiter deletes its node).
    #[serde(default = "d_acquire_timeout")]
    pub acquire_timeout_ms: u64,
    /// ZooKeeper's `tickTime`, in ms: session timeouts must lie within 2 to 20 ticks, and the
    /// session tracker expires sessions in buckets one tick wide. Unset: a tenth of the
    /// session timeout (the live deployment's `tickTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_time_ms: Option<u64>,
    /// The client library (`[protocol] client`; its defaults fill the keys not set).
    #[serde(default)]
    pub client: Library,
    /// Curator: how long an operation is retried while the connection is down, in ms.
    /// (kazoo retries until the acquire's timeout.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_timeout_ms: Option<u64>,
    /// Curator and kazoo: which connection states mean the lock is lost (`standard`:
    /// SUSPENDED and LOST; `session`: LOST only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_policy: Option<ErrorPolicy>,
    /// Curator and kazoo: an acquire whose session expires goes on in a new session, its node
    /// found by name alone (`by-guid`, the bug; kazoo's default) or only if the current
    /// session owns it (`owner-checked`, the fix). Unset: the acquire ends at the expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_retry: Option<SessionRetry>,
    /// kazoo: the clock its pings are timed by (`wall`: kazoo 2.10.0, python-zk/kazoo#722;
    /// `monotonic`: 2.11.0, and every Java client).
    #[serde(default, skip_serializing_if = "is_monotonic")]
    pub ping_clock: PingClock,
    /// The server a client is connected to answers its child listings from its own applied
    /// state, as a ZooKeeper server does. Unset: a listing is linearizable, answered once the
    /// leader confirmed its commit index (ReadIndex) and the server applied up to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_reads: bool,
}

/// `syncLimit` of ZooKeeper's sample configuration (`conf/zoo_sample.cfg`: `tickTime=2000`,
/// `syncLimit=5`).
pub const SYNC_LIMIT_TICKS_DEFAULT: u64 = 5;
/// The largest `sync_limit_ticks` taken.
pub const SYNC_LIMIT_TICKS_MAX: u64 = 1_000;

/// ZooKeeper's default bounds on a session timeout, in ticks (`minSessionTimeout` and
/// `maxSessionTimeout`, `ZooKeeperServer.java`).
pub const SESSION_TICKS_MIN: u64 = 2;
/// See [`SESSION_TICKS_MIN`].
pub const SESSION_TICKS_MAX: u64 = 20;

fn is_monotonic(clock: &PingClock) -> bool {
    *clock == PingClock::Monotonic
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
fn d_sync_limit_ticks() -> u64 {
    SYNC_LIMIT_TICKS_DEFAULT
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
    /// Checks the values serde cannot; the error names the field.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.session_timeout_ms < 3 {
            return Err(ParamError::field(
                "session_timeout_ms",
                "must be at least 3",
            ));
        }
        if !(1..=SYNC_LIMIT_TICKS_MAX).contains(&self.sync_limit_ticks) {
            return Err(ParamError::field(
                "sync_limit_ticks",
                format!("must be within 1 and {SYNC_LIMIT_TICKS_MAX}"),
            ));
        }
        self.check_session_bounds()?;
        self.check_library()?;
        self.host().validate(&[
            ("request_timeout_ms", self.request_timeout_ms),
            ("watch_poll_ms", self.watch_poll_ms),
        ])
    }

    /// A session timeout outside 2 to 20 ticks is refused: a real server would silently
    /// negotiate it to the bound, and the scenario would not run what it says.
    fn check_session_bounds(&self) -> Result<(), ParamError> {
        let tick = self.tick_time().as_millis() as u64;
        if tick == 0 {
            return Err(ParamError::field("tick_time_ms", "must be positive"));
        }
        let (min, max) = (SESSION_TICKS_MIN * tick, SESSION_TICKS_MAX * tick);
        let t = self.session_timeout_ms;
        let bound = if t < min {
            format!("{SESSION_TICKS_MIN} ticks of tick_time_ms {tick} = {min} ms")
        } else if t > max {
            format!("{SESSION_TICKS_MAX} ticks of tick_time_ms {tick} = {max} ms")
        } else {
            return Ok(());
        };
        let (side, to) = if t < min {
            ("below", min)
        } else {
            ("above", max)
        };
        let why = format!("{t} ms is {side} {bound} (ZooKeeper would negotiate it to {to} ms)");
        Err(ParamError::field("session_timeout_ms", why))
    }

    /// A library's keys are refused with a library that has no such setting: the raw
    /// client has none of them; kazoo has no connection timeout (its acquire retries until
    /// its own timeout).
    fn check_library(&self) -> Result<(), ParamError> {
        if self.connection_timeout_ms == Some(0) {
            return Err(ParamError::field(
                "connection_timeout_ms",
                "must be positive",
            ));
        }
        let listener = "is Curator's or kazoo's: set client = \"curator\" or \"kazoo\"";
        let checks = [
            (
                "connection_timeout_ms",
                self.connection_timeout_ms.is_some() && self.client != Library::Curator,
                "is Curator's: set client = \"curator\"",
            ),
            (
                "error_policy",
                self.error_policy.is_some() && !self.client.state_listener(),
                listener,
            ),
            (
                "session_retry",
                self.session_retry.is_some() && !self.client.protected_creates(),
                listener,
            ),
            (
                "ping_clock",
                self.ping_clock == PingClock::Wall && self.client != Library::Kazoo,
                "\"wall\" is kazoo 2.10.0's (the Java client times pings by System.nanoTime): \
                 set client = \"kazoo\"",
            ),
        ];
        match checks.into_iter().find(|(_, refused, _)| *refused) {
            Some((field, _, why)) => Err(ParamError::field(field, why)),
            None => Ok(()),
        }
    }

    /// The server's tick (`tickTime`): given, or a tenth of the session timeout.
    pub fn tick_time(&self) -> Duration {
        let ms = self
            .tick_time_ms
            .unwrap_or((self.session_timeout_ms / 10).max(1));
        Duration::from_millis(ms)
    }

    /// How long a follower waits on a silent leader, and a leader on a silent quorum:
    /// `syncLimit` ticks of `tickTime`.
    pub fn sync_limit(&self) -> Duration {
        self.tick_time()
            .saturating_mul(self.sync_limit_ticks as u32)
    }

    /// Raft's election timeout in ticks: as set, or [`Params::sync_limit`] rounded up to a
    /// tick, at least 2.
    pub fn election_ticks(&self) -> usize {
        let derived = || ticks(self.sync_limit(), self.tick_ms).max(2);
        self.election_ticks.unwrap_or_else(derived)
    }

    /// The Raft host of the cluster.
    pub fn host(&self) -> HostConfig {
        let host = HostConfig::named("zk", self.peers, self.tick_ms, self.election_ticks(), false);
        let host = match self.election_ticks {
            Some(_) => host,
            None => host.timing_out_by_rank(),
        };
        host.electing_when_the_leader_dies()
            .closing_clients_when_leaderless()
    }

    /// The session timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }
}

/// `span` in ticks of `tick_ms`, rounded up.
fn ticks(span: Duration, tick_ms: u64) -> usize {
    (span.as_millis() as u64).div_ceil(tick_ms.max(1)) as usize
}
