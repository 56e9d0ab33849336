//! locksim-protocols' tests in one binary (one link of raft, madsim and the models, not
//! five): the models' own tests, the single-Redis client driven directly, and the
//! conformance tests, each model's state machine against the real server.

// What the conformance tests share: finding and starting a real server, and when a lease or a
// session's fate is settled, in real time (the clock and sleeps the simulation may not use).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
#[path = "../../tests/support/expiry.rs"]
mod expiry;
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
#[path = "../../tests/support/tools.rs"]
mod tools;

mod etcd_conformance;
mod redis_conformance;
mod single_redis;
mod unit;
mod zookeeper_conformance;
