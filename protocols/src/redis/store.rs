//! The command semantics of a Redis server: a pure function of (state, command, wall time).

use locksim_sim::NodeIdx;
use std::collections::BTreeMap;

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer (what `INCR` keeps).
    Int(i64),
}

/// A key's value and absolute expiry (server wall clock, ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires, if it does.
    pub expire_at_ms: Option<i64>,
}

/// The commands the lock protocols use. The `*If*` variants are the Lua scripts from the
/// Redis distributed-locks page, which Redis runs atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// `SET key value [NX] [PX ms]`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Only if the key does not exist.
        nx: bool,
        /// Time to live in ms.
        px_ms: Option<u64>,
    },
    /// `GET key`.
    Get {
        /// The key.
        key: String,
    },
    /// `DEL key`.
    Del {
        /// The key.
        key: String,
    },
    /// `INCR key`.
    Incr {
        /// The key.
        key: String,
    },
    /// Script: `if SET key value NX PX ttl then return INCR counter else return nil`.
    SetNxIncr {
        /// The lock key.
        key: String,
        /// The lock value.
        value: String,
        /// Time to live in ms.
        px_ms: Option<u64>,
        /// The token counter's key.
        counter: String,
    },
    /// Script: `if GET key == value then return DEL key else return 0` (safe release).
    DelIfEq {
        /// The key.
        key: String,
        /// The expected value.
        value: String,
    },
    /// Script: `if GET key == value then return PEXPIRE key ms else return 0` (extend).
    PexpireIfEq {
        /// The key.
        key: String,
        /// The expected value.
        value: String,
        /// New time to live in ms.
        px_ms: u64,
    },
    /// `INFO replication` (what Sentinel asks every node): the node's role and offset.
    /// Handled by the server, not the data set.
    Info,
    /// `REPLICAOF host port` (`Some`), or `REPLICAOF NO ONE` (`None`: become a primary).
    /// Handled by the server.
    ReplicaOf {
        /// The primary to follow; `None` to stop following and accept writes.
        primary: Option<NodeIdx>,
    },
    /// `WAIT numreplicas timeout`: block until `replicas` replicas acknowledged this client's
    /// last write, or `timeout_ms` passed; the reply is how many did. Handled by the server.
    Wait {
        /// How many replicas to wait for.
        replicas: u32,
        /// How long to wait at most, in ms of the server's clock.
        timeout_ms: u64,
    },
}

impl Cmd {
    /// Whether the command may change the data set (and so must be persisted/replicated).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Cmd::Set { .. }
                | Cmd::Del { .. }
                | Cmd::Incr { .. }
                | Cmd::SetNxIncr { .. }
                | Cmd::DelIfEq { .. }
                | Cmd::PexpireIfEq { .. }
        )
    }

    /// The lock key a command sets or deletes (`SET`, the `SET NX` + `INCR` script, `DEL`,
    /// compare-and-delete), for the history's view of who holds the lock on a server.
    pub fn lock_key(&self) -> Option<&str> {
        match self {
            Cmd::Set { key, .. }
            | Cmd::SetNxIncr { key, .. }
            | Cmd::Del { key }
            | Cmd::DelIfEq { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Whether the server handles the command itself (`INFO`, `REPLICAOF`, `WAIT`) rather
    /// than the data set.
    pub fn is_server_command(&self) -> bool {
        matches!(self, Cmd::Info | Cmd::ReplicaOf { .. } | Cmd::Wait { .. })
    }

    /// The keys a data command may read or change.
    fn keys(&self) -> Vec<&str> {
        match self {
            Cmd::Set { key, .. }
            | Cmd::Get { key }
            | Cmd::Del { key }
            | Cmd::Incr { key }
            | Cmd::DelIfEq { key, .. }
            | Cmd::PexpireIfEq { key, .. } => vec![key],
            Cmd::SetNxIncr { key, counter, .. } => vec![key, counter],
            Cmd::Info | Cmd::ReplicaOf { .. } | Cmd::Wait { .. } => vec![],
        }
    }
}

/// A change to the data set as Redis propagates it to replicas and the AOF: the key's new
/// value with its **absolute** expiry (`SET key value PXAT when`), or its deletion (`DEL key`,
/// also sent when a key expires on the primary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The key now holds this entry.
    Put {
        /// The key.
        key: String,
        /// Its value and absolute expiry.
        entry: Entry,
    },
    /// The key is gone.
    Del {
        /// The key.
        key: String,
    },
}

/// A node's replication state as `INFO replication` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplInfo {
    /// `None` for a primary, the primary it follows for a replica.
    pub following: Option<NodeIdx>,
    /// Whether a replica's link to its primary is up (always true for a primary).
    pub link_up: bool,
    /// How much of the replication stream the node has (Redis' `master_repl_offset`).
    pub offset: u64,
}

/// A reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A nil reply.
    Nil,
    /// An integer.
    Int(i64),
    /// A string.
    Bulk(String),
    /// An error.
    Error(String),
    /// The answer to `INFO replication`.
    Info(ReplInfo),
}

/// A Redis data set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Store {
    entries: BTreeMap<String, Entry>,
}

impl Store {
    /// An empty data set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys (including expired keys nobody touched yet).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry under `key`, if any (expired or not).
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// The keys holding a string (lock values; counters hold integers), expired or not.
    pub fn lock_entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e.value, Value::Str(_)))
            .map(|(k, e)| (k.as_str(), e))
    }

    /// Lazy expiry: drops `key` if its deadline has passed (Redis: `now > when`).
    fn expire_if_due(&mut self, key: &str, now_ms: i64, expired: &mut Vec<String>) {
        if let Some(Entry {
            expire_at_ms: Some(when),
            ..
        }) = self.entries.get(key)
        {
            if now_ms > *when {
                self.entries.remove(key);
                expired.push(key.to_owned());
            }
        }
    }

    fn get_str(&mut self, key: &str, now_ms: i64, expired: &mut Vec<String>) -> Option<String> {
        self.expire_if_due(key, now_ms, expired);
        self.entries.get(key).map(|e| match &e.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
        })
    }

    fn set(&mut self, key: &str, value: &str, px_ms: Option<u64>, now_ms: i64) {
        self.entries.insert(
            key.to_owned(),
            Entry {
                value: Value::Str(value.to_owned()),
                expire_at_ms: px_ms.map(|ms| now_ms + ms as i64),
            },
        );
    }

    fn incr(&mut self, key: &str, now_ms: i64, expired: &mut Vec<String>) -> Reply {
        self.expire_if_due(key, now_ms, expired);
        let entry = self.entries.entry(key.to_owned()).or_insert(Entry {
            value: Value::Int(0),
            expire_at_ms: None,
        });
        let next = match &entry.value {
            Value::Int(i) => i + 1,
            Value::Str(s) => match s.parse::<i64>() {
                Ok(i) => i + 1,
                Err(_) => return Reply::Error("ERR value is not an integer".into()),
            },
        };
        entry.value = Value::Int(next);
        Reply::Int(next)
    }

    /// Executes one command and also returns its effects, as a primary propagates them (a key
    /// found expired on the way is deleted: its `DEL` is among the effects).
    pub fn exec_with_effects(
        &mut self,
        cmd: &Cmd,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> (Reply, Vec<Effect>) {
        let keys = cmd.keys();
        let before: Vec<Option<Entry>> =
            keys.iter().map(|k| self.entries.get(*k).cloned()).collect();
        let reply = self.exec(cmd, now_ms, expired);
        let effects = keys
            .into_iter()
            .zip(before)
            .filter_map(|(key, before)| match (before, self.entries.get(key)) {
                (before, Some(after)) if before.as_ref() != Some(after) => Some(Effect::Put {
                    key: key.to_owned(),
                    entry: after.clone(),
                }),
                (Some(_), None) => Some(Effect::Del {
                    key: key.to_owned(),
                }),
                _ => None,
            })
            .collect();
        (reply, effects)
    }

    /// Applies an effect received from a primary (a replica never expires keys itself: it
    /// waits for the primary's `DEL`).
    pub fn apply(&mut self, effect: &Effect) {
        match effect {
            Effect::Put { key, entry } => {
                self.entries.insert(key.clone(), entry.clone());
            }
            Effect::Del { key } => {
                self.entries.remove(key);
            }
        }
    }

    /// `GET` on a replica: a key past its deadline reads as missing, but stays until the
    /// primary's `DEL` arrives (Redis 3.2 and later).
    pub fn get_readonly(&self, key: &str, now_ms: i64) -> Reply {
        match self.entries.get(key) {
            Some(e) if e.expire_at_ms.is_none_or(|when| now_ms <= when) => match &e.value {
                Value::Str(s) => Reply::Bulk(s.clone()),
                Value::Int(i) => Reply::Bulk(i.to_string()),
            },
            _ => Reply::Nil,
        }
    }

    /// Executes one command at wall time `now_ms`; keys found expired on the way are
    /// appended to `expired`.
    pub fn exec(&mut self, cmd: &Cmd, now_ms: i64, expired: &mut Vec<String>) -> Reply {
        match cmd {
            Cmd::Set {
                key,
                value,
                nx,
                px_ms,
            } => {
                if *nx && self.get_str(key, now_ms, expired).is_some() {
                    return Reply::Nil;
                }
                self.set(key, value, *px_ms, now_ms);
                Reply::Ok
            }
            Cmd::Get { key } => self
                .get_str(key, now_ms, expired)
                .map_or(Reply::Nil, Reply::Bulk),
            Cmd::Del { key } => {
                self.expire_if_due(key, now_ms, expired);
                Reply::Int(self.entries.remove(key).is_some() as i64)
            }
            Cmd::Incr { key } => self.incr(key, now_ms, expired),
            Cmd::SetNxIncr {
                key,
                value,
                px_ms,
                counter,
            } => {
                if self.get_str(key, now_ms, expired).is_some() {
                    return Reply::Nil;
                }
                self.set(key, value, *px_ms, now_ms);
                self.incr(counter, now_ms, expired)
            }
            Cmd::DelIfEq { key, value } => {
                if self.get_str(key, now_ms, expired).as_deref() == Some(value) {
                    self.entries.remove(key);
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
            Cmd::PexpireIfEq { key, value, px_ms } => {
                if self.get_str(key, now_ms, expired).as_deref() == Some(value) {
                    if let Some(e) = self.entries.get_mut(key) {
                        e.expire_at_ms = Some(now_ms + *px_ms as i64);
                    }
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
            Cmd::Info | Cmd::ReplicaOf { .. } | Cmd::Wait { .. } => {
                Reply::Error("ERR not a data-set command: the server handles it".into())
            }
        }
    }

    /// Active expiry: removes every key whose deadline has passed; returns their names.
    pub fn expire_due(&mut self, now_ms: i64) -> Vec<String> {
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.expire_at_ms.is_some_and(|w| now_ms > w))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            self.entries.remove(k);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_nx(key: &str, value: &str, px: u64) -> Cmd {
        Cmd::Set {
            key: key.into(),
            value: value.into(),
            nx: true,
            px_ms: Some(px),
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
            px_ms: Some(10),
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
            px_ms: 100,
        };
        assert_eq!(s.exec(&ext("b"), 5, &mut ex), Reply::Int(0));
        assert_eq!(s.exec(&ext("a"), 5, &mut ex), Reply::Int(1));
        assert!(s.expire_due(50).is_empty());
        assert_eq!(s.expire_due(106), vec!["k".to_string()]);
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
            px_ms: Some(10),
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
}
