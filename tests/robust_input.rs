//! Bad input answered with exit 2 and the file, line and field, never with a memory
//! blow-up or a silent no-op; and fencing's `n/a` the same in every output.

mod common;

use common::{code, in_repo as locksim, scratch, stderr, stdout};

const HEALTHY: &str = "scenarios/catalog/redis-single-healthy.toml";
const GC_PAUSE: &str = "scenarios/catalog/redis-single-gc-pause.toml";

#[test]
fn an_output_that_is_not_a_regular_file_is_refused_before_any_run() {
    let out = locksim(&["sweep", HEALTHY, "--seeds", "1..3", "--out", "/dev/full"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--out /dev/full: not a regular file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "", "no run started");
    let dir = scratch("robust-out");
    let d = dir.display().to_string();
    let out = locksim(&["run", HEALTHY, "--history", &d]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    let out = locksim(&["report", HEALTHY, "--out", "/dev/null"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("is not a directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_resume_file_without_newlines_is_refused_at_the_line_bound() {
    // 2 MiB without a newline: over the 1 MiB line bound, so the reader stops there.
    let dir = scratch("robust-resume");
    let file = dir.join("r.jsonl");
    std::fs::write(&file, vec![b'x'; 2 << 20]).unwrap();
    let f = file.display().to_string();
    let out = locksim(&["sweep", HEALTHY, "--seeds", "1..3", "--out", &f, "--resume"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        format!("locksim: {f}:1: not a sweep result: longer than 1048576 bytes")
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        2 << 20,
        "left untouched"
    );
    let out = locksim(&["check", &f]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains(":1: not a valid event: longer than 1048576 bytes"));
}

#[test]
fn a_misspelt_history_field_is_refused_with_the_valid_ones() {
    let dir = scratch("robust-field");
    let file = dir.join("h.jsonl");
    let line = r#"{"index":0,"time_ns":5,"node":"a","kind":"ok","op":"cs_enter","clock_err_ns":5}"#;
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let out = locksim(&["check", &file.display().to_string()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("h.jsonl:1: not a valid event"), "{e}");
    assert!(e.contains("unknown field `clock_err_ns`"), "{e}");
    assert!(
        e.contains("`clock_error_ns`"),
        "the valid fields are listed: {e}"
    );
}

#[test]
fn an_empty_history_is_nothing_to_check_not_a_clean_bill() {
    let dir = scratch("robust-empty");
    let file = dir.join("h.jsonl");
    std::fs::write(&file, "\n\n").unwrap();
    let out = locksim(&["check", &file.display().to_string()]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("verdict   UNKNOWN"), "{text}");
    assert!(
        text.contains("mutual_exclusion  unknown: no events: nothing to check"),
        "{text}"
    );
}

fn scenario_error(name: &str, text: &str) -> String {
    let dir = scratch(name);
    let file = dir.join("s.toml");
    std::fs::write(&file, text).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn a_fault_after_the_end_and_a_missing_protocol_table_are_named() {
    let late = "duration_ms = 1_000\n[protocol]\nname = \"single-redis\"\n\n[[faults]]\n\
                kind = \"crash\"\nnode = \"redis\"\nat_ms = 1_500\n";
    let e = scenario_error("robust-late", late);
    assert!(
        e.contains(
            "s.toml:8: faults[0].at_ms: the crash fault at 1500 ms would never fire: \
                    the run ends at duration_ms = 1000 ms"
        ),
        "{e}"
    );
    let e = scenario_error("robust-noproto", "duration_ms = 1_000\n");
    assert!(e.contains("s.toml: missing table [protocol]"), "{e}");
}

#[test]
fn an_unknown_replicated_redis_variant_is_named_with_the_known_ones() {
    let text = "duration_ms = 1_000\n[protocol]\nname = \"replicated-redis\"\n\
                variant = \"no-such-bug\"\n";
    let e = scenario_error("robust-repl-variant", text);
    assert!(
        e.contains("s.toml:4: protocol.variant: unknown variant `no-such-bug`"),
        "{e}"
    );
    assert!(
        e.contains("`stale-primary`, `wait-ignored`, `lagging-replica-promoted`"),
        "{e}"
    );
}

#[test]
fn a_search_of_no_cases_is_refused() {
    let out = locksim(&["search", HEALTHY, "--cases", "0"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("--cases must be at least 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fencing_without_tokens_is_na_in_run_json_and_check() {
    let dir = scratch("robust-na");
    let history = dir.join("h.jsonl").display().to_string();
    let out = locksim(&["run", GC_PAUSE, "--json", "--history", &history]);
    assert_eq!(code(&out), 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["properties"]["fencing"], "not_applicable");
    let out = locksim(&["check", &history]);
    assert!(stdout(&out).contains("fencing           n/a (no write carried a token)"));
    let out = locksim(&["check", &history, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["properties"]["fencing"], "not_applicable");
    // `fencing = "holds"` cannot be met by a run that cannot show it.
    let text = std::fs::read_to_string(common::repo(GC_PAUSE))
        .unwrap()
        .replace("fencing = \"not_applicable\"", "fencing = \"holds\"");
    let file = dir.join("holds.toml");
    std::fs::write(&file, text).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert!(
        stdout(&out).contains("expect    NOT MET: fencing: expected holds, got n/a"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn malformed_delay_keys_are_named_with_file_line_and_field() {
    let base = "duration_ms = 1_000\n[protocol]\nname = \"single-redis\"\n";
    let e = scenario_error(
        "robust-partition-mode",
        &format!("{base}[network]\npartition = \"stall\"\n"),
    );
    assert!(
        e.contains("s.toml:5") && e.contains("network.partition"),
        "{e}"
    );
    assert!(e.contains("expected `drop` or `delay`"), "{e}");
    let e = scenario_error(
        "robust-timeout-zero",
        &format!("{base}[network]\npartition = \"delay\"\nconnection_timeout_ms = 0\n"),
    );
    assert!(
        e.contains("s.toml:6: network.connection_timeout_ms must be positive"),
        "{e}"
    );
    let e = scenario_error(
        "robust-timeout-huge",
        &format!("{base}[network]\nconnection_timeout_ms = 2_000_000_000\n"),
    );
    assert!(e.contains("s.toml:5: network.connection_timeout_ms"), "{e}");
    let spike = "[[faults]]\nkind = \"delay_spike\"\nnode = \"c1\"\nat_ms = 10\n";
    let e = scenario_error(
        "robust-spike-zero",
        &format!("{base}{spike}duration_ms = 0\n"),
    );
    assert!(
        e.contains("s.toml:4: faults[0]: `duration_ms` must be positive"),
        "{e}"
    );
    let e = scenario_error(
        "robust-spike-self",
        &format!("{base}{spike}duration_ms = 10\nto = [\"c1\"]\n"),
    );
    assert!(
        e.contains("faults[0]: `to` names the sender `c1` itself"),
        "{e}"
    );
    let e = scenario_error(
        "robust-spike-range",
        &format!("{base}[faults_random]\ndelay_spike_ms_min = 500\ndelay_spike_ms_max = 100\n"),
    );
    assert!(
        e.contains("faults_random.delay_spike_ms_min (500) exceeds delay_spike_ms_max (100)"),
        "{e}"
    );
}
