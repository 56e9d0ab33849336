//! `locksim run`: one scenario, one seed, the history checked.

use crate::shared::{check_output_file, input};
use crate::stdout::{out, outln};
use crate::text;
use anyhow::Context;
use locksim_protocols::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `locksim run`.
#[derive(clap::Args)]
pub struct RunArgs {
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
}

/// Runs and checks; prints the result. Exit 1 if a safety property was violated.
pub fn run(args: RunArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let path = args.scenario.display().to_string();
    let prepared = crate::shared::load(&path, registry).map_err(input)?;
    for (flag, file) in [("--history", &args.history), ("--timeline", &args.timeline)] {
        if let Some(file) = file {
            check_output_file(flag, file, &[&args.scenario])?;
        }
    }
    let seed = args.seed.unwrap_or(prepared.scenario.seed);
    let (result, events) = prepared.run_with_history(seed);
    if let Some(file) = &args.history {
        let out = std::fs::File::create(file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        locksim_sim::history::write_jsonl(&events, std::io::BufWriter::new(out))?;
    }
    if let Some(file) = &args.timeline {
        let title = format!("{} — seed {seed}", result.scenario);
        let page = locksim_reports::html::run_page(
            &title,
            &prepared.scenario.description,
            &result,
            &events,
            &prepared.deployment.servers(),
        );
        std::fs::write(file, page).with_context(|| format!("cannot write {}", file.display()))?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        let about = &prepared.scenario.description;
        out!("{}", text::run_summary(&result, &events, about));
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
