//! The library's own tests, a module per file of `src/` (named after it).

mod bounds;
mod matrix;
mod renamed;
mod scenario;
mod search;
mod sweep;
