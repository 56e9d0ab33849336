//! The tests of `src/redis/replication.rs`.

use locksim_protocols::redis::replication::*;
use locksim_protocols::redis::store::{Effect, Entry, Store, Value};
use std::time::Duration;

fn put(key: &str, value: &str) -> Effect {
    Effect::Put {
        key: key.into(),
        entry: Entry {
            value: Value::Str(value.into()),
            expire_at_ms: None,
        },
    }
}

/// Replication ids are random: the tests run inside a seeded runtime.
fn sim<T>(f: impl FnOnce() -> T) -> T {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default())
        .block_on(async move { f() })
}

/// A full resync of `replica` (whose primary is node 0) from `primary`, through the messages
/// they exchange: the replica's `PSYNC`, the primary's answer. The replica's data set.
fn sync(primary: &mut Replication, store: &Store, replica: &mut Replication) -> Store {
    let now = Duration::ZERO;
    let mut primary_store = store.clone();
    let answer = primary.receive(&mut primary_store, 9, replica.psync(), now);
    let answer = answer.reply.expect("an answer to PSYNC");
    assert!(
        matches!(answer, ReplMsg::FullResync { .. }),
        "expected a full resync, got {answer:?}"
    );
    let mut replica_store = Store::new();
    replica.receive(&mut replica_store, 0, answer, now);
    replica_store
}

/// The primary's stream to its replicas: effects `ops` after offset `start`.
fn stream(primary: &Replication, start: u64, ops: Vec<Effect>) -> ReplMsg {
    let (replid, _) = primary.stream_targets().expect("a primary streams");
    ReplMsg::Stream { replid, start, ops }
}

#[test]
fn stream_applies_in_offset_order() {
    sim(|| {
        let now = Duration::ZERO;
        let mut primary = Replication::new(ReplRole::Primary, now);
        let mut replica = Replication::new(ReplRole::Replica { primary: 0 }, now);
        let mut store = sync(&mut primary, &Store::new(), &mut replica);
        primary.wrote(1, &[put("a", "1")]);
        primary.wrote(1, &[put("b", "2")]);
        // The second batch overtakes the first on the network.
        replica.receive(&mut store, 0, stream(&primary, 1, vec![put("b", "2")]), now);
        assert_eq!(replica.offset(), 0);
        replica.receive(&mut store, 0, stream(&primary, 0, vec![put("a", "1")]), now);
        assert_eq!(replica.offset(), 2);
        assert_eq!(store.len(), 2);
        // A duplicate changes nothing.
        replica.receive(&mut store, 0, stream(&primary, 0, vec![put("a", "1")]), now);
        assert_eq!(replica.offset(), 2);
    });
}

#[test]
fn promoted_replica_continues_others_but_not_a_diverged_primary() {
    sim(|| {
        let now = Duration::ZERO;
        let mut old = Replication::new(ReplRole::Primary, now);
        let mut a = Replication::new(ReplRole::Replica { primary: 0 }, now);
        let mut b = Replication::new(ReplRole::Replica { primary: 0 }, now);
        let mut old_store = Store::new();
        let mut a_store = sync(&mut old, &old_store, &mut a);
        let _ = sync(&mut old, &old_store, &mut b);
        old.wrote(5, &[put("x", "1")]);
        a.receive(&mut a_store, 0, stream(&old, 0, vec![put("x", "1")]), now);
        // The old primary takes a write nobody receives, then a is promoted.
        old.wrote(5, &[put("lock", "c1")]);
        old_store.apply(&put("lock", "c1"));
        assert!(a.promote());
        // b is behind a on the same history: it continues.
        let answer = a.receive(&mut a_store, 2, b.psync(), now).reply;
        assert!(
            matches!(&answer, Some(ReplMsg::Continue { start: 0, ops, .. }) if ops.len() == 1),
            "{answer:?}"
        );
        // The old primary is ahead of a on that history: full resync, its write is lost.
        old.follow(1, now);
        let answer = a.receive(&mut a_store, 0, old.psync(), now).reply;
        let Some(ReplMsg::FullResync { snapshot, .. }) = answer else {
            panic!("expected a full resync, got {answer:?}");
        };
        assert!(snapshot.entry("lock").is_none());
    });
}

#[test]
fn wait_counts_acknowledgements_of_the_clients_last_write() {
    sim(|| {
        let now = Duration::ZERO;
        let mut primary = Replication::new(ReplRole::Primary, now);
        let mut store = Store::new();
        for r in [1, 2] {
            let psync = ReplMsg::Psync {
                replid: None,
                offset: 0,
            };
            primary.receive(&mut store, r, psync, now);
        }
        primary.wrote(7, &[put("lock", "c7")]);
        assert_eq!(primary.wait(7, 42, 1), Err(0));
        let (replid, _) = primary.stream_targets().unwrap();
        let ack = ReplMsg::Ack { replid, offset: 1 };
        let received = primary.receive(&mut store, 2, ack, now);
        assert_eq!(received.waiters, vec![(7, 42, 1)]);
        assert_eq!(primary.wait(7, 43, 1), Ok(1));
        assert_eq!(primary.wait(7, 44, 2), Err(1));
    });
}

/// Under `appendfsync always` a replica acknowledges only what its AOF has synced (Redis
/// writes its replies, the periodic `REPLCONF ACK` too, after `beforeSleep`'s sync): applied
/// and not yet synced, its acknowledgements say the synced offset; once synced, the applied.
#[test]
fn a_replica_under_always_acknowledges_only_the_synced_offset() {
    sim(|| {
        let now = Duration::ZERO;
        let config = ReplicationConfig {
            lag_ms_min: 0,
            lag_ms_max: 0,
            ping_interval_ms: 1_000,
            timeout_ms: 60_000,
        };
        let mut primary = Replication::new(ReplRole::Primary, now);
        let mut replica = Replication::new(ReplRole::Replica { primary: 0 }, now);
        replica.synced_to(0);
        let mut store = sync(&mut primary, &Store::new(), &mut replica);
        replica.synced_to(replica.offset());
        primary.wrote(1, &[put("a", "1")]);
        let reply = replica.receive(&mut store, 0, stream(&primary, 0, vec![put("a", "1")]), now);
        let acked = |msgs: Vec<(usize, ReplMsg)>| match msgs.as_slice() {
            [(0, ReplMsg::Ack { offset, .. })] => *offset,
            other => panic!("expected one acknowledgement to the primary, got {other:?}"),
        };
        assert_eq!(replica.offset(), 1, "the write is applied");
        assert_eq!(
            acked(replica.tick(now, &config, false)),
            0,
            "the tick's, before the sync"
        );
        let answer = reply.reply.expect("an acknowledgement of the stream");
        let again = replica.ack_after_sync(answer).expect("the link is up");
        assert!(matches!(again, ReplMsg::Ack { offset: 0, .. }), "{again:?}");
        replica.synced_to(1);
        assert_eq!(
            acked(replica.tick(now, &config, false)),
            1,
            "the tick's, after the sync"
        );
        let again = replica.ack_after_sync(again).expect("the link is up");
        assert!(matches!(again, ReplMsg::Ack { offset: 1, .. }), "{again:?}");
    });
}
