//! The single-Redis client library driven directly, outside the standard workload.

use locksim_protocols::redis::single::SingleRedis;
use locksim_protocols::{Acquired, AnyProtocol, Outcome};
use locksim_sim::fault::ClockJump;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::{simulate, Fault, Role, SimSpec};
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

/// python-redis-lock's waiters block in `BLPOP` on the signal list, which only a release by
/// the holder feeds. c1 takes the lock (1 s TTL) and its whole process stops for 2.5 s, its
/// renewal thread too: the key expires at ~1 s. c2, waiting since 50 ms, is not woken by the
/// expiry. c3 arrives at 1.5 s and its first `SET NX` wins at once; its release at ~1.6 s
/// pushes the signal, which wakes c2. c1's release at ~2.5 s finds the key gone (and pushes
/// nothing).
#[test]
fn python_redis_lock_waiters_wake_on_a_release_signal_not_on_expiry() {
    let deployment = SingleRedis
        .configure(&params(
            "client = \"python-redis-lock\"\nttl_ms = 1000\nacquire_timeout_ms = 30000",
        ))
        .unwrap();
    let spec = SimSpec {
        seed: 5,
        duration_ms: 6_000,
        ..SimSpec::default()
    };
    let history = simulate(&spec, |world| {
        let connector = deployment.start(world);
        for (name, start_ms) in [("c1", 0), ("c2", 50), ("c3", 1_500)] {
            let connector = connector.clone();
            world.add_node(name, Role::Client, move |ctx| {
                let mut client = connector.connect(&ctx);
                async move {
                    ctx.sleep_local(Duration::from_millis(start_ms)).await;
                    let Acquired::Granted(grant) = client.acquire().await else {
                        ctx.record(Kind::Fail, Op::Acquire);
                        return;
                    };
                    ctx.record(Kind::Ok, Op::Acquire);
                    if name == "c1" {
                        let stop = Duration::from_millis(2_500);
                        ctx.world().pause(ctx.idx(), stop, "the process stops");
                    }
                    ctx.sleep_local(Duration::from_millis(100)).await;
                    let outcome = client.release(&grant).await;
                    let kind = if outcome == Outcome::Ok {
                        Kind::Ok
                    } else {
                        Kind::Fail
                    };
                    ctx.record(kind, Op::Release);
                }
            });
        }
    })
    .unwrap()
    .history;
    let at_ms = |node: &str, op: Op, kind: Kind| -> Vec<u64> {
        (history.iter())
            .filter(|e| e.node == node && e.op == op && e.kind == kind)
            .map(|e| e.time_ns / 1_000_000)
            .collect()
    };
    let c3 = at_ms("c3", Op::Acquire, Kind::Ok);
    assert!(
        c3.len() == 1 && (1_500..1_520).contains(&c3[0]),
        "c3 arrives after the expiry and its first SET NX wins: expected ~1500 ms, got {c3:?}"
    );
    let c3_released = at_ms("c3", Op::Release, Kind::Ok);
    let c2 = at_ms("c2", Op::Acquire, Kind::Ok);
    assert!(
        c3_released.len() == 1
            && c2.len() == 1
            && (c3_released[0]..c3_released[0] + 20).contains(&c2[0]),
        "c2 waits in BLPOP through the expiry at ~1 s and is woken by c3's release: expected \
         within 20 ms after {c3_released:?}, got {c2:?}"
    );
    assert_eq!(
        at_ms("c1", Op::Release, Kind::Fail).len(),
        1,
        "c1's release finds its key gone (NotAcquired)"
    );
}

/// The fsyncs of a server on `appendfsync everysec` over 6 s: c1 takes and gives back the
/// lock at 0 and again at 4.5 s, idle between; the server's clock steps by `step_ms` at
/// 500 ms, if at all.
fn everysec_fsyncs(step_ms: Option<i64>) -> u64 {
    let deployment = SingleRedis
        .configure(&params("persistence = \"everysec\""))
        .unwrap();
    let faults = step_ms.map(|delta_ms| {
        Fault::ClockJump(ClockJump {
            node: "redis".into(),
            at_ms: 500,
            delta_ms,
        })
    });
    let spec = SimSpec {
        seed: 1,
        duration_ms: 6_000,
        faults: faults.into_iter().collect(),
        ..SimSpec::default()
    };
    let outcome = simulate(&spec, |world| {
        let connector = deployment.start(world);
        world.add_node("c1", Role::Client, move |ctx| {
            let mut client = connector.connect(&ctx);
            async move {
                for start_ms in [0, 4_500] {
                    ctx.sleep_local(Duration::from_millis(start_ms)).await;
                    let Acquired::Granted(grant) = client.acquire().await else {
                        panic!("c1 acquires an idle lock");
                    };
                    ctx.sleep_local(Duration::from_millis(50)).await;
                    assert_eq!(client.release(&grant).await, Outcome::Ok);
                }
            }
        });
    })
    .unwrap();
    outcome.server_fsyncs
}

/// `appendfsync everysec` as Redis 7.0's `flushAppendOnlyFile` runs it: a background sync of
/// what changed, at the first event-loop turn in a wall-clock second past the last sync's.
/// The first burst (`SET`, `DEL` in second 0, the server's start) is synced at second 1; the
/// second burst's `SET` at once (second 4), its `DEL` at second 5; an idle second syncs
/// nothing. A clock stepped 10 s back syncs nothing until it catches up (never, here).
#[test]
fn everysec_syncs_a_change_once_a_wall_clock_second() {
    assert_eq!(everysec_fsyncs(None), 3, "syncs at 1 s, 4.5 s and 5 s");
    assert_eq!(
        everysec_fsyncs(Some(-10_000)),
        0,
        "no second after the step is past the last sync's (the start)"
    );
}
