//! `locksim compare`: the reports it writes, and that they do not depend on thread count.

mod common;

use common::in_repo as locksim;
use std::path::{Path, PathBuf};

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locksim-compare-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn compare(dir: &Path, jobs: &str) -> serde_json::Value {
    let out = locksim(&[
        "compare",
        "--seeds",
        "4",
        "--jobs",
        jobs,
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("| protocol |"),
        "prints the table: {stdout}"
    );
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

#[test]
fn reports_are_complete_and_independent_of_thread_count() {
    let (a, b) = (out_dir("a"), out_dir("b"));
    let one = compare(&a, "1");
    let two = compare(&b, "2");
    // Replay commands name each run's own output folder; everything else must match.
    let strip = |v: &serde_json::Value, dir: &Path| {
        serde_json::to_string(v)
            .unwrap()
            .replace(dir.to_str().unwrap(), "OUT")
    };
    assert_eq!(strip(&one, &a), strip(&two, &b));

    let matrix = std::fs::read_to_string("scenarios/compare/matrix.toml").unwrap();
    let rows = matrix.matches("[[protocols]]").count();
    let cols = matrix.matches("[[profiles]]").count();
    let cells = one["cells"].as_array().unwrap();
    assert_eq!(cells.len(), rows * cols);
    assert!(cells.iter().all(|c| c["runs"] == 4));
    // With no faults nothing fails; the fault profiles find something somewhere.
    let none: Vec<_> = cells.iter().filter(|c| c["profile"] == "none").collect();
    assert!(none.iter().all(|c| c["runs_invalid"] == 0), "{none:?}");

    let md = std::fs::read_to_string(a.join("report.md")).unwrap();
    let html = std::fs::read_to_string(a.join("report.html")).unwrap();
    assert!(md.starts_with("# "));
    assert!(html.starts_with("<!doctype html>") && html.ends_with("</html>"));
    assert!(!html.contains("<script"), "self-contained, no scripts");
    let counterexamples = one["counterexamples"].as_array().unwrap();
    assert_eq!(html.matches("class=\"cx\"").count(), counterexamples.len());

    // Every counterexample replays from the scenario file written next to the report.
    for x in counterexamples {
        let replay = x["replay"].as_str().unwrap();
        let args: Vec<&str> = replay.split_whitespace().skip(1).collect();
        let mut args = args.clone();
        args.push("--json");
        let out = locksim(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{replay} reproduces a violation"
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["trace_hash"], x["trace_hash"], "{replay}");
    }
}

#[test]
fn a_bad_matrix_exits_2() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let matrix = dir.join("m.toml");
    std::fs::write(
        &matrix,
        "title = \"x\"\n[base]\nduration_ms = 100\nprotocols = []\n",
    )
    .unwrap();
    let out = locksim(&[
        "compare",
        "--matrix",
        matrix.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("m.toml"), "{err}");
}
