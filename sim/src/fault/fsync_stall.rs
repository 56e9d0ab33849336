//! `fsync_stall`: a node's disk holds every fsync that would complete during the stall
//! until it ends (a saturated or failing device, a stalled RAID controller, a cloud volume
//! hiccup): writes stay in the page cache, where a crash loses them.
//!
//! Live mode: a Redis server's shim holds its fsyncs and fdatasyncs (`live/shim/shim.c`),
//! and a crash cuts each file it synced back to its last synced size; other nodes are
//! refused there, by name, with the reason (`live/src/deploy/shim.rs`).

use super::draw::{pick, Draw};
use super::drawing::{Drawing, Glyph, Lane, Shape};
use super::spec::{self, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "fsync_stall"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsyncStall {
    /// The node whose disk stalls.
    pub node: String,
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// How long, in true ms.
    pub duration_ms: u64,
}

impl Spec for FsyncStall {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[Drawing {
        op: Op::FsyncStall,
        lane: Lane::Target,
        shape: Shape::Point(Glyph::Zigzag),
        label,
        caption,
    }];

    fn at_ms(&self) -> Option<u64> {
        Some(self.at_ms)
    }
    fn nodes(&self) -> Vec<&String> {
        vec![&self.node]
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.node]
    }
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    fn describe(&self) -> String {
        let (node, at, ms) = (&self.node, self.at_ms, self.duration_ms);
        format!("fsync stall on {node} at {at} ms for {ms} ms")
    }
    fn apply(&self, world: &World, _why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.fsync_stall(idx, Duration::from_millis(self.duration_ms));
        world.record(
            Event::nemesis(Op::FsyncStall)
                .target(&self.node)
                .value(self.duration_ms as i64),
        );
    }
}

fn label(_: &Event) -> Option<String> {
    Some("fsync stall".into())
}

fn caption(e: &Event) -> String {
    format!("{} at {:.0} ms", e.describe(), e.time_ms())
}

/// `[faults_random]` keys of fsync stalls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a node's fsyncs stall.
    #[serde(default)]
    pub fsync_stall_probability: f64,
    /// Longest stall, in ms.
    #[serde(default = "d_max")]
    pub fsync_stall_ms_max: u64,
    /// Nodes whose disks may stall (default: the servers).
    #[serde(default)]
    pub fsync_stall_nodes: Vec<String>,
}

fn d_max() -> u64 {
    2_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            fsync_stall_probability: 0.0,
            fsync_stall_ms_max: d_max(),
            fsync_stall_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = FsyncStall;

    fn probability(&self) -> f64 {
        self.fsync_stall_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("fsync_stall_probability", self.fsync_stall_probability)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "fsync_stall_nodes",
            list: Some(&self.fsync_stall_nodes),
            default: DefaultNodes::Servers,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> FsyncStall {
        FsyncStall {
            node: pick(d, &space.nodes),
            at_ms: space.at(d),
            duration_ms: d.u64_in(1, self.fsync_stall_ms_max.max(1)),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "fsync stall on {} for 1..={} ms, {}",
            space.nodes.join(", "),
            self.fsync_stall_ms_max,
            space.describe_when()
        )
    }
}
