//! `replicated-redis`: one Redis primary with asynchronous replicas and Sentinel failover; the
//! single-instance lock algorithm (`SET key value NX PX ttl`, compare-and-delete release) run
//! against whichever node the sentinels name primary, optionally followed by `WAIT`.
//!
//! How the real system works:
//! - **Asynchronous replication** ([`super::replication`]): the primary answers the
//!   `SET` and streams it to its replicas afterwards, after a lag (`replication_lag_ms_*`).
//! - **Sentinel** ([`super::sentinel`]): sentinels on their own nodes ping the primary,
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
//! - Every weakness of [`super::single`] applies as well.
//!
//! Bugs (selectable as `variant`), each a mistake deployments make, each caught by a catalog
//! file whose faults the correct protocol survives:
//! - `stale-primary`: the client keeps the first primary it learned for good (an address in
//!   the application's config, or a Sentinel client that ignores `+switch-master`): after a
//!   failover it still writes to the old primary, which takes the lock while it is cut off
//!   from the sentinels, as the new primary gives it to another client.
//! - `wait-ignored`: the client sends `WAIT` but counts the lock whatever count comes back
//!   (the reply of `WAIT` is the number of replicas that acknowledged, not an error): a lock
//!   no replica has is lost at the next failover.
//! - `lagging-replica-promoted`: the sentinels promote a fixed replica (the last one, as a
//!   lower `replica-priority` makes Sentinel prefer it: priority is compared before the
//!   replication offset) even when it is behind, so the replica `WAIT` counted on is passed
//!   over and the lock is lost.

use super::client::{
    acquire_cmd, check_drift_factor, default_acquire_timeout_ms, default_active_expire_interval_ms,
    default_clock_drift_factor, default_request_timeout_ms, default_retry_delay_ms_max,
    default_retry_delay_ms_min, default_ttl_ms, lock_value, release_cmd, validity, Attempt,
    Attempts, OneServer, OneServerLock, Retry,
};
use super::profile::{
    check_library, check_single_redis_library, default_extension_threshold_ms, one_server_profiles,
    one_server_retry, ExpirationFrom, Library, Profiled,
};
use super::replication::{ReplNet, ReplRole, Replicated, ReplicationConfig};
use super::sentinel::{
    current_primary, start_sentinel, Periods, SentinelConfig, SentinelNet, SentinelReq,
    SentinelResp,
};
use super::server::{start_replicated_server, Persistence, RedisNet, ServerConfig};
use super::store::{Cmd, Reply};
use crate::protocol::{ClientProfile, ParamError, Protocol};
use async_trait::async_trait;
use locksim_sim::nemesis::ROLE_PRIMARY;
use locksim_sim::rpc::{Caller, Links, RpcError};
use locksim_sim::{NodeCtx, NodeIdx, World};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

pub use super::client::{KEY, TOKEN_KEY};

/// Correct deployment and client, or one of the known mistakes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// As the Redis and Sentinel docs specify.
    #[default]
    Correct,
    /// The client never asks the sentinels again once it knows a primary.
    StalePrimary,
    /// The client counts the lock whatever `WAIT` answers.
    WaitIgnored,
    /// The sentinels promote the last replica, however far behind it is.
    LaggingReplicaPromoted,
}

/// The `[protocol]` parameters of `replicated-redis`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Lock time to live, in ms.
    #[serde(default = "default_ttl_ms")]
    pub ttl_ms: u64,
    /// Correct, or a known mistake.
    #[serde(default)]
    pub variant: Variant,
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
    /// A sentinel `PING`s a node whose last answer is older than min(this, down-after), in
    /// ms (Sentinel's `ping-period`, set live with `SENTINEL DEBUG`).
    #[serde(default = "d_sentinel_ping")]
    pub sentinel_ping_period_ms: u64,
    /// A sentinel asks each node `INFO` this often, in ms (`info-period`; every second to
    /// the replicas of a primary in trouble).
    #[serde(default = "d_sentinel_info")]
    pub sentinel_info_period_ms: u64,
    /// A sentinel's hello messages go this often, in ms (`publish-period`).
    #[serde(default = "d_sentinel_publish")]
    pub sentinel_publish_period_ms: u64,
    /// A sentinel that sees the primary down asks the others this often, in ms
    /// (`ask-period`).
    #[serde(default = "d_sentinel_ask")]
    pub sentinel_ask_period_ms: u64,
    /// A sentinel whose wall clock moved back, or more than this forward, between two ticks
    /// of its timer (a pause, a clock step) enters TILT mode, in ms (`tilt-trigger`).
    #[serde(default = "d_sentinel_tilt_trigger")]
    pub sentinel_tilt_trigger_ms: u64,
    /// How long TILT mode lasts, in ms (`tilt-period`): the sentinel watches but does not act.
    #[serde(default = "d_sentinel_tilt_period")]
    pub sentinel_tilt_period_ms: u64,
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
    #[serde(default = "default_retry_delay_ms_min")]
    pub retry_delay_ms_min: u64,
    /// Longest random delay between acquire attempts, in ms.
    #[serde(default = "default_retry_delay_ms_max")]
    pub retry_delay_ms_max: u64,
    /// Give up acquiring after this long, in ms.
    #[serde(default = "default_acquire_timeout_ms")]
    pub acquire_timeout_ms: u64,
    /// Timeout of one request to Redis or a sentinel, in ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Clock drift allowance: validity = ttl − elapsed − (ttl × factor + 2 ms).
    #[serde(default = "default_clock_drift_factor")]
    pub clock_drift_factor: f64,
    /// Period of the primary's active expiry, in ms (0 = lazy expiry only).
    #[serde(default = "default_active_expire_interval_ms")]
    pub active_expire_interval_ms: u64,
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
    10_000
}
fn d_sentinel_ping() -> u64 {
    Periods::default().ping_ms
}
fn d_sentinel_info() -> u64 {
    Periods::default().info_ms
}
fn d_sentinel_publish() -> u64 {
    Periods::default().publish_ms
}
fn d_sentinel_ask() -> u64 {
    Periods::default().ask_ms
}
fn d_sentinel_tilt_trigger() -> u64 {
    Periods::default().tilt_trigger_ms
}
fn d_sentinel_tilt_period() -> u64 {
    Periods::default().tilt_period_ms
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

impl Params {
    /// The periods of the Sentinels' commands.
    pub fn sentinel_periods(&self) -> Periods {
        Periods {
            ping_ms: self.sentinel_ping_period_ms,
            info_ms: self.sentinel_info_period_ms,
            publish_ms: self.sentinel_publish_period_ms,
            ask_ms: self.sentinel_ask_period_ms,
            tilt_trigger_ms: self.sentinel_tilt_trigger_ms,
            tilt_period_ms: self.sentinel_tilt_period_ms,
        }
    }

    /// The Sentinels that must agree a primary is down: `quorum`, else a majority.
    pub fn quorum(&self) -> usize {
        self.quorum.unwrap_or(self.sentinels / 2 + 1)
    }

    fn validate(&self) -> Result<(), ParamError> {
        let positive = [
            ("ttl_ms", self.ttl_ms),
            ("down_after_ms", self.down_after_ms),
            ("failover_timeout_ms", self.failover_timeout_ms),
            ("sentinel_ping_period_ms", self.sentinel_ping_period_ms),
            ("sentinel_info_period_ms", self.sentinel_info_period_ms),
            (
                "sentinel_publish_period_ms",
                self.sentinel_publish_period_ms,
            ),
            ("sentinel_ask_period_ms", self.sentinel_ask_period_ms),
            ("sentinel_tilt_trigger_ms", self.sentinel_tilt_trigger_ms),
            ("sentinel_tilt_period_ms", self.sentinel_tilt_period_ms),
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
        check_single_redis_library(self.client)?;
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
#[derive(Clone, Copy, Debug)]
pub struct ReplicatedRedis;

/// What a client needs: the Redis and Sentinel networks and the sentinels.
pub struct Servers {
    redis: Links<Cmd, Reply>,
    sentinel: Links<SentinelReq, SentinelResp>,
    sentinels: Vec<NodeIdx>,
}

impl Servers {
    /// The deployment as a live client reaches it: the Redis nodes through `redis`, the
    /// Sentinels (nodes `sentinels`) through `sentinel`.
    pub fn live(
        redis: Links<Cmd, Reply>,
        sentinel: Links<SentinelReq, SentinelResp>,
        sentinels: Vec<NodeIdx>,
    ) -> Servers {
        Servers {
            redis,
            sentinel,
            sentinels,
        }
    }
}

impl Protocol for ReplicatedRedis {
    const ID: &'static str = "replicated-redis";
    const SUMMARY: &'static str =
        "a Redis primary with asynchronous replicas and Sentinel failover, optional WAIT";
    type Params = Params;
    type Servers = Servers;
    type Client = Profiled<ReplicatedRedisClient>;

    fn clients(&self) -> Vec<ClientProfile> {
        one_server_profiles()
    }

    fn lease_ms(&self, params: &Params) -> Option<u64> {
        Some(params.ttl_ms)
    }

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        params.validate()
    }

    fn servers(&self, params: &Params) -> Vec<String> {
        let mut names = params.redis_names();
        names.extend(params.sentinel_names());
        names
    }

    fn points(&self, params: &Params) -> Vec<(String, &'static str)> {
        let mut points = vec![];
        for name in params.redis_names() {
            points.push((name.clone(), "before_reply"));
            points.push((name, "before_replicate"));
        }
        points
    }

    fn roles(&self, _: &Params) -> Vec<&'static str> {
        vec![ROLE_PRIMARY]
    }

    fn start(&self, p: &Params, world: &World) -> Servers {
        let net = RedisNet::new(world);
        let repl_net = ReplNet::new(world);
        let sentinel_net = SentinelNet::new(world);
        let primary = start_redis_nodes(p, world, &net, &repl_net);
        let sentinel_config = SentinelConfig {
            redis: p.redis_names(),
            sentinels: p.sentinel_names(),
            quorum: p.quorum(),
            down_after_ms: p.down_after_ms,
            failover_timeout_ms: p.failover_timeout_ms,
            periods: p.sentinel_periods(),
            priority_over_offset: p.variant == Variant::LaggingReplicaPromoted,
        };
        let sentinels: Vec<NodeIdx> = p
            .sentinel_names()
            .iter()
            .map(|name| start_sentinel(world, name, &net, &sentinel_net, sentinel_config.clone()))
            .collect();
        let watchers = sentinels.clone();
        world.answer_role(
            ROLE_PRIMARY,
            Arc::new(move |world| Some(current_primary(world, &watchers, primary))),
        );
        Servers {
            redis: Links::Sim(net),
            sentinel: Links::Sim(sentinel_net),
            sentinels,
        }
    }

    fn connect(&self, params: &Params, servers: &Servers, ctx: &NodeCtx) -> Self::Client {
        let redis = servers.redis.caller(ctx);
        let sentinel = servers.sentinel.caller(ctx);
        let p = params;
        let retry = one_server_retry(
            p.retry_delay_ms_min,
            p.retry_delay_ms_max,
            p.retry_count,
            p.acquire_timeout_ms,
        );
        let inner = ReplicatedRedisClient {
            ctx: ctx.clone(),
            redis,
            sentinel,
            sentinels: servers.sentinels.clone(),
            primary: Cell::new(None),
            params: p.clone(),
            retry,
        };
        Profiled::new(ctx, p.client, inner, p.ttl_ms, p.extension_threshold_ms)
            .expiring_from(p.expiration_from, p.validity())
            .extending_with(retry)
    }
}

/// Adds the Redis nodes, the first as primary and the others its replicas; returns the
/// primary.
fn start_redis_nodes(p: &Params, world: &World, net: &RedisNet, repl_net: &ReplNet) -> NodeIdx {
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
        let idx = start_replicated_server(world, &name, net, config.clone(), replicated);
        primary.get_or_insert(idx);
    }
    primary.expect("at least one node")
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
    retry: Retry,
}

impl ReplicatedRedisClient {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    /// After an error or a timeout: ask the sentinels again next time, unless the client is
    /// the `stale-primary` one, which keeps the address it has.
    fn forget_primary(&self) {
        if self.params.variant != Variant::StalePrimary {
            self.primary.set(None);
        }
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

    /// After a timeout: the SET may have taken effect, so free it if it did (our value is
    /// unique), and ask the sentinels again next time.
    fn abandon(&self, primary: NodeIdx, value: &str) -> Attempt {
        self.redis.notify(primary, release_cmd(value));
        self.forget_primary();
        Attempt::Unknown("request timed out".into())
    }

    /// `WAIT n` after the `SET`: `None` if enough replicas acknowledged, or else the
    /// attempt's outcome (the lock released, or abandoned on a timeout).
    async fn wait(&mut self, primary: NodeIdx, value: &str) -> Option<Attempt> {
        let p = &self.params;
        let wait = Cmd::Wait {
            replicas: p.wait_replicas,
            timeout_ms: p.wait_timeout_ms,
        };
        let patience = self.timeout() + Duration::from_millis(p.wait_timeout_ms);
        match self.redis.call(primary, wait, patience).await {
            Ok(Reply::Int(n)) if n >= p.wait_replicas as i64 => None,
            Ok(Reply::Int(n)) if p.variant == Variant::WaitIgnored => {
                self.ctx.note(format!(
                    "WAIT {}: {n}, lock counted anyway",
                    p.wait_replicas
                ));
                None
            }
            Ok(reply) => {
                let why = format!("WAIT {}: {reply:?}", p.wait_replicas);
                self.ctx.note(format!("{why}: lock not counted, released"));
                let _ = self.release_value(value).await;
                Some(Attempt::Busy(why))
            }
            Err(RpcError::Timeout) => Some(self.abandon(primary, value)),
        }
    }
}

#[async_trait(?Send)]
impl Attempts for ReplicatedRedisClient {
    fn ctx(&self) -> &NodeCtx {
        &self.ctx
    }

    async fn attempt(&mut self) -> Attempt {
        let Some(primary) = self.primary().await else {
            // No sentinel answered: nothing was sent.
            return Attempt::Busy("no sentinel answered".into());
        };
        let (ttl_ms, tokens) = (self.params.ttl_ms, self.params.tokens);
        let value = lock_value(&self.ctx);
        let start = self.ctx.mono_now();
        let cmd = acquire_cmd(&value, Some(ttl_ms.into()), tokens);
        let token = match self.redis.call(primary, cmd, self.timeout()).await {
            Ok(Reply::Ok) => None,
            Ok(Reply::Int(t)) => Some(t as u64),
            Ok(Reply::Nil) => return Attempt::Busy("the lock is taken".into()),
            Ok(_) => {
                // READONLY: it is a replica now.
                self.forget_primary();
                return Attempt::Busy("not the primary".into());
            }
            Err(RpcError::Timeout) => return self.abandon(primary, &value),
        };
        if self.params.wait_replicas > 0 {
            if let Some(outcome) = self.wait(primary, &value).await {
                return outcome;
            }
        }
        let valid_until = start + self.params.validity();
        self.grant_in_time(Some(valid_until), token, value).await
    }
}

#[async_trait(?Send)]
impl OneServer for ReplicatedRedisClient {
    /// On the primary; a timeout or an error reply (`READONLY`: it was demoted) makes the
    /// client ask the sentinels again next time.
    async fn call(&mut self, cmd: Cmd) -> Result<Reply, RpcError> {
        let Some(primary) = self.primary().await else {
            return Err(RpcError::Timeout);
        };
        let reply = self.redis.call(primary, cmd, self.timeout()).await;
        if matches!(reply, Err(_) | Ok(Reply::Error(_))) {
            self.forget_primary();
        }
        reply
    }
}

impl OneServerLock for ReplicatedRedisClient {
    fn retry(&self) -> Retry {
        self.retry
    }

    fn lease(&self) -> Option<(u64, Duration)> {
        Some((self.params.ttl_ms, self.params.validity()))
    }
}
