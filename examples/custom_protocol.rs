//! How to plug your own lock protocol into locksim, from your own crate.
//!
//! The protocol here, `mono-lease`, is a single lock server that times leases on its
//! **monotonic** clock (not its wall clock, as Redis does) and hands out a fencing token
//! with every grant. Without arguments, the example runs it next to `single-redis` under the
//! same fault, a forward jump of the server's wall clock, and shows that the jump breaks
//! Redis but not this server:
//!
//! ```sh
//! cargo run --release --example custom_protocol
//! ```
//!
//! With arguments it is the whole `locksim` command line (`run`, `sweep`, `search`, `check`,
//! `compare`, `report`, `protocols`) over a registry that has `mono-lease` too: its `main`
//! hands the registry to `locksim::cli::main_with`. `compare` gives `mono-lease` a row of
//! its own in the standard matrix, with its parameters' defaults:
//!
//! ```sh
//! cargo run --release --example custom_protocol -- compare --seeds 5 --out /tmp/mono
//! ```
//! The tests at the bottom run with `cargo test` and hold it to these claims.

use async_trait::async_trait;
use futures::StreamExt;
use locksim_protocols::{Acquired, Grant, LockClient, Outcome, ParamError, Protocol, Registry};
use locksim_scenarios::{RunResult, Scenario};
use locksim_sim::rpc::{endpoint, Caller, Wire};
use locksim_sim::{Net, NodeCtx, NodeIdx, Role, World};
use serde::Deserialize;
use std::time::Duration;

/// Requests to the lease server.
#[derive(Clone, Debug)]
enum Req {
    Acquire { owner: String },
    Release { owner: String },
}

/// Answers.
#[derive(Clone, Debug)]
enum Resp {
    Granted { token: u64 },
    Busy,
    Released(bool),
}

type LeaseNet = Net<Wire<Req, Resp>>;

/// The `[protocol]` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default = "ttl_ms")]
    ttl_ms: u64,
    #[serde(default = "retry_ms")]
    retry_ms: u64,
}

fn ttl_ms() -> u64 {
    2_000
}

fn retry_ms() -> u64 {
    20
}

/// The protocol: its id, its parameters, its server, its client.
#[derive(Clone)]
struct MonoLease;

/// What a client needs to reach the server.
struct Server {
    net: LeaseNet,
    node: NodeIdx,
}

impl Protocol for MonoLease {
    const ID: &'static str = "mono-lease";
    const SUMMARY: &'static str =
        "one lease server timing leases on its monotonic clock, with fencing tokens";
    type Params = Params;
    type Servers = Server;
    type Client = MonoLeaseClient;

    fn validate(&self, params: &Params) -> Result<(), ParamError> {
        if params.ttl_ms == 0 {
            return Err(ParamError::field("ttl_ms", "must be positive"));
        }
        Ok(())
    }

    fn servers(&self, _: &Params) -> Vec<String> {
        vec!["lease".into()]
    }

    fn start(&self, params: &Params, world: &World) -> Server {
        let net = LeaseNet::new(world);
        let (server_net, ttl) = (net.clone(), Duration::from_millis(params.ttl_ms));
        let node = world.add_node("lease", Role::Server, move |ctx| {
            serve(ctx, server_net.clone(), ttl)
        });
        Server { net, node }
    }

    fn connect(&self, params: &Params, server: &Server, ctx: &NodeCtx) -> MonoLeaseClient {
        let (caller, _) = endpoint(&server.net, ctx);
        MonoLeaseClient {
            ctx: ctx.clone(),
            caller,
            server: server.node,
            params: params.clone(),
        }
    }
}

/// The server: one lease, expiring by the server's monotonic clock.
async fn serve(ctx: NodeCtx, net: LeaseNet, ttl: Duration) {
    let (caller, mut requests) = endpoint(&net, &ctx);
    let (mut holder, mut token): (Option<(String, Duration)>, u64) = (None, 0);
    while let Some(req) = requests.next().await {
        let now = ctx.mono_now();
        holder.take_if(|(_, until)| now >= *until);
        let resp = match req.body {
            Req::Acquire { owner } if holder.is_none() => {
                token += 1;
                holder = Some((owner, now + ttl));
                Resp::Granted { token }
            }
            Req::Acquire { .. } => Resp::Busy,
            Req::Release { owner } => {
                let ours = holder.take_if(|(o, _)| *o == owner).is_some();
                Resp::Released(ours)
            }
        };
        caller.reply(req.from, req.id, resp);
    }
}

struct MonoLeaseClient {
    ctx: NodeCtx,
    caller: Caller<Req, Resp>,
    server: NodeIdx,
    params: Params,
}

#[async_trait(?Send)]
impl LockClient for MonoLeaseClient {
    async fn acquire(&mut self) -> Acquired {
        let timeout = Duration::from_millis(100);
        for _ in 0..500 {
            let start = self.ctx.mono_now();
            let req = Req::Acquire {
                owner: self.ctx.name().into(),
            };
            if let Ok(Resp::Granted { token }) = self.caller.call(self.server, req, timeout).await {
                // Trust the lease for a little less than the TTL (clock rates may differ).
                let validity = Duration::from_millis(self.params.ttl_ms * 9 / 10);
                return Acquired::Granted(Grant {
                    token: Some(token),
                    valid_until: Some(start + validity),
                    handle: self.ctx.name().into(),
                });
            }
            self.ctx
                .sleep_local(Duration::from_millis(self.params.retry_ms))
                .await;
        }
        Acquired::Failed("gave up".into())
    }

    async fn release(&mut self, grant: &Grant) -> Outcome {
        let req = Req::Release {
            owner: grant.handle.clone(),
        };
        match self
            .caller
            .call(self.server, req, Duration::from_millis(100))
            .await
        {
            Ok(Resp::Released(true)) => Outcome::Ok,
            Ok(_) => Outcome::Failed("not ours any more".into()),
            Err(_) => Outcome::Unknown("timed out".into()),
        }
    }
}

/// A registry with the built-in protocols plus ours.
fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.add(MonoLease);
    r
}

/// The same workload and fault for any protocol whose server is called `server`: its
/// wall clock jumps 5 s forward while the first holder works in its critical section.
fn clock_jump_scenario(protocol: &str, server: &str) -> Scenario {
    let text = format!(
        r#"
duration_ms = 5000
[protocol]
name = "{protocol}"
ttl_ms = 2000
[workload]
clients = 3
cs_ms_min = 600
cs_ms_max = 800
think_ms_min = 0
think_ms_max = 20
[[faults]]
kind = "clock_jump"
node = "{server}"
at_ms = 300
delta_ms = 5000
"#
    );
    Scenario::parse(&text, "inline").expect("the scenario parses")
}

fn run(protocol: &str, server: &str, seed: u64) -> RunResult {
    clock_jump_scenario(protocol, server)
        .prepare("inline", &registry())
        .expect("the scenario is valid")
        .run(seed)
}

fn main() -> std::process::ExitCode {
    if std::env::args_os().len() > 1 {
        return locksim::cli::main_with(registry());
    }
    demo();
    std::process::ExitCode::SUCCESS
}

/// The clock jump under both protocols, side by side.
fn demo() {
    for (protocol, server) in [("single-redis", "redis"), ("mono-lease", "lease")] {
        let r = run(protocol, server, 1);
        println!(
            "{protocol:<13} under a +5 s wall-clock jump: {} ({} acquisitions, trace {})",
            r.verdict, r.stats.liveness.acquisitions, r.trace_hash
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locksim_sim::Verdict;

    #[test]
    fn the_jump_breaks_redis_but_not_a_monotonic_lease() {
        for seed in 1..=10 {
            assert_eq!(run("single-redis", "redis", seed).verdict, Verdict::Invalid);
            let ours = run("mono-lease", "lease", seed);
            assert_eq!(
                ours.verdict,
                Verdict::Valid,
                "seed {seed}: {:?}",
                ours.violations
            );
            assert!(ours.stats.liveness.acquisitions > 3);
        }
    }

    /// A fresh directory for one test's files, removed when the test passes (a failed one
    /// keeps it, for a look).
    struct Tmp(std::path::PathBuf);

    impl std::ops::Deref for Tmp {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn tmp(name: &str) -> Tmp {
        let dir =
            std::env::temp_dir().join(format!("locksim-custom-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tmp(dir)
    }

    /// The command line, in this process, over our registry.
    fn cli(args: &[&str]) -> std::process::ExitCode {
        let argv = std::iter::once("custom_protocol").chain(args.iter().copied());
        locksim::cli::run_with(&registry(), argv)
    }

    fn json(path: &std::path::Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// `mono-lease` under client pauses: a lease without fencing lets a paused holder
    /// overlap, which `search` must find.
    const PAUSES: &str = r#"
name = "mono-lease-pauses"
duration_ms = 5000
[protocol]
name = "mono-lease"
[workload]
clients = 3
cs_ms_min = 50
cs_ms_max = 200
[faults_random]
pause_probability = 0.5
pause_ms_min = 2500
pause_ms_max = 3000
pause_nodes = ["@clients"]
"#;

    #[test]
    fn every_command_runs_our_protocol() {
        use std::process::ExitCode;
        let dir = tmp("commands");
        let scenario = dir.join("pauses.toml");
        std::fs::write(&scenario, PAUSES).unwrap();
        let path = |name: &str| dir.join(name).display().to_string();
        let sc = scenario.display().to_string();
        let hist = path("h.jsonl");
        let run = cli(&["run", &sc, "--seed", "1", "--history", &hist, "--json"]);
        assert_ne!(run, ExitCode::from(2), "the scenario loads");
        assert_eq!(cli(&["check", &hist]), run, "check agrees with run");
        let sweep = path("sweep.jsonl");
        let args = [
            "sweep", &sc, "--seeds", "1..4", "--jobs", "1", "--out", &sweep,
        ];
        assert_ne!(cli(&args), ExitCode::from(2));
        let lines = std::fs::read_to_string(&sweep).unwrap();
        assert_eq!(
            lines.lines().filter(|l| l.contains("mono-lease")).count(),
            3
        );
        let found = path("found.toml");
        let args = ["search", &sc, "--cases", "32", "--quiet", "--out", &found];
        assert_eq!(
            cli(&args),
            ExitCode::from(1),
            "a pause breaks an unfenced lease"
        );
        assert_eq!(
            cli(&["run", &found]),
            ExitCode::from(1),
            "the counterexample replays"
        );
        let report = path("report");
        assert_eq!(
            cli(&["report", &sweep, "--out", &report]),
            ExitCode::SUCCESS
        );
        let r = json(&dir.join("report/report.json"));
        assert_eq!(r["cells"][0]["protocol"], "mono-lease", "{r}");
        assert_eq!(cli(&["protocols"]), ExitCode::SUCCESS);
        assert_eq!(cli(&["run", "no-such-file.toml"]), ExitCode::from(2));
    }

    /// A small matrix: one built-in row, one profile, no phase diagrams, no catalog.
    const MATRIX: &str = r#"
title = "mono-lease beside single-redis"
catalog_seeds = 0
[base]
duration_ms = 3000
[base.workload]
clients = 3
[[protocols]]
label = "single-redis"
[protocols.protocol]
name = "single-redis"
[[profiles]]
label = "client-pauses"
[profiles.faults_random]
pause_probability = 0.5
pause_nodes = ["@clients"]
"#;

    #[test]
    fn compare_gives_our_protocol_a_row_from_its_defaults() {
        let dir = tmp("compare");
        let matrix = dir.join("matrix.toml");
        std::fs::write(&matrix, MATRIX).unwrap();
        let (m, out) = (matrix.display().to_string(), dir.join("out"));
        let out_text = out.display().to_string();
        let args = [
            "compare", "--matrix", &m, "--jobs", "1", "--quiet", "--out", &out_text,
        ];
        assert_eq!(cli(&args), std::process::ExitCode::SUCCESS);
        let r = json(&out.join("report.json"));
        let rows: Vec<&str> = r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["protocol"].as_str().unwrap())
            .collect();
        assert_eq!(rows, ["single-redis", "mono-lease"], "{r}");
        assert!(r["cells"][1]["runs"].as_u64().unwrap() > 0, "{r}");
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("| mono-lease |"), "{md}");
    }

    #[test]
    fn its_parameters_are_checked() {
        let mut s = clock_jump_scenario("mono-lease", "lease");
        s.protocol
            .params
            .insert("ttl_msec".into(), toml::Value::Integer(1));
        let e = s.prepare("inline", &registry()).err().expect("rejected");
        assert!(e.to_string().contains("ttl_msec"), "{e}");
    }
}
