//! Golden trace hashes: every catalog file on seeds 1..=5, pinned in
//! `scenarios/golden/trace_hashes.tsv`. A run depends only on (scenario, seed), so these hashes
//! are the same on every machine and in every build; a refactor that changes one changed
//! behaviour. Re-blessing them is a deliberate commit of its own, with the reason:
//! `LOCKSIM_BLESS=1 cargo test --release -p locksim-scenarios --test scenarios golden_trace_hashes`.

use crate::common;

use std::collections::BTreeMap;

const SEEDS: u64 = 5;
const GOLDEN: &str = "golden/trace_hashes.tsv";

/// Every catalog file's name, sorted.
fn catalog_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(common::path("catalog"))
        .expect("the catalog directory exists")
        .map(|e| {
            e.expect("a readable entry")
                .file_name()
                .into_string()
                .unwrap()
        })
        .filter(|name| name.ends_with(".toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 39, "the catalog has {} files", files.len());
    files
}

/// `(file, seed) -> trace hash` as computed by this build.
fn computed() -> BTreeMap<(String, u64), String> {
    let mut hashes = BTreeMap::new();
    for file in catalog_files() {
        let prepared = common::prepared(&format!("catalog/{file}"));
        for seed in 1..=SEEDS {
            hashes.insert((file.clone(), seed), prepared.run(seed).trace_hash);
        }
    }
    hashes
}

/// `(file, seed) -> trace hash` as pinned in the golden file.
fn pinned() -> BTreeMap<(String, u64), String> {
    let text = std::fs::read_to_string(common::path(GOLDEN)).expect("the golden file exists");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 3, "{GOLDEN}: malformed line {line:?}");
            let seed = cols[1].parse().expect("a seed");
            ((cols[0].to_owned(), seed), cols[2].to_owned())
        })
        .collect()
}

fn write_golden(hashes: &BTreeMap<(String, u64), String>) {
    let mut text = String::from(
        "# file\tseed\ttrace hash: every catalog file on seeds 1..=5 (tests/golden_trace_hashes.rs)\n",
    );
    for ((file, seed), hash) in hashes {
        text.push_str(&format!("{file}\t{seed}\t{hash}\n"));
    }
    std::fs::write(common::path(GOLDEN), text).expect("the golden file is writable");
}

#[test]
fn every_catalog_file_has_its_pinned_trace_hashes() {
    let now = computed();
    if std::env::var_os("LOCKSIM_BLESS").is_some() {
        write_golden(&now);
        return;
    }
    let golden = pinned();
    let differ: Vec<String> = now
        .iter()
        .filter(|(key, hash)| golden.get(*key) != Some(*hash))
        .map(|((file, seed), hash)| {
            let was = golden
                .get(&(file.clone(), *seed))
                .map_or("(none)", |h| h.as_str());
            format!("  {file} seed {seed}: {hash}, pinned {was}")
        })
        .collect();
    let gone: Vec<String> = golden
        .keys()
        .filter(|key| !now.contains_key(*key))
        .map(|(file, seed)| format!("  {file} seed {seed}: pinned, no longer in the catalog"))
        .collect();
    assert!(
        differ.is_empty() && gone.is_empty(),
        "trace hashes differ from {GOLDEN} ({} of {}):\n{}\n{}",
        differ.len(),
        now.len(),
        differ.join("\n"),
        gone.join("\n")
    );
}
