//! Faults as data: a scripted list, or a seeded random profile that expands to one.
//!
//! Every fault is a plain value (`at_ms`, `kind`, `node`, `duration_ms`, ...), so a fault
//! schedule can be written by hand, generated from a seed, printed, saved as a scenario and
//! shrunk by proptest. Paired verbs undo each other: a `pause` resumes after `duration_ms`,
//! a `crash` restarts after `restart_after_ms` (or never), a `partition` heals after
//! `duration_ms`, a `loss` period ends after `duration_ms`.

use crate::history::{Event, Kind, Op};
use crate::world::{NodeIdx, Role, World, NEMESIS};
use madsim::runtime::Handle;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn first() -> u32 {
    1
}

/// One fault. Time-triggered faults carry `at_ms` (true time since the start of the run);
/// `pause` and `crash` can instead fire at a named point in a node's code (`point`) on its
/// `occurrence`-th passage (from 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Stop-the-world pause of a node (a GC pause, a VM migration, SIGSTOP).
    Pause {
        /// The node to pause.
        node: String,
        /// When, in true ms since the start (or use `point`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<u64>,
        /// A named point in the node's code, e.g. `before_write`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<String>,
        /// Which passage through `point` triggers the pause, from 1.
        #[serde(default = "first", skip_serializing_if = "is_first")]
        occurrence: u32,
        /// How long the node stays paused, in true ms.
        duration_ms: u64,
    },
    /// A crash: the node loses everything it had not persisted.
    Crash {
        /// The node to crash.
        node: String,
        /// When, in true ms since the start (or use `point`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<u64>,
        /// A named point in the node's code, e.g. `after_grant`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<String>,
        /// Which passage through `point` triggers the crash, from 1.
        #[serde(default = "first", skip_serializing_if = "is_first")]
        occurrence: u32,
        /// Restart after this many true ms; never if absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_after_ms: Option<u64>,
    },
    /// Cut links for a while. Give `isolate` (these nodes from all others) or `groups`
    /// (no links between different groups); `one_way` cuts only from earlier groups (or the
    /// isolated nodes) towards later ones (or everyone else).
    Partition {
        /// When, in true ms since the start.
        at_ms: u64,
        /// How long until the links heal, in true ms.
        duration_ms: u64,
        /// Nodes cut off from everyone else.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        isolate: Vec<String>,
        /// Groups that cannot reach each other.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        groups: Vec<Vec<String>>,
        /// Cut only one direction.
        #[serde(default, skip_serializing_if = "is_false")]
        one_way: bool,
    },
    /// Steps a node's wall clock (an operator, or NTP stepping it).
    ClockJump {
        /// The node whose clock jumps.
        node: String,
        /// When, in true ms since the start.
        at_ms: u64,
        /// By how much, in ms (negative = backwards).
        delta_ms: i64,
    },
    /// Changes a node's clock drift.
    ClockDrift {
        /// The node whose clock drifts.
        node: String,
        /// When, in true ms since the start.
        at_ms: u64,
        /// New rate error in ppm (positive = runs fast).
        drift_ppm: i64,
    },
    /// A period of message loss on every link.
    Loss {
        /// When, in true ms since the start.
        at_ms: u64,
        /// How long, in true ms.
        duration_ms: u64,
        /// Loss probability during the period.
        probability: f64,
    },
    /// The node's disk holds every fsync that would complete during the stall until it ends
    /// (a saturated or failing device): writes stay in the page cache, where a crash loses
    /// them.
    FsyncStall {
        /// The node whose disk stalls.
        node: String,
        /// When, in true ms since the start.
        at_ms: u64,
        /// How long, in true ms.
        duration_ms: u64,
    },
}

fn is_first(n: &u32) -> bool {
    *n == 1
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Fault {
    /// The fault's kind, as written in files.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Pause { .. } => FaultKind::Pause,
            Fault::Crash { .. } => FaultKind::Crash,
            Fault::Partition { .. } => FaultKind::Partition,
            Fault::ClockJump { .. } => FaultKind::ClockJump,
            Fault::ClockDrift { .. } => FaultKind::ClockDrift,
            Fault::Loss { .. } => FaultKind::Loss,
            Fault::FsyncStall { .. } => FaultKind::FsyncStall,
        }
    }

    /// When a time-triggered fault fires (None for point-triggered ones).
    pub fn at_ms(&self) -> Option<u64> {
        match self {
            Fault::Pause { at_ms, point, .. } | Fault::Crash { at_ms, point, .. } => {
                if point.is_some() {
                    None
                } else {
                    *at_ms
                }
            }
            Fault::Partition { at_ms, .. }
            | Fault::ClockJump { at_ms, .. }
            | Fault::ClockDrift { at_ms, .. }
            | Fault::Loss { at_ms, .. }
            | Fault::FsyncStall { at_ms, .. } => Some(*at_ms),
        }
    }

    /// Every node name the fault mentions.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            Fault::Pause { node, .. }
            | Fault::Crash { node, .. }
            | Fault::ClockJump { node, .. }
            | Fault::ClockDrift { node, .. }
            | Fault::FsyncStall { node, .. } => vec![node.as_str()],
            Fault::Partition {
                isolate, groups, ..
            } => isolate
                .iter()
                .chain(groups.iter().flatten())
                .map(String::as_str)
                .collect(),
            Fault::Loss { .. } => vec![],
        }
    }

    /// The same fault with every node name replaced by `f(name)`; `None` if `f` has no
    /// answer for one of them.
    pub fn map_nodes(&self, mut f: impl FnMut(&str) -> Option<String>) -> Option<Fault> {
        let mut fault = self.clone();
        match &mut fault {
            Fault::Pause { node, .. }
            | Fault::Crash { node, .. }
            | Fault::ClockJump { node, .. }
            | Fault::ClockDrift { node, .. }
            | Fault::FsyncStall { node, .. } => *node = f(node)?,
            Fault::Partition {
                isolate, groups, ..
            } => {
                for node in isolate.iter_mut().chain(groups.iter_mut().flatten()) {
                    *node = f(node)?;
                }
            }
            Fault::Loss { .. } => {}
        }
        Some(fault)
    }

    /// Checks the fault against the run's node names and the roles its deployment can
    /// answer at fire time (`@primary`, `@holder`, ...); the error says what is wrong.
    pub fn validate(&self, known_nodes: &[String]) -> Result<(), String> {
        for n in self.nodes() {
            if !known_nodes.iter().any(|k| k == n) {
                let (what, list): (_, Vec<&str>) = if is_role(n) {
                    let roles = known_nodes.iter().filter(|k| is_role(k));
                    ("role", roles.map(String::as_str).collect())
                } else {
                    let nodes = known_nodes.iter().filter(|k| !is_role(k));
                    ("node", nodes.map(String::as_str).collect())
                };
                return Err(format!(
                    "unknown {what} `{n}` ({what}s in this scenario: {})",
                    if list.is_empty() {
                        "none".to_owned()
                    } else {
                        list.join(", ")
                    }
                ));
            }
        }
        match self {
            Fault::Pause {
                at_ms,
                point,
                occurrence,
                ..
            }
            | Fault::Crash {
                at_ms,
                point,
                occurrence,
                ..
            } => {
                if at_ms.is_some() == point.is_some() {
                    return Err("give exactly one of `at_ms` and `point`".into());
                }
                if *occurrence == 0 {
                    return Err("`occurrence` counts from 1".into());
                }
                if point.is_some() && self.nodes().iter().any(|n| is_role(n)) {
                    return Err("a fault at a named point needs a node, not a role".into());
                }
            }
            Fault::Partition {
                isolate, groups, ..
            } => {
                if isolate.is_empty() == groups.is_empty() {
                    return Err("give exactly one of `isolate` and `groups`".into());
                }
                if !groups.is_empty() && groups.len() < 2 {
                    return Err("`groups` needs at least two groups".into());
                }
            }
            Fault::ClockDrift { drift_ppm, .. } => {
                if drift_ppm.abs() >= 500_000 {
                    return Err(format!(
                        "drift_ppm {drift_ppm} is not a clock (|ppm| < 500000)"
                    ));
                }
            }
            Fault::Loss { probability, .. } => {
                if !(0.0..=1.0).contains(probability) {
                    return Err(format!(
                        "probability must be between 0 and 1, not {probability}"
                    ));
                }
            }
            Fault::ClockJump { .. } | Fault::FsyncStall { .. } => {}
        }
        Ok(())
    }
}

/// The kinds of fault, for profiles, swarm testing and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// See [`Fault::Pause`].
    Pause,
    /// See [`Fault::Crash`].
    Crash,
    /// See [`Fault::Partition`].
    Partition,
    /// See [`Fault::ClockJump`].
    ClockJump,
    /// See [`Fault::ClockDrift`].
    ClockDrift,
    /// See [`Fault::Loss`].
    Loss,
    /// See [`Fault::FsyncStall`].
    FsyncStall,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Pause,
        FaultKind::Crash,
        FaultKind::Partition,
        FaultKind::ClockJump,
        FaultKind::ClockDrift,
        FaultKind::Loss,
        FaultKind::FsyncStall,
    ];
}

/// A seeded random fault profile: for each second of the run and each kind, a fault starts
/// with the kind's probability, at a uniform instant in that second, on a uniform target.
/// Expanded to a plain fault list before the run ([`FaultProfile::generate`]), so random
/// faults are as replayable and printable as scripted ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultProfile {
    /// Chance per second that some node is paused.
    #[serde(default)]
    pub pause_probability: f64,
    /// Shortest pause, in ms.
    #[serde(default = "d_pause_min")]
    pub pause_ms_min: u64,
    /// Longest pause, in ms.
    #[serde(default = "d_pause_max")]
    pub pause_ms_max: u64,
    /// Nodes that may be paused (default: the clients). In every node list, `@servers`
    /// and `@clients` stand for all nodes of that role.
    #[serde(default)]
    pub pause_nodes: Vec<String>,
    /// Chance per second that some node crashes.
    #[serde(default)]
    pub crash_probability: f64,
    /// Shortest downtime before the restart, in ms.
    #[serde(default = "d_down_min")]
    pub crash_down_ms_min: u64,
    /// Longest downtime before the restart, in ms.
    #[serde(default = "d_down_max")]
    pub crash_down_ms_max: u64,
    /// Nodes that may crash (default: the servers).
    #[serde(default)]
    pub crash_nodes: Vec<String>,
    /// Chance per second that a node is isolated.
    #[serde(default)]
    pub partition_probability: f64,
    /// Shortest partition, in ms.
    #[serde(default = "d_part_min")]
    pub partition_ms_min: u64,
    /// Longest partition, in ms.
    #[serde(default = "d_part_max")]
    pub partition_ms_max: u64,
    /// Nodes that may be isolated (default: servers and clients).
    #[serde(default)]
    pub partition_nodes: Vec<String>,
    /// Chance per second that a node's wall clock jumps.
    #[serde(default)]
    pub clock_jump_probability: f64,
    /// Smallest jump, in ms, either way (1 by default; equal to the largest, every jump has
    /// the same size, as the phase diagrams need).
    #[serde(default = "d_jump_min", skip_serializing_if = "is_one")]
    pub clock_jump_ms_min: u64,
    /// Largest jump, in ms, either way.
    #[serde(default = "d_jump_max")]
    pub clock_jump_ms_max: u64,
    /// Whether jumps may go backwards too.
    #[serde(default = "yes")]
    pub clock_jump_backward: bool,
    /// Chance per second that a node's drift changes.
    #[serde(default)]
    pub clock_drift_probability: f64,
    /// Largest drift, in ppm, either way.
    #[serde(default = "d_drift_max")]
    pub clock_drift_ppm_max: i64,
    /// Nodes whose clocks may misbehave (default: servers and clients).
    #[serde(default)]
    pub clock_nodes: Vec<String>,
    /// Chance per second of a period of message loss.
    #[serde(default)]
    pub loss_probability: f64,
    /// Loss probability during such a period.
    #[serde(default = "d_loss_rate")]
    pub loss_rate: f64,
    /// Length of a loss period, in ms.
    #[serde(default = "d_part_max")]
    pub loss_ms_max: u64,
    /// Chance per second that a node's fsyncs stall.
    #[serde(default)]
    pub fsync_stall_probability: f64,
    /// Longest stall, in ms.
    #[serde(default = "d_part_max")]
    pub fsync_stall_ms_max: u64,
    /// Nodes whose disks may stall (default: the servers).
    #[serde(default)]
    pub fsync_stall_nodes: Vec<String>,
}

/// The same as an empty `[faults_random]` table: no faults, and the ranges a profile gets
/// when it only sets probabilities.
impl Default for FaultProfile {
    fn default() -> Self {
        FaultProfile {
            pause_probability: 0.0,
            pause_ms_min: d_pause_min(),
            pause_ms_max: d_pause_max(),
            pause_nodes: vec![],
            crash_probability: 0.0,
            crash_down_ms_min: d_down_min(),
            crash_down_ms_max: d_down_max(),
            crash_nodes: vec![],
            partition_probability: 0.0,
            partition_ms_min: d_part_min(),
            partition_ms_max: d_part_max(),
            partition_nodes: vec![],
            clock_jump_probability: 0.0,
            clock_jump_ms_min: d_jump_min(),
            clock_jump_ms_max: d_jump_max(),
            clock_jump_backward: true,
            clock_drift_probability: 0.0,
            clock_drift_ppm_max: d_drift_max(),
            clock_nodes: vec![],
            loss_probability: 0.0,
            loss_rate: d_loss_rate(),
            loss_ms_max: d_part_max(),
            fsync_stall_probability: 0.0,
            fsync_stall_ms_max: d_part_max(),
            fsync_stall_nodes: vec![],
        }
    }
}

fn yes() -> bool {
    true
}
fn d_pause_min() -> u64 {
    50
}
fn d_pause_max() -> u64 {
    2_000
}
fn d_down_min() -> u64 {
    0
}
fn d_down_max() -> u64 {
    2_000
}
fn d_part_min() -> u64 {
    100
}
fn d_part_max() -> u64 {
    2_000
}
fn d_jump_min() -> u64 {
    1
}
fn is_one(n: &u64) -> bool {
    *n == 1
}
fn d_jump_max() -> u64 {
    2_000
}
fn d_drift_max() -> i64 {
    200
}
fn d_loss_rate() -> f64 {
    0.5
}

/// In a profile's node lists: every server.
pub const ROLE_SERVERS: &str = "@servers";
/// In a profile's node lists: every client.
pub const ROLE_CLIENTS: &str = "@clients";

/// The nodes each kind of fault may hit (see [`FaultProfile::node_choices`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeChoices {
    /// Nodes that may be paused.
    pub pause: Vec<String>,
    /// Nodes that may crash.
    pub crash: Vec<String>,
    /// Nodes that may be isolated.
    pub partition: Vec<String>,
    /// Nodes whose clocks may jump or drift.
    pub clock: Vec<String>,
    /// Nodes whose disks may stall.
    pub fsync_stall: Vec<String>,
}

/// The nodes of a run by role, for choosing fault targets.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    /// Lock servers.
    pub servers: Vec<String>,
    /// Clients.
    pub clients: Vec<String>,
}

impl FaultProfile {
    /// Whether the profile can produce any fault at all.
    pub fn is_active(&self) -> bool {
        [
            self.pause_probability,
            self.crash_probability,
            self.partition_probability,
            self.clock_jump_probability,
            self.clock_drift_probability,
            self.loss_probability,
            self.fsync_stall_probability,
        ]
        .iter()
        .any(|p| *p > 0.0)
    }

    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("pause_probability", self.pause_probability),
            ("crash_probability", self.crash_probability),
            ("partition_probability", self.partition_probability),
            ("clock_jump_probability", self.clock_jump_probability),
            ("clock_drift_probability", self.clock_drift_probability),
            ("loss_probability", self.loss_probability),
            ("loss_rate", self.loss_rate),
            ("fsync_stall_probability", self.fsync_stall_probability),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "faults_random.{name} must be between 0 and 1, not {p}"
                ));
            }
        }
        for (name, min, max) in [
            ("pause_ms", self.pause_ms_min, self.pause_ms_max),
            (
                "crash_down_ms",
                self.crash_down_ms_min,
                self.crash_down_ms_max,
            ),
            ("partition_ms", self.partition_ms_min, self.partition_ms_max),
        ] {
            if min > max {
                return Err(format!(
                    "faults_random.{name}_min ({min}) exceeds {name}_max ({max})"
                ));
            }
        }
        if !(0..500_000).contains(&self.clock_drift_ppm_max) {
            return Err("faults_random.clock_drift_ppm_max must be in 0..500000".into());
        }
        Ok(())
    }

    /// The nodes each kind of fault may hit: the profile's lists with `@servers` and
    /// `@clients` expanded, or by default pauses on clients, crashes on servers, partitions
    /// and clock faults on both.
    pub fn node_choices(&self, targets: &Targets) -> NodeChoices {
        let everyone: Vec<String> = targets
            .servers
            .iter()
            .chain(&targets.clients)
            .cloned()
            .collect();
        let expand = |list: &Vec<String>, default: &Vec<String>| {
            if list.is_empty() {
                return default.clone();
            }
            let mut nodes = Vec::new();
            for name in list {
                match name.as_str() {
                    ROLE_SERVERS => nodes.extend(targets.servers.iter().cloned()),
                    ROLE_CLIENTS => nodes.extend(targets.clients.iter().cloned()),
                    _ => nodes.push(name.clone()),
                }
            }
            nodes
        };
        NodeChoices {
            pause: expand(&self.pause_nodes, &targets.clients),
            crash: expand(&self.crash_nodes, &targets.servers),
            partition: expand(&self.partition_nodes, &everyone),
            clock: expand(&self.clock_nodes, &everyone),
            fsync_stall: expand(&self.fsync_stall_nodes, &targets.servers),
        }
    }

    /// Expands the profile into a concrete fault list for a run of `duration_ms`. Depends
    /// only on (profile, targets, seed, duration).
    pub fn generate(&self, seed: u64, duration_ms: u64, targets: &Targets) -> Vec<Fault> {
        // A stream of its own (not madsim's), so the schedule does not shift when the
        // simulation draws a different number of random values.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6c6f_636b_7369_6d21);
        let NodeChoices {
            pause: pause_nodes,
            crash: crash_nodes,
            partition: partition_nodes,
            clock: clock_nodes,
            fsync_stall: stall_nodes,
        } = self.node_choices(targets);
        let mut faults = Vec::new();
        for second in 0..duration_ms.div_ceil(1000) {
            let start = second * 1000;
            let end = (start + 1000).min(duration_ms);
            let at = |rng: &mut rand_chacha::ChaCha8Rng| rng.gen_range(start..end.max(start + 1));
            if hit(&mut rng, self.pause_probability, &pause_nodes) {
                faults.push(Fault::Pause {
                    node: pick(&mut rng, &pause_nodes),
                    at_ms: Some(at(&mut rng)),
                    point: None,
                    occurrence: 1,
                    duration_ms: rng.gen_range(self.pause_ms_min..=self.pause_ms_max),
                });
            }
            if hit(&mut rng, self.crash_probability, &crash_nodes) {
                faults.push(Fault::Crash {
                    node: pick(&mut rng, &crash_nodes),
                    at_ms: Some(at(&mut rng)),
                    point: None,
                    occurrence: 1,
                    restart_after_ms: Some(
                        rng.gen_range(self.crash_down_ms_min..=self.crash_down_ms_max),
                    ),
                });
            }
            if hit(&mut rng, self.partition_probability, &partition_nodes) {
                faults.push(Fault::Partition {
                    at_ms: at(&mut rng),
                    duration_ms: rng.gen_range(self.partition_ms_min..=self.partition_ms_max),
                    isolate: vec![pick(&mut rng, &partition_nodes)],
                    groups: vec![],
                    one_way: rng.gen_bool(0.25),
                });
            }
            if hit(&mut rng, self.clock_jump_probability, &clock_nodes) {
                let max = self.clock_jump_ms_max as i64;
                let min = (self.clock_jump_ms_min as i64).clamp(1, max.max(1));
                let node = pick(&mut rng, &clock_nodes);
                let at_ms = at(&mut rng);
                let delta_ms = match (self.clock_jump_backward, min) {
                    // The draw of profiles without a minimum, unchanged.
                    (true, 1) => rng.gen_range(-max..=max.max(1)),
                    (false, _) => rng.gen_range(min..=max.max(min)),
                    (true, _) => {
                        let size = rng.gen_range(min..=max.max(min));
                        if rng.gen_bool(0.5) {
                            -size
                        } else {
                            size
                        }
                    }
                };
                faults.push(Fault::ClockJump {
                    node,
                    at_ms,
                    delta_ms,
                });
            }
            if hit(&mut rng, self.clock_drift_probability, &clock_nodes) {
                let max = self.clock_drift_ppm_max;
                faults.push(Fault::ClockDrift {
                    node: pick(&mut rng, &clock_nodes),
                    at_ms: at(&mut rng),
                    drift_ppm: rng.gen_range(-max..=max),
                });
            }
            if self.loss_probability > 0.0 && rng.gen_bool(self.loss_probability) {
                faults.push(Fault::Loss {
                    at_ms: at(&mut rng),
                    duration_ms: rng.gen_range(1..=self.loss_ms_max.max(1)),
                    probability: self.loss_rate,
                });
            }
            if hit(&mut rng, self.fsync_stall_probability, &stall_nodes) {
                faults.push(Fault::FsyncStall {
                    node: pick(&mut rng, &stall_nodes),
                    at_ms: at(&mut rng),
                    duration_ms: rng.gen_range(1..=self.fsync_stall_ms_max.max(1)),
                });
            }
        }
        faults.sort_by_key(|f| f.at_ms());
        faults
    }
}

fn hit(rng: &mut rand_chacha::ChaCha8Rng, p: f64, nodes: &[String]) -> bool {
    p > 0.0 && !nodes.is_empty() && rng.gen_bool(p)
}

fn pick(rng: &mut rand_chacha::ChaCha8Rng, nodes: &[String]) -> String {
    nodes[rng.gen_range(0..nodes.len())].clone()
}

/// In a fault or a profile's node list: whoever a role names when the fault fires.
pub fn is_role(name: &str) -> bool {
    name.starts_with('@')
}

/// Target: the node the deployment names primary now (replicated Redis: the primary of the
/// sentinels' newest configuration).
pub const ROLE_PRIMARY: &str = "@primary";
/// Target: the current leader (Raft).
pub const ROLE_LEADER: &str = "@leader";
/// Target: the client inside its critical section now (the first to enter, if several).
pub const ROLE_HOLDER: &str = "@holder";

/// Answers "who has this role now?" when a fault fires (see [`World::answer_role`]).
pub type RoleResolver = Arc<dyn Fn(&World) -> Option<NodeIdx> + Send + Sync>;

struct ArmedPoint {
    node: NodeIdx,
    point: String,
    occurrence: u32,
    hits: u32,
    fault: Fault,
}

/// The nemesis' part of the world: faults armed at named points, and role resolvers.
pub(crate) struct FaultState {
    points: Vec<ArmedPoint>,
    /// Point faults of nodes not added yet.
    pending_points: Vec<Fault>,
    resolvers: BTreeMap<String, RoleResolver>,
}

impl FaultState {
    pub(crate) fn new(faults: &[Fault]) -> Self {
        FaultState {
            points: vec![],
            pending_points: faults
                .iter()
                .filter(|f| f.at_ms().is_none())
                .cloned()
                .collect(),
            resolvers: BTreeMap::new(),
        }
    }

    /// Arms the point faults of the node just added.
    pub(crate) fn arm_points(&mut self, idx: NodeIdx, name: &str) {
        let pending = std::mem::take(&mut self.pending_points);
        for fault in pending {
            match &fault {
                Fault::Pause {
                    node,
                    point: Some(point),
                    occurrence,
                    ..
                }
                | Fault::Crash {
                    node,
                    point: Some(point),
                    occurrence,
                    ..
                } if *node == name => self.points.push(ArmedPoint {
                    node: idx,
                    point: point.clone(),
                    occurrence: *occurrence,
                    hits: 0,
                    fault: fault.clone(),
                }),
                _ => self.pending_points.push(fault),
            }
        }
    }
}

/// A fault in words, e.g. `pause c1 at before_write (passage 1) for 1100 ms`.
pub fn describe_fault(fault: &Fault) -> String {
    let when = |at_ms: &Option<u64>, point: &Option<String>, occurrence: &u32| match point {
        Some(p) => format!("at {p} (passage {occurrence})"),
        None => format!("at {} ms", at_ms.unwrap_or(0)),
    };
    match fault {
        Fault::Pause {
            node,
            at_ms,
            point,
            occurrence,
            duration_ms,
        } => format!(
            "pause {node} {} for {duration_ms} ms",
            when(at_ms, point, occurrence)
        ),
        Fault::Crash {
            node,
            at_ms,
            point,
            occurrence,
            restart_after_ms,
        } => format!(
            "crash {node} {}, {}",
            when(at_ms, point, occurrence),
            restart_after_ms.map_or("no restart".into(), |ms| format!("restart after {ms} ms"))
        ),
        Fault::Partition {
            at_ms,
            duration_ms,
            isolate,
            groups,
            one_way,
        } => {
            let cut = if isolate.is_empty() {
                let groups: Vec<String> = groups.iter().map(|g| g.join(",")).collect();
                format!("groups {}", groups.join(" | "))
            } else {
                format!("isolate {}", isolate.join(","))
            };
            let one_way = if *one_way { " (one way)" } else { "" };
            format!("partition at {at_ms} ms for {duration_ms} ms: {cut}{one_way}")
        }
        Fault::ClockJump {
            node,
            at_ms,
            delta_ms,
        } => format!("clock jump on {node} at {at_ms} ms by {delta_ms:+} ms"),
        Fault::ClockDrift {
            node,
            at_ms,
            drift_ppm,
        } => format!("clock drift on {node} at {at_ms} ms to {drift_ppm:+} ppm"),
        Fault::Loss {
            at_ms,
            duration_ms,
            probability,
        } => format!("message loss {probability} at {at_ms} ms for {duration_ms} ms"),
        Fault::FsyncStall {
            node,
            at_ms,
            duration_ms,
        } => format!("fsync stall on {node} at {at_ms} ms for {duration_ms} ms"),
    }
}

// ---- applying faults: the world's side of each kind ----

impl World {
    /// Runs `undo` on the nemesis after `duration` (true time): how a fault ends.
    fn after(&self, duration: Duration, undo: impl FnOnce(&World) + Send + 'static) {
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            madsim::time::sleep(duration).await;
            undo(&world);
        });
    }

    /// Pauses a node (stop-the-world) for `duration`; `why` goes into the history.
    pub fn pause(&self, idx: NodeIdx, duration: Duration, why: &str) {
        let now = self.now_ns();
        let until = now + duration.as_nanos() as u64;
        let (name, epoch, fresh) = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if !node.alive || node.role == Role::Nemesis {
                return;
            }
            if node.paused_until_ns.is_some_and(|u| u >= until) {
                return; // already paused for longer
            }
            let fresh = node.paused_until_ns.is_none();
            node.paused_until_ns = Some(until);
            node.pause_epoch += 1;
            (node.name.clone(), node.pause_epoch, fresh)
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Pause)
                .target(&name)
                .value(duration.as_millis() as i64)
                .detail(why),
        );
        if fresh {
            Handle::current().pause(self.madsim_node(idx).id());
        }
        self.after(duration, move |world| world.resume_if(idx, Some(epoch)));
    }

    /// Resumes a paused node (any pause if `epoch` is None).
    fn resume_if(&self, idx: NodeIdx, epoch: Option<u64>) {
        let name = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if node.paused_until_ns.is_none() || epoch.is_some_and(|e| e != node.pause_epoch) {
                return;
            }
            node.paused_until_ns = None;
            node.name.clone()
        };
        Handle::current().resume(self.madsim_node(idx).id());
        self.record_fault(Op::Resume, Some(&name), String::new());
    }

    /// Crashes a node: its tasks die, its inboxes and in-flight messages to it are lost, and
    /// whatever it had not persisted is gone. Restarts after `restart_after` if given.
    pub fn crash(&self, idx: NodeIdx, restart_after: Option<Duration>, why: &str) {
        let (name, incarnation) = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if !node.alive || node.role == Role::Nemesis {
                return;
            }
            node.alive = false;
            node.paused_until_ns = None;
            node.incarnation += 1;
            (node.name.clone(), node.incarnation)
        };
        let mut event = Event::new(NEMESIS, Kind::Info, Op::Crash).target(&name);
        if let Some(d) = restart_after {
            event = event.value(d.as_millis() as i64);
        }
        self.record(event.detail(why));
        self.disks().crash(idx);
        Handle::current().kill(self.madsim_node(idx).id());
        if let Some(d) = restart_after {
            self.after(d, move |world| world.restart_if(idx, Some(incarnation)));
        }
    }

    /// Restarts a crashed node (the one crash numbered `incarnation`, or any if None).
    fn restart_if(&self, idx: NodeIdx, incarnation: Option<u64>) {
        let name = {
            let mut state = self.state();
            let node = &mut state.nodes[idx];
            if node.alive || incarnation.is_some_and(|i| i != node.incarnation) {
                return;
            }
            node.alive = true;
            node.name.clone()
        };
        self.record_fault(Op::Restart, Some(&name), String::new());
        Handle::current().restart(self.madsim_node(idx).id());
    }

    /// Cuts the given directed links for `duration`.
    pub fn partition(&self, links: Vec<(NodeIdx, NodeIdx)>, duration: Duration, detail: String) {
        self.state().net.cut(&links);
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Partition)
                .value(duration.as_millis() as i64)
                .detail(detail.clone()),
        );
        self.after(duration, move |world| world.heal(&links, detail));
    }

    fn heal(&self, links: &[(NodeIdx, NodeIdx)], detail: String) {
        let healed = self.state().net.restore(links);
        if healed {
            self.record_fault(Op::Heal, None, detail);
        }
    }

    /// Steps a node's wall clock.
    pub fn clock_jump(&self, idx: NodeIdx, delta_ms: i64) {
        let name = {
            let mut state = self.state();
            state.clocks[idx].jump(delta_ms * 1_000_000);
            state.nodes[idx].name.clone()
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::ClockJump)
                .target(name)
                .value(delta_ms),
        );
    }

    /// Changes a node's clock drift.
    pub fn clock_drift(&self, idx: NodeIdx, drift_ppm: i64) {
        let now = self.now_ns();
        let name = {
            let mut state = self.state();
            state.clocks[idx].set_drift(now, drift_ppm);
            state.nodes[idx].name.clone()
        };
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::ClockDrift)
                .target(name)
                .value(drift_ppm),
        );
    }

    /// Sets message loss on every link to `probability` for `duration`.
    pub fn loss(&self, probability: f64, duration: Duration) {
        let epoch = self.state().net.set_loss(probability);
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::Loss)
                .value(duration.as_millis() as i64)
                .detail(format!("loss probability {probability}")),
        );
        self.after(duration, move |world| {
            let ended = world.state().net.end_loss(epoch);
            if ended {
                world.record_fault(Op::Loss, None, "loss period over".into());
            }
        });
    }

    /// Applies one fault now (time-triggered faults; point faults fire from [`NodeCtx::point`]).
    /// A role target (`@primary`, `@holder`, ...) is resolved first, so the fault hits
    /// whoever has the role at this instant; a fault whose role nobody has is recorded as
    /// skipped.
    pub fn apply(&self, fault: &Fault) {
        let roles: Vec<&str> = fault.nodes().into_iter().filter(|n| is_role(n)).collect();
        match self.resolve_roles(fault) {
            Ok(concrete) if roles.is_empty() => self.apply_concrete(&concrete, "scheduled"),
            Ok(concrete) => {
                let why = format!("scheduled on {}", roles.join(", "));
                self.apply_concrete(&concrete, &why);
            }
            Err(role) => {
                let what = describe_fault(fault);
                self.record_fault(Op::Note, None, format!("skipped {what}: no {role} now"));
            }
        }
    }

    /// Lets the deployment (or the workload) say who has `role` (e.g. `@primary`) whenever a
    /// fault names it. `resolve` runs on the nemesis at fire time; `None` = nobody.
    pub fn answer_role(&self, role: &str, resolve: RoleResolver) {
        assert!(is_role(role), "a role starts with `@`: {role}");
        self.state()
            .faults
            .resolvers
            .insert(role.to_owned(), resolve);
    }

    /// The fault with every role replaced by the node that has it now, or the first role
    /// nobody has.
    fn resolve_roles(&self, fault: &Fault) -> Result<Fault, String> {
        let mut missing = None;
        let concrete = fault.map_nodes(|name| {
            if !is_role(name) {
                return Some(name.to_owned());
            }
            let resolver = self.state().faults.resolvers.get(name).cloned();
            // Called without the world's lock: a resolver reads the world (disks, nodes).
            let node = resolver.and_then(|r| r(self)).map(|i| self.name(i));
            if node.is_none() {
                missing.get_or_insert_with(|| name.to_owned());
            }
            node
        });
        concrete.ok_or_else(|| missing.expect("a role was missing"))
    }

    fn apply_concrete(&self, fault: &Fault, why: &str) {
        let idx = |name: &str| self.node(name).expect("fault targets are validated");
        match fault {
            Fault::Pause {
                node, duration_ms, ..
            } => self.pause(idx(node), Duration::from_millis(*duration_ms), why),
            Fault::Crash {
                node,
                restart_after_ms,
                ..
            } => self.crash(idx(node), restart_after_ms.map(Duration::from_millis), why),
            Fault::Partition { duration_ms, .. } => {
                let (links, detail) = self.links_cut_by(fault);
                self.partition(links, Duration::from_millis(*duration_ms), detail);
            }
            Fault::ClockJump { node, delta_ms, .. } => self.clock_jump(idx(node), *delta_ms),
            Fault::ClockDrift {
                node, drift_ppm, ..
            } => self.clock_drift(idx(node), *drift_ppm),
            Fault::Loss {
                duration_ms,
                probability,
                ..
            } => self.loss(*probability, Duration::from_millis(*duration_ms)),
            Fault::FsyncStall {
                node, duration_ms, ..
            } => self.fsync_stall(idx(node), Duration::from_millis(*duration_ms)),
        }
    }

    /// Holds a node's fsyncs for `duration`.
    pub fn fsync_stall(&self, idx: NodeIdx, duration: Duration) {
        let until = self.now_ns() + duration.as_nanos() as u64;
        self.disks().stall(idx, until);
        self.record(
            Event::new(NEMESIS, Kind::Info, Op::FsyncStall)
                .target(self.name(idx))
                .value(duration.as_millis() as i64),
        );
    }

    fn links_cut_by(&self, fault: &Fault) -> (Vec<(NodeIdx, NodeIdx)>, String) {
        let Fault::Partition {
            isolate,
            groups,
            one_way,
            ..
        } = fault
        else {
            unreachable!("only partitions cut links")
        };
        let state = self.state();
        let all: Vec<NodeIdx> = (0..state.nodes.len())
            .filter(|i| state.nodes[*i].role != Role::Nemesis)
            .collect();
        let find = |name: &String| state.nodes.iter().position(|n| &n.name == name).unwrap();
        let groups: Vec<Vec<NodeIdx>> = if isolate.is_empty() {
            groups
                .iter()
                .map(|g| g.iter().map(find).collect())
                .collect()
        } else {
            let inside: Vec<NodeIdx> = isolate.iter().map(find).collect();
            let outside = all
                .iter()
                .copied()
                .filter(|i| !inside.contains(i))
                .collect();
            vec![inside, outside]
        };
        let mut links = Vec::new();
        for (gi, a) in groups.iter().enumerate() {
            for (gj, b) in groups.iter().enumerate() {
                if gi == gj || (*one_way && gj < gi) {
                    continue;
                }
                for &x in a {
                    for &y in b {
                        links.push((x, y));
                    }
                }
            }
        }
        let names = |g: &Vec<NodeIdx>| {
            g.iter()
                .map(|i| state.nodes[*i].name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let arrow = if *one_way { " -/-> " } else { " | " };
        let detail = groups.iter().map(names).collect::<Vec<_>>().join(arrow);
        (links, detail)
    }

    /// Starts the nemesis: applies time-triggered faults before `end_ms`, in time order.
    pub(crate) fn start_nemesis(&self, faults: &[Fault], end_ms: u64) {
        let mut timed: Vec<Fault> = faults
            .iter()
            .filter(|f| f.at_ms().is_some_and(|t| t < end_ms))
            .cloned()
            .collect();
        timed.sort_by_key(|f| f.at_ms());
        let world = self.clone();
        self.spawn_on_nemesis(async move {
            for fault in timed {
                let at_ns = fault.at_ms().unwrap() * 1_000_000;
                let now = world.now_ns();
                if at_ns > now {
                    madsim::time::sleep(Duration::from_nanos(at_ns - now)).await;
                }
                world.apply(&fault);
            }
        });
    }

    /// The liveness phase begins: every fault is undone (paused nodes resume, crashed nodes
    /// restart, partitions and loss end). Clocks keep their offsets and drift.
    pub(crate) fn heal_all(&self) {
        let n = self.state().nodes.len();
        for idx in 0..n {
            self.resume_if(idx, None);
            self.restart_if(idx, None);
        }
        self.disks().end_stalls();
        let had_cuts = self.state().net.restore_all();
        if had_cuts {
            self.record_fault(Op::Heal, None, "liveness phase: all links restored".into());
        }
    }

    /// Checks a named point: returns the fault to trigger, if this passage is the armed one.
    pub(crate) fn hit_point(&self, idx: NodeIdx, point: &str) -> Option<Fault> {
        let mut state = self.state();
        let armed = state
            .faults
            .points
            .iter_mut()
            .find(|p| p.node == idx && p.point == point && p.hits < p.occurrence)?;
        armed.hits += 1;
        (armed.hits == armed.occurrence).then(|| armed.fault.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Targets {
        Targets {
            servers: vec!["redis".into()],
            clients: vec!["c1".into(), "c2".into()],
        }
    }

    #[test]
    fn generation_is_a_function_of_the_seed() {
        let p = FaultProfile {
            pause_probability: 0.5,
            crash_probability: 0.3,
            clock_jump_probability: 0.2,
            ..FaultProfile::default()
        };
        let a = p.generate(7, 10_000, &targets());
        assert_eq!(a, p.generate(7, 10_000, &targets()));
        assert_ne!(a, p.generate(8, 10_000, &targets()));
        assert!(!a.is_empty());
        for f in &a {
            f.validate(&["redis".into(), "c1".into(), "c2".into()])
                .unwrap();
            assert!(f.at_ms().unwrap() < 10_000);
        }
    }

    #[test]
    fn default_targets_follow_roles() {
        let p = FaultProfile {
            pause_probability: 1.0,
            crash_probability: 1.0,
            ..FaultProfile::default()
        };
        for f in p.generate(1, 5_000, &targets()) {
            match f {
                Fault::Pause { node, .. } => assert!(node.starts_with('c')),
                Fault::Crash { node, .. } => assert_eq!(node, "redis"),
                _ => unreachable!("only pauses and crashes were enabled"),
            }
        }
    }

    #[test]
    fn default_is_an_empty_table() {
        let empty: FaultProfile = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, FaultProfile::default());
        assert!(!FaultProfile::default().is_active());
    }

    #[test]
    fn role_names_expand_to_the_nodes_of_that_role() {
        let p = FaultProfile {
            clock_jump_probability: 1.0,
            clock_nodes: vec![ROLE_SERVERS.into()],
            pause_probability: 1.0,
            pause_nodes: vec![ROLE_CLIENTS.into(), "redis".into()],
            ..FaultProfile::default()
        };
        let faults = p.generate(3, 20_000, &targets());
        let mut paused = std::collections::BTreeSet::new();
        for f in faults {
            match f {
                Fault::ClockJump { node, .. } => assert_eq!(node, "redis"),
                Fault::Pause { node, .. } => {
                    paused.insert(node);
                }
                _ => unreachable!(),
            }
        }
        assert_eq!(paused.len(), 3, "c1, c2 and redis all drawn: {paused:?}");
    }

    #[test]
    fn validation_names_the_problem() {
        let nodes = vec!["c1".to_string()];
        let f = Fault::Pause {
            node: "c9".into(),
            at_ms: Some(1),
            point: None,
            occurrence: 1,
            duration_ms: 1,
        };
        assert!(f
            .validate(&nodes)
            .unwrap_err()
            .contains("unknown node `c9`"));
        let f = Fault::Pause {
            node: "c1".into(),
            at_ms: Some(1),
            point: Some("before_write".into()),
            occurrence: 1,
            duration_ms: 1,
        };
        assert!(f.validate(&nodes).unwrap_err().contains("exactly one"));
    }
}
