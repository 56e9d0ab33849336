//! Bad input answered with exit 2 and the file, line and field, never with a memory
//! blow-up or a silent no-op; and fencing's `n/a` the same in every output.

use crate::common;

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

/// A stdout whose reader has gone: the read end of a pipe, closed before the command runs.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_quietly_with_the_commands_own_code() {
    let dir = scratch("robust-pipe");
    let history = dir.join("h.jsonl").display().to_string();
    assert_eq!(code(&locksim(&["run", GC_PAUSE, "--history", &history])), 1);
    let results = dir.join("r.jsonl").display().to_string();
    let sweep = ["sweep", GC_PAUSE, "--seeds", "1..3", "--out", &results];
    let cases: [(&[&str], i32); 5] = [
        (&["check", &history], 1),
        (&["check", &history, "--json"], 1),
        (&["run", GC_PAUSE], 1),
        (&sweep, 1),
        (&["protocols"], 0),
    ];
    for (args, expected) in cases {
        let out = common::in_repo_to(args, closed_pipe());
        assert_eq!(code(&out), expected, "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}: nothing said, no panic");
    }
}

#[test]
fn a_full_stdout_exits_3_saying_the_output_is_incomplete() {
    let dir = scratch("robust-full");
    let results = dir.join("r.jsonl").display().to_string();
    let sweep = ["sweep", HEALTHY, "--seeds", "1..3", "--out", &results];
    for args in [&["run", GC_PAUSE][..], &sweep, &["protocols", "--json"]] {
        let out = common::in_repo_to(args, dev_full());
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim(),
            "locksim: stdout: No space left on device (os error 28): the output is incomplete",
            "{args:?}"
        );
    }
}

#[test]
fn a_counterexample_that_cannot_be_saved_is_printed_to_stderr_and_exits_3() {
    // A link into a directory that does not exist: the path looks writable (its own
    // directory exists), the write fails, as it does for root too.
    let dir = scratch("robust-search-out");
    let out_file = dir.join("c.toml");
    std::os::unix::fs::symlink(dir.join("gone").join("c.toml"), &out_file).unwrap();
    let f = out_file.display().to_string();
    let out = locksim(&["search", GC_PAUSE, "--cases", "1", "--out", &f]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let e = stderr(&out);
    let (saved, message) = e.rsplit_once("locksim: ").expect("an error message");
    assert!(
        message.starts_with(&format!("cannot write {f}:")),
        "{message}"
    );
    assert!(message.contains("printed above"), "{message}");
    assert!(saved.starts_with("# Found by: locksim search"), "{e}");
    let scenario: toml::Value = toml::from_str(saved).expect("the counterexample as TOML");
    assert!(scenario.get("protocol").is_some(), "{saved}");
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_left_as_it_was() {
    let dir = scratch("robust-same-file");
    let scenario = dir.join("s.toml");
    let text = std::fs::read_to_string(common::repo(HEALTHY)).unwrap();
    std::fs::write(&scenario, &text).unwrap();
    let s = scenario.display().to_string();
    // Another name for the same file is the same file.
    let other_name = dir.join(".").join("s.toml").display().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["run", &s, "--history", &s], "--history"),
        (&["run", &s, "--timeline", &other_name], "--timeline"),
        (&["search", &s, "--cases", "1", "--out", &s], "--out"),
        (
            &[
                "sweep",
                &s,
                "--seeds",
                "1..3",
                "--out",
                &other_name,
                "--resume",
            ],
            "--out",
        ),
        (&["live", &s, "--history", &s], "--history"),
    ];
    for (args, flag) in cases {
        let out = locksim(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let output = args[args.iter().position(|a| *a == flag).unwrap() + 1];
        let expected = format!(
            "{flag} {output}: is the input file {s}: writing it would overwrite that input"
        );
        assert!(
            stderr(&out).contains(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&scenario).unwrap(),
            text,
            "{args:?}"
        );
    }
    // A results file inside the report's directory, named as a report it writes.
    let results = dir.join("report.json");
    let r = results.display().to_string();
    assert_eq!(
        code(&locksim(&[
            "sweep", HEALTHY, "--seeds", "1..2", "--out", &r
        ])),
        0
    );
    let before = std::fs::read(&results).unwrap();
    let out = locksim(&["report", &r, "--out", &dir.display().to_string()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("writing it would overwrite that input"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&results).unwrap(), before);
}

const SINGLE_REDIS: &str = "duration_ms = 1_000\n[protocol]\nname = \"single-redis\"\n";

#[test]
fn a_link_naming_an_unknown_node_is_refused() {
    let link = "[[network.links]]\nfrom = \"c1\"\nto = \"Redis\"\nlatency_ms_min = 20.0\n\
                latency_ms_max = 40.0\n";
    let e = scenario_error("robust-link", &format!("{SINGLE_REDIS}{link}"));
    assert!(
        e.contains("s.toml:6: network.links[0].to: unknown node `Redis` (nodes: redis, c1, c2"),
        "{e}"
    );
    let from = link
        .replace("\"c1\"", "\"c9\"")
        .replace("\"Redis\"", "\"redis\"");
    let e = scenario_error("robust-link-from", &format!("{SINGLE_REDIS}{from}"));
    assert!(
        e.contains("s.toml:5: network.links[0].from: unknown node `c9`"),
        "{e}"
    );
}

#[test]
fn an_expectation_no_run_can_meet_and_sections_without_writes_are_refused() {
    let e = scenario_error(
        "robust-acq-range",
        &format!("{SINGLE_REDIS}[expect]\nacquisitions_min = 20\nacquisitions_max = 10\n"),
    );
    assert!(
        e.contains(
            "s.toml:5: expect.acquisitions_min: (20) exceeds acquisitions_max (10): no run \
             can meet both"
        ),
        "{e}"
    );
    let e = scenario_error(
        "robust-grant-range",
        &format!("{SINGLE_REDIS}[expect]\nfirst_grant_ms_min = 500\nfirst_grant_ms_max = 100\n"),
    );
    assert!(
        e.contains("s.toml:5: expect.first_grant_ms_min: (500)"),
        "{e}"
    );
    let e = scenario_error(
        "robust-no-writes",
        &format!("{SINGLE_REDIS}[workload]\nwrites_per_cs = 0\n"),
    );
    assert!(
        e.contains("s.toml:5: workload.writes_per_cs: must be at least 1"),
        "{e}"
    );
}

#[test]
fn control_characters_of_a_scenario_reach_no_terminal_raw() {
    let dir = scratch("robust-ansi");
    let file = dir.join("s.toml");
    let name =
        "name = \"\\u001b[2J\\u001b[31mevil\\r\"\ndescription = \"about \\u001b]0;title\\u0007\"\n";
    std::fs::write(&file, format!("{name}{SINGLE_REDIS}")).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    assert!(
        text.contains("scenario  \\u{1b}[2J\\u{1b}[31mevil\\r (single-redis)"),
        "{text}"
    );
    assert!(text.contains("about \\u{1b}]0;title\\u{7}"), "{text}");
    // A description's own line breaks are spaces where the text wraps, not escapes.
    let lines = "description = \"\"\"first line,\nsecond line\"\"\"\n";
    std::fs::write(&file, format!("{lines}{SINGLE_REDIS}")).unwrap();
    let text = stdout(&locksim(&["run", &file.display().to_string()]));
    assert!(text.contains("first line, second line"), "{text}");
    // An error quoting what the file said escapes it too.
    let link = "[[network.links]]\nfrom = \"c1\"\nto = \"\\u001b[31mx\"\nlatency_ms_min = 1.0\n\
                latency_ms_max = 2.0\n";
    std::fs::write(&file, format!("{SINGLE_REDIS}{link}")).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert_eq!(code(&out), 2);
    assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown node `\\u{1b}[31mx`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_role_as_the_node_of_a_repeating_fault_is_warned_about() {
    let dir = scratch("robust-role-once");
    let file = dir.join("s.toml");
    let periodic = "[[faults]]\nkind = \"pause_periodic\"\nnode = \"@leader\"\nat_ms = 100\n\
                    until_ms = 900\non_ms = 100\noff_ms = 100\n";
    let etcd = "duration_ms = 1_000\n[protocol]\nname = \"etcd\"\n";
    std::fs::write(&file, format!("{etcd}{periodic}")).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert!(code(&out) <= 1, "the run runs: {}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("locksim: warning: ")
            && e.contains("s.toml:6: faults[0].node: the role `@leader`"),
        "{e}"
    );
    assert!(
        e.contains("`targets = [\"@leader\"]` resolves it again"),
        "{e}"
    );
    let targets = periodic.replace("node = \"@leader\"", "targets = [\"@leader\"]");
    std::fs::write(&file, format!("{etcd}{targets}")).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let group = periodic.replace("@leader", "@servers");
    std::fs::write(&file, format!("{etcd}{group}")).unwrap();
    let out = locksim(&["run", &file.display().to_string()]);
    assert!(
        !stderr(&out).contains("warning"),
        "a group is meant: {}",
        stderr(&out)
    );
}

#[test]
fn every_renamed_key_names_its_new_name_and_no_message_repeats_a_key() {
    let cases = [
        ("[workload]\ncheck_validity = true\n", "s.toml:5: workload.check_validity is now workload.check ("),
        ("fsync_ms_min = 3\n", "s.toml:4: protocol.fsync_ms_min is now disk.fsync_ms_min ("),
        (
            "[faults_random]\nloss_probability = 0.1\n",
            "s.toml:5: faults_random.loss_probability is now faults_random.loss_period_probability (",
        ),
    ];
    for (i, (extra, words)) in cases.iter().enumerate() {
        let e = scenario_error(
            &format!("robust-renamed-{i}"),
            &format!("{SINGLE_REDIS}{extra}"),
        );
        assert!(e.contains(words), "{e}");
    }
    let e = scenario_error(
        "robust-unknown",
        &format!("{SINGLE_REDIS}[workload]\ncs_ms_mux = 3\n"),
    );
    assert!(
        e.contains("s.toml:5: workload.cs_ms_mux: unknown field `cs_ms_mux`"),
        "{e}"
    );
    assert!(!e.contains("cs_ms_mux.cs_ms_mux"), "{e}");
}

#[test]
fn faults_scheduled_and_fired_are_told_apart_and_expect_can_require_them() {
    let dir = scratch("robust-fired");
    let file = dir.join("s.toml");
    let f = file.display().to_string();
    let fault = |occurrence: u32, expect: &str| {
        format!(
            "{SINGLE_REDIS}[[faults]]\nkind = \"pause\"\nnode = \"c1\"\npoint = \"before_write\"\n\
             occurrence = {occurrence}\nduration_ms = 10\n[expect]\n{expect}\n"
        )
    };
    std::fs::write(&file, fault(100_000, "faults_fired = \"all\"")).unwrap();
    let out = locksim(&["run", &f]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(", 0 of 1 fault fired, "), "{text}");
    assert!(
        text.contains("expect    NOT MET: faults fired: expected all 1, got 0 of 1"),
        "{text}"
    );
    let out = locksim(&["run", &f, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["stats"]["faults"].as_u64(),
            v["stats"]["faults_fired"].as_u64()
        ),
        (Some(1), Some(0))
    );
    assert_eq!(v["expect"]["met"], false);
    std::fs::write(&file, fault(1, "faults_fired = 1")).unwrap();
    let out = locksim(&["run", &f]);
    let text = stdout(&out);
    assert!(
        text.contains(", 1 of 1 fault fired, ") && text.contains("expect    met"),
        "{text}"
    );
    let e = scenario_error("robust-fired-word", &fault(1, "faults_fired = \"some\""));
    assert!(e.contains("s.toml:11: expect.faults_fired"), "{e}");
}

#[test]
fn sweep_jobs_are_capped_at_the_runs_to_do_and_a_maximum_with_a_message() {
    let dir = scratch("robust-jobs");
    let file = dir.join("s.toml");
    std::fs::write(&file, SINGLE_REDIS).unwrap();
    let out_file = dir.join("r.jsonl").display().to_string();
    let scenario = file.display().to_string();
    let sweep = |jobs: &str| {
        let args = [
            "sweep", &scenario, "--seeds", "0..5", "--quiet", "--out", &out_file,
        ];
        let mut args = args.to_vec();
        args.extend(["--jobs", jobs]);
        let _ = std::fs::remove_file(&out_file);
        locksim(&args)
    };
    let out = sweep("100000");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--jobs 100000 capped at 5: there are 5 runs to do"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("5 jobs"), "{}", stdout(&out));
    let out = sweep("0");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // Asked for no more than there is to do: nothing said.
    let out = sweep("2");
    assert!(!stderr(&out).contains("capped"), "{}", stderr(&out));
}

#[test]
fn a_seed_twice_with_two_results_is_refused_naming_both_lines() {
    let dir = scratch("robust-duplicate");
    let file = dir.join("s.toml");
    std::fs::write(&file, SINGLE_REDIS).unwrap();
    let results = dir.join("r.jsonl");
    let (scenario, out_file) = (file.display().to_string(), results.display().to_string());
    let sweep = || {
        let args = ["sweep", &scenario, "--seeds", "0..3", "--quiet", "--resume"];
        locksim(&[&args[..], &["--out", &out_file]].concat())
    };
    assert_eq!(code(&sweep()), 0);
    let text = std::fs::read_to_string(&results).unwrap();
    let first = text.lines().next().unwrap().to_owned();
    // The same line again (shards concatenated with an overlap): accepted, counted once.
    std::fs::write(&results, format!("{text}{first}\n")).unwrap();
    let again = sweep();
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(
        stdout(&again).contains("runs       3 "),
        "{}",
        stdout(&again)
    );
    // The same seed with another result: refused, naming both lines.
    let hash = first.split("\"trace_hash\":\"").nth(1).unwrap()[..16].to_owned();
    let other = first.replace(&hash, "0123456789abcdef");
    std::fs::write(&results, format!("{text}{other}\n")).unwrap();
    let out = sweep();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let seed = first
        .split("\"seed\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let expected = format!("r.jsonl:4: seed {seed} again, with another result than on line 1");
    assert!(
        stderr(&out).contains(&expected),
        "{expected} not in {}",
        stderr(&out)
    );
}

/// Whether any results file under `dir/results/` has a line.
fn some_result_in(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir.join("results")) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.len() > 0))
}

#[test]
fn an_interrupted_compare_says_where_its_results_are_and_how_to_resume() {
    let dir = scratch("robust-compare-sigint");
    let out_dir = dir.join("r");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(["compare", "--quiet", "--jobs", "1", "--out"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let limit = std::time::Duration::from_secs(120);
    let started = common::wait_until(limit, || some_result_in(&out_dir));
    assert!(started, "no result within 120 s");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let expected = format!(
        "interrupted by SIGINT: the results so far are saved in {}/results/; resume with:\n  \
         locksim compare --out {} --resume",
        out_dir.display(),
        out_dir.display()
    );
    assert!(
        stderr(&out).contains(&expected),
        "{expected}\nnot in\n{}",
        stderr(&out)
    );
}

#[test]
fn a_second_sweep_on_a_results_file_in_use_is_refused_naming_the_first() {
    let dir = scratch("robust-sweep-lock");
    let file = dir.join("s.toml");
    std::fs::write(&file, SINGLE_REDIS).unwrap();
    let results = dir.join("r.jsonl");
    let args = |extra: &[&str]| {
        let mut a = vec!["sweep".to_owned(), file.display().to_string()];
        a.extend(["--seeds", "0..1000000", "--quiet", "--jobs", "1", "--out"].map(String::from));
        a.push(results.display().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let mut first = std::process::Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(args(&[]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let has_a_line = || std::fs::metadata(&results).is_ok_and(|m| m.len() > 0);
    let wrote = common::wait_until(std::time::Duration::from_secs(60), has_a_line);
    let resume = args(&["--resume"]);
    let second = locksim(&resume.iter().map(String::as_str).collect::<Vec<_>>());
    let _ = first.kill();
    let _ = first.wait();
    assert!(wrote, "the first sweep wrote nothing within 60 s");
    assert_eq!(code(&second), 2, "{}", stderr(&second));
    let expected = format!("process {} is writing this file", first.id());
    assert!(
        stderr(&second).contains(&expected),
        "{expected} not in {}",
        stderr(&second)
    );
}

#[test]
fn node_counts_and_search_faults_are_bounded_by_what_a_run_can_finish() {
    let text = |protocol: &str, clients: u64| {
        format!("duration_ms = 1_000\n[protocol]\n{protocol}\n[workload]\nclients = {clients}\n")
    };
    let e = scenario_error(
        "robust-clients",
        &text("name = \"single-redis\"", 1_000_000),
    );
    assert!(
        e.contains("s.toml:5: workload.clients: 1000000 is out of bounds: a number of clients must be between 0 and 10000"),
        "{e}"
    );
    let redlock = "name = \"redlock\"\ninstances = 999999";
    let e = scenario_error("robust-instances", &text(redlock, 3));
    assert!(
        e.contains("s.toml:4: protocol.instances: 999999 is out of bounds: a number of servers must be between 0 and 99"),
        "{e}"
    );
    let out = locksim(&["search", HEALTHY, "--faults-max", "1000000"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--faults-max 1000000: must be between 1 and 256"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_run_whose_history_fills_up_stops_with_a_message_instead_of_growing() {
    // A billion ms of three busy clients would be some 14 GB of history.
    let dir = scratch("robust-history-full");
    let file = dir.join("s.toml");
    let text = "duration_ms = 1_000_000_000\n[protocol]\nname = \"single-redis\"\n\
                [workload]\nclients = 3\ncs_ms_min = 10\ncs_ms_max = 100\n";
    std::fs::write(&file, text).unwrap();
    let out = locksim(&["run", &file.display().to_string(), "--seed", "1"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its history reached 2000000 events, the most one run may hold"),
        "{}",
        stderr(&out)
    );
}
