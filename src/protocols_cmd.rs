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
