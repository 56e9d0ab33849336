//! Bounds on every number a scenario file holds, and the seed's two spellings.
//!
//! A number near a type's limit is never a real configuration, but it can wrap arithmetic
//! deep in a model (`now + ttl` with a `ttl_ms` near `i64::MAX` is a key that expired before
//! it was set). So every number is checked against [`BOUNDS`] by its key's name before the
//! file is read into types, wherever it is (the workload, the network, faults, a protocol's
//! parameters): a bound can be stated once and the models can add, multiply and convert
//! to nanoseconds without overflowing (10⁹ ms is 10¹⁵ ns, four thousand times below
//! `i64::MAX`).

use serde::{Deserialize, Deserializer, Serializer};

/// The largest duration (or instant) in ms a scenario may name: about 11.6 days of
/// simulated time.
pub const DURATION_MS_MAX: f64 = 1e9;

/// The most clients a scenario may run.
pub const CLIENTS_MAX: f64 = 10_000.0;

/// The most servers of one kind (Redlock instances, replicas, Sentinels) a scenario may run.
pub const SERVERS_MAX: f64 = 99.0;

/// One rule: what the number is, which keys it applies to, and its least and greatest value.
pub type Bound = (&'static str, fn(&str) -> bool, f64, f64);

/// The bounds, by key: the first rule whose test matches a key applies. `(what, test,
/// min, max)`. (`seed` is checked where it is read: any `u64`.)
pub const BOUNDS: &[Bound] = &[
    (
        "a probability",
        |k| k.ends_with("probability") || k == "loss_rate",
        0.0,
        1.0,
    ),
    (
        "a drift in ppm",
        |k| k.contains("ppm"),
        -499_999.0,
        499_999.0,
    ),
    (
        "a clock step in ms",
        |k| k.contains("delta_ms") || k.contains("offset_ms"),
        -DURATION_MS_MAX,
        DURATION_MS_MAX,
    ),
    (
        "a duration in ms",
        |k| k.contains("_ms"),
        0.0,
        DURATION_MS_MAX,
    ),
    ("a factor", |k| k.ends_with("factor"), 0.0, 1.0),
    // Each client is a node with its own tasks: 10,000 clients run 10 s of simulated time
    // in about 32 s and 150 MB (docs/scenarios.md), a million would need 1.3 GB
    // before the first grant.
    ("a number of clients", |k| k == "clients", 0.0, CLIENTS_MAX),
    // Servers talk to each other or are asked in turn by every client: 101 Redlock
    // instances run 10 s in a quarter of a second; 999,999 never finished starting.
    (
        "a number of servers",
        |k| matches!(k, "instances" | "replicas" | "sentinels"),
        0.0,
        SERVERS_MAX,
    ),
    ("a count", |_| true, 0.0, 1_000_000.0),
];

/// Checks every number of a parsed file against [`BOUNDS`]; the error names the field (a
/// dotted path such as `faults[2].duration_ms`) and the bound.
pub fn check(table: &toml::Table) -> Result<(), (String, String)> {
    walk(table, "")
}

fn walk(table: &toml::Table, prefix: &str) -> Result<(), (String, String)> {
    for (key, value) in table {
        let field = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        check_value(key, &field, value)?;
    }
    Ok(())
}

fn check_value(key: &str, field: &str, value: &toml::Value) -> Result<(), (String, String)> {
    let number = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        toml::Value::Table(t) => return walk(t, field),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_value(key, &format!("{field}[{i}]"), item)?;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    if key == "seed" {
        return Ok(());
    }
    let (what, _, min, max) = BOUNDS
        .iter()
        .find(|(_, applies, ..)| applies(key))
        .expect("the last rule applies to every key");
    if number.is_finite() && (*min..=*max).contains(&number) {
        return Ok(());
    }
    Err((
        field.to_owned(),
        format!("{value} is out of bounds: {what} must be between {min} and {max}"),
    ))
}

/// `seed` as an integer or, for seeds above `i64::MAX` (TOML integers are signed 64-bit),
/// as a string of digits.
pub mod seed {
    use super::*;

    /// Writes a seed as an integer where TOML can hold it, else as a string.
    pub fn serialize<S: Serializer>(seed: &u64, s: S) -> Result<S::Ok, S::Error> {
        match i64::try_from(*seed) {
            Ok(n) => s.serialize_i64(n),
            Err(_) => s.serialize_str(&seed.to_string()),
        }
    }

    /// Reads a seed from an integer or a string of digits (`_` allowed).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelling {
            Integer(i64),
            Text(String),
        }
        let bad = || {
            serde::de::Error::custom(format!(
                "seed: must be a whole number from 0 to {}, as an integer or a string",
                u64::MAX
            ))
        };
        match Spelling::deserialize(d).map_err(|_| bad())? {
            Spelling::Integer(n) => u64::try_from(n).map_err(|_| bad()),
            Spelling::Text(t) => t.replace('_', "").parse().map_err(|_| bad()),
        }
    }
}
