//! The client role: one OS process per client, running the workload of
//! `locksim_scenarios::workload::client_loop` step for step against real servers, and
//! writing its events as JSON lines on stdout, each stamped on the machine's monotonic
//! clock. A pause is a real stop-the-world: SIGSTOP stops every thread of the process,
//! keep-alives included, as a GC pause does.

use crate::clock;
use crate::lock::{Ctx, LiveLock};
use crate::resource::{Answer, Request, ResourceClient};
use crate::spec::{ClientSpec, LockSpec};
use locksim_check::{Kind, Op};
use locksim_protocols::{Acquired, Grant, Outcome, Validity};
use locksim_scenarios::workload::{Check, OnExtendFailure};
use std::sync::Arc;
use std::time::Duration;

/// The client process's main: runs the workload until the run's end.
pub fn main(spec: ClientSpec) -> anyhow::Result<()> {
    crate::procs::die_with_parent();
    clock::assert_real();
    let resource_addr = spec.resource.parse()?;
    let ctx = Arc::new(Ctx::new(spec.clone()));
    let mut lock = library(&spec, &ctx)?;
    ctx.ready();
    let mut resource = ResourceClient::new(resource_addr);
    let mut grants = spec.grants_before;
    // Spawned before the run's start, while the faults due at 0 take effect: wait until the
    // parent says they have (one byte on stdin; end of file: the parent is gone), then for
    // the start itself if it is still ahead.
    let mut go = [0u8; 1];
    if std::io::Read::read(&mut std::io::stdin(), &mut go)? == 0 {
        anyhow::bail!("the parent closed stdin before the run started");
    }
    clock::sleep(Duration::from_nanos(
        spec.start_ns.saturating_sub(clock::now_ns()),
    ));
    while !ctx.over() {
        one_round(&ctx, lock.as_mut(), &mut resource, &mut grants);
    }
    Ok(())
}

/// The lock library of the scenario's protocol.
fn library(spec: &ClientSpec, ctx: &Arc<Ctx>) -> anyhow::Result<Box<dyn LiveLock>> {
    if let Some(profile) = &spec.driver {
        let driver = crate::driver::named(profile)
            .ok_or_else(|| anyhow::anyhow!("no driver for the client profile {profile}"))?;
        return Ok(Box::new(crate::driver::DriverLock::start(
            driver, &spec.lock, ctx,
        )?));
    }
    Ok(match &spec.lock {
        LockSpec::SingleRedis { params, server } => Box::new(
            crate::redis_lock::SingleRedisLock::new(params.clone(), server.parse()?),
        ),
        LockSpec::Redlock { params, servers } => {
            let addrs: Vec<std::net::SocketAddr> = servers
                .iter()
                .map(|e| e.parse())
                .collect::<Result<_, _>>()?;
            Box::new(crate::redlock_lock::RedlockLock::new(
                params.clone(),
                &addrs,
            ))
        }
        LockSpec::ReplicatedRedis {
            params,
            servers,
            sentinels,
            real,
        } => Box::new(crate::replicated_lock::ReplicatedLock::new(
            params.clone(),
            &addrs(servers)?,
            addrs(real)?,
            &addrs(sentinels)?,
        )),
        LockSpec::Etcd { params, endpoints } => {
            let endpoints = endpoints
                .iter()
                .map(|e| e.parse())
                .collect::<Result<_, _>>()?;
            Box::new(crate::etcd_lock::EtcdLock::new(
                params.clone(),
                endpoints,
                ctx.clone(),
            ))
        }
        LockSpec::ZooKeeper { params, servers } => {
            let servers = servers
                .iter()
                .map(|e| e.parse())
                .collect::<Result<_, _>>()?;
            Box::new(crate::zk_lock::ZkLock::new(
                params.clone(),
                servers,
                ctx.clone(),
            ))
        }
    })
}

fn addrs(list: &[String]) -> anyhow::Result<Vec<std::net::SocketAddr>> {
    Ok(list.iter().map(|e| e.parse()).collect::<Result<_, _>>()?)
}

/// One think → acquire → critical section → release, as `client_loop` in
/// `locksim_scenarios::workload`.
fn one_round(ctx: &Ctx, lock: &mut dyn LiveLock, resource: &mut ResourceClient, grants: &mut u64) {
    let w = &ctx.spec.workload;
    clock::sleep(Duration::from_millis(
        ctx.between(w.think_ms_min, w.think_ms_max),
    ));
    ctx.record(ctx.ev(Kind::Invoke, Op::Acquire));
    let mut grant = match lock.acquire(ctx) {
        Acquired::Granted(grant) => grant,
        Acquired::Failed(why) => return ctx.record(ctx.ev(Kind::Fail, Op::Acquire).detail(why)),
        Acquired::Unknown(why) => return ctx.record(ctx.ev(Kind::Info, Op::Acquire).detail(why)),
    };
    *grants += 1;
    let id = format!("{}#{grants}", ctx.name());
    let token = grant.token;
    ctx.record(ctx.ev(Kind::Ok, Op::Acquire).grant(&id).token(token));
    ctx.record(ctx.ev(Kind::Ok, Op::CsEnter).grant(&id).token(token));
    ctx.point("after_acquire");

    let io_timeout = Duration::from_millis(w.resource_timeout_ms);
    ctx.record(ctx.ev(Kind::Invoke, Op::Read).grant(&id));
    match resource.call(&Request::Read, io_timeout) {
        Some(Answer::Value(value)) => {
            ctx.record(ctx.ev(Kind::Ok, Op::Read).grant(&id).value(value));
            ctx.point("after_read");
            let work = Duration::from_millis(ctx.between(w.cs_ms_min, w.cs_ms_max));
            match work_extending(ctx, lock, &mut grant, &id, work) {
                Ok(()) => write_if_valid(ctx, lock, resource, &grant, &id, value),
                Err(why) => {
                    let why = format!("lock lost ({why}): work aborted");
                    ctx.record(ctx.ev(Kind::Info, Op::Note).grant(&id).detail(why));
                }
            }
        }
        _ => ctx.record(ctx.ev(Kind::Info, Op::Read).grant(&id).detail("timed out")),
    }

    ctx.record(ctx.ev(Kind::Ok, Op::CsExit).grant(&id));
    ctx.point("before_release");
    ctx.record(ctx.ev(Kind::Invoke, Op::Release).grant(&id));
    let done = match lock.release(ctx, &grant) {
        Outcome::Ok => ctx.ev(Kind::Ok, Op::Release),
        Outcome::Failed(why) => ctx.ev(Kind::Fail, Op::Release).detail(why),
        Outcome::Unknown(why) => ctx.ev(Kind::Info, Op::Release).detail(why),
    };
    ctx.record(done.grant(&id));
}

/// As `write_if_valid` in `locksim_scenarios::workload`: the validity check, then the write.
fn write_if_valid(
    ctx: &Ctx,
    lock: &mut dyn LiveLock,
    resource: &mut ResourceClient,
    grant: &Grant,
    id: &str,
    value: i64,
) {
    let w = &ctx.spec.workload;
    let skip = match w.check {
        Check::Never => None,
        Check::OnSignal => lock
            .lost_signal(ctx, grant)
            .map(|why| format!("lock lost ({why}): write skipped")),
        Check::BeforeWrite => match lock.validity(ctx, grant) {
            v if v.holds_at(ctx.mono_now()) => None,
            Validity::Lost(why) => Some(format!("lock lost ({why}): write skipped")),
            _ => Some("lease expired on the client's clock: write skipped".into()),
        },
    };
    if let Some(why) = skip {
        return ctx.record(ctx.ev(Kind::Info, Op::Note).grant(id).detail(why));
    }
    ctx.point("after_validity_check");
    ctx.point("before_write");
    let (new, token) = (value + 1, grant.token);
    ctx.record(
        ctx.ev(Kind::Invoke, Op::Write)
            .grant(id)
            .token(token)
            .value(new),
    );
    let req = Request::Write {
        value: new,
        token,
        grant: id.into(),
        expected: Some(value),
    };
    let kind = match resource.call(&req, Duration::from_millis(w.resource_timeout_ms)) {
        Some(Answer::Accepted) => Kind::Ok,
        Some(_) => Kind::Fail,
        None => Kind::Info,
    };
    ctx.record(ctx.ev(kind, Op::Write).grant(id).token(token).value(new));
}

/// As `work_extending` in `locksim_scenarios::workload`: `Err` when an extension failed and
/// the workload stops there (`on_extend_failure = "stop"`), or when the library raised its
/// lost-lock signal under `check = "on_signal"`.
fn work_extending(
    ctx: &Ctx,
    lock: &mut dyn LiveLock,
    grant: &mut Grant,
    id: &str,
    work: Duration,
) -> Result<(), String> {
    let every_ms = ctx.spec.workload.extend_every_ms;
    if every_ms == 0 {
        return sleep_or_lost(ctx, lock, grant, work);
    }
    let every = Duration::from_millis(every_ms);
    let end = ctx.mono_now() + work;
    loop {
        let left = end.saturating_sub(ctx.mono_now());
        if left <= every {
            return sleep_or_lost(ctx, lock, grant, left);
        }
        sleep_or_lost(ctx, lock, grant, every)?;
        ctx.record(ctx.ev(Kind::Invoke, Op::Extend).grant(id));
        let done = match lock.extend(ctx, grant) {
            Outcome::Ok => ctx.ev(Kind::Ok, Op::Extend),
            Outcome::Failed(why) => {
                ctx.record(ctx.ev(Kind::Fail, Op::Extend).detail(why.clone()).grant(id));
                if ctx.spec.workload.on_extend_failure == OnExtendFailure::Stop {
                    return Err(format!("extend failed: {why}"));
                }
                return sleep_or_lost(ctx, lock, grant, end.saturating_sub(ctx.mono_now()));
            }
            Outcome::Unknown(why) => ctx.ev(Kind::Info, Op::Extend).detail(why),
        };
        ctx.record(done.grant(id));
    }
}

/// How often work under `check = "on_signal"` looks at the library's signal, in ms. The
/// simulator's work wakes the moment the signal is raised; here the client asks the
/// library this often (a driver answers from the library's own state, without a request
/// to a server), so an abort comes up to this much later than the library raised it.
const SIGNAL_POLL_MS: u64 = 10;

/// As `sleep_or_lost` in `locksim_scenarios::workload`: sleeps `local`, or, under `check =
/// "on_signal"`, until the library raises its lost-lock signal (its reason).
fn sleep_or_lost(
    ctx: &Ctx,
    lock: &mut dyn LiveLock,
    grant: &Grant,
    local: Duration,
) -> Result<(), String> {
    if ctx.spec.workload.check != Check::OnSignal {
        clock::sleep(local);
        return Ok(());
    }
    let end = ctx.mono_now() + local;
    loop {
        if let Some(why) = lock.lost_signal(ctx, grant) {
            return Err(why);
        }
        let left = end.saturating_sub(ctx.mono_now());
        if left.is_zero() {
            return Ok(());
        }
        clock::sleep(left.min(Duration::from_millis(SIGNAL_POLL_MS)));
    }
}
