//! Scenarios for locksim: the scenario file format, the client workload, and the runner
//! that turns (scenario, seed) into a [`RunResult`].

pub mod matrix;
pub mod runner;
pub mod scenario;
pub mod workload;

pub use runner::{load, RunResult, Stats};
pub use scenario::{Expect, Expectation, Prepared, Scenario, ScenarioError, Workload};
