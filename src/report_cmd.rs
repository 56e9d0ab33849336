//! `locksim report`: a comparison report from the results files of earlier sweeps.

use crate::shared::input;
use crate::stdout::{out, outln};
use locksim_protocols::Registry;
use locksim_reports::{CellAccumulator, Comparison, SCHEMA_VERSION};
use locksim_scenarios::sweep::{for_each_result, SeedResult};
use locksim_scenarios::Scenario;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The arguments of `locksim report`.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// Results files written by `locksim sweep` (shards may be given one by one).
    #[arg(required = true, value_name = "RESULTS.jsonl")]
    results: Vec<PathBuf>,
    /// Where to write report.md, report.json and report.html.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// The report's title.
    #[arg(long, default_value = "Sweep results")]
    title: String,
}

struct Cell {
    acc: CellAccumulator,
    seeds: BTreeSet<u64>,
    /// The scenario file, from the results (or found beside them).
    path: Option<String>,
}

/// The scenario file a result came from: the path it carries, or (for results written
/// without one) `SCENARIO.toml` beside the results file or in the catalog.
fn scenario_path(r: &SeedResult, results: &Path) -> Option<String> {
    if !r.path.is_empty() {
        return Some(r.path.clone());
    }
    let file = format!("{}.toml", r.scenario);
    let beside = results.parent().map(|d| d.join(&file));
    let catalog = Path::new("scenarios/catalog").join(&file);
    beside
        .into_iter()
        .chain([catalog])
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

fn replay(path: Option<&str>, r: &SeedResult) -> String {
    match path {
        Some(p) => format!("locksim run {p} --seed {}", r.seed),
        None => format!(
            "seed {} of scenario `{}` (its file is unknown: the results predate recorded paths)",
            r.seed, r.scenario
        ),
    }
}

/// Reads every file (streaming), one cell per (protocol, scenario), each seed counted once.
fn read_cells(files: &[PathBuf]) -> anyhow::Result<BTreeMap<(String, String), Cell>> {
    let mut cells: BTreeMap<(String, String), Cell> = BTreeMap::new();
    for file in files {
        for_each_result(file, |r| {
            let key = (r.protocol.clone(), r.scenario.clone());
            let cell = cells.entry(key).or_insert_with(|| Cell {
                acc: CellAccumulator::new(&r.protocol, &r.scenario),
                seeds: BTreeSet::new(),
                path: scenario_path(&r, file),
            });
            if cell.seeds.insert(r.seed) {
                let replay = replay(cell.path.as_deref(), &r);
                cell.acc.add(&r, &replay);
            }
        })
        .map_err(input)?;
    }
    if cells.is_empty() {
        return Err(input("the results files hold no results"));
    }
    Ok(cells)
}

/// Writes the reports of the sweeps' results; prints the headline table.
pub fn run(args: ReportArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    locksim_check::input::check_output_dir(&args.out).map_err(|e| input(format!("--out {e}")))?;
    let inputs: Vec<&std::path::Path> = args.results.iter().map(|p| p.as_path()).collect();
    crate::compare::check_reports_spare(&args.out, &inputs)?;
    let cells = read_cells(&args.results)?;
    let protocols: BTreeSet<&String> = cells.keys().map(|(p, _)| p).collect();
    let mut scenarios: BTreeMap<&String, String> = BTreeMap::new();
    for ((_, s), cell) in &cells {
        // A scenario's description, from its file where it can be read.
        let about = cell
            .path
            .as_deref()
            .and_then(|p| Scenario::load(p).ok())
            .map(|sc| sc.description)
            .unwrap_or_default();
        let entry = scenarios.entry(s).or_default();
        if entry.is_empty() {
            *entry = about;
        }
    }
    let comparison = Comparison {
        schema: SCHEMA_VERSION,
        title: args.title.clone(),
        command: format!(
            "locksim report {}",
            args.results
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        seeds: "the seeds each sweep ran, each counted once".into(),
        protocols: protocols
            .iter()
            .map(|p| {
                let about = registry.get(p).map(|x| x.summary()).unwrap_or_default();
                ((*p).clone(), about.to_string())
            })
            .collect(),
        protocol_ids: protocols
            .iter()
            .map(|p| ((*p).clone(), (*p).clone()))
            .collect(),
        profiles: scenarios.into_iter().map(|(s, d)| (s.clone(), d)).collect(),
        cells: cells.values().map(|c| c.acc.finish()).collect(),
        ..Comparison::default()
    };
    crate::compare::write_reports(&comparison, &args.out)?;
    outln!(
        "{} ({} runs, {} per cell). Share of runs with harm and with overlap, one column per \
         scenario:\n",
        comparison.title,
        comparison.runs(),
        comparison.seed_counts()
    );
    out!("{}", locksim_reports::markdown::table(&comparison));
    outln!(
        "\nreports: {0}/report.md, {0}/report.json, {0}/report.html",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
