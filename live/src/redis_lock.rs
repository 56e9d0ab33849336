//! `single-redis` against a real redis-server: the model's recipe
//! (`locksim_protocols::redis::single`, `locksim_protocols::redis::client`) with the very
//! commands the model builds (`acquire_cmd`, `release_cmd`, `Cmd::argv`), sent over RESP.

use crate::lock::{acquire_retrying, Ctx, LiveLock};
use crate::resp::Resp;
use locksim_protocols::redis::client::{acquire_cmd, release_cmd, Attempt, KEY};
use locksim_protocols::redis::profile::one_server_retry;
use locksim_protocols::redis::single::{Params, Variant};
use locksim_protocols::redis::store::{Cmd, Reply};
use locksim_protocols::{Acquired, Grant, Outcome};
use std::net::SocketAddr;
use std::time::Duration;

/// The lock client of one redis-server.
pub struct SingleRedisLock {
    params: Params,
    server: Resp,
}

impl SingleRedisLock {
    /// A client of the server at `addr`.
    pub fn new(params: Params, addr: SocketAddr) -> Self {
        assert!(
            matches!(params.variant, Variant::Correct),
            "the parent refuses bug variants in live mode"
        );
        SingleRedisLock {
            params,
            server: Resp::new(addr),
        }
    }

    fn call(&mut self, cmd: &Cmd) -> Result<Reply, String> {
        let argv = cmd.argv().expect("the lock's commands have an argv");
        let timeout = Duration::from_millis(self.params.request_timeout_ms);
        self.server.call(&argv, timeout).map_err(|e| e.0)
    }

    /// One try, as `SingleRedisClient::attempt`.
    fn attempt(&mut self, ctx: &Ctx) -> Attempt {
        let value = format!("{}:{:016x}", ctx.name(), ctx.random());
        let start = ctx.mono_now();
        let cmd = acquire_cmd(&value, Some(self.params.ttl_ms.into()), self.params.tokens);
        let token = match self.call(&cmd) {
            Ok(Reply::Ok) => None,
            Ok(Reply::Int(t)) => Some(t as u64),
            Ok(Reply::Error(e)) => {
                ctx.note(format!("redis error: {e}"));
                return Attempt::Busy(format!("redis error: {e}"));
            }
            Ok(_) => return Attempt::Busy("held".into()),
            Err(_) => {
                // The SET may have succeeded: free it (if it did), as the model does.
                let _ = self.call(&release_cmd(&value));
                return Attempt::Unknown("request timed out".into());
            }
        };
        let valid_until = Some(start + self.params.validity());
        // As `OneServer::grant_in_time`: a grant that came too late is given back.
        if valid_until.is_some_and(|v| ctx.mono_now() >= v) {
            ctx.note("grant arrived after its validity: released");
            let _ = self.release_value(&value);
            return Attempt::Busy("grant arrived after its validity".into());
        }
        Attempt::Granted(Grant {
            token,
            valid_until,
            handle: value,
        })
    }

    fn release_value(&mut self, value: &str) -> Outcome {
        match self.call(&release_cmd(value)) {
            Ok(Reply::Int(1)) => Outcome::Ok,
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => Outcome::Failed(format!("unexpected reply {other:?}")),
            Err(_) => Outcome::Unknown("request timed out".into()),
        }
    }
}

impl LiveLock for SingleRedisLock {
    /// Tries until granted with random delays, until the model's retry loop gives up
    /// (`redis::client::acquire` with `one_server_retry`: `retry_count` tries if set, else
    /// the acquire timeout), or the run ends.
    fn acquire(&mut self, ctx: &Ctx) -> Acquired {
        let p = &self.params;
        let (min_ms, max_ms) = (p.retry_delay_ms_min, p.retry_delay_ms_max);
        let retry = one_server_retry(min_ms, max_ms, p.retry_count, p.acquire_timeout_ms);
        acquire_retrying(ctx, retry, || self.attempt(ctx))
    }

    fn release(&mut self, _ctx: &Ctx, grant: &Grant) -> Outcome {
        self.release_value(&grant.handle)
    }

    /// Compare-and-`PEXPIRE`, as `OneServer::extend_ttl`.
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
            Ok(Reply::Int(_)) => Outcome::Failed("the lock was no longer ours".into()),
            Ok(other) => Outcome::Failed(format!("unexpected reply {other:?}")),
            Err(_) => Outcome::Unknown("request timed out".into()),
        }
    }
}
