//! Real Redis servers' clocks (data nodes and Sentinels), moved as the simulator moves a node's (`clock_jump`,
//! `clock_drift`, a node's `[clocks]` drift and offset; `locksim_sim::clock`).
//!
//! A server whose clock may move runs with locksim's clock shim preloaded (`live/clock/shim.c`,
//! built into the binary, written into the run's directory): it answers the process's
//! `clock_gettime`, `gettimeofday` and `time` from the machine's clocks plus what the server's
//! clock file says, which the nemesis rewrites at each fault. Its monotonic clock runs at
//! `1 + drift_ppm·1e-6` times true speed and never jumps; its wall clock is stepped by a jump,
//! as in the model. redis-server expires keys by its wall clock (`mstime()`), so a step
//! forward ends a lease early there as in the simulator. The machine's clocks do not move:
//! the other processes, and the run's own timestamps, keep real time.
//!
//! Only Redis servers are moved, data nodes and Sentinels (see [`why_not_movable`]): a
//! Sentinel's TILT mode is the model's too. etcd is a Go program, which reads the clock
//! through the vDSO without libc, where no preloaded library reaches; a ZooKeeper server's JVM hands the kernel absolute deadlines on its monotonic
//! clock (timed waits), which the kernel would read on the unmoved clock, so a drift would
//! stretch or cut every wait; the clients are not moved (their events are stamped on the
//! machine's one monotonic clock).

use crate::clock;
use locksim_scenarios::Prepared;
use locksim_sim::Fault;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The shim, as built from `live/clock/shim.c`.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/locksim-clock.so"));

/// A moved clock's state in its file: the layout `shim.c` reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct State {
    wall_offset_ns: i64,
    mono_offset_ns: i64,
    /// On the machine's monotonic clock.
    anchor_ns: i64,
    drift_ppm: i64,
}

impl State {
    /// What the drift has added since the anchor, at `now_ns` (the shim's own formula).
    fn drifted_ns(&self, now_ns: i64) -> i64 {
        ((now_ns - self.anchor_ns) as i128 * self.drift_ppm as i128 / 1_000_000) as i64
    }
}

/// One server's moved clock.
pub struct MovedClock {
    file: File,
    path: PathBuf,
    state: State,
    /// The file's sequence number (odd while it is written).
    seq: i64,
}

impl MovedClock {
    /// A clock for a process, in `path`, with a wall offset and drift from now on.
    pub fn create(path: &Path, offset_ms: i64, drift_ppm: i64) -> std::io::Result<MovedClock> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let mut clock = MovedClock {
            file,
            path: path.to_owned(),
            state: State::default(),
            seq: 0,
        };
        clock.write(State {
            wall_offset_ns: offset_ms * 1_000_000,
            mono_offset_ns: 0,
            anchor_ns: clock::now_ns() as i64,
            drift_ppm,
        })?;
        Ok(clock)
    }

    /// The environment that preloads the shim (`shim`, in the run's directory) onto this
    /// clock.
    pub fn env(&self, shim: &Path) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".into(), shim.display().to_string()),
            ("LOCKSIM_CLOCK".into(), self.path.display().to_string()),
        ]
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
        })
    }

    /// Writes `state` under the sequence lock the shim reads by.
    fn write(&mut self, state: State) -> std::io::Result<()> {
        let words = [
            state.wall_offset_ns,
            state.mono_offset_ns,
            state.anchor_ns,
            state.drift_ppm,
        ];
        let body: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.file.write_all_at(&(self.seq + 1).to_le_bytes(), 0)?;
        self.file.write_all_at(&body, 8)?;
        self.seq += 2;
        self.file.write_all_at(&self.seq.to_le_bytes(), 0)?;
        self.state = state;
        Ok(())
    }
}

/// Writes the shim into `dir`; its path, for [`MovedClock::env`].
pub fn install_shim(dir: &Path) -> std::io::Result<PathBuf> {
    let shim = dir.join("locksim-clock.so");
    std::fs::write(&shim, SHIM)?;
    Ok(shim)
}

/// The nodes whose clocks `faults` or the scenario's `[clocks]` move (a role as named).
pub fn moved(prepared: &Prepared, faults: &[Fault]) -> Vec<String> {
    let mut nodes: Vec<String> = faults
        .iter()
        .filter_map(|f| match f {
            Fault::ClockJump(j) => Some(j.node.clone()),
            Fault::ClockDrift(d) => Some(d.node.clone()),
            _ => None,
        })
        .collect();
    nodes.extend(prepared.scenario.clocks.nodes.keys().cloned());
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Why live mode cannot move `node`'s clock (a node or a role), if it cannot.
pub fn why_not_movable(prepared: &Prepared, node: &str) -> Option<String> {
    let s = &prepared.scenario;
    if s.workload.client_names().iter().any(|c| c == node)
        || node == locksim_sim::nemesis::ROLE_HOLDER
    {
        return Some(format!(
            "`{node}` is a client: live mode moves real Redis servers' clocks only"
        ));
    }
    let server = prepared.deployment.servers().iter().any(|n| n == node);
    if !server && !locksim_sim::nemesis::is_role(node) {
        return Some(format!(
            "`{node}` is not a server: live mode moves real Redis servers' clocks only"
        ));
    }
    let protocol = s.protocol.name.as_str();
    match protocol {
        "single-redis" | "redlock" | "replicated-redis" => None,
        "etcd" => Some(
            "an etcd member is a Go program, which reads the clock through the vDSO without \
             libc, where live mode's clock shim cannot reach"
                .into(),
        ),
        "zookeeper" => Some(
            "a ZooKeeper server's JVM hands the kernel absolute deadlines on its monotonic \
             clock, which the kernel reads unmoved: a moved clock would stretch or cut every \
             timed wait, so live mode does not move it"
                .into(),
        ),
        _ => Some(format!(
            "live mode moves real Redis servers' clocks only, not {protocol}'s"
        )),
    }
}

/// Gives every Redis server of `deployment` a clock of its own in `dir` if any clock
/// moves in the run (a role such as `@primary` may name any of them), with its `[clocks]`
/// offset and drift, and the shim preloaded at each of its starts.
pub fn attach(
    prepared: &Prepared,
    faults: &[Fault],
    deployment: &mut super::Deployment,
    dir: &Path,
) -> anyhow::Result<BTreeMap<String, MovedClock>> {
    let mut clocks = BTreeMap::new();
    if moved(prepared, faults).is_empty() {
        return Ok(clocks);
    }
    let shim = install_shim(dir)?;
    for server in &mut deployment.servers {
        if why_not_movable(prepared, &server.name).is_some() {
            continue;
        }
        let set = prepared.scenario.clocks.nodes.get(&server.name);
        let (offset_ms, drift_ppm) = set.map_or((0, 0), |c| (c.offset_ms, c.drift_ppm));
        let path = dir.join(format!("{}.clock", server.name));
        let clock = MovedClock::create(&path, offset_ms, drift_ppm)?;
        server.env = clock.env(&shim);
        clocks.insert(server.name.clone(), clock);
    }
    Ok(clocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `date`'s reading, in ms since the epoch, of a process started with `clock`'s shim.
    fn date_ms(clock: &MovedClock, shim: &Path) -> i64 {
        let out = Command::new("date")
            .arg("+%s%3N")
            .envs(clock.env(shim))
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
        let shim = install_shim(dir.path()).unwrap();
        let mut clock = MovedClock::create(&dir.path().join("n.clock"), 0, 0).unwrap();
        let within = |clock: &MovedClock, shift_ms: (i64, i64)| {
            let before = clock::wall_ms();
            let read = date_ms(clock, &shim);
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
        let read = date_ms(&clock, &shim);
        let after = clock::wall_ms();
        let gained_max_ms = clock::since(start_ns).as_millis() as i64 / 10 + 1;
        assert!(
            read >= before - 2_000 + 100 && read <= after - 2_000 + gained_max_ms,
            "expected a reading {}..={} ms, observed {read}",
            before - 2_000 + 100,
            after - 2_000 + gained_max_ms
        );
    }
}
