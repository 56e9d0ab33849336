//! `locksim protocols [--json]`: the protocols a scenario can name and, for each, the client
//! libraries `[protocol] client = "NAME"` can pick (the default first) with the parameters
//! each sets by default.

use crate::stdout::outln;
use locksim_protocols::Registry;
use serde_json::{json, Value};
use std::process::ExitCode;

/// Arguments of `protocols`.
#[derive(clap::Args)]
pub struct ProtocolsArgs {
    /// Print JSON: `[{"name", "description", "clients": [{"name", "description", "defaults"}]}]`.
    #[arg(long)]
    json: bool,
}

/// The listing as JSON values, one per protocol, sorted by name.
pub fn listing(registry: &Registry) -> Vec<Value> {
    registry
        .ids()
        .into_iter()
        .map(|id| {
            let protocol = registry.get(id).expect("listed ids are registered");
            let clients: Vec<Value> = protocol
                .clients()
                .into_iter()
                .map(|c| {
                    let defaults = serde_json::to_value(&c.defaults).expect("a TOML table");
                    json!({"name": c.name, "description": c.description, "defaults": defaults})
                })
                .collect();
            json!({"name": id, "description": protocol.summary(), "clients": clients})
        })
        .collect()
}

/// Prints the listing.
pub fn run(args: ProtocolsArgs, registry: &Registry) -> anyhow::Result<ExitCode> {
    let listing = listing(registry);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(ExitCode::SUCCESS);
    }
    for protocol in &listing {
        outln!(
            "{:<18} {}",
            protocol["name"].as_str().unwrap_or_default(),
            protocol["description"].as_str().unwrap_or_default()
        );
        for (i, client) in protocol["clients"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let default = if i == 0 { " (default)" } else { "" };
            outln!(
                "  client = {:?}{default}: {}",
                client["name"].as_str().unwrap_or_default(),
                client["description"].as_str().unwrap_or_default()
            );
            let defaults = client["defaults"].as_object().into_iter().flatten();
            let pairs: Vec<String> = defaults.map(|(k, v)| format!("{k} = {v}")).collect();
            if !pairs.is_empty() {
                outln!("    sets: {}", pairs.join(", "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
