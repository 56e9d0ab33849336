//! The ZooKeeper model (`locksim_protocols::raft::zookeeper::tree::Tree`, the state machine
//! below the replicated log) against a real ZooKeeper.
//!
//! The test starts one standalone ZooKeeper server of its own (Debian's jars, as live mode
//! runs them: `live/src/deploy/zookeeper.rs`) on a free loopback port with its data directory
//! in a temporary directory, speaks ZooKeeper's binary protocol (jute) to it over plain
//! `TcpStream`s, one connection per session, and kills it when it ends, also when it fails.
//! Without `java` and the jars it says it skipped and passes; with `CI` set it fails
//! (`tests/support/tools.rs`).
//!
//! The operations of the lock recipe: open a session, ping it, `create` an ephemeral
//! sequential `/lock/lock-` (the name and the parent's counter in it), `getChildren` (sorted,
//! as the recipe sorts them), `exists` with a watch and the watch firing on the node's
//! delete, `delete`, `closeSession`, and session expiry (the server's session tracker) with
//! the ephemerals it removes.
//!
//! How: as the etcd test (`etcd_conformance.rs`), the sequence runs against ZooKeeper first,
//! each operation stamped with its round trip, then replays into the model in a simulation
//! whose clock puts each operation at the middle of its round trip, with the model's ticks.
//! Compared for every operation: the reply (session found or expired, the created name and
//! sequence, the sorted children with their sequences, whether the watched node exists) and
//! which watches have fired by then. Watches are set from one observer session whose
//! connection receives their events; after each operation while a watch is pending, a ping
//! on that connection (answered after every event queued before it) collects them.
//! Session expiry is compared without tolerance by waiting out each session's expiry window
//! (its timeout less 150 ms after the last request on it was sent, to its timeout plus a
//! tick and 600 ms after it was answered), as in the etcd test.
//!
//! Deliberate simplifications, measured here and kept:
//! - Every request on a session touches it in ZooKeeper; in the model only a ping does (its
//!   client pings every third of the timeout regardless of other traffic, so the lock sees
//!   no difference). The replay touches the session before each request made on it, as
//!   ZooKeeper does.
//! - `delete` of a missing node answers `NoNode` in ZooKeeper; the model answers "deleted"
//!   either way (the recipe ignores the difference). Compared: the children after it.
//! - ZooKeeper numbers the children from 0 (the sequence is the parent's `cversion` before
//!   the create; deletes do not change it), the model from 1: names and sequences are
//!   compared with that offset (the sequence is a fencing token; only its order matters).
//! - ZooKeeper's zxid counts every transaction (session creations and closes too), the
//!   model's only changes to the lock directory: the zxid is not compared (the model uses it
//!   only to order a watch after the listing that named its node).
//! - The observer session (children, deletes, watches) is not a session of the model: its
//!   `Children`, `Delete` and `Watch` need none.

// A conformance test runs against a real server in real time: the clock and sleeps the
// simulation code may not use are exactly what it needs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::tools;

use crate::expiry;

use locksim_protocols::raft::host::{Env, Handling, Service};
use locksim_protocols::raft::zookeeper::tree::{Cmd, Req, Resp, Tree};
use locksim_sim::{simulate, NodeCtx, Role, SimSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's `tickTime`, in ms: session timeouts of 2–4 s are 10–20 ticks.
const TICK_MS: u64 = 200;
/// The model's tick, in ms (its session tracker looks every tick).
const MODEL_TICK_MS: u64 = 100;
/// The observer session's timeout (never expires: pinged when idle for a second).
const OBSERVER_TIMEOUT_MS: u64 = 4_000;
const WINDOW_BEFORE: Duration = Duration::from_millis(150);
const WINDOW_AFTER: Duration = Duration::from_millis(TICK_MS + 600);
const RANDOM_OPS: usize = 200;
const RANDOM_SEEDS: [u64; 2] = [1, 2];

const OP_CREATE: i32 = 1;
const OP_DELETE: i32 = 2;
const OP_EXISTS: i32 = 3;
const OP_GET_CHILDREN: i32 = 8;
const OP_PING: i32 = 11;
const OP_CLOSE: i32 = -11;
const XID_WATCH: i32 = -1;
const XID_PING: i32 = -2;
const EVENT_NODE_DELETED: i32 = 2;
const ERR_NO_NODE: i32 = -101;

/// The Debian jars a standalone server needs (`live/src/deploy/zookeeper.rs`'s list).
const JARS: [&str; 16] = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "commons-io.jar",
    "snappy-java.jar",
];

/// Jute encoding of a request body.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn int(mut self, v: i32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn long(mut self, v: i64) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn buf(self, b: &[u8]) -> Self {
        let mut s = self.int(b.len() as i32);
        s.0.extend(b);
        s
    }
    fn string(self, s: &str) -> Self {
        self.buf(s.as_bytes())
    }
    fn boolean(mut self, b: bool) -> Self {
        self.0.push(b as u8);
        self
    }
    fn framed(self) -> Vec<u8> {
        let mut out = (self.0.len() as i32).to_be_bytes().to_vec();
        out.extend(self.0);
        out
    }
}

/// Jute decoding of a reply body.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn int(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn long(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn string(&mut self) -> String {
        let n = self.int().max(0) as usize;
        String::from_utf8_lossy(self.take(n)).into_owned()
    }
}

/// One session on its own connection. Requests are synchronous; watch events read on the
/// way are kept.
struct Session {
    stream: TcpStream,
    id: u64,
    timeout_ms: u64,
    next_xid: i32,
    deleted: Vec<String>,
}

/// Why a request got no reply: the server closed the session's connection.
#[derive(Debug)]
struct Closed;

impl Session {
    /// Opens a session. A server that answers `srvr` may still close a client's first
    /// connection while it finishes starting (its database not yet loaded): the handshake is
    /// tried again, a few times, before the test fails.
    fn open(addr: SocketAddr, timeout_ms: u64) -> Session {
        for _ in 0..5 {
            if let Some((stream, reply)) = Self::handshake(addr, timeout_ms) {
                return Self::opened(stream, &reply);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("ZooKeeper at {addr} closed 5 handshakes in a row");
    }

    fn handshake(addr: SocketAddr, timeout_ms: u64) -> Option<(TcpStream, Vec<u8>)> {
        let mut stream = TcpStream::connect(addr).expect("connect to ZooKeeper");
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let hello = Out::default()
            .int(0)
            .long(0)
            .int(timeout_ms as i32)
            .long(0)
            .buf(&[0; 16])
            .boolean(false);
        stream.write_all(&hello.framed()).ok()?;
        let reply = read_frame(&mut stream).ok()?;
        Some((stream, reply))
    }

    fn opened(stream: TcpStream, reply: &[u8]) -> Session {
        let mut r = In(reply);
        let (_version, negotiated, id) = (r.int(), r.int(), r.long());
        assert!(negotiated > 0, "the server refused the session");
        Session {
            stream,
            id: id as u64,
            timeout_ms: negotiated as u64,
            next_xid: 1,
            deleted: vec![],
        }
    }

    /// One request: the reply's error code and body.
    fn request(&mut self, op: i32, body: Out) -> Result<(i32, Vec<u8>), Closed> {
        let xid = if op == OP_PING {
            XID_PING
        } else {
            self.next_xid
        };
        self.next_xid += 1;
        let mut frame = Out::default().int(xid).int(op);
        frame.0.extend(body.0);
        self.stream.write_all(&frame.framed()).map_err(|_| Closed)?;
        loop {
            let frame = read_frame(&mut self.stream).map_err(|_| Closed)?;
            let mut r = In(&frame);
            let (got, _zxid, err) = (r.int(), r.long(), r.int());
            if got == XID_WATCH {
                let (kind, _state, path) = (r.int(), r.int(), r.string());
                if kind == EVENT_NODE_DELETED {
                    self.deleted.push(path);
                }
                continue;
            }
            if got == xid {
                return Ok((err, r.0.to_vec()));
            }
        }
    }
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0; i32::from_be_bytes(len).max(0) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn create_body(path: &str, flags: i32) -> Out {
    // World-readable and -writable (`OPEN_ACL_UNSAFE`): perms ALL, world:anyone.
    Out::default()
        .string(path)
        .buf(&[])
        .int(1)
        .int(31)
        .string("world")
        .string("anyone")
        .int(flags)
}

/// A standalone ZooKeeper of our own, killed when dropped, its directory removed.
struct ZooKeeper {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl ZooKeeper {
    fn start(test: &str) -> Option<ZooKeeper> {
        let install =
            "install it, e.g. `apt-get install -y zookeeper`, to compare the ZooKeeper model";
        tools::require(test, &["java"], None, install)?;
        for jar in JARS {
            if !tools::require_file(test, &Path::new("/usr/share/java").join(jar), install) {
                return None;
            }
        }
        for _ in 0..3 {
            if let Some(zk) = ZooKeeper::try_start(test) {
                return Some(zk);
            }
        }
        panic!("ZooKeeper did not start on a free loopback port (3 tries)");
    }

    fn try_start(test: &str) -> Option<ZooKeeper> {
        let dir = tools::scratch_dir(test);
        std::fs::create_dir_all(dir.join("data")).expect("a data directory");
        let port = tools::free_port();
        let cfg = format!(
            "tickTime={TICK_MS}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=srvr\nadmin.enableServer=false\nmaxClientCnxns=0\n",
            dir.join("data").display()
        );
        std::fs::write(dir.join("zoo.cfg"), cfg).expect("zoo.cfg");
        let jars: Vec<String> = JARS
            .iter()
            .map(|j| format!("/usr/share/java/{j}"))
            .collect();
        let log = std::fs::File::create(dir.join("zookeeper.log")).expect("a log file");
        let child = tools::die_with_test(&mut Command::new("java"))
            // No /tmp/hsperfdata_USER/PID file, which a killed JVM leaves behind.
            .args(["-Xmx128m", "-XX:+UseSerialGC", "-XX:-UsePerfData"])
            .args(["-cp", &jars.join(":")])
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.join("zoo.cfg"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn java");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut zk = ZooKeeper { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = zk.child.try_wait() {
                // Exited: most likely the port was taken. Say why, from its log.
                let log = std::fs::read_to_string(zk.dir.join("zookeeper.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                eprintln!(
                    "{test}: ZooKeeper on port {port} exited ({status}); its log ends:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                return None;
            }
            if srvr(addr).is_some_and(|s| s.contains("Mode: standalone")) {
                return Some(zk);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

/// The `srvr` four-letter word's answer.
fn srvr(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"srvr").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One operation; `slot` is the test's number for a session (from 0, in opening order).
#[derive(Clone, Debug)]
enum Op {
    Open { timeout_ms: u64 },
    Ping { slot: usize },
    Create { slot: usize },
    Children,
    Delete { name: String },
    Watch { name: String },
    Close { slot: usize },
}

/// An answer, in the model's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    Opened,
    Pong,
    Expired,
    Created(String, u64),
    Children(Vec<(String, u64)>),
    Done,
    /// `exists` with a watch: whether the node exists (if not, no delete will fire it).
    Watching(bool),
}

/// One operation as ZooKeeper answered it.
#[derive(Clone, Debug)]
struct Step {
    /// The middle of its round trip, from the start of the sequence.
    at: Duration,
    op: Op,
    reply: Reply,
    /// The session ids by slot, as of this step.
    sessions: Vec<u64>,
    /// The watches (by the step that set them) whose delete event arrived in this step.
    fired: Vec<usize>,
}

/// The sequence at the end of a node's name (10 digits).
fn sequence(name: &str) -> u64 {
    name[name.len() - 10..]
        .parse()
        .expect("a sequential node's suffix")
}

/// ZooKeeper numbers a directory's children from 0 (the parent's `cversion` before the
/// create), the model from 1: compared as offsets.
const SEQ_OFFSET: u64 = 1;

/// A node's name and sequence in the model's terms, from ZooKeeper's name.
fn to_model(real_name: &str) -> (String, u64) {
    let seq = sequence(real_name) + SEQ_OFFSET;
    (format!("lock-{seq:010}"), seq)
}

/// ZooKeeper's path of a node named in the model's terms.
fn to_real(name: &str) -> String {
    format!("/lock/lock-{:010}", sequence(name) - SEQ_OFFSET)
}

struct Tracked {
    session: Session,
    sent: Instant,
    answered: Instant,
    gone: bool,
    /// Never sent anything again until it expired.
    abandoned: bool,
}

impl expiry::Expiring for Tracked {
    fn gone(&self) -> bool {
        self.gone
    }

    fn mark_gone(&mut self) {
        self.gone = true;
    }

    fn window(&self) -> (Instant, Instant) {
        let timeout = Duration::from_millis(self.session.timeout_ms);
        (
            self.sent + timeout - WINDOW_BEFORE,
            self.answered + timeout + WINDOW_AFTER,
        )
    }
}

/// Runs operations against ZooKeeper and records them.
struct Recorder {
    addr: SocketAddr,
    start: Instant,
    steps: Vec<Step>,
    sessions: Vec<Tracked>,
    observer: Session,
    observer_used: Instant,
    /// Watches set and not fired: (step, node name).
    pending: Vec<(usize, String)>,
}

impl Recorder {
    fn new(zk: &ZooKeeper) -> Self {
        let mut observer = Session::open(zk.addr, OBSERVER_TIMEOUT_MS);
        let (err, _) = observer
            .request(OP_CREATE, create_body("/lock", 0))
            .expect("create /lock");
        assert_eq!(err, 0, "the lock directory is created");
        Recorder {
            addr: zk.addr,
            start: Instant::now(),
            steps: vec![],
            sessions: vec![],
            observer,
            observer_used: Instant::now(),
            pending: vec![],
        }
    }

    /// Waits out every session's expiry window the present falls in.
    fn settle(&mut self) {
        expiry::settle(&mut self.sessions);
    }

    fn observe(&mut self, op: i32, body: Out) -> (i32, Vec<u8>) {
        self.observer_used = Instant::now();
        self.observer
            .request(op, body)
            .expect("the observer session lives")
    }

    /// Sends `op` to ZooKeeper.
    fn send(&mut self, op: &Op) -> Reply {
        let expired = |r: Result<(i32, Vec<u8>), Closed>| r.map_err(|_| Reply::Expired);
        let result = match op {
            Op::Open { timeout_ms } => {
                let session = Session::open(self.addr, *timeout_ms);
                assert_eq!(session.timeout_ms, *timeout_ms, "the timeout as asked");
                let now = Instant::now();
                self.sessions.push(Tracked {
                    session,
                    sent: now,
                    answered: now,
                    gone: false,
                    abandoned: false,
                });
                return Reply::Opened;
            }
            Op::Ping { slot } => expired(
                self.sessions[*slot]
                    .session
                    .request(OP_PING, Out::default()),
            )
            .map(|_| Reply::Pong),
            Op::Create { slot } => {
                let body = create_body("/lock/lock-", 3);
                expired(self.sessions[*slot].session.request(OP_CREATE, body)).map(|(err, b)| {
                    assert_eq!(err, 0, "create");
                    let (name, seq) = to_model(&In(&b).string());
                    Reply::Created(name, seq)
                })
            }
            Op::Close { slot } => {
                let r = self.sessions[*slot]
                    .session
                    .request(OP_CLOSE, Out::default());
                self.sessions[*slot].gone = true;
                expired(r).map(|_| Reply::Done)
            }
            Op::Children => {
                let (err, b) = self.observe(
                    OP_GET_CHILDREN,
                    Out::default().string("/lock").boolean(false),
                );
                assert_eq!(err, 0, "getChildren");
                let mut r = In(&b);
                let n = r.int();
                let mut children: Vec<(String, u64)> =
                    (0..n).map(|_| to_model(&r.string())).collect();
                // ZooKeeper lists children in no particular order; the recipe sorts them.
                children.sort();
                Ok(Reply::Children(children))
            }
            Op::Delete { name } => {
                let (err, _) =
                    self.observe(OP_DELETE, Out::default().string(&to_real(name)).int(-1));
                assert!(err == 0 || err == ERR_NO_NODE, "delete answered {err}");
                Ok(Reply::Done)
            }
            Op::Watch { name } => {
                let (err, _) = self.observe(
                    OP_EXISTS,
                    Out::default().string(&to_real(name)).boolean(true),
                );
                assert!(err == 0 || err == ERR_NO_NODE, "exists answered {err}");
                if err == 0 {
                    self.pending.push((self.steps.len(), name.clone()));
                }
                Ok(Reply::Watching(err == 0))
            }
        };
        result.unwrap_or_else(|e| e)
    }

    fn run(&mut self, op: Op) -> Reply {
        self.settle();
        if self.observer_used.elapsed() > Duration::from_secs(1) {
            self.observe(OP_PING, Out::default());
        }
        let sent = Instant::now();
        let reply = self.send(&op);
        let answered = Instant::now();
        if let (Op::Ping { slot } | Op::Create { slot }, Reply::Pong | Reply::Created(..)) =
            (&op, &reply)
        {
            let t = &mut self.sessions[*slot];
            (t.sent, t.answered) = (sent, answered);
        }
        if !self.pending.is_empty() {
            // Answered after every event queued on the connection before it.
            self.observe(OP_PING, Out::default());
        }
        let mut fired = vec![];
        for path in std::mem::take(&mut self.observer.deleted) {
            let name = to_model(&path).0;
            fired.extend(
                self.pending
                    .iter()
                    .filter(|(_, n)| *n == name)
                    .map(|(s, _)| *s),
            );
            self.pending.retain(|(_, n)| *n != name);
        }
        let at = (sent - self.start) + (answered - sent) / 2;
        let sessions = self.sessions.iter().map(|t| t.session.id).collect();
        self.steps.push(Step {
            at,
            op,
            reply: reply.clone(),
            sessions,
            fired,
        });
        reply
    }

    fn created(&mut self, slot: usize) -> String {
        match self.run(Op::Create { slot }) {
            Reply::Created(name, _) => name,
            other => panic!("create answered {other:?}"),
        }
    }
}

/// What the model answered: per step its reply and the watches that fired in it.
#[derive(Default)]
struct ModelRun {
    replies: Vec<(Reply, Vec<usize>)>,
}

fn to_reply(resp: Resp) -> Reply {
    match resp {
        Resp::Session(_) => Reply::Opened,
        Resp::Pong => Reply::Pong,
        Resp::Expired => Reply::Expired,
        Resp::Created(name, seq) => Reply::Created(name, seq),
        Resp::Children(children, _) => Reply::Children(children),
        Resp::Deleted => Reply::Done,
        other => panic!("the model answered {other:?}"),
    }
}

fn zxid(tree: &mut Tree, env: &Env) -> u64 {
    match tree.read(Req::Children, env) {
        Resp::Children(_, zxid) => zxid,
        other => panic!("children answered {other:?}"),
    }
}

/// Sends one recorded operation to the model; `fired` collects the watches it fires.
fn model_op(tree: &mut Tree, step: &Step, i: usize, env: &Env, fired: &mut Vec<usize>) -> Reply {
    let session = |slot: usize| step.sessions[slot];
    let resp = match step.op.clone() {
        Op::Open { timeout_ms } => {
            let session = *step.sessions.last().expect("the session opened");
            tree.apply(
                Cmd::CreateSession {
                    session,
                    timeout_ms,
                },
                env,
            )
        }
        Op::Ping { slot } => tree.read(
            Req::Ping {
                session: session(slot),
            },
            env,
        ),
        Op::Create { slot } => {
            // ZooKeeper: every request touches its session.
            tree.read(
                Req::Ping {
                    session: session(slot),
                },
                env,
            );
            tree.apply(
                Cmd::Create {
                    session: session(slot),
                    persistent: false,
                    guid: None,
                },
                env,
            )
        }
        Op::Close { slot } => tree.apply(
            Cmd::CloseSession {
                session: session(slot),
            },
            env,
        ),
        Op::Children => tree.read(Req::Children, env),
        Op::Delete { name } => tree.apply(Cmd::Delete { name }, env),
        Op::Watch { name } => {
            let min_zxid = zxid(tree, env);
            let handling = tree.handle(Req::Watch { name, min_zxid }, env);
            assert!(matches!(handling, Handling::Hold), "a watch waits");
            // A watch on a node that is already gone answers at once: `exists` said NoNode.
            let pushes = tree.take_pushes();
            let gone = pushes.iter().any(|(_, id, _)| *id == i as u64);
            fired.extend(
                pushes
                    .iter()
                    .map(|(_, id, _)| *id as usize)
                    .filter(|id| *id != i),
            );
            return Reply::Watching(!gone);
        }
    };
    to_reply(resp)
}

fn replay(steps: &[Step]) -> ModelRun {
    let out = Arc::new(Mutex::new(ModelRun::default()));
    let last = steps.last().map_or(Duration::ZERO, |s| s.at);
    let spec = SimSpec {
        seed: 1,
        duration_ms: last.as_millis() as u64 + 1_000,
        ..SimSpec::default()
    };
    let (steps, result) = (steps.to_vec(), out.clone());
    simulate(&spec, move |world| {
        world.add_node("zookeeper", Role::Server, move |ctx| {
            let (steps, result) = (steps.clone(), result.clone());
            async move {
                let run = drive(&ctx, &steps).await;
                *result.lock().unwrap() = run;
            }
        });
    })
    .expect("the model's run");
    let run = std::mem::take(&mut *out.lock().unwrap());
    run
}

async fn drive(ctx: &NodeCtx, steps: &[Step]) -> ModelRun {
    let mut tree = Tree::new(Duration::from_millis(TICK_MS));
    let env = |id: u64| Env {
        ctx,
        leader: true,
        from: ctx.idx(),
        id,
    };
    tree.role_changed(&env(0));
    let tick = Duration::from_millis(MODEL_TICK_MS);
    let (mut next_tick, mut run) = (tick, ModelRun::default());
    let take = |tree: &mut Tree, fired: &mut Vec<usize>| {
        fired.extend(tree.take_pushes().into_iter().map(|(_, id, resp)| {
            assert_eq!(
                resp,
                Resp::Gone,
                "a watch answers only that its node is gone"
            );
            id as usize
        }));
    };
    for (i, step) in steps.iter().enumerate() {
        let mut fired = vec![];
        while next_tick <= step.at {
            ctx.sleep_local(next_tick.saturating_sub(ctx.mono_now()))
                .await;
            for cmd in tree.tick(&env(0)) {
                tree.apply(cmd, &env(0));
                take(&mut tree, &mut fired);
            }
            next_tick += tick;
        }
        ctx.sleep_local(step.at.saturating_sub(ctx.mono_now()))
            .await;
        let reply = model_op(&mut tree, step, i, &env(i as u64), &mut fired);
        take(&mut tree, &mut fired);
        run.replies.push((reply, fired));
    }
    run
}

/// Compares ZooKeeper's answers with the model's; returns how many things were compared and
/// panics, listing them, if any differ.
fn compare(steps: &[Step]) -> usize {
    let model = replay(steps);
    let mut diffs = vec![];
    let mut compared = 0;
    for (i, (step, (reply, fired))) in steps.iter().zip(&model.replies).enumerate() {
        let mut real_fired = step.fired.clone();
        let mut model_fired = fired.clone();
        real_fired.sort();
        model_fired.sort();
        compared += 1 + real_fired.len().max(model_fired.len());
        if (&step.reply, &real_fired) != (reply, &model_fired) {
            diffs.push(format!(
                "step {i} at {:?} {:?}: ZooKeeper {:?} firing watches {real_fired:?}, the model {reply:?} firing {model_fired:?}",
                step.at, step.op, step.reply
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} of {} steps differ:\n{}",
        diffs.len(),
        steps.len(),
        diffs.join("\n")
    );
    compared
}

/// Every operation, with a delete, a close and an expiry each firing a watch.
#[test]
fn deterministic_sequence_agrees() {
    let Some(zk) = ZooKeeper::start("zookeeper_conformance") else {
        return;
    };
    let mut rec = Recorder::new(&zk);
    rec.run(Op::Open { timeout_ms: 2_000 });
    rec.run(Op::Open { timeout_ms: 3_000 });
    let first = rec.created(0);
    let second = rec.created(1);
    rec.created(0);
    rec.run(Op::Children);
    rec.run(Op::Watch {
        name: first.clone(),
    });
    rec.run(Op::Delete {
        name: first.clone(),
    });
    rec.run(Op::Delete {
        name: first.clone(),
    });
    rec.run(Op::Watch { name: first });
    rec.run(Op::Children);
    rec.created(1);
    rec.run(Op::Watch { name: second });
    rec.run(Op::Close { slot: 1 });
    rec.run(Op::Children);
    rec.run(Op::Ping { slot: 1 });
    rec.run(Op::Create { slot: 1 });
    let Reply::Children(left) = rec.run(Op::Children) else {
        panic!("children");
    };
    rec.run(Op::Watch {
        name: left[0].0.clone(),
    });
    // Session 0 is left to expire: its ephemeral goes, the watch fires.
    std::thread::sleep(Duration::from_millis(3_000));
    rec.run(Op::Children);
    rec.run(Op::Ping { slot: 0 });
    rec.run(Op::Open { timeout_ms: 2_000 });
    rec.created(2);
    rec.run(Op::Children);
    let steps = rec.steps.clone();
    let compared = compare(&steps);
    eprintln!("zookeeper_conformance deterministic: {compared} comparisons, 0 mismatches");
}

/// One random operation.
fn random_op(rec: &mut Recorder, rng: &mut StdRng) {
    let live: Vec<usize> = (0..rec.sessions.len())
        .filter(|s| !rec.sessions[*s].gone && !rec.sessions[*s].abandoned)
        .collect();
    // Keep the sessions that are not abandoned alive, as a client's pings do.
    if let Some(slot) = live.iter().copied().find(|s| {
        let t = &rec.sessions[*s];
        t.answered.elapsed() > Duration::from_millis(t.session.timeout_ms / 3)
    }) {
        rec.run(Op::Ping { slot });
        return;
    }
    // Any session not live-and-abandoned (those may not be touched before they expire).
    let usable: Vec<usize> = (0..rec.sessions.len())
        .filter(|s| rec.sessions[*s].gone || !rec.sessions[*s].abandoned)
        .collect();
    let slot = (!usable.is_empty()).then(|| usable[rng.gen_range(0..usable.len())]);
    let known: Vec<String> = rec
        .steps
        .iter()
        .rev()
        .find_map(|s| match &s.reply {
            Reply::Children(c) => Some(c.iter().map(|(n, _)| n.clone()).collect()),
            _ => None,
        })
        .unwrap_or_default();
    let name = (!known.is_empty()).then(|| known[rng.gen_range(0..known.len())].clone());
    let op = match (rng.gen_range(0..100), slot, name) {
        (0..=11, _, _) if live.len() < 4 => Op::Open {
            timeout_ms: [2_000, 3_000][rng.gen_range(0..2)],
        },
        (12..=21, Some(slot), _) => Op::Ping { slot },
        (22..=46, Some(slot), _) => Op::Create { slot },
        (47..=56, _, Some(name)) => Op::Delete { name },
        (57..=71, _, Some(name)) => Op::Watch { name },
        (72..=75, Some(slot), _) => Op::Close { slot },
        _ => Op::Children,
    };
    let opened = matches!(op, Op::Open { .. });
    rec.run(op);
    if opened && rng.gen_bool(0.4) {
        rec.sessions.last_mut().expect("opened").abandoned = true;
    }
}

/// Seeded random sequences with real waits between operations (sessions of 2–3 s opened,
/// kept alive, closed, abandoned to expire; nodes created, deleted, watched), each on a
/// fresh server.
#[test]
fn random_sequences_agree() {
    let mut total = 0;
    for seed in RANDOM_SEEDS {
        let Some(zk) = ZooKeeper::start("zookeeper_conformance") else {
            return;
        };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rec = Recorder::new(&zk);
        for _ in 0..RANDOM_OPS {
            rec.settle();
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
            random_op(&mut rec, &mut rng);
        }
        rec.run(Op::Children);
        let steps = rec.steps.clone();
        let expired = (steps.iter()).filter(|s| s.reply == Reply::Expired).count();
        let fired = steps.iter().map(|s| s.fired.len()).sum::<usize>();
        assert!(
            expired > 0 && fired > 0,
            "seed {seed}: sessions end, watches fire"
        );
        total += compare(&steps);
    }
    eprintln!("zookeeper_conformance random: {total} comparisons, 0 mismatches");
}
