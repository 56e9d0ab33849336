//! What every fault kind implements: the contract between a kind's file and the registry
//! (`fault/mod.rs`). A kind file imports this, the world and the drawing types, never the
//! registry, so that the registry can import every kind without a cycle.

use super::draw::{pick, Draw};
use super::drawing::Drawing;
use crate::nodes::ArmedPoint;
use crate::world::World;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// One fault kind: its `[[faults]]` table (the implementing struct), and what it does.
pub trait Spec: Clone + Debug + PartialEq + Serialize + DeserializeOwned {
    /// Its `[faults_random]` keys.
    type Random: RandomSpec<Fault = Self>;

    /// Whether it may name a group (`@servers`, `@clients`) and act on every node in it.
    const GROUPS: bool = false;

    /// How a timeline draws the events it records.
    const DRAWINGS: &'static [Drawing];

    /// When it fires, in true ms since the start; None if it fires at a named point.
    fn at_ms(&self) -> Option<u64>;

    /// Every node (or role) name it mentions, for validation and role resolution.
    fn nodes(&self) -> Vec<&String>;

    /// The same, to replace roles by nodes at fire time.
    fn nodes_mut(&mut self) -> Vec<&mut String>;

    /// Checks its own fields (names are checked by the registry); the error says what is
    /// wrong.
    fn check(&self) -> Result<(), String>;

    /// The fault in words, e.g. `pause c1 at before_write (passage 1) for 1100 ms`.
    fn describe(&self) -> String;

    /// Applies it now, every role already resolved to a node: through the world's hooks
    /// (`pause`, `crash`, `cut`, `clock_jump`, ...), which record the history events.
    fn apply(&self, world: &World, why: &str);

    /// The fault waiting at a named point, if it fires at one.
    fn armed_point(&self) -> Option<ArmedPoint> {
        None
    }
}

/// Which nodes a kind hits by default, when its profile list is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultNodes {
    /// The clients.
    Clients,
    /// The servers.
    Servers,
    /// Servers and clients.
    Everyone,
}

/// The profile key listing the nodes a kind may hit.
pub struct NodeKey<'a> {
    /// The key, e.g. `pause_nodes`.
    pub key: &'static str,
    /// The list, if this kind's section owns the key (`clock_drift` shares `clock_nodes`
    /// with `clock_jump`, which owns it).
    pub list: Option<&'a Vec<String>>,
    /// The nodes when the list is empty.
    pub default: DefaultNodes,
}

/// Where a random fault may land: filled in by the registry from the run (or the search's
/// whole run), then handed to a kind's [`RandomSpec::draw`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Space {
    /// The start time is drawn in `at_ms.0..at_ms.1`.
    pub at_ms: (u64, u64),
    /// The nodes it may hit (its profile list with `@servers`/`@clients` expanded).
    pub nodes: Vec<String>,
    /// `(node, point)` for every named point of those nodes where it may fire instead
    /// (empty for the random profile, which only times faults).
    pub points: Vec<(String, String)>,
    /// A point fault fires on passage `1..=occurrence_max`.
    pub occurrence_max: u32,
}

impl Space {
    /// A start time.
    pub fn at(&self, d: &mut dyn Draw) -> u64 {
        d.below(self.at_ms.0, self.at_ms.1)
    }

    /// `at 0..N ms`, and the named points if there are any, for a search's description.
    pub fn describe_when(&self) -> String {
        let at = format!("at {}..{} ms", self.at_ms.0, self.at_ms.1);
        let mut names: Vec<&str> = self.points.iter().map(|(_, p)| p.as_str()).collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            return at;
        }
        format!(
            "{at} or at a named point ({}) on passage 1..={}",
            names.join(", "),
            self.occurrence_max
        )
    }
}

/// One kind's section of `[faults_random]` (flattened into the table: its keys carry the
/// kind's name).
pub trait RandomSpec:
    Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The kind it draws.
    type Fault;

    /// Whether its faults may fire at named points (the search offers them).
    const AT_POINTS: bool = false;

    /// Chance per second that a fault of this kind starts.
    fn probability(&self) -> f64;

    /// Checks ranges; the error names the key (`faults_random.pause_ms_min ...`).
    fn validate(&self) -> Result<(), String>;

    /// The nodes it may hit; None if it hits no node (a loss period hits every link).
    fn node_key(&self) -> Option<NodeKey<'_>>;

    /// One fault in `space`. The random profile calls it with its ChaCha stream, the search
    /// through a proptest strategy: the draws, in order, are the schedule's format.
    fn draw(&self, space: &Space, d: &mut dyn Draw) -> Self::Fault;

    /// What it may draw in `space`, in words, for a search's description.
    fn describe(&self, space: &Space) -> String;
}

/// A probability key's range check.
pub fn check_probability(key: &str, p: f64) -> Result<(), String> {
    if !(0.0..=1.0).contains(&p) {
        return Err(format!(
            "faults_random.{key} must be between 0 and 1, not {p}"
        ));
    }
    Ok(())
}

/// A `_min`/`_max` pair's order check.
pub fn check_range(name: &str, min: u64, max: u64) -> Result<(), String> {
    if min > max {
        return Err(format!(
            "faults_random.{name}_min ({min}) exceeds {name}_max ({max})"
        ));
    }
    Ok(())
}

/// `at_ms` or a named point: exactly one.
pub fn check_trigger(
    at_ms: Option<u64>,
    point: Option<&String>,
    occurrence: u32,
) -> Result<(), String> {
    if at_ms.is_some() == point.is_some() {
        return Err("give exactly one of `at_ms` and `point`".into());
    }
    if occurrence == 0 {
        return Err("`occurrence` counts from 1".into());
    }
    Ok(())
}

/// When a fault that may fire at a point fires, in words.
pub fn describe_when(at_ms: Option<u64>, point: Option<&String>, occurrence: u32) -> String {
    match point {
        Some(p) => format!("at {p} (passage {occurrence})"),
        None => format!("at {} ms", at_ms.unwrap_or(0)),
    }
}

pub(crate) fn first() -> u32 {
    1
}

pub(crate) fn is_first(n: &u32) -> bool {
    *n == 1
}

/// Where a pause or crash fires when the space has named points: at one of them (choice 0,
/// where shrinking leads: a fault at a named point does not depend on the timing of
/// everything before it, so it survives the removal of other faults where a timed one often
/// stops hitting the critical section it hit) or at a time (None). No draw without points.
pub fn at_point(space: &Space, d: &mut dyn Draw) -> Option<(String, String, u32)> {
    if space.points.is_empty() || d.index(2) == 1 {
        return None;
    }
    let (node, point) = pick(d, &space.points);
    let occurrence = d.u64_in(1, u64::from(space.occurrence_max)) as u32;
    Some((node, point, occurrence))
}

/// How another world than the simulator (live mode, against real servers) applies a fault
/// kind: that world implements it for each kind it can apply, and a kind no such world can
/// apply says so in its own file, with the reason (`simulator_only!`). A world applies a
/// fault through [`crate::fault::Fault::apply_in`], which needs this for every kind: a kind
/// added without saying how it is applied there, or why it cannot be, does not compile.
pub trait ApplyIn<W: ?Sized> {
    /// Why `W` cannot apply this kind, if it cannot: that world refuses a scenario with such a
    /// fault before anything starts.
    const CANNOT: Option<&'static str> = None;

    /// Applies the fault now in `world`, every role already resolved; `why` says what
    /// scheduled it. Never called when [`ApplyIn::CANNOT`] is set.
    fn apply_in(&self, world: &mut W, why: &str);
}

/// Declares that only the simulator can apply a kind: every other world refuses it, with
/// `$why` (for the user: what the real world lacks, and to run it in the simulator).
macro_rules! simulator_only {
    ($ty:ty, $why:expr) => {
        impl<W: ?Sized> $crate::fault::spec::ApplyIn<W> for $ty {
            const CANNOT: Option<&'static str> = Some($why);
            fn apply_in(&self, _world: &mut W, _why: &str) {
                // Never called: `Fault::apply_in` refuses with `CANNOT` first.
            }
        }
    };
}
pub(crate) use simulator_only;
