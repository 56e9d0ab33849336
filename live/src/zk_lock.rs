//! `zookeeper` against a real ZooKeeper ensemble: the lock recipe of the ZooKeeper
//! Programmer's Guide and Curator's `InterProcessMutex`, as the model's client does
//! (`ZkClient` in `locksim_protocols::raft::zookeeper`): create `/lock/lock-` `EPHEMERAL_SEQUENTIAL`,
//! list the children, hold the lock when the own node has the lowest sequence, else `exists`
//! with a watch on the next-lower node and list again when it is deleted. The session pings
//! every third of its timeout; a client that has heard nothing for two thirds of it is
//! SUSPENDED (Curator), and the correct client then counts its lock as possibly lost. The
//! wire protocol (jute over TCP) is written here for the few requests the recipe needs.
//! A lost connection does not end the session: as ZooKeeper's `ClientCnxn` does, the client
//! moves it to the next server (the session's id and password, the last zxid it saw), and
//! a client that has heard nothing for two thirds of the timeout drops its connection and
//! moves too (`readTimeout`). It gives the session up once no server took it for a whole
//! session timeout from the disconnection (Curator 3's local expiry), or when a server says
//! it expired.

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
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.int()?.max(0) as usize;
        Some(self.take(n)?.to_vec())
    }
    fn string(&mut self) -> Option<String> {
        Some(String::from_utf8_lossy(&self.bytes()?).into_owned())
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

/// Where a session lives and how to re-attach it: ZooKeeper's `ConnectRequest` carries the
/// session's id and password and the last zxid the client saw.
struct Attachment {
    servers: Vec<SocketAddr>,
    /// The server connected now (an index into `servers`).
    at: usize,
    id: i64,
    passwd: Vec<u8>,
    last_zxid: i64,
    timeout: Duration,
}

impl Attachment {
    /// The server `i`'s name in the run (servers are listed zk1, zk2, ... in order).
    fn name(&self, i: usize) -> String {
        format!("zk{}", i + 1)
    }

    /// Connects to server `i` and asks for this session (a new one while `id` is 0). None if
    /// the server refuses it: the session expired.
    fn connect(
        &self,
        i: usize,
        wait: Duration,
    ) -> std::io::Result<Option<(TcpStream, i64, Vec<u8>)>> {
        let mut stream = TcpStream::connect_timeout(&self.servers[i], wait)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(wait))?;
        let hello = Out::default()
            .int(0)
            .long(self.last_zxid)
            .int(self.timeout.as_millis() as i32)
            .long(self.id)
            .buf(&self.passwd)
            .boolean(false);
        stream.write_all(&hello.framed())?;
        let reply = read_frame(&mut stream)?;
        let mut r = In(&reply);
        let (_version, negotiated) = (r.int(), r.int().unwrap_or(0));
        let (Some(id), Some(passwd)) = (r.long(), r.bytes()) else {
            return Err(std::io::Error::other("a short connect reply"));
        };
        if negotiated <= 0 {
            return Ok(None);
        }
        stream.set_read_timeout(None)?;
        Ok(Some((stream, id, passwd)))
    }

    /// Moves the session to the next server that takes it, trying each in turn, until one
    /// does, one says it expired, or a session timeout has passed since the connection was
    /// lost (Curator's local expiry counts from the start of SUSPENDED).
    fn move_session(&mut self, ctx: &Ctx, shared: &Shared) -> Result<TcpStream, String> {
        let heard = &shared.heard;
        let n = self.servers.len();
        // As ClientCnxn: a connection attempt may take the timeout over the server count.
        let wait = self.timeout / n as u32;
        let give_up = ctx.mono_now() + self.timeout;
        let mut i = self.at;
        loop {
            if ctx.over() || shared.closed.lock().unwrap().is_some() {
                return Err("the run ended or the client closed the session".into());
            }
            if ctx.mono_now() > give_up {
                return Err(
                    "session expired: no server took it within a session timeout of the \
                     disconnection"
                        .into(),
                );
            }
            i = (i + 1) % n;
            match self.connect(i, wait) {
                Ok(Some((stream, _, _))) => {
                    *heard.lock().unwrap() = ctx.mono_now();
                    ctx.note(if i == self.at {
                        format!("session back on {} (no other server took it)", self.name(i))
                    } else {
                        format!(
                            "session moved from {} to {}",
                            self.name(self.at),
                            self.name(i)
                        )
                    });
                    self.at = i;
                    return Ok(stream);
                }
                Ok(None) => return Err(format!("session expired ({} says)", self.name(i))),
                Err(_) => clock::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// What the reader thread shares with the session.
struct Shared {
    pending: Pending,
    heard: Arc<Mutex<Duration>>,
    closed: Arc<Mutex<Option<String>>>,
    writer: Writer,
    watches: Sender<String>,
}

impl Session {
    /// Opens a session of `timeout` on server `first` of `servers`.
    fn open(
        ctx: &Arc<Ctx>,
        servers: Vec<SocketAddr>,
        first: usize,
        timeout: Duration,
        io_timeout: Duration,
    ) -> std::io::Result<Session> {
        let mut attachment = Attachment {
            servers,
            at: first,
            id: 0,
            passwd: vec![0; 16],
            last_zxid: 0,
            timeout,
        };
        let (stream, id, passwd) = attachment
            .connect(first, io_timeout)?
            .ok_or_else(|| std::io::Error::other("the server refused the session"))?;
        (attachment.id, attachment.passwd) = (id, passwd);
        let (watch_tx, watches) = channel();
        let shared = Shared {
            pending: Arc::default(),
            heard: Arc::new(Mutex::new(ctx.mono_now())),
            closed: Arc::new(Mutex::new(None)),
            writer: Arc::new(Mutex::new(stream.try_clone()?)),
            watches: watch_tx,
        };
        let session = Session {
            writer: shared.writer.clone(),
            pending: shared.pending.clone(),
            watches,
            next_xid: 1,
            heard: shared.heard.clone(),
            closed: shared.closed.clone(),
        };
        let x = ctx.clone();
        std::thread::spawn(move || read_loop(&x, stream, attachment, &shared));
        let (h, c, x, w) = (
            session.heard.clone(),
            session.closed.clone(),
            ctx.clone(),
            session.writer.clone(),
        );
        std::thread::spawn(move || ping_loop(&x, &w, &h, &c, timeout));
        Ok(session)
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

impl Drop for Session {
    /// A session given up stops its reader and pinger (they would otherwise keep it alive
    /// on the servers, moving it from server to server).
    fn drop(&mut self) {
        self.closed
            .lock()
            .unwrap()
            .get_or_insert_with(|| "the client closed the session".into());
        let _ = self
            .writer
            .lock()
            .unwrap()
            .shutdown(std::net::Shutdown::Both);
    }
}

/// Hands replies to their callers and deletions to the waiter; when the connection ends,
/// fails the requests in flight (ZooKeeper's CONNECTIONLOSS) and moves the session.
fn read_loop(ctx: &Ctx, mut s: TcpStream, mut attachment: Attachment, shared: &Shared) {
    loop {
        let Ok(frame) = read_frame(&mut s) else {
            shared.pending.lock().unwrap().clear();
            if shared.closed.lock().unwrap().is_some() {
                return; // closed by the client
            }
            match attachment.move_session(ctx, shared) {
                Ok(stream) => {
                    match stream.try_clone() {
                        Ok(w) => *shared.writer.lock().unwrap() = w,
                        Err(_) => continue,
                    }
                    s = stream;
                    continue;
                }
                Err(why) => {
                    let mut closed = shared.closed.lock().unwrap();
                    if closed.is_none() {
                        *closed = Some(format!("session over: {why}"));
                        ctx.note(format!("session over: {why}"));
                    }
                    return;
                }
            }
        };
        *shared.heard.lock().unwrap() = ctx.mono_now();
        let mut r = In(&frame);
        let (Some(xid), Some(zxid), Some(err)) = (r.int(), r.long(), r.int()) else {
            continue;
        };
        attachment.last_zxid = attachment.last_zxid.max(zxid);
        if xid == XID_WATCH {
            let (kind, _state, path) = (r.int(), r.int(), r.string());
            if kind == Some(EVENT_NODE_DELETED) {
                let _ = shared.watches.send(path.unwrap_or_default());
            }
            continue;
        }
        if let Some(tx) = shared.pending.lock().unwrap().remove(&xid) {
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
            // ClientCnxn's readTimeout: the client drops the connection and the reader moves
            // the session to the next server.
            let _ = writer.lock().unwrap().shutdown(std::net::Shutdown::Both);
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
                self.servers.clone(),
                i,
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

    /// Deletes `path`, asking again while the session moves to another server or the
    /// ensemble elects a leader (Curator's guaranteed delete; a delete that got no answer may
    /// have been applied: a repeat then finds no node, which is the same end), for at most a
    /// session timeout: the node goes with the session by then.
    fn delete(&mut self, path: &str) -> Result<i32, String> {
        let t = self.io_timeout();
        let deadline = self.ctx.mono_now() + self.timeout();
        let s = self.session.as_mut().ok_or("no session")?;
        let mut repeat = false;
        loop {
            match s.request(OP_DELETE, Out::default().string(path).int(-1), t) {
                Ok((ERR_NO_NODE, _)) if repeat => return Ok(0),
                Ok((err, _)) => return Ok(err),
                Err(why) if s.closed.lock().unwrap().is_some() => return Err(why),
                Err(why) if self.ctx.mono_now() >= deadline => return Err(why),
                Err(_) => {
                    repeat = true;
                    clock::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// Waits until the own node is the lowest; None if it is gone or the deadline passes.
    fn wait_turn(&mut self, mine: &str, deadline: Duration) -> Option<()> {
        let (t, poll) = (
            self.io_timeout(),
            Duration::from_millis(self.params.watch_poll_ms),
        );
        while self.ctx.mono_now() < deadline {
            let s = self.session.as_mut()?;
            if s.closed.lock().unwrap().is_some() {
                return None; // the session and its node are gone
            }
            let Ok((0, body)) = s.request(
                OP_GET_CHILDREN,
                Out::default().string(DIR).boolean(false),
                t,
            ) else {
                // The connection may be moving to another server: ask again shortly.
                clock::sleep(Duration::from_millis(20));
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
