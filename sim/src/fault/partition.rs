//! `partition`: links cut for `duration_ms`. `isolate` cuts these nodes off from all others;
//! `groups` cuts every link between different groups; `one_way` cuts only from earlier
//! groups (or the isolated nodes) towards later ones (or everyone else). A partition also
//! kills the messages in flight on the links it cuts. Partitions nest: a link heals when
//! every partition that cut it has ended.
//!
//! Live mode: the proxies on the links it separates stall (`--partition stall`) or reset
//! them until the heal; links between servers where the deployment proxies them
//! (`live/src/nemesis.rs`, `refuse::partition_links`).

use super::draw::{pick, Draw};
use super::drawing::{no_label, Drawing, Lane, Shape};
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::NodeIdx;
use crate::world::{Link, World};
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "partition"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// How long until the links heal, in true ms.
    pub duration_ms: u64,
    /// Nodes cut off from everyone else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isolate: Vec<String>,
    /// Groups that cannot reach each other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<String>>,
    /// Cut only one direction.
    #[serde(default, skip_serializing_if = "is_false")]
    pub one_way: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Spec for Partition {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[
        Drawing {
            op: Op::Partition,
            lane: Lane::Top,
            shape: Shape::Opens {
                ends: Op::Heal,
                class: "cut",
            },
            label: no_label,
            caption: began,
        },
        Drawing {
            op: Op::Heal,
            lane: Lane::Top,
            shape: Shape::Closes,
            label: no_label,
            caption: healed,
        },
    ];

    fn at_ms(&self) -> Option<u64> {
        Some(self.at_ms)
    }
    fn nodes(&self) -> Vec<&String> {
        self.isolate.iter().chain(self.groups.iter().flatten()).collect()
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        let groups = self.groups.iter_mut().flatten();
        self.isolate.iter_mut().chain(groups).collect()
    }
    fn check(&self) -> Result<(), String> {
        if self.isolate.is_empty() == self.groups.is_empty() {
            return Err("give exactly one of `isolate` and `groups`".into());
        }
        if !self.groups.is_empty() && self.groups.len() < 2 {
            return Err("`groups` needs at least two groups".into());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let cut = if self.isolate.is_empty() {
            let groups: Vec<String> = self.groups.iter().map(|g| g.join(",")).collect();
            format!("groups {}", groups.join(" | "))
        } else {
            format!("isolate {}", self.isolate.join(","))
        };
        let one_way = if self.one_way { " (one way)" } else { "" };
        let (at, ms) = (self.at_ms, self.duration_ms);
        format!("partition at {at} ms for {ms} ms: {cut}{one_way}")
    }
    fn apply(&self, world: &World, _why: &str) {
        let (links, detail) = self.links(world);
        world.cut(&links);
        world.record(
            Event::nemesis(Op::Partition)
                .value(self.duration_ms as i64)
                .detail(detail.clone()),
        );
        world.after(Duration::from_millis(self.duration_ms), move |world| {
            if world.restore(&links) {
                world.record_fault(Op::Heal, None, detail);
            }
        });
    }
}

impl Partition {
    /// Whether it cuts the link from node `from` to node `to` (by name), in either world:
    /// between different groups (the isolated nodes and every other node are two), and with
    /// `one_way` only from an earlier group to a later one. A node in no group is not cut.
    pub fn cuts(&self, from: &str, to: &str) -> bool {
        let side = |n: &str| -> Option<usize> {
            match self.isolate.is_empty() {
                true => self.groups.iter().position(|g| g.iter().any(|x| x == n)),
                false => Some(usize::from(!self.isolate.iter().any(|x| x == n))),
            }
        };
        match (side(from), side(to)) {
            (Some(x), Some(y)) => x < y || (x > y && !self.one_way),
            _ => false,
        }
    }

    /// The directed links it cuts, and the cut in words (`a,b | c,d`, `a -/-> b,c`): the
    /// heal event carries the same words, so a timeline pairs them.
    fn links(&self, world: &World) -> (Vec<Link>, String) {
        let find = |name: &String| world.node(name).expect("fault targets are validated");
        let groups: Vec<Vec<NodeIdx>> = if self.isolate.is_empty() {
            let groups = self.groups.iter();
            groups.map(|g| g.iter().map(find).collect()).collect()
        } else {
            let inside: Vec<NodeIdx> = self.isolate.iter().map(find).collect();
            let all = world.node_indexes().into_iter();
            let outside = all.filter(|i| !inside.contains(i)).collect();
            vec![inside, outside]
        };
        let nodes: Vec<(NodeIdx, String)> = (groups.iter().flatten())
            .map(|&i| (i, world.name(i)))
            .collect();
        let mut links = Vec::new();
        for (x, from) in &nodes {
            let cut = |(_, to): &&(NodeIdx, String)| self.cuts(from, to);
            links.extend(nodes.iter().filter(cut).map(|(y, _)| (*x, *y)));
        }
        let names = |g: &Vec<NodeIdx>| {
            let names: Vec<String> = g.iter().map(|i| world.name(*i)).collect();
            names.join(",")
        };
        let arrow = if self.one_way { " -/-> " } else { " | " };
        let detail = groups.iter().map(names).collect::<Vec<_>>().join(arrow);
        (links, detail)
    }
}

fn began(e: &Event) -> String {
    let cut = e.detail.as_deref().unwrap_or("");
    format!("a partition ({cut}) began at {:.0} ms", e.time_ms())
}

fn healed(e: &Event) -> String {
    let cut = e.detail.as_deref().unwrap_or("");
    format!("a partition ({cut}) healed at {:.0} ms", e.time_ms())
}

/// `[faults_random]` keys of partitions: each isolates one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a node is isolated.
    #[serde(default)]
    pub partition_probability: f64,
    /// Shortest partition, in ms.
    #[serde(default = "d_min")]
    pub partition_ms_min: u64,
    /// Longest partition, in ms.
    #[serde(default = "d_max")]
    pub partition_ms_max: u64,
    /// Nodes that may be isolated (default: servers and clients).
    #[serde(default)]
    pub partition_nodes: Vec<String>,
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
            partition_probability: 0.0,
            partition_ms_min: d_min(),
            partition_ms_max: d_max(),
            partition_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = Partition;

    fn probability(&self) -> f64 {
        self.partition_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("partition_probability", self.partition_probability)?;
        check_range("partition_ms", self.partition_ms_min, self.partition_ms_max)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "partition_nodes",
            list: Some(&self.partition_nodes),
            default: DefaultNodes::Everyone,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> Partition {
        Partition {
            at_ms: space.at(d),
            duration_ms: d.u64_in(self.partition_ms_min, self.partition_ms_max),
            isolate: vec![pick(d, &space.nodes)],
            groups: vec![],
            one_way: d.bool(0.25),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "partition isolating one of {} for {}..={} ms, {}",
            space.nodes.join(", "),
            self.partition_ms_min,
            self.partition_ms_max,
            space.describe_when()
        )
    }
}
