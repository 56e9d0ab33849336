//! The tests of `src/raft/etcd/profile.rs`.

use locksim_protocols::protocol::{parse_params, ParamError};
use locksim_protocols::raft::etcd::params::{Library, LockApi, Params};
use locksim_protocols::raft::etcd::profile::*;
use locksim_protocols::registry::with_client_defaults;

fn params(toml: &str) -> Result<Params, ParamError> {
    let table: toml::Table = toml::from_str(toml).unwrap();
    let params: Params = parse_params(&with_client_defaults(&profiles(), &table)?)?;
    params.validate()?;
    Ok(params)
}

#[test]
fn no_client_is_the_careful_client_as_before_profiles() {
    let p = params("").unwrap();
    assert_eq!((p.client, p.lease_ttl_ms), (Library::Careful, 2_000));
    assert!(p.rechecks_after_wait());
    let rpc = params("lock_api = \"lock-rpc\"").unwrap();
    assert_eq!(rpc.client, Library::Careful);
}

#[test]
fn go_profiles_take_a_60_s_session_and_differ_in_the_recheck() {
    let v34 = params("client = \"etcd-concurrency-3.4\"").unwrap();
    let v35 = params("client = \"etcd-concurrency-3.5\"").unwrap();
    assert_eq!((v34.lease_ttl_ms, v35.lease_ttl_ms), (60_000, 60_000));
    assert!(!v34.rechecks_after_wait() && v35.rechecks_after_wait());
    assert!(v34.client.is_go() && v35.client.is_go());
    let short = params("client = \"etcd-concurrency-3.5\"\nlease_ttl_ms = 5_000").unwrap();
    assert_eq!(short.lease_ttl_ms, 5_000, "the scenario's own TTL wins");
    let jetcd = params("client = \"jetcd-lock\"").unwrap();
    assert_eq!(
        (jetcd.lock_api, jetcd.client.is_go()),
        (LockApi::LockRpc, false)
    );
}

#[test]
fn a_library_asked_to_do_what_it_does_not_is_refused_naming_the_field() {
    let field = |toml: &str| params(toml).unwrap_err().field;
    let v35_bug = "client = \"etcd-concurrency-3.5\"\nvariant = \"no-lease-recheck-after-wait\"";
    assert_eq!(field(v35_bug).as_deref(), Some("variant"));
    let v34_fixed = "client = \"etcd-concurrency-3.4\"\nvariant = \"correct\"";
    assert_eq!(field(v34_fixed).as_deref(), Some("variant"));
    let go_rpc = "client = \"etcd-concurrency-3.4\"\nlock_api = \"lock-rpc\"";
    assert_eq!(field(go_rpc).as_deref(), Some("lock_api"));
    let jetcd_local = "client = \"jetcd-lock\"\nlock_api = \"concurrency\"";
    assert_eq!(field(jetcd_local).as_deref(), Some("lock_api"));
    assert_eq!(field("client = \"etcd\"").as_deref(), Some("client"));
}
