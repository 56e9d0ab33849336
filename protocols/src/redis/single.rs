//! `single-redis`: one Redis server, `SET key value NX PX ttl` to acquire, a compare-and-
//! delete Lua script to release (the Redis distributed-locks page, "Correct implementation
//! with a single instance").
//!
//! How it breaks (all reproducible here):
//! - **Process pauses** (Kleppmann 2016, "How to do distributed locking"): a client pauses
//!   (GC, page fault) after its validity check and past the TTL; the key expires, another
//!   client acquires, the first wakes and writes anyway. A TTL lock cannot prevent this;
//!   fencing tokens checked by the resource can. Tokens here come from `INCR` in the same
//!   script as the `SET`.
//! - **Wall-clock jumps on the server**: Redis expires keys by its wall clock, so a clock
//!   stepped forward expires a held lock early.
//! - **Crashes** with persistence `none`: a restarted server has forgotten every lock.
//! - **Bugs** (selectable as `variant`): `unconditional-release` (plain `DEL`: a late
//!   release deletes another client's lock), `get-then-set` (check and set in two steps:
//!   two clients both see the key free), `no-ttl` (no expiry: a crashed holder blocks
//!   everyone forever).

use super::client::{
    acquire_cmd, check_drift_factor, check_retry_delays, default_acquire_timeout_ms,
    default_active_expire_interval_ms, default_clock_drift_factor, default_request_timeout_ms,
    default_retry_delay_ms_max, default_retry_delay_ms_min, default_ttl_ms, lock_value,
    release_cmd, validity, Attempt, Attempts, OneServer, OneServerLock, Retry, Waited, SIGNAL_KEY,
};
use super::profile::{
    check_library, default_extension_threshold_ms, one_server_retry, python_redis_lock_timeout_s,
    single_redis_profiles, ExpirationFrom, InstanceToken, Library, Profiled,
};
use super::server::{start_server, Persistence, RedisNet, ServerConfig};
use super::store::{Cmd, Reply};
use crate::protocol::{ClientProfile, Outcome, ParamError, Protocol};
use async_trait::async_trait;
use locksim_sim::rpc::{Caller, Links, RpcError};
use locksim_sim::{NodeCtx, NodeIdx, World};
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use super::client::{KEY, TOKEN_KEY};

/// Correct client, or one of the known bugs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// As the Redis docs specify.
    #[default]
    Correct,
    /// Release with a plain `DEL`, whoever holds the lock.
    UnconditionalRelease,
    /// Acquire with `GET`, then `SET` if it was free: not atomic.
    GetThenSet,
    /// `SET NX` without `PX`: the lock never expires.
    NoTtl,
}

/// The `[protocol]` parameters of `single-redis`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Lock time to live, in ms.
    #[serde(default = "default_ttl_ms")]
    pub ttl_ms: u64,
    /// Correct client or a bug.
    #[serde(default)]
    pub variant: Variant,
    /// What the server keeps over a crash.
    #[serde(default)]
    pub persistence: Persistence,
    /// Take a fencing token with `INCR` in the acquire script.
    #[serde(default)]
    pub tokens: bool,
    /// Shortest random delay between acquire attempts, in ms.
    #[serde(default = "default_retry_delay_ms_min")]
    pub retry_delay_ms_min: u64,
    /// Longest random delay between acquire attempts, in ms.
    #[serde(default = "default_retry_delay_ms_max")]
    pub retry_delay_ms_max: u64,
    /// Give up acquiring after this long, in ms.
    #[serde(default = "default_acquire_timeout_ms")]
    pub acquire_timeout_ms: u64,
    /// Timeout of one request to Redis, in ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Clock drift allowance: validity = ttl − elapsed − (ttl × factor + 2 ms).
    #[serde(default = "default_clock_drift_factor")]
    pub clock_drift_factor: f64,
    /// Period of the server's active expiry, in ms (0 = lazy expiry only).
    #[serde(default = "default_active_expire_interval_ms")]
    pub active_expire_interval_ms: u64,
    /// After a crash the server refuses commands for this long, in ms.
    #[serde(default)]
    pub restart_delay_ms: u64,
    /// The client library (`[protocol] client`; its defaults fill the keys not set).
    #[serde(default)]
    pub client: Library,
    /// Give up acquiring after this many tries (0 = after `acquire_timeout_ms`).
    #[serde(default)]
    pub retry_count: u32,
    /// node-redlock: extend this long before the lock's expiration, in ms.
    #[serde(default = "default_extension_threshold_ms")]
    pub extension_threshold_ms: u64,
    /// node-redlock: what a lock's expiration is dated from (its `acquire()` call in the
    /// released 5.0.0-beta.2, or the granting try).
    #[serde(default)]
    pub expiration_from: ExpirationFrom,
}

impl Params {
    fn validate(&self) -> Result<(), ParamError> {
        if self.ttl_ms == 0 {
            return Err(ParamError::field("ttl_ms", "must be positive"));
        }
        check_retry_delays(self.retry_delay_ms_min, self.retry_delay_ms_max)?;
        if self.request_timeout_ms == 0 {
            return Err(ParamError::field("request_timeout_ms", "must be positive"));
        }
        check_drift_factor(self.clock_drift_factor)?;
        check_library(
            self.client,
            self.ttl_ms,
            self.extension_threshold_ms,
            self.expiration_from,
        )
    }

    /// The validity a grant gets: ttl − drift allowance (Redis docs: ttl × factor + 2 ms).
    pub fn validity(&self) -> Duration {
        validity(self.ttl_ms, self.clock_drift_factor)
    }
}

/// The `single-redis` protocol.
#[derive(Clone, Copy, Debug)]
pub struct SingleRedis;

/// The server node's name.
pub const SERVER: &str = "redis";

/// What a client needs to reach the server.
pub struct Servers {
    links: Links<Cmd, Reply>,
    server: NodeIdx,
    /// The token a redis-py `Lock` object shared by every client stores on the instance.
    instance: InstanceToken,
}

impl Servers {
    /// The server as a live client reaches it: through `links`, as node `server`. Each live
    /// client is a process of its own, so no two share a redis-py `Lock` instance.
    pub fn live(links: Links<Cmd, Reply>, server: NodeIdx) -> Servers {
        Servers {
            links,
            server,
            instance: InstanceToken::default(),
        }
    }
}

impl Protocol for SingleRedis {
    const ID: &'static str = "single-redis";
    const SUMMARY: &'static str =
        "one Redis server: SET NX PX to acquire, compare-and-delete to release";
    type Params = Params;
    type Servers = Servers;
    type Client = Profiled<SingleRedisClient>;

    fn clients(&self) -> Vec<ClientProfile> {
        single_redis_profiles()
    }

    fn lease_ms(&self, params: &Params) -> Option<u64> {
        Some(params.ttl_ms)
    }

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        params.validate()
    }

    fn servers(&self, _: &Params) -> Vec<String> {
        vec![SERVER.into()]
    }

    fn points(&self, params: &Params) -> Vec<(String, &'static str)> {
        let mut points = vec![(SERVER.into(), "before_reply")];
        if params.variant == Variant::GetThenSet {
            points.push(("client".into(), "between_get_and_set"));
        }
        points
    }

    fn start(&self, params: &Params, world: &World) -> Servers {
        let net = RedisNet::new(world);
        let config = ServerConfig {
            persistence: params.persistence,
            active_expire_interval_ms: params.active_expire_interval_ms,
            restart_delay_ms: params.restart_delay_ms,
        };
        let server = start_server(world, SERVER, &net, config);
        Servers {
            links: Links::Sim(net),
            server,
            instance: InstanceToken::default(),
        }
    }

    fn connect(&self, params: &Params, servers: &Servers, ctx: &NodeCtx) -> Self::Client {
        let caller = servers.links.caller(ctx);
        let p = params;
        let retry = one_server_retry(
            p.retry_delay_ms_min,
            p.retry_delay_ms_max,
            p.retry_count,
            p.acquire_timeout_ms,
        );
        let inner = SingleRedisClient {
            ctx: ctx.clone(),
            caller,
            server: servers.server,
            params: p.clone(),
            retry,
        };
        Profiled::new(ctx, p.client, inner, p.ttl_ms, p.extension_threshold_ms)
            .expiring_from(p.expiration_from, p.validity())
            .sharing(servers.instance.clone())
            .extending_with(retry)
    }
}

/// The client library.
pub struct SingleRedisClient {
    ctx: NodeCtx,
    caller: Caller<Cmd, Reply>,
    server: NodeIdx,
    params: Params,
    retry: Retry,
}

#[async_trait(?Send)]
impl Attempts for SingleRedisClient {
    fn ctx(&self) -> &NodeCtx {
        &self.ctx
    }

    async fn attempt(&mut self) -> Attempt {
        let p = self.params.clone();
        let value = lock_value(&self.ctx);
        let start = self.ctx.mono_now();
        let px_ms = (p.variant != Variant::NoTtl).then_some(p.ttl_ms.into());
        let reply = match p.variant {
            Variant::GetThenSet => {
                match self.call(Cmd::Get { key: KEY.into() }).await {
                    Ok(Reply::Nil) => {}
                    Ok(_) => return Attempt::Busy("the lock is taken".into()),
                    Err(_) => return Attempt::Unknown("request timed out".into()),
                }
                self.ctx.point("between_get_and_set").await;
                let set = Cmd::Set {
                    key: KEY.into(),
                    value: value.clone(),
                    nx: false,
                    px_ms,
                };
                self.call(set).await
            }
            _ => self.call(acquire_cmd(&value, px_ms, p.tokens)).await,
        };
        let token = match reply {
            Ok(Reply::Ok) => None,
            Ok(Reply::Int(t)) => Some(t as u64),
            Ok(_) => return Attempt::Busy("the lock is taken".into()),
            Err(_) => {
                // The SET may have succeeded: free it (if it did) so it does not block others
                // until its TTL; our value is unique, so this cannot delete anyone else's.
                self.caller.notify(self.server, release_cmd(&value));
                return Attempt::Unknown("request timed out".into());
            }
        };
        let valid_until = px_ms.map(|_| start + p.validity());
        self.grant_in_time(valid_until, token, value).await
    }

    fn waits_on_signal(&self) -> bool {
        self.params.client == Library::PythonRedisLock
    }

    /// python-redis-lock's `BLPOP lock-signal T`, `T` the acquire timeout
    /// ([`python_redis_lock_timeout_s`]). The request may take `T` plus its own timeout.
    async fn wait_for_signal(&mut self) -> Waited {
        let timeout_s = python_redis_lock_timeout_s(self.params.acquire_timeout_ms);
        let cmd = Cmd::Blpop {
            key: SIGNAL_KEY.into(),
            timeout_s,
        };
        let wait = Duration::from_millis(timeout_s * 1000 + self.params.request_timeout_ms);
        match self.caller.call(self.server, cmd, wait).await {
            Ok(Reply::Nil) => Waited::TimedOut,
            Ok(Reply::Error(e)) => Waited::Failed(e),
            // The model's server answers the element; a real one the array [key, element]
            // (live mode's link reads an array as OK).
            Ok(_) => Waited::Signalled,
            Err(_) => Waited::Failed("BLPOP timed out".into()),
        }
    }
}

#[async_trait(?Send)]
impl OneServer for SingleRedisClient {
    async fn call(&mut self, cmd: Cmd) -> Result<Reply, RpcError> {
        let timeout = Duration::from_millis(self.params.request_timeout_ms);
        self.caller.call(self.server, cmd, timeout).await
    }

    fn extend_cmd(&self, value: &str, ttl_ms: u64) -> Cmd {
        super::profile::extend_cmd(self.params.client, value, ttl_ms)
    }

    async fn release_value(&mut self, value: &str) -> Outcome {
        if self.params.client == Library::PythonRedisLock {
            return self.release_and_signal(value).await;
        }
        let cmd = match self.params.variant {
            Variant::UnconditionalRelease => Cmd::Del { key: KEY.into() },
            _ => release_cmd(value),
        };
        self.release_with(cmd).await
    }
}

impl SingleRedisClient {
    /// python-redis-lock's `release()`: its unlock script, which answers 0 when it deleted
    /// the key and pushed the signal, 1 when the key was not ours (`NotAcquired`).
    async fn release_and_signal(&mut self, value: &str) -> Outcome {
        let cmd = Cmd::DelIfEqSignal {
            key: KEY.into(),
            value: value.into(),
            signal: SIGNAL_KEY.into(),
            signal_expire_ms: PYTHON_REDIS_LOCK_SIGNAL_EXPIRE_MS,
        };
        match self.call(cmd).await {
            Ok(Reply::Int(0)) => Outcome::Ok,
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => Outcome::Failed(format!("unexpected reply {other:?}")),
            Err(_) => Outcome::Unknown("request timed out".into()),
        }
    }
}

/// python-redis-lock's `signal_expire` default: the signal list lives 1000 ms.
const PYTHON_REDIS_LOCK_SIGNAL_EXPIRE_MS: u64 = 1_000;

impl OneServerLock for SingleRedisClient {
    fn retry(&self) -> Retry {
        self.retry
    }

    fn lease(&self) -> Option<(u64, Duration)> {
        (self.params.variant != Variant::NoTtl)
            .then(|| (self.params.ttl_ms, self.params.validity()))
    }
}
