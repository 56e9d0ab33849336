//! `etcd` against a real etcd cluster: etcd's `concurrency.Session` (a lease kept alive every
//! TTL/3) and `concurrency.Mutex` (a key under the prefix, created with the lease in a
//! transaction; the owner is the key with the lowest create-revision; a waiter watches the
//! next-older key until it is deleted), as the model's client does (`EtcdClient` in
//! `locksim_protocols::raft::etcd`). The model's variants are etcd's two forms: `correct` is 3.5's
//! `Lock` (after waiting it reads its own key again: the fix of issue #11456), and
//! `no-lease-recheck-after-wait` is 3.4's (it returns without that check). The requests go to
//! etcd's JSON gateway on each member's client URL (`/v3/kv/txn`, `/v3/lease/keepalive`,
//! `/v3/watch`, ...): the same gRPC services, without a gRPC stack in locksim.

use crate::clock;
use crate::http;
use crate::lock::{Ctx, LiveLock};
use locksim_protocols::raft::etcd::{Params, Variant, PREFIX};
use locksim_protocols::{Acquired, Grant, Outcome, Validity};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = s.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A JSON field holding a 64-bit integer (the gateway writes them as strings).
fn int(v: &Value) -> Option<u64> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
}

/// The end of the prefix's key range (`clientv3.GetPrefixRangeEnd`).
fn prefix_end() -> String {
    let mut end = PREFIX.as_bytes().to_vec();
    *end.last_mut().expect("the prefix is not empty") += 1;
    String::from_utf8(end).expect("ASCII")
}

struct Session {
    lease: u64,
    valid_until: Duration,
}

type SharedSession = Arc<Mutex<Option<Session>>>;

/// The lock client of an etcd cluster.
pub struct EtcdLock {
    params: Params,
    endpoints: Vec<SocketAddr>,
    session: SharedSession,
    ctx: Arc<Ctx>,
}

/// Calls an endpoint after another (round robin from a random one) until one answers or
/// `budget` passes: etcd forwards writes to its leader itself.
fn call(
    ctx: &Ctx,
    endpoints: &[SocketAddr],
    timeout: Duration,
    path: &str,
    body: &Value,
    budget: Duration,
) -> Result<Value, String> {
    let deadline = ctx.mono_now() + budget;
    let mut i = ctx.between(0, endpoints.len() as u64 - 1) as usize;
    let mut last = String::from("no request sent");
    while ctx.mono_now() < deadline {
        let left = deadline.saturating_sub(ctx.mono_now()).min(timeout);
        match http::call(endpoints[i % endpoints.len()], path, body, left) {
            Ok(v) => return Ok(v),
            Err(e) if e.to_string().contains("lease not found") => return Err(e.to_string()),
            Err(e) => last = e.to_string(),
        }
        i += 1;
    }
    Err(last)
}

impl EtcdLock {
    /// A client of the members at `endpoints`.
    pub fn new(params: Params, endpoints: Vec<SocketAddr>, ctx: Arc<Ctx>) -> Self {
        assert!(!endpoints.is_empty(), "an etcd cluster has members");
        EtcdLock {
            params,
            endpoints,
            session: Arc::default(),
            ctx,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    /// The model's `request_budget`: three request timeouts.
    fn budget(&self) -> Duration {
        self.timeout() * 3
    }

    fn call(&self, path: &str, body: Value, budget: Duration) -> Result<Value, String> {
        call(
            &self.ctx,
            &self.endpoints,
            self.timeout(),
            path,
            &body,
            budget,
        )
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.params.lease_ttl_ms)
    }

    /// The session's lease, granting one (and starting its keep-alive thread) if needed.
    fn lease(&mut self) -> Result<u64, Acquired> {
        if let Some(s) = self.session.lock().unwrap().as_ref() {
            return Ok(s.lease);
        }
        let sent = self.ctx.mono_now();
        // etcd's TTLs are whole seconds; the parent refuses others.
        let ttl_s = self.params.lease_ttl_ms / 1000;
        let answer = self.call("/v3/lease/grant", json!({ "TTL": ttl_s }), self.budget());
        let Some(lease) = answer.ok().and_then(|v| int(&v["ID"])) else {
            return Err(Acquired::Unknown("no answer to LeaseGrant".into()));
        };
        *self.session.lock().unwrap() = Some(Session {
            lease,
            valid_until: sent + self.ttl(),
        });
        self.spawn_keep_alive(lease);
        Ok(lease)
    }

    fn spawn_keep_alive(&self, lease: u64) {
        let (ctx, session, endpoints, ttl) = (
            self.ctx.clone(),
            self.session.clone(),
            self.endpoints.clone(),
            self.ttl(),
        );
        std::thread::spawn(move || keep_alive(&ctx, &session, &endpoints, lease, ttl));
    }

    fn end_session(&self, why: &str) {
        if self.session.lock().unwrap().take().is_some() {
            self.ctx.note(format!("session over: {why}"));
        }
    }

    fn session_live(&self) -> bool {
        let now = self.ctx.mono_now();
        self.session
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.valid_until > now)
    }
}

/// The session's keep-alive loop (`lease.go`: the next keep-alive TTL/3 after the last).
fn keep_alive(
    ctx: &Ctx,
    session: &SharedSession,
    endpoints: &[SocketAddr],
    lease: u64,
    ttl: Duration,
) {
    let current = |s: &Option<Session>| s.as_ref().is_some_and(|s| s.lease == lease);
    while !ctx.over() {
        clock::sleep(ttl / 3);
        if !current(&session.lock().unwrap()) {
            return;
        }
        let sent = ctx.mono_now();
        let answer = call(
            ctx,
            endpoints,
            ttl / 3,
            "/v3/lease/keepalive",
            &json!({ "ID": lease.to_string() }),
            ttl / 3,
        );
        let mut s = session.lock().unwrap();
        if !current(&s) {
            return;
        }
        match answer.map(|v| int(&v["result"]["TTL"]).unwrap_or(0)) {
            Ok(ttl_s) if ttl_s > 0 => s.as_mut().expect("current").valid_until = sent + ttl,
            Ok(_) => {
                *s = None;
                return ctx.note("session over: the lease is gone");
            }
            Err(_) if ctx.mono_now() >= s.as_ref().expect("current").valid_until => {
                *s = None;
                return ctx.note("session over: no keep-alive within the TTL");
            }
            Err(_) => {}
        }
    }
}

fn range(key: &str, end: Option<&str>) -> Value {
    let mut r = json!({ "key": b64(key) });
    if let Some(end) = end {
        r["range_end"] = b64(end).into();
    }
    r
}

impl EtcdLock {
    /// `Mutex.tryAcquire`: put the own key if it does not exist, and read the owner (the
    /// key with the lowest create-revision). Returns (mine, owner).
    fn try_acquire(&self, key: &str, lease: u64) -> Result<(u64, u64), Acquired> {
        let mut owner = range(PREFIX, Some(&prefix_end()));
        owner["sort_order"] = "ASCEND".into();
        owner["sort_target"] = "CREATE".into();
        owner["limit"] = "1".into();
        let txn = json!({
            "compare": [{ "key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
            "success": [{ "request_put": { "key": b64(key), "value": "", "lease": lease.to_string() } }, { "request_range": owner }],
            "failure": [{ "request_range": range(key, None) }, { "request_range": owner }],
        });
        let v = match self.call("/v3/kv/txn", txn, self.budget()) {
            Ok(v) => v,
            Err(e) if e.contains("lease not found") => {
                self.end_session("the lease is gone");
                return Err(Acquired::Failed("lease not found".into()));
            }
            Err(_) => {
                return Err(Acquired::Unknown(
                    "no answer to the acquire transaction".into(),
                ))
            }
        };
        let kvs =
            |i: usize| v["responses"][i]["response_range"]["kvs"][0]["create_revision"].clone();
        let mine = if v["succeeded"] == true {
            int(&v["header"]["revision"])
        } else {
            int(&kvs(0))
        };
        let mine = mine.ok_or_else(|| Acquired::Unknown(format!("unexpected answer {v}")))?;
        Ok((mine, int(&kvs(1)).unwrap_or(mine)))
    }

    /// `waitDeletes`: until no key under the prefix is older than `mine` (watching the
    /// youngest older one for its delete, a long poll of `watch_poll_ms`).
    fn wait_deletes(&self, mine: u64, deadline: Duration) -> bool {
        let poll = Duration::from_millis(self.params.watch_poll_ms);
        while self.ctx.mono_now() < deadline {
            let mut older = range(PREFIX, Some(&prefix_end()));
            older["sort_order"] = "DESCEND".into();
            older["sort_target"] = "CREATE".into();
            older["limit"] = "1".into();
            older["max_create_revision"] = (mine - 1).to_string().into();
            let Ok(v) = self.call("/v3/kv/range", older, self.budget()) else {
                continue;
            };
            let Some(key) = v["kvs"][0]["key"].as_str().map(str::to_owned) else {
                return true;
            };
            let rev = int(&v["header"]["revision"]).unwrap_or(0);
            self.watch_delete(
                &key,
                rev,
                poll.min(deadline.saturating_sub(self.ctx.mono_now())),
            );
        }
        false
    }

    /// Watches `key_b64` from `rev` until it is deleted or `wait` passes.
    fn watch_delete(&self, key_b64: &str, rev: u64, wait: Duration) {
        let start = self.ctx.mono_now();
        let i = self.ctx.between(0, self.endpoints.len() as u64 - 1) as usize;
        let body =
            json!({ "create_request": { "key": key_b64, "start_revision": rev.to_string() } });
        let Ok(mut stream) = http::post(self.endpoints[i], "/v3/watch", &body, self.timeout())
        else {
            return clock::sleep(self.timeout().min(wait));
        };
        loop {
            let left = wait.saturating_sub(self.ctx.mono_now() - start);
            if left.is_zero() || stream.set_timeout(left).is_err() {
                return;
            }
            match stream.next_json() {
                Ok(Some(v)) => {
                    let events = v["result"]["events"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if events.iter().any(|e| e["type"] == "DELETE") {
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// The grant, unless (3.5's form) the session is over on this client's clock.
    fn checked_grant(&mut self, key: String, mine: u64) -> Acquired {
        if self.params.variant == Variant::NoLeaseRecheckAfterWait {
            return self.grant(key, mine);
        }
        self.freshen_lease();
        if self.session_live() {
            return self.grant(key, mine);
        }
        let _ = self.call("/v3/kv/deleterange", range(&key, None), self.budget());
        self.end_session("it expired before the lock was ours");
        Acquired::Failed("session expired while acquiring".into())
    }

    /// Renews the lease now if less than half its TTL is left (the model's `freshen_lease`).
    fn freshen_lease(&self) {
        let (ttl, now) = (self.ttl(), self.ctx.mono_now());
        let lease = match self.session.lock().unwrap().as_ref() {
            Some(s) if s.valid_until < now + ttl / 2 => s.lease,
            _ => return,
        };
        let answer = self.call(
            "/v3/lease/keepalive",
            json!({ "ID": lease.to_string() }),
            ttl / 3,
        );
        let mut session = self.session.lock().unwrap();
        match (
            answer.map(|v| int(&v["result"]["TTL"]).unwrap_or(0)),
            session.as_mut(),
        ) {
            (Ok(t), Some(s)) if s.lease == lease && t > 0 => s.valid_until = now + ttl,
            (Ok(_), Some(s)) if s.lease == lease => s.valid_until = now,
            _ => {}
        }
    }

    fn grant(&self, key: String, mine: u64) -> Acquired {
        let valid_until = self
            .session
            .lock()
            .unwrap()
            .as_ref()
            .map_or(Duration::ZERO, |s| s.valid_until);
        Acquired::Granted(Grant {
            token: Some(mine),
            valid_until: Some(valid_until),
            handle: key,
        })
    }
}

impl LiveLock for EtcdLock {
    fn acquire(&mut self, ctx: &Ctx) -> Acquired {
        let deadline = ctx.mono_now() + Duration::from_millis(self.params.acquire_timeout_ms);
        let lease = match self.lease() {
            Ok(lease) => lease,
            Err(outcome) => return outcome,
        };
        let key = format!("{PREFIX}{lease:x}");
        let (mine, owner) = match self.try_acquire(&key, lease) {
            Ok(revs) => revs,
            Err(outcome) => return outcome,
        };
        if mine == owner {
            return self.checked_grant(key, mine);
        }
        if !self.wait_deletes(mine, deadline) {
            let _ = self.call("/v3/kv/deleterange", range(&key, None), self.budget());
            return Acquired::Failed("acquire timeout while waiting".into());
        }
        ctx.point("after_wait");
        if self.params.variant != Variant::NoLeaseRecheckAfterWait {
            // 3.5's fix of #11456: the session is not expired and the own key still exists.
            match self.call("/v3/kv/range", range(&key, None), self.budget()) {
                Ok(v) if int(&v["kvs"][0]["create_revision"]) == Some(mine) => {}
                Ok(_) => {
                    self.end_session("the key is gone");
                    return Acquired::Failed("session expired while waiting".into());
                }
                Err(_) => return Acquired::Unknown("no answer to the key check".into()),
            }
        }
        self.checked_grant(key, mine)
    }

    fn validity(&mut self, _ctx: &Ctx, grant: &Grant) -> Validity {
        match self.session.lock().unwrap().as_ref() {
            Some(s) if grant.handle == format!("{PREFIX}{:x}", s.lease) => {
                Validity::Until(s.valid_until)
            }
            _ => Validity::Lost("the session is over".into()),
        }
    }

    fn release(&mut self, _ctx: &Ctx, grant: &Grant) -> Outcome {
        // Keep trying for a TTL (an election takes about one election timeout).
        match self.call("/v3/kv/deleterange", range(&grant.handle, None), self.ttl()) {
            Ok(_) => Outcome::Ok,
            Err(_) => {
                // The key may still be there: abandon the session (as the model does).
                self.end_session("the unlock got no answer: session abandoned");
                Outcome::Unknown("no answer to the delete".into())
            }
        }
    }
}
