//! A minimal RESP2 client over a blocking `TcpStream`: the few commands the lock recipes
//! send (`SET`, `EVAL`, `INCR`, `PING`, `INFO`, ...), each with a timeout. A request that
//! times out leaves the connection out of step, so the connection is dropped and the next
//! request opens a new one (as client libraries do).

use locksim_protocols::redis::store::Reply;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One Redis server's client: a lazily opened connection.
pub struct Resp {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

/// Why a request got no reply.
#[derive(Debug)]
pub struct NoReply(pub String);

impl Resp {
    /// A client of the server at `addr` (127.0.0.1 only).
    pub fn new(addr: SocketAddr) -> Resp {
        assert!(addr.ip().is_loopback(), "live mode talks to loopback only");
        Resp { addr, conn: None }
    }

    /// Sends `argv` and reads the reply within `timeout` (connecting included).
    pub fn call(&mut self, argv: &[String], timeout: Duration) -> Result<Reply, NoReply> {
        self.send(argv, timeout)?;
        self.recv(timeout)
    }

    /// Sends `argv` without waiting for the reply (connecting within `timeout`): a client
    /// of several servers sends to all before it reads any reply, as Redlock asks.
    pub fn send(&mut self, argv: &[String], timeout: Duration) -> Result<(), NoReply> {
        let result = self.try_send(argv, timeout);
        if result.is_err() {
            self.conn = None;
        }
        result.map_err(|e| NoReply(e.to_string()))
    }

    /// Reads the reply to the request sent last, waiting at most `timeout` (at least 1 ms:
    /// a reply already received is always read). A request without its reply leaves the
    /// connection out of step: it is dropped.
    pub fn recv(&mut self, timeout: Duration) -> Result<Reply, NoReply> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(NoReply("not connected".into()));
        };
        let result = conn
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .and_then(|()| read_reply(conn));
        if result.is_err() {
            self.conn = None;
        }
        result.map_err(|e| NoReply(e.to_string()))
    }

    /// Sends `argv` and reads the reply as strings, arrays flattened (`SENTINEL ...`).
    pub fn call_strings(
        &mut self,
        argv: &[String],
        timeout: Duration,
    ) -> Result<Vec<String>, NoReply> {
        self.send(argv, timeout)?;
        let conn = self.conn.as_mut().expect("sent above");
        let result = conn
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .and_then(|()| read_value(conn));
        match result {
            Ok(value) => {
                let mut out = vec![];
                value.flatten(&mut out);
                Ok(out)
            }
            Err(e) => {
                self.conn = None;
                Err(NoReply(e.to_string()))
            }
        }
    }

    fn try_send(&mut self, argv: &[String], timeout: Duration) -> std::io::Result<()> {
        if self.conn.is_none() {
            let stream = TcpStream::connect_timeout(&self.addr, timeout)?;
            stream.set_nodelay(true)?;
            self.conn = Some(BufReader::new(stream));
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.get_ref().set_write_timeout(Some(timeout))?;
        let mut out = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            out.extend(format!("${}\r\n", a.len()).bytes());
            out.extend(a.bytes());
            out.extend(b"\r\n");
        }
        conn.get_mut().write_all(&out)
    }
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// A RESP value as read, arrays kept (Sentinel's answers are arrays).
enum Value {
    Reply(Reply),
    Array(Vec<Value>),
}

impl Value {
    /// The strings and integers in it, arrays flattened, in order.
    fn flatten(self, out: &mut Vec<String>) {
        match self {
            Value::Reply(Reply::Bulk(s)) => out.push(s),
            Value::Reply(Reply::Int(n)) => out.push(n.to_string()),
            Value::Reply(Reply::Ok) => out.push("OK".into()),
            Value::Reply(_) => {}
            Value::Array(items) => items.into_iter().for_each(|v| v.flatten(out)),
        }
    }
}

fn read_reply(conn: &mut BufReader<TcpStream>) -> std::io::Result<Reply> {
    Ok(match read_value(conn)? {
        Value::Reply(reply) => reply,
        // The recipes never need array replies' contents.
        Value::Array(_) => Reply::Ok,
    })
}

/// What a RESP value's first line says: a whole reply, or how long a bulk string or how
/// many items an array holds. Both RESP readers (this one and the live links') read it so.
pub enum Head {
    /// A simple string, error, integer or nil: the whole reply.
    Reply(Reply),
    /// A bulk string of this many bytes follows (and its CRLF).
    Bulk(usize),
    /// An array of this many values follows.
    Array(usize),
}

/// The head of a RESP value from its first line (CRLF included or not).
pub fn head(line: &str) -> std::io::Result<Head> {
    let line = line.trim_end_matches("\r\n");
    let (tag, rest) = line.split_at(1.min(line.len()));
    let int = |s: &str| {
        s.parse::<i64>()
            .map_err(|_| bad(format!("bad integer {s:?}")))
    };
    let count = |s: &str| int(s).map(|n| n.max(0) as usize);
    Ok(match tag {
        "+" if rest == "OK" => Head::Reply(Reply::Ok),
        "+" => Head::Reply(Reply::Bulk(rest.to_owned())),
        "-" => Head::Reply(Reply::Error(rest.to_owned())),
        ":" => Head::Reply(Reply::Int(int(rest)?)),
        "$" | "*" if rest == "-1" => Head::Reply(Reply::Nil),
        "$" => Head::Bulk(count(rest)?),
        "*" => Head::Array(count(rest)?),
        _ => return Err(bad(format!("unexpected reply line {line:?}"))),
    })
}

/// A bulk string's bytes as read with their CRLF, as text.
pub fn bulk_text(mut buf: Vec<u8>) -> Reply {
    buf.truncate(buf.len().saturating_sub(2));
    Reply::Bulk(String::from_utf8_lossy(&buf).into_owned())
}

fn read_value(conn: &mut BufReader<TcpStream>) -> std::io::Result<Value> {
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(bad("connection closed".into()));
    }
    Ok(match head(&line)? {
        Head::Reply(reply) => Value::Reply(reply),
        Head::Bulk(n) => {
            let mut buf = vec![0; n + 2];
            conn.read_exact(&mut buf)?;
            Value::Reply(bulk_text(buf))
        }
        Head::Array(n) => Value::Array(
            (0..n)
                .map(|_| read_value(conn))
                .collect::<std::io::Result<_>>()?,
        ),
    })
}
