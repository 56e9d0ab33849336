//! A model of a Redis server, shared by the Redis-based lock protocols.
//!
//! How real Redis behaves, and what this model keeps:
//! - Commands run one at a time (Redis is single-threaded), so a Lua script such as the
//!   compare-and-delete release is atomic ([`store`]).
//! - Keys with a TTL expire by the server's **wall clock**: lazily when a command touches an
//!   expired key, and actively by a periodic cycle that samples keys with a TTL (Redis'
//!   `hz`, 10 per second by default; [`store::ActiveExpiry`]).
//!   A key set with `PX ttl` is stored with an absolute deadline, as the AOF and replicas
//!   store it, so a wall-clock jump forward expires it early and a jump backwards keeps it
//!   alive longer (the Redis docs, "Expires"; Kleppmann 2016).
//! - Persistence ([`Persistence`], [`aof`]): with none, a restarted server is empty; with AOF
//!   `everysec` it loses up to a second of writes, counted by the wall clock (a clock
//!   stepped back loses more); with `always` it loses nothing (redis.io, "Redis
//!   persistence"). antirez's answer to Kleppmann requires either
//!   `always` or a restart delay longer than the longest TTL ("delayed restarts").
//! - Replication ([`replication`]) is asynchronous: a primary answers first and streams the
//!   write's effects to its replicas afterwards; `WAIT` counts their acknowledgements.
//! - Sentinel ([`sentinel`]) detects a dead primary, agrees by quorum, elects a leader and
//!   promotes the most up-to-date replica; an old primary that comes back is demoted.
//!
//! Not modelled: memory limits and eviction, cluster slots, client-side connection pools.
//!
//! The command semantics are checked against a real `redis-server` 7.0 by
//! `protocols/tests/redis_conformance.rs` (docs/redis-protocols.md says what it compares).

//! The family's files: [`store`] (the data set, a pure function of command and wall time),
//! [`aof`] (when each `appendfsync` policy syncs), [`node`] (a node's data set and
//! replication state, and the history notes of its lock keys), [`server`] (a node behind
//! the network), [`replication`] (the replication state machine and its messages), [`link`]
//! (a replicated node's tasks), [`sentinel`], [`client`] (what every Redis lock client
//! shares), [`profile`] (the libraries users run: Redisson, redsync, node-redlock), and the
//! protocols [`single`] (`single-redis`), [`replicated`] (`replicated-redis`) and
//! [`redlock`].

pub mod aof;
pub mod client;
pub mod link;
pub mod node;
pub mod profile;
pub mod redlock;
pub mod replicated;
pub mod replication;
pub mod sentinel;
pub mod server;
pub mod single;
pub mod store;
