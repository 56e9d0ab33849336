//! The verdict on top of a report, generated from the data: per protocol row one sentence
//! (where it is safe, where it breaks, what it costs), then the evidence: where its
//! critical sections overlapped, where fencing's guarantee broke without damage, and the
//! catalog stories that apply to its configuration (same protocol, settings and guard).

use crate::cost::Cost;
use crate::stats::{pct, ranks, Share};
use crate::{CellSummary, Comparison};

/// What the data says about one protocol row.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolVerdict {
    /// The row's label.
    pub protocol: String,
    /// Profiles where no run did damage or broke fencing latently, with the damage share.
    pub safe: Vec<(String, Share)>,
    /// Profiles where runs did damage.
    pub damaged: Vec<(String, Share)>,
    /// Profiles where fencing's guarantee broke in runs without damage.
    pub latent: Vec<(String, Share)>,
    /// Profiles where critical sections overlapped.
    pub overlap: Vec<(String, Share)>,
    /// The row's cost, if measured.
    pub cost: Option<Cost>,
    /// Catalog stories of this configuration that did damage.
    pub damage_stories: Vec<String>,
    /// Catalog stories of this configuration that broke fencing without damage.
    pub latent_stories: Vec<String>,
    /// Catalog stories of this configuration that showed overlap only.
    pub overlap_stories: Vec<String>,
}

/// The catalog stories that apply to the row (none where the report has no rows).
pub(crate) fn stories<'a>(c: &'a Comparison, label: &str) -> Vec<&'a crate::CatalogEntry> {
    let Some(row) = c.row(label) else {
        return vec![];
    };
    c.catalog
        .iter()
        .filter(|e| e.setup.applies_to(&row.setup))
        .collect()
}

/// The verdict of every protocol row, in matrix order.
pub fn verdicts(c: &Comparison) -> Vec<ProtocolVerdict> {
    c.protocols
        .iter()
        .map(|(label, _)| {
            let cells: Vec<&CellSummary> =
                c.cells.iter().filter(|x| &x.protocol == label).collect();
            let pick = |f: &dyn Fn(&CellSummary) -> Option<Share>| -> Vec<(String, Share)> {
                cells
                    .iter()
                    .filter_map(|x| f(x).map(|s| (x.profile.clone(), s)))
                    .collect()
            };
            let told = stories(c, label);
            let names = |f: &dyn Fn(&CellSummary) -> bool| -> Vec<String> {
                told.iter()
                    .filter(|e| f(&e.outcome))
                    .map(|e| e.name.clone())
                    .collect()
            };
            ProtocolVerdict {
                protocol: label.clone(),
                safe: pick(&|x| (x.harm.n > 0 && x.harm.k == 0).then_some(x.damage)),
                damaged: pick(&|x| (x.damage.k > 0).then_some(x.damage)),
                latent: pick(&|x| (x.latent.k > 0).then_some(x.latent)),
                overlap: pick(&|x| (x.overlap.k > 0).then_some(x.overlap)),
                cost: c.row(label).and_then(|r| r.cost.clone()),
                damage_stories: names(&|o| o.damage.k > 0),
                latent_stories: names(&|o| o.damage.k == 0 && o.latent.k > 0),
                overlap_stories: names(&|o| o.harm.k == 0 && o.overlap.k > 0),
            }
        })
        .collect()
}

fn list(items: &[(String, Share)]) -> String {
    items
        .iter()
        .map(|(p, s)| format!("{p} {}", s.text()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(items: &[(String, Share)]) -> String {
    let names: Vec<&str> = items.iter().map(|(p, _)| p.as_str()).collect();
    names.join(", ")
}

impl ProtocolVerdict {
    /// The verdict in one sentence: where it is safe, where it breaks, what it costs.
    pub fn sentence(&self) -> String {
        let mut parts = vec![];
        if !self.safe.is_empty() {
            let bound = self.safe.iter().map(|(_, s)| s.hi).fold(0.0, f64::max);
            parts.push(format!(
                "safe under {} (no damage; at most {} of runs, 95%)",
                names(&self.safe),
                pct(bound)
            ));
        }
        if !self.damaged.is_empty() {
            parts.push(format!("damages data under {}", list(&self.damaged)));
        }
        if !self.latent.is_empty() {
            parts.push(format!(
                "fencing broken without damage under {}",
                names(&self.latent)
            ));
        }
        if let Some(c) = self.cost.as_ref().filter(|c| c.measured()) {
            parts.push(format!(
                "costs {:.1} ms per uncontended acquire (p99 {:.1}), {:.1} messages and {:.1} \
                 fsyncs per acquisition",
                c.acquire_ms_p50, c.acquire_ms_p99, c.messages_per_acquire, c.fsyncs_per_acquire
            ));
        }
        parts.join("; ")
    }

    /// The evidence after the sentence: overlap, latent breaks, and the applicable stories.
    pub fn evidence(&self) -> String {
        let mut parts = vec![];
        if self.overlap.is_empty() {
            parts.push("no overlap seen".to_string());
        } else {
            parts.push(format!("overlap under {}", list(&self.overlap)));
        }
        if !self.latent.is_empty() {
            parts.push(format!("latent under {}", list(&self.latent)));
        }
        for (what, stories) in [
            (
                "catalog stories of this configuration with damage",
                &self.damage_stories,
            ),
            ("with a latent break only", &self.latent_stories),
            ("with overlap only", &self.overlap_stories),
        ] {
            if !stories.is_empty() {
                parts.push(format!("{what}: {}", stories.join(", ")));
            }
        }
        parts.join("; ")
    }

    /// Sentence and evidence in one line (for the terminal).
    pub fn line(&self) -> String {
        format!("{}. Evidence: {}", self.sentence(), self.evidence())
    }
}

/// Protocol rows of one rank: (rank, labels).
pub type RankGroup = (usize, Vec<String>);

/// Per profile, the protocol rows grouped by damage rank ([`ranks`]): rows in one group are
/// not ranked apart.
pub fn ranking(c: &Comparison) -> Vec<(String, Vec<RankGroup>)> {
    c.profiles
        .iter()
        .map(|(profile, _)| {
            let cells: Vec<&CellSummary> =
                c.cells.iter().filter(|x| &x.profile == profile).collect();
            let shares: Vec<Share> = cells.iter().map(|x| x.damage).collect();
            let r = ranks(&shares);
            let mut groups: Vec<RankGroup> = vec![];
            let mut order: Vec<usize> = (0..cells.len()).collect();
            order.sort_by(|a, b| r[*a].cmp(&r[*b]).then(shares[*a].k.cmp(&shares[*b].k)));
            for i in order {
                match groups.last_mut() {
                    Some((rank, names)) if *rank == r[i] => names.push(cells[i].protocol.clone()),
                    _ => groups.push((r[i], vec![cells[i].protocol.clone()])),
                }
            }
            (profile.clone(), groups)
        })
        .collect()
}

/// A ranking group in words: `1. a = b = c`.
pub fn group_text(rank: usize, names: &[String]) -> String {
    format!("{rank}. {}", names.join(" = "))
}
