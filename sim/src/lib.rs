//! The simulation harness of locksim: one deterministic world per (scenario, seed).
//!
//! - [`world`]: the one `impl World`, over its subsystems, each with its crash, restart
//!   and heal hooks: [`nodes`] (names, roles, incarnations, pauses, armed points),
//!   [`clock`] (monotonic and wall clocks with drift and jumps), the network's state
//!   (latencies, partitions, loss), [`disk`] (page cache and fsync, outliving crashes) and
//!   the history;
//! - [`net`] and [`rpc`]: a typed simulated network with latency, loss, duplication,
//!   reordering and partitions that also kill messages in flight; sessions and server push;
//! - [`fault`]: one file per fault kind (its table, validation, random draw, how it acts
//!   and how a timeline draws it) and the registry of kinds;
//! - [`nemesis`]: the schedule: points armed before the run, timed faults applied in order,
//!   roles resolved when a fault fires (`@primary`, `@holder`); [`roles`] names them;
//! - [`history`] and [`checker`]: the record of a run and the pure function from it to a
//!   verdict, re-exported from `locksim-check` (which builds without madsim).
//!
//! This crate knows nothing of any lock protocol.

#[cfg(not(madsim))]
compile_error!(
    "locksim must be built with `--cfg madsim` (set in .cargo/config.toml). An exported \
     RUSTFLAGS replaces that setting: unset it."
);

pub mod clock;
pub mod disk;
pub mod env;
pub mod fault;
mod links;
pub mod mailbox;
pub mod nemesis;
pub mod net;
pub mod nodes;
pub mod roles;
pub mod rpc;
pub mod world;

pub use locksim_check::{checker, history};

pub use checker::{check, Property, Report, Verdict, Violation};
pub use clock::ClockConfig;
pub use disk::{Disk, DiskConfig};
pub use fault::{Fault, FaultKind, FaultProfile};
pub use history::{Event, History, Kind, Op};
pub use net::{Net, NetConfig, NetStats};
pub use world::{NodeCtx, NodeIdx, Role, World};

use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// Everything the harness needs for one run, apart from what the nodes do.
#[derive(Clone, Debug, Default)]
pub struct SimSpec {
    /// The seed: with the same spec and setup, the same run, bit for bit.
    pub seed: u64,
    /// How long the run lasts, in true ms (faults after this are not applied).
    pub duration_ms: u64,
    /// Length of the liveness phase after `duration_ms`, in which every fault is undone;
    /// 0 for none.
    pub heal_ms: u64,
    /// The network.
    pub network: NetConfig,
    /// The node clocks.
    pub clocks: ClockConfig,
    /// The disks.
    pub disk: DiskConfig,
    /// The fault schedule.
    pub faults: Vec<Fault>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// The history.
    pub history: History,
    /// Network counters.
    pub net: NetStats,
    /// Fsyncs the lock servers started (the resource's own are not the lock's cost).
    pub server_fsyncs: u64,
    /// Simulated time, in ms.
    pub sim_ms: u64,
    /// Faults of the schedule that fired (a point fault whose passage never came, or a
    /// role nobody had, did not).
    pub faults_fired: u64,
    /// Each periodic pause that started and the cycles it ran: when, on what, for how long
    /// (live mode follows these, so that both worlds pause the same targets at the same times).
    pub pause_plans: Vec<fault::pause_periodic::PausePlan>,
}

/// A run that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Some code panicked inside the simulation: a bug in a protocol model or the harness.
    #[error("the simulation panicked (seed {seed}): {message}")]
    Panic {
        /// The seed that panicked.
        seed: u64,
        /// The panic message.
        message: String,
    },
    /// The history reached [`world::HISTORY_EVENTS_MAX`] events: the run was stopped.
    #[error(
        "the run stopped at {sim_ms} ms of simulated time: its history reached {events} \
         events, the most one run may hold (about 0.5 GB); shorten duration_ms, or give the \
         workload fewer clients or longer critical sections"
    )]
    HistoryFull {
        /// Events in the history.
        events: usize,
        /// Simulated time when it filled, in ms.
        sim_ms: u64,
    },
}

/// Runs one simulation: builds a madsim runtime with `spec.seed`, lets `setup` add the
/// nodes, runs the nemesis for `duration_ms` (then the liveness phase), and returns the
/// history. Panics inside are caught and returned as [`RunError::Panic`]; a history that reaches
/// [`world::HISTORY_EVENTS_MAX`] events stops the run with [`RunError::HistoryFull`].
pub fn simulate(spec: &SimSpec, setup: impl FnOnce(&World)) -> Result<SimOutcome, RunError> {
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let rt =
            madsim::runtime::Runtime::with_seed_and_config(spec.seed, madsim::Config::default());
        rt.block_on(async {
            let world = World::new(world::WorldConfig {
                net: spec.network.clone(),
                clocks: spec.clocks.clone(),
                disk: spec.disk.clone(),
                points: nemesis::armed_points(&spec.faults),
            });
            setup(&world);
            nemesis::start(&world, &spec.faults, spec.duration_ms);
            let mut full = world
                .sleep_unless_full(Duration::from_millis(spec.duration_ms))
                .await;
            if spec.heal_ms > 0 && !full {
                world.heal_all();
                full = world
                    .sleep_unless_full(Duration::from_millis(spec.heal_ms))
                    .await;
            }
            if full {
                let (events, sim_ms) = (world.history_len(), world.now_ns() / 1_000_000);
                world.finish();
                madsim::time::sleep(Duration::from_millis(1)).await;
                return Err(RunError::HistoryFull { events, sim_ms });
            }
            let sim_ms = world.now_ns() / 1_000_000;
            let server_fsyncs = world.fsyncs_started(Role::Server);
            let faults_fired = world.faults_fired();
            let pause_plans = world.pause_plans();
            world.record(Event::new(nodes::NEMESIS, Kind::Info, Op::RunEnd));
            let (history, net) = world.finish();
            // Let the killed nodes' timers fire so their tasks are dropped, not leaked.
            madsim::time::sleep(Duration::from_millis(1)).await;
            Ok(SimOutcome {
                history,
                net,
                server_fsyncs,
                sim_ms,
                faults_fired,
                pause_plans,
            })
        })
    }));
    result.unwrap_or_else(|payload| {
        Err(RunError::Panic {
            seed: spec.seed,
            message: panic_message(&payload),
        })
    })
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}
