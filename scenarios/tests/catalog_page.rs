//! The catalog table of docs/catalog.md is generated from the catalog files' `[expect]`: this test
//! regenerates it and fails when the page disagrees (a file added, removed, or its
//! expectations changed). `LOCKSIM_BLESS=1` rewrites the section instead; the "what happens"
//! column is prose and is kept.

use locksim_scenarios::{Expectation, Scenario};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- catalog table begin";
const END: &str = "<!-- catalog table end -->";
const HEADER: &str = "| scenario | what happens | mutual exclusion | fencing | lost update |\n\
                      |---|---|---|---|---|";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A cell: what the file pins; `–` where it pins nothing (not the same on every seed).
fn cell(e: Option<Expectation>) -> &'static str {
    match e {
        Some(Expectation::Holds) => "holds",
        Some(Expectation::Violated) => "**violated**",
        Some(Expectation::NotApplicable) => "n/a",
        None => "–",
    }
}

/// The "what happens" prose of each row of the table, by scenario name.
fn prose(table: &str) -> BTreeMap<String, String> {
    table
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| `")?;
            let (name, rest) = rest.split_once("` | ")?;
            let cells: Vec<&str> = rest.rsplitn(4, " | ").collect();
            Some((name.to_owned(), cells.last()?.to_string()))
        })
        .collect()
}

/// The table as the files say it should be, with the page's prose.
fn generated(what: &BTreeMap<String, String>) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios/catalog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    // By name, so a variant (`…-fenced`) follows the story it varies ("same, …").
    files.sort_by_key(|p| p.file_stem().map(|s| s.to_owned()));
    let mut rows = vec![HEADER.to_owned()];
    for file in files {
        let s = Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"));
        let e = s.expect.clone().unwrap_or_default();
        let about = what.get(&s.name).map_or("(to describe)", String::as_str);
        rows.push(format!(
            "| `{}` | {about} | {} | {} | {} |",
            s.name,
            cell(e.mutual_exclusion),
            cell(e.fencing),
            cell(e.lost_update)
        ));
    }
    rows.join("\n")
}

#[test]
fn the_catalog_pages_table_is_the_files_expectations() {
    let path = root().join("docs/catalog.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let begin = page
        .find(BEGIN)
        .expect("docs/catalog.md marks its catalog table");
    let body = begin + page[begin..].find("-->\n").unwrap() + 4;
    let end = page
        .find(END)
        .expect("docs/catalog.md ends its catalog table");
    let now = page[body..end].trim();
    let want = generated(&prose(now));
    if now == want {
        return;
    }
    if std::env::var_os("LOCKSIM_BLESS").is_some() {
        let text = format!("{}\n{want}\n\n{}", &page[..body], &page[end..]);
        std::fs::write(&path, text).unwrap();
        return;
    }
    let differ: Vec<String> = want
        .lines()
        .filter(|l| !now.lines().any(|n| n == *l))
        .map(String::from)
        .collect();
    panic!(
        "docs/catalog.md's catalog table disagrees with the files' [expect]; rows that should be \
         there:\n{}\n(LOCKSIM_BLESS=1 rewrites the table)",
        differ.join("\n")
    );
}

const REPORTED_BEGIN: &str = "<!-- reported bugs begin";
const REPORTED_END: &str = "<!-- reported bugs end -->";
const CATALOG_LINK: &str = "](../scenarios/catalog/";

/// The reports a text cites in full: `owner/repo#N` (GitHub) or `CURATOR-N` (Apache's Jira).
/// A short `#N` or `repo#N` is a passing reference, not a citation.
fn citations(text: &str) -> Vec<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
    let mut found = vec![];
    for (at, _) in text.match_indices('#') {
        let digits: String = text[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let start = text[..at].rfind(|c: char| !is_name(c)).map_or(0, |i| i + 1);
        let name = &text[start..at];
        let parts: Vec<&str> = name.split('/').collect();
        if !digits.is_empty() && parts.len() == 2 && parts.iter().all(|p| !p.is_empty()) {
            found.push(format!("{name}#{digits}"));
        }
    }
    for (at, key) in text.match_indices("CURATOR-") {
        let rest = &text[at + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            found.push(format!("{key}{digits}"));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A file's `[expect]` in words: the outcome column of the reported-bugs table.
fn outcome(s: &Scenario) -> String {
    let e = s.expect.clone().unwrap_or_default();
    let said = |x: Expectation| match x {
        Expectation::Holds => "holds",
        Expectation::Violated => "violated",
        Expectation::NotApplicable => "n/a",
    };
    let properties = [
        ("mutual exclusion", e.mutual_exclusion),
        ("fencing", e.fencing),
        ("lost update", e.lost_update),
    ];
    let mut words: Vec<String> = (properties.iter())
        .filter_map(|(p, x)| x.map(|x| format!("{p} {}", said(x))))
        .collect();
    let grants = |n: u64| format!("{n} grant{}", if n == 1 { "" } else { "s" });
    words.extend(
        e.acquisitions_min
            .map(|n| format!("at least {}", grants(n))),
    );
    words.extend(e.acquisitions_max.map(|n| format!("at most {}", grants(n))));
    words.extend(
        e.first_grant_ms_min
            .map(|ms| format!("first grant no sooner than {ms} ms")),
    );
    words.extend(
        e.first_grant_ms_max
            .map(|ms| format!("first grant by {ms} ms")),
    );
    format!("`{}`: {}", s.name, words.join(", "))
}

/// One row of the table: its reports, its files (names), and the line with its outcome as
/// the files' `[expect]` say.
fn reported_row(line: &str) -> (Vec<String>, Vec<String>, String) {
    let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
    assert_eq!(cells.len(), 4, "a row has four cells: {line}");
    let files: Vec<String> = (cells[2].split(CATALOG_LINK).skip(1))
        .map(|rest| rest.split(".toml)").next().unwrap().to_owned())
        .collect();
    assert!(!files.is_empty(), "a row names its files: {line}");
    let outcomes: Vec<String> = (files.iter())
        .map(|f| root().join(format!("scenarios/catalog/{f}.toml")))
        .map(|p| Scenario::load(&p).unwrap_or_else(|e| panic!("a row's file must exist: {e}")))
        .map(|s| outcome(&s))
        .collect();
    let (report, mechanism, linked) = (cells[0], cells[1], cells[2]);
    let row = format!(
        "| {report} | {mechanism} | {linked} | {} |",
        outcomes.join("; ")
    );
    (citations(report), files, row)
}

/// Every catalog file's name and description.
fn descriptions() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios/catalog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    (files.iter())
        .map(|p| Scenario::load(p).unwrap_or_else(|e| panic!("{e}")))
        .map(|s| (s.name.clone(), s.description.clone()))
        .collect()
}

/// The reported-bugs table of docs/catalog.md: every row's files exist and cite the row's
/// reports, every report a catalog file cites has a row naming that file, and the outcome
/// column is the files' `[expect]` (`LOCKSIM_BLESS=1` rewrites that column).
#[test]
fn the_reported_bugs_table_names_every_cited_report_and_its_files() {
    let path = root().join("docs/catalog.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let begin = page
        .find(REPORTED_BEGIN)
        .expect("docs/catalog.md marks its reported bugs");
    let body = begin + page[begin..].find("-->\n").unwrap() + 4;
    let end = page
        .find(REPORTED_END)
        .expect("docs/catalog.md ends its reported bugs");
    let lines: Vec<&str> = page[body..end].trim().lines().collect();
    assert!(lines.len() > 2, "the table has a header and rows");
    let described: BTreeMap<String, String> = descriptions().into_iter().collect();
    let (mut listed, mut rows) = (vec![], lines[..2].join("\n"));
    for line in &lines[2..] {
        let (reports, files, row) = reported_row(line);
        assert!(
            !reports.is_empty(),
            "a row names its reports in full: {line}"
        );
        for file in &files {
            let cited = citations(&described[file]);
            let missing: Vec<&String> = reports.iter().filter(|r| !cited.contains(r)).collect();
            assert!(
                missing.is_empty(),
                "{file}'s description does not cite {missing:?}"
            );
            listed.extend(reports.iter().map(|r| (r.clone(), file.clone())));
        }
        rows.push_str(&format!("\n{row}"));
    }
    let unlisted: Vec<String> = (described.iter())
        .flat_map(|(file, text)| citations(text).into_iter().map(move |r| (r, file.clone())))
        .filter(|pair| !listed.contains(pair))
        .map(|(r, file)| format!("  {r} (cited by {file})"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "reports cited by catalog files but not in docs/catalog.md's reported-bugs table:\n{}",
        unlisted.join("\n")
    );
    let now = lines.join("\n");
    if now != rows && std::env::var_os("LOCKSIM_BLESS").is_some() {
        std::fs::write(
            &path,
            format!("{}\n{rows}\n\n{}", &page[..body], &page[end..]),
        )
        .unwrap();
        return;
    }
    let differ: Vec<&str> = rows.lines().filter(|l| !lines.contains(l)).collect();
    assert!(
        differ.is_empty(),
        "the outcome column disagrees with the files' [expect]; rows as they should be \
         (LOCKSIM_BLESS=1 rewrites them):\n{}",
        differ.join("\n")
    );
}
