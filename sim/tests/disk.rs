//! The simulated disk: what survives a crash, how long an fsync takes, what a stall delays.

use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::{simulate, DiskConfig, Fault, Role, SimSpec};
use std::time::Duration;

fn spec(seed: u64, faults: Vec<Fault>) -> SimSpec {
    SimSpec {
        seed,
        duration_ms: 1_000,
        disk: DiskConfig {
            fsync_ms_min: 5,
            fsync_ms_max: 20,
        },
        faults,
        ..SimSpec::default()
    }
}

/// A disk whose fsyncs take exactly 8 ms (a fault changes madsim's scheduling draws, so a
/// drawn latency would differ between runs with and without one).
fn fixed_spec(seed: u64, faults: Vec<Fault>) -> SimSpec {
    SimSpec {
        seed,
        duration_ms: 1_000,
        disk: DiskConfig {
            fsync_ms_min: 8,
            fsync_ms_max: 8,
        },
        faults,
        ..SimSpec::default()
    }
}

fn crash_at(at_ms: u64) -> Fault {
    Fault::Crash(locksim_sim::fault::Crash {
        node: "db".into(),
        at_ms: Some(at_ms),
        point: None,
        occurrence: 1,
        restart_after_ms: Some(10),
    })
}

/// At each start the node `db` notes what its log holds; on its first start it appends 1 and
/// syncs it, then appends 2 without syncing.
fn log_world(spec: &SimSpec) -> Vec<Event> {
    simulate(spec, |world| {
        world.add_node("db", Role::Server, |ctx| async move {
            let disk = ctx.disk();
            let log: Vec<u32> = disk.read("log");
            ctx.note(format!("log {log:?}"));
            if log.is_empty() {
                disk.append("log", 1u32);
                disk.fsync().await;
                ctx.note("synced");
                disk.append("log", 2u32);
            }
        });
    })
    .unwrap()
    .history
}

fn notes(history: &[Event]) -> Vec<String> {
    history
        .iter()
        .filter(|e| e.op == Op::Note)
        .filter_map(|e| e.detail.clone())
        .collect()
}

#[test]
fn a_crash_keeps_exactly_what_was_synced() {
    let h = log_world(&spec(1, vec![crash_at(100)]));
    assert_eq!(notes(&h), ["log []", "synced", "log [1]"]);
}

#[test]
fn a_crash_during_the_fsync_loses_the_write() {
    // The fsync takes at least 5 ms: a crash 1 ms in loses the write.
    let h = log_world(&spec(1, vec![crash_at(1)]));
    assert_eq!(notes(&h), ["log []", "log []", "synced"]);
}

/// The true time (ns) at which an fsync issued at 0 completes, per seed.
fn fsync_done_ns(seed: u64, stall: Option<(u64, u64)>) -> u64 {
    let faults: Vec<Fault> = stall
        .map(|(at_ms, duration_ms)| {
            Fault::FsyncStall(locksim_sim::fault::FsyncStall {
                node: "db".into(),
                at_ms,
                duration_ms,
            })
        })
        .into_iter()
        .collect();
    let spec = if faults.is_empty() {
        spec(seed, faults)
    } else {
        fixed_spec(seed, faults)
    };
    fsync_done_in(&spec)
}

fn fsync_done_in(spec: &SimSpec) -> u64 {
    let h = simulate(spec, |world| {
        world.add_node("db", Role::Server, |ctx| async move {
            ctx.sleep_local(Duration::from_millis(10)).await;
            let disk = ctx.disk();
            disk.put("image", "x".to_owned());
            disk.fsync().await;
            ctx.record(Kind::Info, Op::Note);
        });
    })
    .unwrap()
    .history;
    let done = h
        .iter()
        .find(|e| e.op == Op::Note)
        .expect("the fsync completes");
    done.time_ns - 10_000_000
}

#[test]
fn fsync_latency_follows_the_seed() {
    let a: Vec<u64> = (1..=20).map(|s| fsync_done_ns(s, None)).collect();
    let b: Vec<u64> = (1..=20).map(|s| fsync_done_ns(s, None)).collect();
    assert_eq!(a, b, "the same seed, the same latency");
    for ns in &a {
        assert!(
            (5_000_000..21_000_000).contains(ns),
            "within [disk]: {ns} ns"
        );
    }
    let distinct: std::collections::BTreeSet<u64> = a.iter().map(|ns| ns / 1_000_000).collect();
    assert!(
        distinct.len() > 3,
        "latencies vary with the seed: {distinct:?}"
    );
}

#[test]
fn a_stall_delays_exactly_the_fsyncs_inside_it() {
    for seed in 1..=5 {
        // In whole ms: madsim's timers fire a few hundred ns after their deadline.
        let ms = |stall| fsync_done_ns(seed, stall) / 1_000_000;
        let free = fsync_done_in(&fixed_spec(seed, vec![])) / 1_000_000;
        assert_eq!(free, 8);
        // A stall over the fsync's whole life holds it until the stall ends (at 300 ms).
        assert_eq!(ms(Some((5, 295))), 290);
        // A stall that ends before the fsync was issued, or starts after it completed,
        // changes nothing.
        assert_eq!(ms(Some((1, 5))), free);
        assert_eq!(ms(Some((40, 100))), free);
    }
}

/// `db` makes every kind of change, syncs, then makes more; `second` says what happens to the
/// second batch: 0 never synced, 1 synced, 2 two syncs in flight at once (which may complete
/// in either order; the later one's changes must end up durable).
fn changes_world(spec: &SimSpec, second: u8) -> Vec<Event> {
    simulate(spec, move |world| {
        world.add_node("db", Role::Server, move |ctx| async move {
            let disk = ctx.disk();
            let (log, img): (Vec<u32>, Vec<u32>) = (disk.read("log"), disk.read("img"));
            ctx.note(format!("log {log:?} img {img:?}"));
            if !log.is_empty() {
                return;
            }
            for v in [1u32, 2, 3] {
                disk.append("log", v);
            }
            disk.overwrite("log", 1, 20u32);
            disk.truncate("log", 2);
            disk.put("img", 5u32);
            disk.put("img", 6u32);
            disk.fsync().await;
            disk.append("log", 4u32);
            disk.overwrite("log", 0, 10u32);
            let first = disk.fsync();
            disk.put("img", 7u32);
            disk.truncate("log", 2);
            match second {
                1 => disk.fsync().await,
                2 => futures::future::join(first, disk.fsync()).await.0,
                _ => {}
            }
        });
    })
    .unwrap()
    .history
}

#[test]
fn every_kind_of_change_is_durable_exactly_as_synced() {
    for seed in 1..=20 {
        let h = changes_world(&spec(seed, vec![crash_at(100)]), 0);
        // The second batch's first fsync may or may not complete before the crash at 100 ms:
        // it does (latency 1-3 ms), so the log keeps [10, 20, 4] but not the later changes.
        assert_eq!(
            notes(&h),
            ["log [] img []", "log [10, 20, 4] img [6]"],
            "seed {seed}"
        );
        for second in [1, 2] {
            let h = changes_world(&spec(seed, vec![crash_at(100)]), second);
            assert_eq!(
                notes(&h),
                ["log [] img []", "log [10, 20] img [7]"],
                "seed {seed}, second batch {second}"
            );
        }
    }
}
