//! `locksim check`: reference histories give their known verdicts and exit codes; malformed
//! history files exit 2 with an error naming the line.

use crate::common;

use common::{code, repo, run, scratch, stderr};

fn history(name: &str) -> String {
    repo(&format!("sim/tests/histories/{name}"))
}

#[test]
fn reference_histories_exit_by_verdict() {
    for (file, exit) in [
        ("redis-single-healthy.jsonl", 0),
        ("redis-single-gc-pause.jsonl", 1),
        ("token-reuse.jsonl", 1),
        ("acknowledged-but-unrecorded.jsonl", 0),
    ] {
        let out = run(&["check", &history(file)]);
        assert_eq!(code(&out), exit, "{file}: {}", stderr(&out));
    }
    let out = run(&["check", &history("stale-token-accepted.jsonl"), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "invalid");
    assert_eq!(json["properties"]["fencing"], "invalid");
    assert_eq!(json["violation_counts"]["fencing"], 1);
    assert_eq!(json["violations"][1]["events"], serde_json::json!([13, 20]));
    let out = run(&[
        "check",
        &history("acknowledged-but-unrecorded.jsonl"),
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "unknown");
    assert!(json["reasons"]["lost_update"].is_string());
}

#[test]
fn a_recorded_history_checks_like_the_run_that_wrote_it() {
    let dir = scratch("check-recorded");
    let file = dir.join("h.jsonl").display().to_string();
    let scenario = repo("scenarios/catalog/redis-single-clock-jump.toml");
    let ran = run(&["run", &scenario, "--json", "--history", &file]);
    let checked = run(&["check", &file, "--json"]);
    assert_eq!(code(&ran), code(&checked));
    let ran: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let checked: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    for field in ["verdict", "properties", "violations", "trace_hash"] {
        assert_eq!(ran[field], checked[field], "{field}");
    }
}

#[test]
fn malformed_lines_are_named_and_exit_2() {
    let dir = scratch("check-malformed");
    let good = r#"{"index":0,"time_ns":1000,"node":"c1","kind":"invoke","op":"acquire"}"#;
    for (name, line3, says) in [
        ("not-json.jsonl", "{\"index\":2,", "not a valid event"),
        (
            "unknown-op.jsonl",
            r#"{"index":2,"time_ns":3000,"node":"c1","kind":"ok","op":"teleport"}"#,
            "unknown variant `teleport`",
        ),
        (
            "missing-field.jsonl",
            r#"{"index":2,"time_ns":3000,"kind":"ok","op":"acquire"}"#,
            "missing field `node`",
        ),
        (
            "time-goes-back.jsonl",
            r#"{"index":2,"time_ns":5,"node":"c1","kind":"ok","op":"acquire"}"#,
            "earlier than the previous event",
        ),
    ] {
        let path = dir.join(name);
        let line2 = r#"{"index":1,"time_ns":2000,"node":"c2","kind":"invoke","op":"acquire"}"#;
        std::fs::write(&path, format!("{good}\n{line2}\n{line3}\n")).unwrap();
        let out = run(&["check", &path.display().to_string()]);
        assert_eq!(code(&out), 2, "{name}");
        let err = stderr(&out);
        assert!(err.contains(&format!("{name}:3:")), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
    }
    let missing = dir.join("nowhere.jsonl").display().to_string();
    let out = run(&["check", &missing]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
fn histories_from_real_systems_check_with_their_uncertainty() {
    let real = |name: &str| repo(&format!("check/tests/histories/{name}"));
    let out = run(&["check", &real("info-enter.jsonl"), "--json"]);
    assert_eq!(
        code(&out),
        0,
        "unknown is not a violation: {}",
        stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["properties"]["mutual_exclusion"], "unknown");
    let reason = json["reasons"]["mutual_exclusion"].as_str().unwrap();
    assert!(reason.contains("may not have entered"), "{reason}");
    let text = run(&["check", &real("info-enter.jsonl")]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("mutual_exclusion  unknown: 1 pair"), "{text}");

    let out = run(&["check", &real("local-clocks-overlap.jsonl")]);
    assert_eq!(code(&out), 1);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("mutual_exclusion  VIOLATED (1 violation)"),
        "{text}"
    );
    assert!(
        text.contains("#5 1400.000ms app2 ok cs_enter grant=app2#1 ±5.000ms"),
        "{text}"
    );
}

#[test]
fn counts_are_exact_and_text_shows_the_witnesses_json_holds() {
    let dir = scratch("check-many");
    let file = dir.join("many.jsonl");
    // 40 clients inside at once: 780 overlapping pairs.
    let mut lines = vec![];
    for i in 0..40 {
        lines.push(format!(
            r#"{{"index":{i},"time_ns":{i},"node":"c{i}","kind":"ok","op":"cs_enter","grant":"c{i}#1"}}"#
        ));
    }
    lines.push(r#"{"index":40,"time_ns":1000,"node":"c0","kind":"info","op":"note"}"#.into());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let path = file.display().to_string();
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["check", &path, "--json"]).stdout).unwrap();
    assert_eq!(json["violation_counts"]["mutual_exclusion"], 780);
    let kept = json["violations"].as_array().unwrap().len();
    let text = String::from_utf8_lossy(&run(&["check", &path]).stdout).into_owned();
    assert_eq!(text.matches("[mutual_exclusion]").count(), kept, "{text}");
    assert!(
        text.contains(&format!(
            "... and {} more mutual_exclusion violations",
            780 - kept
        )),
        "{text}"
    );
}
