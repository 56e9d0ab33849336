//! `locksim search`: property-based fault search with shrinking; the shrunk counterexample
//! is saved as a runnable scenario file and replayed once to prove it.

use crate::shared::{check_output_file, input};
use crate::stdout::{out, outln};
use indicatif::{ProgressBar, ProgressStyle};
use locksim_protocols::Registry;
use locksim_scenarios::search::{
    counterexample, describe_fault, search, Found, Progress, SearchOptions, SearchOutcome,
};
use locksim_scenarios::{Prepared, Scenario};
use serde_json::json;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The arguments of `locksim search`.
#[derive(clap::Args)]
pub struct SearchArgs {
    /// The scenario file (TOML); its `[faults_random]` bounds the faults tried.
    scenario: PathBuf,
    /// How many fault schedules to try before giving up.
    #[arg(long, default_value_t = 256)]
    cases: u32,
    /// The search's seed (default: the scenario's `seed`): same seed, same cases, same
    /// shrinking.
    #[arg(long)]
    seed: Option<u64>,
    /// Where to save the counterexample (default: NAME-counterexample.toml here).
    #[arg(long, value_name = "FILE.toml")]
    out: Option<PathBuf>,
    /// Turn swarm testing off: every case may use every allowed fault kind.
    #[arg(long)]
    no_swarm: bool,
    /// At most this many faults per schedule.
    #[arg(long, value_name = "N", default_value_t = 4)]
    faults_max: usize,
    /// Print the outcome as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// No progress display (there is none when stderr is not a terminal either).
    #[arg(long)]
    quiet: bool,
}

/// The most faults a searched schedule may hold: a counterexample is worth its shrinking
/// only when a reader can follow it, and 1,000,000 took 3.4 GB before the first case ended.
pub const FAULTS_MAX: usize = 256;

/// Searches; on a failure saves and prints the shrunk counterexample. Exit 1 if one was
/// found, 0 if not, 3 if it could not be saved (it is printed to stderr then).
pub fn run(args: SearchArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let path = args.scenario.display().to_string();
    let prepared = crate::shared::load(&path, registry).map_err(input)?;
    if !(1..=FAULTS_MAX).contains(&args.faults_max) {
        return Err(input(format!(
            "--faults-max {}: must be between 1 and {FAULTS_MAX} (each case holds a schedule \
             of up to that many faults, and shrinking tries each fault's removal)",
            args.faults_max
        )));
    }
    // No case searched is no evidence: "no violation" after 0 cases would mislead.
    if args.cases == 0 {
        return Err(input("--cases must be at least 1"));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!("{}-counterexample.toml", prepared.scenario.name))
    });
    check_output_file("--out", &out, &[&args.scenario])?;
    let options = SearchOptions {
        cases: args.cases,
        seed: args.seed.unwrap_or(prepared.scenario.seed),
        swarm: !args.no_swarm,
        faults_max: args.faults_max,
        ..SearchOptions::default()
    };
    let bar = spinner(args.quiet || args.json);
    // Wall time is for people; the search itself never reads it.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let outcome = search(&prepared, &options, |p: Progress| {
        bar.set_message(if p.shrink_steps == 0 {
            format!("case {}/{}, {} runs", p.cases, options.cases, p.runs)
        } else {
            format!("shrinking: step {}, {} runs", p.shrink_steps, p.runs)
        });
    })
    .map_err(input)?;
    bar.finish_and_clear();
    let wall_s = started.elapsed().as_secs_f64();
    let command = search_command(&path, &args, options.seed);
    let saved = match &outcome.found {
        Some(found) => Some(save(&prepared, found, &out, &command, registry)?),
        None => None,
    };
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&as_json(&outcome, &options, saved.as_ref(), wall_s))?
        );
    } else {
        out!(
            "{}",
            text(&prepared, &outcome, &options, saved.as_ref(), wall_s)
        );
    }
    Ok(if outcome.found.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn spinner(hidden: bool) -> ProgressBar {
    if hidden || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").expect("valid"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// The command line that repeats this search.
fn search_command(path: &str, args: &SearchArgs, seed: u64) -> String {
    let mut c = format!("locksim search {path} --seed {seed} --cases {}", args.cases);
    if args.no_swarm {
        c.push_str(" --no-swarm");
    }
    if args.faults_max != SearchOptions::default().faults_max {
        let _ = write!(c, " --faults-max {}", args.faults_max);
    }
    c
}

/// A counterexample as saved: its file and its replay.
struct Saved {
    path: String,
    replay: String,
}

/// Writes the counterexample scenario, then loads it back and runs it as `locksim run`
/// would: it must show the same failure with the same trace hash, or replay is broken.
fn save(
    prepared: &Prepared,
    found: &Found,
    out: &Path,
    command: &str,
    registry: &Registry,
) -> anyhow::Result<Saved> {
    let name = out.file_stem().map_or_else(
        || "counterexample".into(),
        |s| s.to_string_lossy().into_owned(),
    );
    let faults: Vec<String> = found.schedule.faults.iter().map(describe_fault).collect();
    let description = if found.no_added_fault() {
        format!(
            "Scenario {} violates {} with its own scripted faults and no fault added (found \
             by fault search before its first case).",
            prepared.scenario.name, found.failure
        )
    } else {
        format!(
            "A counterexample to {} in scenario {}, found by fault search (case {}) and shrunk \
         from {} faults to {}: {}.",
            found.failure,
            prepared.scenario.name,
            found.case,
            found.original.faults.len(),
            found.schedule.faults.len(),
            faults.join("; ")
        )
    };
    let scenario = counterexample(
        prepared,
        &found.schedule,
        found.failure,
        &name,
        &description,
    );
    let shown = out.display().to_string();
    let replay = format!("locksim run {shown}");
    let text = format!(
        "# Found by: {command}\n# Replay:   {replay}\n\n{}",
        toml::to_string(&scenario)?
    );
    if let Err(e) = std::fs::write(out, &text) {
        // A counterexample can take long to find: keep it where the user can still save it.
        eprint!("{text}");
        anyhow::bail!(
            "cannot write {shown}: {e}; the counterexample is printed above (on stderr): save \
             it as a .toml file and replay it with locksim run"
        );
    }
    let replayed = Scenario::load(out)
        .and_then(|s| s.prepare(&shown, registry))
        .map_err(|e| anyhow::anyhow!("the saved counterexample does not load: {e}"))?
        .run(found.schedule.seed);
    anyhow::ensure!(
        replayed.trace_hash == found.result.trace_hash,
        "the saved counterexample {shown} does not replay: trace {} instead of {} (a \
         determinism bug: please report it with the file)",
        replayed.trace_hash,
        found.result.trace_hash
    );
    Ok(Saved {
        path: shown,
        replay,
    })
}

fn text(
    prepared: &Prepared,
    outcome: &SearchOutcome,
    options: &SearchOptions,
    saved: Option<&Saved>,
    wall_s: f64,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "search    {} ({}): up to {} cases, seed {}, swarm {}, at most {} faults each",
        crate::text::printable(&prepared.scenario.name),
        crate::text::printable(&prepared.scenario.protocol.name),
        options.cases,
        options.seed,
        if options.swarm { "on" } else { "off" },
        options.faults_max
    );
    for (i, line) in outcome.space.describe().iter().enumerate() {
        let _ = writeln!(s, "{:<9} {line}", if i == 0 { "faults" } else { "" });
    }
    let (Some(found), Some(saved)) = (&outcome.found, saved) else {
        let _ = writeln!(
            s,
            "none      no violation in {} cases ({} runs, {wall_s:.1} s)",
            outcome.cases, outcome.runs
        );
        return s;
    };
    let n = found.schedule.faults.len();
    if found.no_added_fault() {
        let _ = writeln!(
            s,
            "found     {} fails with no added fault: the scenario's own scripted faults already \
             violate it (seed {}, {} runs, {wall_s:.1} s)",
            found.failure, found.schedule.seed, outcome.runs
        );
    } else {
        let _ = writeln!(
            s,
            "found     {} in case {} ({} faults); shrunk in {} steps to {n} fault{} ({} runs, \
         {wall_s:.1} s):",
            found.failure,
            found.case,
            found.original.faults.len(),
            found.shrink_steps,
            if n == 1 { "" } else { "s" },
            outcome.runs
        );
    }
    for f in &found.schedule.faults {
        let _ = writeln!(s, "            {}", describe_fault(f));
    }
    let r = &found.result;
    if let Some(v) = r
        .violations
        .iter()
        .find(|v| v.kind.name() == found.failure.to_string())
    {
        let _ = writeln!(s, "witness   {}", v.description);
    }
    if let Some(e) = &r.error {
        let _ = writeln!(s, "panic     {e}");
    }
    let _ = writeln!(s, "seed      {}", found.schedule.seed);
    let _ = writeln!(s, "trace     {}", r.trace_hash);
    let _ = writeln!(s, "saved     {}", saved.path);
    let _ = writeln!(s, "replay    {}", saved.replay);
    s
}

fn as_json(
    outcome: &SearchOutcome,
    options: &SearchOptions,
    saved: Option<&Saved>,
    wall_s: f64,
) -> serde_json::Value {
    let found = outcome.found.as_ref().zip(saved).map(|(f, saved)| {
        json!({
            "failure": f.failure.to_string(),
            "no_added_fault": f.no_added_fault(),
            "case": f.case,
            "shrink_steps": f.shrink_steps,
            "original_faults": f.original.faults,
            "seed": f.schedule.seed,
            "faults": f.schedule.faults,
            "violation_counts": f.result.violation_counts,
            "trace_hash": f.result.trace_hash,
            "counterexample": saved.path,
            "replay": saved.replay,
        })
    });
    json!({
        "search_seed": options.seed,
        "cases_max": options.cases,
        "swarm": options.swarm,
        "faults_max": options.faults_max,
        "fault_kinds": outcome.space.kinds,
        "cases": outcome.cases,
        "runs": outcome.runs,
        "found": found,
        // Wall-clock time: for people, differs between runs of the same search.
        "wall_s": wall_s,
    })
}
