//! One test binary for the crate's integration tests (one link instead of one per file); each file is a module.

mod checker;
mod history_fuzz;
mod no_madsim;
mod reference_histories;
mod uncertainty;
mod unit;
