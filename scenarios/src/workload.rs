//! The workload every client runs, whatever the protocol: think, acquire, then
//! `writes_per_cs` times: read the counter, work (extending the lock every `extend_every_ms`
//! if set), check the lock as `check` says, write the counter + 1 with its token; release.
//! Each step is an event in the history, and the named points between steps
//! (`after_acquire`, `after_read`, `after_validity_check`, `before_write`,
//! `before_release`) are where scripted pauses and crashes can strike.
//!
//! What the application does with its lock (`check`) is the application's, as in real code:
//! `before_write` asks the library whether the lock still holds just before each write
//! (redsync's `Until()`, a careful client); `never` trusts the lock for the whole job (most
//! code written against Redisson or redsync); `ask_servers` asks the servers just before
//! each write whether they still hold the lock (redsync's `Valid()`), which takes a round
//! trip; `on_signal` works with one eye on the library's lost-lock signal (node-redlock's
//! `signal.aborted`, a session's expiry): the work is interrupted the moment the signal is
//! raised, and a raised signal skips the write.

use locksim_protocols::resource::{ResourceClient, ResourceHandle, WriteOutcome};
use locksim_protocols::{Acquired, Connector, Grant, LockClient, LostSignal, Outcome, Validity};
use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::{NodeCtx, NodeIdx, World};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// What the application does to know it still holds the lock: `before_write` (ask the
    /// library just before each write, skip the write if the lock expired or was lost),
    /// `never`, `ask_servers` (ask the servers whether they still hold the lock, as redsync's
    /// `Valid()` does, and skip the write if they say no), or `on_signal` (abort the work
    /// when the library signals the lock is lost).
    #[serde(default)]
    pub check: Check,
    /// Writes per critical section, spread over its work, each a read-modify-write of the
    /// counter.
    #[serde(default = "d_writes_per_cs", skip_serializing_if = "is_one")]
    pub writes_per_cs: u32,
    /// Timeout of a request to the resource, in ms.
    #[serde(default = "d_resource_timeout")]
    pub resource_timeout_ms: u64,
    /// While working inside the critical section, extend the lock this often, in ms (0 =
    /// never). A long critical section stays safe only if its lock is extended in time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extend_every_ms: u64,
    /// What the application does when an extension definitely fails (the library says the
    /// lock is no longer its own): `go_on` working and write as `check` decides, or `stop`
    /// the work there, without its write (redsync's documented use: `if ok, _ :=
    /// mutex.Extend(); !ok { stop }`).
    #[serde(default, skip_serializing_if = "OnExtendFailure::is_default")]
    pub on_extend_failure: OnExtendFailure,
}

/// `[workload] on_extend_failure`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExtendFailure {
    /// Work on; the write is what `check` decides.
    #[default]
    GoOn,
    /// Stop the work at once: no write in this critical section.
    Stop,
}

impl OnExtendFailure {
    fn is_default(&self) -> bool {
        *self == OnExtendFailure::GoOn
    }
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
fn d_writes_per_cs() -> u32 {
    1
}
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// What the application does to know it still holds its lock (`[workload] check`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Ask the library just before each write; skip the write if the lock does not hold.
    #[default]
    BeforeWrite,
    /// Never ask: the lock is trusted for the whole job.
    Never,
    /// Abort the work when the library raises its lost-lock signal (and skip a write once it
    /// is raised); a library without a signal never interrupts.
    OnSignal,
    /// Ask the servers just before each write whether they still hold the lock (redsync's
    /// `Valid()`, [`LockClient::ask_servers`]); skip the write if they say no.
    AskServers,
}

impl Check {
    /// Whether runs that differ only in this check can be one run watching the other's
    /// check ([`CheckShadow`]): `before_write` and `never` touch the run only where a write
    /// is skipped; `on_signal` also interrupts the work and `ask_servers` sends requests, so
    /// they share with nobody.
    pub fn can_be_shadowed(self) -> bool {
        matches!(self, Check::BeforeWrite | Check::Never)
    }
}

/// A `check` a run's clients watch without applying it. Where a write is decided, the check
/// is the only way `[workload] check` reaches the world, so as long as this check would have
/// decided every write as the applied one did (skip or not, for the same reason), the run
/// is, event for event, the run this check would have given: one run then stands for two
/// rows of a comparison that differ only in the application's check (redsync with and
/// without its `Until()` check). Both checks must be able to be shadowed
/// ([`Check::can_be_shadowed`]).
#[derive(Clone, Debug)]
pub struct CheckShadow {
    /// The check watched.
    pub check: Check,
    diverged: Arc<AtomicBool>,
}

impl CheckShadow {
    /// Watches `check`.
    pub fn new(check: Check) -> CheckShadow {
        assert!(
            check.can_be_shadowed(),
            "only a before_write or a never check is shadowed"
        );
        CheckShadow {
            check,
            diverged: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the check would have decided some write differently.
    pub fn diverged(&self) -> bool {
        self.diverged.load(Ordering::Relaxed)
    }

    /// Notes a write the run decided (`applied`: why it was skipped, if it was).
    fn watch(&self, validity: &Validity, now: Duration, applied: &Option<String>) {
        if skip_write(validity, now, self.check, None) != *applied {
            self.diverged.store(true, Ordering::Relaxed);
        }
    }
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
            check: Check::BeforeWrite,
            writes_per_cs: 1,
            resource_timeout_ms: d_resource_timeout(),
            extend_every_ms: 0,
            on_extend_failure: OnExtendFailure::GoOn,
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

fn between(ctx: &NodeCtx, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(ctx.rng().gen_range(lo..=hi))
}

/// One client's main loop. `grants` numbers this client's grants across restarts.
pub async fn client_loop(
    ctx: NodeCtx,
    connector: Arc<dyn Connector>,
    resource: ResourceHandle,
    workload: Workload,
    grants: Arc<AtomicU64>,
    holders: Holders,
    shadows: Vec<CheckShadow>,
) {
    // A client that crashed inside its critical section is no longer in it.
    holders.exit(ctx.idx());
    let mut lock = connector.connect(&ctx);
    let resource = resource.connect(&ctx);
    let ev = |kind, op| Event::new(ctx.name(), kind, op);
    loop {
        ctx.sleep_local(between(&ctx, workload.think_ms_min, workload.think_ms_max))
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
        let signal = match workload.check {
            Check::OnSignal => lock.lost_signal(&grant),
            Check::BeforeWrite | Check::Never | Check::AskServers => None,
        };
        let job = Job {
            ctx: &ctx,
            resource: &resource,
            id: &id,
            workload: &workload,
            signal: signal.as_ref(),
            shadows: &shadows,
        };
        for _ in 0..workload.writes_per_cs {
            if !job.read_work_write(lock.as_mut(), &mut grant).await {
                break;
            }
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

/// One grant's job inside its critical section: what each write needs.
struct Job<'a> {
    ctx: &'a NodeCtx,
    resource: &'a ResourceClient,
    id: &'a str,
    workload: &'a Workload,
    /// The library's lost-lock signal, when the application aborts on it.
    signal: Option<&'a LostSignal>,
    /// Checks watched, not applied (see [`CheckShadow`]).
    shadows: &'a [CheckShadow],
}

impl Job<'_> {
    /// One read-modify-write: read the counter, work (a `writes_per_cs`-th share), check,
    /// write. Whether the job goes on: not after a failed read, an abort, a skipped or a
    /// rejected write.
    async fn read_work_write(&self, lock: &mut dyn LockClient, grant: &mut Grant) -> bool {
        let (ctx, id, workload) = (self.ctx, self.id, self.workload);
        let ev = |kind, op| Event::new(ctx.name(), kind, op);
        let io_timeout = Duration::from_millis(workload.resource_timeout_ms);
        ctx.record_event(ev(Kind::Invoke, Op::Read).grant(id));
        let read = self.resource.read(io_timeout).await;
        match read {
            Ok(v) => ctx.record_event(ev(Kind::Ok, Op::Read).grant(id).value(v)),
            Err(_) => ctx.record_event(ev(Kind::Info, Op::Read).grant(id).detail("timed out")),
        };
        let Ok(value) = read else {
            return false;
        };
        ctx.point("after_read").await;
        let work = between(ctx, workload.cs_ms_min, workload.cs_ms_max) / workload.writes_per_cs;
        if let Err(why) = work_extending(ctx, lock, grant, id, work, workload, self.signal).await {
            let why = format!("lock lost ({why}): work aborted");
            ctx.record_event(ev(Kind::Info, Op::Note).grant(id).detail(why));
            return false;
        }
        self.write_if_valid(lock, grant, value).await
    }

    /// The end of a share of work: checks the lock as the application does and, unless that
    /// says no, writes `value + 1` to the resource. Whether the write was accepted (or may
    /// have been).
    async fn write_if_valid(&self, lock: &mut dyn LockClient, grant: &Grant, value: i64) -> bool {
        let (ctx, id) = (self.ctx, self.id);
        let ev = |kind, op| Event::new(ctx.name(), kind, op);
        let (token, io_timeout) = (
            grant.token,
            Duration::from_millis(self.workload.resource_timeout_ms),
        );
        let validity = match self.workload.check {
            Check::AskServers => lock.ask_servers(grant).await,
            _ => lock.validity(grant),
        };
        let now = ctx.mono_now();
        let skip = skip_write(&validity, now, self.workload.check, self.signal);
        for shadow in self.shadows {
            shadow.watch(&validity, now, &skip);
        }
        if let Some(why) = skip {
            ctx.record_event(ev(Kind::Info, Op::Note).grant(id).detail(why));
            return false;
        }
        ctx.point("after_validity_check").await;
        ctx.point("before_write").await;
        let new = value + 1;
        ctx.record_event(
            ev(Kind::Invoke, Op::Write)
                .grant(id)
                .token(token)
                .value(new),
        );
        let kind = match self
            .resource
            .write(new, token, Some(value), id, io_timeout)
            .await
        {
            WriteOutcome::Accepted => Kind::Ok,
            WriteOutcome::Rejected => Kind::Fail,
            WriteOutcome::Unknown => Kind::Info,
        };
        ctx.record_event(ev(kind, Op::Write).grant(id).token(token).value(new));
        kind != Kind::Fail
    }
}

/// Sleeps `local` on the node's clock, or until `signal` is raised (its reason).
async fn sleep_or_lost(
    ctx: &NodeCtx,
    local: Duration,
    signal: Option<&LostSignal>,
) -> Result<(), String> {
    let Some(signal) = signal else {
        ctx.sleep_local(local).await;
        return Ok(());
    };
    if let Some(why) = signal.raised() {
        return Err(why);
    }
    let sleep = std::pin::pin!(ctx.sleep_local(local));
    let lost = std::pin::pin!(signal.wait());
    match futures::future::select(sleep, lost).await {
        futures::future::Either::Left(((), _)) => Ok(()),
        futures::future::Either::Right((why, _)) => Err(why),
    }
}

/// Why the write must be skipped, if the application's check says so.
fn skip_write(
    validity: &Validity,
    now: Duration,
    check: Check,
    signal: Option<&LostSignal>,
) -> Option<String> {
    match check {
        Check::Never => None,
        Check::OnSignal => signal
            .and_then(LostSignal::raised)
            .map(|why| format!("lock lost ({why}): write skipped")),
        Check::BeforeWrite | Check::AskServers if validity.holds_at(now) => None,
        Check::BeforeWrite | Check::AskServers => Some(match validity {
            Validity::Lost(why) => format!("lock lost ({why}): write skipped"),
            _ => "lease expired on the client's clock: write skipped".into(),
        }),
    }
}

/// Works for `work` (local time), extending the lock every `extend_every_ms` meanwhile (if
/// set) until an extension definitely fails (then, with `on_extend_failure = "stop"`, the
/// work ends there: `Err`); interrupted if `signal` is raised (its reason).
async fn work_extending(
    ctx: &NodeCtx,
    lock: &mut dyn LockClient,
    grant: &mut Grant,
    id: &str,
    work: Duration,
    workload: &Workload,
    signal: Option<&LostSignal>,
) -> Result<(), String> {
    if workload.extend_every_ms == 0 {
        return sleep_or_lost(ctx, work, signal).await;
    }
    let every = Duration::from_millis(workload.extend_every_ms);
    let end = ctx.mono_now() + work;
    loop {
        let left = end.saturating_sub(ctx.mono_now());
        if left <= every {
            return sleep_or_lost(ctx, left, signal).await;
        }
        sleep_or_lost(ctx, every, signal).await?;
        ctx.record_event(Event::new(ctx.name(), Kind::Invoke, Op::Extend).grant(id));
        let done = match lock.extend(grant).await {
            Outcome::Ok => Event::new(ctx.name(), Kind::Ok, Op::Extend),
            Outcome::Failed(why) => {
                let failed = Event::new(ctx.name(), Kind::Fail, Op::Extend).detail(why.clone());
                ctx.record_event(failed.grant(id));
                if workload.on_extend_failure == OnExtendFailure::Stop {
                    return Err(format!("extend failed: {why}"));
                }
                return sleep_or_lost(ctx, end.saturating_sub(ctx.mono_now()), signal).await;
            }
            Outcome::Unknown(why) => Event::new(ctx.name(), Kind::Info, Op::Extend).detail(why),
        };
        ctx.record_event(done.grant(id));
    }
}
