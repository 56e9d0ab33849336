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

/// Library and binary code held to functions that fit on a screen (TigerBeetle's 70
/// lines). One list: a crate joins it when its long functions are split. `sim/src` and
/// `protocols/src` join when their redesign lands.
const FUNCTION_LINES_ROOTS: [&str; 4] = ["src", "check/src", "reports/src", "scenarios/src"];

/// Files under those roots not yet held to it, each waiting for the change that splits it.
const FUNCTION_LINES_PENDING: [&str; 1] = ["scenarios/src/search.rs"];

/// The most lines a function may span, from its `fn` line to its closing brace.
const FUNCTION_LINES_MAX: usize = 70;

/// `fn` items of rustfmt-formatted source longer than `max` lines, as (name, first line,
/// lines); `#[cfg(test)]` modules are skipped. A body ends at the first `}` line indented as
/// its `fn` line, which rustfmt guarantees.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let closing = |from: usize, indent: usize| {
        (from..lines.len())
            .find(|&k| lines[k].trim_end() == format!("{}}}", " ".repeat(indent)))
            .unwrap_or(lines.len() - 1)
    };
    let mut found = vec![];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next = lines.get(i + 1).map_or("", |l| l.trim_start());
        if line.trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{') {
            i = closing(i + 2, indent_of(lines[i + 1])) + 1;
            continue;
        }
        if let Some(name) = fn_name(line) {
            let body = (i..lines.len()).find(|&k| {
                let l = lines[k].trim_end();
                l.ends_with('{') || l.ends_with(';') || l.ends_with('}')
            });
            if let Some(open) = body.filter(|&k| lines[k].trim_end().ends_with('{')) {
                let n = closing(open + 1, indent_of(line)) - i + 1;
                if n > max {
                    found.push((name, i + 1, n));
                }
            }
        }
        i += 1;
    }
    found
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        match w {
            "pub" | "const" | "async" | "unsafe" | "default" | "extern" => {}
            w if w.starts_with("pub(") || w.starts_with('"') => {}
            "fn" => {
                let name = words.next()?;
                let end = name.find(['(', '<']).unwrap_or(name.len());
                return Some(name[..end].to_string());
            }
            _ => return None,
        }
    }
    None
}

#[test]
fn the_function_length_check_finds_long_functions() {
    let body = "    let x = 1;\n".repeat(5);
    let short = format!("pub fn short() {{\n{body}}}\n");
    let long = format!("pub(crate) fn long<T>(\n    t: T,\n) -> u64\n{{\n{body}    0\n}}\n");
    let tests = format!("#[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body}    }}\n}}\n");
    let text = format!("{short}{long}impl X {{\n    fn m(&self) {{\n{body}    }}\n}}\n{tests}");
    let named = |v: &[(&str, usize, usize)]| -> Vec<(String, usize, usize)> {
        v.iter().map(|&(n, l, c)| (n.to_string(), l, c)).collect()
    };
    let all = named(&[("short", 1, 7), ("long", 8, 11), ("m", 20, 7)]);
    assert_eq!(
        long_functions(&text, 6),
        all,
        "the test module's function is skipped"
    );
    assert_eq!(long_functions(&text, 7), named(&[("long", 8, 11)]));
    assert!(long_functions(&text, 11).is_empty());
}

#[test]
fn functions_fit_on_a_screen() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in FUNCTION_LINES_ROOTS {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "found the sources");
    let mut found = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        if FUNCTION_LINES_PENDING.contains(&shown.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (name, line, n) in long_functions(&text, FUNCTION_LINES_MAX) {
            found.push(format!("{shown}:{line}: `{name}` is {n} lines"));
        }
    }
    assert!(
        found.is_empty(),
        "functions over {FUNCTION_LINES_MAX} lines (split them into named steps):\n{}",
        found.join("\n")
    );
}
