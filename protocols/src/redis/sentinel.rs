//! Redis Sentinel: automatic failover of a primary (redis.io, "High availability with Redis
//! Sentinel").
//!
//! What each sentinel does here, as real Sentinel does:
//! - It asks every Redis node `INFO replication` each ping period and remembers when each
//!   last answered. A primary silent for `down_after_ms` is *subjectively down* (`+sdown`).
//! - It then asks the other sentinels whether they see that primary down too
//!   (`SENTINEL is-master-down-by-addr`); with `quorum` sentinels agreeing (itself included)
//!   the primary is *objectively down* (`+odown`).
//! - After a random delay (Redis desynchronises sentinels so they do not all stand at once) it
//!   starts a failover: it bumps its epoch, votes for itself and asks the others for their
//!   vote in that epoch. Each sentinel votes once per epoch, for the first that asks. With a
//!   majority of all sentinels (and at least `quorum`) it is the leader.
//! - The leader promotes the most up-to-date replica that answers (highest replication
//!   offset; ties go to the first node) with `REPLICAOF NO ONE`, adopts the new configuration
//!   under its epoch (`+switch-master`), tells the other nodes to follow the new primary, and
//!   announces the configuration to the other sentinels (hello messages); a sentinel adopts
//!   any configuration with a higher epoch than its own.
//! - A node that reports the wrong role for a while (an old primary back from a crash or a
//!   partition, a replica following the wrong primary) is told to follow the current primary
//!   (`+convert-to-slave`, `+fix-slave-config`): the old primary is demoted and resynced, and
//!   writes it took after the split are lost.
//! - Clients ask a sentinel for the current primary (`SENTINEL get-master-addr-by-name`).
//!
//! Simplifications: `PING` and `INFO` are one request per period (Redis pings every second
//! and sends `INFO` every ten); hello messages go directly between sentinels (Redis publishes
//! them through the Redis nodes, so a sentinel that reaches the nodes but not the other
//! sentinels still learns new configurations there); replica priority and the "disconnected
//! from the primary for too long" rule are not modelled; failover ends when the promoted
//! replica answers, without waiting for the others to resync.

use super::server::RedisNet;
use super::store::{Cmd, ReplInfo, Reply};
use futures::StreamExt;
use locksim_sim::rpc::{endpoint, Caller, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use rand::Rng;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// The config file on a sentinel's disk (`sentinel.conf`): epochs, vote, primary.
pub const CONF: &str = "sentinel.conf";

/// The message family of sentinels and their clients.
pub type SentinelNet = Net<Wire<SentinelReq, SentinelResp>>;

/// What is asked of a sentinel.
#[derive(Clone, Debug)]
pub enum SentinelReq {
    /// `SENTINEL get-master-addr-by-name`: which node is the primary?
    GetPrimary,
    /// `SENTINEL is-master-down-by-addr`: do you see `primary` down? With a `candidate`, also
    /// a request for your vote in `epoch`.
    IsPrimaryDown {
        /// The primary in question.
        primary: NodeIdx,
        /// The asker's current epoch.
        epoch: u64,
        /// The sentinel asking to lead the failover, if it is a vote request.
        candidate: Option<NodeIdx>,
    },
    /// A hello message: the sender's configuration (sent without waiting for an answer).
    Hello {
        /// The configuration's epoch.
        epoch: u64,
        /// The primary in it.
        primary: NodeIdx,
    },
}

/// A sentinel's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SentinelResp {
    /// The primary of the sentinel's current configuration.
    Primary(NodeIdx),
    /// The answer to [`SentinelReq::IsPrimaryDown`].
    Down {
        /// Whether this sentinel sees the primary down.
        down: bool,
        /// Who it voted for, in `leader_epoch`.
        leader: Option<NodeIdx>,
        /// The epoch of that vote.
        leader_epoch: u64,
    },
}

/// How the sentinels behave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentinelConfig {
    /// The Redis nodes watched, by name; the first is the initial primary.
    pub redis: Vec<String>,
    /// All sentinels, by name.
    pub sentinels: Vec<String>,
    /// Sentinels that must see the primary down before a failover.
    pub quorum: usize,
    /// Silence after which a node is down, in local ms.
    pub down_after_ms: u64,
    /// Period of `INFO` requests, hello messages and checks, in local ms.
    pub ping_interval_ms: u64,
    /// After a failover attempt, wait this long before the next one, in local ms.
    pub failover_timeout_ms: u64,
    /// Promote the last replica that answers, whatever its offset (the
    /// `lagging-replica-promoted` mistake: a `replica-priority` that prefers it, as Sentinel
    /// compares priority before offset).
    pub priority_over_offset: bool,
}

/// What a sentinel keeps in its config file ([`CONF`]): it survives a crash once synced.
#[derive(Clone, Debug, Default)]
struct Durable {
    current_epoch: u64,
    config_epoch: u64,
    primary: Option<NodeIdx>,
    leader: Option<NodeIdx>,
    leader_epoch: u64,
}

/// Adds a sentinel node.
pub fn start_sentinel(
    world: &World,
    name: &str,
    redis_net: &RedisNet,
    net: &SentinelNet,
    config: SentinelConfig,
) -> NodeIdx {
    let (redis_net, net) = (redis_net.clone(), net.clone());
    world.add_node(name, Role::Server, move |ctx| {
        run(ctx, redis_net.clone(), net.clone(), config.clone())
    })
}

/// The primary of the newest configuration among the sentinels' config files (`initial`
/// while none has written one): who `@primary` is now.
pub fn current_primary(world: &World, sentinels: &[NodeIdx], initial: NodeIdx) -> NodeIdx {
    sentinels
        .iter()
        .filter_map(|s| world.disk(*s).last::<Durable>(CONF))
        .filter_map(|d| Some((d.config_epoch, d.primary?)))
        .max_by_key(|(epoch, _)| *epoch)
        .map_or(initial, |(_, primary)| primary)
}

struct Sentinel {
    ctx: NodeCtx,
    config: SentinelConfig,
    redis: Vec<NodeIdx>,
    others: Vec<NodeIdx>,
    d: Durable,
    /// Whether `d` changed since the last fsync was started.
    unsynced: bool,
    last_ok: BTreeMap<NodeIdx, Duration>,
    info: BTreeMap<NodeIdx, ReplInfo>,
    wrong_role_since: BTreeMap<NodeIdx, Duration>,
    sdown: bool,
    odown: bool,
    failover_not_before: Option<Duration>,
}

type Shared = Rc<RefCell<Sentinel>>;

async fn run(ctx: NodeCtx, redis_net: RedisNet, net: SentinelNet, config: SentinelConfig) {
    let (redis, _) = endpoint(&redis_net, &ctx);
    let (caller, mut requests) = endpoint(&net, &ctx);
    let idx = |name: &String| ctx.world().node(name).expect("nodes are added first");
    let nodes: Vec<NodeIdx> = config.redis.iter().map(idx).collect();
    let others = config
        .sentinels
        .iter()
        .map(idx)
        .filter(|i| *i != ctx.idx())
        .collect();
    let disk = ctx.disk();
    let mut d: Durable = disk.last(CONF).unwrap_or_default();
    d.primary.get_or_insert(nodes[0]);
    let now = ctx.mono_now();
    let s: Shared = Rc::new(RefCell::new(Sentinel {
        ctx: ctx.clone(),
        config,
        last_ok: nodes.iter().map(|n| (*n, now)).collect(),
        redis: nodes,
        others,
        d,
        unsynced: false,
        info: BTreeMap::new(),
        wrong_role_since: BTreeMap::new(),
        sdown: false,
        odown: false,
        failover_not_before: None,
    }));
    let (s2, caller2) = (s.clone(), caller.clone());
    ctx.spawn(async move {
        while let Some(req) = requests.next().await {
            let (answer, changed) = {
                let mut s = s2.borrow_mut();
                let answer = s.answer(req.body);
                (answer, std::mem::take(&mut s.unsynced))
            };
            if changed {
                // A vote is on disk before it is given (Redis: `sentinelFlushConfig`).
                disk.fsync().await;
            }
            if let Some(resp) = answer {
                caller2.reply(req.from, req.id, resp);
            }
        }
    });
    let period = Duration::from_millis(s.borrow().config.ping_interval_ms);
    loop {
        ctx.sleep_local(period).await;
        ping_all(&s, &redis);
        check(&s, &redis, &caller).await;
    }
}

impl Sentinel {
    fn now(&self) -> Duration {
        self.ctx.mono_now()
    }

    fn name(&self, idx: NodeIdx) -> String {
        self.ctx.world().name(idx)
    }

    fn primary(&self) -> NodeIdx {
        self.d.primary.expect("set at start")
    }

    /// `CONFIG REWRITE` of the sentinel's file, synced in the background (an answer that
    /// depends on it waits for a sync: see `unsynced`).
    fn save(&mut self) {
        let d = &self.d;
        assert!(
            d.config_epoch <= d.current_epoch,
            "a configuration's epoch was current"
        );
        assert!(
            d.leader_epoch <= d.current_epoch,
            "a vote's epoch was current"
        );
        let disk = self.ctx.disk();
        disk.put(CONF, self.d.clone());
        drop(disk.fsync());
        self.unsynced = true;
    }

    fn is_down(&self, node: NodeIdx) -> bool {
        let silent = self.now().saturating_sub(self.last_ok[&node]);
        silent > Duration::from_millis(self.config.down_after_ms)
    }

    fn answer(&mut self, req: SentinelReq) -> Option<SentinelResp> {
        match req {
            SentinelReq::GetPrimary => Some(SentinelResp::Primary(self.primary())),
            SentinelReq::IsPrimaryDown {
                primary,
                epoch,
                candidate,
            } => {
                if let Some(candidate) = candidate {
                    self.vote(epoch, candidate);
                }
                Some(SentinelResp::Down {
                    down: primary == self.primary() && self.is_down(primary),
                    leader: self.d.leader,
                    leader_epoch: self.d.leader_epoch,
                })
            }
            SentinelReq::Hello { epoch, primary } => {
                self.adopt(epoch, primary);
                None
            }
        }
    }

    /// One vote per epoch, for the first candidate that asks (Redis' `sentinelVoteLeader`).
    fn vote(&mut self, epoch: u64, candidate: NodeIdx) {
        let voted_before = self.d.leader_epoch;
        if epoch > self.d.current_epoch {
            self.d.current_epoch = epoch;
        }
        if self.d.leader_epoch < epoch && self.d.current_epoch <= epoch {
            self.d.leader = Some(candidate);
            self.d.leader_epoch = epoch;
            self.save();
            if candidate != self.ctx.idx() {
                // Give the candidate time to finish before standing ourselves.
                let wait = Duration::from_millis(self.config.failover_timeout_ms);
                self.failover_not_before = Some(self.now() + wait);
            }
        }
        assert!(
            self.d.leader_epoch >= voted_before,
            "never a second vote in an epoch"
        );
    }

    /// Adopts a configuration announced with a higher epoch than ours.
    fn adopt(&mut self, epoch: u64, primary: NodeIdx) {
        let old = self.primary();
        if self.switch(epoch, primary) && old != primary {
            let detail = format!(
                "+config-update: primary {} -> {} (epoch {epoch})",
                self.name(old),
                self.name(primary)
            );
            self.ctx.note(detail);
        }
    }

    /// Takes a configuration if its epoch is newer than ours.
    fn switch(&mut self, epoch: u64, primary: NodeIdx) -> bool {
        if epoch <= self.d.config_epoch {
            return false;
        }
        self.d.config_epoch = epoch;
        self.d.current_epoch = self.d.current_epoch.max(epoch);
        self.d.primary = Some(primary);
        self.save();
        self.sdown = false;
        self.odown = false;
        self.failover_not_before = None;
        true
    }

    /// The replica to promote: answering, following someone, most up to date (or, with
    /// `priority_over_offset`, the last such node).
    fn best_replica(&self) -> Option<NodeIdx> {
        let primary = self.primary();
        let priority = |n: &NodeIdx| self.config.priority_over_offset.then_some(*n);
        self.redis
            .iter()
            .filter(|n| **n != primary && !self.is_down(**n))
            .filter_map(|n| {
                let info = self.info.get(n)?;
                info.following.is_some().then_some((
                    priority(n),
                    info.offset,
                    std::cmp::Reverse(*n),
                ))
            })
            .max()
            .map(|(_, _, std::cmp::Reverse(n))| n)
    }

    /// Nodes to tell to follow the primary: those reporting another role for a while, as long
    /// as the primary itself looks sane (up, and a primary).
    fn misconfigured(&mut self) -> Vec<NodeIdx> {
        let primary = self.primary();
        let sane = !self.is_down(primary)
            && self
                .info
                .get(&primary)
                .is_some_and(|i| i.following.is_none());
        if !sane {
            self.wrong_role_since.clear();
            return vec![];
        }
        let now = self.now();
        let grace = Duration::from_millis(5 * self.config.ping_interval_ms);
        let mut fix = vec![];
        for n in self.redis.clone() {
            let wrong = n != primary
                && !self.is_down(n)
                && self
                    .info
                    .get(&n)
                    .is_some_and(|i| i.following != Some(primary));
            if !wrong {
                self.wrong_role_since.remove(&n);
                continue;
            }
            let since = *self.wrong_role_since.entry(n).or_insert(now);
            if now.saturating_sub(since) >= grace {
                self.wrong_role_since.insert(n, now);
                fix.push(n);
            }
        }
        fix
    }
}

fn ping_all(s: &Shared, redis: &Caller<Cmd, Reply>) {
    let (ctx, nodes, timeout) = {
        let s = s.borrow();
        let timeout = Duration::from_millis(s.config.ping_interval_ms);
        (s.ctx.clone(), s.redis.clone(), timeout)
    };
    for node in nodes {
        let (s, redis, ctx2) = (s.clone(), redis.clone(), ctx.clone());
        ctx.spawn(async move {
            if let Ok(Reply::Info(info)) = redis.call(node, Cmd::Info, timeout).await {
                let mut s = s.borrow_mut();
                s.last_ok.insert(node, ctx2.mono_now());
                s.info.insert(node, info);
            }
        });
    }
}

/// Asks every other sentinel at once; returns the answers that came in time.
async fn ask_all(
    s: &Shared,
    caller: &Caller<SentinelReq, SentinelResp>,
    req: SentinelReq,
) -> Vec<SentinelResp> {
    let (others, timeout) = {
        let s = s.borrow();
        (
            s.others.clone(),
            Duration::from_millis(s.config.ping_interval_ms),
        )
    };
    let calls = others
        .into_iter()
        .map(|o| caller.call(o, req.clone(), timeout));
    futures::future::join_all(calls)
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

/// One period's checks: is the primary down, should we fail over, is anyone misconfigured;
/// then the hello message.
async fn check(s: &Shared, redis: &Caller<Cmd, Reply>, caller: &Caller<SentinelReq, SentinelResp>) {
    let (primary, down, epoch, quorum) = s.borrow_mut().subjectively_down();
    if down {
        let ask = SentinelReq::IsPrimaryDown {
            primary,
            epoch,
            candidate: None,
        };
        let agree = ask_all(s, caller, ask)
            .await
            .iter()
            .filter(|r| matches!(r, SentinelResp::Down { down: true, .. }))
            .count();
        let wait = s
            .borrow_mut()
            .objectively_down(primary, 1 + agree >= quorum, agree);
        if let Some((ctx, wait)) = wait {
            if !wait.is_zero() {
                ctx.sleep_local(wait).await;
            }
            fail_over(s, redis, caller, primary).await;
        }
    }
    let fix = s.borrow_mut().misconfigured();
    let s = s.borrow();
    let primary = s.primary();
    for n in fix {
        s.ctx.note(format!(
            "+convert-to-replica {} of {}",
            s.name(n),
            s.name(primary)
        ));
        redis.notify(
            n,
            Cmd::ReplicaOf {
                primary: Some(primary),
            },
        );
    }
    let hello = SentinelReq::Hello {
        epoch: s.d.config_epoch,
        primary,
    };
    for o in &s.others {
        caller.notify(*o, hello.clone());
    }
}

/// Stands for election in a new epoch and, if elected, promotes the best replica.
async fn fail_over(
    s: &Shared,
    redis: &Caller<Cmd, Reply>,
    caller: &Caller<SentinelReq, SentinelResp>,
    primary: NodeIdx,
) {
    let Some((me, epoch, needed)) = s.borrow_mut().stand(primary) else {
        return; // A newer configuration arrived while we waited.
    };
    let ask = SentinelReq::IsPrimaryDown {
        primary,
        epoch,
        candidate: Some(me),
    };
    let votes = 1 + ask_all(s, caller, ask)
        .await
        .iter()
        .filter(|r| {
            matches!(r, SentinelResp::Down { leader: Some(l), leader_epoch, .. }
                if *l == me && *leader_epoch == epoch)
        })
        .count();
    let Some(chosen) = s.borrow().elected(epoch, votes, needed) else {
        return;
    };
    let timeout = Duration::from_millis(s.borrow().config.ping_interval_ms);
    let promoted = redis
        .call(chosen, Cmd::ReplicaOf { primary: None }, timeout)
        .await;
    let mut s = s.borrow_mut();
    if promoted != Ok(Reply::Ok) {
        s.ctx.note(format!(
            "failover aborted: {} did not answer",
            s.name(chosen)
        ));
        return;
    }
    if s.d.config_epoch >= epoch || s.primary() != primary {
        return; // Someone else's newer configuration arrived meanwhile.
    }
    s.switch_to_promoted(redis, primary, chosen, epoch);
}

impl Sentinel {
    /// The primary as this sentinel sees it (`+sdown`/`-sdown`): `(primary, down, current
    /// epoch, quorum)`.
    fn subjectively_down(&mut self) -> (NodeIdx, bool, u64, usize) {
        let primary = self.primary();
        let down = self.is_down(primary);
        if down != self.sdown {
            self.sdown = down;
            let sign = if down { '+' } else { '-' };
            self.ctx.note(format!("{sign}sdown {}", self.name(primary)));
        }
        if !down {
            self.odown = false;
            self.failover_not_before = None;
        }
        (primary, down, self.d.current_epoch, self.config.quorum)
    }

    /// With `agree` other sentinels agreeing (`quorate` if enough): `+odown`, and when to
    /// fail over if it is due within this period.
    fn objectively_down(
        &mut self,
        primary: NodeIdx,
        quorate: bool,
        agree: usize,
    ) -> Option<(NodeCtx, Duration)> {
        let odown = quorate && self.primary() == primary;
        if odown && !self.odown {
            self.ctx.note(format!(
                "+odown {} ({} sentinels agree)",
                self.name(primary),
                1 + agree
            ));
        }
        self.odown = odown;
        let now = self.now();
        // Redis desynchronises sentinels so that they do not all stand in the same epoch.
        let desync_ms = madsim::rand::thread_rng().gen_range(0..=self.config.ping_interval_ms);
        let not_before = *self
            .failover_not_before
            .get_or_insert(now + Duration::from_millis(desync_ms));
        let period = Duration::from_millis(self.config.ping_interval_ms);
        let wait = not_before.saturating_sub(now);
        (odown && wait < period).then_some((self.ctx.clone(), wait))
    }

    /// Stands for leader in a new epoch, voting for itself: `(me, epoch, votes needed)`, or
    /// `None` if the primary is no longer objectively down.
    fn stand(&mut self, primary: NodeIdx) -> Option<(NodeIdx, u64, usize)> {
        if !self.odown || self.primary() != primary {
            return None;
        }
        let before = self.d.current_epoch;
        self.d.current_epoch += 1;
        let (me, epoch) = (self.ctx.idx(), self.d.current_epoch);
        self.d.leader = Some(me);
        self.d.leader_epoch = epoch;
        self.save();
        // The next attempt is desynchronised again (Redis re-draws `failover_start_time`
        // for every attempt): sentinels that split the vote must not stand together forever.
        let desync_ms = madsim::rand::thread_rng().gen_range(0..=self.config.ping_interval_ms);
        let wait = Duration::from_millis(self.config.failover_timeout_ms + desync_ms);
        self.failover_not_before = Some(self.now() + wait);
        self.ctx.note(format!(
            "+try-failover {} epoch {epoch}",
            self.name(primary)
        ));
        let sentinels = self.others.len() + 1;
        let majority = sentinels / 2 + 1;
        assert!(epoch > before, "every attempt stands in a new epoch");
        Some((me, epoch, majority.max(self.config.quorum)))
    }

    /// After the vote: the replica to promote, if elected and one is fit.
    fn elected(&self, epoch: u64, votes: usize, needed: usize) -> Option<NodeIdx> {
        assert!(votes <= self.others.len() + 1, "one vote per sentinel");
        if votes < needed {
            self.ctx.note(format!(
                "failover epoch {epoch}: {votes} votes, {needed} needed"
            ));
            return None;
        }
        self.ctx.event(
            "elected",
            None,
            format!("+elected-leader epoch {epoch} ({votes} votes)"),
        );
        let Some(chosen) = self.best_replica() else {
            self.ctx.note("failover aborted: no replica to promote");
            return None;
        };
        self.ctx
            .note(format!("+selected-replica {}", self.name(chosen)));
        Some(chosen)
    }

    /// `+switch-master`: the promoted replica is the primary of `epoch`; every other node is
    /// told to follow it.
    fn switch_to_promoted(
        &mut self,
        redis: &Caller<Cmd, Reply>,
        primary: NodeIdx,
        chosen: NodeIdx,
        epoch: u64,
    ) {
        assert!(chosen != primary, "a failover promotes another node");
        self.switch(epoch, chosen);
        assert_eq!(self.d.config_epoch, epoch);
        let detail = format!(
            "+switch-master {} -> {} (epoch {epoch})",
            self.name(primary),
            self.name(chosen)
        );
        self.ctx.event("failover", Some(chosen), detail);
        for n in self.redis.iter().filter(|n| **n != chosen) {
            redis.notify(
                *n,
                Cmd::ReplicaOf {
                    primary: Some(chosen),
                },
            );
        }
    }
}
