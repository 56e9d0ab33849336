//! A live run's scratch directory: `$TMPDIR/locksim-live-PID-NS` (the servers' data, the
//! clients' specs and logs), gone on every way out of the run:
//! - a normal end, an error or a panic (which unwinds): [`RunDir`]'s `Drop`;
//! - SIGINT / SIGTERM / SIGHUP: the signal thread ([`crate::procs`]) calls
//!   [`remove_registered`] (a `Drop` during it leaves the directory to it);
//! - locksim killed (SIGKILL, a crash): the next live run on the machine removes it
//!   ([`sweep_stale`]), since the pid in its name is no longer running.
//!
//! `--keep DIR` is the user's own directory and is never removed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The prefix of every run directory's name (then `PID-NS`).
const PREFIX: &str = "locksim-live-";

/// The run directories that exist now: what a signal removes.
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn dirs() -> MutexGuard<'static, Vec<PathBuf>> {
    DIRS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Set when the signal thread starts handling a signal: from then on it, not the command,
/// ends the process (`procs::await_interrupt`) and removes the run directories.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The signal thread has begun: the run directories are its to remove.
pub(crate) fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether a signal is being handled (its thread ends the process).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A temporary run directory, removed when dropped (and on a signal while it exists).
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a fresh run directory under the system temp dir, after removing those of
    /// runs whose process is gone.
    pub fn create() -> anyhow::Result<RunDir> {
        let temp = std::env::temp_dir();
        sweep_stale(&temp);
        let name = format!("{PREFIX}{}-{}", std::process::id(), crate::clock::now_ns());
        let path = temp.join(name);
        std::fs::create_dir_all(&path)?;
        dirs().push(path.clone());
        Ok(RunDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // The run ends because a signal's thread killed its processes: that thread removes
        // the directory once they are dead (one still dying may write into it until then).
        if interrupted() {
            return;
        }
        dirs().retain(|d| *d != self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes every registered run directory (the processes writing into them were killed).
pub(crate) fn remove_registered() {
    for dir in std::mem::take(&mut *dirs()) {
        // A server SIGKILLed a moment ago may still be finishing a write into its data
        // directory: try again while the directory is not gone yet (at most ~1 s).
        for _ in 0..100 {
            if std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                break;
            }
            crate::clock::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Removes the run directories under `temp` whose owner (the pid in the name) is no longer
/// running: those of a locksim that was SIGKILLed or crashed. A directory whose pid now
/// belongs to another process is left alone (it is removed once that one is gone).
pub fn sweep_stale(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = owner(&name.to_string_lossy()) else {
            continue;
        };
        if !running(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The pid in a run directory's name (`locksim-live-PID-NS`), if it is one.
fn owner(name: &str) -> Option<i32> {
    let (pid, ns) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(ns)).then(|| pid.parse().ok())?
}

/// Whether process `pid` exists (a zombie counts: its parent has not reaped it yet).
fn running(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for the process.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_run_directories_have_an_owner() {
        assert_eq!(owner("locksim-live-123-456"), Some(123));
        assert_eq!(owner("locksim-live-test-123-gc"), None);
        assert_eq!(owner("locksim-live-123"), None);
        assert_eq!(owner("locksim-live-12a-456"), None);
        assert_eq!(owner("locksim-ports.lock"), None);
    }

    #[test]
    fn a_dead_runs_directory_is_swept_and_a_running_ones_is_kept() {
        let temp = std::env::temp_dir().join(format!("locksim-rundir-test-{}", std::process::id()));
        std::fs::create_dir_all(&temp).unwrap();
        // A child that has exited and been reaped: its pid is free.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = temp.join(format!("{PREFIX}{dead}-1"));
        let mine = temp.join(format!("{PREFIX}{}-1", std::process::id()));
        for d in [&gone, &mine] {
            std::fs::create_dir_all(d.join("e1/member")).unwrap();
            std::fs::write(d.join("e1/member/wal"), "x").unwrap();
        }
        sweep_stale(&temp);
        let (gone_left, mine_left) = (gone.exists(), mine.exists());
        std::fs::remove_dir_all(&temp).unwrap();
        assert!(!gone_left, "the directory of dead pid {dead} was swept");
        assert!(mine_left, "the directory of a running pid was kept");
    }
}
