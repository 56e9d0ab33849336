//! The checker: a pure function of a history that decides mutual exclusion, fencing safety
//! and resource integrity, and gives a witness for every violation.
//!
//! Definitions (the checker's contract, see ARCHITECTURE.md):
//! - A **critical section** (CS) runs from a client's `cs_enter` to its `cs_exit`. A client
//!   that is paused inside its CS is still inside it; a crash of the client ends it (a dead
//!   process acts on nothing); a CS still open when the history ends lasts to its end.
//! - **Mutual exclusion** is violated when two CS intervals of different grants overlap in
//!   true time. Touching intervals (one exits at the instant the other enters) do not.
//! - **Fencing** is violated when the resource *accepted* a token lower than one it had
//!   accepted before (a stale write), or accepted the same token from two different grants
//!   (token reuse).
//! - **Lost update**: each write the resource applied is one increment of the counter (a
//!   client writes the value it read + 1); the counter's final value (the last value the
//!   resource accepted) must be at least the number of distinct applied writes, and so at
//!   least the number of acknowledged ones. Counting applied writes, not only acknowledged
//!   ones, keeps a write whose acknowledgement was lost from hiding another's lost increment.
//!
//! A verdict is `valid`, `invalid` (with witnesses) or `unknown` (the history cannot decide);
//! combining verdicts, the worst wins.

use crate::history::{Event, Kind, Op};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The outcome of a check, Jepsen style: worst wins when combining.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every property held.
    Valid,
    /// The history cannot decide (e.g. acknowledged writes but no record of the resource).
    Unknown,
    /// At least one property was violated; see the witnesses.
    Invalid,
}

impl Verdict {
    /// The worse of two verdicts.
    pub fn combine(self, other: Verdict) -> Verdict {
        self.max(other)
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Valid => "valid",
            Verdict::Unknown => "unknown",
            Verdict::Invalid => "invalid",
        })
    }
}

/// The safety properties the checker decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Property {
    /// No two grants' critical sections overlap in true time.
    MutualExclusion,
    /// The resource never accepts a stale or reused token.
    Fencing,
    /// No acknowledged increment of the counter is lost.
    LostUpdate,
}

impl Property {
    /// All properties, in report order.
    pub const ALL: [Property; 3] = [
        Property::MutualExclusion,
        Property::Fencing,
        Property::LostUpdate,
    ];

    /// The snake_case name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Property::MutualExclusion => "mutual_exclusion",
            Property::Fencing => "fencing",
            Property::LostUpdate => "lost_update",
        }
    }
}

/// One violation of a property, with the events that prove it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which property.
    pub kind: Property,
    /// What happened, in words.
    pub description: String,
    /// Indexes of the witness events in the history.
    pub events: Vec<u64>,
}

/// The result of one property: its verdict, and why where it is not valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyResult {
    /// Which property.
    pub property: Property,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why the verdict is `unknown`, where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Liveness figures: not violations, but what a user wants to compare.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    /// Acquire invocations.
    pub acquire_attempts: u64,
    /// Acquires that returned a grant.
    pub acquisitions: u64,
    /// Acquires that definitely failed (including giving up after the timeout).
    pub acquire_failures: u64,
    /// Acquires whose outcome the client never learned.
    pub acquire_unknown: u64,
    /// Median time from acquire invoke to grant, in ms.
    pub acquire_latency_ms_p50: f64,
    /// 99th percentile time from acquire invoke to grant, in ms.
    pub acquire_latency_ms_p99: f64,
    /// Total time some client was in its CS, in ms (overlaps counted once).
    pub held_ms: f64,
    /// Total time some client wanted the lock (from an acquire attempt until it got the lock,
    /// failed attempts and the pauses between them included) while no live client was inside
    /// its critical section, in ms.
    pub wanted_free_ms: f64,
    /// The longest such stretch, in ms: a long one is a stuck lock.
    pub wanted_free_ms_max: f64,
    /// When the first acquire of the run returned a grant, in ms of true time (absent if
    /// none did): a late first grant is a lock left unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_ms: Option<f64>,
    /// Writes the resource accepted.
    pub writes_accepted: u64,
    /// Writes the resource rejected as fenced.
    pub writes_rejected: u64,
}

/// Everything the checker says about one history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The combined verdict (worst wins).
    pub verdict: Verdict,
    /// Per-property verdicts.
    pub properties: Vec<PropertyResult>,
    /// Every violation found, with witnesses.
    pub violations: Vec<Violation>,
    /// Liveness figures.
    pub liveness: Liveness,
}

impl Report {
    /// The verdict of one property.
    pub fn property(&self, property: Property) -> Verdict {
        self.properties
            .iter()
            .find(|p| p.property == property)
            .map_or(Verdict::Valid, |p| p.verdict)
    }
}

/// A critical-section interval in true time.
#[derive(Clone, Debug)]
struct Interval {
    grant: String,
    node: String,
    start_ns: u64,
    end_ns: u64,
    enter_index: u64,
    /// The event that closed it (`cs_exit`, a crash, or none if the history ended first).
    exit_index: Option<u64>,
}

/// Checks a history. Pure: the same history always gives the same report.
pub fn check(history: &[Event]) -> Report {
    let intervals = cs_intervals(history);
    let (me_verdict, me_violations) = check_mutual_exclusion(&intervals);
    let (fence_verdict, fence_violations) = check_fencing(history);
    let (lost, lost_violations, lost_reason) = check_lost_update(history);
    let properties = vec![
        PropertyResult {
            property: Property::MutualExclusion,
            verdict: me_verdict,
            reason: None,
        },
        PropertyResult {
            property: Property::Fencing,
            verdict: fence_verdict,
            reason: None,
        },
        PropertyResult {
            property: Property::LostUpdate,
            verdict: lost,
            reason: lost_reason,
        },
    ];
    let verdict = properties
        .iter()
        .fold(Verdict::Valid, |v, p| v.combine(p.verdict));
    let mut violations = me_violations;
    violations.extend(fence_violations);
    violations.extend(lost_violations);
    Report {
        verdict,
        properties,
        violations,
        liveness: liveness(history, &intervals),
    }
}

fn end_time_ns(history: &[Event]) -> u64 {
    history.last().map_or(0, |e| e.time_ns)
}

fn cs_intervals(history: &[Event]) -> Vec<Interval> {
    let end_ns = end_time_ns(history);
    let mut open: BTreeMap<&str, Interval> = BTreeMap::new();
    let mut closed = Vec::new();
    for e in history {
        match (&e.op, e.kind) {
            (Op::CsEnter, Kind::Ok | Kind::Info) => {
                let interval = Interval {
                    grant: e
                        .grant
                        .clone()
                        .unwrap_or_else(|| format!("{}@{}", e.node, e.index)),
                    node: e.node.clone(),
                    start_ns: e.time_ns,
                    end_ns,
                    enter_index: e.index,
                    exit_index: None,
                };
                if let Some(mut prev) = open.insert(&e.node, interval) {
                    // A second enter without an exit: the first CS ends where the next begins.
                    prev.end_ns = e.time_ns;
                    closed.push(prev);
                }
            }
            (Op::CsExit, _) => {
                if let Some(mut interval) = open.remove(e.node.as_str()) {
                    interval.end_ns = e.time_ns;
                    interval.exit_index = Some(e.index);
                    closed.push(interval);
                }
            }
            (Op::Crash, _) => {
                let crashed = e.target.as_deref().unwrap_or(&e.node);
                if let Some(mut interval) = open.remove(crashed) {
                    interval.end_ns = e.time_ns;
                    interval.exit_index = Some(e.index);
                    closed.push(interval);
                }
            }
            _ => {}
        }
    }
    closed.extend(open.into_values());
    closed.sort_by_key(|i| (i.start_ns, i.enter_index));
    closed
}

fn describe_interval(i: &Interval) -> String {
    format!(
        "{} held grant {} from {:.3}ms to {:.3}ms{}",
        i.node,
        i.grant,
        i.start_ns as f64 / 1e6,
        i.end_ns as f64 / 1e6,
        if i.exit_index.is_none() {
            " (still inside at the end)"
        } else {
            ""
        }
    )
}

fn check_mutual_exclusion(intervals: &[Interval]) -> (Verdict, Vec<Violation>) {
    let mut violations = Vec::new();
    // Intervals are sorted by start; `active` holds those that may still overlap later ones.
    let mut active: Vec<&Interval> = Vec::new();
    for b in intervals {
        active.retain(|a| a.end_ns > b.start_ns);
        for a in &active {
            if a.grant != b.grant && a.start_ns < b.end_ns {
                let mut events = vec![a.enter_index, b.enter_index];
                events.extend(a.exit_index);
                events.extend(b.exit_index);
                events.sort_unstable();
                violations.push(Violation {
                    kind: Property::MutualExclusion,
                    description: format!(
                        "two grants in the critical section at once: {}; {}",
                        describe_interval(a),
                        describe_interval(b)
                    ),
                    events,
                });
            }
        }
        active.push(b);
    }
    let verdict = if violations.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Invalid
    };
    (verdict, violations)
}

fn check_fencing(history: &[Event]) -> (Verdict, Vec<Violation>) {
    let mut violations = Vec::new();
    let mut highest: Option<&Event> = None;
    let mut first_by_token: BTreeMap<u64, &Event> = BTreeMap::new();
    for e in history {
        if e.op != Op::ResourceAccept {
            continue;
        }
        let Some(token) = e.token else { continue };
        if let Some(h) = highest {
            if token < h.token.unwrap_or(0) {
                violations.push(Violation {
                    kind: Property::Fencing,
                    description: format!(
                        "stale token accepted: token {} from {} accepted at {:.3}ms after token \
                         {} from {} at {:.3}ms",
                        token,
                        e.grant.as_deref().unwrap_or(&e.node),
                        e.time_ms(),
                        h.token.unwrap_or(0),
                        h.grant.as_deref().unwrap_or(&h.node),
                        h.time_ms()
                    ),
                    events: vec![h.index, e.index],
                });
            }
        }
        if highest.is_none_or(|h| token > h.token.unwrap_or(0)) {
            highest = Some(e);
        }
        match first_by_token.get(&token) {
            Some(first) if first.grant != e.grant => violations.push(Violation {
                kind: Property::Fencing,
                description: format!(
                    "token {} reused: accepted from grant {} at {:.3}ms and from grant {} at \
                     {:.3}ms",
                    token,
                    first.grant.as_deref().unwrap_or("?"),
                    first.time_ms(),
                    e.grant.as_deref().unwrap_or("?"),
                    e.time_ms()
                ),
                events: vec![first.index, e.index],
            }),
            Some(_) => {}
            None => {
                first_by_token.insert(token, e);
            }
        }
    }
    let verdict = if violations.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Invalid
    };
    (verdict, violations)
}

fn check_lost_update(history: &[Event]) -> (Verdict, Vec<Violation>, Option<String>) {
    let acked = history
        .iter()
        .filter(|e| e.op == Op::Write && e.kind == Kind::Ok)
        .count();
    let accepts: Vec<&Event> = history
        .iter()
        .filter(|e| e.op == Op::ResourceAccept)
        .collect();
    // Each distinct applied write is one increment (a duplicated message applied twice
    // writes the same value for the same grant: it counts once).
    let applied: BTreeSet<(&str, Option<i64>)> = accepts
        .iter()
        .map(|e| (e.grant.as_deref().unwrap_or(&e.node), e.value))
        .collect();
    if acked == 0 && accepts.is_empty() {
        return (Verdict::Valid, vec![], None);
    }
    let Some(last) = accepts.last() else {
        return (
            Verdict::Unknown,
            vec![],
            Some(format!(
                "{acked} writes were acknowledged but the history has no resource_accept \
                 event, so the counter's final value is unknown"
            )),
        );
    };
    let Some(final_value) = last.value else {
        return (
            Verdict::Unknown,
            vec![],
            Some(format!(
                "the last resource_accept (#{}) carries no value",
                last.index
            )),
        );
    };
    let increments = applied.len().max(acked) as i64;
    if final_value >= increments {
        return (Verdict::Valid, vec![], None);
    }
    // Witness: the first two accepted writes of different grants that wrote the same value,
    // i.e. the second overwrote the first's increment (both read the same old value).
    let mut by_value: BTreeMap<i64, &Event> = BTreeMap::new();
    let mut events = vec![];
    for a in &accepts {
        let Some(v) = a.value else { continue };
        match by_value.get(&v) {
            Some(first) if first.grant != a.grant => {
                events = vec![first.index, a.index];
                break;
            }
            Some(_) => {}
            None => {
                by_value.insert(v, a);
            }
        }
    }
    if events.is_empty() {
        events.push(last.index);
    }
    let violation = Violation {
        kind: Property::LostUpdate,
        description: format!(
            "the resource applied {} increments ({acked} acknowledged) but the counter ends \
             at {final_value}: {} lost",
            applied.len(),
            increments - final_value
        ),
        events,
    };
    (Verdict::Invalid, vec![violation], None)
}

fn percentile_ms(sorted_ns: &[u64], pct: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    // Nearest-rank percentile.
    let rank = ((pct / 100.0) * sorted_ns.len() as f64).ceil().max(1.0) as usize;
    sorted_ns[rank.min(sorted_ns.len()) - 1] as f64 / 1e6
}

fn liveness(history: &[Event], intervals: &[Interval]) -> Liveness {
    let mut l = Liveness::default();
    // A client wants the lock from an acquire attempt until it gets it (a failed attempt and
    // the pause before the next one do not end the wanting) or until it crashes.
    let mut attempt_start: BTreeMap<&str, u64> = BTreeMap::new();
    let mut wanting: BTreeSet<&str> = BTreeSet::new();
    let mut latencies_ns = Vec::new();
    // Points where the number of waiting clients or holders changes: (time, d_wanting, d_holding).
    let mut steps: Vec<(u64, i64, i64)> = Vec::new();
    for e in history {
        match (&e.op, e.kind) {
            (Op::Acquire, Kind::Invoke) => {
                l.acquire_attempts += 1;
                attempt_start.insert(&e.node, e.time_ns);
                if wanting.insert(&e.node) {
                    steps.push((e.time_ns, 1, 0));
                }
            }
            (Op::Acquire, kind) => {
                match kind {
                    Kind::Ok => {
                        l.acquisitions += 1;
                        l.first_grant_ms.get_or_insert(e.time_ms());
                    }
                    Kind::Fail => l.acquire_failures += 1,
                    _ => l.acquire_unknown += 1,
                }
                let start = attempt_start.remove(e.node.as_str());
                if kind == Kind::Ok {
                    latencies_ns.extend(start.map(|t| e.time_ns - t));
                    if wanting.remove(e.node.as_str()) {
                        steps.push((e.time_ns, -1, 0));
                    }
                }
            }
            (Op::Crash, _) => {
                let crashed = e.target.as_deref().unwrap_or(&e.node);
                attempt_start.remove(crashed);
                if wanting.remove(crashed) {
                    steps.push((e.time_ns, -1, 0));
                }
            }
            (Op::ResourceAccept, _) => l.writes_accepted += 1,
            (Op::ResourceReject, _) => l.writes_rejected += 1,
            _ => {}
        }
    }
    // The last stretch runs to the end of the history.
    steps.push((end_time_ns(history), 0, 0));
    for i in intervals {
        steps.push((i.start_ns, 0, 1));
        steps.push((i.end_ns, 0, -1));
    }
    steps.sort_unstable();
    let (mut wanting, mut holding) = (0i64, 0i64);
    let (mut last_ns, mut held_ns, mut free_ns, mut run_ns, mut run_max_ns) = (0u64, 0, 0, 0, 0);
    for (t, dw, dh) in steps {
        let span = t - last_ns;
        if holding > 0 {
            held_ns += span;
        }
        if wanting > 0 && holding == 0 {
            free_ns += span;
            run_ns += span;
            run_max_ns = run_max_ns.max(run_ns);
        } else if span > 0 {
            run_ns = 0;
        }
        wanting += dw;
        holding += dh;
        last_ns = t;
    }
    latencies_ns.sort_unstable();
    l.acquire_latency_ms_p50 = percentile_ms(&latencies_ns, 50.0);
    l.acquire_latency_ms_p99 = percentile_ms(&latencies_ns, 99.0);
    l.held_ms = held_ns as f64 / 1e6;
    l.wanted_free_ms = free_ns as f64 / 1e6;
    l.wanted_free_ms_max = run_max_ns as f64 / 1e6;
    l
}
