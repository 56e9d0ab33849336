//! `pause_periodic`: pause a target for `on_ms`, let it run for `off_ms`, and again, from
//! `at_ms` until `until_ms` (a cycle starts only before `until_ms`). The target is a node, a
//! role (resolved once, when the first cycle starts), or a group, `@servers` or `@clients`,
//! whose nodes are paused and resumed together: Jepsen's etcd nemesis, which stops every
//! member at once and lets them all go, so that elections and leases race on wake-up.

use super::draw::{pick, Draw};
use super::drawing::Drawing;
use super::spec::{self, check_range, DefaultNodes, NodeKey, RandomSpec, Space, Spec};
use crate::nodes::{NodeIdx, Role};
use crate::roles::{ROLE_CLIENTS, ROLE_SERVERS};
use crate::world::World;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "pause_periodic"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PausePeriodic {
    /// A node, a role (`@leader`), or a group (`@servers`, `@clients`) paused as one.
    pub node: String,
    /// When the first pause starts, in true ms since the start.
    pub at_ms: u64,
    /// No pause starts at or after this, in true ms since the start.
    pub until_ms: u64,
    /// How long each pause lasts, in true ms.
    pub on_ms: u64,
    /// How long the target runs between pauses, in true ms.
    pub off_ms: u64,
}

impl Spec for PausePeriodic {
    type Random = Random;
    const GROUPS: bool = true;
    // Its events are `pause` and `resume`, drawn as pauses.
    const DRAWINGS: &'static [Drawing] = &[];

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
        if self.until_ms <= self.at_ms {
            return Err("`until_ms` must come after `at_ms`".into());
        }
        if self.on_ms == 0 || self.off_ms == 0 {
            return Err("`on_ms` and `off_ms` must be positive".into());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let (on, off) = (self.on_ms, self.off_ms);
        let (from, until) = (self.at_ms, self.until_ms);
        let node = &self.node;
        format!("pause {node} for {on} ms every {} ms from {from} ms to {until} ms", on + off)
    }
    fn apply(&self, world: &World, why: &str) {
        let (fault, w, why) = (self.clone(), world.clone(), why.to_owned());
        let (on, period) = (self.on(), self.on() + Duration::from_millis(self.off_ms));
        let until_ns = self.until_ms * 1_000_000;
        world.spawn_on_nemesis(async move {
            loop {
                // A group is looked up every cycle: a node added since is paused too.
                for idx in fault.targets(&w) {
                    w.pause(idx, on, &why);
                }
                if w.now_ns() + period.as_nanos() as u64 >= until_ns {
                    return;
                }
                madsim::time::sleep(period).await;
            }
        });
    }
}

impl PausePeriodic {
    fn on(&self) -> Duration {
        Duration::from_millis(self.on_ms)
    }

    /// The nodes it pauses: every node of a group, or the one node.
    fn targets(&self, world: &World) -> Vec<NodeIdx> {
        let role = match self.node.as_str() {
            ROLE_SERVERS => Role::Server,
            ROLE_CLIENTS => Role::Client,
            node => return vec![world.node(node).expect("fault targets are validated")],
        };
        let names = world.names(role);
        names.iter().filter_map(|n| world.node(n)).collect()
    }
}

/// `[faults_random]` keys of periodic pauses: each pauses one node of the list for a few
/// cycles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a periodic pause starts.
    #[serde(default)]
    pub pause_periodic_probability: f64,
    /// Longest pause of a cycle, in ms (from 1).
    #[serde(default = "d_ms_max")]
    pub pause_periodic_on_ms_max: u64,
    /// Longest run between pauses, in ms (from 1).
    #[serde(default = "d_ms_max")]
    pub pause_periodic_off_ms_max: u64,
    /// Most cycles (from 1).
    #[serde(default = "d_cycles_max")]
    pub pause_periodic_cycles_max: u64,
    /// Nodes that may be paused periodically (default: the servers).
    #[serde(default)]
    pub pause_periodic_nodes: Vec<String>,
}

fn d_ms_max() -> u64 {
    500
}
fn d_cycles_max() -> u64 {
    5
}

impl Default for Random {
    fn default() -> Self {
        Random {
            pause_periodic_probability: 0.0,
            pause_periodic_on_ms_max: d_ms_max(),
            pause_periodic_off_ms_max: d_ms_max(),
            pause_periodic_cycles_max: d_cycles_max(),
            pause_periodic_nodes: vec![],
        }
    }
}

impl RandomSpec for Random {
    type Fault = PausePeriodic;

    fn probability(&self) -> f64 {
        self.pause_periodic_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("pause_periodic_probability", self.probability())?;
        check_range("pause_periodic_on_ms", 1, self.pause_periodic_on_ms_max)?;
        check_range("pause_periodic_off_ms", 1, self.pause_periodic_off_ms_max)?;
        check_range("pause_periodic_cycles", 1, self.pause_periodic_cycles_max)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        Some(NodeKey {
            key: "pause_periodic_nodes",
            list: Some(&self.pause_periodic_nodes),
            default: DefaultNodes::Servers,
        })
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> PausePeriodic {
        let node = pick(d, &space.nodes);
        let at_ms = space.at(d);
        let on_ms = d.u64_in(1, self.pause_periodic_on_ms_max);
        let off_ms = d.u64_in(1, self.pause_periodic_off_ms_max);
        let cycles = d.u64_in(1, self.pause_periodic_cycles_max);
        PausePeriodic {
            node,
            at_ms,
            until_ms: at_ms + (cycles - 1) * (on_ms + off_ms) + 1,
            on_ms,
            off_ms,
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "pause {} for 1..={} ms every +1..={} ms, 1..={} times, {}",
            space.nodes.join(", "),
            self.pause_periodic_on_ms_max,
            self.pause_periodic_off_ms_max,
            self.pause_periodic_cycles_max,
            space.describe_when()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Fault, FaultProfile, Targets};
    use crate::{simulate, Event, Op, SimSpec};

    fn run(node: &str) -> Vec<Event> {
        let spec = SimSpec {
            seed: 1,
            duration_ms: 2_000,
            faults: vec![Fault::PausePeriodic(PausePeriodic {
                node: node.into(),
                at_ms: 100,
                until_ms: 1_000,
                on_ms: 100,
                off_ms: 200,
            })],
            ..SimSpec::default()
        };
        let outcome = simulate(&spec, |world| {
            for name in ["s1", "s2", "c1"] {
                let role = if name == "c1" { Role::Client } else { Role::Server };
                world.add_node(name, role, |_| async {});
            }
        });
        outcome.unwrap().history
    }

    fn pauses(history: &[Event], op: Op) -> Vec<(&str, u64)> {
        let events = history.iter().filter(|e| e.op == op);
        events.map(|e| (e.target.as_deref().unwrap(), e.time_ns / 1_000_000)).collect()
    }

    #[test]
    fn a_group_is_paused_and_resumed_together_every_cycle() {
        let h = run(ROLE_SERVERS);
        let starts = [100, 400, 700];
        let expected: Vec<(&str, u64)> =
            starts.iter().flat_map(|t| [("s1", *t), ("s2", *t)]).collect();
        assert_eq!(pauses(&h, Op::Pause), expected);
        let resumed: Vec<(&str, u64)> = expected.iter().map(|(n, t)| (*n, t + 100)).collect();
        assert_eq!(pauses(&h, Op::Resume), resumed);
    }

    #[test]
    fn a_node_is_paused_alone() {
        let h = run("c1");
        assert_eq!(pauses(&h, Op::Pause), [("c1", 100), ("c1", 400), ("c1", 700)]);
    }

    #[test]
    fn validation_takes_groups_and_refuses_empty_cycles() {
        let f = |node: &str, off_ms| {
            Fault::PausePeriodic(PausePeriodic {
                node: node.into(),
                at_ms: 0,
                until_ms: 10,
                on_ms: 1,
                off_ms,
            })
        };
        let known = ["s1".to_string()];
        assert!(f("@servers", 1).validate(&known).is_ok());
        assert!(f("s9", 1).validate(&known).unwrap_err().contains("unknown node"));
        assert!(f("s1", 0).validate(&known).unwrap_err().contains("positive"));
    }

    #[test]
    fn the_profile_draws_it_within_its_keys_and_only_when_enabled() {
        let targets = Targets {
            servers: vec!["s1".into(), "s2".into()],
            clients: vec!["c1".into()],
        };
        let p: FaultProfile = serde_json::from_str(
            r#"{"pause_periodic_probability": 0.5, "pause_periodic_cycles_max": 3}"#,
        )
        .unwrap();
        let faults = p.generate(4, 10_000, &targets);
        assert!(!faults.is_empty());
        for fault in &faults {
            let Fault::PausePeriodic(f) = fault else {
                panic!("only periodic pauses: {fault:?}")
            };
            assert!(f.node.starts_with('s') && (1..=500).contains(&f.on_ms), "{f:?}");
            let cycles = (f.until_ms - f.at_ms).div_ceil(f.on_ms + f.off_ms);
            assert!((1..=3).contains(&cycles), "{f:?}");
            fault.validate(&["s1".into(), "s2".into()]).unwrap();
        }
        let off: FaultProfile = serde_json::from_str(r#"{"pause_probability": 0.5}"#).unwrap();
        let pauses_only = off.generate(4, 10_000, &targets);
        assert!(pauses_only.iter().all(|f| matches!(f, Fault::Pause(_))));
    }
}
