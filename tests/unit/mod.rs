//! The library's own tests, a module per file of `src/` (named after it).

mod protocols_cmd;
mod validate;
mod validate_cmd;
