//! `locksim validate`: the scenarios of a validation set (`scenarios/validate/`: those marked
//! `[validation] default_set`, or with `--full` all) run live `--runs` times (and as many
//! with the real library, where the scenario's client profile has a driver), `--live-jobs`
//! at once, and in the simulator `--seeds` seeds, and the table of [`crate::validate`]
//! written to `OUT/validation.{md,json,html}` after every result (the results themselves go
//! to `OUT/validation.jsonl`, which `--resume` continues). Exit codes: 0 = no row disagrees
//! without an explanation (rows may be inconclusive: the table says so, with each row's
//! power), 1 = a row disagrees without one or has no results on one side (a live run that
//! failed), 2 = bad input.

use crate::shared::input;
use crate::stdout::{out, outln};
use crate::text::printable;
use crate::validate::{self, Entry, Mode, Record};
use anyhow::Context;
use clap::Args;
use locksim_protocols::Registry;
use locksim_scenarios::Prepared;
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `locksim validate` arguments.
#[derive(Args)]
pub struct ValidateArgs {
    /// Live runs per scenario and world (seeds 1..=N). 16 puts a share of 0 or N runs
    /// within ±10 points, and gives the share of updates lost 16 clusters.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// Simulated seeds per scenario (1..=M).
    #[arg(long, value_name = "M", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    seeds: u64,
    /// Worker threads of the simulated runs (default: the number of cores).
    #[arg(long, value_name = "J")]
    jobs: Option<usize>,
    /// Live runs at once (each its own servers, ports and clients). Live runs mostly wait on
    /// real timers; two share two cores without starving each other's timeouts.
    #[arg(long, value_name = "K", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=8))]
    live_jobs: u64,
    /// Every scenario of the set, not only those marked `[validation] default_set`.
    #[arg(long)]
    full: bool,
    /// Where to write validation.md, validation.json, validation.html and the results.
    #[arg(long, value_name = "DIR", default_value = "validation")]
    out: PathBuf,
    /// Only these scenarios (by name).
    #[arg(long, value_name = "NAME", num_args = 1..)]
    only: Vec<String>,
    /// Continue an interrupted validation: runs already in OUT/validation.jsonl are kept.
    #[arg(long)]
    resume: bool,
    /// The validation set: a directory of scenario files.
    #[arg(long, value_name = "DIR", default_value = "scenarios/validate")]
    set: PathBuf,
    /// A first look in about half a minute: `--runs 2 --seeds 20 --only` a GC pause on Redis, a
    /// healthy etcd and redis-py's real library (every row inconclusive: two runs cannot
    /// agree with power; what it shows is that both worlds run and point the same way).
    #[arg(long, conflicts_with_all = ["runs", "seeds", "only", "full"])]
    quick: bool,
}

/// The scenarios of `--quick`: one of Redis, one of consensus, one real library.
const QUICK: [&str; 3] = [
    "v-redis-single-gc-pause",
    "v-etcd-healthy",
    "v-redis-py-gc-pause",
];

/// Whether a scenario is in `locksim validate`'s default set.
fn marked(p: &Prepared) -> bool {
    (p.scenario.validation.as_ref()).is_some_and(|v| v.default_set)
}

/// The set's scenario files, loaded and checked, in file-name order: those `--only` names,
/// else with `--full` all, else those marked `default_set` (all if none is marked: a user's
/// own directory).
pub fn load_set(
    args: &ValidateArgs,
    registry: &Registry,
) -> anyhow::Result<Vec<(Entry, Prepared)>> {
    let dir =
        std::fs::read_dir(&args.set).map_err(|e| input(format!("{}: {e}", args.set.display())))?;
    let mut files: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut all = vec![];
    for file in files {
        let path = file.display().to_string();
        let prepared = crate::shared::load(&path, registry).map_err(input)?;
        let s = &prepared.scenario;
        let explanation = s.validation.clone().unwrap_or_default().explanation;
        if let Some(bad) = (explanation.keys())
            .find(|k| !locksim_check::Property::ALL.iter().any(|p| p.name() == *k))
        {
            return Err(input(format!(
                "{path}: [validation] explanation.{bad}: not a property (mutual_exclusion, \
                 fencing, lost_update)"
            )));
        }
        let entry = Entry {
            name: s.name.clone(),
            protocol: s.protocol.name.clone(),
            explanation,
            library: real_library(&prepared),
        };
        all.push((entry, prepared));
    }
    let whole = args.full || !all.iter().any(|(_, p)| marked(p));
    let set: Vec<(Entry, Prepared)> = (all.into_iter())
        .filter(|(e, p)| {
            if args.only.is_empty() {
                whole || marked(p)
            } else {
                args.only.contains(&e.name)
            }
        })
        .collect();
    if let Some(name) = (args.only.iter()).find(|n| !set.iter().any(|(e, _)| &e.name == *n)) {
        return Err(input(format!(
            "--only {name}: no such scenario in {}",
            args.set.display()
        )));
    }
    if set.is_empty() {
        return Err(input(format!("{}: no scenario files", args.set.display())));
    }
    Ok(set)
}

/// The third column a scenario can have: its client profile's real library, if it runs here
/// (live mode's own check decides, on seed 1, before any run: a run refused for its input
/// stops its scenario's world anyway).
fn real_library(prepared: &Prepared) -> validate::RealLibrary {
    use validate::RealLibrary;
    let profile = match locksim_live::client::driver::of_scenario(&prepared.scenario) {
        (None, _) => return RealLibrary::Own,
        (Some(p), None) => return RealLibrary::ModelledOnly { profile: p.into() },
        (Some(p), Some(_)) => p.to_owned(),
    };
    let stall = locksim_live::proxy::CutMode::Stall;
    match locksim_live::refuse::check(prepared, 1, stall, true) {
        Ok(()) => RealLibrary::Driver { profile },
        Err(refused) => RealLibrary::Refused {
            profile,
            why: refused.0,
        },
    }
}

/// The records of an earlier, interrupted validation.
fn read_records(path: &Path) -> anyhow::Result<Vec<Record>> {
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(vec![]);
    };
    let mut out = vec![];
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        // A line cut short by an interruption is the run that did not finish.
        match serde_json::from_str(&line) {
            Ok(r) => out.push(r),
            Err(_) if line.trim().is_empty() => {}
            Err(e) => eprintln!("{}:{}: skipped ({e})", path.display(), i + 1),
        }
    }
    Ok(out)
}

/// The validation in progress: the set, the records, where they go.
struct Validation<'a> {
    args: &'a ValidateArgs,
    entries: Vec<Entry>,
    protocols: Vec<String>,
    records: Vec<Record>,
    log: std::fs::File,
}

impl Validation<'_> {
    fn add(&mut self, record: Record) -> anyhow::Result<()> {
        writeln!(self.log, "{}", serde_json::to_string(&record)?)?;
        self.log.flush()?;
        self.records.push(record);
        Ok(())
    }

    fn has(&self, scenario: &str, mode: Mode) -> BTreeSet<u64> {
        (self.records.iter())
            .filter(|r| r.scenario == scenario && r.mode == mode)
            .map(|r| r.seed)
            .collect()
    }

    fn header(&self) -> String {
        let mut command = format!(
            "locksim validate --runs {} --seeds {}",
            self.args.runs, self.args.seeds
        );
        if !self.args.only.is_empty() {
            command += &format!(" --only {}", self.args.only.join(" "));
        } else if self.args.full {
            command += " --full";
        }
        format!(
            "Command: `{command}` (set `{}`; live runs on loopback against the servers live \
             mode starts; simulated seeds 1..={}, live seeds 1..={}).",
            self.args.set.display(),
            self.args.seeds,
            self.args.runs
        )
    }

    /// Rewrites the three tables from every record so far; the rows.
    fn write(&self) -> anyhow::Result<Vec<validate::Row>> {
        let rows = validate::rows(&self.entries, &self.records);
        let missing = validate::not_validated(&self.protocols, &rows);
        let header = self.header();
        let out = &self.args.out;
        let json = serde_json::json!({ "command": header, "rows": rows, "not_validated": missing });
        let files = [
            (
                "validation.md",
                validate::markdown(&rows, &missing, &header),
            ),
            (
                "validation.json",
                serde_json::to_string_pretty(&json)? + "\n",
            ),
            ("validation.html", validate::html(&rows, &missing, &header)),
        ];
        for (name, text) in files {
            let path = out.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(rows)
    }
}

/// The simulated seeds of one scenario that are not in yet.
fn simulate(v: &mut Validation, e: &Entry, p: &Prepared, jobs: usize) -> anyhow::Result<()> {
    let have = v.has(&e.name, Mode::Sim);
    let seeds: Vec<u64> = (1..=v.args.seeds).filter(|s| !have.contains(s)).collect();
    if seeds.is_empty() {
        return Ok(());
    }
    eprintln!("{}: {} simulated runs", printable(&e.name), seeds.len());
    locksim_scenarios::sweep::run_seeds(p, seeds.into_iter(), jobs, |r| {
        v.add(Record::of(Mode::Sim, r.seed, &r))
    })?;
    v.write()?;
    Ok(())
}

/// One live run to do: a scenario of the set, the world, the seed.
struct LiveTask {
    index: usize,
    mode: Mode,
    seed: u64,
}

/// The live runs not in yet, of every scenario, in both live worlds: locksim's own client
/// (`Mode::Live`) and, where the profile has a driver, the real library (`Mode::Library`).
fn live_tasks(v: &Validation, set: &[(Entry, Prepared)]) -> Vec<LiveTask> {
    let mut tasks = vec![];
    for (index, (e, _)) in set.iter().enumerate() {
        let mut modes = vec![Mode::Live];
        if let validate::RealLibrary::Driver { .. } = e.library {
            modes.push(Mode::Library);
        }
        for mode in modes {
            let have = v.has(&e.name, mode);
            (1..=v.args.runs)
                .filter(|s| !have.contains(s))
                .for_each(|seed| tasks.push(LiveTask { index, mode, seed }));
        }
    }
    tasks
}

fn world(mode: Mode) -> &'static str {
    match mode {
        Mode::Library => "real-library run",
        _ => "live run",
    }
}

/// One live run, as a record; true if every run of its scenario and world would fail alike
/// (a refusal, a missing server binary or library).
fn live_run(e: &Entry, p: &Prepared, task: &LiveTask, exe: &Path) -> (Record, bool) {
    let opts = locksim_live::LiveOptions {
        seed: task.seed,
        keep: None,
        exe: exe.to_path_buf(),
        cut_mode: locksim_live::proxy::CutMode::Stall,
        library: task.mode == Mode::Library,
    };
    match locksim_live::run(p, &opts) {
        Ok(run) => {
            let result = locksim_live::result(p, task.seed, &run);
            (Record::of(task.mode, task.seed, &result), false)
        }
        Err(err) => {
            let stop = locksim_live::is_bad_input(&err);
            let (name, what) = (printable(&e.name), world(task.mode));
            eprintln!("{name}: {what} {} failed: {err:#}", task.seed);
            let record = Record::failed(&e.name, task.mode, task.seed, format!("{err:#}"));
            (record, stop)
        }
    }
}

/// Every live run not in yet, `--live-jobs` at once, each recorded (and the tables
/// rewritten) as it ends. A run that would fail for every seed stops its scenario's world.
fn live(v: &mut Validation, set: &[(Entry, Prepared)]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the locksim binary")?;
    let queue = std::sync::Mutex::new(std::collections::VecDeque::from(live_tasks(v, set)));
    let stopped = std::sync::Mutex::new(BTreeSet::<(usize, Mode)>::new());
    let (tx, rx) = std::sync::mpsc::channel::<Record>();
    let total = queue.lock().unwrap().len();
    let (runs, live_jobs) = (v.args.runs, v.args.live_jobs);
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for _ in 0..live_jobs {
            let (tx, queue, stopped, exe) = (tx.clone(), &queue, &stopped, &exe);
            scope.spawn(move || loop {
                let Some(task) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                if stopped.lock().unwrap().contains(&(task.index, task.mode)) {
                    continue;
                }
                let (e, p) = &set[task.index];
                let (name, what) = (printable(&e.name), world(task.mode));
                eprintln!("{name}: {what} {} of {runs}", task.seed);
                let (record, stop) = live_run(e, p, &task, exe);
                if stop {
                    stopped.lock().unwrap().insert((task.index, task.mode));
                }
                if tx.send(record).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        for record in rx {
            done += 1;
            v.add(record)?;
            v.write()?;
            eprintln!("live runs: {done} of at most {total} done");
        }
        Ok(())
    })
}

/// Runs `locksim validate`.
pub fn run(mut args: ValidateArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    if args.quick {
        (args.runs, args.seeds) = (2, 20);
        args.only = QUICK.iter().map(|s| s.to_string()).collect();
    }
    let set = load_set(&args, registry)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let state = args.out.join("validation.jsonl");
    let records = if args.resume {
        read_records(&state)?
    } else {
        vec![]
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(args.resume)
        .write(true)
        .truncate(!args.resume)
        .open(&state)
        .with_context(|| format!("cannot write {}", state.display()))?;
    let jobs = crate::shared::jobs(args.jobs, u128::from(args.seeds))?;
    let mut v = Validation {
        args: &args,
        entries: set.iter().map(|(e, _)| e.clone()).collect(),
        protocols: registry.ids().into_iter().map(|s| s.to_string()).collect(),
        records,
        log,
    };
    for (entry, prepared) in &set {
        simulate(&mut v, entry, prepared, jobs)?;
    }
    // locksim's live client runs every profile (the model's own client code); a profile
    // with a driver also runs with its real library: the third column.
    live(&mut v, &set)?;
    let rows = v.write()?;
    let missing = validate::not_validated(&v.protocols, &rows);
    out!("{}", validate::markdown(&rows, &missing, &v.header()));
    outln!(
        "\ntables: {0}/validation.md, {0}/validation.json, {0}/validation.html",
        args.out.display()
    );
    let unexplained = (rows.iter()).any(|r| {
        use validate::RowVerdict::{Disagrees, NotValidated};
        let open = r.verdict == Disagrees || r.library_verdict == Some(Disagrees);
        (open && r.explanation.is_none()) || r.verdict == NotValidated
    });
    Ok(ExitCode::from(u8::from(unexplained)))
}
