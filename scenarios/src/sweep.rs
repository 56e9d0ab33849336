//! Seed sweeps: one scenario, many seeds, each with the faults its random profile draws.
//!
//! A sweep is embarrassingly parallel: a run depends only on (scenario, seed), so seeds are
//! handed to worker threads in any order and results come back in any order. What makes a
//! sweep trustworthy is what stays fixed whatever the order or the machine:
//! - each seed's [`SeedResult`] (verdict, violation kinds, trace hash, stats) holds nothing
//!   from the wall clock, so the same seed gives the same line in any thread or process;
//! - a [`Shard`] is a pure function of the seed (`seed % count == index`), so shards run on
//!   different machines and concatenated hold exactly the lines of one unsharded sweep;
//! - the results file is JSON Lines, appended and flushed one line per finished run, and
//!   [`ResultsFile::open`] with `resume` repairs a line torn by a kill and reports the seeds
//!   already done, so an interrupted sweep loses nothing and runs no seed twice.

use crate::runner::{isolated, RunResult, Stats};
use crate::scenario::Prepared;
use locksim_check::input::{read_line_bounded, Line, LINE_BYTES_MAX};
use locksim_sim::{Property, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// A range of seeds: `A..B` (B excluded, as in Rust) or `A..=B` (B included). Held by its
/// last seed, so a range can end at `u64::MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    /// The first seed.
    pub start: u64,
    /// The last seed (included).
    pub last: u64,
}

impl SeedRange {
    /// The seeds of the range that belong to `shard`, in increasing order.
    pub fn seeds(&self, shard: Shard) -> impl Iterator<Item = u64> + Send {
        let (first, last) = match self.first(shard) {
            Some(first) => (first, self.last),
            None => (1, 0),
        };
        // Stepping, not filtering: shard 7/1000 of a huge range costs only its own seeds.
        (first..=last).step_by(shard.count.try_into().unwrap_or(usize::MAX))
    }

    /// How many seeds of the range belong to `shard`: a `u128`, since `0..=u64::MAX` holds
    /// 2^64 of them.
    pub fn count(&self, shard: Shard) -> u128 {
        self.first(shard)
            .map_or(0, |first| u128::from((self.last - first) / shard.count) + 1)
    }

    /// The first seed of the range that belongs to `shard`, if any.
    fn first(&self, shard: Shard) -> Option<u64> {
        let offset = (shard.index + shard.count - self.start % shard.count) % shard.count;
        self.start
            .checked_add(offset)
            .filter(|first| *first <= self.last)
    }

    /// Whether `seed` is in the range.
    pub fn contains(&self, seed: u64) -> bool {
        (self.start..=self.last).contains(&seed)
    }
}

impl FromStr for SeedRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{text}` is not a seed range: write A..B (B excluded) or A..=B, seeds from 0 \
                 to {}",
                u64::MAX
            )
        };
        let (start, end, inclusive) = match text.split_once("..=") {
            Some((a, b)) => (a, b, true),
            None => {
                let (a, b) = text.split_once("..").ok_or_else(bad)?;
                (a, b, false)
            }
        };
        let number = |s: &str| s.trim().replace('_', "").parse::<u64>().map_err(|_| bad());
        let (start, end) = (number(start)?, number(end)?);
        let last = if inclusive {
            Some(end)
        } else {
            end.checked_sub(1)
        };
        match last {
            Some(last) if start <= last => Ok(SeedRange { start, last }),
            _ => Err(format!("the seed range `{text}` is empty")),
        }
    }
}

impl std::fmt::Display for SeedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..={}", self.start, self.last)
    }
}

/// Shard `index` of `count` (written `K/N`, K from 0): the seeds with `seed % N == K`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// The whole sweep as one shard.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether `seed` belongs to this shard.
    pub fn contains(&self, seed: u64) -> bool {
        seed % self.count == self.index
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a shard: write K/N with 0 <= K < N, e.g. 0/3");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let index = k.trim().parse::<u64>().map_err(|_| bad())?;
        let count = n.trim().parse::<u64>().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One line of a sweep's results file: what a seed showed. Deterministic: two sweeps (or
/// shards) that ran the same seed have equal lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// The scenario's name.
    pub scenario: String,
    /// The scenario's [`Scenario::fingerprint`](crate::Scenario::fingerprint), where the sweep
    /// recorded it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scenario_hash: String,
    /// The scenario file, as the sweep was given it (so a report can print a runnable
    /// replay command), where the sweep recorded it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The protocol id.
    pub protocol: String,
    /// valid / invalid / unknown (worst of the properties).
    pub verdict: Verdict,
    /// Number of violations per violated property (`mutual_exclusion`, `fencing`,
    /// `lost_update`); empty when none was violated.
    pub violations: BTreeMap<Property, u64>,
    /// Why a property is `unknown`, for each that is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<Property, String>,
    /// Stable hash of the history.
    pub trace_hash: String,
    /// Figures of the run.
    pub stats: Stats,
    /// Whether the scenario's `[expect]` was met, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_met: Option<bool>,
    /// The expectations it did not meet, in words (`fencing: expected holds, got n/a`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_unmet: Vec<String>,
    /// Set if the run did not complete (a panic in a model: a bug to report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SeedResult {
    /// The line for a finished run.
    pub fn of(run: &RunResult) -> Self {
        SeedResult {
            seed: run.seed,
            scenario: run.scenario.clone(),
            scenario_hash: String::new(),
            path: String::new(),
            protocol: run.protocol.clone(),
            verdict: run.verdict,
            violations: run.violation_counts.clone(),
            reasons: run.reasons.clone(),
            trace_hash: run.trace_hash.clone(),
            stats: run.stats.clone(),
            expect_met: run.expect.as_ref().map(|e| e.met),
            expect_unmet: run.expect.as_ref().map_or(vec![], |e| e.mismatches.clone()),
            error: run.error.clone(),
        }
    }

    /// Whether a safety property was violated.
    pub fn violated(&self) -> bool {
        self.verdict == Verdict::Invalid
    }
}

/// A results file that cannot be used: which file, which line, why.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// A complete line is not a sweep result.
    #[error("{path}:{line}: not a sweep result: {message}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file holds results of another scenario.
    #[error(
        "{path}:{line}: results of scenario `{found}`, not `{expected}`: write this sweep to \
         another file"
    )]
    OtherScenario {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The scenario this sweep runs.
        expected: String,
        /// The scenario the line is about.
        found: String,
    },
    /// The file holds results of the same scenario as it was before an edit.
    #[error(
        "{path}:{line}: results of scenario `{scenario}` as it was before it was edited \
         (fingerprint {found}, now {expected}): write this sweep to another file"
    )]
    EditedScenario {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The scenario's name.
        scenario: String,
        /// The fingerprint the scenario has now.
        expected: String,
        /// The fingerprint the line was written with.
        found: String,
    },
    /// The file holds two different results for one seed (a run is a function of its seed:
    /// one of them is not this scenario's, or was edited).
    #[error(
        "{path}:{line}: seed {seed} again, with another result than on line {first}: one of \
         the two lines is wrong (edited, or from another build); remove one"
    )]
    ConflictingDuplicate {
        /// The file.
        path: String,
        /// 1-based line number of the second result.
        line: usize,
        /// 1-based line number of the first.
        first: usize,
        /// The seed.
        seed: u64,
    },
    /// The file has content and `resume` was not asked for.
    #[error("{path} is not empty: add --resume to continue that sweep, or remove the file")]
    NotEmpty {
        /// The file.
        path: String,
    },
}

/// A digest of a result line's content (SipHash with fixed keys: the same in every process).
fn digest_of(r: &SeedResult) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    serde_json::to_string(r)
        .expect("results always serialise")
        .hash(&mut h);
    h.finish()
}

/// The results file of a sweep, open for appending.
pub struct ResultsFile {
    file: File,
    path: PathBuf,
}

impl ResultsFile {
    /// Opens (or creates) the results file of a sweep of `scenario`. Without `resume` the
    /// file must be empty or absent. With it, the results already there are handed to
    /// `earlier` one by one (so their seeds can be skipped; a file of millions of lines is
    /// never held in memory), a line about another scenario is an error, and a torn last
    /// line (a run killed mid-write) is cut off.
    pub fn open(
        path: &Path,
        scenario: &str,
        fingerprint: &str,
        resume: bool,
        mut earlier: impl FnMut(SeedResult),
    ) -> Result<ResultsFile, SweepError> {
        let shown = path.display().to_string();
        let io = |source| SweepError::Io {
            path: shown.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        let mut reader = BufReader::new(&file);
        if !resume && !blank(&mut reader).map_err(io)? {
            return Err(SweepError::NotEmpty { path: shown });
        }
        // Each seed's first line and a digest of its result: the same seed twice is fine if
        // the lines agree (shards concatenated with an overlap), and refused if they do not.
        let mut seen: BTreeMap<u64, (usize, u64)> = BTreeMap::new();
        let complete = scan(&shown, reader, |line, r| {
            if r.scenario != scenario {
                return Err(SweepError::OtherScenario {
                    path: shown.clone(),
                    line,
                    expected: scenario.into(),
                    found: r.scenario,
                });
            }
            // Lines without a fingerprint (written by hand, or by older versions) pass.
            if !r.scenario_hash.is_empty() && r.scenario_hash != fingerprint {
                return Err(SweepError::EditedScenario {
                    path: shown.clone(),
                    line,
                    scenario: r.scenario,
                    expected: fingerprint.into(),
                    found: r.scenario_hash,
                });
            }
            let digest = digest_of(&r);
            match seen.get(&r.seed) {
                Some(&(_, d)) if d == digest => return Ok(()),
                Some(&(first, _)) => {
                    return Err(SweepError::ConflictingDuplicate {
                        path: shown.clone(),
                        line,
                        first,
                        seed: r.seed,
                    })
                }
                None => seen.insert(r.seed, (line, digest)),
            };
            earlier(r);
            Ok(())
        })?;
        if complete < file.metadata().map_err(io)?.len() {
            // Torn by a kill mid-write: that seed runs again (same result, it is
            // deterministic), and its half line must not glue onto the next one.
            file.set_len(complete).map_err(io)?;
        }
        Ok(ResultsFile {
            file,
            path: path.to_owned(),
        })
    }

    /// Appends one result as one line and flushes it: a kill loses at most the line being
    /// written, which [`ResultsFile::open`] then repairs.
    pub fn append(&mut self, result: &SeedResult) -> Result<(), SweepError> {
        let mut line = serde_json::to_vec(result).expect("results always serialise");
        line.push(b'\n');
        // One write of the whole line: the file is opened in append mode, so lines from
        // this process never interleave, and a torn write can only be the last line.
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|source| SweepError::Io {
                path: self.path.display().to_string(),
                source,
            })
    }
}

/// Reads a results file (or several shards concatenated) into memory. A last line without
/// its newline is a write torn by a kill and is ignored; any other malformed line is an
/// error naming it.
pub fn read_results(path: &Path) -> Result<Vec<SeedResult>, SweepError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| SweepError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut results = Vec::new();
    scan(&shown, BufReader::new(file), |_, r| {
        results.push(r);
        Ok(())
    })?;
    Ok(results)
}

/// Streams a results file (or several shards concatenated): hands each result to `each`,
/// without keeping them, so memory stays flat however long the file. Torn last lines are
/// skipped and other malformed lines are errors, as in [`read_results`].
pub fn for_each_result(path: &Path, mut each: impl FnMut(SeedResult)) -> Result<(), SweepError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| SweepError::Io {
        path: shown.clone(),
        source,
    })?;
    scan(&shown, BufReader::new(file), |_, r| {
        each(r);
        Ok(())
    })?;
    Ok(())
}

/// Whether a file holds only whitespace, read one bounded line at a time: the first line
/// that is not blank (or too long to be) answers, whatever the file's size.
fn blank(reader: &mut impl BufRead) -> std::io::Result<bool> {
    let mut line = Vec::new();
    loop {
        match read_line_bounded(reader, &mut line, LINE_BYTES_MAX)? {
            Line::TooLong => return Ok(false),
            _ if !line.iter().all(u8::is_ascii_whitespace) => return Ok(false),
            Line::Last(_) => return Ok(true),
            Line::Complete(_) => {}
        }
    }
}

/// Hands each complete line's result (with its 1-based line number) to `each`; stops at a
/// last line without a newline. Returns the length in bytes of the complete lines.
fn scan(
    path: &str,
    mut reader: impl BufRead,
    mut each: impl FnMut(usize, SeedResult) -> Result<(), SweepError>,
) -> Result<u64, SweepError> {
    let mut line = Vec::new();
    let mut complete = 0;
    for n in 1.. {
        let read = read_line_bounded(&mut reader, &mut line, LINE_BYTES_MAX).map_err(|source| {
            SweepError::Io {
                path: path.into(),
                source,
            }
        })?;
        let read = match read {
            Line::Complete(read) => read,
            Line::Last(_) => break,
            Line::TooLong => {
                return Err(SweepError::Line {
                    path: path.into(),
                    line: n,
                    message: format!("longer than {LINE_BYTES_MAX} bytes"),
                })
            }
        };
        complete += read as u64;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let result = serde_json::from_slice(&line).map_err(|e| SweepError::Line {
            path: path.into(),
            line: n,
            message: e.to_string(),
        })?;
        each(n, result)?;
    }
    Ok(complete)
}

/// Runs every seed of `seeds` on `jobs` worker threads, each run on a fresh thread (see
/// [`isolated`]), and hands each result to `on_result` on the calling thread as soon as it
/// is done, in completion order. Returns when every seed has run, or with the first error
/// `on_result` returns (runs in progress finish, no new one starts).
pub fn run_seeds<E>(
    prepared: &Prepared,
    seeds: impl Iterator<Item = u64> + Send,
    jobs: usize,
    on_result: impl FnMut(RunResult) -> Result<(), E>,
) -> Result<(), E> {
    run_seeds_until(prepared, seeds, jobs, &AtomicBool::new(false), on_result)
}

/// [`run_seeds`], stopping early once `interrupted` is set (e.g. by a signal handler): no
/// new run starts, and the results of the runs in progress are still handed over.
pub fn run_seeds_until<E>(
    prepared: &Prepared,
    seeds: impl Iterator<Item = u64> + Send,
    jobs: usize,
    interrupted: &AtomicBool,
    mut on_result: impl FnMut(RunResult) -> Result<(), E>,
) -> Result<(), E> {
    // Seeds are handed out one at a time: a billion-seed range is never a list in memory.
    let seeds = Mutex::new(seeds.fuse());
    let stop = AtomicBool::new(false);
    let next = || {
        let mut seeds = seeds.lock().unwrap_or_else(PoisonError::into_inner);
        let stopped = stop.load(Ordering::Relaxed) || interrupted.load(Ordering::Relaxed);
        (!stopped).then(|| seeds.next()).flatten()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                while let Some(seed) = next() {
                    if tx.send(isolated(|| prepared.run(seed))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for result in rx.iter() {
            if let Err(e) = on_result(result) {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    })
}

/// How many failing seeds a [`Summary`] names.
pub const FAILING_SEEDS_KEPT: usize = 10;

/// How often a property was `unknown` in a sweep, and why in its lowest such seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnknownTally {
    /// Runs in which the property was `unknown`.
    pub runs: u64,
    /// The lowest of those seeds.
    pub seed: u64,
    /// Why, in that seed.
    pub reason: String,
}

/// The tally of a sweep's results, whatever order they came in.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Distinct seeds.
    pub runs: u64,
    /// Runs per verdict.
    pub verdicts: BTreeMap<Verdict, u64>,
    /// Runs that violated each property (a run can count under several).
    pub violations_by_kind: BTreeMap<Property, u64>,
    /// The lowest failing seeds (at most [`FAILING_SEEDS_KEPT`]) with their violated
    /// properties.
    pub failing: BTreeMap<u64, Vec<Property>>,
    /// Per property that was `unknown` in some run: how many runs, and the lowest such seed
    /// with its reason.
    pub unknown: BTreeMap<Property, UnknownTally>,
    /// Runs that did not complete (a panic in a model).
    pub errors: BTreeMap<u64, String>,
    /// Runs whose `[expect]` was not met.
    pub expect_not_met: u64,
    /// The lowest of those seeds and what it did not meet (empty from a results file written
    /// before records named it).
    pub expect_first_unmet: Option<(u64, Vec<String>)>,
    #[serde(skip)]
    seen: BTreeSet<u64>,
}

impl Summary {
    /// Counts one result; a seed already counted is ignored.
    pub fn add(&mut self, r: &SeedResult) {
        if !self.seen.insert(r.seed) {
            return;
        }
        self.runs += 1;
        *self.verdicts.entry(r.verdict).or_default() += 1;
        for kind in r.violations.keys() {
            *self.violations_by_kind.entry(*kind).or_default() += 1;
        }
        for (property, reason) in &r.reasons {
            let tally = self
                .unknown
                .entry(*property)
                .or_insert_with(|| UnknownTally {
                    runs: 0,
                    seed: r.seed,
                    reason: reason.clone(),
                });
            tally.runs += 1;
            // The lowest seed's reason, so the summary does not depend on completion order.
            if r.seed < tally.seed {
                (tally.seed, tally.reason) = (r.seed, reason.clone());
            }
        }
        if r.violated() {
            self.failing
                .insert(r.seed, r.violations.keys().cloned().collect());
            if self.failing.len() > FAILING_SEEDS_KEPT {
                self.failing.pop_last();
            }
        }
        if let Some(e) = &r.error {
            self.errors.insert(r.seed, e.clone());
        }
        if r.expect_met == Some(false) {
            self.expect_not_met += 1;
            if self
                .expect_first_unmet
                .as_ref()
                .is_none_or(|(seed, _)| r.seed < *seed)
            {
                self.expect_first_unmet = Some((r.seed, r.expect_unmet.clone()));
            }
        }
    }

    /// Runs that violated a safety property.
    pub fn violated(&self) -> u64 {
        self.verdicts.get(&Verdict::Invalid).copied().unwrap_or(0)
    }
}
