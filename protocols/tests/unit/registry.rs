//! The tests of `src/registry.rs`.

use locksim_protocols::registry::*;

#[test]
fn builtin_ids_are_the_scenario_names() {
    let ids = Registry::builtin().ids();
    let expected = [
        "etcd",
        "redlock",
        "replicated-redis",
        "single-redis",
        "zookeeper",
    ];
    assert_eq!(ids, expected);
}

#[test]
fn configure_parses_and_validates_once_naming_the_field() {
    let r = Registry::builtin();
    let redis = r.get("single-redis").expect("registered");
    let e = redis
        .configure(&toml::toml! { ttl_msec = 1 })
        .err()
        .unwrap();
    assert_eq!(e.field.as_deref(), Some("ttl_msec"));
    let e = redis.configure(&toml::toml! { ttl_ms = 0 }).err().unwrap();
    assert_eq!(e.field.as_deref(), Some("ttl_ms"));
    let d = redis
        .configure(&toml::Table::new())
        .expect("defaults are valid");
    assert_eq!(d.servers(), ["redis"]);
}

#[test]
fn each_reported_bug_profile_is_offered_where_its_story_runs() {
    let r = Registry::builtin();
    let offered = |protocol: &str, client: &str| {
        let table = toml::toml! { client = client };
        r.get(protocol).unwrap().configure(&table).is_ok()
    };
    for client in ["redlock-rb", "redlock-rb-extend-only-if-locked"] {
        assert!(offered("single-redis", client) && offered("redlock", client));
        assert!(!offered("replicated-redis", client), "{client}");
    }
    assert!(offered("redlock", "redsync-pre-71"));
    assert!(offered("redlock", "redsync-set-nx-on-extend"));
    assert!(!offered("single-redis", "redsync-set-nx-on-extend"));
    assert!(!offered("single-redis", "redsync-pre-71"));
    assert!(offered("single-redis", "python-redis-lock"));
    assert!(!offered("redlock", "python-redis-lock"));
    let half_second = toml::toml! {
        client = "python-redis-lock"
        ttl_ms = 1_500
    };
    let e = r.get("single-redis").unwrap().configure(&half_second);
    assert_eq!(e.err().unwrap().field.as_deref(), Some("ttl_ms"));
}

#[test]
fn redis_py_is_offered_by_single_redis_only() {
    let r = Registry::builtin();
    for client in ["redis-py", "redis-py-shared-token"] {
        let table = toml::toml! { client = client };
        r.get("single-redis")
            .unwrap()
            .configure(&table)
            .expect("single-redis models redis-py");
        for other in ["replicated-redis", "redlock"] {
            let e = r.get(other).unwrap().configure(&table).err().unwrap();
            assert_eq!(e.field.as_deref(), Some("client"), "{other} {client}");
        }
    }
}

#[test]
fn a_client_profile_fills_the_keys_the_scenario_does_not_set() {
    let r = Registry::builtin();
    let profiles = r.get("single-redis").unwrap().clients();
    let names: Vec<&str> = profiles.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "careful",
            "redisson",
            "redisson-reschedule",
            "redsync",
            "redsync-pre-61",
            "node-redlock",
            "redlock-rb",
            "redlock-rb-extend-only-if-locked",
            "redis-py",
            "redis-py-shared-token",
            "python-redis-lock"
        ]
    );
    let table = toml::toml! {
        client = "redsync"
        retry_count = 3
    };
    let filled = with_client_defaults(&profiles, &table).unwrap();
    assert_eq!(
        filled["ttl_ms"].as_integer(),
        Some(8_000),
        "redsync's expiry"
    );
    assert_eq!(
        filled["retry_count"].as_integer(),
        Some(3),
        "the scenario's own"
    );
    // No `client`: the first profile, which sets nothing.
    let plain = with_client_defaults(&profiles, &toml::Table::new()).unwrap();
    assert!(plain.is_empty());
}

#[test]
fn a_client_the_protocol_does_not_offer_or_its_own_check_refuses_is_an_error() {
    let r = Registry::builtin();
    for table in [toml::toml! { client = "jedis" }, toml::toml! { client = 3 }] {
        let e = r
            .get("single-redis")
            .unwrap()
            .configure(&table)
            .err()
            .unwrap();
        assert_eq!(e.field.as_deref(), Some("client"));
        assert!(e.message.contains("redsync"), "{}", e.message);
    }
    let e = r
        .get("etcd")
        .unwrap()
        .configure(&toml::toml! { client = "redsync" })
        .err()
        .unwrap();
    assert_eq!(e.field.as_deref(), Some("client"));
    let redlock = r.get("redlock").unwrap();
    assert!(redlock
        .configure(&toml::toml! { client = "node-redlock" })
        .is_ok());
    assert!(redlock
        .configure(&toml::toml! { client = "redisson" })
        .is_err());
    // node-redlock refuses a threshold within 100 ms of the duration.
    let tight = toml::toml! {
        client = "node-redlock"
        ttl_ms = 550
    };
    let e = r
        .get("single-redis")
        .unwrap()
        .configure(&tight)
        .err()
        .unwrap();
    assert_eq!(e.field.as_deref(), Some("extension_threshold_ms"));
    // `expiration_from` is node-redlock's alone, on each protocol it runs on.
    for protocol in ["single-redis", "redlock", "replicated-redis"] {
        let p = r.get(protocol).unwrap();
        let fixed = toml::toml! {
            client = "node-redlock"
            expiration_from = "granting-try"
        };
        assert!(p.configure(&fixed).is_ok(), "{protocol}");
        let other = toml::toml! { expiration_from = "granting-try" };
        let e = p.configure(&other).err().expect(protocol);
        assert_eq!(e.field.as_deref(), Some("expiration_from"), "{protocol}");
    }
}
