//! Connections: server push, and loss and restoration noticed by the client.

use futures::StreamExt;
use locksim_sim::history::{Event, Op};
use locksim_sim::rpc::{endpoint, Caller, ConnEvent, Wire};
use locksim_sim::{simulate, Fault, Net, NetConfig, NodeCtx, NodeIdx, Role, SimSpec};
use std::time::Duration;

type Family = Net<Wire<u32, String>>;

/// Adds server `s`: it answers each request `n` with "ok", `answer_after_ms` after it came
/// (at once if 0), and then pushes `n` pushes.
fn add_server(world: &locksim_sim::World, net: &Family, answer_after_ms: u64) -> NodeIdx {
    let net = net.clone();
    world.add_node("s", Role::Server, move |ctx| {
        let net = net.clone();
        async move {
            let (caller, mut requests) = endpoint(&net, &ctx);
            while let Some(req) = requests.next().await {
                if answer_after_ms > 0 {
                    ctx.sleep_local(Duration::from_millis(answer_after_ms))
                        .await;
                }
                caller.reply(req.from, req.id, "ok".into());
                for i in 0..req.body {
                    caller.push(req.from, format!("push {i}"));
                }
            }
        }
    });
    world.node("s").unwrap()
}

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
        let s = add_server(world, &net, 0);
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

/// A 2 s run in which `s` crashes at 100 ms for good, under `faults` too, every message taking
/// `latency_ms`.
fn crashing_server(mut faults: Vec<Fault>, latency_ms: f64) -> SimSpec {
    faults.push(Fault::Crash(locksim_sim::fault::Crash {
        node: "s".into(),
        at_ms: Some(100),
        point: None,
        occurrence: 1,
        restart_after_ms: None,
    }));
    SimSpec {
        seed: 1,
        duration_ms: 2_000,
        faults,
        network: NetConfig {
            latency_ms_min: latency_ms,
            latency_ms_max: latency_ms,
            ..NetConfig::default()
        },
        ..SimSpec::default()
    }
}

/// The run of [`crashing_server`], its server `s` answering each request `answer_after_ms`
/// after it comes, and a client `c` that runs `client` with its caller and `s`'s node: the
/// client's notes with their times.
fn with_crashing_server<F, Fut>(
    faults: Vec<Fault>,
    latency_ms: f64,
    answer_after_ms: u64,
    client: F,
) -> Vec<(String, u64)>
where
    F: Fn(NodeCtx, Caller<u32, String>, NodeIdx) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let spec = crashing_server(faults, latency_ms);
    let history = simulate(&spec, |world| {
        let net: Family = Net::new(world);
        let s = add_server(world, &net, answer_after_ms);
        world.add_node("c", Role::Client, move |ctx| {
            let (net, client) = (net.clone(), client.clone());
            async move {
                let (caller, _) = endpoint(&net, &ctx);
                client(ctx, caller, s).await;
            }
        });
    })
    .unwrap()
    .history;
    notes(&history)
}

/// A server `s` that answers each request `answer_after_ms` after it comes, crashed at 100 ms
/// for good, under `faults` too, every message taking `latency_ms`; a client `c` that calls
/// it at `call_at_ms` with a 500 ms timeout and notes when the call ended and how.
fn call_a_crashing_server(
    call_at_ms: u64,
    answer_after_ms: u64,
    latency_ms: f64,
    faults: Vec<Fault>,
) -> Vec<(String, u64)> {
    with_crashing_server(
        faults,
        latency_ms,
        answer_after_ms,
        move |ctx, caller, s| async move {
            ctx.sleep_local(Duration::from_millis(call_at_ms)).await;
            let answer = caller.call(s, 0, Duration::from_millis(500)).await;
            ctx.note(format!("{answer:?}"));
        },
    )
}

/// Asserts the client's one note: how its call ended, and when.
fn assert_ended(notes: Vec<(String, u64)>, outcome: &str, at_ms: u64) {
    let expected = [(outcome.to_string(), at_ms)];
    assert_eq!(
        notes, expected,
        "expected the call to end {outcome} at {at_ms} ms"
    );
}

/// `s` cut off from everyone from `at_ms` for a second.
fn cut_from(at_ms: u64) -> Fault {
    Fault::Partition(locksim_sim::fault::Partition {
        at_ms,
        duration_ms: 1_000,
        isolate: vec!["s".into()],
        groups: vec![],
        one_way: false,
    })
}

/// The server's process is gone and its host resets the connection: a call fails after a
/// round trip (1 ms each way at the simulator's smallest latency), as a live link's connect
/// to a killed server does, not at the caller's timeout.
#[test]
fn a_call_to_a_crashed_server_is_refused_after_a_round_trip() {
    assert_ended(
        call_a_crashing_server(200, 0, 1.0, vec![]),
        "Err(Timeout)",
        202,
    );
}

/// A call waiting on a server whose process dies is reset as it dies: the caller hears so
/// once whatever the server sent before could have arrived (TCP keeps the order), the link's
/// largest latency (5 ms here) after the crash at 100 ms.
#[test]
fn a_call_waiting_on_a_server_that_dies_is_reset() {
    assert_ended(
        call_a_crashing_server(50, 150, 5.0, vec![]),
        "Err(Timeout)",
        105,
    );
}

/// A reply sent before the server's process died still arrives: called at 93 ms, the server
/// answers at once at 98 ms, dies at 100, and the answer arrives at 103 (5 ms a message).
#[test]
fn a_reply_sent_before_the_server_died_still_arrives() {
    assert_ended(
        call_a_crashing_server(93, 0, 5.0, vec![]),
        "Ok(\"ok\")",
        103,
    );
}

/// A crashed server behind a partition sends no reset: a call waits out its timeout, whether
/// made after the crash or waiting when it came.
#[test]
fn a_call_to_a_crashed_server_cut_off_waits_its_timeout() {
    assert_ended(
        call_a_crashing_server(200, 0, 1.0, vec![cut_from(50)]),
        "Err(Timeout)",
        700,
    );
    assert_ended(
        call_a_crashing_server(50, 150, 1.0, vec![cut_from(80)]),
        "Err(Timeout)",
        550,
    );
}

/// A client `c` that, from 20 ms, sleeps `sleep_ms` unless its connection to `s` (crashed at
/// 100 ms, every message taking 5 ms, under `faults` too) is closed first, and notes how the
/// wait ended and when.
fn wait_unless_closed(sleep_ms: u64, faults: Vec<Fault>) -> Vec<(String, u64)> {
    with_crashing_server(faults, 5.0, 0, move |ctx, caller, s| async move {
        ctx.sleep_local(Duration::from_millis(20)).await;
        let slept = ctx.sleep_local(Duration::from_millis(sleep_ms));
        let outcome = caller.unless_closed(s, slept).await;
        // `Err(true)`: the connection to `s` closed.
        ctx.note(format!("{:?}", outcome.map_err(|closed| closed == s)));
    })
}

/// A connection held to a server whose process dies is closed by its host: the client hears
/// it once what the server sent before could have arrived (5 ms), not at the end of its wait
/// (a ZooKeeper client's `Disconnected`); cut off from the server, it hears nothing.
#[test]
fn a_connection_to_a_server_that_dies_is_closed_unless_cut_off() {
    assert_ended(wait_unless_closed(1_000, vec![]), "Err(true)", 105);
    assert_ended(
        wait_unless_closed(1_000, vec![cut_from(50)]),
        "Ok(())",
        1_020,
    );
    // The death is known at 100 ms and wins over a wait that would end at 102, before what
    // the server sent before has arrived: the close is heard at 105 all the same.
    assert_ended(wait_unless_closed(82, vec![]), "Err(true)", 105);
}

/// A watch kept across many waits, each cut short (every 2 ms, as a server's loop takes its
/// next input) hears the close all the same, once (5 ms after the death): a wait dropped
/// after the death and before the close is heard goes on where it was.
#[test]
fn a_kept_close_watch_hears_the_close_though_each_wait_is_cut_short() {
    use futures::future::{select, Either};
    let notes = with_crashing_server(vec![], 5.0, 0, |ctx, caller, s| async move {
        let mut watch = caller.watch_close(s);
        loop {
            let tick = std::pin::pin!(ctx.sleep_local(Duration::from_millis(2)));
            let closed = std::pin::pin!(watch.closed());
            if let Either::Right((closed, _)) = select(tick, closed).await {
                ctx.note(format!("closed: {}", closed == s));
                return;
            }
        }
    });
    assert_ended(notes, "closed: true", 105);
}

/// A live server that closes its clients' connections ([`locksim_sim::World::close_connections`],
/// as a ZooKeeper server that loses its leader does): a call waiting on it ends unanswered once
/// what the server sent before could have arrived (the close at 100 ms, heard at 105, not the
/// answer due at 410), and the server, alive, answers the next call (it serves one request at
/// a time: the first one's 400 ms end at 405, the next one's at 805, heard at 810). A crash
/// would leave the next call unanswered.
#[test]
fn a_live_server_that_closes_its_connections_ends_the_calls_waiting_and_answers_the_next() {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 2_000,
        network: NetConfig {
            latency_ms_min: 5.0,
            latency_ms_max: 5.0,
            ..NetConfig::default()
        },
        ..SimSpec::default()
    };
    let history = simulate(&spec, |world| {
        let net: Family = Net::new(world);
        let s = add_server(world, &net, 400);
        let closer = world.clone();
        world.spawn_on_nemesis(async move {
            madsim::time::sleep(Duration::from_millis(100)).await;
            closer.close_connections(s);
        });
        world.add_node("c", Role::Client, move |ctx| {
            let net = net.clone();
            async move {
                let (caller, _) = endpoint(&net, &ctx);
                let call = caller.call(s, 0, Duration::from_millis(1_000));
                let answer = caller.unless_closed(s, call).await;
                ctx.note(format!("first closed: {}", answer == Err(s)));
                let next = caller.call(s, 1, Duration::from_millis(1_000)).await;
                ctx.note(format!("next: {next:?}"));
            }
        });
    })
    .unwrap()
    .history;
    let expected = [
        ("first closed: true".to_string(), 105),
        ("next: Ok(\"ok\")".to_string(), 810),
    ];
    assert_eq!(notes(&history), expected, "expected, then observed");
}
