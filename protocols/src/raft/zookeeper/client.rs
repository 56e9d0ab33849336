//! The client library: a session kept alive by pings, and the lock recipe (an ephemeral
//! sequential node, watch the next-lower one).

use super::params::{Params, Variant};
use super::profile::{ErrorPolicy, Library, PingClock, SessionRetry};
use super::tree::{Req, Resp};
use crate::protocol::{Acquired, Grant, LockClient, LostSignal, Outcome, Validity};
use crate::raft::client::{Link as RaftLink, ELECTION_RETRY};
use async_trait::async_trait;
use locksim_sim::NodeIdx;
use rand::Rng;

use futures::channel::oneshot;
use futures::future::{select, Either};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// The named point of the `check-then-create` bug: between the check and the create.
pub const CHECK_THEN_CREATE_POINT: &str = "between_check_and_create";

/// The client's link to the cluster.
pub type Link = RaftLink<Req, Resp, Params>;

/// A session as the client sees it.
struct Session {
    id: u64,
    /// When the last ping that was answered was sent (local clock).
    heard: Duration,
    /// Since when the client has noted its connection lost (SUSPENDED), if it has.
    suspended: Option<Suspended>,
    /// Requests held while the connection is lost, told when it is back.
    held: Vec<oneshot::Sender<()>>,
    /// Requests out on the connection, told (dropped) when it is lost: `ConnectionLoss`.
    out: Vec<oneshot::Sender<()>>,
}

impl Session {
    /// Notes the connection lost now (`Disconnected`, Curator's `SUSPENDED`): the requests
    /// out on it end (`ConnectionLoss`).
    fn suspend(&mut self, link: &Link) {
        let (mono, wall_ms) = (link.ctx.mono_now(), link.ctx.wall_ms());
        self.suspended = Some(Suspended { mono, wall_ms });
        self.out.clear();
    }
}

/// When the connection was noted lost, on the client's two clocks: the monotonic one its
/// connection times by, and the wall clock Curator's `ConnectionStateManager` counts the
/// suspension by (`startOfSuspendedEpoch = System.currentTimeMillis()`).
#[derive(Clone, Copy)]
struct Suspended {
    mono: Duration,
    wall_ms: i64,
}

type SharedSession = Rc<RefCell<Option<Session>>>;
/// The server (its number, from 0) the client's connection is to: a `ClientCnxn` is
/// connected to one server at a time, and moves to the next on every reconnection.
type Server = Rc<Cell<usize>>;
/// The current grant's lost-lock signal (the application's connection-state listener, on
/// Curator's or kazoo's states).
type SharedSignal = Rc<RefCell<Option<LostSignal>>>;

/// The client library: a session kept alive by pings, and the lock recipe.
pub struct ZkClient {
    link: Rc<Link>,
    session: SharedSession,
    signal: SharedSignal,
    server: Server,
}

impl ZkClient {
    /// A client with no session yet, talking to the cluster through `link`, connected first
    /// to the server the link tries first (clients spread over the ensemble).
    pub fn new(link: Link) -> Self {
        let server = Rc::new(Cell::new(link.peer_number()));
        ZkClient {
            link: Rc::new(link),
            session: Rc::default(),
            signal: Rc::default(),
            server,
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
        match connect(&self.link, &self.server, req, self.link.request_budget()).await {
            Some(Resp::Session(id)) => {
                *self.session.borrow_mut() = Some(Session {
                    id,
                    heard: sent,
                    suspended: None,
                    held: vec![],
                    out: vec![],
                });
                let shared = (self.session.clone(), self.signal.clone());
                spawn_pinger(self.link.clone(), shared, self.server.clone(), id);
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

    /// `req`, sent as `ClientCnxn` sends it: while the client is Disconnected a request waits
    /// in its outgoing queue until the connection is back, then goes, and waits for its
    /// answer until the connection is lost (`ConnectionLoss`: its server closed it, or the
    /// pinger heard nothing for two thirds of the session timeout). `None` if no answer came
    /// before that, or within the session timeout, the wait included.
    async fn request(&self, req: Req) -> Option<Resp> {
        let budget = self.link.params.timeout();
        let deadline = self.link.ctx.mono_now() + budget;
        if !self.until_connected(budget).await {
            return None;
        }
        let left = deadline.saturating_sub(self.link.ctx.mono_now());
        let asked = std::pin::pin!(ask(&self.link, &self.server, req, left));
        let Some(lost) = self.on_connection_loss() else {
            return asked.await;
        };
        match select(asked, lost).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => None,
        }
    }

    /// Ends when the session's connection is lost (or the session ends); `None` without a
    /// session.
    fn on_connection_loss(&self) -> Option<oneshot::Receiver<()>> {
        let mut session = self.session.borrow_mut();
        let live = session.as_mut()?;
        // The requests answered since dropped their ends: keep only those still out.
        live.out.retain(|out| !out.is_canceled());
        let (tx, rx) = oneshot::channel();
        live.out.push(tx);
        Some(rx)
    }

    /// Waits while the session's connection is lost, up to `budget`: `false` if it is still
    /// lost then. At once `true` without a session (a request then hears that it expired).
    async fn until_connected(&self, budget: Duration) -> bool {
        let back = match self.session.borrow_mut().as_mut() {
            Some(live) if live.suspended.is_some() => {
                let (tx, rx) = oneshot::channel();
                live.held.push(tx);
                rx
            }
            _ => return true,
        };
        self.link.ctx.timeout_local(budget, back).await.is_some()
    }

    /// The lock's children (name, sequence) and the zxid they were listed at; `None` when
    /// the request got no answer.
    async fn children(&self) -> Option<(Vec<(String, u64)>, u64)> {
        match self.request(Req::Children).await {
            Some(Resp::Children(children, zxid)) => Some((children, zxid)),
            _ => None,
        }
    }

    /// The recipe's loop: list the children, hold the lock if ours is the lowest, else watch
    /// the next-lower node. `None` if our node is gone (or, `owner-checked`, belongs to a
    /// session that is no longer ours) or time ran out. `owner`: the session that created
    /// our node.
    async fn wait_turn(&mut self, mine: &str, owner: u64, deadline: Duration) -> Option<()> {
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        let mut lost = false;
        while self.link.ctx.mono_now() < deadline {
            // With `session_retry`, the connection is made again (and the session's fate
            // heard) before anything is asked after a request that got no answer, and a
            // session the library has given up (LOST) is replaced first.
            let retrying = self.link.params.session_retry.is_some();
            let gone = retrying && self.current().is_none();
            if (lost || gone) && self.reattach().await.is_none() {
                continue;
            }
            let Some((children, zxid)) = self.children().await else {
                lost = self.link.params.session_retry.is_some();
                continue;
            };
            lost = false;
            if retrying && self.current().is_none() {
                // Given up while the listing was out: a new session first.
                continue;
            }
            let position = children.iter().position(|(name, _)| name == mine)?;
            if !self.owns(owner) {
                return None;
            }
            let Some(position) = position.checked_sub(1) else {
                let retried = self.link.params.session_retry.is_some();
                if retried && self.current() != Some(owner) {
                    let why = "our node, of an expired session, listed lowest: the lock taken";
                    self.link.ctx.note(why);
                }
                return Some(());
            };
            let watch = match self.link.params.variant {
                // The herd: any change of the children wakes every waiter.
                Variant::WatchParent => Req::WatchChildren { min_zxid: zxid },
                _ => Req::Watch {
                    name: children[position].0.clone(),
                    min_zxid: zxid,
                },
            };
            self.watch(watch, poll).await;
        }
        None
    }

    /// Sets `watch` on the client's server once connected and waits for it to fire, up to
    /// `poll`: a timeout is no error, the caller asks again (a long poll).
    async fn watch(&self, watch: Req, poll: Duration) {
        if self.until_connected(poll).await {
            let server = self.link.peers[self.server.get()];
            let _ = self.link.caller.call(server, watch, poll).await;
        }
    }

    /// The current session, if the client has one.
    fn current(&self) -> Option<u64> {
        self.session.borrow().as_ref().map(|s| s.id)
    }

    /// Whether a listed node created by session `owner` is the client's own. Only a Curator
    /// (or kazoo) acquire that went on into a new session (`session_retry`) can find one of
    /// another session: `by-guid` takes it by its name, `owner-checked` does not (its
    /// `ephemeralOwner` is not the current session).
    fn owns(&self, owner: u64) -> bool {
        if self.current() == Some(owner) {
            return true;
        }
        match self.link.params.session_retry {
            Some(SessionRetry::OwnerChecked) => {
                self.link
                    .ctx
                    .note("our node belongs to an expired session: not ours (owner checked)");
                false
            }
            Some(SessionRetry::ByGuid) | None => true,
        }
    }

    /// Curator (or kazoo) with `session_retry`: after a request got no answer, the connection
    /// is made again before the next try, and the server says whether the session lives
    /// (`ClientCnxn` reconnecting; a follower asks the leader). `Expired`: Curator's new
    /// ZooKeeper handle opens a new session and the operation goes on in it. Without
    /// `session_retry` nothing is done here. The current session, if any.
    async fn reattach(&mut self) -> Option<u64> {
        self.link.params.session_retry?;
        if let Some(id) = self.current() {
            let sent = self.link.ctx.mono_now();
            let attach = Req::Attach { session: id };
            let budget = self.link.request_budget();
            match connect(&self.link, &self.server, attach, budget).await {
                Some(Resp::Pong) => {
                    if let Some(s) = self.session.borrow_mut().as_mut() {
                        s.heard = s.heard.max(sent);
                    }
                    return Some(id);
                }
                Some(Resp::Expired) => self.end_session("expired (told on reconnecting)"),
                _ => return None,
            }
        }
        let id = self.session().await.ok()?;
        self.link.ctx.note(match self.link.params.client {
            Library::Kazoo => "new session: the acquire goes on in it (kazoo's KazooRetry)",
            _ => "new session: the acquire goes on in it (Curator's retry loop)",
        });
        Some(id)
    }

    /// The `check-then-create` bug's wait: until the lock has no children at all (watching
    /// the lowest one meanwhile). `None` if time ran out.
    async fn wait_empty(&self, deadline: Duration) -> Option<()> {
        let poll = Duration::from_millis(self.link.params.watch_poll_ms);
        while self.link.ctx.mono_now() < deadline {
            let Some((children, zxid)) = self.children().await else {
                continue;
            };
            let Some((lowest, _)) = children.first() else {
                return Some(());
            };
            let watch = Req::Watch {
                name: lowest.clone(),
                min_zxid: zxid,
            };
            self.watch(watch, poll).await;
        }
        None
    }

    /// Creates the client's node: its name, sequence and the session that created it.
    /// Curator creates in protected mode and, when a reply is lost, looks for its GUID among
    /// the children before it creates again, within its connection timeout
    /// (`CreateBuilderImpl`); kazoo does the same with its uuid prefix until the acquire's
    /// `deadline` (`_find_node`, under `KazooRetry`); with `session_retry` either goes on
    /// in a new session when its own expires, with the same GUID.
    async fn create(
        &mut self,
        session: u64,
        deadline: Duration,
    ) -> Result<(String, u64, u64), Acquired> {
        let params = &self.link.params;
        let guid = (params.client.protected_creates())
            .then(|| format!("{:016x}", self.link.ctx.rng().gen::<u64>()));
        let give_up = match params.client {
            Library::Kazoo => deadline,
            _ => {
                let retry_ms = params.connection_timeout_ms.unwrap_or(0);
                self.link.ctx.mono_now() + Duration::from_millis(retry_ms)
            }
        };
        // The session the next create is sent in, and the one Curator's protected mode
        // recorded when it began (`ProtectedMode.sessionId`).
        let (mut session, mut began) = (session, session);
        loop {
            let create = Req::Create {
                session,
                persistent: self.link.params.variant == Variant::Persistent,
                guid: guid.clone(),
            };
            match self.request(create).await {
                Some(Resp::Created(name, seq)) => return Ok((name, seq, session)),
                Some(Resp::Expired) => {
                    self.end_session("expired");
                    if self.link.params.session_retry.is_none() {
                        return Err(Acquired::Failed("session expired".into()));
                    }
                }
                _ => {}
            }
            let Some(guid) = guid.as_deref() else {
                return Err(Acquired::Unknown("no answer to create".into()));
            };
            if self.link.ctx.mono_now() >= give_up {
                return Err(Acquired::Unknown(
                    "no answer to create within the retry's time".into(),
                ));
            }
            if self.link.params.session_retry.is_some() {
                match self.reattach().await {
                    Some(current) => session = current,
                    None => continue,
                }
            }
            if let Some((name, seq)) = self.find_protected(guid).await {
                if self.found_is_ours(&mut began) {
                    self.link
                        .ctx
                        .note("protected mode: the node of a lost create found by its GUID");
                    return Ok((name, seq, began));
                }
            }
        }
    }

    /// Whether a node found by the protection GUID is taken (`ProtectedMode.validateFoundNode`):
    /// always, unless `owner-checked` and the session changed since protected mode recorded
    /// it (`began`): then the node, of a dead session, is ignored (Curator deletes it in the
    /// background; here its session's close does) and the new session is recorded.
    fn found_is_ours(&self, began: &mut u64) -> bool {
        let current = self.current();
        if current == Some(*began) {
            return true;
        }
        let checked = self.link.params.session_retry == Some(SessionRetry::OwnerChecked);
        if !checked {
            return true;
        }
        self.link
            .ctx
            .note("protected mode: a node of an expired session found by GUID: ignored");
        if let Some(now) = current {
            *began = now;
        }
        false
    }

    /// The child whose name carries `guid` (`findProtectedNodeInForeground`), if the listing
    /// answered and shows one.
    async fn find_protected(&self, guid: &str) -> Option<(String, u64)> {
        let Some(Resp::Children(children, _)) = self.request(Req::Children).await else {
            return None;
        };
        let prefix = format!("_c_{guid}-");
        children
            .into_iter()
            .find(|(name, _)| name.starts_with(&prefix))
    }

    /// Deletes our node: a delete that met a connection loss is sent again once the client
    /// is connected (a delete is idempotent, and recipes retry on `ConnectionLoss`), until a
    /// session timeout has passed.
    async fn delete(&self, name: String) -> Option<Resp> {
        let deadline = self.link.ctx.mono_now() + self.link.params.timeout();
        loop {
            let answer = self.request(Req::Delete { name: name.clone() }).await;
            let over = self.link.ctx.mono_now() >= deadline || self.current().is_none();
            if answer.is_some() || over {
                return answer;
            }
        }
    }
}

/// Opens the client's connection as `ZooKeeper`'s handle does and sends `req` on it: to the
/// client's server, or, if it refuses (its process is down) or does not answer, the next
/// one; a server without a leader is asked again after a pause (a real one refuses until it
/// has one, and the client goes round the others, which are electing too). The answer, if
/// one came within `budget`.
async fn connect(link: &Link, server: &Cell<usize>, req: Req, budget: Duration) -> Option<Resp> {
    let deadline = link.ctx.mono_now() + budget;
    while link.ctx.mono_now() < deadline {
        let at = server.get();
        let answer = (link.caller)
            .call(link.peers[at], req.clone(), link.request_timeout())
            .await;
        match answer {
            Ok(Resp::NotLeader) => link.ctx.sleep_local(ELECTION_RETRY).await,
            // Refused or unanswered: the next server at once.
            Err(_) => server.set((at + 1) % link.peers.len()),
            Ok(resp) => return Some(resp),
        }
    }
    None
}

/// `req` on the client's connection, to the server it is connected to, which answers it
/// (a follower forwards a write to the leader and answers once it applied it). Sent once: a
/// request waits on its connection for its answer (a paused server answers when it runs
/// again), and a connection that fails fails it (`ConnectionLoss`: the caller's retry, after
/// the pinger reconnected, is the library's). A server without a leader is asked again
/// after a pause. The answer, if one came within `budget`.
async fn ask(link: &Link, server: &Cell<usize>, req: Req, budget: Duration) -> Option<Resp> {
    let deadline = link.ctx.mono_now() + budget;
    while link.ctx.mono_now() < deadline {
        let left = deadline - link.ctx.mono_now();
        let to = link.peers[server.get()];
        match link.caller.call(to, req.clone(), left).await {
            Ok(Resp::NotLeader) => link.ctx.sleep_local(ELECTION_RETRY).await,
            Ok(resp) => return Some(resp),
            Err(_) => return None,
        }
    }
    None
}

/// A ping on the client's connection, to the server it is connected to (peer number `at`),
/// so that silence on that connection, not the leader's, suspends the client: a follower
/// answers it and relays the session's touch to the leader. A try unanswered within the
/// request timeout is sent again to the same server (TCP retransmits; the client moves to
/// another server only on reconnecting). A server without a leader does not answer (it
/// closes its clients' connections).
async fn ping_server(link: &Link, at: usize, session: u64, budget: Duration) -> Option<Resp> {
    let ping = Req::Ping { session };
    let deadline = link.ctx.mono_now() + budget;
    while link.ctx.mono_now() < deadline {
        let wait = (deadline - link.ctx.mono_now()).min(link.request_timeout());
        match link.caller.call(link.peers[at], ping.clone(), wait).await {
            Ok(Resp::NotLeader) => return None,
            Ok(resp) => return Some(resp),
            Err(_) => {}
        }
    }
    None
}

/// One reconnection try, as `ClientCnxn`'s: to the next server (`StaticHostProvider.next`),
/// and on as [`connect`] goes (past a server that is down); the one that serves says whether
/// the session lives (a follower asks the leader).
async fn reconnect(
    link: &Link,
    server: &Cell<usize>,
    session: u64,
    budget: Duration,
) -> Option<Resp> {
    server.set((server.get() + 1) % link.peers.len());
    let answer = connect(link, server, Req::Attach { session }, budget);
    // Bounded here too (the link's last try may outlast its budget), so Curator's LOST
    // comes on time.
    link.ctx.timeout_local(budget, answer).await.flatten()
}

/// Notes a connection state and raises the grant's signal where the error policy counts it
/// as losing the lock; `true` if the session is lost (the pinger stops).
fn report(link: &Link, signal: &SharedSignal, session: &mut Option<Session>, state: State) -> bool {
    let lost = matches!(state, State::Lost(_));
    let why = match state {
        State::Lost(why) | State::Suspended(why) => why,
    };
    link.ctx.note(why);
    if lost {
        *session = None;
    }
    if lost || link.params.error_policy.unwrap_or_default() == ErrorPolicy::Standard {
        if let Some(signal) = signal.borrow().as_ref() {
            signal.raise(why);
        }
    }
    lost
}

/// The connection was closed by its server's side (its process died, or it lost its
/// leader: [`crate::raft::host::HostConfig::closing_clients_when_leaderless`]):
/// `Disconnected` now, and so `SUSPENDED` at once, not two thirds of the timeout later.
fn disconnected(link: &Link, live: &mut Session) -> State {
    live.suspend(link);
    State::Suspended("connection closed by its server (Disconnected; Curator: SUSPENDED)")
}

/// What the answer to a ping sent at `sent` tells: nothing new (the session lives, the
/// connection restored if it was not), the session expired (LOST), or, unanswered, what the
/// silence says ([`silence`]).
fn heard(
    link: &Link,
    live: &mut Session,
    answer: Option<Resp>,
    sent: Duration,
    reconnecting: bool,
) -> Option<State> {
    match answer {
        Some(Resp::Pong) => {
            if live.suspended.take().is_some() {
                link.ctx.note("connection restored: session alive");
                for held in live.held.drain(..) {
                    let _ = held.send(());
                }
            }
            live.heard = sent;
            None
        }
        Some(Resp::Expired) if reconnecting => Some(State::Lost(
            "session expired: told on reconnecting (Expired; Curator: LOST)",
        )),
        Some(Resp::Expired) => Some(State::Lost("session expired (LOST)")),
        _ => silence(link, live),
    }
}

fn spawn_pinger(link: Rc<Link>, shared: (SharedSession, SharedSignal), server: Server, id: u64) {
    let ctx = link.ctx.clone();
    let (session, signal) = shared;
    ctx.spawn(async move {
        let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.id == id);
        loop {
            let (wait, budget, reconnecting) = match session.borrow().as_ref() {
                Some(live) if live.id == id => next_try(&link, live),
                _ => return,
            };
            // kazoo 2.10.0 pings when its wall clock says so (read only for it: a hot path).
            let by_wall = link.params.ping_clock == PingClock::Wall && !reconnecting;
            let wall_due_ms = by_wall.then(|| link.ctx.wall_ms() + wait.as_millis() as i64);
            // The server the client is connected to, unless it is reconnecting: its side's
            // close is `Disconnected`.
            let connected = (!reconnecting).then(|| link.peers[server.get()]);
            let sleep = link.ctx.sleep_local(wait);
            let slept = match connected {
                Some(at) => link.caller.unless_closed(at, sleep).await.is_ok(),
                None => {
                    sleep.await;
                    true
                }
            };
            if !slept {
                let mut s = session.borrow_mut();
                if !current(&s) {
                    return;
                }
                let state = disconnected(&link, s.as_mut().expect("current"));
                report(&link, &signal, &mut s, state);
                continue;
            }
            let closed = match wall_due_ms {
                Some(due_ms) => wait_for_wall(&link, server.get(), id, due_ms).await,
                None => None,
            };
            if !current(&session.borrow()) {
                return;
            }
            let sent = link.ctx.mono_now();
            let ping = ping_server(&link, server.get(), id, budget);
            let answer = match (closed, connected, budget.is_zero()) {
                (Some(woken), _, _) => woken.map(Some),
                (None, _, true) => Ok(None),
                (None, None, false) => Ok(reconnect(&link, &server, id, budget).await),
                // A connection closed while the ping is out is Disconnected too.
                (None, Some(at), false) => link.caller.unless_closed(at, ping).await,
            };
            let mut s = session.borrow_mut();
            if !current(&s) {
                return;
            }
            let live = s.as_mut().expect("current");
            let state = match answer {
                Ok(answer) => heard(&link, live, answer, sent, reconnecting),
                Err(_) => Some(disconnected(&link, live)),
            };
            let Some(state) = state else {
                continue;
            };
            if report(&link, &signal, &mut s, state) {
                return;
            }
        }
    });
}

/// kazoo 2.10.0's connection loop (`ping_clock = "wall"`): after its wait it pings only once
/// `time.time()` has reached the ping's time, and waits out the rest otherwise (a wall clock
/// stepped back by J holds the ping J longer), in `select` on its socket: if the server
/// closes the session's connection meanwhile (it expired), kazoo wakes, reconnects and
/// hears `Expired`, which is returned; woken by anything else on its socket (the connection
/// refused or closed, a server without a leader, which closes its clients' connections), it
/// is Disconnected at once: `Err` with the server. `None` once the wall clock is due. Without
/// a step the wall clock has moved as far as the monotonic one, and nothing more is waited.
async fn wait_for_wall(
    link: &Link,
    at: usize,
    session: u64,
    due_ms: i64,
) -> Option<Result<Resp, NodeIdx>> {
    loop {
        let behind_ms = due_ms - link.ctx.wall_ms();
        if behind_ms <= 0 {
            return None;
        }
        let behind = Duration::from_millis(behind_ms as u64);
        // On the connection the client has, to the server it is connected to (peer number
        // `at`), which closes it when it applies the session's close: no other server tried.
        let close = (link.caller).call(link.peers[at], Req::AwaitClose { session }, behind);
        let started = link.ctx.mono_now();
        match link.ctx.timeout_local(behind, close).await {
            Some(Ok(Resp::Expired)) => return Some(Ok(Resp::Expired)),
            Some(_) if link.ctx.mono_now() < started + behind => {
                return Some(Err(link.peers[at]));
            }
            _ => {}
        }
    }
}

/// When the pinger tries next, how long it waits for an answer, and whether it is
/// reconnecting. Connected, the client pings when idle for a third of the timeout.
/// Disconnected (SUSPENDED), `ClientCnxn`'s send thread reconnects after a random sleep below
/// a second, each try bounded by the connect timeout (the session timeout over the servers),
/// and the server's answer to its `ConnectRequest` says at once whether the session lives:
/// the first connection after a heal learns it expired. Curator injects LOST a session
/// timeout after SUSPENDED on a timer of its own (`ConnectionStateManager.processEvents`
/// polls its queue until then): neither the sleep nor the wait runs past that.
fn next_try(link: &Link, live: &Session) -> (Duration, Duration, bool) {
    let timeout = link.params.timeout();
    let Some(since) = live.suspended else {
        return (timeout / 3, timeout / 3, false);
    };
    let sleep_ms = link.ctx.rng().gen_range(0..RECONNECT_SLEEP_MS_MAX);
    let servers = link.peers.len().max(1) as u32;
    let (mut wait, mut budget) = (Duration::from_millis(sleep_ms), timeout / servers);
    if link.params.client.injects_lost() {
        let lost_in = lost_in(link, since);
        wait = wait.min(lost_in);
        budget = budget.min(lost_in - wait);
    }
    (wait, budget, true)
}

/// `ClientCnxn`'s sleep before each reconnection try: `r.nextInt(1000)` ms.
const RECONNECT_SLEEP_MS_MAX: u64 = 1_000;

/// A connection state the client library reports.
enum State {
    /// `Disconnected` / `SUSPENDED`: the session may be alive.
    Suspended(&'static str),
    /// `Expired` / `LOST`: the session is gone.
    Lost(&'static str),
}

/// How long until Curator's `ConnectionStateManager` injects LOST, if nothing is heard
/// meanwhile (zero: now). Its loop (`processEvents`) polls its event queue for a session
/// timeout from SUSPENDED, on the monotonic clock (`BlockingQueue.poll`), and then checks
/// the time suspended by the wall clock (`checkSessionExpiration`:
/// `System.currentTimeMillis() - startOfSuspendedEpoch`, Curator 5.4 as in its main branch
/// of July 2026); while a wall clock stepped back says less, it polls again for what the wall
/// clock says is left. So a step back by J while SUSPENDED makes LOST J late; a step forward
/// changes nothing (the poll is on the monotonic clock). Without a step both clocks agree.
fn lost_in(link: &Link, since: Suspended) -> Duration {
    let timeout = link.params.timeout();
    let polled = (since.mono + timeout).saturating_sub(link.ctx.mono_now());
    if !polled.is_zero() {
        return polled;
    }
    let suspended_ms = link.ctx.wall_ms() - since.wall_ms;
    let left_ms = timeout.as_millis() as i64 - suspended_ms;
    Duration::from_millis(left_ms.max(0) as u64)
}

/// What an unanswered ping tells: `SUSPENDED` two thirds of the timeout after the last
/// answer; Curator's `LOST`, injected once a whole session timeout has passed since then
/// by its count ([`lost_in`]). The raw client hears nothing more.
fn silence(link: &Link, live: &mut Session) -> Option<State> {
    let (now, timeout) = (link.ctx.mono_now(), link.params.timeout());
    match live.suspended {
        None if now >= live.heard + timeout * 2 / 3 => {
            live.suspend(link);
            Some(State::Suspended("connection lost (SUSPENDED)"))
        }
        Some(since) if link.params.client.injects_lost() && lost_in(link, since).is_zero() => {
            Some(State::Lost(
                "session timeout elapsed while SUSPENDED: session expiration injected (LOST)",
            ))
        }
        _ => None,
    }
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
        let check_first = self.link.params.variant == Variant::CheckThenCreate;
        if check_first {
            if self.wait_empty(deadline).await.is_none() {
                return Acquired::Failed("gave up waiting for the lock to be free".into());
            }
            self.link.ctx.point(CHECK_THEN_CREATE_POINT).await;
        }
        let (name, seq, owner) = match self.create(session, deadline).await {
            Ok(created) => created,
            Err(outcome) => return outcome,
        };
        if !check_first && self.wait_turn(&name, owner, deadline).await.is_none() {
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

    /// The lock holds while the connection does (two thirds of the timeout after the last
    /// answered ping); `ignore-suspended`: until the client hears `Expired`; Curator or
    /// kazoo with the `session` error policy: until `LOST`.
    fn validity(&mut self, _grant: &Grant) -> Validity {
        let session = self.session.borrow();
        let Some(s) = session.as_ref() else {
            return Validity::Lost("the session expired".into());
        };
        // Disconnected two thirds of the timeout after the last answer, or when the server
        // closed the connection, if that came first.
        let silent = s.heard + self.link.params.timeout() * 2 / 3;
        let connected = Validity::Until(s.suspended.map_or(silent, |since| silent.min(since.mono)));
        match (self.link.params.client, self.link.params.variant) {
            (Library::Curator | Library::Kazoo, _) => {
                match self.link.params.error_policy.unwrap_or_default() {
                    ErrorPolicy::Standard => connected,
                    ErrorPolicy::Session => Validity::Indefinite,
                }
            }
            (Library::Zookeeper, Variant::IgnoreSuspended) => Validity::Indefinite,
            (Library::Zookeeper, _) => connected,
        }
    }

    /// Curator and kazoo: raised when the connection state turns to one the error policy
    /// counts as losing the lock (Curator's `LOST` even while cut off). The raw client has
    /// no such signal.
    fn lost_signal(&mut self, _grant: &Grant) -> Option<LostSignal> {
        if !self.link.params.client.state_listener() {
            return None;
        }
        let signal = LostSignal::new();
        *self.signal.borrow_mut() = Some(signal.clone());
        Some(signal)
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
