//! etcd's gRPC gateway (its JSON API on the client URL) through `ureq`: a POST with a JSON
//! body, answered by one JSON object, or by a stream of them (`/v3/watch`). Each request has
//! a connection of its own and a deadline for the whole exchange, its answer read included.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::time::Duration;

// On its own (the etcd conformance tests include this file): its own `bad`.
fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// A response being read: its body as a stream of JSON lines.
pub struct Response(BufReader<ureq::BodyReader<'static>>);

/// An agent for one request to a loopback address, ending at `timeout`. No proxy from the
/// environment (`HTTP_PROXY`): live mode's traffic stays on loopback.
fn agent(addr: SocketAddr, timeout: Duration) -> ureq::Agent {
    assert!(addr.ip().is_loopback(), "live mode talks to loopback only");
    ureq::Agent::config_builder()
        .proxy(None)
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_idle_connections(0)
        .build()
        .new_agent()
}

/// GETs `path` on `addr` as text (a member's `/metrics`), within `timeout`.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<String> {
    let mut answer = (agent(addr, timeout)
        .get(format!("http://{addr}{path}"))
        .call())
    .map_err(ureq::Error::into_io)?;
    if answer.status() != 200 {
        return Err(bad(format!("HTTP status {}", answer.status())));
    }
    answer
        .body_mut()
        .read_to_string()
        .map_err(ureq::Error::into_io)
}

/// POSTs `body` to `path` on `addr`; the request, and reading its answer, end at `timeout`.
pub fn post(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> std::io::Result<Response> {
    let answer = agent(addr, timeout)
        .post(format!("http://{addr}{path}"))
        .content_type("application/json")
        .send(body.to_string())
        .map_err(ureq::Error::into_io)?;
    let status = answer.status();
    let mut response = Response(BufReader::new(answer.into_body().into_reader()));
    if status != 200 {
        // The gateway's error body names the gRPC error (`requested lease not found`).
        let body = response.next_json().ok().flatten().unwrap_or_default();
        return Err(bad(format!("HTTP status {status}: {body}")));
    }
    Ok(response)
}

impl Response {
    /// The next JSON object of the body (None at its end): the gateway ends each streamed
    /// message with a newline.
    pub fn next_json(&mut self) -> std::io::Result<Option<serde_json::Value>> {
        let mut line = String::new();
        while line.trim().is_empty() {
            line.clear();
            if self.0.read_line(&mut line)? == 0 {
                return Ok(None);
            }
        }
        serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }
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
