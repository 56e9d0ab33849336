//! The tests of `src/redis/redlock.rs`.

use locksim_protocols::protocol::{parse_params, Acquired, LockClient, Protocol};
use locksim_protocols::redis::redlock::*;
use std::sync::Arc;
use std::time::Duration;

fn params(variant: Variant) -> Params {
    let table = toml::toml! { ttl_ms = 10_000 };
    Params {
        variant,
        ..parse_params(&table).unwrap()
    }
}

const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn quorum_is_a_strict_majority() {
    assert_eq!(quorum(1), 1);
    assert_eq!(quorum(3), 2);
    assert_eq!(quorum(5), 3);
    assert_eq!(quorum(7), 4);
}

#[test]
fn validity_is_ttl_minus_elapsed_minus_drift() {
    let p = params(Variant::Correct);
    // drift = 10 000 × 0.01 + 2 = 102 ms.
    assert_eq!(p.drift(), MS(102));
    assert_eq!(p.decide(3, MS(100)), Ok(MS(9_798)));
    assert_eq!(p.decide(5, MS(9_897)), Ok(MS(1)));
    assert!(
        p.decide(5, MS(9_898)).is_err(),
        "zero validity is not a lock"
    );
    assert!(p.decide(5, MS(20_000)).is_err());
}

#[test]
fn acquired_only_on_a_majority() {
    let p = params(Variant::Correct);
    assert!(p.decide(2, MS(1)).unwrap_err().contains("3 needed"));
    assert!(p.decide(3, MS(1)).is_ok());
    let one = Params {
        instances: 1,
        ..params(Variant::Correct)
    };
    assert!(one.decide(1, MS(1)).is_ok());
    assert!(one.decide(0, MS(1)).is_err());
}

#[test]
fn bug_variants_change_the_arithmetic() {
    let no_drift = params(Variant::NoDriftAllowance);
    assert_eq!(no_drift.decide(3, MS(100)), Ok(MS(9_900)));
    assert_eq!(no_drift.decide(3, MS(9_950)), Ok(MS(50)));
    assert!(params(Variant::Correct).decide(3, MS(9_950)).is_err());
    // Without the check, a lock acquired after twice its TTL still gets a full lease.
    let unchecked = params(Variant::NoValidityCheck);
    assert_eq!(unchecked.decide(3, MS(20_000)), Ok(MS(9_898)));
    assert!(unchecked.decide(2, MS(1)).is_err());
}

#[test]
fn parameters_are_validated() {
    let configure =
        |t: &toml::Table| parse_params::<Params>(t).and_then(|p| Redlock.validate(&p).map(|()| p));
    let bad = |t: toml::Table| configure(&t).err().unwrap();
    assert_eq!(
        bad(toml::toml! { instances = 4 }).field.as_deref(),
        Some("instances")
    );
    assert_eq!(
        bad(toml::toml! { persistence = ["none", "always"] })
            .field
            .as_deref(),
        Some("persistence")
    );
    assert!(configure(&toml::toml! { variant = "no-such-bug" }).is_err());
    let each = toml::toml! {
        instances = 3
        persistence = ["none", "always", "everysec"]
    };
    assert!(configure(&each).is_ok());
}

/// The variant name of an outcome, for a readable log.
fn kind(outcome: &impl std::fmt::Debug) -> String {
    let text = format!("{outcome:?}");
    text.split('(').next().unwrap_or_default().to_owned()
}

/// In a simulated world: an extended lock outlives its first TTL; an extend after the
/// lock expired and was taken by another client fails.
#[test]
fn extend_keeps_the_lock_on_a_quorum() {
    use locksim_sim::{simulate, Role, SimSpec};
    use std::sync::Mutex;
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let spec = SimSpec {
        seed: 7,
        duration_ms: 2_000,
        ..SimSpec::default()
    };
    let log2 = log.clone();
    simulate(&spec, move |world| {
        let table = toml::toml! {
            ttl_ms = 500
            retry_count = 1
        };
        let params: Params = parse_params(&table).unwrap();
        let servers = Arc::new(Redlock.start(&params, world));
        // At these times (ms), each client acquires if it holds nothing, else extends.
        for (name, script) in [("c1", vec![1, 300, 600, 1_400]), ("c2", vec![900, 1_300])] {
            let (servers, log, params) = (servers.clone(), log2.clone(), params.clone());
            world.add_node(name, Role::Client, move |ctx| {
                let (servers, log, script) = (servers.clone(), log.clone(), script.clone());
                let params = params.clone();
                async move {
                    let mut client = Redlock.connect(&params, &servers, &ctx);
                    let mut grant = None;
                    for at_ms in script {
                        let now = ctx.mono_now();
                        ctx.sleep_local(Duration::from_millis(at_ms).saturating_sub(now))
                            .await;
                        let what = match grant.as_mut() {
                            None => match client.acquire().await {
                                Acquired::Granted(g) => {
                                    grant = Some(g);
                                    "acquired".to_owned()
                                }
                                other => kind(&other),
                            },
                            Some(g) => format!("extend {}", kind(&client.extend(g).await)),
                        };
                        log.lock()
                            .unwrap()
                            .push(format!("{} {at_ms} {what}", ctx.name()));
                    }
                }
            });
        }
    })
    .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "c1 1 acquired",
            "c1 300 extend Ok",
            "c1 600 extend Ok",
            "c2 900 Failed",
            "c2 1300 acquired",
            "c1 1400 extend Failed",
        ]
    );
}
