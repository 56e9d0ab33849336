//! Mutual exclusion: the pairs of different grants whose critical sections (from the
//! history's [interpretation](crate::interpret)) overlap.
//!
//! Each critical section has an enter and an exit *window* of true time. A section is **certainly held** from the
//! latest possible enter to the earliest possible exit, and **may be held** from the
//! earliest possible enter to the latest possible exit; a `cs_enter` of kind `info` (outcome
//! unknown) is never certain. Two grants violate mutual exclusion when their certainly-held
//! spans overlap; when only their may-be-held spans do, the verdict is `unknown`. A section
//! whose exit never completed lasts to the end of the history, its last instant included:
//! clients still inside at the end were inside together then, even one that entered at the
//! history's last event.

use crate::interpret::Interval;
use crate::overlap::{overlapping_pairs, Span};
use crate::verdict::{Property, PropertyResult, Verdict, Violation, WITNESSES_MAX};
use std::collections::BTreeMap;

/// The span a section was certainly held: from the latest enter to the earliest exit.
fn certain_span(i: &Interval, group: u32) -> Span {
    let end = match (i.certain, i.open_at_end) {
        (false, _) => 0,
        (true, true) => through_the_end(i.exit.lo),
        (true, false) => i.exit.lo,
    };
    Span {
        start: i.enter.hi,
        end,
        group,
    }
}

/// The span a section may have been held: from the earliest enter to the latest exit.
fn possible_span(i: &Interval, group: u32) -> Span {
    // No completed exit (still inside, or its exit only begun): it may be inside at the end.
    let end = if i.closed_by.is_none() {
        through_the_end(i.exit.hi)
    } else {
        i.exit.hi
    };
    Span {
        start: i.enter.lo,
        end,
        group,
    }
}

/// The exclusive end of a span still held when the history ends at `end_ns`: a client that
/// never left is inside at the history's last instant too. Ending at `end_ns` itself would
/// make a section entered by the last event empty, and it would overlap nothing.
fn through_the_end(end_ns: u64) -> u64 {
    end_ns.saturating_add(1)
}

fn describe(i: &Interval) -> String {
    let verb = if i.certain { "held" } else { "may have held" };
    let mut s = format!(
        "{} {verb} grant {} from {} to {}",
        i.node,
        i.grant,
        i.enter.describe(),
        i.exit.describe()
    );
    if i.open_at_end {
        s.push_str(" (still inside at the end)");
    }
    if !i.certain {
        s.push_str(" (its cs_enter is `info`: it may not have entered)");
    }
    s
}

/// Decides mutual exclusion. Violations: the first [`WITNESSES_MAX`] certainly overlapping
/// pairs; the result's count is every such pair.
pub(crate) fn check(intervals: &[Interval]) -> (PropertyResult, Vec<Violation>) {
    let mut groups: BTreeMap<&str, u32> = BTreeMap::new();
    let group_of: Vec<u32> = intervals
        .iter()
        .map(|i| {
            let next = groups.len() as u32;
            *groups.entry(&i.grant).or_insert(next)
        })
        .collect();
    let spans = |f: fn(&Interval, u32) -> Span| -> Vec<Span> {
        intervals
            .iter()
            .zip(&group_of)
            .map(|(i, g)| f(i, *g))
            .collect()
    };
    let certain = overlapping_pairs(&spans(certain_span), WITNESSES_MAX);
    let possible = overlapping_pairs(&spans(possible_span), 1);
    // A certainly held span lies inside the span that may be held.
    assert!(
        possible.pairs >= certain.pairs,
        "certain overlaps are possible overlaps"
    );
    let violations: Vec<Violation> = certain
        .first
        .iter()
        .map(|&(a, b)| violation(&intervals[a], &intervals[b]))
        .collect();
    let (verdict, reason) = if certain.pairs > 0 {
        (Verdict::Invalid, None)
    } else if let Some(&(a, b)) = possible.first.first() {
        // No pair certainly overlaps: every pair that may is uncertain.
        let reason = unknown_reason(possible.pairs, &intervals[a], &intervals[b]);
        (Verdict::Unknown, Some(reason))
    } else {
        (Verdict::Valid, None)
    };
    let result = PropertyResult {
        property: Property::MutualExclusion,
        verdict,
        reason,
        violation_count: certain.pairs,
    };
    (result, violations)
}

fn violation(a: &Interval, b: &Interval) -> Violation {
    let mut events: Vec<u64> = a.events.iter().chain(&b.events).copied().collect();
    events.sort_unstable();
    Violation {
        kind: Property::MutualExclusion,
        description: format!(
            "two grants in the critical section at once: {}; {}",
            describe(a),
            describe(b)
        ),
        events,
    }
}

fn unknown_reason(pairs: u64, a: &Interval, b: &Interval) -> String {
    format!(
        "{pairs} pair{} of critical sections may overlap but need not (an `info` cs_enter, \
         or boundary times known only within a window), e.g. {}; {}",
        if pairs == 1 { "" } else { "s" },
        describe(a),
        describe(b)
    )
}
