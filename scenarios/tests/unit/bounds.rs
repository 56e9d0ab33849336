//! The tests of `src/bounds.rs`.

use locksim_scenarios::bounds::*;

fn check_text(text: &str) -> Result<(), (String, String)> {
    check(&toml::from_str(text).unwrap())
}

#[test]
fn every_kind_of_number_has_its_bound() {
    assert!(check_text("duration_ms = 1_000_000_000\n[protocol]\nttl_ms = 2000").is_ok());
    let e = check_text("[protocol]\nttl_ms = 9223372036854775000").unwrap_err();
    assert_eq!(e.0, "protocol.ttl_ms");
    assert!(
        e.1.contains("a duration in ms must be between 0 and 1000000000"),
        "{e:?}"
    );
    let e = check_text("[[faults]]\nkind = \"clock_jump\"\ndelta_ms = -2e9").unwrap_err();
    assert_eq!(e.0, "faults[0].delta_ms");
    assert!(check_text("[[faults]]\ndelta_ms = -5000").is_ok());
    let e = check_text("[network]\nlatency_ms_max = nan").unwrap_err();
    assert_eq!(e.0, "network.latency_ms_max");
    let e = check_text("[faults_random]\npause_probability = 1.5").unwrap_err();
    assert!(e.1.contains("a probability"), "{e:?}");
    let e = check_text("[expect]\nacquisitions_min = -1").unwrap_err();
    assert!(
        e.1.contains("a count must be between 0 and 1000000"),
        "{e:?}"
    );
    let e = check_text("[workload]\nclients = 10001").unwrap_err();
    assert!(
        e.1.contains("a number of clients must be between 0 and 10000"),
        "{e:?}"
    );
    let e = check_text("[clocks.nodes.redis]\ndrift_ppm = 600000").unwrap_err();
    assert_eq!(e.0, "clocks.nodes.redis.drift_ppm");
    let e = check_text("[protocol]\nclock_drift_factor = 2.0").unwrap_err();
    assert!(e.1.contains("a factor"), "{e:?}");
}
