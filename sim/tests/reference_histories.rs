//! Reference histories with known verdicts (as Elle keeps `histories/`): the checker must
//! keep deciding them the same way. Each file in `tests/histories/` is JSON Lines in the
//! simulator's format, the same that `locksim check` reads.
//!
//! - `redis-single-*.jsonl` were recorded by the simulator (`locksim run --history`) from
//!   the catalog scenarios of the same name, shortened: the healthy run, Kleppmann's GC
//!   pause without and with fencing, and the server clock jump.
//! - The others are written by hand, each to pin one rule of the checker's contract: a stale
//!   token that the resource accepts or rejects, a token reused after a crash that lost the
//!   counter, a hand-over where one client exits at the very instant the next enters plus
//!   a client that crashes inside its critical section (its CS ends there), and
//!   acknowledged writes with no record of the resource (lost update cannot be decided).

use locksim_sim::history::read_jsonl;
use locksim_sim::{check, Property, Verdict};
use std::path::Path;

use Verdict::{Invalid, NotApplicable, Unknown, Valid};

/// A history file and what the checker must say about it.
struct Known {
    file: &'static str,
    verdict: Verdict,
    mutual_exclusion: Verdict,
    fencing: Verdict,
    lost_update: Verdict,
    /// Witness event indexes of the first violation, where pinned.
    first_witness: Option<&'static [u64]>,
}

const KNOWN: &[Known] = &[
    Known {
        file: "redis-single-healthy.jsonl",
        verdict: Valid,
        mutual_exclusion: Valid,
        fencing: Valid,
        lost_update: Valid,
        first_witness: None,
    },
    Known {
        file: "redis-single-gc-pause.jsonl",
        verdict: Invalid,
        mutual_exclusion: Invalid,
        fencing: NotApplicable,
        lost_update: Invalid,
        first_witness: Some(&[2, 9, 15, 253]),
    },
    Known {
        file: "redis-single-gc-pause-fenced.jsonl",
        verdict: Invalid,
        mutual_exclusion: Invalid,
        fencing: Valid,
        lost_update: Valid,
        first_witness: Some(&[2, 9, 15, 253]),
    },
    Known {
        file: "redis-single-clock-jump.jsonl",
        verdict: Invalid,
        mutual_exclusion: Invalid,
        fencing: NotApplicable,
        lost_update: Invalid,
        first_witness: Some(&[2, 10, 16, 23]),
    },
    Known {
        file: "stale-token-accepted.jsonl",
        verdict: Invalid,
        mutual_exclusion: Invalid,
        fencing: Invalid,
        lost_update: Invalid,
        first_witness: Some(&[2, 9, 15, 22]),
    },
    Known {
        file: "stale-token-rejected.jsonl",
        verdict: Invalid,
        mutual_exclusion: Invalid,
        fencing: Valid,
        lost_update: Valid,
        first_witness: Some(&[2, 9, 15, 22]),
    },
    Known {
        file: "token-reuse.jsonl",
        verdict: Invalid,
        mutual_exclusion: Valid,
        fencing: Invalid,
        lost_update: Valid,
        first_witness: Some(&[6, 19]),
    },
    Known {
        file: "handover-and-crash.jsonl",
        verdict: Valid,
        mutual_exclusion: Valid,
        fencing: NotApplicable,
        lost_update: Valid,
        first_witness: None,
    },
    Known {
        file: "acknowledged-but-unrecorded.jsonl",
        verdict: Unknown,
        mutual_exclusion: Valid,
        fencing: Valid,
        lost_update: Unknown,
        first_witness: None,
    },
];

fn histories() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/histories"))
}

#[test]
fn reference_histories_keep_their_verdicts() {
    for known in KNOWN {
        let path = histories().join(known.file);
        let file = std::fs::File::open(&path).unwrap();
        let history = read_jsonl(known.file, std::io::BufReader::new(file)).unwrap();
        let report = check(&history);
        let name = known.file;
        assert_eq!(report.verdict, known.verdict, "{name}");
        assert_eq!(
            report.property(Property::MutualExclusion),
            known.mutual_exclusion,
            "{name}: mutual exclusion"
        );
        assert_eq!(
            report.property(Property::Fencing),
            known.fencing,
            "{name}: fencing"
        );
        assert_eq!(
            report.property(Property::LostUpdate),
            known.lost_update,
            "{name}: lost update"
        );
        let first = report.violations.first().map(|v| v.events.as_slice());
        assert_eq!(first, known.first_witness, "{name}: first witness");
    }
}

#[test]
fn every_reference_history_is_listed() {
    let mut files: Vec<String> = std::fs::read_dir(histories())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = KNOWN.iter().map(|k| k.file.to_owned()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "give every file in tests/histories a known verdict"
    );
}
