//! Helpers the catalog tests share: load a scenario, swap its bug variant, and check that
//! it meets its `[expect]` on every seed of a range.

#![allow(dead_code)] // Each test binary uses its own subset.

use locksim_protocols::Registry;
use locksim_scenarios::{load, Prepared, RunResult, Scenario};
use locksim_sim::history::{History, Op};

/// A path under the `scenarios` crate.
pub fn path(relative: &str) -> String {
    format!("{}/{relative}", env!("CARGO_MANIFEST_DIR"))
}

/// The scenario file at `relative` (under the `scenarios` crate), ready to run.
pub fn prepared(relative: &str) -> Prepared {
    load(&path(relative), &Registry::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

/// A scenario given as text (named after `file` in replay lines).
pub fn parsed(text: &str, file: &str) -> Prepared {
    Scenario::parse(text, file)
        .and_then(|s| s.prepare(file, &Registry::builtin()))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The scenario file at `relative` with its `variant` line replaced.
pub fn with_variant(relative: &str, variant: &str) -> Prepared {
    let file = path(relative);
    let text = std::fs::read_to_string(&file).unwrap();
    let changed: Vec<String> = text
        .lines()
        .map(|l| match l.starts_with("variant = ") {
            true => format!("variant = \"{variant}\""),
            false => l.to_owned(),
        })
        .collect();
    assert_ne!(
        changed.join("\n"),
        text.trim_end(),
        "{relative} sets no variant"
    );
    parsed(&changed.join("\n"), &file)
}

/// The catalog file `file` with `from` replaced by `to` (which must occur): the same story
/// with one behaviour taken away.
pub fn changed(file: &str, from: &str, to: &str) -> Prepared {
    changed_at(&format!("catalog/{file}"), from, to)
}

/// The scenario file at `relative` (under the `scenarios` crate) with `from` replaced by
/// `to`, which must occur.
pub fn changed_at(relative: &str, from: &str, to: &str) -> Prepared {
    let path = path(relative);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{relative} has no {from:?}");
    parsed(&text.replace(from, to), &path)
}

/// Indexes of `node`'s notes whose text contains `part`.
pub fn notes(h: &History, node: &str, part: &str) -> Vec<u64> {
    h.iter()
        .filter(|e| e.node == node && e.op == Op::Note)
        .filter(|e| e.detail.as_deref().unwrap_or("").contains(part))
        .map(|e| e.index)
        .collect()
}

/// A run that missed its expectation, in one line with its replay command.
pub fn describe(r: &RunResult) -> String {
    let why = match (&r.error, &r.expect) {
        (Some(e), _) => e.clone(),
        (None, Some(e)) => e.mismatches.join("; "),
        (None, None) => "no [expect] section".into(),
    };
    format!("  {}: {why}", r.replay)
}

/// Asserts that the catalog file meets its `[expect]` on seeds `1..=seeds`.
pub fn assert_expect_met(file: &str, seeds: u64) {
    let p = prepared(&format!("catalog/{file}"));
    let failed: Vec<String> = (1..=seeds)
        .map(|seed| p.run(seed))
        .filter(|r| !r.expect.as_ref().is_some_and(|e| e.met))
        .map(|r| describe(&r))
        .collect();
    assert!(
        failed.is_empty(),
        "{file}: expectations not met on {} of {seeds} seeds:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
