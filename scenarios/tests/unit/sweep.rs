//! The tests of `src/sweep.rs`.

use locksim_scenarios::runner::Stats;
use locksim_scenarios::sweep::*;
use locksim_sim::{Property, Verdict};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

#[test]
fn seed_ranges_parse_both_ways() {
    let r: SeedRange = "0..10".parse().unwrap();
    assert_eq!((r.start, r.last), (0, 9));
    let r: SeedRange = "5..=7".parse().unwrap();
    assert_eq!((r.start, r.last), (5, 7));
    let r: SeedRange = "1_000..2_000".parse().unwrap();
    assert_eq!((r.start, r.last), (1000, 1999));
    assert!("0..0".parse::<SeedRange>().unwrap_err().contains("empty"));
    assert!("7..7".parse::<SeedRange>().unwrap_err().contains("empty"));
    assert!("7".parse::<SeedRange>().is_err());
    assert!("a..b".parse::<SeedRange>().is_err());
}

#[test]
fn the_whole_u64_range_counts_two_to_the_64_seeds() {
    let all: SeedRange = "0..=18446744073709551615".parse().unwrap();
    assert_eq!(all.count(Shard::ALL), 1u128 << 64);
    let half = Shard { index: 1, count: 2 };
    assert_eq!(all.count(half), 1u128 << 63);
    let one: SeedRange = "18446744073709551615..=18446744073709551615"
        .parse()
        .unwrap();
    assert_eq!(one.count(Shard::ALL), 1);
}

#[test]
fn shards_partition_the_range() {
    let range: SeedRange = "3..40".parse().unwrap();
    let mut all: Vec<u64> = (0..3)
        .flat_map(|k| range.seeds(Shard { index: k, count: 3 }))
        .collect();
    all.sort_unstable();
    assert_eq!(all, range.seeds(Shard::ALL).collect::<Vec<_>>());
    for (start, end) in [(0, 1), (3, 40), (5, 6), (7, 100), (10, 13)] {
        let range = SeedRange {
            start,
            last: end - 1,
        };
        for count in 1..6 {
            for index in 0..count {
                let shard = Shard { index, count };
                let naive: Vec<u64> = (start..end).filter(|s| shard.contains(*s)).collect();
                assert_eq!(
                    range.seeds(shard).collect::<Vec<_>>(),
                    naive,
                    "{range} {shard}"
                );
                assert_eq!(range.count(shard), naive.len() as u128, "{range} {shard}");
            }
        }
    }
    assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
    let top: SeedRange = format!("{}..={}", u64::MAX - 4, u64::MAX).parse().unwrap();
    let seeds: Vec<u64> = top.seeds(Shard { index: 1, count: 2 }).collect();
    assert_eq!(seeds, vec![u64::MAX - 4, u64::MAX - 2, u64::MAX]);
    assert_eq!(top.count(Shard::ALL), 5);
    assert_eq!(top.count(Shard { index: 1, count: 2 }), 3);
    assert!(top.contains(u64::MAX) && !top.contains(u64::MAX - 5));
    let edge = SeedRange {
        start: u64::MAX,
        last: u64::MAX,
    };
    assert_eq!(
        edge.count(Shard { index: 0, count: 7 }),
        0,
        "u64::MAX % 7 != 0"
    );
    assert_eq!(edge.seeds(Shard { index: 0, count: 7 }).count(), 0);
    assert!("3/3".parse::<Shard>().is_err());
    assert!("0/0".parse::<Shard>().is_err());
}

fn result(seed: u64, kinds: &[Property]) -> SeedResult {
    SeedResult {
        seed,
        scenario: "s".into(),
        scenario_hash: "f".into(),
        path: String::new(),
        protocol: "p".into(),
        verdict: if kinds.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        },
        violations: kinds.iter().map(|k| (*k, 1)).collect(),
        reasons: BTreeMap::new(),
        trace_hash: format!("{seed:016x}"),
        stats: Stats::default(),
        expect_met: None,
        expect_unmet: vec![],
        error: None,
    }
}

#[test]
fn summary_counts_each_seed_once_and_keeps_the_lowest_failures() {
    let mut s = Summary::default();
    for seed in (0..30).rev() {
        let kinds: &[Property] = if seed % 2 == 0 {
            &[Property::MutualExclusion]
        } else {
            &[]
        };
        s.add(&result(seed, kinds));
        s.add(&result(seed, kinds));
    }
    assert_eq!(s.runs, 30);
    assert_eq!(s.violated(), 15);
    assert_eq!(s.violations_by_kind[&Property::MutualExclusion], 15);
    let failing: Vec<u64> = s.failing.keys().copied().collect();
    assert_eq!(failing, vec![0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
}

/// The summary of `line` over `seeds`, added in order and in reverse (a sweep's results come in
/// the order its runs finish): both orders must give the same summary.
fn summed_both_ways(seeds: std::ops::Range<u64>, line: impl Fn(u64) -> SeedResult) -> Summary {
    let (mut up, mut down) = (Summary::default(), Summary::default());
    for seed in seeds.clone() {
        up.add(&line(seed));
    }
    for seed in seeds.rev() {
        down.add(&line(seed));
    }
    assert_eq!(up, down, "the summary depends on the order results came in");
    up
}

#[test]
fn an_unmet_expect_reaches_the_summary_with_its_lowest_seed_whatever_the_order() {
    let unmet = |seed: u64| SeedResult {
        expect_met: Some(seed.is_multiple_of(2)),
        expect_unmet: match seed.is_multiple_of(2) {
            true => vec![],
            false => vec![format!("fencing: expected holds, got n/a ({seed})")],
        },
        ..result(seed, &[])
    };
    let up = summed_both_ways(2..9, unmet);
    assert_eq!(up.expect_not_met, 3, "seeds 3, 5, 7");
    let first = up.expect_first_unmet.clone().unwrap();
    assert_eq!(
        first,
        (3, vec!["fencing: expected holds, got n/a (3)".into()])
    );
    let line = serde_json::to_string(&unmet(3)).unwrap();
    assert!(line.contains(r#""expect_unmet":["fencing"#), "{line}");
    assert!(!serde_json::to_string(&unmet(2))
        .unwrap()
        .contains("expect_unmet"));
}

#[test]
fn unknown_reasons_reach_the_summary_whatever_the_order() {
    let unknown = |seed: u64| SeedResult {
        verdict: Verdict::Unknown,
        reasons: [(Property::LostUpdate, format!("why {seed}"))].into(),
        ..result(seed, &[])
    };
    let up = summed_both_ways(3..7, unknown);
    let tally = &up.unknown[&Property::LostUpdate];
    assert_eq!(
        (tally.runs, tally.seed, tally.reason.as_str()),
        (4, 3, "why 3")
    );
    let line = serde_json::to_string(&unknown(3)).unwrap();
    assert!(
        line.contains(r#""reasons":{"lost_update":"why 3"}"#),
        "{line}"
    );
    assert_eq!(
        serde_json::from_str::<SeedResult>(&line).unwrap(),
        unknown(3)
    );
}

/// A file in a fresh directory of its own, removed (with the directory) when the test
/// passes.
struct TempFile(PathBuf);

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let (false, Some(dir)) = (std::thread::panicking(), self.0.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn temp_file(name: &str) -> TempFile {
    let dir = std::env::temp_dir().join(format!("locksim-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempFile(dir.join(name))
}

#[test]
fn resume_cuts_a_torn_line_and_returns_what_was_done() {
    let path = temp_file("torn.jsonl");
    let mut done = vec![];
    let mut file = ResultsFile::open(&path, "s", "f", false, |r| done.push(r)).unwrap();
    assert!(done.is_empty());
    file.append(&result(1, &[])).unwrap();
    file.append(&result(2, &[Property::Fencing])).unwrap();
    drop(file);
    let mut raw = OpenOptions::new().append(true).open(&path).unwrap();
    raw.write_all(br#"{"seed":3,"scena"#).unwrap();
    drop(raw);
    assert!(matches!(
        ResultsFile::open(&path, "s", "f", false, drop),
        Err(SweepError::NotEmpty { .. })
    ));
    assert!(matches!(
        ResultsFile::open(&path, "other", "f", true, drop),
        Err(SweepError::OtherScenario { line: 1, .. })
    ));
    assert!(matches!(
        ResultsFile::open(&path, "s", "edited", true, drop),
        Err(SweepError::EditedScenario { line: 1, .. })
    ));
    let mut done = vec![];
    let mut file = ResultsFile::open(&path, "s", "f", true, |r| done.push(r)).unwrap();
    assert_eq!(done, vec![result(1, &[]), result(2, &[Property::Fencing])]);
    file.append(&result(3, &[])).unwrap();
    let seeds: Vec<u64> = read_results(&path)
        .unwrap()
        .iter()
        .map(|r| r.seed)
        .collect();
    assert_eq!(seeds, vec![1, 2, 3]);
}

#[test]
fn a_malformed_complete_line_is_named() {
    let path = temp_file("bad.jsonl");
    let good = serde_json::to_string(&result(1, &[])).unwrap();
    std::fs::write(&path, format!("{good}\nnot json\n")).unwrap();
    let e = read_results(&path).unwrap_err();
    assert!(matches!(e, SweepError::Line { line: 2, .. }), "{e}");
}
