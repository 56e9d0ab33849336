//! The workspace's command-line and report tests in one test binary (one link instead of one per
//! file); each file is a module. `live.rs` and `validate.rs`, which start real servers, are test
//! binaries of their own: cargo runs test binaries one at a time, so their timing-sensitive runs
//! never share the machine with this binary's CPU-bound simulations (and `live.rs`'s lock,
//! which runs its tests one at a time, is not crossed by `validate.rs`'s).

mod common;

mod browser;
mod canary;
mod check;
mod cli;
mod compare;
mod compare_shard;
mod consensus;
mod docs_samples;
mod report;
mod robust_input;
mod search;
mod sweep;
mod tidy;
mod unit;
