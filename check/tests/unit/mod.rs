//! The library's own tests, a module per file of `src/` (named after it).

mod history;
mod input;
mod overlap;
mod zombie;
