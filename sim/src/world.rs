//! The world of one run: its nodes, their clocks, the network state, the history, and the
//! nemesis that applies faults.
//!
//! A node is a madsim node plus what madsim does not model: a role, an incarnation (bumped
//! by every crash), its own clocks, and named points where faults can be triggered. The
//! never-paused `nemesis` node delivers messages and applies faults, so a paused node
//! cannot hold up the rest of the system.

use crate::clock::NodeClock;
use crate::disk::{Disk, DiskConfig, Disks};
use crate::history::{Event, History, Kind, Op};
use crate::nemesis::Fault;
use crate::net::{NetConfig, Route, Ticket};
use madsim::runtime::{Handle, NodeHandle};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

/// A node's position in the world (0, 1, ... in order of creation).
pub type NodeIdx = usize;

/// The name under which the nemesis records faults.
pub const NEMESIS: &str = "nemesis";

/// What a node is, for choosing fault targets and drawing timelines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A lock server (Redis, an etcd member, a sentinel...).
    Server,
    /// A lock client running the workload.
    Client,
    /// The fenced resource.
    Resource,
    /// The nemesis: delivers messages and applies faults; never paused.
    Nemesis,
}

/// Clock settings of a scenario: each node's drift and wall offset are drawn uniformly
/// within the maxima from the seed, unless set per node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockConfig {
    /// Largest drift, in ppm either way, for nodes not listed in `nodes`.
    #[serde(default)]
    pub drift_ppm_max: i64,
    /// Largest wall-clock offset, in ms either way, for nodes not listed in `nodes`.
    #[serde(default)]
    pub offset_ms_max: i64,
    /// Fixed settings for named nodes.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeClockConfig>,
}

/// One node's fixed clock settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClockConfig {
    /// Drift in ppm (positive = fast).
    #[serde(default)]
    pub drift_ppm: i64,
    /// Wall-clock offset in ms.
    #[serde(default)]
    pub offset_ms: i64,
}

impl ClockConfig {
    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(0..500_000).contains(&self.drift_ppm_max) {
            return Err("clocks.drift_ppm_max must be in 0..500000".into());
        }
        if self.offset_ms_max < 0 {
            return Err("clocks.offset_ms_max must not be negative".into());
        }
        for (name, c) in &self.nodes {
            if c.drift_ppm.abs() >= 500_000 {
                return Err(format!(
                    "clocks.nodes.{name}.drift_ppm must be in -499999..500000"
                ));
            }
        }
        Ok(())
    }
}

/// Counters of the network, for stats.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetStats {
    /// Messages handed to the network.
    pub sent: u64,
    /// Messages lost at random.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Messages dropped by a partition (at send or in flight).
    pub cut: u64,
    /// Messages dropped because the receiver was down or crashed meanwhile.
    pub to_dead: u64,
}

struct NodeState {
    name: String,
    role: Role,
    handle: Option<NodeHandle>,
    incarnation: u64,
    alive: bool,
    paused_until_ns: Option<u64>,
    pause_epoch: u64,
}

struct ArmedPoint {
    node: NodeIdx,
    point: String,
    occurrence: u32,
    hits: u32,
    fault: Fault,
}

struct State {
    nodes: Vec<NodeState>,
    clocks: Vec<NodeClock>,
    clock_config: ClockConfig,
    history: History,
    net: NetConfig,
    /// Directed links currently cut, with how many partitions cut them.
    cuts: BTreeMap<(NodeIdx, NodeIdx), u32>,
    /// How often each directed link has been cut: a message in flight across a cut dies.
    generations: BTreeMap<(NodeIdx, NodeIdx), u64>,
    loss_override: Option<(u64, f64)>,
    loss_epoch: u64,
    links: BTreeMap<(NodeIdx, NodeIdx), (f64, f64)>,
    points: Vec<ArmedPoint>,
    pending_points: Vec<Fault>,
    stats: NetStats,
}

struct Inner {
    time: madsim::time::TimeHandle,
    state: Mutex<State>,
    disks: Mutex<Disks>,
    nemesis: NodeHandle,
}

/// The shared world of one run. Cheap to clone.
#[derive(Clone)]
pub struct World {
    inner: Arc<Inner>,
}

impl World {
    /// A new world inside the current madsim runtime (call within `block_on`).
    pub(crate) fn new(
        net: NetConfig,
        clock_config: ClockConfig,
        disk: DiskConfig,
        faults: &[Fault],
    ) -> Self {
        let nemesis = Handle::current().create_node().name(NEMESIS).build();
        let pending_points = faults
            .iter()
            .filter(|f| f.at_ms().is_none())
            .cloned()
            .collect();
        let state = State {
            nodes: vec![NodeState {
                name: NEMESIS.into(),
                role: Role::Nemesis,
                handle: Some(nemesis.clone()),
                incarnation: 0,
                alive: true,
                paused_until_ns: None,
                pause_epoch: 0,
            }],
            clocks: vec![NodeClock::new(0, 0)],
            clock_config,
            history: Vec::with_capacity(1024),
            net,
            cuts: BTreeMap::new(),
            generations: BTreeMap::new(),
            loss_override: None,
            loss_epoch: 0,
            links: BTreeMap::new(),
            points: vec![],
            pending_points,
            stats: NetStats::default(),
        };
        World {
            inner: Arc::new(Inner {
                time: madsim::time::TimeHandle::current(),
                state: Mutex::new(state),
                disks: Mutex::new(Disks::new(disk)),
                nemesis,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().expect("world lock poisoned")
    }

    pub(crate) fn disks(&self) -> MutexGuard<'_, Disks> {
        self.inner.disks.lock().expect("disk lock poisoned")
    }

    /// A node's disk (see [`crate::disk`]): what its code writes there outlives its crashes
    /// as far as it was synced.
    pub fn disk(&self, idx: NodeIdx) -> Disk {
        Disk::new(self.clone(), idx)
    }

    /// True time since the start of the run, in ns. For the history and the nemesis only:
    /// protocol code reads its node's clocks instead.
    pub fn now_ns(&self) -> u64 {
        self.inner.time.elapsed().as_nanos() as u64
    }

    /// Appends an event to the history, stamped with true time; returns its index.
    pub fn record(&self, mut event: Event) -> u64 {
        let now = self.now_ns();
        let mut state = self.state();
        event.index = state.history.len() as u64;
        event.time_ns = now;
        tracing::debug!(target: "locksim::history", "{}", event.describe());
        state.history.push(event);
        state.history.len() as u64 - 1
    }

    /// Adds a node. `init` builds the node's main task; it runs at the start and again at
    /// every restart (so whatever it does not load from a durable store starts empty).
    pub fn add_node<F, Fut>(&self, name: &str, role: Role, init: F) -> NodeIdx
    where
        F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let idx = {
            let mut state = self.state();
            assert!(
                state.nodes.iter().all(|n| n.name != name),
                "node name `{name}` used twice"
            );
            let clock = initial_clock(&state.clock_config, name);
            state.nodes.push(NodeState {
                name: name.into(),
                role,
                handle: None,
                incarnation: 0,
                alive: true,
                paused_until_ns: None,
                pause_epoch: 0,
            });
            state.clocks.push(clock);
            let idx = state.nodes.len() - 1;
            resolve_links(&mut state, idx);
            arm_points(&mut state, idx);
            idx
        };
        let ctx = NodeCtx {
            world: self.clone(),
            idx,
            name: name.into(),
        };
        let handle = Handle::current()
            .create_node()
            .name(name)
            .init(move || init(ctx.clone()))
            .build();
        self.state().nodes[idx].handle = Some(handle);
        idx
    }

    /// The node with this name.
    pub fn node(&self, name: &str) -> Option<NodeIdx> {
        self.state().nodes.iter().position(|n| n.name == name)
    }

    /// The name of a node.
    pub fn name(&self, idx: NodeIdx) -> String {
        self.state().nodes[idx].name.clone()
    }

    /// Names of all nodes with the given role, in creation order.
    pub fn names(&self, role: Role) -> Vec<String> {
        let state = self.state();
        state
            .nodes
            .iter()
            .filter(|n| n.role == role)
            .map(|n| n.name.clone())
            .collect()
    }

    /// Whether the node is up (not crashed).
    pub fn is_alive(&self, idx: NodeIdx) -> bool {
        self.state().nodes[idx].alive
    }

    /// A copy of a node's clock now.
    pub fn clock(&self, idx: NodeIdx) -> NodeClock {
        self.state().clocks[idx].clone()
    }

    /// Network counters so far.
    pub fn net_stats(&self) -> NetStats {
        self.state().stats.clone()
    }

    /// Runs a task on the never-paused nemesis node.
    pub fn spawn_on_nemesis<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.nemesis.spawn(future);
    }

    fn record_fault(&self, op: Op, target: Option<&str>, detail: String) {
        let mut event = Event::new(NEMESIS, Kind::Info, op).detail(detail);
        if let Some(t) = target {
            event = event.target(t);
        }
        self.record(event);
    }

    // ---- the network ----

    pub(crate) fn route(&self, from: NodeIdx, to: NodeIdx) -> Option<Route> {
        let mut rng = madsim::rand::thread_rng();
        let mut state = self.state();
        state.stats.sent += 1;
        if !state.nodes[to].alive {
            state.stats.to_dead += 1;
            return None;
        }
        if state.cuts.contains_key(&(from, to)) {
            state.stats.cut += 1;
            return None;
        }
        let loss = state
            .loss_override
            .map_or(state.net.loss_probability, |(_, p)| p);
        if loss > 0.0 && rng.gen_bool(loss) {
            state.stats.lost += 1;
            return None;
        }
        let (min_ms, max_ms) = state
            .links
            .get(&(from, to))
            .copied()
            .unwrap_or((state.net.latency_ms_min, state.net.latency_ms_max));
        let (lo, hi) = ((min_ms * 1e6) as u64, (max_ms * 1e6) as u64);
        let draw = |rng: &mut madsim::rand::GlobalRng| {
            Duration::from_nanos(if hi > lo { rng.gen_range(lo..=hi) } else { lo })
        };
        let mut latencies = vec![draw(&mut rng)];
        let dup = state.net.duplicate_probability;
        if dup > 0.0 && rng.gen_bool(dup) {
            state.stats.duplicated += 1;
            latencies.push(draw(&mut rng));
        }
        Some(Route {
            latencies,
            ticket: Ticket {
                from,
                to,
                link_generation: state.generations.get(&(from, to)).copied().unwrap_or(0),
                incarnation: state.nodes[to].incarnation,
            },
        })
    }

    pub(crate) fn deliverable(&self, t: &Ticket) -> bool {
        let mut state = self.state();
        let link = (t.from, t.to);
        let generation = state.generations.get(&link).copied().unwrap_or(0);
        if state.cuts.contains_key(&link) || generation != t.link_generation {
            state.stats.cut += 1;
            return false;
        }
        let node = &state.nodes[t.to];
        if !node.alive || node.incarnation != t.incarnation {
            state.stats.to_dead += 1;
            return false;
        }
        true
    }

    // ---- faults ----

    fn madsim_node(&self, idx: NodeIdx) -> NodeHandle {
        self.state().nodes[idx]
            .handle
            .clone()
            .expect("node is built")
    }

    /// Pauses a node (stop-the-world) for `duration`; `why` goes into the history.
    pub fn pause(&self, idx: NodeIdx, duration: Duration, why: &str) {
        let now = self.now_ns();
        let until = now + duration.as_nanos() as u64;
        let (name, epoch, fresh) = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if !node.alive || node.role == Role::Nemesis {
                return;
            }
            if node.paused_until_ns.is_some_and(|u| u >= until) {
                return; // already paused for longer
            }
            let fresh = node.paused_until_ns.is_none();
            node.paused_until_ns = Some(until);
            node.pause_epoch += 1;
            (node.name.clone(), node.pause_epoch, fresh)
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Pause)
                .target(&name)
                .value(duration.as_millis() as i64)
                .detail(why),
        );
        if fresh {
            Handle::current().pause(self.madsim_node(idx).id());
        }
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            madsim::time::sleep(duration).await;
            world.resume_if(idx, Some(epoch));
        });
    }

    /// Resumes a paused node (any pause if `epoch` is None).
    fn resume_if(&self, idx: NodeIdx, epoch: Option<u64>) {
        let name = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if node.paused_until_ns.is_none() || epoch.is_some_and(|e| e != node.pause_epoch) {
                return;
            }
            node.paused_until_ns = None;
            node.name.clone()
        };
        Handle::current().resume(self.madsim_node(idx).id());
        self.record_fault(Op::Resume, Some(&name), String::new());
    }

    /// Crashes a node: its tasks die, its inboxes and in-flight messages to it are lost, and
    /// whatever it had not persisted is gone. Restarts after `restart_after` if given.
    pub fn crash(&self, idx: NodeIdx, restart_after: Option<Duration>, why: &str) {
        let (name, incarnation) = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if !node.alive || node.role == Role::Nemesis {
                return;
            }
            node.alive = false;
            node.paused_until_ns = None;
            node.incarnation += 1;
            (node.name.clone(), node.incarnation)
        };
        let mut event = Event::new(NEMESIS, Kind::Info, Op::Crash).target(&name);
        if let Some(d) = restart_after {
            event = event.value(d.as_millis() as i64);
        }
        self.record(event.detail(why));
        self.disks().crash(idx);
        Handle::current().kill(self.madsim_node(idx).id());
        if let Some(d) = restart_after {
            let world = self.clone();
            self.spawn_on_nemesis(async move {
                madsim::time::sleep(d).await;
                world.restart_if(idx, Some(incarnation));
            });
        }
    }

    /// Restarts a crashed node (the one crash numbered `incarnation`, or any if None).
    fn restart_if(&self, idx: NodeIdx, incarnation: Option<u64>) {
        let name = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if node.alive || incarnation.is_some_and(|i| i != node.incarnation) {
                return;
            }
            node.alive = true;
            node.name.clone()
        };
        self.record_fault(Op::Restart, Some(&name), String::new());
        Handle::current().restart(self.madsim_node(idx).id());
    }

    /// Cuts the given directed links for `duration`.
    pub fn partition(&self, links: Vec<(NodeIdx, NodeIdx)>, duration: Duration, detail: String) {
        {
            let mut state = self.state();
            for link in &links {
                *state.cuts.entry(*link).or_insert(0) += 1;
                *state.generations.entry(*link).or_insert(0) += 1;
            }
        }
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Partition)
                .value(duration.as_millis() as i64)
                .detail(detail.clone()),
        );
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            madsim::time::sleep(duration).await;
            world.heal(&links, detail);
        });
    }

    fn heal(&self, links: &[(NodeIdx, NodeIdx)], detail: String) {
        let mut healed = false;
        {
            let mut state = self.state();
            for link in links {
                if let Some(n) = state.cuts.get_mut(link) {
                    *n -= 1;
                    if *n == 0 {
                        state.cuts.remove(link);
                        healed = true;
                    }
                }
            }
        }
        if healed {
            self.record_fault(Op::Heal, None, detail);
        }
    }

    /// Steps a node's wall clock.
    pub fn clock_jump(&self, idx: NodeIdx, delta_ms: i64) {
        let name = {
            let mut state = self.state();
            state.clocks[idx].jump(delta_ms * 1_000_000);
            state.nodes[idx].name.clone()
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::ClockJump)
                .target(name)
                .value(delta_ms),
        );
    }

    /// Changes a node's clock drift.
    pub fn clock_drift(&self, idx: NodeIdx, drift_ppm: i64) {
        let now = self.now_ns();
        let name = {
            let mut state = self.state();
            state.clocks[idx].set_drift(now, drift_ppm);
            state.nodes[idx].name.clone()
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::ClockDrift)
                .target(name)
                .value(drift_ppm),
        );
    }

    /// Sets message loss on every link to `probability` for `duration`.
    pub fn loss(&self, probability: f64, duration: Duration) {
        let epoch = {
            let mut state = self.state();
            state.loss_epoch += 1;
            state.loss_override = Some((state.loss_epoch, probability));
            state.loss_epoch
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Loss)
                .value(duration.as_millis() as i64)
                .detail(format!("loss probability {probability}")),
        );
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            madsim::time::sleep(duration).await;
            let ended = {
                let mut state = world.state();
                let current = state.loss_override.is_some_and(|(e, _)| e == epoch);
                if current {
                    state.loss_override = None;
                }
                current
            };
            if ended {
                world.record_fault(Op::Loss, None, "loss period over".into());
            }
        });
    }

    /// Applies one fault now (time-triggered faults; point faults fire from [`NodeCtx::point`]).
    pub fn apply(&self, fault: &Fault) {
        let idx = |name: &str| self.node(name).expect("fault targets are validated");
        match fault {
            Fault::Pause {
                node, duration_ms, ..
            } => self.pause(idx(node), Duration::from_millis(*duration_ms), "scheduled"),
            Fault::Crash {
                node,
                restart_after_ms,
                ..
            } => self.crash(
                idx(node),
                restart_after_ms.map(Duration::from_millis),
                "scheduled",
            ),
            Fault::Partition { duration_ms, .. } => {
                let (links, detail) = self.links_cut_by(fault);
                self.partition(links, Duration::from_millis(*duration_ms), detail);
            }
            Fault::ClockJump { node, delta_ms, .. } => self.clock_jump(idx(node), *delta_ms),
            Fault::ClockDrift {
                node, drift_ppm, ..
            } => self.clock_drift(idx(node), *drift_ppm),
            Fault::Loss {
                duration_ms,
                probability,
                ..
            } => self.loss(*probability, Duration::from_millis(*duration_ms)),
            Fault::FsyncStall {
                node, duration_ms, ..
            } => self.fsync_stall(idx(node), Duration::from_millis(*duration_ms)),
        }
    }

    /// Holds a node's fsyncs for `duration`.
    pub fn fsync_stall(&self, idx: NodeIdx, duration: Duration) {
        let until = self.now_ns() + duration.as_nanos() as u64;
        self.disks().stall(idx, until);
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::FsyncStall)
                .target(self.name(idx))
                .value(duration.as_millis() as i64),
        );
    }

    fn links_cut_by(&self, fault: &Fault) -> (Vec<(NodeIdx, NodeIdx)>, String) {
        let Fault::Partition {
            isolate,
            groups,
            one_way,
            ..
        } = fault
        else {
            unreachable!("only partitions cut links")
        };
        let state = self.state();
        let all: Vec<NodeIdx> = (0..state.nodes.len())
            .filter(|i| state.nodes[*i].role != Role::Nemesis)
            .collect();
        let find = |name: &String| state.nodes.iter().position(|n| &n.name == name).unwrap();
        let groups: Vec<Vec<NodeIdx>> = if isolate.is_empty() {
            groups
                .iter()
                .map(|g| g.iter().map(find).collect())
                .collect()
        } else {
            let inside: Vec<NodeIdx> = isolate.iter().map(find).collect();
            let outside = all
                .iter()
                .copied()
                .filter(|i| !inside.contains(i))
                .collect();
            vec![inside, outside]
        };
        let mut links = Vec::new();
        for (gi, a) in groups.iter().enumerate() {
            for (gj, b) in groups.iter().enumerate() {
                if gi == gj || (*one_way && gj < gi) {
                    continue;
                }
                for &x in a {
                    for &y in b {
                        links.push((x, y));
                    }
                }
            }
        }
        let names = |g: &Vec<NodeIdx>| {
            g.iter()
                .map(|i| state.nodes[*i].name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let arrow = if *one_way { " -/-> " } else { " | " };
        let detail = groups.iter().map(names).collect::<Vec<_>>().join(arrow);
        (links, detail)
    }

    /// Starts the nemesis: applies time-triggered faults before `end_ms`, in time order.
    pub(crate) fn start_nemesis(&self, faults: &[Fault], end_ms: u64) {
        let mut timed: Vec<Fault> = faults
            .iter()
            .filter(|f| f.at_ms().is_some_and(|t| t < end_ms))
            .cloned()
            .collect();
        timed.sort_by_key(|f| f.at_ms());
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            for fault in timed {
                let at_ns = fault.at_ms().unwrap() * 1_000_000;
                let now = world.now_ns();
                if at_ns > now {
                    madsim::time::sleep(Duration::from_nanos(at_ns - now)).await;
                }
                world.apply(&fault);
            }
        });
    }

    /// The liveness phase begins: every fault is undone (paused nodes resume, crashed nodes
    /// restart, partitions and loss end). Clocks keep their offsets and drift.
    pub(crate) fn heal_all(&self) {
        let n = self.state().nodes.len();
        for idx in 0..n {
            self.resume_if(idx, None);
            self.restart_if(idx, None);
        }
        self.disks().end_stalls();
        let had_cuts = {
            let mut state = self.state();
            let had = !state.cuts.is_empty() || state.loss_override.is_some();
            state.cuts.clear();
            state.loss_override = None;
            had
        };
        if had_cuts {
            self.record_fault(Op::Heal, None, "liveness phase: all links restored".into());
        }
    }

    /// Ends the run: kills every node so pending tasks are dropped (madsim issue #242), and
    /// hands over the history.
    pub(crate) fn finish(&self) -> (History, NetStats) {
        let ids: Vec<_> = self
            .state()
            .nodes
            .iter()
            .filter_map(|n| n.handle.as_ref().map(|h| h.id()))
            .collect();
        let handle = Handle::current();
        for id in ids {
            handle.kill(id);
        }
        let mut state = self.state();
        state.nodes.clear();
        (std::mem::take(&mut state.history), state.stats.clone())
    }

    /// Checks a named point: returns the fault to trigger, if this passage is the armed one.
    fn hit_point(&self, idx: NodeIdx, point: &str) -> Option<Fault> {
        let mut state = self.state();
        let armed = state
            .points
            .iter_mut()
            .find(|p| p.node == idx && p.point == point && p.hits < p.occurrence)?;
        armed.hits += 1;
        (armed.hits == armed.occurrence).then(|| armed.fault.clone())
    }
}

fn initial_clock(config: &ClockConfig, name: &str) -> NodeClock {
    if let Some(c) = config.nodes.get(name) {
        return NodeClock::new(c.drift_ppm, c.offset_ms * 1_000_000);
    }
    let mut rng = madsim::rand::thread_rng();
    let drift = if config.drift_ppm_max > 0 {
        rng.gen_range(-config.drift_ppm_max..=config.drift_ppm_max)
    } else {
        0
    };
    let offset_ms = if config.offset_ms_max > 0 {
        rng.gen_range(-config.offset_ms_max..=config.offset_ms_max)
    } else {
        0
    };
    NodeClock::new(drift, offset_ms * 1_000_000)
}

fn resolve_links(state: &mut State, idx: NodeIdx) {
    let name = state.nodes[idx].name.clone();
    let links = state.net.links.clone();
    for link in links {
        let mut add = |a: &str, b: &str| {
            let ai = state.nodes.iter().position(|n| n.name == a);
            let bi = state.nodes.iter().position(|n| n.name == b);
            if let (Some(ai), Some(bi)) = (ai, bi) {
                if ai == idx || bi == idx {
                    state
                        .links
                        .insert((ai, bi), (link.latency_ms_min, link.latency_ms_max));
                }
            }
        };
        if link.from == name || link.to == name {
            add(&link.from, &link.to);
            if link.both_ways {
                add(&link.to, &link.from);
            }
        }
    }
}

fn arm_points(state: &mut State, idx: NodeIdx) {
    let name = state.nodes[idx].name.clone();
    let pending = std::mem::take(&mut state.pending_points);
    for fault in pending {
        match &fault {
            Fault::Pause {
                node,
                point: Some(point),
                occurrence,
                ..
            }
            | Fault::Crash {
                node,
                point: Some(point),
                occurrence,
                ..
            } if *node == name => state.points.push(ArmedPoint {
                node: idx,
                point: point.clone(),
                occurrence: *occurrence,
                hits: 0,
                fault: fault.clone(),
            }),
            _ => state.pending_points.push(fault),
        }
    }
}

/// What a node's code sees of the world: its own name, its own clocks, the history, and
/// named points. Cheap to clone.
#[derive(Clone)]
pub struct NodeCtx {
    world: World,
    idx: NodeIdx,
    name: Arc<str>,
}

impl NodeCtx {
    /// This node's index.
    pub fn idx(&self) -> NodeIdx {
        self.idx
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The world (to find other nodes by name).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// This node's monotonic clock now.
    pub fn mono_now(&self) -> Duration {
        let now = self.world.now_ns();
        Duration::from_nanos(self.world.state().clocks[self.idx].mono_ns(now))
    }

    /// This node's wall clock now, in ms (may be negative if its offset is).
    pub fn wall_ms(&self) -> i64 {
        let now = self.world.now_ns();
        self.world.state().clocks[self.idx]
            .wall_ns(now)
            .div_euclid(1_000_000)
    }

    /// Sleeps until this node's monotonic clock has advanced by `local` (honours drift, and
    /// re-checks if the drift changes meanwhile).
    pub async fn sleep_local(&self, local: Duration) {
        let target = self.mono_now() + local;
        loop {
            let now = self.world.now_ns();
            let clock = self.world.clock(self.idx);
            let mono = clock.mono_ns(now);
            let target_ns = target.as_nanos() as u64;
            if mono >= target_ns {
                return;
            }
            let wait = clock.true_ns_at_mono(now, target_ns) - now;
            madsim::time::sleep(Duration::from_nanos(wait)).await;
        }
    }

    /// Runs `future` with a timeout of `local` on this node's monotonic clock.
    pub async fn timeout_local<F: Future>(&self, local: Duration, future: F) -> Option<F::Output> {
        let true_duration = self.world.clock(self.idx).true_duration(local);
        madsim::time::timeout(true_duration, future).await.ok()
    }

    /// Records an event from this node; returns its index.
    pub fn record(&self, kind: Kind, op: Op) -> u64 {
        self.world.record(Event::new(&*self.name, kind, op))
    }

    /// Records a fully built event (its `node` is set to this node).
    pub fn record_event(&self, mut event: Event) -> u64 {
        event.node = self.name.to_string();
        self.world.record(event)
    }

    /// Records a `note`: free text for people reading the history or a timeline.
    pub fn note(&self, detail: impl Into<String>) -> u64 {
        self.record_event(Event::new(&*self.name, Kind::Info, Op::Note).detail(detail))
    }

    /// Records a protocol [`Op::Event`]: `name` (`failover`, `elected`, `lease_expired`,
    /// ...) concerning node `about` (this node if `None`), with words in `detail`.
    pub fn event(&self, name: &str, about: Option<NodeIdx>, detail: impl Into<String>) -> u64 {
        let target = about.map_or_else(|| self.name.to_string(), |i| self.world.name(i));
        self.record_event(
            Event::new(&*self.name, Kind::Info, Op::Event)
                .name(name)
                .target(target)
                .detail(detail),
        )
    }

    /// This node's disk: it outlives the node's crashes as far as it was synced.
    pub fn disk(&self) -> Disk {
        self.world.disk(self.idx)
    }

    /// A named point in this node's code (e.g. `before_write`). If the fault schedule
    /// armed a pause or crash here for this passage, it happens now: a pause stops the whole
    /// node at this exact step; a crash never returns.
    pub async fn point(&self, name: &str) {
        let Some(fault) = self.world.hit_point(self.idx, name) else {
            return;
        };
        let why = format!("at point {name}");
        match fault {
            Fault::Pause { duration_ms, .. } => {
                self.world
                    .pause(self.idx, Duration::from_millis(duration_ms), &why);
            }
            Fault::Crash {
                restart_after_ms, ..
            } => {
                self.world
                    .crash(self.idx, restart_after_ms.map(Duration::from_millis), &why);
            }
            _ => unreachable!("only pauses and crashes are armed at points"),
        }
        // The pause (or kill) takes effect when this task next yields.
        YieldNow(false).await;
    }

    /// Spawns a task on this node (it dies with the node).
    pub fn spawn<F: Future<Output = ()> + 'static>(&self, future: F) {
        madsim::task::spawn_local(future);
    }
}

/// Yields once to the scheduler.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
