//! The canary (TigerBeetle's fuzzer that fails on purpose): a deliberately broken lock,
//! defined here, that the fault search must find and shrink on every run. If a change to
//! the search, the runner or the checker made this test pass silently, the search would be
//! blind, and every "no violation found" it prints would mean nothing.
//!
//! The bug: the lock server keeps its one lease in memory only, so a server that crashes and
//! restarts grants the lock again while the holder is still inside its critical section (as
//! Redis without persistence does). Without faults it is a correct lock.

use async_trait::async_trait;
use futures::StreamExt;
use locksim_protocols::{Acquired, Grant, LockClient, NoParams, Outcome, Protocol, Registry};
use locksim_scenarios::search::{search, Failure, SearchOptions};
use locksim_scenarios::Scenario;
use locksim_sim::rpc::{endpoint, Caller, Wire};
use locksim_sim::{FaultKind, Net, NodeCtx, NodeIdx, Property, Role, Verdict, World};
use std::cell::Cell;
use std::time::Duration;

/// `true` asks for the lock, `false` gives it back; the answer says whether it worked.
type CanaryNet = Net<Wire<(bool, String), bool>>;

#[derive(Clone)]
struct Forgetful;

impl Protocol for Forgetful {
    const ID: &'static str = "canary-forgetful";
    const SUMMARY: &'static str =
        "a broken lock for testing the search: its lease does not survive a server restart";
    type Params = NoParams;
    type Servers = (CanaryNet, NodeIdx);
    type Client = ForgetfulClient;

    fn servers(&self, _: &NoParams) -> Vec<String> {
        vec!["lock".into()]
    }

    fn start(&self, _: &NoParams, world: &World) -> (CanaryNet, NodeIdx) {
        let net = CanaryNet::new(world);
        let server_net = net.clone();
        let server = world.add_node("lock", Role::Server, move |ctx| {
            serve(ctx, server_net.clone())
        });
        (net, server)
    }

    fn connect(
        &self,
        _: &NoParams,
        (net, server): &(CanaryNet, NodeIdx),
        ctx: &NodeCtx,
    ) -> ForgetfulClient {
        let (caller, _) = endpoint(net, ctx);
        ForgetfulClient {
            ctx: ctx.clone(),
            caller,
            server: *server,
            grants: Cell::new(0),
        }
    }
}

/// The server: one holder, no expiry, nothing persisted (the bug).
async fn serve(ctx: NodeCtx, net: CanaryNet) {
    let (caller, mut requests) = endpoint(&net, &ctx);
    let holder: std::cell::RefCell<Option<String>> = Default::default();
    while let Some(req) = requests.next().await {
        let (acquire, owner) = req.body;
        let mut h = holder.borrow_mut();
        let ok = match (acquire, h.as_ref()) {
            (true, None) => {
                *h = Some(owner);
                true
            }
            (false, Some(o)) if *o == owner => {
                *h = None;
                true
            }
            _ => false,
        };
        drop(h);
        caller.reply(req.from, req.id, ok);
    }
}

struct ForgetfulClient {
    ctx: NodeCtx,
    caller: Caller<(bool, String), bool>,
    server: NodeIdx,
    grants: Cell<u64>,
}

impl ForgetfulClient {
    async fn ask(&self, acquire: bool) -> Option<bool> {
        let req = (acquire, self.ctx.name().to_owned());
        let timeout = Duration::from_millis(50);
        self.caller.call(self.server, req, timeout).await.ok()
    }
}

#[async_trait(?Send)]
impl LockClient for ForgetfulClient {
    async fn acquire(&mut self) -> Acquired {
        for _ in 0..1_000 {
            if self.ask(true).await == Some(true) {
                self.grants.set(self.grants.get() + 1);
                return Acquired::Granted(Grant {
                    token: None,
                    valid_until: None,
                    handle: format!("{}#{}", self.ctx.name(), self.grants.get()),
                });
            }
            self.ctx.sleep_local(Duration::from_millis(10)).await;
        }
        Acquired::Failed("gave up".into())
    }

    async fn release(&mut self, _grant: &Grant) -> Outcome {
        match self.ask(false).await {
            Some(true) => Outcome::Ok,
            Some(false) => Outcome::Failed("not the holder".into()),
            None => Outcome::Unknown("timed out".into()),
        }
    }
}

/// Three clients holding the lock most of the time; the search may crash the server.
const SCENARIO: &str = r#"
duration_ms = 3000
[protocol]
name = "canary-forgetful"
[workload]
clients = 3
cs_ms_min = 100
cs_ms_max = 300
think_ms_min = 0
think_ms_max = 10
[faults_random]
crash_probability = 0.5
crash_down_ms_min = 1
crash_down_ms_max = 30
"#;

fn prepared() -> locksim_scenarios::Prepared {
    let mut registry = Registry::builtin();
    registry.add(Forgetful);
    // One file per call: the tests run in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("locksim-canary-{}-{n}.toml", std::process::id());
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, SCENARIO).unwrap();
    let file = path.display().to_string();
    let prepared = Scenario::load(&file).and_then(|s| s.prepare(&file, &registry));
    let _ = std::fs::remove_file(&path);
    prepared.expect("the canary scenario loads")
}

#[test]
fn without_faults_the_canary_is_a_correct_lock() {
    let p = prepared();
    for seed in 1..=5 {
        let r = p.run_faults(seed, vec![]);
        assert_eq!(r.verdict, Verdict::Valid, "seed {seed}: {:?}", r.violations);
        assert!(r.stats.liveness.acquisitions > 10, "seed {seed}");
    }
}

#[test]
fn the_search_finds_the_canary_and_shrinks_it_to_one_crash() {
    let p = prepared();
    for seed in 1..=3 {
        let options = SearchOptions {
            cases: 64,
            seed,
            ..SearchOptions::default()
        };
        let outcome = search(&p, &options, |_| {}).unwrap();
        let found = outcome
            .found
            .unwrap_or_else(|| panic!("search seed {seed}: the canary was not found"));
        assert_eq!(
            found.failure,
            Failure::Violation(Property::MutualExclusion),
            "search seed {seed}"
        );
        assert!(!found.no_added_fault() && found.case >= 1);
        let faults = &found.schedule.faults;
        assert_eq!(faults.len(), 1, "search seed {seed}: {faults:?}");
        assert_eq!(faults[0].kind(), FaultKind::Crash, "search seed {seed}");
    }
}
