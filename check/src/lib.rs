//! The history format and the checker of locksim, usable on its own.
//!
//! - [`history`]: the flat, append-only record of a run (JSON Lines on disk), and its trace
//!   hash;
//! - [`interpret`]: what a history says happened (critical sections, downtimes, who held the
//!   lock key where), derived once for the checker, the liveness figures and timelines;
//! - [`checker`]: the pure function from a history to a verdict with witnesses;
//! - [`input`]: bounded reading of user files and output-path checks.
//!
//! This crate depends on neither madsim nor any lock protocol: it builds with or without
//! `--cfg madsim`, so a project can check histories recorded from its own system in its own
//! test suite. The simulator (`locksim-sim`) re-exports `history` and `checker`.

pub mod checker;
pub mod history;
pub mod input;
pub mod interpret;
pub mod liveness;
pub mod mutual_exclusion;
pub mod overlap;
pub mod synthetic;
pub mod verdict;
pub mod zombie;

pub use checker::{check, Property, Report, Verdict, Violation};
pub use history::{Event, History, Kind, Op};
