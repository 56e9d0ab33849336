//! Connections: server push, and loss and restoration noticed by the client.

use futures::StreamExt;
use locksim_sim::history::{Event, Op};
use locksim_sim::rpc::{endpoint, ConnEvent, Wire};
use locksim_sim::{simulate, Fault, Net, Role, SimSpec};
use std::time::Duration;

type Family = Net<Wire<u32, String>>;

/// A server `s` that answers each request `n` with "ok" and then pushes `n` pushes; a client
/// `c` that connects, asks for 2 pushes, and notes every connection event with its time.
fn world(faults: Vec<Fault>) -> Vec<Event> {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 3_000,
        faults,
        ..SimSpec::default()
    };
    simulate(&spec, |world| {
        let net: Family = Net::new(world);
        let server_net = net.clone();
        world.add_node("s", Role::Server, move |ctx| {
            let net = server_net.clone();
            async move {
                let (caller, mut requests) = endpoint(&net, &ctx);
                while let Some(req) = requests.next().await {
                    caller.reply(req.from, req.id, "ok".into());
                    for i in 0..req.body {
                        caller.push(req.from, format!("push {i}"));
                    }
                }
            }
        });
        let s = world.node("s").unwrap();
        world.add_node("c", Role::Client, move |ctx| {
            let net = net.clone();
            async move {
                let (caller, _) = endpoint(&net, &ctx);
                let ms = Duration::from_millis;
                let mut conn = caller.connect(s, ms(50), ms(200));
                let answer = caller.call(s, 2, ms(100)).await;
                assert_eq!(answer.as_deref(), Ok("ok"));
                while let Some(event) = conn.next().await {
                    let what = match event {
                        ConnEvent::Push(p) => p,
                        ConnEvent::Lost => "lost".into(),
                        ConnEvent::Restored => "restored".into(),
                    };
                    ctx.note(what);
                }
            }
        });
    })
    .unwrap()
    .history
}

/// The client's notes with their true time in whole ms.
fn notes(history: &[Event]) -> Vec<(String, u64)> {
    history
        .iter()
        .filter(|e| e.op == Op::Note && e.node == "c")
        .map(|e| (e.detail.clone().unwrap(), e.time_ns / 1_000_000))
        .collect()
}

fn names(notes: &[(String, u64)]) -> Vec<&str> {
    notes.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn pushes_arrive_on_the_connection_in_order() {
    let n = notes(&world(vec![]));
    assert_eq!(names(&n), ["push 0", "push 1"]);
}

#[test]
fn a_partition_is_noticed_after_the_timeout_and_its_end_at_the_next_ping() {
    let cut = Fault::Partition(locksim_sim::fault::Partition {
        at_ms: 1_000,
        duration_ms: 500,
        isolate: vec!["s".into()],
        groups: vec![],
        one_way: false,
    });
    let n = notes(&world(vec![cut]));
    assert_eq!(names(&n), ["push 0", "push 1", "lost", "restored"]);
    let (lost, restored) = (n[2].1, n[3].1);
    assert!((1_150..=1_260).contains(&lost), "lost at {lost} ms");
    assert!(
        (1_500..=1_560).contains(&restored),
        "restored at {restored} ms"
    );
}

#[test]
fn a_server_restart_resets_the_connection() {
    // Down for less than the timeout: the client learns of the restart from the new
    // incarnation in the first answer.
    let crash = Fault::Crash(locksim_sim::fault::Crash {
        node: "s".into(),
        at_ms: Some(1_000),
        point: None,
        occurrence: 1,
        restart_after_ms: Some(60),
    });
    let n = notes(&world(vec![crash]));
    assert_eq!(names(&n), ["push 0", "push 1", "lost", "restored"]);
    assert_eq!(n[2].1, n[3].1, "reset and reconnected at once");
    assert!((1_060..=1_120).contains(&n[2].1), "{n:?}");
}

/// A server `s` crashed at 100 ms for good, under `faults` too; a client `c` that calls it at
/// 200 ms with a 500 ms timeout and notes when the call failed.
fn call_a_crashed_server(mut faults: Vec<Fault>) -> Vec<(String, u64)> {
    faults.push(Fault::Crash(locksim_sim::fault::Crash {
        node: "s".into(),
        at_ms: Some(100),
        point: None,
        occurrence: 1,
        restart_after_ms: None,
    }));
    let spec = SimSpec {
        seed: 1,
        duration_ms: 2_000,
        faults,
        ..SimSpec::default()
    };
    let history = simulate(&spec, |world| {
        let net: Family = Net::new(world);
        let server_net = net.clone();
        world.add_node("s", Role::Server, move |ctx| {
            let net = server_net.clone();
            async move {
                let (caller, mut requests) = endpoint(&net, &ctx);
                while let Some(req) = requests.next().await {
                    caller.reply(req.from, req.id, "ok".into());
                }
            }
        });
        let s = world.node("s").unwrap();
        world.add_node("c", Role::Client, move |ctx| {
            let net = net.clone();
            async move {
                let (caller, _) = endpoint(&net, &ctx);
                ctx.sleep_local(Duration::from_millis(200)).await;
                let answer = caller.call(s, 0, Duration::from_millis(500)).await;
                ctx.note(format!("{answer:?}"));
            }
        });
    })
    .unwrap()
    .history;
    notes(&history)
}

/// The server's process is gone and its host resets the connection: the call fails after a
/// round trip (1 ms each way at the simulator's smallest latency), as a live link's connect to
/// a killed server does, not at the caller's timeout.
#[test]
fn a_call_to_a_crashed_server_is_refused_after_a_round_trip() {
    let n = call_a_crashed_server(vec![]);
    assert_eq!(
        n,
        [("Err(Timeout)".to_string(), 202)],
        "expected the call refused at 202 ms"
    );
}

/// A crashed server behind a partition sends no reset: the call waits out its timeout.
#[test]
fn a_call_to_a_crashed_server_cut_off_waits_its_timeout() {
    let cut = Fault::Partition(locksim_sim::fault::Partition {
        at_ms: 50,
        duration_ms: 1_000,
        isolate: vec!["s".into()],
        groups: vec![],
        one_way: false,
    });
    let n = call_a_crashed_server(vec![cut]);
    assert_eq!(
        n,
        [("Err(Timeout)".to_string(), 700)],
        "expected the call to time out at 700 ms"
    );
}
