//! SIGINT and SIGTERM stop long work gracefully (`sweep`, `compare`): no new run starts,
//! the runs in progress are written, and the command says where its results are and how to
//! resume. A second signal acts as usual: it ends the process as the signal does.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// Set by the first SIGINT or SIGTERM.
static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);
/// The first signal's number (0: none yet).
static SIGNAL: LazyLock<Arc<AtomicUsize>> = LazyLock::new(Arc::default);

/// Whether a stop was asked for: the flag the work loops read.
pub fn stop() -> &'static AtomicBool {
    &STOP
}

/// Installs the handlers for SIGINT and SIGTERM.
pub fn install() {
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it looks at the flag before the first signal sets it: only a
        // second signal finds it set and acts as the signal's default.
        let installed = signal_hook::flag::register_conditional_default(signal, STOP.clone())
            .and_then(|_| signal_hook::flag::register(signal, STOP.clone()))
            .and_then(|_| {
                signal_hook::flag::register_usize(signal, SIGNAL.clone(), signal as usize)
            });
        installed.expect("SIGINT and SIGTERM handlers install");
    }
}

/// The signal received, by name, if one was.
pub fn received() -> Option<&'static str> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s if s == SIGTERM as usize => Some("SIGTERM"),
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
