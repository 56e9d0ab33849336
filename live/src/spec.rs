//! What the parent tells a client process (a JSON file named on its command line) and what
//! the client tells the parent (JSON lines on its stdout).

use locksim_check::Event;
use locksim_protocols::raft::{etcd, zookeeper};
use locksim_protocols::redis::redlock;
use locksim_protocols::redis::replicated;
use locksim_protocols::redis::single as single_redis;
use locksim_scenarios::Workload;
use locksim_sim::nodes::ArmedPoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The parent's word to start, on the client's stdin: the run's zero and its end on the
/// machine's monotonic clock, in ns (16 bytes, little-endian). They come last because the
/// run's clock starts only when every client is up (a real library's driver may take
/// seconds) and the faults due at 0 have acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Go {
    /// The run's zero.
    pub start_ns: u64,
    /// When to stop.
    pub end_ns: u64,
}

impl Go {
    /// As written on the client's stdin.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.start_ns.to_le_bytes());
        b[8..].copy_from_slice(&self.end_ns.to_le_bytes());
        b
    }

    /// As read from the client's stdin.
    pub fn from_bytes(b: [u8; 16]) -> Go {
        let word = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().expect("8"));
        Go {
            start_ns: word(0..8),
            end_ns: word(8..16),
        }
    }
}

/// Everything a client process needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientSpec {
    /// Its node name (`c1`, ...). The run's zero and end come later, with the parent's word
    /// to start ([`Go`]).
    pub name: String,
    /// The simulator's node table ([`locksim_scenarios::Prepared::node_table`]): the client
    /// knows each node, itself included, by the index the simulator gives it.
    pub nodes: Vec<String>,
    /// The run's seed (the client's random draws derive from it).
    pub seed: u64,
    /// How many times this client has been started before (restarts after crashes).
    pub incarnation: u32,
    /// Grants this client took in earlier incarnations (grant ids stay unique).
    pub grants_before: u64,
    /// The workload.
    pub workload: Workload,
    /// The lock and where its servers are.
    pub lock: LockSpec,
    /// The resource's address (`127.0.0.1:port`).
    pub resource: String,
    /// Where the client stops itself: its faults armed at named points (a pause, a crash,
    /// or a delay spike, for which the parent holds its links and lets it go on at once).
    pub stops: Vec<ArmedPoint>,
    /// Each armed point's passages in its earlier incarnations: an armed point's occurrence
    /// is its n-th passage in the run, over restarts, as in the simulator.
    #[serde(default)]
    pub passages_before: BTreeMap<String, u32>,
    /// The client profile whose real library runs behind its driver (`live --library`);
    /// `None`: locksim's own client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Where the run's one driver listens (`127.0.0.1:port`), for a library whose clients
    /// are threads of one process (`client::driver::SharedDriver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_at: Option<String>,
    /// Its moved clock's file (`deploy::shim`), if the run moves its clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<std::path::PathBuf>,
}

/// The lock protocol with its parameters, and its servers' client addresses.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockSpec {
    /// One redis-server.
    SingleRedis {
        /// The model's parameters.
        params: single_redis::Params,
        /// `127.0.0.1:port`.
        server: String,
    },
    /// N independent redis-servers, locked by Redlock.
    Redlock {
        /// The model's parameters.
        params: redlock::Params,
        /// `127.0.0.1:port` of each instance, `redis1` first.
        servers: Vec<String>,
    },
    /// A primary with replicas and Sentinels.
    ReplicatedRedis {
        /// The model's parameters.
        params: replicated::Params,
        /// `127.0.0.1:port` of each Redis node as the client reaches it, `redis1` first.
        servers: Vec<String>,
        /// Each Sentinel's `127.0.0.1:port` as the client reaches it.
        sentinels: Vec<String>,
        /// Each Redis node's address as the Sentinels name it (the one it announces: the proxy in
        /// front of it), in `servers`' order.
        real: Vec<String>,
    },
    /// An etcd cluster (its gRPC gateway's HTTP/JSON API).
    Etcd {
        /// The model's parameters.
        params: etcd::Params,
        /// Client URLs' `127.0.0.1:port`, one per member.
        endpoints: Vec<String>,
    },
    /// A ZooKeeper ensemble.
    ZooKeeper {
        /// The model's parameters.
        params: zookeeper::Params,
        /// Client ports' `127.0.0.1:port`, one per server.
        servers: Vec<String>,
    },
}

/// A line a client writes on its stdout.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientMsg {
    /// A history event, stamped by the client (ns since the run's zero).
    Event(Event),
    /// The client is about to stop itself (SIGSTOP) at a named point: the parent records
    /// the fault and resumes (or kills) it; for a delay spike, it holds the client's links
    /// first and resumes it at once.
    Stop(ArmedPoint),
    /// The client passed a named point where a later passage stops it (counted by the
    /// parent for its next incarnation, [`ClientSpec::passages_before`]).
    Passed(String),
    /// The client's lock is up (a real library's driver said hello): it waits for the start.
    Ready,
}

impl LockSpec {
    /// How long a crashed server stays down beyond the fault's `restart_after_ms`: Redlock's
    /// `restart_delay_ms` (antirez's delayed restart; the model's instance refuses commands
    /// that long, a real one is simply not there yet, and either way grants nothing).
    pub fn restart_delay_ms(&self) -> u64 {
        match self {
            LockSpec::Redlock { params, .. } => params.restart_delay_ms,
            _ => 0,
        }
    }

    /// The servers' addresses, in the deployment's order (to point a client at proxies).
    pub fn addrs_mut(&mut self) -> Vec<&mut String> {
        match self {
            LockSpec::SingleRedis { server, .. } => vec![server],
            LockSpec::Redlock { servers, .. } => servers.iter_mut().collect(),
            LockSpec::ReplicatedRedis {
                servers, sentinels, ..
            } => servers.iter_mut().chain(sentinels.iter_mut()).collect(),
            LockSpec::Etcd { endpoints, .. } => endpoints.iter_mut().collect(),
            LockSpec::ZooKeeper { servers, .. } => servers.iter_mut().collect(),
        }
    }
}
