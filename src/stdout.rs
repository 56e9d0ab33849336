//! Everything a command prints to stdout goes through [`print`] (the `out!` and
//! `outln!` macros), so a stdout that cannot take it ends the same way in every command:
//!
//! - a closed pipe (`locksim check h.jsonl | head -1`, `| true`) is a reader that wanted no
//!   more: the rest of the output is dropped and the command ends with its own exit code (a
//!   violation found still exits 1);
//! - any other write error (`> /dev/full`: no space) means the output is incomplete: the
//!   command exits 3 saying so.
//!
//! `std::print!` would panic on either (exit 101, with a backtrace).

use std::io::{ErrorKind, Write};
use std::sync::Mutex;

/// The first write to stdout that failed, if one did; later output is dropped.
static FAILED: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Writes to stdout, flushed at once so a full disk shows at the write that hit it. After a
/// failure it writes nothing more.
pub fn print(text: std::fmt::Arguments<'_>) {
    let mut failed = FAILED.lock().unwrap_or_else(|e| e.into_inner());
    if failed.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        *failed = Some(e);
    }
}

/// Prints to stdout through [`print`], like `print!`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!($($arg)*))
    };
}

/// Prints a line to stdout through [`print`], like `println!`.
macro_rules! outln {
    () => {
        $crate::stdout::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// How a command that returned `code` ends, given what stdout took: its own code if every
/// write succeeded or the reader closed the pipe, 3 with a message if the output is
/// incomplete for another reason. Clears the failure, for the next command of the process.
pub fn finish(code: std::process::ExitCode) -> std::process::ExitCode {
    let failed = FAILED.lock().unwrap_or_else(|e| e.into_inner()).take();
    match failed {
        None => code,
        Some(e) if e.kind() == ErrorKind::BrokenPipe => code,
        Some(e) => {
            eprintln!("locksim: stdout: {e}: the output is incomplete");
            std::process::ExitCode::from(3)
        }
    }
}
