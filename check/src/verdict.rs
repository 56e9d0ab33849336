//! What a check says: the verdict (worst wins), the properties, violations with witnesses.

use serde::{Deserialize, Serialize};

/// At most this many violations of each property are kept as witnesses; the counts in
/// [`PropertyResult::violation_count`] are complete.
pub const WITNESSES_MAX: usize = 5;

/// The outcome of a check, Jepsen style: worst wins when combining.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every property held.
    Valid,
    /// The history cannot decide (e.g. acknowledged writes but no record of the resource).
    Unknown,
    /// At least one property was violated; see the witnesses.
    Invalid,
}

impl Verdict {
    /// The worse of two verdicts.
    pub fn combine(self, other: Verdict) -> Verdict {
        self.max(other)
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Valid => "valid",
            Verdict::Unknown => "unknown",
            Verdict::Invalid => "invalid",
        })
    }
}

/// The safety properties the checker decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Property {
    /// No two grants' critical sections overlap in true time.
    MutualExclusion,
    /// The resource never accepts a stale or reused token.
    Fencing,
    /// No acknowledged increment of the counter is lost.
    LostUpdate,
}

impl Property {
    /// All properties, in report order.
    pub const ALL: [Property; 3] = [
        Property::MutualExclusion,
        Property::Fencing,
        Property::LostUpdate,
    ];

    /// The snake_case name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Property::MutualExclusion => "mutual_exclusion",
            Property::Fencing => "fencing",
            Property::LostUpdate => "lost_update",
        }
    }
}

impl std::fmt::Display for Property {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so widths and alignment work in tables.
        f.pad(self.name())
    }
}

/// One violation of a property, with the events that prove it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which property.
    pub kind: Property,
    /// What happened, in words.
    pub description: String,
    /// Indexes of the witness events in the history.
    pub events: Vec<u64>,
}

/// The result of one property: its verdict, and why where it is not valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyResult {
    /// Which property.
    pub property: Property,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why the verdict is `unknown`, where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How many violations of the property the history holds, all of them (for mutual
    /// exclusion: pairs of grants whose critical sections certainly overlap).
    #[serde(default)]
    pub violation_count: u64,
}

/// A property's result from its violations: `invalid` if there are any.
pub(crate) fn counted(property: Property, count: u64) -> PropertyResult {
    PropertyResult {
        property,
        verdict: if count > 0 {
            Verdict::Invalid
        } else {
            Verdict::Valid
        },
        reason: None,
        violation_count: count,
    }
}

/// Keeps `v` as a witness unless [`WITNESSES_MAX`] are kept already; counts it either way.
pub(crate) fn witness(
    violations: &mut Vec<Violation>,
    count: &mut u64,
    v: impl FnOnce() -> Violation,
) {
    *count += 1;
    if violations.len() < WITNESSES_MAX {
        violations.push(v());
    }
}
