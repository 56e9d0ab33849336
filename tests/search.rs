//! `locksim search`: finds the GC-pause violation from a scenario with no scripted fault,
//! shrinks it to one pause, saves a counterexample that replays to the same violation and
//! trace hash, and does all that the same way twice for the same `--seed`.

use crate::common;

use common::{code, repo, run, scratch, stderr};
use serde_json::Value;

const SCENARIO: &str = "scenarios/search/redis-single-pause-search.toml";

fn search(out: &std::path::Path, extra: &[&str]) -> Value {
    let out = out.display().to_string();
    let scenario = repo(SCENARIO);
    let mut args = vec!["search", &scenario, "--seed", "1", "--out", &out, "--json"];
    args.extend_from_slice(extra);
    let result = run(&args);
    assert_eq!(
        code(&result),
        1,
        "a violation is found: {}",
        stderr(&result)
    );
    serde_json::from_slice(&result.stdout).unwrap()
}

#[test]
fn search_finds_the_gc_pause_shrinks_it_to_one_pause_and_the_file_replays() {
    let dir = scratch("search");
    let file = dir.join("cex.toml");
    let found = search(&file, &[]);
    let f = &found["found"];
    assert_eq!(f["failure"], "mutual_exclusion", "{found:#}");
    let faults = f["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "shrunk to a single fault: {found:#}");
    assert_eq!(faults[0]["kind"], "pause");
    // The TTL is 1 s: the pause comes down to about that, whatever length it was drawn with.
    let pause_ms = faults[0]["duration_ms"].as_u64().unwrap();
    assert!((500..1500).contains(&pause_ms), "{found:#}");

    let replay = run(&["run", &file.display().to_string(), "--json"]);
    assert_eq!(code(&replay), 1, "{}", stderr(&replay));
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["trace_hash"], f["trace_hash"]);
    assert_eq!(replay["properties"]["mutual_exclusion"], "invalid");
    assert_eq!(
        replay["expect"]["met"], true,
        "the file expects its violation"
    );

    // Same --seed, same cases, same shrinking, same counterexample.
    let again = search(&dir.join("again.toml"), &[]);
    let strip = |v: &Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().unwrap();
        o.remove("wall_s");
        let found = o["found"].as_object_mut().unwrap();
        found.remove("counterexample");
        found.remove("replay");
        v
    };
    assert_eq!(strip(&again), strip(&found));
}

#[test]
fn search_without_swarm_also_finds_it() {
    let dir = scratch("search-no-swarm");
    let found = search(&dir.join("cex.toml"), &["--no-swarm", "--faults-max", "2"]);
    assert_eq!(found["swarm"], false);
    assert_eq!(found["found"]["failure"], "mutual_exclusion");
}

#[test]
fn a_search_that_finds_nothing_exits_0_and_one_of_no_cases_is_refused() {
    let dir = scratch("search-none");
    let out = dir.join("never.toml");
    let healthy = repo("scenarios/catalog/redis-single-healthy.toml");
    let out_arg = out.display().to_string();
    let args = [
        "search", &healthy, "--cases", "2", "--seed", "2", "--out", &out_arg, "--json",
    ];
    let result = run(&args);
    assert_eq!(code(&result), 0, "{}", stderr(&result));
    let v: Value = serde_json::from_slice(&result.stdout).unwrap();
    // Search seed 2's two cases on the healthy lock find nothing, in 3 runs (seed 1's first
    // case pauses c1 for 909 ms right after its acquire: its 1 s lease runs out inside the
    // critical section, a real counterexample).
    assert_eq!(v["found"], Value::Null, "{v:#}");
    assert_eq!(
        (v["cases"].as_u64(), v["runs"].as_u64()),
        (Some(2), Some(3)),
        "{v:#}"
    );
    assert!(!out.exists(), "nothing found, nothing saved");
    // No case searched is no evidence: refused rather than "no violation".
    let result = run(&["search", &healthy, "--cases", "0"]);
    assert_eq!(code(&result), 2);
    assert_eq!(
        stderr(&result).trim(),
        "locksim: --cases must be at least 1"
    );
}

#[test]
fn a_scenario_that_fails_on_its_own_scripted_faults_needs_no_added_fault() {
    let dir = scratch("search-scripted");
    let out = dir.join("cex.toml");
    let result = run(&[
        "search",
        &repo("scenarios/catalog/redis-single-gc-pause.toml"),
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(code(&result), 1, "{}", stderr(&result));
    let text = String::from_utf8_lossy(&result.stdout);
    assert!(
        text.contains("found     mutual_exclusion fails with no added fault"),
        "{text}"
    );
    assert!(!text.contains("shrunk"), "{text}");
    let saved = std::fs::read_to_string(&out).unwrap();
    assert!(!saved.contains("[[faults]]\nkind = \"loss\""), "{saved}");
    assert!(saved.contains("no fault added"), "{saved}");
}

#[test]
fn search_finds_the_delayed_write_and_shrinks_it_to_one_delay_spike() {
    let dir = scratch("search-delay");
    let file = dir.join("cex.toml");
    let out = file.display().to_string();
    let scenario = repo("scenarios/search/redis-single-delay-search.toml");
    let args = ["search", &scenario, "--seed", "1", "--out", &out, "--json"];
    let result = run(&args);
    assert_eq!(
        code(&result),
        1,
        "a violation is found: {}",
        stderr(&result)
    );
    let found: Value = serde_json::from_slice(&result.stdout).unwrap();
    let f = &found["found"];
    let failure = f["failure"].as_str().unwrap();
    assert!(["fencing", "lost_update"].contains(&failure), "{found:#}");
    let faults = f["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "shrunk to a single fault: {found:#}");
    assert_eq!(faults[0]["kind"], "delay_spike");
    let replay = run(&["run", &out, "--json"]);
    assert_eq!(code(&replay), 1, "{}", stderr(&replay));
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["trace_hash"], f["trace_hash"]);
    assert_eq!(replay["expect"]["met"], true);
}
