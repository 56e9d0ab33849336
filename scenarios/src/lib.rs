//! Scenarios for locksim: the scenario file format, the client workload, the runner
//! that turns (scenario, seed) into a [`RunResult`], seed sweeps ([`sweep`]) and the
//! property-based fault search ([`search`]).

pub mod bounds;
pub mod matrix;
pub mod renamed;
pub mod runner;
pub mod scenario;
pub mod search;
pub mod sweep;
pub mod workload;

pub use runner::{load, RunResult, Stats};
pub use scenario::{Expect, Expectation, Prepared, Scenario, ScenarioError, Workload};
