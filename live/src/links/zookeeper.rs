//! The ZooKeeper model's requests (`locksim_protocols::raft::zookeeper::tree::Req`) against
//! a real ensemble: the live side of the ZooKeeper client's links, so that the model's own
//! client (`ZkClient`: the lock recipe, Curator's `InterProcessMutex`, every variant) runs
//! against real servers.
//!
//! The model's requests name a session; a real session lives in a connection. So the link
//! holds the client's one session and the connection it is attached to, speaking jute over
//! TCP ([`crate::links::jute`]): `CreateSession` opens a connection to the server asked; a request
//! goes on the session's connection; a connection that broke, or from which nothing was
//! heard for two thirds of the session timeout (ZooKeeper's `ClientCnxn` read timeout),
//! is dropped and the session moved to the server the model's client asks next (its id,
//! password and the last zxid seen, as `ClientCnxn` reconnects); a server that answers the
//! reconnection with no timeout says the session expired (`Expired`). A ping is a real
//! ping on the session's connection; a watch is a real one-shot watch (`exists` or
//! `getChildren` with `watch = true`) answered at its event. What the model answers from its
//! state at a zxid (a watch armed at `min_zxid`), the real server answers from now: a change
//! between the listing and the watch is seen at the client's next listing, a poll later.

use crate::links::jute::{self, In, Out};
use futures::channel::oneshot;
use locksim_protocols::raft::zookeeper::tree::{self, Req, Resp};
use locksim_sim::env::LocalFuture;
use locksim_sim::rpc::{Caller, Links, LiveLink, LiveLinks, RpcError};
use locksim_sim::{NodeCtx, NodeIdx};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::TcpStream;

/// The lock's directory: every lock node is a child of it.
const DIR: &str = "/lock";

/// The servers' client addresses, by node index.
pub struct ZkLinks {
    servers: BTreeMap<NodeIdx, SocketAddr>,
}

impl ZkLinks {
    /// Links to the servers at `servers`, known as nodes `first`, `first + 1`, ...
    pub fn links(first: NodeIdx, servers: &[SocketAddr]) -> Links<Req, Resp> {
        super::assert_loopback(servers);
        let servers = (first..).zip(servers.iter().copied()).collect();
        Links::Live(Arc::new(ZkLinks { servers }))
    }
}

impl LiveLinks<Req, Resp> for ZkLinks {
    fn caller(&self, ctx: &NodeCtx) -> Caller<Req, Resp> {
        Caller::live(Rc::new(ZkLink(Rc::new(Inner {
            ctx: ctx.clone(),
            servers: self.servers.clone(),
            session: RefCell::default(),
            conn: RefCell::default(),
            last_zxid: Rc::default(),
            at: Cell::new(None),
        }))))
    }
}

/// The client's session: what re-attaches it to a server.
struct Session {
    id: i64,
    passwd: Vec<u8>,
    timeout: Duration,
}

struct Inner {
    ctx: NodeCtx,
    servers: BTreeMap<NodeIdx, SocketAddr>,
    session: RefCell<Option<Session>>,
    conn: RefCell<Option<Rc<Conn>>>,
    /// The highest zxid the client has seen (what a reconnection carries).
    last_zxid: Rc<Cell<i64>>,
    /// The server the session was last attached to.
    at: Cell<Option<NodeIdx>>,
}

struct ZkLink(Rc<Inner>);

impl LiveLink<Req, Resp> for ZkLink {
    fn call(
        &self,
        to: NodeIdx,
        body: Req,
        timeout: Duration,
    ) -> LocalFuture<'static, Result<Resp, RpcError>> {
        let inner = self.0.clone();
        Box::pin(async move {
            let answer = inner.answer(to, body, timeout);
            match tokio::time::timeout(timeout, answer).await {
                Ok(Some(resp)) => Ok(resp),
                _ => Err(RpcError::Timeout),
            }
        })
    }

    fn notify(&self, to: NodeIdx, body: Req) {
        let inner = self.0.clone();
        tokio::task::spawn_local(async move {
            let _ = inner.answer(to, body, Duration::from_secs(1)).await;
        });
    }

    /// The session's connection, if it is attached to `to` and open, ends: the server closed
    /// it (its process died, or, a follower, it lost its leader) or this link dropped it.
    fn closed(&self, to: NodeIdx) -> LocalFuture<'static, ()> {
        let attached = self.0.at.get() == Some(to);
        let conn = self.0.conn.borrow().clone().filter(|c| attached && c.up());
        Box::pin(async move {
            match conn {
                Some(conn) => conn.closed().await,
                None => futures::future::pending().await,
            }
        })
    }
}

/// Why a request got no answer it can give: none in time, or the session is gone.
enum Failed {
    NoAnswer,
    Expired,
}

/// A create sent and not (yet) answered: dropped unanswered (no reply in time, the
/// connection broke, or the call's deadline dropped it), it leaves a note, for the server
/// may have applied it. The model's client may then send the create again (to the next
/// server, within its budget) or give up; either way the raw recipe, without a GUID to find
/// its node by, can leave a node of its living session that nobody deletes, and the queue
/// waits behind it (the ZooKeeper recipes page's "Recoverable Errors and the GUID"). The
/// note is the history's evidence of that.
struct Unanswered<'a> {
    ctx: &'a NodeCtx,
    to: NodeIdx,
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.answered {
            let server = self.ctx.node_name(self.to);
            let why = format!("no answer to create from {server} (applied or not: unknown)");
            self.ctx.note(why);
        }
    }
}

impl Inner {
    /// The model's answer to `req` sent to server `to`; `None`: no answer.
    async fn answer(&self, to: NodeIdx, req: Req, timeout: Duration) -> Option<Resp> {
        let result = match req {
            Req::CreateSession { timeout_ms } => {
                return self.create_session(to, timeout_ms, timeout).await
            }
            // On another server than the connection's, the session is attached there first
            // (`conn`): the real server asks its leader.
            Req::Ping { session } | Req::Attach { session } => {
                self.ping(to, session, timeout).await
            }
            Req::Create {
                session,
                persistent,
                guid,
            } => self.create(to, session, persistent, guid, timeout).await,
            Req::Children => self.children(to, timeout).await,
            Req::Watch { name, .. } => {
                let path = format!("{DIR}/{name}");
                let deleted = (jute::OP_EXISTS, jute::EVENT_NODE_DELETED);
                self.watch(to, &path, deleted, timeout).await
            }
            Req::WatchChildren { .. } => {
                let changed = (jute::OP_GET_CHILDREN, jute::EVENT_NODE_CHILDREN_CHANGED);
                self.watch(to, DIR, changed, timeout).await
            }
            Req::Delete { name } => self.delete(to, &name, timeout).await,
            Req::AwaitClose { session } => self.await_close(to, session, timeout).await,
        };
        match result {
            Ok(resp) => Some(resp),
            Err(Failed::Expired) => Some(Resp::Expired),
            Err(Failed::NoAnswer) => None,
        }
    }

    /// A new session on server `to` (the lock's directory made, if it is not there yet).
    async fn create_session(&self, to: NodeIdx, timeout_ms: u64, wait: Duration) -> Option<Resp> {
        let timeout = Duration::from_millis(timeout_ms);
        let hello = jute::Hello {
            id: 0,
            passwd: vec![0; 16],
            last_zxid: 0,
            timeout,
        };
        let Attach::Attached((stream, id, passwd)) = connect(self.servers[&to], hello, wait).await
        else {
            return None;
        };
        let conn = Conn::start(stream, &self.ctx, self.last_zxid.clone()).ok()?;
        if let Some(old) = self.conn.borrow_mut().replace(conn.clone()) {
            old.close();
        }
        *self.session.borrow_mut() = Some(Session {
            id,
            passwd,
            timeout,
        });
        self.at.set(Some(to));
        let (err, _) = conn
            .request(jute::OP_CREATE, jute::create_body(DIR, 0), wait)
            .await?;
        if err != 0 && err != jute::ERR_NODE_EXISTS {
            return None;
        }
        Some(Resp::Session(id as u64))
    }

    /// The session's connection: the one it is attached to if it is up and was heard from
    /// within two thirds of the session timeout, else a new one to server `to` carrying the
    /// session (`Expired` if the server says it expired).
    async fn conn(
        &self,
        to: NodeIdx,
        session: Option<u64>,
        wait: Duration,
    ) -> Result<Rc<Conn>, Failed> {
        let hello = match self.session.borrow().as_ref() {
            Some(s) if session.is_none_or(|asked| asked == s.id as u64) => jute::Hello {
                id: s.id,
                passwd: s.passwd.clone(),
                last_zxid: self.last_zxid.get(),
                timeout: s.timeout,
            },
            Some(_) | None => return Err(Failed::Expired),
        };
        let current = self.conn.borrow().clone();
        if let Some(conn) = current {
            if conn.up() && self.ctx.mono_now() < conn.heard.get() + hello.timeout * 2 / 3 {
                return Ok(conn);
            }
            conn.close();
            *self.conn.borrow_mut() = None;
        }
        let stream = match connect(self.servers[&to], hello, wait).await {
            Attach::Attached((stream, _, _)) => stream,
            Attach::Expired => {
                *self.session.borrow_mut() = None;
                return Err(Failed::Expired);
            }
            Attach::NoAnswer => return Err(Failed::NoAnswer),
        };
        let conn = Conn::start(stream, &self.ctx, self.last_zxid.clone());
        let conn = conn.map_err(|_| Failed::NoAnswer)?;
        let name = |i| self.ctx.node_name(i);
        self.ctx.note(match self.at.replace(Some(to)) {
            Some(from) if from != to => {
                format!("session moved from {} to {}", name(from), name(to))
            }
            _ => format!("session back on {} (no other server took it)", name(to)),
        });
        *self.conn.borrow_mut() = Some(conn.clone());
        Ok(conn)
    }

    /// `Expired` if the server closes the session's connection within `wait` and a
    /// reconnection hears the session expired (kazoo in `select` on its socket); nothing is
    /// sent before that, not even a ping.
    async fn await_close(&self, to: NodeIdx, session: u64, wait: Duration) -> Result<Resp, Failed> {
        let current = self.conn.borrow().clone();
        let Some(conn) = current.filter(|c| c.up()) else {
            tokio::time::sleep(wait).await;
            return Err(Failed::NoAnswer);
        };
        if tokio::time::timeout(wait, conn.closed()).await.is_err() {
            return Err(Failed::NoAnswer);
        }
        // The connection ended: reconnecting says whether the session lives.
        self.conn(to, Some(session), wait).await?;
        Err(Failed::NoAnswer)
    }

    async fn ping(&self, to: NodeIdx, session: u64, wait: Duration) -> Result<Resp, Failed> {
        let conn = self.conn(to, Some(session), wait).await?;
        conn.ping(wait).await.ok_or(Failed::NoAnswer)?;
        Ok(Resp::Pong)
    }

    async fn create(
        &self,
        to: NodeIdx,
        session: u64,
        persistent: bool,
        guid: Option<String>,
        wait: Duration,
    ) -> Result<Resp, Failed> {
        let conn = self.conn(to, Some(session), wait).await?;
        let path = format!("{DIR}/{}", tree::node_prefix(guid.as_deref()));
        let flags = if persistent {
            jute::PERSISTENT_SEQUENTIAL
        } else {
            jute::EPHEMERAL_SEQUENTIAL
        };
        let mut unanswered = Unanswered {
            ctx: &self.ctx,
            to,
            answered: false,
        };
        let (err, body) = conn
            .request(jute::OP_CREATE, jute::create_body(&path, flags), wait)
            .await
            .ok_or(Failed::NoAnswer)?;
        unanswered.answered = true;
        match err {
            0 => {}
            jute::ERR_SESSION_EXPIRED => return Err(Failed::Expired),
            _ => return Err(Failed::NoAnswer),
        }
        let created = In(&body).string().ok_or(Failed::NoAnswer)?;
        let name = created.trim_start_matches(&format!("{DIR}/")).to_owned();
        let seq = jute::sequence(&name).ok_or(Failed::NoAnswer)?;
        Ok(Resp::Created(name, seq))
    }

    /// The lock's children sorted by sequence, and the zxid read at.
    async fn children(&self, to: NodeIdx, wait: Duration) -> Result<Resp, Failed> {
        let conn = self.conn(to, None, wait).await?;
        let body = Out::default().string(DIR).boolean(false);
        let (zxid, err, reply) = conn
            .request_zxid(jute::OP_GET_CHILDREN, body, wait)
            .await
            .ok_or(Failed::NoAnswer)?;
        if err != 0 {
            return Err(Failed::NoAnswer);
        }
        let mut r = In(&reply);
        let n = r.int().ok_or(Failed::NoAnswer)?.max(0);
        let mut children: Vec<(String, u64)> = (0..n)
            .filter_map(|_| r.string())
            .filter_map(|name| Some((name.clone(), jute::sequence(&name)?)))
            .collect();
        children.sort_by_key(|(_, seq)| *seq);
        Ok(Resp::Children(children, zxid.max(0) as u64))
    }

    /// Sets a one-shot watch on `path` with `op` (`exists`: a node deleted, `getChildren`:
    /// the children changed) and answers `Gone` when its `event` fires, or at once if
    /// `exists` finds the node gone.
    async fn watch(
        &self,
        to: NodeIdx,
        path: &str,
        (op, event): (i32, i32),
        wait: Duration,
    ) -> Result<Resp, Failed> {
        let conn = self.conn(to, None, wait).await?;
        let fired = conn.watch(path, event);
        let body = Out::default().string(path).boolean(true);
        let (err, _) = conn.request(op, body, wait).await.ok_or(Failed::NoAnswer)?;
        if op == jute::OP_EXISTS && err == jute::ERR_NO_NODE {
            return Ok(Resp::Gone);
        }
        fired.await.map_err(|_| Failed::NoAnswer)?;
        Ok(Resp::Gone)
    }

    async fn delete(&self, to: NodeIdx, name: &str, wait: Duration) -> Result<Resp, Failed> {
        let conn = self.conn(to, None, wait).await?;
        let body = Out::default().string(&format!("{DIR}/{name}")).int(-1);
        let (err, _) = conn
            .request(jute::OP_DELETE, body, wait)
            .await
            .ok_or(Failed::NoAnswer)?;
        match err {
            // A node already gone is deleted all the same, as the model answers.
            0 | jute::ERR_NO_NODE => Ok(Resp::Deleted),
            jute::ERR_SESSION_EXPIRED => Err(Failed::Expired),
            _ => Err(Failed::NoAnswer),
        }
    }
}

/// What a server answers a connection carrying a session.
enum Attach {
    /// The stream, the session's id and password.
    Attached((std::net::TcpStream, i64, Vec<u8>)),
    /// The session expired.
    Expired,
    /// No answer in time (a server down, cut off or paused).
    NoAnswer,
}

/// Connects to `addr` and attaches the session `hello` names (a new one for id 0), on a
/// blocking thread of the executor.
async fn connect(addr: SocketAddr, hello: jute::Hello, wait: Duration) -> Attach {
    let attached = tokio::task::spawn_blocking(move || jute::connect(addr, &hello, wait));
    match tokio::time::timeout(wait, attached).await {
        Ok(Ok(Ok(Some(attached)))) => Attach::Attached(attached),
        Ok(Ok(Ok(None))) => Attach::Expired,
        _ => Attach::NoAnswer,
    }
}

/// A reply: its zxid, error code and body.
type Reply = (i64, i32, Vec<u8>);

/// One connection a session is attached to: written in the caller's step, read by a task.
struct Conn {
    stream: std::net::TcpStream,
    ctx: NodeCtx,
    last_zxid: Rc<Cell<i64>>,
    next_xid: Cell<i32>,
    pending: RefCell<BTreeMap<i32, oneshot::Sender<Reply>>>,
    pings: RefCell<Vec<oneshot::Sender<()>>>,
    watches: RefCell<Vec<(String, i32, oneshot::Sender<()>)>>,
    /// Waiters for the connection's end, woken when it ends (their senders dropped).
    closers: RefCell<Vec<oneshot::Sender<()>>>,
    heard: Cell<Duration>,
    reader: RefCell<Option<tokio::task::JoinHandle<()>>>,
}

impl Conn {
    fn start(
        stream: std::net::TcpStream,
        ctx: &NodeCtx,
        last_zxid: Rc<Cell<i64>>,
    ) -> std::io::Result<Rc<Conn>> {
        stream.set_nonblocking(true)?;
        let reading = TcpStream::from_std(stream.try_clone()?)?;
        let conn = Rc::new(Conn {
            stream,
            ctx: ctx.clone(),
            last_zxid,
            next_xid: Cell::new(1),
            pending: RefCell::default(),
            pings: RefCell::default(),
            watches: RefCell::default(),
            closers: RefCell::default(),
            heard: Cell::new(ctx.mono_now()),
            reader: RefCell::default(),
        });
        let reader =
            tokio::task::spawn_local(read_loop(Rc::downgrade(&conn), BufReader::new(reading)));
        *conn.reader.borrow_mut() = Some(reader);
        Ok(conn)
    }

    fn up(&self) -> bool {
        self.reader
            .borrow()
            .as_ref()
            .is_some_and(|r| !r.is_finished())
    }

    fn close(&self) {
        if let Some(reader) = self.reader.borrow_mut().take() {
            reader.abort();
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        // The aborted reader cannot fail them: a watch armed on this connection would
        // otherwise wait for good (its future holds the connection) after the session moved.
        self.fail_waiting();
    }

    /// Drops every request, ping and watch waiting on this connection: their futures end
    /// with no answer, and the model's client asks again on the session's next connection.
    fn fail_waiting(&self) {
        self.pending.borrow_mut().clear();
        self.pings.borrow_mut().clear();
        self.watches.borrow_mut().clear();
        self.closers.borrow_mut().clear();
    }

    /// Until the connection ends (the server closed it, or it was closed here).
    fn closed(&self) -> impl std::future::Future<Output = ()> {
        let (tx, rx) = oneshot::channel();
        let mut closers = self.closers.borrow_mut();
        // Waiters that gave up (timed out) are forgotten, not kept until the connection ends.
        closers.retain(|waiter| !waiter.is_canceled());
        closers.push(tx);
        async move {
            let _ = rx.await;
        }
    }

    fn send(&self, frame: Vec<u8>) -> bool {
        std::io::Write::write_all(&mut &self.stream, &frame).is_ok()
    }

    /// One request: the reply's zxid, error code and body; `None` if none came in `wait`.
    async fn request_zxid(&self, op: i32, body: Out, wait: Duration) -> Option<Reply> {
        let xid = self.next_xid.get();
        self.next_xid.set(xid + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(xid, tx);
        if !self.send(jute::frame(xid, op, body)) {
            self.pending.borrow_mut().remove(&xid);
            return None;
        }
        let answer = tokio::time::timeout(wait, rx).await;
        self.pending.borrow_mut().remove(&xid);
        answer.ok()?.ok()
    }

    async fn request(&self, op: i32, body: Out, wait: Duration) -> Option<(i32, Vec<u8>)> {
        let (_, err, body) = self.request_zxid(op, body, wait).await?;
        Some((err, body))
    }

    async fn ping(&self, wait: Duration) -> Option<()> {
        let (tx, rx) = oneshot::channel();
        self.pings.borrow_mut().push(tx);
        if !self.send(jute::frame(jute::XID_PING, jute::OP_PING, Out::default())) {
            return None;
        }
        tokio::time::timeout(wait, rx).await.ok()?.ok()
    }

    /// Fires when an event of `kind` on `path` arrives on this connection.
    fn watch(&self, path: &str, kind: i32) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.watches.borrow_mut().push((path.to_owned(), kind, tx));
        rx
    }

    /// Hands a frame to whoever waits for it.
    fn take(&self, frame: &[u8]) {
        self.heard.set(self.ctx.mono_now());
        let mut r = In(frame);
        let (Some(xid), Some(zxid), Some(err)) = (r.int(), r.long(), r.int()) else {
            return;
        };
        self.last_zxid.set(self.last_zxid.get().max(zxid));
        match xid {
            jute::XID_PING => {
                for ping in self.pings.borrow_mut().drain(..) {
                    let _ = ping.send(());
                }
            }
            jute::XID_WATCH => {
                let (Some(kind), _, Some(path)) = (r.int(), r.int(), r.string()) else {
                    return;
                };
                let mut watches = self.watches.borrow_mut();
                for (_, _, tx) in watches.extract_if(.., |(p, k, _)| *p == path && *k == kind) {
                    let _ = tx.send(());
                }
            }
            _ => {
                if let Some(tx) = self.pending.borrow_mut().remove(&xid) {
                    let _ = tx.send((zxid, err, r.0.to_vec()));
                }
            }
        }
    }
}

/// Reads frames until the connection ends; every waiter then fails at once.
async fn read_loop(conn: std::rc::Weak<Conn>, mut reader: BufReader<TcpStream>) {
    loop {
        let mut len = [0u8; 4];
        if reader.read_exact(&mut len).await.is_err() {
            break;
        }
        let mut frame = vec![0; i32::from_be_bytes(len).max(0) as usize];
        if reader.read_exact(&mut frame).await.is_err() {
            break;
        }
        let Some(conn) = conn.upgrade() else { return };
        conn.take(&frame);
    }
    if let Some(conn) = conn.upgrade() {
        conn.fail_waiting();
    }
}
