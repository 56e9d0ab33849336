//! The `locksim` command line with the built-in protocols. A crate with protocols of its own
//! calls [`locksim::cli::main_with`] with its own registry instead.

/// mimalloc instead of the system allocator: a run allocates and frees a message, a timer
/// and a task at nearly every step, on a fresh thread per run (see
/// `locksim_scenarios::runner::isolated`), and glibc's allocator spent a seventh of a run's
/// instructions on it. Results do not depend on the allocator (the golden trace hashes pin
/// that).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    locksim::cli::main_with(locksim_protocols::Registry::builtin())
}
