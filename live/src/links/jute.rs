//! ZooKeeper's wire protocol (jute over TCP), for the few requests the lock recipe needs:
//! the connect handshake that creates or re-attaches a session, `create`, `delete`,
//! `exists`, `getChildren`, pings, and the watch events the server pushes. Each frame is a
//! 4-byte big-endian length and its body (`org.apache.zookeeper.proto`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// `create`.
pub const OP_CREATE: i32 = 1;
/// `delete`.
pub const OP_DELETE: i32 = 2;
/// `exists`.
pub const OP_EXISTS: i32 = 3;
/// `getChildren`.
pub const OP_GET_CHILDREN: i32 = 8;
/// `ping`.
pub const OP_PING: i32 = 11;
/// The xid of a watch event pushed by the server.
pub const XID_WATCH: i32 = -1;
/// The xid of a ping and its reply.
pub const XID_PING: i32 = -2;
/// `NONODE`.
pub const ERR_NO_NODE: i32 = -101;
/// `NODEEXISTS`.
pub const ERR_NODE_EXISTS: i32 = -110;
/// `SESSIONEXPIRED`.
pub const ERR_SESSION_EXPIRED: i32 = -112;
/// A watch event: the node was deleted.
pub const EVENT_NODE_DELETED: i32 = 2;
/// A watch event: the node's children changed.
pub const EVENT_NODE_CHILDREN_CHANGED: i32 = 4;
/// `CreateMode.PERSISTENT_SEQUENTIAL`.
pub const PERSISTENT_SEQUENTIAL: i32 = 2;
/// `CreateMode.EPHEMERAL_SEQUENTIAL`.
pub const EPHEMERAL_SEQUENTIAL: i32 = 3;

/// Jute encoding of a request body.
#[derive(Default)]
pub struct Out(pub Vec<u8>);

impl Out {
    /// Appends a 4-byte integer.
    pub fn int(mut self, v: i32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    /// Appends an 8-byte integer.
    pub fn long(mut self, v: i64) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    /// Appends a length-prefixed buffer.
    pub fn buf(self, b: &[u8]) -> Self {
        let mut s = self.int(b.len() as i32);
        s.0.extend(b);
        s
    }
    /// Appends a length-prefixed string.
    pub fn string(self, s: &str) -> Self {
        self.buf(s.as_bytes())
    }
    /// Appends a boolean (one byte).
    pub fn boolean(mut self, b: bool) -> Self {
        self.0.push(b as u8);
        self
    }
    /// The body with its length in front.
    pub fn framed(self) -> Vec<u8> {
        let mut out = (self.0.len() as i32).to_be_bytes().to_vec();
        out.extend(self.0);
        out
    }
}

/// Jute decoding of a reply body.
pub struct In<'a>(pub &'a [u8]);

impl In<'_> {
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&[u8]> {
        (self.0.len() >= n).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }
    /// The next 4-byte integer.
    pub fn int(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    /// The next 8-byte integer.
    pub fn long(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    /// The next length-prefixed buffer.
    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.int()?.max(0) as usize;
        Some(self.take(n)?.to_vec())
    }
    /// The next length-prefixed string.
    pub fn string(&mut self) -> Option<String> {
        Some(String::from_utf8_lossy(&self.bytes()?).into_owned())
    }
}

/// A request frame: `xid`, `op`, then the body.
pub fn frame(xid: i32, op: i32, body: Out) -> Vec<u8> {
    let mut frame = Out::default().int(xid).int(op);
    frame.0.extend(body.0);
    frame.framed()
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0; i32::from_be_bytes(len).max(0) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// A `ConnectRequest`: a new session (id 0) or the one to re-attach, and the last zxid the
/// client saw.
pub struct Hello {
    /// The session's id (0: a new session).
    pub id: i64,
    /// Its password (16 zero bytes for a new one).
    pub passwd: Vec<u8>,
    /// The highest zxid the client has seen.
    pub last_zxid: i64,
    /// The session timeout asked for.
    pub timeout: Duration,
}

/// Connects to `addr` and sends `hello`, waiting at most `wait` for each step: the stream
/// and the session's id and password; `None` if the server answers with no timeout (the
/// session expired).
pub fn connect(
    addr: SocketAddr,
    hello: &Hello,
    wait: Duration,
) -> std::io::Result<Option<(TcpStream, i64, Vec<u8>)>> {
    assert!(addr.ip().is_loopback(), "live mode talks to loopback only");
    let mut stream = TcpStream::connect_timeout(&addr, wait)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(wait))?;
    stream.set_write_timeout(Some(wait))?;
    let request = Out::default()
        .int(0)
        .long(hello.last_zxid)
        .int(hello.timeout.as_millis() as i32)
        .long(hello.id)
        .buf(&hello.passwd)
        .boolean(false);
    stream.write_all(&request.framed())?;
    let reply = read_frame(&mut stream)?;
    let mut r = In(&reply);
    let (_version, negotiated) = (r.int(), r.int().unwrap_or(0));
    let (Some(id), Some(passwd)) = (r.long(), r.bytes()) else {
        return Err(std::io::Error::other("a short connect reply"));
    };
    if negotiated <= 0 {
        return Ok(None);
    }
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    Ok(Some((stream, id, passwd)))
}

/// The sequence a node's name ends with (10 digits): the fencing token.
pub fn sequence(name: &str) -> Option<u64> {
    name.get(name.len().checked_sub(10)?..)?.parse().ok()
}

/// A `create` of `path` with no data, world-readable and -writable (`OPEN_ACL_UNSAFE`),
/// in mode `flags`.
pub fn create_body(path: &str, flags: i32) -> Out {
    Out::default()
        .string(path)
        .buf(&[])
        .int(1)
        .int(31)
        .string("world")
        .string("anyone")
        .int(flags)
}
