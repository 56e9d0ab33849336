//! The comparison matrix: protocols × fault profiles, each cell a scenario built from a
//! shared base. `locksim compare` runs every cell over the same seeds.
//!
//! The matrix file (default `scenarios/compare/matrix.toml`) has a `[base]` table (any
//! scenario keys but `protocol`, `faults`, `faults_random` and `expect`), a list of
//! `[[protocols]]` (a `label`, a `description`, the `[protocols.protocol]` table as in a
//! scenario, optionally a `[protocols.resource]` table) and a list of `[[profiles]]` (a
//! `label`, a `description` and a `[profiles.faults_random]` table; use `@servers` and
//! `@clients` in node lists so one profile fits every protocol).

use crate::scenario::Scenario;
use serde::Deserialize;
use std::path::Path;

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

/// The whole matrix.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Report title.
    pub title: String,
    /// Seeds per cell (1..=seeds).
    #[serde(default = "d_seeds")]
    pub seeds: u64,
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

const CELL_KEYS: [&str; 4] = ["protocol", "faults", "faults_random", "expect"];

impl Matrix {
    /// Reads a matrix file; errors name the file (and line, for syntax errors).
    pub fn load(path: impl AsRef<Path>) -> Result<Matrix, String> {
        let path = path.as_ref();
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
        let matrix: Matrix = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| crate::scenario::line_of(&text, s.start));
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
        Ok(matrix)
    }

    /// A file name for a cell's scenario.
    pub fn cell_name(protocol: &MatrixProtocol, profile: &MatrixProfile) -> String {
        let clean = |s: &str| {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        };
        format!("{}--{}", clean(&protocol.label), clean(&profile.label))
    }

    /// The scenario of one cell, as TOML text (written next to the report, so each failing
    /// seed replays with `locksim run`).
    pub fn cell_toml(&self, protocol: &MatrixProtocol, profile: &MatrixProfile) -> String {
        let mut table = self.base.clone();
        table.insert("name".into(), Self::cell_name(protocol, profile).into());
        table.insert(
            "description".into(),
            format!(
                "{} under {}: {} / {}",
                protocol.label, profile.label, protocol.description, profile.description
            )
            .into(),
        );
        table.insert("protocol".into(), protocol.protocol.clone().into());
        if let Some(r) = &protocol.resource {
            table.insert("resource".into(), r.clone().into());
        }
        if !profile.faults_random.is_empty() {
            table.insert("faults_random".into(), profile.faults_random.clone().into());
        }
        toml::to_string(&table).expect("a TOML table serialises")
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
