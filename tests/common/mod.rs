//! Helpers for the command-line tests: the built binary, repository paths, scratch dirs.

#![allow(dead_code)]

#[path = "../support/tools.rs"]
pub mod tools;

use std::path::Path;
use std::process::{Command, Output};

/// A `locksim` command, which dies with the test's thread: a test killed mid-run (SIGKILL,
/// no `Drop`) takes its `locksim live` or `validate`, and so their servers, with it.
pub fn locksim() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_locksim"));
    tools::die_with_test(&mut cmd);
    cmd
}

/// Runs `locksim` with these arguments.
pub fn run(args: &[&str]) -> Output {
    locksim().args(args).output().expect("locksim runs")
}

/// Runs `locksim` with these arguments from the repository's root, so relative paths work
/// as in the README (and replay commands name them the same way).
pub fn in_repo(args: &[&str]) -> Output {
    locksim()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("locksim runs")
}

/// The exit code of a finished command.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

/// A path in the repository.
pub fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

/// An empty scratch directory of this test, removed when it passes ([`tools::Scratch`]).
pub fn scratch(name: &str) -> tools::Scratch {
    tools::Scratch::new(name)
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `locksim` from the repository's root with its stdout sent to `stdout` (a closed
/// pipe, `/dev/full`); stderr is captured.
pub fn in_repo_to(args: &[&str], stdout: impl Into<std::process::Stdio>) -> Output {
    locksim()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(stdout)
        .output()
        .expect("locksim runs")
}

/// Polls `condition` every 20 ms until it holds or `limit` passes; whether it held.
#[allow(dead_code)] // not every test binary waits
#[allow(clippy::disallowed_methods)] // a bounded wait for a real process
pub fn wait_until(limit: std::time::Duration, condition: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !condition() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}
