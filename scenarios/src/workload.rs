//! The workload every client runs, whatever the protocol: think, acquire, read the counter,
//! work (extending the lock every `extend_every_ms` if set), ask the client library whether
//! the lock still holds, write the counter + 1 with its token, release.
//! Each step is an event in the history, and the named points between steps
//! (`after_acquire`, `after_read`, `after_validity_check`, `before_write`,
//! `before_release`) are where scripted pauses and crashes can strike.

use locksim_protocols::resource::{ResourceClient, ResourceHandle, WriteOutcome};
use locksim_protocols::{Acquired, Connector, Grant, LockClient, Outcome, Validity};
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::{NodeCtx, NodeIdx, World};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `[workload]`: clients loop think → acquire → read → work → validity check → write →
/// release, incrementing the resource's counter under the lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Number of clients, named c1, c2, ...
    #[serde(default = "d_clients")]
    pub clients: u32,
    /// Shortest work inside the critical section (between read and write), in ms.
    #[serde(default = "d_cs_min")]
    pub cs_ms_min: u64,
    /// Longest work inside the critical section, in ms.
    #[serde(default = "d_cs_max")]
    pub cs_ms_max: u64,
    /// Shortest pause between a release and the next acquire, in ms.
    #[serde(default = "d_think_min")]
    pub think_ms_min: u64,
    /// Longest pause between a release and the next acquire, in ms.
    #[serde(default = "d_think_max")]
    pub think_ms_max: u64,
    /// Check the lock's validity on the client's clock just before writing (and skip the
    /// write if it expired), as a careful client does.
    #[serde(default = "yes")]
    pub check_validity: bool,
    /// Timeout of a request to the resource, in ms.
    #[serde(default = "d_resource_timeout")]
    pub resource_timeout_ms: u64,
    /// While working inside the critical section, extend the lock this often, in ms (0 =
    /// never). A long critical section stays safe only if its lock is extended in time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extend_every_ms: u64,
}

fn d_clients() -> u32 {
    2
}
fn d_cs_min() -> u64 {
    20
}
fn d_cs_max() -> u64 {
    100
}
fn d_think_min() -> u64 {
    10
}
fn d_think_max() -> u64 {
    100
}
fn yes() -> bool {
    true
}
fn d_resource_timeout() -> u64 {
    200
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            clients: d_clients(),
            cs_ms_min: d_cs_min(),
            cs_ms_max: d_cs_max(),
            think_ms_min: d_think_min(),
            think_ms_max: d_think_max(),
            check_validity: true,
            resource_timeout_ms: d_resource_timeout(),
            extend_every_ms: 0,
        }
    }
}

impl Workload {
    /// The client node names.
    pub fn client_names(&self) -> Vec<String> {
        (1..=self.clients).map(|i| format!("c{i}")).collect()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The named points of the workload, in the order a client passes them.
pub const POINTS: [&str; 5] = [
    "after_acquire",
    "after_read",
    "after_validity_check",
    "before_write",
    "before_release",
];

/// The workload's view of who is inside a critical section, in order of entry: it answers
/// the fault target `@holder`.
#[derive(Clone, Default)]
pub struct Holders(Arc<Mutex<Vec<NodeIdx>>>);

impl Holders {
    fn enter(&self, idx: NodeIdx) {
        let mut inside = self.0.lock().unwrap();
        assert!(!inside.contains(&idx), "a client enters twice");
        inside.push(idx);
    }

    fn exit(&self, idx: NodeIdx) {
        self.0.lock().unwrap().retain(|i| *i != idx);
    }

    /// The client that has been inside longest and is up, if any.
    pub fn holder(&self, world: &World) -> Option<NodeIdx> {
        let inside = self.0.lock().unwrap().clone();
        inside.into_iter().find(|i| world.is_alive(*i))
    }
}

fn between(lo: u64, hi: u64) -> Duration {
    Duration::from_millis(madsim::rand::thread_rng().gen_range(lo..=hi))
}

/// One client's main loop. `grants` numbers this client's grants across restarts.
pub async fn client_loop(
    ctx: NodeCtx,
    connector: Arc<dyn Connector>,
    resource: ResourceHandle,
    workload: Workload,
    grants: Arc<AtomicU64>,
    holders: Holders,
) {
    // A client that crashed inside its critical section is no longer in it.
    holders.exit(ctx.idx());
    let mut lock = connector.connect(&ctx);
    let resource = resource.connect(&ctx);
    let io_timeout = Duration::from_millis(workload.resource_timeout_ms);
    let ev = |kind, op| Event::new(ctx.name(), kind, op);
    loop {
        ctx.sleep_local(between(workload.think_ms_min, workload.think_ms_max))
            .await;
        let Some(mut grant) = acquire(&ctx, lock.as_mut()).await else {
            continue;
        };
        let n = grants.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}#{n}", ctx.name());
        let token = grant.token;
        ctx.record_event(ev(Kind::Ok, Op::Acquire).grant(&id).token(token));
        ctx.record_event(ev(Kind::Ok, Op::CsEnter).grant(&id).token(token));
        holders.enter(ctx.idx());
        ctx.point("after_acquire").await;

        ctx.record_event(ev(Kind::Invoke, Op::Read).grant(&id));
        let read = resource.read(io_timeout).await;
        match read {
            Ok(v) => ctx.record_event(ev(Kind::Ok, Op::Read).grant(&id).value(v)),
            Err(_) => ctx.record_event(ev(Kind::Info, Op::Read).grant(&id).detail("timed out")),
        };
        if let Ok(value) = read {
            ctx.point("after_read").await;
            let work = between(workload.cs_ms_min, workload.cs_ms_max);
            work_extending(&ctx, lock.as_mut(), &mut grant, &id, work, &workload).await;
            write_if_valid(
                &ctx,
                lock.as_mut(),
                &resource,
                &grant,
                &id,
                value,
                &workload,
            )
            .await;
        }

        ctx.record_event(ev(Kind::Ok, Op::CsExit).grant(&id));
        holders.exit(ctx.idx());
        ctx.point("before_release").await;
        release(&ctx, lock.as_mut(), &grant, &id).await;
    }
}

/// Asks for the lock, recording the attempt and its outcome: the grant, if one came.
async fn acquire(ctx: &NodeCtx, lock: &mut dyn LockClient) -> Option<Grant> {
    let ev = |kind, op| Event::new(ctx.name(), kind, op);
    ctx.record(Kind::Invoke, Op::Acquire);
    match lock.acquire().await {
        Acquired::Granted(grant) => Some(grant),
        Acquired::Failed(why) => {
            ctx.record_event(ev(Kind::Fail, Op::Acquire).detail(why));
            None
        }
        Acquired::Unknown(why) => {
            ctx.record_event(ev(Kind::Info, Op::Acquire).detail(why));
            None
        }
    }
}

/// Releases grant `id`, recording the attempt and its outcome.
async fn release(ctx: &NodeCtx, lock: &mut dyn LockClient, grant: &Grant, id: &str) {
    let ev = |kind, op| Event::new(ctx.name(), kind, op);
    ctx.record_event(ev(Kind::Invoke, Op::Release).grant(id));
    let done = match lock.release(grant).await {
        Outcome::Ok => ev(Kind::Ok, Op::Release),
        Outcome::Failed(why) => ev(Kind::Fail, Op::Release).detail(why),
        Outcome::Unknown(why) => ev(Kind::Info, Op::Release).detail(why),
    };
    ctx.record_event(done.grant(id));
}

/// The end of a critical section: asks the lock library whether the lock still holds (if
/// the workload checks) and, if so, writes `value + 1` to the resource.
async fn write_if_valid(
    ctx: &NodeCtx,
    lock: &mut dyn LockClient,
    resource: &ResourceClient,
    grant: &Grant,
    id: &str,
    value: i64,
    workload: &Workload,
) {
    let ev = |kind, op| Event::new(ctx.name(), kind, op);
    let (token, io_timeout) = (
        grant.token,
        Duration::from_millis(workload.resource_timeout_ms),
    );
    let validity = lock.validity(grant);
    if workload.check_validity && !validity.holds_at(ctx.mono_now()) {
        let why = match validity {
            Validity::Lost(why) => format!("lock lost ({why}): write skipped"),
            _ => "lease expired on the client's clock: write skipped".into(),
        };
        ctx.record_event(ev(Kind::Info, Op::Note).grant(id).detail(why));
    } else {
        ctx.point("after_validity_check").await;
        ctx.point("before_write").await;
        let new = value + 1;
        ctx.record_event(
            ev(Kind::Invoke, Op::Write)
                .grant(id)
                .token(token)
                .value(new),
        );
        let kind = match resource
            .write(new, token, Some(value), id, io_timeout)
            .await
        {
            WriteOutcome::Accepted => Kind::Ok,
            WriteOutcome::Rejected => Kind::Fail,
            WriteOutcome::Unknown => Kind::Info,
        };
        ctx.record_event(ev(kind, Op::Write).grant(id).token(token).value(new));
    }
}

/// Works for `work` (local time), extending the lock every `extend_every_ms` meanwhile (if
/// set) until an extension definitely fails.
async fn work_extending(
    ctx: &NodeCtx,
    lock: &mut dyn LockClient,
    grant: &mut Grant,
    id: &str,
    work: Duration,
    workload: &Workload,
) {
    if workload.extend_every_ms == 0 {
        ctx.sleep_local(work).await;
        return;
    }
    let every = Duration::from_millis(workload.extend_every_ms);
    let end = ctx.mono_now() + work;
    loop {
        let left = end.saturating_sub(ctx.mono_now());
        if left <= every {
            ctx.sleep_local(left).await;
            return;
        }
        ctx.sleep_local(every).await;
        ctx.record_event(Event::new(ctx.name(), Kind::Invoke, Op::Extend).grant(id));
        let done = match lock.extend(grant).await {
            Outcome::Ok => Event::new(ctx.name(), Kind::Ok, Op::Extend),
            Outcome::Failed(why) => {
                let failed = Event::new(ctx.name(), Kind::Fail, Op::Extend).detail(why);
                ctx.record_event(failed.grant(id));
                ctx.sleep_local(end.saturating_sub(ctx.mono_now())).await;
                return;
            }
            Outcome::Unknown(why) => Event::new(ctx.name(), Kind::Info, Op::Extend).detail(why),
        };
        ctx.record_event(done.grant(id));
    }
}
