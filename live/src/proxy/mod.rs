//! A TCP proxy of locksim's own on a link between two nodes (a client and a server or the
//! resource, or two servers): the connecting side connects to the proxy, which forwards
//! bytes both ways, each way (`Dir`) held for the link's drawn latency if it has one (the
//! scenario's `[network]`). A partition cuts one direction or both, in one of two ways:
//! - **stall**: bytes stop moving (held in the proxy) until the heal, and then arrive, unless
//!   an endpoint gave up on the connection meanwhile. Nothing tells either side: requests
//!   time out; what was sent meanwhile arrives after the heal, as TCP retransmits it. This is
//!   the simulator's `[network] partition = "delay"`.
//! - **reset**: every open connection is closed at once and new ones are closed as soon as
//!   they are accepted: both sides learn at once (a router that answers with RST). What was
//!   on them is lost: the simulator's `partition = "drop"`.
//!
//! Cuts nest, as the simulator's do: a direction flows again when every cut of it healed.
//! A proxy in front of a server that several servers dial (an etcd member's peer URL) cuts
//! one sender's connections only ([`Proxy::cut_from`]): each connection's sender is asked of
//! the kernel when it is accepted ([`crate::proxy::sender`]); one whose sender is unknown is cut by
//! every cut of the proxy, since it may be any sender's.
//! A proxy keeps only its open connections, and closing it (or dropping it) ends every thread
//! it started, a stalled link's included.
//!
//! **Loss, as TCP experiences it** ([`LossPlan`], [`LossDraws`]): TCP never loses a message
//! for the application. A lost segment is resent after the retransmission timeout, and
//! everything behind it on the connection waits (head-of-line blocking). So a chunk the
//! proxy forwards while the run's loss probability is above zero is lost with that
//! probability (drawn from the run's seed, each proxy and direction its own stream), held
//! for Linux's smallest RTO (`TCP_RTO_MIN`, 200 ms: on loopback the RTT is microseconds, so
//! the kernel's RTO is its floor), and drawn again at each resend with the probability then in
//! force, the RTO doubling each time (capped at `TCP_RTO_MAX`, 120 s); after 15 resends
//! (`tcp_retries2`) the kernel gives up and the connection is reset. Later chunks of that
//! connection and direction wait behind it, in order. The handshake is not lossy: the proxy
//! sits behind the kernel's `accept`, so a lost SYN (1 s, `TCP_TIMEOUT_INIT`) is not modelled.

pub mod sender;

use crate::clock;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Linux's smallest retransmission timeout, `TCP_RTO_MIN` (`HZ/5`, include/net/tcp.h): what a
/// lost segment waits on loopback, where the RTT adds microseconds to it.
pub const RTO_MIN: Duration = Duration::from_millis(200);
/// Linux's largest, `TCP_RTO_MAX` (`120*HZ`): the backoff stops doubling there.
const RTO_MAX: Duration = Duration::from_secs(120);
/// Resends before the kernel gives up on a connection (`net.ipv4.tcp_retries2`'s default).
const RESENDS_MAX: u32 = 15;
/// Mixed into a proxy's seed for its loss draws, apart from its latency draws.
const LOSS_STREAM: u64 = 0x6c6f_7373;

/// The run's loss probability over time: `[network] loss_probability` from the run's start,
/// replaced by each `loss` fault's for its window (a later window replaces an earlier one,
/// and when it ends the network's own probability applies again, as in the simulator).
/// Nothing is lost before the start (the servers form their cluster then).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LossPlan {
    /// The run's zero on the machine's monotonic clock, in ns.
    pub start_ns: u64,
    /// `[network] loss_probability`, per chunk.
    pub base: f64,
    /// The `loss` windows, in the order they start.
    pub windows: Vec<LossWindow>,
}

/// One `loss` fault's window, in ms since the run's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossWindow {
    /// Start, in ms since the run's start.
    pub at_ms: u64,
    /// End (exclusive), in ms since the run's start.
    pub until_ms: u64,
    /// Loss probability per chunk meanwhile.
    pub probability: f64,
}

impl LossPlan {
    /// The loss probability in force at `t_ns` (the machine's monotonic clock).
    pub fn probability_at(&self, t_ns: u64) -> f64 {
        let Some(since_ns) = t_ns.checked_sub(self.start_ns) else {
            return 0.0;
        };
        let ms = since_ns / 1_000_000;
        // The latest window started by now is the one in force, if it has not ended.
        let latest = self.windows.iter().rev().find(|w| w.at_ms <= ms);
        match latest {
            Some(w) if ms < w.until_ms => w.probability,
            _ => self.base,
        }
    }

    /// Whether nothing is ever lost.
    pub fn lossless(&self) -> bool {
        self.base == 0.0 && self.windows.iter().all(|w| w.probability == 0.0)
    }
}

/// One direction's loss draws, from its own seeded stream.
pub struct LossDraws(ChaCha8Rng);

impl LossDraws {
    /// The draws of the stream `seed`.
    pub fn new(seed: u64) -> LossDraws {
        LossDraws(ChaCha8Rng::seed_from_u64(seed))
    }

    /// How long the resends hold a chunk first sent at `sent_ns`: zero if it arrives, else
    /// the RTOs it waited (200 ms, then 400 ms more, ...), each resend lost again with the
    /// probability in force when it leaves; `None` if the kernel would give up (reset).
    pub fn hold(&mut self, plan: &LossPlan, sent_ns: u64) -> Option<Duration> {
        let (mut t_ns, mut rto) = (sent_ns, RTO_MIN);
        for _ in 0..=RESENDS_MAX {
            let p = plan.probability_at(t_ns);
            assert!((0.0..=1.0).contains(&p), "a probability: {p}");
            if p == 0.0 || !self.0.gen_bool(p) {
                return Some(Duration::from_nanos(t_ns - sent_ns));
            }
            t_ns += rto.as_nanos() as u64;
            rto = (rto * 2).min(RTO_MAX);
        }
        None
    }
}

/// When a chunk sent at `sent_ns` is due: after its latency and its resends, and never before
/// the chunk ahead of it in the same direction (`last_due_ns`), as TCP delivers in order.
pub fn due_ns(sent_ns: u64, latency: Duration, hold: Duration, last_due_ns: u64) -> u64 {
    let due = sent_ns + latency.as_nanos() as u64 + hold.as_nanos() as u64;
    due.max(last_due_ns)
}

/// How a partition cuts a proxied link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutMode {
    /// Hold the bytes until the heal.
    Stall,
    /// Close every connection.
    Reset,
}

/// A direction of a proxied link (its index in the per-direction arrays, `as usize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From the side that connects (a client; a server dialling a peer) to the upstream.
    Up = 0,
    /// From the upstream back.
    Down = 1,
}

/// A one-way latency, drawn uniformly from `ms_min..=ms_max` for each chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// Smallest, in ms.
    pub ms_min: f64,
    /// Largest, in ms.
    pub ms_max: f64,
}

/// How a proxy delays its bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Delays {
    /// Each direction's latency (`Dir::Up` first); `None` forwards at once.
    pub latency: [Option<Latency>; 2],
    /// Seeds the latency draws.
    pub seed: u64,
}

impl Delays {
    /// The scenario's latencies on the link between `a` (which connects) and `b`: each way
    /// its `[network]` link override, else its default.
    pub fn of(net: &locksim_sim::NetConfig, a: &str, b: &str, seed: u64) -> Delays {
        Delays {
            latency: [latency(net, a, b), latency(net, b, a)],
            seed,
        }
    }

    /// The scenario's default `[network]` latency, each way: what every link between two
    /// servers carries (live mode refuses a link override between two servers, see
    /// `refuse::network`), drawn from `seed`.
    pub fn between_servers(net: &locksim_sim::NetConfig, seed: u64) -> Delays {
        let default = Latency::of(net.latency_ms_min, net.latency_ms_max);
        Delays {
            latency: [default; 2],
            seed,
        }
    }

    /// The same latencies with the `i`-th proxy's own draws.
    pub fn nth(self, i: usize) -> Delays {
        Delays {
            seed: self.seed ^ ((i as u64 + 1) << 40),
            ..self
        }
    }
}

/// The scenario's one-way latency from `from` to `to` (`NetConfig::latency_ms`, the
/// simulator's rule); `None` if it is zero.
fn latency(net: &locksim_sim::NetConfig, from: &str, to: &str) -> Option<Latency> {
    let (ms_min, ms_max) = net.latency_ms(from, to);
    Latency::of(ms_min, ms_max)
}

impl Latency {
    /// A latency of `ms_min..=ms_max`; `None` if it is zero.
    fn of(ms_min: f64, ms_max: f64) -> Option<Latency> {
        (ms_max > 0.0).then_some(Latency { ms_min, ms_max })
    }
}

/// Who opened a connection, where the proxy asks ([`Proxy::identifying`]): a node name, or
/// `None` if unknown (or not asked).
type Sender = Option<String>;

/// What may move on the link.
#[derive(Default)]
struct Gate {
    /// Cuts in force of every connection, per direction.
    cuts: [u32; 2],
    /// Cuts in force of one sender's connections, per direction.
    from: BTreeMap<String, [u32; 2]>,
    /// Cuts close connections instead of holding bytes.
    reset: bool,
    /// The proxy is closed: every thread ends.
    closed: bool,
}

impl Gate {
    /// Cuts in force in `dir` of a connection from `sender` (unknown: every sender's cuts).
    fn cuts_of(&self, dir: usize, sender: &Sender) -> u32 {
        let own = match sender {
            Some(s) => self.from.get(s).map_or(0, |c| c[dir]),
            None => self.from.values().map(|c| c[dir]).sum(),
        };
        self.cuts[dir] + own
    }
    fn held(&self, dir: usize, sender: &Sender) -> bool {
        self.cuts_of(dir, sender) > 0 && !self.reset && !self.closed
    }
    fn dead(&self, dir: usize, sender: &Sender) -> bool {
        self.closed || (self.reset && self.cuts_of(dir, sender) > 0)
    }
    fn dead_either(&self, sender: &Sender) -> bool {
        self.dead(0, sender) || self.dead(1, sender)
    }
    /// The cut counts `cut`/`heal` change: the whole link's, or one sender's.
    fn counts(&mut self, sender: Option<&str>) -> &mut [u32; 2] {
        match sender {
            None => &mut self.cuts,
            Some(s) => self.from.entry(s.to_owned()).or_default(),
        }
    }
}

/// Names the sender of an accepted connection.
type Identify = Box<dyn Fn(&TcpStream) -> Sender + Send + Sync>;

/// Reads the first message of an accepted connection from the connecting side and returns
/// the bytes to send upstream in its place (an error closes the connection): a server that
/// announces its own address in it (ZooKeeper's election) is made to announce its proxy.
pub type Rewrite = Box<dyn Fn(&mut TcpStream) -> std::io::Result<Vec<u8>> + Send + Sync>;

/// How long a connecting side may take to send the first message a proxy rewrites.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(2);

/// A link's gate, its open connections (to close them on a reset or at the end) and its
/// threads. Forwarding threads of a stalled link wait on `changed` instead of polling: a run
/// that reconnects through a stalled link every try (Redlock's clients do) would otherwise
/// keep dozens of threads waking every few ms, CPU the clients being measured need.
struct Link {
    gate: Mutex<Gate>,
    changed: Condvar,
    conns: Mutex<BTreeMap<u64, (Sender, [TcpStream; 2])>>,
    next_conn: AtomicU64,
    threads: AtomicUsize,
    delays: Delays,
    draws: Mutex<ChaCha8Rng>,
    identify: Option<Identify>,
    rewrite: OnceLock<Rewrite>,
    /// The run's loss, once the run set it ([`Proxy::lose`]).
    loss: OnceLock<Arc<LossPlan>>,
    /// Each direction's loss draws.
    loss_draws: [Mutex<LossDraws>; 2],
}

impl Link {
    /// Whether `dir` of a connection from `sender` may move bytes now, after waiting out a
    /// stall: false once it is dead.
    fn flows(&self, dir: usize, sender: &Sender) -> bool {
        let gate = self.gate.lock().unwrap();
        let gate = self
            .changed
            .wait_while(gate, |g| g.held(dir, sender))
            .unwrap();
        !gate.dead(dir, sender)
    }

    /// Closes every open connection the gate has made dead (all of them once closed).
    fn close_conns(&self) {
        let gate = self.gate.lock().unwrap();
        self.conns.lock().unwrap().retain(|_, (sender, [a, b])| {
            let dead = gate.dead_either(sender);
            if dead {
                let _ = (a.shutdown(Shutdown::Both), b.shutdown(Shutdown::Both));
            }
            !dead
        });
    }

    /// A chunk's latency in `dir`, if the link has one.
    fn draw(&self, dir: usize) -> Option<Duration> {
        let l = self.delays.latency[dir]?;
        let ms = match l.ms_max > l.ms_min {
            true => self.draws.lock().unwrap().gen_range(l.ms_min..=l.ms_max),
            false => l.ms_min,
        };
        Some(Duration::from_secs_f64(ms / 1_000.0))
    }

    /// Whether chunks may be lost in this run (then every direction goes through a writer).
    fn lossy(&self) -> bool {
        self.loss.get().is_some_and(|plan| !plan.lossless())
    }

    /// How long resends hold a chunk sent now in `dir`; `None`: the connection is given up.
    fn resends(&self, dir: usize, sent_ns: u64) -> Option<Duration> {
        match self.loss.get() {
            Some(plan) => self.loss_draws[dir].lock().unwrap().hold(plan, sent_ns),
            None => Some(Duration::ZERO),
        }
    }
}

/// Counts a thread of the link while it runs.
struct Running(Arc<Link>);

impl Running {
    fn new(link: &Arc<Link>) -> Running {
        link.threads.fetch_add(1, Ordering::SeqCst);
        Running(link.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.threads.fetch_sub(1, Ordering::SeqCst);
    }
}

fn spawn(link: &Arc<Link>, f: impl FnOnce(Arc<Link>) + Send + 'static) {
    let running = Running::new(link);
    std::thread::spawn(move || {
        let link = running.0.clone();
        f(link);
        drop(running);
    });
}

/// One proxied link.
pub struct Proxy {
    /// Where the connecting side connects.
    pub addr: SocketAddr,
    link: Arc<Link>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `upstream`, at once.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        Proxy::with_delays(upstream, Delays::default())
    }

    /// A proxy on a free loopback port forwarding to `upstream`, each chunk held for its
    /// direction's latency.
    pub fn with_delays(upstream: SocketAddr, delays: Delays) -> std::io::Result<Proxy> {
        Proxy::new(upstream, delays, None)
    }

    /// A proxy that asks the kernel who opened each connection ([`crate::proxy::sender`]), so that
    /// [`Proxy::cut_from`] can cut one sender's connections.
    pub fn identifying(upstream: SocketAddr, delays: Delays) -> std::io::Result<Proxy> {
        Proxy::new(upstream, delays, Some(Box::new(crate::proxy::sender::of)))
    }

    fn new(
        upstream: SocketAddr,
        delays: Delays,
        identify: Option<Identify>,
    ) -> std::io::Result<Proxy> {
        assert!(
            upstream.ip().is_loopback(),
            "live mode proxies loopback only"
        );
        // A port never handed out before in this process: one chosen for a server that is
        // not listening yet (or crashed) must not become a proxy's.
        let port = crate::procs::free_port().map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let link = Arc::new(Link {
            gate: Mutex::default(),
            changed: Condvar::new(),
            conns: Mutex::default(),
            next_conn: AtomicU64::new(0),
            threads: AtomicUsize::new(0),
            delays,
            draws: Mutex::new(ChaCha8Rng::seed_from_u64(delays.seed)),
            identify,
            rewrite: OnceLock::new(),
            loss: OnceLock::new(),
            loss_draws: [0, 1].map(|d| Mutex::new(LossDraws::new(loss_seed(delays.seed, d)))),
        });
        spawn(&link, move |l| accept(&l, listener, upstream));
        Ok(Proxy { addr, link })
    }

    /// Rewrites the first message of every connection accepted from now on (once per proxy).
    pub fn rewrite_first(&self, rewrite: Rewrite) {
        let set = self.link.rewrite.set(rewrite);
        assert!(set.is_ok(), "a proxy's first-message rewrite is set once");
    }

    /// Loses chunks from now on as `plan` says (once per proxy): a direction that forwarded at
    /// once goes through a writer thread from its next chunk on.
    pub fn lose(&self, plan: Arc<LossPlan>) {
        let set = self.link.loss.set(plan);
        assert!(set.is_ok(), "a proxy's loss plan is set once");
    }

    /// Cuts the link in `dir` (both ways if `None`).
    pub fn cut(&self, mode: CutMode, dir: Option<Dir>) {
        self.cut_from(None, mode, dir);
    }

    /// Cuts the connections `sender` opened (and those of unknown sender; all of them if
    /// `None`) in `dir` (both ways if `None`); a proxy that does not ask who opened a
    /// connection cuts them all.
    pub fn cut_from(&self, sender: Option<&str>, mode: CutMode, dir: Option<Dir>) {
        let mut gate = self.link.gate.lock().unwrap();
        gate.reset = mode == CutMode::Reset;
        let counts = gate.counts(sender);
        for d in dirs(dir) {
            counts[d] += 1;
        }
        drop(gate);
        self.link.changed.notify_all();
        if mode == CutMode::Reset {
            self.link.close_conns();
        }
    }

    /// Ends one cut of `dir` (both ways if `None`): held bytes move on once no cut is left.
    pub fn heal(&self, dir: Option<Dir>) {
        self.heal_from(None, dir);
    }

    /// Ends one cut of `sender`'s connections (`cut_from`; the whole link's if `None`).
    pub fn heal_from(&self, sender: Option<&str>, dir: Option<Dir>) {
        let mut gate = self.link.gate.lock().unwrap();
        let counts = gate.counts(sender);
        for d in dirs(dir) {
            counts[d] = counts[d].saturating_sub(1);
        }
        drop(gate);
        self.link.changed.notify_all();
    }

    /// Connections open through the proxy now.
    pub fn connections(&self) -> usize {
        self.link.conns.lock().unwrap().len()
    }

    /// Threads of the proxy running now (its acceptor, two per connection, and a writer
    /// per delayed direction of a connection).
    pub fn threads(&self) -> usize {
        self.link.threads.load(Ordering::SeqCst)
    }

    /// Closes every connection and ends every thread, waiting up to a second for them;
    /// returns how many are still running (0 unless one is stuck in a system call).
    pub fn close(self) -> usize {
        let link = self.link.clone();
        drop(self);
        let start = clock::now_ns();
        while link.threads.load(Ordering::SeqCst) > 0 && clock::since(start).as_secs() < 1 {
            clock::sleep(Duration::from_millis(2));
        }
        link.threads.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.link.gate.lock().unwrap().closed = true;
        self.link.changed.notify_all();
        self.link.close_conns();
        // The acceptor blocks in accept(): one last connection wakes it to see `closed`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(100));
    }
}

/// The seed of a proxy's loss draws in direction `dir`, from its `Delays` seed.
fn loss_seed(seed: u64, dir: usize) -> u64 {
    seed ^ LOSS_STREAM ^ ((dir as u64 + 1) << 56)
}

fn dirs(dir: Option<Dir>) -> Vec<usize> {
    match dir {
        Some(d) => vec![d as usize],
        None => vec![0, 1],
    }
}

fn accept(link: &Arc<Link>, listener: TcpListener, upstream: SocketAddr) {
    for conn in listener.incoming().flatten() {
        let gate = link.gate.lock().unwrap();
        if gate.closed {
            return;
        }
        drop(gate);
        spawn(link, move |l| connect(&l, conn, upstream));
    }
}

/// The rewritten first message of `client`, if the link rewrites one (else nothing).
fn first_message(link: &Link, client: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let Some(rewrite) = link.rewrite.get() else {
        return Ok(vec![]);
    };
    client.set_read_timeout(Some(FIRST_MESSAGE_TIMEOUT))?;
    let first = rewrite(client);
    client.set_read_timeout(None)?;
    first
}

fn connect(link: &Arc<Link>, mut client: TcpStream, upstream: SocketAddr) {
    // Asked before anything moves: the sender closes the socket only after it connected.
    let sender = link
        .identify
        .as_ref()
        .and_then(|identify| identify(&client));
    let Some((first, server)) = open(link, &sender, &mut client, upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let clones = (
        client.try_clone(),
        server.try_clone(),
        client.try_clone(),
        server.try_clone(),
    );
    let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = clones else {
        return;
    };
    let id = link.next_conn.fetch_add(1, Ordering::SeqCst);
    link.conns
        .lock()
        .unwrap()
        .insert(id, (sender.clone(), [c3, s3]));
    if link.gate.lock().unwrap().dead_either(&sender) {
        // Closed or reset while connecting: `close_conns` may have run before the insert.
        link.close_conns();
    }
    let up = sender.clone();
    spawn(link, move |l| forward(&l, (id, up, first), Dir::Up, c2, s2));
    forward(link, (id, sender, vec![]), Dir::Down, server, client);
}

/// The first message to send upstream and the connection to it, unless the link is dead
/// for `sender` or either fails.
fn open(
    link: &Link,
    sender: &Sender,
    client: &mut TcpStream,
    upstream: SocketAddr,
) -> Option<(Vec<u8>, TcpStream)> {
    if link.gate.lock().unwrap().dead_either(sender) {
        return None;
    }
    let first = first_message(link, client).ok()?;
    let server = connect_upstream(link, upstream)?;
    Some((first, server))
}

/// How long a peer link's proxy keeps trying an upstream that refuses ([`connect_upstream`]).
const PEER_CONNECT_RETRY: Duration = Duration::from_secs(1);
/// Between two of its tries.
const PEER_CONNECT_RETRY_EVERY: Duration = Duration::from_millis(20);

/// The connection to `upstream`. The proxy accepted its client's connection before it could
/// know whether the upstream listens, so a refused upstream reaches the client as a closed
/// connection, not as a refused connect. A client (a lock client) takes either as the
/// server's failure at once, and the proxy closes at once. A server dialling a peer does
/// not: a refused connect is retried (ZooKeeper's `Learner.connectToLeader`, every 100 ms),
/// but a connection closed after it was made ends the follower's try, and it goes back to
/// the election; a follower that elected a new leader before the leader bound its quorum
/// port would do so every time, and the ensemble would wait for a third server. So a peer
/// link's proxy (one that identifies its senders, [`Proxy::identifying`]) keeps trying a
/// refusing upstream for [`PEER_CONNECT_RETRY`], as the dialling server would itself.
fn connect_upstream(link: &Link, upstream: SocketAddr) -> Option<TcpStream> {
    let started_ns = clock::now_ns();
    loop {
        match TcpStream::connect_timeout(&upstream, Duration::from_secs(1)) {
            Ok(server) => return Some(server),
            Err(_) if link.identify.is_none() => return None,
            Err(_) => {
                let given_up = clock::since(started_ns) >= PEER_CONNECT_RETRY;
                if given_up || link.gate.lock().unwrap().closed {
                    return None;
                }
                clock::sleep(PEER_CONNECT_RETRY_EVERY);
            }
        }
    }
}

/// Copies `from` → `to` in `dir` (after `first`, the rewritten first message, if any),
/// holding bytes while the direction is stalled and each chunk for its latency and its
/// resends; at the end, once the direction flows, the connection is closed both ways and
/// forgotten.
fn forward(
    link: &Arc<Link>,
    (id, sender, first): (u64, Sender, Vec<u8>),
    dir: Dir,
    mut from: TcpStream,
    to: TcpStream,
) {
    let way: Way = (dir as usize, sender);
    let flows = || link.flows(way.0, &way.1);
    let mut out = Out::new(link, &way, to.try_clone());
    let mut buf = vec![0; 16 * 1024];
    let mut sent = first.is_empty() || (flows() && out.send(link, &way, &first));
    while sent {
        sent = match from.read(&mut buf) {
            Ok(0) | Err(_) => false,
            Ok(n) => flows() && out.send(link, &way, &buf[..n]),
        };
    }
    out.finish();
    // The end of the stream (a FIN, a reset) is a segment like the bytes before it: held while
    // the direction is stalled, passed on at the heal. Passed on at once, a server's close of
    // an expired session's connection told a client cut off from it (ZooKeeper's Disconnected).
    flows();
    let _ = (from.shutdown(Shutdown::Both), to.shutdown(Shutdown::Both));
    link.conns.lock().unwrap().remove(&id);
}

/// A direction of a connection: its index and who opened the connection.
type Way = (usize, Sender);

/// Where a direction's chunks go: written at once, or through a writer thread that holds
/// each chunk until its due time (chunks keep their order: one is never due before the
/// one ahead of it).
enum Out {
    Now(Option<TcpStream>),
    Later {
        chunks: std::sync::mpsc::Sender<(u64, Vec<u8>)>,
        last_due_ns: u64,
        /// Disconnected when the writer has ended.
        done: Receiver<()>,
    },
}

impl Out {
    fn new(link: &Arc<Link>, way: &Way, to: std::io::Result<TcpStream>) -> Out {
        let Ok(to) = to else {
            return Out::Now(None);
        };
        if link.delays.latency[way.0].is_none() && !link.lossy() {
            return Out::Now(Some(to));
        }
        Out::later(link, way, to)
    }

    fn later(link: &Arc<Link>, way: &Way, to: TcpStream) -> Out {
        let (tx, rx) = channel();
        let (ended, done) = channel();
        let (dir, sender) = way.clone();
        spawn(link, move |l| {
            write_when_due(&l, (dir, &sender), to, &rx);
            drop(ended);
        });
        Out::Later {
            chunks: tx,
            last_due_ns: 0,
            done,
        }
    }

    /// Sends `chunk` on; false once the connection is over (a write failed, or the kernel
    /// would have given up resending).
    fn send(&mut self, link: &Arc<Link>, way: &Way, chunk: &[u8]) -> bool {
        if matches!(self, Out::Now(Some(_))) && link.lossy() {
            // The run set its loss after this connection opened (a server's peer link made
            // while the cluster formed): everything written so far has been written, so a
            // writer can take over without reordering anything.
            if let Out::Now(Some(to)) = std::mem::replace(self, Out::Now(None)) {
                *self = Out::later(link, way, to);
            }
        }
        match self {
            Out::Now(to) => to.as_mut().is_some_and(|to| to.write_all(chunk).is_ok()),
            Out::Later {
                chunks,
                last_due_ns,
                ..
            } => {
                let sent_ns = clock::now_ns();
                let latency = link.draw(way.0).unwrap_or_default();
                let Some(hold) = link.resends(way.0, sent_ns) else {
                    return false;
                };
                let due = due_ns(sent_ns, latency, hold, *last_due_ns);
                *last_due_ns = due;
                chunks.send((due, chunk.to_vec())).is_ok()
            }
        }
    }

    /// Waits until the writer, if any, delivered what it holds (a reply the server sent
    /// just before it closed the connection still arrives) and ended.
    fn finish(self) {
        if let Out::Later { chunks, done, .. } = self {
            drop(chunks);
            let _ = done.recv();
        }
    }
}

fn write_when_due(
    link: &Link,
    (dir, sender): (usize, &Sender),
    mut to: TcpStream,
    rx: &Receiver<(u64, Vec<u8>)>,
) {
    while let Ok((due_ns, chunk)) = rx.recv() {
        let wait = due_ns.saturating_sub(clock::now_ns());
        if wait > 0 {
            clock::sleep(Duration::from_nanos(wait));
        }
        // A cut while the chunk was on its way holds it too (it is delivered after the heal).
        if !link.flows(dir, sender) || to.write_all(&chunk).is_err() {
            break;
        }
    }
}
