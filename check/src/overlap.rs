//! Counting overlapping pairs of intervals by a sweep over their endpoints.
//!
//! A badly broken lock can put thousands of clients in the critical section at once: the
//! pairs that overlap grow with the square of the sections, so they are counted, never
//! materialised. Sorting the `2n` endpoints and walking them once costs `O(n log n)` whatever
//! the number of overlapping pairs; only the first few pairs are kept as witnesses.

use std::collections::{BTreeMap, BTreeSet};

/// A half-open interval `[start, end)` in nanoseconds, in a group: pairs within one group
/// (the same lock grant) are not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Inclusive start.
    pub start: u64,
    /// Exclusive end; a span with `end <= start` is empty and overlaps nothing.
    pub end: u64,
    /// Spans of the same group never count as a pair.
    pub group: u32,
}

impl Span {
    /// Whether two spans of different groups overlap: some instant lies in both (which
    /// also means neither is empty).
    pub fn overlaps(&self, other: &Span) -> bool {
        self.group != other.group && self.start.max(other.start) < self.end.min(other.end)
    }
}

/// What the sweep found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlaps {
    /// Every overlapping pair of spans of different groups, counted exactly.
    pub pairs: u64,
    /// The first pairs found (at most the number asked for), as indexes into the spans:
    /// `(earlier start, later start)`, ordered by the later one's start.
    pub first: Vec<(usize, usize)>,
}

/// Counts the overlapping pairs of `spans` (different groups only) and keeps the first
/// `keep` of them. `O(n log n)` in the number of spans, independent of the pairs' number.
pub fn overlapping_pairs(spans: &[Span], keep: usize) -> Overlaps {
    // Endpoints in time order; at one instant, ends before starts: touching spans do not
    // overlap. Ties among starts go by index, so the witnesses are deterministic.
    let mut points: Vec<(u64, bool, usize)> = Vec::with_capacity(spans.len() * 2);
    for (i, s) in spans.iter().enumerate().filter(|(_, s)| s.start < s.end) {
        points.push((s.start, true, i));
        points.push((s.end, false, i));
    }
    points.sort_unstable();
    let mut found = Overlaps::default();
    // The spans open at the sweep line, by group; `open` counts them all.
    let mut active: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
    let mut open: u64 = 0;
    for (_, is_start, i) in points {
        let group = spans[i].group;
        if !is_start {
            let members = active.get_mut(&group).expect("an end follows its start");
            assert!(members.remove(&i), "span {i} ends once, after it started");
            if members.is_empty() {
                active.remove(&group);
            }
            open -= 1;
            continue;
        }
        let same = active.get(&group).map_or(0, |m| m.len() as u64);
        found.pairs += open - same;
        if found.first.len() < keep && open > same {
            keep_pairs(&active, group, i, keep, &mut found.first);
        }
        active.entry(group).or_default().insert(i);
        open += 1;
    }
    assert_eq!(open, 0, "every span that started has ended");
    found
}

/// Adds pairs of `i` with the open spans of other groups until `keep` pairs are kept. Every
/// non-empty group visited yields a pair, so this costs only the pairs it keeps.
fn keep_pairs(
    active: &BTreeMap<u32, BTreeSet<usize>>,
    group: u32,
    i: usize,
    keep: usize,
    first: &mut Vec<(usize, usize)>,
) {
    for (_, members) in active.iter().filter(|(g, _)| **g != group) {
        for &a in members {
            if first.len() >= keep {
                return;
            }
            first.push((a, i));
        }
    }
}
