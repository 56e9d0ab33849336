//! A Redis server node: the [`Store`] behind the simulated network, with its wall clock,
//! active expiry, persistence and restart delay.

use super::store::{Cmd, Reply, Store};
use futures::StreamExt;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::rpc::{endpoint, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The message family Redis clients and servers speak.
pub type RedisNet = Net<Wire<Cmd, Reply>>;

/// What survives a crash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Persistence {
    /// Nothing: a restarted server is empty (no AOF, no recent RDB snapshot).
    #[default]
    None,
    /// AOF with `appendfsync everysec`: writes since the last fsync are lost.
    Everysec,
    /// AOF with `appendfsync always`: every write is on disk before the reply.
    Always,
}

/// How a server node behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// What survives a crash.
    pub persistence: Persistence,
    /// Period of the active expiry sweep, in local ms (Redis `hz 10` = 100 ms).
    pub active_expire_interval_ms: u64,
    /// Period of the `everysec` fsync, in local ms.
    pub fsync_interval_ms: u64,
    /// After a crash, refuse service for this long, in local ms (antirez's delayed restart).
    pub restart_delay_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            persistence: Persistence::None,
            active_expire_interval_ms: 100,
            fsync_interval_ms: 1000,
            restart_delay_ms: 0,
        }
    }
}

/// Adds a Redis server node called `name`. Its durable image lives outside the node, so it
/// survives the node's crash exactly as far as `config.persistence` says.
pub fn start_server(world: &World, name: &str, net: &RedisNet, config: ServerConfig) -> NodeIdx {
    let disk: Arc<Mutex<Store>> = Arc::default();
    let starts = Arc::new(AtomicU64::new(0));
    let net = net.clone();
    world.add_node(name, Role::Server, move |ctx| {
        let restarted = starts.fetch_add(1, Ordering::Relaxed) > 0;
        serve(ctx, net.clone(), disk.clone(), config.clone(), restarted)
    })
}

fn record_expired(ctx: &NodeCtx, keys: &[String]) {
    for key in keys {
        ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Expire).detail(key.clone()));
    }
}

async fn serve(
    ctx: NodeCtx,
    net: RedisNet,
    disk: Arc<Mutex<Store>>,
    config: ServerConfig,
    restarted: bool,
) {
    let store = Rc::new(RefCell::new(match config.persistence {
        Persistence::None => Store::new(),
        Persistence::Everysec | Persistence::Always => disk.lock().unwrap().clone(),
    }));
    if restarted && config.restart_delay_ms > 0 {
        // Not listening yet: requests sent meanwhile are refused (dropped).
        ctx.sleep_local(Duration::from_millis(config.restart_delay_ms))
            .await;
        ctx.record_event(
            Event::new(ctx.name(), Kind::Info, Op::Note).detail("accepting commands again"),
        );
    }
    let (caller, mut requests) = endpoint(&net, &ctx);
    spawn_active_expiry(&ctx, &store, config.active_expire_interval_ms);
    if config.persistence == Persistence::Everysec {
        let (ctx2, store2, period) = (ctx.clone(), store.clone(), config.fsync_interval_ms);
        let disk2 = disk.clone();
        ctx.spawn(async move {
            loop {
                ctx2.sleep_local(Duration::from_millis(period)).await;
                *disk2.lock().unwrap() = store2.borrow().clone();
            }
        });
    }
    let mut expired = Vec::new();
    while let Some(req) = requests.next().await {
        expired.clear();
        let reply = store
            .borrow_mut()
            .exec(&req.body, ctx.wall_ms(), &mut expired);
        record_expired(&ctx, &expired);
        if config.persistence == Persistence::Always && req.body.is_write() {
            *disk.lock().unwrap() = store.borrow().clone();
        }
        ctx.point("before_reply").await;
        caller.reply(req.from, req.id, reply);
    }
}

fn spawn_active_expiry(ctx: &NodeCtx, store: &Rc<RefCell<Store>>, period_ms: u64) {
    if period_ms == 0 {
        return;
    }
    let (ctx2, store) = (ctx.clone(), store.clone());
    ctx.spawn(async move {
        loop {
            ctx2.sleep_local(Duration::from_millis(period_ms)).await;
            let due = store.borrow_mut().expire_due(ctx2.wall_ms());
            record_expired(&ctx2, &due);
        }
    });
}
