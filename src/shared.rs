//! What every command shares: the bad-input error (exit code 2), loading a scenario, the
//! check of an output file, and default settings.

use locksim_protocols::Registry;
use locksim_scenarios::{Prepared, ScenarioError};

/// Bad input: exit code 2.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// An [`InputError`] (exit code 2) saying `e`.
pub fn input(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(InputError(e.to_string()))
}

/// Worker threads when `--jobs` is not given: one per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most worker threads a command starts: a thread per run costs a stack and a start-up,
/// and beyond the machine's cores more threads only share them.
pub const JOBS_MAX: usize = 256;

/// The worker threads for `--jobs` (default: one per core): at least 1 (else an
/// [`InputError`]), at most [`JOBS_MAX`] and at most `units` (the runs to do), saying on
/// stderr when it caps the number asked for.
pub fn jobs(requested: Option<usize>, units: u128) -> anyhow::Result<usize> {
    let asked = requested.unwrap_or_else(default_jobs);
    if asked == 0 {
        return Err(input("--jobs must be at least 1"));
    }
    let units = usize::try_from(units).unwrap_or(usize::MAX).max(1);
    let jobs = asked.min(JOBS_MAX).min(units);
    if requested.is_some() && jobs < asked {
        let why = if jobs == JOBS_MAX {
            format!("the most locksim starts is {JOBS_MAX}")
        } else {
            format!("there are {units} runs to do")
        };
        eprintln!("locksim: --jobs {asked} capped at {jobs}: {why}");
    }
    Ok(jobs)
}

/// Checks an output file before any work (an [`InputError`] naming `flag` if it cannot be
/// one): it must be a regular file or creatable as one, and none of the command's `inputs`.
pub fn check_output_file(
    flag: &str,
    file: &std::path::Path,
    inputs: &[&std::path::Path],
) -> anyhow::Result<()> {
    use locksim_check::input::{check_not_an_input, check_output_file};
    check_output_file(file)
        .and_then(|()| check_not_an_input(file, inputs))
        .map_err(|e| input(format!("{flag} {e}")))
}

/// Loads and prepares a scenario file, printing its warnings (valid, likely not meant) on
/// stderr.
pub fn load(path: &str, registry: &Registry) -> Result<Prepared, ScenarioError> {
    let prepared = locksim_scenarios::load(path, registry)?;
    for warning in &prepared.warnings {
        eprintln!("locksim: warning: {}", crate::text::printable(warning));
    }
    Ok(prepared)
}

/// An exclusive advisory lock (`flock`) on a results file, held while the value lives: a
/// second process resuming the same file would run every seed again beside the first.
pub struct FileLock(#[allow(dead_code)] std::fs::File);

/// Locks `path` (creating it if needed) or fails with an [`InputError`] naming the process
/// that holds it (from `/proc/locks`, where the system has one).
pub fn lock_results(flag: &str, path: &std::path::Path) -> anyhow::Result<FileLock> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| input(format!("{flag} {}: {e}", path.display())))?;
    // SAFETY: flock on an fd this function owns; no memory is shared.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if locked {
        return Ok(FileLock(file));
    }
    let holder = holder_of(&file).map_or("another process".into(), |pid| format!("process {pid}"));
    Err(input(format!(
        "{flag} {}: {holder} is writing this file (it holds its lock); wait for it or write \
         elsewhere",
        path.display()
    )))
}

/// The pid holding an flock on `file`, read from `/proc/locks` (`1: FLOCK ADVISORY WRITE
/// PID MAJ:MIN:INODE 0 EOF`).
fn holder_of(file: &std::fs::File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = file.metadata().ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, id) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let ours = *kind == "FLOCK" && id.rsplit(':').next()? == inode.to_string();
        ours.then(|| pid.parse().ok()).flatten()
    })
}
