//! `loss`: a period of message loss on every link, with `probability` per message, for
//! `duration_ms`. A later period replaces an earlier one; when it ends, the network's own
//! `[network] loss_probability` applies again.
//!
//! Live mode: a window of the run's loss plan, which every proxy applies as TCP experiences
//! loss, by resends after the RTO (`live/src/run/wire.rs`).

use super::draw::Draw;
use super::drawing::{Drawing, Lane, Shape};
use super::spec::{self, NodeKey, RandomSpec, Space, Spec};
use crate::world::World;
use locksim_check::history::{Event, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[faults]] kind = "loss"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loss {
    /// When, in true ms since the start.
    pub at_ms: u64,
    /// How long, in true ms.
    pub duration_ms: u64,
    /// Loss probability per message during the period.
    pub probability: f64,
}

impl Spec for Loss {
    type Random = Random;
    const DRAWINGS: &'static [Drawing] = &[Drawing {
        op: Op::Loss,
        lane: Lane::Top,
        shape: Shape::Hidden,
        label: super::drawing::no_label,
        caption,
    }];

    fn at_ms(&self) -> Option<u64> {
        Some(self.at_ms)
    }
    fn nodes(&self) -> Vec<&String> {
        vec![]
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        vec![]
    }
    fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.probability) {
            return Err(format!(
                "probability must be between 0 and 1, not {}",
                self.probability
            ));
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let (p, at, ms) = (self.probability, self.at_ms, self.duration_ms);
        format!("message loss {p} at {at} ms for {ms} ms")
    }
    fn apply(&self, world: &World, _why: &str) {
        let epoch = world.start_loss(self.probability);
        world.record(
            Event::nemesis(Op::Loss)
                .value(self.duration_ms as i64)
                .detail(format!("loss probability {}", self.probability)),
        );
        world.after(Duration::from_millis(self.duration_ms), move |world| {
            if world.end_loss(epoch) {
                world.record_fault(Op::Loss, None, "loss period over".into());
            }
        });
    }
}

fn caption(e: &Event) -> String {
    format!("message loss began at {:.0} ms", e.time_ms())
}

/// `[faults_random]` keys of loss periods.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Random {
    /// Chance per second that a period of message loss starts (not per message: that is
    /// `[network] loss_probability`).
    #[serde(default)]
    pub loss_period_probability: f64,
    /// Loss probability per message during such a period.
    #[serde(default = "d_rate")]
    pub loss_rate: f64,
    /// Longest loss period, in ms.
    #[serde(default = "d_max")]
    pub loss_ms_max: u64,
}

fn d_rate() -> f64 {
    0.5
}
fn d_max() -> u64 {
    2_000
}

impl Default for Random {
    fn default() -> Self {
        Random {
            loss_period_probability: 0.0,
            loss_rate: d_rate(),
            loss_ms_max: d_max(),
        }
    }
}

impl RandomSpec for Random {
    type Fault = Loss;

    fn probability(&self) -> f64 {
        self.loss_period_probability
    }
    fn validate(&self) -> Result<(), String> {
        spec::check_probability("loss_period_probability", self.loss_period_probability)?;
        spec::check_probability("loss_rate", self.loss_rate)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        None
    }
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> Loss {
        Loss {
            at_ms: space.at(d),
            duration_ms: d.u64_in(1, self.loss_ms_max.max(1)),
            probability: self.loss_rate,
        }
    }
    fn describe(&self, space: &Space) -> String {
        format!(
            "message loss {} for 1..={} ms, {}",
            self.loss_rate,
            self.loss_ms_max,
            space.describe_when()
        )
    }
}
