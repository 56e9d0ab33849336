//! A minimal HTTP/1.1 client for etcd's gRPC gateway (its JSON API on the client URL): a
//! POST with a JSON body, answered by one JSON object, or by a stream of them (`/v3/watch`)
//! in chunked transfer encoding. Each request has a deadline and its own connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

// On its own (the etcd conformance tests include this file): its own `bad`.
fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// A response being read: its body, whole or as a stream of JSON lines.
pub struct Response {
    reader: BufReader<TcpStream>,
    chunked: bool,
    length: Option<usize>,
    pending: Vec<u8>,
}

/// POSTs `body` to `path` on `addr` and reads the status line and headers within `timeout`.
pub fn post(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> std::io::Result<Response> {
    assert!(addr.ip().is_loopback(), "live mode talks to loopback only");
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut writer = stream.try_clone()?;
    writer.write_all(head.as_bytes())?;
    writer.write_all(body.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let ok = status.starts_with("HTTP/1.1 200");
    let (mut chunked, mut length) = (false, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in the headers"));
        }
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        chunked |= line == "transfer-encoding: chunked";
        if let Some(n) = line.strip_prefix("content-length:") {
            length = n.trim().parse().ok();
        }
    }
    let mut response = Response {
        reader,
        chunked,
        length,
        pending: vec![],
    };
    if !ok {
        // The gateway's error body names the gRPC error (`requested lease not found`).
        let body = response.next_json().ok().flatten().unwrap_or_default();
        return Err(bad(format!("HTTP status {}: {body}", status.trim())));
    }
    Ok(response)
}

impl Response {
    /// The next chunk of the body (None at its end).
    fn chunk(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if !self.chunked {
            let mut body = vec![];
            match self.length.take() {
                Some(n) => {
                    body.resize(n, 0);
                    self.reader.read_exact(&mut body)?;
                }
                None => {
                    self.reader.read_to_end(&mut body)?;
                }
            }
            return Ok((!body.is_empty()).then_some(body));
        }
        let mut size = String::new();
        self.reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim(), 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            return Ok(None);
        }
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data)?;
        data.truncate(size);
        Ok(Some(data))
    }

    /// The next JSON object of the body (None at its end).
    pub fn next_json(&mut self) -> std::io::Result<Option<serde_json::Value>> {
        loop {
            // The gateway ends each streamed message with a newline.
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return json(&line);
                }
                continue;
            }
            match self.chunk()? {
                Some(data) => self.pending.extend(data),
                None if self.pending.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => return json(&std::mem::take(&mut self.pending)),
            }
        }
    }
}

fn json(bytes: &[u8]) -> std::io::Result<Option<serde_json::Value>> {
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// POSTs and reads one JSON answer.
pub fn call(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> std::io::Result<serde_json::Value> {
    post(addr, path, body, timeout)?
        .next_json()?
        .ok_or_else(|| bad("empty answer"))
}
