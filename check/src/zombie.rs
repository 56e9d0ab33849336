//! The zombie window of a lock grant: how long its holder went on acting as the holder after
//! the service had let another client take the lock.
//!
//! For each critical section that another grant's section began inside (it was overtaken),
//! the window runs from that instant (the other client's `cs_enter`: the service let it in
//! then or earlier, so this is a lower bound of the exposure) to the instant the holder
//! knew it had lost the lock: a failed `extend`, a skipped write or an aborted job (the
//! workload's `lock lost` / `lease expired` notes), a library's lost-lock signal (a note
//! saying `signal aborted`). A holder that never knew is exposed until its last write. A
//! holder that knew before it was overtaken, or that neither knew nor wrote afterwards, has
//! no window. Pure function of the history, like the checker.

use crate::history::{Event, Kind, Op};
use crate::interpret::{sections, Interval};
use std::collections::BTreeMap;

/// One grant's zombie window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZombieWindow {
    /// The grant.
    pub grant: String,
    /// Its client.
    pub node: String,
    /// When another grant's section began inside this one, in ns of true time.
    pub lost_ns: u64,
    /// When the holder knew it had lost the lock, or its last write if it never knew.
    pub end_ns: u64,
    /// Whether it ever knew (within its section).
    pub knew: bool,
}

impl ZombieWindow {
    /// Its length in ms.
    pub fn ms(&self) -> f64 {
        (self.end_ns - self.lost_ns) as f64 / 1e6
    }
}

/// Whether `e` tells its node that its lock is gone.
fn tells_lost(e: &Event) -> bool {
    let detail = e.detail.as_deref().unwrap_or("");
    match (&e.op, e.kind) {
        (Op::Extend, Kind::Fail) => true,
        (Op::Note, _) => {
            detail.starts_with("lock lost")
                || detail.starts_with("lease expired")
                || detail.contains("signal aborted")
        }
        _ => false,
    }
}

/// The instant another grant's certain section began inside `s`, if any. `enters` are the
/// certain sections' enter instants with their grants, sorted: the earliest enter inside `s`
/// is a binary search away, not a pass over every section (a run has hundreds).
fn overtaken_at(s: &Interval, enters: &[(u64, &str)]) -> Option<u64> {
    let (from, to) = s.held_ns();
    let first = enters.partition_point(|(at, _)| *at <= from);
    enters[first..]
        .iter()
        .take_while(|(at, _)| *at < to)
        .find(|(_, grant)| *grant != s.grant)
        .map(|(at, _)| *at)
}

/// Every zombie window of the history, in order of the sections.
pub fn zombie_windows(history: &[Event]) -> Vec<ZombieWindow> {
    zombie_windows_in(history, &sections(history))
}

/// [`zombie_windows`] given the history's sections (`interpret::sections` of it), for a
/// caller that has them already from the checker's interpretation.
pub fn zombie_windows_in(history: &[Event], sections: &[Interval]) -> Vec<ZombieWindow> {
    let certain = sections.iter().filter(|s| s.certain);
    let mut enters: Vec<(u64, &str)> = certain.map(|t| (t.enter.hi, t.grant.as_str())).collect();
    enters.sort_unstable();
    let overtaken: Vec<(&Interval, u64)> = sections
        .iter()
        .filter(|s| s.certain)
        .filter_map(|s| Some((s, overtaken_at(s, &enters)?)))
        .collect();
    if overtaken.is_empty() {
        return Vec::new();
    }
    let signs = Signs::of(history);
    let mut windows = Vec::new();
    for (s, lost_ns) in overtaken {
        let (from, to) = s.held_ns();
        let knew_ns = signs
            .lost_by_node
            .get(s.node.as_str())
            .and_then(|times| times.iter().copied().find(|t| (from..=to).contains(t)));
        let last_write_ns = signs
            .writes_by_grant
            .get(s.grant.as_str())
            .and_then(|times| times.iter().copied().filter(|t| *t >= lost_ns).max());
        let end_ns = match (knew_ns, last_write_ns) {
            (Some(knew), _) => knew,
            (None, Some(write)) => write,
            (None, None) => continue,
        };
        if end_ns <= lost_ns {
            continue;
        }
        windows.push(ZombieWindow {
            grant: s.grant.clone(),
            node: s.node.clone(),
            lost_ns,
            end_ns,
            knew: knew_ns.is_some(),
        });
    }
    windows
}

/// The events a window's end is looked for among, gathered in one pass over the history
/// (one pass per overtaken section was most of the judging of a run with many).
struct Signs<'a> {
    /// Per node, in history order, the instants of the events that told it its lock is gone.
    lost_by_node: BTreeMap<&'a str, Vec<u64>>,
    /// Per grant, the instants of its writes' invokes.
    writes_by_grant: BTreeMap<&'a str, Vec<u64>>,
}

impl<'a> Signs<'a> {
    fn of(history: &'a [Event]) -> Self {
        let mut signs = Signs {
            lost_by_node: BTreeMap::new(),
            writes_by_grant: BTreeMap::new(),
        };
        for e in history {
            if tells_lost(e) {
                signs
                    .lost_by_node
                    .entry(e.node.as_str())
                    .or_default()
                    .push(e.time_ns);
            }
            if let (Op::Write, Kind::Invoke, Some(grant)) = (&e.op, e.kind, &e.grant) {
                signs
                    .writes_by_grant
                    .entry(grant.as_str())
                    .or_default()
                    .push(e.time_ns);
            }
        }
        signs
    }
}

/// The largest and the median window, in ms (0 and 0 without any).
pub fn max_and_p50_ms(windows: &[ZombieWindow]) -> (f64, f64) {
    let mut ms: Vec<f64> = windows.iter().map(ZombieWindow::ms).collect();
    if ms.is_empty() {
        return (0.0, 0.0);
    }
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() - 1], ms[(ms.len() - 1) / 2])
}
