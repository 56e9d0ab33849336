//! Process hygiene: every server and client of a live run is a child in a process group of
//! its own, registered here, and killed on every way out of the run:
//! - a normal end, an error or a panic (which unwinds): each [`Proc`]'s `Drop` (only the
//!   run's own processes: several runs may share a process, as a validation's jobs do);
//! - SIGINT / SIGTERM / SIGHUP to locksim: a thread of `signal-hook`'s that waits for them
//!   kills every registered group, removes the runs' temporary directories
//!   ([`crate::rundir`]), then exits;
//! - locksim itself killed: each child has `PR_SET_PDEATHSIG = SIGKILL` (set in `pre_exec`),
//!   so the kernel kills it when the thread that spawned it dies. Children are spawned from
//!   the run's main thread only, which lives as long as the run.
//!
//! A signal stops or kills the whole group (`kill(-pgid, ...)`): a JVM's or a shell's own
//! children go with it.

use anyhow::Context;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{Mutex, Once};

thread_local! {
    /// Where this thread's run logs the pids it starts: per thread, since each run of a
    /// validation's live jobs spawns its children from its own thread.
    static PID_LOG: std::cell::RefCell<Option<std::path::PathBuf>> =
        const { std::cell::RefCell::new(None) };
}
/// Each running child's name, by pid (which is its process group's id): what a signal kills,
/// and what the proxies between servers ask to learn which server opened a connection
/// ([`crate::proxy::sender`]).
static RUNNING: Mutex<BTreeMap<i32, String>> = Mutex::new(BTreeMap::new());

fn running_now() -> std::sync::MutexGuard<'static, BTreeMap<i32, String>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running children, as (pid, name).
pub fn running() -> Vec<(i32, String)> {
    (running_now().iter())
        .map(|(pid, n)| (*pid, n.clone()))
        .collect()
}

/// Appends `pid name` of every process this thread starts from now on to `file`.
pub fn log_pids_to(file: std::path::PathBuf) {
    PID_LOG.with(|log| *log.borrow_mut() = Some(file));
}

/// Kills every registered group and waits (at most 10 s) until each group's leader is dead:
/// a process in the middle of a system call (a server's fsync on a loaded machine) dies only
/// when it returns, and may write into its directory until then.
fn kill_registered() {
    let killed: Vec<i32> = std::mem::take(&mut *running_now()).into_keys().collect();
    for pgid in &killed {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let deadline_ns = crate::clock::now_ns() + 10_000_000_000;
    while killed.iter().any(|pid| living(*pid)) && crate::clock::now_ns() < deadline_ns {
        crate::clock::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether process `pid` exists and is not a zombie (dead, not yet reaped).
pub fn living(pid: i32) -> bool {
    state(pid).is_some_and(|s| s != 'Z')
}

/// Process `pid`'s state in /proc (`T`: stopped, `Z`: a zombie, ...), if it exists. It
/// follows the command name, which is in parentheses and may hold spaces.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rfind(')')? + 1;
    stat[after_name..].trim_start().chars().next()
}

/// If a signal is being handled, waits for its thread to end the process (with 128 + the
/// signal, once every process is killed and every run directory removed): the run's own
/// end, an error from the clients it killed, must not exit first.
pub fn await_interrupt() {
    while crate::rundir::interrupted() {
        std::thread::park_timeout(std::time::Duration::from_secs(1));
    }
}

/// Starts (once) the thread that, at the first SIGINT, SIGTERM or SIGHUP, kills every live
/// process, removes the temporary run directories and exits with 128 + the signal.
pub fn install_signal_handlers() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .expect("signal handlers install");
        std::thread::spawn(move || {
            let signal = signals.forever().next().unwrap_or(SIGINT);
            crate::rundir::interrupt();
            kill_registered();
            crate::rundir::remove_registered();
            eprintln!(
                "locksim: interrupted: every live server and client was killed, its \
                 temporary directory removed"
            );
            std::process::exit(128 + signal);
        });
    });
}

/// A child in a process group of its own, killed (with its group) when dropped.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Spawns `cmd` in a new process group, to die with the spawning thread.
    pub fn spawn(name: &str, cmd: &mut Command) -> anyhow::Result<Proc> {
        cmd.process_group(0);
        die_with_spawner(cmd);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {name} ({:?})", cmd.get_program()))?;
        running_now().insert(child.id() as i32, name.into());
        if let Some(file) = PID_LOG.with(|log| log.borrow().clone()) {
            // For post-mortems and for tests that check nothing outlives a run.
            let line = format!("{} {name}\n", child.id());
            std::io::Write::write_all(&mut append_to(&file)?, line.as_bytes())?;
        }
        Ok(Proc { child })
    }

    /// The process (and group) id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to the whole group.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-self.pid(), signal) };
    }

    /// Whether the process is stopped (state `T` in /proc): a SIGSTOP has taken effect.
    pub fn is_stopped(&self) -> bool {
        state(self.pid()) == Some('T')
    }

    /// Whether it has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Whether it has exited with a failure (reaping it if so).
    pub fn failed(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(status)) if !status.success())
    }

    /// Kills the group and reaps the child.
    pub fn kill(mut self) {
        self.kill_in_place();
    }

    fn kill_in_place(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        running_now().remove(&self.pid());
    }

    /// The child's stdout, once.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The child's stdin, once.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Kill the group even if its leader exited: a JVM's children may remain.
        self.kill_in_place();
    }
}

/// `path` opened to append to (created if missing): a log.
pub fn append_to(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Makes `cmd`'s process die (SIGKILL) with the thread that spawns it, however that ends.
pub fn die_with_spawner(cmd: &mut Command) {
    let parent = std::process::id() as i32;
    // SAFETY: the closure only makes async-signal-safe calls (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// In a client process: die with the parent (the client is a child of locksim).
pub fn die_with_parent() {
    // SAFETY: prctl with PR_SET_PDEATHSIG has no memory-safety preconditions.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
}

/// Stops this process and the rest of its process group (SIGSTOP to the group: a real
/// library's driver and what it runs, e.g. `etcdctl lock` keeping a lease alive, stop with
/// the client, as at a pause the parent signals): the parent resumes them with SIGCONT.
pub fn stop_self() {
    // SAFETY: kill has no memory-safety preconditions; pid 0 is the caller's own group.
    unsafe { libc::kill(0, libc::SIGSTOP) };
}

/// How many of the ports [`free_port`] handed out last it never hands out again, each
/// claimed machine-wide meanwhile: far more than the runs of one process hold at once (a run
/// of five etcd members and five clients takes about 60), far fewer than the ~22,000 ports
/// below Linux's ephemeral range ([`port_range`]). (A set of every port ever handed out ran
/// dry after some 450 live runs of one `validate --full`.)
const RECENT_PORTS: usize = 2_048;

/// The ports handed out most recently, oldest first, each with its claim (if it could be
/// made); a port leaves, and its claim is released, once [`RECENT_PORTS`] newer ones came.
/// `next` is where the search for the next port starts.
struct Given {
    order: std::collections::VecDeque<(u16, Option<std::os::unix::net::UnixListener>)>,
    next: Option<u16>,
}

static GIVEN: std::sync::Mutex<Given> = std::sync::Mutex::new(Given {
    order: std::collections::VecDeque::new(),
    next: None,
});

impl Given {
    fn contains(&self, port: u16) -> bool {
        self.order.iter().any(|(p, _)| *p == port)
    }

    /// Adds `port` with its claim; the oldest leaves (its claim released) past the window.
    fn push(&mut self, port: u16, claim: Option<std::os::unix::net::UnixListener>) {
        self.order.push_back((port, claim));
        if self.order.len() > RECENT_PORTS {
            self.order.pop_front();
        }
    }
}

/// The lowest port [`free_port`] hands out.
const FIRST_PORT: u16 = 10_000;

/// The ports [`free_port`] draws from: those from [`FIRST_PORT`] up to the kernel's ephemeral
/// range (`net.ipv4.ip_local_port_range`), which `connect()` never picks a local port from,
/// so no outgoing connection can take a port between its hand-out and the server's bind
/// (`bind(0)` draws from the ephemeral range itself: a validation run once failed with
/// "Address already in use" so). `None` where the range leaves too few below it: then
/// `bind(0)`. Read once per process.
fn port_range() -> Option<std::ops::Range<u16>> {
    static RANGE: std::sync::OnceLock<Option<std::ops::Range<u16>>> = std::sync::OnceLock::new();
    let read = || {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
        let low: u16 = text.split_whitespace().next()?.parse().ok()?;
        let enough = FIRST_PORT as usize + 4 * RECENT_PORTS;
        (low as usize >= enough).then_some(FIRST_PORT..low)
    };
    RANGE.get_or_init(read).clone()
}

/// A free TCP port on 127.0.0.1 (bound, read, released: the caller binds it next), below the
/// ephemeral range ([`port_range`]), none of the last [`RECENT_PORTS`] handed out in this
/// process, nor one another locksim process on this machine holds ([`claim_port`]): runs in
/// parallel (the tests, a validation's jobs) would otherwise draw the same released port and
/// one server's bind would fail.
pub fn free_port() -> anyhow::Result<u16> {
    let Some(range) = port_range() else {
        return free_ephemeral_port();
    };
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    let span = range.end - range.start;
    // Processes start at different places (their claims keep them apart anyway).
    let mut next = given
        .next
        .unwrap_or(range.start + (std::process::id() % u32::from(span)) as u16);
    for _ in 0..span {
        let port = next;
        next = if next + 1 >= range.end {
            range.start
        } else {
            next + 1
        };
        if given.contains(port) {
            continue;
        }
        // Claimed first, then tried: a port another locksim process claimed is never bound
        // here, even for a moment (a probe's bind of a port just handed out would make that
        // process's own bind fail: "Address already in use").
        let Claim::Held(claim) = claim_port(port) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port, claim);
            given.next = Some(next);
            return Ok(port);
        }
    }
    anyhow::bail!("no free loopback port in {range:?}")
}

/// [`free_port`] where there is no room below the ephemeral range: `bind(0)`'s port.
fn free_ephemeral_port() -> anyhow::Result<u16> {
    for _ in 0..100 {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("no free loopback port")?;
        let port = listener.local_addr()?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
        if given.contains(port) {
            continue;
        }
        match claim_port(port) {
            Claim::Held(claim) => {
                given.push(port, claim);
                return Ok(port);
            }
            Claim::Taken => {}
        }
    }
    anyhow::bail!("no fresh free loopback port in 100 tries")
}

/// A port's machine-wide claim: held by this process (the listener, or `None` where no
/// claim could be made), or taken by another.
enum Claim {
    Held(Option<std::os::unix::net::UnixListener>),
    Taken,
}

/// Claims `port` machine-wide: binds the abstract Unix socket `locksim-port-PORT`, held
/// while the port is among the recent ones (the kernel releases it when the process ends,
/// however it ends, and an abstract name leaves no file behind).
fn claim_port(port: u16) -> Claim {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let name = format!("locksim-port-{port}");
    let Ok(addr) = SocketAddr::from_abstract_name(name.as_bytes()) else {
        return Claim::Held(None);
    };
    match UnixListener::bind_addr(&addr) {
        Ok(listener) => Claim::Held(Some(listener)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Claim::Taken,
        Err(_) => Claim::Held(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child's side of the test below: claims the port in its environment and exits 10
    /// if it got it, 11 if another process holds it.
    const CHILD_PORT: &str = "LOCKSIM_TEST_CLAIM_PORT";

    #[test]
    fn a_port_one_process_handed_out_is_refused_to_another() {
        if let Ok(port) = std::env::var(CHILD_PORT) {
            let claimed = claim_port(port.parse().unwrap());
            std::process::exit(match claimed {
                Claim::Held(_) => 10,
                Claim::Taken => 11,
            });
        }
        let claims = |port: u16| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "procs::tests::a_port_one_process_handed_out_is_refused_to_another",
                ])
                .env(CHILD_PORT, port.to_string())
                .status()
                .unwrap()
                .code()
        };
        let given = free_port().unwrap();
        assert_eq!(
            claims(given),
            Some(11),
            "port {given} is held by this process"
        );
        // A port no locksim process hands out (below FIRST_PORT) is the child's to claim: a
        // port beside `given` may be another test process's (the live tests run beside).
        let other = FIRST_PORT - 1;
        assert!(!GIVEN.lock().unwrap().contains(other));
        assert_eq!(
            claims(other),
            Some(10),
            "port {other} is held by no process"
        );
    }

    /// More ports than the range has to give, one after another: none of the last
    /// [`RECENT_PORTS`] again, never "no free loopback port", and none from the ephemeral
    /// range, whose ports outgoing connections take.
    #[test]
    fn free_port_hands_out_ports_past_the_whole_range() {
        let range = port_range();
        let mut recent = std::collections::VecDeque::new();
        for _ in 0..40_000 {
            let port = free_port().expect("a port");
            if let Some(range) = &range {
                assert!(range.contains(&port), "port {port} outside {range:?}");
            }
            assert!(
                !recent.contains(&port),
                "port {port} handed out again within {RECENT_PORTS}"
            );
            recent.push_back(port);
            if recent.len() > RECENT_PORTS {
                recent.pop_front();
            }
        }
        assert!(GIVEN.lock().unwrap().order.len() <= RECENT_PORTS);
    }
}
