//! `loop_stall`: a server's event loop stops for a while, and what runs outside the loop goes
//! on. An etcd member's Raft loop stuck in a slow `fdatasync` or starved of CPU
//! (etcd-io/etcd#12528, #15247) neither steps, ticks, sends nor applies, while its gRPC
//! handlers still answer and its lessor's own timer still fires: the member keeps the role
//! its loop last saw. A node whose code runs nothing outside its loop (a Redis server's
//! single thread, a client) is paused instead, which is what a stuck loop is for it.
//!
//! Live mode cannot apply it: the `simulator_only!` below says why.

use super::draw::{pick, Draw};
use super::drawing::{Drawing, Glyph, Lane, Shape};
use super::spec::{self, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "loop_stall"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopStall {
    /// The node (or role, e.g. `@leader`) whose loop stalls.
    pub node: String,
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// How long, in true ms.
    pub duration_ms: u64,
}

spec::simulator_only!(
    LoopStall,
    "live mode cannot stop a real server's event loop alone (a SIGSTOP stops its whole \
     process, a `pause`); run it in the simulator"
);

impl Spec for LoopStall {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[Drawing {
        op: Op::LoopStall,
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
        if self.duration_ms == 0 {
            return Err("`duration_ms` must be at least 1".into());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let (node, at, ms) = (&self.node, self.at_ms, self.duration_ms);
        format!("loop stall on {node} at {at} ms for {ms} ms")
    }
    fn apply(&self, world: &World, why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.record(
            Event::nemesis(Op::LoopStall)
                .target(&self.node)
                .value(self.duration_ms as i64),
        );
        if !world.loop_stall(idx, Duration::from_millis(self.duration_ms), why) {
            world.record(
                Event::nemesis(Op::Note)
                    .target(&self.node)
                    .detail("nothing of it runs outside its loop: paused instead"),
            );
        }
    }
}

fn label(_: &Event) -> Option<String> {
    Some("loop stall".into())
}

fn caption(e: &Event) -> String {
    format!("{} at {:.0} ms", e.describe(), e.time_ms())
}

/// `[faults_random]` keys of loop stalls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a node's loop stalls.
    #[serde(default)]
    pub loop_stall_probability: f64,
    /// Longest stall, in ms.
    #[serde(default = "d_max")]
    pub loop_stall_ms_max: u64,
    /// Nodes whose loops may stall (default: the servers).
    #[serde(default)]
    pub loop_stall_nodes: Vec<String>,
}

fn d_max() -> u64 {
    5_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            loop_stall_probability: 0.0,
            loop_stall_ms_max: d_max(),
            loop_stall_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = LoopStall;

    fn probability(&self) -> f64 {
        self.loop_stall_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("loop_stall_probability", self.loop_stall_probability)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "loop_stall_nodes",
            list: Some(&self.loop_stall_nodes),
            default: DefaultNodes::Servers,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> LoopStall {
        LoopStall {
            node: pick(d, &space.nodes),
            at_ms: space.at(d),
            duration_ms: d.u64_in(1, self.loop_stall_ms_max.max(1)),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "loop stall on {} for 1..={} ms, {}",
            space.nodes.join(", "),
            self.loop_stall_ms_max,
            space.describe_when()
        )
    }
}
