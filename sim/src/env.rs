//! The environment a node's code runs in, in either of two worlds.
//!
//! A client library is written once, against [`crate::NodeCtx`] (its clocks, sleeps and
//! timeouts, its random stream, the history, named points, spawning) and
//! [`crate::rpc::Caller`] (requests to servers). In the simulator both are the simulated
//! world's: madsim's scheduler, the node's simulated clocks, the run's seeded stream and the
//! simulated network. In live mode (`locksim-live`) the same types are backed by a
//! [`LiveNode`] and a [`crate::rpc::LiveLink`]: real time on a real-time executor, a stream
//! seeded from the run's seed, the history sent to the parent process, and real sockets to
//! real servers. The library's code cannot tell the two apart, which is the point: what
//! `validate` compares is one algorithm in two worlds, not a model and a second copy of it.
//!
//! The pattern is stateright's (one `Actor` under the model checker and over UDP) and
//! FoundationDB's (`Sim2` and `Net2` behind one `INetwork`). A live backend must never run
//! inside a madsim runtime: under `--cfg madsim` madsim answers libc's clock and randomness
//! calls with simulated values there (`locksim-live`'s `clock::assert_real` checks it
//! wherever a live backend is built).

use crate::nodes::NodeIdx;
use locksim_check::history::Event;
use rand::RngCore;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A future of the node's own thread (node code is single-threaded, in both worlds).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What live mode gives a node's code in place of the simulated world: one client
/// process's clocks, executor, random stream and history.
pub trait LiveNode: Send + Sync {
    /// The node's name (`c1`, ...).
    fn name(&self) -> &str;
    /// The node's index (what [`crate::rpc::Caller`] calls from).
    fn idx(&self) -> NodeIdx;
    /// How many times the node was started before (its restarts after crashes).
    fn incarnation(&self) -> u64;
    /// The name of node `idx` (a server the client reaches, or the client itself).
    fn node_name(&self, idx: NodeIdx) -> String;
    /// The machine's monotonic clock since the run's zero.
    fn mono_now(&self) -> Duration;
    /// The machine's wall clock, in ms since the Unix epoch.
    fn wall_ms(&self) -> i64;
    /// Sleeps `local` in real time.
    fn sleep(&self, local: Duration) -> LocalFuture<'static, ()>;
    /// Records an event (stamped now); returns its index in this node's stream.
    fn record(&self, event: Event) -> u64;
    /// Passes a named point: stops here if a scripted fault says so. The future lets the
    /// node's other tasks take in what arrived meanwhile before the node's code goes on.
    fn point(&self, name: &str) -> LocalFuture<'static, ()>;
    /// Runs `future` beside the node's other tasks.
    fn spawn(&self, future: LocalFuture<'static, ()>);
    /// The next 64 random bits of the node's stream.
    fn next_u64(&self) -> u64;
}

/// A node's random stream: the run's seeded stream in the simulator (madsim's, so every
/// draw is where it always was), the client's seeded stream in live mode.
pub enum NodeRng {
    /// madsim's global generator, seeded by the run.
    Sim(madsim::rand::GlobalRng),
    /// A live client's stream.
    Live(Arc<dyn LiveNode>),
}

impl RngCore for NodeRng {
    fn next_u32(&mut self) -> u32 {
        match self {
            NodeRng::Sim(rng) => rng.next_u32(),
            NodeRng::Live(node) => node.next_u64() as u32,
        }
    }

    fn next_u64(&mut self) -> u64 {
        match self {
            NodeRng::Sim(rng) => rng.next_u64(),
            NodeRng::Live(node) => node.next_u64(),
        }
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        match self {
            NodeRng::Sim(rng) => rng.fill_bytes(dest),
            NodeRng::Live(node) => {
                for chunk in dest.chunks_mut(8) {
                    let word = node.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&word[..chunk.len()]);
                }
            }
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
