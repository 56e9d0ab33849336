//! The client library: a session kept alive by pings, and the lock recipe (an ephemeral
//! sequential node, watch the next-lower one).

use super::params::{Params, Variant};
use super::tree::{Req, Resp};
use crate::protocol::{Acquired, Grant, LockClient, Outcome, Validity};
use crate::raft::client::Link as RaftLink;
use async_trait::async_trait;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The client's link to the cluster.
pub type Link = RaftLink<Req, Resp, Params>;

/// A session as the client sees it.
struct Session {
    id: u64,
    /// When the last ping that was answered was sent (local clock).
    heard: Duration,
    /// Whether the client already noted its connection lost.
    suspended: bool,
}

type SharedSession = Rc<RefCell<Option<Session>>>;

/// The client library: a session kept alive by pings, and the lock recipe.
pub struct ZkClient {
    link: Rc<Link>,
    session: SharedSession,
}

impl ZkClient {
    /// A client with no session yet, talking to the cluster through `link`.
    pub fn new(link: Link) -> Self {
        ZkClient {
            link: Rc::new(link),
            session: Rc::default(),
        }
    }

    async fn session(&mut self) -> Result<u64, Acquired> {
        if let Some(s) = self.session.borrow().as_ref() {
            return Ok(s.id);
        }
        let sent = self.link.ctx.mono_now();
        let req = Req::CreateSession {
            timeout_ms: self.link.params.session_timeout_ms,
        };
        match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Session(id)) => {
                *self.session.borrow_mut() = Some(Session {
                    id,
                    heard: sent,
                    suspended: false,
                });
                spawn_pinger(self.link.clone(), self.session.clone(), id);
                Ok(id)
            }
            _ => Err(Acquired::Unknown("no answer to createSession".into())),
        }
    }

    fn end_session(&self, why: &str) {
        if self.session.borrow_mut().take().is_some() {
            self.link.ctx.note(format!("session over: {why}"));
        }
    }

    /// The recipe's loop: list the children, hold the lock if ours is the lowest, else watch
    /// the next-lower node. `None` if our node is gone or time ran out.
    async fn wait_turn(&self, mine: &str, deadline: Duration) -> Option<()> {
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        while self.link.ctx.mono_now() < deadline {
            let Some(Resp::Children(children, zxid)) = self
                .link
                .call(Req::Children, self.link.request_budget())
                .await
            else {
                continue;
            };
            let position = children.iter().position(|(name, _)| name == mine)?;
            let Some(position) = position.checked_sub(1) else {
                return Some(());
            };
            let watch = Req::Watch {
                name: children[position].0.clone(),
                min_zxid: zxid,
            };
            // A timeout is no error: the watch is asked again (a long poll).
            let _ = self.link.caller.call(self.link.peer(), watch, poll).await;
        }
        None
    }

    async fn delete(&self, name: String) -> Option<Resp> {
        let budget = self.link.params.timeout();
        self.link.call(Req::Delete { name }, budget).await
    }
}

fn spawn_pinger(link: Rc<Link>, session: SharedSession, id: u64) {
    let ctx = link.ctx.clone();
    let timeout = link.params.timeout();
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(timeout / 3).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.id == id);
            if !current(&session.borrow()) {
                return;
            }
            let sent = link.ctx.mono_now();
            let answer = link.call(Req::Ping { session: id }, timeout / 3).await;
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            let live = s.as_mut().expect("current");
            match answer {
                Some(Resp::Pong) => {
                    if std::mem::take(&mut live.suspended) {
                        link.ctx.note("connection restored: session alive");
                    }
                    live.heard = sent;
                }
                Some(Resp::Expired) => {
                    *s = None;
                    link.ctx.note("session expired (LOST)");
                    return;
                }
                _ if !live.suspended && link.ctx.mono_now() >= live.heard + timeout * 2 / 3 => {
                    live.suspended = true;
                    link.ctx.note("connection lost (SUSPENDED)");
                }
                _ => {}
            }
        }
    });
}

#[async_trait(?Send)]
impl LockClient for ZkClient {
    async fn acquire(&mut self) -> Acquired {
        let deadline =
            self.link.ctx.mono_now() + Duration::from_millis(self.link.params.acquire_timeout_ms);
        let session = match self.session().await {
            Ok(id) => id,
            Err(outcome) => return outcome,
        };
        let create = Req::Create { session };
        let (name, seq) = match self.link.call(create, self.link.request_budget()).await {
            Some(Resp::Created(name, seq)) => (name, seq),
            Some(Resp::Expired) => {
                self.end_session("expired");
                return Acquired::Failed("session expired".into());
            }
            _ => return Acquired::Unknown("no answer to create".into()),
        };
        if self.wait_turn(&name, deadline).await.is_none() {
            let _ = self.delete(name).await;
            return Acquired::Failed("gave up waiting (or the node is gone)".into());
        }
        let grant = Grant {
            token: Some(seq),
            valid_until: None,
            handle: name,
        };
        if !self.validity(&grant).holds_at(self.link.ctx.mono_now()) {
            let _ = self.delete(grant.handle).await;
            return Acquired::Failed("connection lost while acquiring".into());
        }
        Acquired::Granted(grant)
    }

    /// Correct: the lock holds while the connection does (two thirds of the timeout after
    /// the last answered ping); `ignore-suspended`: until the client hears `Expired`.
    fn validity(&mut self, _grant: &Grant) -> Validity {
        let session = self.session.borrow();
        let Some(s) = session.as_ref() else {
            return Validity::Lost("the session expired".into());
        };
        match self.link.params.variant {
            Variant::Correct => Validity::Until(s.heard + self.link.params.timeout() * 2 / 3),
            Variant::IgnoreSuspended => Validity::Indefinite,
        }
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        match self.delete(grant.handle.clone()).await {
            Some(Resp::Deleted) => Outcome::Ok,
            Some(other) => Outcome::Failed(format!("unexpected answer {other:?}")),
            None => {
                // Our node may still be there: leave it to the session's expiry.
                self.end_session("the delete got no answer: session abandoned");
                Outcome::Unknown("no answer to the delete".into())
            }
        }
    }
}
