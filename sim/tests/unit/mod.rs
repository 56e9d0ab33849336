//! The library's own tests, a module per file of `src/` (named after it).

mod clock;
mod disk;
mod fault;
mod fault_draw;
mod mailbox;
mod pause_periodic;
