//! Live mode's links: a client's requests to real servers over real sockets, in place of the
//! simulated network ([`locksim_sim::rpc::LiveLink`]), so that the protocols' own client
//! code runs against real servers.
//!
//! One connection per server, opened on the first request and again after it broke, with
//! requests pipelined on it and replies matched in order (as Redis's and most clients'
//! multiplexed connections do): a request that times out leaves its slot, and its late
//! reply is read and dropped, as the simulator's caller drops a reply it gave up on. A
//! connection that breaks (a killed server, a reset) fails every request waiting on it at
//! once. Two wire formats: RESP for Redis (the very commands the model builds, through
//! `Cmd::argv`) and JSON lines for locksim's resource server.

pub mod etcd;
pub mod http;
pub mod jute;
pub mod resp;
pub mod zookeeper;

use crate::deploy::replicated::MASTER_NAME;
use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use locksim_protocols::redis::sentinel::{SentinelReq, SentinelResp};
use locksim_protocols::redis::store::{Cmd, Reply};
use locksim_protocols::resource::{ResourceReq, ResourceResp};
use locksim_sim::env::LocalFuture;
use locksim_sim::rpc::{Caller, Links, LiveLink, LiveLinks, LiveMux, RpcError};
use locksim_sim::{NodeCtx, NodeIdx};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpStream;

/// A wire format: how a request is written and a reply read.
pub trait Codec: 'static {
    /// The model's request.
    type Req: Clone + Send + 'static;
    /// The model's reply.
    type Resp: Clone + Send + 'static;
    /// The request's bytes on the wire.
    fn encode(req: &Self::Req) -> Vec<u8>;
    /// Reads one reply.
    fn decode(reader: &mut BufReader<TcpStream>) -> LocalFuture<'_, io::Result<Self::Resp>>;
}

/// Requests to the servers of one protocol, pipelined on a connection per server.
pub struct Pipelined<C: Codec> {
    /// Each server's address, by the node index the client knows it by.
    addrs: BTreeMap<NodeIdx, SocketAddr>,
    conns: RefCell<BTreeMap<NodeIdx, Conn<C::Resp>>>,
}

/// Who waits for a reply.
enum Waiter<Resp> {
    /// Nobody (a notify).
    Nobody,
    /// One call.
    Call(oneshot::Sender<Resp>),
    /// A fan-out inbox, under the request's number.
    Inbox(u64, mpsc::UnboundedSender<(u64, Resp)>),
}

/// Who waits for the replies of a connection, in send order.
type Waiters<Resp> = Rc<RefCell<VecDeque<Waiter<Resp>>>>;

/// How long a connect may block the client, in ms: a loopback connect is answered at once
/// (a server killed refuses it; a proxy, even one cutting its link, accepts it).
const CONNECT_TIMEOUT_MS: u64 = 1_000;

thread_local! {
    /// Connections opened ahead of the run ([`open_ahead`]), by address: the first link to
    /// connect there takes its one instead of connecting.
    static AHEAD: RefCell<BTreeMap<SocketAddr, std::net::TcpStream>> = RefCell::default();
}

/// Opens a connection to `addr` now, before the run, for the first link to it to take.
/// For the resource, locksim's instrument (the model's has no connection to open): opened
/// at the first request, the connection waited on the client's proxy, which asks the kernel
/// who connected and dials the resource, and a client's first read timed out at 200 ms while
/// a dozen JVMs started beside the run.
pub fn open_ahead(addr: SocketAddr) -> io::Result<()> {
    assert_loopback([&addr]);
    let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
    let stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    AHEAD.with(|ahead| ahead.borrow_mut().insert(addr, stream));
    Ok(())
}

/// One open connection: written in the caller's own step, read by a task of its own.
struct Conn<Resp> {
    stream: std::net::TcpStream,
    waiting: Waiters<Resp>,
    reader: tokio::task::JoinHandle<()>,
}

impl<Resp> Drop for Conn<Resp> {
    fn drop(&mut self) {
        // Its waiters go with the reader: every request still waiting fails at once.
        self.reader.abort();
    }
}

/// Live mode talks to loopback only: any other address is a bug.
pub(crate) fn assert_loopback<'a>(addrs: impl IntoIterator<Item = &'a SocketAddr>) {
    for a in addrs {
        assert!(
            a.ip().is_loopback(),
            "live mode talks to loopback only: {a}"
        );
    }
}

impl<C: Codec> Pipelined<C> {
    /// Links to `addrs` (loopback only).
    pub fn new(addrs: BTreeMap<NodeIdx, SocketAddr>) -> Rc<Self> {
        assert_loopback(addrs.values());
        Rc::new(Pipelined {
            addrs,
            conns: RefCell::default(),
        })
    }

    /// Writes `bytes` to server `to` now, before returning (so that a named point right
    /// after a send, as Redlock's `after_acquire_send`, stops a client whose requests are
    /// on the wire, as in the simulator), opening a connection if none is up. A request
    /// that cannot be written fails at once (its waiter is dropped).
    fn send(&self, to: NodeIdx, bytes: Vec<u8>, waiter: Waiter<C::Resp>) {
        let mut conns = self.conns.borrow_mut();
        if conns.get(&to).is_some_and(|c| c.reader.is_finished()) {
            conns.remove(&to); // The connection broke: a new one.
        }
        if let std::collections::btree_map::Entry::Vacant(slot) = conns.entry(to) {
            match self.open(to) {
                Ok(conn) => slot.insert(conn),
                Err(_) => return,
            };
        }
        let conn = conns.get_mut(&to).expect("opened above");
        conn.waiting.borrow_mut().push_back(waiter);
        // Non-blocking: a kernel buffer too full to take a request (a link stalled for long)
        // breaks the connection, as a client's write timeout would.
        if std::io::Write::write_all(&mut &conn.stream, &bytes).is_err() {
            conns.remove(&to);
        }
    }

    /// Connects to server `to` and starts its reader task.
    fn open(&self, to: NodeIdx) -> io::Result<Conn<C::Resp>> {
        let addr = *self
            .addrs
            .get(&to)
            .unwrap_or_else(|| panic!("no live address for server node {to}"));
        let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
        let stream = match AHEAD.with(|ahead| ahead.borrow_mut().remove(&addr)) {
            Some(stream) => stream,
            None => std::net::TcpStream::connect_timeout(&addr, timeout)?,
        };
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let reading = TcpStream::from_std(stream.try_clone()?)?;
        let waiting = Waiters::default();
        let reader =
            tokio::task::spawn_local(read_loop::<C>(BufReader::new(reading), waiting.clone()));
        Ok(Conn {
            stream,
            waiting,
            reader,
        })
    }
}

/// Reads replies and hands each to the oldest waiter; a waiter gone (its request timed
/// out) drops its reply. Ends when the connection breaks, failing every waiter.
async fn read_loop<C: Codec>(mut reader: BufReader<TcpStream>, waiting: Waiters<C::Resp>) {
    while let Ok(reply) = C::decode(&mut reader).await {
        let Some(waiter) = waiting.borrow_mut().pop_front() else {
            break; // A reply nobody asked for: the connection is out of step.
        };
        match waiter {
            Waiter::Nobody => {}
            Waiter::Call(call) => drop(call.send(reply)),
            Waiter::Inbox(id, inbox) => drop(inbox.unbounded_send((id, reply))),
        }
    }
    waiting.borrow_mut().clear();
}

impl<C: Codec> LiveLink<C::Req, C::Resp> for Pipelined<C> {
    fn call(
        &self,
        to: NodeIdx,
        body: C::Req,
        timeout: Duration,
    ) -> LocalFuture<'static, Result<C::Resp, RpcError>> {
        let (tx, rx) = oneshot::channel();
        self.send(to, C::encode(&body), Waiter::Call(tx));
        Box::pin(async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(reply)) => Ok(reply),
                // No reply in time, or the connection broke first.
                _ => Err(RpcError::Timeout),
            }
        })
    }

    fn notify(&self, to: NodeIdx, body: C::Req) {
        self.send(to, C::encode(&body), Waiter::Nobody);
    }
}

/// Redis's RESP2: the model's commands as the argv a client sends.
pub struct Resp;

/// `argv` as a RESP array of bulk strings.
pub fn resp_bytes(argv: &[impl AsRef<str>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv.iter().map(AsRef::as_ref) {
        out.extend(format!("${}\r\n", a.len()).bytes());
        out.extend(a.bytes());
        out.extend(b"\r\n");
    }
    out
}

impl Codec for Resp {
    type Req = Cmd;
    type Resp = Reply;

    fn encode(cmd: &Cmd) -> Vec<u8> {
        let argv = cmd.argv().unwrap_or_else(|| {
            panic!("{cmd:?} has no command line: the model's server-only command")
        });
        resp_bytes(&argv)
    }

    fn decode(reader: &mut BufReader<TcpStream>) -> LocalFuture<'_, io::Result<Reply>> {
        Box::pin(read_resp(reader))
    }
}

/// Bytes from a server that make no sense, or none where some were due.
pub(crate) fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// The next line a server sent; an error at the end of the stream.
async fn next_line(reader: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    match reader.read_line(&mut line).await? {
        0 => Err(bad("connection closed")),
        _ => Ok(line),
    }
}

/// One RESP value as the model's reply; an array (which the lock recipes never read) is
/// read whole and answered as `OK`.
async fn read_resp(reader: &mut BufReader<TcpStream>) -> io::Result<Reply> {
    Ok(match resp::head(&next_line(reader).await?)? {
        resp::Head::Reply(reply) => reply,
        resp::Head::Bulk(n) => {
            let mut buf = vec![0; n + 2];
            reader.read_exact(&mut buf).await?;
            resp::bulk_text(buf)
        }
        resp::Head::Array(n) => {
            for _ in 0..n {
                Box::pin(read_resp(reader)).await?;
            }
            Reply::Ok
        }
    })
}

/// locksim's resource server: one JSON request per line, one JSON answer per line.
pub struct ResourceLines;

impl Codec for ResourceLines {
    type Req = ResourceReq;
    type Resp = ResourceResp;

    fn encode(req: &ResourceReq) -> Vec<u8> {
        let mut text = serde_json::to_string(req).expect("requests serialise");
        text.push('\n');
        text.into_bytes()
    }

    fn decode(reader: &mut BufReader<TcpStream>) -> LocalFuture<'_, io::Result<ResourceResp>> {
        Box::pin(async move {
            let line = next_line(reader).await?;
            serde_json::from_str(&line).map_err(|e| bad(e.to_string()))
        })
    }
}

/// A protocol's real servers, by the node index its client knows each by: the live side
/// of [`Links`] for codec `C`.
pub struct LinksTo<C> {
    addrs: BTreeMap<NodeIdx, SocketAddr>,
    codec: PhantomData<fn() -> C>,
}

impl<C: Codec> LinksTo<C> {
    /// Links to `addrs`, known as nodes `first`, `first + 1`, ...
    pub fn links(first: NodeIdx, addrs: &[SocketAddr]) -> Links<C::Req, C::Resp> {
        let addrs = (first..).zip(addrs.iter().copied()).collect();
        Links::Live(Arc::new(LinksTo::<C> {
            addrs,
            codec: PhantomData,
        }))
    }
}

impl<C: Codec> LiveLinks<C::Req, C::Resp> for LinksTo<C> {
    fn caller(&self, _: &NodeCtx) -> Caller<C::Req, C::Resp> {
        Caller::live(Pipelined::<C>::new(self.addrs.clone()))
    }

    fn mux(&self, _: &NodeCtx) -> Box<dyn LiveMux<C::Req, C::Resp>> {
        let (sender, replies) = mpsc::unbounded();
        Box::new(Fanout::<C> {
            link: Pipelined::new(self.addrs.clone()),
            sender,
            replies,
        })
    }
}

/// Live mode's fan-out inbox: requests pipelined on each server's connection, each reply
/// put in one inbox by the connection's reader, tagged with its request's number, as it
/// arrives.
struct Fanout<C: Codec> {
    link: Rc<Pipelined<C>>,
    sender: mpsc::UnboundedSender<(u64, C::Resp)>,
    replies: mpsc::UnboundedReceiver<(u64, C::Resp)>,
}

impl<C: Codec> LiveMux<C::Req, C::Resp> for Fanout<C> {
    fn send(&mut self, to: NodeIdx, id: u64, body: C::Req) {
        // No reply (the connection broke): nothing arrives, as a lost reply.
        let waiter = Waiter::Inbox(id, self.sender.clone());
        self.link.send(to, C::encode(&body), waiter);
    }

    fn try_recv(&mut self) -> Option<(u64, C::Resp)> {
        self.replies.try_recv().ok()
    }

    fn next(&mut self) -> LocalFuture<'_, Option<(u64, C::Resp)>> {
        Box::pin(self.replies.next())
    }
}

/// A Sentinel's answer to `SENTINEL get-master-addr-by-name`: the primary's address, if it
/// knows one.
pub struct SentinelAddr;

impl Codec for SentinelAddr {
    type Req = SentinelReq;
    type Resp = Option<SocketAddr>;

    fn encode(req: &SentinelReq) -> Vec<u8> {
        match req {
            SentinelReq::GetPrimary => {
                resp_bytes(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME])
            }
            other => panic!("{other:?} is between Sentinels: a client never sends it"),
        }
    }

    fn decode(
        reader: &mut BufReader<TcpStream>,
    ) -> LocalFuture<'_, io::Result<Option<SocketAddr>>> {
        Box::pin(async move {
            match next_line(reader).await?.trim_end() {
                "*2" => {}
                "*-1" => return Ok(None),
                other => return Err(bad(format!("unexpected Sentinel answer {other:?}"))),
            }
            let (Reply::Bulk(ip), Reply::Bulk(port)) =
                (read_resp(reader).await?, read_resp(reader).await?)
            else {
                return Err(bad("a Sentinel's address is two strings"));
            };
            Ok(format!("{ip}:{port}").parse().ok())
        })
    }
}

/// The Sentinels as a live client asks them: the model's `GetPrimary`, answered with the
/// Redis node whose announced address (its proxy) the Sentinel names.
pub struct SentinelLinks {
    /// Each Sentinel's address, by node index.
    sentinels: BTreeMap<NodeIdx, SocketAddr>,
    /// Each Redis node's address as the Sentinels name it, by node index.
    announced: BTreeMap<NodeIdx, SocketAddr>,
}

impl SentinelLinks {
    /// Links to the Sentinels at `sentinels` (nodes `first`, `first + 1`, ...), which name
    /// the Redis nodes `first_redis`, `first_redis + 1`, ... by the addresses `announced`.
    pub fn links(
        (first, sentinels): (NodeIdx, &[SocketAddr]),
        (first_redis, announced): (NodeIdx, &[SocketAddr]),
    ) -> Links<SentinelReq, SentinelResp> {
        Links::Live(Arc::new(SentinelLinks {
            sentinels: (first..).zip(sentinels.iter().copied()).collect(),
            announced: (first_redis..).zip(announced.iter().copied()).collect(),
        }))
    }
}

impl LiveLinks<SentinelReq, SentinelResp> for SentinelLinks {
    fn caller(&self, _: &NodeCtx) -> Caller<SentinelReq, SentinelResp> {
        Caller::live(Rc::new(SentinelLink {
            link: Pipelined::new(self.sentinels.clone()),
            announced: self.announced.clone(),
        }))
    }
}

struct SentinelLink {
    link: Rc<Pipelined<SentinelAddr>>,
    announced: BTreeMap<NodeIdx, SocketAddr>,
}

impl LiveLink<SentinelReq, SentinelResp> for SentinelLink {
    fn call(
        &self,
        to: NodeIdx,
        body: SentinelReq,
        timeout: Duration,
    ) -> LocalFuture<'static, Result<SentinelResp, RpcError>> {
        let asked = self.link.call(to, body, timeout);
        let announced = self.announced.clone();
        Box::pin(async move {
            // A Sentinel that knows no primary, or names a node not deployed, tells nothing.
            let addr = asked.await?.ok_or(RpcError::Timeout)?;
            let node = announced.iter().find(|(_, a)| **a == addr);
            node.map(|(idx, _)| SentinelResp::Primary(*idx))
                .ok_or(RpcError::Timeout)
        })
    }

    fn notify(&self, to: NodeIdx, body: SentinelReq) {
        self.link.notify(to, body);
    }
}
