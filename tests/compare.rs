//! `locksim compare`: the reports it writes, that their numbers are those of the runs, that
//! they do not depend on thread count, that an interrupted compare resumes, and that it runs
//! from any directory.

use crate::common;

use common::in_repo as locksim;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// An empty directory for one report, removed when the test passes.
fn out_dir(name: &str) -> common::tools::Scratch {
    common::scratch(&format!("compare-{name}"))
}

fn compare(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["compare", "--quiet", "--out", dir.to_str().unwrap()];
    args.extend(extra);
    let out = locksim(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Bottom line:") && stdout.contains("/report.json"),
        "prints the bottom line and where the reports are: {stdout}"
    );
    let lines = stdout.lines().count();
    assert!(
        lines <= 60,
        "the terminal gets a summary of at most 60 lines, not {lines}: {stdout}"
    );
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// The report as text with its output folder replaced, to compare two runs of it.
fn strip(v: &Value, dir: &Path) -> String {
    serde_json::to_string(v)
        .unwrap()
        .replace(dir.to_str().unwrap(), "OUT")
}

/// A job's results file, one JSON value per run.
fn results(dir: &Path, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("results").join(format!("{name}.jsonl"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn has(r: &Value, property: &str) -> bool {
    r["violations"]
        .get(property)
        .and_then(Value::as_u64)
        .unwrap_or(0)
        > 0
}

/// Whether a run did damage: an update lost, or a stale write accepted.
fn damaged(r: &Value) -> bool {
    has(r, "lost_update") || r["stats"]["stale_accepted"].as_u64().unwrap() > 0
}

/// Recomputes (runs, overlap, harm) of a job from its results file.
fn recount(dir: &Path, name: &str) -> (u64, u64, u64) {
    let (mut runs, mut overlap, mut harm) = (0, 0, 0);
    for r in results(dir, name) {
        runs += 1;
        overlap += u64::from(has(&r, "mutual_exclusion"));
        harm += u64::from(has(&r, "fencing") || has(&r, "lost_update"));
    }
    (runs, overlap, harm)
}

/// Recomputes (damage, latent) of a job from its results file.
fn recount_damage(dir: &Path, name: &str) -> (u64, u64) {
    let rs = results(dir, name);
    let damage = rs.iter().filter(|r| damaged(r)).count() as u64;
    let latent = rs
        .iter()
        .filter(|r| !damaged(r) && has(r, "fencing"))
        .count() as u64;
    (damage, latent)
}

/// Checks each row's cost against its own results file and against what its protocol must
/// pay; returns the costs by label.
/// `calm`: whether the matrix has a fault-free profile (then the handoffs are measured).
fn check_costs(v: &Value, dir: &Path, seeds: u64, calm: bool) -> BTreeMap<String, Value> {
    let mut costs = BTreeMap::new();
    for row in v["rows"].as_array().unwrap() {
        let label = row["label"].as_str().unwrap();
        let cost = &row["cost"];
        let f = |k: &str| {
            cost[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{label}: {k} {cost}"))
        };
        let p50 = f("acquire_ms_p50");
        // A round trip on a 1-5 ms network takes at least 2 ms; far below a second alone.
        assert!((2.0..500.0).contains(&p50), "{label}: {cost}");
        assert!(f("acquire_ms_p99") >= p50, "{label}: {cost}");
        match calm {
            true => assert!(
                (0.5..100.0).contains(&f("handoffs_per_s")),
                "{label}: {cost}"
            ),
            false => assert!(cost["handoffs_per_s"].is_null(), "{label}: {cost}"),
        }
        assert!(
            f("messages_per_acquire") >= 2.0,
            "a request and a reply: {label} {cost}"
        );
        assert!(f("fsyncs_per_acquire") >= 0.0, "{label}: {cost}");
        assert!(f("stuck_ms_per_s") >= 0.0, "{label}: {cost}");
        assert_eq!(cost["runs"], seeds, "{label}");
        // The median is the mean of the uncontended runs' own medians.
        let runs = results(dir, &format!("cost--{}", cell_name(label)));
        let mean = runs
            .iter()
            .map(|r| {
                r["stats"]["liveness"]["acquire_latency_ms_p50"]
                    .as_f64()
                    .unwrap()
            })
            .sum::<f64>()
            / runs.len() as f64;
        assert!((mean - p50).abs() < 1e-3, "{label}: {mean} vs {p50}");
        costs.insert(label.to_owned(), cost.clone());
    }
    costs
}

fn cell_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[test]
fn reports_are_complete_recomputable_and_independent_of_thread_count() {
    let (a, b) = (out_dir("a"), out_dir("b"));
    let one = compare(&a, &["--seeds", "3", "--jobs", "1"]);
    let two = compare(&b, &["--seeds", "3", "--jobs", "2"]);
    // Replay commands name each run's own output folder; everything else must match.
    assert_eq!(strip(&one, &a), strip(&two, &b));
    assert_eq!(one["schema"], 3);

    let matrix = std::fs::read_to_string("scenarios/compare/matrix.toml").unwrap();
    let rows = matrix.matches("[[protocols]]").count();
    let cols = matrix.matches("[[profiles]]").count();
    let cells = one["cells"].as_array().unwrap();
    assert_eq!(cells.len(), rows * cols);
    // Every number of every cell is the one its results file gives.
    for c in cells {
        // A cell not run (`same_as`) has the figures of the row it names.
        let row = c["same_as"].as_str().or(c["protocol"].as_str()).unwrap();
        let name = format!(
            "{}--{}",
            cell_name(row),
            cell_name(c["profile"].as_str().unwrap())
        );
        let (runs, overlap, harm) = recount(&a, &name);
        assert_eq!(c["runs"], runs, "{name}");
        assert_eq!(c["overlap"]["k"], overlap, "{name}");
        assert_eq!(c["harm"]["k"], harm, "{name}");
        assert_eq!(c["overlap"]["n"], 3, "{name}");
        let (damage, latent) = recount_damage(&a, &name);
        assert_eq!(
            (c["damage"]["k"].as_u64(), c["latent"]["k"].as_u64()),
            (Some(damage), Some(latent)),
            "{name}"
        );
        for share in ["damage", "latent", "overlap"] {
            let s = &c[share];
            let (lo, hi) = (s["lo"].as_f64().unwrap(), s["hi"].as_f64().unwrap());
            assert!(s["n"] == 3 && lo <= hi && hi <= 1.0, "{name} {share}: {s}");
        }
    }
    // Each row costs what its protocol must pay: Redlock asks five masters, each of which
    // fsyncs with `appendfsync always`.
    let costs = check_costs(&one, &a, 3, true);
    assert_eq!(costs.len(), rows);
    let cost = |label: &str, k: &str| costs[label][k].as_f64().unwrap();
    assert!(cost("redlock", "messages_per_acquire") >= 10.0, "{costs:?}");
    assert!(cost("single-redis", "messages_per_acquire") < cost("redlock", "messages_per_acquire"));
    assert!(
        cost("redlock+fsync", "fsyncs_per_acquire") >= cost("redlock", "fsyncs_per_acquire") + 4.0,
        "{costs:?}"
    );
    assert!(
        cost("etcd", "fsyncs_per_acquire") >= 1.0,
        "Raft persists every entry: {costs:?}"
    );
    // With no faults nothing fails; fencing without tokens is n/a, not 0%.
    let none: Vec<_> = cells.iter().filter(|c| c["profile"] == "none").collect();
    assert!(none.iter().all(|c| c["runs_invalid"] == 0), "{none:?}");
    let plain = cells.iter().find(|c| c["protocol"] == "redlock").unwrap();
    assert!(plain["properties"]["fencing"].is_null(), "{plain}");
    let fenced = cells
        .iter()
        .find(|c| c["protocol"] == "single-redis+fencing")
        .unwrap();
    assert!(fenced["properties"]["fencing"].is_object(), "{fenced}");

    // The phase diagrams and the catalog are there, each number from its results file.
    let phase = one["phase"].as_array().unwrap();
    let standard = locksim_scenarios::matrix::Matrix::standard();
    let series: usize = standard
        .protocols
        .iter()
        .map(|p| {
            let axes = locksim_scenarios::matrix::PHASE_AXES.iter();
            axes.filter(|(a, _)| p.on_axis(a)).count()
        })
        .sum();
    assert_eq!(phase.len(), series);
    let catalog = one["catalog"].as_array().unwrap();
    let files = std::fs::read_dir("scenarios/catalog").unwrap().count();
    assert_eq!(catalog.len(), files);
    for e in catalog {
        let name = e["name"].as_str().unwrap();
        let (runs, overlap, harm) = recount(&a, name);
        assert_eq!(e["outcome"]["runs"], runs, "{name}");
        assert_eq!(e["outcome"]["overlap"]["k"], overlap, "{name}");
        assert_eq!(e["outcome"]["harm"]["k"], harm, "{name}");
        assert_eq!(
            e["expect_met"]["k"], runs,
            "{name} meets its expect on every seed"
        );
    }
    let jump = catalog
        .iter()
        .find(|e| e["name"] == "redlock-clock-jump")
        .unwrap();
    assert_eq!(jump["outcome"]["overlap"]["k"], 3, "{jump}");

    let md = std::fs::read_to_string(a.join("report.md")).unwrap();
    let html = std::fs::read_to_string(a.join("report.html")).unwrap();
    assert!(md.starts_with("# ") && md.contains("## Verdict"));
    the_bottom_line_comes_first(&md, &html);
    for id in ["bottom", "decide", "cost", "tradeoff"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(html.starts_with("<!doctype html>") && html.ends_with("</html>"));
    assert!(!html.contains("<script"), "self-contained, no scripts");
    let counterexamples = one["counterexamples"].as_array().unwrap();
    assert_eq!(
        html.matches("<div class=\"cx\">").count(),
        counterexamples.len()
    );

    // Every counterexample replays from the scenario file written next to the report.
    for x in counterexamples {
        let replay = x["replay"].as_str().unwrap();
        let mut args: Vec<&str> = replay.split_whitespace().skip(1).collect();
        args.push("--json");
        let out = locksim(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{replay} reproduces a violation"
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["trace_hash"], x["trace_hash"], "{replay}");
        assert!(!x["caption"].as_str().unwrap().is_empty(), "{x}");
    }
}

/// report.md's first sections are the bottom line, then the decision table; report.html's
/// first is the bottom line.
fn the_bottom_line_comes_first(md: &str, html: &str) {
    let sections: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        sections[..2],
        ["## Bottom line", "## What to choose"],
        "the bottom line, then the decision table, come first"
    );
    let h2 = html.find("<h2 ").unwrap();
    assert!(
        html[h2..].starts_with("<h2 id=\"bottom\">"),
        "report.html opens with the bottom line"
    );
}

/// One row, one profile: single Redis with fencing tokens while its server crashes (tokens
/// come from INCR, which a restart without persistence sets back).
const FENCED_CRASHES: &str = r#"
title = "fencing under server crashes"
seeds = 30
catalog_seeds = 0
cost_seeds = 2
[base]
duration_ms = 10_000
[base.workload]
clients = 3
cs_ms_min = 20
cs_ms_max = 200
think_ms_min = 10
think_ms_max = 100
[base.network]
latency_ms_min = 1.0
latency_ms_max = 5.0
[[protocols]]
label = "single-redis+fencing"
[protocols.protocol]
name = "single-redis"
ttl_ms = 2_000
tokens = true
[protocols.resource]
fencing = "on"
[[profiles]]
label = "server-crashes"
[profiles.faults_random]
crash_probability = 0.15
crash_down_ms_min = 0
crash_down_ms_max = 1_000
crash_nodes = ["@servers"]
"#;

#[test]
fn a_reused_token_without_overlap_is_latent_not_damage() {
    let (dir, m) = (out_dir("fenced-crashes"), out_dir("fenced-matrix"));
    std::fs::create_dir_all(&m).unwrap();
    let matrix = m.join("m.toml");
    std::fs::write(&matrix, FENCED_CRASHES).unwrap();
    let v = compare(&dir, &["--matrix", matrix.to_str().unwrap()]);
    let cell = &v["cells"][0];
    let k = |s: &str| cell[s]["k"].as_u64().unwrap();
    assert!(k("damage") < k("harm"), "{cell}");
    assert_eq!(k("damage") + k("latent"), k("harm"), "{cell}");
    // Some run reused a token with no overlap and no update lost: latent, not damage.
    let runs = results(&dir, "single-redis_fencing--server-crashes");
    let quiet = runs
        .iter()
        .find(|r| has(r, "fencing") && !has(r, "mutual_exclusion") && !damaged(r));
    assert!(
        quiet.is_some(),
        "no latent run without overlap in {} runs",
        runs.len()
    );
    check_costs(&v, &dir, 2, false);
    // The decision table and the verdict say so, from this cell.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let safe = md
        .lines()
        .find(|l| l.starts_with("| must stay safe if a server crashes"))
        .unwrap();
    assert!(safe.contains("✘ breaks"), "{safe}");
    // Broken by a seed of this cell, its harm share with interval, and the replay command.
    let evidence = "single-redis+fencing: ✘ breaks — breaks by seed ";
    let line = md.lines().find(|l| l.contains(evidence));
    let line = line.unwrap_or_else(|| panic!("no evidence line `{evidence}` in {md}"));
    assert!(
        line.contains("harm ") && line.contains("replay: locksim run "),
        "{line}"
    );
    assert!(
        md.contains("fencing broken without damage under server-crashes"),
        "{md}"
    );
}

/// A small adaptive matrix: a cell with nothing to find stops at the minimum, a noisy one
/// runs on towards the cap.
const ADAPTIVE: &str = r#"
title = "adaptive"
seeds = 8
seeds_max = 24
seeds_step = 8
half_width_max = 0.2
catalog_seeds = 0
[phase]
ttl_multiples = [0.5, 2]
seeds = 4
seeds_max = 8
[base]
duration_ms = 4_000
[base.workload]
clients = 3
[[protocols]]
label = "single-redis"
[protocols.protocol]
name = "single-redis"
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

fn runs_of(v: &Value, profile: &str) -> u64 {
    let cells = v["cells"].as_array().unwrap();
    let c = cells.iter().find(|c| c["profile"] == profile).unwrap();
    c["runs"].as_u64().unwrap()
}

#[test]
fn adaptive_cells_stop_by_the_data_alone_and_an_interrupted_compare_resumes() {
    let (a, b, m) = (
        out_dir("adaptive-a"),
        out_dir("adaptive-b"),
        out_dir("matrix"),
    );
    std::fs::create_dir_all(&m).unwrap();
    let matrix = m.join("m.toml");
    std::fs::write(&matrix, ADAPTIVE).unwrap();
    let m = matrix.to_str().unwrap();
    let one = compare(&a, &["--matrix", m, "--jobs", "1"]);
    let two = compare(&b, &["--matrix", m, "--jobs", "2"]);
    assert_eq!(strip(&one, &a), strip(&two, &b));
    assert_eq!(runs_of(&one, "none"), 8, "nothing to find: the minimum");
    assert!(runs_of(&one, "client-pauses") > 8, "{one}");
    assert!(one["phase"].as_array().unwrap().len() == 2);

    // Kill it after part of the work: here, cut every results file short.
    for entry in std::fs::read_dir(b.join("results")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let keep: Vec<&str> = text.lines().take(5).collect();
        std::fs::write(&path, keep.join("\n") + "\n{\"seed\": 9, \"torn").unwrap();
    }
    let resumed = compare(&b, &["--matrix", m, "--jobs", "2", "--resume"]);
    assert_eq!(strip(&resumed, &b), strip(&one, &a));
    let lines = std::fs::read_to_string(b.join("results/single-redis--client-pauses.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, runs_of(&one, "client-pauses"), "no seed ran twice");
}

#[test]
fn runs_from_any_directory_with_the_built_in_matrix() {
    let dir = out_dir("anywhere");
    std::fs::create_dir_all(&dir).unwrap();
    let out = common::locksim()
        .args(["compare", "--seeds", "1", "--quiet", "--out", "r"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(dir.join("r/report.html").is_file());
    // The built-in matrix's catalog is every catalog file, each meeting its [expect] on seed 1.
    let json = std::fs::read_to_string(dir.join("r/report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let catalog = report["catalog"].as_array().unwrap();
    let files = std::fs::read_dir(common::repo("scenarios/catalog"))
        .unwrap()
        .count();
    assert_eq!(catalog.len(), files);
    for entry in catalog {
        let met = &entry["expect_met"];
        assert_eq!(
            (met["k"].as_u64(), met["n"].as_u64()),
            (Some(1), Some(1)),
            "{entry:#}"
        );
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

/// Client pauses past the lease on an unchecked lock, and the same library checking before
/// each write, which the matrix says runs as the first row when nothing pauses.
const ZOMBIES: &str = r#"
title = "zombies"
seeds = 6
catalog_seeds = 0
cost_seeds = 0
[base]
duration_ms = 6_000
[base.workload]
clients = 3
cs_ms_min = 20
cs_ms_max = 200
[[protocols]]
label = "never"
[protocols.protocol]
name = "single-redis"
client = "redsync"
ttl_ms = 1_000
[protocols.workload]
check = "never"
[[protocols]]
label = "until"
[protocols.protocol]
name = "single-redis"
client = "redsync"
ttl_ms = 1_000
[protocols.workload]
check = "before_write"
[protocols.same_as]
row = "never"
profiles = ["none"]
why = "Nothing pauses, so the check always passes."
[[profiles]]
label = "none"
[[profiles]]
label = "client-pauses"
[profiles.faults_random]
pause_probability = 0.5
pause_ms_min = 1_500
pause_ms_max = 3_000
pause_nodes = ["@clients"]
"#;

/// The zombie window of each cell appears in report.md's and report.html's per-property
/// tables with the figures report.json has.
#[test]
fn the_zombie_window_of_each_cell_is_in_markdown_and_html_as_in_json() {
    let (dir, m) = (out_dir("zombies"), out_dir("zombies-matrix"));
    std::fs::create_dir_all(&m).unwrap();
    let matrix = m.join("m.toml");
    std::fs::write(&matrix, ZOMBIES).unwrap();
    let v = compare(&dir, &["--matrix", matrix.to_str().unwrap()]);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(md.contains("| latent | zombie window |"), "{md}");
    assert!(html.contains(">zombie window</th>"), "{html}");
    let mut seen = 0;
    for cell in v["cells"].as_array().unwrap() {
        if !cell["same_as"].is_null() {
            continue;
        }
        let runs = cell["zombie_runs"].as_u64().unwrap();
        // Pauses past the lease make zombies (until the check or the write); no pause, none.
        assert_eq!(runs > 0, cell["profile"] == "client-pauses", "{cell}");
        let (text, td) = if runs == 0 {
            ("n/a".to_owned(), "<td>n/a</td>".to_owned())
        } else {
            seen += 1;
            let max = cell["zombie_window_ms_max"].as_f64().unwrap();
            let p50 = cell["zombie_window_ms_p50"].as_f64().unwrap();
            assert!(max >= p50 && p50 > 0.0, "{cell}");
            let plural = if runs == 1 { "run" } else { "runs" };
            let (figures, runs) = (
                format!("max {max:.0} · p50 {p50:.0} ms"),
                format!("({runs} {plural})"),
            );
            let td = format!(
                "<td><span class=\"nw\">{figures}</span> <span class=\"nw\">{runs}</span></td>"
            );
            (format!("{figures} {runs}"), td)
        };
        let (p, f) = (
            cell["protocol"].as_str().unwrap(),
            cell["profile"].as_str().unwrap(),
        );
        let row = format!("| {p} | {f} | {} |", cell["seeds"].as_str().unwrap());
        let line = md.lines().find(|l| l.starts_with(&row)).unwrap_or_else(|| {
            panic!("no details row {row} in {md}");
        });
        assert!(
            line.contains(&format!(" | {text} | ")),
            "{text} not in {line}"
        );
        assert!(html.contains(&td), "{td} not in report.html");
    }
    assert_eq!(seen, 2, "each row's client-pauses cell: {v}");
}

/// A cell the matrix says is another row's is not run: the reports show it as that row's,
/// labelled, with the reason, and it does not count among the runs.
#[test]
fn a_cell_the_same_as_another_rows_is_not_run_and_says_so() {
    let (dir, m) = (out_dir("same-as"), out_dir("same-as-matrix"));
    std::fs::create_dir_all(&m).unwrap();
    let matrix = m.join("m.toml");
    std::fs::write(&matrix, ZOMBIES).unwrap();
    let v = compare(&dir, &["--matrix", matrix.to_str().unwrap()]);
    let cells = v["cells"].as_array().unwrap();
    let cell = |p: &str, f: &str| {
        let c = cells
            .iter()
            .find(|c| c["protocol"] == p && c["profile"] == f);
        c.unwrap_or_else(|| panic!("no cell {p} {f}")).clone()
    };
    let (copy, ran) = (cell("until", "none"), cell("never", "none"));
    assert_eq!(copy["same_as"], "never");
    assert_eq!(
        copy["same_as_why"],
        "Nothing pauses, so the check always passes."
    );
    for k in [
        "runs",
        "damage",
        "overlap",
        "harm",
        "zombie_runs",
        "updates_acked",
    ] {
        assert_eq!(copy[k], ran[k], "{k}");
    }
    assert!(cell("until", "client-pauses")["same_as"].is_null());
    assert!(!dir.join("results/until--none.jsonl").exists(), "not run");
    assert!(dir.join("results/until--client-pauses.jsonl").exists());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(md.contains("| until | same as never | damage "), "{md}");
    assert!(md.contains("| until | none | same as never | – |"), "{md}");
    let why = "- until under none: same as never. Nothing pauses, so the check always passes.";
    assert!(md.contains(why), "{md}");
    assert!(html.contains(">same as never</td>"), "{html}");
    let ran_runs: u64 = cells
        .iter()
        .filter(|c| c["same_as"].is_null())
        .map(|c| c["runs"].as_u64().unwrap())
        .sum();
    assert!(
        md.contains(&format!("\n{ran_runs} runs in the matrix")),
        "{md}"
    );
}

/// The outcome of a run that a check which never fails cannot change.
fn outcome(r: &Value) -> String {
    let s = &r["stats"];
    let l = &s["liveness"];
    format!(
        "{} {} acked {} lost {} stale {} zombies {} {} {} grants {} accepted {} rejected {}",
        r["verdict"],
        r["violations"],
        s["updates_acked"],
        s["updates_lost"],
        s["stale_accepted"],
        s["zombie_windows"],
        s["zombie_window_ms_max"],
        s["zombie_window_ms_p50"],
        l["acquisitions"],
        l["writes_accepted"],
        l["writes_rejected"]
    )
}

/// Each cell the standard matrix does not run (`same_as`) is what its row would give: the
/// two rows' cells, run seed for seed, have the same outcome.
#[test]
fn the_standard_matrix_cells_not_run_match_the_rows_they_copy() {
    use locksim_scenarios::matrix::Matrix;
    let m = Matrix::standard();
    let dir = out_dir("same-as-standard");
    std::fs::create_dir_all(&dir).unwrap();
    let sweep = |name: &str, text: String| {
        let (file, out) = (
            dir.join(format!("{name}.toml")),
            dir.join(format!("{name}.jsonl")),
        );
        std::fs::write(&file, text).unwrap();
        let args = [
            "sweep",
            file.to_str().unwrap(),
            "--seeds",
            "1..=40",
            "--jobs",
            "2",
        ];
        let done = locksim(&[&args[..], &["--quiet", "--out", out.to_str().unwrap()]].concat());
        assert!(
            done.status.code().is_some_and(|c| c <= 1),
            "{}",
            common::stderr(&done)
        );
        let mut runs: Vec<Value> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        runs.sort_by_key(|r| r["seed"].as_u64());
        runs.iter().map(outcome).collect::<Vec<_>>()
    };
    let mut checked = 0;
    for p in m.protocols.iter().filter(|p| p.same_as.is_some()) {
        let same = p.same_as.as_ref().unwrap();
        let other = m.protocols.iter().find(|o| o.label == same.row).unwrap();
        for f in m
            .profiles
            .iter()
            .filter(|f| same.profiles.contains(&f.label))
        {
            let mine = sweep(&Matrix::cell_name(p, f), m.cell_toml(p, f));
            let theirs = sweep(&Matrix::cell_name(other, f), m.cell_toml(other, f));
            assert_eq!(mine.len(), 40);
            assert_eq!(mine, theirs, "{} under {}", p.label, f.label);
            checked += 1;
        }
    }
    assert!(
        checked >= 4,
        "the standard matrix leaves cells out: {checked}"
    );
}

/// `--verbose` prints, after the summary, what the reports hold: the table, the verdict.
#[test]
fn verbose_prints_the_table_and_the_verdict_after_the_summary() {
    let (dir, m) = (out_dir("verbose"), out_dir("verbose-matrix"));
    std::fs::create_dir_all(&m).unwrap();
    let matrix = m.join("m.toml");
    std::fs::write(&matrix, ZOMBIES).unwrap();
    let out = locksim(&[
        "compare",
        "--quiet",
        "--verbose",
        "--matrix",
        matrix.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (table, verdict) = (stdout.find("| protocol |"), stdout.find("Verdict:"));
    assert!(
        table.is_some() && verdict.is_some(),
        "--verbose prints the table and the verdict: {stdout}"
    );
    assert!(
        !stdout.contains("(--verbose prints"),
        "no hint to pass a flag already given: {stdout}"
    );
}
