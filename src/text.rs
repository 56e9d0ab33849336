//! Text output for people.

use locksim_scenarios::RunResult;
use locksim_sim::checker::{Violation, WITNESSES_MAX};
use locksim_sim::{Event, Property, Verdict};
use std::collections::BTreeMap;
use std::fmt::Write;

/// A scenario-provided string made safe to print on a terminal: every control character
/// (an ANSI escape's ESC, a carriage return that would overwrite the line, a newline that
/// would forge one) is written as its Rust escape, `\u{1b}`. Other text is unchanged.
pub fn printable(text: &str) -> String {
    printable_keeping(text, &[])
}

/// [`printable`], keeping the control characters in `keep` (an error message's own line
/// breaks).
pub fn printable_keeping(text: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && !keep.contains(&c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits text into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// One line per property: its verdict, its violation count, or why it is unknown. The
/// checker's `not_applicable` (fencing, when no write carried a token) reads "n/a": not
/// checked is not safe.
pub fn properties(
    verdicts: &BTreeMap<Property, Verdict>,
    counts: &BTreeMap<Property, u64>,
    reasons: &BTreeMap<Property, String>,
) -> String {
    let mut s = String::new();
    for (property, v) in verdicts {
        let word = match v {
            Verdict::NotApplicable => "n/a (no write carried a token)".to_owned(),
            Verdict::Valid => "holds".to_owned(),
            Verdict::Invalid => {
                let n = counts.get(property).copied().unwrap_or(0);
                format!("VIOLATED ({n} violation{})", if n == 1 { "" } else { "s" })
            }
            Verdict::Unknown => match reasons.get(property) {
                Some(reason) => format!("unknown: {reason}"),
                None => "unknown".to_owned(),
            },
        };
        let _ = writeln!(s, "  {property:<17} {word}");
    }
    s
}

/// The witnesses, each with its events, then how many violations have none shown. The
/// witnesses are those `--json` holds (the checker keeps at most
/// [`WITNESSES_MAX`] per property).
pub fn witnesses(
    violations: &[Violation],
    counts: &BTreeMap<Property, u64>,
    history: &[Event],
) -> String {
    let mut s = String::new();
    if violations.is_empty() {
        return s;
    }
    let _ = writeln!(s, "witnesses:");
    // Histories from elsewhere may number events from any start: find by index.
    let by_index: BTreeMap<u64, &Event> = history.iter().map(|e| (e.index, e)).collect();
    for v in violations {
        let _ = writeln!(s, "  [{}] {}", v.kind, v.description);
        for e in v.events.iter().filter_map(|i| by_index.get(i)) {
            let _ = writeln!(s, "      {}", e.describe());
        }
    }
    for (property, count) in counts {
        let shown = violations.iter().filter(|v| v.kind == *property).count() as u64;
        if *count > shown {
            let _ = writeln!(
                s,
                "  ... and {} more {property} violations (witnesses are kept for the first \
                 {WITNESSES_MAX} of each property)",
                count - shown
            );
        }
    }
    s
}

/// The summary `locksim run` prints.
pub fn run_summary(r: &RunResult, history: &[Event], description: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "scenario  {} ({}), seed {}",
        printable(&r.scenario),
        printable(&r.protocol),
        r.seed
    );
    // Wrapped first: a description's own line breaks are spaces, not escapes.
    for line in wrap(description, 86) {
        let _ = writeln!(s, "          {}", printable(&line));
    }
    let _ = writeln!(s, "verdict   {}", r.verdict.to_string().to_uppercase());
    s.push_str(&properties(&r.properties, &r.violation_counts, &r.reasons));
    s.push_str(&witnesses(&r.violations, &r.violation_counts, history));
    let l = &r.stats.liveness;
    let _ = writeln!(
        s,
        "liveness  {} of {} acquires granted; latency p50 {:.1} ms, p99 {:.1} ms; held {:.0} ms; \
         wanted but free {:.0} ms (longest {:.0} ms)",
        l.acquisitions,
        l.acquire_attempts,
        l.acquire_latency_ms_p50,
        l.acquire_latency_ms_p99,
        l.held_ms,
        l.wanted_free_ms,
        l.wanted_free_ms_max
    );
    let _ = writeln!(
        s,
        "resource  {} writes accepted, {} rejected by fencing; {}",
        l.writes_accepted,
        l.writes_rejected,
        updates_lost(r.stats.updates_lost, r.stats.updates_acked)
    );
    let _ = writeln!(s, "zombie    {}", zombie_line(&r.stats));
    if let Some(e) = &r.expect {
        if e.met {
            let _ = writeln!(s, "expect    met");
        } else {
            let _ = writeln!(s, "expect    NOT MET: {}", e.mismatches.join("; "));
        }
    }
    let _ = writeln!(
        s,
        "trace     {} ({} events, {} ms simulated, {}, {} messages)",
        r.trace_hash,
        r.stats.events,
        r.stats.sim_ms,
        faults_fired(r.stats.faults_fired.unwrap_or(0), r.stats.faults),
        count_or_na(r.stats.messages)
    );
    let _ = writeln!(s, "replay    {}", r.replay);
    s
}

/// Faults fired of those scheduled, in words: "2 of 3 faults fired".
pub fn faults_fired(fired: u64, scheduled: u64) -> String {
    let noun = if scheduled == 1 { "fault" } else { "faults" };
    format!("{fired} of {scheduled} {noun} fired")
}

/// The run's zombie windows (a holder going on after the service let another client take
/// its lock) in words: how many, the longest and the median, in ms.
pub fn zombie_line(stats: &locksim_scenarios::Stats) -> String {
    if stats.zombie_windows == 0 {
        return "none (no holder went on after another client was let in)".into();
    }
    let windows = if stats.zombie_windows == 1 {
        "window"
    } else {
        "windows"
    };
    format!(
        "{} {windows} in which a holder went on after another client was let in: max {:.1} ms, \
         p50 {:.1} ms",
        stats.zombie_windows, stats.zombie_window_ms_max, stats.zombie_window_ms_p50
    )
}

/// A count, or "n/a" where the run could not count it (never 0 for "not counted").
pub fn count_or_na(count: Option<u64>) -> String {
    count.map_or_else(|| "n/a".into(), |n| n.to_string())
}

/// Lost updates in words, as a share of the acknowledged writes.
pub fn updates_lost(lost: u64, acknowledged: u64) -> String {
    if acknowledged == 0 {
        return format!("{lost} updates lost, none acknowledged");
    }
    let share = lost as f64 / acknowledged as f64;
    format!(
        "{lost} of {acknowledged} acknowledged updates lost ({:.1}%)",
        share * 100.0
    )
}
