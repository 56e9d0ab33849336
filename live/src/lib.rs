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
//! follows waiting behind) and hold a sender's links for a delay spike. Faults it cannot
//! inject for real (clock jumps and drift, fsync stalls, message duplication) are refused,
//! never faked ([`refuse`]).

pub mod client;
pub mod clock;
pub mod cluster;
pub mod deploy;
pub mod etcd_lock;
pub mod history;
pub mod http;
pub mod lock;
pub mod procs;
pub mod proxy;
pub mod redis_lock;
pub mod redis_server;
pub mod redlock_lock;
pub mod refuse;
pub mod replicated_deploy;
pub mod replicated_lock;
pub mod resource;
pub mod resp;
pub mod run;
pub mod rundir;
pub mod sender;
pub mod servers;
pub mod spec;
pub mod zk_lock;
pub mod zookeeper_deploy;

pub use refuse::Refused;
pub use run::{run, LiveOptions, LiveRun};

use locksim_check::{check, Kind, Op};
use locksim_scenarios::runner::ExpectResult;
use locksim_scenarios::{Prepared, RunResult, Stats};
use std::collections::BTreeMap;

/// What a live run puts where a simulated run puts its trace hash.
pub const NOT_REPLAYABLE: &str = "none: a live run cannot be replayed bit for bit";

/// The run's result in the form `locksim run` gives it: the same checker, verdicts,
/// witnesses, liveness and resource figures.
pub fn result(prepared: &Prepared, seed: u64, live: &LiveRun) -> RunResult {
    let s = &prepared.scenario;
    let history = &live.history;
    let report = check(history);
    let mut stats = Stats {
        events: history.len() as u64,
        sim_ms: live.run_ms,
        faults: live.faults,
        liveness: report.liveness.clone(),
        ..Stats::default()
    };
    stats.writes_with_token = history
        .iter()
        .filter(|e| e.op == Op::Write && e.kind == Kind::Invoke && e.token.is_some())
        .count() as u64;
    stats.updates_acked = report.updates.writes_acknowledged;
    stats.updates_lost = report.updates.updates_lost;
    let expect = s.expect.as_ref().map(|expect| {
        let mut mismatches = expect.mismatches(|p| report.property(p));
        mismatches.extend(expect.liveness_mismatches(&report.liveness));
        ExpectResult {
            met: mismatches.is_empty(),
            mismatches,
        }
    });
    RunResult {
        scenario: s.name.clone(),
        protocol: s.protocol.name.clone(),
        seed,
        verdict: report.verdict,
        properties: report.verdicts(),
        reasons: report.reasons(),
        violations: report.violations.clone(),
        violation_counts: report.violation_counts(),
        trace_hash: NOT_REPLAYABLE.into(),
        stats,
        expect,
        replay: format!(
            "locksim live {} --seed {seed} (a new live run, not a replay)",
            prepared.path
        ),
        error: None,
    }
}

/// A map for `--json`'s `"servers"`: each server's name, software and version.
pub fn servers_json(live: &LiveRun) -> Vec<BTreeMap<&'static str, String>> {
    live.servers
        .iter()
        .map(|s| {
            BTreeMap::from([
                ("name", s.name.clone()),
                ("software", s.software.clone()),
                ("version", s.version.clone()),
            ])
        })
        .collect()
}
