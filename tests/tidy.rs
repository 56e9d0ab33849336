//! Tidy checks on the source itself (as TigerBeetle's tidy test does): the simulation and
//! protocol layers never reach for real time, OS randomness or hash-ordered collections,
//! and never silence the clippy bans that keep them out.

use std::path::Path;

/// Layers whose code runs inside a simulation (or decides what one does).
const DETERMINISTIC: [&str; 4] = ["check/src", "sim/src", "protocols/src", "scenarios/src"];

/// Text that must not appear there, with why.
const BANNED: [(&str, &str); 7] = [
    (
        "allow(clippy::disallowed",
        "silences the determinism bans in clippy.toml",
    ),
    ("Instant::now", "reads the real clock"),
    ("SystemTime::now", "reads the real clock"),
    ("rand::thread_rng", "draws OS randomness (use madsim::rand)"),
    (
        "collections::HashMap",
        "iterates in a per-process order (use BTreeMap)",
    ),
    (
        "collections::HashSet",
        "iterates in a per-process order (use BTreeSet)",
    ),
    ("std::thread::sleep", "sleeps in real time"),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn deterministic_layers_use_no_nondeterministic_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in DETERMINISTIC {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "found the sources");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (banned, why) in BANNED {
                // `madsim::rand::thread_rng` is the seeded one.
                if code.contains(banned) && !code.contains("madsim::rand::thread_rng") {
                    found.push(format!("{}:{}: `{banned}` {why}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "nondeterminism in simulation code:\n{}",
        found.join("\n")
    );
}

#[test]
fn clippy_config_bans_the_nondeterministic_apis() {
    let config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("clippy.toml")).unwrap();
    for path in [
        "std::time::Instant::now",
        "std::time::SystemTime::now",
        "rand::thread_rng",
        "std::collections::HashMap",
        "std::collections::HashSet",
    ] {
        assert!(
            config.contains(&format!("\"{path}\"")),
            "clippy.toml no longer bans {path}"
        );
    }
}

#[test]
fn the_madsim_flag_is_set_for_builds_and_doc_tests() {
    let config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".cargo/config.toml"))
            .unwrap();
    assert!(config.contains(r#"rustflags = ["--cfg", "madsim"]"#));
    assert!(config.contains(r#"rustdocflags = ["--cfg", "madsim"]"#));
}
