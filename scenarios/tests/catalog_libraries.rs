//! The catalog files of client libraries (Redisson old and new, redsync, node-redlock,
//! redis-py) and of what the application does with its lock (`check`, `writes_per_cs`): each
//! meets its `[expect]` on every seed, and each story turns on the library behaviour it names:
//! the same file with that behaviour taken away comes out differently.

use crate::common;

use locksim_check::zombie::zombie_windows;
use locksim_sim::history::{Event, History, Kind, Op};
use locksim_sim::{Property, Verdict};

const SEEDS: u64 = 20;

#[test]
fn redisson_watchdog_stops_with_a_paused_process() {
    let file = "redisson-watchdog-gc-pause.toml";
    common::assert_expect_met(file, SEEDS);
    let (r, h) = common::prepared(&format!("catalog/{file}")).run_with_history(1);
    // c1 never knew: its window runs from c2's entry (~30 s) to its stale write (~35 s).
    let w = zombie_windows(&h);
    let c1 = w
        .iter()
        .find(|w| w.grant == "c1#1")
        .expect("c1#1 was overtaken");
    assert!(!c1.knew, "{c1:?}");
    assert!((4_000.0..=6_000.0).contains(&c1.ms()), "{c1:?}");
    assert!(r.stats.zombie_window_ms_max >= c1.ms());
    // The watchdog's failed renewal is only logged.
    assert!(!common::notes(&h, "c1", "renewal stopped").is_empty());
}

#[test]
fn redisson_watchdog_keeps_a_long_job_exclusive() {
    let file = "redisson-watchdog-long-job.toml";
    common::assert_expect_met(file, 5);
    // Without the watchdog, the same 30 s lease expires under jobs of 40-60 s.
    let careful = common::changed(file, "client = \"redisson\"", "ttl_ms = 30_000");
    let r = careful.run(1);
    assert_eq!(r.properties[&Property::MutualExclusion], Verdict::Invalid);
}

/// redisson/redisson#775, #3194: one renewal lost to a 2 s cut ends the old watchdog for
/// good (the key lapses a lease after the grant, under the holder); the batched renewal tries
/// again next period and keeps the lock.
#[test]
fn one_failed_renewal_ends_the_old_watchdog_and_the_batched_renewal_retries() {
    let (old, new) = (
        "redisson-watchdog-renewal-blip.toml",
        "redisson-watchdog-renewal-blip-rescheduled.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(new, SEEDS);
    let (_, h) = common::prepared(&format!("catalog/{old}")).run_with_history(1);
    let holder = h
        .iter()
        .find(|e| e.op == Op::CsEnter)
        .map(|e| e.node.clone())
        .expect("someone entered");
    assert_eq!(common::notes(&h, &holder, "renewal stopped").len(), 1);
    // The other client is let in once the key lapses: 30 s after its last reset, the grant.
    let other_in = h
        .iter()
        .find(|e| e.op == Op::CsEnter && e.node != holder)
        .expect("the other client got in");
    let at_s = other_in.time_ns as f64 / 1e9;
    assert!((29.0..=32.0).contains(&at_s), "entered at {at_s} s");
    let (_, h) = common::prepared(&format!("catalog/{new}")).run_with_history(1);
    assert_eq!(common::notes(&h, &holder, "tried again").len(), 1);
    assert!(common::notes(&h, &holder, "renewal stopped").is_empty());
}

/// go-redsync/redsync#61: before it, `Extend()` on a key that is another's reports success
/// (the reply check) and the application that stops on a failed extension writes on; after
/// it, the extension fails and the work stops without its write.
#[test]
fn redsync_before_pr_61_extends_a_lost_lock_and_after_it_stops() {
    let (old, new) = (
        "redsync-pre-61-extend-on-a-lost-lock.toml",
        "redsync-extend-on-a-lost-lock.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(new, SEEDS);
    let (_, h) = common::prepared(&format!("catalog/{old}")).run_with_history(1);
    let paused = h
        .iter()
        .find(|e| e.op == Op::Pause)
        .and_then(|e| e.target.clone())
        .expect("the holder was paused");
    assert!(!common::notes(&h, &paused, "read as success").is_empty());
    assert!(common::notes(&h, &paused, "work aborted").is_empty());
    let (_, h) = common::prepared(&format!("catalog/{new}")).run_with_history(1);
    let failed = h
        .iter()
        .filter(|e| e.node == paused && e.op == Op::Extend && e.kind == Kind::Fail)
        .count();
    assert_eq!(failed, 1, "one failed extension, then the work stops");
    assert_eq!(common::notes(&h, &paused, "work aborted").len(), 1);
}

/// What c1's stalled release of its first grant did to the key: the holder of the key when
/// the release began (the value's client), and whether the server deleted the key before
/// the release answered.
fn stalled_release(h: &History) -> (String, bool, Kind) {
    let invoke = h
        .iter()
        .find(|e| e.node == "c1" && e.op == Op::Release && e.kind == Kind::Invoke)
        .expect("c1 released");
    let done = h
        .iter()
        .find(|e| e.index > invoke.index && e.node == "c1" && e.op == Op::Release)
        .expect("c1's release answered");
    let server_note = |e: &&Event| e.node == "redis" && e.op == Op::Note;
    let before = h
        .iter()
        .rev()
        .filter(|e| e.index < invoke.index)
        .filter(server_note)
        .find_map(|e| e.detail.as_deref()?.strip_prefix("key lock = "))
        .expect("the key was set before");
    let holder = before.split(':').next().unwrap().to_owned();
    let deleted = h
        .iter()
        .filter(|e| e.index > invoke.index && e.index < done.index)
        .filter(server_note)
        .any(|e| e.detail.as_deref() == Some("key lock deleted"));
    (holder, deleted, done.kind)
}

/// redis/redis-py#416: threads sharing one `Lock` object with the token on the instance; the
/// thread whose lease expired before its release deletes the key of the thread that
/// acquired since (its release reads that thread's token), and a third gets in; with the
/// token thread-local (#491, #492) the same release deletes nothing.
#[test]
fn a_shared_lock_token_releases_another_threads_key_and_a_thread_local_one_does_not() {
    let (old, new) = (
        "redis-py-416-shared-lock-token.toml",
        "redis-py-thread-local-token.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(new, SEEDS);
    for seed in 1..=5 {
        let (_, h) = common::prepared(&format!("catalog/{old}")).run_with_history(seed);
        let (holder, deleted, kind) = stalled_release(&h);
        assert_ne!(holder, "c1", "seed {seed}: another thread held the key");
        assert!(deleted, "seed {seed}: c1's release deleted {holder}'s key");
        assert_eq!(kind, Kind::Ok, "seed {seed}");
        assert!(!common::notes(&h, "c1", "another thread's").is_empty());
        let (_, h) = common::prepared(&format!("catalog/{new}")).run_with_history(seed);
        let (holder, deleted, kind) = stalled_release(&h);
        assert_ne!(holder, "c1", "seed {seed}: another thread held the key");
        assert!(!deleted, "seed {seed}: c1's release left {holder}'s key");
        assert_eq!(kind, Kind::Fail, "seed {seed}");
        assert!(h.iter().all(|e| !e
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("another thread's")));
    }
}

#[test]
fn redsync_without_until_loses_an_update_and_with_it_skips_the_write() {
    common::assert_expect_met("redsync-no-until-gc-pause.toml", SEEDS);
    common::assert_expect_met("redsync-until-gc-pause.toml", SEEDS);
    let (_, h) = common::prepared("catalog/redsync-until-gc-pause.toml").run_with_history(1);
    assert_eq!(common::notes(&h, "c1", "write skipped").len(), 1);
    let c1 = zombie_windows(&h).into_iter().find(|w| w.grant == "c1#1");
    assert!(c1.is_some_and(|w| w.knew), "the check told c1");
}

#[test]
fn node_redlock_aborts_before_the_write_and_not_after_it() {
    let file = "node-redlock-abort-signal.toml";
    common::assert_expect_met(file, SEEDS);
    common::assert_expect_met("node-redlock-abort-after-write.toml", SEEDS);
    let (_, h) = common::prepared(&format!("catalog/{file}")).run_with_history(1);
    assert_eq!(common::notes(&h, "c1", "work aborted").len(), 1);
    assert_eq!(common::notes(&h, "c1", "signal aborted").len(), 1);
    // An application that ignores the signal loses the update.
    let ignoring = common::changed(file, "check = \"on_signal\"", "check = \"never\"");
    for seed in 1..=5 {
        let r = ignoring.run(seed);
        assert_eq!(
            r.properties[&Property::LostUpdate],
            Verdict::Invalid,
            "{}",
            r.replay
        );
    }
}

#[test]
fn node_redlock_extends_a_long_job_on_a_majority() {
    let file = "redlock-node-redlock-long-job.toml";
    common::assert_expect_met(file, 5);
    let careful = common::changed(file, "client = \"node-redlock\"", "client = \"careful\"");
    let r = careful.run(1);
    assert_eq!(r.properties[&Property::MutualExclusion], Verdict::Invalid);
}

#[test]
fn many_writes_without_a_check_lose_updates_and_with_one_do_not() {
    let file = "redis-single-many-writes-gc-pause.toml";
    common::assert_expect_met(file, SEEDS);
    let (_, h) = common::prepared(&format!("catalog/{file}")).run_with_history(1);
    let c1_writes = h
        .iter()
        .filter(|e| e.grant.as_deref() == Some("c1#1") && e.op == Op::Write)
        .filter(|e| e.kind == Kind::Invoke)
        .count();
    assert_eq!(c1_writes, 5, "five writes in one critical section");
    let checked = common::changed(file, "check = \"never\"", "check = \"before_write\"");
    for seed in 1..=5 {
        let r = checked.run(seed);
        assert_eq!(
            r.properties[&Property::LostUpdate],
            Verdict::Valid,
            "{}",
            r.replay
        );
    }
}

/// node-redlock's `extend()` tries as an acquire does (`_execute`: 11 tries 100-300 ms
/// apart), so a holder cut off from its server learns nothing until the last try failed,
/// about 3 s after the extension began: its 3 s routine has written by then, and the signal
/// aborts nothing (scenarios/validate/node-redlock-cut-off.toml; the real node-redlock broke
/// in 16 of 16 runs). With one try, as the model did before, the signal came at the expiry.
#[test]
fn node_redlock_learns_a_failed_extension_only_after_all_its_tries() {
    let file = "validate/node-redlock-cut-off.toml";
    let prepared = common::prepared(file);
    for seed in 1..=SEEDS {
        let r = prepared.run(seed);
        assert!(
            r.expect.as_ref().is_some_and(|e| e.met),
            "{}",
            common::describe(&r)
        );
    }
    let (_, h) = prepared.run_with_history(1);
    let aborted = common::notes(&h, "c1", "node-redlock: extension failed");
    let c1_write = (h.iter())
        .find(|e| e.node == "c1" && e.op == Op::Write && e.kind == Kind::Ok)
        .map(|e| e.index)
        .expect("c1 wrote");
    assert!(
        aborted.len() == 1 && aborted[0] > c1_write,
        "the signal comes after c1's write (event #{c1_write}): {aborted:?}"
    );
}
