//! The tests of `src/raft/zookeeper/params.rs`.

use locksim_protocols::raft::zookeeper::params::*;
use locksim_protocols::raft::zookeeper::profile::{ErrorPolicy, SessionRetry};
use std::time::Duration;

fn params(toml: &str) -> Params {
    toml::from_str(toml).unwrap()
}

#[test]
fn session_timeouts_outside_two_to_twenty_ticks_are_refused_naming_the_bound() {
    let low = params("session_timeout_ms = 3_000\ntick_time_ms = 2_000");
    let e = low.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("session_timeout_ms"));
    assert!(
        e.message.contains("below 2 ticks") && e.message.contains("4000 ms"),
        "{e:?}"
    );
    let high = params("session_timeout_ms = 50_000\ntick_time_ms = 2_000");
    let e = high.validate().unwrap_err();
    assert!(
        e.message.contains("above 20 ticks") && e.message.contains("40000"),
        "{e:?}"
    );
    for ok in [4_000, 40_000] {
        let p = params(&format!("session_timeout_ms = {ok}\ntick_time_ms = 2_000"));
        p.validate().unwrap();
    }
    let zero = params("tick_time_ms = 0");
    assert_eq!(
        zero.validate().unwrap_err().field.as_deref(),
        Some("tick_time_ms")
    );
}

#[test]
fn curator_keys_are_refused_with_the_raw_client_and_taken_with_curator() {
    let raw = params("error_policy = \"session\"");
    let e = raw.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("error_policy"), "{e:?}");
    let raw = params("session_retry = \"by-guid\"");
    let e = raw.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("session_retry"), "{e:?}");
    let curator = params("client = \"curator\"\nsession_retry = \"owner-checked\"");
    curator.validate().unwrap();
    assert_eq!(curator.session_retry, Some(SessionRetry::OwnerChecked));
    let raw = params("connection_timeout_ms = 15_000");
    let e = raw.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("connection_timeout_ms"), "{e:?}");
    let curator =
        params("client = \"curator\"\nerror_policy = \"session\"\nconnection_timeout_ms = 15_000");
    curator.validate().unwrap();
    assert_eq!(curator.error_policy, Some(ErrorPolicy::Session));
    let zero = params("client = \"curator\"\nconnection_timeout_ms = 0");
    let e = zero.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("connection_timeout_ms"), "{e:?}");
    // kazoo listens to states and retries through an expiry, but has no connection
    // timeout: its acquire retries until its own timeout.
    let kazoo = params("client = \"kazoo\"\nerror_policy = \"session\"");
    kazoo.validate().unwrap();
    let kazoo = params("client = \"kazoo\"\nconnection_timeout_ms = 15_000");
    let e = kazoo.validate().unwrap_err();
    assert_eq!(e.field.as_deref(), Some("connection_timeout_ms"), "{e:?}");
    assert!(e.message.contains("Curator's"), "{e:?}");
}

#[test]
fn local_reads_are_off_unless_set_and_not_written_when_off() {
    let p = params("");
    assert!(!p.local_reads && p.session_retry.is_none());
    let text = toml::to_string(&p).unwrap();
    assert!(
        !text.contains("local_reads") && !text.contains("session_retry"),
        "{text}"
    );
    assert!(params("local_reads = true").local_reads);
}

#[test]
fn an_unset_tick_is_a_tenth_of_the_session_timeout() {
    let p = params("session_timeout_ms = 3_000");
    assert_eq!(p.tick_time(), Duration::from_millis(300));
    p.validate().unwrap();
}

#[test]
fn raft_times_out_after_sync_limit_ticks_in_rank_order_unless_set() {
    // 3 s sessions: ticks of 300 ms, syncLimit 5: 1.5 s (15 ticks of 100 ms).
    let p = params("session_timeout_ms = 3_000");
    assert_eq!(p.sync_limit(), Duration::from_millis(1_500));
    let host = p.host();
    assert_eq!((host.election_ticks, host.times_out_by_rank), (15, true));
    // 6 s sessions: 3 s.
    assert_eq!(params("session_timeout_ms = 6_000").election_ticks(), 30);
    // The sample configuration's tickTime and syncLimit: 10 s.
    let sample = params("session_timeout_ms = 4_000\ntick_time_ms = 2_000");
    assert_eq!(sample.sync_limit(), Duration::from_secs(10));
    assert_eq!(sample.election_ticks(), 100);
    let p = params("session_timeout_ms = 3_000\nsync_limit_ticks = 2");
    assert_eq!(p.election_ticks(), 6);
    // Set, it is taken as it is, drawn up to twice it (raft-rs's range).
    let host = params("election_ticks = 30").host();
    assert_eq!((host.election_ticks, host.times_out_by_rank), (30, false));
    for bad in [0, 1_001] {
        let p = params(&format!("sync_limit_ticks = {bad}"));
        let e = p.validate().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sync_limit_ticks"), "{e:?}");
    }
}
