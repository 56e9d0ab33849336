//! The reported bugs of Redis lock libraries modelled as client profiles of their own
//! (go-redsync/redsync#71 and #72, go-redsync/redsync#147 and #149, leandromoreira/redlock-rb#36,
//! ionelmc/python-redis-lock#85 and #91): each file meets its `[expect]`, and its history
//! shows the library doing what the report says (or, on the fixed side, not doing it).

use crate::common;

use locksim_sim::history::{History, Kind, Op};
use locksim_sim::{Property, Verdict};

const SEEDS: u64 = 20;

/// The holder in the first critical section (the one the fault strikes).
fn first_holder(h: &History) -> String {
    h.iter()
        .find(|e| e.op == Op::CsEnter)
        .map(|e| e.node.clone())
        .expect("someone entered")
}

/// Whether `node` wrote in grant `grant` and the write was accepted.
fn wrote(h: &History, grant: &str) -> bool {
    h.iter()
        .any(|e| e.op == Op::Write && e.kind == Kind::Ok && e.grant.as_deref() == Some(grant))
}

/// go-redsync/redsync#72: `Valid()` answers true after the keys expired (four masters in
/// time, the fifth held back), and the holder writes; checking `Until()` instead, it writes
/// in time.
#[test]
fn redsync_valid_answers_true_after_expiry_and_until_does_not() {
    let (valid, until) = (
        "redsync-72-valid-after-expiry.toml",
        "redsync-72-until.toml",
    );
    common::assert_expect_met(valid, SEEDS);
    common::assert_expect_met(until, SEEDS);
    for seed in 1..=5 {
        let (_, h) = common::prepared(&format!("catalog/{valid}")).run_with_history(seed);
        let holder = first_holder(&h);
        let late = common::notes(&h, &holder, "Valid(): true");
        assert_eq!(late.len(), 1, "seed {seed}: {late:?}");
        assert!(wrote(&h, &format!("{holder}#1")), "seed {seed}");
        let (_, h) = common::prepared(&format!("catalog/{until}")).run_with_history(seed);
        assert!(common::notes(&h, &first_holder(&h), "Valid()").is_empty());
    }
    // The same file with Valid() answering from the clock (Until()) skips nothing: the check
    // itself is what took the time.
    let with_until = common::changed(valid, "check = \"ask_servers\"", "check = \"before_write\"");
    let r = with_until.run(1);
    assert!(r.expect.is_some_and(|e| !e.met));
}

/// go-redsync/redsync#71: before it, an `Extend()` that took longer than the expiry is
/// still true and the application writes; the fix fails it and the application stops.
#[test]
fn redsync_extend_before_71_is_true_after_expiry_and_the_fix_fails_it() {
    let (old, fixed) = (
        "redsync-71-extend-after-expiry.toml",
        "redsync-71-extend-after-expiry-fixed.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(fixed, SEEDS);
    for seed in 1..=5 {
        let (_, h) = common::prepared(&format!("catalog/{old}")).run_with_history(seed);
        let holder = first_holder(&h);
        let late = common::notes(&h, &holder, "Extend() before #71: true on 4 of 5");
        assert_eq!(late.len(), 1, "seed {seed}");
        assert!(wrote(&h, &format!("{holder}#1")), "seed {seed}");
        let (_, h) = common::prepared(&format!("catalog/{fixed}")).run_with_history(seed);
        let holder = first_holder(&h);
        let failed = h
            .iter()
            .filter(|e| e.op == Op::Extend && e.kind == Kind::Fail);
        assert!(failed.filter(|e| e.node == holder).any(|e| e
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("leaves no validity")));
        assert!(!wrote(&h, &format!("{holder}#1")), "seed {seed}");
    }
}

/// The values the server set its lock key to, in order (its `key lock = VALUE` notes).
fn key_values(h: &History) -> Vec<String> {
    h.iter()
        .filter(|e| e.node == "redis" && e.op == Op::Note)
        .filter_map(|e| e.detail.as_deref()?.strip_prefix("key lock = "))
        .map(str::to_owned)
        .collect()
}

/// leandromoreira/redlock-rb#36: the extension sets c1's expired key again after c2 held
/// the lock in between (c1's value is set twice around c2's), and c1 writes; with
/// `extend_only_if_locked` no value is ever set twice and c1 stops.
#[test]
fn redlock_rb_extension_sets_an_expired_key_again_and_extend_only_if_locked_does_not() {
    let (old, fixed) = (
        "redlock-rb-36-extend-sets-an-expired-key.toml",
        "redlock-rb-36-extend-only-if-locked.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(fixed, SEEDS);
    for seed in 1..=5 {
        let (_, h) = common::prepared(&format!("catalog/{old}")).run_with_history(seed);
        let values = key_values(&h);
        let again = (2..values.len()).find(|i| values[..i - 1].contains(&values[*i]));
        let i = again.unwrap_or_else(|| panic!("seed {seed}: no key set again: {values:?}"));
        assert!(values[i].starts_with("c1:"), "seed {seed}: {values:?}");
        assert!(wrote(&h, "c1#1") || wrote(&h, "c1#2"), "seed {seed}");
        let (_, h) = common::prepared(&format!("catalog/{fixed}")).run_with_history(seed);
        let values = key_values(&h);
        for (i, v) in values.iter().enumerate() {
            assert!(!values[..i].contains(v), "seed {seed}: {v} set twice");
        }
    }
}

/// ionelmc/python-redis-lock#85, #91: the renewal thread, stopped with the process past the
/// expiry, dies on its first failed extension without a word, the task writes on, and its
/// release raises `NotAcquired`. Without the stop the thread keeps the lock for good.
#[test]
fn python_redis_lock_renewal_thread_dies_silently_and_release_raises_not_acquired() {
    let file = "python-redis-lock-85-renewal-starved.toml";
    common::assert_expect_met(file, SEEDS);
    let (_, h) = common::prepared(&format!("catalog/{file}")).run_with_history(1);
    let holder = first_holder(&h);
    let died = common::notes(&h, &holder, "renewal thread: extend() raised NotAcquired");
    let raised = common::notes(&h, &holder, "release(): NotAcquired");
    assert_eq!((died.len(), raised.len()), (1, 1), "{died:?} {raised:?}");
    assert!(died[0] < raised[0]);
    assert!(wrote(&h, &format!("{holder}#1")));
    // The renewal is what keeps 90-120 s jobs under a 60 s expiry exclusive when nothing
    // stops the process.
    let unpaused = common::changed(file, "duration_ms = 70_000", "duration_ms = 1_000");
    let (r, h) = unpaused.run_with_history(1);
    assert!(r.expect.is_some_and(|e| !e.met));
    assert!(common::notes(&h, &holder, "NotAcquired").is_empty());
}

/// When (ms) `server` noted the lock key set to a value of `client`'s, between 3 s (the
/// first restart) and 15 s (inside the holder's first job).
fn set_for(h: &History, server: &str, client: &str) -> Vec<f64> {
    let prefix = format!("key lock = {client}:");
    let set = |d: &str| d.starts_with(&prefix);
    let during = |t: f64| (3_000.0..15_000.0).contains(&t);
    h.iter()
        .filter(|e| e.node == server && e.op == Op::Note && during(e.time_ms()))
        .filter(|e| e.detail.as_deref().is_some_and(set))
        .map(|e| e.time_ms())
        .collect()
}

/// go-redsync/redsync#147: masters without persistence restart empty and redsync's touch
/// cannot put the key back, so after two restarts of three the other client sets it on both
/// and is in while the holder works on; with `WithSetNXOnExtend()` (#149) each extension
/// sets the key again where it is absent.
#[test]
fn redsync_loses_a_lock_to_restarts_without_persistence_unless_extend_sets_it_again() {
    let (old, fixed) = (
        "redsync-147-restarts-without-persistence.toml",
        "redsync-149-set-nx-on-extend.toml",
    );
    common::assert_expect_met(old, SEEDS);
    common::assert_expect_met(fixed, SEEDS);
    for seed in 1..=5 {
        let (r, h) = common::prepared(&format!("catalog/{old}")).run_with_history(seed);
        assert!(set_for(&h, "redis1", "c1").is_empty(), "{}", r.replay);
        assert!(!set_for(&h, "redis2", "c2").is_empty(), "{}", r.replay);
        let (r, h) = common::prepared(&format!("catalog/{fixed}")).run_with_history(seed);
        let again = set_for(&h, "redis1", "c1");
        assert!(
            again.first().is_some_and(|t| *t < 5_000.0),
            "{}: {again:?}",
            r.replay
        );
        assert!(!set_for(&h, "redis2", "c1").is_empty(), "{}", r.replay);
    }
}

/// pottery's `locked()`, its users' check, answers at the first quorum of positive PTTLs, so
/// redsync#72's slow master cannot make it late (the holder writes in time); a pause after
/// it still loses an update, and the same pause before it makes it answer 0: the write is
/// skipped and no update is lost.
#[test]
fn pottery_locked_answers_at_a_quorum_and_cannot_see_a_pause_after_it() {
    let (slow, after) = (
        "pottery-locked-slow-master.toml",
        "pottery-locked-then-pause.toml",
    );
    common::assert_expect_met(slow, SEEDS);
    common::assert_expect_met(after, SEEDS);
    let point = "point = \"after_validity_check\"";
    let before = common::changed(after, point, "point = \"after_read\"");
    let (slow, after) = (
        common::prepared(&format!("catalog/{slow}")),
        common::prepared(&format!("catalog/{after}")),
    );
    for seed in 1..=5 {
        let (_, h) = slow.run_with_history(seed);
        assert!(wrote(&h, "c1#1"), "seed {seed}: the holder wrote in time");
        let (_, h) = after.run_with_history(seed);
        assert!(wrote(&h, "c1#1"), "seed {seed}: the stale write landed");
        let (r, h) = before.run_with_history(seed);
        let verdict = |property: Property| r.properties[&property];
        assert_eq!(
            verdict(Property::LostUpdate),
            Verdict::Valid,
            "seed {seed}: {:?}",
            r.properties
        );
        assert_ne!(
            verdict(Property::MutualExclusion),
            Verdict::Valid,
            "seed {seed}: {:?}",
            r.properties
        );
        assert!(!wrote(&h, "c1#1"), "seed {seed}: locked() said 0, no write");
        let zero = common::notes(&h, "c1", "locked() = 0");
        assert_eq!(zero.len(), 1, "seed {seed}: {zero:?}");
    }
}

/// pottery's `num_extensions`: an application extending every 300 ms gets three extensions
/// of a grant and then `TooManyExtensions` on the fourth call, without a request (and five
/// with `num_extensions = 5`).
#[test]
fn pottery_raises_too_many_extensions_after_num_extensions() {
    for (limit, set) in [(3, ""), (5, "num_extensions = 5\n")] {
        let text = format!(
            "name = \"pottery-extensions\"\nduration_ms = 3_000\n\n[protocol]\nname = \
             \"redlock\"\nclient = \"pottery\"\ninstances = 3\nttl_ms = 1_000\n{set}\n\
             [workload]\nclients = 1\ncs_ms_min = 2_000\ncs_ms_max = 2_000\n\
             extend_every_ms = 300\n"
        );
        let (_, h) = common::parsed(&text, "pottery-extensions.toml").run_with_history(1);
        let extends: Vec<_> = h
            .iter()
            .filter(|e| e.op == Op::Extend && e.grant.as_deref() == Some("c1#1"))
            .filter(|e| e.kind != Kind::Invoke)
            .collect();
        let ok = extends.iter().take_while(|e| e.kind == Kind::Ok).count();
        assert_eq!(ok, limit, "{extends:?}");
        let failed = extends
            .get(limit)
            .expect("a failed extension after the limit");
        assert_eq!(failed.kind, Kind::Fail);
        assert_eq!(failed.detail.as_deref(), Some("TooManyExtensions"));
        assert_eq!(common::notes(&h, "c1", "TooManyExtensions").len(), 1);
    }
}
