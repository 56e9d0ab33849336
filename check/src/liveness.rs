//! Liveness figures: not violations, but what a user wants to compare. Critical sections
//! come from the history's [interpretation](crate::interpret), the same the checker and the
//! timeline use.

use crate::history::{Event, Kind, Op};
use crate::interpret::{target, Interpretation};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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

fn percentile_ms(sorted_ns: &[u64], pct: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    // Nearest-rank percentile.
    let rank = ((pct / 100.0) * sorted_ns.len() as f64).ceil().max(1.0) as usize;
    sorted_ns[rank.min(sorted_ns.len()) - 1] as f64 / 1e6
}

/// Points where the number of waiting clients or holders changes:
/// `(time_ns, d_wanting, d_holding)`.
type Steps = Vec<(u64, i64, i64)>;

pub(crate) fn liveness(history: &[Event], interpretation: &Interpretation) -> Liveness {
    let mut l = Liveness::default();
    let (mut steps, mut latencies_ns) = wanting(history, &mut l);
    // The last stretch runs to the end of the history.
    steps.push((interpretation.end_ns, 0, 0));
    for i in &interpretation.sections {
        let (start_ns, end_ns) = i.held_ns();
        assert!(start_ns <= end_ns, "a held span is ordered");
        steps.push((start_ns, 0, 1));
        steps.push((end_ns, 0, -1));
    }
    steps.sort_unstable();
    let (held_ns, free_ns, run_max_ns) = held_and_free_ns(&steps);
    latencies_ns.sort_unstable();
    l.acquire_latency_ms_p50 = percentile_ms(&latencies_ns, 50.0);
    l.acquire_latency_ms_p99 = percentile_ms(&latencies_ns, 99.0);
    l.held_ms = held_ns as f64 / 1e6;
    l.wanted_free_ms = free_ns as f64 / 1e6;
    l.wanted_free_ms_max = run_max_ns as f64 / 1e6;
    l
}

/// Counts acquires and writes into `l`; returns when clients start and stop wanting the
/// lock, and the latency of every granted acquire. A client wants the lock from an acquire
/// attempt until it gets it (a failed attempt and the pause before the next one do not end
/// the wanting) or until it crashes.
fn wanting(history: &[Event], l: &mut Liveness) -> (Steps, Vec<u64>) {
    let mut attempt_start: BTreeMap<&str, u64> = BTreeMap::new();
    let mut wanting: BTreeSet<&str> = BTreeSet::new();
    let mut latencies_ns = Vec::new();
    let mut steps = Steps::new();
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
                count_outcome(l, e, kind);
                let start = attempt_start.remove(e.node.as_str());
                if kind == Kind::Ok {
                    latencies_ns.extend(start.map(|t| e.time_ns.saturating_sub(t)));
                    if wanting.remove(e.node.as_str()) {
                        steps.push((e.time_ns, -1, 0));
                    }
                }
            }
            (Op::Crash, _) => {
                attempt_start.remove(target(e));
                if wanting.remove(target(e)) {
                    steps.push((e.time_ns, -1, 0));
                }
            }
            (Op::ResourceAccept, _) => l.writes_accepted += 1,
            (Op::ResourceReject, _) => l.writes_rejected += 1,
            _ => {}
        }
    }
    (steps, latencies_ns)
}

fn count_outcome(l: &mut Liveness, e: &Event, kind: Kind) {
    match kind {
        Kind::Ok => {
            l.acquisitions += 1;
            l.first_grant_ms.get_or_insert(e.time_ms());
        }
        Kind::Fail => l.acquire_failures += 1,
        _ => l.acquire_unknown += 1,
    }
}

/// Walks the sorted steps: the time someone held the lock, the time someone wanted it while
/// nobody held it, and the longest such stretch, all in ns.
fn held_and_free_ns(steps: &[(u64, i64, i64)]) -> (u64, u64, u64) {
    let (mut wanting, mut holding) = (0i64, 0i64);
    let (mut last_ns, mut held_ns, mut free_ns, mut run_ns, mut run_max_ns) = (0u64, 0, 0, 0, 0);
    for &(t, dw, dh) in steps {
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
    assert!(holding == 0, "every held span ends");
    (held_ns, free_ns, run_max_ns)
}
