//! Faults as data, one file per kind, and the registry that lists the kinds.
//!
//! Every fault is a plain value (`kind`, `at_ms`, `node`, `duration_ms`, ...), so a fault
//! schedule can be written by hand, generated from a seed, printed, saved as a scenario and
//! shrunk by proptest. Paired verbs undo each other: a `pause` resumes after `duration_ms`,
//! a `crash` restarts after `restart_after_ms` (or never), a `partition` heals after
//! `duration_ms`, a `loss` period ends after `duration_ms`, a `delay_spike` sends on what it
//! held after `duration_ms`.
//!
//! A kind's file owns all of it ([`spec::Spec`] and [`spec::RandomSpec`]): its `[[faults]]`
//! table, validation, description, its `[faults_random]` keys, its random draw (which the
//! profile samples and the search wraps as a proptest strategy, [`draw`]), how it acts on
//! the world's subsystems, how a timeline draws the events it records ([`drawing`]), and,
//! if live mode cannot apply it, why ([`spec::ApplyIn`]: live mode implements it for every
//! other kind, so a kind with neither does not compile).
//! Adding a kind is its file plus one line in the [`registry!`] call below.

pub mod draw;
pub mod drawing;
pub mod spec;

use crate::nodes::ArmedPoint;
use crate::roles::{is_group, is_role, ROLE_CLIENTS, ROLE_SERVERS};
use crate::world::World;
use draw::DrawStrategy;
use drawing::Drawing;
use locksim_check::history::Op;
use proptest::strategy::{BoxedStrategy, Strategy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use spec::{ApplyIn, DefaultNodes, NodeKey, RandomSpec, Space, Spec};

/// Declares the kinds: for each, its module, its type and its variant of [`Fault`] and
/// [`FaultKind`] (the `kind` in files is the variant in snake case). The order is the order
/// in which a random profile draws them each second: a new kind goes last, so that the
/// schedules of existing profiles stay the same.
macro_rules! registry {
    ($($module:ident :: $ty:ident),* $(,)?) => {
        $(pub mod $module;)*
        $(pub use $module::$ty;)*

        /// One fault: a table of `[[faults]]`, tagged by `kind`. Time-triggered faults carry
        /// `at_ms` (true time since the start of the run); `pause`, `crash` and `delay_spike`
        /// can instead fire at a named point in a node's code (`point`) on its
        /// `occurrence`-th passage.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum Fault {
            $(
                #[doc = concat!("See [`", stringify!($module), "`].")]
                $ty($ty),
            )*
        }

        /// The kinds of fault, for profiles, swarm testing and reports.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[derive(Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum FaultKind {
            $(
                #[doc = concat!("See [`", stringify!($module), "`].")]
                $ty,
            )*
        }

        impl FaultKind {
            /// Every kind, in the registry's order.
            pub const ALL: &'static [FaultKind] = &[$(FaultKind::$ty),*];

            /// The kind's name in scenario files (`pause_periodic`): its module's.
            pub fn name(self) -> &'static str {
                match self {
                    $(FaultKind::$ty => stringify!($module),)*
                }
            }

            /// Why world `W` (live mode) cannot apply faults of this kind, if it cannot: the
            /// reason the kind's file gives ([`spec::ApplyIn::CANNOT`]).
            pub fn cannot_in<W: ?Sized>(self) -> Option<&'static str>
            where
                $($ty: ApplyIn<W>,)*
            {
                match self {
                    $(FaultKind::$ty => <$ty as ApplyIn<W>>::CANNOT,)*
                }
            }
        }

        $(
            impl From<$ty> for Fault {
                fn from(f: $ty) -> Fault {
                    Fault::$ty(f)
                }
            }
        )*

        impl Fault {
            /// Applies the fault now in a world other than the simulator (live mode), every
            /// role already resolved: as that world defines it for the kind
            /// ([`spec::ApplyIn`]), or the reason it cannot, as the kind's file gives it.
            pub fn apply_in<W: ?Sized>(&self, world: &mut W, why: &str) -> Result<(), &'static str>
            where
                $($ty: ApplyIn<W>,)*
            {
                match self {
                    $(Fault::$ty(f) => match <$ty as ApplyIn<W>>::CANNOT {
                        Some(cannot) => Err(cannot),
                        None => {
                            f.apply_in(world, why);
                            Ok(())
                        }
                    },)*
                }
            }

            /// The fault's kind, as written in files.
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(Fault::$ty(_) => FaultKind::$ty,)*
                }
            }

            /// The fault as its kind's [`Spec`].
            fn spec(&self) -> &dyn Dyn {
                match self {
                    $(Fault::$ty(f) => f,)*
                }
            }

            fn spec_mut(&mut self) -> &mut dyn Dyn {
                match self {
                    $(Fault::$ty(f) => f,)*
                }
            }
        }

        /// A seeded random fault profile, `[faults_random]`: for each second of the run and
        /// each kind, a fault starts with the kind's probability, at a uniform instant in
        /// that second, on a uniform target. Each kind's file owns its keys (flattened
        /// here). Expanded to a plain fault list before the run ([`FaultProfile::generate`]),
        /// so random faults are as replayable and printable as scripted ones.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct FaultProfile {
            $(
                #[doc = concat!("The keys of [`", stringify!($module), "`].")]
                #[serde(flatten)]
                pub $module: <$ty as Spec>::Random,
            )*
        }

        impl FaultProfile {
            /// A kind's section.
            fn section(&self, kind: FaultKind) -> &dyn Section {
                match kind {
                    $(FaultKind::$ty => &self.$module,)*
                }
            }
        }

        /// How a timeline draws `op`: the data of the kind that records it.
        pub fn drawing(op: &Op) -> Option<&'static Drawing> {
            let all = [$(<$ty as Spec>::DRAWINGS),*];
            all.into_iter().flatten().find(|d| d.op == *op)
        }
    };
}

registry! {
    pause::Pause,
    crash::Crash,
    partition::Partition,
    clock_jump::ClockJump,
    clock_drift::ClockDrift,
    loss::Loss,
    fsync_stall::FsyncStall,
    pause_periodic::PausePeriodic,
    delay_spike::DelaySpike,
    loop_stall::LoopStall,
}

/// A kind's [`Spec`] behind a pointer (the registry dispatches through it).
trait Dyn {
    fn at_ms(&self) -> Option<u64>;
    fn nodes(&self) -> Vec<&String>;
    fn nodes_mut(&mut self) -> Vec<&mut String>;
    fn check(&self) -> Result<(), String>;
    fn describe(&self) -> String;
    fn apply(&self, world: &World, why: &str);
    fn armed_point(&self) -> Option<ArmedPoint>;
    fn groups(&self) -> bool;
}

impl<S: Spec> Dyn for S {
    fn at_ms(&self) -> Option<u64> {
        Spec::at_ms(self)
    }
    fn nodes(&self) -> Vec<&String> {
        Spec::nodes(self)
    }
    fn nodes_mut(&mut self) -> Vec<&mut String> {
        Spec::nodes_mut(self)
    }
    fn check(&self) -> Result<(), String> {
        Spec::check(self)
    }
    fn describe(&self) -> String {
        Spec::describe(self)
    }
    fn apply(&self, world: &World, why: &str) {
        Spec::apply(self, world, why)
    }
    fn armed_point(&self) -> Option<ArmedPoint> {
        Spec::armed_point(self)
    }
    fn groups(&self) -> bool {
        S::GROUPS
    }
}

impl Fault {
    /// When a time-triggered fault fires (None for point-triggered ones).
    pub fn at_ms(&self) -> Option<u64> {
        self.spec().at_ms()
    }

    /// Every node (or role) name the fault mentions.
    pub fn nodes(&self) -> Vec<&str> {
        self.spec()
            .nodes()
            .into_iter()
            .map(String::as_str)
            .collect()
    }

    /// The same fault with every node name replaced by `f(name)`; `None` if `f` has no
    /// answer for one of them.
    pub fn map_nodes(&self, mut f: impl FnMut(&str) -> Option<String>) -> Option<Fault> {
        let mut fault = self.clone();
        for node in fault.spec_mut().nodes_mut() {
            *node = f(node)?;
        }
        Some(fault)
    }

    /// The fault in words, e.g. `pause c1 at before_write (passage 1) for 1100 ms`.
    pub fn describe(&self) -> String {
        self.spec().describe()
    }

    /// Applies the fault now, every role already resolved (see [`crate::nemesis`]).
    pub(crate) fn apply(&self, world: &World, why: &str) {
        self.spec().apply(world, why);
    }

    /// The fault waiting at a named point, if it fires at one.
    pub fn armed_point(&self) -> Option<ArmedPoint> {
        self.spec().armed_point()
    }

    /// Checks the fault against the run's node names and the roles its deployment can
    /// answer at fire time (`@primary`, `@holder`, ...); the error says what is wrong.
    pub fn validate(&self, known_nodes: &[String]) -> Result<(), String> {
        let spec = self.spec();
        for n in spec.nodes() {
            let group = spec.groups() && is_group(n);
            if !group && !known_nodes.contains(n) {
                return Err(unknown(n, known_nodes));
            }
        }
        spec.check()?;
        if self.armed_point().is_some() && spec.nodes().iter().any(|n| is_role(n)) {
            return Err("a fault at a named point needs a node, not a role".into());
        }
        Ok(())
    }
}

/// `unknown node `c9` (nodes in this scenario: c1, c2)`, or the same for a role.
fn unknown(name: &str, known: &[String]) -> String {
    let role = is_role(name);
    let what = if role { "role" } else { "node" };
    let list: Vec<&str> = known
        .iter()
        .filter(|k| is_role(k) == role)
        .map(String::as_str)
        .collect();
    let list = if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    };
    format!("unknown {what} `{name}` ({what}s in this scenario: {list})")
}

/// A fault in words, e.g. `pause c1 at before_write (passage 1) for 1100 ms`.
pub fn describe_fault(fault: &Fault) -> String {
    fault.describe()
}

/// The nodes of a run by role, for choosing fault targets.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    /// Lock servers.
    pub servers: Vec<String>,
    /// Clients.
    pub clients: Vec<String>,
}

impl Targets {
    fn default_nodes(&self, default: DefaultNodes) -> Vec<String> {
        match default {
            DefaultNodes::Clients => self.clients.clone(),
            DefaultNodes::Servers => self.servers.clone(),
            DefaultNodes::Everyone => {
                let everyone = self.servers.iter().chain(&self.clients);
                everyone.cloned().collect()
            }
        }
    }

    /// A profile's node list with `@servers` and `@clients` expanded.
    fn expand(&self, list: &[String]) -> Vec<String> {
        let mut nodes = Vec::new();
        for name in list {
            match name.as_str() {
                ROLE_SERVERS => nodes.extend(self.servers.iter().cloned()),
                ROLE_CLIENTS => nodes.extend(self.clients.iter().cloned()),
                _ => nodes.push(name.clone()),
            }
        }
        nodes
    }
}

/// A kind's `[faults_random]` section behind a pointer.
trait Section {
    fn probability(&self) -> f64;
    fn validate(&self) -> Result<(), String>;
    fn node_key(&self) -> Option<NodeKey<'_>>;
    fn at_points(&self) -> bool;
    fn sample(&self, space: &Space, rng: &mut ChaCha8Rng) -> Fault;
    fn strategy(&self, space: Space) -> BoxedStrategy<Fault>;
    fn describe(&self, space: &Space) -> String;
}

impl<R: RandomSpec> Section for R
where
    R::Fault: Into<Fault>,
{
    fn probability(&self) -> f64 {
        RandomSpec::probability(self)
    }
    fn validate(&self) -> Result<(), String> {
        RandomSpec::validate(self)
    }
    fn node_key(&self) -> Option<NodeKey<'_>> {
        RandomSpec::node_key(self)
    }
    fn at_points(&self) -> bool {
        R::AT_POINTS
    }
    fn sample(&self, space: &Space, rng: &mut ChaCha8Rng) -> Fault {
        self.draw(space, rng).into()
    }
    fn strategy(&self, space: Space) -> BoxedStrategy<Fault> {
        let section = self.clone();
        DrawStrategy::new(move |d| section.draw(&space, d).into()).boxed()
    }
    fn describe(&self, space: &Space) -> String {
        RandomSpec::describe(self, space)
    }
}

impl FaultProfile {
    /// Whether the profile can produce any fault at all.
    pub fn is_active(&self) -> bool {
        FaultKind::ALL.iter().any(|k| self.probability(*k) > 0.0)
    }

    /// The chance per second that a fault of `kind` starts.
    pub fn probability(&self, kind: FaultKind) -> f64 {
        self.section(kind).probability()
    }

    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        FaultKind::ALL
            .iter()
            .try_for_each(|k| self.section(*k).validate())
    }

    /// Every node list of the profile, by key (`pause_nodes`, ...), for validation.
    pub fn node_lists(&self) -> Vec<(&'static str, &Vec<String>)> {
        let keys = FaultKind::ALL
            .iter()
            .filter_map(|k| self.section(*k).node_key());
        keys.filter_map(|k| Some((k.key, k.list?))).collect()
    }

    /// Whether faults of `kind` hit nodes (a loss period hits links).
    pub fn targets_nodes(&self, kind: FaultKind) -> bool {
        self.section(kind).node_key().is_some()
    }

    /// The nodes `kind` may hit: its list with `@servers` and `@clients` expanded, or by
    /// default pauses on clients, crashes and fsync stalls on servers, partitions and clock
    /// faults on both. Empty for kinds that hit no node.
    pub fn nodes(&self, kind: FaultKind, targets: &Targets) -> Vec<String> {
        let Some(key) = self.section(kind).node_key() else {
            return vec![];
        };
        let owned = self.node_lists().into_iter().find(|(k, _)| *k == key.key);
        let list = key.list.or(owned.map(|(_, l)| l));
        match list {
            Some(list) if !list.is_empty() => targets.expand(list),
            _ => targets.default_nodes(key.default),
        }
    }

    /// Where `kind` may land: its nodes, and (for kinds that fire at points) the named
    /// points of those nodes among `points` (node → its points).
    pub fn space(&self, kind: FaultKind, targets: &Targets, at_ms: (u64, u64)) -> Space {
        assert!(at_ms.0 < at_ms.1, "an empty time range");
        Space {
            at_ms,
            nodes: self.nodes(kind, targets),
            points: vec![],
            occurrence_max: 1,
        }
    }

    /// Whether faults of `kind` may fire at named points.
    pub fn at_points(&self, kind: FaultKind) -> bool {
        self.section(kind).at_points()
    }

    /// The proptest strategy of one fault of `kind` in `space`: the kind's random draw.
    pub fn strategy(&self, kind: FaultKind, space: Space) -> BoxedStrategy<Fault> {
        self.section(kind).strategy(space)
    }

    /// What `kind` may draw in `space`, in words.
    pub fn describe_space(&self, kind: FaultKind, space: &Space) -> String {
        self.section(kind).describe(space)
    }

    /// Expands the profile into a concrete fault list for a run of `duration_ms`. Depends
    /// only on (profile, targets, seed, duration).
    pub fn generate(&self, seed: u64, duration_ms: u64, targets: &Targets) -> Vec<Fault> {
        // A stream of its own (not madsim's), so the schedule does not shift when the
        // simulation draws a different number of random values.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6c6f_636b_7369_6d21);
        let mut spaces: Vec<(FaultKind, Space)> = FaultKind::ALL
            .iter()
            .map(|k| (*k, self.space(*k, targets, (0, 1))))
            .collect();
        let mut faults = Vec::new();
        for second in 0..duration_ms.div_ceil(1000) {
            let start = second * 1000;
            let end = (start + 1000).min(duration_ms);
            for (kind, space) in &mut spaces {
                space.at_ms = (start, end.max(start + 1));
                let section = self.section(*kind);
                let p = section.probability();
                // No draw at all for a kind that is off or has nobody to hit: a new kind
                // leaves the schedules of existing profiles as they were.
                let hits_nobody = section.node_key().is_some() && space.nodes.is_empty();
                if p > 0.0 && !hits_nobody && rand::Rng::gen_bool(&mut rng, p) {
                    faults.push(section.sample(space, &mut rng));
                }
            }
        }
        faults.sort_by_key(|f| f.at_ms());
        faults
    }
}
