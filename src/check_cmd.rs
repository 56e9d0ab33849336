//! `locksim check`: the checker on a history recorded elsewhere (or by `locksim run
//! --history`), in the simulator's JSON Lines format.

use crate::shared::input;
use crate::stdout::{out, outln};
use crate::text;
use locksim_check::checker::{Liveness, Updates, Violation};
use locksim_check::history::{format_hash, read_jsonl, trace_hash};
use locksim_check::{check, Event, Property, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `locksim check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The history file (JSON Lines, one event per line).
    history: PathBuf,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What `locksim check --json` prints.
#[derive(Serialize)]
struct CheckOutput {
    history: String,
    events: u64,
    verdict: Verdict,
    properties: BTreeMap<Property, Verdict>,
    /// Why a property is `unknown`, where one is.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    reasons: BTreeMap<Property, String>,
    violations: Vec<Violation>,
    violation_counts: BTreeMap<Property, u64>,
    trace_hash: String,
    liveness: Liveness,
    updates: Updates,
}

/// Checks the history. Exit 1 if a safety property is violated; 2 if the file is missing or
/// a line is not an event (the error names the line); 4 if it holds no event (verdict
/// `unknown`: nothing to check).
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = args.history.display().to_string();
    let file = std::fs::File::open(&args.history)
        .map_err(|e| input(format!("{path}: cannot read: {e}")))?;
    let history = read_jsonl(&path, std::io::BufReader::new(file)).map_err(input)?;
    let report = check(&history);
    let out = CheckOutput {
        history: path,
        events: history.len() as u64,
        verdict: report.verdict,
        properties: report.verdicts(),
        reasons: report.reasons(),
        violations: report.violations.clone(),
        violation_counts: report.violation_counts(),
        trace_hash: format_hash(trace_hash(&history)),
        liveness: report.liveness.clone(),
        updates: report.updates.clone(),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        out!("{}", text(&out, &history));
    }
    Ok(if report.verdict == Verdict::Invalid {
        ExitCode::from(1)
    } else if history.is_empty() {
        // Nothing checked is not "no violation": a distinct code a script cannot misread.
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    })
}

fn text(out: &CheckOutput, history: &[Event]) -> String {
    let mut s = String::new();
    let end_ms = history.last().map_or(0.0, Event::time_ms);
    let _ = writeln!(
        s,
        "history   {} ({} events, {end_ms:.0} ms)",
        out.history, out.events
    );
    let _ = writeln!(s, "verdict   {}", out.verdict.to_string().to_uppercase());
    s.push_str(&text::properties(
        &out.properties,
        &out.violation_counts,
        &out.reasons,
    ));
    s.push_str(&text::witnesses(
        &out.violations,
        &out.violation_counts,
        history,
    ));
    let l = &out.liveness;
    let _ = writeln!(
        s,
        "liveness  {} of {} acquires granted; latency p50 {:.1} ms, p99 {:.1} ms; held {:.0} ms",
        l.acquisitions,
        l.acquire_attempts,
        l.acquire_latency_ms_p50,
        l.acquire_latency_ms_p99,
        l.held_ms
    );
    let _ = writeln!(
        s,
        "resource  {}",
        text::updates_lost(out.updates.updates_lost, out.updates.writes_acknowledged)
    );
    let _ = writeln!(s, "trace     {}", out.trace_hash);
    s
}
