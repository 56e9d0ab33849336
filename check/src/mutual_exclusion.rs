//! Mutual exclusion: critical sections from the history, and the pairs of different grants
//! whose sections overlap.
//!
//! Each critical section has an enter and an exit *window*: the earliest and latest true
//! time the boundary may have happened at. In the simulator both are points. In a history
//! from a real system they widen by the recording clock's error bound (`clock_error_ns`)
//! and by an `invoke` that brackets the boundary. A section is **certainly held** from the
//! latest possible enter to the earliest possible exit, and **may be held** from the
//! earliest possible enter to the latest possible exit; a `cs_enter` of kind `info` (outcome
//! unknown) is never certain. Two grants violate mutual exclusion when their certainly-held
//! spans overlap; when only their may-be-held spans do, the verdict is `unknown`.

use crate::checker::{Property, PropertyResult, Verdict, Violation, WITNESSES_MAX};
use crate::history::{format_time_ns, Event, Kind, Op};
use crate::overlap::{overlapping_pairs, Span};
use std::collections::BTreeMap;

/// Where a critical-section boundary happened: some instant in `[lo, hi]` of true time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub lo: u64,
    pub hi: u64,
}

impl Window {
    fn of(e: &Event) -> Window {
        let (lo, hi) = e.time_window_ns();
        Window { lo, hi }
    }

    /// From the start of `opened` (an `invoke`, if there was one) to the end of `e`.
    fn bracketed(opened: Option<&Event>, e: &Event) -> Window {
        let own = Window::of(e);
        match opened {
            Some(o) => Window {
                lo: Window::of(o).lo.min(own.lo),
                hi: own.hi,
            },
            None => own,
        }
    }

    fn describe(self) -> String {
        if self.lo == self.hi {
            format_time_ns(self.lo)
        } else {
            format!(
                "between {} and {}",
                format_time_ns(self.lo),
                format_time_ns(self.hi)
            )
        }
    }
}

/// One critical section.
#[derive(Clone, Debug)]
pub(crate) struct Interval {
    pub grant: String,
    pub node: String,
    pub enter: Window,
    pub exit: Window,
    /// Whether the client certainly entered (`cs_enter` `ok`, not `info`).
    pub certain: bool,
    /// The boundary events: enter (and its invoke), exit (and its invoke), crash.
    pub events: Vec<u64>,
    /// Whether it was still open when the history ended.
    pub open_at_end: bool,
}

impl Interval {
    /// The span it was certainly held: from the latest enter to the earliest exit.
    fn certain_span(&self, group: u32) -> Span {
        let end = if self.certain { self.exit.lo } else { 0 };
        Span {
            start: self.enter.hi,
            end,
            group,
        }
    }

    /// The span it may have been held: from the earliest enter to the latest exit.
    fn possible_span(&self, group: u32) -> Span {
        Span {
            start: self.enter.lo,
            end: self.exit.hi,
            group,
        }
    }

    /// When it was held, for liveness figures: the certain span where there is one.
    pub fn held_ns(&self) -> (u64, u64) {
        (self.enter.hi, self.exit.lo.max(self.enter.hi))
    }

    fn describe(&self) -> String {
        let verb = if self.certain {
            "held"
        } else {
            "may have held"
        };
        let mut s = format!(
            "{} {verb} grant {} from {} to {}",
            self.node,
            self.grant,
            self.enter.describe(),
            self.exit.describe()
        );
        if self.open_at_end {
            s.push_str(" (still inside at the end)");
        }
        if !self.certain {
            s.push_str(" (its cs_enter is `info`: it may not have entered)");
        }
        s
    }
}

/// The latest true time any event may have happened at.
pub(crate) fn end_time_ns(history: &[Event]) -> u64 {
    history
        .iter()
        .map(|e| e.time_window_ns().1)
        .max()
        .unwrap_or(0)
}

/// A client's critical section being built: its boundary invokes, if any, and the section
/// once entered.
#[derive(Default)]
struct Open<'a> {
    enter_invoke: Option<&'a Event>,
    exit_invoke: Option<&'a Event>,
    inside: Option<Interval>,
}

/// Every critical section of the history, in order of their earliest possible enter.
pub(crate) fn cs_intervals(history: &[Event]) -> Vec<Interval> {
    let end = end_time_ns(history);
    let mut open: BTreeMap<&str, Open> = BTreeMap::new();
    let mut closed = Vec::new();
    for e in history {
        match (&e.op, e.kind) {
            (Op::CsEnter, Kind::Invoke) => open.entry(&e.node).or_default().enter_invoke = Some(e),
            (Op::CsEnter, Kind::Fail) => open.entry(&e.node).or_default().enter_invoke = None,
            (Op::CsEnter, kind) => {
                let o = open.entry(&e.node).or_default();
                enter(o, e, kind == Kind::Ok, end, &mut closed);
            }
            (Op::CsExit, Kind::Invoke) => {
                open.entry(&e.node).or_default().exit_invoke = Some(e);
            }
            (Op::CsExit, _) => {
                let o = open.entry(&e.node).or_default();
                let opened = o.exit_invoke.take();
                close(
                    o.inside.take(),
                    Window::bracketed(opened, e),
                    opened,
                    e,
                    &mut closed,
                );
            }
            (Op::Crash, _) => {
                let crashed = e.target.as_deref().unwrap_or(&e.node);
                if let Some(o) = open.get_mut(crashed) {
                    // A dead process acts on nothing: its section ended by the crash, or
                    // earlier if its exit had started.
                    let opened = o.exit_invoke.take();
                    o.enter_invoke = None;
                    let exit = Window::bracketed(opened, e);
                    close(o.inside.take(), exit, opened, e, &mut closed);
                }
            }
            _ => {}
        }
    }
    for o in open.into_values() {
        // A section whose exit had started but never completed ended some time after that.
        let exit_started = o.exit_invoke.map(Window::of);
        closed.extend(o.inside.map(|mut i| {
            if let Some(w) = exit_started {
                i.exit = Window { lo: w.lo, hi: end };
                i.open_at_end = false;
            }
            i
        }));
    }
    closed.sort_by_key(|i| (i.enter.lo, i.events[0]));
    closed
}

/// A client entered (or, `certain` false, may have entered) its critical section at `e`.
fn enter(o: &mut Open, e: &Event, certain: bool, end: u64, closed: &mut Vec<Interval>) {
    let opened = o.enter_invoke.take();
    let mut events: Vec<u64> = opened.iter().map(|i| i.index).collect();
    events.push(e.index);
    let interval = Interval {
        grant: e
            .grant
            .clone()
            .unwrap_or_else(|| format!("{}@{}", e.node, e.index)),
        node: e.node.clone(),
        enter: Window::bracketed(opened, e),
        exit: Window { lo: end, hi: end },
        certain,
        events,
        open_at_end: true,
    };
    if let Some(mut prev) = o.inside.replace(interval) {
        // A second enter without an exit: the first CS ends where the next begins.
        prev.exit = Window::of(e);
        prev.open_at_end = false;
        prev.events.push(e.index);
        closed.push(prev);
    }
    o.exit_invoke = None;
}

fn close(
    inside: Option<Interval>,
    exit: Window,
    opened: Option<&Event>,
    e: &Event,
    closed: &mut Vec<Interval>,
) {
    if let Some(mut interval) = inside {
        interval.exit = exit;
        interval.open_at_end = false;
        interval.events.extend(opened.map(|i| i.index));
        interval.events.push(e.index);
        closed.push(interval);
    }
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
    let certain = overlapping_pairs(&spans(Interval::certain_span), WITNESSES_MAX);
    let possible = overlapping_pairs(&spans(Interval::possible_span), 1);
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
            a.describe(),
            b.describe()
        ),
        events,
    }
}

fn unknown_reason(pairs: u64, a: &Interval, b: &Interval) -> String {
    format!(
        "{pairs} pair{} of critical sections may overlap but need not (an `info` cs_enter, \
         or boundary times known only within a window), e.g. {}; {}",
        if pairs == 1 { "" } else { "s" },
        a.describe(),
        b.describe()
    )
}
