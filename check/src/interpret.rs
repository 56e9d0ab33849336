//! One interpretation of a history: who was inside the critical section when, which nodes
//! were down when, and who held the lock key on which server when, derived once from the
//! typed events. The checker decides mutual exclusion on these sections, the liveness
//! figures count them, and the timeline draws them: a drawing cannot disagree with the
//! verdict, because both read the same [`Interval`]s.
//!
//! Each critical-section boundary is a *window*: the earliest and latest true time the
//! boundary may have happened at. In the simulator both are points. In a history from a real
//! system they widen by the recording clock's error bound (`clock_error_ns`) and by an
//! `invoke` that brackets the boundary. Only `cs_enter` `ok` (certain) and `info` (maybe)
//! open a section; an `invoke` only widens the window of what follows it, a `fail` opens
//! nothing. A section ends at its client's `cs_exit`, at a crash of the client (a dead
//! process acts on nothing), at its next `cs_enter` (a second enter without an exit), or
//! with the history.

use crate::history::{format_time_ns, Event, Kind, Op};
use std::collections::BTreeMap;

/// Where a critical-section boundary happened: some instant in `[lo, hi]` of true time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The earliest instant, in ns of true time.
    pub lo: u64,
    /// The latest instant, in ns of true time.
    pub hi: u64,
}

impl Window {
    fn of(e: &Event) -> Window {
        let (lo, hi) = e.time_window_ns();
        assert!(lo <= hi, "an event's window is ordered");
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

    /// In words: an instant, or "between … and …".
    pub fn describe(self) -> String {
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
pub struct Interval {
    /// The lock grant it belongs to (`node@index` of its enter when the event names none).
    pub grant: String,
    /// The client.
    pub node: String,
    /// The fencing token its enter carried, if any.
    pub token: Option<u64>,
    /// When it began.
    pub enter: Window,
    /// When it ended (the end of the history if it never did).
    pub exit: Window,
    /// Whether the client certainly entered (`cs_enter` `ok`, not `info`).
    pub certain: bool,
    /// The boundary events: enter (and its invoke), exit (and its invoke), crash.
    pub events: Vec<u64>,
    /// The index of its `cs_enter`.
    pub enter_event: u64,
    /// The index of the event that ended it (`None`: still open when the history ended).
    pub closed_by: Option<u64>,
    /// Whether it was still open when the history ended.
    pub open_at_end: bool,
}

impl Interval {
    /// When it was held, for liveness figures and drawings: from the latest enter to the
    /// earliest exit (empty if those cross).
    pub fn held_ns(&self) -> (u64, u64) {
        (self.enter.hi, self.exit.lo.max(self.enter.hi))
    }
}

/// A node down from a crash until its restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Downtime {
    /// The node that crashed.
    pub node: String,
    /// The crash's time, in ns of true time.
    pub from_ns: u64,
    /// The restart's time (`None`: still down when the history ended).
    pub to_ns: Option<u64>,
    /// The index of the restart event.
    pub closed_by: Option<u64>,
}

/// A server's lock key holding one client's value, from its `key K = V` notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHold {
    /// The server.
    pub server: String,
    /// The client whose value the key held (the value's prefix before `:`).
    pub holder: String,
    /// Since when, in ns of true time.
    pub from_ns: u64,
    /// Until when (`None`: still held when the history ended).
    pub to_ns: Option<u64>,
    /// The index of the event that ended it: a change of the key, its expiry, or a crash.
    pub closed_by: Option<u64>,
}

/// Everything derived from a history once.
#[derive(Clone, Debug, Default)]
pub struct Interpretation {
    /// The latest true time any event may have happened at.
    pub end_ns: u64,
    /// Every critical section, in order of their earliest possible enter.
    pub sections: Vec<Interval>,
    /// Every downtime, in order of its end (those open at the end last, by node).
    pub downtimes: Vec<Downtime>,
    /// Who held the lock key on which server, in order of its end (open ones last, by
    /// server).
    pub key_holds: Vec<KeyHold>,
}

/// Interprets a history. Pure; any sequence of events is accepted.
pub fn interpret(history: &[Event]) -> Interpretation {
    Interpretation {
        end_ns: end_time_ns(history),
        sections: sections(history),
        downtimes: downtimes(history),
        key_holds: key_holds(history),
    }
}

/// Every critical section of the history, in order of their earliest possible enter: the
/// `sections` of [`interpret`], for a reader that needs nothing else.
pub fn sections(history: &[Event]) -> Vec<Interval> {
    let sections = cs_intervals(history);
    for i in &sections {
        assert!(i.enter.lo <= i.exit.hi, "a section ends after it begins");
    }
    sections
}

/// The latest true time any event may have happened at.
pub fn end_time_ns(history: &[Event]) -> u64 {
    history
        .iter()
        .map(|e| e.time_window_ns().1)
        .max()
        .unwrap_or(0)
}

/// The node a fault event acts on: its `target`, else the node that recorded it.
pub fn target(e: &Event) -> &str {
    e.target.as_deref().unwrap_or(&e.node)
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
fn cs_intervals(history: &[Event]) -> Vec<Interval> {
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
                let exit = Window::bracketed(opened, e);
                close(o.inside.take(), exit, opened, e, &mut closed);
            }
            (Op::Crash, _) => {
                if let Some(o) = open.get_mut(target(e)) {
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
        closed.extend(still_open(o, end));
    }
    closed.sort_by_key(|i| (i.enter.lo, i.events[0]));
    closed
}

/// A section open when the history ended. One whose exit had started but never completed
/// ended some time after that.
fn still_open(o: Open, end: u64) -> Option<Interval> {
    let exit_started = o.exit_invoke.map(Window::of);
    o.inside.map(|mut i| {
        if let Some(w) = exit_started {
            i.exit = Window { lo: w.lo, hi: end };
            i.open_at_end = false;
        }
        i
    })
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
        token: e.token,
        enter: Window::bracketed(opened, e),
        exit: Window { lo: end, hi: end },
        certain,
        events,
        enter_event: e.index,
        closed_by: None,
        open_at_end: true,
    };
    if let Some(mut prev) = o.inside.replace(interval) {
        // A second enter without an exit: the first CS ends where the next begins.
        prev.exit = Window::of(e);
        prev.open_at_end = false;
        prev.closed_by = Some(e.index);
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
        interval.closed_by = Some(e.index);
        interval.events.extend(opened.map(|i| i.index));
        interval.events.push(e.index);
        closed.push(interval);
    }
}

/// Every node's downtimes: from a crash to the node's next restart.
fn downtimes(history: &[Event]) -> Vec<Downtime> {
    let mut down: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut out = Vec::new();
    for e in history {
        match e.op {
            Op::Crash => {
                down.insert(target(e), e);
            }
            Op::Restart => {
                if let Some(c) = down.remove(target(e)) {
                    out.push(Downtime {
                        node: target(e).to_string(),
                        from_ns: c.time_ns,
                        to_ns: Some(e.time_ns),
                        closed_by: Some(e.index),
                    });
                }
            }
            _ => {}
        }
    }
    out.extend(down.into_iter().map(|(node, c)| Downtime {
        node: node.to_string(),
        from_ns: c.time_ns,
        to_ns: None,
        closed_by: None,
    }));
    out
}

/// A server's note about its lock key: `Some(Some(holder))` when set (the holder is the
/// lock value's client prefix, `c1:…` → `c1`), `Some(None)` when deleted.
pub fn key_note(e: &Event) -> Option<Option<String>> {
    if e.op != Op::Note {
        return None;
    }
    let rest = e.detail.as_deref()?.strip_prefix("key ")?;
    if rest.ends_with(" deleted") {
        return Some(None);
    }
    let (_, value) = rest.split_once(" = ")?;
    Some(Some(value.split(':').next().unwrap_or(value).to_string()))
}

/// Who held the lock key on each server: a value holds from the note that set it until the
/// next note about the key, its expiry or the server's crash.
fn key_holds(history: &[Event]) -> Vec<KeyHold> {
    let mut open: BTreeMap<&str, (u64, String)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in history {
        let note = key_note(e);
        let ends = match (&e.op, &note) {
            (Op::Note, Some(_)) | (Op::Expire, _) => Some(e.node.as_str()),
            (Op::Crash, _) => Some(target(e)),
            _ => None,
        };
        if let Some(server) = ends {
            if let Some((from_ns, holder)) = open.remove(server) {
                let (to_ns, closed_by) = (Some(e.time_ns), Some(e.index));
                let server = server.to_string();
                out.push(KeyHold {
                    server,
                    holder,
                    from_ns,
                    to_ns,
                    closed_by,
                });
            }
        }
        if let Some(Some(holder)) = note {
            open.insert(&e.node, (e.time_ns, holder));
        }
    }
    out.extend(open.into_iter().map(|(server, (from_ns, holder))| KeyHold {
        server: server.to_string(),
        holder,
        from_ns,
        to_ns: None,
        closed_by: None,
    }));
    out
}
