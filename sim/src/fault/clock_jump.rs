//! `clock_jump`: a node's wall clock steps by `delta_ms` (an operator, or NTP stepping it);
//! its monotonic clock is untouched, as on a real machine. Redis expires keys by its wall
//! clock, so a forward jump on a server ends a lease early.
//!
//! Live mode: the server's clock shim steps the wall clock of that process only
//! (`live/src/deploy/shim.rs`), on a real Redis data node; other nodes are refused there,
//! by name, with the reason.

use super::draw::{pick, Draw};
use super::drawing::{target, Drawing, Glyph, Lane, Shape};
use super::spec::{self, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};

/// `[[faults]] kind = "clock_jump"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockJump {
    /// The node whose clock jumps.
    pub node: String,
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// By how much, in ms (negative = backwards).
    pub delta_ms: i64,
}

impl Spec for ClockJump {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[Drawing {
        op: Op::ClockJump,
        lane: Lane::Target,
        shape: Shape::Point(Glyph::Triangle),
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
        let (node, at, delta) = (&self.node, self.at_ms, self.delta_ms);
        format!("clock jump on {node} at {at} ms by {delta:+} ms")
    }
    fn apply(&self, world: &World, _why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.clock_jump(idx, self.delta_ms);
        world.record(
            Event::nemesis(Op::ClockJump)
                .target(&self.node)
                .value(self.delta_ms),
        );
    }
}

fn label(e: &Event) -> Option<String> {
    e.value.map(|v| format!("{v:+} ms"))
}

fn caption(e: &Event) -> String {
    let (who, by) = (target(e), e.value.unwrap_or(0));
    format!("{who}'s wall clock jumped {by:+} ms at {:.0} ms", e.time_ms())
}

/// `[faults_random]` keys of clock jumps (and `clock_nodes`, shared with `clock_drift`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a node's wall clock jumps.
    #[serde(default)]
    pub clock_jump_probability: f64,
    /// Smallest jump, in ms, either way (1 by default; equal to the largest, every jump has
    /// the same size, as the phase diagrams need).
    #[serde(default = "d_min", skip_serializing_if = "is_one")]
    pub clock_jump_ms_min: u64,
    /// Largest jump, in ms, either way.
    #[serde(default = "d_max")]
    pub clock_jump_ms_max: u64,
    /// Whether jumps may go backwards too.
    #[serde(default = "yes")]
    pub clock_jump_backward: bool,
    /// Nodes whose clocks may misbehave, jump or drift (default: servers and clients).
    #[serde(default)]
    pub clock_nodes: Vec<String>,
}

fn d_min() -> u64 {
    1
}
fn is_one(n: &u64) -> bool {
    *n == 1
}
fn d_max() -> u64 {
    2_000
}
fn yes() -> bool {
    true
}

impl Default for Random {
    fn default() -> Self {
        Random {
            clock_jump_probability: 0.0,
            clock_jump_ms_min: d_min(),
            clock_jump_ms_max: d_max(),
            clock_jump_backward: true,
            clock_nodes: vec![],
        }
    }
}

/// The key `clock_nodes` and the nodes it defaults to.
pub(crate) fn clock_nodes(list: Option<&Vec<String>>) -> NodeKey<'_> {
    NodeKey {
        key: "clock_nodes",
        list,
        default: DefaultNodes::Everyone,
    }
}

impl RandomSpec for Random {
    type Fault = ClockJump;

    fn probability(&self) -> f64 {
        self.clock_jump_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("clock_jump_probability", self.clock_jump_probability)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(clock_nodes(Some(&self.clock_nodes)))
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> ClockJump {
        let max = self.clock_jump_ms_max as i64;
        let min = (self.clock_jump_ms_min as i64).clamp(1, max.max(1));
        let node = pick(d, &space.nodes);
        let at_ms = space.at(d);
        let delta_ms = match (self.clock_jump_backward, min) {
            // The draw of profiles without a minimum, unchanged.
            (true, 1) => d.i64_in(-max, max.max(1)),
            (false, _) => d.i64_in(min, max.max(min)),
            (true, _) => {
                let size = d.i64_in(min, max.max(min));
                if d.bool(0.5) {
                    -size
                } else {
                    size
                }
            }
        };
        ClockJump {
            node,
            at_ms,
            delta_ms,
        }
    }
    fn describe(&self, space: &Space) -> String {
        let sign = if self.clock_jump_backward { "±" } else { "+" };
        format!(
            "clock jump on {} by {sign}{}..={} ms, {}",
            space.nodes.join(", "),
            self.clock_jump_ms_min,
            self.clock_jump_ms_max,
            space.describe_when()
        )
    }
}
