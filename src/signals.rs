//! SIGINT and SIGTERM stop long work gracefully (`sweep`, `compare`): no new run starts,
//! the runs in progress are written, and the command says where its results are and how to
//! resume. A second signal acts as usual (the handler restores the default after the first).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Set by the first SIGINT or SIGTERM.
pub static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: two atomic stores and `signal`.
    SIGNAL.store(signal, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
    // SAFETY: restoring the default disposition is async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the handler only stores to atomics and calls `signal`.
        unsafe {
            libc::signal(signal, handler as libc::sighandler_t);
        }
    }
}

/// The signal received, by name, if one was.
pub fn received() -> Option<&'static str> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        #[cfg(unix)]
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("SIGINT"),
    }
}

/// The shell's convention: 128 + the signal's number.
pub fn exit_code(name: &str) -> u8 {
    if name == "SIGTERM" {
        143
    } else {
        130
    }
}
