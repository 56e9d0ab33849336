//! `redlock`: N independent Redis masters and the client algorithm of the Redis
//! distributed-locks page ("The Redlock algorithm"), step by step:
//! 1. take the current time on the local monotonic clock;
//! 2. send `SET key value NX PX ttl` to all N at once (the page recommends multiplexing),
//!    with a per-instance timeout small against the TTL (`request_timeout_ms`);
//! 3. count the instances that answered OK; elapsed = now − start;
//!    drift = ttl × `clock_drift_factor` + 2 ms; validity = ttl − elapsed − drift;
//! 4. the lock is acquired iff at least N/2 + 1 instances said OK and validity > 0;
//! 5. otherwise unlock **all** instances (even those that did not answer: the SET may have
//!    landed) and retry after a random delay, up to `retry_count` tries.
//!
//! Release is the compare-and-delete script on all instances; extend is compare-and-`PEXPIRE`
//! on all, successful on a quorum with validity left.
//!
//! How it breaks (all reproducible here; Kleppmann 2016, "How to do distributed locking",
//! and antirez 2016, "Is Redlock safe?"):
//! - **Process pauses after acquiring** (Kleppmann's first timeline): validity is checked
//!   once, at acquisition; a client paused past the TTL afterwards writes with an expired
//!   lock. Redlock has no fencing tokens to stop the write.
//! - **Pauses while acquiring** (Kleppmann's second timeline): the replies wait in the
//!   client's buffers while it is paused and the keys expire. Here antirez is right: step 3
//!   measures the pause in `elapsed`, and the client rejects the lock. The bug variant
//!   `no-validity-check` accepts it.
//! - **Clock jumps** (Kleppmann's third timeline): Redis expires keys by its wall clock; a
//!   jump forward on one of the three instances a client holds frees it, and another client
//!   gets a majority with it. Redlock assumes bounded clock error, which a wall clock
//!   stepped by NTP or an operator violates.
//! - **Crashes without fsync** (the Redis page, "Performance, crash recovery and fsync"): an
//!   instance that restarts empty can give the lock to a second client. `persistence =
//!   "always"` or a restart delay at least the TTL (`restart_delay_ms`, antirez's "delayed
//!   restarts") prevent it.
//!
//! Fencing: Redlock has no monotonic tokens (`tokens = "none"`, the default). The
//! experimental `tokens = "max-incr"` takes the largest of the per-instance `INCR`
//! counters of the instances that granted the lock. It is not enough: the counters are
//! independent, a majority of them need not include the instance that issued the last
//! maximum, and an instance that restarts without persistence starts counting again, so
//! two grants can carry the same token or a later grant a smaller one.
//!
//! Bugs (selectable as `variant`): `no-validity-check` (acquired on a quorum alone, the
//! TTL counted from the replies), `no-drift-allowance` (validity = ttl − elapsed, trusting
//! the servers' clocks to run exactly as fast as the client's), `release-quorum-only`
//! (unlock only the instances that answered OK: a SET that landed but whose answer was lost
//! keeps its instance locked until the TTL, so the lock stays unavailable though nobody
//! holds it).

use super::client::{
    acquire, acquire_cmd, check_drift_factor, check_retry_delays,
    default_active_expire_interval_ms, default_clock_drift_factor, default_ttl_ms,
    drift_allowance_ms, lock_value, release_cmd, Attempt, Attempts, GiveUp, Retry,
};
use super::profile::{
    check_library, check_single_redis_library, default_extension_threshold_ms, extend_cmd,
    extended as is_extended, redlock_profiles, ExpirationFrom, Library, Profiled,
};
use super::server::{start_server, Persistence, RedisNet, ServerConfig};
use super::store::{Cmd, Reply};
use crate::protocol::{
    Acquired, ClientProfile, Grant, LockClient, Outcome, ParamError, Protocol, Validity,
};
use async_trait::async_trait;
use locksim_sim::rpc::{Links, Mux};
use locksim_sim::{NodeCtx, NodeIdx, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The lock key, and the per-instance counter of the experimental `max-incr` tokens.
pub use super::client::{KEY, TOKEN_KEY};

/// Correct client, or one of the known bugs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// As the Redis docs specify.
    #[default]
    Correct,
    /// Acquired on a quorum alone, however long it took; the TTL counted from the replies.
    NoValidityCheck,
    /// validity = ttl − elapsed, without the clock drift allowance.
    NoDriftAllowance,
    /// Unlock only the instances that answered OK to the SET.
    ReleaseQuorumOnly,
}

/// Where fencing tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tokens {
    /// No tokens: Redlock has none.
    #[default]
    None,
    /// Experimental: the largest per-instance `INCR` among the instances that granted.
    MaxIncr,
}

/// One value for every instance, or one per instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PerInstance<T> {
    /// The same for all.
    All(T),
    /// Instance by instance, in order.
    Each(Vec<T>),
}

impl<T: Copy + Default> Default for PerInstance<T> {
    fn default() -> Self {
        PerInstance::All(T::default())
    }
}

impl<T: Copy> PerInstance<T> {
    /// The value for instance `i` (from 0).
    pub fn get(&self, i: usize) -> T {
        match self {
            PerInstance::All(v) => *v,
            PerInstance::Each(vs) => vs[i],
        }
    }
}

/// The `[protocol]` parameters of `redlock`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Number of independent Redis masters (odd).
    #[serde(default = "d_instances")]
    pub instances: usize,
    /// Lock time to live, in ms.
    #[serde(default = "default_ttl_ms")]
    pub ttl_ms: u64,
    /// Correct client or a bug.
    #[serde(default)]
    pub variant: Variant,
    /// Drift allowance: drift = ttl × factor + 2 ms.
    #[serde(default = "default_clock_drift_factor")]
    pub clock_drift_factor: f64,
    /// Per-instance timeout of a request, in ms.
    #[serde(default = "d_request_timeout")]
    pub request_timeout_ms: u64,
    /// Acquire attempts before giving up.
    #[serde(default = "d_retry_count")]
    pub retry_count: u32,
    /// Shortest random delay between attempts, in ms.
    #[serde(default)]
    pub retry_delay_ms_min: u64,
    /// Longest random delay between attempts, in ms.
    #[serde(default = "d_retry_max")]
    pub retry_delay_ms_max: u64,
    /// What each instance keeps over a crash: one value, or a list with one per instance.
    #[serde(default)]
    pub persistence: PerInstance<Persistence>,
    /// After a crash an instance refuses commands for this long, in ms.
    #[serde(default)]
    pub restart_delay_ms: u64,
    /// Period of each instance's active expiry, in ms (0 = lazy expiry only).
    #[serde(default = "default_active_expire_interval_ms")]
    pub active_expire_interval_ms: u64,
    /// Fencing tokens: `none` or the experimental `max-incr`.
    #[serde(default)]
    pub tokens: Tokens,
    /// The client library (`[protocol] client`; its defaults fill the keys not set).
    #[serde(default)]
    pub client: Library,
    /// node-redlock: extend this long before the lock's expiration, in ms.
    #[serde(default = "default_extension_threshold_ms")]
    pub extension_threshold_ms: u64,
    /// node-redlock: what a lock's expiration is dated from (its `acquire()` call in the
    /// released 5.0.0-beta.2, or the granting try).
    #[serde(default)]
    pub expiration_from: ExpirationFrom,
    /// Give up acquiring after this long, in ms, instead of after `retry_count` tries
    /// (pottery's `acquire(timeout=...)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_timeout_ms: Option<u64>,
    /// pottery's `Redlock(num_extensions=...)`: `extend()` raises `TooManyExtensions` after
    /// this many extensions of one grant (3 unless set; pottery only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_extensions: Option<u32>,
}

fn d_instances() -> usize {
    5
}
fn d_request_timeout() -> u64 {
    50
}
fn d_retry_count() -> u32 {
    3
}
fn d_retry_max() -> u64 {
    200
}

/// pottery's default `num_extensions` (`Redlock._NUM_EXTENSIONS`).
pub const POTTERY_NUM_EXTENSIONS: u32 = 3;

/// The number of instances that make a majority of `n`.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

impl Params {
    fn validate(&self) -> Result<(), ParamError> {
        if self.instances % 2 != 1 {
            return Err(ParamError::field("instances", "must be odd (1, 3, 5, ...)"));
        }
        if self.ttl_ms == 0 {
            return Err(ParamError::field("ttl_ms", "must be positive"));
        }
        if self.request_timeout_ms == 0 {
            return Err(ParamError::field("request_timeout_ms", "must be positive"));
        }
        if self.retry_count == 0 {
            return Err(ParamError::field("retry_count", "must be at least 1"));
        }
        check_retry_delays(self.retry_delay_ms_min, self.retry_delay_ms_max)?;
        check_drift_factor(self.clock_drift_factor)?;
        if let PerInstance::Each(list) = &self.persistence {
            if list.len() != self.instances {
                return Err(ParamError::field(
                    "persistence",
                    format!(
                        "lists {} values for {} instances",
                        list.len(),
                        self.instances
                    ),
                ));
            }
        }
        if matches!(self.client, Library::Redisson | Library::RedissonReschedule) {
            return Err(ParamError::field(
                "client",
                "redisson has no Redlock client here (RedissonRedLock is deprecated)",
            ));
        }
        if self.acquire_timeout_ms == Some(0) {
            return Err(ParamError::field("acquire_timeout_ms", "must be positive"));
        }
        if self.num_extensions.is_some() && self.client != Library::Pottery {
            return Err(ParamError::field(
                "num_extensions",
                "is pottery's Redlock(num_extensions=...); the other clients have no such limit",
            ));
        }
        check_single_redis_library(self.client)?;
        check_library(
            self.client,
            self.ttl_ms,
            self.extension_threshold_ms,
            self.expiration_from,
        )
    }

    /// pottery's limit on the extensions of one grant.
    pub fn extensions_max(&self) -> u32 {
        self.num_extensions.unwrap_or(POTTERY_NUM_EXTENSIONS)
    }

    /// The instance names.
    pub fn names(&self) -> Vec<String> {
        (1..=self.instances).map(|i| format!("redis{i}")).collect()
    }

    /// The drift allowance: ttl × factor + 2 ms (none in the `no-drift-allowance` bug).
    pub fn drift(&self) -> Duration {
        if self.variant == Variant::NoDriftAllowance {
            return Duration::ZERO;
        }
        let ms = drift_allowance_ms(self.ttl_ms, self.clock_drift_factor);
        Duration::from_micros((ms * 1000.0) as u64)
    }

    /// The validity a lock gets if granted at once: ttl − the drift allowance.
    pub fn validity(&self) -> Duration {
        Duration::from_millis(self.ttl_ms).saturating_sub(self.drift())
    }

    /// Step 4: with `successes` OKs after `elapsed`, the lock's remaining validity (from now),
    /// or why it is not acquired.
    pub fn decide(&self, successes: usize, elapsed: Duration) -> Result<Duration, String> {
        let needed = quorum(self.instances);
        if successes < needed {
            return Err(format!(
                "{successes} of {} instances, {needed} needed",
                self.instances
            ));
        }
        if self.variant == Variant::NoValidityCheck {
            return Ok(self.validity());
        }
        match Duration::from_millis(self.ttl_ms).checked_sub(elapsed + self.drift()) {
            Some(validity) if !validity.is_zero() => Ok(validity),
            _ => Err(format!(
                "quorum after {:.1} ms leaves no validity (ttl {} ms, drift {:.1} ms)",
                elapsed.as_secs_f64() * 1e3,
                self.ttl_ms,
                self.drift().as_secs_f64() * 1e3
            )),
        }
    }
}

/// The `redlock` protocol.
#[derive(Clone, Copy, Debug)]
pub struct Redlock;

/// What a client needs: the network and the instances, in order.
pub struct Servers {
    links: Links<Cmd, Reply>,
    instances: Vec<NodeIdx>,
}

impl Servers {
    /// The instances as a live client reaches them: through `links`, as nodes `instances`.
    pub fn live(links: Links<Cmd, Reply>, instances: Vec<NodeIdx>) -> Servers {
        Servers { links, instances }
    }
}

impl Protocol for Redlock {
    const ID: &'static str = "redlock";
    const SUMMARY: &'static str =
        "N independent Redis masters: SET NX PX on a majority within the validity time";
    type Params = Params;
    type Servers = Servers;
    type Client = Profiled<RedlockClient>;

    fn clients(&self) -> Vec<ClientProfile> {
        redlock_profiles()
    }

    fn lease_ms(&self, params: &Params) -> Option<u64> {
        Some(params.ttl_ms)
    }

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        params.validate()
    }

    fn servers(&self, params: &Params) -> Vec<String> {
        params.names()
    }

    fn points(&self, params: &Params) -> Vec<(String, &'static str)> {
        let mut points = vec![("client".into(), "after_acquire_send")];
        for name in params.names() {
            points.push((name, "before_reply"));
        }
        points
    }

    fn start(&self, p: &Params, world: &World) -> Servers {
        let net = RedisNet::new(world);
        let instances = p
            .names()
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let config = ServerConfig {
                    persistence: p.persistence.get(i),
                    active_expire_interval_ms: p.active_expire_interval_ms,
                    restart_delay_ms: p.restart_delay_ms,
                };
                start_server(world, name, &net, config)
            })
            .collect();
        Servers {
            links: Links::Sim(net),
            instances,
        }
    }

    fn connect(&self, params: &Params, servers: &Servers, ctx: &NodeCtx) -> Self::Client {
        let inner = RedlockClient {
            ctx: ctx.clone(),
            mux: servers.links.mux(ctx),
            next_id: 0,
            instances: servers.instances.clone(),
            locked: BTreeMap::new(),
            extensions: 0,
            params: params.clone(),
        };
        let (ttl_ms, threshold_ms) = (params.ttl_ms, params.extension_threshold_ms);
        Profiled::new(ctx, params.client, inner, ttl_ms, threshold_ms)
            .expiring_from(params.expiration_from, params.validity())
            .extending_with(retry(params))
    }
}

/// The client library. It multiplexes its requests over one inbox and reads every reply
/// already received before it looks at the per-instance timeout, as a client reading its
/// sockets does: replies that arrived while it was paused are seen, not timed out.
pub struct RedlockClient {
    ctx: NodeCtx,
    mux: Mux<Cmd, Reply>,
    next_id: u64,
    instances: Vec<NodeIdx>,
    /// Per grant handle, the instances that answered OK (for `release-quorum-only`).
    locked: BTreeMap<String, Vec<usize>>,
    /// pottery: the extensions of the current grant (`_extension_num`).
    extensions: u32,
    params: Params,
}

impl RedlockClient {
    /// Sends `cmd(i)` to each instance `i` in `which`; returns request id → instance.
    fn send_all(&mut self, which: &[usize], cmd: impl Fn() -> Cmd) -> BTreeMap<u64, usize> {
        let mut asked = BTreeMap::new();
        for &i in which {
            let id = self.next_id;
            self.next_id += 1;
            let body = cmd();
            self.mux.send(self.instances[i], id, body);
            asked.insert(id, i);
        }
        asked
    }

    /// Collects the replies to `asked` until all came or the per-instance timeout (counted
    /// from `sent`) passed; replies already received always count.
    async fn collect(
        &mut self,
        asked: &BTreeMap<u64, usize>,
        sent: Duration,
    ) -> Vec<Option<Reply>> {
        self.collect_until(asked, sent, |_| false).await
    }

    /// [`Self::collect`], but done as soon as the replies so far are `enough`, looked at
    /// after each one as it is taken: pottery gathers its futures `as_completed` and returns
    /// at a quorum (its `BailOutExecutor` leaves the rest in flight).
    async fn collect_until(
        &mut self,
        asked: &BTreeMap<u64, usize>,
        sent: Duration,
        enough: impl Fn(&[Option<Reply>]) -> bool,
    ) -> Vec<Option<Reply>> {
        let mut replies = vec![None; self.instances.len()];
        let deadline = sent + Duration::from_millis(self.params.request_timeout_ms);
        loop {
            // Every reply already received first; then wait for the next until the deadline.
            let (id, body) = match self.mux.try_recv() {
                Some(reply) => reply,
                None => {
                    let answered = replies.iter().flatten().count();
                    let now = self.ctx.mono_now();
                    if answered == asked.len() || now >= deadline {
                        return replies;
                    }
                    match (self.ctx)
                        .timeout_local(deadline - now, self.mux.next())
                        .await
                    {
                        Some(Some(reply)) => reply,
                        Some(None) | None => return replies,
                    }
                }
            };
            if let Some(&i) = asked.get(&id) {
                replies[i] = Some(body);
            }
            if enough(&replies) {
                return replies;
            }
        }
    }

    /// Whether the library stops gathering replies at a quorum (pottery).
    fn bails_at_quorum(&self) -> bool {
        self.params.client == Library::Pottery
    }

    /// The replies to `asked`, all of them or (pottery) until `counted` holds for a quorum.
    async fn gather(
        &mut self,
        asked: &BTreeMap<u64, usize>,
        sent: Duration,
        counted: impl Fn(&Reply) -> bool,
    ) -> Vec<Option<Reply>> {
        if !self.bails_at_quorum() {
            return self.collect(asked, sent).await;
        }
        let needed = quorum(self.params.instances);
        let enough =
            |r: &[Option<Reply>]| r.iter().flatten().filter(|r| counted(r)).count() >= needed;
        self.collect_until(asked, sent, enough).await
    }

    fn all(&self) -> Vec<usize> {
        (0..self.instances.len()).collect()
    }

    /// Compare-and-delete on `which`; returns how many deleted and how many answered.
    async fn unlock(&mut self, which: &[usize], value: &str) -> (usize, usize) {
        let asked = self.send_all(which, || release_cmd(value));
        let sent = self.ctx.mono_now();
        let replies = self.gather(&asked, sent, |r| *r == Reply::Int(1)).await;
        let deleted = replies
            .iter()
            .filter(|r| **r == Some(Reply::Int(1)))
            .count();
        (deleted, replies.iter().flatten().count())
    }

    /// One try: steps 1 to 5.
    async fn try_once(&mut self) -> Result<Grant, String> {
        let p = self.params.clone();
        let value = lock_value(&self.ctx);
        let start = self.ctx.mono_now();
        let tokens = p.tokens == Tokens::MaxIncr;
        let asked = self.send_all(&self.all(), || {
            acquire_cmd(&value, Some(p.ttl_ms.into()), tokens)
        });
        // The requests are out; the replies may wait in our buffers while we are paused here.
        self.ctx.point("after_acquire_send").await;
        let is_granted = |r: &Reply| matches!(r, Reply::Ok | Reply::Int(_));
        let replies = self.gather(&asked, start, is_granted).await;
        let granted: Vec<usize> = (0..replies.len())
            .filter(|i| replies[*i].as_ref().is_some_and(is_granted))
            .collect();
        let token = replies
            .iter()
            .filter_map(|r| match r {
                Some(Reply::Int(t)) => Some(*t as u64),
                _ => None,
            })
            .max();
        let elapsed = self.ctx.mono_now() - start;
        match p.decide(granted.len(), elapsed) {
            Ok(validity) => {
                assert!(granted.len() >= quorum(p.instances), "a grant has a quorum");
                self.locked.insert(value.clone(), granted);
                self.extensions = 0;
                Ok(Grant {
                    token,
                    valid_until: Some(self.ctx.mono_now() + validity),
                    handle: value,
                })
            }
            Err(why) => {
                if granted.len() >= quorum(p.instances) {
                    self.ctx.note(format!("lock rejected: {why}"));
                }
                let which = match p.variant {
                    Variant::ReleaseQuorumOnly => granted,
                    _ => self.all(),
                };
                self.unlock(&which, &value).await;
                Err(why)
            }
        }
    }
}

#[async_trait(?Send)]
impl Attempts for RedlockClient {
    fn ctx(&self) -> &NodeCtx {
        &self.ctx
    }

    async fn attempt(&mut self) -> Attempt {
        match self.try_once().await {
            Ok(grant) => Attempt::Granted(grant),
            Err(why) => Attempt::Busy(why),
        }
    }
}

/// Redlock's retry loop: `retry_count` tries (or tries until `acquire_timeout_ms`), a
/// random delay between them (also how node-redlock's `extend()` tries).
fn retry(p: &Params) -> Retry {
    let give_up = match p.acquire_timeout_ms {
        Some(ms) => GiveUp::After(Duration::from_millis(ms)),
        None => GiveUp::Tries(p.retry_count),
    };
    Retry {
        delay_ms_min: p.retry_delay_ms_min,
        delay_ms_max: p.retry_delay_ms_max,
        give_up,
    }
}

#[async_trait(?Send)]
impl LockClient for RedlockClient {
    async fn acquire(&mut self) -> Acquired {
        let retry = retry(&self.params);
        acquire(self, retry).await
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        let locked = self.locked.remove(&grant.handle).unwrap_or_default();
        let which = match self.params.variant {
            Variant::ReleaseQuorumOnly => locked,
            _ => self.all(),
        };
        let (deleted, answered) = self.unlock(&which, &grant.handle).await;
        if deleted >= quorum(self.params.instances) {
            Outcome::Ok
        } else if answered == which.len() {
            Outcome::Failed(format!("deleted on {deleted} instances only"))
        } else {
            Outcome::Unknown(format!(
                "deleted on {deleted}, {} did not answer",
                which.len() - answered
            ))
        }
    }

    async fn extend(&mut self, grant: &mut Grant) -> Outcome {
        if self.params.client == Library::Pottery {
            return self.extend_pottery(grant).await;
        }
        let start = self.ctx.mono_now();
        let (ttl_ms, library) = (self.params.ttl_ms, self.params.client);
        let asked = self.send_all(&self.all(), || extend_cmd(library, &grant.handle, ttl_ms));
        let replies = self.collect(&asked, start).await;
        let extended = replies.iter().flatten().filter(|r| is_extended(r)).count();
        let elapsed = self.ctx.mono_now() - start;
        if library == Library::RedsyncPre71 {
            return self.extend_pre_71(extended, elapsed);
        }
        match self.params.decide(extended, elapsed) {
            Ok(validity) => {
                grant.valid_until = Some(self.ctx.mono_now() + validity);
                Outcome::Ok
            }
            Err(why) => Outcome::Failed(why),
        }
    }

    async fn ask_servers(&mut self, grant: &Grant) -> Validity {
        if self.params.client == Library::Pottery {
            return self.locked_pottery(grant).await;
        }
        let start = self.ctx.mono_now();
        let asked = self.send_all(&self.all(), || Cmd::Get { key: KEY.into() });
        let replies = self.collect(&asked, start).await;
        let ours = Some(Reply::Bulk(grant.handle.clone()));
        let holding = replies.iter().filter(|r| **r == ours).count();
        let (n, needed) = (self.params.instances, quorum(self.params.instances));
        if holding >= needed {
            return Validity::Indefinite;
        }
        Validity::Lost(format!(
            "{holding} of {n} instances hold the value, {needed} needed"
        ))
    }
}

impl RedlockClient {
    /// pottery's `extend()`: `TooManyExtensions` past its limit, without a request; else the
    /// compare-and-`PEXPIRE` script on every master, a success at a quorum of extensions,
    /// with no look at the time it took (pottery keeps no validity to move).
    async fn extend_pottery(&mut self, grant: &Grant) -> Outcome {
        let limit = self.params.extensions_max();
        if self.extensions >= limit {
            self.ctx.note(format!(
                "pottery extend(): TooManyExtensions ({limit} already, num_extensions = {limit})"
            ));
            return Outcome::Failed("TooManyExtensions".into());
        }
        let (start, ttl_ms) = (self.ctx.mono_now(), self.params.ttl_ms);
        let asked = self.send_all(&self.all(), || {
            extend_cmd(Library::Pottery, &grant.handle, ttl_ms)
        });
        let replies = self.gather(&asked, start, is_extended).await;
        let extended = replies.iter().flatten().filter(|r| is_extended(r)).count();
        let (n, needed) = (self.params.instances, quorum(self.params.instances));
        if extended < needed {
            return Outcome::Failed(format!(
                "ExtendUnlockedLock: extended on {extended} of {n} masters, {needed} needed"
            ));
        }
        self.extensions += 1;
        Outcome::Ok
    }

    /// pottery's `locked()`: the `_acquired_script` on every master (the key's PTTL where it
    /// holds this value); at the first quorum of positive answers, the smallest of them less
    /// the drift allowance and the call's own time. A quorum never reached is 0: not held.
    async fn locked_pottery(&mut self, grant: &Grant) -> Validity {
        let start = self.ctx.mono_now();
        let value = grant.handle.clone();
        let asked = self.send_all(&self.all(), || Cmd::PttlIfEq {
            key: KEY.into(),
            value: value.clone(),
        });
        // The script's answer: the key's time left in ms, or 0 (not this value, or none left).
        let left_ms = |r: &Reply| match r {
            Reply::Int(ms) if *ms > 0 => Some(*ms),
            _ => None,
        };
        let replies = self.gather(&asked, start, |r| left_ms(r).is_some()).await;
        let ttls: Vec<i64> = replies.iter().flatten().filter_map(left_ms).collect();
        let (n, needed) = (self.params.instances, quorum(self.params.instances));
        let Some(&smallest_ms) = ttls.iter().min().filter(|_| ttls.len() >= needed) else {
            return Validity::Lost(format!(
                "locked() = 0: {} of {n} masters hold the value with time left, {needed} needed",
                ttls.len()
            ));
        };
        let now = self.ctx.mono_now();
        let spent = self.params.drift() + (now - start);
        match Duration::from_millis(smallest_ms as u64).checked_sub(spent) {
            Some(left) if !left.is_zero() => Validity::Until(now + left),
            _ => Validity::Lost(format!(
                "locked() = 0: the smallest TTL of a quorum, {smallest_ms} ms, less drift and \
                 the call's {:.1} ms",
                (now - start).as_secs_f64() * 1e3
            )),
        }
    }

    /// redsync's `Extend()` before go-redsync/redsync#71: a quorum of touches is success,
    /// however long they took (the keys they set may have expired since), and `until` stays
    /// where `Lock()` put it.
    fn extend_pre_71(&self, extended: usize, elapsed: Duration) -> Outcome {
        let (n, needed) = (self.params.instances, quorum(self.params.instances));
        if extended < needed {
            return Outcome::Failed(format!("{extended} of {n} instances, {needed} needed"));
        }
        if let Err(why) = self.params.decide(extended, elapsed) {
            self.ctx.note(format!(
                "redsync Extend() before #71: true on {extended} of {n} instances although {why}"
            ));
        }
        Outcome::Ok
    }
}
