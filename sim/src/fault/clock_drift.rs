//! `clock_drift`: a node's clock rate changes to `drift_ppm` (a failing oscillator, a VM
//! starved of CPU). Readings stay continuous; local sleeps and timeouts stretch or shrink.
//!
//! Live mode: as a clock jump, through the server's clock shim, which re-anchors its
//! readings so that they stay continuous (`live/src/deploy/shim.rs`).

use super::clock_jump::clock_nodes;
use super::draw::{pick, Draw};
use super::drawing::{target, Drawing, Glyph, Lane, Shape};
use super::spec::{self, NodeKey, RandomSpec, Space, Spec};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};

/// Drifts at or beyond this, in ppm either way, are not clocks.
const PPM_LIMIT: i64 = 500_000;

/// `[[faults]] kind = "clock_drift"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockDrift {
    /// The node whose clock drifts.
    pub node: String,
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// New rate error in ppm (positive = runs fast).
    pub drift_ppm: i64,
}

impl Spec for ClockDrift {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[Drawing {
        op: Op::ClockDrift,
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
        if self.drift_ppm.abs() >= PPM_LIMIT {
            return Err(format!(
                "drift_ppm {} is not a clock (|ppm| < 500000)",
                self.drift_ppm
            ));
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let (node, at, ppm) = (&self.node, self.at_ms, self.drift_ppm);
        format!("clock drift on {node} at {at} ms to {ppm:+} ppm")
    }
    fn apply(&self, world: &World, _why: &str) {
        let idx = world.node(&self.node).expect("fault targets are validated");
        world.clock_drift(idx, self.drift_ppm);
        world.record(
            Event::nemesis(Op::ClockDrift)
                .target(&self.node)
                .value(self.drift_ppm),
        );
    }
}

fn label(e: &Event) -> Option<String> {
    e.value.map(|v| format!("{v:+} ppm"))
}

fn caption(e: &Event) -> String {
    let (who, ppm) = (target(e), e.value.unwrap_or(0));
    format!("{who}'s clock drift became {ppm} ppm at {:.0} ms", e.time_ms())
}

/// `[faults_random]` keys of drift changes (on the nodes of `clock_nodes`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a node's drift changes.
    #[serde(default)]
    pub clock_drift_probability: f64,
    /// Largest drift, in ppm, either way.
    #[serde(default = "d_max")]
    pub clock_drift_ppm_max: i64,
}

fn d_max() -> i64 {
    200
}

impl Default for Random {
    fn default() -> Self {
        Random {
            clock_drift_probability: 0.0,
            clock_drift_ppm_max: d_max(),
        }
    }
}

impl RandomSpec for Random {
    type Fault = ClockDrift;

    fn probability(&self) -> f64 {
        self.clock_drift_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("clock_drift_probability", self.clock_drift_probability)?;
        if !(0..PPM_LIMIT).contains(&self.clock_drift_ppm_max) {
            return Err("faults_random.clock_drift_ppm_max must be in 0..500000".into());
        }
        Ok(())
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        // `clock_nodes` belongs to `clock_jump`'s section: one list for both.
        Some(clock_nodes(None))
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> ClockDrift {
        let max = self.clock_drift_ppm_max;
        ClockDrift {
            node: pick(d, &space.nodes),
            at_ms: space.at(d),
            drift_ppm: d.i64_in(-max, max),
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "clock drift on {} up to ±{} ppm, {}",
            space.nodes.join(", "),
            self.clock_drift_ppm_max,
            space.describe_when()
        )
    }
}
