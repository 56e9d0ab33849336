//! The validation table: each scenario of a validation set run live and in the simulator,
//! and, where its client profile has a driver, live with the real library the profile
//! models (`locksim live --library`, a third column judged against the simulator the same
//! way); one row per (scenario, property) with the shares of violating runs and their
//! Wilson 95% intervals, one row for the share of acknowledged updates lost (pooled over the runs, its
//! interval clustered by run), liveness figures side by side, and a verdict with power:
//!
//! - `agrees`: the intervals overlap, each is at most ±[`HALF_WIDTH_MAX`] wide, and the two
//!   point estimates differ by less than [`TOLERANCE`]; a row never agrees by width alone;
//! - `disagrees`: the intervals do not overlap, or both are narrow and the estimates differ
//!   by the tolerance or more (the scenario file may explain it: `[validation] explanation`);
//! - `inconclusive`: the intervals overlap but one is wider than ±[`HALF_WIDTH_MAX`]: the
//!   row could not have told apart shares closer than its `detectable` difference;
//! - `not validated`: a side has no results.
//!
//! Acquire latency is judged apart, per live world: its p50 and its p99 agree with the
//! simulator's (whose network the validation files set to loopback's) within a factor
//! [`LATENCY_FACTOR`], or within [`LATENCY_FLOOR_MS`] of it, each where the runs have the
//! grants to judge it ([`P50_GRANTS_MIN`], [`P99_GRANTS_MIN`]).
//!
//! Server fsyncs per grant are judged apart too, as live mode counts them on the real
//! servers (`locksim_live::deploy::Deployment::fsyncs`): pooled over each world's runs, they
//! agree within a factor [`FSYNCS_FACTOR`], on runs of [`FSYNCS_GRANTS_MIN`] grants or
//! more; this is the live check of the comparison report's fsyncs per acquisition.
//!
//! Results are records, one JSON line each in `validation.jsonl` as they come; the tables
//! (`validation.md`, `.json`, `.html`) are always rewritten from all records so far, so an
//! interrupted run leaves a consistent table and `--resume` runs only what is missing.

use locksim_check::{Property, Verdict};
use locksim_reports::stats::Share;
use locksim_scenarios::RunResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The widest interval (half-width, as a share) a row may agree with.
pub const HALF_WIDTH_MAX: f64 = 0.10;

/// How far apart (as a share) two narrow point estimates may be and still agree.
pub const TOLERANCE: f64 = 0.10;

/// The row of the pooled share of acknowledged updates lost.
pub const UPDATES_LOST: &str = "updates_lost";

/// The fewest runs a side of the updates-lost row needs for its clustered interval to mean
/// anything: with fewer clusters the variance between runs is not known (two runs that lost
/// nothing say little about the third), so the row is inconclusive however narrow.
pub const CLUSTERS_MIN: u64 = 10;

/// How far apart, as a factor, a live world's acquire latency (p50 or p99) may be from the
/// simulator's and still agree.
pub const LATENCY_FACTOR: f64 = 2.0;

/// Below this difference, in ms, two acquire latencies agree whatever their ratio: a real
/// process's scheduling and system calls (which the model's client does not spend) weigh a
/// millisecond or two against the model's, and 0.8 ms against 2.0 ms is not a finding.
pub const LATENCY_FLOOR_MS: f64 = 5.0;

/// How far apart, as a factor, a live world's server fsyncs per grant may be from the
/// simulator's and still agree: batching (several proposals in one Raft `Ready`, several
/// transactions in one ZooKeeper log flush) depends on how requests meet in time, which a
/// loaded machine changes; a model that syncs per request where the server syncs per batch,
/// or forgets a sync, is further off.
pub const FSYNCS_FACTOR: f64 = 1.5;

/// The fewest grants per run (on both sides) for fsyncs per grant to be judged: a run's
/// fixed costs (the clients' sessions, the lock's directory, a real library's warm-up
/// before the run) weigh on a handful of grants. On the cut-off scenarios' three grants a
/// run, the real Curator's warm-up lock (its driver's, to load its classes) made 24.6 a
/// grant against the model's 13.2; on 150 grants a run, 6.3 against 6.1.
pub const FSYNCS_GRANTS_MIN: f64 = 10.0;

/// Whether two worlds' fsyncs per grant agree (within [`FSYNCS_FACTOR`]); `None` where a
/// world has no count (a run where an etcd or ZooKeeper server crashed) or either has
/// fewer than [`FSYNCS_GRANTS_MIN`] grants a run.
pub fn fsyncs_verdict(side: &Side, sim: &Side) -> Option<bool> {
    if side.acquisitions_per_run.min(sim.acquisitions_per_run) < FSYNCS_GRANTS_MIN {
        return None;
    }
    let (a, b) = (side.fsyncs_per_grant?, sim.fsyncs_per_grant?);
    let (lo, hi) = (a.min(b), a.max(b));
    Some(hi <= lo * FSYNCS_FACTOR)
}

/// Whether two acquire latencies (ms) agree: within [`LATENCY_FLOOR_MS`] of each other, or
/// within a factor [`LATENCY_FACTOR`]. A latency of 0 (a record from before the p99 was
/// kept) agrees with anything: it was not measured.
pub fn latency_agrees(a_ms: f64, b_ms: f64) -> bool {
    let (lo, hi) = (a_ms.min(b_ms), a_ms.max(b_ms));
    lo <= 0.0 || hi - lo <= LATENCY_FLOOR_MS || hi <= lo * LATENCY_FACTOR
}

/// The fewest grants per run (on both sides) for a run's median acquire latency to be
/// judged: with fewer, the median says which of a handful of waits fell in the middle.
pub const P50_GRANTS_MIN: f64 = 10.0;

/// The same for the 99th percentile: it needs two waits above it. With about 100 grants a
/// run and one long wait (a fault's), the p99 is that wait below 100 grants and a short one
/// above: 2.3 s live against 75 ms simulated for etcdctl's GC pause, at 90 and 103 grants.
pub const P99_GRANTS_MIN: f64 = 200.0;

/// Whether a live world's acquire latency agrees with the simulator's, on the percentiles
/// its grants per run can judge ([`P50_GRANTS_MIN`], [`P99_GRANTS_MIN`]); `None` where a
/// side has no runs or too few grants for either.
pub fn latency_verdict(side: &Side, sim: &Side) -> Option<bool> {
    if side.runs == 0 || sim.runs == 0 {
        return None;
    }
    let grants = side.acquisitions_per_run.min(sim.acquisitions_per_run);
    let percentiles = [
        (P50_GRANTS_MIN, side.acquire_p50_ms, sim.acquire_p50_ms),
        (P99_GRANTS_MIN, side.acquire_p99_ms, sim.acquire_p99_ms),
    ];
    let judged: Vec<bool> = (percentiles.iter())
        .filter(|(min, _, _)| grants >= *min)
        .map(|(_, a, b)| latency_agrees(*a, *b))
        .collect();
    (!judged.is_empty()).then(|| judged.iter().all(|ok| *ok))
}

/// Where a run ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Against real servers on loopback (`locksim live`).
    Live,
    /// In the simulator.
    Sim,
    /// Against real servers with the real client library (`locksim live --library`).
    Library,
}

/// One run's result, as kept in `validation.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The scenario's name.
    pub scenario: String,
    /// Live or simulated.
    pub mode: Mode,
    /// The seed.
    pub seed: u64,
    /// Each property's verdict.
    pub properties: BTreeMap<Property, Verdict>,
    /// Grants in the run.
    pub acquisitions: u64,
    /// The run's median acquire latency, in ms.
    pub acquire_p50_ms: f64,
    /// The run's 99th-percentile acquire latency, in ms (0 in records from before it was kept).
    #[serde(default)]
    pub acquire_p99_ms: f64,
    /// Acknowledged updates of the run.
    #[serde(default)]
    pub updates_acked: u64,
    /// Of those, the updates lost.
    #[serde(default)]
    pub updates_lost: u64,
    /// The servers' fsyncs in the run, where they were counted (live: `None` where the count
    /// was lost, a restarted etcd or ZooKeeper server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_fsyncs: Option<u64>,
    /// Why the run produced no result (a server that did not start, a refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// The record of a completed run.
    pub fn of(mode: Mode, seed: u64, r: &RunResult) -> Record {
        Record {
            scenario: r.scenario.clone(),
            mode,
            seed,
            properties: r.properties.clone(),
            acquisitions: r.stats.liveness.acquisitions,
            acquire_p50_ms: r.stats.liveness.acquire_latency_ms_p50,
            acquire_p99_ms: r.stats.liveness.acquire_latency_ms_p99,
            updates_acked: r.stats.updates_acked,
            updates_lost: r.stats.updates_lost,
            server_fsyncs: r.stats.server_fsyncs,
            error: None,
        }
    }

    /// The record of a run that failed.
    pub fn failed(scenario: &str, mode: Mode, seed: u64, error: String) -> Record {
        Record {
            scenario: scenario.into(),
            mode,
            seed,
            properties: BTreeMap::new(),
            acquisitions: 0,
            acquire_p50_ms: 0.0,
            acquire_p99_ms: 0.0,
            updates_acked: 0,
            updates_lost: 0,
            server_fsyncs: None,
            error: Some(error),
        }
    }
}

/// A scenario of the set, as the table needs it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its protocol.
    pub protocol: String,
    /// Per property, why live and simulated shares may disagree.
    pub explanation: BTreeMap<String, String>,
    /// The real library of its client profile, for the third column.
    pub library: RealLibrary,
}

/// What the third column can hold for a scenario: its client profile's real library.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RealLibrary {
    /// No profile: the client is locksim's own recipe, there is no library to run.
    Own,
    /// A profile with a driver: its library runs (`locksim live --library`).
    Driver {
        /// The client profile.
        profile: String,
    },
    /// A profile without a driver here (Redisson, redsync): modelled only.
    ModelledOnly {
        /// The client profile.
        profile: String,
    },
    /// A profile with a driver that live mode refuses this scenario (a check the driver's
    /// library has no signal for): not run, and why.
    Refused {
        /// The client profile.
        profile: String,
        /// Live mode's refusal.
        why: String,
    },
}

/// One side's figures of a row.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Runs that violated the property, of the runs that could decide it.
    #[serde(flatten)]
    pub share: Share,
    /// Runs with a result (the property may be n/a or unknown in some).
    pub runs: u64,
    /// Runs that failed to produce a result.
    pub failed: u64,
    /// Mean grants per run.
    pub acquisitions_per_run: f64,
    /// Median over runs of each run's median acquire latency, in ms.
    pub acquire_p50_ms: f64,
    /// Median over runs of each run's 99th-percentile acquire latency, in ms.
    #[serde(default)]
    pub acquire_p99_ms: f64,
    /// Server fsyncs per grant, pooled over the runs that counted them (`None`: none did).
    pub fsyncs_per_grant: Option<f64>,
}

impl Side {
    /// The interval's half-width, as a share.
    pub fn half_width(&self) -> f64 {
        (self.share.hi - self.share.lo) / 2.0
    }

    /// The point estimate: k of n.
    pub fn point(&self) -> f64 {
        if self.share.n == 0 {
            0.0
        } else {
            self.share.k as f64 / self.share.n as f64
        }
    }
}

/// A row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowVerdict {
    /// Narrow intervals that overlap, estimates within the tolerance.
    Agrees,
    /// Intervals apart, or narrow and estimates further apart than the tolerance.
    Disagrees,
    /// Intervals that overlap, one too wide to tell.
    Inconclusive,
    /// A side without results.
    NotValidated,
}

impl RowVerdict {
    /// The verdict of two sides (with results on both).
    fn of(live: &Side, sim: &Side) -> RowVerdict {
        let overlap = live.share.lo <= sim.share.hi && sim.share.lo <= live.share.hi;
        let narrow = live.half_width() <= HALF_WIDTH_MAX && sim.half_width() <= HALF_WIDTH_MAX;
        let close = (live.point() - sim.point()).abs() < TOLERANCE;
        match (overlap, narrow, close) {
            (false, _, _) | (true, true, false) => RowVerdict::Disagrees,
            (true, true, true) => RowVerdict::Agrees,
            (true, false, _) => RowVerdict::Inconclusive,
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The scenario.
    pub scenario: String,
    /// Its protocol.
    pub protocol: String,
    /// The property.
    pub property: String,
    /// The live runs.
    pub live: Side,
    /// The simulated runs.
    pub sim: Side,
    /// The runs with the real library, where the profile has a driver.
    pub library: Option<Side>,
    /// The real library against the simulator, where it runs: then `verdict` itself (kept
    /// apart so the table's readers need not know which world a row ran in).
    pub library_verdict: Option<RowVerdict>,
    /// The scenario's client profile's real library (what the third column can hold).
    pub real_library: RealLibrary,
    /// The live world and the simulator both have results (else the row validates nothing:
    /// a live run that failed).
    pub validated: bool,
    /// The verdict, with power ([`RowVerdict`]), of locksim's own client live (the model's
    /// code on real servers) against the simulator; where it did not run (refused) and the
    /// profile has a driver, the real library's.
    pub verdict: RowVerdict,
    /// The verdict is [`RowVerdict::Agrees`].
    pub agrees: bool,
    /// The smallest difference between the two shares this row could see (the sum of the
    /// intervals' half-widths: shares closer than that give overlapping intervals).
    pub detectable: f64,
    /// The scenario file's explanation of a disagreement, if it has one.
    pub explanation: Option<String>,
    /// locksim's own client's acquire latency agrees with the simulator's ([`latency_agrees`]
    /// on the percentiles its grants can judge); `None` without runs on a side or with too
    /// few grants for either percentile.
    pub latency_agrees: Option<bool>,
    /// The same for the real library, where it ran.
    pub library_latency_agrees: Option<bool>,
    /// locksim's own client's server fsyncs per grant agree with the simulator's
    /// ([`fsyncs_verdict`]); `None` where a world has no count or too few grants a run.
    pub fsyncs_agree: Option<bool>,
    /// The same for the real library, where it ran.
    pub library_fsyncs_agree: Option<bool>,
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The runs of `records` with a result.
fn done<'a>(records: &[&'a Record]) -> Vec<&'a Record> {
    (records.iter().copied())
        .filter(|r| r.error.is_none())
        .collect()
}

/// The liveness figures of one side's `done` runs (of `all` records), and `share`.
fn side_with(all: usize, done: &[&Record], share: Share) -> Side {
    let runs = done.len() as u64;
    let acquisitions: u64 = done.iter().map(|r| r.acquisitions).sum();
    let granted: Vec<&&Record> = done.iter().filter(|r| r.acquisitions > 0).collect();
    Side {
        share,
        runs,
        failed: all as u64 - runs,
        acquisitions_per_run: if runs == 0 {
            0.0
        } else {
            acquisitions as f64 / runs as f64
        },
        acquire_p50_ms: median(granted.iter().map(|r| r.acquire_p50_ms).collect()),
        acquire_p99_ms: median(granted.iter().map(|r| r.acquire_p99_ms).collect()),
        fsyncs_per_grant: fsyncs_per_grant(done),
    }
}

/// Server fsyncs per grant, pooled over the runs with a count and a grant.
fn fsyncs_per_grant(done: &[&Record]) -> Option<f64> {
    let counted = (done.iter()).filter_map(|r| Some((r.server_fsyncs?, r.acquisitions)));
    let (fsyncs, grants) = counted.fold((0, 0), |(f, g), (rf, rg)| (f + rf, g + rg));
    (grants > 0).then(|| fsyncs as f64 / grants as f64)
}

/// One side of a property's row: the runs that violated it, of those that could decide it.
fn side(records: &[&Record], property: Property) -> Side {
    let done = done(records);
    let verdict = |r: &&Record| r.properties.get(&property).copied();
    let n = (done.iter())
        .filter(|r| matches!(verdict(r), Some(Verdict::Valid | Verdict::Invalid)))
        .count() as u64;
    let k = (done.iter())
        .filter(|r| verdict(r) == Some(Verdict::Invalid))
        .count() as u64;
    side_with(records.len(), &done, Share::of(k, n))
}

/// One side of the updates-lost row: acknowledged updates lost, pooled over the runs, with a
/// 95% interval clustered by run (a ratio estimator's cluster-robust variance: the updates
/// of one run are not independent of each other, the runs are).
fn lost_side(records: &[&Record]) -> Side {
    let done = done(records);
    let (lost, acked): (u64, u64) = (done.iter()).fold((0, 0), |(l, a), r| {
        (l + r.updates_lost, a + r.updates_acked)
    });
    side_with(records.len(), &done, clustered_share(&done, lost, acked))
}

/// `lost` of `acked` with the cluster-robust 95% interval over `runs`; Wilson's where a run
/// alone cannot give a variance (fewer than two runs), `(0, 1)` with nothing acknowledged.
fn clustered_share(runs: &[&Record], lost: u64, acked: u64) -> Share {
    let m = runs.len() as f64;
    if acked == 0 || runs.len() < 2 {
        return Share::of(lost, acked);
    }
    let p = lost as f64 / acked as f64;
    let squares: f64 = (runs.iter())
        .map(|r| (r.updates_lost as f64 - p * r.updates_acked as f64).powi(2))
        .sum();
    let variance = m / (m - 1.0) * squares / (acked as f64).powi(2);
    // A run of Wilson's width at least: a ratio of 0 over a few runs has no spread, not
    // certainty.
    let (w_lo, w_hi) = locksim_reports::stats::wilson(lost, acked);
    let half = (1.96 * variance.sqrt()).max((w_hi - w_lo) / 2.0);
    Share {
        k: lost,
        n: acked,
        lo: (p - half).max(0.0),
        hi: (p + half).min(1.0),
    }
}

/// The rows of the table, in the set's order: the properties in their report order, then
/// the updates lost (where a side acknowledged any).
pub fn rows(entries: &[Entry], records: &[Record]) -> Vec<Row> {
    let mut out = vec![];
    for e in entries {
        let of = |mode: Mode| -> Vec<&Record> {
            (records.iter())
                .filter(|r| r.scenario == e.name && r.mode == mode)
                .collect()
        };
        let (live_records, sim_records) = (of(Mode::Live), of(Mode::Sim));
        let lib_records = of(Mode::Library);
        if live_records.is_empty() && sim_records.is_empty() {
            continue;
        }
        let with_library = matches!(e.library, RealLibrary::Driver { .. });
        let lib = |side: Side| with_library.then_some(side);
        for p in Property::ALL {
            let (live, sim) = (side(&live_records, p), side(&sim_records, p));
            let library = lib(side(&lib_records, p));
            // n/a in every run of every world (fencing without tokens): nothing to compare.
            let decided = |s: &Side| s.runs == 0 || s.share.n > 0;
            if ![&live, &sim].into_iter().chain(&library).any(decided) {
                continue;
            }
            out.push(row(e, p.name(), live, sim, library, 1));
        }
        let (live, sim) = (lost_side(&live_records), lost_side(&sim_records));
        let library = lib(lost_side(&lib_records));
        let acked = |s: &Side| s.share.n > 0;
        if acked(&live) || acked(&sim) || library.as_ref().is_some_and(acked) {
            out.push(row(e, UPDATES_LOST, live, sim, library, CLUSTERS_MIN));
        }
    }
    out
}

/// A side against the simulator's: without results on a side, not validated; with fewer
/// than `runs_min` runs on a side, inconclusive whatever the intervals say (the clustered
/// interval of a few runs knows nothing of the spread between runs, so it can neither
/// agree nor disagree: two live runs that lost alike are not a narrow estimate).
fn judge(side: &Side, sim: &Side, runs_min: u64) -> RowVerdict {
    match RowVerdict::of(side, sim) {
        _ if side.runs == 0 || sim.runs == 0 => RowVerdict::NotValidated,
        _ if side.runs.min(sim.runs) < runs_min => RowVerdict::Inconclusive,
        v => v,
    }
}

/// The row of `property` from its sides (the real library's, where it runs).
fn row(
    e: &Entry,
    property: &str,
    live: Side,
    sim: Side,
    library: Option<Side>,
    runs_min: u64,
) -> Row {
    // Each live world against the simulator: locksim's own client (the row's verdict) and,
    // for a profile with a driver, the real library (its own verdict). A row whose own live
    // runs are missing (refused) stands on the library's.
    let library_verdict = library.as_ref().map(|l| judge(l, &sim, runs_min));
    let world = match &library {
        Some(l) if live.runs == 0 => l,
        _ => &live,
    };
    let validated = world.runs > 0 && sim.runs > 0;
    let verdict = judge(world, &sim, runs_min);
    let detectable = world.half_width() + sim.half_width();
    let latency_agrees = latency_verdict(&live, &sim);
    let library_latency_agrees = library.as_ref().and_then(|l| latency_verdict(l, &sim));
    let fsyncs_agree = fsyncs_verdict(&live, &sim);
    let library_fsyncs_agree = library.as_ref().and_then(|l| fsyncs_verdict(l, &sim));
    Row {
        scenario: e.name.clone(),
        protocol: e.protocol.clone(),
        property: property.into(),
        detectable,
        live,
        sim,
        library,
        library_verdict,
        real_library: e.library.clone(),
        validated,
        verdict,
        agrees: verdict == RowVerdict::Agrees,
        explanation: e.explanation.get(property).cloned(),
        latency_agrees,
        library_latency_agrees,
        fsyncs_agree,
        library_fsyncs_agree,
    }
}

/// The protocols of `all` that no row validates with at least one live result.
pub fn not_validated(all: &[String], rows: &[Row]) -> Vec<String> {
    all.iter()
        .filter(|p| !rows.iter().any(|r| &r.protocol == *p && r.validated))
        .cloned()
        .collect()
}

/// One protocol's validation status from a `validation.json`, in words (for `compare`).
pub fn status(validation: &serde_json::Value, protocol: &str) -> String {
    let rows: Vec<&serde_json::Value> = (validation["rows"].as_array().into_iter().flatten())
        .filter(|r| r["protocol"] == protocol && r["validated"] == true)
        .collect();
    if rows.is_empty() {
        return "not yet validated".into();
    }
    // Tables written before verdicts with power had `agrees` alone.
    let verdict = |r: &serde_json::Value| match r["verdict"].as_str() {
        Some(v) => v.to_owned(),
        None if r["agrees"] == true => "agrees".into(),
        None => "disagrees".into(),
    };
    let count = |v: &str| rows.iter().filter(|r| verdict(r) == v).count();
    let (agree, inconclusive) = (count("agrees"), count("inconclusive"));
    let explained = (rows.iter())
        .filter(|r| verdict(r) == "disagrees" && r["explanation"].is_string())
        .count();
    let open = rows.len() - agree - inconclusive - explained;
    let mut scenarios: Vec<&str> = rows.iter().filter_map(|r| r["scenario"].as_str()).collect();
    scenarios.dedup();
    format!(
        "{agree} of {} rows agree, {inconclusive} inconclusive (too few runs), {explained} \
         explained, {open} open ({} scenarios)",
        rows.len(),
        scenarios.len()
    )
}

/// `k/n [lo, hi]` in percent.
fn share_text(s: &Side) -> String {
    if s.runs == 0 {
        return if s.failed > 0 {
            format!("failed ({} runs)", s.failed)
        } else {
            "—".into()
        };
    }
    if s.share.n == 0 {
        return "n/a".into();
    }
    format!(
        "{}/{} [{:.0}, {:.0}]%",
        s.share.k,
        s.share.n,
        s.share.lo * 100.0,
        s.share.hi * 100.0
    )
}

fn verdict_text(r: &Row) -> &'static str {
    verdict_words(r.verdict, r.explanation.is_some())
}

fn verdict_words(v: RowVerdict, explained: bool) -> &'static str {
    match (v, explained) {
        (RowVerdict::NotValidated, _) => "**not validated**",
        (RowVerdict::Agrees, _) => "agrees",
        (RowVerdict::Inconclusive, _) => "inconclusive",
        (RowVerdict::Disagrees, true) => "disagrees (explained)",
        (RowVerdict::Disagrees, false) => "**disagrees**",
    }
}

/// The third column: the real library's share, or why there is none.
fn library_text(r: &Row) -> String {
    match (&r.real_library, &r.library) {
        (RealLibrary::Driver { .. }, Some(side)) => share_text(side),
        (RealLibrary::ModelledOnly { profile }, _) => format!("modelled only ({profile})"),
        (RealLibrary::Refused { profile, .. }, _) => format!("refused ({profile})"),
        _ => "—".into(),
    }
}

/// The real library's verdict against the simulator, or nothing.
fn library_verdict_text(r: &Row) -> &'static str {
    r.library_verdict
        .map_or("—", |v| verdict_words(v, r.explanation.is_some()))
}

/// `live · sim`, and ` · library` where the library ran; `—` for a side without runs.
fn three(r: &Row, f: impl Fn(&Side) -> Option<f64>) -> String {
    let one = |s: &Side| match f(s) {
        _ if s.runs == 0 => "—".to_owned(),
        Some(x) => format!("{x:.1}"),
        None => "n/a".to_owned(),
    };
    let mut out = format!("{} · {}", one(&r.live), one(&r.sim));
    if let Some(l) = &r.library {
        out += &format!(" · {}", one(l));
    }
    out
}

/// A pair of verdicts, `agrees`, `differs` or `not judged`: locksim's own client live, then
/// the real library's where it ran.
fn verdicts_text(r: &Row, own: Option<bool>, library: Option<bool>) -> String {
    let word = |v: Option<bool>| match v {
        Some(true) => "agrees",
        Some(false) => "**differs**",
        None => "not judged",
    };
    match &r.library {
        Some(_) => format!("{} · {}", word(own), word(library)),
        None => word(own).to_owned(),
    }
}

/// The latency verdicts ([`verdicts_text`]).
fn latency_text(r: &Row) -> String {
    verdicts_text(r, r.latency_agrees, r.library_latency_agrees)
}

/// Server fsyncs per grant in each world and their verdicts, or `n/a` where no world counted.
fn fsyncs_text(r: &Row) -> String {
    let sides = [Some(&r.live), Some(&r.sim), r.library.as_ref()];
    if !sides.iter().flatten().any(|s| s.fsyncs_per_grant.is_some()) {
        return "n/a".into();
    }
    let verdicts = verdicts_text(r, r.fsyncs_agree, r.library_fsyncs_agree);
    format!("{}: {verdicts}", three(r, |s| s.fsyncs_per_grant))
}

/// The smallest difference a row could see, in points: `±12`.
fn detectable_text(r: &Row) -> String {
    if r.validated {
        format!("{:.0}", r.detectable * 100.0)
    } else {
        "—".into()
    }
}

/// The Markdown table and its notes.
pub fn markdown(rows: &[Row], missing: &[String], header: &str) -> String {
    let mut out = format!("# Validation: live against simulated\n\n{header}\n\n");
    out += &format!(
        "Share of runs that violated the property (of the runs that could decide it), 95% \
         Wilson intervals; `{UPDATES_LOST}`: acknowledged updates lost, pooled over the runs, \
         the interval clustered by run (inconclusive with fewer than {CLUSTERS_MIN} runs a \
         side). `agrees` = the intervals overlap, each is at most \
         ±{hw:.0} points wide and the estimates differ by less than {tol:.0} points; \
         `inconclusive` = they overlap but one is wider (too few runs to tell); `sees` = the \
         smallest difference in points the row could detect. Liveness: grants per run and the \
         median of the runs' median (p50) and 99th-percentile (p99) acquire latency; `latency` \
         = each live world's p50 (with {p50_min} grants a run or more) and p99 ({p99_min} or \
         more) against the simulated ones: `agrees` within a factor {factor} or {floor} ms, \
         else `differs`; `not judged` with fewer grants. `fsyncs/grant`: the servers' fsyncs \
         per grant, pooled over the runs, counted live by etcd's and ZooKeeper's own \
         counters and by the Redis servers' shims, `agrees` within a factor {fsyncs_factor} \
         (`not judged` under {fsyncs_min} grants a run). `real \
         library`: where the scenario's client profile has a driver, the runs with the real \
         library it models (`locksim live --library`), judged against the simulated runs by \
         the same rule; `modelled only`: a profile whose library does not run here; `refused`: live \
         mode refuses the scenario with the library (a note under the table says why).\n\n",
        hw = HALF_WIDTH_MAX * 100.0,
        tol = TOLERANCE * 100.0,
        factor = LATENCY_FACTOR,
        floor = LATENCY_FLOOR_MS,
        p50_min = P50_GRANTS_MIN,
        p99_min = P99_GRANTS_MIN,
        fsyncs_factor = FSYNCS_FACTOR,
        fsyncs_min = FSYNCS_GRANTS_MIN
    );
    out += "| scenario | protocol | property | live | simulated | verdict | sees | real library | library verdict | grants/run live · sim · lib | acquire p50 ms live · sim · lib | p99 ms live · sim · lib | latency live · lib | fsyncs/grant live · sim · lib |\n";
    out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.protocol,
            r.property,
            share_text(&r.live),
            share_text(&r.sim),
            verdict_text(r),
            detectable_text(r),
            library_text(r),
            library_verdict_text(r),
            three(r, |s| Some(s.acquisitions_per_run)),
            three(r, |s| Some(s.acquire_p50_ms)),
            three(r, |s| Some(s.acquire_p99_ms)),
            latency_text(r),
            fsyncs_text(r)
        );
    }
    out + &summary(rows, missing)
}

/// The table's counts, the real libraries' counts, each open disagreement and what is not
/// validated: the notes under the Markdown table.
fn summary(rows: &[Row], missing: &[String]) -> String {
    let open: Vec<&Row> = (rows.iter())
        .filter(|r| r.verdict == RowVerdict::Disagrees)
        .collect();
    let count = |v: RowVerdict| rows.iter().filter(|r| r.verdict == v).count();
    let mut out = format!(
        "\n{} rows: {} agree, {} disagree, {} inconclusive (too few runs), {} not validated (a \
         side without results).\n",
        rows.len(),
        count(RowVerdict::Agrees),
        open.len(),
        count(RowVerdict::Inconclusive),
        count(RowVerdict::NotValidated)
    );
    let judged: Vec<RowVerdict> = rows.iter().filter_map(|r| r.library_verdict).collect();
    if !judged.is_empty() {
        let count = |v: RowVerdict| judged.iter().filter(|j| **j == v).count();
        out += &format!(
            "\nThe real libraries against the simulator: {} rows, {} agree, {} disagree, {} \
             inconclusive, {} not validated.\n",
            judged.len(),
            count(RowVerdict::Agrees),
            count(RowVerdict::Disagrees),
            count(RowVerdict::Inconclusive),
            count(RowVerdict::NotValidated)
        );
    }
    out += &latency_summary(rows);
    out += &fsyncs_summary(rows);
    let mut refused: Vec<(&str, &str, &str)> = (rows.iter())
        .filter_map(|r| match &r.real_library {
            RealLibrary::Refused { profile, why } => Some((&*r.scenario, &**profile, &**why)),
            _ => None,
        })
        .collect();
    refused.dedup();
    for (scenario, profile, why) in refused {
        out += &format!("\n- {scenario}: the real library ({profile}) is not run: {why}\n");
    }
    // Each disagreement, live (locksim's own client) and the real library's apart.
    let library_open = (rows.iter()).filter(|r| r.library_verdict == Some(RowVerdict::Disagrees));
    let notes = (open.iter().map(|r| (*r, " (live)")))
        .chain(library_open.map(|r| (r, " (the real library)")));
    for (r, side) in notes {
        let why = r.explanation.as_deref().unwrap_or("no explanation yet");
        out += &format!("\n- {} / {}{side}: {why}\n", r.scenario, r.property);
    }
    if !missing.is_empty() {
        out += &format!(
            "\nNot yet validated (no live result): {}.\n",
            missing.join(", ")
        );
    }
    out
}

/// The scenarios' latency verdicts ([`per_scenario`]).
fn latency_summary(rows: &[Row]) -> String {
    let what = format!(
        "Acquire latency (p50 and p99, where the grants a run can judge them, within a factor \
         {LATENCY_FACTOR} or {LATENCY_FLOOR_MS} ms of the simulated)"
    );
    per_scenario(
        rows,
        |r| [r.latency_agrees, r.library_latency_agrees],
        &what,
    )
}

/// The scenarios' fsync verdicts ([`per_scenario`]).
fn fsyncs_summary(rows: &[Row]) -> String {
    let what = format!(
        "Server fsyncs per grant (counted live, within a factor {FSYNCS_FACTOR} of the \
         simulated, with {FSYNCS_GRANTS_MIN} grants a run or more)"
    );
    per_scenario(rows, |r| [r.fsyncs_agree, r.library_fsyncs_agree], &what)
}

/// A scenario-wide verdict, one per scenario (its rows, which come together, share it),
/// live and with the real library (`verdicts`): how many agree, and which differ; empty
/// where none was judged.
fn per_scenario(rows: &[Row], verdicts: impl Fn(&Row) -> [Option<bool>; 2], what: &str) -> String {
    let mut firsts: Vec<&Row> = rows.iter().collect();
    firsts.dedup_by(|a, b| a.scenario == b.scenario);
    let judged: Vec<(bool, String)> = (firsts.iter())
        .flat_map(|r| {
            let worlds = verdicts(r).into_iter().zip(["live", "library"]);
            worlds
                .filter_map(move |(v, world)| v.map(|ok| (ok, format!("{} ({world})", r.scenario))))
        })
        .collect();
    if judged.is_empty() {
        return String::new();
    }
    let differ: Vec<&str> = (judged.iter())
        .filter(|(ok, _)| !ok)
        .map(|(_, name)| name.as_str())
        .collect();
    let list = if differ.is_empty() {
        String::new()
    } else {
        format!(": {}", differ.join(", "))
    };
    format!(
        "\n{what}: {} of {} agree, {} differ{list}.\n",
        judged.len() - differ.len(),
        judged.len(),
        differ.len()
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A self-contained HTML page with the table.
pub fn html(rows: &[Row], missing: &[String], header: &str) -> String {
    let mut body = String::new();
    for r in rows {
        let class = match r.verdict {
            RowVerdict::Agrees => "ok",
            RowVerdict::Inconclusive => "weak",
            _ => "bad",
        };
        body += &format!(
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.scenario),
            escape(&r.protocol),
            r.property,
            escape(&share_text(&r.live)),
            escape(&share_text(&r.sim)),
            escape(r.explanation.as_deref().unwrap_or("")),
            verdict_text(r).replace("**", ""),
            detectable_text(r),
            escape(&library_text(r)),
            library_verdict_text(r).replace("**", ""),
            three(r, |s| Some(s.acquisitions_per_run)),
            three(r, |s| Some(s.acquire_p50_ms)),
            latency_text(r).replace("**", ""),
            fsyncs_text(r).replace("**", "")
        );
    }
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "<p>Not yet validated (no live result): {}.</p>",
            escape(&missing.join(", "))
        )
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>locksim validation</title>\
         <style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}\
         tr.bad{{background:#fdd}}tr.weak{{background:#fff6d5}}</style></head><body><h1>Validation: live against simulated</h1>\
         <p>{}</p><table><tr><th>scenario</th><th>protocol</th><th>property</th><th>live</th>\
         <th>simulated</th><th>verdict</th><th>sees (points)</th><th>real library</th>\
         <th>library verdict</th><th>grants/run live · sim · lib</th>\
         <th>acquire p50 ms live · sim · lib</th><th>latency live · lib</th><th>fsyncs/grant live · sim · lib</th></tr>\n{body}</table>{missing}</body></html>\n",
        escape(header)
    )
}
