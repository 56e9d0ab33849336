//! One test binary for the crate's integration tests (one link instead of one per file); each file is a module.

mod disk;
mod events;
mod harness;
mod reference_histories;
mod rpc;
mod targets;
mod unit;
