//! One test binary for the crate's integration tests (one link instead of one per file); each file is a module.

mod common;

mod catalog_consensus;
mod catalog_etcd_clients;
mod catalog_libraries;
mod catalog_page;
mod catalog_redis;
mod catalog_redis_reported;
mod catalog_single_redis;
mod golden_trace_hashes;
mod liveness;
mod parser_fuzz;
mod proptest_fencing;
mod shared_runs;
mod unit;
