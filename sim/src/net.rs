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
//! Messages in flight wait in one queue per message type, ordered by due instant (then by
//! send order), and one courier task on the nemesis node delivers them, sleeping until the
//! earliest is due: a message costs a heap entry, not a task and a timer of its own (the
//! engine's hot path; a task per message was a seventh of a run's CPU).
//!
//! madsim's timer resolution is 1 ms: a latency below 1 ms is delivered after 1 ms.
//!
//! A link may also hold a message (a delay spike, or a partition with `[network] partition =
//! "delay"`) and send it on later, in send order: whether it does, and when, is decided in
//! [`crate::links`]; the courier hands a held message to a small task that puts it back on
//! the wire at the instant the link releases it, where it is decided on again.
//!
//! The network's state (per-link latencies, cut links, loss periods, counters) and the
//! decision for each message live in [`crate::links`], the world's network subsystem; this
//! file moves the messages.

use crate::links::{Arrival, Ticket, LATENCY_MIN};
use crate::mailbox::{self, Receiver, Sender};
use crate::world::{NodeCtx, NodeIdx, World};
use futures::channel::oneshot;
use madsim::time::Instant;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

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
pub type Inbox<M> = Receiver<Envelope<M>>;

/// A typed channel family over the shared simulated network: one `Net<M>` per message type,
/// all sharing the world's latencies, partitions and loss.
pub struct Net<M> {
    world: World,
    shared: Arc<Mutex<Shared<M>>>,
}

impl<M> Clone for Net<M> {
    fn clone(&self) -> Self {
        Net {
            world: self.world.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// Inboxes and messages in flight of one message type.
struct Shared<M> {
    inboxes: BTreeMap<NodeIdx, Sender<Envelope<M>>>,
    /// Due instants of the messages in flight, earliest first, each with its slot in
    /// `wire` (the heap moves these small keys, never a message).
    in_flight: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// The messages in flight; a `None` slot is free for the next one.
    wire: Vec<Option<(Ticket, Envelope<M>)>>,
    free_slots: Vec<usize>,
    /// Messages handed to the network so far: the tie-break between equal due instants.
    sent: u64,
    /// The courier's state: not started, or the instant its timer is set for (None: idle)
    /// and how to wake it.
    courier: Option<(Option<Instant>, Waker)>,
    courier_started: bool,
}

impl<M: Clone + Send + 'static> Net<M> {
    /// A new message family on the world's network.
    pub fn new(world: &World) -> Self {
        Net {
            world: world.clone(),
            shared: Arc::new(Mutex::new(Shared {
                inboxes: BTreeMap::new(),
                in_flight: BinaryHeap::new(),
                wire: Vec::new(),
                free_slots: Vec::new(),
                sent: 0,
                courier: None,
                courier_started: false,
            })),
        }
    }

    /// Gives the node a fresh inbox (call at every start of the node: a restart loses the
    /// old one with everything queued in it).
    pub fn bind(&self, ctx: &NodeCtx) -> Inbox<M> {
        let (tx, rx) = mailbox::channel();
        self.shared.lock().unwrap().inboxes.insert(ctx.idx(), tx);
        rx
    }

    /// Sends `msg` from `from` to `to`; it arrives after a random latency, or not at all.
    pub fn send(&self, from: NodeIdx, to: NodeIdx, msg: M) {
        let Some(route) = self.world.route(from, to) else {
            return;
        };
        let now = self.world.now_instant();
        let mut shared = self.shared.lock().unwrap();
        // A duplicate goes on the wire after the first copy (the tie-break between equal
        // due instants is this order); the last copy takes the message itself.
        let copies = [
            (Some(route.latency), route.duplicate.is_none()),
            (route.duplicate, true),
        ];
        let mut msg = Some(msg);
        for (latency, last) in copies {
            let Some(latency) = latency else {
                continue;
            };
            let msg = if last { msg.take() } else { msg.clone() };
            let envelope = Envelope {
                from,
                msg: msg.expect("one message per copy"),
            };
            let due = now + latency.max(LATENCY_MIN);
            shared.put_on_wire(due, route.ticket, envelope);
        }
        if !shared.courier_started {
            shared.courier_started = true;
            self.world.spawn_on_nemesis(Courier {
                world: self.world.clone(),
                time: madsim::time::TimeHandle::current(),
                shared: self.shared.clone(),
            });
        }
    }
}

impl<M> Shared<M> {
    /// Queues a message due at `due`, and makes sure the courier will be awake then.
    fn put_on_wire(&mut self, due: Instant, ticket: Ticket, envelope: Envelope<M>) {
        self.sent += 1;
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                assert!(self.wire[slot].is_none(), "a free slot is empty");
                self.wire[slot] = Some((ticket, envelope));
                slot
            }
            None => {
                self.wire.push(Some((ticket, envelope)));
                self.wire.len() - 1
            }
        };
        self.in_flight.push(Reverse((due, self.sent, slot)));
        self.call_courier(due);
    }

    /// Takes the earliest message if it is due by `now`.
    fn take_due(&mut self, now: Instant) -> Option<(Ticket, Envelope<M>)> {
        let &Reverse((due, _, slot)) = self.in_flight.peek()?;
        if due > now {
            return None;
        }
        self.in_flight.pop();
        self.free_slots.push(slot);
        Some(
            self.wire[slot]
                .take()
                .expect("a queued slot holds its message"),
        )
    }

    /// Wakes the courier if a message is due before its timer (or it has none).
    fn call_courier(&mut self, due: Instant) {
        if let Some((timer, waker)) = &self.courier {
            if timer.is_none_or(|t| due < t) {
                waker.wake_by_ref();
            }
        }
    }
}

/// The task that delivers one message type's messages when they are due.
struct Courier<M> {
    world: World,
    time: madsim::time::TimeHandle,
    shared: Arc<Mutex<Shared<M>>>,
}

impl<M: Send + 'static> Courier<M> {
    /// Keeps a message its link holds until the link lets it go, then puts it back on the
    /// wire, due at the instant the link chose (a new cut or a crash meanwhile still counts
    /// when it is due again). Dropped if the link drops it (a timed-out connection, a crash).
    fn hold(&self, ticket: Ticket, envelope: Envelope<M>, release: oneshot::Receiver<u64>) {
        let (world, shared) = (self.world.clone(), self.shared.clone());
        self.world.spawn_on_nemesis(async move {
            let Ok(at_ns) = release.await else {
                return;
            };
            let wait = Duration::from_nanos(at_ns.saturating_sub(world.now_ns()));
            let due = world.now_instant() + wait.max(LATENCY_MIN);
            shared.lock().unwrap().put_on_wire(due, ticket, envelope);
        });
    }
}

impl<M: Send + 'static> Future for Courier<M> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = self.world.now_instant();
        let mut shared = self.shared.lock().unwrap();
        while let Some((ticket, envelope)) = shared.take_due(now) {
            match self.world.arrive(&ticket) {
                Arrival::Deliver => {
                    if let Some(tx) = shared.inboxes.get(&ticket.to) {
                        // The receiver may have just died: then the message is simply gone.
                        let _ = tx.send(envelope);
                    }
                }
                Arrival::Drop => {}
                Arrival::Held(release) => self.hold(ticket, envelope, release),
            }
        }
        let next_due = shared.in_flight.peek().map(|&Reverse((due, _, _))| due);
        let armed = shared.courier.as_ref().and_then(|(timer, _)| *timer);
        if let Some(due) = next_due.filter(|&due| armed != Some(due)) {
            // `reset` sets the exact instant: `sleep_until` alone would round a due instant
            // less than 1 ms away up to 1 ms, delaying a message sent earlier.
            let mut sleep = self.time.sleep_until(due);
            Pin::new(&mut sleep).reset(due);
            let ready = Pin::new(&mut sleep).poll(cx).is_ready();
            assert!(!ready, "a due message was left undelivered");
        }
        shared.courier = Some((next_due, cx.waker().clone()));
        Poll::Pending
    }
}
