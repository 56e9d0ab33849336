//! `crash`: a power loss of one node. Its tasks die, its inboxes and the messages in flight
//! to it are lost, its disk keeps only what was synced; it restarts after
//! `restart_after_ms` (a new incarnation), or never. Fires at `at_ms`, or at a named point
//! of the node's code on its `occurrence`-th passage. The network sees a killed process on
//! a host that stays up: a request to it is refused after a round trip
//! ([`World::refuses`]) and a call waiting on it is reset, as live mode's SIGKILL gives; a
//! host silent as well is a crash inside a partition.
//!
//! Live mode: SIGKILL, and a restart after `restart_after_ms` if given (a server's after its
//! deployment's restart delay) (`live/src/nemesis.rs`); a Redis server's append-only file is
//! cut back to its last sync first (`live/src/deploy/shim.rs`, `PowerLoss`).

use super::draw::{pick, Draw};
use super::drawing::{no_label, target, Drawing, Glyph, Lane, Shape};
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::{ArmedPoint, PointAction};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "crash"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Crash {
    /// The node to crash.
    pub node: String,
    /// When, in true ms since the start (or use `point`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// A named point in the node's code, e.g. `after_grant`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// Which passage through `point` triggers the crash, from 1.
    #[serde(default = "spec::first", skip_serializing_if = "spec::is_first")]
    pub occurrence: u32,
    /// Restart after this many true ms; never if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_after_ms: Option<u64>,
}

impl Spec for Crash {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[
        Drawing {
            op: Op::Crash,
            lane: Lane::Target,
            shape: Shape::Point(Glyph::Cross),
            label: no_label,
            caption: crashed,
        },
        Drawing {
            op: Op::Restart,
            lane: Lane::Target,
            shape: Shape::Point(Glyph::Ring),
            label: no_label,
            caption: restarted,
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
        let restart = self
            .restart_after_ms
            .map_or("no restart".into(), |ms| format!("restart after {ms} ms"));
        format!("crash {} {when}, {restart}", self.node)
    }
    fn apply(&self, world: &World, why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.crash(idx, self.restart_after(), why);
    }
    fn armed_point(&self) -> Option<ArmedPoint> {
        Some(ArmedPoint {
            node: self.node.clone(),
            point: self.point.clone()?,
            occurrence: self.occurrence,
            action: PointAction::Crash(self.restart_after()),
        })
    }
}

impl Crash {
    fn restart_after(&self) -> Option<Duration> {
        self.restart_after_ms.map(Duration::from_millis)
    }
}

fn crashed(e: &Event) -> String {
    format!("{} crashed at {:.0} ms", target(e), e.time_ms())
}

fn restarted(e: &Event) -> String {
    format!("{} restarted at {:.0} ms", target(e), e.time_ms())
}

/// `[faults_random]` keys of crashes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that some node crashes.
    #[serde(default)]
    pub crash_probability: f64,
    /// Shortest downtime before the restart, in ms.
    #[serde(default = "d_min")]
    pub crash_down_ms_min: u64,
    /// Longest downtime before the restart, in ms.
    #[serde(default = "d_max")]
    pub crash_down_ms_max: u64,
    /// Nodes that may crash (default: the servers).
    #[serde(default)]
    pub crash_nodes: Vec<String>,
}

fn d_min() -> u64 {
    0
}
fn d_max() -> u64 {
    2_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            crash_probability: 0.0,
            crash_down_ms_min: d_min(),
            crash_down_ms_max: d_max(),
            crash_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = Crash;

    const AT_POINTS: bool = true;

    fn probability(&self) -> f64 {
        self.crash_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("crash_probability", self.crash_probability)?;
        check_range("crash_down_ms", self.crash_down_ms_min, self.crash_down_ms_max)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "crash_nodes",
            list: Some(&self.crash_nodes),
            default: DefaultNodes::Servers,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> Crash {
        let (lo, hi) = (self.crash_down_ms_min, self.crash_down_ms_max);
        if let Some((node, point, occurrence)) = spec::at_point(space, d) {
            return Crash {
                node,
                at_ms: None,
                point: Some(point),
                occurrence,
                restart_after_ms: Some(d.u64_in(lo, hi)),
            };
        }
        Crash {
            node: pick(d, &space.nodes),
            at_ms: Some(space.at(d)),
            point: None,
            occurrence: 1,
            restart_after_ms: Some(d.u64_in(lo, hi)),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "crash {}, restart after {}..={} ms, {}",
            space.nodes.join(", "),
            self.crash_down_ms_min,
            self.crash_down_ms_max,
            space.describe_when()
        )
    }
}
