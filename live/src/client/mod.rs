//! The client role: one OS process per client, running the simulator's own workload
//! (`locksim_scenarios::workload::client_loop`, step for step the same code) on a real-time
//! executor ([`crate::client::env`]), and writing its events as JSON lines on stdout, each stamped
//! on the machine's monotonic clock. Where a protocol's client runs live, it is the
//! protocol's own client library (`locksim_protocols`), reaching real servers through live
//! links ([`crate::links`]); with `--library`, the real library behind its driver
//! ([`Blocking`]). A pause is a real stop-the-world: SIGSTOP stops every thread
//! of the process, timers and keep-alives included, as a GC pause does.

pub mod driver;
pub mod env;
pub mod lock;

use crate::client::driver::DriverLock;
use crate::client::env::LiveEnv;
use crate::client::lock::{Blocking, Ctx};
use crate::clock;
use crate::links::{LinksTo, ResourceLines, Resp, SentinelLinks};
use crate::spec::{ClientSpec, Go, LockSpec};
use locksim_protocols::raft::etcd::Etcd;
use locksim_protocols::raft::host::Cluster;
use locksim_protocols::raft::zookeeper::ZooKeeper;
use locksim_protocols::redis::redlock::{self, Redlock};
use locksim_protocols::redis::replicated::{self, ReplicatedRedis};
use locksim_protocols::redis::single::{self as single_redis, SingleRedis};
use locksim_protocols::registry::connector;
use locksim_protocols::resource::{ResourceHandle, RESOURCE};
use locksim_protocols::{Connector, LockClient};
use locksim_scenarios::workload::{client_loop, Holders};
use locksim_sim::rpc::Links;
use locksim_sim::{NodeCtx, NodeIdx};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The client process's main: runs the workload until the run's end.
pub fn main(spec: ClientSpec) -> anyhow::Result<()> {
    crate::procs::die_with_parent();
    let ctx = Arc::new(Ctx::new(spec.clone()));
    crate::client::env::block_on(run(spec, ctx))?
}

async fn run(spec: ClientSpec, ctx: Arc<Ctx>) -> anyhow::Result<()> {
    let table = Table(&spec.nodes);
    let connector = connector_for(&spec, &ctx, &table)?;
    let resource_idx = table.idx(RESOURCE)?;
    let node = LiveEnv::node(ctx.clone(), spec.nodes.clone(), table.idx(&spec.name)?);
    let resource_addr: std::net::SocketAddr = spec.resource.parse()?;
    crate::links::open_ahead(resource_addr)?;
    ctx.ready();
    // Spawned before the run's start, while the other clients come up and the faults due at
    // 0 take effect: wait until the parent says they have, with the run's zero and end
    // (end of file: the parent is gone), then for the start itself if it is still ahead.
    let mut go = [0u8; 16];
    if std::io::Read::read_exact(&mut std::io::stdin(), &mut go).is_err() {
        anyhow::bail!("the parent closed stdin before the run started");
    }
    let go = Go::from_bytes(go);
    ctx.set_start(go.start_ns);
    tokio::time::sleep(until_ns(go.start_ns)).await;
    let resource_links = LinksTo::<ResourceLines>::links(resource_idx, &[resource_addr]);
    let resource = ResourceHandle::live(resource_links, resource_idx);
    let grants = Arc::new(AtomicU64::new(spec.grants_before));
    let workload = spec.workload.clone();
    let work = client_loop(
        node,
        connector,
        resource,
        workload,
        grants,
        Holders::default(),
        vec![],
    );
    let end = tokio::time::sleep(until_ns(go.end_ns));
    futures::future::select(std::pin::pin!(work), std::pin::pin!(end)).await;
    Ok(())
}

/// How long until `ns` on the machine's monotonic clock.
fn until_ns(ns: u64) -> Duration {
    Duration::from_nanos(ns.saturating_sub(clock::now_ns()))
}

/// The simulator's node table ([`locksim_scenarios::Prepared::node_table`]): a node's index
/// is its place in it, in both worlds.
struct Table<'a>(&'a [String]);

impl Table<'_> {
    fn idx(&self, name: &str) -> anyhow::Result<NodeIdx> {
        (self.0.iter().position(|n| n == name))
            .ok_or_else(|| anyhow::anyhow!("{name} is not in the run's node table"))
    }

    /// The index of the first of `servers`, which follow it in the table in their order.
    fn first(&self, servers: &[String]) -> anyhow::Result<NodeIdx> {
        let Some(name) = servers.first() else {
            anyhow::bail!("a lock without servers");
        };
        let first = self.idx(name)?;
        let listed = self.0.get(first..first + servers.len());
        anyhow::ensure!(
            listed == Some(servers),
            "the servers {servers:?} are not in the node table in order"
        );
        Ok(first)
    }
}

/// The scenario's lock client: the real library behind its driver (`live --library`), else
/// the protocol's own client.
fn connector_for(
    spec: &ClientSpec,
    ctx: &Arc<Ctx>,
    table: &Table,
) -> anyhow::Result<Arc<dyn Connector>> {
    if let Some(profile) = &spec.driver {
        let driver = crate::client::driver::named(profile)
            .ok_or_else(|| anyhow::anyhow!("no driver for the client profile {profile}"))?;
        let lock = DriverLock::start(driver, &spec.lock, ctx)?;
        return Ok(Arc::new(Once(Mutex::new(Some(lock)))));
    }
    protocol_client(&spec.lock, table)
}

/// The protocol's own client (`locksim_protocols`), reaching the deployment's real servers
/// through live links, each server known by its index in the node table.
fn protocol_client(lock: &LockSpec, table: &Table) -> anyhow::Result<Arc<dyn Connector>> {
    Ok(match lock {
        LockSpec::SingleRedis { params, server } => {
            let first = table.first(&[single_redis::SERVER.to_owned()])?;
            let links = LinksTo::<Resp>::links(first, &[server.parse()?]);
            let servers = single_redis::Servers::live(links, first);
            connector(SingleRedis, params.clone(), servers)
        }
        LockSpec::Redlock { params, servers } => {
            let first = table.first(&params.names())?;
            let links = LinksTo::<Resp>::links(first, &addrs(servers)?);
            let servers = redlock::Servers::live(links, (first..first + servers.len()).collect());
            connector(Redlock, params.clone(), servers)
        }
        LockSpec::ReplicatedRedis {
            params,
            servers,
            sentinels,
            real,
        } => {
            let first = table.first(&params.redis_names())?;
            let first_sentinel = table.first(&params.sentinel_names())?;
            let redis = LinksTo::<Resp>::links(first, &addrs(servers)?);
            let sentinel =
                SentinelLinks::links((first_sentinel, &addrs(sentinels)?), (first, &addrs(real)?));
            let watching = (first_sentinel..first_sentinel + sentinels.len()).collect();
            let nodes = replicated::Servers::live(redis, sentinel, watching);
            connector(ReplicatedRedis, params.clone(), nodes)
        }
        LockSpec::Etcd { params, endpoints } => {
            let first = table.first(&params.host().peers)?;
            let links = crate::links::etcd::Gateway::links(first, &addrs(endpoints)?);
            let cluster = cluster(links, first, endpoints.len());
            connector(Etcd, params.clone(), cluster)
        }
        LockSpec::ZooKeeper { params, servers } => {
            let first = table.first(&params.host().peers)?;
            let links = crate::links::zookeeper::ZkLinks::links(first, &addrs(servers)?);
            let cluster = cluster(links, first, servers.len());
            connector(ZooKeeper, params.clone(), cluster)
        }
    })
}

/// A real library's driver, handed out once (a live client process connects once).
struct Once(Mutex<Option<DriverLock>>);

impl Connector for Once {
    fn connect(&self, _: &NodeCtx) -> Box<dyn LockClient> {
        let lock = self.0.lock().unwrap().take();
        Box::new(Blocking::new(
            lock.expect("a live client process connects its lock once"),
        ))
    }
}

/// A Raft cluster as a live client reaches it: its `peers` peers, nodes `first`, `first +
/// 1`, ..., through `links`.
fn cluster<Req, Resp>(
    clients: Links<Req, Resp>,
    first: NodeIdx,
    peers: usize,
) -> Cluster<Req, Resp> {
    Cluster {
        clients,
        peers: (first..first + peers).collect(),
    }
}

fn addrs(list: &[String]) -> anyhow::Result<Vec<std::net::SocketAddr>> {
    Ok(list.iter().map(|e| e.parse()).collect::<Result<_, _>>()?)
}
