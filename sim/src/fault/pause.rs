//! `pause`: a stop-the-world pause of one node (a GC pause, a VM migration, SIGSTOP). The
//! clock runs on, timers fire late, inbound messages queue; the node resumes after
//! `duration_ms`. Fires at `at_ms`, or at a named point of the node's code on its
//! `occurrence`-th passage.
//!
//! Live mode: SIGSTOP to the node's process, SIGCONT after `duration_ms`; at a named point a
//! client stops itself and the parent resumes it (`live/src/nemesis.rs`).

use super::draw::{pick, Draw};
use super::drawing::{target, Drawing, Lane, Shape};
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::{ArmedPoint, PointAction};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "pause"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    /// The node to pause.
    pub node: String,
    /// When, in true ms since the start (or use `point`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// A named point in the node's code, e.g. `before_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// Which passage through `point` triggers the pause, from 1.
    #[serde(default = "spec::first", skip_serializing_if = "spec::is_first")]
    pub occurrence: u32,
    /// How long the node stays paused, in true ms.
    pub duration_ms: u64,
}

impl Spec for Pause {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[
        Drawing {
            op: Op::Pause,
            lane: Lane::Target,
            shape: Shape::Opens {
                ends: Op::Resume,
                class: "pause",
            },
            label: super::drawing::no_label,
            caption,
        },
        Drawing {
            op: Op::Resume,
            lane: Lane::Target,
            shape: Shape::Closes,
            label: super::drawing::no_label,
            caption: resumed,
        },
    ];

    fn at_ms(&self) -> Option<u64> {
        self.at_ms.filter(|_| self.point.is_none())
    }
    fn nodes(&self) -> Vec<&String> {
        vec![&self.node]
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.node]
    }
    fn check(&self) -> Result<(), String> {
        spec::check_trigger(self.at_ms, self.point.as_ref(), self.occurrence)
    }
    fn describe(&self) -> String {
        let when = spec::describe_when(self.at_ms, self.point.as_ref(), self.occurrence);
        format!("pause {} {when} for {} ms", self.node, self.duration_ms)
    }
    fn apply(&self, world: &World, why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.pause(idx, Duration::from_millis(self.duration_ms), why);
    }
    fn armed_point(&self) -> Option<ArmedPoint> {
        Some(ArmedPoint {
            node: self.node.clone(),
            point: self.point.clone()?,
            occurrence: self.occurrence,
            action: PointAction::Pause(Duration::from_millis(self.duration_ms)),
        })
    }
}

fn caption(e: &Event) -> String {
    let ms = e.value.unwrap_or(0);
    format!("{} paused at {:.0} ms for {ms} ms", target(e), e.time_ms())
}

fn resumed(e: &Event) -> String {
    format!("{} resumed at {:.0} ms", target(e), e.time_ms())
}

/// `[faults_random]` keys of pauses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that some node is paused.
    #[serde(default)]
    pub pause_probability: f64,
    /// Shortest pause, in ms.
    #[serde(default = "d_min")]
    pub pause_ms_min: u64,
    /// Longest pause, in ms.
    #[serde(default = "d_max")]
    pub pause_ms_max: u64,
    /// Nodes that may be paused (default: the clients). In every node list, `@servers`
    /// and `@clients` stand for all nodes of that role.
    #[serde(default)]
    pub pause_nodes: Vec<String>,
}

fn d_min() -> u64 {
    50
}
fn d_max() -> u64 {
    2_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            pause_probability: 0.0,
            pause_ms_min: d_min(),
            pause_ms_max: d_max(),
            pause_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = Pause;

    const AT_POINTS: bool = true;

    fn probability(&self) -> f64 {
        self.pause_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("pause_probability", self.pause_probability)?;
        check_range("pause_ms", self.pause_ms_min, self.pause_ms_max)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "pause_nodes",
            list: Some(&self.pause_nodes),
            default: DefaultNodes::Clients,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> Pause {
        // A point fault first: the search shrinks towards it (see `at_point`).
        if let Some((node, point, occurrence)) = spec::at_point(space, d) {
            let duration_ms = d.u64_in(self.pause_ms_min, self.pause_ms_max);
            return Pause {
                node,
                at_ms: None,
                point: Some(point),
                occurrence,
                duration_ms,
            };
        }
        Pause {
            node: pick(d, &space.nodes),
            at_ms: Some(space.at(d)),
            point: None,
            occurrence: 1,
            duration_ms: d.u64_in(self.pause_ms_min, self.pause_ms_max),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "pause {} for {}..={} ms, {}",
            space.nodes.join(", "),
            self.pause_ms_min,
            self.pause_ms_max,
            space.describe_when()
        )
    }
}
