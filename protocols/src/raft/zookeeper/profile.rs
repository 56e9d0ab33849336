//! The ZooKeeper client libraries users run, as client profiles (`[protocol] client = "NAME"`).
//!
//! - **`zookeeper`** (the default): the raw ZooKeeper client (`org.apache.zookeeper.ZooKeeper`)
//!   and the lock recipe written on it. It hears `Disconnected` after two thirds of the
//!   session timeout without an answer (`ClientCnxn`'s read timeout) and `Expired` only from a
//!   server: a client cut off from the ensemble cannot learn that its session is gone.
//! - **`curator`** (Apache Curator's `InterProcessMutex`; `apache/curator`,
//!   `CuratorFrameworkFactory`, `ConnectionStateManager`, `LockInternals`,
//!   `StandardLockInternalsDriver`, `CreateBuilderImpl`): sessions of 60 s and connections of
//!   15 s by default (`DEFAULT_SESSION_TIMEOUT_MS`, `DEFAULT_CONNECTION_TIMEOUT_MS`).
//!   `Disconnected` becomes `SUSPENDED`. Since Curator 3.0 the `ConnectionStateManager`
//!   keeps time while `SUSPENDED`: once the (negotiated) session timeout has passed since the
//!   connection was suspended it injects a session expiration (`checkSessionExpiration`:
//!   "Session timeout has elapsed while SUSPENDED. Injecting a session expiration"), and the
//!   application hears `LOST` although no server told it. It counts that time by the wall
//!   clock (`System.currentTimeMillis() - startOfSuspendedEpoch`, after a poll of its event
//!   queue on the monotonic clock): a step back while `SUSPENDED` makes `LOST` late by the
//!   step (`zookeeper-curator-lost-wall-clock-step-back`). Which states count as losing the
//!   lock is the framework's `ConnectionStateErrorPolicy`: `standard`
//!   (`StandardConnectionStateErrorPolicy`, the default: `SUSPENDED` and `LOST`) or `session`
//!   (`SessionConnectionStateErrorPolicy`: `LOST` only); the listener of a careful
//!   application follows it, as Curator's own recipes do, and it is the lost-lock signal
//!   here. The lock node is created in protected mode (`withProtection()`: the name starts
//!   `_c_<GUID>-`): when a create's reply is lost, Curator's retry lists the children and
//!   finds its node by the GUID (`findProtectedNodeInForeground`) instead of leaving an
//!   orphan that would block the queue while the session lives; it retries within the
//!   connection timeout. Its retry loop also retries after `SESSIONEXPIRED`, on a new
//!   ZooKeeper handle and so a new session, with the node name and GUID the acquire already
//!   has (`session_retry`: CURATOR-604, CURATOR-498): the node may be the dead session's,
//!   still listed by a server that has not applied the session's close.
//!
//! - **`kazoo`** (Python; `python-zk/kazoo`, `kazoo/recipe/lock.py`, `kazoo/retry.py`,
//!   `kazoo/protocol/connection.py`): `KazooClient(timeout=10.0)`, a 10 s session by default.
//!   Its connection follows the Java client's (`read_timeout` two thirds of the negotiated
//!   session timeout): a silent connection turns `SUSPENDED`, and `LOST` comes only when a
//!   server says the session expired, on reconnecting; kazoo keeps no timer of its own, as
//!   Curator does. Its `Lock` creates its node under a fresh `uuid4().hex + "__lock__"`
//!   prefix ("props to Netflix Curator for this trick") and, when a create's reply is lost,
//!   finds it by that prefix (`_find_node`); it retries the whole acquire with a
//!   `KazooRetry(max_tries=None)` bounded only by the acquire's timeout, and `KazooRetry`
//!   treats `SessionExpiredError` as retryable (`ignore_expire=True`, its default): the
//!   acquire goes on in the client's next session and takes a node listed under its prefix
//!   whatever session made it, Curator's `by-guid` bug (`session_retry` defaults to
//!   `by-guid`; no kazoo release checks the owner). `Lock` itself never tells its holder
//!   that the session went (`is_acquired` stays true; python-zk/kazoo#2): the application
//!   listens (`client.add_listener`), as kazoo's docs ask ("the lock may have been lost" on
//!   `SUSPENDED`, lost on `LOST`); `error_policy` names what that listener counts, as with
//!   Curator (`standard`: `SUSPENDED` or `LOST`; `session`: `LOST`), and it is the lost-lock
//!   signal here. Up to 2.10.0 its connection loop times its pings by `time.time()`
//!   (`ping_clock = "wall"`, the profile's default, the release live mode's driver runs): a
//!   wall clock stepped back by J holds the next ping J longer, and past the session timeout
//!   the server expires the session while the application holds the lock
//!   (python-zk/kazoo#722; 2.11.0 times them by `time.monotonic()`, PR #742:
//!   `ping_clock = "monotonic"`). A step forward makes kazoo ping early, which the model
//!   does not (it harms nothing).
//!
//! Where the model simplifies: Curator's acquire timeout counts by the wall clock too
//! (`LockInternals.internalLockLoop` subtracts `System.currentTimeMillis()` differences
//! between its monotonic waits), the model's by the monotonic clock: a step back while an
//! acquire waits lengthens its wait by the step, a step forward shortens it (an acquire that
//! fails or waits on, never a second holder); Curator's retry policy (exponential backoff) is
//! a retry as soon as the connection is back after each `ConnectionLoss`, until the
//! connection timeout, kazoo's (backoff from 0.1 s with jitter) the same until the acquire's
//! timeout;
//! `sessionExpirationPercent` is 100, its default; both libraries' locks sort children by the
//! sequence suffix, as the tree lists them, and their node names differ only in the prefix's
//! spelling. A server closes an expired session's connection (`Req::AwaitClose`) for a kazoo
//! client waiting on its wall clock only: any other connected client hears the expiry at its
//! next ping, up to a third of the session timeout after a real one would.

use crate::protocol::ClientProfile;
use serde::{Deserialize, Serialize};

/// The client library the `zookeeper` protocol is driven by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Library {
    /// The raw ZooKeeper client and the recipe: `Expired` only from a server.
    #[default]
    Zookeeper,
    /// Curator's `InterProcessMutex`: `LOST` injected after a session timeout `SUSPENDED`,
    /// protected-mode creates.
    Curator,
    /// kazoo's `Lock`: `LOST` only from a server, creates under a uuid prefix, an acquire
    /// retried through session expiry.
    Kazoo,
}

impl Library {
    /// Whether the lock's node is created under a unique prefix the library finds it by
    /// when a create's reply is lost (Curator's protected mode, kazoo's uuid prefix).
    pub fn protected_creates(self) -> bool {
        matches!(self, Library::Curator | Library::Kazoo)
    }

    /// Whether the library reports connection states to a listener the application
    /// follows (`error_policy`): the lost-lock signal.
    pub fn state_listener(self) -> bool {
        matches!(self, Library::Curator | Library::Kazoo)
    }

    /// Whether the library itself declares the session lost once a session timeout has
    /// passed while suspended (Curator 3.0's `ConnectionStateManager`); the others hear it
    /// from a server only.
    pub fn injects_lost(self) -> bool {
        self == Library::Curator
    }
}

/// What a Curator acquire does when its session expires before it holds the lock: Curator's
/// retry loop counts `SESSIONEXPIRED` as retryable, so the acquire goes on in the session of
/// a new ZooKeeper handle, with the name (and protection GUID) of the node it already has.
/// Unset: the acquire ends at the expiry (what the model did before this option).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionRetry {
    /// Before the fix (CURATOR-498, CURATOR-604): a node is the client's own when its name
    /// (its GUID) is listed, whatever session created it, so the dead session's node, still
    /// listed by a server that has not applied the session's close, is taken as its own.
    ByGuid,
    /// The fix (`ProtectedMode.validateFoundNode`; the `ephemeralOwner` check of the
    /// LeaderLatch fix, CURATOR-696, asked for InterProcessMutex in CURATOR-604): a node
    /// whose owner is not the current session is not the client's; it is deleted and the
    /// acquire creates a new one.
    OwnerChecked,
}

/// The clock a client times its pings by (`ping_clock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PingClock {
    /// The monotonic clock: the Java client (`Time.currentElapsedTime`, `System.nanoTime`)
    /// and kazoo 2.11.0 (python-zk/kazoo PR #742).
    #[default]
    Monotonic,
    /// The wall clock: kazoo 2.10.0 and before (`time.time()` in `connection.py`,
    /// python-zk/kazoo#722). Its connection loop waits until the wall clock reaches the next
    /// ping's time, so a wall clock stepped back by J sends no ping for J more: past the
    /// session timeout, the server expires the session under its holder.
    Wall,
}

/// Curator's `ConnectionStateErrorPolicy`: which connection states mean the lock is lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorPolicy {
    /// `StandardConnectionStateErrorPolicy`: `SUSPENDED` and `LOST`.
    #[default]
    Standard,
    /// `SessionConnectionStateErrorPolicy`: `LOST` only.
    Session,
}

fn profile(name: &'static str, description: &'static str, pairs: &[(&str, i64)]) -> ClientProfile {
    let mut defaults = toml::Table::new();
    for (key, value) in pairs {
        defaults.insert((*key).into(), toml::Value::Integer(*value));
    }
    ClientProfile {
        name,
        description,
        defaults,
    }
}

/// The profiles of `zookeeper`, the default first.
pub fn profiles() -> Vec<ClientProfile> {
    vec![
        profile(
            "zookeeper",
            "the raw ZooKeeper client and the lock recipe: Disconnected after 2/3 of the \
             session timeout, Expired only from a server (never while cut off)",
            &[],
        ),
        profile(
            "curator",
            "Curator InterProcessMutex: 60 s session, 15 s connection; SUSPENDED after 2/3 of \
             the timeout, LOST injected a session timeout later; error_policy standard \
             (SUSPENDED or LOST) or session (LOST); protected-mode creates",
            &[
                ("session_timeout_ms", 60_000),
                ("connection_timeout_ms", 15_000),
            ],
        ),
        kazoo(),
    ]
}

/// kazoo's profile: a 10 s session, and the acquire's retry through an expiry (`by-guid`).
fn kazoo() -> ClientProfile {
    let mut kazoo = profile(
        "kazoo",
        "kazoo Lock (Python): 10 s session; SUSPENDED after 2/3 of the timeout, LOST only \
         from a server; the application's listener counts SUSPENDED or LOST (error_policy \
         standard) or LOST (session); uuid-prefixed creates; the acquire retried through a \
         session expiry, its node found by prefix (session_retry by-guid); kazoo 2.10.0's \
         pings timed by the wall clock (ping_clock wall, python-zk/kazoo#722)",
        &[("session_timeout_ms", 10_000)],
    );
    kazoo.defaults.insert(
        "session_retry".into(),
        toml::Value::String("by-guid".into()),
    );
    // The release live mode's driver runs (`.ci/run`): before PR #742.
    kazoo
        .defaults
        .insert("ping_clock".into(), toml::Value::String("wall".into()));
    kazoo
}
