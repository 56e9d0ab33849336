//! Live mode: the scenarios, workload and checker of locksim against real servers.
//!
//! `locksim live SCENARIO.toml` starts the servers the scenario's `[protocol]` describes
//! (Debian's `redis-server`, etcd and ZooKeeper) on loopback, each in a process
//! group of its own with its own data directory, starts one client process per client (the
//! `locksim` binary in its `live-client` role) running the workload step for step as the
//! simulator's clients do, applies the scenario's pauses and crashes with signals
//! (SIGSTOP/SIGCONT, SIGKILL and a restart, on a schedule for periodic pauses) and
//! partitions with TCP proxies ([`proxy`]) on every client link (which also hold each chunk for
//! the scenario's link latency) and on the links between servers (etcd members, ZooKeeper
//! servers, Redis nodes and Sentinels: one proxy in front of each server's peer ports, cutting
//! one pair of servers by asking the kernel who opened each connection: [`sender`]), draws
//! `[faults_random]` with the simulator's own draw, and merges the events every process
//! stamped on the machine's monotonic clock into one history, checked by the simulator's
//! checker. The same proxies lose chunks as TCP experiences loss (resent after the RTO, what
//! follows waiting behind) and hold a sender's links for a delay spike; a preloaded shim
//! moves clocks and holds fsyncs where libc reaches ([`deploy::shim`]). Faults it cannot
//! inject for real (an etcd member's clock or fsyncs, message duplication, a point inside a
//! server) are refused, never faked ([`refuse`]).

// By concern: the servers a scenario deploys (`deploy`), the client process with its
// environment and executor (`client`), the wires to real servers (`links`), the TCP proxies
// that carry partitions, loss and latency (`proxy`), the fault verbs (`nemesis`), what live
// mode refuses (`refuse`), the run that ties them together (`run`), and what they share.
pub mod client;
pub mod clock;
pub mod deploy;
pub mod history;
pub mod links;
pub mod nemesis;
pub mod procs;
pub mod proxy;
pub mod refuse;
pub mod resource;
pub mod run;
pub mod rundir;
pub mod spec;

pub use refuse::Refused;
pub use run::{run, LibraryInfo, LiveOptions, LiveRun};

use locksim_scenarios::{Prepared, RunResult};

/// What a live run puts where a simulated run puts its trace hash.
pub const NOT_REPLAYABLE: &str = "none: a live run cannot be replayed bit for bit";

/// The run's result in the form `locksim run` gives it, judged by the same code as a
/// simulated run ([`Prepared::judged`]): verdicts, witnesses, liveness, stale writes
/// accepted, lost updates and zombie windows. Messages stay uncounted (`None`, "n/a"): the
/// servers' traffic is out of live mode's sight; fsyncs are counted on the real servers
/// (etcd's and ZooKeeper's own counters, a Redis server's shim: [`deploy::Deployment::fsyncs`]),
/// "n/a" where a count was lost.
pub fn result(prepared: &Prepared, seed: u64, live: &LiveRun) -> RunResult {
    let mut result = prepared.judged(seed, live.faults, &live.history);
    result.trace_hash = NOT_REPLAYABLE.into();
    result.stats.sim_ms = live.run_ms;
    result.stats.server_fsyncs = live.server_fsyncs;
    let library = if live.library.is_some() {
        " --library"
    } else {
        ""
    };
    result.replay = format!(
        "locksim live {}{library} --seed {seed} (a new live run, not a replay)",
        prepared.path
    );
    result
}

/// Whether a live run's error is its input's (refused, a server's binary or a library
/// missing, a bad parameter): exit 2, and no use running it again.
pub fn is_bad_input(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Refused>().is_some()
        || e.downcast_ref::<deploy::servers::MissingBinary>().is_some()
        || e.downcast_ref::<client::driver::MissingLibrary>().is_some()
        || e.downcast_ref::<locksim_protocols::ParamError>().is_some()
}
