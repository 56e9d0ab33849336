//! `locksim validate` as users run it: a small validation (two scenarios, two live runs and
//! twenty simulated seeds each; the live part takes about half a minute) whose tables agree,
//! resume without running anything again, and feed `compare --validation`; and its bad input.
//! Without `redis-server` or `etcd` the live test says it skipped and passes, except under CI.
#![allow(clippy::disallowed_methods)] // live runs are real time

mod common;

use common::tools;

use common::{code, in_repo, scratch, stderr, stdout};
use serde_json::Value;
use std::path::Path;

fn have(program: &str, package: &str) -> bool {
    let install = format!("apt-get install -y {package}");
    tools::require("validate", &[program], None, &install).is_some()
}

const SMALL: [&str; 10] = [
    "validate",
    "--runs",
    "2",
    "--seeds",
    "20",
    "--only",
    "v-redis-single-gc-pause",
    "v-etcd-healthy",
    "--out",
    "OUT",
];

/// A one-protocol matrix of two seeds per cell, for `compare --validation`.
const MATRIX: &str = r#"
title = "tiny"
seeds = 2
catalog_seeds = 0
[phase]
ttl_multiples = [2]
seeds = 1
[base]
duration_ms = 2_000
[base.workload]
clients = 2
[[protocols]]
label = "single-redis"
[protocols.protocol]
name = "single-redis"
ttl_ms = 1_000
[[protocols]]
label = "zookeeper"
[protocols.protocol]
name = "zookeeper"
[[profiles]]
label = "none"
"#;

/// The small validation's rows: three properties, then the updates lost; 2 live and 20
/// simulated runs each; and no row agrees, since two live runs cannot give a share within ±10
/// points.
fn rows_without_power(rows: &[Value]) {
    let properties: Vec<&str> = rows.iter().filter_map(|r| r["property"].as_str()).collect();
    assert_eq!(
        properties[..3],
        ["mutual_exclusion", "fencing", "lost_update"],
        "three properties, then the updates lost where a side acknowledged any"
    );
    assert!(properties.iter().filter(|p| **p == "updates_lost").count() >= 1);
    for r in rows {
        assert_eq!(
            (r["live"]["runs"].as_u64(), r["sim"]["runs"].as_u64()),
            (Some(2), Some(20)),
            "{r}"
        );
        // Two live runs cannot give a share within ±10 points: no row agrees by width alone.
        let verdict = r["verdict"].as_str().unwrap();
        assert!(
            verdict == "inconclusive" || (verdict == "disagrees" && r["explanation"].is_string()),
            "{r}"
        );
        assert_eq!(r["agrees"], false, "{r}");
        if r["property"] != "updates_lost" {
            assert!(r["detectable"].as_f64().unwrap() > 0.2, "{r}");
        }
    }
}

#[test]
fn a_small_validation_agrees_resumes_and_feeds_compare() {
    if !have("redis-server", "redis-server") || !have("etcd", "etcd-server") {
        return;
    }
    let dir = scratch("validate");
    let out_dir = dir.join("v").display().to_string();
    let args: Vec<&str> = SMALL
        .map(|a| if a == "OUT" { out_dir.as_str() } else { a })
        .to_vec();
    let first = in_repo(&args);
    assert_eq!(code(&first), 0, "{}\n{}", stdout(&first), stderr(&first));
    let json = table(&dir.join("v"));
    let rows = json["rows"].as_array().unwrap();
    rows_without_power(rows);
    // A GC pause at a named point breaks mutual exclusion for real, every time.
    let me = rows
        .iter()
        .find(|r| r["scenario"] == "v-redis-single-gc-pause" && r["property"] == "mutual_exclusion")
        .unwrap();
    assert_eq!(
        (me["live"]["k"].as_u64(), me["sim"]["k"].as_u64()),
        (Some(2), Some(20)),
        "{me}"
    );
    let md = std::fs::read_to_string(dir.join("v/validation.md")).unwrap();
    assert!(
        md.contains("| v-etcd-healthy | etcd | mutual_exclusion | 0/2"),
        "{md}"
    );
    assert!(md.contains("Not yet validated"), "{md}");
    assert!(std::fs::read_to_string(dir.join("v/validation.html"))
        .unwrap()
        .contains("<table>"));
    // Resuming a finished validation runs nothing and writes the same table.
    let lines = std::fs::read_to_string(dir.join("v/validation.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 2 * (2 + 20));
    let mut resume = args.clone();
    resume.push("--resume");
    let again = in_repo(&resume);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert_eq!(stdout(&again), stdout(&first));
    assert!(!stderr(&again).contains("live run"), "{}", stderr(&again));
    compare_shows_each_protocols_status(&dir, rows);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `compare --validation DIR/v/validation.json` on a tiny matrix shows each protocol's
/// status beside it: single-redis's rows, and zookeeper not yet validated.
fn compare_shows_each_protocols_status(dir: &Path, rows: &[Value]) {
    std::fs::write(dir.join("m.toml"), MATRIX).unwrap();
    let (m, v) = (dir.join("m.toml"), dir.join("v/validation.json"));
    let r = dir.join("r").display().to_string();
    let cmp = in_repo(&[
        "compare",
        "--matrix",
        m.to_str().unwrap(),
        "--quiet",
        "--out",
        &r,
        "--validation",
        v.to_str().unwrap(),
    ]);
    assert_eq!(code(&cmp), 0, "{}", stderr(&cmp));
    let report = std::fs::read_to_string(dir.join("r/report.md")).unwrap();
    let redis_rows = (rows.iter())
        .filter(|r| r["protocol"] == "single-redis")
        .count();
    let status = format!(
        "| single-redis | 0 of {redis_rows} rows agree, {redis_rows} inconclusive (too few runs), \
         0 explained, 0 open (1 scenarios) |"
    );
    assert!(report.contains(&status), "{status} not in {report}");
    assert!(
        report.contains("| zookeeper | not yet validated |"),
        "{report}"
    );
}

/// A validation's `validation.json`, from its `--out` directory.
fn table(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("validation.json")).unwrap()).unwrap()
}

/// The records of a validation's runs that failed (each says why in its `error`), from its
/// `--out` directory's validation.jsonl.
fn failed_runs(out: &Path) -> Vec<String> {
    let records = std::fs::read_to_string(out.join("validation.jsonl")).unwrap_or_default();
    (records.lines())
        .filter(|l| l.contains("\"error\":\""))
        .map(str::to_owned)
        .collect()
}

/// Whether redis-server and the redis-py library are on the machine (a test without them
/// says so and passes: `tools::require_runs`).
fn redis_py_here() -> bool {
    have("redis-server", "redis-server")
        && tools::require_runs(
            "validate",
            "python3",
            &["-c", "import redis"],
            "pip install redis",
        )
}

/// The third column: a scenario whose client profile has a driver (redis-py) runs live with
/// the real library beside locksim's own client (the model's code, live), and its rows judge
/// both against the simulator.
#[test]
fn a_library_profile_is_validated_against_the_real_library() {
    if !redis_py_here() {
        return;
    }
    let dir = scratch("validate-library");
    let out_dir = dir.display().to_string();
    let args = [
        "validate",
        "--runs",
        "2",
        "--seeds",
        "10",
        "--only",
        "v-redis-py-gc-pause",
        "--out",
        &out_dir,
    ];
    let run = in_repo(&args);
    assert_eq!(code(&run), 0, "{}\n{}", stdout(&run), stderr(&run));
    assert!(
        stderr(&run).contains("real-library run 2 of 2"),
        "{}",
        stderr(&run)
    );
    let json = table(&dir);
    let rows = json["rows"].as_array().unwrap();
    let failed = failed_runs(&dir);
    for r in rows {
        assert_eq!(r["real_library"]["kind"], "driver", "{r}");
        assert_eq!(r["real_library"]["profile"], "redis-py", "{r}");
        // All three worlds: the model's client simulated and live, and the real library.
        assert_eq!(
            r["live"]["runs"], 2,
            "locksim's own client live: {r}\nfailed runs: {failed:?}"
        );
        assert_eq!(r["library"]["runs"], 2, "{r}\nfailed runs: {failed:?}");
        assert_eq!(r["validated"], true, "{r}");
    }
    // The real redis-py loses the lock under the pause in both runs, as the model does,
    // simulated and live.
    let me = (rows.iter())
        .find(|r| r["property"] == "mutual_exclusion")
        .unwrap();
    let k = |world: &str| me[world]["k"].as_u64();
    assert_eq!(
        (k("library"), k("live"), k("sim")),
        (Some(2), Some(2), Some(10)),
        "{me}"
    );
    let md = std::fs::read_to_string(dir.join("validation.md")).unwrap();
    assert!(
        md.contains(
            "| v-redis-py-gc-pause | single-redis | mutual_exclusion | 2/2 [34, 100]% | 10/10"
        ),
        "{md}"
    );
    // Fencing is n/a in every world (redis-py gives no token): no row for it.
    assert!(rows.iter().all(|r| r["property"] != "fencing"), "{md}");
    assert!(
        md.contains("The real libraries against the simulator: 3 rows"),
        "{md}"
    );
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let dir = scratch("validate-bad");
    let out = dir.join("o").display().to_string();
    // --quick is a preset of --runs, --seeds and --only: not beside them.
    let both = in_repo(&["validate", "--quick", "--runs", "3", "--out", &out]);
    assert_eq!(code(&both), 2, "{}", stderr(&both));
    assert!(stderr(&both).contains("--runs"), "{}", stderr(&both));
    let nope = in_repo(&["validate", "--only", "no-such-scenario", "--out", &out]);
    assert_eq!(code(&nope), 2);
    assert!(
        stderr(&nope).contains("--only no-such-scenario"),
        "{}",
        stderr(&nope)
    );
    let set = dir.join("set");
    std::fs::create_dir_all(&set).unwrap();
    let text =
        std::fs::read_to_string(common::repo("scenarios/validate/etcd-healthy.toml")).unwrap();
    std::fs::write(
        set.join("x.toml"),
        text + "\n[validation]\nexplanation.safety = \"x\"\n",
    )
    .unwrap();
    let bad = in_repo(&["validate", "--set", set.to_str().unwrap(), "--out", &out]);
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("x.toml: [validation] explanation.safety"),
        "{}",
        stderr(&bad)
    );
    let cmp = in_repo(&[
        "compare",
        "--validation",
        "/nonexistent/validation.json",
        "--out",
        &out,
    ]);
    assert_eq!(code(&cmp), 2, "{}", stderr(&cmp));
    let _ = std::fs::remove_dir_all(&dir);
}

/// One validation row as `locksim validate` writes it, with the liveness figures compare reads.
fn validation_row(scenario: &str, protocol: &str, live_p50: f64, sim_p50: f64) -> Value {
    let side = |p50: f64, runs: u64| {
        serde_json::json!({"k": 0, "n": runs, "lo": 0.0, "hi": 0.5, "runs": runs, "failed": 0,
            "acquisitions_per_run": 50.0, "acquire_p50_ms": p50})
    };
    serde_json::json!({"scenario": scenario, "protocol": protocol,
        "property": "mutual_exclusion", "live": side(live_p50, 4), "sim": side(sim_p50, 60),
        "validated": true, "agrees": true, "explanation": null})
}

/// Issue 17's real latencies: with `--validation`, each row's cost carries its protocol's
/// loopback acquire latency from the healthy validation scenario (a faulty scenario's is not
/// a price), beside the simulated one, in report.json, report.md and report.html; a protocol
/// without a live healthy result gets none.
#[test]
fn compare_shows_live_loopback_latency_beside_simulated() {
    let dir = scratch("validate-live-cost");
    let mut healthy = validation_row("v-redis-single-healthy", "single-redis", 73.7, 41.0);
    // Fsyncs per grant where the validation has them (made up here, to follow them
    // through).
    healthy["live"]["fsyncs_per_grant"] = 6.08.into();
    healthy["sim"]["fsyncs_per_grant"] = 6.12.into();
    let rows = vec![
        validation_row("v-redis-single-gc-pause", "single-redis", 999.0, 2.0),
        healthy,
        validation_row("v-zookeeper-healthy", "zookeeper", 0.0, 43.0),
    ];
    let v = dir.join("validation.json");
    std::fs::write(&v, serde_json::json!({ "rows": rows }).to_string()).unwrap();
    std::fs::write(dir.join("m.toml"), MATRIX).unwrap();
    let (m, r) = (dir.join("m.toml"), dir.join("r").display().to_string());
    let (m, v) = (m.to_str().unwrap(), v.to_str().unwrap());
    let cmp = in_repo(&[
        "compare",
        "--matrix",
        m,
        "--quiet",
        "--out",
        &r,
        "--validation",
        v,
    ]);
    assert_eq!(code(&cmp), 0, "{}", stderr(&cmp));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r/report.json")).unwrap()).unwrap();
    let cost = |label: &str| {
        let rows = report["rows"].as_array().expect("report.json has rows");
        let row = rows.iter().find(|r| r["label"] == label).expect(label);
        row["cost"].clone()
    };
    let redis = cost("single-redis");
    assert_eq!(
        redis["live"]["scenario"], "v-redis-single-healthy",
        "{redis}"
    );
    assert_eq!(redis["live"]["acquire_ms_p50"], 73.7, "{redis}");
    assert_eq!(redis["live"]["sim_acquire_ms_p50"], 41.0, "{redis}");
    assert_eq!(redis["live"]["fsyncs_per_grant"], 6.08, "{redis}");
    assert!(redis["acquire_ms_p50"].as_f64().unwrap() > 0.0, "{redis}");
    assert!(cost("zookeeper")["live"].is_null(), "no live result: none");
    let md = std::fs::read_to_string(dir.join("r/report.md")).unwrap();
    assert!(md.contains("loopback live · sim p50 (ms) |"), "{md}");
    assert!(
        md.contains(" 73.7 · 41.0 (v-redis-single-healthy); fsyncs/grant 6.1 · 6.1 |"),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.join("r/report.html")).unwrap();
    assert!(html.contains("<td>73.7 · 41.0 (v-redis-single-healthy); fsyncs/grant 6.1 · 6.1</td>"));
    let _ = std::fs::remove_dir_all(&dir);
}
