//! The tests of `src/raft/etcd/params.rs`.

use locksim_protocols::raft::etcd::params::*;

fn params(toml: &str) -> Params {
    toml::from_str(toml).unwrap()
}

#[test]
fn etcd_rounding_grants_whole_seconds_of_at_least_the_minimum_ttl() {
    let exact = params("lease_ttl_ms = 1_000");
    assert_eq!(exact.ttl_ms(), 1_000, "off by default: as asked");
    let etcd = params("lease_ttl_ms = 1_000\nttl_rounding = \"etcd\"");
    etcd.validate().unwrap();
    // (3 * 10 / 2) ticks of 100 ms = 1.5 s, rounded up: 2 s.
    assert_eq!((etcd.min_ttl_ms(), etcd.ttl_ms()), (2_000, 2_000));
    assert_eq!(etcd.granted_ttl_ms(5_000), 5_000);
    let slow = params("lease_ttl_ms = 1_000\nttl_rounding = \"etcd\"\ntick_ms = 500");
    assert_eq!(slow.ttl_ms(), 8_000, "7.5 s rounded up");
    let half = params("lease_ttl_ms = 1_500\nttl_rounding = \"etcd\"");
    let err = half.validate().unwrap_err();
    assert_eq!(err.field.as_deref(), Some("lease_ttl_ms"));
    params("lease_ttl_ms = 1_500").validate().unwrap();
}

#[test]
fn unlock_keys_default_to_etcds_delete_within_a_ttl_and_refuse_zero() {
    let default = params("");
    assert_eq!(default.unlock, Unlock::Delete);
    assert_eq!(default.unlock_timeout().as_millis(), 2_000, "one TTL");
    assert_eq!(
        default.unlock_retry_after_ms, None,
        "the session is abandoned"
    );
    let fixed = params("unlock = \"delete-if-owner\"\nunlock_timeout_ms = 500");
    fixed.validate().unwrap();
    assert_eq!(fixed.unlock, Unlock::DeleteIfOwner);
    assert_eq!(fixed.unlock_timeout().as_millis(), 500);
    for key in ["unlock_timeout_ms", "unlock_retry_after_ms"] {
        let err = params(&format!("{key} = 0")).validate().unwrap_err();
        assert_eq!(err.field.as_deref(), Some(key));
    }
}

#[test]
fn a_checkpoint_interval_needs_checkpoints_on_and_is_positive() {
    let off = params("lease_checkpoint_interval_ms = 1_000");
    let err = off.validate().unwrap_err();
    assert_eq!(err.field.as_deref(), Some("lease_checkpoint_interval_ms"));
    let zero = params("lease_checkpoint = true\nlease_checkpoint_interval_ms = 0");
    let err = zero.validate().unwrap_err();
    assert_eq!(err.field.as_deref(), Some("lease_checkpoint_interval_ms"));
    let on = params("lease_checkpoint = true");
    on.validate().unwrap();
    assert_eq!(on.checkpoint_interval_ms(), 300_000, "etcd's 5 min");
}
