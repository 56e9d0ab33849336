//! Every command output shown in README.md and docs/*.md is the binary's own. A fenced block
//! right after a marker line
//!
//! ```text
//! <!-- sample: locksim run scenarios/catalog/redis-single-gc-pause.toml -->
//! ```
//!
//! must be exactly what that command prints (stdout, then stderr), run from a scratch folder
//! that sees the repository's `scenarios/`. A changed trace hash or a reworded line fails
//! here until the docs are regenerated:
//! `LOCKSIM_BLESS=1 cargo test --release -p locksim --test suite docs_samples` rewrites the blocks.
//! A marker `<!-- sample (wall times vary): ... -->` masks the figures that measure wall time
//! (`, 0.2 s)`), which are the only part of a deterministic command's output that changes.

use crate::common;

use std::path::{Path, PathBuf};

/// One sample: where its block is, the command, and the block's text.
struct Sample {
    /// The 0-based line index of the block's first line (after the opening fence).
    body_start: usize,
    /// The 0-based line index of the closing fence.
    body_end: usize,
    args: Vec<String>,
    wall_times_vary: bool,
}

const MARKER: &str = "<!-- sample";

fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The samples of one file; panics on a marker that is not followed by a fenced block, or
/// whose command is not `locksim ...`, naming the file and line.
fn samples_of(file: &Path, lines: &[&str]) -> Vec<Sample> {
    let mut samples = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix(MARKER) else {
            continue;
        };
        let at = format!("{}:{}", file.display(), i + 1);
        let rest = rest
            .strip_suffix("-->")
            .unwrap_or_else(|| panic!("{at}: no -->"));
        let (flags, command) = rest
            .split_once(':')
            .unwrap_or_else(|| panic!("{at}: a sample marker is `<!-- sample: locksim ... -->`"));
        let wall_times_vary = flags.contains("wall times vary");
        let mut words = command.split_whitespace().map(str::to_owned);
        assert_eq!(
            words.next().as_deref(),
            Some("locksim"),
            "{at}: not a locksim command"
        );
        assert!(
            lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
            "{at}: the marker must stand right above a fenced block"
        );
        let body_end = (i + 2..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("{at}: the block is never closed"));
        samples.push(Sample {
            body_start: i + 2,
            body_end,
            args: words.collect(),
            wall_times_vary,
        });
    }
    samples
}

/// Replaces wall-time figures such as `, 0.2 s)` by `, … s)`.
fn mask_wall_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(", ") {
        out.push_str(&rest[..at + 2]);
        rest = &rest[at + 2..];
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits > 0 && rest[digits..].starts_with(" s)") {
            out.push('…');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// A scratch folder that sees the repository's `scenarios/` (removed when the test ends), so
/// a sample's `--out cex.toml` lands there and not in the repository.
fn scratch_with_scenarios() -> common::tools::Scratch {
    let dir = common::scratch("docs-samples");
    std::os::unix::fs::symlink(common::repo("scenarios"), dir.join("scenarios")).unwrap();
    dir
}

/// What the sample's command prints now: stdout, then stderr, trailing spaces trimmed.
fn output_of(sample: &Sample, scratch: &Path) -> String {
    let out = common::locksim()
        .args(&sample.args)
        .current_dir(scratch)
        .output()
        .expect("locksim runs");
    let text = format!("{}{}", common::stdout(&out), common::stderr(&out));
    let text: Vec<&str> = text.lines().map(str::trim_end).collect();
    text.join("\n")
}

#[test]
fn every_sample_output_in_the_docs_is_what_the_binary_prints() {
    let bless = std::env::var_os("LOCKSIM_BLESS").is_some();
    let scratch = scratch_with_scenarios();
    let mut stale = Vec::new();
    let mut count = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let borrowed: Vec<&str> = lines.iter().map(String::as_str).collect();
        let samples = samples_of(&file, &borrowed);
        // From the last, so a blessed block of another length leaves the earlier indexes true.
        for sample in samples.iter().rev() {
            count += 1;
            let shown = lines[sample.body_start..sample.body_end].join("\n");
            let printed = output_of(sample, &scratch);
            let (a, b) = if sample.wall_times_vary {
                (mask_wall_times(&shown), mask_wall_times(&printed))
            } else {
                (shown.clone(), printed.clone())
            };
            if a == b {
                continue;
            }
            let at = format!("{}:{}", file.display(), sample.body_start);
            stale.push(format!(
                "{at}: `locksim {}`\n--- shown\n{shown}\n--- printed\n{printed}",
                sample.args.join(" ")
            ));
            if bless {
                lines.splice(
                    sample.body_start..sample.body_end,
                    printed.lines().map(str::to_owned),
                );
            }
        }
        if bless {
            std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        }
    }
    assert!(
        count >= 3,
        "the README and docs show at least three sample outputs, found {count}"
    );
    assert!(
        bless || stale.is_empty(),
        "{} sample output(s) differ from the binary's (LOCKSIM_BLESS=1 rewrites them):\n\n{}",
        stale.len(),
        stale.join("\n\n")
    );
}

#[test]
fn wall_times_are_masked_and_nothing_else() {
    assert_eq!(
        mask_wall_times("shrunk in 17 steps to 1 fault (21 runs, 0.2 s):"),
        "shrunk in 17 steps to 1 fault (21 runs, … s):"
    );
    assert_eq!(mask_wall_times("a, 12 ms)"), "a, 12 ms)");
    assert_eq!(mask_wall_times("c1, c2"), "c1, c2");
}

/// The headings of a Markdown page as GitHub makes their anchors (lowercase, punctuation but
/// `-` and `_` dropped, spaces as `-`), code blocks aside.
fn anchors_of(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if in_code || !heading.trim_start_matches('#').starts_with(' ') {
            continue;
        }
        let words = heading.trim_start_matches('#').trim().to_lowercase();
        let kept: String = words
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .collect();
        anchors.push(kept.replace(' ', "-"));
    }
    anchors
}

/// Every relative link of README.md and docs/*.md (outside code blocks) names a file that
/// exists and, with `#anchor`, a heading of that page: moving a section cannot strand a link.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = vec![];
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut prose = String::new();
        let mut in_code = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            } else if !in_code {
                prose += line;
                prose.push('\n');
            }
        }
        for (at, _) in prose.match_indices("](") {
            let rest = &prose[at + 2..];
            let Some(end) = rest.find(|c: char| c == ')' || c.is_whitespace()) else {
                continue;
            };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let page = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !page.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
            } else if !anchor.is_empty() && page.extension().is_some_and(|e| e == "md") {
                let headings = anchors_of(&std::fs::read_to_string(&page).unwrap());
                if !headings.iter().any(|h| h == anchor) {
                    broken.push(format!("{}: {target}: no such heading", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// README.md is a guide, not the reference: at most 300 lines, and no commit hash or issue
/// number in its prose (history belongs to git; figures with their commits to
/// docs/measurements.md). Sample outputs, in code blocks, may show trace hashes.
#[test]
fn the_readme_is_a_short_guide_without_commit_hashes_or_issue_numbers() {
    let readme = std::fs::read_to_string(common::repo("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines, at most 300");
    let mut in_code = false;
    let mut found = vec![];
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let words = line.split(|c: char| !c.is_ascii_alphanumeric());
        for word in words {
            let hex = (7..=40).contains(&word.len())
                && word.chars().all(|c| c.is_ascii_hexdigit())
                && word.chars().any(|c| c.is_ascii_digit())
                && word.chars().any(|c| c.is_ascii_alphabetic());
            if hex {
                found.push(format!("README.md:{}: `{word}`", i + 1));
            }
        }
        let lower = line.to_lowercase();
        if let Some(at) = lower.find("issue ") {
            if lower[at + 6..].starts_with(|c: char| c.is_ascii_digit() || c == '#') {
                found.push(format!("README.md:{}: {line}", i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "in README.md's prose:\n{}",
        found.join("\n")
    );
}

/// CI runs exactly the README's test command: the command under "## The tests" is the last
/// command of `.ci/run`, and `.ci/run` runs it after the format and lint checks.
#[test]
fn ci_runs_exactly_the_readmes_test_command() {
    let readme = std::fs::read_to_string(common::repo("README.md")).unwrap();
    let section = readme
        .split("## The tests\n")
        .nth(1)
        .expect("README.md has a section \"## The tests\"");
    let block = section.split("```sh\n").nth(1).expect("a sh block in it");
    let command = block.lines().next().unwrap().trim();
    let ci = std::fs::read_to_string(common::repo(".ci/run")).unwrap();
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        commands.last().copied(),
        Some(command),
        "the README's test command is `{command}`; .ci/run ends with another"
    );
    let pos = |c: &str| {
        let found = commands.iter().position(|l| l.starts_with(c));
        found.unwrap_or_else(|| panic!(".ci/run runs no `{c}`"))
    };
    assert!(pos("cargo fmt") < pos(command) && pos("cargo clippy") < pos(command));
}
