//! The Redis lock libraries users run, as client profiles (`[protocol] client = "NAME"`): what
//! each does around the algorithm of its protocol file, read from its source.
//!
//! - **`careful`** (the default): the algorithm of the Redis distributed-locks page and
//!   nothing more; it renews only when the application calls `extend`, and its validity is
//!   the one the page computes, which the workload checks before every write by default.
//! - **`redisson`** (Java; `redisson/redisson`, `RedissonBaseLock.renewExpiration`,
//!   `RedissonLock.tryLockInnerAsync`): `lock()` without a lease time sets the key for the
//!   `lockWatchdogTimeout` (30 s) and starts a watchdog, a timer of the client's JVM that
//!   runs every 30 s / 3 = 10 s and resets the TTL with a compare-and-`PEXPIRE` script while
//!   the key still holds this client's id. A failed renewal is logged (`log.error("Can't
//!   update lock {} expiration")`) and stops the watchdog; the application is not told.
//!   There is no client-side validity: `isHeldByCurrentThread` asks the server. One renewal
//!   lost to a network blip is enough to end the renewal for good: the key expires a lease
//!   later under a holder still at work (redisson/redisson#775, #3194).
//! - **`redisson-reschedule`**: Redisson's batched renewal (`org.redisson.renewal.RenewalTask`
//!   and `LockTask`; `lockWatchdogBatchSize` arrived with it in 3.44.0): the same timer and
//!   script, but a renewal that fails with an error is logged and tried again a third of the
//!   lease later (`run`: `log.error(...)` then `schedule()`); only a renewal that finds the
//!   key no longer held (`hexists` = 0) stops it (`cancelExpirationRenewal`). A blip shorter
//!   than two thirds of the lease costs nothing.
//! - **`redsync`** (Go; `go-redsync/redsync`, `mutex.go` and `redsync.go`): expiry 8 s, 32
//!   tries with a random delay of 50–250 ms, drift factor 0.01; `until = now + expiry −
//!   elapsed − expiry × factor`, exposed as `Until()`; `Extend()` on request only. Whether
//!   the application looks at `Until()` before it writes is its business (the workload's
//!   `check`).
//! - **`redsync-pre-61`**: redsync before go-redsync/redsync#61 (merged 2020-11): the touch
//!   script of `Extend()` answers `0` when the key is not this client's, and `touch` compared
//!   that reply, an `int64(0)`, with an untyped `0` (`status != 0` on an `interface{}`: always
//!   true), so every node counted as extended and `Extend()` reported success on an expired
//!   or taken lock. An application that stops when `Extend()` fails never stops. Its `until`
//!   is not moved by such an "extension" (the script did nothing); a request that got no
//!   answer still failed (`err != nil`).
//! - **`redsync-pre-71`** (`redlock` only): redsync before go-redsync/redsync#71 (merged
//!   2021-08, "Fix ExtendContext, and export until"). `ExtendContext` ran the touch script on
//!   every pool through `actOnPoolsAsync`, which waits for every pool's answer (or its
//!   client's read timeout), and returned true on a quorum of touches however long that
//!   took: a touch that sets a 2 s expiry and returns after 3 s reports success on keys
//!   already expired. It did not move `until` either, and there was no `Until()` to read, so
//!   this profile has no client-side validity (a `before_write` check always passes). #71
//!   computes `until = now + expiry − elapsed − drift` after the touches and fails with
//!   `ErrExtendFailed` when that is not in the future (the `redsync` profile). Its `Valid()`
//!   is as `redsync`'s, below.
//!
//!   Both redsync profiles answer the workload's `check = "ask_servers"` as `Valid()` does
//!   (`ValidContext`, `valid`): a `GET` of the key on every pool, counting those that hold
//!   this mutex's value, true on a quorum, with no look at the time. Again `actOnPoolsAsync`
//!   waits for every pool, so with one slow pool the answer comes late: go-redsync/redsync#72
//!   (2021-08) tells it, four pools answer at once, the fifth after the keys expired, and
//!   `Valid()` returns true on an expired lock. redsync deprecated `Valid()` for `Until()`
//!   (commit 7fee26d, "Add deprecation note to Valid and ValidContext; closes #72"); the
//!   function is unchanged. The client notes each true it gets after its own `until`.
//! - **`redsync-set-nx-on-extend`** (`redlock` only): redsync with `WithSetNXOnExtend()`
//!   (go-redsync/redsync#149, after #147: "Perform a SET if extending fails"): `touch` runs
//!   `touchWithSetNXScript` (`scripts.go`), which extends the key if it holds this mutex's
//!   value and otherwise sets it if absent (`SET ... PX ... NX`). The reports: Redis servers
//!   without persistence restart empty; plain redsync's touch finds no key on a restarted
//!   one, so each restart takes a server out of the lock until it is lost (two restarts of
//!   three), while the option puts the key back at the next extension. It is the same
//!   effect as redlock-rb's extension ([`Cmd::SetIfAbsentOrEq`], whose script the model
//!   sends for both), and so has redlock-rb#36's price: an extension after the keys expired
//!   sets them again instead of failing.
//! - **`node-redlock`** (TypeScript; `mike-marcacci/node-redlock`, `src/index.ts`,
//!   `Redlock.using`): 10 retries (11 attempts) 200 ms ± 100 ms apart, drift factor 0.01;
//!   `using()` schedules an extension `automaticExtensionThreshold` (500 ms) before the
//!   lock's expiration; an extension of a lock already expired on the client's clock
//!   throws, an extension that fails while time is left is retried at once, and one that
//!   fails after the expiration sets `signal.aborted` (with `signal.error`). An extension is
//!   `extend()` whole, which runs its script as an acquire does (`_execute`: every try, the
//!   retry delay between them) and fails only after its last try: a holder cut off from its
//!   servers hears of it some 3 s later with the defaults, long after the expiration (the
//!   real library showed it, `scenarios/validate/node-redlock-cut-off.toml`; the model tried
//!   once before). The routine is expected to look at `signal.aborted` (the workload's
//!   `check = "on_signal"`). Its clock is `Date.now()`, the wall clock: the expiration and
//!   both "time left" checks are read on it (`WallFrame`), so a holder whose wall clock
//!   steps back keeps retrying a failed extension and never aborts, and one stepped forward
//!   aborts early (`catalog/node-redlock-wall-clock-step-back.toml`, `-step-forward.toml`;
//!   the real library does the same, `tests/live.rs`). The expiration is dated from the
//!   `acquire()` call, before its retries, in 5.0.0-beta.2, the release npm installs
//!   (`expiration_from = "call"`, the default; mike-marcacci/node-redlock#296, #299): a lock
//!   granted after retries longer than its validity is born expired and never extended
//!   (`catalog/node-redlock-296-lock-born-expired.toml`; found running the real library
//!   beside the model, which had dated it from the granting try, as the unreleased PR #276
//!   does: `expiration_from = "granting-try"`).
//! - **`pottery`** (`redlock` only; Python; `brainix/pottery`, `pottery/redlock.py`,
//!   `Redlock(key, masters, auto_release_time=10, num_extensions=3)`): `acquire()` sets
//!   `redlock:KEY` to a fresh uuid with `SET NX PX` on every master from a thread pool and
//!   gathers the answers `as_completed`, returning at the first quorum if `auto_release_time
//!   − drift − elapsed` is positive (drift = ttl × 0.01 + 2 ms; its `BailOutExecutor` leaves
//!   the slower requests in flight); otherwise it releases every master and, while the
//!   `timeout` lasts (by default for ever; 60 s here), sleeps `random.uniform(0, 0.2)` s and
//!   tries again. It keeps no validity: `locked()` is the call its users check, a script on
//!   every master that answers the key's `PTTL` where it holds this uuid
//!   ([`Cmd::PttlIfEq`]), and at the first quorum of positive answers returns the smallest
//!   less the drift and the call's own time (0, "not held", without a quorum): the model's
//!   answer to the workload's `check = "ask_servers"`. Unlike redsync's `Valid()` (#72) it
//!   neither waits for a slow master nor forgets the time, so what it says was true when
//!   it said it; a pause after it returns is still Kleppmann's. `extend()` is the
//!   compare-and-`PEXPIRE` script, true at a quorum however long it took, and the fourth
//!   call on one grant raises `TooManyExtensions` without a request (`num_extensions`,
//!   brainix/pottery#692 asks for no limit). There is no automatic renewal
//!   (brainix/pottery#371). redis-py gives its connections no socket timeout unless asked:
//!   a master cut off leaves its request hanging, which the quorum of the others hides; the
//!   model's `request_timeout_ms` bounds it. One master is `instances = 1`.
//! - **`redis-py`** (Python; `redis/redis-py`, `redis/lock.py`, `Lock`): `SET NX PX` with a
//!   fresh uuid token, polled every `sleep` (0.1 s) while `blocking_timeout` lasts; release
//!   and extend run compare-and-delete and compare-and-`PEXPIRE` scripts with the token the
//!   lock object stores. Since redis/redis-py#491 and #492 (2014) the object keeps that
//!   token in `self.local`, a `threading.local()` when `thread_local=True`, the default from
//!   2.10 on (`self.local = threading.local() if self.thread_local else dummy()`, later
//!   `SimpleNamespace()`): each thread of a process that shares one `Lock` object releases
//!   only the token its own `acquire()` stored; the `thread_local` paragraph of
//!   `Lock.__init__`'s docstring tells the #416 timeline as the reason. There is no
//!   client-side validity: `owned()` asks the server.
//! - **`redis-py-shared-token`**: the same `Lock` object shared by several threads with its
//!   token stored on the instance, as before #491 and as `thread_local=False` still does
//!   (redis/redis-py#416, "releasing shared Lock instances with timeouts", 2013-12): thread
//!   0 acquires with a `timeout`, its key expires while it still holds the object, thread 1's
//!   `acquire()` succeeds and overwrites `self.token`; thread 0's late `release()` reads
//!   thread 1's token (`expected_token = self.local.token`, then `self.local.token = None`)
//!   and its compare-and-delete matches: it deletes thread 1's key, and anyone waiting gets
//!   in while thread 1 is inside. A `release()` that finds no token raises `LockError("Cannot
//!   release an unlocked lock")` without a command. Here the threads of the one Python
//!   process are the scenario's clients: every client of a `single-redis` run shares one
//!   stored token (the deployment's [`InstanceToken`]).
//! - **`redlock-rb`** (Ruby; `leandromoreira/redlock-rb`, `lib/redlock/client.rb` and
//!   `scripts.rb`): 4 tries (`retry_count` 3 retries) 200–250 ms apart (`retry_delay` 200,
//!   `retry_jitter` 50), `redis_timeout` 0.1 s, drift factor 0.01. Extending is
//!   `lock(resource, ttl, extend: lock_info)`, one try of the lock script with the old value:
//!   `if EXISTS key == 0 and allow_new_lock or GET key == value then SET key value PX ttl`.
//!   Without `extend_only_if_locked` (`allow_new_lock = "yes"`, still the default) a key
//!   that expired is simply set again: the "extension"
//!   succeeds, the holder gets a fresh validity and never learns that another client held
//!   the lock in between (leandromoreira/redlock-rb#36, 2016-05, whose reproducer lets
//!   another thread take and release the lock, then extends and finds its data changed).
//!   A key that is another's still fails the extension.
//! - **`redlock-rb-extend-only-if-locked`**: the same library with `extend_only_if_locked:
//!   true`, the answer to #36 (PR #37 added an `extend_life` that fails when the lock is not
//!   owned, 0.1.7; PR #43 made it the `extend_life: true` option of the one lock script,
//!   renamed `extend_only_if_locked` in 1.1.0): the script extends only a key that still
//!   holds this value, and a lost lock fails the extension.
//! - **`python-redis-lock`** (Python; `ionelmc/python-redis-lock`, `src/redis_lock/__init__.py`,
//!   `Lock(redis, name, expire=..., auto_renewal=True)`): `SET lock:name id NX EX expire`;
//!   `auto_renewal` starts a daemon thread (`_lock_renewer`) that waits `expire × 2/3`
//!   (`stop.wait(timeout=interval)`) and calls `extend()`: the `EXTEND_SCRIPT` resets the TTL
//!   if the key still holds this id and answers 1 otherwise, which `extend()` raises as
//!   `NotAcquired`. Nothing catches it in the thread: the exception ends the renewal thread
//!   (a connection error does the same) and the application is not told. `release()` runs
//!   the `UNLOCK_SCRIPT`, which raises `NotAcquired` when the key is no longer its own.
//!   There is no client-side validity. A waiter does not poll: after a busy `SET NX` it
//!   blocks in `BLPOP lock-signal:name T` (`T` the acquire timeout, else the expiry), which
//!   only the `UNLOCK_SCRIPT` of a release by the holder feeds (`DEL`, `LPUSH 1`, `PEXPIRE`
//!   1000 ms; one element wakes one waiter); after a wait that timed out, one last `SET NX`.
//!   So a key that expires under a stalled holder lets in nobody who is already waiting
//!   until that waiter's `T` runs out, only a newcomer's first `SET NX` (the model does
//!   the same: the server's `BLPOP`, the client's [`super::client::Waited`]; the real
//!   library, run through `live/drivers/python_redis_lock.py`, showed it: a holder stalled
//!   past its key's expiry lost no update, where the polling model this replaced broke
//!   mutual exclusion; docs/validation.md has the runs).
//!   A process whose Python threads stop longer than the
//!   expiry (a C call holding the GIL; a gevent worker whose hub is blocked, as in
//!   ionelmc/python-redis-lock#91, where switching the Celery pool from gevent to threads
//!   made the symptom go) loses its key under its task; ionelmc/python-redis-lock#85 sees
//!   the `NotAcquired` at the end of tasks of minutes to hours (`expire=60`). The library has
//!   no fix: both are open or closed without a change to the lock.
//!
//! Where the model simplifies: Redisson's lock is a hash with a reentrancy count and its
//! waiters wait on a pub/sub channel; here it is the same `SET NX PX` key as the others and
//! waiters poll every 10–50 ms. Redisson's renewal runs on one shared timer per lock name;
//! here one task per grant. node-redlock counts a lock's expiration from the start of its
//! first attempt; here from the start of the attempt that won (both are before the grant).
//! Every library's timers run on the client's monotonic clock and stop while its process is
//! paused, as a JVM's, Go's and Node's do. redis-py's threads are modelled as client nodes
//! sharing the one stored token: each has its own connection (as redis-py's connection pool
//! gives each thread), and a pause or a crash strikes one thread, not the whole process (a
//! GIL-wide stall would stop them all); the shared object is only its token, read and
//! written atomically (the GIL makes each attribute access so); `blocking_timeout = None`
//! (wait forever) is `acquire_timeout_ms` 60 s here. Only `single-redis` offers redis-py.
//! redlock-rb's failed extension also unlocks every server with its value (nothing of
//! another's is deleted), left out here. python-redis-lock's `expire` is whole seconds
//! (`EXPIRE`), so its `ttl_ms` must be a multiple of 1000, and its acquire timeout is
//! `int(timeout)` seconds (at least 1 here). Its extension is the compare-and-`PEXPIRE` of
//! the others (its `EXTEND_SCRIPT` also answers 2 for a key without a TTL, which its keys
//! never are). A waiter the model's server keeps in its `BLPOP` line after the client gave up
//! on the request (a server paused past the request's timeout) may take a signal; a real
//! server unblocks a client whose connection closed. A stop of
//! its Python threads is a `pause` of the client node (every task of the process stops). Only
//! `single-redis` offers python-redis-lock, `redlock` redsync-pre-71, and both of them
//! redlock-rb (one Redis in #36's reproducer, or several: it is a Redlock client).

use super::client::{GiveUp, Retry, KEY};
use super::store::{Cmd, Reply};
use crate::protocol::{Acquired, ClientProfile, Grant, LockClient, LostSignal, Outcome, Validity};
use async_trait::async_trait;
use futures::lock::Mutex;
use locksim_sim::NodeCtx;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// The client library a Redis protocol is driven by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Library {
    /// The algorithm of the Redis page, renewed only on request.
    #[default]
    Careful,
    /// Redisson's `RLock`: a 30 s lease renewed by a watchdog every 10 s; one failed renewal
    /// stops it.
    Redisson,
    /// Redisson's batched renewal: a renewal that fails with an error is tried again next
    /// period; only a key found not held stops it.
    RedissonReschedule,
    /// go-redsync: 8 s expiry, 32 tries, `Until()`, `Extend()` on request.
    Redsync,
    /// go-redsync before its PR #61: `Extend()` reports success on a lock no longer its own.
    #[serde(rename = "redsync-pre-61")]
    RedsyncPre61,
    /// go-redsync before its PR #71: `Extend()` true on a quorum of touches however long
    /// they took; no `Until()`.
    #[serde(rename = "redsync-pre-71")]
    RedsyncPre71,
    /// go-redsync with `WithSetNXOnExtend()` (PR #149): `Extend()` sets the key again where
    /// it is absent (a server restarted empty, or an expired key).
    RedsyncSetNxOnExtend,
    /// node-redlock's `using()`: automatic extension and an abort signal.
    NodeRedlock,
    /// redlock-rb's `lock(..., extend: lock_info)`: an expired key is set again.
    RedlockRb,
    /// redlock-rb with `extend_only_if_locked: true`: only a key still holding the value is
    /// extended.
    RedlockRbExtendOnlyIfLocked,
    /// python-redis-lock's `Lock(auto_renewal=True)`: a renewal thread that one failed
    /// extension ends; `NotAcquired` at release.
    PythonRedisLock,
    /// pottery's `Redlock`: 10 s auto-release, retried until a timeout, at most 3
    /// extensions, no client-side validity; `locked()` asks the masters.
    Pottery,
    /// redis-py's `Lock` shared by the threads of a process, its token thread-local (the
    /// default since redis/redis-py#491, #492): each thread releases its own token.
    RedisPy,
    /// redis-py's `Lock` shared by the threads of a process with its token on the instance
    /// (redis/redis-py#416; `thread_local=False`): a late release uses another's token.
    RedisPySharedToken,
}

impl Library {
    /// Whether this is one of go-redsync's profiles (its `Valid()` answers `ask_servers`).
    fn is_redsync(self) -> bool {
        matches!(
            self,
            Library::Redsync
                | Library::RedsyncPre61
                | Library::RedsyncPre71
                | Library::RedsyncSetNxOnExtend
        )
    }
}

/// The token a redis-py `Lock` object stores on the instance, shared by every client of a
/// deployment (the threads of one process): `redis-py-shared-token` reads and writes it.
pub type InstanceToken = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// Refuses the libraries only `single-redis` offers (redis-py) on another protocol.
pub fn check_single_redis_library(library: Library) -> Result<(), crate::protocol::ParamError> {
    let why = match library {
        Library::RedisPy | Library::RedisPySharedToken => "redis-py's Lock",
        Library::PythonRedisLock => "python-redis-lock's Lock",
        _ => return Ok(()),
    };
    Err(crate::protocol::ParamError::field(
        "client",
        format!("{why} is modelled on single-redis only"),
    ))
}

/// python-redis-lock's `acquire(timeout=T)` as the library takes it, in whole seconds
/// (`int(timeout)`), at least 1 (below 1 the library waits `expire` seconds a time and never
/// times out): what its waiters' `BLPOP` blocks for, in the model and in the real driver.
pub fn python_redis_lock_timeout_s(acquire_timeout_ms: u64) -> u64 {
    (acquire_timeout_ms / 1000).max(1)
}

/// node-redlock's default `automaticExtensionThreshold`, in ms.
pub fn default_extension_threshold_ms() -> u64 {
    500
}

fn table(pairs: &[(&str, i64)]) -> toml::Table {
    let mut t = toml::Table::new();
    for (key, value) in pairs {
        t.insert((*key).into(), toml::Value::Integer(*value));
    }
    t
}

fn profile(name: &'static str, description: &'static str, pairs: &[(&str, i64)]) -> ClientProfile {
    ClientProfile {
        name,
        description,
        defaults: table(pairs),
    }
}

fn careful() -> ClientProfile {
    profile(
        "careful",
        "the Redis page's algorithm as written: validity = ttl - elapsed - drift, extended only \
         when the application asks",
        &[],
    )
}

/// The profile with the drift factor most Redlock libraries use, 0.01.
fn with_drift(mut p: ClientProfile) -> ClientProfile {
    let drift = toml::Value::Float(0.01);
    p.defaults.insert("clock_drift_factor".into(), drift);
    p
}

/// The profiles of the one-server protocols (`single-redis`, `replicated-redis`).
pub fn one_server_profiles() -> Vec<ClientProfile> {
    vec![
        careful(),
        profile(
            "redisson",
            "Redisson RLock.lock(): 30 s lease renewed every 10 s by a watchdog while the \
             process runs; a failed renewal is only logged; no client-side validity",
            &[
                ("ttl_ms", 30_000),
                ("retry_delay_ms_min", 10),
                ("retry_delay_ms_max", 50),
                ("acquire_timeout_ms", 60_000),
            ],
        ),
        profile(
            "redisson-reschedule",
            "Redisson's batched renewal (RenewalTask): as redisson, but a renewal that fails \
             with an error is tried again 10 s later; only a lock found not held stops it",
            &[
                ("ttl_ms", 30_000),
                ("retry_delay_ms_min", 10),
                ("retry_delay_ms_max", 50),
                ("acquire_timeout_ms", 60_000),
            ],
        ),
        with_drift(profile(
            "redsync",
            "go-redsync Mutex: 8 s expiry, 32 tries 50-250 ms apart, Until() = expiry - \
             elapsed - drift, Extend() on request",
            &[
                ("ttl_ms", 8_000),
                ("retry_count", 32),
                ("retry_delay_ms_min", 50),
                ("retry_delay_ms_max", 250),
            ],
        )),
        with_drift(profile(
            "redsync-pre-61",
            "go-redsync before PR #61: as redsync, but Extend() reports success on an \
             expired or taken lock (its reply check compared int64(0) with 0)",
            &[
                ("ttl_ms", 8_000),
                ("retry_count", 32),
                ("retry_delay_ms_min", 50),
                ("retry_delay_ms_max", 250),
            ],
        )),
        with_drift(profile(
            "node-redlock",
            "node-redlock using(): 11 attempts 200 +- 100 ms apart, extended 500 ms before \
             expiry, signal.aborted when an extension fails",
            &[
                ("retry_count", 11),
                ("retry_delay_ms_min", 100),
                ("retry_delay_ms_max", 300),
                ("extension_threshold_ms", 500),
            ],
        )),
    ]
}

/// redlock-rb's pair: the default extension, which sets an expired key again, and the one
/// with `extend_only_if_locked`.
fn redlock_rb_profiles() -> Vec<ClientProfile> {
    let defaults = [
        ("retry_count", 4),
        ("retry_delay_ms_min", 200),
        ("retry_delay_ms_max", 250),
        ("request_timeout_ms", 100),
    ];
    let pair = [
        profile(
            "redlock-rb",
            "redlock-rb: 4 tries 200-250 ms apart; lock(..., extend: lock_info) sets an \
             expired key again, so an extension after the lock was lost succeeds \
             (redlock-rb#36)",
            &defaults,
        ),
        profile(
            "redlock-rb-extend-only-if-locked",
            "redlock-rb with extend_only_if_locked: true: only a key that still holds the \
             value is extended; a lost lock fails the extension",
            &defaults,
        ),
    ];
    pair.into_iter().map(with_drift).collect()
}

/// The profiles of `single-redis`: the one-server profiles, redlock-rb's pair, redis-py's
/// pair, whose threads share one stored token through the deployment, and
/// python-redis-lock.
pub fn single_redis_profiles() -> Vec<ClientProfile> {
    let redis_py = [
        ("retry_delay_ms_min", 100),
        ("retry_delay_ms_max", 100),
        ("acquire_timeout_ms", 60_000),
    ];
    let mut all = one_server_profiles();
    all.extend(redlock_rb_profiles());
    all.push(profile(
        "redis-py",
        "redis-py Lock shared by a process's threads, token in threading.local \
         (thread_local=True): polled every 0.1 s, each thread releases its own token; no \
         client-side validity",
        &redis_py,
    ));
    all.push(profile(
        "redis-py-shared-token",
        "redis-py Lock shared by a process's threads with its token on the instance \
         (redis-py#416, thread_local=False): a late release() deletes the key of the \
         thread that acquired since",
        &redis_py,
    ));
    all.push(profile(
        "python-redis-lock",
        "python-redis-lock Lock(expire, auto_renewal=True): waiters block in BLPOP on a \
         signal list only a release by the holder pushes to (an expired key wakes nobody); a \
         renewal thread extends every expire*2/3; one failed extension (NotAcquired) ends it \
         silently; release() raises NotAcquired on a lost key; no client-side validity",
        &[("acquire_timeout_ms", 60_000)],
    ));
    all
}

/// The profiles of `redlock` (the same libraries on N masters; Redisson's `RedissonRedLock`
/// is deprecated and left out), with redsync before #71, redlock-rb's pair and pottery.
pub fn redlock_profiles() -> Vec<ClientProfile> {
    let mut all: Vec<ClientProfile> = one_server_profiles()
        .into_iter()
        .filter(|p| !p.name.starts_with("redisson"))
        .collect();
    let redsync = all
        .iter()
        .find(|p| p.name == "redsync")
        .expect("redsync is a one-server profile")
        .clone();
    let variant = |name, description| ClientProfile {
        name,
        description,
        ..redsync.clone()
    };
    all.push(variant(
        "redsync-pre-71",
        "go-redsync before PR #71: as redsync, but Extend() is true on a quorum of touches \
         however long they took (keys may have expired), until is not moved, no Until(); \
         Valid() as redsync's",
    ));
    all.push(variant(
        "redsync-set-nx-on-extend",
        "go-redsync with WithSetNXOnExtend() (PR #149): as redsync, but Extend() sets the key \
         where it is absent, so a server restarted empty holds the lock again after the next \
         extension (and an expired key is set again)",
    ));
    all.extend(redlock_rb_profiles());
    all.push(with_drift(profile(
        "pottery",
        "pottery Redlock: 10 s auto-release, tries 0-200 ms apart until the acquire timeout, \
         each gathering replies only until a quorum; at most 3 extend() calls, then \
         TooManyExtensions; no client-side validity: locked() asks the masters (smallest TTL \
         of a quorum - drift - the call's time)",
        &[
            ("ttl_ms", 10_000),
            ("retry_delay_ms_min", 0),
            ("retry_delay_ms_max", 200),
            ("acquire_timeout_ms", 60_000),
        ],
    )));
    all
}

/// What the current grant shares with the library's own timers.
struct Held {
    grant: Rc<RefCell<Grant>>,
    signal: LostSignal,
    /// Cleared at release: the timers stop.
    alive: Rc<Cell<bool>>,
}

/// What node-redlock dates a lock's expiration from (`expiration_from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpirationFrom {
    /// The `acquire()` call, before its retries: 5.0.0-beta.2, the release npm installs
    /// (mike-marcacci/node-redlock#296, #299). A lock granted after retries longer than its
    /// validity is born expired on the client.
    #[default]
    Call,
    /// The try that was granted: PR #276, merged, never released.
    GrantingTry,
}

/// Checks the parameters a library adds: node-redlock refuses a threshold within 100 ms of
/// the duration (`using()`'s own check); `expiration_from` is node-redlock's alone (every
/// other library dates a grant from the try that got it).
pub fn check_library(
    library: Library,
    ttl_ms: u64,
    threshold_ms: u64,
    expiration_from: ExpirationFrom,
) -> Result<(), crate::protocol::ParamError> {
    if expiration_from != ExpirationFrom::Call && library != Library::NodeRedlock {
        return Err(crate::protocol::ParamError::field(
            "expiration_from",
            "is node-redlock's (client = \"node-redlock\"); other libraries date a grant \
             from the try that got it",
        ));
    }
    if library == Library::PythonRedisLock && !ttl_ms.is_multiple_of(1000) {
        return Err(crate::protocol::ParamError::field(
            "ttl_ms",
            "must be whole seconds for python-redis-lock (its expire is an EXPIRE in seconds)",
        ));
    }
    if library == Library::NodeRedlock && threshold_ms + 100 > ttl_ms {
        return Err(crate::protocol::ParamError::field(
            "extension_threshold_ms",
            "must be at least 100 ms below ttl_ms (node-redlock refuses it)",
        ));
    }
    Ok(())
}

/// The command `library` extends a lock held with `value` by: redlock-rb's lock script
/// (which sets an expired key again), or compare-and-`PEXPIRE`.
pub fn extend_cmd(library: Library, value: &str, ttl_ms: u64) -> Cmd {
    let (key, value) = (KEY.to_owned(), value.to_owned());
    match library {
        Library::RedlockRb | Library::RedsyncSetNxOnExtend => Cmd::SetIfAbsentOrEq {
            key,
            value,
            px_ms: ttl_ms.into(),
        },
        _ => Cmd::PexpireIfEq {
            key,
            value,
            px_ms: ttl_ms.into(),
        },
    }
}

/// Whether a server's reply to [`extend_cmd`] says the key was extended (`PEXPIRE`'s 1, or
/// the `OK` of redlock-rb's `SET`).
pub fn extended(reply: &Reply) -> bool {
    matches!(reply, Reply::Int(1) | Reply::Ok)
}

/// The retry loop of a one-server client: `retry_count` tries if set (redsync,
/// node-redlock), else until `acquire_timeout_ms`.
pub fn one_server_retry(
    delay_ms_min: u64,
    delay_ms_max: u64,
    retry_count: u32,
    acquire_timeout_ms: u64,
) -> Retry {
    let mut retry = Retry::until(delay_ms_min, delay_ms_max, acquire_timeout_ms);
    if retry_count > 0 {
        retry.give_up = GiveUp::Tries(retry_count);
    }
    retry
}

/// A protocol's client driven as `library` drives it.
pub struct Profiled<C> {
    ctx: NodeCtx,
    library: Library,
    inner: Rc<Mutex<C>>,
    held: Option<Held>,
    /// node-redlock's `automaticExtensionThreshold`.
    threshold: Duration,
    /// Redisson's lease (the watchdog renews every third of it).
    lease: Duration,
    /// redis-py's stored token (shared with the other clients for `redis-py-shared-token`).
    instance: InstanceToken,
    /// node-redlock's `extend()`: the acquire's retry loop (`_execute`), its tries and the
    /// delay between them.
    extend_retry: Retry,
    /// node-redlock's lock validity, ttl − drift, if `acquire()` dates it from its call,
    /// before its retries ([`Profiled::dated_from_call`]).
    from_call: Option<Duration>,
}

impl<C: LockClient + 'static> Profiled<C> {
    /// `inner` as `library` drives it; `lease_ms` is the key's TTL, `threshold_ms`
    /// node-redlock's extension threshold.
    pub fn new(
        ctx: &NodeCtx,
        library: Library,
        inner: C,
        lease_ms: u64,
        threshold_ms: u64,
    ) -> Self {
        Profiled {
            ctx: ctx.clone(),
            library,
            inner: Rc::new(Mutex::new(inner)),
            held: None,
            threshold: Duration::from_millis(threshold_ms),
            lease: Duration::from_millis(lease_ms),
            instance: InstanceToken::default(),
            extend_retry: Retry {
                delay_ms_min: 0,
                delay_ms_max: 0,
                give_up: GiveUp::Tries(1),
            },
            from_call: None,
        }
    }

    /// node-redlock dates a lock's `validity` (ttl − drift) from `from`.
    pub fn expiring_from(mut self, from: ExpirationFrom, validity: Duration) -> Self {
        let by_call = self.library == Library::NodeRedlock && from == ExpirationFrom::Call;
        self.from_call = by_call.then_some(validity);
        self
    }

    /// node-redlock 5.0.0-beta.2 (npm's `redlock@5.0.0-beta.2`, `dist/cjs/index.js`) takes
    /// `start = Date.now()` when `acquire()` is called and, after its retries, returns a lock
    /// expiring at `start + duration - drift`: a lock granted after retries longer than that
    /// is born expired on the client, though its key on the server is fresh, and `using()`'s
    /// first extension, due at once, throws "Cannot extend an already-expired lock."
    /// (mike-marcacci/node-redlock#296, #299; the fix, #276, dates it from the granting
    /// attempt and is unreleased: `expiration_from = "granting-try"`). `expires` is that
    /// expiration on the monotonic clock, taken when the call began (`None`: not so dated).
    fn dated_from_call(grant: &mut Grant, expires: Option<Duration>) {
        if let (Some(expires), Some(until)) = (expires, grant.valid_until.as_mut()) {
            *until = (*until).min(expires);
        }
    }

    /// node-redlock's `extend()` tries as its `_execute` does, with the acquire's `retry`:
    /// its number of tries and the delay between them (one try if it gives up after a time).
    pub fn extending_with(mut self, retry: Retry) -> Self {
        self.extend_retry = retry;
        self
    }

    /// Shares `instance`, the token a redis-py `Lock` object stores, with the other clients
    /// given it.
    pub fn sharing(mut self, instance: InstanceToken) -> Self {
        self.instance = instance;
        self
    }

    /// The grant with the token the library releases and extends with: for
    /// `redis-py-shared-token` the instance's (`None`: no token stored, a `LockError`),
    /// noting when it is not this thread's.
    fn token_for(&self, grant: &Grant, op: &str) -> Option<Grant> {
        if self.library != Library::RedisPySharedToken {
            return Some(grant.clone());
        }
        let mut stored = self.instance.lock().unwrap();
        let token = if op == "release" {
            stored.take()
        } else {
            stored.clone()
        };
        drop(stored);
        let Some(token) = token else {
            let why = format!("Cannot {op} an unlocked lock");
            self.ctx.note(format!(
                "redis-py {op}(): no token on the instance: LockError ({why})"
            ));
            return None;
        };
        if token != grant.handle {
            self.ctx.note(format!(
                "redis-py {op}(): the instance's token is {token}, another thread's, not {}",
                grant.handle
            ));
        }
        Some(Grant {
            handle: token,
            ..grant.clone()
        })
    }

    /// `grant` as the library's own timers last left it (a renewal moves its validity).
    fn current(&self, grant: &Grant) -> Grant {
        match &self.held {
            Some(held) if held.grant.borrow().handle == grant.handle => held.grant.borrow().clone(),
            _ => grant.clone(),
        }
    }

    /// Starts the library's own timers for a fresh grant.
    fn hold(&mut self, grant: &Grant) {
        if let Some(old) = self.held.take() {
            old.alive.set(false);
        }
        let held = Held {
            grant: Rc::new(RefCell::new(grant.clone())),
            signal: LostSignal::new(),
            alive: Rc::new(Cell::new(true)),
        };
        let (ctx, inner) = (self.ctx.clone(), self.inner.clone());
        let (grant, alive) = (held.grant.clone(), held.alive.clone());
        match self.library {
            Library::Redisson | Library::RedissonReschedule => {
                let every = self.lease / 3;
                let reschedule = self.library == Library::RedissonReschedule;
                self.ctx
                    .spawn(watchdog(ctx, inner, grant, alive, every, reschedule));
            }
            Library::NodeRedlock => {
                let (signal, threshold) = (held.signal.clone(), self.threshold);
                let retry = self.extend_retry;
                self.ctx.spawn(auto_extend(
                    ctx,
                    inner,
                    grant,
                    alive,
                    signal,
                    (threshold, retry),
                ));
            }
            Library::PythonRedisLock => {
                let every = self.lease * 2 / 3;
                self.ctx
                    .spawn(renewal_thread(ctx, inner, grant, alive, every));
            }
            Library::Careful
            | Library::Redsync
            | Library::RedsyncPre61
            | Library::RedsyncPre71
            | Library::RedsyncSetNxOnExtend
            | Library::RedlockRb
            | Library::RedlockRbExtendOnlyIfLocked
            | Library::Pottery
            | Library::RedisPy
            | Library::RedisPySharedToken => {}
        }
        self.held = Some(held);
    }
}

/// Redisson's watchdog: every `every`, reset the TTL while the key is ours; on a failure, log
/// and stop (`RedissonBaseLock.renewExpiration`), or with `reschedule` (the batched renewal,
/// `RenewalTask.run`) log an error and try again next period, stopping only when the server
/// says the key is not ours.
async fn watchdog<C: LockClient>(
    ctx: NodeCtx,
    inner: Rc<Mutex<C>>,
    grant: Rc<RefCell<Grant>>,
    alive: Rc<Cell<bool>>,
    every: Duration,
    reschedule: bool,
) {
    loop {
        ctx.sleep_local(every).await;
        let Some(outcome) = renew_once(&inner, &grant, &alive).await else {
            return;
        };
        match outcome {
            Outcome::Ok => {}
            Outcome::Unknown(why) if reschedule => {
                ctx.note(format!(
                    "redisson renewal: can't update lock expiration ({why}); tried again in \
                     {} ms",
                    every.as_millis()
                ));
            }
            Outcome::Failed(why) | Outcome::Unknown(why) => {
                ctx.note(format!(
                    "redisson watchdog: can't update lock expiration ({why}); renewal stopped, \
                     only logged"
                ));
                return;
            }
        }
    }
}

/// One turn of a library's renewal timer: `None` once the grant was released (the timer
/// stops), else what `extend` answered; a success moves the grant. The client is locked for
/// the whole turn, as the library's one connection is.
async fn renew_once<C: LockClient>(
    inner: &Mutex<C>,
    grant: &RefCell<Grant>,
    alive: &Cell<bool>,
) -> Option<Outcome> {
    let mut client = inner.lock().await;
    if !alive.get() {
        return None;
    }
    let mut renewed = grant.borrow().clone();
    let outcome = client.extend(&mut renewed).await;
    if outcome == Outcome::Ok {
        *grant.borrow_mut() = renewed;
    }
    Some(outcome)
}

/// python-redis-lock's `_lock_renewer`: every `every`, `extend()`; the first failure raises
/// `NotAcquired` (or a connection error) in the thread, which ends it: nobody is told.
async fn renewal_thread<C: LockClient>(
    ctx: NodeCtx,
    inner: Rc<Mutex<C>>,
    grant: Rc<RefCell<Grant>>,
    alive: Rc<Cell<bool>>,
    every: Duration,
) {
    loop {
        ctx.sleep_local(every).await;
        let why = match renew_once(&inner, &grant, &alive).await {
            None => return,
            Some(Outcome::Ok) => continue,
            Some(Outcome::Failed(why)) => format!("NotAcquired ({why})"),
            Some(Outcome::Unknown(why)) => format!("ConnectionError ({why})"),
        };
        ctx.note(format!(
            "python-redis-lock renewal thread: extend() raised {why}; the thread ended, \
             nobody told"
        ));
        return;
    }
}

/// node-redlock reads its clock by `Date.now()`: a lock's expiration and its "already
/// expired" checks are on the wall clock (`src/index.ts`: `start + duration - drift`,
/// `existing.expiration < Date.now()`, `lock.expiration > Date.now()`). The model's grant
/// is on the monotonic clock; a frame is the wall clock's lead over it when an expiration
/// was set, and [`WallFrame::now`] reads the wall clock in that frame: the monotonic
/// clock plus any step since. Without a `clock_jump` the two run at one rate and it is the
/// monotonic clock.
#[derive(Clone, Copy)]
struct WallFrame(i64);

impl WallFrame {
    fn of(ctx: &NodeCtx) -> WallFrame {
        WallFrame(ctx.wall_ms() - ctx.mono_now().as_millis() as i64)
    }

    /// `Date.now()` in this frame.
    fn now(self, ctx: &NodeCtx) -> Duration {
        let (mono, step_ms) = (ctx.mono_now(), WallFrame::of(ctx).0 - self.0);
        // Both readings are whole ms: a difference of one is their rounding, not a step.
        match step_ms {
            -1..=1 => mono,
            2.. => mono + Duration::from_millis(step_ms as u64),
            _ => mono.saturating_sub(Duration::from_millis(step_ms.unsigned_abs())),
        }
    }
}

/// node-redlock's `extend()`: "Cannot extend an already-expired lock." if it has expired
/// (by `Date.now()`, in `frame`), else the script tried as `_execute` tries it; the error of
/// the last try if all failed.
async fn extend_tried<C: LockClient>(
    ctx: &NodeCtx,
    client: &mut C,
    (grant, frame): (&RefCell<Grant>, WallFrame),
    retry: Retry,
) -> Result<(), String> {
    let until = grant.borrow().valid_until.unwrap_or_default();
    if frame.now(ctx) >= until {
        return Err("Cannot extend an already-expired lock.".to_owned());
    }
    let tries = match retry.give_up {
        GiveUp::Tries(n) => n.max(1),
        GiveUp::After(_) => 1,
    };
    let mut why = String::new();
    for tried in 1..=tries {
        let mut extended = grant.borrow().clone();
        match client.extend(&mut extended).await {
            Outcome::Ok => {
                *grant.borrow_mut() = extended;
                return Ok(());
            }
            Outcome::Failed(w) | Outcome::Unknown(w) => why = w,
        }
        if tried < tries {
            let delay_ms = ctx.rng().gen_range(retry.delay_ms_min..=retry.delay_ms_max);
            ctx.sleep_local(Duration::from_millis(delay_ms)).await;
        }
    }
    Err(format!("{tries} tries: {why}"))
}

/// node-redlock's `using()`: extend `threshold` before the expiration; a failure after the
/// expiration aborts the routine through `signal`. An extension is `extend()` whole, with
/// its tries (`using()` waits for it before it releases).
async fn auto_extend<C: LockClient>(
    ctx: NodeCtx,
    inner: Rc<Mutex<C>>,
    grant: Rc<RefCell<Grant>>,
    alive: Rc<Cell<bool>>,
    signal: LostSignal,
    (threshold, retry): (Duration, Retry),
) {
    let Some(until) = grant.borrow().valid_until else {
        return;
    };
    let mut frame = WallFrame::of(&ctx);
    ctx.sleep_local(until.saturating_sub(ctx.mono_now() + threshold))
        .await;
    loop {
        let mut client = inner.lock().await;
        if !alive.get() {
            return;
        }
        // The replacement's expiration counts from `Date.now()` at the extension's start.
        let extending = WallFrame::of(&ctx);
        let why = match extend_tried(&ctx, &mut *client, (&grant, frame), retry).await {
            Ok(()) => {
                frame = extending;
                let until = grant.borrow().valid_until.unwrap_or_default();
                drop(client);
                ctx.sleep_local(until.saturating_sub(ctx.mono_now() + threshold))
                    .await;
                continue;
            }
            Err(why) => why,
        };
        // Time left on the old expiration, by `Date.now()`: node-redlock tries again at once.
        if frame.now(&ctx) < grant.borrow().valid_until.unwrap_or_default() {
            continue;
        }
        ctx.note(format!(
            "node-redlock: extension failed ({why}): signal aborted"
        ));
        signal.raise(why);
        return;
    }
}

#[async_trait(?Send)]
impl<C: LockClient + 'static> LockClient for Profiled<C> {
    async fn acquire(&mut self) -> Acquired {
        // Read only where the expiration is dated from the call (node-redlock's release).
        let expires = (self.from_call).map(|validity| self.ctx.mono_now() + validity);
        let mut acquired = self.inner.lock().await.acquire().await;
        if let Acquired::Granted(grant) = &mut acquired {
            Self::dated_from_call(grant, expires);
            self.hold(grant);
            if self.library == Library::RedisPySharedToken {
                *self.instance.lock().unwrap() = Some(grant.handle.clone());
            }
        }
        acquired
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        if let Some(held) = self.held.take() {
            held.alive.set(false);
        }
        let Some(used) = self.token_for(grant, "release") else {
            return Outcome::Failed("Cannot release an unlocked lock".into());
        };
        let outcome = self.inner.lock().await.release(&used).await;
        match (self.library, outcome) {
            (Library::PythonRedisLock, Outcome::Failed(why)) => {
                let raised = "NotAcquired: the lock is not acquired or it already expired";
                self.ctx
                    .note(format!("python-redis-lock release(): {raised} ({why})"));
                Outcome::Failed(raised.into())
            }
            (_, outcome) => outcome,
        }
    }

    async fn extend(&mut self, grant: &mut Grant) -> Outcome {
        let Some(mut used) = self.token_for(grant, "extend") else {
            return Outcome::Failed("Cannot extend an unlocked lock".into());
        };
        let outcome = self.inner.lock().await.extend(&mut used).await;
        if used.handle == grant.handle {
            *grant = used;
        }
        if let (Library::RedsyncPre61, Outcome::Failed(why)) = (self.library, &outcome) {
            self.ctx.note(format!(
                "redsync Extend(): {why}, read as success (the touch reply check before PR #61)"
            ));
            return Outcome::Ok;
        }
        if let (Outcome::Ok, Some(held)) = (&outcome, &self.held) {
            *held.grant.borrow_mut() = grant.clone();
        }
        outcome
    }

    fn validity(&mut self, grant: &Grant) -> Validity {
        match self.library {
            // No client-side validity (redsync had no `Until()` before #71).
            Library::Redisson
            | Library::RedissonReschedule
            | Library::RedsyncPre71
            | Library::Pottery
            | Library::RedisPy
            | Library::RedisPySharedToken
            | Library::PythonRedisLock => return Validity::Indefinite,
            Library::Careful => {
                if let Some(mut inner) = self.inner.try_lock() {
                    return inner.validity(grant);
                }
            }
            Library::Redsync
            | Library::RedsyncPre61
            | Library::RedsyncSetNxOnExtend
            | Library::NodeRedlock
            | Library::RedlockRb
            | Library::RedlockRbExtendOnlyIfLocked => {}
        }
        match self.current(grant).valid_until {
            Some(until) => Validity::Until(until),
            None => Validity::Indefinite,
        }
    }

    async fn ask_servers(&mut self, grant: &Grant) -> Validity {
        let answer = self.inner.lock().await.ask_servers(grant).await;
        let redsync = self.library.is_redsync();
        let (now, until) = (self.ctx.mono_now(), self.current(grant).valid_until);
        if let (true, Validity::Indefinite, Some(until)) = (redsync, &answer, until) {
            if now >= until {
                let late_ms = (now - until).as_millis();
                self.ctx.note(format!(
                    "redsync Valid(): true {late_ms} ms past the mutex's until"
                ));
            }
        }
        answer
    }

    fn lost_signal(&mut self, grant: &Grant) -> Option<LostSignal> {
        let held = self.held.as_ref()?;
        let ours = held.grant.borrow().handle == grant.handle;
        (self.library == Library::NodeRedlock && ours).then(|| held.signal.clone())
    }
}
