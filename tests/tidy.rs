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
/// lines). One list: a crate joins it when its long functions are split. `protocols/src`
/// joins when its redesign lands.
const FUNCTION_LINES_ROOTS: [&str; 7] = [
    "src",
    "check/src",
    "reports/src",
    "scenarios/src",
    "sim/src",
    "protocols/src",
    "live/src",
];

/// Files under those roots not yet held to it, each waiting for the change that splits it.
const FUNCTION_LINES_PENDING: [&str; 0] = [];

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

/// The files of one crate's source directory (one level: `name.rs`) and the sibling files
/// each one's code (not its comments or tests) names through `crate::`.
fn imports(dir: &Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let module = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
    let names: std::collections::BTreeSet<String> = files
        .iter()
        .filter(|p| p.parent() == Some(dir))
        .map(|p| module(p))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph = std::collections::BTreeMap::new();
    for file in files.iter().filter(|p| names.contains(&module(p))) {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let code: String = code
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut uses = std::collections::BTreeSet::new();
        for part in code.split("crate::").skip(1) {
            // `crate::a::…` names `a`; `crate::{a, b::c}` names `a` and `b` (and `c`,
            // which only counts if it is a sibling too).
            let named = match part.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or(""),
                None => part
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or(""),
            };
            uses.extend(
                named
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| names.contains(*w) && *w != module(file)),
            );
        }
        let uses = uses.into_iter().map(String::from).collect();
        graph.insert(module(file), uses);
    }
    graph
}

/// A cycle in `graph`, as the files around it, if there is one.
fn cycle(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut ring = path[at..].to_vec();
            ring.push(node.to_string());
            return Some(ring);
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(ring) = visit(next, graph, path, done) {
                return Some(ring);
            }
        }
        path.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut vec![], &mut done))
}

#[test]
fn the_cycle_check_finds_a_ring() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    let ring = cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]));
    assert_eq!(ring.map(|r| r.len()), Some(4), "a -> b -> c -> a");
    assert_eq!(cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
}

#[test]
fn files_do_not_import_each_other_in_a_ring() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for dir in FUNCTION_LINES_ROOTS {
        let graph = imports(&root.join(dir));
        assert!(!graph.is_empty(), "found the files of {dir}");
        if let Some(ring) = cycle(&graph) {
            found.push(format!("{dir}: {}", ring.join(" -> ")));
        }
    }
    assert!(
        found.is_empty(),
        "files importing each other:\n{}",
        found.join("\n")
    );
}
