//! `redlock` against N real, independent redis-servers: the model's client
//! (`locksim_protocols::redis::redlock::RedlockClient`) step for step, with the same commands
//! (`acquire_cmd`, `release_cmd`, `Cmd::PexpireIfEq`) and the same decision
//! (`Params::decide`: a quorum, validity = ttl − elapsed − drift, and the bug variants).
//! As in the model, the requests go to every instance before any reply is read, and every
//! reply already received counts, even past the per-instance timeout: a client paused at
//! `after_acquire_send` finds its replies in its sockets and measures the pause in `elapsed`.

use crate::clock;
use crate::lock::{Ctx, LiveLock};
use crate::resp::Resp;
use locksim_protocols::redis::client::{acquire_cmd, release_cmd, KEY};
use locksim_protocols::redis::redlock::{quorum, Params, Tokens, Variant};
use locksim_protocols::redis::store::{Cmd, Reply};
use locksim_protocols::{Acquired, Grant, Outcome};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// The Redlock client of N instances.
pub struct RedlockLock {
    params: Params,
    instances: Vec<Resp>,
    /// Per grant handle, the instances that answered OK (for `release-quorum-only`).
    locked: BTreeMap<String, Vec<usize>>,
}

impl RedlockLock {
    /// A client of the instances at `addrs`, in the model's order (`redis1` first).
    pub fn new(params: Params, addrs: &[SocketAddr]) -> Self {
        assert_eq!(addrs.len(), params.instances, "one address per instance");
        RedlockLock {
            params,
            instances: addrs.iter().map(|a| Resp::new(*a)).collect(),
            locked: BTreeMap::new(),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.params.request_timeout_ms)
    }

    fn all(&self) -> Vec<usize> {
        (0..self.instances.len()).collect()
    }

    /// Sends `cmd` to each instance in `which`; returns those it was sent to.
    fn send_all(&mut self, which: &[usize], cmd: &Cmd) -> Vec<usize> {
        let argv = cmd.argv().expect("the lock's commands have an argv");
        let timeout = self.timeout();
        which
            .iter()
            .copied()
            .filter(|&i| self.instances[i].send(&argv, timeout).is_ok())
            .collect()
    }

    /// The replies of `sent`, until the per-instance timeout counted from `start` (one
    /// deadline for all, as the model's multiplexed client); replies already received count.
    fn collect(&mut self, sent: &[usize], start: Duration, ctx: &Ctx) -> Vec<Option<Reply>> {
        let deadline = start + self.timeout();
        let mut replies = vec![None; self.instances.len()];
        for &i in sent {
            let left = deadline.saturating_sub(ctx.mono_now());
            replies[i] = self.instances[i].recv(left).ok();
        }
        replies
    }

    /// Compare-and-delete on `which`: (how many deleted, how many answered).
    fn unlock(&mut self, which: &[usize], value: &str, ctx: &Ctx) -> (usize, usize) {
        let start = ctx.mono_now();
        let sent = self.send_all(which, &release_cmd(value));
        let replies = self.collect(&sent, start, ctx);
        let deleted = replies
            .iter()
            .filter(|r| **r == Some(Reply::Int(1)))
            .count();
        (deleted, replies.iter().flatten().count())
    }

    /// One try: steps 1 to 5 of the algorithm, as `RedlockClient::try_once`.
    fn try_once(&mut self, ctx: &Ctx) -> Result<Grant, String> {
        let p = self.params.clone();
        let value = format!("{}:{:016x}", ctx.name(), ctx.random());
        let start = ctx.mono_now();
        let tokens = p.tokens == Tokens::MaxIncr;
        let cmd = acquire_cmd(&value, Some(p.ttl_ms.into()), tokens);
        let sent = self.send_all(&self.all(), &cmd);
        // The requests are out; the replies may wait in our sockets while we are paused here.
        ctx.point("after_acquire_send");
        let replies = self.collect(&sent, start, ctx);
        let granted: Vec<usize> = (0..replies.len())
            .filter(|i| matches!(replies[*i], Some(Reply::Ok | Reply::Int(_))))
            .collect();
        let token = replies
            .iter()
            .filter_map(|r| match r {
                Some(Reply::Int(t)) => Some(*t as u64),
                _ => None,
            })
            .max();
        match p.decide(granted.len(), ctx.mono_now() - start) {
            Ok(validity) => {
                assert!(granted.len() >= quorum(p.instances), "a grant has a quorum");
                self.locked.insert(value.clone(), granted);
                Ok(Grant {
                    token,
                    valid_until: Some(ctx.mono_now() + validity),
                    handle: value,
                })
            }
            Err(why) => {
                if granted.len() >= quorum(p.instances) {
                    ctx.note(format!("lock rejected: {why}"));
                }
                // Which replies missed the deadline: on a CPU-starved machine, replies of
                // reachable instances miss it too, which the simulator never does.
                let answered = replies.iter().flatten().count();
                ctx.note(format!(
                    "try failed: {} of {} granted, {answered} answered within {} ms, elapsed {:.1} ms",
                    granted.len(),
                    p.instances,
                    p.request_timeout_ms,
                    (ctx.mono_now() - start).as_secs_f64() * 1e3,
                ));
                let which = match p.variant {
                    Variant::ReleaseQuorumOnly => granted,
                    _ => self.all(),
                };
                self.unlock(&which, &value, ctx);
                Err(why)
            }
        }
    }
}

impl LiveLock for RedlockLock {
    /// Up to `retry_count` tries with random delays between them (the model's
    /// `GiveUp::Tries`), never past the run's end.
    fn acquire(&mut self, ctx: &Ctx) -> Acquired {
        let (tries, min, max) = (
            self.params.retry_count,
            self.params.retry_delay_ms_min,
            self.params.retry_delay_ms_max,
        );
        for n in 1..=tries {
            let why = match self.try_once(ctx) {
                Ok(grant) => return Acquired::Granted(grant),
                Err(why) => why,
            };
            if n == tries || ctx.over() {
                return Acquired::Failed(format!("{n} tries: {why}"));
            }
            clock::sleep(Duration::from_millis(ctx.between(min, max)));
        }
        unreachable!("retry_count is at least 1 (validated)")
    }

    /// Compare-and-delete on every instance (only those that granted, in the
    /// `release-quorum-only` bug); released if a quorum deleted.
    fn release(&mut self, ctx: &Ctx, grant: &Grant) -> Outcome {
        let locked = self.locked.remove(&grant.handle).unwrap_or_default();
        let which = match self.params.variant {
            Variant::ReleaseQuorumOnly => locked,
            _ => self.all(),
        };
        let (deleted, answered) = self.unlock(&which, &grant.handle, ctx);
        if deleted >= quorum(self.params.instances) {
            Outcome::Ok
        } else if answered == which.len() {
            Outcome::Failed(format!("deleted on {deleted} instances only"))
        } else {
            Outcome::Unknown(format!(
                "deleted on {deleted}, {} did not answer",
                which.len() - answered
            ))
        }
    }

    /// Compare-and-`PEXPIRE` on every instance: extended on a quorum with validity left.
    fn extend(&mut self, ctx: &Ctx, grant: &mut Grant) -> Outcome {
        let start = ctx.mono_now();
        let cmd = Cmd::PexpireIfEq {
            key: KEY.into(),
            value: grant.handle.clone(),
            px_ms: self.params.ttl_ms.into(),
        };
        let sent = self.send_all(&self.all(), &cmd);
        let replies = self.collect(&sent, start, ctx);
        let extended = replies
            .iter()
            .filter(|r| **r == Some(Reply::Int(1)))
            .count();
        match self.params.decide(extended, ctx.mono_now() - start) {
            Ok(validity) => {
                grant.valid_until = Some(ctx.mono_now() + validity);
                Outcome::Ok
            }
            Err(why) => Outcome::Failed(why),
        }
    }
}
