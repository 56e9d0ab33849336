//! The `locksim` command line. Exit codes: 0 = no safety violation, 1 = violation found,
//! 2 = bad input or usage.

mod check_cmd;
mod compare_cmd;
mod live_cmd;
mod report_cmd;
mod search_cmd;
mod sweep_cmd;
mod text;

use anyhow::Context;
use clap::{Parser, Subcommand};
use locksim_protocols::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// Deterministic simulation and verification testbed for distributed locks.
#[derive(Parser)]
#[command(name = "locksim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario with one seed and check the history.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// The seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Print the result as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Write the history to this file (JSON Lines).
        #[arg(long, value_name = "FILE")]
        history: Option<PathBuf>,
        /// Write a self-contained HTML page with the run's timeline (around its first
        /// violation) to this file.
        #[arg(long, value_name = "FILE.html")]
        timeline: Option<PathBuf>,
    },
    /// Run every seed of a range (or of one shard of it) in parallel; one JSON line per seed.
    Sweep(sweep_cmd::SweepArgs),
    /// Search for a fault schedule that breaks a safety property; save it shrunk.
    Search(search_cmd::SearchArgs),
    /// Check a recorded history (JSON Lines, as `run --history` writes it).
    Check(check_cmd::CheckArgs),
    /// Run the standard matrix (protocols × fault profiles × seeds) and write report.md,
    /// report.json and report.html.
    Compare(compare_cmd::CompareArgs),
    /// Write report.md, report.json and report.html from the results files of earlier sweeps.
    Report(report_cmd::ReportArgs),
    /// List the protocols a scenario can name, with one line about each.
    Protocols,
    /// Run a scenario's workload and faults against real servers started on loopback.
    Live(live_cmd::LiveArgs),
    /// One client process of a live run (started by `locksim live`).
    #[command(hide = true)]
    LiveClient(live_cmd::ClientArgs),
}

/// Bad input: exit code 2.
#[derive(Debug)]
pub(crate) struct InputError(pub(crate) String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

fn main() -> ExitCode {
    // Only with RUST_LOG: an installed subscriber costs even when it filters everything out,
    // because madsim enters an error-level span on every task poll (~40% of a run).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("locksim: {e:#}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(3)
            }
        }
    }
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn input(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(InputError(e.to_string()))
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let registry = Registry::builtin();
    match cli.command {
        Command::Run {
            scenario,
            seed,
            json,
            history,
            timeline,
        } => {
            let path = scenario.display().to_string();
            let prepared = locksim_scenarios::load(&path, &registry).map_err(input)?;
            let seed = seed.unwrap_or(prepared.scenario.seed);
            let (result, events) = prepared.run_with_history(seed);
            if let Some(file) = history {
                let out = std::fs::File::create(&file)
                    .with_context(|| format!("cannot write {}", file.display()))?;
                locksim_sim::history::write_jsonl(&events, std::io::BufWriter::new(out))?;
            }
            if let Some(file) = timeline {
                let title = format!("{} — seed {seed}", result.scenario);
                let page = locksim_reports::html::run_page(
                    &title,
                    &prepared.scenario.description,
                    &result,
                    &events,
                    &prepared.deployment.servers(),
                );
                std::fs::write(&file, page)
                    .with_context(|| format!("cannot write {}", file.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                let about = &prepared.scenario.description;
                print!("{}", text::run_summary(&result, &events, about));
            }
            if let Some(e) = &result.error {
                anyhow::bail!("{e}\nreplay: {}", result.replay);
            }
            Ok(if result.violated() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Sweep(args) => sweep_cmd::run(args, &registry),
        Command::Search(args) => search_cmd::run(args, &registry),
        Command::Check(args) => check_cmd::run(args),
        Command::Compare(args) => compare_cmd::run(args, &registry),
        Command::Report(args) => report_cmd::run(args, &registry),
        Command::Live(args) => live_cmd::run(args, &registry),
        Command::LiveClient(args) => live_cmd::client(args),
        Command::Protocols => {
            for id in registry.ids() {
                let protocol = registry.get(id).expect("listed ids are registered");
                println!("{id:<18} {}", protocol.summary());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
