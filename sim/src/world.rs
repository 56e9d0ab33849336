//! The world of one run: its nodes, their clocks and the history. The network's state lives
//! in [`crate::net`], the faults' (applying, scheduling, points, roles) in [`crate::nemesis`],
//! the disks in [`crate::disk`]; each is a part of the world with its own crash hook.
//!
//! A node is a madsim node plus what madsim does not model: a role, an incarnation (bumped
//! by every crash), its own clocks, and named points where faults can be triggered. The
//! never-paused `nemesis` node delivers messages and applies faults, so a paused node
//! cannot hold up the rest of the system.

use crate::clock::NodeClock;
use crate::disk::{Disk, DiskConfig, Disks};
use crate::history::{Event, History, Kind, Op};
use crate::nemesis::{Fault, FaultState};
use crate::net::{NetConfig, NetState, NetStats};
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

pub(crate) struct NodeState {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) handle: Option<NodeHandle>,
    /// Bumped by every crash: messages sent to an earlier incarnation are not delivered.
    pub(crate) incarnation: u64,
    pub(crate) alive: bool,
    pub(crate) paused_until_ns: Option<u64>,
    pub(crate) pause_epoch: u64,
}

/// Everything behind the world's one lock. Parts with their own module own their data:
/// `net` (routes, partitions, loss) and `faults` (armed points, role resolvers).
pub(crate) struct State {
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) clocks: Vec<NodeClock>,
    clock_config: ClockConfig,
    history: History,
    pub(crate) net: NetState,
    pub(crate) faults: FaultState,
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
            net: NetState::new(net),
            faults: FaultState::new(faults),
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

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
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
            let names: Vec<&str> = state.nodes.iter().map(|n| n.name.as_str()).collect();
            let links = state.net.links_of(idx, &names);
            state.net.add_links(links);
            state.faults.arm_points(idx, name);
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

    /// The node's incarnation: 0 at the start, bumped by every crash.
    pub fn incarnation(&self, idx: NodeIdx) -> u64 {
        self.state().nodes[idx].incarnation
    }

    /// Whether the node is up (not crashed).
    pub fn is_alive(&self, idx: NodeIdx) -> bool {
        self.state().nodes[idx].alive
    }

    /// A copy of a node's clock now.
    pub fn clock(&self, idx: NodeIdx) -> NodeClock {
        self.state().clocks[idx].clone()
    }

    /// Runs a task on the never-paused nemesis node.
    pub fn spawn_on_nemesis<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.nemesis.spawn(future);
    }

    pub(crate) fn record_fault(&self, op: Op, target: Option<&str>, detail: String) {
        let mut event = Event::new(NEMESIS, Kind::Info, op).detail(detail);
        if let Some(t) = target {
            event = event.target(t);
        }
        self.record(event);
    }

    pub(crate) fn madsim_node(&self, idx: NodeIdx) -> NodeHandle {
        self.state().nodes[idx]
            .handle
            .clone()
            .expect("node is built")
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
        (std::mem::take(&mut state.history), state.net.stats.clone())
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

    /// This node's incarnation: 0 at the start, bumped by every crash.
    pub fn incarnation(&self) -> u64 {
        self.world.incarnation(self.idx)
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
