//! Real servers on loopback: each one a child process in a group of its own with its own
//! data directory and log, started, waited for (readiness with a timeout; on failure the
//! log's tail), signalled (SIGSTOP/SIGCONT, SIGKILL) and restarted from its data directory.

use crate::clock;
use crate::procs::Proc;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a server may take to come up before the run fails (exit 3).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A missing binary: the error names the Debian package (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("live mode needs `{what}`, which is not installed: apt-get install -y {package}")]
pub struct MissingBinary {
    /// The binary or file looked for.
    pub what: String,
    /// The Debian package that installs it.
    pub package: &'static str,
}

/// A server that did not come up in time (exit 3), with the tail of its log.
#[derive(Debug, thiserror::Error)]
#[error("server {name} did not come up: {why}\n--- last lines of its log ---\n{log_tail}")]
pub struct NotReady {
    /// The server's name.
    pub name: String,
    /// Why (timeout, or it exited).
    pub why: String,
    /// The last lines of its log.
    pub log_tail: String,
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// Finds `program` on PATH (or as an absolute path).
pub fn find_binary(program: &str, package: &'static str) -> Result<PathBuf, MissingBinary> {
    let missing = || MissingBinary {
        what: program.into(),
        package,
    };
    if program.starts_with('/') {
        return Path::new(program)
            .exists()
            .then(|| program.into())
            .ok_or_else(missing);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(missing)
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Answers whether a server is ready to serve (one quick probe; false on any error).
pub type Probe = Box<dyn Fn() -> bool + Send + Sync>;

/// Sets what a server's config file cannot (a Sentinel's periods, by `SENTINEL DEBUG`): one
/// quick try, true once done.
pub type Configure = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// How long a restarted server is given to take its [`Configure`].
const CONFIGURE_TIMEOUT: Duration = Duration::from_secs(10);

/// One server: how to start it, and its process while it runs.
pub struct Server {
    /// Its node name in the run (`redis`, `e1`, `zk2`, ...).
    pub name: String,
    /// Its data directory.
    pub dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    program: PathBuf,
    args: Vec<String>,
    probe: Probe,
    proc: Option<Proc>,
    /// Started only once every other server is ready (Sentinels, after the nodes they
    /// watch are in sync).
    pub after_others: bool,
    /// How long after its wave's first server it is started, in ms: a Sentinel's timers
    /// start with it, and a real deployment's Sentinels were not started together.
    pub start_after_ms: u64,
    /// Applied after every start: the first start is ready only once it took it
    /// ([`wait_all_ready`]); after a restart a thread of its own tries it (a Sentinel
    /// forgets its periods when it restarts).
    pub configure: Option<Configure>,
    /// Whether it was started before (a start is then a restart).
    started: bool,
    /// Whether this start took its [`Configure`] (asked once, not at every readiness probe).
    configured: bool,
    /// Set in its environment at every start (a moved clock's shim, `deploy::shim`).
    pub env: Vec<(String, String)>,
    /// What a crash leaves of its append-only file, if the shim logs its syncs
    /// (`deploy::shim`): what was written after the last sync is lost, as in a power loss.
    pub power_loss: Option<crate::deploy::shim::PowerLoss>,
}

impl Server {
    /// A server to run `program args` in `dir` (created), logging to `dir/NAME.log`.
    pub fn new(
        name: &str,
        dir: PathBuf,
        program: PathBuf,
        args: Vec<String>,
        probe: Probe,
    ) -> anyhow::Result<Server> {
        std::fs::create_dir_all(&dir)?;
        Ok(Server {
            name: name.into(),
            log: dir.join(format!("{name}.log")),
            dir,
            program,
            args,
            probe,
            proc: None,
            after_others: false,
            start_after_ms: 0,
            configure: None,
            started: false,
            configured: false,
            env: vec![],
            power_loss: None,
        })
    }

    /// Starts the process (without waiting for it to be ready).
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        assert!(self.proc.is_none(), "{} is already running", self.name);
        if let Some(power_loss) = &mut self.power_loss {
            power_loss.starting();
        }
        let log = crate::procs::append_to(&self.log)?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().cloned())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.proc = Some(Proc::spawn(&self.name, &mut cmd)?);
        let restarted = std::mem::replace(&mut self.started, true);
        self.configured = false;
        if let Some(configure) = self.configure.clone().filter(|_| restarted) {
            std::thread::spawn(move || {
                let start_ns = clock::now_ns();
                while !configure() && clock::since(start_ns) < CONFIGURE_TIMEOUT {
                    clock::sleep(Duration::from_millis(20));
                }
            });
        }
        Ok(())
    }

    /// Whether it took its [`Configure`], if it has one (tried until it has), and answers its
    /// probe.
    fn ready(&mut self) -> bool {
        if !self.configured {
            self.configured = self.configure.as_ref().is_none_or(|configure| configure());
        }
        self.configured && (self.probe)()
    }

    /// Whether its process has exited (true if it was never started).
    fn exited(&mut self) -> bool {
        self.proc.as_mut().is_none_or(|p| p.exited())
    }

    /// The error for this server, with the tail of its log.
    fn not_ready(&self, why: String) -> NotReady {
        NotReady {
            name: self.name.clone(),
            why,
            log_tail: tail(&self.log, 20),
        }
    }

    /// The running process, if any.
    pub fn proc(&self) -> Option<&Proc> {
        self.proc.as_ref()
    }

    /// SIGKILL to its group (the run's end); its data directory stays. Whether it was
    /// running.
    pub fn kill(&mut self) -> bool {
        self.proc.take().map(Proc::kill).is_some()
    }

    /// A crash: SIGKILL to its group; its data directory stays for a restart, its
    /// append-only file cut back to what it last synced if the shim logs its syncs
    /// ([`Server::power_loss`]). Whether it was running, and what the power loss cut, in words.
    pub fn crash(&mut self) -> (bool, Vec<String>) {
        let killed = self.kill();
        let cut = match (&self.power_loss, killed) {
            (Some(power_loss), true) => {
                (power_loss.lose_unsynced()).unwrap_or_else(|e| panic!("{}: {e}", self.name))
            }
            _ => vec![],
        };
        let said = cut.iter().map(|(path, was, now)| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            format!("{name} cut from {was} to {now} bytes, its last sync")
        });
        (killed, said.collect())
    }

    /// Whether it is running (not crashed).
    pub fn running(&self) -> bool {
        self.proc.is_some()
    }
}

/// Waits until every server's probe answers, together: servers that find each other (Sentinels)
/// come up only when all run, so a server of the group that exits fails the wait at once,
/// naming that server, instead of its peers timing out. Fails after [`READY_TIMEOUT`] from the
/// call, naming the first server not ready.
pub fn wait_all_ready(servers: &mut [&mut Server]) -> Result<(), NotReady> {
    let start_ns = clock::now_ns();
    let mut ready = vec![false; servers.len()];
    loop {
        for (server, ready) in servers.iter_mut().zip(&mut ready) {
            *ready = *ready || server.ready();
            if !*ready && server.exited() {
                return Err(server.not_ready("it exited".into()));
            }
        }
        if let Some(i) = ready.iter().position(|r| !r) {
            if clock::since(start_ns) > READY_TIMEOUT {
                let why = format!("not ready within {} s", READY_TIMEOUT.as_secs());
                return Err(servers[i].not_ready(why));
            }
        } else {
            return Ok(());
        }
        clock::sleep(Duration::from_millis(50));
    }
}

/// Runs `program args` and returns its stdout (for `--version`), or an empty string.
pub fn output_of(program: &Path, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
        })
        .unwrap_or_default()
}

/// The first `x.y.z` in `text`.
pub fn version_in(text: &str) -> String {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| w.split('.').count() == 3 && w.split('.').all(|p| !p.is_empty()))
        .unwrap_or("unknown")
        .to_owned()
}
