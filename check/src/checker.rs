//! The checker: a pure function of a history that decides mutual exclusion, fencing safety
//! and resource integrity, and gives a witness for every violation.
//!
//! Definitions (the checker's contract, see ARCHITECTURE.md):
//! - A **critical section** (CS) runs from a client's `cs_enter` to its `cs_exit`. A client
//!   that is paused inside its CS is still inside it; a crash of the client ends it (a dead
//!   process acts on nothing); a CS still open when the history ends lasts to its end,
//!   its last instant included.
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
use crate::interpret::{end_time_ns, interpret, Interpretation};
pub use crate::liveness::Liveness;
use crate::verdict::{counted, witness};
pub use crate::verdict::{Property, PropertyResult, Verdict, Violation, WITNESSES_MAX};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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

/// The two ways the resource broke fencing's guarantee, counted apart: a stale write
/// overwrites newer data (damage), a reused token only breaks the guarantee (two grants could
/// both write; whether data suffered shows in the lost updates).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FencingBreaks {
    /// Writes accepted with a token below one accepted before.
    pub stale_accepted: u64,
    /// Writes accepted from a second grant carrying a token another grant's write had.
    pub token_reused: u64,
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
    /// Fencing violations by kind (their sum is the fencing violation count).
    #[serde(default)]
    pub fencing: FencingBreaks,
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
    check_interpreted(history, &interpret(history))
}

/// [`check`] on a history already interpreted: a caller that also reads the interpretation
/// (the zombie windows, a timeline) derives it once instead of twice.
pub fn check_interpreted(history: &[Event], interpretation: &Interpretation) -> Report {
    assert_eq!(
        interpretation.end_ns,
        end_time_ns(history),
        "the interpretation is this history's"
    );
    let (me, me_violations) = crate::mutual_exclusion::check(&interpretation.sections);
    let (fencing, fence_violations, breaks) = check_fencing(history);
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
        liveness: crate::liveness::liveness(history, interpretation),
        updates,
        fencing: breaks,
    }
}

/// The reason every property of an empty history gives.
pub const NO_EVENTS: &str = "no events: nothing to check";

fn check_fencing(history: &[Event]) -> (PropertyResult, Vec<Violation>, FencingBreaks) {
    let (mut violations, mut count) = (Vec::new(), 0);
    let mut breaks = FencingBreaks::default();
    let mut highest: Option<(u64, &Event)> = None;
    let mut first_by_token: BTreeMap<u64, &Event> = BTreeMap::new();
    for e in history {
        if e.op != Op::ResourceAccept {
            continue;
        }
        let Some(token) = e.token else { continue };
        if let Some((h_token, h)) = highest {
            if token < h_token {
                breaks.stale_accepted += 1;
                witness(&mut violations, &mut count, || stale(e, token, h, h_token));
            }
        }
        if highest.is_none_or(|(h_token, _)| token > h_token) {
            highest = Some((token, e));
        }
        match first_by_token.get(&token) {
            Some(first) if first.grant != e.grant => {
                breaks.token_reused += 1;
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
    assert_eq!(breaks.stale_accepted + breaks.token_reused, count);
    (result, violations, breaks)
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
