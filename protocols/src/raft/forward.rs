//! The requests a member forwards to the leader and waits on ([`super::host::Handling::Forward`]),
//! as an etcd member forwards a lease's keep-alive (`EtcdServer.LeaseRenew`, etcd 3.4):
//!
//! ```go
//! cctx, cancel := context.WithTimeout(ctx, s.Cfg.ReqTimeout())
//! for cctx.Err() == nil && err != nil {
//!     leader, lerr := s.waitLeader(cctx)
//!     ...
//!     ttl, err = leasehttp.RenewHTTP(cctx, id, lurl, s.peerRt)
//!     if err == nil || err == lease.ErrLeaseNotFound { return ttl, err }
//!     time.Sleep(50 * time.Millisecond)
//! }
//! ```
//!
//! So a forward waits for the leader's answer, however long, until the request timeout
//! (`ReqTimeout`: 5 s plus two election timeouts); a leader that answers it cannot serve it
//! (it no longer leads) has it sent again to the leader the member knows then; and a member
//! serves one client's keep-alive stream one request at a time (`leaseKeepAlive` receives,
//! renews and sends in one loop), so a request waits behind that client's earlier one. Here
//! "one client's" is one client node's; a refused forward is sent again at the member's next
//! tick (etcd sleeps 50 ms); a forward or answer lost on the way is given up at the request
//! timeout (etcd's HTTP over TCP would have resent it).

use locksim_sim::NodeIdx;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One forwarded request, in arrival order.
struct Forwarded<Req> {
    /// The client and its request number.
    client: (NodeIdx, u64),
    req: Req,
    /// The token of its forwarding in flight; `None`: not sent yet, or refused and to be
    /// sent again.
    token: Option<u64>,
    /// When the member gives up on it, on its monotonic clock.
    until: Duration,
}

/// The requests a member has forwarded or queued, by arrival.
pub struct Forwards<Req> {
    queue: BTreeMap<u64, Forwarded<Req>>,
    arrived: u64,
}

impl<Req> Default for Forwards<Req> {
    fn default() -> Self {
        Forwards {
            queue: BTreeMap::new(),
            arrived: 0,
        }
    }
}

impl<Req: Clone> Forwards<Req> {
    /// Whether nothing is forwarded or queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues `client`'s request, given up at `until`; returns its number if it is the only
    /// one of its client's (to send now).
    pub fn add(&mut self, client: (NodeIdx, u64), req: Req, until: Duration) -> Option<u64> {
        let n = self.arrived;
        self.arrived += 1;
        let first = !self.queue.values().any(|f| f.client.0 == client.0);
        self.queue.insert(
            n,
            Forwarded {
                client,
                req,
                token: None,
                until,
            },
        );
        first.then_some(n)
    }

    /// The request numbered `n`, to send now.
    pub fn request(&self, n: u64) -> (NodeIdx, u64, Req) {
        let f = &self.queue[&n];
        (f.client.0, f.client.1, f.req.clone())
    }

    /// Request `n` went to the leader under `token`.
    pub fn sent(&mut self, n: u64, token: u64) {
        self.queue.get_mut(&n).expect("a queued forward").token = Some(token);
    }

    /// Takes request `n` out (the member serves it itself: it leads now).
    pub fn take(&mut self, n: u64) {
        self.queue.remove(&n);
    }

    /// The leader answered `token`: the client to pass the answer to (taken out), unless
    /// the leader refused it (`refused`) and there is time left to send it again; `None` for
    /// a token this member does not wait on.
    pub fn answered(&mut self, token: u64, refused: bool, now: Duration) -> Option<(NodeIdx, u64)> {
        let (&n, f) = self
            .queue
            .iter_mut()
            .find(|(_, f)| f.token == Some(token))?;
        if refused && now < f.until {
            f.token = None;
            return None;
        }
        let client = f.client;
        self.queue.remove(&n);
        Some(client)
    }

    /// The clients whose requests ran out of time by `now`, taken out.
    pub fn expire(&mut self, now: Duration) -> Vec<(NodeIdx, u64)> {
        let mut gone = vec![];
        self.queue.retain(|_, f| {
            f.until > now || {
                gone.push(f.client);
                false
            }
        });
        gone
    }

    /// The numbers of the requests to send now: each client's first, if not in flight.
    pub fn due(&self) -> Vec<u64> {
        let mut seen = BTreeSet::new();
        (self.queue.iter())
            .filter(|(_, f)| seen.insert(f.client.0) && f.token.is_none())
            .map(|(n, _)| *n)
            .collect()
    }

    /// The number of `node`'s next request, if it is due ([`Forwards::due`]).
    pub fn next_of(&self, node: NodeIdx) -> Option<u64> {
        let (n, f) = self.queue.iter().find(|(_, f)| f.client.0 == node)?;
        f.token.is_none().then_some(*n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_clients_requests_go_one_at_a_time_and_a_refused_one_goes_again() {
        let mut f = Forwards::default();
        assert_eq!(f.add((7, 1), "a", 7 * S), Some(0));
        assert_eq!(f.add((7, 2), "b", 7 * S), None, "behind the client's first");
        assert_eq!(f.add((8, 1), "c", 7 * S), Some(2), "another client's");
        f.sent(0, 100);
        f.sent(2, 200);
        assert!(f.due().is_empty(), "both clients' first in flight");
        // The old leader refuses the first: it goes again, and the second still waits.
        assert!(f.answered(100, true, S).is_none());
        assert_eq!(f.due(), vec![0]);
        f.sent(0, 101);
        assert_eq!(f.answered(101, false, S), Some((7, 1)));
        assert_eq!(f.due(), vec![1], "the client's next");
        assert_eq!(f.next_of(7), Some(1));
        assert_eq!(f.next_of(8), None, "in flight");
        assert_eq!(f.answered(101, false, S), None, "answered once");
    }

    #[test]
    fn a_request_not_answered_in_time_is_given_up_and_a_refusal_then_answers() {
        let mut f = Forwards::default();
        f.add((7, 1), "a", 7 * S);
        f.add((8, 1), "b", 2 * S);
        f.sent(0, 100);
        f.sent(1, 200);
        assert_eq!(f.expire(3 * S), vec![(8, 1)]);
        assert_eq!(
            f.answered(100, true, 8 * S),
            Some((7, 1)),
            "no time left to send it again"
        );
        assert!(f.due().is_empty());
    }
}
