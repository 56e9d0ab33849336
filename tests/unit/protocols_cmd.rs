//! The tests of `src/protocols_cmd.rs`.

use locksim::protocols_cmd::*;
use locksim_protocols::Registry;

#[test]
fn the_json_listing_names_every_protocol_and_its_client_libraries() {
    let listing = listing(&Registry::builtin());
    let names: Vec<&str> = listing.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, Registry::builtin().ids());
    let single = listing
        .iter()
        .find(|p| p["name"] == "single-redis")
        .unwrap();
    let clients = single["clients"].as_array().unwrap();
    let client_names: Vec<&str> = clients.iter().filter_map(|c| c["name"].as_str()).collect();
    // The registry's own test pins the list; the listing shows every profile of it.
    let registry = Registry::builtin();
    let profiles = registry.get("single-redis").unwrap().clients();
    let profile_names: Vec<&str> = profiles.iter().map(|p| p.name).collect();
    assert_eq!(client_names, profile_names);
    let redsync = clients.iter().find(|c| c["name"] == "redsync").unwrap();
    assert_eq!(redsync["defaults"]["ttl_ms"], 8_000);
    assert_eq!(redsync["defaults"]["retry_count"], 32);
    assert!(redsync["description"].as_str().unwrap().contains("Until()"));
    let etcd = listing.iter().find(|p| p["name"] == "etcd").unwrap();
    assert!(etcd["description"].is_string());
    assert!(etcd["clients"].is_array());
}
