//! `replicated-redis`: one Redis primary with asynchronous replicas and Sentinel failover; the
//! single-instance lock algorithm (`SET key value NX PX ttl`, compare-and-delete release) run
//! against whichever node the sentinels name primary, optionally followed by `WAIT`.
//!
//! How the real system works:
//! - **Asynchronous replication** ([`crate::redis::replication`]): the primary answers the
//!   `SET` and streams it to its replicas afterwards, after a lag (`replication_lag_ms_*`).
//! - **Sentinel** ([`crate::redis::sentinel`]): sentinels on their own nodes ping the primary,
//!   call it down after `down_after_ms`, agree by `quorum`, elect a leader, promote the most
//!   up-to-date replica and tell clients the new primary. An old primary that comes back is
//!   demoted and resynced; writes it took after the split are lost.
//! - **`WAIT numreplicas timeout`** (`wait_replicas`, `wait_timeout_ms`): after the `SET` the
//!   client blocks until that many replicas acknowledged its write, and counts the lock as
//!   acquired only if they did (else it releases and retries).
//! - **Fencing tokens** (`tokens`): `INCR` in the acquire script, on the primary. The counter
//!   is replicated like any key, so a failover can hand out a token again or go back.
//!
//! How it breaks (all reproducible here):
//! - **Failover loses the lock** (the Redis distributed-locks page, "Why failover-based
//!   implementations are not enough"; aphyr, "Call me maybe: Redis", 2013): the primary
//!   grants the lock and dies before the replica has it; Sentinel promotes the replica, and
//!   a second client acquires the same lock. Tokens repeat too: both clients can hold
//!   token 1.
//! - **`WAIT` narrows this, it does not close it**: Redis docs on `WAIT`: "WAIT does not make
//!   Redis a strongly consistent store". A replica that acknowledged can be the one that is
//!   not promoted (it is down or cut off when the failover happens), and everything that
//!   breaks a single Redis (process pauses past the TTL, wall-clock jumps on the new primary)
//!   still does.
//! - **A primary without persistence that restarts before the failover** comes back empty and
//!   still primary; its replicas resync from it and lose the lock (and the token counter) too
//!   (redis.io, "Redis replication", on masters with persistence turned off). The random
//!   sweep finds the token reuse this causes.
//! - Every weakness of [`crate::single_redis`] applies as well.

use crate::redis::client::{check_drift_factor, lock_value, validity};
use crate::redis::{
    start_replicated_server, start_sentinel, Cmd, Persistence, RedisNet, ReplNet, ReplRole,
    Replicated, ReplicationConfig, Reply, SentinelConfig, SentinelNet, SentinelReq, SentinelResp,
    ServerConfig,
};
use crate::{
    parse_params, Acquired, Connector, Deployment, Grant, LockClient, Outcome, ParamError, Protocol,
};
use async_trait::async_trait;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::rpc::{endpoint, Caller, RpcError};
use locksim_sim::{NodeCtx, NodeIdx, World};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// The lock key.
pub const KEY: &str = "lock";
/// The fencing-token counter key.
pub const TOKEN_KEY: &str = "lock:token";

/// The `[protocol]` parameters of `replicated-redis`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Lock time to live, in ms.
    #[serde(default = "d_ttl")]
    pub ttl_ms: u64,
    /// Number of replicas of the primary.
    #[serde(default = "d_replicas")]
    pub replicas: usize,
    /// Number of sentinels, each on its own node.
    #[serde(default = "d_sentinels")]
    pub sentinels: usize,
    /// Sentinels that must see the primary down to start a failover (default: a majority).
    #[serde(default)]
    pub quorum: Option<usize>,
    /// A primary silent this long is down, in ms (Sentinel's `down-after-milliseconds`).
    #[serde(default = "d_down_after")]
    pub down_after_ms: u64,
    /// Wait this long between failover attempts, in ms (Sentinel's `failover-timeout`).
    #[serde(default = "d_failover_timeout")]
    pub failover_timeout_ms: u64,
    /// Period of the sentinels' `INFO` requests and hello messages, in ms.
    #[serde(default = "d_sentinel_ping")]
    pub sentinel_ping_interval_ms: u64,
    /// Shortest delay before the primary streams a write to a replica, in ms.
    #[serde(default)]
    pub replication_lag_ms_min: u64,
    /// Longest such delay, in ms.
    #[serde(default = "d_lag_max")]
    pub replication_lag_ms_max: u64,
    /// Period of replication heartbeats and acknowledgements, in ms.
    #[serde(default = "d_repl_ping")]
    pub replication_ping_interval_ms: u64,
    /// A replication link silent this long is down, in ms.
    #[serde(default = "d_repl_timeout")]
    pub replication_timeout_ms: u64,
    /// `WAIT` for this many replicas after acquiring (0 = no `WAIT`).
    #[serde(default)]
    pub wait_replicas: u32,
    /// The `WAIT` timeout, in ms.
    #[serde(default = "d_wait_timeout")]
    pub wait_timeout_ms: u64,
    /// Take a fencing token with `INCR` in the acquire script.
    #[serde(default)]
    pub tokens: bool,
    /// What each Redis node keeps over a crash.
    #[serde(default)]
    pub persistence: Persistence,
    /// Shortest random delay between acquire attempts, in ms.
    #[serde(default = "d_retry_min")]
    pub retry_delay_ms_min: u64,
    /// Longest random delay between acquire attempts, in ms.
    #[serde(default = "d_retry_max")]
    pub retry_delay_ms_max: u64,
    /// Give up acquiring after this long, in ms.
    #[serde(default = "d_acquire_timeout")]
    pub acquire_timeout_ms: u64,
    /// Timeout of one request to Redis or a sentinel, in ms.
    #[serde(default = "d_request_timeout")]
    pub request_timeout_ms: u64,
    /// Clock drift allowance: validity = ttl − elapsed − (ttl × factor + 2 ms).
    #[serde(default = "d_drift_factor")]
    pub clock_drift_factor: f64,
    /// Period of the primary's active expiry, in ms (0 = lazy expiry only).
    #[serde(default = "d_active_expire")]
    pub active_expire_interval_ms: u64,
}

fn d_ttl() -> u64 {
    2_000
}
fn d_replicas() -> usize {
    2
}
fn d_sentinels() -> usize {
    3
}
fn d_down_after() -> u64 {
    1_000
}
fn d_failover_timeout() -> u64 {
    1_000
}
fn d_sentinel_ping() -> u64 {
    100
}
fn d_lag_max() -> u64 {
    2
}
fn d_repl_ping() -> u64 {
    100
}
fn d_repl_timeout() -> u64 {
    500
}
fn d_wait_timeout() -> u64 {
    100
}
fn d_retry_min() -> u64 {
    10
}
fn d_retry_max() -> u64 {
    50
}
fn d_acquire_timeout() -> u64 {
    10_000
}
fn d_request_timeout() -> u64 {
    100
}
fn d_drift_factor() -> f64 {
    0.01
}
fn d_active_expire() -> u64 {
    100
}

impl Params {
    fn quorum(&self) -> usize {
        self.quorum.unwrap_or(self.sentinels / 2 + 1)
    }

    fn validate(&self) -> Result<(), ParamError> {
        let positive = [
            ("ttl_ms", self.ttl_ms),
            ("down_after_ms", self.down_after_ms),
            ("failover_timeout_ms", self.failover_timeout_ms),
            ("sentinel_ping_interval_ms", self.sentinel_ping_interval_ms),
            (
                "replication_ping_interval_ms",
                self.replication_ping_interval_ms,
            ),
            ("replication_timeout_ms", self.replication_timeout_ms),
            ("wait_timeout_ms", self.wait_timeout_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("replicas", self.replicas as u64),
            ("sentinels", self.sentinels as u64),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ParamError::field(field, "must be positive"));
        }
        if !(1..=self.sentinels).contains(&self.quorum()) {
            return Err(ParamError::field(
                "quorum",
                "must be between 1 and `sentinels`",
            ));
        }
        if self.wait_replicas as usize > self.replicas {
            return Err(ParamError::field(
                "wait_replicas",
                "cannot exceed the number of replicas",
            ));
        }
        for (field, min, max) in [
            (
                "replication_lag_ms_min",
                self.replication_lag_ms_min,
                self.replication_lag_ms_max,
            ),
            (
                "retry_delay_ms_min",
                self.retry_delay_ms_min,
                self.retry_delay_ms_max,
            ),
        ] {
            if min > max {
                return Err(ParamError::field(field, "must not exceed its `_max`"));
            }
        }
        check_drift_factor(self.clock_drift_factor)?;
        Ok(())
    }

    /// The validity a grant gets: ttl − drift allowance (Redis docs: ttl × factor + 2 ms).
    pub fn validity(&self) -> Duration {
        validity(self.ttl_ms, self.clock_drift_factor)
    }

    /// The Redis node names; the first starts as primary.
    pub fn redis_names(&self) -> Vec<String> {
        (1..=self.replicas + 1)
            .map(|i| format!("redis{i}"))
            .collect()
    }

    /// The sentinel node names.
    pub fn sentinel_names(&self) -> Vec<String> {
        (1..=self.sentinels)
            .map(|i| format!("sentinel{i}"))
            .collect()
    }
}

/// The `replicated-redis` protocol.
pub struct ReplicatedRedis;

impl Protocol for ReplicatedRedis {
    fn id(&self) -> &'static str {
        "replicated-redis"
    }

    fn summary(&self) -> &'static str {
        "a Redis primary with asynchronous replicas and Sentinel failover, optional WAIT"
    }

    fn configure(&self, params: &toml::Table) -> Result<Box<dyn Deployment>, ParamError> {
        let params: Params = parse_params(params)?;
        params.validate()?;
        Ok(Box::new(ReplicatedDeployment { params }))
    }
}

struct ReplicatedDeployment {
    params: Params,
}

impl Deployment for ReplicatedDeployment {
    fn servers(&self) -> Vec<String> {
        let mut names = self.params.redis_names();
        names.extend(self.params.sentinel_names());
        names
    }

    fn points(&self) -> Vec<(String, &'static str)> {
        let mut points = vec![];
        for name in self.params.redis_names() {
            points.push((name.clone(), "before_reply"));
            points.push((name, "before_replicate"));
        }
        points
    }

    fn start(&self, world: &World) -> Arc<dyn Connector> {
        let p = &self.params;
        let net = RedisNet::new(world);
        let repl_net = ReplNet::new(world);
        let sentinel_net = SentinelNet::new(world);
        let config = ServerConfig {
            persistence: p.persistence,
            active_expire_interval_ms: p.active_expire_interval_ms,
            ..ServerConfig::default()
        };
        let replication = ReplicationConfig {
            lag_ms_min: p.replication_lag_ms_min,
            lag_ms_max: p.replication_lag_ms_max,
            ping_interval_ms: p.replication_ping_interval_ms,
            timeout_ms: p.replication_timeout_ms,
        };
        let mut primary = None;
        for name in p.redis_names() {
            let role = match primary {
                None => ReplRole::Primary,
                Some(primary) => ReplRole::Replica { primary },
            };
            let replicated = Replicated {
                net: repl_net.clone(),
                config: replication.clone(),
                role,
            };
            let idx = start_replicated_server(world, &name, &net, config.clone(), replicated);
            primary.get_or_insert(idx);
        }
        let sentinel_config = SentinelConfig {
            redis: p.redis_names(),
            sentinels: p.sentinel_names(),
            quorum: p.quorum(),
            down_after_ms: p.down_after_ms,
            ping_interval_ms: p.sentinel_ping_interval_ms,
            failover_timeout_ms: p.failover_timeout_ms,
        };
        let sentinels = p
            .sentinel_names()
            .iter()
            .map(|name| start_sentinel(world, name, &net, &sentinel_net, sentinel_config.clone()))
            .collect();
        Arc::new(ReplicatedConnector {
            net,
            sentinel_net,
            sentinels,
            params: p.clone(),
        })
    }
}

struct ReplicatedConnector {
    net: RedisNet,
    sentinel_net: SentinelNet,
    sentinels: Vec<NodeIdx>,
    params: Params,
}

impl Connector for ReplicatedConnector {
    fn connect(&self, ctx: &NodeCtx) -> Box<dyn LockClient> {
        let (redis, _requests) = endpoint(&self.net, ctx);
        let (sentinel, _requests) = endpoint(&self.sentinel_net, ctx);
        Box::new(ReplicatedRedisClient {
            ctx: ctx.clone(),
            redis,
            sentinel,
            sentinels: self.sentinels.clone(),
            primary: Cell::new(None),
            params: self.params.clone(),
        })
    }
}

/// The client library: asks the sentinels for the primary, then runs the single-instance
/// algorithm there (plus `WAIT`).
pub struct ReplicatedRedisClient {
    ctx: NodeCtx,
    redis: Caller<Cmd, Reply>,
    sentinel: Caller<SentinelReq, SentinelResp>,
    sentinels: Vec<NodeIdx>,
    /// The primary as last learned from a sentinel; forgotten on any error or timeout.
    primary: Cell<Option<NodeIdx>>,
    params: Params,
}

enum Attempt {
    Granted(Grant),
    Busy,
    Unknown,
}

impl ReplicatedRedisClient {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    /// The primary: cached, or the answer of the first sentinel that answers (in order, as
    /// Sentinel client libraries do).
    async fn primary(&self) -> Option<NodeIdx> {
        if let Some(p) = self.primary.get() {
            return Some(p);
        }
        for s in &self.sentinels {
            let asked = self
                .sentinel
                .call(*s, SentinelReq::GetPrimary, self.timeout());
            if let Ok(SentinelResp::Primary(p)) = asked.await {
                self.primary.set(Some(p));
                return Some(p);
            }
        }
        None
    }

    fn note(&self, detail: String) {
        self.ctx
            .record_event(Event::new(self.ctx.name(), Kind::Info, Op::Note).detail(detail));
    }

    /// After a timeout: the SET may have taken effect, so free it if it did (our value is
    /// unique), and ask the sentinels again next time.
    fn abandon(&self, primary: NodeIdx, value: String) {
        self.redis.notify(
            primary,
            Cmd::DelIfEq {
                key: KEY.into(),
                value,
            },
        );
        self.primary.set(None);
    }

    async fn attempt(&self) -> Attempt {
        let p = &self.params;
        let Some(primary) = self.primary().await else {
            return Attempt::Busy; // No sentinel answered: nothing was sent.
        };
        let value = lock_value(&self.ctx);
        let start = self.ctx.mono_now();
        let cmd = if p.tokens {
            Cmd::SetNxIncr {
                key: KEY.into(),
                value: value.clone(),
                px_ms: Some(p.ttl_ms),
                counter: TOKEN_KEY.into(),
            }
        } else {
            Cmd::Set {
                key: KEY.into(),
                value: value.clone(),
                nx: true,
                px_ms: Some(p.ttl_ms),
            }
        };
        let token = match self.redis.call(primary, cmd, self.timeout()).await {
            Ok(Reply::Ok) => None,
            Ok(Reply::Int(t)) => Some(t as u64),
            Ok(Reply::Nil) => return Attempt::Busy,
            Ok(_) => {
                // READONLY: it is a replica now.
                self.primary.set(None);
                return Attempt::Busy;
            }
            Err(RpcError::Timeout) => {
                self.abandon(primary, value);
                return Attempt::Unknown;
            }
        };
        if p.wait_replicas > 0 {
            let wait = Cmd::Wait {
                replicas: p.wait_replicas,
                timeout_ms: p.wait_timeout_ms,
            };
            let patience = self.timeout() + Duration::from_millis(p.wait_timeout_ms);
            match self.redis.call(primary, wait, patience).await {
                Ok(Reply::Int(n)) if n >= p.wait_replicas as i64 => {}
                Ok(reply) => {
                    self.note(format!(
                        "WAIT {}: {reply:?}: lock not counted, released",
                        p.wait_replicas
                    ));
                    let _ = self.release_value(&value).await;
                    return Attempt::Busy;
                }
                Err(RpcError::Timeout) => {
                    self.abandon(primary, value);
                    return Attempt::Unknown;
                }
            }
        }
        let valid_until = start + p.validity();
        if self.ctx.mono_now() >= valid_until {
            self.note("grant arrived after its validity: released".into());
            let _ = self.release_value(&value).await;
            return Attempt::Busy;
        }
        Attempt::Granted(Grant {
            token,
            valid_until: Some(valid_until),
            handle: value,
        })
    }

    async fn release_value(&self, value: &str) -> Outcome {
        let Some(primary) = self.primary().await else {
            return Outcome::Unknown("no sentinel answered".into());
        };
        let cmd = Cmd::DelIfEq {
            key: KEY.into(),
            value: value.into(),
        };
        match self.redis.call(primary, cmd, self.timeout()).await {
            Ok(Reply::Int(1)) => Outcome::Ok,
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => {
                self.primary.set(None);
                Outcome::Failed(format!("unexpected reply {other:?}"))
            }
            Err(RpcError::Timeout) => {
                self.primary.set(None);
                Outcome::Unknown("request timed out".into())
            }
        }
    }
}

#[async_trait(?Send)]
impl LockClient for ReplicatedRedisClient {
    async fn acquire(&mut self) -> Acquired {
        let deadline = self.ctx.mono_now() + Duration::from_millis(self.params.acquire_timeout_ms);
        loop {
            let last = self.attempt().await;
            if let Attempt::Granted(grant) = last {
                return Acquired::Granted(grant);
            }
            let delay_ms = madsim::rand::thread_rng()
                .gen_range(self.params.retry_delay_ms_min..=self.params.retry_delay_ms_max);
            let delay = Duration::from_millis(delay_ms);
            if self.ctx.mono_now() + delay >= deadline {
                return match last {
                    Attempt::Unknown => Acquired::Unknown("last request timed out".into()),
                    _ => Acquired::Failed("acquire timeout".into()),
                };
            }
            self.ctx.sleep_local(delay).await;
        }
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        self.release_value(&grant.handle).await
    }

    async fn extend(&mut self, grant: &mut Grant) -> Outcome {
        let Some(primary) = self.primary().await else {
            return Outcome::Unknown("no sentinel answered".into());
        };
        let start = self.ctx.mono_now();
        let cmd = Cmd::PexpireIfEq {
            key: KEY.into(),
            value: grant.handle.clone(),
            px_ms: self.params.ttl_ms,
        };
        match self.redis.call(primary, cmd, self.timeout()).await {
            Ok(Reply::Int(1)) => {
                grant.valid_until = Some(start + self.params.validity());
                Outcome::Ok
            }
            Ok(_) => Outcome::Failed("the lock was no longer ours".into()),
            Err(RpcError::Timeout) => {
                self.primary.set(None);
                Outcome::Unknown("request timed out".into())
            }
        }
    }
}
