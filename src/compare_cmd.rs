//! `locksim compare`: the command-line face of [`crate::compare`].

use crate::compare::{compare, Options};
use locksim_protocols::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `locksim compare`.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// A matrix file (default: the standard matrix, built in).
    #[arg(long, value_name = "FILE")]
    matrix: Option<PathBuf>,
    /// Run exactly seeds 1..=N in every cell, phase point and catalog file (default: the
    /// matrix's adaptive stopping).
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Where to write the reports, each job's scenario file and its results.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Continue an interrupted compare: seeds already in `OUT/results/` are not run again.
    #[arg(long)]
    resume: bool,
    /// No progress bar (there is none when stderr is not a terminal either).
    #[arg(long)]
    quiet: bool,
}

impl CompareArgs {
    fn options(self) -> Options {
        Options {
            matrix: self.matrix,
            seeds: self.seeds,
            jobs: self.jobs.unwrap_or_else(crate::shared::default_jobs),
            out: self.out,
            resume: self.resume,
            progress: !self.quiet,
        }
    }
}

/// Runs the matrix, writes the reports, prints the table. Violations are findings, not
/// errors: the exit code is 0 when the reports were written, 2 on bad input.
pub fn run(args: CompareArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let opts = args.options();
    let c = compare(&opts, registry)?;
    println!("{}\n", c.title);
    println!(
        "Share of runs with damage (an acknowledged update lost, a stale write accepted), with a \
         latent break of fencing (a token reused, no damage) and with overlap (two clients inside \
         at once), 95% intervals; {} runs, {}:\n",
        c.runs(),
        c.seeds
    );
    print!("{}", locksim_reports::markdown::table(&c));
    println!("\nVerdict:");
    print!("{}", locksim_reports::markdown::verdict_lines(&c));
    for x in &c.counterexamples {
        println!(
            "\n{} under {}, seed {}: {}\n  replay: {}",
            x.protocol, x.profile, x.seed, x.caption, x.replay
        );
    }
    println!(
        "\nreports: {0}/report.md, {0}/report.json, {0}/report.html",
        opts.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
