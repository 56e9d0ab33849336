//! Request/response over the simulated network, with timeouts on the caller's own clock;
//! connections with server push and loss notices.
//!
//! One [`endpoint`] per node and message family both calls and serves: a pump task routes
//! responses to the call waiting for them (late or duplicate responses are dropped, as a
//! real client drops replies to requests it gave up on) and requests to the node's request
//! stream. Calls may run concurrently (Redlock asks all its masters at once).
//!
//! # Sessions and server push
//! A client that needs to hear from a server unasked (a watch firing, a lease revoked, a
//! session expired) or to know when it can no longer reach it opens a [`Connection`] with
//! [`Caller::connect`]. The server sends on it with [`Caller::push`] (to the client's node;
//! a push reaches the connection that client has open to this server). The connection
//! pings the server every `heartbeat` (the server's pump answers by itself, while the
//! server runs: a paused or crashed server does not) and reports:
//! - [`ConnEvent::Push`]: what the server pushed;
//! - [`ConnEvent::Lost`]: no answer for `timeout` (a partition, a pause, a crash), or the
//!   server restarted (a new incarnation: the connection was reset);
//! - [`ConnEvent::Restored`]: answers again (after a lost connection, a restart).
//!
//! This is ZooKeeper's client view (`Disconnected`, `SyncConnected`; the server's own
//! session timer decides `Expired`, and says so by a push) and what an etcd client's lease
//! keep-alive stream sees. What the server does with sessions (expiry by its own clock,
//! keep-alive requests) is the protocol's: requests on the same endpoint.
//!
//! ```text
//! // client side, in a LockClient
//! let mut conn = caller.connect(server, Duration::from_millis(100), Duration::from_millis(400));
//! while let Some(event) = conn.try_next() {
//!     match event {
//!         ConnEvent::Push(Resp::SessionExpired) => self.lost = Some("session expired".into()),
//!         ConnEvent::Lost => self.suspended_since = Some(ctx.mono_now()),
//!         ConnEvent::Restored => self.suspended_since = None,
//!         ConnEvent::Push(_) => {}
//!     }
//! }
//! // server side, in its request loop
//! caller.push(client, Resp::SessionExpired);
//! ```

use crate::env::LocalFuture;
use crate::mailbox::{self, Receiver, Sender};
use crate::net::{Inbox, Net};
use crate::world::{NodeCtx, NodeIdx};
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::StreamExt;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// What travels on the wire.
#[derive(Clone, Debug)]
pub enum Wire<Req, Resp> {
    /// A request, numbered by its caller.
    Request {
        /// The caller's number for this request.
        id: u64,
        /// The request.
        body: Req,
    },
    /// The response to request `id`.
    Response {
        /// The request's number.
        id: u64,
        /// The response.
        body: Resp,
    },
    /// Server → client, unasked (see [`Caller::push`]).
    Push {
        /// What the server says.
        body: Resp,
    },
    /// A connection's keep-alive, client → server.
    Ping,
    /// The server's answer to a ping, with its incarnation (a restart resets connections).
    Pong {
        /// The number of the server's incarnation (bumped by every crash).
        incarnation: u64,
    },
}

/// A request as a server sees it.
#[derive(Debug)]
pub struct Request<Req> {
    /// Who asked.
    pub from: NodeIdx,
    /// The caller's number (pass it back to [`Caller::reply`]).
    pub id: u64,
    /// The request.
    pub body: Req,
}

/// Why a call returned no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// No response within the timeout, or none at all: the connection was refused or reset
    /// (the server's process is gone, [`crate::World::refuses`], or died while the call
    /// waited), as a live link's failing connect or broken connection is too. The request
    /// may or may not have taken effect: a caller cannot tell a reset before the request
    /// from one after it.
    #[error("timed out")]
    Timeout,
}

/// What a [`Connection`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent<Resp> {
    /// The server pushed this.
    Push(Resp),
    /// The server stopped answering, or restarted.
    Lost,
    /// The server answers again.
    Restored,
}

/// A connection's state, shared by the pump and its keep-alive task.
struct ConnState<Resp> {
    events: UnboundedSender<ConnEvent<Resp>>,
    /// When the server last answered a ping (local monotonic time).
    heard: Duration,
    /// The server's incarnation at its last answer.
    incarnation: Option<u64>,
    up: bool,
}

type Conns<Resp> = Rc<RefCell<BTreeMap<NodeIdx, ConnState<Resp>>>>;

/// A client's connection to one server: pushes and loss notices, in order.
pub struct Connection<Resp> {
    events: UnboundedReceiver<ConnEvent<Resp>>,
    up: bool,
}

impl<Resp> Connection<Resp> {
    /// The next event, waiting for it (`None` once the node restarted its endpoint).
    pub async fn next(&mut self) -> Option<ConnEvent<Resp>> {
        let event = self.events.next().await;
        self.track(&event);
        event
    }

    /// The next event already received, without waiting.
    pub fn try_next(&mut self) -> Option<ConnEvent<Resp>> {
        let event = self.events.try_recv().ok();
        self.track(&event);
        event
    }

    /// Whether the connection was up after the last event taken from it.
    pub fn is_up(&self) -> bool {
        self.up
    }

    fn track(&mut self, event: &Option<ConnEvent<Resp>>) {
        match event {
            Some(ConnEvent::Lost) => self.up = false,
            Some(ConnEvent::Restored) => self.up = true,
            _ => {}
        }
    }
}

/// A watch on a client's connection to one server ([`Caller::watch_close`]).
pub struct CloseWatch {
    server: NodeIdx,
    backing: CloseBacking,
}

enum CloseBacking {
    Sim {
        world: crate::World,
        me: NodeIdx,
        key: u64,
        /// `None` once it fired, or was dropped unsent (cut off: never).
        reset: Option<oneshot::Receiver<()>>,
        /// When the close is heard (true time), once the server's process died.
        heard_at_ns: Option<u64>,
    },
    /// `None` once the connection closed.
    Live(Option<LocalFuture<'static, ()>>),
}

impl CloseWatch {
    /// `me`'s watch on its connection to `server` in the simulator.
    fn sim(world: crate::World, me: NodeIdx, server: NodeIdx) -> CloseWatch {
        let (key, reset) = world.watch_reset(me, server);
        let backing = CloseBacking::Sim {
            world,
            me,
            key,
            reset: Some(reset),
            heard_at_ns: None,
        };
        CloseWatch { server, backing }
    }

    /// The server whose connection is watched.
    pub fn server(&self) -> NodeIdx {
        self.server
    }

    /// Ends when the server's side closes the connection (never if this node is cut off
    /// from the server when its process dies): the server's node. Dropped before it ended
    /// and called again, it goes on where it was.
    pub async fn closed(&mut self) -> NodeIdx {
        self.reset().await;
        if let Some(wait) = self.heard_in() {
            madsim::time::sleep(wait).await;
        }
        self.server
    }

    /// In the simulator, once the death is known ([`CloseWatch::reset`]), how long until
    /// the close is heard: until what the server sent before could have arrived. `None` live
    /// (the close is heard as it happens) or before the death.
    fn heard_in(&self) -> Option<Duration> {
        match &self.backing {
            CloseBacking::Sim {
                world,
                heard_at_ns: Some(at_ns),
                ..
            } => Some(Duration::from_nanos(at_ns.saturating_sub(world.now_ns()))),
            _ => None,
        }
    }

    /// Ends as soon as the connection is known to close: live, when it closed; in the
    /// simulator, when the server's process died, before what it sent before has arrived
    /// ([`CloseWatch::closed`] waits for that too).
    async fn reset(&mut self) {
        match &mut self.backing {
            CloseBacking::Live(closed) => {
                if let Some(future) = closed.as_mut() {
                    future.as_mut().await;
                    *closed = None;
                }
            }
            CloseBacking::Sim {
                world,
                me,
                reset,
                heard_at_ns,
                ..
            } => {
                if heard_at_ns.is_some() {
                    return;
                }
                let heard = match reset.as_mut() {
                    Some(rx) => rx.await.is_ok(),
                    None => false,
                };
                *reset = None;
                if !heard {
                    // A reset dropped unsent (cut off from the dying server) never comes.
                    futures::future::pending::<()>().await;
                }
                let wait = world.reset_wait(self.server, *me).as_nanos() as u64;
                *heard_at_ns = Some(world.now_ns() + wait);
            }
        }
    }
}

impl Drop for CloseWatch {
    fn drop(&mut self) {
        if let CloseBacking::Sim {
            world, key, reset, ..
        } = &mut self.backing
        {
            // The receiver goes before its sender does: still waiting, it would be woken
            // once more, a scheduling draw that would move every run's stream (as a call's).
            drop(reset.take());
            world.unwatch_reset(self.server, *key);
        }
    }
}

/// The calling half of an endpoint. Cheap to clone; all clones share one inbox.
///
/// The other half of the seam a client library is written against ([`crate::env`]): in
/// the simulator its requests cross the simulated network; in live mode ([`Caller::live`])
/// a [`LiveLink`] sends them to a real server over a real socket.
pub struct Caller<Req, Resp>(CallerBacking<Req, Resp>);

enum CallerBacking<Req, Resp> {
    Sim(SimCaller<Req, Resp>),
    Live(Rc<dyn LiveLink<Req, Resp>>),
}

struct SimCaller<Req, Resp> {
    net: Net<Wire<Req, Resp>>,
    ctx: NodeCtx,
    pending: Rc<RefCell<BTreeMap<u64, oneshot::Sender<Resp>>>>,
    next_id: Rc<Cell<u64>>,
    conns: Conns<Resp>,
}

impl<Req, Resp> SimCaller<Req, Resp> {
    /// The reply to a call, if it comes within `timeout`. If the server's process dies
    /// first (`close`, [`CloseWatch::reset`]), its host closes the connection: what
    /// it sent before still arrives first (TCP keeps the order), so the call ends once that
    /// could have come, the link's largest latency after the death, not at its timeout.
    async fn answer(
        &self,
        rx: oneshot::Receiver<Resp>,
        mut close: CloseWatch,
        timeout: Duration,
    ) -> Option<Resp> {
        // No allocation: a call is a hot path.
        let after_reset = {
            let reset = std::pin::pin!(close.reset());
            match self.ctx.timeout_local(timeout, select(rx, reset)).await {
                Some(Either::Left((reply, _))) => return reply.ok(),
                Some(Either::Right(((), rx))) => rx,
                None => return None,
            }
        };
        // Reset: what the server sent before the death still arrives first (TCP keeps the
        // order).
        let wait = close.heard_in().unwrap_or_default();
        madsim::time::timeout(wait, after_reset).await.ok()?.ok()
    }
}

impl<Req, Resp> Clone for Caller<Req, Resp> {
    fn clone(&self) -> Self {
        Caller(match &self.0 {
            CallerBacking::Sim(c) => CallerBacking::Sim(SimCaller {
                net: c.net.clone(),
                ctx: c.ctx.clone(),
                pending: c.pending.clone(),
                next_id: c.next_id.clone(),
                conns: c.conns.clone(),
            }),
            CallerBacking::Live(link) => CallerBacking::Live(link.clone()),
        })
    }
}

/// A live client's requests to real servers, in place of the simulated network: what
/// [`Caller::live`] sends through. Node indexes name the servers as the protocol's client
/// knows them (the index the live deployment gave each).
pub trait LiveLink<Req, Resp> {
    /// Sends `body` to server `to` and waits for its reply at most `timeout` (real time).
    fn call(
        &self,
        to: NodeIdx,
        body: Req,
        timeout: Duration,
    ) -> LocalFuture<'static, Result<Resp, RpcError>>;
    /// Sends `body` to server `to` without waiting for a reply.
    fn notify(&self, to: NodeIdx, body: Req);
    /// Ends when the connection this client holds to server `to` is closed by the server's
    /// side ([`Caller::unless_closed`]); never, if the link holds none to it.
    fn closed(&self, to: NodeIdx) -> LocalFuture<'static, ()> {
        let _ = to;
        Box::pin(futures::future::pending())
    }
}

/// Requests fanned out to several servers and their replies read from one inbox, as a
/// client reading its sockets does (Redlock asks every master at once and reads whatever has
/// arrived before it looks at the clock). The caller numbers its requests; a reply comes
/// back with its request's number.
pub struct Mux<Req, Resp>(MuxBacking<Req, Resp>);

enum MuxBacking<Req, Resp> {
    Sim {
        net: Net<Wire<Req, Resp>>,
        inbox: Inbox<Wire<Req, Resp>>,
        ctx: NodeCtx,
    },
    Live(Box<dyn LiveMux<Req, Resp>>),
}

/// Live mode's [`Mux`]: requests to real servers, replies gathered in arrival order.
pub trait LiveMux<Req, Resp> {
    /// Sends request `id` to server `to`.
    fn send(&mut self, to: NodeIdx, id: u64, body: Req);
    /// A reply already received, if any: its request's number and body.
    fn try_recv(&mut self) -> Option<(u64, Resp)>;
    /// The next reply.
    fn next(&mut self) -> LocalFuture<'_, Option<(u64, Resp)>>;
}

impl<Req, Resp> Mux<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + 'static,
{
    /// Sends request `id` to server `to`.
    pub fn send(&mut self, to: NodeIdx, id: u64, body: Req) {
        match &mut self.0 {
            MuxBacking::Sim { net, ctx, .. } => net.send(ctx.idx(), to, Wire::Request { id, body }),
            MuxBacking::Live(live) => live.send(to, id, body),
        }
    }

    /// A reply already received, if any (what is not a reply is passed over).
    pub fn try_recv(&mut self) -> Option<(u64, Resp)> {
        match &mut self.0 {
            MuxBacking::Sim { inbox, .. } => loop {
                if let Wire::Response { id, body } = inbox.try_recv()?.msg {
                    return Some((id, body));
                }
            },
            MuxBacking::Live(live) => live.try_recv(),
        }
    }

    /// The next reply; `None` if the inbox closed.
    pub async fn next(&mut self) -> Option<(u64, Resp)> {
        match &mut self.0 {
            MuxBacking::Sim { inbox, .. } => loop {
                if let Wire::Response { id, body } = inbox.next().await?.msg {
                    return Some((id, body));
                }
            },
            MuxBacking::Live(live) => live.next().await,
        }
    }
}

/// How a protocol's clients reach its servers: the simulated network, or in live mode real
/// sockets ([`LiveLinks`]).
pub enum Links<Req, Resp> {
    /// The simulated network the servers listen on.
    Sim(Net<Wire<Req, Resp>>),
    /// Live mode: real servers.
    Live(Arc<dyn LiveLinks<Req, Resp>>),
}

/// Live mode's links to a protocol's real servers, for each client start.
pub trait LiveLinks<Req, Resp>: Send + Sync {
    /// A caller for client node `ctx`.
    fn caller(&self, ctx: &NodeCtx) -> Caller<Req, Resp>;
    /// A fan-out inbox for client node `ctx`. Only a client that fans out asks for one
    /// (Redlock); links whose client asks one server at a time keep this default.
    fn mux(&self, ctx: &NodeCtx) -> Box<dyn LiveMux<Req, Resp>> {
        let _ = ctx;
        panic!("this protocol's client asks one server at a time: its links have no fan-out inbox")
    }
}

impl<Req, Resp> Clone for Links<Req, Resp> {
    fn clone(&self) -> Self {
        match self {
            Links::Sim(net) => Links::Sim(net.clone()),
            Links::Live(live) => Links::Live(live.clone()),
        }
    }
}

impl<Req, Resp> Links<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + 'static,
{
    /// The caller of client node `ctx` (call at every start of the node).
    pub fn caller(&self, ctx: &NodeCtx) -> Caller<Req, Resp> {
        match self {
            Links::Sim(net) => endpoint(net, ctx).0,
            Links::Live(live) => live.caller(ctx),
        }
    }

    /// The fan-out inbox of client node `ctx` (call at every start of the node).
    pub fn mux(&self, ctx: &NodeCtx) -> Mux<Req, Resp> {
        Mux(match self {
            Links::Sim(net) => MuxBacking::Sim {
                net: net.clone(),
                inbox: net.bind(ctx),
                ctx: ctx.clone(),
            },
            Links::Live(live) => MuxBacking::Live(live.mux(ctx)),
        })
    }
}

/// The stream of requests sent to this node.
pub type Requests<Req> = Receiver<Request<Req>>;

/// Binds this node to a message family: returns its caller and its request stream. Call at
/// every (re)start of the node.
pub fn endpoint<Req, Resp>(
    net: &Net<Wire<Req, Resp>>,
    ctx: &NodeCtx,
) -> (Caller<Req, Resp>, Requests<Req>)
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + 'static,
{
    let mut inbox = net.bind(ctx);
    let pending: Rc<RefCell<BTreeMap<u64, oneshot::Sender<Resp>>>> = Rc::default();
    let conns: Conns<Resp> = Rc::default();
    let (tx, rx): (Sender<Request<Req>>, _) = mailbox::channel();
    let (routes, to_conns, pump_net, pump_ctx) =
        (pending.clone(), conns.clone(), net.clone(), ctx.clone());
    ctx.spawn(async move {
        while let Some(envelope) = inbox.next().await {
            let from = envelope.from;
            match envelope.msg {
                Wire::Request { id, body } => {
                    let _ = tx.send(Request { from, id, body });
                }
                Wire::Response { id, body } => {
                    if let Some(waiter) = routes.borrow_mut().remove(&id) {
                        let _ = waiter.send(body);
                    }
                }
                Wire::Ping => {
                    let incarnation = pump_ctx.incarnation();
                    pump_net.send(pump_ctx.idx(), from, Wire::Pong { incarnation });
                }
                Wire::Pong { incarnation } => {
                    pong(&to_conns, from, incarnation, pump_ctx.mono_now());
                }
                Wire::Push { body } => {
                    if let Some(c) = to_conns.borrow().get(&from) {
                        let _ = c.events.unbounded_send(ConnEvent::Push(body));
                    }
                }
            }
        }
    });
    let caller = Caller(CallerBacking::Sim(SimCaller {
        net: net.clone(),
        ctx: ctx.clone(),
        pending,
        next_id: Rc::new(Cell::new(0)),
        conns,
    }));
    (caller, rx)
}

/// A server answered a connection's ping.
fn pong<Resp>(conns: &Conns<Resp>, from: NodeIdx, incarnation: u64, now: Duration) {
    let mut conns = conns.borrow_mut();
    let Some(c) = conns.get_mut(&from) else {
        return;
    };
    let restarted = c.incarnation.is_some_and(|i| i != incarnation);
    if c.up && restarted {
        // The server restarted between two pings: the connection was reset.
        let _ = c.events.unbounded_send(ConnEvent::Lost);
        c.up = false;
    }
    if !c.up {
        let _ = c.events.unbounded_send(ConnEvent::Restored);
        c.up = true;
    }
    c.heard = now;
    c.incarnation = Some(incarnation);
}

impl<Req, Resp> Caller<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + 'static,
{
    /// A live client's caller: its requests go through `link` to real servers.
    pub fn live(link: Rc<dyn LiveLink<Req, Resp>>) -> Self {
        Caller(CallerBacking::Live(link))
    }

    /// The simulated caller, for what only the simulator's servers and sessions do.
    fn sim(&self, what: &str) -> &SimCaller<Req, Resp> {
        match &self.0 {
            CallerBacking::Sim(this) => this,
            CallerBacking::Live(_) => {
                panic!("{what} needs the simulated network: live mode's links carry requests only")
            }
        }
    }

    /// Sends `body` to `to` and waits up to `timeout` (local monotonic time) for the answer.
    pub async fn call(&self, to: NodeIdx, body: Req, timeout: Duration) -> Result<Resp, RpcError> {
        let this = match &self.0 {
            CallerBacking::Sim(this) => this,
            CallerBacking::Live(link) => return link.call(to, body, timeout).await,
        };
        let (world, me) = (this.ctx.world(), this.ctx.idx());
        if let Some(round_trip) = world.refused_after(me, to) {
            // The server's process is gone and its host resets the connection: the caller
            // hears so after a round trip, not at its timeout. The attempt is still sent
            // (counted, as a message to a dead node, no draw).
            this.net.send(me, to, Wire::Request { id: u64::MAX, body });
            madsim::time::sleep(round_trip).await;
            return Err(RpcError::Timeout);
        }
        let id = this.next_id.get();
        this.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        this.pending.borrow_mut().insert(id, tx);
        let close = CloseWatch::sim(world.clone(), me, to);
        this.net.send(me, to, Wire::Request { id, body });
        let answer = this.answer(rx, close, timeout).await;
        this.pending.borrow_mut().remove(&id);
        answer.ok_or(RpcError::Timeout)
    }

    /// A watch on this node's connection to `server`: [`CloseWatch::closed`] ends when the
    /// server's side closes it. In the simulator it closes when the server's process dies
    /// and this node is not cut off from it (its host resets the connection, as for a call,
    /// [`crate::World::watch_reset`]), heard once what the server sent before could have
    /// arrived; live, when the link's connection to it ends ([`LiveLink::closed`]). Kept
    /// across many waits, it costs nothing per wait; dropped, it is forgotten.
    pub fn watch_close(&self, server: NodeIdx) -> CloseWatch {
        let backing = match &self.0 {
            CallerBacking::Live(link) => CloseBacking::Live(Some(link.closed(server))),
            CallerBacking::Sim(this) => {
                return CloseWatch::sim(this.ctx.world().clone(), this.ctx.idx(), server);
            }
        };
        CloseWatch { server, backing }
    }

    /// Runs `future` unless the connection to `server` is closed by the server's side first
    /// ([`Caller::watch_close`]): `Ok` with its output, or `Err` with the server. `future` is
    /// dropped when the connection closes.
    pub async fn unless_closed<F: Future>(
        &self,
        server: NodeIdx,
        future: F,
    ) -> Result<F::Output, NodeIdx> {
        let mut watch = self.watch_close(server);
        // A death known wins over `future`, though what the server sent before is still on
        // its way: the close is waited for after `future` is dropped.
        {
            let reset = std::pin::pin!(watch.reset());
            if let Either::Left((output, _)) = select(std::pin::pin!(future), reset).await {
                return Ok(output);
            }
        }
        Err(watch.closed().await)
    }

    /// Answers request `id` from `to`.
    pub fn reply(&self, to: NodeIdx, id: u64, body: Resp) {
        let this = self.sim("a reply");
        this.net
            .send(this.ctx.idx(), to, Wire::Response { id, body });
    }

    /// Sends a request without waiting for (or accepting) an answer.
    pub fn notify(&self, to: NodeIdx, body: Req) {
        let this = match &self.0 {
            CallerBacking::Sim(this) => this,
            CallerBacking::Live(link) => return link.notify(to, body),
        };
        this.net
            .send(this.ctx.idx(), to, Wire::Request { id: u64::MAX, body });
    }

    /// Server side: sends `body` unasked to the connection `to` has open to this node (it is
    /// lost if there is none, or on the way, like any message).
    pub fn push(&self, to: NodeIdx, body: Resp) {
        let this = self.sim("a server push");
        this.net.send(this.ctx.idx(), to, Wire::Push { body });
    }

    /// Opens a connection to `server` (replacing an earlier one to it): pings it every
    /// `heartbeat` and reports it lost when it has not answered for `timeout` (both on this
    /// node's monotonic clock). The connection starts up.
    pub fn connect(
        &self,
        server: NodeIdx,
        heartbeat: Duration,
        timeout: Duration,
    ) -> Connection<Resp> {
        assert!(
            !heartbeat.is_zero() && timeout >= heartbeat,
            "ping before the timeout"
        );
        let this = self.sim("a session connection");
        let (events, rx) = unbounded();
        let state = ConnState {
            events,
            heard: this.ctx.mono_now(),
            incarnation: None,
            up: true,
        };
        this.conns.borrow_mut().insert(server, state);
        let (ctx, net, conns) = (this.ctx.clone(), this.net.clone(), this.conns.clone());
        this.ctx.spawn(async move {
            loop {
                ctx.sleep_local(heartbeat).await;
                let mut all = conns.borrow_mut();
                let Some(c) = all.get_mut(&server) else {
                    return;
                };
                if c.events.is_closed() {
                    all.remove(&server); // The connection was dropped.
                    return;
                }
                if c.up && ctx.mono_now().saturating_sub(c.heard) > timeout {
                    let _ = c.events.unbounded_send(ConnEvent::Lost);
                    c.up = false;
                }
                drop(all);
                net.send(ctx.idx(), server, Wire::Ping);
            }
        });
        Connection {
            events: rx,
            up: true,
        }
    }
}
