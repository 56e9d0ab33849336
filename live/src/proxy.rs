//! A TCP proxy of locksim's own on a link between a client and a server (or the resource):
//! the client connects to the proxy, which forwards bytes both ways. A partition cuts the
//! link in one of two ways:
//! - **stall**: bytes stop moving (held in the proxy) until the heal, and then arrive, unless
//!   an endpoint gave up on the connection meanwhile. Nothing tells either side: requests
//!   time out; what was sent meanwhile arrives after the heal, as TCP retransmits it. This is
//!   the simulator's `[network] partition = "delay"`.
//! - **reset**: every open connection is closed at once and new ones are closed as soon as
//!   they are accepted: both sides learn at once (a router that answers with RST). What was
//!   on them is lost: the simulator's `partition = "drop"`.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How a partition cuts a proxied link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutMode {
    /// Hold the bytes until the heal.
    Stall,
    /// Close every connection.
    Reset,
}

const OPEN: u8 = 0;
const STALLED: u8 = 1;
const RESET: u8 = 2;

/// A link's state, and its open connections (to close them on a reset). Forwarding threads
/// of a stalled link wait on `changed` instead of polling: a run that reconnects through a
/// stalled link every try (Redlock's clients do) would otherwise keep dozens of threads
/// waking every few ms, CPU the clients being measured need.
#[derive(Default)]
struct Link {
    state: Mutex<u8>,
    changed: Condvar,
    conns: Mutex<Vec<TcpStream>>,
}

impl Link {
    fn state(&self) -> u8 {
        *self.state.lock().unwrap()
    }

    fn set(&self, state: u8) {
        *self.state.lock().unwrap() = state;
        self.changed.notify_all();
    }

    /// The state once it is not `STALLED`.
    fn unstalled(&self) -> u8 {
        let stalled = self.state.lock().unwrap();
        *self.changed.wait_while(stalled, |s| *s == STALLED).unwrap()
    }
}

/// One proxied link.
pub struct Proxy {
    /// Where the client connects.
    pub addr: SocketAddr,
    link: Arc<Link>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `upstream`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        assert!(
            upstream.ip().is_loopback(),
            "live mode proxies loopback only"
        );
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let link = Arc::new(Link::default());
        let l = link.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                if l.state() == RESET {
                    let _ = conn.shutdown(Shutdown::Both);
                    continue;
                }
                let l = l.clone();
                std::thread::spawn(move || connect(&l, conn, upstream));
            }
        });
        Ok(Proxy { addr, link })
    }

    /// Cuts the link.
    pub fn cut(&self, mode: CutMode) {
        let state = if mode == CutMode::Stall {
            STALLED
        } else {
            RESET
        };
        self.link.set(state);
        if mode == CutMode::Reset {
            for c in self.link.conns.lock().unwrap().drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }

    /// Restores the link (held bytes move on).
    pub fn heal(&self) {
        self.link.set(OPEN);
    }
}

fn connect(link: &Arc<Link>, client: TcpStream, upstream: SocketAddr) {
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(1)) else {
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
    link.conns.lock().unwrap().extend([c3, s3]);
    let l = link.clone();
    std::thread::spawn(move || forward(&l, c2, s2));
    forward(link, server, client);
}

/// Copies `from` → `to`, holding bytes while the link is stalled.
fn forward(link: &Link, mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if link.unstalled() == RESET || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = (from.shutdown(Shutdown::Both), to.shutdown(Shutdown::Both));
}
