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
    /// Checks the values serde cannot; the error names the field.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.lease_ttl_ms < 3 {
            return Err(ParamError::field("lease_ttl_ms", "must be at least 3"));
        }
        self.host().validate(&[
            ("lease_check_interval_ms", self.lease_check_interval_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("watch_poll_ms", self.watch_poll_ms),
        ])
    }

    /// The Raft host of the cluster.
    pub fn host(&self) -> HostConfig {
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
