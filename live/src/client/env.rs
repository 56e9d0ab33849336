//! The environment a live client process gives the protocols' own client code: the
//! [`LiveNode`] behind its [`NodeCtx`] (real time, the client's seeded stream, its history
//! sent to the parent, named points that stop the process) and the real-time executor it
//! runs on (tokio's current-thread runtime with a `LocalSet`, since node code is
//! single-threaded and holds `Rc`s, as in the simulator).
//!
//! The executor never runs inside a madsim runtime: [`block_on`] checks it
//! ([`clock::assert_real`]) before it starts, and so does every [`LiveEnv`] it builds, so
//! the clocks and random draws libc answers here are the machine's.

use crate::client::lock::Ctx;
use crate::clock;
use locksim_check::Event;
use locksim_sim::env::{LiveNode, LocalFuture};
use locksim_sim::{NodeCtx, NodeIdx};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How many times a node woken from a stop yields before it goes on: one turn for the I/O
/// driver and the readers it wakes, and one to spare.
const SETTLE_YIELDS: usize = 2;

/// One live client node: its process's context and the nodes it knows by index.
pub struct LiveEnv {
    ctx: Arc<Ctx>,
    /// The simulator's node table ([`locksim_scenarios::Prepared::node_table`]).
    names: Vec<String>,
    /// This client's place in it.
    idx: NodeIdx,
    recorded: AtomicU64,
}

impl LiveEnv {
    /// The node of client `ctx`, node `idx` of the simulator's node table `names` (the index
    /// the simulator gives it). Panics inside a madsim runtime.
    pub fn node(ctx: Arc<Ctx>, names: Vec<String>, idx: NodeIdx) -> NodeCtx {
        clock::assert_real();
        assert_eq!(names[idx], ctx.name(), "a client's index is its name's");
        NodeCtx::live(Arc::new(LiveEnv {
            ctx,
            names,
            idx,
            recorded: AtomicU64::new(0),
        }))
    }
}

impl LiveNode for LiveEnv {
    fn name(&self) -> &str {
        self.ctx.name()
    }

    fn idx(&self) -> NodeIdx {
        self.idx
    }

    fn incarnation(&self) -> u64 {
        self.ctx.spec.incarnation.into()
    }

    fn node_name(&self, idx: NodeIdx) -> String {
        self.names
            .get(idx)
            .cloned()
            .unwrap_or_else(|| format!("node {idx}"))
    }

    fn mono_now(&self) -> Duration {
        self.ctx.mono_now()
    }

    fn wall_ms(&self) -> i64 {
        self.ctx.wall_ms()
    }

    /// Until the client's monotonic clock has advanced by `local`: at its drift, checked
    /// again on waking, as the simulated node's sleep re-checks when its drift changes.
    fn sleep(&self, local: Duration) -> LocalFuture<'static, ()> {
        let ctx = self.ctx.clone();
        Box::pin(async move {
            if !ctx.clock_moves() {
                return tokio::time::sleep(local).await;
            }
            let until = ctx.mono_now() + local;
            loop {
                let left = until.saturating_sub(ctx.mono_now());
                if left.is_zero() {
                    return;
                }
                tokio::time::sleep(ctx.real_duration(left)).await;
            }
        })
    }

    fn record(&self, event: Event) -> u64 {
        self.ctx.record(event);
        self.recorded.fetch_add(1, Ordering::Relaxed)
    }

    fn point(&self, name: &str) -> LocalFuture<'static, ()> {
        let stopped = self.ctx.point(name);
        Box::pin(async move {
            if stopped {
                // A process woken from a stop finds its sockets full: let the readers take in
                // what arrived meanwhile (tokio runs a yielded task after polling for I/O)
                // before the code looks at its inbox and its clock, as the simulated node
                // sees every reply delivered while it was paused.
                for _ in 0..SETTLE_YIELDS {
                    tokio::task::yield_now().await;
                }
            }
        })
    }

    fn spawn(&self, future: LocalFuture<'static, ()>) {
        tokio::task::spawn_local(future);
    }

    fn next_u64(&self) -> u64 {
        self.ctx.random()
    }
}

/// Runs `future` to its end on a real-time, single-threaded executor. Panics inside a
/// madsim runtime.
pub fn block_on<T>(future: impl Future<Output = T>) -> anyhow::Result<T> {
    clock::assert_real();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()?;
    Ok(tokio::task::LocalSet::new().block_on(&runtime, future))
}
