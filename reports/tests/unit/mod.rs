//! The library's own tests, a module per file of `src/` (named after it).

mod cost;
mod decide;
mod html;
mod report;
mod stats;
mod timeline;
mod tradeoff;
