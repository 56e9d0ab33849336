//! Redis Sentinel: automatic failover of a primary (redis.io, "High availability with Redis
//! Sentinel").
//!
//! What each sentinel does here, as real Sentinel does (Redis 7.0's `sentinel.c`), on the
//! ticks of its timer (10 to 19 a second, redrawn at each tick as Redis does):
//! - It `PING`s each Redis node whose last answer is older than min(`ping-period`, 1 s;
//!   down-after), and calls the node *subjectively down* (`+sdown`) once a `PING` has gone
//!   unanswered for `down_after_ms` (`act_ping_time`): a primary cut off is called down 1 to 2
//!   periods after its last answer, not at once.
//! - It asks each node `INFO replication` every `info-period` (10 s), and every second instead
//!   to the replicas of a primary that is objectively down or failing over: their role and
//!   replication offset are as fresh as that.
//! - While it sees the primary down it asks each other sentinel whose last answer is older
//!   than `ask-period` (1 s) whether it sees it down too (`SENTINEL
//!   is-master-down-by-addr`), and goes on; each answer is kept as it comes, for five ask
//!   periods (`SRI_MASTER_DOWN`). At each tick, before it asks, it counts the answers in:
//!   with `quorum` sentinels agreeing (itself included) while it still sees the primary down,
//!   the primary is *objectively down* (`+odown`), as `sentinelCheckObjectivelyDown` runs
//!   before `sentinelAskMasterStateToOtherSentinels`. So `+odown` comes a tick or more after
//!   `+sdown` (53-100 ms), and a primary down for less (a fast restart) is never objectively
//!   down; an answer from an earlier down spell, if younger than five ask periods, counts,
//!   as in Redis.
//! - It then stands for leader: it bumps its epoch, votes for itself and asks the others for
//!   their vote in that epoch. Each sentinel votes once per epoch, for the first that asks,
//!   and does not stand itself for two failover timeouts after (from a start time drawn up
//!   to a second ahead, so that sentinels that split a vote do not stand together again).
//!   It counts the votes that came at its next ticks (`sentinelGetLeader`), asking again
//!   those that have not answered each ask period: with a majority of all sentinels (and at
//!   least `quorum`) it is the leader (`+elected-leader`); an election not won within
//!   min(10 s, failover timeout) is abandoned (`-failover-abort-not-elected`).
//! - The leader picks a replica as `sentinelSelectSlave` does: of those that answer (not
//!   down, connected, a `PONG` within five ping periods), whose last `INFO` is fresh
//!   (within five ping periods while the primary is down, three info periods otherwise) and
//!   whose link to the primary (`master_link_down_since_seconds`) has not been down longer
//!   than the primary has, plus ten down-afters, the most up to date (highest replication
//!   offset; of those equally up to date, the smaller run id, random per process start).
//!   With none fit the failover is aborted (`-failover-abort-no-good-slave`). One tick per
//!   step, as `sentinelFailoverStateMachine` takes them: it selects the tick after the
//!   election and sends the chosen one `REPLICAOF NO ONE` the tick after that (each tick
//!   again while its connection is refused, until the failover timeout), without waiting
//!   for the reply, and waits for the replica's next `INFO` to show it a primary
//!   (`+promoted-slave`; abandoned after `failover_timeout_ms`): as that reply comes (not
//!   at a tick: Redis acts on it in the reply's callback) it adopts the new configuration
//!   under its epoch (`+switch-master`) and answers clients with the promoted replica; at
//!   its next tick it tells the other replicas to follow the new primary (not the old
//!   primary: one that is up stays a primary until it is converted, below) and announces
//!   the configuration to the other sentinels; they adopt any configuration with a higher
//!   epoch than their own. Hello messages otherwise go every `publish-period` (2 s). A new configuration resets what a sentinel
//!   knows of every node, as Redis re-creates its instances: `INFO` at once, roles and
//!   downs forgotten.
//! - A node whose `INFO` shows the wrong role is told to follow the current primary, while
//!   the primary looks sane: an old primary back from a crash or a partition once it has
//!   reported itself a primary for four publish periods (8 s) and not been down for as long
//!   (`+convert-to-slave`: it is demoted and resynced, and writes it took after the split are
//!   lost), a replica following another node once it has for `failover_timeout_ms`
//!   (`+fix-slave-config`).
//! - A crashed node's connection is refused or reset ([`locksim_sim::World::refuses`]): the
//!   sentinel sends it nothing and tries to reconnect once a ping period, each try with a
//!   `PING` that stays pending (`act_ping_time`), so the node is down a down-after after the
//!   first try; without a pending `PING` it counts from the node's last answer.
//! - A sentinel at the run's start has been running: it knows the deployment (the first node
//!   the primary, the others its replicas) as its `INFO`s told it, and its pings' phase is
//!   anyone's.
//! - TILT mode (`sentinelCheckTiltCondition`): at each tick, a wall clock that moved back, or
//!   more than `tilt-trigger` (2 s) forward, since the last tick (the sentinel was stopped,
//!   or its clock stepped) puts it in TILT mode for `tilt-period` (30 s) of its wall clock:
//!   it keeps pinging, asking `INFO`, sending and hearing hellos and voting, but marks no
//!   node up or down, answers every "is the primary down?" with no, asks nobody, starts or
//!   continues no failover and acts on no `INFO` taken meanwhile (`+tilt`, `-tilt`). So a
//!   sentinel paused past two seconds sits out the next thirty, as a real one does.
//! - Clients ask a sentinel for the current primary (`SENTINEL get-master-addr-by-name`).
//!
//! The periods are parameters with Redis's defaults; live mode sets the real Sentinels' to
//! the same with `SENTINEL DEBUG`.
//!
//! Simplifications: hello messages go directly between sentinels (Redis publishes them
//! through the Redis nodes, so a sentinel that reaches the nodes but not the other
//! sentinels still learns new configurations there); a link to a node cut off stays open
//! (Redis closes one whose `PING` has waited half of down-after, after 15 s connected,
//! which changes no verdict of down); the other sentinels' answers are timed on its
//! monotonic clock (Redis: `mstime`, the wall clock, which a jump moves); replica priority
//! is not modelled (but for the `lagging-replica-promoted` variant); a replica counts its
//! link's downtime on its monotonic clock (Redis: `unixtime` seconds, which a wall-clock
//! jump moves); a failover ends at the promotion, without waiting for the other replicas to
//! resync (the leader answers clients with the promoted replica from then on in Redis too,
//! but logs `+switch-master` at `+failover-end`, once they have: about a second later on
//! the live runs of `v-redis-replicated-failover`, where the other sentinels log theirs a
//! tick after `+promoted-slave`, as the model's do).

use super::server::RedisNet;
use super::store::{Cmd, ReplInfo, Reply};
use futures::StreamExt;
use locksim_sim::rpc::{endpoint, Caller, Requests, RpcError, Wire};
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
    /// After a failover attempt, wait this long before the next one, in local ms.
    pub failover_timeout_ms: u64,
    /// The periods of Sentinel's commands ([`Periods`]).
    pub periods: Periods,
    /// Promote the last replica that answers, whatever its offset (the
    /// `lagging-replica-promoted` mistake: a `replica-priority` that prefers it, as Sentinel
    /// compares priority before offset).
    pub priority_over_offset: bool,
}

/// The periods of a Sentinel's commands, as Redis 7.0 has them (`sentinel.c`; each can be
/// set with `SENTINEL DEBUG`, which live mode does): what makes a real failover take seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Periods {
    /// `PING` each node when its last `PONG` is older than min(this, down-after), in ms
    /// (`ping-period`, 1000).
    pub ping_ms: u64,
    /// `INFO` each node this often, in ms (`info-period`, 10000): every second instead to the
    /// replicas of a primary that is objectively down or failing over, or whose link to
    /// their primary is down.
    pub info_ms: u64,
    /// Hello messages this often, in ms (`publish-period`, 2000).
    pub publish_ms: u64,
    /// Ask the other sentinels about a primary this one sees down this often, in ms
    /// (`ask-period`, 1000).
    pub ask_ms: u64,
    /// TILT mode starts when the wall clock moved back, or more than this forward, between
    /// two ticks, in ms (`tilt-trigger`, 2000).
    pub tilt_trigger_ms: u64,
    /// TILT mode lasts this long, in ms (`tilt-period`, 30 × the default ping period).
    pub tilt_period_ms: u64,
}

impl Default for Periods {
    fn default() -> Periods {
        Periods {
            ping_ms: 1_000,
            info_ms: 10_000,
            publish_ms: 2_000,
            ask_ms: 1_000,
            tilt_trigger_ms: 2_000,
            tilt_period_ms: 30_000,
        }
    }
}

/// The period of the next tick of a sentinel's timer (`sentinelTimer`), on which every check
/// happens: Redis runs it at `hz` and redraws `hz` from 10..=19 at every tick, "to
/// desynchronize every Sentinel from every other" (`sentinel.c`), so 53 to 100 ms.
fn tick() -> Duration {
    let hz = madsim::rand::thread_rng().gen_range(10..20);
    Duration::from_millis(1_000 / hz)
}
/// `INFO` period to the replicas of a primary in trouble (fixed in `sentinel.c`), in ms.
const INFO_IN_FAILOVER_MS: u64 = 1_000;
/// Spread of a failover attempt's start time (`SENTINEL_MAX_DESYNC`), in ms.
const MAX_DESYNC_MS: u64 = 1_000;

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

/// What a sentinel knows of one Redis node (Redis' `sentinelRedisInstance` and its link).
#[derive(Clone, Debug)]
struct Watch {
    /// When the last `PING` went (`None`: one goes at once, as on a new link).
    last_ping: Option<Duration>,
    /// The first `PING` still unanswered (`act_ping_time`): the node is down once it is older
    /// than down-after.
    pending_since: Option<Duration>,
    last_pong: Duration,
    /// The last `INFO` answer and when it came (`info_refresh`).
    info: Option<(Duration, ReplInfo)>,
    /// An `INFO` is on its way.
    info_asked: bool,
    /// The last `INFO` has not been acted on yet.
    info_fresh: bool,
    /// Since when the node reports whom it follows (`role_reported_time`,
    /// `slave_conf_change_time`).
    role_since: Duration,
    /// Whether it is subjectively down, and since when it last went down
    /// (`s_down_since_time`, never cleared while the instance lives).
    down: bool,
    down_since: Option<Duration>,
    /// The connection was refused or reset (the node's process is gone): nothing is sent
    /// on it, and it is tried again once a ping period (`last_reconnect`).
    disconnected: bool,
    last_reconnect: Duration,
}

impl Watch {
    /// A node as a new instance sees it (at start, and each after a new configuration: Redis
    /// resets the instances then): a `PING` pending from now, `INFO` at once.
    fn new(now: Duration) -> Watch {
        Watch {
            last_ping: None,
            pending_since: Some(now),
            last_pong: now,
            info: None,
            info_asked: false,
            info_fresh: false,
            role_since: now,
            down: false,
            down_since: None,
            disconnected: false,
            last_reconnect: now,
        }
    }

    /// Whether the connection is up to send on, `refused` telling whether the node's
    /// process is gone: a connection refused or reset is seen at once and tried again once a
    /// `reconnect` period (`sentinelReconnectInstance`), each try sending a `PING` at once;
    /// one that meets a refusal stays pending, so a crashed node is down a down-after after
    /// the first try.
    fn link_up(&mut self, now: Duration, reconnect: Duration, refused: bool) -> bool {
        if !self.disconnected && refused {
            self.disconnected = true;
            self.info_asked = false;
        }
        if !self.disconnected {
            return true;
        }
        if now.saturating_sub(self.last_reconnect) < reconnect {
            return false;
        }
        self.last_reconnect = now;
        if refused {
            self.last_ping = Some(now);
            self.pending_since.get_or_insert(now);
            return false;
        }
        self.disconnected = false;
        self.last_ping = None;
        true
    }

    fn following(&self) -> Option<Option<NodeIdx>> {
        self.info.as_ref().map(|(_, i)| i.following)
    }
}

/// Another sentinel's last answer to "is the primary down?" (Redis keeps it on that
/// sentinel's instance: `SRI_MASTER_DOWN` and `last_master_down_reply_time`). It counts
/// towards `+odown` until it is five ask periods old, for whatever primary is current then:
/// Redis keeps its sentinels' flags through a new configuration too.
#[derive(Clone, Copy, Debug)]
struct Said {
    down: bool,
    at: Duration,
    /// Its vote (leader, epoch), as its last answer to a request for one gave it
    /// (`ri->leader`, `ri->leader_epoch`): an answer to a plain question leaves it.
    vote: Option<(NodeIdx, u64)>,
}

/// A failover this sentinel stands for or leads, one step a tick as Redis's
/// `sentinelFailoverStateMachine` takes them; once `REPLICAOF NO ONE` is sent it is
/// `Sentinel::promoting` (`SENTINEL_FAILOVER_STATE_WAIT_PROMOTION`).
#[derive(Clone, Copy, Debug)]
struct Failover {
    primary: NodeIdx,
    epoch: u64,
    /// Votes needed: a majority of all sentinels, and at least the quorum.
    needed: usize,
    step: Step,
    /// When the step began (`failover_state_change_time`); the election's, when the attempt
    /// began.
    since: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `WAIT_START`: counting the votes that came, until the election times out.
    Election,
    /// `SELECT_SLAVE`: picking the replica.
    Select,
    /// `SEND_SLAVEOF_NOONE`: sending it `REPLICAOF NO ONE` once its link is up.
    Promote(NodeIdx),
}

/// An election not won in this long is abandoned (`SENTINEL_ELECTION_TIMEOUT`; the failover
/// timeout if shorter).
const ELECTION_TIMEOUT_MS: u64 = 10_000;

struct Sentinel {
    ctx: NodeCtx,
    config: SentinelConfig,
    redis: Vec<NodeIdx>,
    others: Vec<NodeIdx>,
    d: Durable,
    /// Whether `d` changed since the last fsync was started.
    unsynced: bool,
    watch: BTreeMap<NodeIdx, Watch>,
    odown: bool,
    /// What each other sentinel last answered about the primary, if within five ask
    /// periods.
    said: BTreeMap<NodeIdx, Said>,
    /// No failover attempt before this (`failover_start_time` + 2 × failover-timeout).
    failover_not_before: Option<Duration>,
    /// The failover under way, up to `REPLICAOF NO ONE`.
    failover: Option<Failover>,
    /// A promotion sent, awaiting the promoted replica's `INFO` as a primary: (old primary,
    /// promoted, epoch, when sent).
    promoting: Option<(NodeIdx, NodeIdx, u64, Duration)>,
    /// A promotion seen (old primary, promoted): the other replicas are told to follow at the
    /// next tick (`SENTINEL_FAILOVER_STATE_RECONF_SLAVES`).
    reconfigure: Option<(NodeIdx, NodeIdx)>,
    last_hello: Option<Duration>,
    /// The wall clock at the last tick (`previous_time`).
    previous_wall_ms: i64,
    /// In TILT mode since this wall-clock time: watching, not acting.
    tilt_since_ms: Option<i64>,
}

type Shared = Rc<RefCell<Sentinel>>;

async fn run(ctx: NodeCtx, redis_net: RedisNet, net: SentinelNet, config: SentinelConfig) {
    let (redis, _) = endpoint(&redis_net, &ctx);
    let (caller, requests) = endpoint(&net, &ctx);
    let idx = |name: &String| ctx.world().node(name).expect("nodes are added first");
    let nodes: Vec<NodeIdx> = config.redis.iter().map(idx).collect();
    let others = config
        .sentinels
        .iter()
        .map(idx)
        .filter(|i| *i != ctx.idx())
        .collect();
    let disk = ctx.disk();
    let first_start = disk.last::<Durable>(CONF).is_none();
    let mut d: Durable = disk.last(CONF).unwrap_or_default();
    d.primary.get_or_insert(nodes[0]);
    let now = ctx.mono_now();
    let s: Shared = Rc::new(RefCell::new(Sentinel {
        ctx: ctx.clone(),
        config,
        watch: nodes.iter().map(|n| (*n, Watch::new(now))).collect(),
        redis: nodes,
        others,
        d,
        unsynced: false,
        odown: false,
        said: BTreeMap::new(),
        failover_not_before: None,
        failover: None,
        promoting: None,
        reconfigure: None,
        last_hello: None,
        previous_wall_ms: 0,
        tilt_since_ms: None,
    }));
    ctx.spawn(answer_requests(s.clone(), caller.clone(), requests));
    // A sentinel started some time before the run: its pings' phase is anyone's.
    let ping_ms = s.borrow().ping_period_ms();
    let phase_ms = madsim::rand::thread_rng().gen_range(0..ping_ms);
    ctx.sleep_local(Duration::from_millis(phase_ms)).await;
    s.borrow_mut().watch_anew();
    if first_start {
        s.borrow_mut().knows_the_deployment();
    }
    // Its timer has been ticking: the first tick is measured from here.
    s.borrow_mut().previous_wall_ms = ctx.wall_ms();
    loop {
        ctx.sleep_local(tick()).await;
        s.borrow_mut().check_tilt();
        send_periodic(&s, &redis);
        if s.borrow_mut().acting() {
            s.borrow_mut().mark_down();
            after_promotion(&s, &redis);
            check(&s, &redis, &caller);
        }
        send_hello(&s, &caller);
    }
}

/// Answers the other sentinels and the clients, one request at a time.
async fn answer_requests(
    s: Shared,
    caller: Caller<SentinelReq, SentinelResp>,
    mut requests: Requests<SentinelReq>,
) {
    let disk = s.borrow().ctx.disk();
    while let Some(req) = requests.next().await {
        let (answer, changed) = {
            let mut s = s.borrow_mut();
            let answer = s.answer(req.body);
            (answer, std::mem::take(&mut s.unsynced))
        };
        if changed {
            // A vote is on disk before it is given (Redis: `sentinelFlushConfig`).
            disk.fsync().await;
        }
        if let Some(resp) = answer {
            caller.reply(req.from, req.id, resp);
        }
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

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
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

    /// Every node watched as a new instance.
    fn watch_anew(&mut self) {
        let now = self.now();
        self.watch.values_mut().for_each(|w| *w = Watch::new(now));
    }

    /// What a sentinel that ran before the run knows of the deployment (from `INFO`s taken
    /// while it came up, as live mode's Sentinels have): the first node the primary, the
    /// others its replicas, all in step. Its next `INFO`s come at their periods. (A sentinel
    /// restarted mid-run knows only its config file, and asks at once.)
    fn knows_the_deployment(&mut self) {
        let (now, primary) = (self.now(), self.redis[0]);
        for (n, w) in self.watch.iter_mut() {
            let following = (*n != primary).then_some(primary);
            // Its run id comes with the first `INFO` the sentinel takes itself.
            let info = ReplInfo {
                following,
                link_up: true,
                link_down_s: None,
                offset: 0,
                run_id: None,
            };
            w.info = Some((now, info));
        }
    }

    /// How long a node's last `PONG` may be before it is pinged: min(ping period, down-after).
    fn ping_period_ms(&self) -> u64 {
        self.config.periods.ping_ms.min(self.config.down_after_ms)
    }

    /// Whether `node` has left a `PING` unanswered for longer than down-after, or, its
    /// connection refused, not answered one for as long (`sentinelCheckSubjectivelyDown`).
    fn is_down(&self, node: NodeIdx) -> bool {
        let w = &self.watch[&node];
        let since = match (w.pending_since, w.disconnected) {
            (Some(pending), _) => pending,
            (None, true) => w.last_pong,
            (None, false) => return false,
        };
        self.now().saturating_sub(since) > Self::ms(self.config.down_after_ms)
    }

    /// Whether `node` has not gone down in the last `wait` (`sentinelRedisInstanceNoDownFor`).
    fn no_down_for(&self, node: NodeIdx, wait: Duration) -> bool {
        let since = self.watch[&node].down_since;
        since.is_none_or(|t| self.now().saturating_sub(t) > wait)
    }

    /// Each node's down flag, and for the primary `+sdown`/`-sdown`.
    fn mark_down(&mut self) {
        let (now, primary) = (self.now(), self.primary());
        for n in self.redis.clone() {
            let down = self.is_down(n);
            let w = self.watch.get_mut(&n).expect("every node is watched");
            if down == w.down {
                continue;
            }
            w.down = down;
            if down {
                w.down_since = Some(now);
            }
            if n == primary {
                let sign = if down { '+' } else { '-' };
                self.ctx.note(format!("{sign}sdown {}", self.name(n)));
            }
        }
    }

    /// How often `node` is asked `INFO` now.
    fn info_period(&self, node: NodeIdx) -> Duration {
        let replica = node != self.primary();
        let link_down = self.watch[&node]
            .info
            .as_ref()
            .is_some_and(|(_, i)| !i.link_up);
        let trouble = self.odown || self.promoting.is_some() || link_down;
        Self::ms(match replica && trouble {
            true => INFO_IN_FAILOVER_MS,
            false => self.config.periods.info_ms,
        })
    }

    /// `sentinelCheckTiltCondition`, at the start of every tick: a wall clock that moved
    /// back, or more than tilt-trigger forward, since the last tick (the process was
    /// stopped, or its clock stepped) starts TILT mode, from now.
    fn check_tilt(&mut self) {
        let now_ms = self.ctx.wall_ms();
        let delta_ms = now_ms - self.previous_wall_ms;
        if delta_ms < 0 || delta_ms > self.config.periods.tilt_trigger_ms as i64 {
            self.tilt_since_ms = Some(now_ms);
            self.ctx.note(format!(
                "+tilt: the wall clock moved {delta_ms:+} ms since the last tick"
            ));
        }
        self.previous_wall_ms = now_ms;
    }

    /// Whether the acting half of this tick runs (`sentinelHandleRedisInstance`): not in
    /// TILT mode, which ends once tilt-period has passed on the wall clock (`-tilt`). In
    /// TILT mode the sentinel pings, asks `INFO`, hears and sends hellos and votes, but
    /// marks no node up or down, asks nobody, starts or continues no failover, and acts on
    /// no `INFO` it takes then.
    fn acting(&mut self) -> bool {
        let Some(since_ms) = self.tilt_since_ms else {
            return true;
        };
        if self.ctx.wall_ms() - since_ms < self.config.periods.tilt_period_ms as i64 {
            self.watch.values_mut().for_each(|w| w.info_fresh = false);
            return false;
        }
        self.tilt_since_ms = None;
        self.ctx.note("-tilt");
        true
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
                // In TILT mode a sentinel always says "not down".
                let tilt = self.tilt_since_ms.is_some();
                Some(SentinelResp::Down {
                    down: !tilt && primary == self.primary() && self.watch[&primary].down,
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
                self.failover_not_before = Some(self.next_attempt());
            }
        }
        assert!(
            self.d.leader_epoch >= voted_before,
            "never a second vote in an epoch"
        );
    }

    /// When the next failover attempt may start: two failover timeouts after a start time
    /// drawn up to a second ahead (`failover_start_time`), so that sentinels that split a
    /// vote do not stand together again.
    fn next_attempt(&self) -> Duration {
        let desync_ms = madsim::rand::thread_rng().gen_range(0..MAX_DESYNC_MS);
        self.now() + Self::ms(desync_ms + 2 * self.config.failover_timeout_ms)
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

    /// Takes a configuration if its epoch is newer than ours; every node is then watched
    /// anew, as Redis resets its instances (`INFO` at once, roles and downs forgotten).
    fn switch(&mut self, epoch: u64, primary: NodeIdx) -> bool {
        if epoch <= self.d.config_epoch {
            return false;
        }
        self.d.config_epoch = epoch;
        self.d.current_epoch = self.d.current_epoch.max(epoch);
        self.d.primary = Some(primary);
        self.save();
        self.watch_anew();
        self.odown = false;
        self.failover_not_before = None;
        self.failover = None;
        self.promoting = None;
        self.reconfigure = None;
        true
    }

    /// The replica to promote, as `sentinelSelectSlave` picks it: one that answers (not down,
    /// connected, a `PONG` within five ping periods), follows someone by an `INFO` fresh
    /// enough (within five ping periods while the primary is down, three info periods
    /// otherwise), and whose link to the primary has not been down for longer than the
    /// primary has, plus ten down-afters (a replica cut off long before may have missed any
    /// amount of writes); of those, the most up to date by that `INFO` (or, with
    /// `priority_over_offset`, the last such node). Whether it answers is read now, not from
    /// the tick's down flags: Redis selects a replica a tick or more after the election, by
    /// when a `PONG` that came meanwhile has cleared its flag.
    fn best_replica(&self) -> Option<NodeIdx> {
        let (primary, now, periods) = (self.primary(), self.now(), self.config.periods);
        let p = &self.watch[&primary];
        let primary_down_for = match (p.down, p.down_since) {
            (true, Some(since)) => now.saturating_sub(since),
            _ => Duration::ZERO,
        };
        let max_link_down = primary_down_for + Self::ms(10 * self.config.down_after_ms);
        let answered_within = Self::ms(5 * periods.ping_ms);
        let info_valid_for = Self::ms(match p.down {
            true => 5 * periods.ping_ms,
            false => 3 * periods.info_ms,
        });
        let priority = |n: &NodeIdx| self.config.priority_over_offset.then_some(*n);
        self.redis
            .iter()
            .filter(|n| **n != primary && !self.is_down(**n))
            .filter(|n| {
                let w = &self.watch[n];
                !w.disconnected && now.saturating_sub(w.last_pong) <= answered_within
            })
            .filter_map(|n| {
                let (at, info) = self.watch[n].info.as_ref()?;
                let fresh = now.saturating_sub(*at) <= info_valid_for;
                let link_down = Duration::from_secs(info.link_down_s.unwrap_or(0));
                let fit = info.following.is_some() && fresh && link_down <= max_link_down;
                // The smaller run id wins a tie, an unknown one loses (`compareSlavesForPromotion`).
                let run_id = std::cmp::Reverse(info.run_id.unwrap_or(u64::MAX));
                fit.then_some((priority(n), info.offset, run_id, std::cmp::Reverse(*n)))
            })
            .max()
            .map(|(_, _, _, std::cmp::Reverse(n))| n)
    }

    /// Whether the primary looks sane (`sentinelMasterLooksSane`): not down, reporting itself
    /// a primary in an `INFO` of the last two info periods.
    fn primary_sane(&self) -> bool {
        let w = &self.watch[&self.primary()];
        let recent = Self::ms(2 * self.config.periods.info_ms);
        !w.down
            && !self.odown
            && w.info.as_ref().is_some_and(|(at, i)| {
                i.following.is_none() && self.now().saturating_sub(*at) < recent
            })
    }

    /// Nodes whose last `INFO` shows them misconfigured, to be told to follow the primary, as
    /// Redis acts on each `INFO` answer: one that claims to be a primary once it has for
    /// four publish periods (`+convert-to-slave`), one that follows another node once it
    /// has for failover-timeout (`+fix-slave-config`); either only if it has not been down
    /// for as long, and while the primary looks sane.
    fn misconfigured(&mut self) -> Vec<(NodeIdx, &'static str)> {
        let (primary, now, sane) = (self.primary(), self.now(), self.primary_sane());
        let mut fix = vec![];
        for n in self.redis.clone() {
            let w = self.watch.get_mut(&n).expect("every node is watched");
            let fresh = std::mem::take(&mut w.info_fresh);
            let (role_since, following) = (w.role_since, w.following());
            if n == primary || !fresh || !sane {
                continue;
            }
            let (wait_ms, what) = match following {
                Some(None) => (4 * self.config.periods.publish_ms, "+convert-to-replica"),
                Some(Some(f)) if f != primary => {
                    (self.config.failover_timeout_ms, "+fix-replica-config")
                }
                _ => continue,
            };
            let wait = Self::ms(wait_ms);
            if self.no_down_for(n, wait) && now.saturating_sub(role_since) > wait {
                fix.push((n, what));
            }
        }
        fix
    }
}

/// What a tick sends each node, as Redis' `sentinelSendPeriodicCommands`: `INFO` when the
/// last answer is older than its period (and none is on its way), `PING` when the last
/// `PONG` is older than min(ping period, down-after) and the last `PING` older than half that.
fn send_periodic(s: &Shared, redis: &Caller<Cmd, Reply>) {
    let mut sent = vec![];
    {
        let mut me = s.borrow_mut();
        let now = me.now();
        let ping = Sentinel::ms(me.ping_period_ms());
        let reconnect = Sentinel::ms(me.config.periods.ping_ms);
        let (world, me_idx) = (me.ctx.world().clone(), me.ctx.idx());
        for n in me.redis.clone() {
            let info_period = me.info_period(n);
            let w = me.watch.get_mut(&n).expect("every node is watched");
            if !w.link_up(now, reconnect, world.refuses(me_idx, n)) {
                continue;
            }
            let stale = w
                .info
                .as_ref()
                .is_none_or(|(at, _)| now.saturating_sub(*at) > info_period);
            if stale && !w.info_asked {
                w.info_asked = true;
                sent.push((n, Cmd::Info));
            }
            let ping_due = w.last_ping.is_none_or(|t| {
                now.saturating_sub(w.last_pong) > ping && now.saturating_sub(t) > ping / 2
            });
            if ping_due {
                w.last_ping = Some(now);
                w.pending_since.get_or_insert(now);
                sent.push((n, Cmd::Ping));
            }
        }
    }
    // An answer counts however late it is; a request is given up after down-after.
    let timeout = Sentinel::ms(s.borrow().config.down_after_ms);
    let ctx = s.borrow().ctx.clone();
    for (node, cmd) in sent {
        let (s, redis) = (s.clone(), redis.clone());
        ctx.spawn(async move {
            let asked_info = cmd == Cmd::Info;
            let reply = redis.call(node, cmd, timeout).await;
            s.borrow_mut().answered(node, asked_info, reply);
        });
    }
}

impl Sentinel {
    /// A node's answer to a `PING` or an `INFO` (`asked_info`), or its timeout.
    fn answered(&mut self, node: NodeIdx, asked_info: bool, reply: Result<Reply, RpcError>) {
        let now = self.now();
        let w = self.watch.get_mut(&node).expect("every node is watched");
        match reply {
            Ok(Reply::Info(info)) => {
                let a_primary = info.following.is_none();
                if w.following() != Some(info.following) {
                    w.role_since = now;
                }
                w.info = Some((now, info));
                w.info_fresh = true;
                w.info_asked = false;
                if a_primary {
                    self.promoted(node);
                }
            }
            Ok(_) => {
                w.last_pong = now;
                w.pending_since = None;
            }
            // A `PING`'s stays pending; after an `INFO`'s the next one may go.
            Err(RpcError::Timeout) if asked_info => w.info_asked = false,
            Err(RpcError::Timeout) => {}
        }
    }

    /// `+promoted-slave`: the promoted replica's `INFO` shows it a primary. Redis acts on it
    /// in the reply's callback (`sentinelRefreshInstanceInfo`), not in TILT mode: the
    /// sentinel takes the new configuration under its epoch at once (from then on it answers
    /// clients with the promoted replica), its hello goes at the next tick
    /// (`sentinelForceHelloUpdateForMaster`), and so does the other replicas'
    /// reconfiguration ([`after_promotion`]).
    fn promoted(&mut self, node: NodeIdx) {
        let Some((primary, chosen, epoch, _)) = self.promoting else {
            return;
        };
        if node != chosen || self.tilt_since_ms.is_some() {
            return;
        }
        self.promoting = None;
        if self.d.config_epoch < epoch && self.primary() == primary {
            self.ctx
                .note(format!("+promoted-slave {}", self.name(chosen)));
            self.switch_to_promoted(primary, chosen, epoch);
            self.last_hello = None;
            self.reconfigure = Some((primary, chosen));
        }
    }

    /// Whether a promotion sent has waited longer than failover-timeout for the replica's
    /// `INFO` to show it a primary: then it is abandoned.
    fn promotion_timed_out(&mut self) -> bool {
        let Some((_, chosen, _, sent_at)) = self.promoting else {
            return false;
        };
        if self.now().saturating_sub(sent_at) <= Self::ms(self.config.failover_timeout_ms) {
            return false;
        }
        self.promoting = None;
        let name = self.name(chosen);
        self.ctx.note(format!(
            "-failover-abort-slave-timeout: {name} not promoted"
        ));
        true
    }
}

/// The failover's steps after the promotion, at a tick: the other replicas are told to
/// follow the promoted one (`sentinelFailoverReconfNextSlave`), the tick after
/// `+promoted-slave` ([`Sentinel::promoted`]); a promotion not seen within
/// failover-timeout is abandoned. The old primary is not told (Redis walks the primary's
/// replicas): if it is up, it stays a primary, serving whoever still talks to it, until it
/// is converted four publish periods after its `INFO` shows it so
/// ([`Sentinel::misconfigured`]).
fn after_promotion(s: &Shared, redis: &Caller<Cmd, Reply>) {
    let mut me = s.borrow_mut();
    if me.promotion_timed_out() {
        return;
    }
    let Some((primary, chosen)) = me.reconfigure.take() else {
        return;
    };
    for n in me.redis.iter().filter(|n| **n != chosen && **n != primary) {
        redis.notify(
            *n,
            Cmd::ReplicaOf {
                primary: Some(chosen),
            },
        );
    }
}

/// Asks each of `to` the question `ask` (`SENTINEL is-master-down-by-addr`), without
/// waiting: each answer is kept as it comes ([`Sentinel::heard`]).
fn ask(s: &Shared, caller: &Caller<SentinelReq, SentinelResp>, ask: SentinelReq, to: Vec<NodeIdx>) {
    let ctx = s.borrow().ctx.clone();
    let timeout = Sentinel::ms(s.borrow().config.periods.ask_ms);
    let vote_asked = matches!(
        ask,
        SentinelReq::IsPrimaryDown {
            candidate: Some(_),
            ..
        }
    );
    for o in to {
        let (s, caller, ask) = (s.clone(), caller.clone(), ask.clone());
        ctx.spawn(async move {
            if let Ok(answer) = caller.call(o, ask, timeout).await {
                s.borrow_mut().heard(o, &answer, vote_asked);
            }
        });
    }
}

/// Asks the other sentinels whose last answer is older than an ask period whether they see
/// the primary down, if this one does, and for their vote while it fails over
/// (`sentinelAskMasterStateToOtherSentinels`): the answers are counted at a later tick.
fn ask_others(s: &Shared, caller: &Caller<SentinelReq, SentinelResp>) {
    let due = s.borrow_mut().asks_due();
    if let Some((req, to)) = due {
        ask(s, caller, req, to);
    }
}

/// One tick's acting half, in the order of Redis's `sentinelHandleRedisInstance`: is the
/// primary objectively down by the answers already in, should we stand for leader (asking
/// every other sentinel for its vote at once), the failover's next step, ask the others
/// again, is anyone misconfigured.
fn check(s: &Shared, redis: &Caller<Cmd, Reply>, caller: &Caller<SentinelReq, SentinelResp>) {
    if s.borrow_mut().objectively_down() {
        // Its replicas are asked INFO every second from now, the first time in this tick
        // (Redis handles a primary's replicas after the primary).
        send_periodic(s, redis);
    }
    let due = s.borrow().failover_due();
    if let Some(primary) = due {
        let (req, to) = s.borrow_mut().stand(primary);
        ask(s, caller, req, to);
    }
    let promote = s.borrow_mut().failover_step();
    if let Some(chosen) = promote {
        // Sent and not waited for (Redis discards the reply): the replica's next `INFO`
        // tells whether it took ([`Sentinel::confirm_promotion`]).
        redis.notify(chosen, Cmd::ReplicaOf { primary: None });
    }
    ask_others(s, caller);
    let fix = s.borrow_mut().misconfigured();
    let s = s.borrow();
    let primary = s.primary();
    for (n, what) in fix {
        s.ctx
            .note(format!("{what} {} of {}", s.name(n), s.name(primary)));
        redis.notify(
            n,
            Cmd::ReplicaOf {
                primary: Some(primary),
            },
        );
    }
}

/// The hello message, if due (sent in TILT mode too: it is part of watching).
fn send_hello(s: &Shared, caller: &Caller<SentinelReq, SentinelResp>) {
    let mut s = s.borrow_mut();
    let primary = s.primary();
    let now = s.now();
    let publish = Sentinel::ms(s.config.periods.publish_ms);
    if s.last_hello
        .is_some_and(|t| now.saturating_sub(t) <= publish)
    {
        return;
    }
    s.last_hello = Some(now);
    let hello = SentinelReq::Hello {
        epoch: s.d.config_epoch,
        primary,
    };
    for o in &s.others {
        caller.notify(*o, hello.clone());
    }
}

impl Sentinel {
    /// Forgets answers five ask periods old; then, if this sentinel sees the primary down,
    /// the question and whom to ask now: those whose last answer is older than an ask
    /// period.
    fn asks_due(&mut self) -> Option<(SentinelReq, Vec<NodeIdx>)> {
        let now = self.now();
        let ask = Self::ms(self.config.periods.ask_ms);
        self.said
            .retain(|_, said| now.saturating_sub(said.at) <= ask * 5);
        let primary = self.primary();
        if !self.watch[&primary].down {
            return None;
        }
        let to = self
            .others
            .iter()
            .copied()
            .filter(|o| {
                self.said
                    .get(o)
                    .is_none_or(|said| now.saturating_sub(said.at) >= ask)
            })
            .collect();
        // While it fails over it asks for votes again (`failover_state` past none).
        let failing_over = self.failover.is_some() || self.promoting.is_some();
        let req = SentinelReq::IsPrimaryDown {
            primary,
            epoch: self.d.current_epoch,
            candidate: failing_over.then(|| self.ctx.idx()),
        };
        Some((req, to))
    }

    /// Keeps another sentinel's answer about the primary, and its vote if one was asked.
    fn heard(&mut self, other: NodeIdx, answer: &SentinelResp, vote_asked: bool) {
        let SentinelResp::Down {
            down,
            leader,
            leader_epoch,
        } = *answer
        else {
            return;
        };
        let before = self.said.get(&other).and_then(|said| said.vote);
        let vote = match leader {
            Some(leader) if vote_asked => Some((leader, leader_epoch)),
            _ => before,
        };
        let at = self.now();
        self.said.insert(other, Said { down, at, vote });
    }

    /// Whether the primary just became objectively down (`+odown`): this sentinel sees it
    /// down and, with the others' answers already in that say so, a quorum does
    /// (`sentinelCheckObjectivelyDown`). A primary back up is no longer (`-odown`).
    fn objectively_down(&mut self) -> bool {
        let primary = self.primary();
        let agree = self.said.values().filter(|said| said.down).count();
        let odown = self.watch[&primary].down && 1 + agree >= self.config.quorum;
        let became = odown && !self.odown;
        if became {
            let name = self.name(primary);
            let agreeing = 1 + agree;
            self.ctx
                .note(format!("+odown {name} ({agreeing} sentinels agree)"));
        } else if self.odown && !odown {
            self.ctx.note(format!("-odown {}", self.name(primary)));
        }
        self.odown = odown;
        became
    }

    /// Whether to stand for election now: the primary objectively down, no promotion on its
    /// way and no attempt (ours, or one we voted for) too recent.
    fn failover_due(&self) -> Option<NodeIdx> {
        let now = self.now();
        let recent = self.failover_not_before.is_some_and(|t| t > now);
        let idle = self.failover.is_none() && self.promoting.is_none();
        (self.odown && idle && !recent).then(|| self.primary())
    }

    /// Stands for leader in a new epoch, voting for itself: the request for the others'
    /// votes and whom to send it (all of them, at once: `SENTINEL_ASK_FORCED`).
    fn stand(&mut self, primary: NodeIdx) -> (SentinelReq, Vec<NodeIdx>) {
        let before = self.d.current_epoch;
        self.d.current_epoch += 1;
        let (me, epoch) = (self.ctx.idx(), self.d.current_epoch);
        self.d.leader = Some(me);
        self.d.leader_epoch = epoch;
        self.save();
        self.failover_not_before = Some(self.next_attempt());
        self.ctx.note(format!(
            "+try-failover {} epoch {epoch}",
            self.name(primary)
        ));
        let sentinels = self.others.len() + 1;
        let majority = sentinels / 2 + 1;
        assert!(epoch > before, "every attempt stands in a new epoch");
        self.failover = Some(Failover {
            primary,
            epoch,
            needed: majority.max(self.config.quorum),
            step: Step::Election,
            since: self.now(),
        });
        let req = SentinelReq::IsPrimaryDown {
            primary,
            epoch,
            candidate: Some(me),
        };
        (req, self.others.clone())
    }

    /// The votes for this sentinel in `epoch`, its own included, as `sentinelGetLeader`
    /// counts them: the others' last answers to a request for a vote, in the current epoch.
    fn votes_for_me(&self, epoch: u64) -> usize {
        let me = self.ctx.idx();
        if self.d.current_epoch != epoch {
            return 0; // A newer epoch began: no vote of this one counts.
        }
        let mine = usize::from(self.d.leader == Some(me) && self.d.leader_epoch == epoch);
        let others = self
            .said
            .values()
            .filter(|said| said.vote == Some((me, epoch)));
        let votes = mine + others.count();
        assert!(votes <= self.others.len() + 1, "one vote per sentinel");
        votes
    }

    /// The failover's step for this tick; the replica to send `REPLICAOF NO ONE` now, if
    /// that is the step. A newer configuration ends the failover (Redis resets the primary's
    /// instance on adopting one).
    fn failover_step(&mut self) -> Option<NodeIdx> {
        // Taken for the step and put back only if the failover goes on.
        let mut f = self.failover.take()?;
        if self.d.config_epoch >= f.epoch || self.primary() != f.primary {
            return None;
        }
        let now = self.now();
        let waited = now.saturating_sub(f.since);
        let failover_timeout = Self::ms(self.config.failover_timeout_ms);
        match f.step {
            Step::Election => {
                let votes = self.votes_for_me(f.epoch);
                if votes >= f.needed {
                    let detail = format!("+elected-leader epoch {} ({votes} votes)", f.epoch);
                    self.ctx.event("elected", None, detail);
                    (f.step, f.since) = (Step::Select, now);
                } else if waited > Self::ms(ELECTION_TIMEOUT_MS).min(failover_timeout) {
                    self.ctx.note(format!(
                        "-failover-abort-not-elected epoch {}: {votes} votes, {} needed",
                        f.epoch, f.needed
                    ));
                    return None;
                }
            }
            Step::Select => (f.step, f.since) = (Step::Promote(self.select()?), now),
            Step::Promote(chosen) if !self.watch[&chosen].disconnected => {
                self.promoting = Some((f.primary, chosen, f.epoch, now));
                return Some(chosen);
            }
            Step::Promote(chosen) => {
                if waited > failover_timeout {
                    let name = self.name(chosen);
                    self.ctx.note(format!(
                        "-failover-abort-slave-timeout: {name} not reachable"
                    ));
                    return None;
                }
            }
        }
        self.failover = Some(f);
        None
    }

    /// The replica to promote (`+selected-replica`), if one is fit.
    fn select(&self) -> Option<NodeIdx> {
        let Some(chosen) = self.best_replica() else {
            self.ctx.note("failover aborted: no replica to promote");
            return None;
        };
        self.ctx
            .note(format!("+selected-replica {}", self.name(chosen)));
        Some(chosen)
    }

    /// `+switch-master`: the promoted replica is the primary of `epoch` (the other replicas
    /// are told to follow it at the next tick, [`after_promotion`]).
    fn switch_to_promoted(&mut self, primary: NodeIdx, chosen: NodeIdx, epoch: u64) {
        assert!(chosen != primary, "a failover promotes another node");
        self.switch(epoch, chosen);
        assert_eq!(self.d.config_epoch, epoch);
        let detail = format!(
            "+switch-master {} -> {} (epoch {epoch})",
            self.name(primary),
            self.name(chosen)
        );
        self.ctx.event("failover", Some(chosen), detail);
    }
}
