//! Outside tools a test needs (`redis-server`, `chromium`, `etcd`, ZooKeeper): one rule for
//! every such test. Where the tool is missing, the test says that it skipped, in a line of
//! its own past the test harness' capture, and passes; where `CI` is set, a missing tool fails
//! the test instead, so CI can never pass by skipping.
//!
//! Shared by source (`#[path]`) between the crates' test directories.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The first of `candidates` that runs with `--version` (or the binary `env_var` names, if
/// set), or `None` after saying the test skipped. Under `CI` a missing tool panics.
pub fn require(
    test: &str,
    candidates: &[&str],
    env_var: Option<&str>,
    install: &str,
) -> Option<String> {
    if let Some(bin) = env_var.and_then(|v| std::env::var(v).ok()) {
        return Some(bin);
    }
    let found = candidates.iter().find(|bin| {
        Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    match found {
        Some(bin) => Some((*bin).to_owned()),
        None => {
            missing(
                test,
                &format!("none of {} is on PATH", candidates.join(", ")),
                install,
            );
            None
        }
    }
}

/// Whether `bin args` runs and succeeds (for a tool whose version is not `--version`:
/// `etcdctl version`); if not, says the test skipped, or panics under `CI`.
pub fn require_runs(test: &str, bin: &str, args: &[&str], install: &str) -> bool {
    let runs = Command::new(bin)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        let what = format!("`{bin} {}` does not run", args.join(" "));
        missing(test, &what, install);
    }
    runs
}

/// Whether a file the test needs (a jar, say) is there; if not, says the test skipped, or
/// panics under `CI`.
pub fn require_file(test: &str, path: &Path, install: &str) -> bool {
    let found = path.is_file();
    if !found {
        missing(test, &format!("{} does not exist", path.display()), install);
    }
    found
}

/// Skips (or, under CI, fails) a test whose tool is missing, naming how to install it.
pub fn missing(test: &str, what: &str, install: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: CI is set and {what} ({install}): the test cannot run, so it fails"
    );
    let _ = writeln!(std::io::stderr(), "{test}: SKIPPED: {what} ({install})");
}

/// A free TCP port on 127.0.0.1 for a server the test starts: live mode's
/// ([`locksim_live::procs::free_port`]: below the ephemeral range, claimed machine-wide, so
/// tests side by side, each a process of its own under nextest, never draw the same one).
pub fn free_port() -> u16 {
    locksim_live::procs::free_port().expect("a free loopback port")
}

/// Makes the process `cmd` starts die with the thread that starts it (live mode's
/// [`locksim_live::procs::die_with_spawner`]): a test process killed with SIGKILL, where no
/// `Drop` runs, leaves no server behind. A server is started and dropped by the test's own
/// thread, which lives as long as the server is needed.
pub fn die_with_test(cmd: &mut Command) -> &mut Command {
    locksim_live::procs::die_with_spawner(cmd);
    cmd
}

/// A fresh, empty scratch directory for one server of `test`, never handed out before in this
/// test process: tests run side by side in one process, and a shared name let one test's
/// clean-up delete the data directory of another's running server.
pub fn scratch_dir(test: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("locksim-{test}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A test's scratch directory under the system temp dir: removed when the test passes.
/// Dropped by a failing test (while its thread panics), it keeps only the saved histories,
/// outputs and logs ([`KEPT_ON_FAILURE`]) and says where, in the test's own output.
pub struct Scratch(std::path::PathBuf);

/// The file of a scratch directory that names the nextest run that made it (kept on failure:
/// `txt`).
pub const RUN_ID_FILE: &str = "nextest-run-id.txt";

/// What a failing test's scratch directory keeps, by file extension: histories (`jsonl`), a
/// run's stdout and stderr (`out`, `err`), logs, pid lists and the scenario files.
pub const KEPT_ON_FAILURE: &[&str] = &["jsonl", "out", "err", "log", "txt", "toml"];

impl Scratch {
    /// A fresh, empty directory named `locksim-NAME` (plus the test process's pid). Under
    /// nextest it holds the run's id ([`RUN_ID_FILE`]), so that a later test process of the
    /// same run, sweeping the directories dead processes left, keeps a failed test's.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("locksim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        if let Ok(run) = std::env::var("NEXTEST_RUN_ID") {
            std::fs::write(dir.join(RUN_ID_FILE), run).expect("the run's id");
        }
        Scratch(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
            keep_earlier_tries(&self.0);
            return;
        }
        prune(&self.0);
        eprintln!(
            "the failed test's histories and logs are in {}",
            self.0.display()
        );
    }
}

/// Where a test that passed on a retry keeps what its failed tries saved, out of the system
/// temp dir: `target/tmp/failed-tries/` (the failed try's message names its old path under
/// the temp dir; the directory keeps its name).
pub fn failed_tries_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("failed-tries")
}

/// A test that passes on a retry (nextest's `retries`) moves the directories its failed
/// tries kept in the same run (the same name but for the pid, the same run's id, the pid
/// gone) out of the temp dir into [`failed_tries_dir`], so that a FLAKY test's evidence
/// survives and the temp dir is left clean.
fn keep_earlier_tries(dir: &Path) {
    let (Ok(run), Some(name)) = (std::env::var("NEXTEST_RUN_ID"), dir.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let Some((stem, _pid)) = name.rsplit_once('-') else {
        return;
    };
    let Some(parent) = dir.parent() else { return };
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let other = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = other.strip_prefix(stem).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        let gone = pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists();
        let made_by = std::fs::read_to_string(entry.path().join(RUN_ID_FILE)).ok();
        if gone && made_by.as_deref() == Some(run.as_str()) {
            keep_failed_try(&entry.path());
        }
    }
}

/// Moves a failed try's directory (what [`prune`] left of it) into [`failed_tries_dir`],
/// replacing one of the same name from an earlier run; removes it if that fails.
pub fn keep_failed_try(dir: &Path) {
    let into = failed_tries_dir();
    let moved = dir.file_name().is_some_and(|name| {
        let to = into.join(name);
        let _ = std::fs::remove_dir_all(&to);
        std::fs::create_dir_all(&into).is_ok() && std::fs::rename(dir, &to).is_ok()
    });
    if !moved {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes everything under `dir` but the files [`KEPT_ON_FAILURE`] names (servers' data,
/// specs, binaries), and the directories that are left empty.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            prune(&path);
            let _ = std::fs::remove_dir(&path); // only if empty
        } else {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !KEPT_ON_FAILURE.contains(&ext) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}
