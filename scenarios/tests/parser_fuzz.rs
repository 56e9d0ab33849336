//! The scenario parser on mutated catalog files and random bytes: it never panics, and every
//! rejection names the file and the line, and the field wherever a value is at fault.

use locksim_protocols::Registry;
use locksim_scenarios::{Scenario, ScenarioError};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn catalog() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    let mut files: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10, "found the catalog");
    files
}

/// Replaces the `n`-th number of the text (any digits run) with `junk`.
fn replace_number(text: &str, n: usize, junk: &str) -> String {
    let bytes = text.as_bytes();
    let mut runs = vec![];
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            runs.push(start..i);
        } else {
            i += 1;
        }
    }
    if runs.is_empty() {
        return text.to_owned();
    }
    let r = runs[n % runs.len()].clone();
    format!("{}{junk}{}", &text[..r.start], &text[r.end..])
}

fn mutate(text: &str, kind: u8, at: usize, byte: u8) -> String {
    const JUNK: [&str; 8] = [
        "9223372036854775807",
        "-9223372036854775808",
        "-1",
        "1e300",
        "nan",
        "\"7\"",
        "0",
        "18446744073709551615",
    ];
    let mut b = text.as_bytes().to_vec();
    let at = at % (b.len() + 1);
    match kind % 5 {
        0 => return replace_number(text, at, JUNK[byte as usize % JUNK.len()]),
        1 => b.insert(at, byte % 128),
        2 if at < b.len() => {
            b.remove(at);
        }
        3 => b.truncate(at),
        _ if at < b.len() => b[at] = byte % 128,
        _ => {}
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Every error names the file and a line; a value's error names its field too.
fn assert_clear(e: &ScenarioError, text: &str) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    prop_assert!(shown.starts_with("f.toml:"), "{}", shown);
    if e.message.starts_with("missing table [protocol]") {
        // About the whole file: no line to name.
        return Ok(());
    }
    let line = e.line;
    prop_assert!(line.is_some(), "no line: {}", shown);
    prop_assert!(line.unwrap() <= text.lines().count() + 1, "{}", shown);
    let about_a_value = ["invalid type", "invalid value", "out of bounds", "must"]
        .iter()
        .any(|w| e.message.contains(w));
    if about_a_value {
        prop_assert!(e.field.is_some(), "no field: {}", shown);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1500,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_scenarios_parse_or_are_rejected_clearly(
        file in any::<prop::sample::Index>(),
        mutations in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..3),
    ) {
        let files = catalog();
        let (_, original) = &files[file.index(files.len())];
        let mut text = original.clone();
        for (kind, at, byte) in mutations {
            text = mutate(&text, kind, at, byte);
        }
        match Scenario::parse(&text, "f.toml") {
            Ok(s) => {
                // What parses also configures its protocol without panicking.
                let path = std::env::temp_dir().join(format!("locksim-fuzz-{}.toml", std::process::id()));
                std::fs::write(&path, &text).unwrap();
                // Or is refused naming the field at fault.
                let prepared = s.prepare(&path.display().to_string(), &Registry::builtin());
                let _ = std::fs::remove_file(&path);
                if let Err(e) = prepared {
                    prop_assert!(e.field.is_some() && !e.message.is_empty(), "{}", e);
                }
            }
            Err(e) => assert_clear(&e, &text)?,
        }
    }

    #[test]
    fn random_bytes_are_rejected_clearly(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Err(e) = Scenario::parse(&text, "f.toml") {
            assert_clear(&e, &text)?;
        }
    }
}
