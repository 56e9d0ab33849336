//! The world of one run, and the one `impl World`: every change to a node, its clock, the
//! network, its disk or the history goes through here.
//!
//! The world's state is a set of subsystems, each in its own file and each with the hooks a
//! crash, a restart and the liveness phase's heal need ([`crate::nodes::Subsystem`]):
//! [`crate::nodes`] (names, roles, incarnations, pauses, armed points), [`crate::clock`] (node
//! clocks), [`crate::links`] (latencies, partitions, loss, counters), [`crate::disk`] (page
//! caches, durable files, fsyncs), and the history. A crash asks every one of them. Fault
//! kinds ([`crate::fault`]) act on the world only through the methods here (`pause`,
//! `crash`, `cut`, `clock_jump`, ...); this file knows no fault kind.
//!
//! A node is a madsim node plus what madsim does not model: a role, an incarnation (bumped
//! by every crash), its own clocks, and named points where faults can be triggered. The
//! never-paused `nemesis` node delivers messages and applies faults, so a paused node
//! cannot hold up the rest of the system.

use crate::clock::{Clocks, NodeClock};
use crate::disk::{Disk, DiskConfig, DiskHost, Disks};
use crate::env::{LiveNode, NodeRng};
use crate::fault::pause_periodic::{Cycle, PausePeriodic, PausePlan};
use crate::links::{Arrival, NetConfig, NetState, NetStats, Receiver, Route, Ticket};
use crate::nodes::{ArmedPoint, Nodes, PointAction, Subsystem};
use crate::roles::is_role;
use futures::channel::oneshot;
use locksim_check::history::{Event, History, Kind, Op};
use madsim::runtime::{Handle, NodeHandle};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

pub use crate::clock::{ClockConfig, NodeClockConfig};
pub use crate::nodes::{NodeIdx, Role, NEMESIS};

/// Answers "who has this role now?" when a fault fires (see [`World::answer_role`]).
pub type RoleResolver = Arc<dyn Fn(&World) -> Option<NodeIdx> + Send + Sync>;

/// A directed link between two nodes.
pub type Link = (NodeIdx, NodeIdx);

/// Everything behind the world's one lock: the subsystems (disks have a lock of their own,
/// shared with their handles).
struct State {
    nodes: Nodes,
    handles: Vec<Option<NodeHandle>>,
    clocks: Clocks,
    net: NetState,
    history: History,
    resolvers: BTreeMap<String, RoleResolver>,
    /// Faults of the schedule that fired (a point's passage came, a timed fault's role
    /// was there): the rest were scheduled and never happened.
    faults_fired: u64,
    /// Each periodic pause that started, with the cycles it ran so far.
    pause_plans: Vec<PausePlan>,
    /// Set once the history holds [`HISTORY_EVENTS_MAX`] events; wakes the run's main task,
    /// which then ends the run with an error.
    full: FullSignal,
}

/// The most events one run's history may hold: about 0.5 GB of memory (about 250 bytes
/// an event, measured in docs/scenarios.md), some 3 hours of simulated time for
/// three clients with 10–100 ms critical sections. A run that reaches it stops with an
/// error instead of growing without bound (`duration_ms = 1e9` would need some 14 GB).
pub const HISTORY_EVENTS_MAX: usize = 2_000_000;

/// Whether the history is full, and the task waiting to hear it.
#[derive(Default)]
struct FullSignal {
    full: bool,
    waiter: Option<std::task::Waker>,
}

struct Inner {
    time: madsim::time::TimeHandle,
    state: Mutex<State>,
    disks: DiskHost,
    nemesis: NodeHandle,
}

/// The shared world of one run. Cheap to clone.
#[derive(Clone)]
pub struct World {
    inner: Arc<Inner>,
}

/// What a world is made of, from the scenario.
pub(crate) struct WorldConfig {
    pub(crate) net: NetConfig,
    pub(crate) clocks: ClockConfig,
    pub(crate) disk: DiskConfig,
    /// Faults armed at named points, resolved once from the schedule.
    pub(crate) points: Vec<ArmedPoint>,
}
impl World {
    /// A new world inside the current madsim runtime (call within `block_on`).
    pub(crate) fn new(config: WorldConfig) -> Self {
        let nemesis = Handle::current().create_node().name(NEMESIS).build();
        let mut clocks = Clocks::new(config.clocks);
        clocks.add(0, NEMESIS, true);
        let state = State {
            nodes: Nodes::new(config.points),
            handles: vec![Some(nemesis.clone())],
            clocks,
            net: NetState::new(config.net),
            history: Vec::with_capacity(1024),
            resolvers: BTreeMap::new(),
            faults_fired: 0,
            pause_plans: vec![],
            full: FullSignal::default(),
        };
        let time = madsim::time::TimeHandle::current();
        let disks = DiskHost {
            disks: Arc::new(Mutex::new(Disks::new(config.disk))),
            time: time.clone(),
            nemesis: nemesis.clone(),
        };
        World {
            inner: Arc::new(Inner {
                time,
                state: Mutex::new(state),
                disks,
                nemesis,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().expect("world lock poisoned")
    }

    /// A node's disk (see [`crate::disk`]): what its code writes there outlives its crashes
    /// as far as it was synced.
    pub fn disk(&self, idx: NodeIdx) -> Disk {
        Disk::new(self.inner.disks.clone(), idx)
    }

    /// True time since the start of the run, in ns. For the history and the nemesis only:
    /// protocol code reads its node's clocks instead.
    pub fn now_ns(&self) -> u64 {
        self.inner.time.elapsed().as_nanos() as u64
    }

    /// True time as madsim's instant, for timers on the nemesis node.
    pub(crate) fn now_instant(&self) -> madsim::time::Instant {
        self.inner.time.now_instant()
    }

    /// Appends an event to the history, stamped with true time; returns its index.
    pub fn record(&self, mut event: Event) -> u64 {
        let now = self.now_ns();
        let mut state = self.state();
        event.index = state.history.len() as u64;
        event.time_ns = now;
        tracing::debug!(target: "locksim::history", "{}", event.describe());
        state.history.push(event);
        if state.history.len() == HISTORY_EVENTS_MAX {
            state.full.full = true;
            if let Some(waiter) = state.full.waiter.take() {
                waiter.wake();
            }
        }
        state.history.len() as u64 - 1
    }

    /// Sleeps `duration` of true time, or less if the history fills up first: true then.
    /// (Polling the signal beside the timer wakes the task only when the history fills, so
    /// a run that never fills it draws and schedules exactly as a plain sleep would.)
    pub(crate) async fn sleep_unless_full(&self, duration: Duration) -> bool {
        let mut sleep = std::pin::pin!(madsim::time::sleep(duration));
        std::future::poll_fn(|cx| {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            let mut state = self.state();
            if state.full.full {
                return Poll::Ready(true);
            }
            state.full.waiter = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Events in the history so far.
    pub(crate) fn history_len(&self) -> usize {
        self.state().history.len()
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
            let idx = state.nodes.len();
            state.clocks.add(idx, name, false);
            assert_eq!(state.nodes.add(name, role), idx);
            state.handles.push(None);
            let names: Vec<&str> = state.nodes.iter().map(|n| n.name.as_str()).collect();
            let links = state.net.links_of(idx, &names);
            state.net.add_links(links);
            idx
        };
        let ctx = NodeCtx(Backing::Sim(SimNode {
            world: self.clone(),
            idx,
            name: name.into(),
        }));
        let handle = Handle::current()
            .create_node()
            .name(name)
            .init(move || init(ctx.clone()))
            .build();
        self.state().handles[idx] = Some(handle);
        idx
    }

    /// The node with this name.
    pub fn node(&self, name: &str) -> Option<NodeIdx> {
        self.state().nodes.find(name)
    }

    /// The name of a node.
    pub fn name(&self, idx: NodeIdx) -> String {
        self.state().nodes.get(idx).name.clone()
    }

    /// Names of all nodes with the given role, in creation order.
    pub fn names(&self, role: Role) -> Vec<String> {
        let state = self.state();
        let nodes = state.nodes.iter().filter(|n| n.role == role);
        nodes.map(|n| n.name.clone()).collect()
    }

    /// Every node's name by index, the nemesis first.
    pub fn node_names(&self) -> Vec<String> {
        let state = self.state();
        state.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Every node but the nemesis, in creation order.
    pub fn node_indexes(&self) -> Vec<NodeIdx> {
        let state = self.state();
        let all = 0..state.nodes.len();
        all.filter(|i| state.nodes.get(*i).role != Role::Nemesis)
            .collect()
    }

    /// The node's incarnation: 0 at the start, bumped by every crash.
    pub fn incarnation(&self, idx: NodeIdx) -> u64 {
        self.state().nodes.get(idx).incarnation
    }

    /// Whether the node is up (not crashed).
    pub fn is_alive(&self, idx: NodeIdx) -> bool {
        self.state().nodes.get(idx).alive
    }

    /// Whether `from`'s connection to `to` is refused or reset: `to`'s process is gone and
    /// its host, not cut off from `from`, answers with a reset, as a kernel does for a port
    /// nobody listens on. A request's call is refused so (`World::refused_after`); a model
    /// that keeps a connection open, as Sentinel does, asks this to see what a real one
    /// would (the network itself drops what is sent to a crashed node).
    pub fn refuses(&self, from: NodeIdx, to: NodeIdx) -> bool {
        let state = self.state();
        !state.nodes.get(to).alive && !state.net.is_cut(to, from)
    }

    /// If `from`'s connection to `to` is refused ([`World::refuses`]), how long the refusal
    /// takes to come back: a round trip.
    pub(crate) fn refused_after(&self, from: NodeIdx, to: NodeIdx) -> Option<Duration> {
        if !self.refuses(from, to) {
            return None;
        }
        let net = &self.state().net;
        Some(net.smallest_latency((from, to)) + net.smallest_latency((to, from)))
    }

    /// Registers a call of `from` waiting on `to`: the receiver hears if `to`'s process dies
    /// meanwhile (and `from` is not cut off from it). Give the number back to
    /// [`World::unwatch_reset`] when the call is over.
    pub(crate) fn watch_reset(&self, from: NodeIdx, to: NodeIdx) -> (u64, oneshot::Receiver<()>) {
        self.state().net.watch_reset(from, to)
    }

    /// How long after `server`'s process died `caller` hears its connection closed: once
    /// whatever the server sent before could have arrived, the link's largest latency.
    pub(crate) fn reset_wait(&self, server: NodeIdx, caller: NodeIdx) -> Duration {
        self.state().net.largest_latency((server, caller))
    }

    /// `server`'s process, alive, closes every connection its callers have open to it (a
    /// ZooKeeper server that loses its leader closes its clients'): each caller not cut off
    /// from it hears the close as at a death ([`crate::rpc::Caller::watch_close`]), once what
    /// the server sent before could have arrived; a call waiting on it ends unanswered.
    pub fn close_connections(&self, server: NodeIdx) {
        self.state().net.close_connections(server);
    }

    /// The call registered as `key` on `to` is over.
    pub(crate) fn unwatch_reset(&self, to: NodeIdx, key: u64) {
        self.state().net.unwatch_reset(to, key);
    }

    /// A copy of a node's clock now.
    pub fn clock(&self, idx: NodeIdx) -> NodeClock {
        self.state().clocks.get(idx).clone()
    }

    /// Runs a task on the never-paused nemesis node.
    pub fn spawn_on_nemesis<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.nemesis.spawn(future);
    }

    /// Records a fault event of the nemesis: `op` on `target`, with words in `detail`.
    pub(crate) fn record_fault(&self, op: Op, target: Option<&str>, detail: String) {
        let mut event = Event::nemesis(op).detail(detail);
        if let Some(t) = target {
            event = event.target(t);
        }
        self.record(event);
    }

    fn madsim_node(&self, idx: NodeIdx) -> NodeHandle {
        self.state().handles[idx].clone().expect("node is built")
    }

    /// Ends the run: kills every node so pending tasks are dropped (madsim issue #242), and
    /// hands over the history.
    pub(crate) fn finish(&self) -> (History, NetStats) {
        let handles: Vec<_> = self.state().handles.iter().flatten().cloned().collect();
        let runtime = Handle::current();
        for h in handles {
            runtime.kill(h.id());
        }
        let mut state = self.state();
        state.nodes.clear();
        state.handles.clear();
        (std::mem::take(&mut state.history), state.net.stats.clone())
    }

    // ---- the network: one decision per message ----

    fn receiver(state: &State, to: NodeIdx) -> Receiver {
        let node = state.nodes.get(to);
        Receiver {
            alive: node.alive,
            incarnation: node.incarnation,
        }
    }

    /// Decides one send (see [`NetState::route`]).
    pub(crate) fn route(&self, from: NodeIdx, to: NodeIdx) -> Option<Route> {
        let mut state = self.state();
        let receiver = Self::receiver(&state, to);
        let role = |idx| state.nodes.get(idx).role;
        if role(from) == Role::Resource || role(to) == Role::Resource {
            state.net.stats.resource += 1;
        }
        let now_ns = self.now_ns();
        state.net.route(from, to, receiver, now_ns)
    }

    /// What becomes of a message at the end of its link now (see [`NetState::arrive`]).
    pub(crate) fn arrive(&self, ticket: &Ticket) -> Arrival {
        let mut state = self.state();
        let receiver = Self::receiver(&state, ticket.to);
        state.net.arrive(ticket, receiver)
    }

    /// Fsyncs started so far on the disks of the nodes of `role` (e.g. the lock servers'):
    /// the durability a protocol pays for.
    pub fn fsyncs_started(&self, role: Role) -> u64 {
        let nodes: Vec<NodeIdx> = {
            let state = self.state();
            (0..state.nodes.len())
                .filter(|&i| state.nodes.get(i).role == role)
                .collect()
        };
        let disks = self.inner.disks.lock();
        nodes.iter().map(|&i| disks.fsyncs_started(i)).sum()
    }

    /// Network counters so far.
    pub fn net_stats(&self) -> NetStats {
        self.state().net.stats.clone()
    }

    // ---- what faults act through: each a subsystem's hook, recorded in the history ----

    /// Runs `undo` on the nemesis after `duration` (true time): how a fault ends.
    pub(crate) fn after(&self, duration: Duration, undo: impl FnOnce(&World) + Send + 'static) {
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            madsim::time::sleep(duration).await;
            undo(&world);
        });
    }

    /// Pauses a node (stop-the-world) for `duration`; `why` goes into the history.
    pub fn pause(&self, idx: NodeIdx, duration: Duration, why: &str) {
        let until = self.now_ns() + duration.as_nanos() as u64;
        let (name, paused) = {
            let mut state = self.state();
            (
                state.nodes.get(idx).name.clone(),
                state.nodes.pause(idx, until),
            )
        };
        let Some((epoch, fresh)) = paused else {
            return; // down, the nemesis, or already paused for longer
        };
        self.record(
            Event::nemesis(Op::Pause)
                .target(&name)
                .value(duration.as_millis() as i64)
                .detail(why),
        );
        if fresh {
            Handle::current().pause(self.madsim_node(idx).id());
        }
        self.after(duration, move |world| world.resume(idx, Some(epoch)));
    }

    /// Resumes a paused node (the pause numbered `epoch`, or any if None).
    fn resume(&self, idx: NodeIdx, epoch: Option<u64>) {
        let (name, resumed) = {
            let mut state = self.state();
            (
                state.nodes.get(idx).name.clone(),
                state.nodes.resume(idx, epoch),
            )
        };
        if resumed {
            Handle::current().resume(self.madsim_node(idx).id());
            self.record_fault(Op::Resume, Some(&name), String::new());
        }
    }

    /// Crashes a node: its tasks die, its inboxes and in-flight messages to it are lost, and
    /// whatever it had not persisted is gone (every subsystem's crash hook runs). Restarts
    /// after `restart_after` if given.
    pub fn crash(&self, idx: NodeIdx, restart_after: Option<Duration>, why: &str) {
        let (name, incarnation) = {
            let mut state = self.state();
            let Some(incarnation) = state.nodes.crash(idx) else {
                return;
            };
            let state = &mut *state;
            for hook in [&mut state.clocks as &mut dyn Subsystem, &mut state.net] {
                hook.crash(idx);
            }
            (state.nodes.get(idx).name.clone(), incarnation)
        };
        let mut event = Event::nemesis(Op::Crash).target(&name);
        if let Some(d) = restart_after {
            event = event.value(d.as_millis() as i64);
        }
        self.record(event.detail(why));
        self.inner.disks.lock().crash(idx);
        Handle::current().kill(self.madsim_node(idx).id());
        if let Some(d) = restart_after {
            self.after(d, move |world| world.restart(idx, Some(incarnation)));
        }
    }

    /// Restarts a crashed node (the crash numbered `incarnation`, or any if None).
    fn restart(&self, idx: NodeIdx, incarnation: Option<u64>) {
        let name = {
            let mut state = self.state();
            if !state.nodes.restart(idx, incarnation) {
                return;
            }
            let state = &mut *state;
            for hook in [&mut state.clocks as &mut dyn Subsystem, &mut state.net] {
                hook.restart(idx);
            }
            state.nodes.get(idx).name.clone()
        };
        self.inner.disks.lock().restart(idx);
        self.record_fault(Op::Restart, Some(&name), String::new());
        Handle::current().restart(self.madsim_node(idx).id());
    }

    /// Cuts these directed links (partitions nest: a link heals when every cut is undone).
    pub fn cut(&self, links: &[Link]) {
        self.state().net.cut(links);
    }

    /// Undoes one cut of these links; true if some link is whole again. What a `delay`
    /// partition held on a link that is whole and free again is sent on.
    pub fn restore(&self, links: &[Link]) -> bool {
        let now_ns = self.now_ns();
        let mut state = self.state();
        let healed = state.net.restore(links);
        state.net.release(now_ns);
        healed
    }

    /// Holds the messages `from` sends to the nodes `to` (every other node if empty) for
    /// `duration` (a delay spike): they arrive, in send order, when it ends, unless their
    /// connection times out first (`[network] connection_timeout_ms`). `why` goes into the
    /// history.
    pub fn hold(&self, from: NodeIdx, to: &[NodeIdx], duration: Duration, why: &str) {
        let to: Vec<NodeIdx> = if to.is_empty() {
            let all = self.node_indexes().into_iter();
            all.filter(|i| *i != from).collect()
        } else {
            to.to_vec()
        };
        assert!(!to.contains(&from), "a node holds no link to itself");
        let links: Vec<Link> = to.iter().map(|t| (from, *t)).collect();
        let name = self.name(from);
        let names: Vec<String> = to.iter().map(|i| self.name(*i)).collect();
        let detail = format!("{name} -> {}", names.join(","));
        self.state().net.hold(&links);
        self.record(
            Event::nemesis(Op::Hold)
                .target(&name)
                .value(duration.as_millis() as i64)
                .detail(format!("{detail}; {why}")),
        );
        self.after(duration, move |world| {
            let now_ns = world.now_ns();
            let freed = {
                let mut state = world.state();
                let freed = state.net.unhold(&links);
                state.net.release(now_ns);
                freed
            };
            if freed {
                world.record_fault(Op::Flush, Some(&name), detail);
            }
        });
    }

    /// Starts a period of loss `probability` on every link; returns its number.
    pub fn start_loss(&self, probability: f64) -> u64 {
        assert!((0.0..=1.0).contains(&probability));
        self.state().net.set_loss(probability)
    }

    /// Ends loss period `epoch` unless a later one replaced it; true if it ended.
    pub fn end_loss(&self, epoch: u64) -> bool {
        self.state().net.end_loss(epoch)
    }

    /// Steps a node's wall clock by `delta_ms`.
    pub fn clock_jump(&self, idx: NodeIdx, delta_ms: i64) {
        self.state().clocks.get_mut(idx).jump(delta_ms * 1_000_000);
    }

    /// Changes a node's clock drift from now on.
    pub fn clock_drift(&self, idx: NodeIdx, drift_ppm: i64) {
        let now = self.now_ns();
        self.state().clocks.get_mut(idx).set_drift(now, drift_ppm);
    }

    /// Holds a node's fsyncs for `duration`.
    pub fn fsync_stall(&self, idx: NodeIdx, duration: Duration) {
        let until = self.now_ns() + duration.as_nanos() as u64;
        self.inner.disks.lock().stall(idx, until);
    }

    /// Stalls a node's event loop for `duration` (`fault::loop_stall`). A node whose code
    /// serves outside its loop ([`NodeCtx::serve_outside_loop`]: an etcd member's gRPC
    /// handlers and lessor) learns of it through [`NodeCtx::loop_stalled_for`]; any other
    /// has nothing that runs while its loop is stuck and is paused. True for a stall, false
    /// for a pause.
    pub fn loop_stall(&self, idx: NodeIdx, duration: Duration, why: &str) -> bool {
        let until = self.now_ns() + duration.as_nanos() as u64;
        let stalled = self.state().nodes.loop_stall(idx, until);
        if !stalled {
            self.pause(idx, duration, why);
        }
        stalled
    }

    /// The liveness phase begins: every subsystem's heal hook runs (paused nodes resume,
    /// crashed nodes restart, links are whole, loss and stalls end). Clocks keep their
    /// offsets and drift.
    pub(crate) fn heal_all(&self) {
        let n = self.state().nodes.len();
        for idx in 0..n {
            self.resume(idx, None);
            self.restart(idx, None);
        }
        self.inner.disks.lock().heal();
        self.state().nodes.end_loop_stalls();
        let now_ns = self.now_ns();
        let healed = {
            let mut state = self.state();
            let state = &mut *state;
            let hooks = [&mut state.clocks as &mut dyn Subsystem, &mut state.net];
            // Every hook runs: no short cut once one reports a fault.
            let healed = hooks.into_iter().fold(false, |any, hook| hook.heal() | any);
            state.net.release(now_ns);
            healed
        };
        if healed {
            self.record_fault(Op::Heal, None, "liveness phase: all links restored".into());
        }
    }

    // ---- roles and points ----

    /// Lets the deployment (or the workload) say who has `role` (e.g. `@primary`) whenever a
    /// fault names it. `resolve` runs on the nemesis at fire time; `None` = nobody.
    pub fn answer_role(&self, role: &str, resolve: RoleResolver) {
        assert!(is_role(role), "a role starts with `@`: {role}");
        self.state().resolvers.insert(role.to_owned(), resolve);
    }

    /// Who has `role` now, if anyone (and if the role is answered at all).
    pub fn who(&self, role: &str) -> Option<NodeIdx> {
        assert!(is_role(role), "a role starts with `@`: {role}");
        let resolver = self.state().resolvers.get(role).cloned();
        // Called without the world's lock: a resolver reads the world (disks, nodes).
        resolver.and_then(|r| r(self))
    }

    /// A passage through a named point: what to do, if this passage is the armed one (its
    /// fault fires now).
    fn pass_point(&self, idx: NodeIdx, point: &str) -> Option<PointAction> {
        let mut state = self.state();
        let action = state.nodes.pass(idx, point);
        state.faults_fired += u64::from(action.is_some());
        action
    }

    /// Counts a timed fault of the schedule as fired.
    pub(crate) fn fault_fired(&self) {
        self.state().faults_fired += 1;
    }

    /// How many faults of the schedule fired so far.
    pub fn faults_fired(&self) -> u64 {
        self.state().faults_fired
    }

    /// A periodic pause starts: its plan, to which [`World::record_cycle`] adds each cycle as
    /// it starts; the plan's number.
    pub(crate) fn start_plan(&self, fault: PausePeriodic) -> usize {
        let plans = &mut self.state().pause_plans;
        plans.push(PausePlan {
            fault,
            cycles: vec![],
        });
        plans.len() - 1
    }

    /// A cycle of plan `plan` started.
    pub(crate) fn record_cycle(&self, plan: usize, cycle: Cycle) {
        self.state().pause_plans[plan].cycles.push(cycle);
    }

    /// The periodic pauses that started so far, in the order they started.
    pub fn pause_plans(&self) -> Vec<PausePlan> {
        self.state().pause_plans.clone()
    }
}

/// What a node's code sees of the world: its own name, its own clocks, the history, and
/// named points. Cheap to clone.
///
/// It is one half of the seam a client library is written against ([`crate::env`]): in the
/// simulator it reads the simulated world; in live mode the same methods are backed by a
/// [`LiveNode`] (real time, the client process's history), so one library runs in both.
#[derive(Clone)]
pub struct NodeCtx(Backing);

#[derive(Clone)]
enum Backing {
    Sim(SimNode),
    Live(Arc<dyn LiveNode>),
}

#[derive(Clone)]
struct SimNode {
    world: World,
    idx: NodeIdx,
    name: Arc<str>,
}

impl NodeCtx {
    /// A live node: the environment a live client process gives the same client code.
    pub fn live(node: Arc<dyn LiveNode>) -> NodeCtx {
        NodeCtx(Backing::Live(node))
    }

    /// The simulated node, for what only the simulator has (the world, a disk).
    fn sim(&self, what: &str) -> &SimNode {
        match &self.0 {
            Backing::Sim(node) => node,
            Backing::Live(node) => panic!(
                "{what} is the simulator's: live node {} has none (server code runs only in \
                 the simulator)",
                node.name()
            ),
        }
    }

    /// This node's index.
    pub fn idx(&self) -> NodeIdx {
        match &self.0 {
            Backing::Sim(node) => node.idx,
            Backing::Live(node) => node.idx(),
        }
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        match &self.0 {
            Backing::Sim(node) => &node.name,
            Backing::Live(node) => node.name(),
        }
    }

    /// The world (to find other nodes by name). Simulator only.
    pub fn world(&self) -> &World {
        &self.sim("the world").world
    }

    /// The name of node `idx`.
    pub fn node_name(&self, idx: NodeIdx) -> String {
        match &self.0 {
            Backing::Sim(node) => node.world.name(idx),
            Backing::Live(node) => node.node_name(idx),
        }
    }

    /// This node's incarnation: 0 at the start, bumped by every crash.
    pub fn incarnation(&self) -> u64 {
        match &self.0 {
            Backing::Sim(node) => node.world.incarnation(node.idx),
            Backing::Live(node) => node.incarnation(),
        }
    }

    /// This node's random stream (the run's seeded stream in the simulator).
    pub fn rng(&self) -> NodeRng {
        match &self.0 {
            Backing::Sim(_) => NodeRng::Sim(madsim::rand::thread_rng()),
            Backing::Live(node) => NodeRng::Live(node.clone()),
        }
    }

    /// This node's monotonic clock now.
    pub fn mono_now(&self) -> Duration {
        match &self.0 {
            Backing::Sim(node) => node.mono_now(),
            Backing::Live(node) => node.mono_now(),
        }
    }

    /// This node's wall clock now, in ms (may be negative if its offset is).
    pub fn wall_ms(&self) -> i64 {
        match &self.0 {
            Backing::Sim(node) => node.wall_ms(),
            Backing::Live(node) => node.wall_ms(),
        }
    }

    /// Sleeps until this node's monotonic clock has advanced by `local` (honours drift, and
    /// re-checks if the drift changes meanwhile).
    pub async fn sleep_local(&self, local: Duration) {
        match &self.0 {
            Backing::Sim(node) => node.sleep_local(local).await,
            Backing::Live(node) => node.sleep(local).await,
        }
    }

    /// Runs `future` with a timeout of `local` on this node's monotonic clock.
    pub async fn timeout_local<F: Future>(&self, local: Duration, future: F) -> Option<F::Output> {
        match &self.0 {
            Backing::Sim(node) => {
                let true_duration = node.world.clock(node.idx).true_duration(local);
                madsim::time::timeout(true_duration, future).await.ok()
            }
            Backing::Live(node) => {
                let future = std::pin::pin!(future);
                match futures::future::select(future, node.sleep(local)).await {
                    futures::future::Either::Left((output, _)) => Some(output),
                    futures::future::Either::Right(((), _)) => None,
                }
            }
        }
    }

    /// Records an event from this node; returns its index.
    pub fn record(&self, kind: Kind, op: Op) -> u64 {
        // Built with this node's name: no comparison of names (a hot path of every run).
        let event = Event::new(self.name(), kind, op);
        match &self.0 {
            Backing::Sim(node) => node.world.record(event),
            Backing::Live(node) => node.record(event),
        }
    }

    /// Records a fully built event (its `node` is set to this node).
    pub fn record_event(&self, mut event: Event) -> u64 {
        // Events are mostly built with this node's name already: no second copy of it then.
        if event.node != self.name() {
            event.node = self.name().to_string();
        }
        match &self.0 {
            Backing::Sim(node) => node.world.record(event),
            Backing::Live(node) => node.record(event),
        }
    }

    /// Records a `note`: free text for people reading the history or a timeline.
    pub fn note(&self, detail: impl Into<String>) -> u64 {
        self.record_event(Event::new(self.name(), Kind::Info, Op::Note).detail(detail))
    }

    /// Records a protocol [`Op::Event`]: `name` (`failover`, `elected`, `lease_expired`,
    /// ...) concerning node `about` (this node if `None`), with words in `detail`.
    pub fn event(&self, name: &str, about: Option<NodeIdx>, detail: impl Into<String>) -> u64 {
        let target = about.map_or_else(|| self.name().to_string(), |i| self.node_name(i));
        self.record_event(
            Event::new(self.name(), Kind::Info, Op::Event)
                .name(name)
                .target(target)
                .detail(detail),
        )
    }

    /// This node's code serves parts outside its event loop (an etcd member's gRPC handlers
    /// and lessor beside its Raft loop): a `loop_stall` then stops only the loop, which the
    /// code sees through [`NodeCtx::loop_stalled_for`], instead of pausing the node. Said
    /// by each incarnation. Simulator only.
    pub fn serve_outside_loop(&self) {
        let node = self.sim("a loop stall");
        node.world.state().nodes.serve_outside_loop(node.idx);
    }

    /// How much longer (true time) this node's event loop is stalled, if it is. Simulator
    /// only.
    pub fn loop_stalled_for(&self) -> Option<Duration> {
        let node = self.sim("a loop stall");
        let now = node.world.now_ns();
        let until = node.world.state().nodes.loop_stalled_until_ns(node.idx);
        (until > now).then(|| Duration::from_nanos(until - now))
    }

    /// This node's disk: it outlives the node's crashes as far as it was synced. Simulator
    /// only.
    pub fn disk(&self) -> Disk {
        let node = self.sim("a simulated disk");
        node.world.disk(node.idx)
    }

    /// A named point in this node's code (e.g. `before_write`). If the fault schedule
    /// armed a pause, crash or delay spike here for this passage, it happens now: a pause
    /// stops the whole node at this exact step; a crash never returns; a delay spike holds
    /// what the node sends from here on.
    pub async fn point(&self, name: &str) {
        match &self.0 {
            Backing::Sim(node) => node.point(name).await,
            Backing::Live(node) => node.point(name).await,
        }
    }

    /// Spawns a task on this node (it dies with the node).
    pub fn spawn<F: Future<Output = ()> + 'static>(&self, future: F) {
        match &self.0 {
            Backing::Sim(_) => {
                madsim::task::spawn_local(future);
            }
            Backing::Live(node) => node.spawn(Box::pin(future)),
        }
    }
}

impl SimNode {
    fn mono_now(&self) -> Duration {
        let now = self.world.now_ns();
        Duration::from_nanos(self.world.state().clocks.get(self.idx).mono_ns(now))
    }

    fn wall_ms(&self) -> i64 {
        let now = self.world.now_ns();
        self.world
            .state()
            .clocks
            .get(self.idx)
            .wall_ns(now)
            .div_euclid(1_000_000)
    }

    async fn sleep_local(&self, local: Duration) {
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

    async fn point(&self, name: &str) {
        let Some(action) = self.world.pass_point(self.idx, name) else {
            return;
        };
        let why = format!("at point {name}");
        match action {
            PointAction::Pause(duration) => self.world.pause(self.idx, duration, &why),
            PointAction::Crash(restart_after) => self.world.crash(self.idx, restart_after, &why),
            PointAction::Hold(duration, to) => {
                let find = |n: &String| self.world.node(n).expect("fault targets are validated");
                let to: Vec<NodeIdx> = to.iter().map(find).collect();
                self.world.hold(self.idx, &to, duration, &why);
            }
        }
        // The pause (or kill) takes effect when this task next yields.
        YieldNow(false).await;
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
