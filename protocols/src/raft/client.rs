//! What every client of a Raft-replicated service does alike: talk to the leader, following
//! redirections, trying the next peer when one does not answer. (ZooKeeper's client keeps
//! only the link's endpoint, peers and timeouts: it stays with the server it is connected
//! to, which forwards to the leader.)

use locksim_sim::rpc::{Caller, Links};
use locksim_sim::{NodeCtx, NodeIdx};
use std::cell::RefCell;
use std::time::Duration;

/// How long a client waits before it asks again when nobody leads yet (an election): it
/// does not spin.
pub const ELECTION_RETRY: Duration = Duration::from_millis(20);

/// An answer that may send the client to another peer.
pub trait Redirect {
    /// `Some(hint)` if the peer is not the one to ask (`hint`: the peer, from 0, to try).
    fn redirect(&self) -> Option<Option<usize>>;
}

/// A client's connection to the cluster: it follows the leader.
pub struct Link<Req, Resp, P> {
    /// The client's node.
    pub ctx: NodeCtx,
    /// The client's endpoint.
    pub caller: Caller<Req, Resp>,
    /// The peers' nodes, by peer number.
    pub peers: Vec<NodeIdx>,
    /// The protocol's parameters.
    pub params: P,
    guess: RefCell<usize>,
    /// The one peer every request goes to first (a client given one endpoint), if pinned.
    pinned: Option<usize>,
    request_timeout: Duration,
}

impl<Req, Resp, P> Link<Req, Resp, P>
where
    Req: Clone + Send + 'static,
    Resp: Clone + Send + Redirect + 'static,
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
            guess: RefCell::new(ctx.idx() % peers.len()),
            pinned: None,
            request_timeout,
        }
    }

    /// The same link pinned to its first peer, as a client configured with one endpoint
    /// (Jepsen's jetcd client: `endpoints` = its own node): every request goes there first;
    /// a follower's "not leader" stands for the forwarding a real member does (etcd forwards
    /// proposals and keep-alives to the leader), so the next try goes to the leader it names
    /// and the request after it starts at the pinned peer again. A request to a paused or
    /// cut-off pinned peer waits for its whole deadline: one gRPC deadline per call.
    pub fn pinned(mut self) -> Self {
        self.pinned = Some(*self.guess.borrow());
        self
    }

    /// The peer the client talks to now.
    pub fn peer(&self) -> NodeIdx {
        self.peers[*self.guess.borrow()]
    }

    /// The number (from 0) of the peer the client talks to now.
    pub fn peer_number(&self) -> usize {
        *self.guess.borrow()
    }

    /// How long one try of a request waits for its answer.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Three request timeouts (time for one redirection and one retry); pinned, one: the
    /// call's deadline.
    pub fn request_budget(&self) -> Duration {
        match self.pinned {
            Some(_) => self.request_timeout,
            None => self.request_timeout * 3,
        }
    }

    /// Sends `req` to the leader (following redirections) until `budget` passes.
    pub async fn call(&self, req: Req, budget: Duration) -> Option<Resp> {
        let deadline = self.ctx.mono_now() + budget;
        if let Some(pinned) = self.pinned {
            *self.guess.borrow_mut() = pinned;
        }
        while self.ctx.mono_now() < deadline {
            let peer = *self.guess.borrow();
            let timeout = match self.pinned {
                Some(_) => deadline.saturating_sub(self.ctx.mono_now()),
                None => self.request_timeout,
            };
            let answer = self
                .caller
                .call(self.peers[peer], req.clone(), timeout)
                .await;
            let next_peer = self.pinned.unwrap_or((peer + 1) % self.peers.len());
            match answer {
                Ok(resp) => match resp.redirect() {
                    None => return Some(resp),
                    Some(hint) => {
                        let next = hint.filter(|h| *h != peer);
                        *self.guess.borrow_mut() = next.unwrap_or(next_peer);
                        if next.is_none() {
                            self.ctx.sleep_local(ELECTION_RETRY).await;
                        }
                    }
                },
                Err(_) => *self.guess.borrow_mut() = next_peer,
            }
        }
        None
    }
}
