//! Text output for people.

use locksim_scenarios::RunResult;
use locksim_sim::{Event, Verdict};
use std::fmt::Write;

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

/// Witnesses printed per kind of violation; `--json` has more.
const WITNESSES_SHOWN: usize = 3;

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Valid => "holds",
        Verdict::Invalid => "VIOLATED",
        Verdict::Unknown => "unknown",
    }
}

/// The summary `locksim run` prints.
pub fn run_summary(r: &RunResult, history: &[Event], description: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "scenario  {} ({}), seed {}",
        r.scenario, r.protocol, r.seed
    );
    for line in wrap(description, 86) {
        let _ = writeln!(s, "          {line}");
    }
    let _ = writeln!(s, "verdict   {}", r.verdict.to_string().to_uppercase());
    for (name, v) in &r.properties {
        if name == "fencing" && r.stats.writes_with_token == 0 && *v == Verdict::Valid {
            // Not checked is not safe: without a token no stale token can be accepted.
            let _ = writeln!(s, "  {name:<17} n/a (no write carried a token)");
            continue;
        }
        let count = r.violation_counts.get(name).copied().unwrap_or(0);
        let extra = if count > 0 {
            format!(" ({count} violation{})", if count == 1 { "" } else { "s" })
        } else {
            String::new()
        };
        let _ = writeln!(s, "  {name:<17} {}{extra}", verdict_word(*v));
    }
    if !r.violations.is_empty() {
        let _ = writeln!(s, "witnesses:");
        let mut shown: std::collections::BTreeMap<&str, usize> = Default::default();
        for v in &r.violations {
            let n = shown.entry(v.kind.name()).or_insert(0);
            *n += 1;
            if *n > WITNESSES_SHOWN {
                continue;
            }
            let _ = writeln!(s, "  [{}] {}", v.kind.name(), v.description);
            for idx in &v.events {
                if let Some(e) = history.get(*idx as usize) {
                    let _ = writeln!(s, "      {}", e.describe());
                }
            }
        }
    }
    for (kind, count) in &r.violation_counts {
        if *count as usize > WITNESSES_SHOWN {
            let more = *count as usize - WITNESSES_SHOWN;
            let _ = writeln!(s, "  ... and {more} more {kind} violations (see --json)");
        }
    }
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
        "resource  {} writes accepted, {} rejected by fencing",
        l.writes_accepted, l.writes_rejected
    );
    if let Some(e) = &r.expect {
        if e.met {
            let _ = writeln!(s, "expect    met");
        } else {
            let _ = writeln!(s, "expect    NOT MET: {}", e.mismatches.join("; "));
        }
    }
    let _ = writeln!(
        s,
        "trace     {} ({} events, {} ms simulated, {} faults, {} messages)",
        r.trace_hash, r.stats.events, r.stats.sim_ms, r.stats.faults, r.stats.messages
    );
    let _ = writeln!(s, "replay    {}", r.replay);
    s
}
