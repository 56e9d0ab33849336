//! The verdict on top of a report, generated from the data: per protocol one line saying
//! under which fault profiles no harm was seen (with the bound the runs allow), where it was
//! harmed and how often, where its critical sections overlapped, and which catalog stories
//! of its protocol (whatever their configuration) do harm or overlap.

use crate::stats::{pct, ranks, Share};
use crate::{CellSummary, Comparison};

/// What the data says about one protocol row.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolVerdict {
    /// The row's label.
    pub protocol: String,
    /// Profiles where no run was harmed, with the harm share (0 of n).
    pub no_harm: Vec<(String, Share)>,
    /// Profiles where runs were harmed.
    pub harmed: Vec<(String, Share)>,
    /// Profiles where critical sections overlapped.
    pub overlap: Vec<(String, Share)>,
    /// Catalog scenarios of the same protocol that did harm.
    pub harm_stories: Vec<String>,
    /// Catalog scenarios of the same protocol that showed overlap without harm.
    pub overlap_stories: Vec<String>,
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
            let id = c.protocol_ids.get(label).unwrap_or(label);
            let stories = |harm: bool| -> Vec<String> {
                c.catalog
                    .iter()
                    .filter(|e| &e.protocol == id)
                    .filter(|e| match harm {
                        true => e.outcome.harm.k > 0,
                        false => e.outcome.harm.k == 0 && e.outcome.overlap.k > 0,
                    })
                    .map(|e| e.name.clone())
                    .collect()
            };
            ProtocolVerdict {
                protocol: label.clone(),
                no_harm: pick(&|x| (x.harm.n > 0 && x.harm.k == 0).then_some(x.harm)),
                harmed: pick(&|x| (x.harm.k > 0).then_some(x.harm)),
                overlap: pick(&|x| (x.overlap.k > 0).then_some(x.overlap)),
                harm_stories: stories(true),
                overlap_stories: stories(false),
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

impl ProtocolVerdict {
    /// The verdict in one line of words.
    pub fn line(&self) -> String {
        let mut parts = vec![];
        if !self.no_harm.is_empty() {
            let bound = self.no_harm.iter().map(|(_, s)| s.hi).fold(0.0, f64::max);
            let names: Vec<&str> = self.no_harm.iter().map(|(p, _)| p.as_str()).collect();
            parts.push(format!(
                "no harm seen under {} (at most {} of runs, 95%)",
                names.join(", "),
                pct(bound)
            ));
        }
        if !self.harmed.is_empty() {
            parts.push(format!("harmed under {}", list(&self.harmed)));
        }
        if self.overlap.is_empty() {
            parts.push("no overlap seen".into());
        } else {
            parts.push(format!("overlap under {}", list(&self.overlap)));
        }
        if !self.harm_stories.is_empty() {
            parts.push(format!(
                "catalog stories of its protocol with harm: {}",
                self.harm_stories.join(", ")
            ));
        }
        if !self.overlap_stories.is_empty() {
            parts.push(format!(
                "with overlap only: {}",
                self.overlap_stories.join(", ")
            ));
        }
        parts.join("; ")
    }
}

/// Protocol rows of one rank: (rank, labels).
pub type RankGroup = (usize, Vec<String>);

/// Per profile, the protocol rows grouped by harm rank ([`ranks`]): rows in one group are
/// not ranked apart.
pub fn ranking(c: &Comparison) -> Vec<(String, Vec<RankGroup>)> {
    c.profiles
        .iter()
        .map(|(profile, _)| {
            let cells: Vec<&CellSummary> =
                c.cells.iter().filter(|x| &x.profile == profile).collect();
            let shares: Vec<Share> = cells.iter().map(|x| x.harm).collect();
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
