//! The command semantics of a Redis server: a pure function of (state, command, wall time).
//!
//! Modelled on Redis 7.0 (`src/t_string.c`, `src/expire.c`, `src/util.c` `string2ll`,
//! `src/replication.c` `waitCommand`) and checked against a real `redis-server` by
//! `protocols/tests/redis_conformance.rs`: the replies, error texts included, are the ones
//! Redis 7.0 writes. Where Redis is strict the model is too: integers parse as `string2ll`
//! parses them (no `+`, no leading zeros, no `-0`), `INCR` past `i64::MAX` is an error, a
//! `SET … PX` TTL must be positive and `now + ttl` must not overflow, and `PEXPIRE` with a
//! deadline at or before now deletes the key. Arithmetic near the type limits is checked,
//! never wrapped.
//!
//! Expiry is lazy (a command touching a key past its deadline deletes it first, Redis'
//! `now > when`) and active ([`ActiveExpiry`]: Redis' sampling cycle).

use locksim_sim::NodeIdx;
use std::collections::BTreeMap;
use std::ops::Bound;

/// The error Redis gives for an argument or a stored value that is not a 64-bit integer.
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// The error Redis gives when `INCR` would pass `i64::MAX`.
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";

/// The error Redis gives for a TTL it refuses (not positive for `SET`, or a deadline that
/// overflows), naming the command.
pub fn err_expire_time(command: &str) -> String {
    format!("ERR invalid expire time in '{command}' command")
}

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer (what `INCR` keeps).
    Int(i64),
    /// A list, its head first (python-redis-lock's signal list: `LPUSH`, `BLPOP`).
    List(Vec<String>),
}

/// The error Redis gives for a string command on a list (or the reverse).
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A key's value and absolute expiry (server wall clock, ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires, if it does.
    pub expire_at_ms: Option<i64>,
}

/// An integer argument as a client writes it. On the wire it is text, and Redis parses it
/// as a signed 64-bit integer, replying [`ERR_NOT_INTEGER`] outside that range; so the
/// model takes any integer a client could write (a `u64` TTL as well as a negative one)
/// and does the range check itself, as Redis does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct IntArg(pub i128);

impl IntArg {
    /// The value Redis parses, or the error it replies.
    fn to_i64(self) -> Result<i64, String> {
        i64::try_from(self.0).map_err(|_| ERR_NOT_INTEGER.to_owned())
    }
}

impl From<u64> for IntArg {
    fn from(n: u64) -> Self {
        IntArg(n.into())
    }
}

impl From<i64> for IntArg {
    fn from(n: i64) -> Self {
        IntArg(n.into())
    }
}

impl std::fmt::Display for IntArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A Lua script the clients run, with the SHA-1 Redis names it by (and quotes in the
/// errors the script raises).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Script {
    /// The Lua source, as `EVAL` sends it.
    pub source: &'static str,
    /// Its SHA-1 in hex (what `SCRIPT LOAD` returns; the conformance test checks it).
    pub sha1: &'static str,
}

/// The acquire script with a fencing token: `SET NX PX`, and `INCR` of the counter if the
/// lock was taken ([`Cmd::SetNxIncr`] with a TTL).
pub const ACQUIRE_WITH_TOKEN: Script = Script {
    source: r#"if redis.call("set",KEYS[1],ARGV[1],"NX","PX",ARGV[2]) then return redis.call("incr",KEYS[2]) else return false end"#,
    sha1: "5daabff759b9a6c7dcdc1f35ad3a92978d99d07f",
};

/// The same without a TTL ([`Cmd::SetNxIncr`] without one: the `no-ttl` bug variant).
pub const ACQUIRE_WITH_TOKEN_NO_TTL: Script = Script {
    source: r#"if redis.call("set",KEYS[1],ARGV[1],"NX") then return redis.call("incr",KEYS[2]) else return false end"#,
    sha1: "10a960429d7da74e404a4ea279a57f0b4cbef8b6",
};

/// The safe release of the Redis distributed-locks page ([`Cmd::DelIfEq`]).
pub const RELEASE: Script = Script {
    source: r#"if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end"#,
    sha1: "b70c2384248f88e6b75b9f89241a180f856ad852",
};

/// The extend script: the same check, then `PEXPIRE` ([`Cmd::PexpireIfEq`]).
pub const EXTEND: Script = Script {
    source: r#"if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end"#,
    sha1: "36e94d1c6e02fcefaa7ee5d79eee614dbac55f10",
};

/// pottery's `_acquired_script` (`pottery/redlock.py`, `Redlock.locked()`), on one line
/// ([`Cmd::PttlIfEq`]): the key's `PTTL` if it holds the value and has time left, else 0.
pub const PTTL_IF_EQ: Script = Script {
    source: r#"if redis.call("get",KEYS[1]) == ARGV[1] then local pttl = redis.call("pttl",KEYS[1]) return (pttl > 0) and pttl or 0 else return 0 end"#,
    sha1: "5d1143ef15af2135df463d0c11377370b71d8c94",
};

/// python-redis-lock's `UNLOCK_SCRIPT` ([`Cmd::DelIfEqSignal`]), on one line: 1 if the key
/// is not ours; else a fresh signal list holding one element (which wakes one waiter blocked
/// in `BLPOP`, or the next to ask within its expiry), the key deleted, and 0.
pub const UNLOCK_AND_SIGNAL: Script = Script {
    source: r#"if redis.call("get",KEYS[1]) ~= ARGV[1] then return 1 else redis.call("del",KEYS[2]) redis.call("lpush",KEYS[2],1) redis.call("pexpire",KEYS[2],ARGV[2]) redis.call("del",KEYS[1]) return 0 end"#,
    sha1: "abce81d031fd6c3af2b86ae285beaf0f6f5444ce",
};

/// redlock-rb's lock script with `allow_new_lock = "yes"`, as `lock(..., extend:)` runs it
/// ([`Cmd::SetIfAbsentOrEq`]): set the key if it is absent or still holds the value.
pub const SET_IF_ABSENT_OR_EQ: Script = Script {
    source: r#"if redis.call("exists",KEYS[1]) == 0 or redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("set",KEYS[1],ARGV[1],"PX",ARGV[2]) end"#,
    sha1: "e2434701bdc79e71dcb6203fb656a7e30cb9d381",
};

/// An error raised inside a script, as Redis 7.0 reports it (the scripts are one line).
fn script_error(script: &Script, error: String) -> String {
    format!("{error} script: {}, on @user_script:1.", script.sha1)
}

/// The commands the lock protocols use. The `*If*` variants are the Lua scripts from the
/// Redis distributed-locks page ([`RELEASE`], [`EXTEND`], [`ACQUIRE_WITH_TOKEN`]), which
/// Redis runs atomically; an error inside one aborts it, keeping what it already wrote.
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
        px_ms: Option<IntArg>,
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
        px_ms: Option<IntArg>,
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
        /// New time to live in ms (at or below 0 deletes the key, as `PEXPIRE` does).
        px_ms: IntArg,
    },
    /// Script: `if key is absent or GET key == value then return SET key value PX ms` (nil
    /// otherwise): redlock-rb's extension, which sets an expired key again.
    SetIfAbsentOrEq {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Time to live in ms.
        px_ms: IntArg,
    },
    /// Script: `if GET key == value then return max(PTTL key, 0) else return 0` ([`PTTL_IF_EQ`],
    /// pottery's `locked()`): how long the key still holds this value, in ms (0 for a key
    /// without a TTL, as `PTTL`'s -1 is not above 0).
    PttlIfEq {
        /// The key.
        key: String,
        /// The expected value.
        value: String,
    },
    /// Script: python-redis-lock's release ([`UNLOCK_AND_SIGNAL`]): if `GET key == value`,
    /// `DEL signal`, `LPUSH signal 1`, `PEXPIRE signal signal_expire_ms`, `DEL key` and 0;
    /// else 1.
    DelIfEqSignal {
        /// The lock key.
        key: String,
        /// The expected value.
        value: String,
        /// The signal list's key.
        signal: String,
        /// The signal list's time to live in ms (python-redis-lock's `signal_expire`).
        signal_expire_ms: u64,
    },
    /// `BLPOP key timeout`: pop the list's head, or block until an element is pushed or
    /// `timeout_s` passed (0: for good); the reply is the element, or nil. Handled by the
    /// server (it blocks); only a standalone server takes it.
    Blpop {
        /// The list's key.
        key: String,
        /// How long to block at most, in seconds of the server's clock.
        timeout_s: u64,
    },
    /// `PING` (Sentinel's liveness check): answered `PONG` by the server, whatever its role.
    Ping,
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
    /// last write, or `timeout_ms` passed (0: no timeout); the reply is how many did. Handled
    /// by the server; a standalone server has no replicas and replies 0.
    Wait {
        /// How many replicas to wait for.
        replicas: u32,
        /// How long to wait at most, in ms of the server's clock; 0 waits forever.
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
                | Cmd::SetIfAbsentOrEq { .. }
                | Cmd::DelIfEqSignal { .. }
        )
    }

    /// The lock key a command sets or deletes (`SET`, the `SET NX` + `INCR` script, `DEL`,
    /// compare-and-delete), for the history's view of who holds the lock on a server.
    pub fn lock_key(&self) -> Option<&str> {
        match self {
            Cmd::Set { key, .. }
            | Cmd::SetNxIncr { key, .. }
            | Cmd::Del { key }
            | Cmd::DelIfEq { key, .. }
            | Cmd::DelIfEqSignal { key, .. }
            | Cmd::SetIfAbsentOrEq { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Whether the server handles the command itself (`PING`, `INFO`, `REPLICAOF`, `WAIT`,
    /// `BLPOP`) rather than the data set.
    pub fn is_server_command(&self) -> bool {
        matches!(
            self,
            Cmd::Ping | Cmd::Info | Cmd::ReplicaOf { .. } | Cmd::Wait { .. } | Cmd::Blpop { .. }
        )
    }

    /// The keys a data command may read or change.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Cmd::Set { key, .. }
            | Cmd::Get { key }
            | Cmd::Del { key }
            | Cmd::Incr { key }
            | Cmd::DelIfEq { key, .. }
            | Cmd::PexpireIfEq { key, .. }
            | Cmd::PttlIfEq { key, .. }
            | Cmd::SetIfAbsentOrEq { key, .. } => vec![key],
            Cmd::SetNxIncr { key, counter, .. } => vec![key, counter],
            Cmd::DelIfEqSignal { key, signal, .. } => vec![key, signal],
            Cmd::Blpop { key, .. } => vec![key],
            Cmd::Ping | Cmd::Info | Cmd::ReplicaOf { .. } | Cmd::Wait { .. } => vec![],
        }
    }

    /// The command as a client sends it to a real Redis (the words of a RESP array); `None`
    /// for `REPLICAOF host port`, whose host the model names by node.
    pub fn argv(&self) -> Option<Vec<String>> {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // `EVAL source numkeys keys... args...`
        let eval = |script: &Script, keys: &[&str], args: &[&str]| {
            let numkeys = keys.len().to_string();
            words(&[&["EVAL", script.source, &numkeys][..], keys, args].concat())
        };
        Some(match self {
            Cmd::Set {
                key,
                value,
                nx,
                px_ms,
            } => {
                let mut argv = words(&["SET", key, value]);
                argv.extend(nx.then(|| "NX".to_owned()));
                argv.extend(
                    px_ms
                        .iter()
                        .flat_map(|px| ["PX".to_owned(), px.to_string()]),
                );
                argv
            }
            Cmd::Get { key } => words(&["GET", key]),
            Cmd::Del { key } => words(&["DEL", key]),
            Cmd::Incr { key } => words(&["INCR", key]),
            Cmd::SetNxIncr {
                key,
                value,
                px_ms,
                counter,
            } => match px_ms {
                Some(px) => eval(
                    &ACQUIRE_WITH_TOKEN,
                    &[key, counter],
                    &[value, &px.to_string()],
                ),
                None => eval(&ACQUIRE_WITH_TOKEN_NO_TTL, &[key, counter], &[value]),
            },
            Cmd::DelIfEq { key, value } => eval(&RELEASE, &[key], &[value]),
            Cmd::PexpireIfEq { key, value, px_ms } => {
                eval(&EXTEND, &[key], &[value, &px_ms.to_string()])
            }
            Cmd::PttlIfEq { key, value } => eval(&PTTL_IF_EQ, &[key], &[value]),
            Cmd::SetIfAbsentOrEq { key, value, px_ms } => {
                eval(&SET_IF_ABSENT_OR_EQ, &[key], &[value, &px_ms.to_string()])
            }
            Cmd::DelIfEqSignal {
                key,
                value,
                signal,
                signal_expire_ms,
            } => {
                let expire_ms = signal_expire_ms.to_string();
                eval(&UNLOCK_AND_SIGNAL, &[key, signal], &[value, &expire_ms])
            }
            Cmd::Blpop { key, timeout_s } => words(&["BLPOP", key, &timeout_s.to_string()]),
            Cmd::Ping => words(&["PING"]),
            Cmd::Info => words(&["INFO", "replication"]),
            Cmd::ReplicaOf { primary: None } => words(&["REPLICAOF", "NO", "ONE"]),
            Cmd::ReplicaOf { primary: Some(_) } => return None,
            Cmd::Wait {
                replicas,
                timeout_ms,
            } => words(&["WAIT", &replicas.to_string(), &timeout_ms.to_string()]),
        })
    }
}

/// When the reply to a command that may block comes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deferred {
    /// At once.
    Now(Reply),
    /// After this long on the server's clock.
    After {
        /// The wait.
        delay: std::time::Duration,
        /// The reply then.
        reply: Reply,
    },
    /// Never (until the client gives up).
    Never,
}

/// Redis' error for a `WAIT` timeout outside `i64`.
pub const ERR_TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";

/// `WAIT` timeouts longer than this (a year) block for good: no run lasts that long, and
/// the node clock's nanosecond arithmetic stays far from its limits.
pub const WAIT_TIMEOUT_MS_FOREVER: u64 = 365 * 24 * 3_600 * 1_000;

/// A `WAIT` timeout as Redis parses it (`getTimeoutFromObjectOrReply`): `None` for no
/// timeout (0, or beyond [`WAIT_TIMEOUT_MS_FOREVER`]), or the error for one outside `i64`.
pub fn wait_timeout(timeout_ms: u64) -> Result<Option<std::time::Duration>, Reply> {
    match timeout_ms {
        t if i64::try_from(t).is_err() => Err(Reply::Error(ERR_TIMEOUT_NOT_INTEGER.into())),
        0 => Ok(None),
        t if t > WAIT_TIMEOUT_MS_FOREVER => Ok(None),
        t => Ok(Some(std::time::Duration::from_millis(t))),
    }
}

/// `WAIT replicas timeout` on a standalone server (`waitCommand`): no replica ever
/// acknowledges, so it replies 0 at once when it asks for none, and otherwise blocks until
/// its timeout ([`wait_timeout`]) and then replies 0.
pub fn standalone_wait(replicas: u32, timeout_ms: u64) -> Deferred {
    match (wait_timeout(timeout_ms), replicas) {
        (Err(error), _) => Deferred::Now(error),
        (Ok(_), 0) => Deferred::Now(Reply::Int(0)),
        (Ok(None), _) => Deferred::Never,
        (Ok(Some(delay)), _) => Deferred::After {
            delay,
            reply: Reply::Int(0),
        },
    }
}

/// Parses a stored string as Redis' `string2ll` does: an optional `-`, then digits without a
/// leading zero (or exactly `0`), within `i64`. So `+5`, `05`, `-0`, ` 5` are not integers.
pub fn parse_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = s == "0"
        || (digits.starts_with(|c: char| ('1'..='9').contains(&c))
            && digits.bytes().all(|b| b.is_ascii_digit()));
    if canonical {
        s.parse().ok()
    } else {
        None
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
    /// For a replica whose link is down, whole seconds since it went down (Redis'
    /// `master_link_down_since_seconds`); `None` while it is up, and when it has not been up
    /// since the process started (Redis says -1 then).
    pub link_down_s: Option<u64>,
    /// How much of the replication stream the node has (Redis' `master_repl_offset`).
    pub offset: u64,
    /// The process's run id (Redis' `run_id`, random at each start; in `INFO server`, which
    /// a sentinel reads too): Sentinel prefers the smaller between replicas equally up to
    /// date. `None` where not known.
    pub run_id: Option<u64>,
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

/// `SET`'s TTL check (`getExpireMillisecondsOrReply`): an `i64`, positive, and `now + ttl`
/// must stay positive without overflowing. Returns the absolute deadline.
fn set_deadline_ms(px_ms: IntArg, now_ms: i64) -> Result<i64, String> {
    let ttl_ms = px_ms.to_i64()?;
    match now_ms.checked_add(ttl_ms) {
        Some(when) if ttl_ms > 0 && when > 0 => Ok(when),
        _ => Err(err_expire_time("set")),
    }
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

    fn get_str(
        &mut self,
        key: &str,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Option<String>, String> {
        self.expire_if_due(key, now_ms, expired);
        self.entries
            .get(key)
            .map(|e| match &e.value {
                Value::Str(s) => Ok(s.clone()),
                Value::Int(i) => Ok(i.to_string()),
                Value::List(_) => Err(ERR_WRONGTYPE.to_owned()),
            })
            .transpose()
    }

    /// `LPOP key` (what `BLPOP` does when the list has an element): the head, if any; an
    /// emptied list is deleted, as Redis deletes empty lists.
    pub fn lpop(
        &mut self,
        key: &str,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Option<String>, String> {
        self.expire_if_due(key, now_ms, expired);
        let Some(entry) = self.entries.get_mut(key) else {
            return Ok(None);
        };
        let Value::List(items) = &mut entry.value else {
            return Err(ERR_WRONGTYPE.to_owned());
        };
        let head = (!items.is_empty()).then(|| items.remove(0));
        if items.is_empty() {
            self.entries.remove(key);
        }
        Ok(head)
    }

    /// `SET key value [NX] [PX ttl]`: the TTL is checked before the key is looked at, as
    /// Redis does; a plain `SET` clears an earlier TTL.
    fn set(
        &mut self,
        (key, value): (&str, &str),
        nx: bool,
        px_ms: Option<IntArg>,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Reply, String> {
        let expire_at_ms = px_ms.map(|px| set_deadline_ms(px, now_ms)).transpose()?;
        if nx && self.get_str(key, now_ms, expired)?.is_some() {
            return Ok(Reply::Nil);
        }
        let entry = Entry {
            value: Value::Str(value.to_owned()),
            expire_at_ms,
        };
        self.entries.insert(key.to_owned(), entry);
        Ok(Reply::Ok)
    }

    /// pottery's `locked()` script ([`PTTL_IF_EQ`]): the key's `PTTL` (its deadline less now,
    /// at least 0; a key without a TTL answers 0) if it holds `value`, else 0.
    fn pttl_if_eq(
        &mut self,
        (key, value): (&str, &str),
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Reply, String> {
        let current = self.get_str(key, now_ms, expired);
        if current
            .map_err(|e| script_error(&PTTL_IF_EQ, e))?
            .as_deref()
            != Some(value)
        {
            return Ok(Reply::Int(0));
        }
        let deadline = self.entries.get(key).and_then(|e| e.expire_at_ms);
        Ok(Reply::Int(
            deadline.map_or(0, |when| (when - now_ms).max(0)),
        ))
    }

    /// `INCR key`: a missing key counts from 0; the TTL is kept.
    fn incr(&mut self, key: &str, now_ms: i64, expired: &mut Vec<String>) -> Result<Reply, String> {
        self.expire_if_due(key, now_ms, expired);
        let current = match self.entries.get(key).map(|e| &e.value) {
            None => 0,
            Some(Value::Int(i)) => *i,
            Some(Value::Str(s)) => parse_integer(s).ok_or(ERR_NOT_INTEGER)?,
            Some(Value::List(_)) => return Err(ERR_WRONGTYPE.to_owned()),
        };
        let next = current.checked_add(1).ok_or(ERR_OVERFLOW)?;
        let entry = self.entries.entry(key.to_owned()).or_insert(Entry {
            value: Value::Int(0),
            expire_at_ms: None,
        });
        entry.value = Value::Int(next);
        Ok(Reply::Int(next))
    }

    /// `PEXPIRE key ttl` on a primary (`expireGenericCommand`): the deadline `now + ttl` must
    /// not overflow; a missing key replies 0; a deadline at or before now deletes the key.
    fn pexpire(
        &mut self,
        key: &str,
        px_ms: IntArg,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Reply, String> {
        let when = now_ms
            .checked_add(px_ms.to_i64()?)
            .ok_or_else(|| err_expire_time("pexpire"))?;
        self.expire_if_due(key, now_ms, expired);
        let Some(entry) = self.entries.get_mut(key) else {
            return Ok(Reply::Int(0));
        };
        if when <= now_ms {
            self.entries.remove(key);
        } else {
            entry.expire_at_ms = Some(when);
        }
        Ok(Reply::Int(1))
    }

    /// The acquire script with a token ([`ACQUIRE_WITH_TOKEN`]): `SET NX`, then `INCR` of
    /// the counter if it was set.
    fn set_nx_incr(
        &mut self,
        (key, value): (&str, &str),
        px_ms: Option<IntArg>,
        counter: &str,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Reply, String> {
        let script = match px_ms {
            Some(_) => &ACQUIRE_WITH_TOKEN,
            None => &ACQUIRE_WITH_TOKEN_NO_TTL,
        };
        let in_script = |e| script_error(script, e);
        let set = self.set((key, value), true, px_ms, now_ms, expired);
        match set.map_err(in_script)? {
            Reply::Nil => Ok(Reply::Nil),
            // The lock key stays written if INCR fails: scripts do not roll back.
            _ => self.incr(counter, now_ms, expired).map_err(in_script),
        }
    }

    /// python-redis-lock's release ([`UNLOCK_AND_SIGNAL`]): 1 if the key is not `value`; else
    /// the signal list replaced by one element that expires in `signal_expire_ms`, the key
    /// deleted, and 0.
    fn del_if_eq_signal(
        &mut self,
        (key, value): (&str, &str),
        signal: &str,
        signal_expire_ms: u64,
        now_ms: i64,
        expired: &mut Vec<String>,
    ) -> Result<Reply, String> {
        let in_script = |e| script_error(&UNLOCK_AND_SIGNAL, e);
        if self
            .get_str(key, now_ms, expired)
            .map_err(in_script)?
            .as_deref()
            != Some(value)
        {
            return Ok(Reply::Int(1));
        }
        self.expire_if_due(signal, now_ms, expired);
        let list = Entry {
            value: Value::List(vec!["1".into()]),
            expire_at_ms: None,
        };
        self.entries.insert(signal.to_owned(), list);
        self.pexpire(signal, signal_expire_ms.into(), now_ms, expired)
            .map_err(in_script)?;
        self.entries.remove(key);
        Ok(Reply::Int(0))
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
                Value::List(_) => Reply::Error(ERR_WRONGTYPE.into()),
            },
            _ => Reply::Nil,
        }
    }

    /// Executes one command at wall time `now_ms`; keys found expired on the way are
    /// appended to `expired`.
    pub fn exec(&mut self, cmd: &Cmd, now_ms: i64, expired: &mut Vec<String>) -> Reply {
        self.run(cmd, now_ms, expired).unwrap_or_else(Reply::Error)
    }

    fn run(&mut self, cmd: &Cmd, now_ms: i64, expired: &mut Vec<String>) -> Result<Reply, String> {
        match cmd {
            Cmd::Set {
                key,
                value,
                nx,
                px_ms,
            } => self.set((key, value), *nx, *px_ms, now_ms, expired),
            Cmd::Get { key } => Ok(self
                .get_str(key, now_ms, expired)?
                .map_or(Reply::Nil, Reply::Bulk)),
            Cmd::Del { key } => {
                self.expire_if_due(key, now_ms, expired);
                Ok(Reply::Int(self.entries.remove(key).is_some().into()))
            }
            Cmd::Incr { key } => self.incr(key, now_ms, expired),
            Cmd::SetNxIncr {
                key,
                value,
                px_ms,
                counter,
            } => self.set_nx_incr((key, value), *px_ms, counter, now_ms, expired),
            Cmd::DelIfEq { key, value } => {
                let current = self.get_str(key, now_ms, expired);
                let ours =
                    current.map_err(|e| script_error(&RELEASE, e))?.as_deref() == Some(value);
                Ok(Reply::Int(i64::from(
                    ours && self.entries.remove(key).is_some(),
                )))
            }
            Cmd::PexpireIfEq { key, value, px_ms } => {
                let current = self.get_str(key, now_ms, expired);
                if current.map_err(|e| script_error(&EXTEND, e))?.as_deref() == Some(value) {
                    self.pexpire(key, *px_ms, now_ms, expired)
                        .map_err(|e| script_error(&EXTEND, e))
                } else {
                    Ok(Reply::Int(0))
                }
            }
            Cmd::PttlIfEq { key, value } => self.pttl_if_eq((key, value), now_ms, expired),
            Cmd::SetIfAbsentOrEq { key, value, px_ms } => {
                let current = (self.get_str(key, now_ms, expired))
                    .map_err(|e| script_error(&SET_IF_ABSENT_OR_EQ, e))?;
                if current.is_some_and(|v| v != *value) {
                    return Ok(Reply::Nil);
                }
                self.set((key, value), false, Some(*px_ms), now_ms, expired)
                    .map_err(|e| script_error(&SET_IF_ABSENT_OR_EQ, e))
            }
            Cmd::DelIfEqSignal {
                key,
                value,
                signal,
                signal_expire_ms,
            } => self.del_if_eq_signal((key, value), signal, *signal_expire_ms, now_ms, expired),
            Cmd::Ping
            | Cmd::Info
            | Cmd::ReplicaOf { .. }
            | Cmd::Wait { .. }
            | Cmd::Blpop { .. } => Err("ERR not a data-set command: the server handles it".into()),
        }
    }

    /// Keys with a TTL after `cursor` in key order, wrapping around, at most `limit` of them
    /// and each at most once.
    fn volatile_after(&self, cursor: Option<&str>, limit: usize) -> Vec<String> {
        let start = cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let after = self.entries.range::<str, _>((start, Bound::Unbounded));
        let before = self
            .entries
            .range::<str, _>((Bound::Unbounded, start_inclusive(start)));
        after
            .chain(before)
            .filter(|(_, e)| e.expire_at_ms.is_some())
            .take(limit)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// The part before an excluded start bound, that bound included (the wrap-around half).
fn start_inclusive(start: Bound<&str>) -> Bound<&str> {
    match start {
        Bound::Excluded(k) => Bound::Included(k),
        _ => Bound::Excluded(""),
    }
}

/// Keys sampled per loop of an active-expiry cycle (`ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`).
pub const ACTIVE_EXPIRE_KEYS_PER_LOOP: usize = 20;

/// A cycle samples again while more than this percentage of the sample had expired
/// (`ACTIVE_EXPIRE_CYCLE_ACCEPTABLE_STALE`, 10 % since Redis 6.0 at the default
/// `active-expire-effort 1`; the Redis documentation still describes the older 25 %).
pub const ACTIVE_EXPIRE_ACCEPTABLE_STALE_PERCENT: usize = 10;

/// Redis' active expiry (`activeExpireCycle`, run `hz` times per second by `serverCron`).
/// Each loop looks at the next [`ACTIVE_EXPIRE_KEYS_PER_LOOP`] keys that have a TTL, from
/// a cursor that persists across cycles, and deletes those past their deadline; the cycle
/// samples again while more than [`ACTIVE_EXPIRE_ACCEPTABLE_STALE_PERCENT`] of the sample
/// had expired. So with many keys a due key can wait several cycles; with up to 20 keys
/// every due key goes in the first loop.
///
/// Differences from Redis 7.0, all documented in `docs/redis-protocols.md`: the cursor walks
/// the keys in name order (Redis walks its hash table's buckets, whose order depends on a
/// per-process random seed); a cycle has no 25 ms time limit (it ends only by the 10 % rule);
/// the "fast" cycle Redis runs before sleeping when its stale-key estimate is high is not
/// modelled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActiveExpiry {
    /// The last key sampled (Redis' `expires_cursor`); the next loop starts after it.
    cursor: Option<String>,
}

impl ActiveExpiry {
    /// One cycle at wall time `now_ms`: returns the keys it deleted.
    pub fn cycle(&mut self, store: &mut Store, now_ms: i64) -> Vec<String> {
        let mut deleted = Vec::new();
        loop {
            let sample = store.volatile_after(self.cursor.as_deref(), ACTIVE_EXPIRE_KEYS_PER_LOOP);
            let Some(last) = sample.last() else {
                break;
            };
            self.cursor = Some(last.clone());
            let before = deleted.len();
            for key in &sample {
                store.expire_if_due(key, now_ms, &mut deleted);
            }
            let expired_n = deleted.len() - before;
            if expired_n * 100 / sample.len() <= ACTIVE_EXPIRE_ACCEPTABLE_STALE_PERCENT {
                break;
            }
        }
        deleted
    }
}
