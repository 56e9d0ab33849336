//! `compare --shard K/N` and `--merge`: the merged report is the unsharded one, with the
//! adaptive stopping rule, the phase diagrams and the catalog; a merge of incomplete or
//! mismatched shards is refused.

use crate::common;

use common::in_repo as locksim;
use std::path::{Path, PathBuf};

/// An empty directory for one report, removed when the test passes.
fn out_dir(name: &str) -> common::tools::Scratch {
    common::scratch(&format!("shard-{name}"))
}

/// A matrix with every kind of job: adaptive cells (one stops at the minimum, one runs on),
/// phase points and the catalog.
const MATRIX: &str = r#"
title = "sharded"
seeds = 8
seeds_max = 24
seeds_step = 8
half_width_max = 0.2
catalog_seeds = 1
[phase]
ttl_multiples = [0.5, 2]
seeds = 3
seeds_max = 6
[base]
duration_ms = 4_000
[base.workload]
clients = 3
[[protocols]]
label = "single-redis"
[protocols.protocol]
name = "single-redis"
ttl_ms = 1_000
[[protocols]]
label = "redlock"
[protocols.protocol]
name = "redlock"
ttl_ms = 1_000
[[profiles]]
label = "none"
[[profiles]]
label = "client-pauses"
[profiles.faults_random]
pause_probability = 0.3
pause_ms_min = 100
pause_ms_max = 2_000
pause_nodes = ["@clients"]
"#;

fn ok(args: &[&str]) -> String {
    let out = locksim(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        common::stderr(&out)
    );
    common::stdout(&out)
}

fn refused(args: &[&str], why: &str) {
    let out = locksim(args);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(why), "{args:?} should say {why:?}: {err}");
}

/// report.json with its output folder (and the matrix's path, which names it) made neutral.
fn report(dir: &Path, matrix: &str) -> String {
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    text.replace(matrix, "MATRIX")
        .replace(dir.to_str().unwrap(), "OUT")
}

fn shards(root: &Path, matrix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|k| {
            let dir = root.join(format!("s{k}of{n}"));
            let d = dir.to_str().unwrap();
            let printed = ok(&[
                "compare",
                "--matrix",
                matrix,
                "--quiet",
                "--shard",
                &format!("{k}/{n}"),
                "--out",
                d,
            ]);
            assert!(printed.contains(&format!("shard {k}/{n}:")), "{printed}");
            assert!(
                !dir.join("report.json").exists(),
                "a shard writes no report"
            );
            d.to_string()
        })
        .collect()
}

#[test]
fn merged_shards_give_the_unsharded_report() {
    let root = out_dir("merge");
    std::fs::create_dir_all(&root).unwrap();
    let matrix_file = root.join("matrix.toml");
    std::fs::write(&matrix_file, MATRIX).unwrap();
    let matrix = matrix_file.to_str().unwrap();
    let whole = root.join("whole");
    ok(&[
        "compare",
        "--matrix",
        matrix,
        "--quiet",
        "--out",
        whole.to_str().unwrap(),
    ]);
    let expected = report(&whole, matrix);
    let v: serde_json::Value = serde_json::from_str(&expected).unwrap();
    let runs: Vec<u64> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["runs"].as_u64().unwrap())
        .collect();
    assert!(
        runs.contains(&8) && runs.iter().any(|&r| r > 8),
        "adaptive: {runs:?}"
    );

    for n in [2, 3] {
        let dirs = shards(&root, matrix, n);
        let merged = root.join(format!("merged{n}"));
        let merged_matrix = merged.join("matrix.toml");
        let mut args = vec![
            "compare",
            "--quiet",
            "--out",
            merged.to_str().unwrap(),
            "--merge",
        ];
        args.extend(dirs.iter().map(String::as_str));
        ok(&args);
        assert_eq!(
            report(&merged, merged_matrix.to_str().unwrap()),
            expected,
            "{n} shards"
        );
    }
}

#[test]
fn incomplete_or_mismatched_shards_are_refused() {
    let root = out_dir("refuse");
    std::fs::create_dir_all(&root).unwrap();
    let matrix_file = root.join("matrix.toml");
    std::fs::write(&matrix_file, MATRIX).unwrap();
    let matrix = matrix_file.to_str().unwrap();
    let dirs = shards(&root, matrix, 2);
    let out = root.join("merged");
    let o = out.to_str().unwrap();
    refused(
        &["compare", "--out", o, "--merge", &dirs[0]],
        "needs shards 0..2 (0 to 1) once each",
    );
    refused(
        &["compare", "--out", o, "--merge", &dirs[0], &dirs[0]],
        "needs shards 0..2",
    );
    refused(&["compare", "--shard", "3/2", "--out", o], "expected K/N");
    refused(&["compare", "--shard", "2/2", "--out", o], "expected K/N");
    refused(
        &["compare", "--out", o, "--merge", root.to_str().unwrap()],
        "shard.json",
    );

    // A shard interrupted mid-job: its last result is missing, and the merge says so.
    let results = Path::new(&dirs[1]).join("results");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let lines = |f: &PathBuf| std::fs::read_to_string(f).unwrap().lines().count();
    let file = files.into_iter().find(|f| lines(f) > 1).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    std::fs::write(&file, kept[..kept.len() - 1].join("\n") + "\n").unwrap();
    refused(
        &["compare", "--out", o, "--merge", &dirs[0], &dirs[1]],
        "the results lack 1 run(s)",
    );
    assert!(
        !out.join("report.json").exists(),
        "no report from an incomplete merge"
    );
}
