//! The etcd lock clients users run, as client profiles (`[protocol] client = "NAME"`), read
//! from their source:
//!
//! - **`careful`** (the default, and every file written before profiles): the Mutex of
//!   `client/v3/concurrency` with a session that renews a lease with less than half its TTL
//!   left before it returns a lock, refuses a lock on a session expired on its own clock, and
//!   answers the application's check from that clock (the lease's TTL counted from the
//!   keep-alive's send). Stricter than any etcd release.
//! - **`etcd-concurrency-3.4`** and **`etcd-concurrency-3.5`** (etcd-io/etcd,
//!   `client/v3/concurrency/session.go`, `mutex.go`; `client/v3/lease.go`): `NewSession`
//!   grants a lease of `defaultSessionTTL` = 60 s and hands it to the lease client's
//!   `KeepAlive`. `sendKeepAliveLoop` wakes every `retryConnWait` (500 ms) and sends a
//!   keep-alive for every lease whose `nextKeepAlive` has passed (at once for a new one);
//!   `recvKeepAlive` sets `nextKeepAlive = now + TTL/3` and `deadline = now + TTL` on every
//!   answer, and closes the lease's channels on an answer with TTL <= 0 (the lease is gone);
//!   `deadlineLoop` wakes every second and closes those whose deadline has passed (the first
//!   deadline is `firstKeepAliveTimeout`, 5 s without a dial timeout). `Session.Done()` is
//!   that closed channel: it fires at most about a second after the last answer + TTL, or
//!   when an answer says the lease is gone. The Mutex exposes no expiry: the user's only
//!   check is `Done()` (`check = "before_write"` looks at it just before the write;
//!   `check = "on_signal"` aborts the work when it fires). 3.4.3's `Lock` returns after
//!   `waitDeletes` without looking at its own key (#11456); 3.5's reads it (`client.Get(ctx,
//!   m.myKey)`) and fails with `ErrSessionExpired` if it is gone, but the lease can still be
//!   revoked between that read and the caller's first write: nothing re-checks it then.
//! - **`etcdctl-3.4`** (`etcdctl lock NAME` of etcd 3.4, `etcdctl/ctlv3/command/
//!   lock_command.go`, `lockUntilSignal`): one process per acquire, each with a 3.4 session
//!   of its own (`--ttl`, 10 s by default), which it never closes (no `s.Close()`): its lease
//!   lapses a TTL after the process exits, and the lessor's revocation then costs the cluster
//!   a commit (`lease_per_acquire = true`, `lease_after = "lapse"`; found by the servers'
//!   own fsync counts: 9.9 a grant live against the model's 6.2 with one session for the
//!   client's life, docs/validation.md); and `Mutex`; once `m.Lock(ctx)` returns, etcdctl
//!   gets its own key (`c.Get(ctx, m.Key())`) and exits with "lock lost on init" if it is
//!   gone, then prints it and waits for a signal
//!   (`Unlock`) or `s.Done()` ("session expired"). So the command has the effect of 3.5's
//!   re-read around 3.4's library: held to the real etcdctl under Jepsen's nemesis
//!   (`live/scenarios/etcdctl-jepsen-periodic-pause.toml`, `locksim live --library`),
//!   waiters whose key went with their lease exit "lock lost on init", which the 3.4
//!   profile's bare `Mutex` would not (docs/validation.md). In the model it is 3.4's
//!   session with the re-read after waiting. The command gives `Lock`, its `Get` and
//!   `Unlock` no deadline (`context.WithCancel(context.TODO())`, `m.Unlock(context.TODO())`;
//!   `--command-timeout` is for the other commands), and gRPC's keep-alive (2 s, then 6 s)
//!   outlasts a pause of a few seconds: a request to a paused member waits until it runs
//!   again. The profile's per-request timeout, [`ETCDCTL_REQUEST_TIMEOUT_MS`], stands for
//!   that.
//! - **`jetcd-lock`** (jetcd 0.4.1 `LockImpl`, `LeaseImpl`; etcd
//!   `server/etcdserver/api/v3lock/lock.go`): the member-side Lock RPC on the caller's lease,
//!   kept alive by jetcd's 500 ms scheduler; what `lock_api = "lock-rpc"` did before profiles
//!   (a file setting only that is this profile).

use crate::protocol::ClientProfile;

fn profile(
    name: &'static str,
    description: &'static str,
    pairs: &[(&str, toml::Value)],
) -> ClientProfile {
    let mut defaults = toml::Table::new();
    for (key, value) in pairs {
        defaults.insert((*key).into(), value.clone());
    }
    ClientProfile {
        name,
        description,
        defaults,
    }
}

/// etcd's `defaultSessionTTL` (`client/v3/concurrency/session.go`), in ms.
pub const SESSION_TTL_MS: i64 = 60_000;

/// `etcdctl lock`'s session TTL unless `--ttl` is given (`lockTTL`), in ms.
const ETCDCTL_TTL_MS: i64 = 10_000;

/// `etcdctl lock`'s per-request timeout in the model, in ms: past any pause a scenario
/// draws, for the command gives its requests no deadline (module docs).
pub const ETCDCTL_REQUEST_TIMEOUT_MS: i64 = 60_000;

/// The profiles of `etcd`, the default first.
pub fn profiles() -> Vec<ClientProfile> {
    let ttl = ("lease_ttl_ms", toml::Value::Integer(SESSION_TTL_MS));
    let s = |v: &str| toml::Value::String(v.into());
    vec![
        profile(
            "careful",
            "concurrency.Mutex with a stricter session: renews a lease with less than half its \
             TTL left before returning a lock, refuses a lock on an expired session, validity \
             on its own clock",
            &[],
        ),
        profile(
            "etcd-concurrency-3.4",
            "etcd 3.4.3 client/v3/concurrency: 60 s session, keep-alive TTL/3 after each answer \
             on a 500 ms ticker, Session.Done() about 1 s after answer + TTL; Lock returns \
             after waitDeletes without reading its own key (#11456)",
            &[ttl.clone(), ("variant", s("no-lease-recheck-after-wait"))],
        ),
        profile(
            "etcd-concurrency-3.5",
            "etcd 3.5 client/v3/concurrency: as 3.4, but Lock reads its own key after waiting \
             (ErrSessionExpired if gone); the lease can still go right after that read",
            &[ttl],
        ),
        profile(
            "etcdctl-3.4",
            "etcdctl lock of etcd 3.4: a process per acquire, each with a 3.4 session of its own \
             (10 s, etcdctl's --ttl default; never closed: its lease lapses after the exit) and \
             Mutex, then its own Get of the key after Lock, exiting \"lock lost on init\" if it \
             is gone (as 3.5's re-read); no deadline on its requests",
            &[
                ("lease_ttl_ms", toml::Value::Integer(ETCDCTL_TTL_MS)),
                ("lease_per_acquire", toml::Value::Boolean(true)),
                ("lease_after", s("lapse")),
                (
                    "request_timeout_ms",
                    toml::Value::Integer(ETCDCTL_REQUEST_TIMEOUT_MS),
                ),
            ],
        ),
        profile(
            "jetcd-lock",
            "jetcd's Lock client: the member-side Lock RPC on a lease kept alive by jetcd's \
             500 ms scheduler, dropped silently a TTL after its last answer",
            &[("lock_api", s("lock-rpc"))],
        ),
    ]
}
