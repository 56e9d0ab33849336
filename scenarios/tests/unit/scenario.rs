//! The tests of `src/scenario.rs`.

use locksim_protocols::Registry;
use locksim_scenarios::scenario::*;
use locksim_sim::checker::Liveness;

const MINIMAL: &str = r#"
duration_ms = 1000

[protocol]
name = "single-redis"
ttl_ms = 500
"#;

#[test]
fn minimal_scenario_parses_with_defaults() {
    let s = Scenario::parse(MINIMAL, "m.toml").unwrap();
    assert_eq!(s.workload.clients, 2);
    assert_eq!(s.protocol.params["ttl_ms"].as_integer(), Some(500));
    assert_eq!(s.seed, 1);
}

#[test]
fn unknown_field_names_line_and_field() {
    let text = format!("{MINIMAL}\n[workload]\nclients = 2\ncs_ms_mux = 3\n");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.line, Some(10), "{e}");
    assert!(e.to_string().contains("cs_ms_mux"), "{e}");
    assert!(e.to_string().starts_with("bad.toml:10:"), "{e}");
}

#[test]
fn semantic_error_names_field_and_line() {
    let text = format!("{MINIMAL}\n[network]\nlatency_ms_min = 5\nlatency_ms_max = 1\n");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("network.latency_ms_min"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
}

#[test]
fn disk_settings_are_checked() {
    let text = format!("{MINIMAL}\n[disk]\nfsync_ms_min = 5\nfsync_ms_max = 1\n");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("disk.fsync_ms_min"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
    let ok = format!("{MINIMAL}\n[disk]\nfsync_ms_max = 10\n");
    assert_eq!(
        Scenario::parse(&ok, "ok.toml").unwrap().disk.fsync_ms_max,
        10
    );
}

#[test]
fn fingerprint_follows_what_changes_results() {
    let a = Scenario::parse(MINIMAL, "m.toml").unwrap();
    let mut b = a.clone();
    b.description = "prose".into();
    b.seed = 99;
    assert_eq!(
        a.fingerprint(),
        b.fingerprint(),
        "prose and the default seed do not count"
    );
    b.workload.clients = 3;
    assert_ne!(a.fingerprint(), b.fingerprint());
    let mut c = a.clone();
    c.protocol
        .params
        .insert("ttl_ms".into(), toml::Value::Integer(501));
    assert_ne!(a.fingerprint(), c.fingerprint());
}

#[test]
fn liveness_expectations() {
    let text = format!("{MINIMAL}\n[expect]\nacquisitions_min = 5\nfirst_grant_ms_max = 100.0\n");
    let e = Scenario::parse(&text, "m.toml").unwrap().expect.unwrap();
    let mut l = Liveness {
        acquisitions: 7,
        first_grant_ms: Some(40.0),
        ..Liveness::default()
    };
    assert!(e.liveness_mismatches(&l).is_empty());
    l.acquisitions = 4;
    l.first_grant_ms = None;
    let m = e.liveness_mismatches(&l);
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(
        m[0].contains("at least 5") && m[1].contains("got none"),
        "{m:?}"
    );
}

fn prepare(extra: &str) -> Result<Prepared, ScenarioError> {
    let text = format!("{MINIMAL}\n{extra}");
    Scenario::parse(&text, "m.toml")?.prepare("m.toml", &Registry::builtin())
}

#[test]
fn fault_targets_may_be_roles_the_deployment_answers() {
    let pause = |node: &str, when: &str| {
        format!("[[faults]]\nkind = \"pause\"\nnode = \"{node}\"\n{when}\nduration_ms = 5\n")
    };
    assert!(prepare(&pause("@holder", "at_ms = 10")).is_ok());
    let e = prepare(&pause("@primary", "at_ms = 10")).err().unwrap();
    assert!(e.to_string().contains("unknown role `@primary`"), "{e}");
    assert!(
        e.to_string().contains("roles in this scenario: @holder"),
        "{e}"
    );
    let e = prepare(&pause("@holder", "point = \"before_write\""))
        .err()
        .unwrap();
    assert!(e.to_string().contains("needs a node, not a role"), "{e}");
    let e = prepare("[faults_random]\npause_probability = 0.1\npause_nodes = [\"@leader\"]\n")
        .err()
        .unwrap();
    assert!(e.to_string().contains("unknown role `@leader`"), "{e}");
}

#[test]
fn seeds_are_u64_as_an_integer_or_a_string() {
    let text = format!("seed = \"18446744073709551615\"\n{MINIMAL}");
    let s = Scenario::parse(&text, "m.toml").unwrap();
    assert_eq!(s.seed, u64::MAX);
    let back = toml::to_string(&s).unwrap();
    assert!(back.contains("seed = \"18446744073709551615\""), "{back}");
    assert_eq!(Scenario::parse(&back, "m.toml").unwrap().seed, u64::MAX);
    let s = Scenario::parse(&format!("seed = 7\n{MINIMAL}"), "m.toml").unwrap();
    assert_eq!(s.seed, 7);
    for bad in ["\"18446744073709551616\"", "\"x\"", "-1", "1.5"] {
        let e = Scenario::parse(&format!("seed = {bad}\n{MINIMAL}"), "bad.toml").unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("bad.toml:1: seed"), "{bad}: {text}");
    }
}

#[test]
fn out_of_bounds_numbers_name_the_field_and_line() {
    let text = MINIMAL.replace("ttl_ms = 500", "ttl_ms = 9_223_372_036_854_775_000");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("protocol.ttl_ms"));
    assert!(
        e.to_string().starts_with("bad.toml:6: protocol.ttl_ms: "),
        "{e}"
    );
    let text = format!("{MINIMAL}\n[workload]\nclients = \"two\"\n");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert!(
        e.to_string().starts_with("bad.toml:9: workload.clients: "),
        "{e}"
    );
}

#[test]
fn locate_finds_array_of_tables_entries() {
    let text = "duration_ms = 1\n[[faults]]\nkind = \"pause\"\n\n[[faults]]\nkind = \"crash\"\nnode = \"x\"\n";
    assert_eq!(locate(text, "faults[1]"), Some(5));
    assert_eq!(locate(text, "faults[1].node"), Some(7));
    assert_eq!(locate(text, "duration_ms"), Some(1));
}
