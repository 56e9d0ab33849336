//! Per-node clocks.
//!
//! madsim has one global clock (true time). Real machines do not: each node here has a
//! **monotonic** clock that runs at `1 + drift_ppm·1e-6` times true speed (re-anchored
//! whenever the drift changes, so it never goes backwards) and a **wall** clock that is the
//! monotonic clock plus an offset, which an operator or NTP can step forwards or backwards.
//! Redis expires keys by its wall clock; clients time their leases by their monotonic clock.
//! Protocol code reads only these clocks, never true time.
//!
//! [`Clocks`] is the world's clock subsystem: every node's clock, drawn from the scenario's
//! `[clocks]` at the node's creation.

use crate::nodes::{NodeIdx, Subsystem};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Clock settings of a scenario: each node's drift and wall offset are drawn uniformly
/// within the maxima from the seed, unless set per node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockConfig {
    /// Largest drift, in ppm either way, for nodes not listed in `nodes`.
    #[serde(default)]
    pub drift_ppm_max: i64,
    /// Largest wall-clock offset, in ms either way, for nodes not listed in `nodes`.
    #[serde(default)]
    pub offset_ms_max: i64,
    /// Fixed settings for named nodes.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeClockConfig>,
}

/// One node's fixed clock settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClockConfig {
    /// Drift in ppm (positive = fast).
    #[serde(default)]
    pub drift_ppm: i64,
    /// Wall-clock offset in ms.
    #[serde(default)]
    pub offset_ms: i64,
}

impl ClockConfig {
    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(0..DRIFT_PPM_LIMIT).contains(&self.drift_ppm_max) {
            return Err("clocks.drift_ppm_max must be in 0..500000".into());
        }
        if self.offset_ms_max < 0 {
            return Err("clocks.offset_ms_max must not be negative".into());
        }
        for (name, c) in &self.nodes {
            if c.drift_ppm.abs() >= DRIFT_PPM_LIMIT {
                return Err(format!(
                    "clocks.nodes.{name}.drift_ppm must be in -499999..500000"
                ));
            }
        }
        Ok(())
    }

    /// A new node's clock: its fixed settings, or drift and offset drawn from madsim's seeded
    /// RNG within the maxima.
    fn initial(&self, name: &str) -> NodeClock {
        if let Some(c) = self.nodes.get(name) {
            return NodeClock::new(c.drift_ppm, c.offset_ms * 1_000_000);
        }
        let mut rng = madsim::rand::thread_rng();
        let drift = if self.drift_ppm_max > 0 {
            rng.gen_range(-self.drift_ppm_max..=self.drift_ppm_max)
        } else {
            0
        };
        let offset_ms = if self.offset_ms_max > 0 {
            rng.gen_range(-self.offset_ms_max..=self.offset_ms_max)
        } else {
            0
        };
        NodeClock::new(drift, offset_ms * 1_000_000)
    }
}

/// Every node's clock (the world's clock subsystem).
pub(crate) struct Clocks {
    config: ClockConfig,
    clocks: Vec<NodeClock>,
}

impl Clocks {
    pub(crate) fn new(config: ClockConfig) -> Self {
        Clocks {
            config,
            clocks: vec![],
        }
    }

    /// The clock of a new node, the next index (the nemesis' clock is the true one).
    pub(crate) fn add(&mut self, idx: NodeIdx, name: &str, is_nemesis: bool) {
        assert_eq!(idx, self.clocks.len(), "clocks are added in node order");
        let clock = if is_nemesis {
            NodeClock::new(0, 0)
        } else {
            self.config.initial(name)
        };
        self.clocks.push(clock);
    }

    pub(crate) fn get(&self, idx: NodeIdx) -> &NodeClock {
        &self.clocks[idx]
    }

    pub(crate) fn get_mut(&mut self, idx: NodeIdx) -> &mut NodeClock {
        &mut self.clocks[idx]
    }
}

/// A crash keeps the clock as it is: a machine's clock (and any offset or drift a fault gave
/// it) survives a reboot, and neither the liveness phase nor a restart resets it.
impl Subsystem for Clocks {}

/// One node's clocks, as a pure function of true time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeClock {
    /// True time (ns) at the last re-anchoring.
    anchor_true_ns: u64,
    /// Monotonic reading (ns) at the last re-anchoring.
    anchor_mono_ns: u64,
    /// Rate error in parts per million (positive = runs fast).
    drift_ppm: i64,
    /// Wall clock minus monotonic clock, in ns.
    offset_ns: i64,
}

/// A drift at or beyond -1e6 ppm would stop or reverse the clock.
const DRIFT_PPM_LIMIT: i64 = 500_000;

impl NodeClock {
    /// A clock that reads 0 (monotonic) and `offset_ns` (wall) at true time 0.
    pub fn new(drift_ppm: i64, offset_ns: i64) -> Self {
        assert!(
            drift_ppm.abs() < DRIFT_PPM_LIMIT,
            "drift of {drift_ppm} ppm is not a clock"
        );
        NodeClock {
            anchor_true_ns: 0,
            anchor_mono_ns: 0,
            drift_ppm,
            offset_ns,
        }
    }

    /// The monotonic reading at true time `true_ns`.
    pub fn mono_ns(&self, true_ns: u64) -> u64 {
        let elapsed = true_ns.saturating_sub(self.anchor_true_ns) as i128;
        let scaled = elapsed * (1_000_000 + self.drift_ppm as i128) / 1_000_000;
        self.anchor_mono_ns + scaled as u64
    }

    /// The wall reading (ns, may be negative) at true time `true_ns`.
    pub fn wall_ns(&self, true_ns: u64) -> i64 {
        self.mono_ns(true_ns) as i64 + self.offset_ns
    }

    /// Steps the wall clock by `delta_ns` (negative = backwards). The monotonic clock is
    /// untouched, as on a real machine.
    pub fn jump(&mut self, delta_ns: i64) {
        self.offset_ns += delta_ns;
    }

    /// Changes the drift from true time `true_ns` on; readings stay continuous.
    pub fn set_drift(&mut self, true_ns: u64, drift_ppm: i64) {
        assert!(
            drift_ppm.abs() < DRIFT_PPM_LIMIT,
            "drift of {drift_ppm} ppm is not a clock"
        );
        self.anchor_mono_ns = self.mono_ns(true_ns);
        self.anchor_true_ns = true_ns;
        self.drift_ppm = drift_ppm;
    }

    /// The current drift in ppm.
    pub fn drift_ppm(&self) -> i64 {
        self.drift_ppm
    }

    /// The current wall offset in ns.
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// How much true time passes while this clock advances by `local` (rounded up, so a
    /// local sleep never ends early).
    pub fn true_duration(&self, local: Duration) -> Duration {
        let local_ns = local.as_nanos();
        let rate = (1_000_000 + self.drift_ppm) as u128;
        Duration::from_nanos((local_ns * 1_000_000).div_ceil(rate) as u64)
    }

    /// The true time at which the monotonic clock reads `mono_ns` (given the current drift),
    /// or `true_ns_now` if it already does.
    pub fn true_ns_at_mono(&self, true_ns_now: u64, mono_ns: u64) -> u64 {
        let now = self.mono_ns(true_ns_now);
        if mono_ns <= now {
            return true_ns_now;
        }
        true_ns_now
            + self
                .true_duration(Duration::from_nanos(mono_ns - now))
                .as_nanos() as u64
    }
}
