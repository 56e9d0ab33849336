//! The command line: [`main_with`] parses the arguments and runs one subcommand against the
//! protocols of a [`Registry`]. Exit codes: 0 = no safety violation, 1 = violation found,
//! 2 = bad input or usage, 3 = any other error (e.g. a file that cannot be written, or a
//! stdout that took only part of the output: see [`crate::stdout`]).
//!
//! A subcommand is a module with an `Args` type (`#[derive(clap::Args)]`) and a
//! `run(args, &Registry) -> anyhow::Result<ExitCode>`; registering it is one variant of
//! [`Command`] and one arm of [`dispatch`].

pub use crate::shared::{default_jobs, input, InputError};
use crate::{
    check_cmd, compare_cmd, live_cmd, protocols_cmd, report_cmd, run_cmd, search_cmd, stdout,
    sweep_cmd, validate_cmd,
};
use clap::{Parser, Subcommand};
use locksim_protocols::Registry;
use std::ffi::OsString;
use std::process::ExitCode;

/// Deterministic simulation and verification testbed for distributed locks.
#[derive(Parser)]
#[command(name = "locksim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run one scenario with one seed and check the history.
    Run(run_cmd::RunArgs),
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
    /// List the protocols a scenario can name, with one line about each, and the client
    /// libraries each can be driven by (`[protocol] client`).
    Protocols(protocols_cmd::ProtocolsArgs),
    /// Run a scenario's workload and faults against real servers started on loopback.
    Live(live_cmd::LiveArgs),
    /// Run a validation set live and in the simulator; write the table of both shares.
    Validate(validate_cmd::ValidateArgs),
    /// One client process of a live run (started by `locksim live`).
    #[command(hide = true)]
    LiveClient(live_cmd::ClientArgs),
}

/// The whole command line on the process' arguments, with the protocols of `registry`: what
/// a `main` calls.
pub fn main_with(registry: Registry) -> ExitCode {
    // Only with RUST_LOG: an installed subscriber costs even when it filters everything out,
    // because madsim enters an error-level span on every task poll (~40% of a run).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    run_with(&registry, std::env::args_os())
}

/// The command line on the given arguments (the first is the program's name), e.g. from a
/// test. Usage errors print clap's message and give exit code 2 (`--help` and `--version`
/// print and give 0); errors of the command print `locksim: ...`.
pub fn run_with<I, T>(registry: &Registry, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = dispatch(cli.command, registry);
    // An interrupted live run ends by its signal's handler (128 + the signal).
    locksim_live::procs::await_interrupt();
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            // Messages quote what a file said (an unknown node's name): no raw escapes.
            let message = crate::text::printable_keeping(&format!("{e:#}"), &['\n', '\t']);
            eprintln!("locksim: {message}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(3)
            }
        }
    };
    // A closed stdout keeps the command's own code; one that failed otherwise gives 3.
    stdout::finish(code)
}

/// Runs one subcommand.
pub fn dispatch(command: Command, registry: &Registry) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run_cmd::run(args, registry),
        Command::Sweep(args) => sweep_cmd::run(args, registry),
        Command::Search(args) => search_cmd::run(args, registry),
        Command::Check(args) => check_cmd::run(args),
        Command::Compare(args) => compare_cmd::run(args, registry),
        Command::Report(args) => report_cmd::run(args, registry),
        Command::Live(args) => live_cmd::run(args, registry),
        Command::LiveClient(args) => live_cmd::client(args),
        Command::Validate(args) => validate_cmd::run(args, registry),
        Command::Protocols(args) => protocols_cmd::run(args, registry),
    }
}
