//! Reference histories in the forms real recorders produce, with known verdicts: events on
//! the recording node's own clock with an error bound (`local-clocks-*`), critical-section
//! boundaries bracketed by an invoke (`windows-*`), and an acquire whose outcome was never
//! learned (`info-enter`). Each pins one rule: a violation only where the sections
//! certainly overlap, `unknown` (with the reason) where they may. The simulator's own
//! reference histories are in `sim/tests/histories/`.

use locksim_check::history::read_jsonl;
use locksim_check::{check, Property, Verdict};
use std::path::Path;

use Verdict::{Invalid, NotApplicable, Unknown, Valid};

/// A file, its mutual-exclusion verdict, and text its reason or first witness must hold.
const KNOWN: &[(&str, Verdict, &str)] = &[
    (
        "local-clocks-overlap.jsonl",
        Invalid,
        "app2 held grant app2#1 from between 1395.000ms and 1405.000ms",
    ),
    (
        "local-clocks-may-overlap.jsonl",
        Unknown,
        "1 pair of critical sections may overlap",
    ),
    (
        "windows-overlap.jsonl",
        Invalid,
        "to between 50.000ms and 52.000ms",
    ),
    (
        "windows-may-overlap.jsonl",
        Unknown,
        "app1 held grant app1#1 from between 0.000ms and 2.000ms to between 50.000ms and 58.000ms",
    ),
    ("windows-handover.jsonl", Valid, ""),
    ("info-enter.jsonl", Unknown, "c2 may have held grant c2#1"),
];

#[test]
fn reference_histories_keep_their_verdicts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories");
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        files,
        KNOWN.len(),
        "every file in {} is pinned here",
        dir.display()
    );
    for (file, verdict, text) in KNOWN {
        let path = dir.join(file);
        let input = std::fs::read_to_string(&path).unwrap();
        let history = read_jsonl(file, input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let report = check(&history);
        let me = report.result(Property::MutualExclusion).unwrap();
        assert_eq!(me.verdict, *verdict, "{file}: {me:?}");
        let said = match verdict {
            Invalid => report.violations[0].description.clone(),
            Unknown => me.reason.clone().unwrap(),
            Valid | NotApplicable => String::new(),
        };
        assert!(said.contains(text), "{file}: {said}");
    }
}

#[test]
fn local_clock_events_need_order_only_within_their_node() {
    let line = |i: u64, t: u64, node: &str, err: &str| {
        format!(r#"{{"index":{i},"time_ns":{t},"node":"{node}","kind":"ok","op":"note"{err}}}"#)
    };
    let err = r#","clock_error_ns":1000"#;
    let across = [line(0, 50, "a", err), line(1, 10, "b", err)].join("\n");
    assert!(read_jsonl("x.jsonl", across.as_bytes()).is_ok());
    let within = [line(0, 50, "a", err), line(1, 10, "a", err)].join("\n");
    let e = read_jsonl("x.jsonl", within.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("x.jsonl:2: not a valid event: field `time_ns`"),
        "{e}"
    );
    assert!(e.contains("same node's"), "{e}");
    let true_time = [line(0, 50, "a", ""), line(1, 10, "b", "")].join("\n");
    let e = read_jsonl("x.jsonl", true_time.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("earlier than the previous event's 50"), "{e}");
}
