//! `locksim compare`: the command-line face of [`crate::compare`].

use crate::compare::{compare, Options};
use crate::compare_shard::{merge, run_shard, Shard};
use crate::stdout::{out, outln};
use locksim_protocols::Registry;
use locksim_reports::cost::LiveLatency;
use std::path::{Path, PathBuf};
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
    /// A `validation.json` (from `locksim validate`): the reports show each protocol's
    /// validation status against the real system beside it.
    #[arg(long, value_name = "FILE")]
    validation: Option<PathBuf>,
    /// Run only shard K of N, K from 0 (jobs K, K+N, K+2N, … in the matrix's order), and
    /// write its results and `OUT/shard.json`, no report; `--merge` writes the report.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Write the report from the finished shards in these directories (all N of them),
    /// running no seed again; the report is the one an unsharded compare writes.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = ["shard", "matrix", "seeds", "resume"])]
    merge: Vec<PathBuf>,
    /// Print the headline table, the verdicts and the counterexamples too (by default the
    /// terminal gets the bottom line and the decision table; the reports have everything).
    #[arg(long)]
    verbose: bool,
}

impl CompareArgs {
    fn options(&self) -> Options {
        Options {
            matrix: self.matrix.clone(),
            seeds: self.seeds,
            // Zero is refused by `compare` itself (exit 2); a number above the cap is capped.
            jobs: match self.jobs {
                Some(0) => 0,
                asked => crate::shared::jobs(asked, u128::MAX).unwrap_or(1),
            },
            out: self.out.clone(),
            resume: self.resume,
            progress: !self.quiet,
            offline: false,
        }
    }
}

/// Runs the matrix, writes the reports, prints the table. Violations are findings, not
/// errors: the exit code is 0 when the reports were written, 2 on bad input.
pub fn run(args: CompareArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let opts = args.options();
    let validation = args
        .validation
        .as_deref()
        .map(read_validation)
        .transpose()?;
    let inputs: Vec<&std::path::Path> = args
        .matrix
        .iter()
        .chain(&args.validation)
        .map(|p| p.as_path())
        .collect();
    crate::compare::check_reports_spare(&opts.out, &inputs)?;
    crate::signals::install();
    match run_or_merge(&args, &opts, validation.as_ref(), registry) {
        Err(e) if e.downcast_ref::<crate::compare::Interrupted>().is_some() => {
            Ok(interrupted(&args))
        }
        other => other,
    }
}

/// What a compare stopped by a signal says: where its results are, how to resume; the
/// signal's exit code (130, 143).
fn interrupted(args: &CompareArgs) -> ExitCode {
    let signal = crate::signals::received().unwrap_or("SIGINT");
    let mut resume = String::from("locksim compare");
    if let Some(m) = &args.matrix {
        resume += &format!(" --matrix {}", m.display());
    }
    if let Some(n) = args.seeds {
        resume += &format!(" --seeds {n}");
    }
    if let Some(shard) = args.shard {
        resume += &format!(" --shard {}/{}", shard.index, shard.count);
    }
    if let Some(v) = &args.validation {
        resume += &format!(" --validation {}", v.display());
    }
    resume += &format!(" --out {} --resume", args.out.display());
    eprintln!(
        "interrupted by {signal}: the results so far are saved in {}/results/; resume with:\n  \
         {resume}",
        args.out.display()
    );
    ExitCode::from(crate::signals::exit_code(signal))
}

/// The compare proper: a shard, a merge or the whole matrix, and its reports.
fn run_or_merge(
    args: &CompareArgs,
    opts: &Options,
    validation: Option<&serde_json::Value>,
    registry: &Registry,
) -> anyhow::Result<ExitCode> {
    if let Some(shard) = args.shard {
        let m = run_shard(opts, shard, registry)?;
        outln!(
            "shard {}/{}: {} jobs, {} runs; results in {out}/results/, manifest {out}/shard.json",
            shard.index,
            shard.count,
            m.jobs.len(),
            m.runs,
            out = opts.out.display(),
        );
        outln!("when every shard is done: locksim compare --merge DIR... --out DIR");
        return Ok(ExitCode::SUCCESS);
    }
    let mut c = if args.merge.is_empty() {
        compare(opts, registry)?
    } else {
        merge(&args.merge, opts, registry)?
    };
    if let Some(v) = validation {
        // The cost tables gain the real systems' loopback latencies: written again.
        add_live_latencies(&mut c, v);
        crate::compare::write_reports(&c, &opts.out)?;
    }
    outln!("{}\n", c.title);
    if args.verbose {
        print_verbose(&c);
    } else {
        out!("{}", locksim_reports::markdown::summary_text(&c));
    }
    if let (Some(v), Some(file)) = (&validation, &args.validation) {
        let section = validation_section(&c, v, file)?;
        out!("\n{section}");
        append_validation(&opts.out, &section)?;
    }
    outln!(
        "\nEvidence and replay commands per cell, every figure and the catalog in the reports:\n\
         {0}/report.md, {0}/report.json, {0}/report.html{1}",
        opts.out.display(),
        if args.verbose {
            ""
        } else {
            "\n(--verbose prints the tables, verdicts and counterexamples here)"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `--verbose`: the summary, then the headline table, the verdicts and every cell's
/// counterexample with its replay command.
fn print_verbose(c: &locksim_reports::Comparison) {
    out!("{}", locksim_reports::markdown::summary_text(c));
    outln!(
        "\nShare of runs with damage (an acknowledged update lost, a stale write accepted), with a \
         latent break of fencing (a token reused, no damage) and with overlap (two clients inside \
         at once), 95% intervals; {} runs, {}:\n",
        c.runs(),
        c.seeds
    );
    out!("{}", locksim_reports::markdown::table(c));
    outln!("\nVerdict:");
    out!("{}", locksim_reports::markdown::verdict_lines(c));
    for x in &c.counterexamples {
        outln!(
            "\n{} under {}, seed {}: {}\n  replay: {}",
            x.protocol,
            x.profile,
            x.seed,
            x.caption,
            x.replay
        );
    }
}

/// A `validation.json`, or bad input naming the file.
fn read_validation(file: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| crate::shared::input(format!("{}: {e}", file.display())))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| crate::shared::input(format!("{}: {e}", file.display())))?;
    if !v["rows"].is_array() {
        return Err(crate::shared::input(format!(
            "{}: not a validation.json (no \"rows\" list; `locksim validate` writes one)",
            file.display()
        )));
    }
    Ok(v)
}

/// Each row's live acquire latency beside the simulated one, from the validation's healthy
/// scenario of its protocol (the first with a live result; the rows of one scenario carry the
/// same liveness figures, one per property).
pub fn add_live_latencies(c: &mut locksim_reports::Comparison, v: &serde_json::Value) {
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    for row in &mut c.rows {
        let id = c.protocol_ids.get(&row.label).unwrap_or(&row.label);
        let Some(cost) = row.cost.as_mut() else {
            continue;
        };
        cost.live = rows.iter().find_map(|r| {
            let healthy = r["scenario"].as_str()?.ends_with("-healthy");
            let p50 = r["live"]["acquire_p50_ms"].as_f64().filter(|x| *x > 0.0)?;
            (healthy && r["protocol"] == id.as_str()).then(|| LiveLatency {
                scenario: r["scenario"].as_str().unwrap_or_default().to_owned(),
                acquire_ms_p50: p50,
                sim_acquire_ms_p50: r["sim"]["acquire_p50_ms"].as_f64().unwrap_or(0.0),
                runs: r["live"]["runs"].as_u64().unwrap_or(0),
                fsyncs_per_grant: r["live"]["fsyncs_per_grant"].as_f64(),
                sim_fsyncs_per_grant: r["sim"]["fsyncs_per_grant"].as_f64(),
            })
        });
    }
}

/// Markdown: each protocol of the report with its validation status.
fn validation_section(
    c: &locksim_reports::Comparison,
    v: &serde_json::Value,
    file: &Path,
) -> anyhow::Result<String> {
    let mut out = format!(
        "## Validation against the real systems\n\nFrom `{}` (`locksim validate`: live and \
         simulated shares of each validation scenario; a row agrees when the 95% intervals \
         overlap, each is at most ±10 points wide and the estimates differ by less than 10 \
         points; inconclusive when they overlap but one is wider).\n\n| protocol | validation |\n|---|---|\n",
        file.display()
    );
    for (label, _) in &c.protocols {
        let id = c
            .protocol_ids
            .get(label)
            .map_or(label.as_str(), String::as_str);
        out += &format!("| {label} | {} |\n", crate::validate::status(v, id));
    }
    Ok(out)
}

/// Adds the section to report.md, and as a preformatted block to report.html.
fn append_validation(out: &Path, section: &str) -> anyhow::Result<()> {
    let md = out.join("report.md");
    let mut text = std::fs::read_to_string(&md)?;
    text += &format!("\n{section}");
    std::fs::write(&md, text)?;
    let html = out.join("report.html");
    let page = std::fs::read_to_string(&html)?;
    let block = format!(
        "<section id=\"validation\"><pre>{}</pre></section>\n</body>",
        section.replace('&', "&amp;").replace('<', "&lt;")
    );
    std::fs::write(&html, page.replacen("</body>", &block, 1))?;
    Ok(())
}
