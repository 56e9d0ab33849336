//! `locksim sweep`: every seed of a range (or of one shard of it), in parallel, one JSON
//! line per seed appended to the results file as each run finishes.

use crate::shared::{check_output_file, input};
use crate::signals;
use crate::stdout::{out, outln};
use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use locksim_protocols::Registry;
use locksim_scenarios::sweep::{
    run_seeds_until, ResultsFile, SeedRange, SeedResult, Shard, Summary,
};
use locksim_scenarios::Prepared;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `locksim sweep`.
#[derive(clap::Args)]
pub struct SweepArgs {
    /// The scenario file (TOML); each seed draws its faults from its `[faults_random]`.
    scenario: PathBuf,
    /// The seeds: A..B (B excluded) or A..=B.
    #[arg(long, value_name = "A..B")]
    seeds: SeedRange,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Run only shard K of N (from 0): the seeds with seed % N == K.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// The results file (JSON Lines, one line per seed).
    #[arg(long, value_name = "FILE.jsonl")]
    out: PathBuf,
    /// Continue an earlier sweep into the same file: skip the seeds already there.
    #[arg(long)]
    resume: bool,
    /// No progress bar (there is none when stderr is not a terminal either).
    #[arg(long)]
    quiet: bool,
}

/// Runs the sweep, prints the summary. Exit 1 if any seed of the range (this run or an
/// earlier one in the file) violated a safety property.
pub fn run(args: SweepArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let path = args.scenario.display().to_string();
    let prepared = crate::shared::load(&path, registry).map_err(input)?;
    let shard = args.shard.unwrap_or(Shard::ALL);
    check_output_file("--out", &args.out, &[&args.scenario])?;
    // Held to the end of the run: a second sweep on this file is refused, not doubled.
    let _lock = crate::shared::lock_results("--out", &args.out)?;
    let fingerprint = prepared.scenario.fingerprint();
    let (mut file, mut summary, done) = open_results(&args, &prepared, &fingerprint, shard)?;
    let from_earlier = summary.runs;
    let jobs = crate::shared::jobs(
        args.jobs,
        args.seeds.count(shard) - u128::from(from_earlier),
    )?;
    let todo = args.seeds.seeds(shard).filter(|s| !done.contains(s));
    let to_run = args.seeds.count(shard) - u128::from(from_earlier);
    let bar = progress_bar(u64::try_from(to_run).unwrap_or(u64::MAX), args.quiet);
    bar.set_message(format!("{} violations", summary.violated()));
    // Wall time is for people (runs/s); it never reaches a result line.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    signals::install();
    run_seeds_until(&prepared, todo, jobs, signals::stop(), |run| {
        let line = SeedResult {
            scenario_hash: fingerprint.clone(),
            path: prepared.path.clone(),
            ..SeedResult::of(&run)
        };
        file.append(&line)?;
        summary.add(&line);
        bar.set_message(format!("{} violations", summary.violated()));
        bar.inc(1);
        Ok::<(), locksim_scenarios::sweep::SweepError>(())
    })?;
    bar.finish_and_clear();
    let wall_s = started.elapsed().as_secs_f64();
    let ran = summary.runs - from_earlier;
    let header = Header {
        prepared: &prepared,
        seeds: args.seeds,
        shard,
        jobs,
        out: &args.out,
        ran,
        wall_s,
    };
    out!("{}", summary_text(&header, &summary));
    outcome(&args, &header, &summary, &path)
}

/// The results file, with the results of this range and shard already in it (`--resume`):
/// their summary and their seeds.
fn open_results(
    args: &SweepArgs,
    prepared: &Prepared,
    fingerprint: &str,
    shard: Shard,
) -> anyhow::Result<(ResultsFile, Summary, BTreeSet<u64>)> {
    let mut summary = Summary::default();
    let mut done = BTreeSet::new();
    let name = &prepared.scenario.name;
    let file = ResultsFile::open(&args.out, name, fingerprint, args.resume, |r| {
        if args.seeds.contains(r.seed) && shard.contains(r.seed) {
            done.insert(r.seed);
            summary.add(&r);
        }
    })
    .map_err(input)?;
    Ok((file, summary, done))
}

/// The exit code: a signal's, 1 on a violation, an error if runs did not complete.
fn outcome(
    args: &SweepArgs,
    header: &Header,
    summary: &Summary,
    path: &str,
) -> anyhow::Result<ExitCode> {
    let (prepared, shard, jobs) = (header.prepared, header.shard, header.jobs);
    if let Some(signal) = signals::received() {
        outln!(
            "interrupted by {signal}: {} of the {} results of this sweep are saved in {}; \
             resume with:\n  {}",
            summary.runs,
            args.seeds.count(shard),
            args.out.display(),
            resume_command(path, args, shard, jobs)
        );
        return Ok(ExitCode::from(signals::exit_code(signal)));
    }
    if summary.violated() > 0 {
        return Ok(ExitCode::from(1));
    }
    if let Some((seed, e)) = summary.errors.first_key_value() {
        anyhow::bail!(
            "{} runs did not complete; the first, seed {seed}: {e}\nreplay: {}",
            summary.errors.len(),
            prepared.replay_command(*seed)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn progress_bar(len: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} runs, {rate}, {msg}, eta {eta}",
    )
    .expect("the template is valid")
    .with_key(
        "rate",
        |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0} runs/s", state.per_sec());
        },
    )
    .progress_chars("=> ");
    bar.set_style(style);
    bar
}

struct Header<'a> {
    prepared: &'a Prepared,
    seeds: SeedRange,
    shard: Shard,
    jobs: usize,
    out: &'a std::path::Path,
    ran: u64,
    wall_s: f64,
}

fn summary_text(h: &Header, s: &Summary) -> String {
    let mut t = String::new();
    let shard = if h.shard == Shard::ALL {
        String::new()
    } else {
        format!(", shard {}", h.shard)
    };
    let _ = writeln!(
        t,
        "sweep      {} ({}), seeds {}{shard}, {} jobs",
        crate::text::printable(&h.prepared.scenario.name),
        crate::text::printable(&h.prepared.scenario.protocol.name),
        h.seeds,
        h.jobs
    );
    let rate = if h.wall_s > 0.0 {
        format!(", {:.1} runs/s", h.ran as f64 / h.wall_s)
    } else {
        String::new()
    };
    let _ = writeln!(
        t,
        "runs       {} ({} now, {} from earlier) in {:.1} s{rate}",
        s.runs,
        h.ran,
        s.runs - h.ran,
        h.wall_s
    );
    let count = |v| s.verdicts.get(&v).copied().unwrap_or(0);
    let _ = writeln!(
        t,
        "verdicts   {} valid, {} invalid, {} unknown",
        count(locksim_sim::Verdict::Valid),
        count(locksim_sim::Verdict::Invalid),
        count(locksim_sim::Verdict::Unknown)
    );
    violations_text(&mut t, h, s);
    for (property, u) in &s.unknown {
        let _ = writeln!(
            t,
            "unknown    {property} in {} runs; seed {}: {}",
            u.runs, u.seed, u.reason
        );
    }
    if let Some((seed, unmet)) = &s.expect_first_unmet {
        let what = match unmet.is_empty() {
            true => String::new(),
            false => format!(" ({})", unmet.join("; ")),
        };
        let _ = writeln!(
            t,
            "expect     not met in {} runs; first seed {seed}{what}: {}",
            s.expect_not_met,
            h.prepared.replay_command(*seed)
        );
    }
    if !s.errors.is_empty() {
        let _ = writeln!(t, "errors     {} runs did not complete", s.errors.len());
    }
    let _ = writeln!(t, "results    {}", h.out.display());
    t
}

/// The summary's violations: runs per property, then the first failing seeds with their
/// replay commands.
fn violations_text(t: &mut String, h: &Header, s: &Summary) {
    if s.violations_by_kind.is_empty() {
        let _ = writeln!(t, "violations none");
    } else {
        let _ = writeln!(t, "violations (runs per property)");
        for (kind, runs) in &s.violations_by_kind {
            let _ = writeln!(t, "  {kind:<17} {runs}");
        }
        let _ = writeln!(t, "first failing seeds");
        for (seed, kinds) in &s.failing {
            let _ = writeln!(
                t,
                "  {seed:<8} {:<30} {}",
                kinds
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                h.prepared.replay_command(*seed)
            );
        }
    }
}

/// The command that continues this sweep into the same file.
fn resume_command(scenario: &str, args: &SweepArgs, shard: Shard, jobs: usize) -> String {
    let mut c = format!("locksim sweep {scenario} --seeds {}", args.seeds);
    if shard != Shard::ALL {
        let _ = write!(c, " --shard {shard}");
    }
    let _ = write!(c, " --jobs {jobs} --out {} --resume", args.out.display());
    if args.quiet {
        c.push_str(" --quiet");
    }
    c
}
