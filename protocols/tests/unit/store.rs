//! The tests of `src/redis/store.rs`.

use locksim_protocols::redis::store::*;
use std::collections::BTreeMap;

/// An error raised inside one of the lock's one-line scripts, as Redis 7.0 reports it.
fn in_script(script: &Script, error: String) -> String {
    format!("{error} script: {}, on @user_script:1.", script.sha1)
}

fn set_nx(key: &str, value: &str, px: i128) -> Cmd {
    Cmd::Set {
        key: key.into(),
        value: value.into(),
        nx: true,
        px_ms: Some(IntArg(px)),
    }
}

#[test]
fn set_nx_px_expires_by_wall_clock() {
    let mut s = Store::new();
    let mut expired = vec![];
    assert_eq!(s.exec(&set_nx("k", "a", 100), 0, &mut expired), Reply::Ok);
    assert_eq!(
        s.exec(&set_nx("k", "b", 100), 100, &mut expired),
        Reply::Nil
    );
    assert!(expired.is_empty(), "a key is alive at exactly its deadline");
    assert_eq!(s.exec(&set_nx("k", "b", 100), 101, &mut expired), Reply::Ok);
    assert_eq!(expired, vec!["k".to_string()]);
}

#[test]
fn compare_and_delete_only_deletes_own_value() {
    let mut s = Store::new();
    let mut ex = vec![];
    s.exec(&set_nx("k", "mine", 1000), 0, &mut ex);
    let del = |v: &str| Cmd::DelIfEq {
        key: "k".into(),
        value: v.into(),
    };
    assert_eq!(s.exec(&del("theirs"), 1, &mut ex), Reply::Int(0));
    assert_eq!(s.exec(&del("mine"), 2, &mut ex), Reply::Int(1));
    assert_eq!(
        s.exec(&Cmd::Get { key: "k".into() }, 3, &mut ex),
        Reply::Nil
    );
}

#[test]
fn acquire_script_returns_increasing_tokens() {
    let mut s = Store::new();
    let mut ex = vec![];
    let acquire = |v: &str| Cmd::SetNxIncr {
        key: "k".into(),
        value: v.into(),
        px_ms: Some(IntArg(10)),
        counter: "k:token".into(),
    };
    assert_eq!(s.exec(&acquire("a"), 0, &mut ex), Reply::Int(1));
    assert_eq!(s.exec(&acquire("b"), 5, &mut ex), Reply::Nil);
    assert_eq!(s.exec(&acquire("b"), 11, &mut ex), Reply::Int(2));
}

#[test]
fn extend_only_own_lock_and_active_expiry() {
    let mut s = Store::new();
    let mut ex = vec![];
    s.exec(&set_nx("k", "a", 10), 0, &mut ex);
    let ext = |v: &str| Cmd::PexpireIfEq {
        key: "k".into(),
        value: v.into(),
        px_ms: IntArg(100),
    };
    assert_eq!(s.exec(&ext("b"), 5, &mut ex), Reply::Int(0));
    assert_eq!(s.exec(&ext("a"), 5, &mut ex), Reply::Int(1));
    let mut active = ActiveExpiry::default();
    assert!(active.cycle(&mut s, 50).is_empty());
    assert_eq!(active.cycle(&mut s, 106), vec!["k".to_string()]);
    assert!(s.is_empty());
}

#[test]
fn plain_set_clears_ttl_and_del_is_unconditional() {
    let mut s = Store::new();
    let mut ex = vec![];
    s.exec(&set_nx("k", "a", 10), 0, &mut ex);
    let set = Cmd::Set {
        key: "k".into(),
        value: "b".into(),
        nx: false,
        px_ms: None,
    };
    assert_eq!(s.exec(&set, 1, &mut ex), Reply::Ok);
    assert_eq!(s.entry("k").unwrap().expire_at_ms, None);
    assert_eq!(
        s.exec(&Cmd::Del { key: "k".into() }, 2, &mut ex),
        Reply::Int(1)
    );
}

#[test]
fn effects_carry_absolute_expiry_and_deletions() {
    let mut s = Store::new();
    let mut ex = vec![];
    let (reply, effects) = s.exec_with_effects(&set_nx("k", "a", 100), 1_000, &mut ex);
    assert_eq!(reply, Reply::Ok);
    let put = Effect::Put {
        key: "k".into(),
        entry: Entry {
            value: Value::Str("a".into()),
            expire_at_ms: Some(1_100),
        },
    };
    assert_eq!(effects, vec![put.clone()]);
    // A failed SET NX changes nothing and propagates nothing.
    let (reply, effects) = s.exec_with_effects(&set_nx("k", "b", 100), 1_050, &mut ex);
    assert_eq!((reply, effects), (Reply::Nil, vec![]));
    // The key found expired is replaced: the effect is the new value.
    let (_, effects) = s.exec_with_effects(&set_nx("k", "b", 100), 1_101, &mut ex);
    assert!(
        matches!(&effects[..], [Effect::Put { entry, .. }] if entry.expire_at_ms == Some(1_201))
    );
    // A replica applying the effects ends with the same data set.
    let mut replica = Store::new();
    replica.apply(&put);
    replica.apply(&effects[0]);
    assert_eq!(replica, s);
    let del = Cmd::DelIfEq {
        key: "k".into(),
        value: "b".into(),
    };
    let (_, effects) = s.exec_with_effects(&del, 1_102, &mut ex);
    assert_eq!(effects, vec![Effect::Del { key: "k".into() }]);
}

#[test]
fn token_script_propagates_both_keys() {
    let mut s = Store::new();
    let acquire = Cmd::SetNxIncr {
        key: "k".into(),
        value: "a".into(),
        px_ms: Some(IntArg(10)),
        counter: "k:token".into(),
    };
    let (reply, effects) = s.exec_with_effects(&acquire, 0, &mut vec![]);
    assert_eq!(reply, Reply::Int(1));
    assert_eq!(effects.len(), 2);
}

#[test]
fn replica_reads_expired_keys_as_missing_without_deleting_them() {
    let mut s = Store::new();
    s.exec(&set_nx("k", "a", 10), 0, &mut vec![]);
    assert_eq!(s.get_readonly("k", 10), Reply::Bulk("a".into()));
    assert_eq!(s.get_readonly("k", 11), Reply::Nil);
    assert_eq!(s.len(), 1, "only the primary's DEL removes it");
}

fn set(key: &str, value: &str) -> Cmd {
    Cmd::Set {
        key: key.into(),
        value: value.into(),
        nx: false,
        px_ms: None,
    }
}

fn incr(key: &str) -> Cmd {
    Cmd::Incr { key: key.into() }
}

#[test]
fn integers_parse_as_redis_string2ll_does() {
    for ok in [
        "0",
        "5",
        "-5",
        "9223372036854775807",
        "-9223372036854775808",
    ] {
        assert_eq!(parse_integer(ok), Some(ok.parse().unwrap()), "{ok}");
    }
    for bad in [
        "+5",
        "05",
        "-0",
        "00",
        "-05",
        " 5",
        "5 ",
        "",
        "-",
        "9223372036854775808",
        "1e3",
    ] {
        assert_eq!(parse_integer(bad), None, "{bad:?}");
    }
}

#[test]
fn incr_rejects_non_canonical_integers_and_overflow() {
    let mut s = Store::new();
    let mut ex = vec![];
    let not_integer = Reply::Error(ERR_NOT_INTEGER.into());
    for bad in ["x", "+5", "05", "-0"] {
        s.exec(&set("k", bad), 0, &mut ex);
        assert_eq!(s.exec(&incr("k"), 0, &mut ex), not_integer, "{bad}");
    }
    s.exec(&set("k", "9223372036854775806"), 0, &mut ex);
    assert_eq!(s.exec(&incr("k"), 0, &mut ex), Reply::Int(i64::MAX));
    let overflow = Reply::Error(ERR_OVERFLOW.into());
    assert_eq!(s.exec(&incr("k"), 0, &mut ex), overflow);
    assert_eq!(
        s.exec(&Cmd::Get { key: "k".into() }, 0, &mut ex),
        Reply::Bulk(i64::MAX.to_string())
    );
    s.exec(&set("k", "-9223372036854775808"), 0, &mut ex);
    assert_eq!(s.exec(&incr("k"), 0, &mut ex), Reply::Int(i64::MIN + 1));
}

#[test]
fn set_refuses_ttls_redis_refuses_and_sets_nothing() {
    let now = 1_700_000_000_000;
    let invalid = Reply::Error(err_expire_time("set"));
    let not_integer = Reply::Error(ERR_NOT_INTEGER.into());
    for (px, reply) in [
        (0, &invalid),
        (-5, &invalid),
        (i64::MAX.into(), &invalid),
        (i128::from(i64::MAX) - now as i128 + 1, &invalid),
        (1 << 63, &not_integer),
    ] {
        let mut s = Store::new();
        assert_eq!(
            &s.exec(&set_nx("k", "a", px), now, &mut vec![]),
            reply,
            "PX {px}"
        );
        assert!(s.is_empty(), "PX {px} writes nothing");
    }
    // The largest TTL that fits is accepted, and the TTL is checked before NX.
    let mut s = Store::new();
    let px = i128::from(i64::MAX) - now as i128;
    assert_eq!(s.exec(&set_nx("k", "a", px), now, &mut vec![]), Reply::Ok);
    assert_eq!(s.entry("k").unwrap().expire_at_ms, Some(i64::MAX));
    assert_eq!(s.exec(&set_nx("k", "b", 0), now, &mut vec![]), invalid);
}

#[test]
fn the_extend_script_deletes_on_a_ttl_at_or_below_zero_and_refuses_overflow() {
    let ext = |px: i128| Cmd::PexpireIfEq {
        key: "k".into(),
        value: "a".into(),
        px_ms: IntArg(px),
    };
    for px in [0, -5, i64::MIN.into()] {
        let mut s = Store::new();
        s.exec(&set_nx("k", "a", 100), 0, &mut vec![]);
        let (reply, effects) = s.exec_with_effects(&ext(px), 10, &mut vec![]);
        assert_eq!(reply, Reply::Int(1), "PEXPIRE {px}");
        assert_eq!(effects, vec![Effect::Del { key: "k".into() }]);
    }
    let mut s = Store::new();
    s.exec(&set_nx("k", "a", 100), 0, &mut vec![]);
    let overflow = in_script(&EXTEND, err_expire_time("pexpire"));
    assert_eq!(
        s.exec(&ext(i64::MAX.into()), 10, &mut vec![]),
        Reply::Error(overflow)
    );
    let not_integer = in_script(&EXTEND, ERR_NOT_INTEGER.into());
    assert_eq!(
        s.exec(&ext(1 << 63), 10, &mut vec![]),
        Reply::Error(not_integer)
    );
    assert_eq!(s.entry("k").unwrap().expire_at_ms, Some(100), "unchanged");
    // Someone else's lock: the TTL is never looked at.
    s.exec(&set("k", "b"), 20, &mut vec![]);
    assert_eq!(s.exec(&ext(1 << 63), 30, &mut vec![]), Reply::Int(0));
}

#[test]
fn the_acquire_script_raises_redis_errors_and_keeps_what_it_wrote() {
    let acquire = |px: i128| Cmd::SetNxIncr {
        key: "k".into(),
        value: "a".into(),
        px_ms: Some(IntArg(px)),
        counter: "k:token".into(),
    };
    let mut s = Store::new();
    let invalid = in_script(&ACQUIRE_WITH_TOKEN, err_expire_time("set"));
    assert_eq!(s.exec(&acquire(0), 0, &mut vec![]), Reply::Error(invalid));
    assert!(s.is_empty(), "a refused TTL writes neither key");
    s.exec(&set("k:token", "x"), 0, &mut vec![]);
    let not_integer = in_script(&ACQUIRE_WITH_TOKEN, ERR_NOT_INTEGER.into());
    let (reply, effects) = s.exec_with_effects(&acquire(100), 0, &mut vec![]);
    assert_eq!(reply, Reply::Error(not_integer));
    assert_eq!(effects.len(), 1, "the lock key is set although INCR failed");
    assert!(s.entry("k").is_some());
}

#[test]
fn active_expiry_samples_twenty_keys_and_stops_below_ten_percent() {
    let mut s = Store::new();
    // 200 keys, only every tenth due (10 %, not above it): one loop of 20 samples.
    for i in 0..200 {
        let ttl = if i % 10 == 0 { 10 } else { 10_000 };
        s.exec(&set_nx(&format!("k{i:03}"), "v", ttl), 0, &mut vec![]);
    }
    let mut active = ActiveExpiry::default();
    assert_eq!(active.cycle(&mut s, 100), vec!["k000", "k010"]);
    // The next cycle continues from the cursor.
    assert_eq!(active.cycle(&mut s, 200), vec!["k020", "k030"]);
    // Keys without a TTL are never sampled; lazy expiry still hides the rest.
    s.exec(&set("plain", "v"), 200, &mut vec![]);
    assert_eq!(
        s.exec(&Cmd::Get { key: "k040".into() }, 200, &mut vec![]),
        Reply::Nil
    );
    assert_eq!(s.len(), 200 - 5 + 1);
}

#[test]
fn active_expiry_leaves_some_due_keys_for_later_cycles() {
    // 1,000 keys with deadlines spread over a second, a cycle every 100 ms: a due key
    // waits while the samples around the cursor are mostly alive.
    let mut s = Store::new();
    let mut deadline = BTreeMap::new();
    for i in 0..1_000i64 {
        let ttl = (i * 7_919) % 1_000 + 1;
        let key = format!("k{i:04}");
        s.exec(&set_nx(&key, "v", ttl.into()), 0, &mut vec![]);
        deadline.insert(key, ttl);
    }
    let mut active = ActiveExpiry::default();
    let mut late_ms = vec![];
    for tick in 1..=40 {
        for key in active.cycle(&mut s, tick * 100) {
            late_ms.push(tick * 100 - deadline[&key]);
        }
    }
    assert_eq!(late_ms.len(), 1_000, "every key goes in the end");
    let late_100 = late_ms.iter().filter(|&&l| l > 100).count();
    assert!(
        late_100 > 0,
        "some keys miss the first cycle after their deadline"
    );
    assert!(late_100 < 1_000, "most do not");
}

/// redlock-rb's lock script: sets an absent key (an expired lock comes back), renews a
/// key holding the value, leaves another's alone.
#[test]
fn set_if_absent_or_eq_sets_an_expired_key_again() {
    let mut store = Store::default();
    let mut expired = vec![];
    let again = |v: &str, px: i128| Cmd::SetIfAbsentOrEq {
        key: "k".into(),
        value: v.into(),
        px_ms: IntArg(px),
    };
    assert_eq!(store.exec(&again("a", 100), 0, &mut expired), Reply::Ok);
    assert_eq!(store.exec(&again("b", 100), 50, &mut expired), Reply::Nil);
    assert_eq!(store.exec(&again("a", 100), 50, &mut expired), Reply::Ok);
    // Expired at 150: the key is absent, and the same value is set again.
    let get = Cmd::Get { key: "k".into() };
    assert_eq!(store.exec(&get, 200, &mut expired), Reply::Nil);
    assert_eq!(store.exec(&again("a", 100), 200, &mut expired), Reply::Ok);
    assert_eq!(store.exec(&get, 250, &mut expired), Reply::Bulk("a".into()));
    assert!(again("a", 1).is_write());
    assert_eq!(again("a", 1).lock_key(), Some("k"));
    assert_eq!(again("a", 7).argv().unwrap()[1], SET_IF_ABSENT_OR_EQ.source);
}

#[test]
fn argv_is_what_a_client_sends() {
    let acquire = Cmd::SetNxIncr {
        key: "k".into(),
        value: "a".into(),
        px_ms: Some(IntArg(100)),
        counter: "k:token".into(),
    };
    let argv = acquire.argv().unwrap();
    assert_eq!(argv[0], "EVAL");
    assert_eq!(argv[1], ACQUIRE_WITH_TOKEN.source);
    assert_eq!(&argv[2..], ["2", "k", "k:token", "a", "100"]);
    let wait = Cmd::Wait {
        replicas: 1,
        timeout_ms: 0,
    };
    assert_eq!(wait.argv().unwrap(), ["WAIT", "1", "0"]);
    assert_eq!(
        set_nx("k", "a", -5).argv().unwrap(),
        ["SET", "k", "a", "NX", "PX", "-5"]
    );
}

#[test]
fn wait_on_a_standalone_server_replies_zero_after_its_timeout() {
    use std::time::Duration;
    assert_eq!(standalone_wait(0, 100), Deferred::Now(Reply::Int(0)));
    let after = Deferred::After {
        delay: Duration::from_millis(100),
        reply: Reply::Int(0),
    };
    assert_eq!(standalone_wait(1, 100), after);
    assert_eq!(standalone_wait(1, 0), Deferred::Never);
    assert_eq!(
        standalone_wait(1, WAIT_TIMEOUT_MS_FOREVER + 1),
        Deferred::Never
    );
    let error = Deferred::Now(Reply::Error(ERR_TIMEOUT_NOT_INTEGER.into()));
    assert_eq!(standalone_wait(0, 1 << 63), error);
    assert_eq!(standalone_wait(1, u64::MAX), error);
}
