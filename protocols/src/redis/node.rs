//! A Redis node's state (its data set and, if it replicates, its replication state) and the
//! notes it leaves in the history about its lock keys, so a timeline can draw who holds the
//! key on each server.

use super::aof::Everysec;
use super::replication::{ReplRole, Replication};
use super::store::{Cmd, Effect, Entry, Reply, Store, Value};
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::NodeCtx;
use std::collections::BTreeMap;

/// A Redis node's state: its data set and, if it replicates, its replication state.
pub struct Node {
    /// The data set.
    pub store: Store,
    /// `None` on a standalone server.
    pub repl: Option<Replication>,
    /// `appendfsync everysec`'s state (unused under another policy).
    pub everysec: Everysec,
}

impl Node {
    /// The replication state of a replicated node.
    pub fn replication(&self) -> &Replication {
        self.repl.as_ref().expect("a replicated node")
    }

    /// The replication state of a replicated node, to change.
    pub fn replication_mut(&mut self) -> &mut Replication {
        self.repl.as_mut().expect("a replicated node")
    }

    /// Whether it takes writes: a primary, or a standalone server.
    pub fn is_primary(&self) -> bool {
        self.repl
            .as_ref()
            .is_none_or(|r| r.role() == ReplRole::Primary)
    }

    /// Runs a data command: on a replica, reads only; on a primary (or a standalone server),
    /// anything. Returns the reply and its effects: what a primary propagates to its
    /// replicas, and what a server with an append-only file (`appending`) appends to it; a
    /// standalone server without one leaves them out (a copy of each key's entry a command,
    /// on the path a sweep runs millions of times).
    pub fn exec(
        &mut self,
        cmd: &Cmd,
        now_ms: i64,
        expired: &mut Vec<String>,
        appending: bool,
    ) -> (Reply, Vec<Effect>) {
        if self.repl.is_none() && !appending {
            return (self.store.exec(cmd, now_ms, expired), vec![]);
        }
        let (reply, effects) = match cmd {
            _ if self.is_primary() => self.store.exec_with_effects(cmd, now_ms, expired),
            Cmd::Get { key } => (self.store.get_readonly(key, now_ms), vec![]),
            _ => (
                Reply::Error("READONLY You can't write against a read only replica.".into()),
                vec![],
            ),
        };
        assert!(
            effects.is_empty() || self.is_primary(),
            "only a primary writes"
        );
        (reply, effects)
    }
}

/// Records the keys a command or the expiry cycle found expired.
pub fn record_expired(ctx: &NodeCtx, keys: &[String]) {
    for key in keys {
        ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Expire).detail(key.clone()));
    }
}

/// Records the server's own view of a lock key changing (`key K = VALUE` or `key K deleted`),
/// so a timeline can show who holds the lock on each server from `SET` to delete or expiry.
pub fn record_key(ctx: &NodeCtx, key: &str, entry: Option<&Entry>) {
    let detail = match entry.map(|e| &e.value) {
        // Concatenated, not formatted: one note per write of the key.
        Some(Value::Str(v)) => ["key ", key, " = ", v].concat(),
        Some(Value::Int(v)) => format!("key {key} = {v}"),
        Some(Value::List(items)) => format!("key {key} = list of {}", items.len()),
        None => format!("key {key} deleted"),
    };
    ctx.record_event(Event::new(ctx.name(), Kind::Info, Op::Note).detail(detail));
}

/// The lock keys of a data set and their values, to see what a step changed.
pub fn lock_snapshot(store: &Store) -> BTreeMap<String, Value> {
    store
        .lock_entries()
        .map(|(k, e)| (k.to_owned(), e.value.clone()))
        .collect()
}

/// Records every lock key whose value changed since `before` (a replica applying its
/// primary's stream or a full resync), as [`record_key`] does for commands.
pub fn record_lock_changes(ctx: &NodeCtx, before: &BTreeMap<String, Value>, store: &Store) {
    let after = lock_snapshot(store);
    for (key, value) in &after {
        if before.get(key) != Some(value) {
            record_key(ctx, key, store.entry(key));
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        record_key(ctx, key, None);
    }
}
