//! The `locksim` command line as a library, so a crate with its own protocols gets every
//! command for them: build a [`Registry`](locksim_protocols::Registry) with your protocols
//! and hand it to [`cli::main_with`] from your own `main` (see
//! `examples/custom_protocol.rs`).
//!
//! - [`cli`]: argument parsing, the subcommands, exit codes (0 = no safety violation, 1 =
//!   violation found, 2 = bad input or usage);
//! - [`compare`]: the orchestration of `compare` (matrix, rounds, catalog, reports) as
//!   functions a program can call without the command line.

pub mod check_cmd;
pub mod cli;
pub mod compare;
pub mod compare_cmd;
pub mod compare_search;
pub mod compare_shard;
pub mod live_cmd;
pub mod protocols_cmd;
pub mod report_cmd;
pub mod run_cmd;
pub mod search_cmd;
pub mod shared;
pub mod signals;
pub mod stdout;
pub mod sweep_cmd;
pub mod text;
pub mod validate;
pub mod validate_cmd;
