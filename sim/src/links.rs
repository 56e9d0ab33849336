//! The network subsystem's state: per-link latencies, cut links and their generations, loss
//! periods, held links and the messages they hold, counters, and the decision for each
//! message (lost, cut, held, or delivered after which latency). Pure bookkeeping:
//! [`crate::net`] moves the messages, the world applies partitions, delay spikes and loss
//! periods through [`NetState::cut`], [`NetState::restore`], [`NetState::hold`],
//! [`NetState::unhold`] and [`NetState::set_loss`].
//!
//! # What a cut does to a message: `[network] partition`
//! - `drop` (the default): a message sent on a cut link, or in flight on a link cut before it
//!   arrives, is lost. This is a connection that is reset (an RST from a restarted middlebox
//!   or host, a client that closes its connection on a timeout and reconnects): what was on
//!   it never arrives.
//! - `delay`: such a message is held and delivered after the heal, the held messages of a
//!   link in the order they were sent, as TCP does when the connection survives the cut and
//!   its sender retransmits what the receiver never acknowledged. A message held longer
//!   than `connection_timeout_ms` since it was sent is dropped at the heal: by then the
//!   sender's kernel had given up and reset the connection. The default, 924 600 ms, is
//!   Linux's: `net.ipv4.tcp_retries2 = 15` retransmissions, "a hypothetical timeout of 924.6
//!   seconds" (Documentation/networking/ip-sysctl.rst); TCP keepalive does not apply while
//!   data is unacknowledged. A client that sets `TCP_USER_TIMEOUT` gives up sooner: set
//!   `connection_timeout_ms` to its value.
//!
//! A delay spike ([`crate::fault::DelaySpike`]) holds links the same way whatever the mode. A
//! crash of either end kills what is held on its links (the receiver's connection is gone;
//! the sender's retransmission queue died with its kernel).

use crate::nodes::{NodeIdx, Subsystem};
use futures::channel::oneshot;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// What a partition does to the messages on the links it cuts (see the module's
    /// documentation).
    #[serde(default, skip_serializing_if = "is_drop")]
    pub partition: PartitionMode,
    /// How long a held message may wait, since it was sent, before its connection is reset
    /// and it is dropped, in ms (Linux's default retransmission limit).
    #[serde(
        default = "default_connection_timeout_ms",
        skip_serializing_if = "is_default_connection_timeout"
    )]
    pub connection_timeout_ms: u64,
}

/// `[network] partition`: what a cut link does with its messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionMode {
    /// Lose them: the connection is reset.
    #[default]
    Drop,
    /// Hold them and deliver them in send order after the heal: the connection survives and
    /// TCP retransmits, unless `connection_timeout_ms` passes first.
    Delay,
}

fn is_drop(mode: &PartitionMode) -> bool {
    *mode == PartitionMode::Drop
}

/// Linux's `tcp_retries2 = 15`: 924.6 s of retransmissions before a connection is reset.
pub const CONNECTION_TIMEOUT_MS_DEFAULT: u64 = 924_600;

fn default_connection_timeout_ms() -> u64 {
    CONNECTION_TIMEOUT_MS_DEFAULT
}

fn is_default_connection_timeout(ms: &u64) -> bool {
    *ms == CONNECTION_TIMEOUT_MS_DEFAULT
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
            partition: PartitionMode::Drop,
            connection_timeout_ms: CONNECTION_TIMEOUT_MS_DEFAULT,
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
    /// The `links` override of the link from `from` to `to`, if one covers it: the last
    /// listed that does (a later one replaces an earlier). Both worlds take a link's latency
    /// from here (live mode's proxies too).
    pub fn link(&self, from: &str, to: &str) -> Option<&LinkConfig> {
        let covers = |l: &&LinkConfig| {
            (l.from == from && l.to == to) || (l.both_ways && l.from == to && l.to == from)
        };
        self.links.iter().rev().find(covers)
    }

    /// The one-way latency range from `from` to `to`, in ms: its override's, else the default.
    pub fn latency_ms(&self, from: &str, to: &str) -> (f64, f64) {
        self.link(from, to)
            .map_or((self.latency_ms_min, self.latency_ms_max), |l| {
                (l.latency_ms_min, l.latency_ms_max)
            })
    }

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
        if self.connection_timeout_ms == 0 {
            return Err("network.connection_timeout_ms must be positive".into());
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

/// madsim never wakes a sleeper sooner than this after it starts sleeping: no message
/// arrives sooner.
pub(crate) const LATENCY_MIN: Duration = Duration::from_millis(1);

/// What the network decided for one send.
pub(crate) struct Route {
    /// The message's latency.
    pub latency: Duration,
    /// A duplicate's latency, if the link duplicated the message (no `Vec` per send: this
    /// is decided for every message of a run).
    pub duplicate: Option<Duration>,
    pub ticket: Ticket,
}

/// What a message must still find true on delivery.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub from: NodeIdx,
    pub to: NodeIdx,
    /// The message's number, in send order: held messages leave in this order.
    pub seq: u64,
    /// True time of the send, in ns: a held message times out from here.
    pub sent_ns: u64,
    /// The link's cut generation at send time.
    pub link_generation: u64,
    /// The receiver's incarnation at send time.
    pub incarnation: u64,
}

/// Counters of the network, for stats.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetStats {
    /// Messages handed to the network.
    pub sent: u64,
    /// Messages lost at random.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Messages dropped by a partition (at send or in flight).
    pub cut: u64,
    /// Messages dropped because the receiver was down or crashed meanwhile.
    pub to_dead: u64,
    /// Messages to or from the fenced resource (the workload's reads and writes, not the
    /// lock's own traffic), counted in `sent` too.
    pub resource: u64,
    /// Times a message was held by a delay spike or a `delay` partition (a held message
    /// ends delivered, or counted in `cut` if its connection timed out, or in `to_dead`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A message held on its link, waiting for the link to be whole again.
struct Held {
    seq: u64,
    sent_ns: u64,
    /// Told the true time (ns) at which the message arrives; dropped to drop it.
    release: oneshot::Sender<u64>,
}

/// What becomes of a message that reaches the end of its link.
pub(crate) enum Arrival {
    /// It is delivered now.
    Deliver,
    /// It is gone.
    Drop,
    /// It is held: the receiver yields the true time (ns) at which it arrives after the
    /// link is whole, or is cancelled if it is dropped meanwhile.
    Held(oneshot::Receiver<u64>),
}

type Link = (NodeIdx, NodeIdx);

/// The network's part of the world: latencies, partitions, loss, counters.
pub(crate) struct NetState {
    pub(crate) config: NetConfig,
    /// Directed links currently cut, with how many partitions cut them.
    cuts: BTreeMap<Link, u32>,
    /// How often each directed link has been cut: a message in flight across a cut dies.
    pub(crate) generations: BTreeMap<Link, u64>,
    /// A loss period in force: its number and probability.
    pub(crate) loss_override: Option<(u64, f64)>,
    loss_epoch: u64,
    /// Per-link latency ranges, in ms, for links with their own.
    pub(crate) links: BTreeMap<Link, (f64, f64)>,
    pub(crate) stats: NetStats,
    /// Directed links held by delay spikes, with how many spikes hold them.
    holds: BTreeMap<Link, u32>,
    /// The messages held on each link, in send order.
    held: BTreeMap<Link, Vec<Held>>,
    /// Messages sent so far (numbers them).
    sends: u64,
    /// The calls waiting on each node's answer: a crash resets their connections.
    resets: Resets,
}

/// The calls waiting on each server's answer, by server and then by a number of their own,
/// each with its caller: told when the server's process dies.
#[derive(Default)]
struct Resets {
    waiting: BTreeMap<NodeIdx, BTreeMap<u64, (NodeIdx, oneshot::Sender<()>)>>,
    next: u64,
}

impl NetState {
    pub(crate) fn new(config: NetConfig) -> Self {
        NetState {
            config,
            cuts: BTreeMap::new(),
            generations: BTreeMap::new(),
            loss_override: None,
            loss_epoch: 0,
            links: BTreeMap::new(),
            stats: NetStats::default(),
            holds: BTreeMap::new(),
            held: BTreeMap::new(),
            sends: 0,
            resets: Resets::default(),
        }
    }

    /// Registers a call of `from` waiting on `to`'s answer: the receiver hears if `to`'s
    /// process dies meanwhile (see [`NetState::crash`]). The number unregisters it.
    pub(crate) fn watch_reset(
        &mut self,
        from: NodeIdx,
        to: NodeIdx,
    ) -> (u64, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let key = self.resets.next;
        self.resets.next += 1;
        self.resets
            .waiting
            .entry(to)
            .or_default()
            .insert(key, (from, tx));
        (key, rx)
    }

    /// The call numbered `key`, waiting on `to`, is over.
    pub(crate) fn unwatch_reset(&mut self, to: NodeIdx, key: u64) {
        if let Some(waiting) = self.resets.waiting.get_mut(&to) {
            waiting.remove(&key);
            if waiting.is_empty() {
                self.resets.waiting.remove(&to);
            }
        }
    }

    /// Closes every connection a caller has open to `server` (the calls and watches
    /// registered on it): each caller not cut off from it hears so.
    pub(crate) fn close_connections(&mut self, server: NodeIdx) {
        for (_, (from, reset)) in self.resets.waiting.remove(&server).unwrap_or_default() {
            if !self.is_cut(server, from) {
                let _ = reset.send(());
            }
        }
    }

    /// The configured latencies of links between node `idx` (just added) and the nodes
    /// named in `names` (indexed by node): [`NetConfig::link`]'s.
    pub(crate) fn links_of(&self, idx: NodeIdx, names: &[&str]) -> Vec<(Link, (f64, f64))> {
        let mut out = Vec::new();
        if self.config.links.is_empty() {
            // Most scenarios: nothing to look up for each pair at each node's start.
            return out;
        }
        for other in 0..names.len() {
            for (a, b) in [(idx, other), (other, idx)] {
                if let Some(l) = self.config.link(names[a], names[b]) {
                    out.push(((a, b), (l.latency_ms_min, l.latency_ms_max)));
                }
            }
        }
        out
    }

    /// Sets per-link latencies.
    pub(crate) fn add_links(&mut self, links: Vec<(Link, (f64, f64))>) {
        self.links.extend(links);
    }

    /// Whether a partition cuts the link from `from` to `to` now.
    pub(crate) fn is_cut(&self, from: NodeIdx, to: NodeIdx) -> bool {
        self.cuts.contains_key(&(from, to))
    }

    /// Cuts these directed links (partitions nest: a link heals when every cut is undone).
    pub(crate) fn cut(&mut self, links: &[Link]) {
        for link in links {
            *self.cuts.entry(*link).or_insert(0) += 1;
            *self.generations.entry(*link).or_insert(0) += 1;
        }
    }

    /// Undoes one cut of these links; true if some link is whole again.
    pub(crate) fn restore(&mut self, links: &[Link]) -> bool {
        let mut healed = false;
        for link in links {
            if let Some(n) = self.cuts.get_mut(link) {
                *n -= 1;
                if *n == 0 {
                    self.cuts.remove(link);
                    healed = true;
                }
            }
        }
        healed
    }

    /// Starts a loss period; returns its number (for [`NetState::end_loss`]).
    pub(crate) fn set_loss(&mut self, probability: f64) -> u64 {
        self.loss_epoch += 1;
        self.loss_override = Some((self.loss_epoch, probability));
        self.loss_epoch
    }

    /// Ends loss period `epoch` unless a later one replaced it; true if it ended.
    pub(crate) fn end_loss(&mut self, epoch: u64) -> bool {
        let current = self.loss_override.is_some_and(|(e, _)| e == epoch);
        if current {
            self.loss_override = None;
        }
        current
    }

    /// Holds these directed links (delay spikes nest like cuts).
    pub(crate) fn hold(&mut self, links: &[Link]) {
        for link in links {
            *self.holds.entry(*link).or_insert(0) += 1;
        }
    }

    /// Undoes one hold of these links; true if some link is free of holds again.
    pub(crate) fn unhold(&mut self, links: &[Link]) -> bool {
        let mut freed = false;
        for link in links {
            if let Some(n) = self.holds.get_mut(link) {
                *n -= 1;
                if *n == 0 {
                    self.holds.remove(link);
                    freed = true;
                }
            }
        }
        freed
    }

    /// The liveness phase: every link whole and free, no loss period; true if anything
    /// changed. (The world then releases what the links held: [`NetState::release`].)
    pub(crate) fn restore_all(&mut self) -> bool {
        let had = !self.cuts.is_empty() || !self.holds.is_empty() || self.loss_override.is_some();
        self.cuts.clear();
        self.holds.clear();
        self.loss_override = None;
        had
    }
}

/// What the receiver of a message is when it is sent or delivered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Receiver {
    pub alive: bool,
    pub incarnation: u64,
}

impl NetState {
    /// Decides one send: dropped (receiver down, link cut, lost) or delivered after these
    /// latencies (two for a duplicate).
    pub(crate) fn route(
        &mut self,
        from: NodeIdx,
        to: NodeIdx,
        receiver: Receiver,
        now_ns: u64,
    ) -> Option<Route> {
        let mut rng = madsim::rand::thread_rng();
        self.stats.sent += 1;
        self.sends += 1;
        if !receiver.alive {
            self.stats.to_dead += 1;
            return None;
        }
        // With `delay`, a message sent on a cut link goes out and is held where it arrives.
        let drops = self.config.partition == PartitionMode::Drop;
        if drops && self.is_cut(from, to) {
            self.stats.cut += 1;
            return None;
        }
        let loss = self
            .loss_override
            .map_or(self.config.loss_probability, |(_, p)| p);
        if loss > 0.0 && rng.gen_bool(loss) {
            self.stats.lost += 1;
            return None;
        }
        let latency = self.latency((from, to));
        let dup = self.config.duplicate_probability;
        let mut duplicate = None;
        if dup > 0.0 && rng.gen_bool(dup) {
            self.stats.duplicated += 1;
            duplicate = Some(self.latency((from, to)));
        }
        Some(Route {
            latency,
            duplicate,
            ticket: Ticket {
                from,
                to,
                seq: self.sends,
                sent_ns: now_ns,
                link_generation: self.generations.get(&(from, to)).copied().unwrap_or(0),
                incarnation: receiver.incarnation,
            },
        })
    }

    /// What becomes of a message at the end of its link. With `drop`, a message whose link
    /// was cut at any moment while it was in flight is lost; with `delay`, one whose link is
    /// cut now is held (and one whose link was cut and healed meanwhile arrives: TCP
    /// retransmitted it). A held link holds it in either mode; a dead or restarted receiver
    /// loses it.
    pub(crate) fn arrive(&mut self, t: &Ticket, receiver: Receiver) -> Arrival {
        let link = (t.from, t.to);
        let generation = self.generations.get(&link).copied().unwrap_or(0);
        let cut_now = self.cuts.contains_key(&link);
        let drops = self.config.partition == PartitionMode::Drop;
        if drops && (cut_now || generation != t.link_generation) {
            self.stats.cut += 1;
            return Arrival::Drop;
        }
        if !receiver.alive || receiver.incarnation != t.incarnation {
            self.stats.to_dead += 1;
            return Arrival::Drop;
        }
        if cut_now || self.holds.contains_key(&link) {
            return Arrival::Held(self.hold_message(link, t));
        }
        Arrival::Deliver
    }

    /// Keeps a message on its link, in send order (it may have overtaken an earlier one).
    fn hold_message(&mut self, link: Link, t: &Ticket) -> oneshot::Receiver<u64> {
        let (release, arrival) = oneshot::channel();
        let queue = self.held.entry(link).or_default();
        // The two copies of a duplicated message count once.
        if !queue.iter().any(|h| h.seq == t.seq) {
            self.stats.held += 1;
        }
        let at = queue.partition_point(|h| h.seq < t.seq);
        let held = Held {
            seq: t.seq,
            sent_ns: t.sent_ns,
            release,
        };
        queue.insert(at, held);
        arrival
    }

    /// Sends on what the links that are whole and free again held: in send order, each
    /// after a latency drawn for its link and after the one before it (TCP delivers a
    /// stream in order). A message held longer than `connection_timeout_ms` since it was
    /// sent is dropped: its connection was reset meanwhile.
    pub(crate) fn release(&mut self, now_ns: u64) {
        let free: Vec<Link> = (self.held.keys())
            .filter(|l| !self.cuts.contains_key(l) && !self.holds.contains_key(l))
            .copied()
            .collect();
        let timeout_ns = self.config.connection_timeout_ms.saturating_mul(1_000_000);
        for link in free {
            let queue = self.held.remove(&link).expect("a held link");
            let mut last_ns = now_ns;
            for held in queue {
                if now_ns.saturating_sub(held.sent_ns) > timeout_ns {
                    self.stats.cut += 1;
                    continue; // Dropping `release` drops the message.
                }
                // At least 1 ms (madsim's timer resolution), and strictly after the one
                // before: equal deadlines would not keep the order.
                let latency_ns = self.latency(link).as_nanos() as u64;
                let at_ns = (now_ns + latency_ns.max(1_000_000)).max(last_ns + 1_000);
                last_ns = at_ns;
                // The receiving task may be gone with its node: then so is the message.
                let _ = held.release.send(at_ns);
            }
        }
        assert!(self
            .held
            .keys()
            .all(|l| self.cuts.contains_key(l) || self.holds.contains_key(l)));
    }

    /// The link's smallest latency (madsim's smallest sleep at least): a reset's, which is
    /// not drawn, carrying nothing else.
    pub(crate) fn smallest_latency(&self, link: Link) -> Duration {
        Self::ms_at_least_min(self.latency_range(link).0)
    }

    /// The link's largest latency (madsim's smallest sleep at least): by then whatever was
    /// on the link has arrived.
    pub(crate) fn largest_latency(&self, link: Link) -> Duration {
        Self::ms_at_least_min(self.latency_range(link).1)
    }

    fn latency_range(&self, link: Link) -> (f64, f64) {
        (self.links.get(&link).copied())
            .unwrap_or((self.config.latency_ms_min, self.config.latency_ms_max))
    }

    fn ms_at_least_min(ms: f64) -> Duration {
        Duration::from_nanos((ms * 1e6) as u64).max(LATENCY_MIN)
    }

    /// One latency of `link`, from the seeded RNG.
    fn latency(&self, link: Link) -> Duration {
        let (min_ms, max_ms) = self.latency_range(link);
        let (lo, hi) = ((min_ms * 1e6) as u64, (max_ms * 1e6) as u64);
        let mut rng = madsim::rand::thread_rng();
        Duration::from_nanos(if hi > lo { rng.gen_range(lo..=hi) } else { lo })
    }
}

/// A crash kills what is held on the node's links, both ways (a message in flight to the
/// dead incarnation is dropped on delivery by its ticket). The liveness phase makes every
/// link whole and free and ends any loss period.
impl Subsystem for NetState {
    /// Drops what its links hold, and resets the connections of the calls waiting on it: its
    /// host closes them as the process dies (each caller not cut off from it hears so).
    fn crash(&mut self, idx: NodeIdx) {
        self.close_connections(idx);
        for (link, queue) in &mut self.held {
            if link.0 == idx || link.1 == idx {
                self.stats.to_dead += queue.len() as u64;
                queue.clear(); // Dropping each `release` drops its message.
            }
        }
        self.held.retain(|_, queue| !queue.is_empty());
    }

    fn heal(&mut self) -> bool {
        self.restore_all()
    }
}
