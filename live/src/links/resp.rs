//! RESP2 over a blocking `TcpStream`, for what the deployments ask their Redis nodes and
//! Sentinels (`PING`, `INFO replication`, `SENTINEL master`): each request on a connection
//! of its own, with a timeout. The head of a RESP value is parsed here for the live links'
//! reader too ([`head`]).

use super::bad;
use locksim_protocols::redis::store::Reply;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends `argv` to the server at `addr` (127.0.0.1 only) and reads the reply within `timeout`
/// (connecting included); an array is answered as `OK` (the callers never read one's items).
pub fn call(addr: SocketAddr, argv: &[&str], timeout: Duration) -> std::io::Result<Reply> {
    Ok(match request(addr, argv, timeout)? {
        Value::Reply(reply) => reply,
        Value::Array(_) => Reply::Ok,
    })
}

/// Sends `argv` and reads the reply as strings, arrays flattened (`SENTINEL ...`).
pub fn call_strings(
    addr: SocketAddr,
    argv: &[&str],
    timeout: Duration,
) -> std::io::Result<Vec<String>> {
    let mut out = vec![];
    request(addr, argv, timeout)?.flatten(&mut out);
    Ok(out)
}

fn request(addr: SocketAddr, argv: &[&str], timeout: Duration) -> std::io::Result<Value> {
    super::assert_loopback([&addr]);
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    (&stream).write_all(&super::resp_bytes(argv))?;
    read_value(&mut BufReader::new(stream))
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
        return Err(bad("connection closed"));
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
