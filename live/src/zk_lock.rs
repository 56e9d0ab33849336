//! `zookeeper` against a real ZooKeeper ensemble: the lock recipe of the ZooKeeper
//! Programmer's Guide and Curator's `InterProcessMutex`, as the model's client does
//! (`ZkClient` in `locksim_protocols::raft::zookeeper`): create `/lock/lock-` `EPHEMERAL_SEQUENTIAL`,
//! list the children, hold the lock when the own node has the lowest sequence, else `exists`
//! with a watch on the next-lower node and list again when it is deleted. The session pings
//! every third of its timeout; a client that has heard nothing for two thirds of it is
//! SUSPENDED (Curator), and the correct client then counts its lock as possibly lost. The
//! wire protocol (jute over TCP) is written here for the few requests the recipe needs.
//! A lost connection ends the session on this client (it starts a new one), where the real
//! client would move its session to another server within the timeout.

use crate::clock;
use crate::lock::{Ctx, LiveLock};
use locksim_protocols::raft::zookeeper::{Params, Variant};
use locksim_protocols::{Acquired, Grant, Outcome, Validity};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DIR: &str = "/lock";
const NODE_PREFIX: &str = "/lock/lock-";
const OP_CREATE: i32 = 1;
const OP_DELETE: i32 = 2;
const OP_EXISTS: i32 = 3;
const OP_GET_CHILDREN: i32 = 8;
const OP_PING: i32 = 11;
const OP_CLOSE: i32 = -11;
const XID_WATCH: i32 = -1;
const XID_PING: i32 = -2;
const ERR_NO_NODE: i32 = -101;
const ERR_NODE_EXISTS: i32 = -110;
const EVENT_NODE_DELETED: i32 = 2;

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
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        (self.0.len() >= n).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }
    fn int(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn long(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.int()?.max(0) as usize;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0; i32::from_be_bytes(len).max(0) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

type Pending = Arc<Mutex<BTreeMap<i32, Sender<(i32, Vec<u8>)>>>>;

/// One session on one server: a reader thread hands replies to their callers and watch
/// events to the waiter; a pinger thread keeps the session alive.
struct Session {
    writer: Writer,
    pending: Pending,
    watches: Receiver<String>,
    next_xid: i32,
    /// When the client last heard from the server (any reply), on the run's clock.
    heard: Arc<Mutex<Duration>>,
    /// The reader saw the connection end: the session is over for this client.
    closed: Arc<Mutex<Option<String>>>,
}

type Writer = Arc<Mutex<TcpStream>>;

impl Session {
    /// Connects to `addr` and opens a session of `timeout`.
    fn open(
        ctx: &Arc<Ctx>,
        addr: SocketAddr,
        timeout: Duration,
        io_timeout: Duration,
    ) -> std::io::Result<Session> {
        let mut stream = TcpStream::connect_timeout(&addr, io_timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(io_timeout))?;
        let hello = Out::default()
            .int(0)
            .long(0)
            .int(timeout.as_millis() as i32)
            .long(0)
            .buf(&[0; 16])
            .boolean(false);
        stream.write_all(&hello.framed())?;
        let reply = read_frame(&mut stream)?;
        let mut r = In(&reply);
        let (_version, negotiated) = (r.int(), r.int().unwrap_or(0));
        if negotiated <= 0 {
            return Err(std::io::Error::other("the server refused the session"));
        }
        stream.set_read_timeout(None)?;
        let (pending, heard, closed): (Pending, _, _) = (
            Arc::default(),
            Arc::new(Mutex::new(ctx.mono_now())),
            Arc::new(Mutex::new(None)),
        );
        let (watch_tx, watches) = channel();
        let writer: Writer = Arc::new(Mutex::new(stream.try_clone()?));
        let reader = stream.try_clone()?;
        let (p, h, c, x) = (pending.clone(), heard.clone(), closed.clone(), ctx.clone());
        std::thread::spawn(move || read_loop(&x, reader, &p, &h, &c, &watch_tx));
        let (h, c, x, w) = (heard.clone(), closed.clone(), ctx.clone(), writer.clone());
        std::thread::spawn(move || ping_loop(&x, &w, &h, &c, timeout));
        Ok(Session {
            writer,
            pending,
            watches,
            next_xid: 1,
            heard,
            closed,
        })
    }

    /// One request; the reply's error code and body, or why there was none in `timeout`.
    fn request(&mut self, op: i32, body: Out, timeout: Duration) -> Result<(i32, Vec<u8>), String> {
        if let Some(why) = self.closed.lock().unwrap().clone() {
            return Err(why);
        }
        let xid = self.next_xid;
        self.next_xid += 1;
        let (tx, rx) = channel();
        self.pending.lock().unwrap().insert(xid, tx);
        let mut frame = Out::default().int(xid).int(op);
        frame.0.extend(body.0);
        // The pinger writes too: whole frames, one at a time.
        let mut w = self.writer.lock().unwrap();
        let _ = w.set_write_timeout(Some(timeout));
        let sent = w.write_all(&frame.framed());
        drop(w);
        if sent.is_err() {
            return Err("connection lost".into());
        }
        let answer = rx
            .recv_timeout(timeout)
            .map_err(|_| "request timed out".to_owned());
        self.pending.lock().unwrap().remove(&xid);
        answer
    }
}

fn read_loop(
    ctx: &Ctx,
    mut s: TcpStream,
    pending: &Pending,
    heard: &Mutex<Duration>,
    closed: &Mutex<Option<String>>,
    watches: &Sender<String>,
) {
    loop {
        let Ok(frame) = read_frame(&mut s) else {
            *closed.lock().unwrap() = Some("connection lost: the session is over".into());
            pending.lock().unwrap().clear();
            return ctx.note("session over: the server closed the connection (expired)");
        };
        *heard.lock().unwrap() = ctx.mono_now();
        let mut r = In(&frame);
        let (Some(xid), Some(_zxid), Some(err)) = (r.int(), r.long(), r.int()) else {
            continue;
        };
        if xid == XID_WATCH {
            let (kind, _state, path) = (r.int(), r.int(), r.string());
            if kind == Some(EVENT_NODE_DELETED) {
                let _ = watches.send(path.unwrap_or_default());
            }
            continue;
        }
        if let Some(tx) = pending.lock().unwrap().remove(&xid) {
            let _ = tx.send((err, r.0.to_vec()));
        }
    }
}

fn ping_loop(
    ctx: &Ctx,
    writer: &Writer,
    heard: &Mutex<Duration>,
    closed: &Mutex<Option<String>>,
    timeout: Duration,
) {
    let mut suspended = false;
    while !ctx.over() && closed.lock().unwrap().is_none() {
        clock::sleep(timeout / 3);
        let ping = Out::default().int(XID_PING).int(OP_PING).framed();
        let _ = writer.lock().unwrap().write_all(&ping);
        let last = *heard.lock().unwrap();
        let now = ctx.mono_now();
        if !suspended && now >= last + timeout * 2 / 3 {
            suspended = true;
            ctx.note("connection lost (SUSPENDED)");
        } else if suspended && now < last + timeout * 2 / 3 {
            suspended = false;
            ctx.note("connection back (RECONNECTED)");
        }
    }
}

/// The lock client of a ZooKeeper ensemble.
pub struct ZkLock {
    params: Params,
    servers: Vec<SocketAddr>,
    session: Option<Session>,
    ctx: Arc<Ctx>,
}

/// The sequence a node's name ends with (10 digits): the fencing token.
fn sequence(name: &str) -> Option<u64> {
    name.get(name.len().checked_sub(10)?..)?.parse().ok()
}

fn create_body(path: &str, flags: i32) -> Out {
    // World-readable and -writable (the `OPEN_ACL_UNSAFE` ACL): perms ALL, world:anyone.
    Out::default()
        .string(path)
        .buf(&[])
        .int(1)
        .int(31)
        .string("world")
        .string("anyone")
        .int(flags)
}

impl ZkLock {
    /// A client of the servers at `servers`.
    pub fn new(params: Params, servers: Vec<SocketAddr>, ctx: Arc<Ctx>) -> Self {
        assert!(!servers.is_empty(), "an ensemble has servers");
        ZkLock {
            params,
            servers,
            session: None,
            ctx,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.session_timeout_ms)
    }

    fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    fn end_session(&mut self, why: &str) {
        if let Some(mut s) = self.session.take() {
            let _ = s.request(OP_CLOSE, Out::default(), self.io_timeout());
            self.ctx.note(format!("session over: {why}"));
        }
    }

    /// The open session, opening one on a random server if needed.
    fn session(&mut self) -> Result<&mut Session, Acquired> {
        if self
            .session
            .as_ref()
            .is_some_and(|s| s.closed.lock().unwrap().is_some())
        {
            self.session = None;
        }
        if self.session.is_none() {
            let i = self.ctx.between(0, self.servers.len() as u64 - 1) as usize;
            let opened = Session::open(
                &self.ctx,
                self.servers[i],
                self.timeout(),
                self.io_timeout(),
            );
            let mut s = opened.map_err(|e| Acquired::Unknown(format!("no session: {e}")))?;
            // The lock's directory, once (it may exist already).
            let made = s.request(OP_CREATE, create_body(DIR, 0), self.io_timeout());
            if !matches!(made, Ok((0 | ERR_NODE_EXISTS, _))) {
                return Err(Acquired::Unknown("cannot create the lock directory".into()));
            }
            self.session = Some(s);
        }
        Ok(self.session.as_mut().expect("opened above"))
    }

    fn delete(&mut self, path: &str) -> Result<i32, String> {
        let t = self.io_timeout();
        let s = self.session.as_mut().ok_or("no session")?;
        s.request(OP_DELETE, Out::default().string(path).int(-1), t)
            .map(|(err, _)| err)
    }

    /// Waits until the own node is the lowest; None if it is gone or the deadline passes.
    fn wait_turn(&mut self, mine: &str, deadline: Duration) -> Option<()> {
        let (t, poll) = (
            self.io_timeout(),
            Duration::from_millis(self.params.watch_poll_ms),
        );
        while self.ctx.mono_now() < deadline {
            let s = self.session.as_mut()?;
            let Ok((0, body)) = s.request(
                OP_GET_CHILDREN,
                Out::default().string(DIR).boolean(false),
                t,
            ) else {
                continue;
            };
            let mut r = In(&body);
            let n = r.int()?.max(0);
            let mut children: Vec<String> = (0..n).filter_map(|_| r.string()).collect();
            children.sort_by_key(|c| sequence(c));
            let me = mine.rsplit('/').next()?;
            let pos = children.iter().position(|c| c == me)?;
            if pos == 0 {
                return Some(());
            }
            let prev = format!("{DIR}/{}", children[pos - 1]);
            match s.request(OP_EXISTS, Out::default().string(&prev).boolean(true), t) {
                Ok((0, _)) => {
                    let left = deadline.saturating_sub(self.ctx.mono_now()).min(poll);
                    wait_deleted(&s.watches, &prev, left);
                }
                Ok((ERR_NO_NODE, _)) => {}
                _ => clock::sleep(t.min(deadline.saturating_sub(self.ctx.mono_now()))),
            }
        }
        None
    }
}

/// Waits for the delete event of `path` (or `wait`).
fn wait_deleted(watches: &Receiver<String>, path: &str, wait: Duration) {
    let start = clock::now_ns();
    loop {
        let left = wait.saturating_sub(clock::since(start));
        match watches.recv_timeout(left) {
            Ok(p) if p == path => return,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
    }
}

impl LiveLock for ZkLock {
    fn acquire(&mut self, ctx: &Ctx) -> Acquired {
        let deadline = ctx.mono_now() + Duration::from_millis(self.params.acquire_timeout_ms);
        let t = self.io_timeout();
        let s = match self.session() {
            Ok(s) => s,
            Err(outcome) => return outcome,
        };
        let created = s.request(OP_CREATE, create_body(NODE_PREFIX, 3), t);
        let name = match created {
            Ok((0, body)) => In(&body).string().unwrap_or_default(),
            Ok((err, _)) => {
                self.end_session(&format!("create failed ({err})"));
                return Acquired::Failed(format!("create failed ({err})"));
            }
            Err(why) => return Acquired::Unknown(format!("no answer to create: {why}")),
        };
        let Some(seq) = sequence(&name) else {
            return Acquired::Unknown(format!("unexpected node name {name}"));
        };
        if self.wait_turn(&name, deadline).is_none() {
            let _ = self.delete(&name);
            return Acquired::Failed("gave up waiting (or the node is gone)".into());
        }
        let grant = Grant {
            token: Some(seq),
            valid_until: None,
            handle: name,
        };
        if !self.validity(ctx, &grant).holds_at(ctx.mono_now()) {
            let _ = self.delete(&grant.handle);
            return Acquired::Failed("connection lost while acquiring".into());
        }
        Acquired::Granted(grant)
    }

    /// Correct: the lock holds while the connection does (two thirds of the timeout after
    /// the client last heard from the server); `ignore-suspended`: until the session ends.
    fn validity(&mut self, _ctx: &Ctx, _grant: &Grant) -> Validity {
        let Some(s) = self.session.as_ref() else {
            return Validity::Lost("the session expired".into());
        };
        if let Some(why) = s.closed.lock().unwrap().clone() {
            return Validity::Lost(why);
        }
        match self.params.variant {
            Variant::Correct => Validity::Until(*s.heard.lock().unwrap() + self.timeout() * 2 / 3),
            Variant::IgnoreSuspended => Validity::Indefinite,
            other => unreachable!("refused before the run: {other:?}"),
        }
    }

    fn release(&mut self, _ctx: &Ctx, grant: &Grant) -> Outcome {
        match self.delete(&grant.handle) {
            Ok(0) => Outcome::Ok,
            Ok(err) => Outcome::Failed(format!("delete failed ({err})")),
            Err(_) => {
                // Our node may still be there: leave it to the session's expiry.
                self.end_session("the delete got no answer: session abandoned");
                Outcome::Unknown("no answer to the delete".into())
            }
        }
    }
}
