//! The harness itself: transport, partitions, loss, pauses, crashes, clocks, named points
//! and determinism, on small worlds built for the purpose.

use futures::StreamExt;
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::net::PartitionMode;
use locksim_sim::world::NodeClockConfig;
use locksim_sim::{simulate, ClockConfig, Fault, Net, NetConfig, Role, SimSpec};
use std::time::Duration;

fn fixed_latency(ms: f64) -> NetConfig {
    NetConfig {
        latency_ms_min: ms,
        latency_ms_max: ms,
        ..NetConfig::default()
    }
}

/// A world with a sender `a` that sends `count` messages (one per `gap_ms`) to a receiver
/// `b`, which records a `note` with the message's value for each one it receives.
fn ping_world(spec: &SimSpec, count: u32, gap_ms: u64) -> Vec<Event> {
    simulate(spec, |world| {
        let net: Net<u32> = Net::new(world);
        let rx_net = net.clone();
        world.add_node("b", Role::Server, move |ctx| {
            let mut inbox = rx_net.bind(&ctx);
            async move {
                while let Some(env) = inbox.next().await {
                    ctx.record_event(
                        Event::new(ctx.name(), Kind::Info, Op::Note).value(env.msg as i64),
                    );
                }
            }
        });
        let b = world.node("b").unwrap();
        world.add_node("a", Role::Client, move |ctx| {
            let net = net.clone();
            async move {
                for i in 0..count {
                    net.send(ctx.idx(), b, i);
                    ctx.sleep_local(Duration::from_millis(gap_ms)).await;
                }
            }
        });
    })
    .unwrap()
    .history
}

/// True time in whole ms (madsim's timers fire a few hundred ns after their deadline).
fn ms(e: &Event) -> u64 {
    e.time_ns / 1_000_000
}

fn received(history: &[Event]) -> Vec<i64> {
    history
        .iter()
        .filter(|e| e.op == Op::Note && e.node == "b")
        .filter_map(|e| e.value)
        .collect()
}

#[test]
fn messages_arrive_after_their_latency() {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 100,
        network: fixed_latency(10.0),
        ..SimSpec::default()
    };
    let h = ping_world(&spec, 1, 1);
    let got: Vec<&Event> = h.iter().filter(|e| e.op == Op::Note).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(ms(got[0]), 10);
}

#[test]
fn a_later_link_override_replaces_an_earlier_in_the_simulator_as_latency_ms_says() {
    let link = |from: &str, to: &str, ms: f64, both_ways: bool| locksim_sim::net::LinkConfig {
        from: from.into(),
        to: to.into(),
        latency_ms_min: ms,
        latency_ms_max: ms,
        both_ways,
    };
    let network = NetConfig {
        links: vec![link("b", "a", 30.0, true), link("a", "b", 20.0, false)],
        ..fixed_latency(10.0)
    };
    assert_eq!(network.latency_ms("a", "b"), (20.0, 20.0));
    assert_eq!(network.latency_ms("b", "a"), (30.0, 30.0));
    assert_eq!(network.latency_ms("a", "c"), (10.0, 10.0));
    let spec = SimSpec {
        seed: 1,
        duration_ms: 100,
        network,
        ..SimSpec::default()
    };
    let h = ping_world(&spec, 1, 1);
    let got: Vec<u64> = h.iter().filter(|e| e.op == Op::Note).map(ms).collect();
    assert_eq!(got, [20], "a -> b takes the later override's 20 ms, not 30");
}

#[test]
fn a_partition_drops_messages_already_in_flight() {
    // Sent at t=0 with 10 ms latency; the link is cut from 5 to 7 ms, healed before arrival.
    let cut = Fault::Partition(locksim_sim::fault::Partition {
        at_ms: 5,
        duration_ms: 2,
        isolate: vec!["b".into()],
        groups: vec![],
        one_way: false,
    });
    let base = SimSpec {
        seed: 3,
        duration_ms: 100,
        network: fixed_latency(10.0),
        ..SimSpec::default()
    };
    assert_eq!(received(&ping_world(&base, 1, 1)), vec![0]);
    let spec = SimSpec {
        faults: vec![cut],
        ..base
    };
    let h = ping_world(&spec, 1, 1);
    assert!(
        received(&h).is_empty(),
        "in-flight message survived the cut"
    );
    assert!(h.iter().any(|e| e.op == Op::Heal), "the partition healed");
}

#[test]
fn a_one_way_partition_cuts_one_direction_only() {
    let spec = |from_first: bool| SimSpec {
        seed: 4,
        duration_ms: 100,
        network: fixed_latency(1.0),
        faults: vec![Fault::Partition(locksim_sim::fault::Partition {
            at_ms: 0,
            duration_ms: 1_000,
            isolate: vec![],
            groups: if from_first {
                vec![vec!["a".into()], vec!["b".into()]]
            } else {
                vec![vec!["b".into()], vec!["a".into()]]
            },
            one_way: true,
        })],
        ..SimSpec::default()
    };
    assert!(received(&ping_world(&spec(true), 5, 5)).is_empty());
    assert_eq!(received(&ping_world(&spec(false), 5, 5)).len(), 5);
}

#[test]
fn loss_rate_stays_within_bounds() {
    let spec = SimSpec {
        seed: 11,
        duration_ms: 20_000,
        network: NetConfig {
            loss_probability: 0.3,
            ..fixed_latency(1.0)
        },
        ..SimSpec::default()
    };
    let n = 10_000;
    let got = received(&ping_world(&spec, n, 1)).len() as f64 / n as f64;
    // 10k Bernoulli(0.7) trials: 5 standard deviations is ±0.023.
    assert!((got - 0.7).abs() < 0.023, "delivered fraction {got}");
}

#[test]
fn duplicates_and_reordering_happen() {
    let spec = SimSpec {
        seed: 5,
        duration_ms: 5_000,
        network: NetConfig {
            latency_ms_min: 1.0,
            latency_ms_max: 20.0,
            duplicate_probability: 0.2,
            ..NetConfig::default()
        },
        ..SimSpec::default()
    };
    let got = received(&ping_world(&spec, 1_000, 1));
    assert!(
        got.len() > 1_100,
        "expected ~1200 deliveries, got {}",
        got.len()
    );
    assert!(got.windows(2).any(|w| w[1] < w[0]), "no reordering at all");
}

#[test]
fn a_paused_node_receives_its_queued_messages_on_resume() {
    let spec = SimSpec {
        seed: 2,
        duration_ms: 1_000,
        network: fixed_latency(1.0),
        faults: vec![Fault::Pause(locksim_sim::fault::Pause {
            node: "b".into(),
            at_ms: Some(0),
            point: None,
            occurrence: 1,
            duration_ms: 500,
        })],
        ..SimSpec::default()
    };
    let h = ping_world(&spec, 10, 10);
    let notes: Vec<&Event> = h.iter().filter(|e| e.op == Op::Note).collect();
    assert_eq!(notes.len(), 10, "nothing lost while paused");
    assert!(
        notes.iter().all(|e| e.time_ns >= 500_000_000),
        "b ran while paused"
    );
    let resume = h.iter().find(|e| e.op == Op::Resume).unwrap();
    assert_eq!(ms(resume), 500);
}

#[test]
fn a_crash_loses_in_flight_messages_and_restart_reruns_init() {
    let spec = SimSpec {
        seed: 6,
        duration_ms: 200,
        network: fixed_latency(5.0),
        faults: vec![Fault::Crash(locksim_sim::fault::Crash {
            node: "b".into(),
            at_ms: Some(12),
            point: None,
            occurrence: 1,
            restart_after_ms: Some(30),
        })],
        ..SimSpec::default()
    };
    // Sends at 0, 10, 20, ... arriving 5 ms later; b is down from 12 to 42 ms. Message 0
    // arrives at 5 ms; 1 is in flight when b crashes; 2, 3 and 4 are sent to a dead node.
    let h = ping_world(&spec, 10, 10);
    assert_eq!(received(&h), vec![0, 5, 6, 7, 8, 9]);
    assert!(h.iter().any(|e| e.op == Op::Restart));
}

#[test]
fn local_sleep_honours_drift() {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 1_000,
        clocks: ClockConfig {
            nodes: [(
                "fast".to_string(),
                NodeClockConfig {
                    drift_ppm: 100_000,
                    offset_ms: 0,
                },
            )]
            .into(),
            ..ClockConfig::default()
        },
        ..SimSpec::default()
    };
    let h = simulate(&spec, |world| {
        world.add_node("fast", Role::Client, |ctx| async move {
            ctx.sleep_local(Duration::from_millis(110)).await;
            let local_ms = ctx.mono_now().as_millis() as i64;
            ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Note).value(local_ms));
        });
    })
    .unwrap()
    .history;
    let note = h.iter().find(|e| e.op == Op::Note).unwrap();
    // 110 ms on a clock 10% fast is 100 ms of true time.
    assert_eq!(ms(note), 100);
    assert_eq!(note.value, Some(110));
}

#[test]
fn clock_jump_moves_the_wall_clock_only() {
    let spec = SimSpec {
        seed: 1,
        duration_ms: 100,
        faults: vec![Fault::ClockJump(locksim_sim::fault::ClockJump {
            node: "n".into(),
            at_ms: 10,
            delta_ms: -5_000,
        })],
        ..SimSpec::default()
    };
    let h = simulate(&spec, |world| {
        world.add_node("n", Role::Server, |ctx| async move {
            ctx.sleep_local(Duration::from_millis(20)).await;
            let e = Event::new(ctx.name(), Kind::Info, Op::Note)
                .value(ctx.wall_ms())
                .detail(format!("mono {}", ctx.mono_now().as_millis()));
            ctx.record_event(e);
        });
    })
    .unwrap()
    .history;
    let note = h.iter().find(|e| e.op == Op::Note).unwrap();
    assert_eq!(note.value, Some(20 - 5_000));
    assert_eq!(note.detail.as_deref(), Some("mono 20"));
}

/// The times (ms) of the five steps of a node `n` that passes `step` every 10 ms, with
/// pauses at the given occurrences of `step` (100 ms each).
fn steps_with_pauses_at(occurrences: &[u32]) -> Vec<Event> {
    let pause = |occurrence| {
        Fault::Pause(locksim_sim::fault::Pause {
            node: "n".into(),
            at_ms: None,
            point: Some("step".into()),
            occurrence,
            duration_ms: 100,
        })
    };
    let spec = SimSpec {
        seed: 9,
        duration_ms: 1_000,
        faults: occurrences.iter().copied().map(pause).collect(),
        ..SimSpec::default()
    };
    simulate(&spec, |world| {
        world.add_node("n", Role::Client, |ctx| async move {
            for i in 0..5 {
                ctx.point("step").await;
                ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Note).value(i));
                ctx.sleep_local(Duration::from_millis(10)).await;
            }
        });
    })
    .unwrap()
    .history
}

fn note_times_ms(h: &[Event]) -> Vec<u64> {
    let notes = h.iter().filter(|e| e.op == Op::Note);
    notes.map(|e| e.time_ns / 1_000_000).collect()
}

#[test]
fn a_named_point_pauses_on_the_chosen_occurrence() {
    let h = steps_with_pauses_at(&[3]);
    // Steps at 0, 10, then the third passage pauses 100 ms: 120, 130, 140.
    assert_eq!(note_times_ms(&h), vec![0, 10, 120, 130, 140]);
    let pause = h.iter().find(|e| e.op == Op::Pause).unwrap();
    assert_eq!(pause.target.as_deref(), Some("n"));
    assert!(pause.detail.as_deref().unwrap().contains("step"));
}

#[test]
fn each_armed_point_counts_every_passage_of_its_point() {
    // The third passage pauses whether or not the first did (as live mode counts them),
    // and whichever fault is listed first.
    for occurrences in [[1, 3], [3, 1]] {
        let h = steps_with_pauses_at(&occurrences);
        // 0 + 100 ms paused, 110, then the third passage pauses: 220, 230, 240.
        assert_eq!(
            note_times_ms(&h),
            vec![100, 110, 220, 230, 240],
            "{occurrences:?}"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_history_and_others_differ() {
    let spec = |seed| SimSpec {
        seed,
        duration_ms: 2_000,
        network: NetConfig {
            latency_ms_min: 1.0,
            latency_ms_max: 30.0,
            loss_probability: 0.1,
            ..NetConfig::default()
        },
        ..SimSpec::default()
    };
    let a = ping_world(&spec(42), 100, 3);
    assert_eq!(a, ping_world(&spec(42), 100, 3));
    assert_ne!(a, ping_world(&spec(43), 100, 3));
}

#[test]
fn a_panic_in_a_node_is_reported_with_its_seed() {
    let spec = SimSpec {
        seed: 77,
        duration_ms: 100,
        ..SimSpec::default()
    };
    let err = simulate(&spec, |world| {
        world.add_node("bad", Role::Server, |_ctx| async move {
            panic!("model bug");
        });
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("seed 77") && text.contains("model bug"),
        "{text}"
    );
}

/// A partition isolating `b` from 12 to 112 ms, on a network with 10 ms latency.
fn cut_b_for_100_ms(partition: PartitionMode, connection_timeout_ms: u64) -> SimSpec {
    SimSpec {
        seed: 8,
        duration_ms: 300,
        network: NetConfig {
            partition,
            connection_timeout_ms,
            ..fixed_latency(10.0)
        },
        faults: vec![Fault::Partition(locksim_sim::fault::Partition {
            at_ms: 12,
            duration_ms: 100,
            isolate: vec!["b".into()],
            groups: vec![],
            one_way: false,
        })],
        ..SimSpec::default()
    }
}

#[test]
fn a_delay_partition_delivers_what_it_held_after_the_heal_in_send_order() {
    // Sent every 5 ms from 0 to 45 ms: message 0 arrives at 10 ms, before the cut; 1 to 9
    // arrive while the link is cut.
    let timeout = locksim_sim::net::CONNECTION_TIMEOUT_MS_DEFAULT;
    let dropped = ping_world(&cut_b_for_100_ms(PartitionMode::Drop, timeout), 10, 5);
    assert_eq!(
        received(&dropped),
        vec![0],
        "drop loses what the cut caught"
    );
    let h = ping_world(&cut_b_for_100_ms(PartitionMode::Delay, timeout), 10, 5);
    assert_eq!(
        received(&h),
        (0..10).collect::<Vec<i64>>(),
        "all, in send order"
    );
    let late: Vec<u64> = (h.iter())
        .filter(|e| e.op == Op::Note && e.value != Some(0))
        .map(ms)
        .collect();
    assert_eq!(late.len(), 9);
    assert!(
        late.iter().all(|t| (112..=125).contains(t)),
        "one latency after the heal"
    );
}

#[test]
fn a_held_message_older_than_the_connection_timeout_is_dropped() {
    // Held messages sent at 5..=60 ms have waited more than 50 ms at the heal (112 ms); those
    // sent at 65..=95 ms have not.
    let h = ping_world(&cut_b_for_100_ms(PartitionMode::Delay, 50), 20, 5);
    let mut want = vec![0];
    want.extend(13..20);
    assert_eq!(received(&h), want);
}

#[test]
fn a_receiver_crash_kills_what_was_held_for_it() {
    let mut spec = cut_b_for_100_ms(PartitionMode::Delay, 1_000);
    spec.faults.push(Fault::Crash(locksim_sim::fault::Crash {
        node: "b".into(),
        at_ms: Some(52),
        point: None,
        occurrence: 1,
        restart_after_ms: Some(10),
    }));
    // 1..=10 were held for the crashed incarnation; 11 and 12 were sent to a dead node; 13..
    // were sent to the restarted one and are held for it.
    let h = ping_world(&spec, 20, 5);
    let mut want = vec![0];
    want.extend(13..20);
    assert_eq!(received(&h), want);
}

#[test]
fn a_delay_spike_holds_one_sender_s_messages_whatever_the_partition_mode() {
    let spike = |to: Vec<String>| SimSpec {
        seed: 9,
        duration_ms: 300,
        network: fixed_latency(10.0),
        faults: vec![Fault::DelaySpike(locksim_sim::fault::DelaySpike {
            node: "a".into(),
            to,
            at_ms: Some(12),
            point: None,
            occurrence: 1,
            duration_ms: 100,
        })],
        ..SimSpec::default()
    };
    let h = ping_world(&spike(vec![]), 10, 5);
    assert_eq!(received(&h), (0..10).collect::<Vec<i64>>());
    let late = h.iter().filter(|e| e.op == Op::Note && e.value != Some(0));
    assert!(
        late.clone().all(|e| ms(e) >= 112),
        "held until the spike ended"
    );
    let hold = h
        .iter()
        .find(|e| e.op == Op::Hold)
        .expect("the spike is recorded");
    assert_eq!((ms(hold), hold.value), (12, Some(100)));
    let flush = h
        .iter()
        .find(|e| e.op == Op::Flush)
        .expect("its end is recorded");
    assert_eq!(ms(flush), 112);
    // A spike on another link leaves this one alone.
    let elsewhere = ping_world(&spike(vec!["nemesis".into()]), 10, 5);
    let on_time = elsewhere.iter().filter(|e| e.op == Op::Note);
    assert!(on_time.clone().count() == 10 && on_time.clone().all(|e| ms(e) < 60));
}
