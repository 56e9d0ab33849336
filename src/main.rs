//! The `locksim` command line with the built-in protocols. A crate with protocols of its own
//! calls [`locksim::cli::main_with`] with its own registry instead.

fn main() -> std::process::ExitCode {
    locksim::cli::main_with(locksim_protocols::Registry::builtin())
}
