//! The single-Redis client library driven directly, outside the standard workload.

use locksim_protocols::redis::single::SingleRedis;
use locksim_protocols::{Acquired, AnyProtocol, Outcome};
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::{simulate, Role, SimSpec};
use std::time::Duration;

fn params(text: &str) -> toml::Table {
    text.parse().unwrap()
}

/// c1 acquires and keeps extending past the TTL; c2 must not get the lock meanwhile.
#[test]
fn extend_keeps_the_lock_past_its_ttl() {
    let deployment = SingleRedis
        .configure(&params("ttl_ms = 300\nacquire_timeout_ms = 100000"))
        .unwrap();
    let spec = SimSpec {
        seed: 3,
        duration_ms: 3_000,
        ..SimSpec::default()
    };
    let history = simulate(&spec, |world| {
        let connector = deployment.start(world);
        let c2_connector = connector.clone();
        world.add_node("c1", Role::Client, move |ctx| {
            let mut client = connector.connect(&ctx);
            async move {
                let Acquired::Granted(mut grant) = client.acquire().await else {
                    panic!("c1 acquires an idle lock");
                };
                ctx.record(Kind::Ok, Op::Acquire);
                for _ in 0..10 {
                    ctx.sleep_local(Duration::from_millis(150)).await;
                    let outcome = client.extend(&mut grant).await;
                    assert_eq!(outcome, Outcome::Ok);
                    assert!(grant.valid_until.unwrap() > ctx.mono_now());
                }
                assert_eq!(client.release(&grant).await, Outcome::Ok);
                ctx.record(Kind::Ok, Op::Release);
                // Releasing twice fails: the lock is no longer ours.
                assert!(matches!(client.release(&grant).await, Outcome::Failed(_)));
            }
        });
        world.add_node("c2", Role::Client, move |ctx| {
            let mut client = c2_connector.connect(&ctx);
            async move {
                ctx.sleep_local(Duration::from_millis(50)).await;
                if let Acquired::Granted(_) = client.acquire().await {
                    ctx.record(Kind::Ok, Op::Acquire);
                }
            }
        });
    })
    .unwrap()
    .history;
    let at = |node: &str, op: Op| -> Vec<&Event> {
        history
            .iter()
            .filter(|e| e.node == node && e.op == op && e.kind == Kind::Ok)
            .collect()
    };
    let released = at("c1", Op::Release)[0].time_ns;
    assert!(
        released > 1_500_000_000,
        "c1 held the lock for ~1.5 s, 5 TTLs"
    );
    let c2 = at("c2", Op::Acquire);
    assert_eq!(c2.len(), 1, "c2 got the lock once c1 let go");
    assert!(c2[0].time_ns > released);
    let expired_while_held = history
        .iter()
        .any(|e| e.op == Op::Expire && e.time_ns < released);
    assert!(
        !expired_while_held,
        "c1's key never expired while it was extending"
    );
}
