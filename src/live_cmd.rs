//! `locksim live`: a scenario against real servers (see `locksim_live`), and the hidden
//! `live-client` role each client process runs. Exit codes: 0 = no safety violation,
//! 1 = violation found, 2 = bad input or a scenario live mode refuses (or a missing server
//! binary), 3 = a server that did not come up, or another failure.

use crate::shared::{check_output_file, input, InputError};
use crate::stdout::{out, outln};
use crate::text;
use anyhow::Context;
use clap::Args;
use locksim_protocols::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// `locksim live` arguments.
#[derive(Args)]
pub struct LiveArgs {
    /// The scenario file (TOML).
    scenario: PathBuf,
    /// The seed of the clients' random draws and of the random fault profile (default: the
    /// scenario's `seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write the history to this file (JSON Lines, for `locksim check`).
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// Write a self-contained HTML page with the run's timeline to this file.
    #[arg(long, value_name = "FILE.html")]
    timeline: Option<PathBuf>,
    /// Keep the servers' data directories and logs (and the clients' logs) in DIR.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// How a partition cuts a link: `stall` holds its bytes until the heal (the simulator's
    /// `partition = "delay"`), `reset` closes its connections (its `"drop"`).
    #[arg(long, value_name = "MODE", default_value = "stall", value_parser = ["stall", "reset"])]
    partition: String,
    /// Run the real client library that the scenario's `protocol.client` profile models,
    /// through its driver in live/drivers/ (redis-py on single-redis), instead of
    /// locksim's own client. A profile without a driver is refused (exit 2).
    #[arg(long)]
    library: bool,
}

/// `locksim live-client` arguments (started by `locksim live`, not by people).
#[derive(Args)]
pub struct ClientArgs {
    /// The client's spec, written by the parent.
    spec: PathBuf,
}

/// Runs one client process.
pub fn client(args: ClientArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("cannot read {}", args.spec.display()))?;
    let spec = serde_json::from_str(&text).map_err(input)?;
    locksim_live::client::main(spec)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `locksim live`.
pub fn run(args: LiveArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let path = args.scenario.display().to_string();
    let prepared = crate::shared::load(&path, registry).map_err(input)?;
    for (flag, file) in [("--history", &args.history), ("--timeline", &args.timeline)] {
        if let Some(file) = file {
            check_output_file(flag, file, &[&args.scenario])?;
        }
    }
    let seed = args.seed.unwrap_or(prepared.scenario.seed);
    let opts = locksim_live::LiveOptions {
        seed,
        keep: args.keep.clone(),
        exe: std::env::current_exe().context("cannot find the locksim binary")?,
        cut_mode: if args.partition == "reset" {
            locksim_live::proxy::CutMode::Reset
        } else {
            locksim_live::proxy::CutMode::Stall
        },
        library: args.library,
    };
    let live = locksim_live::run(&prepared, &opts).map_err(classify)?;
    let result = locksim_live::result(&prepared, seed, &live);
    if let Some(file) = &args.history {
        let out = std::fs::File::create(file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        locksim_sim::history::write_jsonl(&live.history, std::io::BufWriter::new(out))?;
    }
    if let Some(file) = &args.timeline {
        let title = format!("{} — live, seed {seed}", result.scenario);
        let names: Vec<String> = live.servers.iter().map(|s| s.name.clone()).collect();
        let about = &prepared.scenario.description;
        let page = locksim_reports::html::run_page(&title, about, &result, &live.history, &names);
        std::fs::write(file, page).with_context(|| format!("cannot write {}", file.display()))?;
    }
    if args.json {
        let mut json = serde_json::to_value(&result)?;
        json["mode"] = "live".into();
        json["servers"] = serde_json::to_value(&live.servers)?;
        json["library"] = match &live.library {
            Some(l) => serde_json::json!({
                "profile": l.profile, "version": l.version, "driver": l.driver,
            }),
            None => serde_json::Value::Null,
        };
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        out!(
            "{}",
            summary(&result, &live, &prepared.scenario.description)
        );
    }
    Ok(if result.violated() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `run`'s text, with the live facts where a simulated run shows its trace.
fn summary(
    result: &locksim_scenarios::RunResult,
    live: &locksim_live::LiveRun,
    about: &str,
) -> String {
    let text = text::run_summary(result, &live.history, about);
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("trace ") && !l.starts_with("replay "))
        .map(str::to_owned)
        .collect();
    let servers: Vec<String> = live
        .servers
        .iter()
        .map(|s| format!("{} {} ({})", s.software, s.version, s.name))
        .collect();
    out.push(format!("mode      live: {}", servers.join(", ")));
    if let Some(l) = &live.library {
        out.push(format!(
            "client    {} {}: the real library, through {}",
            l.profile, l.version, l.driver
        ));
    }
    out.push(format!(
        "run       {} events in {} ms of real time, {} faults; messages {} (not counted \
         live), server fsyncs {}{}",
        result.stats.events,
        live.run_ms,
        result.stats.faults,
        text::count_or_na(result.stats.messages),
        text::count_or_na(result.stats.server_fsyncs),
        match result.stats.server_fsyncs {
            Some(_) => " (counted on the real servers)",
            None => "",
        }
    ));
    out.push(format!("replay    {}", locksim_live::NOT_REPLAYABLE));
    out.push(format!("again     {}", result.replay));
    out.join("\n") + "\n"
}

/// Refusals and missing binaries are bad input (exit 2); everything else exits 3.
fn classify(e: anyhow::Error) -> anyhow::Error {
    if locksim_live::is_bad_input(&e) {
        anyhow::Error::new(InputError(format!("{e:#}")))
    } else {
        e
    }
}
