//! The checker: a pure function of a history that decides mutual exclusion, fencing safety
//! and resource integrity, and gives a witness for every violation.
//!
//! Definitions (the checker's contract, see ARCHITECTURE.md):
//! - A **critical section** (CS) runs from a client's `cs_enter` to its `cs_exit`. A client
//!   that is paused inside its CS is still inside it; a crash of the client ends it (a dead
//!   process acts on nothing); a CS still open when the history ends lasts to its end.
//! - **Mutual exclusion** is violated when two CS intervals of different grants overlap in
//!   true time. Touching intervals (one exits at the instant the other enters) do not. A
//!   `cs_enter` of kind `info` means "may have entered", and events stamped by a node's own
//!   clock know true time only within an error bound: an overlap that holds only for some of
//!   the possible times is `unknown`, never `invalid` (see [`crate::mutual_exclusion`]).
//! - **Fencing** is violated when the resource *accepted* a token lower than one it had
//!   accepted before (a stale write), or accepted the same token from two different grants
//!   (token reuse).
//! - **Lost update**: each write the resource applied is one increment of the counter (a
//!   client writes the value it read + 1); the counter's final value (the last value the
//!   resource accepted) must be at least the number of distinct applied writes, and so at
//!   least the number of acknowledged ones. Counting applied writes, not only acknowledged
//!   ones, keeps a write whose acknowledgement was lost from hiding another's lost increment.
//!
//! A verdict is `valid`, `invalid` (with witnesses) or `unknown` (the history cannot decide,
//! with the reason); combining verdicts, the worst wins. Counts of violations are exact
//! however many there are; witnesses are capped at [`WITNESSES_MAX`] per property.
//!
//! ```
//! use locksim_check::{check, Event, Kind, Op, Property, Verdict};
//!
//! let mut history = vec![
//!     Event::new("c1", Kind::Ok, Op::CsEnter).grant("c1#1"),
//!     Event::new("c2", Kind::Ok, Op::CsEnter).grant("c2#1"),
//!     Event::new("c1", Kind::Ok, Op::CsExit).grant("c1#1"),
//!     Event::new("c2", Kind::Ok, Op::CsExit).grant("c2#1"),
//! ];
//! for (i, e) in history.iter_mut().enumerate() {
//!     e.index = i as u64;
//!     e.time_ns = i as u64 * 1_000_000;
//! }
//! let report = check(&history);
//! assert_eq!(report.property(Property::MutualExclusion), Verdict::Invalid);
//! assert_eq!(report.violations[0].events, vec![0, 1, 2, 3]);
//! ```

use crate::history::{format_time_ns, Event, Kind, Op};
use crate::mutual_exclusion::{cs_intervals, end_time_ns, Interval};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// At most this many violations of each property are kept as witnesses; the counts in
/// [`PropertyResult::violation_count`] are complete.
pub const WITNESSES_MAX: usize = 5;

/// The outcome of a check, Jepsen style: worst wins when combining.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The history cannot show this property (fencing, when no write carried a token): not
    /// checked is not safe, so it is never read as `valid`. Lowest in the order, so combining
    /// ignores it.
    NotApplicable,
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
            Verdict::NotApplicable => "n/a",
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

impl std::fmt::Display for Property {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so widths and alignment work in tables.
        f.pad(self.name())
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
    /// How many violations of the property the history holds, all of them (for mutual
    /// exclusion: pairs of grants whose critical sections certainly overlap).
    #[serde(default)]
    pub violation_count: u64,
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

/// What became of the counter's increments: lost updates as a share of what was promised.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Updates {
    /// Writes acknowledged to their client (`write` `ok`).
    pub writes_acknowledged: u64,
    /// Distinct writes the resource applied (`resource_accept`), acknowledged or not.
    pub writes_applied: u64,
    /// Increments missing from the counter's final value (0 if none, or if unknown).
    pub updates_lost: u64,
}

impl Updates {
    /// Lost updates per acknowledged write, in [0, 1] (more than 1 only if increments that
    /// were never acknowledged were lost too); `None` without acknowledged writes.
    pub fn lost_share_of_acknowledged(&self) -> Option<f64> {
        (self.writes_acknowledged > 0)
            .then(|| self.updates_lost as f64 / self.writes_acknowledged as f64)
    }
}

/// Everything the checker says about one history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The combined verdict (worst wins).
    pub verdict: Verdict,
    /// Per-property verdicts, counts and reasons, in [`Property::ALL`] order.
    pub properties: Vec<PropertyResult>,
    /// Witnessed violations: at most [`WITNESSES_MAX`] per property.
    pub violations: Vec<Violation>,
    /// Liveness figures.
    pub liveness: Liveness,
    /// The counter's increments: acknowledged, applied, lost.
    #[serde(default)]
    pub updates: Updates,
}

impl Report {
    /// The verdict of one property.
    pub fn property(&self, property: Property) -> Verdict {
        self.result(property).map_or(Verdict::Valid, |p| p.verdict)
    }

    /// The full result of one property.
    pub fn result(&self, property: Property) -> Option<&PropertyResult> {
        self.properties.iter().find(|p| p.property == property)
    }

    /// Per property: its verdict.
    pub fn verdicts(&self) -> BTreeMap<Property, Verdict> {
        self.properties
            .iter()
            .map(|p| (p.property, p.verdict))
            .collect()
    }

    /// Per violated property: how many violations, all of them.
    pub fn violation_counts(&self) -> BTreeMap<Property, u64> {
        self.properties
            .iter()
            .filter(|p| p.violation_count > 0)
            .map(|p| (p.property, p.violation_count))
            .collect()
    }

    /// Per `unknown` property: why.
    pub fn reasons(&self) -> BTreeMap<Property, String> {
        self.properties
            .iter()
            .filter_map(|p| Some((p.property, p.reason.clone()?)))
            .collect()
    }
}

/// Checks a history. Pure: the same history always gives the same report. Any sequence of
/// events is accepted (none makes it panic); [`crate::history::read_jsonl`] is what checks
/// that a file is a well-formed history.
pub fn check(history: &[Event]) -> Report {
    let intervals = cs_intervals(history);
    let (me, me_violations) = crate::mutual_exclusion::check(&intervals);
    let (fencing, fence_violations) = check_fencing(history);
    let (lost, lost_violations, updates) = check_lost_update(history);
    let mut properties = vec![me, fencing, lost];
    if history.is_empty() {
        // An empty file is no evidence of safety.
        for p in &mut properties {
            p.verdict = Verdict::Unknown;
            p.reason = Some(NO_EVENTS.into());
        }
    }
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
        updates,
    }
}

/// The reason every property of an empty history gives.
pub const NO_EVENTS: &str = "no events: nothing to check";

/// A property's result from its violations: `invalid` if there are any.
fn counted(property: Property, count: u64) -> PropertyResult {
    PropertyResult {
        property,
        verdict: if count > 0 {
            Verdict::Invalid
        } else {
            Verdict::Valid
        },
        reason: None,
        violation_count: count,
    }
}

/// Keeps `v` as a witness unless [`WITNESSES_MAX`] are kept already; counts it either way.
fn witness(violations: &mut Vec<Violation>, count: &mut u64, v: impl FnOnce() -> Violation) {
    *count += 1;
    if violations.len() < WITNESSES_MAX {
        violations.push(v());
    }
}

fn check_fencing(history: &[Event]) -> (PropertyResult, Vec<Violation>) {
    let (mut violations, mut count) = (Vec::new(), 0);
    let mut highest: Option<(u64, &Event)> = None;
    let mut first_by_token: BTreeMap<u64, &Event> = BTreeMap::new();
    for e in history {
        if e.op != Op::ResourceAccept {
            continue;
        }
        let Some(token) = e.token else { continue };
        if let Some((h_token, h)) = highest {
            if token < h_token {
                witness(&mut violations, &mut count, || stale(e, token, h, h_token));
            }
        }
        if highest.is_none_or(|(h_token, _)| token > h_token) {
            highest = Some((token, e));
        }
        match first_by_token.get(&token) {
            Some(first) if first.grant != e.grant => {
                witness(&mut violations, &mut count, || reused(first, e, token));
            }
            Some(_) => {}
            None => {
                first_by_token.insert(token, e);
            }
        }
    }
    let mut result = counted(Property::Fencing, count);
    // Without a token on any write the resource saw, there was nothing to fence.
    let tokens = history.iter().any(|e| {
        e.token.is_some() && matches!(e.op, Op::Write | Op::ResourceAccept | Op::ResourceReject)
    });
    if !tokens {
        assert_eq!(count, 0, "a fencing violation needs tokens");
        result.verdict = Verdict::NotApplicable;
    }
    (result, violations)
}

fn who(e: &Event) -> &str {
    e.grant.as_deref().unwrap_or(&e.node)
}

fn stale(e: &Event, token: u64, h: &Event, h_token: u64) -> Violation {
    Violation {
        kind: Property::Fencing,
        description: format!(
            "stale token accepted: token {token} from {} accepted at {} after token {h_token} \
             from {} at {}",
            who(e),
            format_time_ns(e.time_ns),
            who(h),
            format_time_ns(h.time_ns)
        ),
        events: vec![h.index, e.index],
    }
}

fn reused(first: &Event, e: &Event, token: u64) -> Violation {
    Violation {
        kind: Property::Fencing,
        description: format!(
            "token {token} reused: accepted from grant {} at {} and from grant {} at {}",
            first.grant.as_deref().unwrap_or("?"),
            format_time_ns(first.time_ns),
            e.grant.as_deref().unwrap_or("?"),
            format_time_ns(e.time_ns)
        ),
        events: vec![first.index, e.index],
    }
}

fn check_lost_update(history: &[Event]) -> (PropertyResult, Vec<Violation>, Updates) {
    let acked = history
        .iter()
        .filter(|e| e.op == Op::Write && e.kind == Kind::Ok)
        .count() as u64;
    let accepts: Vec<&Event> = history
        .iter()
        .filter(|e| e.op == Op::ResourceAccept)
        .collect();
    // Each distinct applied write is one increment (a duplicated message applied twice
    // writes the same value for the same grant: it counts once).
    let applied: BTreeSet<(&str, Option<i64>)> =
        accepts.iter().map(|e| (who(e), e.value)).collect();
    let mut updates = Updates {
        writes_acknowledged: acked,
        writes_applied: applied.len() as u64,
        updates_lost: 0,
    };
    let unknown = |reason: String| PropertyResult {
        verdict: Verdict::Unknown,
        reason: Some(reason),
        ..counted(Property::LostUpdate, 0)
    };
    if acked == 0 && accepts.is_empty() {
        return (counted(Property::LostUpdate, 0), vec![], updates);
    }
    let Some(last) = accepts.last() else {
        let reason = format!(
            "{acked} writes were acknowledged but the history has no resource_accept event, so \
             the counter's final value is unknown"
        );
        return (unknown(reason), vec![], updates);
    };
    let Some(final_value) = last.value else {
        let reason = format!(
            "the last resource_accept (#{}) carries no value",
            last.index
        );
        return (unknown(reason), vec![], updates);
    };
    let increments = updates.writes_applied.max(acked);
    // i128: any i64 final value against any count, without overflow.
    let lost = (increments as i128 - final_value as i128).max(0);
    updates.updates_lost = u64::try_from(lost).unwrap_or(u64::MAX);
    if lost == 0 {
        return (counted(Property::LostUpdate, 0), vec![], updates);
    }
    let violation = Violation {
        kind: Property::LostUpdate,
        description: format!(
            "the resource applied {} increments ({acked} acknowledged) but the counter ends \
             at {final_value}: {lost} lost",
            applied.len(),
        ),
        events: overwriting_pair(&accepts).unwrap_or_else(|| vec![last.index]),
    };
    (counted(Property::LostUpdate, 1), vec![violation], updates)
}

/// The first two accepted writes of different grants that wrote the same value: the second
/// overwrote the first's increment (both read the same old value).
fn overwriting_pair(accepts: &[&Event]) -> Option<Vec<u64>> {
    let mut by_value: BTreeMap<i64, &Event> = BTreeMap::new();
    for a in accepts {
        let Some(v) = a.value else { continue };
        match by_value.get(&v) {
            Some(first) if first.grant != a.grant => return Some(vec![first.index, a.index]),
            Some(_) => {}
            None => {
                by_value.insert(v, a);
            }
        }
    }
    None
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
                    latencies_ns.extend(start.map(|t| e.time_ns.saturating_sub(t)));
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
        let (start_ns, end_ns) = i.held_ns();
        steps.push((start_ns, 0, 1));
        steps.push((end_ns, 0, -1));
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
