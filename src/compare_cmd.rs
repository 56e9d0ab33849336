//! `locksim compare`: the standard matrix of protocols × fault profiles × seeds, written as
//! report.md, report.json and report.html.

use crate::input;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use locksim_protocols::Registry;
use locksim_reports::{CellAccumulator, Comparison, Counterexample};
use locksim_scenarios::matrix::Matrix;
use locksim_scenarios::runner::isolated;
use locksim_scenarios::Prepared;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The arguments of `locksim compare`.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// The matrix file.
    #[arg(long, default_value = "scenarios/compare/matrix.toml")]
    matrix: PathBuf,
    /// Seeds per cell, 1..=N (default: the matrix's `seeds`).
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Where to write the reports (and each cell's scenario file).
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// No progress bar (there is none when stderr is not a terminal either).
    #[arg(long)]
    quiet: bool,
}

/// Runs the matrix, writes the reports, prints the table. Violations are findings, not
/// errors: the exit code is 0 unless the input is bad.
pub fn run(args: CompareArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let c = compare(&args, registry)?;
    println!("{}\n", c.title);
    println!(
        "Share of runs violating mutual exclusion / fencing / lost update ({} runs, seeds {}):\n",
        c.runs(),
        c.seeds
    );
    print!("{}", locksim_reports::markdown::table(&c));
    for x in &c.counterexamples {
        println!(
            "\n{} under {}, seed {}: {}\n  replay: {}",
            x.protocol, x.profile, x.seed, x.kind, x.replay
        );
    }
    println!(
        "\nreports: {0}/report.md, {0}/report.json, {0}/report.html",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

struct Cell {
    protocol: String,
    profile: String,
    prepared: Prepared,
}

/// Writes each cell's scenario next to the report and prepares it.
fn prepare_cells(matrix: &Matrix, out: &Path, registry: &Registry) -> anyhow::Result<Vec<Cell>> {
    let dir = out.join("scenarios");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cells = Vec::new();
    for protocol in &matrix.protocols {
        for profile in &matrix.profiles {
            let file = dir.join(format!("{}.toml", Matrix::cell_name(protocol, profile)));
            std::fs::write(&file, matrix.cell_toml(protocol, profile))
                .with_context(|| format!("cannot write {}", file.display()))?;
            let path = file.display().to_string();
            let prepared = locksim_scenarios::load(&path, registry).map_err(|e| {
                input(format!(
                    "matrix row `{}` × column `{}`: {e}",
                    protocol.label, profile.label
                ))
            })?;
            cells.push(Cell {
                protocol: protocol.label.clone(),
                profile: profile.label.clone(),
                prepared,
            });
        }
    }
    Ok(cells)
}

fn progress(total: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {per_sec}, eta {eta} {msg}")
            .expect("a valid template"),
    );
    bar
}

/// Runs the matrix and writes the reports; returns the comparison.
fn compare(opts: &CompareArgs, registry: &Registry) -> anyhow::Result<Comparison> {
    let matrix = Matrix::load(&opts.matrix).map_err(input)?;
    let seeds = opts.seeds.unwrap_or(matrix.seeds).max(1);
    let jobs = opts.jobs.unwrap_or_else(crate::default_jobs);
    if jobs == 0 {
        return Err(input("--jobs must be at least 1"));
    }
    let cells = prepare_cells(&matrix, &opts.out, registry)?;
    let accumulators: Vec<Mutex<CellAccumulator>> = cells
        .iter()
        .map(|c| Mutex::new(CellAccumulator::new(&c.protocol, &c.profile)))
        .collect();
    let total = cells.len() as u64 * seeds;
    let bar = progress(total, opts.quiet);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= total {
                    break;
                }
                // Seed-major order: every cell advances together, so a partial view is fair.
                let (cell, seed) = (
                    (i % cells.len() as u64) as usize,
                    i / cells.len() as u64 + 1,
                );
                // A fresh thread per run: see `runner::isolated`.
                let result = isolated(|| cells[cell].prepared.run(seed));
                accumulators[cell].lock().unwrap().add(&result);
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    let mut comparison = Comparison {
        title: matrix.title.clone(),
        command: format!(
            "locksim compare --matrix {} --seeds {seeds} --out {}",
            opts.matrix.display(),
            opts.out.display()
        ),
        seeds: format!("1..={seeds}"),
        protocols: matrix
            .protocols
            .iter()
            .map(|p| (p.label.clone(), p.description.clone()))
            .collect(),
        profiles: matrix
            .profiles
            .iter()
            .map(|p| (p.label.clone(), p.description.clone()))
            .collect(),
        cells: accumulators
            .iter()
            .map(|a| a.lock().unwrap().finish())
            .collect(),
        counterexamples: vec![],
    };
    // One timeline per failing cell: its smallest failing seed, run again for its history.
    for (cell, summary) in cells.iter().zip(&comparison.cells) {
        if let Some(first) = summary.failing.first() {
            let (result, history) = isolated(|| cell.prepared.run_with_history(first.seed));
            comparison.counterexamples.extend(Counterexample::from_run(
                &cell.protocol,
                &cell.profile,
                &result,
                history,
            ));
        }
    }
    write_reports(&comparison, &opts.out)?;
    Ok(comparison)
}

fn write_reports(c: &Comparison, out: &Path) -> anyhow::Result<()> {
    for (name, text) in [
        ("report.md", locksim_reports::markdown::render(c)),
        ("report.json", c.to_json()),
        ("report.html", locksim_reports::html::render(c)),
    ] {
        let file = out.join(name);
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}
