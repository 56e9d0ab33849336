//! What every client of a Raft-replicated service does alike: it talks to one member, which
//! serves or forwards whatever needs the leader, and moves to the next member when its own
//! does not answer (an etcd client's balancer skips an endpoint whose call failed).
//! (ZooKeeper's client keeps only the link's endpoint, peers and timeouts: it stays with the
//! server it is connected to until the connection is lost.)

use locksim_sim::rpc::{Caller, Links};
use locksim_sim::{NodeCtx, NodeIdx};
use std::cell::RefCell;
use std::time::Duration;

/// How long a client waits before it asks again when nobody leads yet (an election): it
/// does not spin.
pub const ELECTION_RETRY: Duration = Duration::from_millis(20);

/// The answer of a member that cannot serve a request now ("not leader": it knows no
/// leader, or the leader changed under a read, or a forward was given up); the client asks
/// again.
pub trait Refusal {
    /// The refusal.
    fn not_leader() -> Self;
    /// Whether this answer is the refusal.
    fn refused(&self) -> bool;
}

/// A client's connection to the cluster: one member at a time.
pub struct Link<Req, Resp, P> {
    /// The client's node.
    pub ctx: NodeCtx,
    /// The client's endpoint.
    pub caller: Caller<Req, Resp>,
    /// The peers' nodes, by peer number.
    pub peers: Vec<NodeIdx>,
    /// The protocol's parameters.
    pub params: P,
    /// The peer the client talks to now.
    current: RefCell<usize>,
    /// The one peer every request goes to first (a client given one endpoint), if pinned.
    pinned: Option<usize>,
    request_timeout: Duration,
}

impl<Req, Resp, P> Link<Req, Resp, P>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + Refusal + 'static,
{
    /// A link from the client `ctx`; it first tries "its" peer, as clients spread over a
    /// cluster do.
    pub fn new(
        ctx: &NodeCtx,
        links: &Links<Req, Resp>,
        peers: &[NodeIdx],
        params: P,
        request_timeout: Duration,
    ) -> Self {
        let caller = links.caller(ctx);
        Link {
            ctx: ctx.clone(),
            caller,
            peers: peers.to_vec(),
            params,
            current: RefCell::new(ctx.idx() % peers.len()),
            pinned: None,
            request_timeout,
        }
    }

    /// The same link pinned to its first peer, as a client configured with one endpoint
    /// (Jepsen's jetcd client: `endpoints` = its own node): every request goes there, and
    /// a request to a paused or cut-off pinned peer waits for its whole deadline: one gRPC
    /// deadline per call.
    pub fn pinned(mut self) -> Self {
        self.pinned = Some(*self.current.borrow());
        self
    }

    /// The peer the client talks to now.
    pub fn peer(&self) -> NodeIdx {
        self.peers[*self.current.borrow()]
    }

    /// The number (from 0) of the peer the client talks to now.
    pub fn peer_number(&self) -> usize {
        *self.current.borrow()
    }

    /// How long one try of a request waits for its answer.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Three request timeouts (time for two more members' tries); pinned, one: the call's
    /// deadline.
    pub fn request_budget(&self) -> Duration {
        match self.pinned {
            Some(_) => self.request_timeout,
            None => self.request_timeout * 3,
        }
    }

    /// Sends `req` to the current member, and to the next after each try it did not answer,
    /// until `budget` passes. After a "not leader" (an election under way, or a leader
    /// change under the request) it waits [`ELECTION_RETRY`] and asks the same member
    /// again: its connection is alive, as a gRPC client's stays on its endpoint.
    pub async fn call(&self, req: Req, budget: Duration) -> Option<Resp> {
        let deadline = self.ctx.mono_now() + budget;
        while self.ctx.mono_now() < deadline {
            let peer = *self.current.borrow();
            let timeout = match self.pinned {
                Some(_) => deadline.saturating_sub(self.ctx.mono_now()),
                None => self.request_timeout,
            };
            let answer = self
                .caller
                .call(self.peers[peer], req.clone(), timeout)
                .await;
            match answer {
                Ok(resp) if !resp.refused() => return Some(resp),
                Ok(_) => self.ctx.sleep_local(ELECTION_RETRY).await,
                Err(_) => {
                    let next = self.pinned.unwrap_or((peer + 1) % self.peers.len());
                    *self.current.borrow_mut() = next;
                }
            }
        }
        None
    }
}
