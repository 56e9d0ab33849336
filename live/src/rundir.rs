//! A live run's scratch directory: `$TMPDIR/locksim-live-PID-NS` (the servers' data, the
//! clients' specs and logs), gone on every way out of the run:
//! - a normal end, an error or a panic (which unwinds): [`RunDir`]'s `Drop`;
//! - SIGINT / SIGTERM / SIGHUP: the signal handler ([`crate::procs`]) calls
//!   [`remove_registered`], which removes it with raw system calls only (async-signal-safe:
//!   no allocation, no lock);
//! - locksim killed (SIGKILL, a crash): the next live run on the machine removes it
//!   ([`sweep_stale`]), since the pid in its name is no longer running.
//!
//! `--keep DIR` is the user's own directory and is never removed.

use std::ffi::{c_char, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The prefix of every run directory's name (then `PID-NS`).
const PREFIX: &str = "locksim-live-";

/// Enough for the runs one process has at once (a validation's live jobs).
const SLOTS: usize = 16;
/// The directories to remove on a signal, each a leaked C string (null: a free slot).
static DIRS: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// A temporary run directory, removed when dropped (and on a signal while it exists).
pub struct RunDir {
    path: PathBuf,
    slot: usize,
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
        let c = CString::new(path.as_os_str().as_bytes())?.into_raw();
        let Some(slot) = DIRS.iter().position(|s| {
            s.compare_exchange(std::ptr::null_mut(), c, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        }) else {
            // SAFETY: `c` came from `into_raw` above and was not stored anywhere.
            drop(unsafe { CString::from_raw(c) });
            let _ = std::fs::remove_dir_all(&path);
            anyhow::bail!("more than {SLOTS} live runs at once in one process");
        };
        Ok(RunDir { path, slot })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let c = DIRS[self.slot].swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !c.is_null() {
            // SAFETY: a non-null slot holds a pointer from `CString::into_raw`; the swap
            // made this the only owner (a signal handler that took it first never returns).
            drop(unsafe { CString::from_raw(c) });
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes every registered run directory. Async-signal-safe: atomics and system calls.
pub(crate) fn remove_registered() {
    for slot in &DIRS {
        let c = slot.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if c.is_null() {
            continue;
        }
        // A server SIGKILLed a moment ago may still be finishing a write into its data
        // directory: try again while the directory is not empty yet (at most ~1 s).
        for _ in 0..100 {
            // SAFETY: `c` is a NUL-terminated string from `CString::into_raw`, never freed
            // now that the swap took it.
            if unsafe { remove_tree(libc::AT_FDCWD, c) } {
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            // SAFETY: nanosleep is async-signal-safe; a valid timespec.
            unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        }
    }
}

/// Removes `name` (relative to the directory `dirfd`) and, if a directory, all under it,
/// without following symbolic links. True if it is gone. Only system calls and a buffer on
/// the stack, so a signal handler may call it.
///
/// # Safety
/// `name` must point to a NUL-terminated string.
unsafe fn remove_tree(dirfd: libc::c_int, name: *const c_char) -> bool {
    // SAFETY (this block's calls): system calls on a NUL-terminated name and descriptors this
    // function opened; the buffer outlives each call that fills it.
    unsafe {
        if libc::unlinkat(dirfd, name, 0) == 0 {
            return true;
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = libc::openat(dirfd, name, flags);
        if fd < 0 {
            return *libc::__errno_location() == libc::ENOENT;
        }
        // Deleting while reading may make a filesystem skip entries: read again from the
        // start until a pass finds nothing left (bounded, for entries that cannot go).
        let mut buf = [0u8; 4096];
        for _ in 0..8 {
            libc::lseek(fd, 0, libc::SEEK_SET);
            let mut found = false;
            loop {
                let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
                if n <= 0 {
                    break;
                }
                let mut at = 0usize;
                while at < n as usize {
                    // linux_dirent64: u64 inode, i64 offset, u16 record length, u8 type, name.
                    let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                    let entry = buf.as_ptr().add(at + 19).cast::<c_char>();
                    let entry_name = CStr::from_ptr(entry).to_bytes();
                    if entry_name != b"." && entry_name != b".." {
                        found = true;
                        remove_tree(fd, entry);
                    }
                    at += reclen;
                }
            }
            if !found {
                break;
            }
        }
        libc::close(fd);
        libc::unlinkat(dirfd, name, libc::AT_REMOVEDIR) == 0
            || *libc::__errno_location() == libc::ENOENT
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

    #[test]
    fn the_signal_safe_removal_removes_a_tree_and_no_symlinked_target() {
        let temp = std::env::temp_dir().join(format!("locksim-rmtree-test-{}", std::process::id()));
        let outside = temp.join("outside");
        let tree = temp.join("tree");
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        for i in 0..300 {
            // More entries than one getdents64 buffer holds.
            std::fs::write(tree.join(format!("a/b/file-with-a-longish-name-{i}")), "x").unwrap();
        }
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        let c = CString::new(tree.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated string.
        let removed = unsafe { remove_tree(libc::AT_FDCWD, c.as_ptr()) };
        let (tree_left, outside_kept) = (tree.exists(), outside.join("keep").exists());
        std::fs::remove_dir_all(&temp).unwrap();
        assert!(removed && !tree_left, "the tree is gone");
        assert!(outside_kept, "a symbolic link's target is not followed");
    }
}
