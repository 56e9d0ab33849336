//! The etcd model's requests (`locksim_protocols::raft::etcd::kv::Req`) against a real etcd
//! member, through its gRPC gateway (the same KV, Lease and Watch services as JSON over HTTP
//! on the client URL): the live side of the etcd client's links, so that the model's own
//! client (`EtcdClient`: etcd's `concurrency.Session` and `Mutex`, every client profile)
//! runs against real members.
//!
//! Each request is one HTTP POST with a deadline ([`crate::links::http`], on a blocking thread of
//! the client's executor). A real member forwards what needs the leader itself, so no answer
//! is ever "not leader". `WatchDelete` is a watch from the revision the key was read at,
//! answered at its first `DELETE` event; keys travel base64-encoded, as the gateway's JSON
//! carries bytes.

use crate::links::http;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use locksim_protocols::raft::etcd::kv::{Req, Resp};
use locksim_protocols::raft::etcd::PREFIX;
use locksim_sim::env::LocalFuture;
use locksim_sim::rpc::{Caller, Links, LiveLink, LiveLinks, RpcError};
use locksim_sim::{NodeCtx, NodeIdx};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The members' client addresses, by node index.
pub struct Gateway {
    addrs: BTreeMap<NodeIdx, SocketAddr>,
}

impl Gateway {
    /// Links to the members at `addrs`, known as nodes `first`, `first + 1`, ...
    pub fn links(first: NodeIdx, addrs: &[SocketAddr]) -> Links<Req, Resp> {
        super::assert_loopback(addrs);
        let addrs = (first..).zip(addrs.iter().copied()).collect();
        Links::Live(Arc::new(Gateway { addrs }))
    }
}

impl LiveLinks<Req, Resp> for Gateway {
    fn caller(&self, _: &NodeCtx) -> Caller<Req, Resp> {
        Caller::live(Rc::new(Gateway {
            addrs: self.addrs.clone(),
        }))
    }
}

impl LiveLink<Req, Resp> for Gateway {
    fn call(
        &self,
        to: NodeIdx,
        body: Req,
        timeout: Duration,
    ) -> LocalFuture<'static, Result<Resp, RpcError>> {
        let addr = self.addrs[&to];
        let work = tokio::task::spawn_blocking(move || answer(addr, &body, timeout));
        Box::pin(async move {
            match tokio::time::timeout(timeout, work).await {
                Ok(Ok(Some(resp))) => Ok(resp),
                _ => Err(RpcError::Timeout),
            }
        })
    }

    fn notify(&self, to: NodeIdx, body: Req) {
        let addr = self.addrs[&to];
        let timeout = Duration::from_secs(1);
        drop(tokio::task::spawn_blocking(move || {
            answer(addr, &body, timeout)
        }));
    }
}

/// A JSON field holding a 64-bit integer (the gateway writes them as strings).
fn int(v: &Value) -> Option<u64> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
}

fn b64(s: &str) -> String {
    B64.encode(s)
}

/// The end of the prefix's key range (`clientv3.GetPrefixRangeEnd`).
fn prefix_end() -> String {
    let mut end = PREFIX.as_bytes().to_vec();
    *end.last_mut().expect("the prefix is not empty") += 1;
    String::from_utf8(end).expect("ASCII")
}

/// A range over `key` (to `end`, if given).
fn range(key: &str, end: Option<&str>) -> Value {
    let mut r = json!({ "key": b64(key) });
    if let Some(end) = end {
        r["range_end"] = b64(end).into();
    }
    r
}

/// The key under the prefix with the lowest (`ASCEND`) or highest create-revision.
fn prefix_by_create(order: &str) -> Value {
    let mut r = range(PREFIX, Some(&prefix_end()));
    r["sort_order"] = order.into();
    r["sort_target"] = "CREATE".into();
    r["limit"] = "1".into();
    r
}

/// The member's answer to `req`, as the model's; `None`: no answer in `timeout`.
fn answer(addr: SocketAddr, req: &Req, timeout: Duration) -> Option<Resp> {
    let call = |path: &str, body: Value| http::call(addr, path, &body, timeout);
    let lease_gone = |e: &std::io::Error| e.to_string().contains("lease not found");
    Some(match req {
        Req::LeaseGrant { ttl_ms } => {
            // Whole seconds (live mode refuses other TTLs).
            let v = call("/v3/lease/grant", json!({ "TTL": ttl_ms / 1000 })).ok()?;
            Resp::Lease {
                lease: int(&v["ID"])?,
            }
        }
        Req::KeepAlive { lease } => {
            let v = call("/v3/lease/keepalive", json!({ "ID": lease.to_string() })).ok()?;
            match int(&v["result"]["TTL"]).unwrap_or(0) {
                0 => Resp::LeaseNotFound,
                _ => Resp::KeptAlive,
            }
        }
        Req::TryAcquire { key, lease } => match call("/v3/kv/txn", try_acquire(key, *lease)) {
            Ok(v) => acquired(&v)?,
            Err(e) if lease_gone(&e) => Resp::LeaseNotFound,
            Err(_) => return None,
        },
        Req::Delete { key } => {
            match key.if_create_rev {
                None => call("/v3/kv/deleterange", range(key, None)).ok()?,
                Some(rev) => call("/v3/kv/txn", delete_if_created(key, rev)).ok()?,
            };
            // A transaction whose comparison failed deleted nothing, and answers as the
            // model's server does: the key a newer acquire made stays.
            Resp::Deleted
        }
        Req::Get { key } => {
            let v = call("/v3/kv/range", range(key, None)).ok()?;
            Resp::Key(int(&v["kvs"][0]["create_revision"]))
        }
        Req::LastBefore { max_create_rev } => {
            let mut older = prefix_by_create("DESCEND");
            older["max_create_revision"] = max_create_rev.to_string().into();
            let v = call("/v3/kv/range", older).ok()?;
            let found = match v["kvs"][0]["key"].as_str() {
                None => None,
                Some(k) => Some((decode(k)?, int(&v["kvs"][0]["create_revision"])?)),
            };
            Resp::Last {
                found,
                rev: int(&v["header"]["revision"])?,
            }
        }
        Req::LeaseRevoke { lease } => {
            match call("/v3/lease/revoke", json!({ "ID": lease.to_string() })) {
                Ok(_) => Resp::Deleted,
                Err(e) if lease_gone(&e) => Resp::Deleted,
                Err(_) => return None,
            }
        }
        Req::WatchDelete { key, min_rev, .. } => watch_delete(addr, key, *min_rev, timeout)?,
        Req::LockDelay => unreachable!("live mode refuses lock_delay_ms: etcd has none"),
    })
}

fn decode(key: &str) -> Option<String> {
    String::from_utf8(B64.decode(key).ok()?).ok()
}

/// `Mutex.tryAcquire`'s transaction: put the own key with the lease if it does not exist,
/// and read the owner (the key with the lowest create-revision).
fn try_acquire(key: &str, lease: u64) -> Value {
    let owner = prefix_by_create("ASCEND");
    json!({
        "compare": [{ "key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
        "success": [{ "request_put": { "key": b64(key), "value": "", "lease": lease.to_string() } }, { "request_range": owner }],
        "failure": [{ "request_range": range(key, None) }, { "request_range": owner }],
    })
}

/// PR #22115's Unlock: `If(CreateRevision(key) == rev).Then(Delete(key))`.
fn delete_if_created(key: &str, rev: u64) -> Value {
    json!({
        "compare": [{ "key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": rev.to_string() }],
        "success": [{ "request_delete_range": range(key, None) }],
    })
}

/// The transaction's answer: the own key's and the owner's create-revisions.
fn acquired(v: &Value) -> Option<Resp> {
    let kvs = |i: usize| &v["responses"][i]["response_range"]["kvs"][0]["create_revision"];
    let mine = match v["succeeded"] == true {
        true => int(&v["header"]["revision"])?,
        false => int(kvs(0))?,
    };
    Some(Resp::Acquired {
        mine,
        owner: int(kvs(1)).unwrap_or(mine),
    })
}

/// Watches `key` from revision `from` until it is deleted (`Gone`) or `wait` passes (`None`).
fn watch_delete(addr: SocketAddr, key: &str, from: u64, wait: Duration) -> Option<Resp> {
    let body = json!({ "create_request": { "key": b64(key), "start_revision": from.to_string() } });
    let mut stream = http::post(addr, "/v3/watch", &body, wait).ok()?;
    // The exchange ends at `wait`, the caller's timeout: events that are not deletes are
    // read past, not waited on again.
    loop {
        let v = stream.next_json().ok()??;
        let events = v["result"]["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(e) = events.iter().find(|e| e["type"] == "DELETE") {
            let rev = int(&e["kv"]["mod_revision"]).unwrap_or_default();
            return Some(Resp::Gone { rev });
        }
    }
}
