//! locksim's shim: a real process's clocks and disk as the simulator has a node's, moved by
//! the nemesis while the process runs (`clock_jump`, `clock_drift`, a node's `[clocks]`
//! drift and offset, `fsync_stall`; `locksim_sim::clock`), and a crash that loses what was
//! not synced.
//!
//! A server runs with the shim preloaded (`live/shim/shim.c`, built into the binary by
//! `live/build.rs`, written into the run's directory) when the run moves a clock, stalls
//! fsyncs or crashes a node. It answers the process's `clock_gettime`, `gettimeofday` and
//! `time` from the machine's clocks plus what the server's shim file says ([`NodeShim`],
//! rewritten by the nemesis at each fault): the monotonic clock runs at
//! `1 + drift_ppm·1e-6` times true speed and never jumps; the wall clock is stepped by a
//! jump, as in the model. redis-server expires keys by its wall clock (`mstime()`), so a step
//! forward ends a lease early there as in the simulator. It holds `fsync` and `fdatasync`
//! while the file says, and logs each one that completes, from which [`PowerLoss`] cuts a
//! Redis server's append-only file back to its last sync at a crash. The machine's clocks
//! and files do not move: the other processes, and the run's own timestamps, keep real time.
//!
//! What it reaches ([`why_not_movable`], [`why_not_stalled`]): Redis servers, data nodes and
//! Sentinels (a Sentinel's TILT mode is the model's too); a ZooKeeper server's clocks (the
//! JVM reads them through libc, and the shim turns its timed waits, condition-variable
//! deadlines and epoll timeouts, into the machine's), not its fsyncs (ZooKeeper preallocates
//! its log files); not an etcd member (Go reads the clock through the vDSO and calls fsync by
//! the system call, without libc). locksim's own client needs no shim: it reads its clock
//! from its file ([`ClockView`]) through its node's context, and keeps stamping its events
//! on the machine's monotonic clock; a real library's process (`--library`) runs with the
//! shim preloaded onto its client's file (not etcdctl: Go).

use crate::clock;
use locksim_scenarios::Prepared;
use locksim_sim::Fault;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The shim, as built from `live/shim/shim.c`.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/locksim-shim.so"));

/// A moved clock's state in its file: the layout `shim.c` reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct State {
    wall_offset_ns: i64,
    mono_offset_ns: i64,
    /// On the machine's monotonic clock.
    anchor_ns: i64,
    drift_ppm: i64,
    /// Fsyncs wait until then, on the machine's monotonic clock (0: none held).
    fsync_held_until_ns: i64,
}

impl State {
    /// Its words after the sequence number, in the file's order (`struct shared` in shim.c).
    fn words(&self) -> [i64; 5] {
        [
            self.wall_offset_ns,
            self.mono_offset_ns,
            self.anchor_ns,
            self.drift_ppm,
            self.fsync_held_until_ns,
        ]
    }

    fn from_words(w: [i64; 5]) -> State {
        let [wall_offset_ns, mono_offset_ns, anchor_ns, drift_ppm, fsync_held_until_ns] = w;
        State {
            wall_offset_ns,
            mono_offset_ns,
            anchor_ns,
            drift_ppm,
            fsync_held_until_ns,
        }
    }

    /// What the drift has added since the anchor, at `now_ns` (the shim's own formula).
    fn drifted_ns(&self, now_ns: i64) -> i64 {
        ((now_ns - self.anchor_ns) as i128 * self.drift_ppm as i128 / 1_000_000) as i64
    }
}

/// One process's shim state: its moved clock and, for a server, its held fsyncs.
pub struct NodeShim {
    file: File,
    path: PathBuf,
    state: State,
    /// The file's sequence number (odd while it is written).
    seq: i64,
}

impl NodeShim {
    /// A clock for a process, in `path`, with a wall offset and drift from now on.
    pub fn create(path: &Path, offset_ms: i64, drift_ppm: i64) -> std::io::Result<NodeShim> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let mut clock = NodeShim {
            file,
            path: path.to_owned(),
            state: State::default(),
            seq: 0,
        };
        clock.write(State {
            wall_offset_ns: offset_ms * 1_000_000,
            anchor_ns: clock::now_ns() as i64,
            drift_ppm,
            ..State::default()
        })?;
        Ok(clock)
    }

    /// Its file, which the process whose clock it is reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The environment that preloads the shim (installed beside this file) onto this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        preload(&self.path)
    }

    /// Steps the wall clock by `delta_ms` (the monotonic clock is untouched).
    pub fn jump(&mut self, delta_ms: i64) -> std::io::Result<()> {
        let mut state = self.state;
        state.wall_offset_ns += delta_ms * 1_000_000;
        self.write(state)
    }

    /// Changes the rate to `drift_ppm` from now on; both readings stay continuous.
    pub fn drift(&mut self, drift_ppm: i64) -> std::io::Result<()> {
        let now_ns = clock::now_ns() as i64;
        let (old, drifted) = (self.state, self.state.drifted_ns(now_ns));
        self.write(State {
            wall_offset_ns: old.wall_offset_ns + drifted,
            mono_offset_ns: old.mono_offset_ns + drifted,
            anchor_ns: now_ns,
            drift_ppm,
            ..old
        })
    }

    /// Holds the process's fsyncs until `until_ns` on the machine's monotonic clock (a
    /// later hold already on wins; 0 lets them all go).
    pub fn hold_fsyncs(&mut self, until_ns: u64) -> std::io::Result<()> {
        let until_ns = match until_ns {
            0 => 0,
            _ => (until_ns as i64).max(self.state.fsync_held_until_ns),
        };
        self.write(State {
            fsync_held_until_ns: until_ns,
            ..self.state
        })
    }

    /// Writes `state` under the sequence lock the shim reads by.
    fn write(&mut self, state: State) -> std::io::Result<()> {
        let body: Vec<u8> = state.words().iter().flat_map(|w| w.to_le_bytes()).collect();
        self.file.write_all_at(&(self.seq + 1).to_le_bytes(), 0)?;
        self.file.write_all_at(&body, 8)?;
        self.seq += 2;
        self.file.write_all_at(&self.seq.to_le_bytes(), 0)?;
        self.state = state;
        Ok(())
    }
}

/// A moved clock as its own process reads it without the shim: locksim's own client, whose
/// node code reads its clocks through its context (`client::env`), never libc's, and whose
/// events keep the machine's time.
pub struct ClockView {
    file: File,
}

impl ClockView {
    /// The clock in `path` (the parent keeps writing it).
    pub fn open(path: &Path) -> std::io::Result<ClockView> {
        Ok(ClockView {
            file: File::open(path)?,
        })
    }

    /// The state now, read under the sequence lock as the shim reads it.
    fn state(&self) -> State {
        let mut buf = [0u8; 48];
        loop {
            if self.file.read_exact_at(&mut buf, 0).is_err() {
                return State::default();
            }
            let word = |i: usize| i64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap());
            let mut seq = [0u8; 8];
            let again = self
                .file
                .read_exact_at(&mut seq, 0)
                .map(|_| i64::from_le_bytes(seq));
            if word(0) % 2 == 0 && again.is_ok_and(|s| s == word(0)) {
                return State::from_words(std::array::from_fn(|i| word(i + 1)));
            }
        }
    }

    /// The moved monotonic reading at the machine's monotonic `real_ns`, in ns.
    pub fn mono_ns(&self, real_ns: u64) -> i64 {
        let state = self.state();
        real_ns as i64 + state.mono_offset_ns + state.drifted_ns(real_ns as i64)
    }

    /// The moved wall clock now, in ms since the epoch.
    pub fn wall_ms(&self) -> i64 {
        let (state, now_ns) = (self.state(), clock::now_ns() as i64);
        let moved_ns = state.wall_offset_ns + state.drifted_ns(now_ns);
        clock::wall_ms() + moved_ns.div_euclid(1_000_000)
    }

    /// The rate error now, in ppm.
    pub fn drift_ppm(&self) -> i64 {
        self.state().drift_ppm
    }
}

/// What a power loss leaves of a Redis server's append-only file: its increments
/// (`appendonlydir/*.incr.aof`, Redis 7's multi-part AOF: the only files a running Redis
/// appends to) cut back to their size at their last sync, as the simulator's crash keeps
/// only what was synced. Synced sizes come from the shim's log (`LOCKSIM_SYNCED`); a file
/// not synced since the process started keeps its size at the start (what an earlier
/// incarnation left), and one created since and never synced is emptied. Other files
/// (the base file and the manifest, written whole, synced and renamed into place) keep what
/// the kernel has.
pub struct PowerLoss {
    log: PathBuf,
    aof_dir: PathBuf,
    started_ns: u64,
    at_start: BTreeMap<PathBuf, u64>,
}

impl PowerLoss {
    /// For the server whose data directory is `data_dir`, its syncs logged in `log`.
    pub fn new(log: PathBuf, data_dir: &Path) -> PowerLoss {
        PowerLoss {
            log,
            aof_dir: data_dir.join("appendonlydir"),
            started_ns: 0,
            at_start: BTreeMap::new(),
        }
    }

    /// The increments and their sizes now, by their canonical paths (as the shim logs them).
    fn increments(&self) -> BTreeMap<PathBuf, u64> {
        let entries = std::fs::read_dir(&self.aof_dir)
            .into_iter()
            .flatten()
            .flatten();
        let increment = |p: &PathBuf| p.to_string_lossy().ends_with(".incr.aof");
        entries
            .filter_map(|e| {
                let path = std::fs::canonicalize(e.path()).ok()?;
                increment(&path).then_some((path, e.metadata().ok()?.len()))
            })
            .collect()
    }

    /// Before each start of the process: what is on disk now is what it starts from.
    pub fn starting(&mut self) {
        self.started_ns = clock::now_ns();
        self.at_start = self.increments();
    }

    /// After the process was killed: each increment cut back to what was synced; the files
    /// cut, each with its size before and after.
    pub fn lose_unsynced(&self) -> std::io::Result<Vec<(PathBuf, u64, u64)>> {
        let synced = self.synced_since_start()?;
        let mut cut = vec![];
        for (path, len) in self.increments() {
            let kept = (synced.get(&path))
                .or(self.at_start.get(&path))
                .copied()
                .unwrap_or(0);
            if len > kept {
                let file = File::options().write(true).open(&path)?;
                file.set_len(kept)?;
                file.sync_all()?;
                cut.push((path, len, kept));
            }
        }
        Ok(cut)
    }

    /// The log of its syncs so far, every incarnation's ("SIZE NS PATH" lines): empty
    /// before the first.
    fn synced_log(&self) -> std::io::Result<String> {
        match std::fs::read_to_string(&self.log) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            read => read,
        }
    }

    /// How many syncs of regular files the server's process completed, over its restarts
    /// (the log outlives a crash); None if the log cannot be read.
    pub fn syncs(&self) -> Option<u64> {
        Some(self.synced_log().ok()?.lines().count() as u64)
    }

    /// Each file's size at its last sync since the process started ("SIZE NS PATH" lines).
    fn synced_since_start(&self) -> std::io::Result<BTreeMap<PathBuf, u64>> {
        let text = self.synced_log()?;
        let mut synced = BTreeMap::new();
        for line in text.lines() {
            // The path is the rest of the line, spaces and all.
            let mut fields = line.splitn(3, ' ');
            let (Some(size), Some(at_ns), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let since_start = at_ns.parse::<u64>().is_ok_and(|ns| ns >= self.started_ns);
            if let (true, Ok(size)) = (since_start, size.parse()) {
                synced.insert(PathBuf::from(path), size);
            }
        }
        Ok(synced)
    }
}

/// Writes the shim into `dir`, beside the clock files [`preload`] points at.
pub fn install_shim(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join(SHIM_FILE), SHIM)
}

/// The shim's file in a run's directory ([`install_shim`]), beside its nodes' clock files.
const SHIM_FILE: &str = "locksim-shim.so";

/// The environment that preloads the shim onto the clock in `clock_file`: a server's
/// ([`NodeShim::env`]), or a client's for the real library's process it starts
/// (`--library`), so that the library reads the client's clock. The shim lies beside the
/// clock files ([`install_shim`]).
pub fn preload(clock_file: &Path) -> Vec<(String, String)> {
    let dir = clock_file.parent().unwrap_or(Path::new("."));
    vec![
        (
            "LD_PRELOAD".into(),
            dir.join(SHIM_FILE).display().to_string(),
        ),
        ("LOCKSIM_SHIM".into(), clock_file.display().to_string()),
    ]
}

/// Whether the run needs the shim: a clock moves (by a fault or `[clocks]`), fsyncs stall,
/// or a node crashes (a crash of a Redis server loses what was not synced).
fn shim_needed(prepared: &Prepared, faults: &[Fault]) -> bool {
    let needs = |f: &Fault| {
        matches!(
            f,
            Fault::ClockJump(_) | Fault::ClockDrift(_) | Fault::Crash(_) | Fault::FsyncStall(_)
        )
    };
    faults.iter().any(needs) || !prepared.scenario.clocks.nodes.is_empty()
}

/// Whether `node` is neither one of the servers nor a role (`@primary`, `@leader`).
fn not_a_server(prepared: &Prepared, node: &str) -> bool {
    let server = prepared.deployment.servers().iter().any(|n| n == node);
    !server && !locksim_sim::nemesis::is_role(node)
}

/// Why live mode cannot move `node`'s clock (a node or a role), if it cannot; `library`:
/// the clients run a real library (`--library`).
pub fn why_not_movable(prepared: &Prepared, node: &str, library: bool) -> Option<String> {
    let s = &prepared.scenario;
    let client = s.workload.client_names().iter().any(|c| c == node)
        || node == locksim_sim::nemesis::ROLE_HOLDER;
    if client {
        let (_, driver) = crate::client::driver::of_scenario(s);
        return match driver.filter(|_| library) {
            None => None,
            Some(d) => d.why_clock_fixed().map(|why| {
                format!(
                    "`{node}` is a client running {} (--library): {why}",
                    d.profile
                )
            }),
        };
    }
    if not_a_server(prepared, node) {
        return Some(format!(
            "`{node}` is neither a server nor a client: live mode moves real Redis servers' \
             and locksim's own clients' clocks"
        ));
    }
    let protocol = s.protocol.name.as_str();
    match protocol {
        _ if is_redis(prepared) => None,
        "etcd" => Some(
            "an etcd member is a Go program, which reads the clock through the vDSO without \
             libc, where live mode's shim cannot reach"
                .into(),
        ),
        "zookeeper" => None,
        _ => Some(format!(
            "live mode moves real Redis servers' clocks only, not {protocol}'s"
        )),
    }
}

/// Whether the scenario's servers are redis-servers (and Sentinels).
fn is_redis(prepared: &Prepared) -> bool {
    let protocol = prepared.scenario.protocol.name.as_str();
    matches!(protocol, "single-redis" | "redlock" | "replicated-redis")
}

/// Why live mode cannot hold `node`'s fsyncs (a node or a role), if it cannot: it does for
/// Redis servers, whose fsyncs go through libc, and a crash there loses what they held.
pub fn why_not_stalled(prepared: &Prepared, node: &str) -> Option<String> {
    let protocol = prepared.scenario.protocol.name.as_str();
    if not_a_server(prepared, node) {
        return Some(format!(
            "`{node}` is not a server: live mode holds real Redis servers' fsyncs only"
        ));
    }
    match protocol {
        _ if is_redis(prepared) => None,
        "etcd" => Some(
            "an etcd member is a Go program, which calls fsync by the system call itself, \
             where live mode's shim cannot reach"
                .into(),
        ),
        _ => Some(format!(
            "live mode holds real Redis servers' fsyncs only, not {protocol}'s (a crash must \
             then lose what was held, which live mode does by cutting append-only files back \
             to their last synced size, and ZooKeeper preallocates its log files)"
        )),
    }
}

/// Gives every server the shim reaches, and every client whose clock it moves (locksim's
/// own, or with `library` a real library's where its driver allows), a shim file of its own
/// in `dir` if the run needs one
/// ([`shim_needed`]; a role such as `@primary` or `@holder` may name any of them), with its
/// `[clocks]` offset (its drift is set as the run starts, [`start_drifts`]); each server
/// starts with the shim preloaded (a Redis server in every run, logging its syncs: for
/// [`PowerLoss`] and the fsync count); a client of locksim's own reads its clock from its
/// file, a real library's process runs with the shim preloaded onto it.
pub fn attach(
    prepared: &Prepared,
    faults: &[Fault],
    deployment: &mut super::Deployment,
    dir: &Path,
    library: bool,
) -> anyhow::Result<BTreeMap<String, NodeShim>> {
    let mut shims = BTreeMap::new();
    let needed = shim_needed(prepared, faults);
    // A Redis server runs under the shim in every run: its log of syncs is the fsync count
    // a redis-server does not keep (`Deployment::fsyncs`); on a clock nothing moves it
    // passes every call through.
    let redis = is_redis(prepared);
    if !needed && !redis {
        return Ok(shims);
    }
    install_shim(dir)?;
    // The drift starts with the run (`start_drifts`), as a simulated node's at 0: from
    // here, the servers' and the libraries' start-up would put their clocks off by it.
    let create = |name: &str| {
        let offset_ms = prepared
            .scenario
            .clocks
            .nodes
            .get(name)
            .map_or(0, |c| c.offset_ms);
        NodeShim::create(&dir.join(format!("{name}.shim")), offset_ms, 0)
    };
    for server in &mut deployment.servers {
        if why_not_movable(prepared, &server.name, false).is_none() {
            let clock = create(&server.name)?;
            server.env = clock.env();
            if redis {
                let log = dir.join(format!("{}.synced", server.name));
                server
                    .env
                    .push(("LOCKSIM_SYNCED".into(), log.display().to_string()));
                server.power_loss = Some(PowerLoss::new(log, &server.dir));
            }
            shims.insert(server.name.clone(), clock);
        }
    }
    if !needed {
        return Ok(shims);
    }
    for client in prepared.scenario.workload.client_names() {
        if why_not_movable(prepared, &client, library).is_none() {
            shims.insert(client.clone(), create(&client)?);
        }
    }
    Ok(shims)
}

/// Sets each node's `[clocks]` drift, from now on: as the run starts, with the faults due at
/// 0 (a `clock_drift` at 0 acts after it, as in the simulator, where the `[clocks]` drift is
/// a node's rate from its start).
pub fn start_drifts(
    prepared: &Prepared,
    shims: &mut BTreeMap<String, NodeShim>,
) -> std::io::Result<()> {
    for (node, set) in &prepared.scenario.clocks.nodes {
        match shims.get_mut(node) {
            Some(shim) if set.drift_ppm != 0 => shim.drift(set.drift_ppm)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;
    use std::process::Command;

    /// `date`'s reading, in ms since the epoch, of a process started with `clock`'s shim.
    fn date_ms(clock: &NodeShim) -> i64 {
        let out = Command::new("date")
            .arg("+%s%3N")
            .envs(clock.env())
            .output()
            .expect("date runs");
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("date said {text:?}"))
    }

    /// A process under the shim reads the wall clock the file says: the machine's, stepped by
    /// each jump, running faster by the drift; bounded by the machine's readings taken
    /// before and after it ran, so the test holds however slow the machine is.
    #[test]
    fn a_process_under_the_shim_reads_the_moved_wall_clock() {
        let dir = crate::rundir::RunDir::create().unwrap();
        install_shim(dir.path()).unwrap();
        let mut clock = NodeShim::create(&dir.path().join("n.shim"), 0, 0).unwrap();
        let within = |clock: &NodeShim, shift_ms: (i64, i64)| {
            let before = clock::wall_ms();
            let read = date_ms(clock);
            let after = clock::wall_ms();
            let (lo, hi) = (before + shift_ms.0, after + shift_ms.1 + 1);
            assert!(
                (lo..=hi).contains(&read),
                "expected a reading in {lo}..={hi} ms, observed {read} ({shift_ms:?})"
            );
        };
        within(&clock, (0, 0));
        clock.jump(5_000).unwrap();
        within(&clock, (5_000, 5_000));
        clock.jump(-7_000).unwrap();
        within(&clock, (-2_000, -2_000));
        // 10% fast from now: 100 ms more after at least 1 s (at most what has passed since).
        let start_ns = clock::now_ns();
        clock.drift(100_000).unwrap();
        clock::sleep(std::time::Duration::from_secs(1));
        let before = clock::wall_ms();
        let read = date_ms(&clock);
        let after = clock::wall_ms();
        let gained_max_ms = clock::since(start_ns).as_millis() as i64 / 10 + 1;
        assert!(
            read >= before - 2_000 + 100 && read <= after - 2_000 + gained_max_ms,
            "expected a reading {}..={} ms, observed {read}",
            before - 2_000 + 100,
            after - 2_000 + gained_max_ms
        );
    }

    /// A drifting process's waits last its own clock's time, relative or absolute: Python's
    /// sleep (clock_nanosleep to a deadline), an event's and a lock's timeout (sem_clockwait
    /// to a deadline), select, poll and epoll (relative), each 1.5 s on a clock 40% fast,
    /// end when that clock has moved 1.5 s (1.07 s of the machine's), not 2.1 s as an
    /// untranslated wait would; bounded below by the rounding up, and above with a quarter
    /// second of real lateness to spare each.
    #[test]
    fn a_drifting_process_waits_by_its_own_clock() {
        let dir = crate::rundir::RunDir::create().unwrap();
        install_shim(dir.path()).unwrap();
        let clock = NodeShim::create(&dir.path().join("n.shim"), 0, 400_000).unwrap();
        let program = "import select, threading, time\n\
            def took(wait):\n\
            \x20   t0 = time.monotonic()\n\
            \x20   wait()\n\
            \x20   return round((time.monotonic() - t0) * 1000)\n\
            held = threading.Lock()\n\
            held.acquire()\n\
            waits = [('sleep', lambda: time.sleep(1.5)),\n\
            \x20   ('event', lambda: threading.Event().wait(1.5)),\n\
            \x20   ('lock', lambda: held.acquire(timeout=1.5)),\n\
            \x20   ('select', lambda: select.select([], [], [], 1.5)),\n\
            \x20   ('poll', lambda: select.poll().poll(1500)),\n\
            \x20   ('epoll', lambda: select.epoll().poll(1.5))]\n\
            for name, wait in waits:\n\
            \x20   print(name, took(wait))\n";
        let out = Command::new("python3")
            .args(["-c", program])
            .envs(clock.env())
            .output()
            .expect("python3 runs");
        // Untranslated: 2,100 ms each.
        assert_waited(&out, 6, 1_500..1_850, "python");
    }

    /// Each of the `count` lines `NAME MS` a program printed says it waited `ms` of its
    /// clock (`who` ran it, for messages).
    fn assert_waited(out: &std::process::Output, count: usize, ms: Range<u64>, who: &str) {
        let text = String::from_utf8_lossy(&out.stdout);
        let waits: Vec<(&str, u64)> = (text.lines())
            .filter_map(|l| l.split_once(' '))
            .map(|(name, ms)| (name, ms.parse().unwrap_or(0)))
            .collect();
        assert_eq!(waits.len(), count, "{who} said {text:?}, {:?}", out.stderr);
        for (name, waited_ms) in waits {
            assert!(
                ms.contains(&waited_ms),
                "{name} ({who}): expected {ms:?} ms of its clock, observed {waited_ms}"
            );
        }
    }

    /// A drifting JVM's waits last its own clock's time too: `Thread.sleep`, `Object.wait`,
    /// `LockSupport.parkNanos` and a queue's `poll` (condition variables on the monotonic
    /// clock) and `LockSupport.parkUntil` (one on the wall clock), each 1.5 s of its clock
    /// 40% fast, as the Python waits above. Untranslated, each deadline, taken on the moved
    /// clock and handed to the kernel as the machine's, also waited for everything the clock
    /// had gained since it began to drift (seconds, after the JVM's start). And on a wall
    /// clock set 5 s back without a drift: parkUntil's deadline, 5 s in the machine's past
    /// untranslated, ended at once.
    #[test]
    fn a_drifting_jvm_waits_by_its_own_clock() {
        let dir = crate::rundir::RunDir::create().unwrap();
        install_shim(dir.path()).unwrap();
        let fast = NodeShim::create(&dir.path().join("fast.shim"), 0, 400_000).unwrap();
        let behind = NodeShim::create(&dir.path().join("behind.shim"), -5_000, 0).unwrap();
        let program = "import java.util.concurrent.*;\n\
            import java.util.concurrent.locks.LockSupport;\n\
            public class Waits {\n\
            \x20   interface W { void run() throws Exception; }\n\
            \x20   static void took(String name, W w) throws Exception {\n\
            \x20       long t0 = System.nanoTime();\n\
            \x20       w.run();\n\
            \x20       System.out.println(name + \" \" + (System.nanoTime() - t0) / 1000000);\n\
            \x20   }\n\
            \x20   public static void main(String[] a) throws Exception {\n\
            \x20       Object o = new Object();\n\
            \x20       took(\"sleep\", () -> Thread.sleep(1500));\n\
            \x20       took(\"wait\", () -> { synchronized (o) { o.wait(1500); } });\n\
            \x20       took(\"park\", () -> LockSupport.parkNanos(1_500_000_000L));\n\
            \x20       took(\"poll\", () -> new LinkedBlockingQueue<Integer>().poll(1500, TimeUnit.MILLISECONDS));\n\
            \x20       took(\"until\", () -> LockSupport.parkUntil(System.currentTimeMillis() + 1500));\n\
            \x20   }\n\
            }\n";
        let source = dir.path().join("Waits.java");
        std::fs::write(&source, program).unwrap();
        for clock in [fast, behind] {
            let out = Command::new("java")
                .args([
                    "-XX:TieredStopAtLevel=1",
                    "-XX:+UseSerialGC",
                    "-XX:-UsePerfData",
                ])
                .arg(&source)
                .envs(clock.env())
                .output()
                .expect("java runs");
            // parkUntil's deadline is in whole ms: up to 1 ms short of 1.5 s.
            let who = format!("java on {}", clock.path().display());
            assert_waited(&out, 5, 1_499..1_850, &who);
        }
    }

    /// A process under the shim waits for its fsyncs while they are held, and logs each one
    /// that completes with the file's size: a Python `os.fsync`, held 300 ms.
    #[test]
    fn a_process_under_the_shim_waits_for_held_fsyncs_and_logs_them() {
        let dir = crate::rundir::RunDir::create().unwrap();
        install_shim(dir.path()).unwrap();
        let mut node = NodeShim::create(&dir.path().join("n.shim"), 0, 0).unwrap();
        let (log, file) = (dir.path().join("n.synced"), dir.path().join("data"));
        let program = "import os, sys\n\
            f = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n\
            os.write(f, b'locksim')\n\
            os.fsync(f)\n";
        let start_ns = clock::now_ns();
        node.hold_fsyncs(start_ns + 300_000_000).unwrap();
        let status = Command::new("python3")
            .args(["-c", program])
            .arg(&file)
            .envs(node.env())
            .env("LOCKSIM_SYNCED", &log)
            .status()
            .expect("python3 runs");
        let took = clock::since(start_ns);
        assert!(status.success());
        assert!(
            took.as_millis() >= 300,
            "expected the fsync held 300 ms, observed {took:?}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        let canonical = std::fs::canonicalize(&file).unwrap();
        let (size, rest) = text.trim_end().split_once(' ').unwrap();
        assert_eq!(size, "7", "{text}");
        assert!(
            rest.ends_with(&format!(" {}", canonical.display())),
            "{text}"
        );
    }

    /// A power loss cuts each increment back to its last sync since the process started,
    /// else to its size at the start, else empties it; what else is there stays.
    #[test]
    fn a_power_loss_keeps_what_was_synced_of_each_increment() {
        let dir = crate::rundir::RunDir::create().unwrap();
        let aof = dir.path().join("appendonlydir");
        std::fs::create_dir(&aof).unwrap();
        let (old, new, base) = (
            aof.join("a.1.incr.aof"),
            aof.join("a.2.incr.aof"),
            aof.join("a.1.base.rdb"),
        );
        std::fs::write(&old, "0123456789").unwrap();
        std::fs::write(&base, "base").unwrap();
        let log = dir.path().join("synced");
        std::fs::write(
            &log,
            format!("4 1 {}\n", std::fs::canonicalize(&old).unwrap().display()),
        )
        .unwrap();
        let mut power = PowerLoss::new(log.clone(), dir.path());
        power.starting();
        // Written since the start: 5 more bytes of the old increment, a new one synced at 3
        // of its 6 bytes (the entry of before the start no longer counts).
        std::fs::write(&old, "012345678901234").unwrap();
        std::fs::write(&new, "abcdef").unwrap();
        let synced = format!(
            "3 {} {}\n",
            clock::now_ns(),
            std::fs::canonicalize(&new).unwrap().display()
        );
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&synced);
        std::fs::write(&log, text).unwrap();
        let cut = power.lose_unsynced().unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "0123456789");
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "abc");
        assert_eq!(std::fs::read_to_string(&base).unwrap(), "base");
        assert_eq!(cut.len(), 2, "{cut:?}");
    }
}
