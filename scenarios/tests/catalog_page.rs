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
