//! Request/response over the simulated network, with timeouts on the caller's own clock.
//!
//! One [`endpoint`] per node and message family both calls and serves: a pump task routes
//! responses to the call waiting for them (late or duplicate responses are dropped, as a
//! real client drops replies to requests it gave up on) and requests to the node's request
//! stream. Calls may run concurrently (Redlock asks all its masters at once).

use crate::net::Net;
use crate::world::{NodeCtx, NodeIdx};
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::channel::oneshot;
use futures::StreamExt;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
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
    /// No response within the timeout: the request may or may not have taken effect.
    #[error("timed out")]
    Timeout,
}

/// The calling half of an endpoint. Cheap to clone; all clones share one inbox.
pub struct Caller<Req, Resp> {
    net: Net<Wire<Req, Resp>>,
    ctx: NodeCtx,
    pending: Rc<RefCell<BTreeMap<u64, oneshot::Sender<Resp>>>>,
    next_id: Rc<Cell<u64>>,
}

impl<Req, Resp> Clone for Caller<Req, Resp> {
    fn clone(&self) -> Self {
        Caller {
            net: self.net.clone(),
            ctx: self.ctx.clone(),
            pending: self.pending.clone(),
            next_id: self.next_id.clone(),
        }
    }
}

/// The stream of requests sent to this node.
pub type Requests<Req> = UnboundedReceiver<Request<Req>>;

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
    let (tx, rx): (UnboundedSender<Request<Req>>, _) = unbounded();
    let routes = pending.clone();
    ctx.spawn(async move {
        while let Some(envelope) = inbox.next().await {
            match envelope.msg {
                Wire::Request { id, body } => {
                    let _ = tx.unbounded_send(Request {
                        from: envelope.from,
                        id,
                        body,
                    });
                }
                Wire::Response { id, body } => {
                    if let Some(waiter) = routes.borrow_mut().remove(&id) {
                        let _ = waiter.send(body);
                    }
                }
            }
        }
    });
    let caller = Caller {
        net: net.clone(),
        ctx: ctx.clone(),
        pending,
        next_id: Rc::new(Cell::new(0)),
    };
    (caller, rx)
}

impl<Req, Resp> Caller<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + 'static,
{
    /// Sends `body` to `to` and waits up to `timeout` (local monotonic time) for the answer.
    pub async fn call(&self, to: NodeIdx, body: Req, timeout: Duration) -> Result<Resp, RpcError> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        self.net
            .send(self.ctx.idx(), to, Wire::Request { id, body });
        let answer = self.ctx.timeout_local(timeout, rx).await;
        self.pending.borrow_mut().remove(&id);
        match answer {
            Some(Ok(resp)) => Ok(resp),
            _ => Err(RpcError::Timeout),
        }
    }

    /// Answers request `id` from `to`.
    pub fn reply(&self, to: NodeIdx, id: u64, body: Resp) {
        self.net
            .send(self.ctx.idx(), to, Wire::Response { id, body });
    }

    /// Sends a request without waiting for (or accepting) an answer.
    pub fn notify(&self, to: NodeIdx, body: Req) {
        self.net
            .send(self.ctx.idx(), to, Wire::Request { id: u64::MAX, body });
    }
}
