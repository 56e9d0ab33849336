//! `replicated-redis` against a real primary, replicas and Sentinels: the model's client
//! (`locksim_protocols::redis::replicated::ReplicatedRedisClient`) step for step. It asks
//! the Sentinels, in order, for the primary (`SENTINEL get-master-addr-by-name`), caches the
//! answer and forgets it on any error or timeout; runs the single-instance algorithm there
//! (`acquire_cmd`, then `WAIT n timeout` when asked, counting the lock only if enough
//! replicas acknowledged); after a timeout it frees its value without waiting (the `SET` may
//! have landed) and counts the attempt unknown, as the model does.

use crate::lock::{acquire_retrying, Ctx, LiveLock};
use crate::replicated_deploy::MASTER_NAME;
use crate::resp::Resp;
use locksim_protocols::redis::client::{acquire_cmd, release_cmd, Attempt, KEY};
use locksim_protocols::redis::profile::one_server_retry;
use locksim_protocols::redis::replicated::Params;
use locksim_protocols::redis::store::{Cmd, Reply};
use locksim_protocols::{Acquired, Grant, Outcome};
use std::net::SocketAddr;
use std::time::Duration;

/// The client of a Sentinel-watched primary.
pub struct ReplicatedLock {
    params: Params,
    redis: Vec<Resp>,
    /// Each Redis node's address as the Sentinels name it (its announced proxy).
    real: Vec<SocketAddr>,
    sentinels: Vec<Resp>,
    /// The primary (an index into `redis`) as last learned; forgotten on errors.
    primary: Option<usize>,
}

impl ReplicatedLock {
    /// A client reaching the Redis nodes at `redis` (named `real` by the Sentinels) and the
    /// Sentinels at `sentinels`.
    pub fn new(
        params: Params,
        redis: &[SocketAddr],
        real: Vec<SocketAddr>,
        sentinels: &[SocketAddr],
    ) -> Self {
        assert_eq!(redis.len(), real.len(), "one own address per node");
        ReplicatedLock {
            params,
            redis: redis.iter().map(|a| Resp::new(*a)).collect(),
            real,
            sentinels: sentinels.iter().map(|a| Resp::new(*a)).collect(),
            primary: None,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    /// The primary: cached, or the first Sentinel's answer (in order, as Sentinel client
    /// libraries ask).
    fn primary(&mut self) -> Option<usize> {
        if self.primary.is_some() {
            return self.primary;
        }
        let argv: Vec<String> = ["SENTINEL", "get-master-addr-by-name", MASTER_NAME]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let timeout = self.timeout();
        for s in &mut self.sentinels {
            let Ok(answer) = s.call_strings(&argv, timeout) else {
                continue;
            };
            let addr = answer.join(":").parse::<SocketAddr>().ok();
            if let Some(i) = self.real.iter().position(|r| Some(*r) == addr) {
                self.primary = Some(i);
                return self.primary;
            }
        }
        None
    }

    /// `cmd` on node `i` within `timeout`.
    fn on(&mut self, i: usize, cmd: &Cmd, timeout: Duration) -> Result<Reply, ()> {
        let argv = cmd.argv().expect("the lock's commands have an argv");
        self.redis[i].call(&argv, timeout).map_err(|_| ())
    }

    /// On the primary; an error or an error reply (`READONLY`: demoted) forgets it.
    fn call(&mut self, cmd: &Cmd) -> Result<Reply, ()> {
        let Some(i) = self.primary() else {
            return Err(());
        };
        let reply = self.on(i, cmd, self.timeout());
        if matches!(reply, Err(()) | Ok(Reply::Error(_))) {
            self.primary = None;
        }
        reply
    }

    /// After a timeout: free our value if the `SET` landed (without waiting), and ask the
    /// Sentinels again next time.
    fn abandon(&mut self, i: usize, value: &str) -> Attempt {
        let (argv, timeout) = (release_cmd(value).argv().expect("an argv"), self.timeout());
        if self.redis[i].send(&argv, timeout).is_ok() {
            self.redis[i].drop_connection();
        }
        self.primary = None;
        Attempt::Unknown("request timed out".into())
    }

    fn release_value(&mut self, value: &str) -> Outcome {
        match self.call(&release_cmd(value)) {
            Ok(Reply::Int(1)) => Outcome::Ok,
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => Outcome::Failed(format!("unexpected reply {other:?}")),
            Err(()) => Outcome::Unknown("request timed out".into()),
        }
    }

    /// `WAIT n` after the `SET`: None if enough replicas acknowledged, else the outcome.
    fn wait(&mut self, ctx: &Ctx, i: usize, value: &str) -> Option<Attempt> {
        let (n, wait_ms) = (self.params.wait_replicas, self.params.wait_timeout_ms);
        let wait = Cmd::Wait {
            replicas: n,
            timeout_ms: wait_ms,
        };
        let patience = self.timeout() + Duration::from_millis(wait_ms);
        match self.on(i, &wait, patience) {
            Ok(Reply::Int(acked)) if acked >= n as i64 => None,
            Ok(reply) => {
                let why = format!("WAIT {n}: {reply:?}");
                ctx.note(format!("{why}: lock not counted, released"));
                let _ = self.release_value(value);
                Some(Attempt::Busy(why))
            }
            Err(()) => Some(self.abandon(i, value)),
        }
    }

    /// One try, as the model's `attempt`.
    fn attempt(&mut self, ctx: &Ctx) -> Attempt {
        let Some(i) = self.primary() else {
            return Attempt::Busy("no Sentinel named a primary".into()); // nothing was sent
        };
        let value = format!("{}:{:016x}", ctx.name(), ctx.random());
        let start = ctx.mono_now();
        let cmd = acquire_cmd(&value, Some(self.params.ttl_ms.into()), self.params.tokens);
        let token = match self.on(i, &cmd, self.timeout()) {
            Ok(Reply::Ok) => None,
            Ok(Reply::Int(t)) => Some(t as u64),
            Ok(Reply::Nil) => return Attempt::Busy("held".into()),
            Ok(_) => {
                // READONLY: it is a replica now.
                self.primary = None;
                return Attempt::Busy("not the primary".into());
            }
            Err(()) => return self.abandon(i, &value),
        };
        if self.params.wait_replicas > 0 {
            if let Some(outcome) = self.wait(ctx, i, &value) {
                return outcome;
            }
        }
        let valid_until = start + self.params.validity();
        // As `OneServer::grant_in_time`: a grant that came too late is given back.
        if ctx.mono_now() >= valid_until {
            ctx.note("grant arrived after its validity: released");
            let _ = self.release_value(&value);
            return Attempt::Busy("grant arrived after its validity".into());
        }
        Attempt::Granted(Grant {
            token,
            valid_until: Some(valid_until),
            handle: value,
        })
    }
}

impl LiveLock for ReplicatedLock {
    /// Tries with random delays until `acquire_timeout_ms` (the model's `Retry::until`).
    fn acquire(&mut self, ctx: &Ctx) -> Acquired {
        let p = &self.params;
        let (min_ms, max_ms) = (p.retry_delay_ms_min, p.retry_delay_ms_max);
        let retry = one_server_retry(min_ms, max_ms, p.retry_count, p.acquire_timeout_ms);
        acquire_retrying(ctx, retry, || self.attempt(ctx))
    }

    fn release(&mut self, _ctx: &Ctx, grant: &Grant) -> Outcome {
        self.release_value(&grant.handle)
    }

    /// Compare-and-`PEXPIRE` on the primary.
    fn extend(&mut self, ctx: &Ctx, grant: &mut Grant) -> Outcome {
        let start = ctx.mono_now();
        let cmd = Cmd::PexpireIfEq {
            key: KEY.into(),
            value: grant.handle.clone(),
            px_ms: self.params.ttl_ms.into(),
        };
        match self.call(&cmd) {
            Ok(Reply::Int(1)) => {
                grant.valid_until = Some(start + self.params.validity());
                Outcome::Ok
            }
            Ok(_) => Outcome::Failed("the lock was no longer ours".into()),
            Err(()) => Outcome::Unknown("request timed out".into()),
        }
    }
}
