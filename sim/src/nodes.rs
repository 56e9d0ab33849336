//! The nodes of a run: names, roles, incarnations, pauses and the faults armed at their named
//! points. Pure bookkeeping: the world turns these decisions into madsim calls (pause, kill,
//! restart) and history events.
//!
//! Every subsystem of the world (nodes, clocks, network, disks) implements [`Subsystem`]: a
//! crash, a restart and the liveness phase's heal ask each one in turn, as turmoil's
//! `crash()` asks every part of its simulation.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A node's position in the world (0, 1, ... in order of creation).
pub type NodeIdx = usize;

/// The name under which the nemesis records faults.
pub use locksim_check::history::NEMESIS;

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

/// The hooks a subsystem of the world needs when a node crashes or restarts, and when the
/// liveness phase heals everything. Defaults do nothing: a subsystem says why it has nothing
/// to do where that is not obvious.
pub(crate) trait Subsystem {
    /// Node `idx` just crashed (power loss: what it had not made durable is gone).
    fn crash(&mut self, _idx: NodeIdx) {}
    /// Node `idx` just restarted.
    fn restart(&mut self, _idx: NodeIdx) {}
    /// The liveness phase: undo every fault this subsystem holds; true if one was in force.
    fn heal(&mut self) -> bool {
        false
    }
}

/// What a fault armed at a named point does when its passage comes: resolved once, when the
/// point is armed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PointAction {
    /// Pause the node for this long (true time).
    Pause(Duration),
    /// Crash the node; restart after this long (true time), or never.
    Crash(Option<Duration>),
    /// Hold the messages the node sends to these nodes (every other node if empty) for this
    /// long (true time): a delay spike.
    Hold(Duration, Vec<String>),
}

/// A fault waiting at a named point of a node's code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedPoint {
    /// The node's name.
    pub node: String,
    /// The point, e.g. `before_write`.
    pub point: String,
    /// Which passage fires it, from 1.
    pub occurrence: u32,
    /// What it does.
    pub action: PointAction,
}

/// One node's state.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) role: Role,
    /// Bumped by every crash: messages sent to an earlier incarnation are not delivered.
    pub(crate) incarnation: u64,
    pub(crate) alive: bool,
    paused_until_ns: Option<u64>,
    pause_epoch: u64,
    /// The node's code runs parts outside its event loop ([`crate::NodeCtx::serve_outside_loop`]),
    /// so a `loop_stall` stops only the loop.
    serves_outside_loop: bool,
    /// Until when (true ns) its event loop is stalled; 0 if it is not.
    loop_stalled_until_ns: u64,
    /// Armed points of this node, with how often each was passed.
    points: Vec<(ArmedPoint, u32)>,
}

/// The node table, the first subsystem of the world.
pub(crate) struct Nodes {
    nodes: Vec<Node>,
    /// Armed points of nodes not added yet.
    pending_points: Vec<ArmedPoint>,
}

impl Nodes {
    /// A table holding only the nemesis, with these points waiting for their nodes.
    pub(crate) fn new(points: Vec<ArmedPoint>) -> Self {
        let mut nodes = Nodes {
            nodes: vec![],
            pending_points: points,
        };
        nodes.add(NEMESIS, Role::Nemesis);
        nodes
    }

    /// Adds a node and arms its points; returns its index.
    pub(crate) fn add(&mut self, name: &str, role: Role) -> NodeIdx {
        assert!(
            self.nodes.iter().all(|n| n.name != name),
            "node name `{name}` used twice"
        );
        let (points, pending) = std::mem::take(&mut self.pending_points)
            .into_iter()
            .partition(|p| p.node == name);
        self.pending_points = pending;
        self.nodes.push(Node {
            name: name.into(),
            role,
            incarnation: 0,
            alive: true,
            paused_until_ns: None,
            pause_epoch: 0,
            serves_outside_loop: false,
            loop_stalled_until_ns: 0,
            points: points.into_iter().map(|p| (p, 0)).collect(),
        });
        self.nodes.len() - 1
    }

    pub(crate) fn get(&self, idx: NodeIdx) -> &Node {
        &self.nodes[idx]
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    pub(crate) fn find(&self, name: &str) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Starts or lengthens a pause until `until_ns`: `Some((epoch, fresh))` if it took
    /// effect (`fresh`: the node was running), `None` if the node is down, the nemesis, or
    /// already paused for longer.
    pub(crate) fn pause(&mut self, idx: NodeIdx, until_ns: u64) -> Option<(u64, bool)> {
        let node = &mut self.nodes[idx];
        if !node.alive || node.role == Role::Nemesis {
            return None;
        }
        if node.paused_until_ns.is_some_and(|u| u >= until_ns) {
            return None;
        }
        let fresh = node.paused_until_ns.is_none();
        node.paused_until_ns = Some(until_ns);
        node.pause_epoch += 1;
        Some((node.pause_epoch, fresh))
    }

    /// Ends the pause numbered `epoch` (any pause if None); true if the node was paused by it.
    pub(crate) fn resume(&mut self, idx: NodeIdx, epoch: Option<u64>) -> bool {
        let node = &mut self.nodes[idx];
        if node.paused_until_ns.is_none() || epoch.is_some_and(|e| e != node.pause_epoch) {
            return false;
        }
        node.paused_until_ns = None;
        true
    }

    /// Marks a running node crashed; its new incarnation, or None if it was down already or
    /// is the nemesis.
    pub(crate) fn crash(&mut self, idx: NodeIdx) -> Option<u64> {
        let node = &mut self.nodes[idx];
        if !node.alive || node.role == Role::Nemesis {
            return None;
        }
        node.alive = false;
        node.paused_until_ns = None;
        // A new incarnation is a new process: its loop runs, and it says again what it
        // serves outside the loop.
        node.loop_stalled_until_ns = 0;
        node.serves_outside_loop = false;
        node.incarnation += 1;
        assert!(!node.alive && node.paused_until_ns.is_none());
        Some(node.incarnation)
    }

    /// Marks a crashed node up again (the crash numbered `incarnation`, or any if None);
    /// true if it was down.
    pub(crate) fn restart(&mut self, idx: NodeIdx, incarnation: Option<u64>) -> bool {
        let node = &mut self.nodes[idx];
        if node.alive || incarnation.is_some_and(|i| i != node.incarnation) {
            return false;
        }
        node.alive = true;
        true
    }

    /// The node's code serves parts outside its event loop (see [`Nodes::loop_stall`]).
    pub(crate) fn serve_outside_loop(&mut self, idx: NodeIdx) {
        self.nodes[idx].serves_outside_loop = true;
    }

    /// Stalls the event loop of a live node that serves outside it until `until_ns` (or
    /// lengthens the stall); false if the node has nothing outside its loop (or is down).
    pub(crate) fn loop_stall(&mut self, idx: NodeIdx, until_ns: u64) -> bool {
        let node = &mut self.nodes[idx];
        if !node.alive || !node.serves_outside_loop {
            return false;
        }
        node.loop_stalled_until_ns = node.loop_stalled_until_ns.max(until_ns);
        true
    }

    /// Until when (true ns) the node's event loop is stalled; 0 if it is not.
    pub(crate) fn loop_stalled_until_ns(&self, idx: NodeIdx) -> u64 {
        self.nodes[idx].loop_stalled_until_ns
    }

    /// Ends every loop stall (the liveness phase).
    pub(crate) fn end_loop_stalls(&mut self) {
        for node in &mut self.nodes {
            node.loop_stalled_until_ns = 0;
        }
    }

    /// A passage through `point` on node `idx`: what to do if this passage is the armed one.
    /// Each armed point counts every passage of its point, over the node's restarts (its
    /// `occurrence` is the point's n-th passage in the run); of two due at once, the first
    /// armed acts.
    pub(crate) fn pass(&mut self, idx: NodeIdx, point: &str) -> Option<PointAction> {
        let mut due = None;
        for (armed, hits) in &mut self.nodes[idx].points {
            if armed.point == point && *hits < armed.occurrence {
                *hits += 1;
                if *hits == armed.occurrence {
                    due = due.or_else(|| Some(armed.action.clone()));
                }
            }
        }
        due
    }

    /// Ends the run: the table is emptied.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
    }
}
