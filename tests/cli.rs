//! The command line as users run it: exit codes, bad input, history files, and determinism
//! across separate processes.

use crate::common;

use common::in_repo as locksim;
use locksim_protocols::Registry;
use std::path::PathBuf;
use std::process::Output;

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A file `name` in a scratch directory of its own, removed with the directory when the
/// test passes.
fn tmp(name: &str) -> (common::tools::Scratch, PathBuf) {
    let dir = common::scratch(&format!("cli-{name}"));
    let file = dir.join(name);
    (dir, file)
}

const GC_PAUSE: &str = "scenarios/catalog/redis-single-gc-pause.toml";
const HEALTHY: &str = "scenarios/catalog/redis-single-healthy.toml";

#[test]
fn trace_hash_is_the_same_in_separate_processes() {
    for scenario in [GC_PAUSE, HEALTHY] {
        let a = json(&locksim(&["run", scenario, "--seed", "5", "--json"]));
        let b = json(&locksim(&["run", scenario, "--seed", "5", "--json"]));
        let c = json(&locksim(&["run", scenario, "--seed", "6", "--json"]));
        assert_eq!(a["trace_hash"], b["trace_hash"], "{scenario}");
        assert_eq!(a, b, "{scenario}: the whole result must match");
        assert_ne!(
            a["trace_hash"], c["trace_hash"],
            "{scenario}: seeds must differ"
        );
        // And the same as this process computes.
        let here = locksim_scenarios::load(scenario, &Registry::builtin())
            .unwrap()
            .run(5);
        assert_eq!(a["trace_hash"].as_str(), Some(here.trace_hash.as_str()));
    }
}

#[test]
fn json_output_has_the_documented_fields() {
    let out = locksim(&["run", GC_PAUSE, "--seed", "3", "--json"]);
    assert_eq!(out.status.code(), Some(1), "a violation exits 1");
    let v = json(&out);
    for field in [
        "protocol",
        "seed",
        "verdict",
        "violations",
        "trace_hash",
        "stats",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    assert_eq!(v["protocol"], "single-redis");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["verdict"], "invalid");
    let kinds: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"mutual_exclusion") && kinds.contains(&"lost_update"));
    // Seed 3's first overlap: c1 enters (#3), c2 enters (#11) and leaves (#17) while c1 is
    // paused, c1 leaves (#272); c2's accepted write (#15) is lost to c1's (#270).
    assert_eq!(
        v["violations"][0]["events"],
        serde_json::json!([3, 11, 17, 272])
    );
    assert_eq!(v["violations"][5]["events"], serde_json::json!([15, 270]));
    assert_eq!(
        v["violation_counts"],
        serde_json::json!({"mutual_exclusion": 20, "lost_update": 1})
    );
    assert_eq!(
        v["properties"]["fencing"], "not_applicable",
        "no write carried a token"
    );
}

#[test]
fn text_output_explains_and_gives_the_replay_command() {
    let out = locksim(&["run", GC_PAUSE, "--seed", "4"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("VIOLATED"), "{text}");
    assert!(
        text.contains("cs_enter grant=c1#1"),
        "witness events in words: {text}"
    );
    assert!(
        text.contains(&format!("locksim run {GC_PAUSE} --seed 4")),
        "{text}"
    );
}

/// `run`'s text gives the zombie window (how many, max and p50) with the figures of
/// `run --json`, and says so when there is none.
#[test]
fn run_text_shows_the_zombie_window_of_run_json() {
    let text = locksim(&["run", GC_PAUSE]);
    let text = String::from_utf8_lossy(&text.stdout);
    let v = json(&locksim(&["run", GC_PAUSE, "--json"]));
    let stats = &v["stats"];
    let windows = stats["zombie_windows"].as_u64().unwrap();
    assert!(windows > 0, "the paused holder is a zombie: {stats}");
    let max = stats["zombie_window_ms_max"].as_f64().unwrap();
    let p50 = stats["zombie_window_ms_p50"].as_f64().unwrap();
    assert!(max >= p50 && p50 > 0.0, "{stats}");
    let plural = if windows == 1 { "window" } else { "windows" };
    let line = format!(
        "zombie    {windows} {plural} in which a holder went on after another client was let \
         in: max {max:.1} ms, p50 {p50:.1} ms"
    );
    assert!(text.contains(&line), "{line}\nnot in:\n{text}");
    let healthy = locksim(&["run", HEALTHY]);
    let healthy = String::from_utf8_lossy(&healthy.stdout);
    let none = "zombie    none (no holder went on after another client was let in)";
    assert!(healthy.contains(none), "{healthy}");
}

#[test]
fn a_safe_run_exits_zero_and_the_default_seed_is_the_scenarios() {
    let out = locksim(&["run", HEALTHY]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("seed 1"));
}

/// The critical sections in a history file, recounted from its raw JSON lines (not through
/// the checker); a section still open at the end lasts to the end: `(client, grant, enter index, exit index, enter ns, exit ns)`.
fn sections(events: &[serde_json::Value]) -> Vec<(String, String, u64, u64, u64, u64)> {
    let mut open: Vec<(String, String, u64, u64)> = Vec::new();
    let mut done = Vec::new();
    for e in events {
        let (op, grant) = (e["op"].as_str(), e["grant"].as_str().unwrap_or(""));
        let (index, at_ns) = (e["index"].as_u64().unwrap(), e["time_ns"].as_u64().unwrap());
        if op == Some("cs_enter") && e["kind"] == "ok" {
            let node = e["node"].as_str().unwrap().to_string();
            open.push((node, grant.to_string(), index, at_ns));
        } else if op == Some("cs_exit") {
            let at = open
                .iter()
                .position(|s| s.1 == grant)
                .expect("exit of an open section");
            let (node, grant, enter, enter_ns) = open.remove(at);
            done.push((node, grant, enter, index, enter_ns, at_ns));
        }
    }
    // A section still open when the run ends lasts to the end.
    let last = events.last().unwrap();
    let (end, end_ns) = (
        last["index"].as_u64().unwrap(),
        last["time_ns"].as_u64().unwrap(),
    );
    done.extend(
        open.into_iter()
            .map(|(n, g, i, t)| (n, g, i, end, t, end_ns)),
    );
    done
}

#[test]
fn the_history_file_recounts_to_the_reported_violations() {
    let (_dir, file) = tmp("gc.jsonl");
    let out = locksim(&["run", GC_PAUSE, "--seed", "2", "--json", "--history"]);
    assert_eq!(out.status.code(), Some(2), "--history needs a file");
    let args = ["run", GC_PAUSE, "--seed", "2", "--json", "--history"];
    let out = locksim(&[&args[..], &[file.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(1), "the GC pause breaks the lock");
    let result = json(&out);
    let text = std::fs::read_to_string(&file).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events.len() as u64,
        result["stats"]["events"].as_u64().unwrap()
    );

    // Mutual exclusion: every pair of sections of two clients that overlap in time.
    let cs = sections(&events);
    let overlaps: Vec<_> = cs
        .iter()
        .enumerate()
        .flat_map(|(i, a)| cs[i + 1..].iter().map(move |b| (a, b)))
        .filter(|(a, b)| a.0 != b.0 && a.4 < b.5 && b.4 < a.5)
        .collect();
    assert_eq!(
        overlaps.len(),
        19,
        "c1's paused section overlaps 19 of c2's"
    );
    assert_eq!(result["violation_counts"]["mutual_exclusion"], 19);
    // The first reported witness is the first overlapping pair: both enters and both exits,
    // in the order they happened.
    let (a, b) = overlaps[0];
    let mut expected = [a.2, a.3, b.2, b.3];
    expected.sort();
    let witness: Vec<u64> =
        serde_json::from_value(result["violations"][0]["events"].clone()).unwrap();
    assert_eq!(witness, expected, "{}", result["violations"][0]);

    // Lost updates: every increment the resource accepted, against the last value read.
    let accepted = events
        .iter()
        .filter(|e| e["op"] == "resource_accept")
        .count();
    let last_read = events
        .iter()
        .rev()
        .find(|e| e["op"] == "read" && e["kind"] == "ok");
    let final_value = last_read.unwrap()["value"].as_u64().unwrap();
    assert_eq!((accepted, final_value), (96, 77));
    assert_eq!(result["stats"]["updates_lost"], 96 - 77);
    let hash = locksim_sim::history::trace_hash(
        &locksim_sim::history::read_jsonl("gc.jsonl", text.as_bytes()).unwrap(),
    );
    let hash = locksim_sim::history::format_hash(hash);
    assert_eq!(
        result["trace_hash"].as_str(),
        Some(hash.as_str()),
        "the file is the run"
    );
}

fn bad_scenario(name: &str, text: &str) -> (Option<i32>, String) {
    let (_dir, path) = tmp(name);
    std::fs::write(&path, text).unwrap();
    let out = locksim(&["run", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_malformed_scenario_exits_2_naming_file_line_and_field() {
    let base = "duration_ms = 1000\n\n[protocol]\nname = \"single-redis\"\n";
    let cases = [
        // (file text, what the message must contain)
        (format!("{base}tll_ms = 5\n"), ":5:", "tll_ms"),
        (format!("{base}ttl_ms = \"long\"\n"), ":5:", "ttl_ms"),
        (format!("{base}ttl_ms = 0\n"), ":5:", "protocol.ttl_ms"),
        (format!("{base}\n[workload]\nclients = 0\n"), ":7:", "workload.clients"),
        ("duration_ms = 1000\n[protocol]\nname = \"zookeepr\"\n".into(), ":3:", "unknown protocol"),
        (
            format!("{base}\n[[faults]]\nkind = \"pause\"\nnode = \"c7\"\nat_ms = 1\nduration_ms = 1\n"),
            ":6:",
            "unknown node `c7`",
        ),
        (
            format!("{base}\n[[faults]]\nkind = \"pause\"\nnode = \"c1\"\npoint = \"befor_write\"\nduration_ms = 1\n"),
            ":6:",
            "no point `befor_write`",
        ),
        (format!("{base}\n[network]\nloss_probability = 2.0\n"), ":7:", "network.loss_probability"),
        (
            format!("{base}\n[faults_random]\npause_probability = 0.1\nloss_probability = 0.1\n"),
            ":8:",
            "is now faults_random.loss_period_probability (",
        ),
        (format!("{base}\n[faults_random]\npause_probabilty = 0.1\n"), ":7:", "pause_probabilty"),
        ("duration_ms = [\n".into(), ":2:", "invalid array"),
    ];
    for (i, (text, place, words)) in cases.iter().enumerate() {
        let name = format!("bad{i}.toml");
        let (code, err) = bad_scenario(&name, text);
        assert_eq!(code, Some(2), "case {i}: {err}");
        assert!(
            err.contains(&format!("{name}{place}")),
            "case {i} names file and line: {err}"
        );
        assert!(err.contains(words), "case {i} names the field: {err}");
    }
}

#[test]
fn the_timeline_page_draws_the_witnesses() {
    let (_dir, file) = tmp("gc.html");
    let out = locksim(&[
        "run",
        GC_PAUSE,
        "--seed",
        "2",
        "--timeline",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.starts_with("<!doctype html>") && page.contains("<svg"));
    assert!(page.contains("mutual_exclusion") && page.contains("--seed 2"));
    // The four witness events of the first violation are marked.
    assert_eq!(page.matches("stroke-dasharray").count(), 4, "{page}");
}

#[test]
fn protocols_are_listed_with_a_summary() {
    let out = locksim(&["protocols"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [
        "single-redis",
        "replicated-redis",
        "redlock",
        "etcd",
        "zookeeper",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.len() > id.len() + 10, "{line}");
    }
}

#[test]
fn a_missing_file_and_bad_usage_exit_2() {
    let out = locksim(&["run", "no/such/file.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/file.toml"));
    assert_eq!(locksim(&["run"]).status.code(), Some(2));
    assert_eq!(locksim(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        locksim(&["run", HEALTHY, "--seed", "x"]).status.code(),
        Some(2)
    );
}

#[test]
fn a_scenario_seed_is_any_u64_written_as_a_string() {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(HEALTHY))
            .unwrap();
    let (_dir, file) = tmp("max-seed.toml");
    std::fs::write(&file, format!("seed = \"18446744073709551615\"\n{text}")).unwrap();
    let path = file.display().to_string();
    let from_file = json(&locksim(&["run", &path, "--json"]));
    assert_eq!(from_file["seed"], u64::MAX);
    assert_eq!(
        from_file["replay"],
        format!("locksim run {path} --seed 18446744073709551615")
    );
    let from_flag = json(&locksim(&[
        "run",
        HEALTHY,
        "--seed",
        "18446744073709551615",
        "--json",
    ]));
    assert_eq!(from_file["trace_hash"], from_flag["trace_hash"]);
    std::fs::write(&file, format!("seed = -1\n{text}")).unwrap();
    let out = locksim(&["run", &path]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max-seed.toml:1: seed: must be a whole number"),
        "{err}"
    );
}

/// A test that passes on a retry moves what its failed try kept out of the temp dir into
/// `target/tmp/failed-tries/`, under the same name, instead of deleting it.
#[test]
fn a_failed_try_kept_by_a_passing_retry_moves_out_of_the_temp_dir() {
    let name = format!("locksim-failed-try-test-{}", std::process::id());
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("h.jsonl"), "{}\n").unwrap();
    common::tools::keep_failed_try(&dir);
    assert!(!dir.exists(), "{} is still in the temp dir", dir.display());
    let kept = common::tools::failed_tries_dir().join(&name);
    let history = std::fs::read_to_string(kept.join("h.jsonl"));
    assert_eq!(history.ok().as_deref(), Some("{}\n"), "{}", kept.display());
    std::fs::remove_dir_all(&kept).unwrap();
}
