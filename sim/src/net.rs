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

use crate::world::{NodeCtx, NodeIdx, World};
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Network settings of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    /// Smallest one-way latency, in ms.
    #[serde(default = "default_latency_ms_min")]
    pub latency_ms_min: f64,
    /// Largest one-way latency, in ms.
    #[serde(default = "default_latency_ms_max")]
    pub latency_ms_max: f64,
    /// Probability that a message is lost.
    #[serde(default)]
    pub loss_probability: f64,
    /// Probability that a message is delivered twice.
    #[serde(default)]
    pub duplicate_probability: f64,
    /// Per-link latency overrides.
    #[serde(default)]
    pub links: Vec<LinkConfig>,
}

fn default_latency_ms_min() -> f64 {
    1.0
}

fn default_latency_ms_max() -> f64 {
    3.0
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency_ms_min: default_latency_ms_min(),
            latency_ms_max: default_latency_ms_max(),
            loss_probability: 0.0,
            duplicate_probability: 0.0,
            links: vec![],
        }
    }
}

/// The latency of one directed link (set `both_ways` for the reverse too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Sender node name.
    pub from: String,
    /// Receiver node name.
    pub to: String,
    /// Smallest latency, in ms.
    pub latency_ms_min: f64,
    /// Largest latency, in ms.
    pub latency_ms_max: f64,
    /// Whether the reverse direction gets the same latency.
    #[serde(default = "yes")]
    pub both_ways: bool,
}

fn yes() -> bool {
    true
}

impl NetConfig {
    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        check_latency(
            "network.latency_ms",
            self.latency_ms_min,
            self.latency_ms_max,
        )?;
        for (name, p) in [
            ("network.loss_probability", self.loss_probability),
            ("network.duplicate_probability", self.duplicate_probability),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} must be between 0 and 1, not {p}"));
            }
        }
        for (i, link) in self.links.iter().enumerate() {
            check_latency(
                &format!("network.links[{i}].latency_ms"),
                link.latency_ms_min,
                link.latency_ms_max,
            )?;
        }
        Ok(())
    }
}

fn check_latency(name: &str, min: f64, max: f64) -> Result<(), String> {
    if !(min >= 0.0 && max >= min && max.is_finite()) {
        return Err(format!(
            "{name}_min and {name}_max must satisfy 0 <= min <= max, not {min} and {max}"
        ));
    }
    Ok(())
}

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
                if world.deliverable(&ticket) {
                    if let Some(tx) = inboxes.lock().unwrap().get(&to) {
                        // The receiver may have just died: then the message is simply gone.
                        let _ = tx.unbounded_send(envelope);
                    }
                }
            });
        }
    }
}

/// What the network decided for one send.
pub(crate) struct Route {
    pub latencies: Vec<Duration>,
    pub ticket: Ticket,
}

/// What a message must still find true on delivery.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub from: NodeIdx,
    pub to: NodeIdx,
    /// The link's cut generation at send time.
    pub link_generation: u64,
    /// The receiver's incarnation at send time.
    pub incarnation: u64,
}
