//! The core every Redis lock client shares: a unique value per attempt, the acquire command
//! (`SET key value NX PX ttl`, or the script that also takes an `INCR` token), the clock-drift
//! allowance of the Redis distributed-locks page and the validity it leaves, the retry loop,
//! and for clients of one server at a time (`single-redis`, `replicated-redis`) the release
//! (compare-and-delete), the extension (compare-and-`PEXPIRE`) and the "grant arrived too
//! late" check. What differs (Redlock's quorum, Sentinel's primary, `WAIT`, the bug
//! variants) stays in each protocol's file.

use crate::protocol::{Acquired, Grant, LockClient, Outcome, ParamError, Validity};
use async_trait::async_trait;
use locksim_sim::rpc::RpcError;
use locksim_sim::NodeCtx;
use rand::Rng;
use std::time::Duration;

/// The lock key.
pub const KEY: &str = "lock";
/// The fencing-token counter key.
pub const TOKEN_KEY: &str = "lock:token";
/// python-redis-lock's signal list, which its release pushes to and its waiters `BLPOP`.
pub const SIGNAL_KEY: &str = "lock-signal";

use super::store::{Cmd, IntArg, Reply};

/// Default lock TTL, in ms (for `#[serde(default = ...)]`).
pub fn default_ttl_ms() -> u64 {
    2_000
}
/// Default shortest delay between acquire attempts, in ms.
pub fn default_retry_delay_ms_min() -> u64 {
    10
}
/// Default longest delay between acquire attempts, in ms.
pub fn default_retry_delay_ms_max() -> u64 {
    50
}
/// Default time after which an acquire gives up, in ms.
pub fn default_acquire_timeout_ms() -> u64 {
    10_000
}
/// Default timeout of one request, in ms.
pub fn default_request_timeout_ms() -> u64 {
    100
}
/// Default clock drift factor (the Redis page's 0.01).
pub fn default_clock_drift_factor() -> f64 {
    0.01
}
/// Default period of a server's active expiry, in ms (Redis `hz 10`).
pub fn default_active_expire_interval_ms() -> u64 {
    100
}

/// A fresh lock value, unique per attempt (real clients use 20 random bytes; unique is what
/// matters: compare-and-delete must never match another attempt's key).
pub fn lock_value(ctx: &NodeCtx) -> String {
    let n: u64 = ctx.rng().gen();
    lock_value_text(ctx.name(), n)
}

/// `format!("{name}:{n:016x}")`, built by hand: one is made per attempt, and the formatting
/// machinery cost a tenth of a single-Redis run's client time.
pub fn lock_value_text(name: &str, n: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut value = String::with_capacity(name.len() + 17);
    value.push_str(name);
    value.push(':');
    for shift in (0..16).rev() {
        value.push(HEX[(n >> (shift * 4)) as usize & 0xf] as char);
    }
    value
}

/// The acquire command: `SET KEY value NX [PX ttl]`, or with `tokens` the script that also
/// `INCR`s the token counter and returns it.
pub fn acquire_cmd(value: &str, px_ms: Option<IntArg>, tokens: bool) -> Cmd {
    if tokens {
        Cmd::SetNxIncr {
            key: KEY.into(),
            value: value.into(),
            px_ms,
            counter: TOKEN_KEY.into(),
        }
    } else {
        Cmd::Set {
            key: KEY.into(),
            value: value.into(),
            nx: true,
            px_ms,
        }
    }
}

/// The compare-and-delete release script (deletes the key only if it holds `value`).
pub fn release_cmd(value: &str) -> Cmd {
    Cmd::DelIfEq {
        key: KEY.into(),
        value: value.into(),
    }
}

/// The drift allowance in ms: ttl × `clock_drift_factor` + 2 ms.
pub fn drift_allowance_ms(ttl_ms: u64, clock_drift_factor: f64) -> f64 {
    ttl_ms as f64 * clock_drift_factor + 2.0
}

/// The validity a grant gets, from the start of the attempt: ttl − drift allowance.
pub fn validity(ttl_ms: u64, clock_drift_factor: f64) -> Duration {
    let drift_ms = drift_allowance_ms(ttl_ms, clock_drift_factor);
    Duration::from_micros(((ttl_ms as f64 - drift_ms).max(0.0) * 1000.0) as u64)
}

/// Checks a `clock_drift_factor` parameter.
pub fn check_drift_factor(clock_drift_factor: f64) -> Result<(), ParamError> {
    if (0.0..1.0).contains(&clock_drift_factor) {
        Ok(())
    } else {
        Err(ParamError::field("clock_drift_factor", "must be in [0, 1)"))
    }
}

/// Checks `retry_delay_ms_min` against `retry_delay_ms_max`.
pub fn check_retry_delays(min_ms: u64, max_ms: u64) -> Result<(), ParamError> {
    if min_ms > max_ms {
        return Err(ParamError::field(
            "retry_delay_ms_min",
            "must not exceed retry_delay_ms_max",
        ));
    }
    Ok(())
}

/// The result of one acquire attempt.
pub enum Attempt {
    /// The lock is ours.
    Granted(Grant),
    /// Definitely not ours this time (why).
    Busy(String),
    /// Perhaps ours: the last request timed out (why).
    Unknown(String),
}

/// When the retry loop gives up.
#[derive(Clone, Copy, Debug)]
pub enum GiveUp {
    /// When the next try would start after this long (local time) since the first.
    After(Duration),
    /// After this many tries (Redlock's `retry_count`).
    Tries(u32),
}

/// The retry loop's settings.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Shortest random delay between tries, in ms.
    pub delay_ms_min: u64,
    /// Longest random delay between tries, in ms.
    pub delay_ms_max: u64,
    /// When to stop.
    pub give_up: GiveUp,
}

impl Retry {
    /// Random delays of `delay_ms_min..=delay_ms_max` until `timeout_ms` has passed.
    pub fn until(delay_ms_min: u64, delay_ms_max: u64, timeout_ms: u64) -> Retry {
        Retry {
            delay_ms_min,
            delay_ms_max,
            give_up: GiveUp::After(Duration::from_millis(timeout_ms)),
        }
    }
}

/// How a client that waits its own way ([`Attempts::waits_on_signal`]) waited.
pub enum Waited {
    /// Something was pushed: try again.
    Signalled,
    /// The wait's timeout passed with nothing pushed.
    TimedOut,
    /// The wait failed (a timeout of the request itself, an error reply).
    Failed(String),
}

/// One try of a Redis lock algorithm; [`acquire`] retries it.
#[async_trait(?Send)]
pub trait Attempts {
    /// The client's node.
    fn ctx(&self) -> &NodeCtx;
    /// One try.
    async fn attempt(&mut self) -> Attempt;
    /// Whether a busy try is followed by [`Attempts::wait_for_signal`] rather than the retry
    /// loop's random delay (python-redis-lock).
    fn waits_on_signal(&self) -> bool {
        false
    }
    /// Blocks until a holder's release signals (python-redis-lock's `BLPOP` on its signal
    /// list) or the wait times out.
    async fn wait_for_signal(&mut self) -> Waited {
        Waited::Failed("this client does not wait on a signal".into())
    }
}

/// Tries until granted, with a random delay between tries, until `retry` gives up (or, for
/// a client that waits on a signal, as [`acquire_on_signal`] does).
pub async fn acquire(client: &mut dyn Attempts, retry: Retry) -> Acquired {
    if client.waits_on_signal() {
        return acquire_on_signal(client).await;
    }
    let ctx = client.ctx().clone();
    let start = ctx.mono_now();
    let mut tries = 0;
    loop {
        tries += 1;
        let last = match client.attempt().await {
            Attempt::Granted(grant) => return Acquired::Granted(grant),
            other => other,
        };
        // No delay is drawn after the last of a number of tries; a timeout needs the delay
        // to decide whether the next try would start too late.
        if matches!(retry.give_up, GiveUp::Tries(n) if tries >= n) {
            return gave_up(last, retry.give_up);
        }
        let delay_ms = ctx.rng().gen_range(retry.delay_ms_min..=retry.delay_ms_max);
        let delay = Duration::from_millis(delay_ms);
        if matches!(retry.give_up, GiveUp::After(t) if ctx.mono_now() + delay >= start + t) {
            return gave_up(last, retry.give_up);
        }
        ctx.sleep_local(delay).await;
    }
}

/// python-redis-lock's `acquire(blocking=True, timeout=T)`: try; while busy, block until a
/// release signals or `T` passes, and after a wait that timed out, one last try. Each wait
/// may take the whole `T` again, so an acquire that keeps being signalled is not bounded by
/// `T`. A connection error or timeout raises out of it: unknown.
async fn acquire_on_signal(client: &mut dyn Attempts) -> Acquired {
    let mut waited_out = false;
    loop {
        match client.attempt().await {
            Attempt::Granted(grant) => return Acquired::Granted(grant),
            Attempt::Unknown(why) => return Acquired::Unknown(why),
            Attempt::Busy(_) if waited_out => {
                return Acquired::Failed("acquire timeout: no release signalled".into())
            }
            Attempt::Busy(_) => {}
        }
        match client.wait_for_signal().await {
            Waited::Signalled => {}
            Waited::TimedOut => waited_out = true,
            Waited::Failed(why) => return Acquired::Unknown(why),
        }
    }
}

/// What an acquire that `give_up` ended reports, after `last` (also live mode's).
pub fn gave_up(last: Attempt, give_up: GiveUp) -> Acquired {
    match (give_up, last) {
        (GiveUp::Tries(n), Attempt::Busy(why) | Attempt::Unknown(why)) => {
            Acquired::Failed(format!("{n} tries: {why}"))
        }
        (GiveUp::After(_), Attempt::Unknown(_)) => {
            Acquired::Unknown("last request timed out".into())
        }
        (GiveUp::After(_), _) => Acquired::Failed("acquire timeout".into()),
        (_, Attempt::Granted(_)) => unreachable!("a grant is returned, not retried"),
    }
}

/// A client that talks to one Redis server at a time (the only one, or the primary).
#[async_trait(?Send)]
pub trait OneServer: Attempts {
    /// Runs `cmd` on the server.
    async fn call(&mut self, cmd: Cmd) -> Result<Reply, RpcError>;

    /// The command that extends the lock held with `value` (compare-and-`PEXPIRE`; a
    /// client profile may send its library's own).
    fn extend_cmd(&self, value: &str, ttl_ms: u64) -> Cmd {
        super::profile::extend_cmd(super::profile::Library::Careful, value, ttl_ms)
    }

    /// The grant, unless the reply came too late to be of use (the key may already have
    /// expired): then the lock is released and the attempt counts as busy.
    async fn grant_in_time(
        &mut self,
        valid_until: Option<Duration>,
        token: Option<u64>,
        value: String,
    ) -> Attempt {
        assert!(!value.is_empty(), "a grant has the value its key holds");
        if valid_until.is_some_and(|v| self.ctx().mono_now() >= v) {
            self.ctx()
                .note("grant arrived after its validity: released");
            let _ = self.release_value(&value).await;
            return Attempt::Busy("grant arrived after its validity".into());
        }
        Attempt::Granted(Grant {
            token,
            valid_until,
            handle: value,
        })
    }

    /// Compare-and-delete of `value`.
    async fn release_value(&mut self, value: &str) -> Outcome {
        self.release_with(release_cmd(value)).await
    }

    /// A release command and what its reply means.
    async fn release_with(&mut self, cmd: Cmd) -> Outcome {
        match self.call(cmd).await {
            Ok(Reply::Int(1)) => Outcome::Ok,
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => Outcome::Failed(format!("unexpected reply {other:?}")),
            Err(_) => Outcome::Unknown("request timed out".into()),
        }
    }

    /// Compare-and-`PEXPIRE`: the key gets `ttl_ms` again if it still holds the grant's
    /// value, and the grant the validity of a fresh one, counted from the request.
    async fn extend_ttl(&mut self, grant: &mut Grant, ttl_ms: u64, validity: Duration) -> Outcome {
        let start = self.ctx().mono_now();
        let cmd = self.extend_cmd(&grant.handle, ttl_ms);
        match self.call(cmd).await {
            Ok(reply) if super::profile::extended(&reply) => {
                grant.valid_until = Some(start + validity);
                Outcome::Ok
            }
            Ok(_) => Outcome::Failed("the lock was no longer ours".into()),
            Err(_) => Outcome::Unknown("request timed out".into()),
        }
    }
}

/// What a one-server client says about itself; [`LockClient`] follows: acquire by
/// [`acquire`], release by compare-and-delete, extend by compare-and-`PEXPIRE`.
pub trait OneServerLock: OneServer {
    /// The retry loop.
    fn retry(&self) -> Retry;
    /// The key's TTL in ms and the validity a grant gets; `None` if the key has no TTL
    /// (then there is nothing to extend).
    fn lease(&self) -> Option<(u64, Duration)>;
}

#[async_trait(?Send)]
impl<T: OneServerLock> LockClient for T {
    async fn acquire(&mut self) -> Acquired {
        let retry = self.retry();
        acquire(self, retry).await
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        self.release_value(&grant.handle).await
    }

    async fn extend(&mut self, grant: &mut Grant) -> Outcome {
        match self.lease() {
            Some((ttl_ms, validity)) => self.extend_ttl(grant, ttl_ms, validity).await,
            None => Outcome::Ok,
        }
    }

    async fn ask_servers(&mut self, grant: &Grant) -> Validity {
        match self.call(Cmd::Get { key: KEY.into() }).await {
            Ok(Reply::Bulk(value)) if value == grant.handle => Validity::Indefinite,
            Ok(_) => Validity::Lost("the server holds another value, or none".into()),
            Err(_) => Validity::Lost("GET timed out".into()),
        }
    }
}
