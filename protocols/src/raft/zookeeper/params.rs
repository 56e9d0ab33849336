//! The `[protocol]` parameters of `zookeeper`.

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
    /// Checks the values serde cannot; the error names the field.
    pub fn validate(&self) -> Result<(), ParamError> {
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

    /// The Raft host of the cluster.
    pub fn host(&self) -> HostConfig {
        HostConfig::named("zk", self.peers, self.tick_ms, self.election_ticks, false)
    }

    /// The session timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }
}
