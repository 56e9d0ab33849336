//! The Redis model (`locksim_protocols::redis::store`) against a real `redis-server`.
//!
//! The test starts `redis-server` itself on a free loopback port (no persistence), talks
//! RESP to it over a `TcpStream`, and stops it with `SHUTDOWN NOSAVE` when it ends, also when
//! it fails. Without `redis-server` on `PATH` it says it skipped and passes; with `CI` set it
//! fails (`tests/support/tools.rs`; CI installs Debian's).
//!
//! - *Deterministic part*: every command and script the lock clients send, on fresh keys,
//!   with its reply (type and value) and each touched key's value and `PEXPIRETIME` after
//!   it, from the model and from the server; plus the edge cases (refused TTLs, strict
//!   integers, overflow, negative `PEXPIRE`), what a clock jump does to existing keys (as
//!   deadlines set in the past or future with `PXAT`), `WAIT` and the scripts' SHA-1s.
//! - *Random part*: seeded streams of the clients' commands with real waits between them
//!   (TTLs of 50–500 ms), compared the same way, the model given the server's time.
//!
//! Time: each command is sent in one pipeline `TIME`, the command, `GET` and `PEXPIRETIME`
//! of its keys, `TIME`; the server runs them back to back, so the command ran between the
//! two `TIME` readings. The model runs at the first reading, in ms. A command is not
//! compared (and the model takes the server's state of its keys) when the two readings fall
//! in different milliseconds (the server's ms is then unknown), or when a touched key's
//! deadline is within [`MARGIN_MS`] of them. There is no other tolerance.

// A conformance test runs against a real server in real time: the clock and sleeps the
// simulation code may not use are exactly what it needs.
#![allow(clippy::disallowed_methods)]

use crate::tools;

use locksim_protocols::redis::store::{
    self, standalone_wait, Cmd, Deferred, Effect, Entry, IntArg, Reply, Store, Value,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A command is not compared when a key it touches has a deadline this close to the server's
/// time readings around it (in ms): a guard against the rounding of the server's clock
/// reads to milliseconds, which the two readings bracket but do not pin.
const MARGIN_MS: i64 = 1;

/// Commands the random part compares at least (the bar).
const COMPARED_MIN: usize = 10_000;

/// Parallel random streams, each on its own connection and keys.
const STREAMS: u64 = 4;

/// Commands one random stream sends at most. A stream stops once it has compared its share of
/// [`COMPARED_MIN`]; under load more commands straddle a millisecond and are skipped, so the
/// stream sends more instead of the test failing on a count (about 3,000 on an idle machine).
const COMMANDS_PER_STREAM_MAX: usize = 8_000;

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Option<Vec<Resp>>),
}

impl Resp {
    /// The model's form of the reply (`+OK`, nil, integer, bulk string, error).
    fn to_model(&self) -> Reply {
        match self {
            Resp::Simple(s) if s == "OK" => Reply::Ok,
            Resp::Error(e) => Reply::Error(e.clone()),
            Resp::Int(i) => Reply::Int(*i),
            Resp::Bulk(None) | Resp::Array(None) => Reply::Nil,
            Resp::Bulk(Some(s)) => Reply::Bulk(s.clone()),
            other => Reply::Error(format!("(a reply the model has no form for: {other:?})")),
        }
    }

    fn int(&self) -> i64 {
        match self {
            Resp::Int(i) => *i,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }
}

/// One RESP connection.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(port: u16) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends the commands in one write, reading nothing.
    fn send(&mut self, commands: &[Vec<String>]) {
        let mut out = Vec::new();
        for argv in commands {
            write!(out, "*{}\r\n", argv.len()).unwrap();
            for arg in argv {
                write!(out, "${}\r\n{arg}\r\n", arg.len()).unwrap();
            }
        }
        self.writer.write_all(&out).expect("send to redis-server");
    }

    /// Sends the commands in one write and reads one reply each.
    fn pipeline(&mut self, commands: &[Vec<String>]) -> Vec<Resp> {
        self.send(commands);
        commands.iter().map(|_| self.read_reply()).collect()
    }

    fn call(&mut self, argv: &[&str]) -> Resp {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        self.pipeline(&[argv]).remove(0)
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("read from redis-server");
        assert!(line.ends_with("\r\n"), "truncated RESP line {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    fn read_reply(&mut self) -> Resp {
        let line = self.read_line();
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Resp::Simple(rest.into()),
            "-" => Resp::Error(rest.into()),
            ":" => Resp::Int(rest.parse().expect("RESP integer")),
            "$" => match rest.parse::<i64>().expect("RESP length") {
                -1 => Resp::Bulk(None),
                n => {
                    let mut buf = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut buf).expect("RESP bulk");
                    buf.truncate(n as usize);
                    Resp::Bulk(Some(String::from_utf8(buf).expect("UTF-8 bulk")))
                }
            },
            "*" => match rest.parse::<i64>().expect("RESP length") {
                -1 => Resp::Array(None),
                n => Resp::Array(Some((0..n).map(|_| self.read_reply()).collect())),
            },
            _ => panic!("not a RESP reply: {line:?}"),
        }
    }

    /// The server's clock (`TIME`), in ms.
    fn time_ms(reply: &Resp) -> i64 {
        let Resp::Array(Some(parts)) = reply else {
            panic!("TIME replied {reply:?}");
        };
        let field = |i: usize| match &parts[i] {
            Resp::Bulk(Some(s)) => s.parse::<i64>().expect("TIME field"),
            other => panic!("TIME field {other:?}"),
        };
        field(0) * 1_000 + field(1) / 1_000
    }
}

/// A `redis-server` of our own, shut down when dropped (also while a failing test unwinds).
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts one on a free loopback port; `None` if `redis-server` is not on `PATH` (the
    /// test then skips, or fails under `CI`: see `tools::require`).
    fn start() -> Option<Server> {
        let bin = tools::require(
            "redis_conformance",
            &["redis-server"],
            None,
            "install it, e.g. `apt-get install -y redis-server`, to compare the Redis model",
        )?;
        let out = Command::new(&bin).arg("--version").output();
        let text =
            String::from_utf8_lossy(&out.expect("redis-server --version").stdout).into_owned();
        // "Redis server v=7.0.15 sha=...": PEXPIRETIME and `--enable-debug-command` are 7.0's.
        let version = text.split_whitespace().find_map(|w| w.strip_prefix("v="));
        let major = version.and_then(|v| v.split('.').next()?.parse::<u32>().ok());
        assert!(
            major.is_some_and(|m| m >= 7),
            "redis-server {} is older than 7.0, the oldest this test supports (it needs \
             PEXPIRETIME and `--enable-debug-command`, both new in 7.0)",
            version.unwrap_or(text.trim())
        );
        for _ in 0..5 {
            if let Some(server) = Server::try_start() {
                return Some(server);
            }
        }
        panic!("redis-server did not start on a free loopback port (5 tries)");
    }

    fn try_start() -> Option<Server> {
        // The port is free now; another process could take it before the server binds it,
        // hence the retries in `start`.
        let port = tools::free_port();
        let args = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--enable-debug-command",
            "local",
            "--dir",
            &std::env::temp_dir().display().to_string(),
        ]
        .map(String::from);
        let child = tools::die_with_test(&mut Command::new("redis-server"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut server = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                return None; // exited: most likely the port was taken
            }
            if let Ok(mut conn) = Conn::open(port) {
                if conn.call(&["PING"]) == Resp::Simple("PONG".into()) {
                    return Some(server);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(server);
        None
    }

    fn connect(&self) -> Conn {
        Conn::open(self.port).expect("connect to our redis-server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(mut conn) = Conn::open(self.port) {
            // The server closes the connection instead of replying.
            let _ = conn
                .writer
                .write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n");
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key's state as `GET` and `PEXPIRETIME` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyState {
    get: Reply,
    pexpiretime: i64,
}

/// What one command did: its reply and the state of the keys it touched.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Observed {
    reply: Reply,
    keys: Vec<KeyState>,
}

/// Why a command was not compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skip {
    /// The server's two time readings fell in different milliseconds.
    Straddled,
    /// A touched key's deadline was within the margin of the server's time.
    NearDeadline,
}

/// The outcome of one command.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Same(Reply),
    Skipped(Skip),
    Mismatch(String),
}

/// The model and the server, side by side.
struct Harness {
    conn: Conn,
    model: Store,
    /// `None`: compare also at a deadline (only the deadline test does that).
    margin_ms: Option<i64>,
    /// The server's time (ms) before the last command.
    last_ms: i64,
}

impl Harness {
    fn new(conn: Conn) -> Harness {
        Harness {
            conn,
            model: Store::new(),
            margin_ms: Some(MARGIN_MS),
            last_ms: 0,
        }
    }

    /// The model's `GET` and `PEXPIRETIME` of `key` at `now_ms` (both expire it lazily).
    fn model_key(&mut self, key: &str, now_ms: i64) -> KeyState {
        let get = Cmd::Get { key: key.into() };
        let get = self.model.exec(&get, now_ms, &mut vec![]);
        let pexpiretime = self
            .model
            .entry(key)
            .map_or(-2, |e| e.expire_at_ms.unwrap_or(-1));
        KeyState { get, pexpiretime }
    }

    /// Deadlines of the keys in the model now.
    fn model_deadlines(&self, keys: &[&str]) -> Vec<i64> {
        keys.iter()
            .filter_map(|k| self.model.entry(k).and_then(|e| e.expire_at_ms))
            .collect()
    }

    /// Makes the model hold what the server showed for `key`.
    fn adopt(&mut self, key: &str, state: &KeyState) {
        let effect = match &state.get {
            Reply::Bulk(value) => Effect::Put {
                key: key.into(),
                entry: Entry {
                    value: Value::Str(value.clone()),
                    expire_at_ms: (state.pexpiretime >= 0).then_some(state.pexpiretime),
                },
            },
            // A list (python-redis-lock's signal): GET cannot read it; the model keeps its own,
            // whose deadline was compared.
            Reply::Error(e) if e == store::ERR_WRONGTYPE => return,
            _ => Effect::Del { key: key.into() },
        };
        self.model.apply(&effect);
    }

    /// Sends `cmd` bracketed by `TIME`s, with `GET` and `PEXPIRETIME` of its keys; returns
    /// the two time readings (ms) and what the server did.
    fn on_server(&mut self, cmd: &Cmd) -> (i64, i64, Observed) {
        let keys = cmd.keys();
        let mut pipeline = vec![
            vec!["TIME".to_owned()],
            cmd.argv().expect("a client command"),
        ];
        for key in &keys {
            pipeline.push(vec!["GET".into(), key.to_string()]);
            pipeline.push(vec!["PEXPIRETIME".into(), key.to_string()]);
        }
        pipeline.push(vec!["TIME".into()]);
        let replies = self.conn.pipeline(&pipeline);
        let real = Observed {
            reply: replies[1].to_model(),
            keys: (0..keys.len())
                .map(|i| KeyState {
                    get: replies[2 + 2 * i].to_model(),
                    pexpiretime: replies[3 + 2 * i].int(),
                })
                .collect(),
        };
        let last = replies.last().expect("the closing TIME");
        (Conn::time_ms(&replies[0]), Conn::time_ms(last), real)
    }

    /// Why a command that ran between the readings `before_ms` and `after_ms` cannot be
    /// compared, if it cannot.
    fn skip(
        &self,
        keys: &[&str],
        (before_ms, after_ms): (i64, i64),
        real: &Observed,
    ) -> Option<Skip> {
        let mut deadlines = self.model_deadlines(keys);
        deadlines.extend(real.keys.iter().map(|k| k.pexpiretime).filter(|&d| d >= 0));
        let near = |d: &i64| {
            self.margin_ms
                .is_some_and(|m| (before_ms - m..=after_ms + m).contains(d))
        };
        if before_ms != after_ms {
            Some(Skip::Straddled)
        } else if deadlines.iter().any(near) {
            Some(Skip::NearDeadline)
        } else {
            None
        }
    }

    /// Runs `cmd` on the server and in the model and compares them; the model then holds
    /// the server's state of the keys either way.
    fn run(&mut self, cmd: &Cmd) -> Outcome {
        let keys = cmd.keys();
        let (before_ms, after_ms, real) = self.on_server(cmd);
        self.last_ms = before_ms;
        let skip = self.skip(&keys, (before_ms, after_ms), &real);
        let model = skip.is_none().then(|| {
            let reply = self.model.exec(cmd, before_ms, &mut vec![]);
            let keys = keys.iter().map(|k| self.model_key(k, before_ms)).collect();
            Observed { reply, keys }
        });
        for (key, state) in keys.iter().zip(&real.keys) {
            self.adopt(key, state);
        }
        match (skip, model) {
            (Some(skip), _) => Outcome::Skipped(skip),
            (None, Some(model)) if model == real => Outcome::Same(real.reply),
            (None, model) => Outcome::Mismatch(format!(
                "{cmd:?} at {before_ms} ms:\n  real  {real:?}\n  model {model:?}"
            )),
        }
    }

    /// `SET key value PXAT when` on the server, and the same entry in the model: a deadline
    /// in the past or the future is what a wall-clock jump does to an existing key.
    fn put_pxat(&mut self, key: &str, value: &str, when_ms: i64) {
        let reply = self
            .conn
            .call(&["SET", key, value, "PXAT", &when_ms.to_string()]);
        assert_eq!(reply, Resp::Simple("OK".into()), "SET PXAT {when_ms}");
        self.model.apply(&Effect::Put {
            key: key.into(),
            entry: Entry {
                value: Value::Str(value.into()),
                expire_at_ms: Some(when_ms),
            },
        });
    }

    fn server_ms(&mut self) -> i64 {
        let reply = self.conn.call(&["TIME"]);
        Conn::time_ms(&reply)
    }
}

/// Counts of the random part.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    compared: usize,
    straddled: usize,
    near_deadline: usize,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.compared += other.compared;
        self.straddled += other.straddled;
        self.near_deadline += other.near_deadline;
    }
}

/// Writes past the test harness' capture, so the figures show in every CI log.
fn report(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn set(key: &str, value: &str, nx: bool, px_ms: Option<i128>) -> Cmd {
    Cmd::Set {
        key: key.into(),
        value: value.into(),
        nx,
        px_ms: px_ms.map(IntArg),
    }
}

fn acquire(key: &str, value: &str, px_ms: Option<i128>) -> Cmd {
    Cmd::SetNxIncr {
        key: key.into(),
        value: value.into(),
        px_ms: px_ms.map(IntArg),
        counter: format!("{key}:token"),
    }
}

fn release(key: &str, value: &str) -> Cmd {
    Cmd::DelIfEq {
        key: key.into(),
        value: value.into(),
    }
}

fn extend(key: &str, value: &str, px_ms: i128) -> Cmd {
    Cmd::PexpireIfEq {
        key: key.into(),
        value: value.into(),
        px_ms: IntArg(px_ms),
    }
}

/// pottery's `locked()` script on `key`.
fn pttl_if_eq(key: &str, value: &str) -> Cmd {
    Cmd::PttlIfEq {
        key: key.into(),
        value: value.into(),
    }
}

/// python-redis-lock's release on `key`, signalling on `key:signal`.
fn unlock_signal(key: &str, value: &str) -> Cmd {
    Cmd::DelIfEqSignal {
        key: key.into(),
        value: value.into(),
        signal: format!("{key}:signal"),
        signal_expire_ms: 1_000,
    }
}

fn get(key: &str) -> Cmd {
    Cmd::Get { key: key.into() }
}

fn incr(key: &str) -> Cmd {
    Cmd::Incr { key: key.into() }
}

fn del(key: &str) -> Cmd {
    Cmd::Del { key: key.into() }
}

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

fn script_err(script: &store::Script, text: &str) -> Reply {
    err(&format!(
        "{text} script: {}, on @user_script:1.",
        script.sha1
    ))
}

/// One step of a deterministic case.
enum Step {
    /// A command, and the reply both must give.
    Run(Cmd, Reply),
    /// The key holds this value, with a deadline this far from the server's now (what a
    /// wall-clock jump of the opposite sign does to it).
    Pxat(&'static str, i64),
}

use Step::{Pxat, Run};

/// A deterministic case: a name and its steps on the keys `{p}k`, `{p}k:token`.
type Case = (&'static str, fn(&str) -> Vec<Step>);

const NOT_INT: &str = store::ERR_NOT_INTEGER;
const TTL: i128 = 100_000;
const BIG_TTL: i128 = i64::MAX as i128;
const TTL_2_63: i128 = 1 << 63;

fn cases() -> Vec<Case> {
    [
        commands(),
        scripts(),
        integer_edges(),
        ttl_edges(),
        failing_scripts(),
        clock_jumps(),
    ]
    .concat()
}

/// The plain commands the clients send.
fn commands() -> Vec<Case> {
    vec![
        ("SET NX PX, then on an existing key", |k| {
            vec![
                Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                Run(set(k, "b", true, Some(TTL)), Reply::Nil),
                Run(get(k), Reply::Bulk("a".into())),
            ]
        }),
        ("a plain SET clears the TTL", |k| {
            vec![
                Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                Run(set(k, "b", false, None), Reply::Ok),
            ]
        }),
        ("INCR counts from 0 and keeps the TTL", |k| {
            vec![
                Run(incr(k), Reply::Int(1)),
                Run(set(k, "41", false, Some(TTL)), Reply::Ok),
                Run(incr(k), Reply::Int(42)),
            ]
        }),
        ("DEL", |k| {
            vec![
                Run(del(k), Reply::Int(0)),
                Run(set(k, "a", false, None), Reply::Ok),
                Run(del(k), Reply::Int(1)),
            ]
        }),
    ]
}

/// The three scripts, each on its own.
fn scripts() -> Vec<Case> {
    vec![
        ("the acquire script returns increasing tokens", |k| {
            vec![
                Run(acquire(k, "a", Some(TTL)), Reply::Int(1)),
                Run(acquire(k, "b", Some(TTL)), Reply::Nil),
                Run(release(k, "a"), Reply::Int(1)),
                Run(acquire(k, "b", Some(TTL)), Reply::Int(2)),
                Run(release(k, "b"), Reply::Int(1)),
                Run(acquire(k, "c", None), Reply::Int(3)),
            ]
        }),
        ("the release script deletes only its own value", |k| {
            vec![
                Run(release(k, "a"), Reply::Int(0)),
                Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                Run(release(k, "b"), Reply::Int(0)),
                Run(release(k, "a"), Reply::Int(1)),
                Run(release(k, "a"), Reply::Int(0)),
            ]
        }),
        (
            "python-redis-lock's unlock script signals only its own release",
            |k| {
                vec![
                    Run(unlock_signal(k, "a"), Reply::Int(1)),
                    Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                    Run(unlock_signal(k, "b"), Reply::Int(1)),
                    Run(unlock_signal(k, "a"), Reply::Int(0)),
                    Run(get(&format!("{k}:signal")), err(store::ERR_WRONGTYPE)),
                    Run(set(k, "c", true, Some(TTL)), Reply::Ok),
                    Run(unlock_signal(k, "c"), Reply::Int(0)),
                ]
            },
        ),
        (
            "pottery's locked() script answers 0 unless the key is ours with time left",
            |k| {
                // Its positive answers (the PTTL) are compared in the random part.
                vec![
                    Run(pttl_if_eq(k, "a"), Reply::Int(0)),
                    Run(set(k, "a", false, None), Reply::Ok),
                    Run(pttl_if_eq(k, "a"), Reply::Int(0)),
                    Run(set(k, "b", false, Some(TTL)), Reply::Ok),
                    Run(pttl_if_eq(k, "a"), Reply::Int(0)),
                    Pxat("a", -5),
                    Run(pttl_if_eq(k, "a"), Reply::Int(0)),
                ]
            },
        ),
        ("the extend script", |k| {
            vec![
                Run(extend(k, "a", TTL), Reply::Int(0)),
                Run(set(k, "a", true, Some(1_000)), Reply::Ok),
                Run(extend(k, "b", TTL), Reply::Int(0)),
                Run(extend(k, "a", TTL), Reply::Int(1)),
            ]
        }),
    ]
}

/// Strict integers and overflow.
fn integer_edges() -> Vec<Case> {
    vec![
        ("INCR parses strictly", |k| {
            let mut steps = vec![];
            for bad in ["x", "+5", "05", "-0", "00", " 5", "5 ", "", "1e3"] {
                steps.push(Run(set(k, bad, false, None), Reply::Ok));
                steps.push(Run(incr(k), err(NOT_INT)));
            }
            steps.push(Run(set(k, "-9223372036854775808", false, None), Reply::Ok));
            steps.push(Run(incr(k), Reply::Int(i64::MIN + 1)));
            steps
        }),
        ("INCR at i64::MAX overflows", |k| {
            vec![
                Run(set(k, "9223372036854775806", false, Some(TTL)), Reply::Ok),
                Run(incr(k), Reply::Int(i64::MAX)),
                Run(incr(k), err(store::ERR_OVERFLOW)),
                Run(set(k, "9223372036854775808", false, None), Reply::Ok),
                Run(incr(k), err(NOT_INT)),
            ]
        }),
    ]
}

/// Refused TTLs, in `SET` and in the acquire script (which then writes nothing).
fn ttl_edges() -> Vec<Case> {
    vec![
        (
            "SET refuses PX 0, negative, overflowing and out-of-range TTLs",
            |k| {
                let invalid = store::err_expire_time("set");
                vec![
                    Run(set(k, "a", true, Some(0)), err(&invalid)),
                    Run(set(k, "a", false, Some(-5)), err(&invalid)),
                    Run(set(k, "a", true, Some(BIG_TTL)), err(&invalid)),
                    Run(set(k, "a", true, Some(TTL_2_63)), err(NOT_INT)),
                    Run(set(k, "a", true, Some(-TTL_2_63 - 1)), err(NOT_INT)),
                    Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                    // The TTL is checked before NX looks at the key.
                    Run(set(k, "b", true, Some(0)), err(&invalid)),
                ]
            },
        ),
        (
            "the acquire script with a refused TTL writes nothing",
            |k| {
                let invalid = store::err_expire_time("set");
                let script = &store::ACQUIRE_WITH_TOKEN;
                vec![
                    Run(acquire(k, "a", Some(0)), script_err(script, &invalid)),
                    Run(acquire(k, "a", Some(-5)), script_err(script, &invalid)),
                    Run(acquire(k, "a", Some(BIG_TTL)), script_err(script, &invalid)),
                    Run(acquire(k, "a", Some(TTL_2_63)), script_err(script, NOT_INT)),
                ]
            },
        ),
    ]
}

/// Scripts failing half-way keep what they wrote; `PEXPIRE` at or below 0 deletes.
fn failing_scripts() -> Vec<Case> {
    vec![
        (
            "the acquire script keeps the lock key when INCR fails",
            |k| {
                let script = &store::ACQUIRE_WITH_TOKEN;
                let not_integer = script_err(script, NOT_INT);
                let overflow = script_err(script, store::ERR_OVERFLOW);
                // Each `{k}:token` is the counter of `k`; `{k}2` counts in `{k}2:token`.
                vec![
                    Run(set(&format!("{k}:token"), "x", false, None), Reply::Ok),
                    Run(acquire(k, "a", Some(TTL)), not_integer),
                    Run(acquire(k, "b", Some(TTL)), Reply::Nil),
                    Run(release(k, "a"), Reply::Int(1)),
                    Run(
                        set(&format!("{k}:token"), &i64::MAX.to_string(), false, None),
                        Reply::Ok,
                    ),
                    Run(acquire(k, "c", Some(TTL)), overflow),
                ]
            },
        ),
        (
            "the extend script: PEXPIRE at or below 0 deletes, overflow is refused",
            |k| {
                let script = &store::EXTEND;
                let invalid = script_err(script, &store::err_expire_time("pexpire"));
                vec![
                    Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                    Run(extend(k, "a", BIG_TTL), invalid),
                    Run(extend(k, "a", TTL_2_63), script_err(script, NOT_INT)),
                    Run(extend(k, "b", TTL_2_63), Reply::Int(0)),
                    Run(extend(k, "a", -5), Reply::Int(1)),
                    Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                    Run(extend(k, "a", 0), Reply::Int(1)),
                    Run(set(k, "a", true, Some(TTL)), Reply::Ok),
                    Run(extend(k, "a", i64::MIN.into()), Reply::Int(1)),
                    Run(get(k), Reply::Nil),
                ]
            },
        ),
    ]
}

/// What a wall-clock jump does to an existing lock, as a deadline in the past or future.
fn clock_jumps() -> Vec<Case> {
    vec![
        ("a forward clock jump expires a held lock early", |k| {
            vec![
                Pxat("a", -5_000),
                Run(get(k), Reply::Nil),
                Pxat("a", -5_000),
                Run(extend(k, "a", TTL), Reply::Int(0)),
                Pxat("a", -5_000),
                Run(release(k, "a"), Reply::Int(0)),
                Pxat("a", -5_000),
                Run(acquire(k, "b", Some(TTL)), Reply::Int(1)),
            ]
        }),
        ("a backward clock jump keeps a lock alive longer", |k| {
            vec![
                Pxat("a", 10_000_000),
                Run(set(k, "b", true, Some(TTL)), Reply::Nil),
                Run(acquire(k, "b", Some(TTL)), Reply::Nil),
                Run(extend(k, "a", TTL), Reply::Int(1)),
                Run(release(k, "a"), Reply::Int(1)),
            ]
        }),
    ]
}

/// Runs one case on keys with a fresh prefix; `None` if a step could not be compared (the
/// caller tries again on fresh keys).
fn run_case(h: &mut Harness, prefix: &str, steps: fn(&str) -> Vec<Step>) -> Option<Vec<String>> {
    let key = format!("{prefix}k");
    let mut failures = vec![];
    for (i, step) in steps(&key).into_iter().enumerate() {
        match step {
            Pxat(value, offset_ms) => {
                let when = h.server_ms() + offset_ms;
                h.put_pxat(&key, value, when);
            }
            Run(cmd, expected) => match h.run(&cmd) {
                Outcome::Skipped(_) => return None,
                Outcome::Mismatch(m) => failures.push(format!("step {i}: {m}")),
                Outcome::Same(reply) if reply != expected => failures.push(format!(
                    "step {i}: {cmd:?}: both replied {reply:?}, expected {expected:?}"
                )),
                Outcome::Same(_) => {}
            },
        }
    }
    Some(failures)
}

fn deterministic_part(server: &Server) -> Vec<String> {
    let mut h = Harness::new(server.connect());
    let mut failures = vec![];
    for (n, (name, steps)) in cases().into_iter().enumerate() {
        let outcome =
            (0..20).find_map(|attempt| run_case(&mut h, &format!("d{n}.{attempt}:"), steps));
        match outcome {
            Some(f) => failures.extend(f.into_iter().map(|f| format!("{name}: {f}"))),
            None => failures.push(format!("{name}: no try (of 20) ran every step in one ms")),
        }
    }
    failures.extend(alive_at_its_deadline_gone_one_ms_later(&mut h));
    failures.extend(scripts_are_the_ones_redis_names(&mut h.conn));
    failures.extend(wait_on_a_standalone_server(server));
    failures.extend(blpop_on_the_release_signal(server));
    failures
}

/// `BLPOP` as the model's server serves python-redis-lock's waiters: the signal's element at
/// once if there is one (the list then gone), nil after the timeout if nothing comes, and a
/// client blocked on it woken by the unlock script run on another connection.
fn blpop_on_the_release_signal(server: &Server) -> Vec<String> {
    let mut failures = vec![];
    let mut conn = server.connect();
    let (key, signal) = ("blpop:k", "blpop:k:signal");
    let release = unlock_signal(key, "a").argv().expect("a client command");
    let blpop = |timeout_s: u64| {
        (Cmd::Blpop {
            key: signal.into(),
            timeout_s,
        })
        .argv()
        .expect("a client command")
    };
    let popped = Resp::Array(Some(vec![
        Resp::Bulk(Some(signal.into())),
        Resp::Bulk(Some("1".into())),
    ]));
    let timed = |conn: &mut Conn, argv: Vec<String>| {
        let start = Instant::now();
        let reply = conn.pipeline(&[argv]).remove(0);
        (reply, start.elapsed())
    };
    conn.call(&["SET", key, "a"]);
    let (reply, _) = timed(&mut conn, release.clone());
    if reply != Resp::Int(0) {
        failures.push(format!("the unlock script replied {reply:?}, not 0"));
    }
    let (reply, waited) = timed(&mut conn, blpop(5));
    if reply != popped || waited > Duration::from_millis(300) {
        failures.push(format!("BLPOP after a release: {reply:?} after {waited:?}"));
    }
    let (reply, waited) = timed(&mut conn, blpop(1));
    let one_s = Duration::from_secs(1);
    if reply != Resp::Array(None) || waited < one_s || waited > 3 * one_s {
        failures.push(format!(
            "BLPOP 1 on an emptied signal: {reply:?} after {waited:?}"
        ));
    }
    conn.call(&["SET", key, "a"]);
    failures.extend(blpop_woken_by_a_release(
        server,
        &mut conn,
        release,
        blpop(10),
        &popped,
    ));
    failures
}

/// A client blocked in `BLPOP` (`blpop`) before `release` runs on `conn` is woken by it with
/// `popped`.
fn blpop_woken_by_a_release(
    server: &Server,
    conn: &mut Conn,
    release: Vec<String>,
    blpop: Vec<String>,
    popped: &Resp,
) -> Option<String> {
    let mut waiter = server.connect();
    let start = Instant::now();
    waiter.send(&[blpop]);
    // The release must come after the server blocked the waiter: wait for it to say so.
    let blocked = |conn: &mut Conn| match conn.call(&["INFO", "clients"]) {
        Resp::Bulk(Some(info)) => info.contains("blocked_clients:1"),
        _ => false,
    };
    while !blocked(conn) {
        if start.elapsed() > Duration::from_secs(5) {
            return Some("the waiter's BLPOP was not blocked within 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    conn.pipeline(&[release]);
    let reply = waiter.read_reply();
    let waited = start.elapsed();
    (reply != *popped || waited > Duration::from_secs(5))
        .then(|| format!("a blocked BLPOP woken by a release: {reply:?} after {waited:?}"))
}

/// `GET`s a key every few µs around its deadline `d`, comparing without a margin: at `d`
/// it is alive, at `d + 1` gone (Redis: expired when `now > when`).
fn alive_at_its_deadline_gone_one_ms_later(h: &mut Harness) -> Vec<String> {
    h.margin_ms = None;
    let failures = (0..20).find_map(|attempt| {
        let key = format!("edge{attempt}:k");
        let d = h.server_ms() + 3;
        h.put_pxat(&key, "a", d);
        let mut alive_at_d = false;
        loop {
            let outcome = h.run(&get(&key));
            match (outcome, h.last_ms - d) {
                (Outcome::Mismatch(m), _) => return Some(vec![m]),
                (_, at) if at < 0 => {}
                (Outcome::Skipped(_), _) => return None,
                (Outcome::Same(Reply::Bulk(_)), 0) => alive_at_d = true,
                // Not seen alive at `d` (no sample fell in that ms): try again.
                (Outcome::Same(Reply::Nil), 1) => return alive_at_d.then(Vec::new),
                (Outcome::Same(reply), at @ 0..=1) => {
                    return Some(vec![format!("GET {at} ms after its deadline: {reply:?}")])
                }
                (Outcome::Same(_), _) => return None,
            }
        }
    });
    h.margin_ms = Some(MARGIN_MS);
    failures.unwrap_or_else(|| vec!["never saw both sides of a deadline (20 tries)".into()])
}

fn scripts_are_the_ones_redis_names(conn: &mut Conn) -> Vec<String> {
    let scripts = [
        store::ACQUIRE_WITH_TOKEN,
        store::ACQUIRE_WITH_TOKEN_NO_TTL,
        store::RELEASE,
        store::EXTEND,
        store::SET_IF_ABSENT_OR_EQ,
        store::UNLOCK_AND_SIGNAL,
        store::PTTL_IF_EQ,
    ];
    scripts
        .iter()
        .filter_map(|s| {
            let sha = conn.call(&["SCRIPT", "LOAD", s.source]);
            (sha != Resp::Bulk(Some(s.sha1.into()))).then(|| {
                format!(
                    "SCRIPT LOAD {:?} gave {sha:?}, the model says {}",
                    s.source, s.sha1
                )
            })
        })
        .collect()
}

/// `WAIT` on the standalone server: the reply and how long it blocks, against
/// [`standalone_wait`].
fn wait_on_a_standalone_server(server: &Server) -> Vec<String> {
    let mut failures = vec![];
    let mut conn = server.connect();
    let out_of_range = 1 << 63;
    for (replicas, timeout_ms) in [
        (0u32, 0u64),
        (0, 100),
        (1, 600),
        (2, 400),
        (0, out_of_range),
        (1, out_of_range),
    ] {
        let start = Instant::now();
        let reply = conn.call(&["WAIT", &replicas.to_string(), &timeout_ms.to_string()]);
        let waited = start.elapsed();
        let ok = match standalone_wait(replicas, timeout_ms) {
            // An immediate reply and a blocked one are told apart with margins for a loaded
            // machine: the shortest block (400 ms) is well above "now" (under 300 ms).
            Deferred::Now(r) => reply.to_model() == r && waited < Duration::from_millis(300),
            Deferred::After { delay, reply: r } => {
                reply.to_model() == r && waited >= delay && waited < delay + Duration::from_secs(2)
            }
            Deferred::Never => false,
        };
        if !ok {
            failures.push(format!(
                "WAIT {replicas} {timeout_ms}: {reply:?} after {waited:?}"
            ));
        }
    }
    // WAIT 1 0 blocks for good: no reply within 300 ms (the connection is then dropped).
    assert_eq!(standalone_wait(1, 0), Deferred::Never);
    let mut blocked = server.connect();
    blocked
        .writer
        .write_all(b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n")
        .unwrap();
    blocked
        .writer
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    match blocked.reader.get_mut().read(&mut byte) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => failures.push(format!("WAIT 1 0 did not block: {other:?}")),
    }
    failures
}

/// One random command of the clients' mix, on stream `s`'s keys.
fn random_command(rng: &mut StdRng, s: u64) -> Cmd {
    let key = format!("r{s}:lock{}", rng.gen_range(0..3));
    let value = format!("c{}", rng.gen_range(0..3));
    let ttl: i128 = rng.gen_range(50..=500);
    match rng.gen_range(0..100) {
        0..=24 => set(&key, &value, true, Some(ttl)),
        25..=39 => acquire(&key, &value, Some(ttl)),
        40..=54 => release(&key, &value),
        55..=69 => extend(&key, &value, ttl),
        70..=74 => get(&key),
        75..=79 => pttl_if_eq(&key, &value),
        80..=86 => incr(&format!("{key}:token")),
        87..=89 => incr(&key),
        90..=92 => del(&key),
        93..=94 => set(&key, &value, false, None),
        95..=96 => set(&key, &value, true, Some(rng.gen_range(-5..=0))),
        97 => acquire(&key, &value, Some(rng.gen_range(-5..=0))),
        _ => extend(&key, &value, rng.gen_range(-5..=0)),
    }
}

/// One seeded stream: commands with real waits of 0–10 ms between them.
fn random_stream(server: &Server, seed: u64, s: u64) -> (Counts, Vec<String>) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000).wrapping_add(s));
    let mut h = Harness::new(server.connect());
    let (mut counts, mut mismatches) = (Counts::default(), vec![]);
    let share = COMPARED_MIN.div_ceil(STREAMS as usize);
    for _ in 0..COMMANDS_PER_STREAM_MAX {
        if counts.compared >= share {
            break;
        }
        let cmd = random_command(&mut rng, s);
        match h.run(&cmd) {
            Outcome::Same(_) => counts.compared += 1,
            Outcome::Skipped(Skip::Straddled) => counts.straddled += 1,
            Outcome::Skipped(Skip::NearDeadline) => counts.near_deadline += 1,
            Outcome::Mismatch(m) => {
                counts.compared += 1;
                mismatches.push(m);
            }
        }
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..=10_000)));
    }
    (counts, mismatches)
}

/// Active expiry, which no reply shows: how late after its deadline each key went.
#[derive(Clone, Debug)]
struct Lateness {
    late_ms: Vec<i64>,
}

impl Lateness {
    fn summary(&self) -> String {
        let over = self.late_ms.iter().filter(|&&l| l > 101).count();
        format!(
            "{} keys, {:.1} % more than 101 ms late, at most {} ms",
            self.late_ms.len(),
            100.0 * over as f64 / self.late_ms.len().max(1) as f64,
            self.late_ms.iter().max().unwrap_or(&0)
        )
    }
}

/// Keys of the active-expiry comparison (in database 1, apart from the other parts).
const EXPIRY_KEYS: usize = 1_000;

/// The wall clock here, which the server on the same host reads too, in ms.
fn local_wall_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.expect("after 1970").as_millis()).expect("in range")
}

/// Sets [`EXPIRY_KEYS`] keys with TTLs of 100–1,100 ms that nothing touches again and
/// records when the server's `expired` notifications arrive; then runs the model's cycle
/// every 100 ms on the same deadlines. Neither may delete a key before its deadline, and
/// both must delete every one.
fn active_expiry(server: &Server, seed: u64) -> (Lateness, Lateness) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut conn, mut events) = (server.connect(), server.connect());
    let notify = conn.call(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    assert_eq!(notify.to_model(), Reply::Ok);
    events.call(&["SUBSCRIBE", "__keyevent@1__:expired"]);
    assert_eq!(conn.call(&["SELECT", "1"]).to_model(), Reply::Ok);
    let keys: Vec<String> = (0..EXPIRY_KEYS).map(|i| format!("expiry:{i:04}")).collect();
    let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let sets: Vec<_> = keys
        .iter()
        .map(|k| argv(&["SET", k, "v", "PX", &rng.gen_range(100..=1_100).to_string()]))
        .collect();
    let start_ms = Conn::time_ms(&conn.call(&["TIME"]));
    conn.pipeline(&sets);
    let reads: Vec<_> = keys.iter().map(|k| argv(&["PEXPIRETIME", k])).collect();
    let deadlines: Vec<i64> = conn.pipeline(&reads).iter().map(Resp::int).collect();
    let index = |key: &str| keys.iter().position(|k| k == key).expect("one of ours");
    let mut real = Lateness { late_ms: vec![] };
    while real.late_ms.len() < EXPIRY_KEYS {
        let message = events.read_reply();
        let Resp::Array(Some(parts)) = &message else {
            panic!("not a pub/sub message: {message:?}");
        };
        let Some(Resp::Bulk(Some(key))) = parts.get(2) else {
            panic!("not an expired-key event: {message:?}");
        };
        real.late_ms.push(local_wall_ms() - deadlines[index(key)]);
    }
    let mut store = Store::new();
    for (key, when) in keys.iter().zip(&deadlines) {
        let entry = Entry {
            value: Value::Str("v".into()),
            expire_at_ms: Some(*when),
        };
        store.apply(&Effect::Put {
            key: key.clone(),
            entry,
        });
    }
    let mut active = store::ActiveExpiry::default();
    let mut model = Lateness { late_ms: vec![] };
    for tick_ms in (1..=30).map(|k| start_ms + 100 * k) {
        for key in active.cycle(&mut store, tick_ms) {
            model.late_ms.push(tick_ms - deadlines[index(&key)]);
        }
    }
    assert_eq!(
        model.late_ms.len(),
        EXPIRY_KEYS,
        "the model deletes every key"
    );
    for (who, l) in [("redis-server", &real), ("the model", &model)] {
        assert!(
            l.late_ms.iter().all(|&ms| ms >= 0),
            "{who} deleted a key early"
        );
    }
    (real, model)
}

/// `redis_version` from the server's `INFO server`.
fn server_version(server: &Server) -> String {
    match server.connect().call(&["INFO", "server"]) {
        Resp::Bulk(Some(info)) => info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .to_owned(),
        other => panic!("INFO server replied {other:?}"),
    }
}

#[test]
fn the_redis_model_matches_a_real_redis_server() {
    let Some(server) = Server::start() else {
        return;
    };
    let started = Instant::now();
    let version = server_version(&server);
    let failures = deterministic_part(&server);
    assert!(
        failures.is_empty(),
        "deterministic part:\n{}",
        failures.join("\n")
    );
    let seed: u64 = std::env::var("REDIS_CONFORMANCE_SEED")
        .map(|s| s.parse().expect("REDIS_CONFORMANCE_SEED is a number"))
        .unwrap_or(10);
    let (results, (real, model)) = std::thread::scope(|scope| {
        let server = &server;
        let streams: Vec<_> = (0..STREAMS)
            .map(|s| scope.spawn(move || random_stream(server, seed, s)))
            .collect();
        let expiry = scope.spawn(move || active_expiry(server, seed));
        let results: Vec<_> = streams
            .into_iter()
            .map(|h| h.join().expect("a random stream panicked"))
            .collect();
        (
            results,
            expiry.join().expect("the active-expiry part panicked"),
        )
    });
    let (mut counts, mut mismatches) = (Counts::default(), vec![]);
    for (c, m) in results {
        counts.add(c);
        mismatches.extend(m);
    }
    report(&format!(
        "redis_conformance: redis-server {version}, seed {seed}, {:.1} s: random part: \
         commands compared {}, skipped {} ({} straddled a millisecond, {} within {MARGIN_MS} ms \
         of a deadline), mismatches: {}; deterministic part: {} cases, mismatches: 0",
        started.elapsed().as_secs_f64(),
        counts.compared,
        counts.straddled + counts.near_deadline,
        counts.straddled,
        counts.near_deadline,
        mismatches.len(),
        cases().len(),
    ));
    report(&format!(
        "redis_conformance: active expiry (not compared): redis-server {}; model {}",
        real.summary(),
        model.summary()
    ));
    assert!(
        mismatches.is_empty(),
        "{} mismatches (replay with REDIS_CONFORMANCE_SEED={seed}); the first ones:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
    assert!(
        counts.compared >= COMPARED_MIN,
        "only {} commands compared (at least {COMPARED_MIN} wanted)",
        counts.compared
    );
}
