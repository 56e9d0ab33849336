//! `locksim report`: a comparison report from the results files of earlier sweeps.

use crate::input;
use anyhow::Context;
use locksim_reports::{CellAccumulator, Comparison};
use locksim_scenarios::sweep::for_each_result;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
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
}

/// Reads every file (streaming), one cell per (protocol, scenario), each seed counted once.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let mut cells: BTreeMap<(String, String), Cell> = BTreeMap::new();
    for path in &args.results {
        for_each_result(path, |r| {
            let key = (r.protocol.clone(), r.scenario.clone());
            let cell = cells.entry(key).or_insert_with(|| Cell {
                acc: CellAccumulator::new(&r.protocol, &r.scenario),
                seeds: BTreeSet::new(),
            });
            if cell.seeds.insert(r.seed) {
                let replay = format!("locksim run <{}.toml> --seed {}", r.scenario, r.seed);
                cell.acc.add_seed(&r, &replay);
            }
        })
        .map_err(input)?;
    }
    if cells.is_empty() {
        return Err(input("the results files hold no results"));
    }
    let first = |v: Vec<&String>| -> Vec<(String, String)> {
        let set: BTreeSet<&String> = v.into_iter().collect();
        set.into_iter()
            .map(|x| (x.clone(), String::new()))
            .collect()
    };
    let seeds: BTreeSet<u64> = cells
        .values()
        .flat_map(|c| c.seeds.iter().copied())
        .collect();
    let comparison = Comparison {
        title: args.title.clone(),
        command: format!(
            "locksim report {}",
            args.results
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        seeds: match (seeds.first(), seeds.last()) {
            (Some(a), Some(b)) => format!("{a}..={b} ({} distinct)", seeds.len()),
            _ => String::new(),
        },
        protocols: first(cells.keys().map(|(p, _)| p).collect()),
        profiles: first(cells.keys().map(|(_, s)| s).collect()),
        cells: cells.values().map(|c| c.acc.finish()).collect(),
        counterexamples: vec![],
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for (name, text) in [
        ("report.md", locksim_reports::markdown::render(&comparison)),
        ("report.json", comparison.to_json()),
        ("report.html", locksim_reports::html::render(&comparison)),
    ] {
        let file = args.out.join(name);
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    println!(
        "{} ({} runs). Share of runs violating mutual exclusion / fencing / lost update, one \
         column per scenario:\n",
        comparison.title,
        comparison.runs()
    );
    print!("{}", locksim_reports::markdown::table(&comparison));
    println!(
        "\nreports: {0}/report.md, {0}/report.json, {0}/report.html",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
