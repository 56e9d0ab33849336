//! A replicated service on a real Raft: TiKV's `raft` crate (raft-rs 0.7) driven as a pure
//! state machine on simulated nodes, one peer per node.
//!
//! How a real Raft host works (raft-rs's `RawNode` docs and `examples/five_mem_node`; etcd's
//! `raft/node.go` and `etcdserver/raft.go`): a peer calls `tick` on a timer, `step`s every
//! message from another peer, and whenever `has_ready` hands back a `Ready` it, in this
//! order: sends the leader's messages (which may go out before its own write: thesis 10.2.1),
//! applies the committed entries, appends the new entries and hard state to stable storage
//! and fsyncs them, then sends the messages that must follow persistence (votes and append
//! acknowledgements), calls `advance`, and sends and applies what the `LightReady` holds.
//!
//! What this host keeps:
//! - ticks on the node's **local monotonic clock** (`tick_ms`), so drift and pauses change
//!   elections as they would; **pre-vote** and **check-quorum** are on (etcd's defaults), so a
//!   partitioned leader steps down and a rejoining peer does not depose a healthy one;
//! - raft-rs draws its election timeout from `rand::thread_rng()`, which escapes the run's
//!   seed: whenever a new timeout starts (`election_elapsed == 0` after `new`, `tick` or
//!   `step`) the host overrides it from madsim's seeded RNG, within raft-rs's own range;
//! - persistence ([`super::log`]): a write is durable only after an fsync whose latency comes from
//!   the seed; a peer acknowledges only what it synced; a crash loses the rest; a restart
//!   recovers hard state and log from the disk and re-applies the log from index 1. The bug
//!   variant `ack-before-fsync` sends the acknowledgements (and advances) before the fsync;
//! - linearizable reads by **ReadIndex** through the leader (`ReadOnlyOption::Safe`): a read
//!   is answered once a quorum confirmed the leadership and the peer applied up to the index;
//!   a follower asks the leader for the index (raft-rs forwards `MsgReadIndex`) and answers
//!   the read itself (an etcd member's `linearizableReadNotify`, a ZooKeeper server's
//!   answer on the client's connection);
//! - **every member serves its clients**: a follower forwards a write to the leader (raft-rs
//!   forwards the proposal, `MsgPropose`) and answers the client once it applied the entry
//!   itself, across a change of leader (etcd's `processInternalRaftRequestOnce` waits for
//!   the entry's apply by request id; ZooKeeper's `FollowerRequestProcessor` and
//!   `CommitProcessor`), so a write whose answer the client did not wait for still commits
//!   (etcd-io/etcd#22082's late Delete); it relays what its service passes on to the leader
//!   ([`Handling::Relay`]) and forwards what the leader must answer ([`Handling::Forward`])
//!   on the peers' network. A member answers "not leader" only when it cannot serve: it
//!   knows no leader for a write, a read's leader changed, a forward was given up;
//! - Raft's safety ([`super::audit`]): at most one leader per term, the same entry at every applied
//!   index on every peer, checked on every run of the correct variant.
//!
//! - a **loop stall** (`loop_stall`): a peer whose service runs parts outside the Raft loop
//!   ([`Service::serves_outside_loop`], etcd) stops stepping, ticking, sending and applying
//!   until the stall ends, keeping the role it last saw; the service answers what it can
//!   outside the loop and runs its own timer ([`Service::handle_stuck`],
//!   [`Service::tick_stuck`]); everything else waits, in arrival order, and what the timer
//!   asked for is proposed when the loop runs again (Raft forwards a follower's proposals to
//!   the leader). A service with nothing outside the loop is paused instead.
//!
//! Left out: membership changes, snapshots and log compaction (a run is seconds long),
//! batching and pipelining knobs, learners, leader transfer.
//!
//! The service on top ([`Service`]: the etcd flavour in [`crate::raft::etcd`]) is itself a state
//! machine applied from the log; the host gives it client requests, committed commands,
//! confirmed reads, ticks and role changes, and sends what it answers.

use super::audit::Audit;
use super::client::Refusal;
use super::forward::Forwards;
use super::log::DurableLog;
use crate::protocol::ParamError;
use futures::future::{select, Either};
use futures::StreamExt;
use locksim_sim::mailbox;
use locksim_sim::nemesis::ROLE_LEADER;
use locksim_sim::rpc::{endpoint, Caller, CloseWatch, Links, Request, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use raft::eraftpb::{Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{RawNode, StateRole};
use rand::Rng;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What Raft peers send each other: raft-rs's messages, what a service relays to the
/// leader ([`Handling::Relay`]), and the client requests a member forwards to the leader
/// with their answers ([`Handling::Forward`]).
#[derive(Clone)]
pub enum PeerMsg<Req, Resp> {
    /// Boxed: a raft-rs message is some 200 bytes, moved through the courier's queue, the
    /// inbox and the host's input queue; the box moves 8.
    Raft(Box<Message>),
    /// A service's relay, for [`Service::relayed`] on the leader.
    Relay(Vec<u8>),
    /// A client's request, forwarded by a member to the leader; `token` names it in the
    /// answer.
    Forward {
        /// The forwarding member's name for the request.
        token: u64,
        /// The client's request.
        req: Req,
    },
    /// The leader's answer to a forwarded request.
    Answer {
        /// The forwarding member's name for the request.
        token: u64,
        /// The answer, for the client.
        resp: Resp,
    },
}

/// The message family Raft peers speak among themselves.
pub type PeerNet<Req, Resp> = Net<PeerMsg<Req, Resp>>;

/// How the host of every peer behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// Node names of the peers; peer `i` (from 0) has Raft id `i + 1`.
    pub peers: Vec<String>,
    /// Length of one Raft tick, in local ms.
    pub tick_ms: u64,
    /// Ticks without a leader before a follower campaigns (randomised up to twice this,
    /// unless the followers time out in rank order).
    pub election_ticks: usize,
    /// Followers time out in the order of their ids, not at random
    /// ([`HostConfig::timing_out_by_rank`]).
    pub times_out_by_rank: bool,
    /// Ticks between the leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// Raft's pre-vote (Ongaro's thesis, section 9.6): a candidate first asks whether it
    /// could win, so a member cut off and back does not raise the term and unseat the leader.
    pub pre_vote: bool,
    /// Bug: acknowledge entries before they are synced.
    pub ack_before_fsync: bool,
    /// A follower hears its leader's process die and elects at once
    /// ([`HostConfig::electing_when_the_leader_dies`]).
    pub elects_when_the_leader_dies: bool,
    /// A server closes its clients' connections when it loses its leader
    /// ([`HostConfig::closing_clients_when_leaderless`]).
    pub closes_clients_when_leaderless: bool,
    /// A member gives up a client's proposal not applied within
    /// [`HostConfig::forward_timeout`] and answers the refusal, as etcd's
    /// `processInternalRaftRequestOnce` answers "request timed out" at its `ReqTimeout`: a
    /// proposal forwarded to a leader that lost the lead before it got it is dropped there
    /// (Raft tells nobody), and its client hears so instead of waiting for ever.
    pub times_out_proposals: bool,
}

impl HostConfig {
    /// The host of a flavour's cluster: `peers` peers named `{prefix}1`, `{prefix}2`, …,
    /// heartbeats every tick.
    pub fn named(
        prefix: &str,
        peers: usize,
        tick_ms: u64,
        election_ticks: usize,
        ack_before_fsync: bool,
    ) -> Self {
        HostConfig {
            peers: (1..=peers).map(|i| format!("{prefix}{i}")).collect(),
            tick_ms,
            election_ticks,
            times_out_by_rank: false,
            heartbeat_ticks: 1,
            pre_vote: true,
            ack_before_fsync,
            elects_when_the_leader_dies: false,
            closes_clients_when_leaderless: false,
            times_out_proposals: false,
        }
    }

    /// The same host whose followers time out on a silent leader after `election_ticks` and
    /// one tick more for each follower of a higher id (the leader left out), not at a random
    /// time up to twice it: a ZooKeeper follower drops a silent leader after `syncLimit`
    /// ticks (within half a tick: its leader pings every half tick), and Fast Leader
    /// Election then elects the follower of the highest id (as up to date) in one round,
    /// where followers timing out together in Raft would split their votes, round after
    /// round.
    pub fn timing_out_by_rank(mut self) -> Self {
        self.times_out_by_rank = true;
        self
    }

    /// The same host whose followers hear their leader's process die, as ZooKeeper's do: a
    /// learner's socket to its leader closes, the follower goes back to the election
    /// (`LOOKING`) at once and the survivors elect within a few hundred ms (Fast Leader
    /// Election waits `finalizeWait`, 200 ms, for a better vote before it settles; ZooKeeper
    /// 3.8's logs here read `LEADER ELECTION TOOK - 212` to `414 MS`), where a Raft follower
    /// waits out its election timeout. Here a follower not cut off from its dying leader
    /// forgets it (so it grants votes at once: no leader lease) and campaigns at its first
    /// tick after [`FINALIZE_WAIT`] and as many more ticks as its rank among the survivors'
    /// ids, the highest first: distinct ranks, no split vote, and the first survivor whose log
    /// is up to date wins, as Fast Leader Election orders its votes by zxid and then server
    /// id. A fresh cluster's first candidate is its highest id too (live, a fresh 3.8
    /// ensemble of three elects `zk3`).
    pub fn electing_when_the_leader_dies(mut self) -> Self {
        self.elects_when_the_leader_dies = true;
        self
    }

    /// The same host whose servers serve clients only under a leader, as ZooKeeper's do: a
    /// follower that loses its leader (its socket to it closed, or `syncLimit` ticks without
    /// a word from it) and a leader that loses its quorum shut their server down, which closes
    /// every client connection (`Learner.shutdown` and `Leader.shutdown` →
    /// `closeAllConnections`), and refuse clients until a leader is elected. Here a peer
    /// whose known leader (itself included) is no longer the one it served under closes every
    /// connection a client holds to it ([`locksim_sim::World::close_connections`]); the
    /// clients reconnect elsewhere. A cut-off follower loses its leader at Raft's election
    /// timeout (its pre-vote), which ZooKeeper's host sets to `syncLimit` ticks
    /// ([`HostConfig::timing_out_by_rank`]).
    pub fn closing_clients_when_leaderless(mut self) -> Self {
        self.closes_clients_when_leaderless = true;
        self
    }

    /// Checks what every flavour's `[protocol]` table shares: 3 or 5 peers, ticks of a
    /// positive length, at least 2 ticks to an election, and the flavour's other durations
    /// in `positive_ms`, which must not be 0. The error names the field.
    pub fn validate(&self, positive_ms: &[(&str, u64)]) -> Result<(), ParamError> {
        if !(self.peers.len() == 3 || self.peers.len() == 5) {
            return Err(ParamError::field("peers", "must be 3 or 5"));
        }
        let tick = [("tick_ms", self.tick_ms)];
        if let Some((field, _)) = tick.iter().chain(positive_ms).find(|(_, v)| *v == 0) {
            return Err(ParamError::field(field, "must be positive"));
        }
        if self.election_ticks < 2 {
            return Err(ParamError::field("election_ticks", "must be at least 2"));
        }
        Ok(())
    }

    /// The election timeout, in local ms (what etcd extends leases by on promotion).
    pub fn election_timeout(&self) -> Duration {
        Duration::from_millis(self.tick_ms * self.election_ticks as u64)
    }

    /// How long a member waits on the leader's answer to a request it forwarded
    /// ([`Handling::Forward`]), or on a client's proposal
    /// ([`HostConfig::times_out_proposals`]): etcd's `ReqTimeout`, 5 s and two election
    /// timeouts.
    pub fn forward_timeout(&self) -> Duration {
        Duration::from_secs(5) + 2 * self.election_timeout()
    }
}

/// Fast Leader Election's `finalizeWait` (`FastLeaderElection.java`): how long a ZooKeeper
/// server waits for a better vote before it settles on a leader.
pub const FINALIZE_WAIT: Duration = Duration::from_millis(200);

/// What a peer does with a client request.
#[derive(Debug)]
pub enum Handling<Cmd, Req, Resp> {
    /// Propose this command through the log (leader only); answer when it is applied here.
    Propose(Cmd),
    /// Answer [`Service::read`] once ReadIndex confirmed this peer still leads (or, on a
    /// follower, once the leader confirmed its commit index and this peer applied up to it).
    Read(Req),
    /// Answer this now.
    Reply(Resp),
    /// Answer this now and send the bytes to the leader this peer knows, for
    /// [`Service::relayed`] there (a ZooKeeper follower answers a client's ping itself and
    /// passes the session's touch on to the leader); nothing is relayed while it knows none.
    Relay(Resp, Vec<u8>),
    /// Send the request to the leader and answer the client with the leader's answer, as an
    /// etcd member forwards a lease's keep-alive (`LeaseRenew`: "renewals don't go through
    /// raft; forward to leader manually", over the peers' HTTP): one client's one at a time,
    /// sent again to the leader of the moment when refused, given up at
    /// [`HostConfig::forward_timeout`] ([`super::forward`]).
    Forward(Req),
    /// The service keeps the request and answers later through [`Service::take_pushes`].
    Hold,
}

/// Where a service is called from: its node, whether it leads now, and who asked.
pub struct Env<'a> {
    /// The peer's node.
    pub ctx: &'a NodeCtx,
    /// Whether this peer is the leader now.
    pub leader: bool,
    /// The client that asked (for requests), or the peer itself.
    pub from: NodeIdx,
    /// The client's request number (for requests).
    pub id: u64,
}

/// A replicated state machine and its request handling, one instance per peer incarnation.
pub trait Service: 'static {
    /// Client requests.
    type Req: Clone + Send + 'static;
    /// Answers to clients ("not leader" among them: [`Refusal`]).
    type Resp: Clone + Send + Refusal + 'static;
    /// Commands that go through the log.
    type Cmd: Serialize + DeserializeOwned;

    /// How to handle a request.
    fn handle(&mut self, req: Self::Req, env: &Env) -> Handling<Self::Cmd, Self::Req, Self::Resp>;
    /// Applies a committed command; the answer goes to the client that proposed it, if it
    /// proposed it through this peer.
    fn apply(&mut self, cmd: Self::Cmd, env: &Env) -> Self::Resp;
    /// Answers a read whose leadership check passed.
    fn read(&mut self, req: Self::Req, env: &Env) -> Self::Resp;
    /// Called every tick; returns commands to propose (used while leading).
    fn tick(&mut self, env: &Env) -> Vec<Self::Cmd>;
    /// This peer became leader (`true`) or stopped leading (`false`).
    fn role_changed(&mut self, env: &Env);
    /// This peer, leading, applied the empty entry that opens its term: every entry of the
    /// terms before is applied here now (etcd promotes its lessor at this point).
    fn term_opened(&mut self, env: &Env) {
        let _ = env;
    }
    /// Answers to held requests that are due: `(client, request id, answer)`.
    fn take_pushes(&mut self) -> Vec<(NodeIdx, u64, Self::Resp)>;

    /// On the leader: what a member relayed ([`Handling::Relay`]).
    fn relayed(&mut self, relay: &[u8], env: &Env) {
        let _ = (relay, env);
    }
    /// Whether the server runs parts outside its Raft loop (an etcd member's gRPC handlers
    /// and lessor timer): then a `loop_stall` stops only the loop ([`Service::handle_stuck`],
    /// [`Service::tick_stuck`]); otherwise it pauses the peer.
    fn serves_outside_loop(&self) -> bool {
        false
    }
    /// A request that arrives while the Raft loop is stuck: its answer from outside the loop,
    /// or `None` if it waits for the loop (the default).
    fn handle_stuck(&mut self, req: &Self::Req, env: &Env) -> Option<Self::Resp> {
        let _ = (req, env);
        None
    }
    /// The service's own timer while the Raft loop is stuck: commands proposed once the
    /// loop runs again (Raft forwards them to whoever leads then).
    fn tick_stuck(&mut self, env: &Env) -> Vec<Self::Cmd> {
        let _ = env;
        vec![]
    }
}

/// Everything the peers of one cluster share: their networks, disks and the audit.
pub struct Cluster<Req, Resp> {
    /// How clients reach the peers: the simulated client network, or (live mode) the real
    /// members' client ports.
    pub clients: Links<Req, Resp>,
    /// The peers' node indexes, by peer number (from 0).
    pub peers: Vec<NodeIdx>,
}

/// Adds one node per peer to the world. `make` builds a fresh service at every (re)start of
/// a peer: the service's state comes back by re-applying the recovered log.
pub fn start_cluster<S, F>(
    world: &World,
    config: HostConfig,
    enforce_safety: bool,
    make: F,
) -> Cluster<S::Req, S::Resp>
where
    S: Service,
    F: Fn(&NodeCtx) -> S + Send + Sync + 'static,
{
    let clients = Net::new(world);
    let raft_net: PeerNet<S::Req, S::Resp> = Net::new(world);
    let audit = Arc::new(Mutex::new(Audit::new(enforce_safety)));
    let leaders: Leaders = Arc::default();
    let config = Arc::new(config);
    let make = Arc::new(make);
    let mut peers = Vec::new();
    for (i, name) in config.peers.iter().enumerate() {
        let (config, make, audit) = (config.clone(), make.clone(), audit.clone());
        let leaders = leaders.clone();
        let (clients, raft_net) = (clients.clone(), raft_net.clone());
        let idx = world.add_node(name, Role::Server, move |ctx| {
            let service = make(&ctx);
            let log = DurableLog::new(ctx.disk());
            let peer = Peer::boot(&ctx, i as u64 + 1, config.clone(), log, audit.clone());
            leaders.lock().unwrap().remove(&ctx.idx());
            run(
                ctx,
                peer,
                service,
                raft_net.clone(),
                leaders.clone(),
                clients.clone(),
            )
        });
        peers.push(idx);
    }
    world.answer_role(
        ROLE_LEADER,
        Arc::new(move |world| current_leader(world, &leaders)),
    );
    Cluster {
        clients: Links::Sim(clients),
        peers,
    }
}

/// The peers that believe they lead, with their term.
type Leaders = Arc<Mutex<BTreeMap<NodeIdx, u64>>>;

/// `@leader`: the live peer leading the highest term (a deposed leader that has not noticed
/// yet leads an older one).
fn current_leader(world: &World, leaders: &Leaders) -> Option<NodeIdx> {
    let leaders = leaders.lock().unwrap();
    leaders
        .iter()
        .filter(|(idx, _)| world.is_alive(**idx))
        .max_by_key(|(_, term)| **term)
        .map(|(idx, _)| *idx)
}

enum Input<Req, Resp> {
    Raft(Box<Message>),
    Relay(Vec<u8>),
    /// A request a member forwarded to this peer.
    Forward(NodeIdx, u64, Req),
    /// The leader's answer to a request this member forwarded.
    Answer(u64, Resp),
    Client(Request<Req>),
    Tick,
    /// The process of the leader (this node) died ([`HostConfig::elects_when_the_leader_dies`]).
    LeaderGone(NodeIdx),
}

async fn run<S: Service>(
    ctx: NodeCtx,
    mut peer: Peer,
    service: S,
    raft_net: PeerNet<S::Req, S::Resp>,
    leaders: Leaders,
    clients: Net<Wire<S::Req, S::Resp>>,
) {
    let (caller, mut requests) = endpoint(&clients, &ctx);
    let mut raft_inbox = raft_net.bind(&ctx);
    let (tx, mut inputs) = mailbox::channel();
    let tx2 = tx.clone();
    ctx.spawn(async move {
        while let Some(envelope) = raft_inbox.next().await {
            let input = match envelope.msg {
                PeerMsg::Raft(msg) => Input::Raft(msg),
                PeerMsg::Relay(relay) => Input::Relay(relay),
                PeerMsg::Forward { token, req } => Input::Forward(envelope.from, token, req),
                PeerMsg::Answer { token, resp } => Input::Answer(token, resp),
            };
            let _ = tx2.send(input);
        }
    });
    let tx2 = tx.clone();
    ctx.spawn(async move {
        while let Some(req) = requests.next().await {
            let _ = tx2.send(Input::Client(req));
        }
    });
    let (ticker, tick) = (ctx.clone(), Duration::from_millis(peer.config.tick_ms));
    ctx.spawn(async move {
        loop {
            ticker.sleep_local(tick).await;
            if tx.send(Input::Tick).is_err() {
                return;
            }
        }
    });
    peer.resolve_peers(&ctx);
    let outside_loop = service.serves_outside_loop();
    if outside_loop {
        ctx.serve_outside_loop();
    }
    let mut host = Host {
        peer,
        service,
        caller,
        raft_net,
        leaders,
        reads: BTreeMap::new(),
        forwards: Forwards::default(),
        leader_watch: None,
        serving_under: raft::INVALID_ID,
    };
    while let Some(input) = host.next_input(&mut inputs).await {
        if outside_loop && ctx.loop_stalled_for().is_some() {
            host.stuck(input, &mut inputs).await;
            continue;
        }
        host.input(input);
        while let Some(input) = inputs.try_recv() {
            host.input(input);
        }
        host.on_ready().await;
    }
}

/// The Raft side of one peer incarnation.
struct Peer {
    ctx: NodeCtx,
    id: u64,
    config: Arc<HostConfig>,
    raw: RawNode<MemStorage>,
    log: DurableLog,
    audit: Arc<Mutex<Audit>>,
    nodes: Vec<NodeIdx>,
    leading: bool,
    /// When this follower campaigns (local monotonic time), its leader having died.
    campaign_at: Option<Duration>,
    applied: u64,
    /// Proposals made through this peer, by nonce: who to answer, and when it gives up on
    /// the proposal ([`HostConfig::times_out_proposals`]; local monotonic time).
    proposals: BTreeMap<u64, (NodeIdx, u64, Duration)>,
    /// Reads confirmed at a commit index, waiting for this peer to apply up to it.
    confirmed: Vec<(u64, u64)>,
}

fn raft_config(id: u64, config: &HostConfig) -> raft::Config {
    // The range the host's timeouts are drawn in (raft-rs asserts it): by rank, a tick a
    // peer above the timeout; else raft-rs's default (0), up to twice it.
    let (min_election_tick, max_election_tick) = match config.times_out_by_rank {
        true => (
            config.election_ticks,
            config.election_ticks + config.peers.len(),
        ),
        false => (0, 0),
    };
    raft::Config {
        id,
        election_tick: config.election_ticks,
        min_election_tick,
        max_election_tick,
        heartbeat_tick: config.heartbeat_ticks,
        pre_vote: config.pre_vote,
        check_quorum: true,
        max_size_per_msg: 1024 * 1024,
        max_inflight_msgs: 256,
        ..raft::Config::default()
    }
}

impl Peer {
    /// The leader this follower watches the death of, if its host does
    /// ([`HostConfig::electing_when_the_leader_dies`]).
    fn leader_to_watch(&self) -> Option<NodeIdx> {
        let leader = self.raw.raft.leader_id;
        let following = leader != raft::INVALID_ID && leader != self.id;
        let watching = self.config.elects_when_the_leader_dies && following;
        watching.then(|| self.nodes[leader as usize - 1])
    }

    /// The peer a new cluster elects first: peer 1, or where the survivors of a dead leader
    /// elect as ZooKeeper's do, the highest id (Fast Leader Election orders votes by epoch,
    /// zxid and then server id: a fresh ensemble elects its highest id).
    fn first_candidate(&self) -> u64 {
        match self.config.elects_when_the_leader_dies {
            true => self.config.peers.len() as u64,
            false => 1,
        }
    }

    /// The leader's process died: forget it (no lease left to refuse votes by) and campaign
    /// after [`FINALIZE_WAIT`] and as many ticks as this peer's rank among the survivors' ids,
    /// the highest first (Fast Leader Election's order among servers as up to date).
    fn leader_gone(&mut self, gone: NodeIdx) {
        let leader = self.raw.raft.leader_id;
        if leader == raft::INVALID_ID || self.nodes[leader as usize - 1] != gone {
            return; // Another leader since.
        }
        let term = self.raw.raft.term;
        self.raw.raft.become_follower(term, raft::INVALID_ID);
        let survivors = (1..=self.nodes.len() as u64)
            .rev()
            .filter(|id| *id != leader);
        let rank = survivors.take_while(|id| *id != self.id).count() as u64;
        let wait = FINALIZE_WAIT + Duration::from_millis(self.config.tick_ms * rank);
        self.campaign_at = Some(self.ctx.mono_now() + wait);
        let why = format!(
            "leader {leader} gone: campaigning in {} ms",
            wait.as_millis()
        );
        self.ctx.event("leader-gone", None, why);
    }

    /// Campaigns once its time since the leader died has come (unless a leader came first).
    fn campaign_when_due(&mut self) {
        let Some(at) = self.campaign_at else {
            return;
        };
        if self.raw.raft.leader_id != raft::INVALID_ID {
            self.campaign_at = None;
        } else if self.ctx.mono_now() >= at {
            self.campaign_at = None;
            let _ = self.raw.campaign();
        }
    }

    /// Starts a peer from what its disk holds.
    fn boot(
        ctx: &NodeCtx,
        id: u64,
        config: Arc<HostConfig>,
        log: DurableLog,
        audit: Arc<Mutex<Audit>>,
    ) -> Peer {
        let image = log.load();
        let voters: Vec<u64> = (1..=config.peers.len() as u64).collect();
        let storage = MemStorage::new_with_conf_state((voters, vec![]));
        let fresh = image.entries.is_empty() && image.hard_state.term == 0;
        storage.wl().set_hardstate(image.hard_state.clone());
        storage
            .wl()
            .append(&image.entries)
            .expect("the durable log is contiguous");
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&raft_config(id, &config), storage, &logger)
            .expect("a valid Raft configuration");
        let mut peer = Peer {
            ctx: ctx.clone(),
            id,
            config,
            raw,
            log,
            audit,
            nodes: vec![],
            leading: false,
            applied: 0,
            proposals: BTreeMap::new(),
            confirmed: vec![],
            campaign_at: None,
        };
        peer.override_election_timeout();
        if fresh && id == peer.first_candidate() {
            // A new cluster is bootstrapped with one first candidate, so runs do not spend
            // their first second electing; later elections are Raft's own.
            peer.raw.campaign().expect("campaign");
        }
        peer
    }

    fn resolve_peers(&mut self, ctx: &NodeCtx) {
        let world = ctx.world();
        self.nodes = self
            .config
            .peers
            .iter()
            .map(|name| {
                world
                    .node(name)
                    .expect("every peer is added before the run")
            })
            .collect();
    }

    /// Replaces raft-rs's `thread_rng` election timeout with one from the run's seed, or by
    /// rank ([`HostConfig::timing_out_by_rank`]).
    fn override_election_timeout(&mut self) {
        if self.raw.raft.election_elapsed == 0 {
            let lo = self.raw.raft.election_timeout();
            let timeout = match self.config.times_out_by_rank {
                true => lo + self.rank_among_followers(),
                false => madsim::rand::thread_rng().gen_range(lo..2 * lo),
            };
            self.raw.raft.set_randomized_election_timeout(timeout);
        }
    }

    /// How many peers of a higher id than this one's there are, the leader it knows left
    /// out.
    fn rank_among_followers(&self) -> usize {
        let leader = self.raw.raft.leader_id;
        let higher = (self.id + 1..=self.nodes.len() as u64).filter(|id| *id != leader);
        higher.count()
    }

    fn leader_hint(&self) -> Option<usize> {
        let leader = self.raw.raft.leader_id;
        (leader != raft::INVALID_ID).then(|| leader as usize - 1)
    }
}

/// A peer with its service and its IO.
struct Host<S: Service> {
    peer: Peer,
    service: S,
    caller: Caller<S::Req, S::Resp>,
    raft_net: PeerNet<S::Req, S::Resp>,
    leaders: Leaders,
    /// Reads waiting for their leadership check, by nonce.
    reads: BTreeMap<u64, (NodeIdx, u64, S::Req)>,
    /// Requests forwarded to the leader, waiting for its answer or their turn.
    forwards: Forwards<S::Req>,
    /// The watch on the leader's connection, where followers hear their leader die.
    leader_watch: Option<CloseWatch>,
    /// The leader this peer serves clients under (its Raft id; `INVALID_ID`: none yet).
    serving_under: u64,
}

fn env(peer: &Peer, from: NodeIdx, id: u64) -> Env<'_> {
    Env {
        ctx: &peer.ctx,
        leader: peer.leading,
        from,
        id,
    }
}

fn nonce() -> u64 {
    madsim::rand::thread_rng().gen()
}

impl<S: Service> Host<S> {
    /// The next input; where followers hear their leader die, a [`Input::LeaderGone`] if the
    /// leader's process dies first (and this peer is not cut off from it). The watch is kept
    /// while the leader is the same: a loop turn costs nothing more.
    async fn next_input(
        &mut self,
        inputs: &mut mailbox::Receiver<Input<S::Req, S::Resp>>,
    ) -> Option<Input<S::Req, S::Resp>> {
        let leader = self.peer.leader_to_watch();
        let watched = self.leader_watch.as_ref().map(CloseWatch::server);
        if watched != leader {
            self.leader_watch = leader.map(|l| self.caller.watch_close(l));
        }
        let Some(watch) = self.leader_watch.as_mut() else {
            return inputs.next().await;
        };
        let gone = match select(inputs.next(), std::pin::pin!(watch.closed())).await {
            Either::Left((input, _)) => return input,
            Either::Right((gone, _)) => gone,
        };
        self.leader_watch = None;
        Some(Input::LeaderGone(gone))
    }

    fn input(&mut self, input: Input<S::Req, S::Resp>) {
        match input {
            Input::Raft(msg) => {
                // A message from an old term or a dead incarnation is refused by raft-rs
                // itself; an error here is such a refusal, not a fault of this peer.
                let _ = self.peer.raw.step(*msg);
            }
            Input::Relay(relay) => {
                if self.peer.leading {
                    let me = self.peer.ctx.idx();
                    self.service.relayed(&relay, &env(&self.peer, me, 0));
                }
            }
            Input::Forward(member, token, req) => self.forwarded(member, token, req),
            Input::Answer(token, resp) => self.answered(token, resp),
            Input::Tick => self.tick(),
            Input::Client(req) => self.request(req),
            Input::LeaderGone(leader) => self.peer.leader_gone(leader),
        }
        self.peer.override_election_timeout();
        // The service's idea of leadership must follow Raft's at every step: raft-rs
        // forwards a follower's proposals to the leader, so a lessor that still believes it
        // leads would get its stale revocations committed (etcd issues #12528, #15247).
        self.role_check();
    }

    fn tick(&mut self) {
        self.retry_forwards();
        self.expire_proposals();
        self.peer.campaign_when_due();
        self.peer.raw.tick();
        self.role_check();
        let me = self.peer.ctx.idx();
        let cmds = self.service.tick(&env(&self.peer, me, 0));
        if self.peer.leading {
            for cmd in cmds {
                let _ = self.propose(&cmd, None);
            }
        }
    }

    fn propose(&mut self, cmd: &S::Cmd, client: Option<(NodeIdx, u64)>) -> bool {
        let key = nonce();
        let data = serde_json::to_vec(cmd).expect("commands serialise");
        let taken = self
            .peer
            .raw
            .propose(key.to_le_bytes().to_vec(), data)
            .is_ok();
        if let (true, Some((from, id))) = (taken, client) {
            let until = self.peer.ctx.mono_now() + self.peer.config.forward_timeout();
            self.peer.proposals.insert(key, (from, id, until));
        }
        taken
    }

    /// A client's write: the leader proposes it, a follower forwards it (raft-rs); a member
    /// that knows no leader (raft-rs drops the proposal) answers "not leader".
    fn propose_for(&mut self, cmd: &S::Cmd, client: (NodeIdx, u64)) {
        if self.peer.leading {
            let _ = self.propose(cmd, Some(client));
        } else if !self.propose(cmd, Some(client)) {
            self.reply(client.0, client.1, S::Resp::not_leader());
        }
    }

    fn request(&mut self, req: Request<S::Req>) {
        let (from, id) = (req.from, req.id);
        if self.peer.config.closes_clients_when_leaderless && self.peer.leader_hint().is_none() {
            // A server that serves only under a leader refuses clients while it knows none.
            self.reply(from, id, S::Resp::not_leader());
            return;
        }
        let handling = self.service.handle(req.body, &env(&self.peer, from, id));
        let leading = self.peer.leading;
        match handling {
            Handling::Reply(resp) => self.reply(from, id, resp),
            Handling::Relay(resp, relay) => {
                self.reply(from, id, resp);
                self.relay(relay);
            }
            Handling::Hold => {}
            Handling::Forward(req) => self.forward(from, id, req),
            Handling::Propose(cmd) => self.propose_for(&cmd, (from, id)),
            Handling::Read(_) if leading && !self.peer.raw.raft.commit_to_current_term() => {
                // raft-rs drops a read before the new leader committed in its term: ask the
                // client to come back.
                self.reply(from, id, S::Resp::not_leader());
            }
            Handling::Read(req) => self.read_index(from, id, req),
        }
    }

    /// Asks for a ReadIndex: the leader's own, or (a follower) the leader's through raft-rs,
    /// which drops it if nobody leads (the client's try then goes unanswered).
    fn read_index(&mut self, from: NodeIdx, id: u64, req: S::Req) {
        let key = nonce();
        self.reads.insert(key, (from, id, req));
        self.peer.raw.read_index(key.to_le_bytes().to_vec());
    }

    /// Answers `to`: a client on the clients' network, or the member that forwarded the
    /// request (`id` its token) on the peers'.
    fn reply(&self, to: NodeIdx, id: u64, resp: S::Resp) {
        if self.peer.nodes.contains(&to) {
            let me = self.peer.ctx.idx();
            let answer = PeerMsg::Answer { token: id, resp };
            self.raft_net.send(me, to, answer);
        } else {
            self.caller.reply(to, id, resp);
        }
    }

    /// Forwards a client's request to the leader ([`Handling::Forward`], [`super::forward`]):
    /// now, unless the client's earlier one is still out.
    fn forward(&mut self, from: NodeIdx, id: u64, req: S::Req) {
        let until = self.peer.ctx.mono_now() + self.peer.config.forward_timeout();
        if let Some(n) = self.forwards.add((from, id), req, until) {
            self.send_forward(n);
        }
    }

    /// Sends forwarded request `n` to the leader this member knows; leading now, serves it
    /// itself; knowing no leader, leaves it for a later tick (etcd's `waitLeader`).
    fn send_forward(&mut self, n: u64) {
        let (from, id, req) = self.forwards.request(n);
        if self.peer.leading {
            self.forwards.take(n);
            return self.request(Request {
                from,
                id,
                body: req,
            });
        }
        let Some(leader) = self.peer.leader_hint() else {
            return;
        };
        let token = nonce();
        self.forwards.sent(n, token);
        let (me, to) = (self.peer.ctx.idx(), self.peer.nodes[leader]);
        self.raft_net.send(me, to, PeerMsg::Forward { token, req });
    }

    /// Gives up the clients' proposals not applied in time, with the refusal
    /// ([`HostConfig::times_out_proposals`]).
    fn expire_proposals(&mut self) {
        if !self.peer.config.times_out_proposals || self.peer.proposals.is_empty() {
            return;
        }
        let now = self.peer.ctx.mono_now();
        let mut expired = vec![];
        self.peer.proposals.retain(|_, &mut (from, id, until)| {
            until > now || {
                expired.push((from, id));
                false
            }
        });
        for (from, id) in expired {
            self.reply(from, id, S::Resp::not_leader());
        }
    }

    /// At a tick: gives up the forwarded requests out of time ("not leader", etcd's
    /// `ErrTimeout`) and sends each client's next one not in flight.
    fn retry_forwards(&mut self) {
        if self.forwards.is_empty() {
            return;
        }
        for (from, id) in self.forwards.expire(self.peer.ctx.mono_now()) {
            self.reply(from, id, S::Resp::not_leader());
        }
        for n in self.forwards.due() {
            self.send_forward(n);
        }
    }

    /// A request `member` forwarded: the leader handles it as a client's, its answer going
    /// back to the member; a peer that no longer leads answers "not leader" at once.
    fn forwarded(&mut self, member: NodeIdx, token: u64, req: S::Req) {
        if !self.peer.leading {
            return self.reply(member, token, S::Resp::not_leader());
        }
        self.request(Request {
            from: member,
            id: token,
            body: req,
        });
    }

    /// The leader's answer to a request this member forwarded: for its client, and that
    /// client's next request goes; a refusal with time left goes again at the next tick.
    fn answered(&mut self, token: u64, resp: S::Resp) {
        let (refused, now) = (resp.refused(), self.peer.ctx.mono_now());
        let Some((from, id)) = self.forwards.answered(token, refused, now) else {
            return;
        };
        self.caller.reply(from, id, resp);
        if let Some(n) = self.forwards.next_of(from) {
            self.send_forward(n);
        }
    }

    /// Sends a service's relay to the leader this follower knows.
    fn relay(&self, relay: Vec<u8>) {
        let Some(leader) = self.peer.leader_hint().filter(|_| !self.peer.leading) else {
            return;
        };
        let (me, to) = (self.peer.ctx.idx(), self.peer.nodes[leader]);
        self.raft_net.send(me, to, PeerMsg::Relay(relay));
    }

    /// The Raft loop is stuck (a `loop_stall`), from `first` until the stall ends: nothing is
    /// stepped, ticked, sent or applied, and the role the loop last saw stays the service's.
    /// What the service answers outside the loop is answered; its timer runs; everything else
    /// waits, in arrival order, for the loop. Raft's ticks in the stall are lost (etcd's
    /// ticker drops them).
    async fn stuck(
        &mut self,
        first: Input<S::Req, S::Resp>,
        inputs: &mut mailbox::Receiver<Input<S::Req, S::Resp>>,
    ) {
        let ctx = self.peer.ctx.clone();
        let (mut backlog, mut later) = (Vec::new(), Vec::new());
        self.take_while_stuck(first, &mut backlog, &mut later);
        while let Some(left) = ctx.loop_stalled_for() {
            match madsim::time::timeout(left, inputs.next()).await {
                Ok(Some(input)) => self.take_while_stuck(input, &mut backlog, &mut later),
                Ok(None) => return,
                Err(_) => {}
            }
        }
        for input in backlog {
            self.input(input);
        }
        for cmd in later {
            let _ = self.propose(&cmd, None);
        }
        self.on_ready().await;
    }

    /// One input while the loop is stuck: a request the service answers outside the loop is
    /// answered (a client's, or one a member forwarded: etcd's lease HTTP handler runs outside
    /// the loop too, as does a member's wait for the answer to its forwarding); a tick runs
    /// the service's own timer, whose commands wait in `later`; anything else waits in
    /// `backlog`.
    fn take_while_stuck(
        &mut self,
        input: Input<S::Req, S::Resp>,
        backlog: &mut Vec<Input<S::Req, S::Resp>>,
        later: &mut Vec<S::Cmd>,
    ) {
        let (from, id, req) = match &input {
            Input::Client(req) => (req.from, req.id, &req.body),
            Input::Forward(member, token, req) => (*member, *token, req),
            Input::Answer(token, resp) => return self.answered(*token, resp.clone()),
            Input::Tick => {
                let me = self.peer.ctx.idx();
                return later.extend(self.service.tick_stuck(&env(&self.peer, me, 0)));
            }
            _ => return backlog.push(input),
        };
        match self.service.handle_stuck(req, &env(&self.peer, from, id)) {
            Some(resp) => self.reply(from, id, resp),
            None => backlog.push(input),
        }
    }

    /// Handles one `Ready`, in raft-rs's documented order.
    async fn on_ready(&mut self) {
        if !self.peer.raw.has_ready() {
            return;
        }
        let mut ready = self.peer.raw.ready();
        self.send(ready.take_messages());
        assert!(ready.snapshot().is_empty(), "this host never snapshots");
        self.apply(ready.take_committed_entries()).await;
        let store = self.peer.raw.raft.raft_log.store.clone();
        if !ready.entries().is_empty() {
            store.wl().append(ready.entries()).expect("append");
            self.peer.log.write_entries(ready.entries());
        }
        if let Some(hs) = ready.hs() {
            store.wl().set_hardstate(hs.clone());
            // Only a new term or vote must be durable before anyone hears of it; a commit
            // index alone rides along with the next fsync (raft-rs's `must_sync`).
            self.peer.log.write_hard_state(hs, ready.must_sync());
        }
        for rs in ready.take_read_states() {
            let key = u64::from_le_bytes(rs.request_ctx.try_into().expect("an 8-byte nonce"));
            self.peer.confirmed.push((rs.index, key));
        }
        if !self.peer.config.ack_before_fsync {
            self.peer.log.sync().await;
        }
        self.send(ready.take_persisted_messages());
        let mut light = self.peer.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            store.wl().mut_hard_state().set_commit(commit);
            self.peer.log.write_commit(commit);
        }
        self.send(light.take_messages());
        self.apply(light.take_committed_entries()).await;
        self.peer.raw.advance_apply();
        self.role_check();
        self.serve_reads();
        self.push();
        if self.peer.config.ack_before_fsync {
            // The bug: everything above was acknowledged before it reached the disk.
            self.peer.log.sync_in_background();
        }
    }

    fn send(&self, msgs: Vec<Message>) {
        let me = self.peer.ctx.idx();
        for msg in msgs {
            let to = self.peer.nodes[msg.to as usize - 1];
            self.raft_net.send(me, to, PeerMsg::Raft(Box::new(msg)));
        }
    }

    async fn apply(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            assert_eq!(entry.index, self.peer.applied + 1, "entries apply in order");
            self.peer.applied = entry.index;
            self.peer.audit.lock().unwrap().applied(
                &self.peer.ctx,
                self.peer.id,
                entry.index,
                entry.term,
                xxhash_rust::xxh3::xxh3_64(&entry.data),
            );
            if entry.data.is_empty() || entry.get_entry_type() != EntryType::EntryNormal {
                // A new leader's empty entry: once it applies its own, it has applied every
                // entry of the terms before.
                let raft = &self.peer.raw.raft;
                let own = raft.state == StateRole::Leader && entry.term == raft.term;
                if own && self.peer.leading && entry.data.is_empty() {
                    let me = self.peer.ctx.idx();
                    self.service.term_opened(&env(&self.peer, me, 0));
                }
                continue;
            }
            self.peer.ctx.point("before_apply").await;
            let cmd: S::Cmd = serde_json::from_slice(&entry.data).expect("commands deserialise");
            let me = self.peer.ctx.idx();
            let resp = self.service.apply(cmd, &env(&self.peer, me, 0));
            let key = entry.context[..].try_into().map(u64::from_le_bytes);
            if let Some((from, id, _)) = key.ok().and_then(|k| self.peer.proposals.remove(&k)) {
                self.reply(from, id, resp);
            }
        }
    }

    fn role_check(&mut self) {
        self.leader_check();
        let leading = self.peer.raw.raft.state == StateRole::Leader;
        if leading == self.peer.leading {
            return;
        }
        self.peer.leading = leading;
        let term = self.peer.raw.raft.term;
        let me = self.peer.ctx.idx();
        if leading {
            self.leaders.lock().unwrap().insert(me, term);
        } else {
            self.leaders.lock().unwrap().remove(&me);
        }
        if leading {
            let ctx = self.peer.ctx.clone();
            self.peer
                .audit
                .lock()
                .unwrap()
                .elected(&ctx, term, self.peer.id);
            self.peer
                .ctx
                .event("elected", None, format!("leader of term {term}"));
        } else {
            self.peer
                .ctx
                .event("demoted", None, format!("no longer leader (term {term})"));
            // Reads waiting on this peer's leadership can no longer be confirmed here.
            self.fail_reads();
        }
        let me = self.peer.ctx.idx();
        self.service.role_changed(&env(&self.peer, me, 0));
    }

    /// Where servers serve clients only under a leader
    /// ([`HostConfig::closing_clients_when_leaderless`]): once the leader this peer served
    /// under is no longer the one it knows, every client connection to it is closed.
    ///
    /// A follower's reads waiting for the leader it asked are answered "not leader" once it
    /// knows another (raft-rs drops a ReadIndex its leader did not answer).
    fn leader_check(&mut self) {
        let leader = self.peer.raw.raft.leader_id;
        let before = std::mem::replace(&mut self.serving_under, leader);
        if before != leader && !self.peer.leading {
            self.fail_reads();
        }
        let lost = before != leader && before != raft::INVALID_ID;
        if !(lost && self.peer.config.closes_clients_when_leaderless) {
            return;
        }
        let ctx = &self.peer.ctx;
        ctx.world().close_connections(ctx.idx());
        let why = format!("leader {before} lost: every client connection closed");
        ctx.event("clients-closed", None, why);
    }

    /// Answers every read still waiting for its confirmation "not leader". (A forwarded
    /// request waits on: etcd's forward is not undone by a change of leader.)
    fn fail_reads(&mut self) {
        for (_, (from, id, _)) in std::mem::take(&mut self.reads) {
            self.reply(from, id, S::Resp::not_leader());
        }
        self.peer.confirmed.clear();
    }

    fn serve_reads(&mut self) {
        let applied = self.peer.applied;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.peer.confirmed)
            .into_iter()
            .partition(|(index, _)| *index <= applied);
        self.peer.confirmed = later;
        for (_, key) in due {
            let Some((from, id, req)) = self.reads.remove(&key) else {
                continue;
            };
            let resp = self.service.read(req, &env(&self.peer, from, id));
            self.reply(from, id, resp);
        }
    }

    fn push(&mut self) {
        for (to, id, resp) in self.service.take_pushes() {
            self.reply(to, id, resp);
        }
    }
}
