//! The history parser on mutated valid files and random bytes: it never panics, every
//! rejection names the file and the line (and the field, where one is at fault), and the
//! checker never panics on what it accepts.

use locksim_check::history::{read_jsonl, write_jsonl, ReadError};
use locksim_check::{check, Verdict};
use proptest::prelude::*;
use std::path::Path;

/// Every reference history of the workspace, as text.
fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for dir in ["tests/histories", "../sim/tests/histories"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            files.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
    }
    assert!(files.len() >= 10, "found the reference histories");
    files
}

/// One mutation of a text: (kind, position, byte).
fn mutate(text: &str, (kind, at, byte): (u8, usize, u8)) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    let at = at % (b.len() + 1);
    match kind % 6 {
        0 => b.insert(at, byte),
        1 if at < b.len() => {
            b.remove(at);
        }
        2 if at < b.len() => b[at] = byte,
        3 => b.truncate(at),
        // A number made huge, negative or fractional.
        4 => {
            let digit = b.iter().skip(at).position(u8::is_ascii_digit);
            if let Some(d) = digit {
                let junk: &[u8] = [&b"99999999999999999999"[..], b"-1", b"1.5"][byte as usize % 3];
                b.splice(at + d..at + d + 1, junk.iter().copied());
            }
        }
        _ => {
            // A line repeated (indexes and times then go wrong).
            let line_end = b
                .iter()
                .skip(at)
                .position(|c| *c == b'\n')
                .map_or(b.len(), |p| at + p);
            let line_start = b[..line_end]
                .iter()
                .rposition(|c| *c == b'\n')
                .map_or(0, |p| p + 1);
            let line = b[line_start..line_end].to_vec();
            b.splice(line_start..line_start, line.into_iter().chain([b'\n']));
        }
    }
    b
}

fn assert_clear(input: &[u8]) -> Result<(), TestCaseError> {
    match read_jsonl("f.jsonl", input) {
        Ok(history) => {
            // What parses round-trips: written out and read back, the same events.
            let mut out = Vec::new();
            write_jsonl(&history, &mut out).unwrap();
            prop_assert_eq!(read_jsonl("g.jsonl", &out[..]).ok(), Some(history.clone()));
            // And its report is consistent: the verdict is the worst property's, and a
            // property is invalid exactly when it counts violations.
            let report = check(&history);
            let worst =
                (report.properties.iter()).fold(Verdict::Valid, |v, p| v.combine(p.verdict));
            prop_assert_eq!(report.verdict, worst);
            for p in &report.properties {
                prop_assert_eq!(
                    p.violation_count > 0,
                    p.verdict == Verdict::Invalid,
                    "{:?}",
                    p
                );
            }
        }
        Err(ReadError::Line { line, message, .. }) => {
            let lines = input.split(|c| *c == b'\n').count();
            prop_assert!(line >= 1 && line <= lines, "line {} of {}", line, lines);
            prop_assert!(!message.is_empty());
            let e = ReadError::Line {
                path: "f.jsonl".into(),
                line,
                message,
            };
            prop_assert!(
                e.to_string().starts_with(&format!("f.jsonl:{line}: ")),
                "{}",
                e
            );
        }
        Err(e) => prop_assert!(false, "an IO error from a byte slice: {}", e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_histories_are_rejected_clearly_or_checked(
        file in any::<prop::sample::Index>(),
        mutations in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let corpus = corpus();
        let mut text = corpus[file.index(corpus.len())].clone();
        for m in mutations {
            text = String::from_utf8_lossy(&mutate(&text, m)).into_owned();
        }
        assert_clear(text.as_bytes())?;
    }

    #[test]
    fn random_bytes_are_rejected_clearly(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        assert_clear(&bytes)?;
    }
}

#[test]
fn a_wrong_type_names_the_field() {
    let line = r#"{"index":0,"time_ns":"soon","node":"c1","kind":"ok","op":"cs_enter"}"#;
    let e = read_jsonl("f.jsonl", line.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("f.jsonl:1: not a valid event: field `time_ns`: invalid type"),
        "{e}"
    );
    let e = read_jsonl("f.jsonl", &b"\n\xff\xfe\n"[..])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("f.jsonl:2: not a valid event: not UTF-8"),
        "{e}"
    );
}

/// Two events on one line, or an event followed by junk or a NUL, is refused naming the
/// line: reading only the first event would drop the second one's violation unseen.
#[test]
fn anything_after_the_event_on_its_line_is_refused() {
    let first = r#"{"index":0,"time_ns":5,"node":"c1","kind":"ok","op":"cs_enter","grant":"g1"}"#;
    let second = r#"{"index":1,"time_ns":6,"node":"c2","kind":"ok","op":"cs_enter","grant":"g2"}"#;
    for after in [second, "x", "\0", " }"] {
        let text = format!("{first}{after}\n");
        let e = read_jsonl("f.jsonl", text.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f.jsonl:1: not a valid event: more after the event (column"),
            "{after:?}: {e}"
        );
        assert!(e.ends_with("one event per line"), "{e}");
    }
    // Trailing whitespace is not more: the line is the event.
    let text = format!("{first}  \t\n");
    assert_eq!(read_jsonl("f.jsonl", text.as_bytes()).unwrap().len(), 1);
}
