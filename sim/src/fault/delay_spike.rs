//! `delay_spike`: the messages a node sends (to every other node, or to those in `to`) are
//! held for `duration_ms`, then delivered in the order they were sent, as TCP delivers what
//! it retransmits once the path is back (a congested switch dropping a burst, a stalled NIC
//! queue, a VM whose network stops while the process runs). Nothing is lost unless it waited
//! longer than `[network] connection_timeout_ms`, or an end of the link crashed. Fires at
//! `at_ms`, or at a named point of the sender (`before_write`: the write leaves on time and
//! lands late, Kleppmann's delayed packet).
//!
//! Live mode: a one-way stall of the links carrying what its sender sends, healed after
//! `duration_ms`; never at a server's named point, which a real server lacks
//! (`live/src/run/wire.rs`).

use super::draw::{pick, Draw};
use super::drawing::{target, Drawing, Glyph, Lane, Shape};
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::{ArmedPoint, PointAction};
use crate::world::{NodeIdx, World};
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "delay_spike"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelaySpike {
    /// The sender whose messages are held.
    pub node: String,
    /// The receivers whose links are held (empty: every other node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// When, in true ms since the start (or use `point`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// A named point in the sender's code, e.g. `before_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// Which passage through `point` triggers it, from 1.
    #[serde(default = "spec::first", skip_serializing_if = "spec::is_first")]
    pub occurrence: u32,
    /// How long the messages are held, in true ms.
    pub duration_ms: u64,
}

impl Spec for DelaySpike {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[
        // A zigzag on the sender's lane, as for a stalled disk: a held link is a stalled
        // queue.
        Drawing {
            op: Op::Hold,
            lane: Lane::Target,
            shape: Shape::Point(Glyph::Zigzag),
            label,
            caption,
        },
        Drawing {
            op: Op::Flush,
            lane: Lane::Target,
            shape: Shape::Hidden,
            label: super::drawing::no_label,
            caption: flushed,
        },
    ];

    fn at_ms(&self) -> Option<u64> {
        self.at_ms.filter(|_| self.point.is_none())
    }
    fn nodes(&self) -> Vec<&String> {
        std::iter::once(&self.node).chain(&self.to).collect()
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        std::iter::once(&mut self.node)
            .chain(self.to.iter_mut())
            .collect()
    }
    fn check(&self) -> Result<(), String> {
        if self.duration_ms == 0 {
            return Err("`duration_ms` must be positive".into());
        }
        if self.to.contains(&self.node) {
            return Err(format!("`to` names the sender `{}` itself", self.node));
        }
        spec::check_trigger(self.at_ms, self.point.as_ref(), self.occurrence)
    }
    fn describe(&self) -> String {
        let when = spec::describe_when(self.at_ms, self.point.as_ref(), self.occurrence);
        let to = to_words(&self.to);
        let (node, ms) = (&self.node, self.duration_ms);
        format!("delay spike {node} -> {to} {when} for {ms} ms")
    }
    fn apply(&self, world: &World, why: &str) {
        let find = |n: &String| world.node(n).expect("fault targets are validated");
        let to: Vec<NodeIdx> = self.to.iter().map(find).collect();
        let from = find(&self.node);
        if let Some(to) = receivers(&from, &to) {
            world.hold(from, &to, Duration::from_millis(self.duration_ms), why);
        }
    }
    fn armed_point(&self) -> Option<ArmedPoint> {
        Some(ArmedPoint {
            node: self.node.clone(),
            point: self.point.clone()?,
            occurrence: self.occurrence,
            action: PointAction::Hold(Duration::from_millis(self.duration_ms), self.to.clone()),
        })
    }
}

fn label(_: &Event) -> Option<String> {
    Some("delay spike".into())
}

fn caption(e: &Event) -> String {
    let ms = e.value.unwrap_or(0);
    let links = e.detail.as_deref().unwrap_or("");
    format!(
        "{}'s messages held at {:.0} ms for {ms} ms ({links})",
        target(e),
        e.time_ms()
    )
}

fn flushed(e: &Event) -> String {
    format!("{}'s held messages sent on at {:.0} ms", target(e), e.time_ms())
}

/// `[faults_random]` keys of delay spikes: each holds everything one node sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that some node's messages are held.
    #[serde(default)]
    pub delay_spike_probability: f64,
    /// Shortest spike, in ms.
    #[serde(default = "d_min")]
    pub delay_spike_ms_min: u64,
    /// Longest spike, in ms.
    #[serde(default = "d_max")]
    pub delay_spike_ms_max: u64,
    /// Senders whose messages may be held (default: the clients).
    #[serde(default)]
    pub delay_spike_nodes: Vec<String>,
}

fn d_min() -> u64 {
    100
}
fn d_max() -> u64 {
    2_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            delay_spike_probability: 0.0,
            delay_spike_ms_min: d_min(),
            delay_spike_ms_max: d_max(),
            delay_spike_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = DelaySpike;

    const AT_POINTS: bool = true;

    fn probability(&self) -> f64 {
        self.delay_spike_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("delay_spike_probability", self.delay_spike_probability)?;
        if self.delay_spike_ms_min == 0 {
            return Err("faults_random.delay_spike_ms_min must be positive".into());
        }
        check_range(
            "delay_spike_ms",
            self.delay_spike_ms_min,
            self.delay_spike_ms_max,
        )
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "delay_spike_nodes",
            list: Some(&self.delay_spike_nodes),
            default: DefaultNodes::Clients,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> DelaySpike {
        let (min, max) = (self.delay_spike_ms_min, self.delay_spike_ms_max);
        // A point first, as for pauses: the search shrinks towards it (see `at_point`).
        if let Some((node, point, occurrence)) = spec::at_point(space, d) {
            return DelaySpike {
                node,
                to: vec![],
                at_ms: None,
                point: Some(point),
                occurrence,
                duration_ms: d.u64_in(min, max),
            };
        }
        DelaySpike {
            node: pick(d, &space.nodes),
            to: vec![],
            at_ms: Some(space.at(d)),
            point: None,
            occurrence: 1,
            duration_ms: d.u64_in(min, max),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "delay spike from {} for {}..={} ms, {}",
            space.nodes.join(", "),
            self.delay_spike_ms_min,
            self.delay_spike_ms_max,
            space.describe_when()
        )
    }
}

/// The receivers of a spike from `from` to `to`, roles resolved, in either world: `to`
/// without the sender (a role may resolve to it: that link is simply not held; empty: every
/// other node); `None` if `to` named only the sender (nothing is held).
pub fn receivers<T: PartialEq + Clone>(from: &T, to: &[T]) -> Option<Vec<T>> {
    let others: Vec<T> = to.iter().filter(|t| *t != from).cloned().collect();
    (to.is_empty() || !others.is_empty()).then_some(others)
}

/// A spike's receivers in words: `everyone` for every other node.
pub fn to_words(to: &[String]) -> String {
    match to.is_empty() {
        true => "everyone".to_owned(),
        false => to.join(","),
    }
}
