//! `compare` across machines: `--shard K/N` runs one share of the jobs, `--merge` writes the
//! report from the shards' results.
//!
//! A job (a cell, a phase point, a catalog file) decides when to stop from its own results
//! alone (see [`crate::compare`]), so the job is the unit of sharding: the i-th job in the
//! matrix's order (counting from 0) belongs to shard `i mod N` (shards count from 0, as
//! `sweep --shard` and a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` do). A shard runs its jobs to
//! their end, appending each seed's result to `OUT/results/JOB.jsonl` as it comes (so
//! `--resume` continues an interrupted shard), and then writes `OUT/shard.json`: which shard
//! of how many, the seeds option, the matrix's text and the jobs it ran. `--merge` reads the
//! manifests of shards 0..N, copies their results files into one directory and assembles the
//! report from them as `--resume` would, refusing to run any seed (a missing one means an
//! interrupted shard). Only the counterexamples' timelines are run again, one seed each, as
//! an unsharded `compare` runs them, so the merged report is the unsharded one.

use crate::compare::{progress, run_rounds, setup, Options};
use crate::shared::input;
use anyhow::Context;
use locksim_protocols::Registry;
use locksim_reports::Comparison;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Shards a compare may be split into, at most.
pub const SHARDS_MAX: usize = 10_000;

/// The largest `shard.json` read (it lists job names: a few hundred bytes each).
const MANIFEST_BYTES_MAX: u64 = 16 << 20;

/// Shard `index` (from 0) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: usize,
    /// How many shards in all.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!("`{s}`: expected K/N with 0 <= K < N <= {SHARDS_MAX} (shards count from 0), e.g. 1/4")
        };
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index >= count || count > SHARDS_MAX {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    fn owns(&self, job: usize) -> bool {
        job % self.count == self.index
    }
}

/// What a shard ran: `OUT/shard.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Which shard of how many.
    pub shard: Shard,
    /// `--seeds`, if given (every shard must agree).
    pub seeds: Option<u64>,
    /// The matrix file's text (`None`: the standard matrix).
    pub matrix: Option<String>,
    /// The jobs this shard ran, by name (its results files are `results/NAME.jsonl`).
    pub jobs: Vec<String>,
    /// Runs in this shard's results.
    pub runs: u64,
}

/// Runs shard `shard` of the matrix into `opts.out` and writes its manifest.
pub fn run_shard(opts: &Options, shard: Shard, registry: &Registry) -> anyhow::Result<Manifest> {
    let (_, jobs, files) = setup(opts, registry)?;
    let (mut jobs, mut files): (Vec<_>, Vec<_>) = jobs
        .into_iter()
        .zip(files)
        .enumerate()
        .filter(|(i, _)| shard.owns(*i))
        .map(|(_, pair)| pair)
        .unzip();
    let bar = progress(opts.progress);
    run_rounds(&mut jobs, &mut files, opts, &bar)?;
    bar.finish_and_clear();
    let matrix = match &opts.matrix {
        Some(path) => Some(
            locksim_check::input::read_to_string_bounded(path, MANIFEST_BYTES_MAX)
                .map_err(|e| input(format!("{}: {e}", path.display())))?,
        ),
        None => None,
    };
    let manifest = Manifest {
        shard,
        seeds: opts.seeds,
        matrix,
        jobs: jobs
            .iter()
            .map(|j| j.prepared.scenario.name.clone())
            .collect(),
        runs: jobs.iter().map(|j| j.acc.finish().runs).sum(),
    };
    let file = opts.out.join("shard.json");
    let text = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(manifest)
}

fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let file = dir.join("shard.json");
    let shown = file.display();
    let text =
        locksim_check::input::read_to_string_bounded(&file, MANIFEST_BYTES_MAX).map_err(|e| {
            input(format!(
                "{shown}: {e} (not a finished `compare --shard` directory?)"
            ))
        })?;
    serde_json::from_str(&text).map_err(|e| input(format!("{shown}: {e}")))
}

/// Checks that the manifests are shards 0..N of one compare, each once, and returns them in
/// shard order.
fn consistent(dirs: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, Manifest)>> {
    let mut all = Vec::new();
    for dir in dirs {
        all.push((dir.clone(), read_manifest(dir)?));
    }
    all.sort_by_key(|(_, m)| m.shard.index);
    let first = &all[0].1;
    let count = first.shard.count;
    for (dir, m) in &all {
        let same = m.shard.count == count && m.seeds == first.seeds && m.matrix == first.matrix;
        if !same {
            return Err(input(format!(
                "{}: shard {}/{} is not of the same compare as {} (shard count, --seeds and \
                 the matrix must agree)",
                dir.display(),
                m.shard.index,
                m.shard.count,
                all[0].0.display()
            )));
        }
    }
    let indexes: Vec<usize> = all.iter().map(|(_, m)| m.shard.index).collect();
    if indexes != (0..count).collect::<Vec<_>>() {
        return Err(input(format!(
            "--merge needs shards 0..{count} (0 to {}) once each; found {indexes:?}",
            count - 1
        )));
    }
    Ok(all)
}

/// Copies each shard's results files into `out/results/`.
fn gather(shards: &[(PathBuf, Manifest)], out: &Path) -> anyhow::Result<()> {
    let results = out.join("results");
    std::fs::create_dir_all(&results)
        .with_context(|| format!("cannot create {}", results.display()))?;
    let mut seen = BTreeSet::new();
    for (dir, m) in shards {
        for job in &m.jobs {
            if !seen.insert(job.clone()) {
                return Err(input(format!(
                    "{}: job {job} is in two shards",
                    dir.display()
                )));
            }
            let (from, to) = (
                dir.join("results").join(format!("{job}.jsonl")),
                results.join(format!("{job}.jsonl")),
            );
            let same = matches!((from.canonicalize(), to.canonicalize()), (Ok(a), Ok(b)) if a == b);
            if !same {
                std::fs::copy(&from, &to).map_err(|e| input(format!("{}: {e}", from.display())))?;
            }
        }
    }
    Ok(())
}

/// Merges the shards in `dirs` into `opts.out` and writes the reports.
pub fn merge(dirs: &[PathBuf], opts: &Options, registry: &Registry) -> anyhow::Result<Comparison> {
    if dirs.is_empty() {
        return Err(input("--merge needs the shards' directories"));
    }
    locksim_check::input::check_output_dir(&opts.out).map_err(|e| input(format!("--out {e}")))?;
    let shards = consistent(dirs)?;
    let first = &shards[0].1;
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("cannot create {}", opts.out.display()))?;
    let matrix = match &first.matrix {
        Some(text) => {
            let file = opts.out.join("matrix.toml");
            std::fs::write(&file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            Some(file)
        }
        None => None,
    };
    gather(&shards, &opts.out)?;
    let merged = Options {
        matrix,
        seeds: first.seeds,
        resume: true,
        offline: true,
        ..opts.clone()
    };
    crate::compare::compare(&merged, registry)
}
