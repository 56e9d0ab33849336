//! The comparison matrix: protocols × fault profiles, each cell a scenario built from a
//! shared base. `locksim compare` runs every cell over the same seeds, sweeps fault sizes
//! against each protocol's TTL for the phase diagrams, and runs the catalog.
//!
//! The standard matrix is `scenarios/compare/matrix.toml`, compiled into the crate
//! ([`STANDARD`]), so `compare` runs from any directory; `--matrix FILE` reads another. The
//! file has a `[base]` table (any scenario keys but `protocol`, `faults`, `faults_random`
//! and `expect`), a list of `[[protocols]]` (a `label`, a `description`, the
//! `[protocols.protocol]` table as in a scenario, optionally a `[protocols.resource]` table)
//! and a list of `[[profiles]]` (a `label`, a `description` and a `[profiles.faults_random]`
//! table; use `@servers` and `@clients` in node lists so one profile fits every protocol).
//! Optional: the adaptive stopping keys (`seeds`, `seeds_max`, `seeds_step`,
//! `half_width_max`), `catalog_seeds`, and a `[phase]` table. A row may name the phase axes
//! it is swept along (`phase_axes`, with `phase_axes_why` for the reports) and the profiles
//! under which its runs are another row's (`[protocols.same_as]`: those cells are not run;
//! the reports show them as that row's, labelled, with the reason).

use crate::scenario::Scenario;
use locksim_check::input::FILE_BYTES_MAX;
use locksim_protocols::Registry;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The standard matrix, as its file reads.
pub const STANDARD: &str = include_str!("../compare/matrix.toml");

/// The catalog: every `scenarios/catalog/*.toml`, as (name, text), in name order.
pub const CATALOG: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// One protocol row.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixProtocol {
    /// Short label for tables.
    pub label: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// The `[protocol]` table of the cell scenarios.
    pub protocol: toml::Table,
    /// The `[resource]` table, if this row needs its own (e.g. fencing on).
    #[serde(default)]
    pub resource: Option<toml::Table>,
    /// `[workload]` keys this row sets over the base's (e.g. `check = "never"`: what the
    /// application does with its lock, as its library's docs recommend).
    #[serde(default)]
    pub workload: Option<toml::Table>,
    /// The phase axes this row is swept along (default: every axis). A client library's
    /// row needs only `pause`: a server's clock jump reaches every client of the protocol
    /// alike, so its diagram is its protocol's.
    #[serde(default)]
    pub phase_axes: Option<Vec<String>>,
    /// Why the row is left off the other axes (the reports say it under the diagrams).
    #[serde(default)]
    pub phase_axes_why: Option<String>,
    /// Profiles under which this row's runs are another row's, seed for seed (e.g. a check
    /// before each write, under faults that never make it fail): those cells are not run and
    /// the report shows them as the other row's.
    #[serde(default)]
    pub same_as: Option<SameAs>,
}

/// `[protocols.same_as]`: under `profiles`, the row's runs are the row `row`'s, because
/// `why`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SameAs {
    /// The label of the row whose runs stand for this one's.
    pub row: String,
    /// The profiles (column labels) under which they do.
    pub profiles: Vec<String>,
    /// Why, in a sentence for the report.
    pub why: String,
}

impl MatrixProtocol {
    /// The row whose runs stand for this row's under `profile`, if the matrix says so.
    pub fn same_as(&self, profile: &str) -> Option<&SameAs> {
        self.same_as
            .as_ref()
            .filter(|s| s.profiles.iter().any(|p| p == profile))
    }

    /// Whether this row is swept along the phase axis `axis`.
    pub fn on_axis(&self, axis: &str) -> bool {
        self.phase_axes
            .as_ref()
            .is_none_or(|axes| axes.iter().any(|a| a == axis))
    }

    /// The protocol id (`name` in its table).
    pub fn id(&self) -> String {
        self.protocol
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// The lease the phase diagrams measure fault sizes against, in ms: the protocol's own
    /// answer for the row's `[protocol]` table (so a client profile's default TTL counts when
    /// the row sets none, and etcd's rounding to whole seconds); for a protocol that cannot
    /// say, the table's `ttl_ms`, `lease_ttl_ms` or `session_timeout_ms`, else 2000.
    pub fn ttl_ms(&self, registry: &Registry) -> u64 {
        let mut params = self.protocol.clone();
        params.remove("name");
        let configured = registry
            .get(&self.id())
            .and_then(|p| p.configure(&params).ok());
        configured
            .and_then(|d| d.lease_ms())
            .or_else(|| {
                ["ttl_ms", "lease_ttl_ms", "session_timeout_ms"]
                    .iter()
                    .find_map(|k| self.protocol.get(*k).and_then(|v| v.as_integer()))
                    .map(|v| v.max(1) as u64)
            })
            .unwrap_or(2_000)
            .max(1)
    }
}

/// One fault-profile column.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixProfile {
    /// Short label for tables.
    pub label: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// The `[faults_random]` table of the cell scenarios (empty: no faults).
    #[serde(default)]
    pub faults_random: toml::Table,
}

/// When an adaptive cell stops: it runs seeds 1..=`seeds_min`, then `seeds_step` more at a
/// time (seeds in order, so the result depends on nothing but the data) until every watched
/// 95% interval is at most `half_width_max` wide on each side, or `seeds_max` is reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stopping {
    /// Seeds every cell runs.
    pub seeds_min: u64,
    /// The cap.
    pub seeds_max: u64,
    /// Seeds added per round while an interval is too wide.
    pub seeds_step: u64,
    /// The widest acceptable half-width, as a share (0.05 = 5 points).
    pub half_width_max: f64,
}

impl Stopping {
    /// Exactly `n` seeds, whatever the intervals.
    pub fn fixed(n: u64) -> Stopping {
        Stopping {
            seeds_min: n,
            seeds_max: n,
            seeds_step: 1,
            half_width_max: 1.0,
        }
    }

    /// How many seeds a cell should have run, given the half-widths of the intervals it
    /// watches after its first `done` seeds: `done` itself when it may stop.
    pub fn target(&self, done: u64, half_widths: &[f64]) -> u64 {
        if done < self.seeds_min {
            return self.seeds_min;
        }
        let narrow = half_widths
            .iter()
            .all(|h| *h <= self.half_width_max + 1e-12);
        if narrow || done >= self.seeds_max {
            done
        } else {
            (done + self.seeds_step.max(1)).min(self.seeds_max)
        }
    }

    /// In words, for report headers.
    pub fn describe(&self) -> String {
        if self.seeds_min == self.seeds_max {
            return format!("seeds 1..={} each", self.seeds_min);
        }
        format!(
            "seeds 1, 2, 3, … in order: at least {}, then {} more at a time until the 95% \
             intervals of overlap, harm and damage are at most ±{:.0} points, at most {}",
            self.seeds_min,
            self.seeds_step,
            self.half_width_max * 100.0,
            self.seeds_max
        )
    }
}

/// `[phase]`: fault sizes swept against each protocol's TTL.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// The sizes, as multiples of the TTL.
    #[serde(default = "d_multiples")]
    pub ttl_multiples: Vec<f64>,
    /// Seeds every point runs.
    #[serde(default = "d_phase_seeds")]
    pub seeds: u64,
    /// The cap per point.
    #[serde(default = "d_phase_seeds_max")]
    pub seeds_max: u64,
    /// The pause axis' `[faults_random]` (the pause length is set per point).
    #[serde(default = "d_pause_axis")]
    pub pause: toml::Table,
    /// The clock-jump axis' `[faults_random]` (the jump size is set per point).
    #[serde(default = "d_jump_axis")]
    pub clock_jump: toml::Table,
    /// Sizes for one axis instead of `ttl_multiples`, keyed by the axis' name (e.g.
    /// `axis_ttl_multiples = { clock_jump = [0.5, 1, 2] }`).
    #[serde(default)]
    pub axis_ttl_multiples: BTreeMap<String, Vec<f64>>,
}

impl PhaseSpec {
    /// The sizes, as multiples of the TTL, of `axis`'s points.
    pub fn multiples(&self, axis: &str) -> &[f64] {
        self.axis_ttl_multiples
            .get(axis)
            .unwrap_or(&self.ttl_multiples)
    }

    /// Every list of sizes is non-empty, each size in (0, 100] × the TTL, and every axis
    /// named is one of [`PHASE_AXES`].
    fn check(&self) -> Result<(), String> {
        for (axis, sizes) in &self.axis_ttl_multiples {
            if !PHASE_AXES.iter().any(|(a, _)| a == axis) {
                let known: Vec<&str> = PHASE_AXES.iter().map(|(a, _)| *a).collect();
                return Err(format!(
                    "[phase] axis_ttl_multiples: no axis `{axis}` (the axes: {})",
                    known.join(", ")
                ));
            }
            check_multiples(&format!("axis_ttl_multiples.{axis}"), sizes)?;
        }
        check_multiples("ttl_multiples", &self.ttl_multiples)
    }
}

fn check_multiples(key: &str, sizes: &[f64]) -> Result<(), String> {
    if sizes.is_empty() || sizes.iter().any(|m| !(*m > 0.0 && *m <= 100.0)) {
        return Err(format!(
            "[phase] {key}: needs at least one size, each in (0, 100] (a multiple of the TTL)"
        ));
    }
    Ok(())
}

fn d_multiples() -> Vec<f64> {
    vec![0.1, 0.25, 0.5, 1.0, 2.0, 4.0]
}
fn d_phase_seeds() -> u64 {
    40
}
fn d_phase_seeds_max() -> u64 {
    100
}
fn d_pause_axis() -> toml::Table {
    toml::from_str("pause_probability = 0.3\npause_nodes = [\"@clients\"]").expect("valid TOML")
}
fn d_jump_axis() -> toml::Table {
    let text =
        "clock_jump_probability = 0.2\nclock_jump_backward = false\nclock_nodes = [\"@servers\"]";
    toml::from_str(text).expect("valid TOML")
}

impl Default for PhaseSpec {
    fn default() -> Self {
        PhaseSpec {
            ttl_multiples: d_multiples(),
            seeds: d_phase_seeds(),
            seeds_max: d_phase_seeds_max(),
            pause: d_pause_axis(),
            clock_jump: d_jump_axis(),
            axis_ttl_multiples: BTreeMap::new(),
        }
    }
}

/// The two fault axes of the phase diagrams.
pub const PHASE_AXES: [(&str, &str); 2] = [
    ("pause", "client pauses (GC) of a fixed length"),
    (
        "clock_jump",
        "forward jumps of servers' wall clocks, of a fixed size",
    ),
];

/// The whole matrix.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Report title.
    pub title: String,
    /// Seeds every cell runs (1..=seeds) before the intervals are looked at.
    #[serde(default = "d_seeds")]
    pub seeds: u64,
    /// The cap of an adaptive cell (default: `seeds`, i.e. not adaptive).
    #[serde(default)]
    pub seeds_max: Option<u64>,
    /// Seeds added per round.
    #[serde(default = "d_step")]
    pub seeds_step: u64,
    /// The widest acceptable half-width of a 95% interval, as a share.
    #[serde(default = "d_half_width")]
    pub half_width_max: f64,
    /// Seeds each catalog file runs (0: no catalog in the report).
    #[serde(default = "d_catalog_seeds")]
    pub catalog_seeds: u64,
    /// The phase diagrams (absent: none).
    #[serde(default)]
    pub phase: Option<PhaseSpec>,
    /// Seeds of each row's uncontended cost runs (one client, no faults; 0: no cost in the
    /// report).
    #[serde(default = "d_cost_seeds")]
    pub cost_seeds: u64,
    /// Scenario keys shared by every cell.
    pub base: toml::Table,
    /// Rows.
    pub protocols: Vec<MatrixProtocol>,
    /// Columns.
    pub profiles: Vec<MatrixProfile>,
}

fn d_seeds() -> u64 {
    100
}
fn d_step() -> u64 {
    50
}
fn d_half_width() -> f64 {
    0.05
}
fn d_catalog_seeds() -> u64 {
    10
}
fn d_cost_seeds() -> u64 {
    5
}

const CELL_KEYS: [&str; 4] = ["protocol", "faults", "faults_random", "expect"];

impl Matrix {
    /// The standard matrix (compiled in).
    pub fn standard() -> Matrix {
        Matrix::parse(STANDARD, "the built-in matrix").expect("the built-in matrix is valid")
    }

    /// Reads a matrix file; errors name the file (and line, for syntax errors).
    pub fn load(path: impl AsRef<Path>) -> Result<Matrix, String> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = locksim_check::input::read_to_string_bounded(path, FILE_BYTES_MAX)
            .map_err(|e| format!("{shown}: {e}"))?;
        Matrix::parse(&text, &shown)
    }

    /// Parses a matrix; `shown` names it in errors.
    pub fn parse(text: &str, shown: &str) -> Result<Matrix, String> {
        let matrix: Matrix = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| crate::scenario::line_of(text, s.start));
            match line {
                Some(l) => format!("{shown}:{l}: {}", e.message().trim()),
                None => format!("{shown}: {}", e.message().trim()),
            }
        })?;
        if let Some(key) = CELL_KEYS.iter().find(|k| matrix.base.contains_key(**k)) {
            return Err(format!(
                "{shown}: [base] must not set `{key}`: cells set it"
            ));
        }
        if matrix.protocols.is_empty() || matrix.profiles.is_empty() {
            return Err(format!(
                "{shown}: needs at least one protocol and one profile"
            ));
        }
        if matrix.seeds == 0 || matrix.seeds_max.is_some_and(|m| m < matrix.seeds) {
            return Err(format!(
                "{shown}: seeds must be at least 1 and seeds_max at least seeds"
            ));
        }
        if !(matrix.half_width_max > 0.0 && matrix.half_width_max <= 1.0) {
            return Err(format!("{shown}: half_width_max must be in (0, 1]"));
        }
        matrix
            .check_same_as()
            .map_err(|e| format!("{shown}: {e}"))?;
        if let Some(phase) = &matrix.phase {
            phase.check().map_err(|e| format!("{shown}: {e}"))?;
        }
        Ok(matrix)
    }

    /// Each `same_as` names another row, which runs under each of its profiles (no chains),
    /// and profiles the matrix has.
    fn check_same_as(&self) -> Result<(), String> {
        for p in &self.protocols {
            let Some(same) = &p.same_as else { continue };
            let at = format!("row `{}`: same_as", p.label);
            let other = self.protocols.iter().find(|o| o.label == same.row);
            let other = match other {
                Some(o) if o.label != p.label => o,
                _ => return Err(format!("{at}.row `{}` is no other row", same.row)),
            };
            for profile in &same.profiles {
                if !self.profiles.iter().any(|f| &f.label == profile) {
                    return Err(format!("{at}.profiles: no profile `{profile}`"));
                }
                if other.same_as(profile).is_some() {
                    let why = format!("`{}` does not run under `{profile}` either", other.label);
                    return Err(format!("{at}.row: {why}"));
                }
            }
        }
        Ok(())
    }

    /// How the cells stop.
    pub fn stopping(&self) -> Stopping {
        Stopping {
            seeds_min: self.seeds,
            seeds_max: self.seeds_max.unwrap_or(self.seeds),
            seeds_step: self.seeds_step,
            half_width_max: self.half_width_max,
        }
    }

    /// How the phase points stop.
    pub fn phase_stopping(&self) -> Option<Stopping> {
        self.phase.as_ref().map(|p| Stopping {
            seeds_min: p.seeds,
            seeds_max: p.seeds_max.max(p.seeds),
            seeds_step: self.seeds_step,
            half_width_max: self.half_width_max,
        })
    }

    /// A file name for a cell's scenario.
    pub fn cell_name(protocol: &MatrixProtocol, profile: &MatrixProfile) -> String {
        format!("{}--{}", clean(&protocol.label), clean(&profile.label))
    }

    /// The scenario of one cell, as TOML text (written next to the report, so each failing
    /// seed replays with `locksim run`).
    pub fn cell_toml(&self, protocol: &MatrixProtocol, profile: &MatrixProfile) -> String {
        let about = format!(
            "{} under {}: {} / {}",
            protocol.label, profile.label, protocol.description, profile.description
        );
        let name = Self::cell_name(protocol, profile);
        self.scenario_toml(protocol, &name, &about, &profile.faults_random)
    }

    fn scenario_toml(
        &self,
        protocol: &MatrixProtocol,
        name: &str,
        about: &str,
        faults: &toml::Table,
    ) -> String {
        let mut table = self.base.clone();
        table.insert("name".into(), name.into());
        table.insert("description".into(), about.into());
        table.insert("protocol".into(), protocol.protocol.clone().into());
        if let Some(r) = &protocol.resource {
            table.insert("resource".into(), r.clone().into());
        }
        if let Some(w) = &protocol.workload {
            let mut workload = match table.get("workload") {
                Some(toml::Value::Table(base)) => base.clone(),
                _ => toml::Table::new(),
            };
            workload.extend(w.clone());
            table.insert("workload".into(), workload.into());
        }
        if !faults.is_empty() {
            table.insert("faults_random".into(), faults.clone().into());
        }
        toml::to_string(&table).expect("a TOML table serialises")
    }

    /// The scenario of a row's uncontended cost runs: the base with one client and no
    /// faults. Returns (name, TOML text).
    pub fn uncontended_toml(&self, protocol: &MatrixProtocol) -> (String, String) {
        let name = format!("cost--{}", clean(&protocol.label));
        let about = format!("{} alone: one client, no faults (its cost)", protocol.label);
        let mut base = self.clone();
        let workload = base
            .base
            .entry("workload")
            .or_insert_with(|| toml::Table::new().into());
        if let Some(w) = workload.as_table_mut() {
            w.insert("clients".into(), 1.into());
        }
        let text = base.scenario_toml(protocol, &name, &about, &toml::Table::new());
        (name, text)
    }

    /// The scenario of one phase point: `protocol` under faults of the `axis` (see
    /// [`PHASE_AXES`]) of size `multiple` × its TTL (as `registry` configures it). Returns
    /// (name, size in ms, TOML text).
    pub fn phase_toml(
        &self,
        protocol: &MatrixProtocol,
        axis: &str,
        multiple: f64,
        registry: &Registry,
    ) -> (String, u64, String) {
        let spec = self.phase.clone().unwrap_or_default();
        let ttl_ms = protocol.ttl_ms(registry);
        let size_ms = ((ttl_ms as f64 * multiple).round() as u64).max(1);
        let (mut faults, keys) = match axis {
            "pause" => (spec.pause, ["pause_ms_min", "pause_ms_max"]),
            _ => (spec.clock_jump, ["clock_jump_ms_min", "clock_jump_ms_max"]),
        };
        for k in keys {
            faults.insert(k.into(), (size_ms as i64).into());
        }
        let name = format!("phase--{}--{axis}-{multiple}x", clean(&protocol.label));
        let about = format!(
            "{} under {axis} faults of {multiple} × its TTL ({size_ms} ms)",
            protocol.label
        );
        let text = self.scenario_toml(protocol, &name, &about, &faults);
        (name, size_ms, text)
    }

    /// Parses one cell's scenario (for checking the matrix before running it).
    pub fn cell(
        &self,
        protocol: &MatrixProtocol,
        profile: &MatrixProfile,
    ) -> Result<Scenario, String> {
        let name = Self::cell_name(protocol, profile);
        Scenario::parse(&self.cell_toml(protocol, profile), &name).map_err(|e| e.to_string())
    }
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
