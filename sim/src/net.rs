//! The simulated network: a small typed transport of our own.
//!
//! Why not madsim's `Endpoint`: it adds a hidden random delay of at least 1 ms on every send
//! and receive, and checks partitions only at send time. Here every message gets one latency
//! drawn from the seeded RNG (per link if configured), may be lost or duplicated, is
//! reordered naturally by independent latencies, and is dropped on delivery if its link was
//! cut at any moment while it was in flight (a partition also kills what is on the wire) or
//! if the receiver crashed meanwhile (its connections are gone). Deliveries run on the
//! never-paused nemesis node, so a paused receiver finds its messages queued when it wakes.
//!
//! madsim's timer resolution is 1 ms: a latency below 1 ms is delivered after 1 ms.
//!
//! A link may also hold a message (a delay spike, or a partition with `[network] partition =
//! "delay"`) and send it on later, in send order; whether it does is decided in
//! [`crate::links`], and the delivery waits for it.
//!
//! The network's state (per-link latencies, cut links, loss periods, counters) and the
//! decision for each message live in [`crate::links`], the world's network subsystem; this
//! file moves the messages.

use crate::world::{NodeCtx, NodeIdx, World};
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub use crate::links::{
    LinkConfig, NetConfig, NetStats, PartitionMode, CONNECTION_TIMEOUT_MS_DEFAULT,
};

/// A message with its sender.
#[derive(Clone, Debug)]
pub struct Envelope<M> {
    /// Who sent it.
    pub from: NodeIdx,
    /// What was sent.
    pub msg: M,
}

/// A node's inbox for messages of type `M`.
pub type Inbox<M> = UnboundedReceiver<Envelope<M>>;

type Senders<M> = Arc<Mutex<BTreeMap<NodeIdx, UnboundedSender<Envelope<M>>>>>;

/// A typed channel family over the shared simulated network: one `Net<M>` per message type,
/// all sharing the world's latencies, partitions and loss.
pub struct Net<M> {
    world: World,
    inboxes: Senders<M>,
}

impl<M> Clone for Net<M> {
    fn clone(&self) -> Self {
        Net {
            world: self.world.clone(),
            inboxes: self.inboxes.clone(),
        }
    }
}

impl<M: Clone + Send + 'static> Net<M> {
    /// A new message family on the world's network.
    pub fn new(world: &World) -> Self {
        Net {
            world: world.clone(),
            inboxes: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// Gives the node a fresh inbox (call at every start of the node: a restart loses the
    /// old one with everything queued in it).
    pub fn bind(&self, ctx: &NodeCtx) -> Inbox<M> {
        let (tx, rx) = unbounded();
        self.inboxes.lock().unwrap().insert(ctx.idx(), tx);
        rx
    }

    /// Sends `msg` from `from` to `to`; it arrives after a random latency, or not at all.
    pub fn send(&self, from: NodeIdx, to: NodeIdx, msg: M) {
        let Some(route) = self.world.route(from, to) else {
            return;
        };
        let copies = route.latencies.len();
        let mut msg = Some(msg);
        for (i, latency) in route.latencies.into_iter().enumerate() {
            // The last copy takes the message itself; duplicates are clones.
            let msg = if i + 1 == copies {
                msg.take()
            } else {
                msg.clone()
            };
            let envelope = Envelope {
                from,
                msg: msg.expect("one message per copy"),
            };
            let world = self.world.clone();
            let inboxes = self.inboxes.clone();
            let ticket = route.ticket;
            self.world.spawn_on_nemesis(async move {
                madsim::time::sleep(latency).await;
                if world.deliverable(&ticket).await {
                    if let Some(tx) = inboxes.lock().unwrap().get(&to) {
                        // The receiver may have just died: then the message is simply gone.
                        let _ = tx.unbounded_send(envelope);
                    }
                }
            });
        }
    }
}
