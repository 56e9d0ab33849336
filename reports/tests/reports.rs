//! locksim-reports' tests in one binary: the library's own, a module per file of `src/`.

mod unit;
