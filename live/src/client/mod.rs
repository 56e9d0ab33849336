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
use locksim_sim::NodeCtx;
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
    let (connector, mut names) = connector_for(&spec, &ctx)?;
    let resource_idx = names.len();
    names.push(RESOURCE.into());
    let node = LiveEnv::node(ctx.clone(), names);
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

/// The scenario's lock client, and the names of the servers it knows by index: the real
/// library behind its driver (`live --library`), else the protocol's own client.
fn connector_for(
    spec: &ClientSpec,
    ctx: &Arc<Ctx>,
) -> anyhow::Result<(Arc<dyn Connector>, Vec<String>)> {
    if let Some(profile) = &spec.driver {
        let driver = crate::client::driver::named(profile)
            .ok_or_else(|| anyhow::anyhow!("no driver for the client profile {profile}"))?;
        let lock = DriverLock::start(driver, &spec.lock, ctx)?;
        return Ok((Arc::new(Once(Mutex::new(Some(lock)))), vec![]));
    }
    protocol_client(&spec.lock)
}

/// The protocol's own client (`locksim_protocols`), reaching the deployment's real servers
/// through live links, and the servers' names by node index.
fn protocol_client(lock: &LockSpec) -> anyhow::Result<(Arc<dyn Connector>, Vec<String>)> {
    Ok(match lock {
        LockSpec::SingleRedis { params, server } => {
            let links = LinksTo::<Resp>::links(0, &[server.parse()?]);
            let servers = single_redis::Servers::live(links, 0);
            let names = vec![single_redis::SERVER.to_owned()];
            (connector(SingleRedis, params.clone(), servers), names)
        }
        LockSpec::Redlock { params, servers } => {
            let links = LinksTo::<Resp>::links(0, &addrs(servers)?);
            let servers = redlock::Servers::live(links, (0..servers.len()).collect());
            (connector(Redlock, params.clone(), servers), params.names())
        }
        LockSpec::ReplicatedRedis {
            params,
            servers,
            sentinels,
            real,
        } => {
            let n = servers.len();
            let redis = LinksTo::<Resp>::links(0, &addrs(servers)?);
            let sentinel = SentinelLinks::links(n, &addrs(sentinels)?, addrs(real)?);
            let watching = (n..n + sentinels.len()).collect();
            let nodes = replicated::Servers::live(redis, sentinel, watching);
            let mut names = params.redis_names();
            names.extend(params.sentinel_names());
            (connector(ReplicatedRedis, params.clone(), nodes), names)
        }
        LockSpec::Etcd { params, endpoints } => {
            let links = crate::links::etcd::Gateway::links(addrs(endpoints)?);
            let cluster = cluster(links, endpoints.len());
            let peers = params.host().peers;
            (connector(Etcd, params.clone(), cluster), peers)
        }
        LockSpec::ZooKeeper { params, servers } => {
            let links = crate::links::zookeeper::ZkLinks::links(addrs(servers)?);
            let cluster = cluster(links, servers.len());
            let peers = params.host().peers;
            (connector(ZooKeeper, params.clone(), cluster), peers)
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

/// A Raft cluster as a live client reaches it: its peers, numbered from 0, through `links`.
fn cluster<Req, Resp>(clients: Links<Req, Resp>, peers: usize) -> Cluster<Req, Resp> {
    Cluster {
        clients,
        peers: (0..peers).collect(),
    }
}

fn addrs(list: &[String]) -> anyhow::Result<Vec<std::net::SocketAddr>> {
    Ok(list.iter().map(|e| e.parse()).collect::<Result<_, _>>()?)
}
