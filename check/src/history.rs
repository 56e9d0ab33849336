//! The history: a flat, append-only list of [`Event`]s stamped with true time.
//!
//! Every step a client, server, the resource or the nemesis takes is one event, faults
//! included, so a checker or a timeline needs nothing else. The format follows Jepsen's
//! `{:index :time :process :type :f :value}`: `kind` is `invoke` / `ok` / `fail` / `info`
//! (`info` = the outcome is unknown, or the event is an instantaneous fact such as a fault).
//! On disk a history is JSON Lines, one event per line.
//!
//! **Histories from real systems.** A simulator stamps every event with true time. A real
//! recorder only has its node's clock, so an event may carry `clock_error_ns`: then
//! `time_ns` is the recording node's own clock, and true time is known only to lie within
//! `time_ns ± clock_error_ns` ([`Event::time_window_ns`]). Such events need to be in time
//! order only among the events of their own node. A recorder that cannot tell the exact
//! instant of a critical-section boundary brackets it: a `cs_enter` (or `cs_exit`) of kind
//! `invoke` before the call, and the usual `ok` after it; the boundary lies somewhere in
//! between. The checker then reports a violation only where critical sections certainly
//! overlap, and `unknown` where they may.

use crate::input::{read_line_bounded, Line, LINE_BYTES_MAX};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// The type of an event, as in Jepsen: an invocation, its success, its definite failure, or
/// `info` for an outcome nobody learned (and for instantaneous facts such as faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An operation started.
    Invoke,
    /// The operation completed and succeeded.
    Ok,
    /// The operation completed and definitely did not take effect.
    Fail,
    /// The outcome is unknown, or the event is a fact (a fault, an expiry).
    Info,
}

/// What an event is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// A client asks for the lock.
    Acquire,
    /// A client gives the lock back.
    Release,
    /// A client extends its lease.
    Extend,
    /// A client entered its critical section (its acquire returned success).
    CsEnter,
    /// A client left its critical section (it starts its release, or gives the lock up).
    CsExit,
    /// A client reads the resource.
    Read,
    /// A client writes the resource (with `value` and, where it has one, `token`).
    Write,
    /// The resource accepted a write (`value` = the new value).
    ResourceAccept,
    /// The resource rejected a write carrying a stale token.
    ResourceReject,
    /// A node was paused (stop-the-world).
    Pause,
    /// A paused node runs again.
    Resume,
    /// A node crashed: it loses everything it had not persisted.
    Crash,
    /// A crashed node starts again.
    Restart,
    /// Links were cut (`detail` says which).
    Partition,
    /// Cut links were restored.
    Heal,
    /// A node's wall clock jumped by `value` milliseconds (negative = backwards).
    ClockJump,
    /// A node's clock drift changed to `value` ppm.
    ClockDrift,
    /// Message loss changed to `detail`.
    Loss,
    /// A node's fsyncs are held for `value` milliseconds.
    FsyncStall,
    /// A server-side key or lease expired (a fact, for timelines).
    Expire,
    /// The simulated run ended.
    RunEnd,
    /// Anything else a protocol wants on the timeline (`detail` says what).
    Note,
    /// Something a protocol did inside (`name`: `failover`, `promoted`, `demoted`,
    /// `elected`, `lease_expired`, `session_expired`, ...; `target`: the node it concerns).
    /// The checker ignores it; timelines draw it.
    Event,
    /// A node's outgoing messages are held for `value` milliseconds (a delay spike; `detail`
    /// names the links): they arrive late, in send order.
    Hold,
    /// Held messages are sent on (`detail` names the links).
    Flush,
    /// A node's event loop is stuck for `value` milliseconds (what runs outside it goes on).
    /// Last: the trace hash encodes an op by its number.
    LoopStall,
}

impl Op {
    /// Whether this op is a fault the nemesis applied.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Op::Pause
                | Op::Resume
                | Op::Crash
                | Op::Restart
                | Op::Partition
                | Op::Heal
                | Op::ClockJump
                | Op::ClockDrift
                | Op::Loss
                | Op::FsyncStall
                | Op::LoopStall
                | Op::Hold
                | Op::Flush
        )
    }
}

/// One step of a run. Unknown fields are refused: a misspelt `clock_error_ns` silently
/// dropped would turn an uncertain overlap into a certain one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Position in the history, from 0.
    pub index: u64,
    /// True (simulated, global) time in nanoseconds since the run started.
    pub time_ns: u64,
    /// The node that took the step (`nemesis` for faults applied from outside).
    pub node: String,
    /// invoke / ok / fail / info.
    pub kind: Kind,
    /// What the step is.
    pub op: Op,
    /// The lock grant this step belongs to, where known (e.g. `c1#3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// The fencing token carried, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// A value: read or written counter value, clock jump in ms, drift in ppm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// The node a fault or step targets, where it is not `node` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Free text for people: why an acquire failed, which links a partition cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For histories recorded by real systems: `time_ns` is the recording node's own clock,
    /// and true time lies within `time_ns ± clock_error_ns`. Absent: `time_ns` is true time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error_ns: Option<u64>,
    /// The name of a protocol [`Op::Event`] (`failover`, `elected`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The node name of faults applied from outside (`Event::node`), in both worlds.
pub const NEMESIS: &str = "nemesis";

impl Event {
    /// A fault or note of the nemesis (an `info` event of [`NEMESIS`]).
    pub fn nemesis(op: Op) -> Self {
        Event::new(NEMESIS, Kind::Info, op)
    }

    /// A new event with the given basics; `index` and `time_ns` are set when recorded.
    pub fn new(node: impl Into<String>, kind: Kind, op: Op) -> Self {
        Event {
            index: 0,
            time_ns: 0,
            node: node.into(),
            kind,
            op,
            grant: None,
            token: None,
            value: None,
            target: None,
            detail: None,
            clock_error_ns: None,
            name: None,
        }
    }

    /// Sets the grant.
    pub fn grant(mut self, grant: impl Into<String>) -> Self {
        self.grant = Some(grant.into());
        self
    }

    /// Sets the token, if any.
    pub fn token(mut self, token: Option<u64>) -> Self {
        self.token = token;
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: i64) -> Self {
        self.value = Some(value);
        self
    }

    /// Sets the target node.
    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Sets the detail text.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the name (of a protocol event).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// True time in milliseconds, for people.
    pub fn time_ms(&self) -> f64 {
        self.time_ns as f64 / 1e6
    }

    /// The earliest and latest true time the event may have happened at, in ns: `time_ns`
    /// itself, or `time_ns ± clock_error_ns` for an event stamped by a node's own clock.
    pub fn time_window_ns(&self) -> (u64, u64) {
        let error = self.clock_error_ns.unwrap_or(0);
        (
            self.time_ns.saturating_sub(error),
            self.time_ns.saturating_add(error),
        )
    }

    /// A one-line description for people, e.g. `1203.000ms c1 ok write value=4 token=7 grant=c1#2`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "#{} {} {} {:?} {}",
            self.index,
            format_time_ns(self.time_ns),
            self.node,
            self.kind,
            serde_json::to_value(&self.op)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        )
        .to_lowercase();
        if let Some(n) = &self.name {
            s.push_str(&format!(" {n}"));
        }
        if let Some(t) = &self.target {
            s.push_str(&format!(" target={t}"));
        }
        if let Some(g) = &self.grant {
            s.push_str(&format!(" grant={g}"));
        }
        if let Some(t) = self.token {
            s.push_str(&format!(" token={t}"));
        }
        if let Some(v) = self.value {
            s.push_str(&format!(" value={v}"));
        }
        if let Some(e) = self.clock_error_ns {
            s.push_str(&format!(" ±{}", format_time_ns(e)));
        }
        if let Some(d) = &self.detail {
            s.push_str(&format!(" ({d})"));
        }
        s
    }
}

/// A time in ns for people, in ms with every digit that is not zero: `25.488ms`,
/// `0.002001ms`. Never rounded, so a 1 ns overlap never reads as touching.
pub fn format_time_ns(ns: u64) -> String {
    let (ms, frac) = (ns / 1_000_000, ns % 1_000_000);
    let mut digits = format!("{frac:06}");
    // Keep at least three decimals (µs) so ordinary times line up.
    while digits.len() > 3 && digits.ends_with('0') {
        digits.pop();
    }
    format!("{ms}.{digits}ms")
}

/// A whole history.
pub type History = Vec<Event>;

/// A stable 64-bit hash of a history: xxh3 over a fixed binary encoding of its events,
/// field by field (not over JSON: serialising every event was a twentieth of a run's CPU).
/// The same (scenario, seed) gives the same hash in any process, thread or machine, and a
/// history read back from its JSON Lines file hashes as the run that wrote it.
pub fn trace_hash(history: &[Event]) -> u64 {
    // The hasher takes the encoding a few kilobytes at a time: xxh3 streams the same bytes to
    // the same hash however they are cut, and one update per event cost more than the hashing.
    const CHUNK_BYTES: usize = 8 * 1024;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = Vec::with_capacity(CHUNK_BYTES + 512);
    for event in history {
        encode_for_hash(event, &mut buf);
        if buf.len() >= CHUNK_BYTES {
            hasher.update(&buf);
            buf.clear();
        }
    }
    hasher.update(&buf);
    hasher.digest()
}

/// Appends the event's every field to `buf`: integers little-endian, strings length-first,
/// each optional field a presence byte first, so no two different events encode alike.
pub fn encode_for_hash(event: &Event, buf: &mut Vec<u8>) {
    // Destructured in full: a new field fails to compile here until the hash includes it.
    let Event {
        index,
        time_ns,
        node,
        kind,
        op,
        grant,
        token,
        value,
        target,
        detail,
        clock_error_ns,
        name,
    } = event;
    let text = |buf: &mut Vec<u8>, s: &str| {
        buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
        buf.extend_from_slice(s.as_bytes());
    };
    buf.extend_from_slice(&index.to_le_bytes());
    buf.extend_from_slice(&time_ns.to_le_bytes());
    text(buf, node);
    buf.push(*kind as u8);
    buf.push(op.clone() as u8);
    for s in [grant, target, detail, name] {
        buf.push(u8::from(s.is_some()));
        if let Some(s) = s {
            text(buf, s);
        }
    }
    for n in [token, clock_error_ns] {
        buf.push(u8::from(n.is_some()));
        buf.extend_from_slice(&n.unwrap_or(0).to_le_bytes());
    }
    buf.push(u8::from(value.is_some()));
    buf.extend_from_slice(&value.unwrap_or(0).to_le_bytes());
}

/// A stable 64-bit hash of bytes (xxh3), for fingerprints that must match across processes
/// and machines.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Formats a trace hash the way results print it (16 hex digits).
pub fn format_hash(hash: u64) -> String {
    format!("{hash:016x}")
}

/// Writes a history as JSON Lines.
pub fn write_jsonl(history: &[Event], mut out: impl Write) -> std::io::Result<()> {
    for event in history {
        serde_json::to_writer(&mut out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// A malformed history file: which line and why.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// A line is not a valid event.
    #[error("{path}:{line}: not a valid event: {message}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Reads a JSON Lines history. Blank lines are skipped; indexes must go up, and times must
/// not go down: across the whole history for events in true time, within each node for
/// events stamped by their node's own clock (`clock_error_ns`). A line longer than
/// [`LINE_BYTES_MAX`] is an error naming it (a file without newlines is never held whole).
pub fn read_jsonl(path: &str, mut input: impl BufRead) -> Result<History, ReadError> {
    let mut history = History::new();
    // The time of each node's latest event, for events on local clocks.
    let mut node_time_ns: std::collections::BTreeMap<String, u64> = Default::default();
    let mut line = Vec::new();
    for n in 1.. {
        let read = read_line_bounded(&mut input, &mut line, LINE_BYTES_MAX).map_err(|source| {
            ReadError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
        let bad = |message: String| ReadError::Line {
            path: path.to_owned(),
            line: n,
            message,
        };
        match read {
            Line::Last(0) => break,
            Line::TooLong => return Err(bad(format!("longer than {LINE_BYTES_MAX} bytes"))),
            Line::Complete(_) | Line::Last(_) => {}
        }
        let text = std::str::from_utf8(&line).map_err(|e| bad(format!("not UTF-8: {e}")))?;
        if text.trim().is_empty() {
            continue;
        }
        let event = parse_event(text.trim_end_matches(['\n', '\r'])).map_err(bad)?;
        if let Some(prev) = history.last() {
            order_error(prev, &event, node_time_ns.get(&event.node).copied()).map_err(bad)?;
        }
        node_time_ns.insert(event.node.clone(), event.time_ns);
        history.push(event);
        if matches!(read, Line::Last(_)) {
            break;
        }
    }
    Ok(history)
}

/// One line as an event, or what is wrong with it, naming the field.
fn parse_event(line: &str) -> Result<Event, String> {
    // The fast path; a line that fails is parsed again, slowly, to name the field.
    if let Ok(event) = serde_json::from_str(line) {
        return Ok(event);
    }
    let mut de = serde_json::Deserializer::from_str(line);
    let event = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        describe_json_error(&field, &e.into_inner())
    })?;
    // The slow path stops after one value, so a line that failed only for what follows it
    // (a second event, junk, a NUL) would otherwise be read as its first event alone.
    de.end().map_err(|e| {
        format!(
            "more after the event (column {}): one event per line",
            e.column()
        )
    })?;
    Ok(event)
}

/// A JSON error as `field `f`: what (column N)`; serde's own "at line 1 column N" counts
/// within this one line, so only the column is kept.
fn describe_json_error(field: &str, error: &serde_json::Error) -> String {
    let text = error.to_string();
    let what = text
        .rfind(" at line ")
        .map_or(text.as_str(), |i| &text[..i]);
    let column = error.column();
    if field == "." || field.is_empty() {
        format!("{what} (column {column})")
    } else {
        format!("field `{field}`: {what} (column {column})")
    }
}

/// Why `event` cannot follow `prev` (whose node's latest time is `node_prev_ns`), if so.
fn order_error(prev: &Event, event: &Event, node_prev_ns: Option<u64>) -> Result<(), String> {
    if event.index <= prev.index {
        return Err(format!(
            "field `index`: {} does not follow the previous index {}",
            event.index, prev.index
        ));
    }
    let local = event.clock_error_ns.is_some() || prev.clock_error_ns.is_some();
    let earlier_than = if local {
        node_prev_ns
    } else {
        Some(prev.time_ns)
    };
    match earlier_than {
        Some(t) if event.time_ns < t => Err(format!(
            "field `time_ns`: {} is earlier than the previous {}event's {t}",
            event.time_ns,
            if local { "same node's " } else { "" },
        )),
        _ => Ok(()),
    }
}
