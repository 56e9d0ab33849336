//! `locksim compare`: the standard matrix of protocols × fault profiles, phase diagrams of
//! fault size against TTL, and the catalog, written as report.md, report.json and
//! report.html.
//!
//! Every cell, phase point and catalog file is a *job*: a scenario file written under the
//! output directory and a results file (`results/NAME.jsonl`, one line per seed, appended and
//! flushed as each run finishes). Jobs run in rounds: in each round every job that still
//! needs seeds gets its next block (seeds in order, 1, 2, 3, …), all blocks run in parallel,
//! and only when the round is complete does each job look at its intervals and decide
//! whether to stop. So what runs depends on the data alone, never on the number of threads
//! or the order in which runs finish, and `--resume` can take every seed already in the
//! results files instead of running it again.
//!
//! A registry may hold protocols beyond the built-in ones (a crate's own, registered before
//! it calls [`crate::cli::main_with`]). Each such protocol that no row of the matrix names
//! gets a row of its own, built from its defaults: label and id the protocol's id,
//! description its summary, and a `[protocol]` table with nothing but `name`, so its
//! parameters take their defaults (see [`extra_rows`]).

use crate::shared::input;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use locksim_protocols::Registry;
use locksim_reports::cost::Cost;
use locksim_reports::{
    CatalogEntry, CellAccumulator, CellSummary, Comparison, Counterexample, PhasePoint,
    PhaseSeries, Row, Setup as RowSetup, SCHEMA_VERSION,
};
use locksim_scenarios::matrix::{Matrix, MatrixProtocol, Stopping, CATALOG, PHASE_AXES};
use locksim_scenarios::runner::{isolated, RunResult};
use locksim_scenarios::sweep::{ResultsFile, SeedResult};
use locksim_scenarios::{Prepared, Scenario};
use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What to run and where to write it: `compare`'s options.
#[derive(Clone, Debug)]
pub struct Options {
    /// A matrix file (`None`: the standard matrix, built in).
    pub matrix: Option<PathBuf>,
    /// Run exactly seeds 1..=N everywhere (`None`: the matrix's adaptive stopping).
    pub seeds: Option<u64>,
    /// Worker threads.
    pub jobs: usize,
    /// Where the reports, each job's scenario file and its results go.
    pub out: PathBuf,
    /// Take the seeds already in `out/results/` instead of running them again.
    pub resume: bool,
    /// Show a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// Run nothing new: every seed must be in `out/results/` already (a merge of shards).
    pub offline: bool,
}

/// What a job stands for in the report.
#[derive(Clone)]
enum Role {
    Cell {
        protocol: String,
        profile: String,
    },
    Phase {
        series: usize,
        multiple: f64,
        size_ms: u64,
    },
    Catalog,
    /// A row's uncontended cost runs.
    Cost {
        protocol: String,
    },
}

/// One scenario to run over seeds 1, 2, 3, … until its stopping rule says enough.
pub(crate) struct Job {
    role: Role,
    pub(crate) prepared: Prepared,
    stopping: Stopping,
    fingerprint: String,
    /// Results from an earlier, interrupted compare, not yet counted.
    earlier: BTreeMap<u64, SeedResult>,
    pub(crate) acc: CellAccumulator,
    done: u64,
    expect_met: u64,
    /// The overlap share a requirement tolerates in this cell (the reference profile's): the
    /// cell runs on until its overlap interval is on one side of it, or to the cap.
    overlap_tolerance: Option<f64>,
}

impl Job {
    fn count(&mut self, r: &SeedResult) {
        self.acc.add(r, &self.prepared.replay_command(r.seed));
        self.expect_met += u64::from(r.expect_met == Some(true));
    }

    /// Seeds this job still has to run this round; seeds found in the earlier results are
    /// counted at once instead.
    fn plan(&mut self) -> Vec<u64> {
        let mut todo = vec![];
        loop {
            let s = self.acc.finish();
            let mut widths = s.watched().map(|w| w.half_width());
            if let Some(t) = self.overlap_tolerance {
                // Narrow enough and decided against the tolerance; undecided however narrow.
                let decided = s.overlap.hi < t || s.overlap.lo > t;
                if !decided {
                    widths[0] = f64::INFINITY;
                }
            }
            let target = self.stopping.target(self.done, &widths);
            if target == self.done {
                return todo;
            }
            for seed in self.done + 1..=target {
                match self.earlier.remove(&seed) {
                    Some(r) => self.count(&r),
                    None => todo.push(seed),
                }
            }
            self.done = target;
            if !todo.is_empty() {
                return todo;
            }
        }
    }
}

/// Writes a scenario file under `dir` and prepares it.
fn prepare(dir: &Path, name: &str, text: &str, registry: &Registry) -> anyhow::Result<Prepared> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    let path = file.display().to_string();
    crate::shared::load(&path, registry).map_err(|e| input(format!("{name}: {e}")))
}

struct Setup<'a> {
    out: &'a Path,
    resume: bool,
    registry: &'a Registry,
}

impl Setup<'_> {
    fn job(
        &self,
        role: Role,
        prepared: Prepared,
        stopping: Stopping,
    ) -> anyhow::Result<(Job, ResultsFile)> {
        let dir = self.out.join("results");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("{}.jsonl", prepared.scenario.name));
        if !self.resume {
            let _ = std::fs::remove_file(&path);
        }
        let mut earlier = BTreeMap::new();
        let fingerprint = prepared.scenario.fingerprint();
        let file = ResultsFile::open(&path, &prepared.scenario.name, &fingerprint, true, |r| {
            earlier.insert(r.seed, r);
        })
        .map_err(input)?;
        let job = Job {
            acc: CellAccumulator::new("", ""),
            role,
            prepared,
            stopping,
            fingerprint,
            earlier,
            done: 0,
            expect_met: 0,
            overlap_tolerance: None,
        };
        Ok((job, file))
    }
}

/// Every job of the matrix (its cells, phase points and catalog files), with its results
/// file.
fn jobs(
    matrix: &Matrix,
    opts: &Options,
    registry: &Registry,
) -> anyhow::Result<Vec<(Job, ResultsFile)>> {
    let setup = Setup {
        out: &opts.out,
        resume: opts.resume,
        registry,
    };
    let fixed = opts.seeds.map(Stopping::fixed);
    let cell_stop = fixed.unwrap_or_else(|| matrix.stopping());
    let mut jobs = vec![];
    let scenarios = opts.out.join("scenarios");
    let reference = locksim_reports::reference_of(matrix.profiles.iter().map(|p| p.label.as_str()));
    for protocol in &matrix.protocols {
        // A cell whose runs are another row's is not run (see `cells_in_order`).
        let own = matrix
            .profiles
            .iter()
            .filter(|f| protocol.same_as(&f.label).is_none());
        for profile in own {
            let name = Matrix::cell_name(protocol, profile);
            let text = matrix.cell_toml(protocol, profile);
            let prepared = prepare(&scenarios, &name, &text, setup.registry)?;
            let role = Role::Cell {
                protocol: protocol.label.clone(),
                profile: profile.label.clone(),
            };
            let (mut job, file) = setup.job(role, prepared, cell_stop)?;
            if reference == Some(profile.label.as_str()) {
                job.overlap_tolerance = Some(locksim_reports::decide::RARE_OVERLAP);
            }
            jobs.push((job, file));
        }
    }
    jobs.extend(phase_jobs(matrix, opts, &setup)?);
    if matrix.cost_seeds > 0 {
        let dir = opts.out.join("cost");
        let stop = Stopping::fixed(opts.seeds.unwrap_or(matrix.cost_seeds));
        for protocol in &matrix.protocols {
            let (name, text) = matrix.uncontended_toml(protocol);
            let prepared = prepare(&dir, &name, &text, setup.registry)?;
            let role = Role::Cost {
                protocol: protocol.label.clone(),
            };
            jobs.push(setup.job(role, prepared, stop)?);
        }
    }
    let catalog_seeds = opts.seeds.unwrap_or(matrix.catalog_seeds);
    if catalog_seeds > 0 {
        let dir = opts.out.join("catalog");
        for (name, text) in CATALOG {
            let prepared = prepare(&dir, name, text, setup.registry)?;
            jobs.push(setup.job(Role::Catalog, prepared, Stopping::fixed(catalog_seeds))?);
        }
    }
    Ok(jobs)
}

/// The phase points' jobs: each row on each of its axes, at each multiple of its TTL.
fn phase_jobs(
    matrix: &Matrix,
    opts: &Options,
    setup: &Setup,
) -> anyhow::Result<Vec<(Job, ResultsFile)>> {
    let mut jobs = vec![];
    let (Some(spec), Some(stop)) = (&matrix.phase, matrix.phase_stopping()) else {
        return Ok(jobs);
    };
    let stop = opts.seeds.map_or(stop, Stopping::fixed);
    let phase_dir = opts.out.join("phase");
    let mut series = 0;
    for (axis, _) in PHASE_AXES {
        for protocol in matrix.protocols.iter().filter(|p| p.on_axis(axis)) {
            for &multiple in spec.multiples(axis) {
                let (name, size_ms, text) =
                    matrix.phase_toml(protocol, axis, multiple, setup.registry);
                let prepared = prepare(&phase_dir, &name, &text, setup.registry)?;
                let role = Role::Phase {
                    series,
                    multiple,
                    size_ms,
                };
                jobs.push(setup.job(role, prepared, stop)?);
            }
            series += 1;
        }
    }
    Ok(jobs)
}

pub(crate) fn progress(shown: bool) -> ProgressBar {
    if !shown || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {per_sec}, round {msg}")
            .expect("a valid template"),
    );
    bar
}

/// For each job, the first job with its run key (see `Prepared::run_key`): jobs of one family
/// differ only in their resource's rules and the application's check, and a seed of theirs
/// is simulated once for all of them where the rules and checks allow.
fn families(jobs: &[Job]) -> Vec<usize> {
    let mut first: BTreeMap<String, usize> = BTreeMap::new();
    (0..jobs.len())
        .map(|j| *first.entry(jobs[j].prepared.run_key()).or_insert(j))
        .collect()
}

/// A round's work: for each (family, seed), the family's jobs that need that seed.
fn groups(tasks: &[(usize, u64)], family: &[usize]) -> Vec<(u64, Vec<usize>)> {
    let mut groups: BTreeMap<(usize, u64), Vec<usize>> = BTreeMap::new();
    for &(j, seed) in tasks {
        groups.entry((family[j], seed)).or_default().push(j);
    }
    groups
        .into_iter()
        .map(|((_, seed), js)| (seed, js))
        .collect()
}

/// Runs one seed for a family's jobs: simulated once for the first and shared with the others
/// whose resource and check would have answered and decided alike (`Prepared::run_shared`: the results are those of
/// separate runs, exactly), simulated on their own for the rest. Also says how many were
/// shared.
fn run_group(jobs: &[Job], seed: u64, members: &[usize]) -> (Vec<(usize, RunResult)>, u64) {
    let lead = &jobs[members[0]].prepared;
    let others: Vec<&Prepared> = members[1..].iter().map(|&j| &jobs[j].prepared).collect();
    let (first, shared) = isolated(|| lead.run_shared(seed, &others));
    let mut out = vec![(members[0], first)];
    let mut count = 0;
    for (&j, run) in members[1..].iter().zip(shared) {
        count += u64::from(run.is_some());
        let run = run.unwrap_or_else(|| isolated(|| jobs[j].prepared.run(seed)));
        out.push((j, run));
    }
    (out, count)
}

/// A merge whose shards' results lack `tasks`: bad input, naming the first.
fn lacking(jobs: &[Job], tasks: &[(usize, u64)]) -> anyhow::Error {
    let (j, seed) = tasks[0];
    input(format!(
        "the results lack {} run(s), the first: seed {seed} of {} (was a shard interrupted? \
         run it again with --resume, then merge)",
        tasks.len(),
        jobs[j].prepared.scenario.name
    ))
}

/// A compare stopped by SIGINT or SIGTERM: its results so far are in its files.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Runs rounds until every job has stopped. Results are written to the job's file as they
/// arrive (a kill keeps them) and counted in any order (the accumulators do not care).
/// Returns how many results were shared from another job's run.
pub(crate) fn run_rounds(
    jobs: &mut [Job],
    files: &mut [ResultsFile],
    opts: &Options,
    bar: &ProgressBar,
) -> anyhow::Result<u64> {
    let threads = opts.jobs;
    let family = families(jobs);
    let shared_runs = AtomicU64::new(0);
    for round in 1.. {
        let tasks: Vec<(usize, u64)> = jobs
            .iter_mut()
            .enumerate()
            .flat_map(|(j, job)| job.plan().into_iter().map(move |s| (j, s)))
            .collect();
        if tasks.is_empty() {
            return Ok(shared_runs.into_inner());
        }
        if crate::signals::stop().load(Ordering::SeqCst) {
            return Err(anyhow::Error::new(Interrupted));
        }
        if opts.offline {
            return Err(lacking(jobs, &tasks));
        }
        bar.inc_length(tasks.len() as u64);
        bar.set_message(round.to_string());
        let groups = groups(&tasks, &family);
        let next = AtomicUsize::new(0);
        let (tx, rx) = std::sync::mpsc::channel();
        let shared: &[Job] = jobs;
        let results = std::thread::scope(|scope| {
            for _ in 0..threads {
                let (tx, next, groups, shared_runs) = (tx.clone(), &next, &groups, &shared_runs);
                scope.spawn(move || {
                    // After a SIGINT or SIGTERM no new run starts; those running finish.
                    let stopped = || crate::signals::stop().load(Ordering::SeqCst);
                    while let Some((seed, members)) =
                        groups.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        if stopped() {
                            break;
                        }
                        let (runs, count) = run_group(shared, *seed, members);
                        shared_runs.fetch_add(count, Ordering::Relaxed);
                        if runs.into_iter().any(|run| tx.send(run).is_err()) {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut results = Vec::with_capacity(tasks.len());
            for (j, run) in rx.iter() {
                let r = SeedResult {
                    scenario_hash: shared[j].fingerprint.clone(),
                    path: shared[j].prepared.path.clone(),
                    ..SeedResult::of(&run)
                };
                files[j].append(&r).map_err(input)?;
                bar.inc(1);
                results.push((j, r));
            }
            Ok::<_, anyhow::Error>(results)
        })?;
        for (j, r) in results {
            jobs[j].count(&r);
        }
    }
    unreachable!("rounds end when no job needs seeds")
}

/// The smallest failing seed of a cell, harm first.
fn seed_to_draw(cell: &CellSummary) -> Option<u64> {
    let harmed = cell.failing.iter().find(|f| f.harmed());
    harmed.or(cell.failing.first()).map(|f| f.seed)
}

fn timeline(job: &Job, labels: (&str, &str), seed: u64) -> Counterexample {
    let (result, history) = isolated(|| job.prepared.run_with_history(seed));
    let servers = job.prepared.deployment.servers();
    Counterexample::from_run(labels, &result, history, &servers)
}

fn assemble(
    matrix: &Matrix,
    jobs: &[Job],
    registry: &Registry,
    seeds_text: String,
    command: String,
) -> Comparison {
    let mut c = Comparison {
        schema: SCHEMA_VERSION,
        title: matrix.title.clone(),
        command,
        seeds: seeds_text,
        protocols: matrix
            .protocols
            .iter()
            .map(|p| (p.label.clone(), p.description.clone()))
            .collect(),
        protocol_ids: matrix
            .protocols
            .iter()
            .map(|p| (p.label.clone(), p.id()))
            .collect(),
        profiles: matrix
            .profiles
            .iter()
            .map(|p| (p.label.clone(), p.description.clone()))
            .collect(),
        ..Comparison::default()
    };
    for (axis, about) in PHASE_AXES {
        for p in matrix.protocols.iter().filter(|p| p.on_axis(axis)) {
            c.phase.push(PhaseSeries {
                protocol: p.label.clone(),
                axis: axis.into(),
                about: about.into(),
                ttl_ms: p.ttl_ms(registry),
                points: vec![],
            });
        }
    }
    for p in &matrix.protocols {
        let off: Vec<String> = PHASE_AXES
            .iter()
            .filter(|(a, _)| !p.on_axis(a))
            .map(|(a, _)| a.to_string())
            .collect();
        if let (false, Some(why)) = (off.is_empty(), &p.phase_axes_why) {
            c.phase_left_out.push((p.label.clone(), off, why.clone()));
        }
    }
    for job in jobs {
        add_job(&mut c, job);
    }
    c.cells = cells_in_order(matrix, std::mem::take(&mut c.cells));
    c.phase.retain(|s| !s.points.is_empty());
    c.rows = rows(matrix, jobs, &c);
    c
}

/// The cells in matrix order (row by row), each cell not run (`same_as`) a relabelled copy
/// of the cell whose runs stand for it.
fn cells_in_order(matrix: &Matrix, ran: Vec<CellSummary>) -> Vec<CellSummary> {
    let find = |row: &str, profile: &str| {
        let cell = ran
            .iter()
            .find(|c| c.protocol == row && c.profile == profile);
        cell.expect("every cell that is not a copy ran")
    };
    let mut cells = vec![];
    for p in &matrix.protocols {
        for f in &matrix.profiles {
            cells.push(match p.same_as(&f.label) {
                Some(same) => CellSummary::same_as(find(&same.row, &f.label), &p.label, &same.why),
                None => find(&p.label, &f.label).clone(),
            });
        }
    }
    cells
}

/// What guards the resource, the protocol keys that change behaviour (sizes, durations
/// and `tokens`, which only matters with fencing, left out) and the workload's `check` and
/// `writes_per_cs`: what tells a row's stories and its siblings apart.
pub fn setup_of(sc: &Scenario) -> RowSetup {
    use locksim_protocols::resource::{Fencing, WriteMode};
    let guard = match (sc.resource.fencing, sc.resource.mode) {
        (Fencing::On, WriteMode::Cas) => "fencing+cas",
        (Fencing::On, _) => "fencing",
        (_, WriteMode::Cas) => "cas",
        _ => "none",
    };
    let sized = [
        "peers",
        "replicas",
        "sentinels",
        "masters",
        "instances",
        "tokens",
    ];
    let mut keys: BTreeMap<String, String> = sc
        .protocol
        .params
        .iter()
        .filter(|(k, _)| !k.ends_with("_ms") && !sized.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    // What the application does with its lock changes behaviour as much as the library:
    // a story that never checks is not one of a row that checks before each write.
    let check = serde_json::to_value(sc.workload.check).expect("a check mode serialises");
    keys.insert("workload.check".into(), check.to_string());
    let writes = sc.workload.writes_per_cs.to_string();
    keys.insert("workload.writes_per_cs".into(), writes);
    RowSetup {
        protocol: sc.protocol.name.clone(),
        guard: guard.into(),
        keys,
    }
}

/// The rows: each one's setup (from its first cell) and cost (from its uncontended runs, its
/// fault-free cell and its cell under the reference profile).
fn rows(matrix: &Matrix, jobs: &[Job], c: &Comparison) -> Vec<Row> {
    let calm = matrix.profiles.iter().find(|p| p.faults_random.is_empty());
    let reference = c.reference_profile();
    matrix
        .protocols
        .iter()
        .map(|p| {
            let mine = |j: &&Job| match &j.role {
                Role::Cell { protocol, .. } | Role::Cost { protocol } => protocol == &p.label,
                _ => false,
            };
            let setup = jobs
                .iter()
                .find(mine)
                .map(|j| setup_of(&j.prepared.scenario));
            let alone = jobs
                .iter()
                .filter(mine)
                .find(|j| matches!(j.role, Role::Cost { .. }));
            let cost = alone.map(|j| {
                let contended = calm.and_then(|calm| c.cell(&p.label, &calm.label));
                let stuck = reference.and_then(|r| c.cell(&p.label, r));
                Cost::of(&j.acc.finish(), contended, stuck)
            });
            Row {
                label: p.label.clone(),
                setup: setup.unwrap_or_default(),
                cost,
            }
        })
        .collect()
}

fn add_job(c: &mut Comparison, job: &Job) {
    let s = job.acc.finish();
    match &job.role {
        Role::Cell { protocol, profile } => {
            let cell = CellSummary {
                protocol: protocol.clone(),
                profile: profile.clone(),
                ..s
            };
            if let Some(seed) = seed_to_draw(&cell) {
                let x = timeline(job, (protocol, profile), seed);
                c.counterexamples.push(x);
            }
            c.cells.push(cell);
        }
        Role::Phase {
            series,
            multiple,
            size_ms,
        } => c.phase[*series].points.push(PhasePoint {
            ttl_multiple: *multiple,
            size_ms: *size_ms,
            overlap: s.overlap,
            harm: s.harm,
            damage: s.damage,
            latent: s.latent,
            seeds: s.seeds,
        }),
        Role::Cost { .. } => {}
        Role::Catalog => {
            let sc = &job.prepared.scenario;
            let expect = sc.expect.as_ref().map_or(vec![], |e| e.entries());
            let entry = CatalogEntry {
                name: sc.name.clone(),
                protocol: sc.protocol.name.clone(),
                description: sc.description.clone(),
                expect: expect
                    .iter()
                    .map(|(p, e)| (p.name().into(), e.name().into()))
                    .collect(),
                expect_met: locksim_reports::stats::Share::of(job.expect_met, s.runs),
                timeline: Some(timeline(job, (&sc.name, "catalog"), 1)),
                setup: setup_of(sc),
                fault_kinds: fault_kinds(sc),
                outcome: CellSummary {
                    protocol: sc.protocol.name.clone(),
                    profile: sc.name.clone(),
                    ..s
                },
            };
            c.catalog.push(entry);
        }
    }
}

/// The kinds of a scenario's scripted faults, as files name them, sorted, once each.
fn fault_kinds(sc: &Scenario) -> Vec<String> {
    let kinds: BTreeSet<&str> = sc.faults.iter().map(|f| f.kind().name()).collect();
    kinds.into_iter().map(str::to_owned).collect()
}

/// The matrix `opts` names (with a row for each extra protocol of `registry`), every job of it
/// with its results file, after checking the options.
pub(crate) fn setup(
    opts: &Options,
    registry: &Registry,
) -> anyhow::Result<(Matrix, Vec<Job>, Vec<ResultsFile>)> {
    locksim_check::input::check_output_dir(&opts.out).map_err(|e| input(format!("--out {e}")))?;
    let mut matrix = match &opts.matrix {
        Some(path) => Matrix::load(path).map_err(input)?,
        None => Matrix::standard(),
    };
    matrix.protocols.extend(extra_rows(&matrix, registry));
    if opts.jobs == 0 {
        return Err(input("--jobs must be at least 1"));
    }
    if opts.seeds == Some(0) {
        return Err(input("--seeds must be at least 1"));
    }
    let (jobs, files) = jobs(&matrix, opts, registry)?.into_iter().unzip();
    Ok((matrix, jobs, files))
}

/// Runs the matrix and writes the reports; returns the comparison.
pub fn compare(opts: &Options, registry: &Registry) -> anyhow::Result<Comparison> {
    let (matrix, mut jobs, mut files) = setup(opts, registry)?;
    let bar = progress(opts.progress);
    let shared_runs = run_rounds(&mut jobs, &mut files, opts, &bar)?;
    bar.finish_and_clear();
    if opts.progress && shared_runs > 0 {
        eprintln!(
            "{shared_runs} runs were shared between rows that differ only in their resource or \
             the application's check (theirs would have answered and decided every write \
             alike)"
        );
    }
    let stopping = opts.seeds.map_or(matrix.stopping(), Stopping::fixed);
    let mut command = String::from("locksim compare");
    if let Some(m) = &opts.matrix {
        command += &format!(" --matrix {}", m.display());
    }
    if let Some(n) = opts.seeds {
        command += &format!(" --seeds {n}");
    }
    command += &format!(" --out {}", opts.out.display());
    let mut seeds = stopping.describe();
    if opts.seeds.is_none() {
        seeds += &format!(
            "; a cell under the reference profile also runs on until its overlap interval is on \
             one side of the {} tolerance (else \"undecided\")",
            locksim_reports::percent(locksim_reports::decide::RARE_OVERLAP)
        );
    }
    let mut comparison = assemble(&matrix, &jobs, registry, seeds, command);
    let cell = |row: &str, profile: &str| cell_prepared(&matrix, &jobs, row, profile);
    comparison.searches = crate::compare_search::searches(&comparison, cell, &opts.out, opts.jobs)?;
    comparison.decisions = locksim_reports::decide::table(&comparison);
    write_reports(&comparison, &opts.out)?;
    Ok(comparison)
}

/// The scenario of the cell (row, profile): its own job's, or, for a cell the matrix says is
/// another row's (`same_as`), that row's.
fn cell_prepared<'a>(
    matrix: &Matrix,
    jobs: &'a [Job],
    row: &str,
    profile: &str,
) -> Option<&'a Prepared> {
    let stands_for = matrix
        .protocols
        .iter()
        .find(|p| p.label == row)
        .and_then(|p| p.same_as(profile))
        .map_or(row, |same| same.row.as_str());
    jobs.iter()
        .find(|j| {
            matches!(&j.role, Role::Cell { protocol, profile: f }
                if protocol == stands_for && f == profile)
        })
        .map(|j| &j.prepared)
}

/// A row for each protocol of `registry` that is not built in and that no row of `matrix`
/// names: label = id, description = summary, `[protocol] name = id` (its parameters'
/// defaults), no `[resource]` table. In the registry's order.
pub fn extra_rows(matrix: &Matrix, registry: &Registry) -> Vec<MatrixProtocol> {
    let builtin = Registry::builtin();
    let named: BTreeSet<String> = matrix.protocols.iter().map(|p| p.id()).collect();
    registry
        .ids()
        .into_iter()
        .filter(|id| builtin.get(id).is_none() && !named.contains(*id))
        .map(|id| {
            let summary = registry.get(id).map(|p| p.summary()).unwrap_or_default();
            let mut table = toml::Table::new();
            table.insert("name".into(), toml::Value::String(id.into()));
            MatrixProtocol {
                label: id.into(),
                description: summary.into(),
                protocol: table,
                resource: None,
                workload: None,
                phase_axes: None,
                phase_axes_why: None,
                same_as: None,
            }
        })
        .collect()
}

/// The files [`write_reports`] writes into its directory.
pub const REPORT_FILES: [&str; 3] = ["report.md", "report.json", "report.html"];

/// Checks, before any work, that the reports written into `out` overwrite none of `inputs`
/// (`report rep/report.json --out rep` would).
pub fn check_reports_spare(out: &Path, inputs: &[&Path]) -> anyhow::Result<()> {
    for name in REPORT_FILES {
        locksim_check::input::check_not_an_input(&out.join(name), inputs)
            .map_err(|e| input(format!("--out {e}")))?;
    }
    Ok(())
}

/// Writes report.md, report.json and report.html into `out`.
pub fn write_reports(c: &Comparison, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let texts = [
        locksim_reports::markdown::render(c),
        c.to_json(),
        locksim_reports::html::render(c),
    ];
    for (name, text) in REPORT_FILES.into_iter().zip(texts) {
        let file = out.join(name);
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}
