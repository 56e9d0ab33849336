//! The client library: a session (a lease kept alive every TTL/3) and the Mutex recipe, as
//! the chosen library ([`super::profile`]) runs them.

use super::kv::{DeleteKey, Req, Resp};
use super::params::{LeaseAfter, Library, LockApi, Params, Unlock, Variant, PREFIX};
use crate::protocol::{Acquired, Grant, LockClient, LostSignal, Outcome, Validity};
use crate::raft::client::Link as RaftLink;
use async_trait::async_trait;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// The client's link to the cluster.
pub type Link = RaftLink<Req, Resp, Params>;

/// A live session: its lease, until when the client may count on it (local clock), and its
/// `Done()`, raised when it ends.
struct Session {
    lease: u64,
    valid_until: Duration,
    done: LostSignal,
}

/// Ends the session in `slot` (it must be the current one): `Done()` fires with `why`.
fn close_session(slot: &mut Option<Session>, link: &Link, why: &str) {
    let s = slot.take().expect("a session to end");
    link.ctx.note(format!("session over: {why}"));
    s.done.raise(why);
}

type SharedSession = Rc<RefCell<Option<Session>>>;

/// The client library: a session (lease + keep-alive) and the Mutex.
pub struct EtcdClient {
    link: Rc<Link>,
    session: SharedSession,
}

impl EtcdClient {
    /// A client with no session yet, talking to the cluster through `link`.
    pub fn new(link: Link) -> Self {
        EtcdClient {
            link: Rc::new(link),
            session: Rc::default(),
        }
    }

    /// The session's lease, granting a new one (and starting its keep-alive) if needed.
    async fn lease(&mut self) -> Result<u64, Acquired> {
        if let Some(s) = self.session.borrow().as_ref() {
            return Ok(s.lease);
        }
        let ttl = Duration::from_millis(self.link.params.ttl_ms());
        let sent = self.link.ctx.mono_now();
        let req = Req::LeaseGrant {
            ttl_ms: self.link.params.lease_ttl_ms, // as asked; the server may round it
        };
        match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Lease { lease }) => {
                *self.session.borrow_mut() = Some(Session {
                    lease,
                    valid_until: sent + ttl,
                    done: LostSignal::new(),
                });
                let (link, session) = (self.link.clone(), self.session.clone());
                match (self.link.params.lock_api, self.link.params.client.is_go()) {
                    (LockApi::LockRpc, _) => spawn_jetcd_keep_alive(link, session, lease),
                    (LockApi::Concurrency, true) => spawn_go_keep_alive(link, session, lease),
                    (LockApi::Concurrency, false) => spawn_keep_alive(link, session, lease),
                }
                Ok(lease)
            }
            _ => Err(Acquired::Unknown("no answer to LeaseGrant".into())),
        }
    }

    /// Whether the session is alive on this client's clock.
    fn session_live(&self) -> bool {
        let now = self.link.ctx.mono_now();
        self.session
            .borrow()
            .as_ref()
            .is_some_and(|s| s.valid_until > now)
    }

    fn end_session(&self, why: &str) {
        let mut session = self.session.borrow_mut();
        if session.is_some() {
            close_session(&mut session, &self.link, why);
        }
    }

    /// `waitDeletes`: until no key under the prefix is older than `mine`.
    async fn wait_deletes(&self, mine: u64, deadline: Duration) -> bool {
        let budget = self.link.request_budget();
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        while self.link.ctx.mono_now() < deadline {
            let req = Req::LastBefore {
                max_create_rev: mine - 1,
            };
            let Some(Resp::Last { found, rev }) = self.link.call(req, budget).await else {
                continue;
            };
            let Some((key, create_rev)) = found else {
                return true;
            };
            let watch = Req::WatchDelete {
                key,
                create_rev,
                min_rev: rev,
            };
            let peer = self.link.peer();
            // A timeout is no error: the watch is asked again (a long poll).
            let _ = self.link.caller.call(peer, watch, poll).await;
        }
        false
    }

    /// The grant, unless (correct client) the session is over on this client's clock: then
    /// the key outlived its session only because the lessor has not revoked it yet, and
    /// `session.Done()` has fired; a correct user does not use the lock.
    async fn checked_grant(&self, key: String, mine: u64) -> Acquired {
        self.sit_out_lock_delay().await;
        // The Lock RPC's member knows nothing of the caller's keep-alives: the key's
        // existence (checked after waiting, unless the variant skips it) is all it has.
        // etcd's own Mutex returns the lock as it stands: only the careful client looks at
        // its session first.
        let p = &self.link.params;
        if p.variant == Variant::NoLeaseRecheckAfterWait
            || p.lock_api == LockApi::LockRpc
            || p.client != Library::Careful
        {
            return self.grant(key, mine);
        }
        self.freshen_lease().await;
        if self.session_live() {
            return self.grant(key, mine);
        }
        let _ = self
            .link
            .call(Req::Delete { key: key.into() }, self.link.request_budget())
            .await;
        self.end_session("it expired before the lock was ours");
        Acquired::Failed("session expired while acquiring".into())
    }

    /// Renews the lease now if less than half its TTL is left (keep-alives failed for a
    /// while, e.g. across a partition): a lock entered on the last milliseconds of a lease
    /// would be revoked under the critical section.
    async fn freshen_lease(&self) {
        let ttl = Duration::from_millis(self.link.params.ttl_ms());
        let now = self.link.ctx.mono_now();
        let lease = match self.session.borrow().as_ref() {
            Some(s) if s.valid_until < now + ttl / 2 => s.lease,
            _ => return,
        };
        let answer = self.link.call(Req::KeepAlive { lease }, ttl / 3).await;
        let mut session = self.session.borrow_mut();
        match (answer, session.as_mut()) {
            (Some(Resp::KeptAlive), Some(s)) if s.lease == lease => s.valid_until = now + ttl,
            (Some(Resp::LeaseNotFound), Some(s)) if s.lease == lease => s.valid_until = now,
            _ => {}
        }
    }

    /// Waits while the cluster's lock-delay runs (if the protocol has one).
    async fn sit_out_lock_delay(&self) {
        if self.link.params.lock_delay_ms == 0 {
            return;
        }
        let budget = self.link.request_budget();
        while let Some(Resp::DelayLeft(ms)) = self.link.call(Req::LockDelay, budget).await {
            if ms == 0 {
                return;
            }
            self.link.ctx.sleep_local(Duration::from_millis(ms)).await;
        }
    }

    fn grant(&self, key: String, mine: u64) -> Acquired {
        // etcd's Go Mutex exposes no expiry: `Done()` is all its user has.
        if self.link.params.client.is_go() {
            return Acquired::Granted(Grant {
                token: Some(mine),
                valid_until: None,
                handle: key,
            });
        }
        // A session that ended while waiting (only the buggy client gets here) is no longer
        // valid: the grant is born expired, as `session.Done()` would tell.
        let valid_until = Some(
            self.session
                .borrow()
                .as_ref()
                .map_or(Duration::ZERO, |s| s.valid_until),
        );
        Acquired::Granted(Grant {
            token: Some(mine),
            valid_until,
            handle: key,
        })
    }
}

fn spawn_keep_alive(link: Rc<Link>, session: SharedSession, lease: u64) {
    let ctx = link.ctx.clone();
    let ttl = Duration::from_millis(link.params.ttl_ms());
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(ttl / 3).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == lease);
            if !current(&session.borrow()) {
                return;
            }
            let sent = link.ctx.mono_now();
            let answer = link.call(Req::KeepAlive { lease }, ttl / 3).await;
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            match answer {
                Some(Resp::KeptAlive) => s.as_mut().expect("current").valid_until = sent + ttl,
                Some(Resp::LeaseNotFound) => {
                    close_session(&mut s, &link, "the lease is gone");
                    return;
                }
                _ if link.ctx.mono_now() >= s.as_ref().expect("current").valid_until => {
                    close_session(&mut s, &link, "no keep-alive within the TTL");
                    return;
                }
                _ => {}
            }
        }
    });
}

impl EtcdClient {
    /// Whether `grant` was taken with the current session's lease.
    fn holds(&self, grant: &Grant) -> bool {
        let session = self.session.borrow();
        session
            .as_ref()
            .is_some_and(|s| grant.handle == format!("{PREFIX}{:x}", s.lease))
    }

    /// Ends an acquire's own lease (`lease_per_acquire`), its session already taken from the
    /// slot (so its keep-alive stops): revoked (Jepsen's `revoke-lease!`; the answer does not
    /// matter: an unrevoked lease lapses after its TTL), or left to lapse with `lease_after =
    /// "lapse"` (`etcdctl lock`'s process exits).
    async fn end_lease(&self, session: Option<Session>) {
        match session {
            Some(s) if self.link.params.lease_after == LeaseAfter::Revoke => {
                let req = Req::LeaseRevoke { lease: s.lease };
                let _ = self.link.call(req, self.link.request_budget()).await;
            }
            _ => {}
        }
    }

    /// `Lock`: the acquire transaction, then waiting for every older key to go.
    async fn lock(&mut self) -> Acquired {
        let p = self.link.params.clone();
        let lease = match self.lease().await {
            Ok(lease) => lease,
            Err(outcome) => return outcome,
        };
        // The Lock call's own deadline, after the lease (Jepsen's grant and Lock are two calls
        // of 5 s each).
        let deadline = self.link.ctx.mono_now() + Duration::from_millis(p.acquire_timeout_ms);
        let key = format!("{PREFIX}{lease:x}");
        let req = Req::TryAcquire {
            key: key.clone(),
            lease,
        };
        let (mine, owner) = match self.link.call(req, self.link.request_budget()).await {
            Some(Resp::Acquired { mine, owner }) => (mine, owner),
            Some(Resp::LeaseNotFound) => {
                self.end_session("the lease is gone");
                return Acquired::Failed("lease not found".into());
            }
            _ => return Acquired::Unknown("no answer to the acquire transaction".into()),
        };
        if mine == owner {
            return self.checked_grant(key, mine).await;
        }
        if !self.wait_deletes(mine, deadline).await {
            let _ = self
                .link
                .call(Req::Delete { key: key.into() }, self.link.request_budget())
                .await;
            return Acquired::Failed("acquire timeout while waiting".into());
        }
        self.link.ctx.point("after_wait").await;
        if p.rechecks_after_wait() {
            // The fix of #11456: make sure the session is not expired and the key still exists.
            let get = Req::Get { key: key.clone() };
            match self.link.call(get, self.link.request_budget()).await {
                Some(Resp::Key(Some(rev))) if rev == mine => {}
                Some(Resp::Key(_)) => {
                    self.end_session("the key is gone");
                    return Acquired::Failed("session expired while waiting".into());
                }
                _ => return Acquired::Unknown("no answer to the key check".into()),
            }
        }
        self.checked_grant(key, mine).await
    }
}

/// jetcd 0.4.1's keep-alive (`LeaseImpl`): a scheduler every 500 ms sends a keep-alive for
/// every lease whose next keep-alive is due (answer + TTL/3: with a 2 s TTL, one per second);
/// every answer sets a deadline of answer + TTL (the first, 5 s), and once a deadline passes
/// (checked every second) the lease's keep-alive is dropped for good, silently: the lock's
/// user is not told, and the member revokes the lease a TTL later.
fn spawn_jetcd_keep_alive(link: Rc<Link>, session: SharedSession, lease: u64) {
    let ctx = link.ctx.clone();
    let ttl = Duration::from_millis(link.params.ttl_ms());
    let tick = Duration::from_millis(500);
    ctx.spawn(async move {
        let (mut next, mut deadline) = (link.ctx.mono_now(), link.ctx.mono_now() + tick * 10);
        loop {
            link.ctx.sleep_local(tick).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == lease);
            let now = link.ctx.mono_now();
            if !current(&session.borrow()) {
                return;
            }
            if now < next {
                continue;
            }
            if now > deadline {
                link.ctx
                    .note("keep-alive dropped: no answer before its deadline");
                return;
            }
            let answer = link.call(Req::KeepAlive { lease }, tick).await;
            let mut s = session.borrow_mut();
            let now = link.ctx.mono_now();
            match answer {
                Some(Resp::KeptAlive) if current(&s) => {
                    (next, deadline) = (now + ttl / 3, now + ttl);
                    s.as_mut().expect("current").valid_until = now + ttl;
                }
                Some(Resp::LeaseNotFound) if current(&s) => {
                    // The user may ask (a careful client): the lease is over now.
                    s.as_mut().expect("current").valid_until = now;
                    link.ctx.note("keep-alive closed: the lease is gone");
                    return;
                }
                _ => {}
            }
        }
    });
}

#[async_trait(?Send)]
impl LockClient for EtcdClient {
    /// With `lease_per_acquire`, a fresh lease for this acquire, revoked if it fails
    /// (Jepsen's `acquire!`) or left to lapse (`lease_after`); otherwise the client's
    /// session.
    async fn acquire(&mut self) -> Acquired {
        let fresh = self.link.params.lease_per_acquire;
        if fresh {
            // The last grant's lease was revoked on release, or lapses on its own.
            self.session.borrow_mut().take();
        }
        let outcome = self.lock().await;
        if fresh && !matches!(outcome, Acquired::Granted(_)) {
            let session = self.session.borrow_mut().take();
            self.end_lease(session).await;
        }
        outcome
    }

    /// The session's validity now: kept alive by keep-alives, gone with the session. etcd's
    /// Go client knows no expiry time: its session holds until `Done()` fires.
    fn validity(&mut self, grant: &Grant) -> Validity {
        let session = self.session.borrow();
        match session.as_ref() {
            Some(_) if self.link.params.client.is_go() && self.holds(grant) => Validity::Indefinite,
            Some(s) if self.holds(grant) => Validity::Until(s.valid_until),
            _ => Validity::Lost("the session is over".into()),
        }
    }

    /// `Session.Done()` of the grant's session (already fired if that session is over); none
    /// behind the Lock RPC, whose member runs an orphaned session that tells nobody.
    fn lost_signal(&mut self, grant: &Grant) -> Option<LostSignal> {
        if self.link.params.lock_api == LockApi::LockRpc {
            return None;
        }
        let session = self.session.borrow();
        match session.as_ref() {
            Some(s) if self.holds(grant) => Some(s.done.clone()),
            _ => {
                let done = LostSignal::new();
                done.raise("the session is over");
                Some(done)
            }
        }
    }

    /// `Unlock` (with `lease_per_acquire`, Jepsen's `release!`: the keep-alive stops first,
    /// and the lease is revoked after a successful unlock, or left to lapse with `lease_after
    /// = "lapse"`), waiting for its answer until
    /// `unlock_timeout_ms`.
    async fn release(&mut self, grant: &Grant) -> Outcome {
        let p = &self.link.params;
        let key = DeleteKey {
            name: grant.handle.clone(),
            if_create_rev: grant.token.filter(|_| p.unlock == Unlock::DeleteIfOwner),
        };
        let req = Req::Delete { key };
        let session = if p.lease_per_acquire {
            self.session.borrow_mut().take()
        } else {
            None
        };
        match self.link.call(req.clone(), p.unlock_timeout()).await {
            Some(Resp::Deleted) => {
                self.end_lease(session).await;
                Outcome::Ok
            }
            Some(other) => Outcome::Failed(format!("unexpected answer {other:?}")),
            None => self.unanswered_unlock(req, grant),
        }
    }
}

impl EtcdClient {
    /// An `Unlock` without an answer by its deadline: the key may still be there, or not.
    /// Unless the application retries it (`unlock_retry_after_ms`), the session is
    /// abandoned: locking again with it would find the old key and return the same revision,
    /// a token for two grants; its lease (and the key) expire on the server. With retries it
    /// keeps the session, as a Go application keeps its `Session` when `Unlock` returns
    /// `context.DeadlineExceeded` (etcd-io/etcd#22082), and calls the old Unlock again later.
    fn unanswered_unlock(&self, req: Req, grant: &Grant) -> Outcome {
        let Some(after) = self.link.params.unlock_retry_after_ms else {
            self.end_session("the unlock got no answer: session abandoned");
            return Outcome::Unknown("no answer to the delete".into());
        };
        let lease = self.session.borrow().as_ref().map(|s| s.lease);
        if let Some(lease) = lease {
            let key = &grant.handle;
            let retry = UnlockRetry {
                req,
                what: (grant.token).map_or(key.clone(), |rev| format!("{key} (revision {rev})")),
                lease,
                after: Duration::from_millis(after),
            };
            spawn_unlock_retry(self.link.clone(), self.session.clone(), retry);
        }
        Outcome::Unknown("no answer to the delete: retried later, session kept".into())
    }
}

/// The old `Mutex`'s `Unlock`, called again (etcd-io/etcd#22082).
struct UnlockRetry {
    /// Its request: a delete by the key's name, or only at its create-revision (PR #22115).
    req: Req,
    /// The key, and the create-revision the old Mutex acquired it at, in words.
    what: String,
    /// The session's lease the key was created with.
    lease: u64,
    /// How long after an unanswered try the next one goes.
    after: Duration,
}

/// Calls the old `Unlock` again `retry.after` after each unanswered try, while the session
/// that took the lock lasts (a later session has another lease, so another key name). Each
/// try waits `unlock_timeout_ms` for its answer. What etcd does with a try that lands after
/// the same session locked again is the point of etcd-io/etcd#22082: `unlock = "delete"`
/// deletes the newer key of the same name, and the next waiter is granted the lock while
/// this client holds it; `unlock = "delete-if-owner"` (PR #22115) compares the key's
/// create-revision and deletes nothing.
fn spawn_unlock_retry(link: Rc<Link>, session: SharedSession, retry: UnlockRetry) {
    let ctx = link.ctx.clone();
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(retry.after).await;
            let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == retry.lease);
            if !current(&session.borrow()) {
                return;
            }
            let what = &retry.what;
            link.ctx
                .note(format!("unanswered unlock of {what} retried"));
            let timeout = link.params.unlock_timeout();
            if link.call(retry.req.clone(), timeout).await.is_some() {
                return;
            }
        }
    });
}

/// etcd's Go lease client (`client/v3/lease.go`), as `Session` uses it: `sendKeepAliveLoop`
/// every `retryConnWait` (500 ms) sends a keep-alive once `nextKeepAlive` has passed (at once
/// for a new lease); each answer sets `nextKeepAlive = now + TTL/3` and `deadline = now +
/// TTL`; an answer saying the lease is gone closes it; `deadlineLoop`, every second, closes it
/// once the deadline has passed (the first is `firstKeepAliveTimeout`, 5 s). Closing it fires
/// `Session.Done()`. Go's stream sends and receives apart; here a keep-alive waits for its
/// answer at most until the next tick.
fn spawn_go_keep_alive(link: Rc<Link>, session: SharedSession, lease: u64) {
    let ctx = link.ctx.clone();
    let deadline = Rc::new(Cell::new(ctx.mono_now() + FIRST_KEEP_ALIVE_TIMEOUT));
    ctx.spawn(go_send_keep_alives(
        link.clone(),
        session.clone(),
        lease,
        deadline.clone(),
    ));
    ctx.spawn(async move {
        loop {
            link.ctx.sleep_local(Duration::from_secs(1)).await;
            let mut s = session.borrow_mut();
            if s.as_ref().is_none_or(|s| s.lease != lease) {
                return;
            }
            if deadline.get() < link.ctx.mono_now() {
                close_session(&mut s, &link, "no keep-alive answer within the TTL");
                return;
            }
        }
    });
}

/// `firstKeepAliveTimeout` of `client/v3/lease.go` without a dial timeout (`defaultTTL`).
const FIRST_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// `sendKeepAliveLoop` and `recvKeepAlive` of [`spawn_go_keep_alive`].
async fn go_send_keep_alives(
    link: Rc<Link>,
    session: SharedSession,
    lease: u64,
    deadline: Rc<Cell<Duration>>,
) {
    let ttl = Duration::from_millis(link.params.ttl_ms());
    let tick = Duration::from_millis(500);
    let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == lease);
    let mut next = link.ctx.mono_now();
    loop {
        let woke = link.ctx.mono_now();
        if !current(&session.borrow()) {
            return;
        }
        if next <= woke {
            let answer = link.call(Req::KeepAlive { lease }, tick).await;
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            let now = link.ctx.mono_now();
            match answer {
                Some(Resp::KeptAlive) => {
                    next = now + ttl / 3;
                    deadline.set(now + ttl);
                    s.as_mut().expect("current").valid_until = now + ttl;
                }
                Some(Resp::LeaseNotFound) => {
                    close_session(&mut s, &link, "the lease is gone");
                    return;
                }
                _ => {}
            }
        }
        let spent = link.ctx.mono_now().saturating_sub(woke);
        link.ctx.sleep_local(tick.saturating_sub(spent)).await;
    }
}
