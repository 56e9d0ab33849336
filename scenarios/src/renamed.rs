//! Scenario keys that were renamed or moved: a file still using an old key is refused
//! with the key's new name, not with serde's "unknown field" and its list of valid keys
//! (which leaves the reader to guess which one replaced theirs).
//!
//! Every rename of a key a scenario file can hold belongs in [`RENAMED`], checked on the
//! raw table before the file is read into types.

/// One rename: the old dotted key, the new one, and what changed, for the reader.
pub type Rename = (&'static str, &'static str, &'static str);

/// The renamed keys, oldest first.
pub const RENAMED: &[Rename] = &[
    (
        "protocol.fsync_ms_min",
        "disk.fsync_ms_min",
        "every node's disk now has the fsync latency, not the protocol",
    ),
    (
        "protocol.fsync_ms_max",
        "disk.fsync_ms_max",
        "every node's disk now has the fsync latency, not the protocol",
    ),
    (
        "faults_random.loss_probability",
        "faults_random.loss_period_probability",
        "the chance per second that a loss period starts; [network] loss_probability is per \
         message",
    ),
    (
        "workload.check_validity",
        "workload.check",
        "check_validity = true is check = \"before_write\", false is check = \"never\"; \
         check = \"on_signal\" is new",
    ),
];

/// The first old key the file holds: `(old key, message)`.
pub fn check(table: &toml::Table) -> Result<(), (String, String)> {
    for (old, new, why) in RENAMED {
        if holds(table, old) {
            return Err(((*old).to_owned(), format!("{old} is now {new} ({why})")));
        }
    }
    Ok(())
}

/// Whether the table holds the dotted key.
fn holds(table: &toml::Table, key: &str) -> bool {
    let mut value: Option<&toml::Value> = None;
    for part in key.split('.') {
        let within = match value {
            None => Some(table),
            Some(v) => v.as_table(),
        };
        value = within.and_then(|t| t.get(part));
        if value.is_none() {
            return false;
        }
    }
    true
}
