//! The real client libraries as live mode's third world (`locksim live --library`): instead
//! of locksim's own client, each client process calls the library a scenario's
//! `protocol.client` profile models, through a small driver kept in `live/drivers/`. The
//! workload, the named points, the resource and the faults stay locksim's, so the same
//! checker judges the library itself against the servers.
//!
//! A driver is a program the client process starts as its child, in its process group (a
//! pause, SIGSTOP to the group, stops the library's threads too; a crash kills both; it dies
//! with the client, `PR_SET_PDEATHSIG`), speaking one JSON object per line: it answers its
//! first line with the library's name and version, then each `{"op": "acquire" | "release"
//! | "extend"}` with `{"ok": true, "handle": ...}`, `{"ok": false, "why": ...}` or
//! `{"unknown": ...}` (the library raised a timeout or a connection error). The library's
//! own timeouts bound each call.
//!
//! Drivers here: `redis-py` (redis-py's `Lock` on `single-redis`; `redis-py-shared-token`,
//! one `Lock(thread_local=False)` whose clients are its threads: [`SharedDriver`]),
//! `python-redis-lock` (its `Lock(auto_renewal=True)`, on `single-redis`) and
//! `etcdctl-3.4` (`etcdctl lock`, etcd's Go `concurrency` package behind etcd's command, on
//! `etcd`), Python programs; `node-redlock` (node); `curator` (Curator's
//! `InterProcessMutex` on `zookeeper`, a Java program run from a file: [`JAVA`]); `kazoo`
//! (kazoo's `Lock` on `zookeeper`, Python); `pottery` (pottery's `Redlock` on `redlock`,
//! Python; its `locked()` answers `{"op": "ask"}`, what `check = "ask_servers"` looks at). A
//! profile without a driver is refused by name, as modelled only.

use crate::client::lock::Ctx;
use crate::procs::Proc;
use crate::rundir::RunDir;
use crate::spec::LockSpec;
use locksim_protocols::redis::profile;
use locksim_protocols::{Acquired, Grant, Outcome};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A library live mode can run for real.
pub struct Driver {
    /// The `protocol.client` profile it is the real counterpart of.
    pub profile: &'static str,
    /// The protocol whose servers it talks to.
    pub protocol: &'static str,
    /// The interpreter that runs the driver.
    pub program: &'static str,
    /// The interpreter's flag that runs a program given inline (`-c`, node's `-e`).
    inline: &'static str,
    /// The driver's source, run as `program INLINE SOURCE ARGS` (no file to find at run time).
    source: &'static str,
    /// Where the source lives in the repository.
    pub path: &'static str,
    /// A one-line program that prints the installed library's version.
    version_probe: &'static str,
    /// How to install the library.
    pub install: &'static str,
    /// The driver's arguments (one JSON object) for the client of a lock.
    args: fn(&LockSpec) -> anyhow::Result<serde_json::Value>,
    /// Why the library gives the application no lost-lock signal to check, where it gives
    /// none: such a driver runs `check = "never"` only.
    pub no_signal: Option<&'static str>,
    /// Whether the driver answers `{"op": "ask"}` with the library's own question to the
    /// servers (pottery's `locked()`): what `check = "ask_servers"` needs.
    pub asks_servers: bool,
    /// Whether the scenario's clients are the threads of one process sharing one lock object
    /// (`redis-py-shared-token`): the parent starts one driver ([`SharedDriver`]) and each
    /// client process connects to it, where it runs as a thread.
    pub threads: bool,
}

impl Driver {
    /// Why live mode cannot move this library's clock (the shim preloaded into its process,
    /// `deploy::shim`, which translates the waits of Node, Python and a JVM), if it cannot.
    pub fn why_clock_fixed(&self) -> Option<&'static str> {
        if self.threads {
            return Some("its clients are the threads of one driver process, with one clock");
        }
        (self.protocol == "etcd").then_some(
            "etcdctl is a Go program, which reads the clock through the vDSO without libc, \
             where live mode's shim cannot reach",
        )
    }

    /// Why live mode cannot pause or crash one of this library's clients at a time, if it
    /// cannot: it stops or kills the client's process, and where the client is a thread of
    /// one driver process ([`Driver::threads`]), that thread goes on with a call it is in.
    /// At a workload point the thread is idle, so a stop there is one thread's.
    pub fn why_not_stopped_at_a_time(&self) -> Option<&'static str> {
        self.threads.then_some(
            "its clients are the threads of one driver process, and live mode stops or kills \
             a client's process, not its thread in the driver, which goes on with any call it \
             is in; pause or crash it at a workload point, where its thread is idle",
        )
    }
}

/// `etcdctl lock NAME` (`etcdctl-3.4`); its command form (below) differs in two fields.
const ETCDCTL: Driver = Driver {
    profile: "etcdctl-3.4",
    protocol: "etcd",
    program: "python3",
    inline: "-c",
    source: include_str!("../../drivers/etcdctl.py"),
    path: "live/drivers/etcdctl.py",
    version_probe: "import subprocess; \
        print(subprocess.run(['etcdctl', 'version'], capture_output=True, text=True, \
        check=True).stdout.split()[2])",
    install: "apt-get install -y etcd-client",
    args: etcdctl_args,
    no_signal: None,
    asks_servers: false,
    threads: false,
};

/// node-redlock on one server; on Redlock's servers (below), the same driver.
const NODE_REDLOCK: Driver = Driver {
    profile: "node-redlock",
    protocol: "single-redis",
    program: "node",
    inline: "-e",
    source: include_str!("../../drivers/node_redlock.js"),
    path: "live/drivers/node_redlock.js",
    version_probe: NODE_REDLOCK_VERSION,
    install: NODE_REDLOCK_INSTALL,
    args: node_redlock_args,
    no_signal: None,
    asks_servers: false,
    threads: false,
};

/// redis-py's `Lock`, each client a process of its own; shared by threads, below.
const REDIS_PY: Driver = Driver {
    profile: "redis-py",
    protocol: "single-redis",
    program: "python3",
    inline: "-c",
    source: include_str!("../../drivers/redis_py.py"),
    path: "live/drivers/redis_py.py",
    version_probe: "import redis; print(redis.__version__)",
    install: "pip install redis",
    args: redis_py_args,
    no_signal: None,
    asks_servers: false,
    threads: false,
};

/// Every driver.
pub const DRIVERS: &[Driver] = &[
    REDIS_PY,
    Driver {
        profile: "python-redis-lock",
        protocol: "single-redis",
        program: "python3",
        inline: "-c",
        source: include_str!("../../drivers/python_redis_lock.py"),
        path: "live/drivers/python_redis_lock.py",
        version_probe: "import redis_lock; print(redis_lock.__version__)",
        install: "pip install python-redis-lock",
        args: python_redis_lock_args,
        // Its answer to `valid` is the library's: held (it keeps no validity, and its
        // renewal thread ends silently).
        no_signal: None,
        asks_servers: false,
        threads: false,
    },
    Driver {
        profile: "redis-py-shared-token",
        args: redis_py_threads_args,
        threads: true,
        ..REDIS_PY
    },
    ETCDCTL,
    Driver {
        profile: "etcd-concurrency-3.4",
        args: etcdctl_command_args,
        no_signal: Some(
            "it runs as `etcdctl lock NAME COMMAND`, which gives its command no Session.Done() \
             (the etcdctl-3.4 profile, `etcdctl lock NAME`, watches it)",
        ),
        ..ETCDCTL
    },
    NODE_REDLOCK,
    Driver {
        protocol: "redlock",
        ..NODE_REDLOCK
    },
    Driver {
        profile: "curator",
        protocol: "zookeeper",
        program: JAVA,
        inline: CURATOR_JVM,
        source: include_str!("../../drivers/Curator.java"),
        path: "live/drivers/Curator.java",
        version_probe: include_str!("../../drivers/Curator.java"),
        install: "apt-get install -y libcurator-recipes-java openjdk-17-jre-headless",
        args: zookeeper_args,
        no_signal: None,
        asks_servers: false,
        threads: false,
    },
    Driver {
        profile: "kazoo",
        protocol: "zookeeper",
        program: "python3",
        inline: "-c",
        source: include_str!("../../drivers/kazoo_lock.py"),
        path: "live/drivers/kazoo_lock.py",
        version_probe: "from kazoo.version import __version__; print(__version__)",
        install: "pip install kazoo==2.10.0",
        args: zookeeper_args,
        no_signal: None,
        asks_servers: false,
        threads: false,
    },
    Driver {
        profile: "pottery",
        protocol: "redlock",
        program: "python3",
        inline: "-c",
        source: include_str!("../../drivers/pottery_lock.py"),
        path: "live/drivers/pottery_lock.py",
        version_probe: "from importlib.metadata import version; \
            import pottery; print(version('pottery'))",
        install: "pip install pottery",
        args: pottery_args,
        no_signal: None,
        asks_servers: true,
        threads: false,
    },
];

/// Java runs a program from a file only (JEP 330's `java --source N FILE`): a driver whose
/// program is `java` has its source written into a directory of its own, given as `inline`
/// (the JVM's flags) then the file, and the directory removed once the JVM has compiled it
/// (at its start, in memory: after its first line). The version probe is that source too,
/// run with `--version`.
const JAVA: &str = "java";

/// The JVM's flags for the Curator driver: Debian's jars (libcurator-recipes-java, which
/// brings zookeeper, guava and slf4j), slf4j-nop to keep the logs off stdout, a quick start
/// (C1 only, the serial collector) and no `/tmp/hsperfdata_USER/PID` file (a driver killed
/// with its client never removes it).
const CURATOR_JVM: &str = "-cp /usr/share/java/curator-recipes.jar:\
    /usr/share/java/curator-framework.jar:/usr/share/java/curator-client.jar:\
    /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:\
    /usr/share/java/guava.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar \
    -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData --source 17";

/// The jars [`CURATOR_JVM`] names, each of which must exist.
fn jvm_class_path(flags: &str) -> Vec<&str> {
    let mut words = flags.split_whitespace();
    let cp = words.by_ref().skip_while(|w| *w != "-cp").nth(1);
    cp.map_or(vec![], |cp| cp.split(':').collect())
}

impl Driver {
    /// The command that runs `source` (the driver's or its version probe): `program INLINE
    /// SOURCE`, or for Java `java FLAGS FILE` and the file's directory, removed when dropped
    /// (a run directory: if this process is killed first, the next live run sweeps it).
    fn command(&self, source: &str) -> anyhow::Result<(Command, Option<RunDir>)> {
        let mut cmd = Command::new(self.program);
        if self.program != JAVA {
            cmd.arg(self.inline).arg(source);
            return Ok((cmd, None));
        }
        for jar in jvm_class_path(self.inline) {
            anyhow::ensure!(std::path::Path::new(jar).exists(), "{jar} is missing");
        }
        let dir = RunDir::create()?;
        let file = dir
            .path()
            .join(Path::new(self.path).file_name().unwrap_or_default());
        std::fs::write(&file, source)?;
        cmd.args(self.inline.split_whitespace()).arg(file);
        Ok((cmd, Some(dir)))
    }

    /// How long the driver may take to say hello after its start, in ms, before the run
    /// fails: a bound (the run starts as soon as every driver is up), generous because a
    /// JVM compiles the driver's source, connects and warms up first (1 to 3 s alone, more
    /// than 10 s with three at once beside a build), node asks npm for its global modules
    /// (`npm root -g`), and five Python drivers of `etcdctl` took more than 2.5 s beside
    /// four live tests and a simulation.
    pub fn start_ms(&self) -> u64 {
        match self.program {
            JAVA => 90_000,
            _ => 30_000,
        }
    }
}

/// Curator's `InterProcessMutex` or kazoo's `Lock` on `/lock` (the model's lock directory),
/// with the scenario's session and connection timeouts (the profile's defaults fill those
/// not set; kazoo has no connection timeout), its acquire timeout, its retry interval (the
/// request timeout: Curator's) and the error policy its application's listener follows.
fn zookeeper_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    use locksim_protocols::raft::zookeeper::profile::ErrorPolicy;
    let LockSpec::ZooKeeper { params, servers } = lock else {
        anyhow::bail!("the Curator and kazoo drivers run on zookeeper only");
    };
    let policy = match params.error_policy.unwrap_or_default() {
        ErrorPolicy::Standard => "standard",
        ErrorPolicy::Session => "session",
    };
    Ok(serde_json::json!({
        "connect": servers.join(","),
        "lock_path": "/lock",
        "session_timeout_ms": params.session_timeout_ms,
        "connection_timeout_ms": params.connection_timeout_ms.unwrap_or(15_000),
        "request_timeout_ms": params.request_timeout_ms,
        "acquire_timeout_ms": params.acquire_timeout_ms,
        "error_policy": policy,
    }))
}

/// Prints the globally installed redlock's and ioredis's versions (their packages'
/// `exports` hide `package.json` from `require`).
const NODE_REDLOCK_VERSION: &str = "const fs = require('fs'), path = require('path'); \
    const root = require('child_process').execSync('npm root -g', {encoding: 'utf8'}).trim(); \
    require(path.join(root, 'redlock')); require(path.join(root, 'ioredis')); \
    const v = (p) => JSON.parse(fs.readFileSync(path.join(root, p, 'package.json'))).version; \
    console.log(`${v('redlock')} on ioredis ${v('ioredis')}`);";

/// node-redlock 5 (its `using()` and abort signal) is published as a beta.
const NODE_REDLOCK_INSTALL: &str = "npm install --global redlock@5.0.0-beta.2 ioredis@5";

/// redis-py's `Lock(name, timeout, sleep, blocking_timeout)` on the one server.
fn redis_py_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let LockSpec::SingleRedis { params, server } = lock else {
        anyhow::bail!("the redis-py driver runs on single-redis only");
    };
    let addr: std::net::SocketAddr = server.parse()?;
    // redis-py polls at one fixed `sleep`: the middle of the scenario's retry delay.
    let sleep_ms = (params.retry_delay_ms_min + params.retry_delay_ms_max) / 2;
    Ok(serde_json::json!({
        "host": addr.ip().to_string(),
        "port": addr.port(),
        "name": locksim_protocols::redis::client::KEY,
        "ttl_ms": params.ttl_ms,
        "sleep_ms": sleep_ms,
        "blocking_timeout_ms": params.acquire_timeout_ms,
        "request_timeout_ms": params.request_timeout_ms,
    }))
}

/// redis-py's `Lock(name, timeout, sleep, blocking_timeout, thread_local=False)`, one object
/// for every client, each a thread of the driver's process ([`Driver::threads`]).
fn redis_py_threads_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let mut args = redis_py_args(lock)?;
    args["threads"] = true.into();
    Ok(args)
}

/// python-redis-lock's `Lock(redis, name, expire=S, auto_renewal=True)` on the one server,
/// `acquire(timeout=T)`: both in whole seconds, as the library takes them.
fn python_redis_lock_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let LockSpec::SingleRedis { params, server } = lock else {
        anyhow::bail!("the python-redis-lock driver runs on single-redis only");
    };
    let addr: std::net::SocketAddr = server.parse()?;
    Ok(serde_json::json!({
        "host": addr.ip().to_string(),
        "port": addr.port(),
        "name": locksim_protocols::redis::client::KEY,
        "expire_s": params.ttl_ms / 1000,
        "acquire_timeout_s": profile::python_redis_lock_timeout_s(params.acquire_timeout_ms),
        "request_timeout_ms": params.request_timeout_ms,
    }))
}

/// node-redlock's `using(resources, duration, settings, routine)` over one ioredis client
/// per server: the scenario's parameters, which the `node-redlock` profile fills with the
/// library's defaults (11 attempts 200 ± 100 ms apart, drift 0.01, 500 ms threshold).
fn node_redlock_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    // The two protocols' parameters share these fields' names, not a type.
    macro_rules! settings {
        ($p:expr) => {
            (
                $p.ttl_ms,
                $p.clock_drift_factor,
                $p.request_timeout_ms,
                $p.retry_count,
                ($p.retry_delay_ms_min, $p.retry_delay_ms_max),
                $p.extension_threshold_ms,
            )
        };
    }
    let (servers, (ttl_ms, drift, timeout_ms, retries, delay, threshold_ms)) = match lock {
        LockSpec::SingleRedis { params, server } => (vec![server.clone()], settings!(params)),
        LockSpec::Redlock { params, servers } => (servers.clone(), settings!(params)),
        _ => anyhow::bail!("the node-redlock driver runs on single-redis and redlock only"),
    };
    // node-redlock gives up after a number of tries, never after a time.
    anyhow::ensure!(
        retries > 0,
        "node-redlock gives up after retryCount tries, not after acquire_timeout_ms: set \
         retry_count"
    );
    Ok(serde_json::json!({
        "servers": endpoints(&servers)?,
        "name": locksim_protocols::redis::client::KEY,
        "duration_ms": ttl_ms,
        // retryCount counts the tries after the first.
        "retry_count": retries - 1,
        "retry_delay_ms": (delay.0 + delay.1) / 2,
        "retry_jitter_ms": (delay.1 - delay.0) / 2,
        "drift_factor": drift,
        "automatic_extension_threshold_ms": threshold_ms,
        "command_timeout_ms": timeout_ms,
    }))
}

/// The servers' `ADDR:PORT`s as a driver takes them: `[{"host": ..., "port": ...}]`.
fn endpoints(servers: &[String]) -> anyhow::Result<Vec<serde_json::Value>> {
    let endpoint = |server: &String| -> anyhow::Result<serde_json::Value> {
        let addr: std::net::SocketAddr = server.parse()?;
        Ok(serde_json::json!({ "host": addr.ip().to_string(), "port": addr.port() }))
    };
    servers.iter().map(endpoint).collect()
}

/// pottery's `Redlock(key, masters, auto_release_time, num_extensions)` over one redis-py
/// client per master, its requests bounded by the scenario's request timeout (redis-py's
/// `socket_timeout`; none by default), `acquire(timeout=T)`.
fn pottery_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let LockSpec::Redlock { params, servers } = lock else {
        anyhow::bail!("the pottery driver runs on redlock only");
    };
    let Some(acquire_timeout_ms) = params.acquire_timeout_ms else {
        anyhow::bail!("pottery gives up after acquire_timeout_ms, not after retry_count tries");
    };
    Ok(serde_json::json!({
        "masters": endpoints(servers)?,
        "name": locksim_protocols::redis::client::KEY,
        "ttl_ms": params.ttl_ms,
        "num_extensions": params.extensions_max(),
        "acquire_timeout_ms": acquire_timeout_ms,
        "request_timeout_ms": params.request_timeout_ms,
    }))
}

/// `etcdctl --endpoints=ALL lock --ttl=S`: every member an endpoint, the lease's TTL in
/// whole seconds (live mode refuses others), etcdctl's own timeouts for the rest.
fn etcdctl_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let LockSpec::Etcd { params, endpoints } = lock else {
        anyhow::bail!("the etcdctl driver runs on etcd only");
    };
    Ok(serde_json::json!({
        "endpoints": endpoints,
        "name": "locksim",
        "ttl_s": params.lease_ttl_ms / 1000,
        "acquire_timeout_ms": params.acquire_timeout_ms,
        // Unlock is one Delete, which etcdctl's lock command gives no deadline
        // (`m.Unlock(context.TODO())`): a bound on the driver's wait only.
        "release_timeout_ms": 6_000,
        "mode": "signal",
    }))
}

/// `etcdctl lock --ttl=S NAME COMMAND`: etcdctl runs the command once `Lock` returns and
/// unlocks when it ends, without its own re-read of the key (that `Get` is on the path
/// without a command only) and without watching `Session.Done()`: 3.4's bare `Mutex`, the
/// `etcd-concurrency-3.4` profile, as a shell user or a Jepsen-style harness runs it.
fn etcdctl_command_args(lock: &LockSpec) -> anyhow::Result<serde_json::Value> {
    let mut args = etcdctl_args(lock)?;
    args["mode"] = "command".into();
    Ok(args)
}

/// A scenario's client profile (`protocol.client`; `None`: locksim's own client), and its
/// driver, if it has one.
pub fn of_scenario(s: &locksim_scenarios::Scenario) -> (Option<&str>, Option<&'static Driver>) {
    let profile = s.protocol.params.get("client").and_then(|c| c.as_str());
    (
        profile,
        profile.and_then(|p| for_profile(&s.protocol.name, p)),
    )
}

/// The driver of `profile` on `protocol`, if there is one.
pub fn for_profile(protocol: &str, profile: &str) -> Option<&'static Driver> {
    DRIVERS
        .iter()
        .find(|d| d.profile == profile && d.protocol == protocol)
}

/// The driver of `profile` (a client spec names it; the parent checked its protocol).
pub fn named(profile: &str) -> Option<&'static Driver> {
    DRIVERS.iter().find(|d| d.profile == profile)
}

/// The names of the profiles with a driver, for messages.
pub fn profiles() -> String {
    let names: Vec<String> = DRIVERS
        .iter()
        .map(|d| format!("{} on {}", d.profile, d.protocol))
        .collect();
    names.join(", ")
}

/// A library that is not installed: the error names how to install it (exit 2).
#[derive(Debug, thiserror::Error)]
#[error(
    "live --library needs {profile}'s library, which is not installed ({}): {install}",
    why.trim()
)]
pub struct MissingLibrary {
    /// The profile whose library is missing.
    pub profile: String,
    /// What the version probe said.
    pub why: String,
    /// How to install it.
    pub install: &'static str,
}

impl Driver {
    /// The installed library's version (the parent asks before any server starts).
    pub fn version(&self) -> Result<String, MissingLibrary> {
        let missing = |why: String| MissingLibrary {
            profile: self.profile.into(),
            why,
            install: self.install,
        };
        let output = || -> anyhow::Result<std::process::Output> {
            let (mut cmd, _source) = self.command(self.version_probe)?;
            if self.program == JAVA {
                cmd.arg("--version");
            }
            Ok(cmd.output()?)
        };
        let out = output().map_err(|e| missing(format!("cannot run {}: {e}", self.program)))?;
        if !out.status.success() {
            return Err(missing(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// A client process's lock: the real library, behind its driver.
pub struct DriverLock {
    /// Whether it answers `ask` ([`Driver::asks_servers`]).
    asks_servers: bool,
    /// The driver, if it is this client's own child (not a thread of a [`SharedDriver`]).
    child: Option<Child>,
    input: Box<dyn Write + Send>,
    output: BufReader<Box<dyn Read + Send>>,
}

impl DriverLock {
    /// Starts `driver` for the client of `lock` (or, for a driver of [`Driver::threads`],
    /// connects to the run's one at `ctx.spec.driver_at`, which runs this client as a thread
    /// on its own link) and notes the library's name and version on the timeline.
    pub fn start(driver: &Driver, lock: &LockSpec, ctx: &Ctx) -> anyhow::Result<DriverLock> {
        let args = (driver.args)(lock)?;
        let (mut lock, source) = if driver.threads {
            let at = ctx.spec.driver_at.as_deref();
            let at = at.ok_or_else(|| anyhow::anyhow!("no shared driver to connect to"))?;
            let stream = std::net::TcpStream::connect(at)?;
            let mut lock = DriverLock {
                asks_servers: driver.asks_servers,
                child: None,
                input: Box::new(stream.try_clone()?),
                output: BufReader::new(Box::new(stream)),
            };
            let link = serde_json::json!({ "host": args["host"], "port": args["port"] });
            writeln!(lock.input, "{link}")?;
            (lock, None)
        } else {
            let (mut cmd, source) = driver.command(driver.source)?;
            if let Some(clock) = &ctx.spec.clock {
                // The library reads the client's clock, as locksim's own client does.
                cmd.envs(crate::deploy::shim::preload(clock));
            }
            cmd.arg(args.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            // In the client's process group (a pause stops the library too), killed when the
            // client process ends, however it ends.
            crate::procs::die_with_spawner(&mut cmd);
            let mut child = cmd.spawn()?;
            let lock = DriverLock {
                asks_servers: driver.asks_servers,
                input: Box::new(child.stdin.take().expect("piped")),
                output: BufReader::new(Box::new(child.stdout.take().expect("piped"))),
                child: Some(child),
            };
            (lock, source)
        };
        let hello = lock.read()?;
        drop(source);
        ctx.note(format!(
            "client library: {} {} (the real library, {})",
            hello["library"].as_str().unwrap_or("?"),
            hello["version"].as_str().unwrap_or("?"),
            driver.path
        ));
        Ok(lock)
    }

    fn read(&mut self) -> anyhow::Result<serde_json::Value> {
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            let status = self.child.as_mut().map(Child::try_wait).transpose()?;
            anyhow::bail!("the library's driver ended ({status:?})");
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// One request and its answer: `Err` only when the driver itself failed.
    fn call(&mut self, op: &str) -> anyhow::Result<serde_json::Value> {
        writeln!(self.input, "{}", serde_json::json!({ "op": op }))?;
        self.input.flush()?;
        self.read()
    }

    /// An acquire's answer, with a fencing token where the library gives one (etcd's
    /// create revision, the ZooKeeper lock node's sequence number).
    pub fn acquire(&mut self) -> Acquired {
        match self.call("acquire") {
            Ok(a) if a["ok"] == true => Acquired::Granted(Grant {
                token: a["token"].as_u64(),
                valid_until: None,
                handle: why(&a["handle"]),
            }),
            Ok(a) if a["ok"] == false => Acquired::Failed(why(&a["why"])),
            Ok(a) => Acquired::Unknown(why(&a["unknown"])),
            Err(e) => Acquired::Unknown(format!("driver: {e:#}")),
        }
    }

    /// A release's or an extension's answer (`op`).
    pub fn outcome(&mut self, op: &str) -> Outcome {
        match self.call(op) {
            Ok(a) if a["ok"] == true => Outcome::Ok,
            Ok(a) if a["ok"] == false => Outcome::Failed(why(&a["why"])),
            Ok(a) => Outcome::Unknown(why(&a["unknown"])),
            Err(e) => Outcome::Unknown(format!("driver: {e:#}")),
        }
    }

    /// The library's own question to the servers (pottery's `locked()`), for `check =
    /// "ask_servers"`: `Ok` if it says held, `Err` with its reason if not; `None` for a
    /// driver without one (live mode refuses `ask_servers` with it).
    pub fn ask(&mut self) -> Option<Result<(), String>> {
        if !self.asks_servers {
            return None;
        }
        Some(match self.call("ask") {
            Ok(a) if a["held"] == true => Ok(()),
            Ok(a) if a["held"] == false => Err(why(&a["why"])),
            Ok(a) => Err(format!("the library raised {}", why(&a["unknown"]))),
            Err(e) => Err(format!("driver: {e:#}")),
        })
    }

    /// The library's own lost-lock signal, if it has raised it (its reason): what the
    /// workload's `check = "on_signal"` looks at, and a library's only word on a held lock.
    pub fn lost_signal(&mut self) -> Option<String> {
        match self.call("valid") {
            Ok(a) if a["held"] == false => Some(why(&a["why"])),
            _ => None,
        }
    }
}

fn why(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or("(no reason given)").to_owned()
}

impl Drop for DriverLock {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The one driver process of a [`Driver::threads`] library, which the parent starts before
/// the clients: a [`Proc`] of its own, outside every client's process group (a client's stop
/// at a workload point leaves its thread idle; nothing stops one thread alone), in the run's
/// process log and killed when dropped.
pub struct SharedDriver {
    _proc: Proc,
    /// Where the clients connect (`127.0.0.1:port`).
    pub addr: String,
}

impl SharedDriver {
    /// Starts `driver` on the servers of `lock` and waits, at most [`Driver::start_ms`], for
    /// its hello, which names its port.
    pub fn start(driver: &Driver, lock: &LockSpec) -> anyhow::Result<SharedDriver> {
        let (mut cmd, _source) = driver.command(driver.source)?;
        cmd.arg((driver.args)(lock)?.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut proc = Proc::spawn("the shared driver", &mut cmd)?;
        let output = proc.take_stdout().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(output).read_line(&mut line);
            let _ = tx.send(read.map(|_| line));
        });
        let wait = std::time::Duration::from_millis(driver.start_ms());
        let hello = match rx.recv_timeout(wait) {
            Ok(Ok(line)) => serde_json::from_str::<serde_json::Value>(&line)?,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => anyhow::bail!("the shared driver said nothing in {wait:?}"),
        };
        let port = hello["port"].as_u64();
        let port = port.ok_or_else(|| anyhow::anyhow!("the shared driver said {hello}"))?;
        Ok(SharedDriver {
            _proc: proc,
            addr: format!("127.0.0.1:{port}"),
        })
    }
}
