//! The network subsystem's state: per-link latencies, cut links and their generations, loss
//! periods, counters, and the decision for each message (lost, cut, or delivered after which
//! latency). Pure bookkeeping: [`crate::net`] moves the messages, the world applies
//! partitions and loss periods through [`NetState::cut`], [`NetState::restore`] and
//! [`NetState::set_loss`].

use crate::nodes::{NodeIdx, Subsystem};
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
}

type Link = (NodeIdx, NodeIdx);

/// The network's part of the world: latencies, partitions, loss, counters.
pub(crate) struct NetState {
    pub(crate) config: NetConfig,
    /// Directed links currently cut, with how many partitions cut them.
    pub(crate) cuts: BTreeMap<Link, u32>,
    /// How often each directed link has been cut: a message in flight across a cut dies.
    pub(crate) generations: BTreeMap<Link, u64>,
    /// A loss period in force: its number and probability.
    pub(crate) loss_override: Option<(u64, f64)>,
    loss_epoch: u64,
    /// Per-link latency ranges, in ms, for links with their own.
    pub(crate) links: BTreeMap<Link, (f64, f64)>,
    pub(crate) stats: NetStats,
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
        }
    }

    /// The configured latencies of links between node `idx` (just added) and the nodes
    /// named in `names` (indexed by node).
    pub(crate) fn links_of(&self, idx: NodeIdx, names: &[&str]) -> Vec<(Link, (f64, f64))> {
        let name = names[idx];
        let find = |n: &str| names.iter().position(|m| *m == n);
        let mut out = Vec::new();
        for link in &self.config.links {
            if link.from != name && link.to != name {
                continue;
            }
            let mut add = |a: &str, b: &str| {
                if let (Some(ai), Some(bi)) = (find(a), find(b)) {
                    if ai == idx || bi == idx {
                        out.push(((ai, bi), (link.latency_ms_min, link.latency_ms_max)));
                    }
                }
            };
            add(&link.from, &link.to);
            if link.both_ways {
                add(&link.to, &link.from);
            }
        }
        out
    }

    /// Sets per-link latencies.
    pub(crate) fn add_links(&mut self, links: Vec<(Link, (f64, f64))>) {
        self.links.extend(links);
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

    /// The liveness phase: every link whole, no loss period; true if anything changed.
    pub(crate) fn restore_all(&mut self) -> bool {
        let had = !self.cuts.is_empty() || self.loss_override.is_some();
        self.cuts.clear();
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
    ) -> Option<Route> {
        let mut rng = madsim::rand::thread_rng();
        self.stats.sent += 1;
        if !receiver.alive {
            self.stats.to_dead += 1;
            return None;
        }
        if self.cuts.contains_key(&(from, to)) {
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
        let (min_ms, max_ms) = self
            .links
            .get(&(from, to))
            .copied()
            .unwrap_or((self.config.latency_ms_min, self.config.latency_ms_max));
        let (lo, hi) = ((min_ms * 1e6) as u64, (max_ms * 1e6) as u64);
        let draw = |rng: &mut madsim::rand::GlobalRng| {
            Duration::from_nanos(if hi > lo { rng.gen_range(lo..=hi) } else { lo })
        };
        let mut latencies = vec![draw(&mut rng)];
        let dup = self.config.duplicate_probability;
        if dup > 0.0 && rng.gen_bool(dup) {
            self.stats.duplicated += 1;
            latencies.push(draw(&mut rng));
        }
        Some(Route {
            latencies,
            ticket: Ticket {
                from,
                to,
                link_generation: self.generations.get(&(from, to)).copied().unwrap_or(0),
                incarnation: receiver.incarnation,
            },
        })
    }

    /// Whether a message may still be delivered: its link was not cut while it was in
    /// flight and its receiver did not crash meanwhile.
    pub(crate) fn deliverable(&mut self, t: &Ticket, receiver: Receiver) -> bool {
        let link = (t.from, t.to);
        let generation = self.generations.get(&link).copied().unwrap_or(0);
        if self.cuts.contains_key(&link) || generation != t.link_generation {
            self.stats.cut += 1;
            return false;
        }
        if !receiver.alive || receiver.incarnation != t.incarnation {
            self.stats.to_dead += 1;
            return false;
        }
        true
    }
}

/// A crash needs nothing here: a message to the dead incarnation is dropped on delivery by
/// its ticket. The liveness phase makes every link whole and ends any loss period.
impl Subsystem for NetState {
    fn heal(&mut self) -> bool {
        self.restore_all()
    }
}
