//! Lock protocols for locksim: servers, client libraries, and the fenced resource.
//!
//! # Layout
//! - [`protocol`]: the typed template ([`Protocol`]) and the types a client library speaks
//!   ([`LockClient`], [`Grant`], [`Validity`], ...). Every protocol uses it; it knows none.
//! - [`registry`]: the [`Registry`] of protocols by id and the one type erasure
//!   ([`AnyProtocol`], [`Deployment`], [`Connector`]) the runner sees.
//! - [`redis`]: the Redis model (store, server, replication, Sentinel, the shared client
//!   core) and its protocols `single-redis`, `replicated-redis`, `redlock`.
//! - [`raft`]: the Raft host (raft-rs, its durable log, the safety audit, the client link)
//!   and its flavours `etcd` and `zookeeper`.
//! - [`resource`]: the fenced resource every run's clients write to.
//!
//! # Adding your own protocol
//! One folder (or file) with one [`Protocol`] implementation: its id, its `Params` (a serde
//! struct, parsed once with errors that name the field), the server nodes it starts, and its
//! client library; then one line, `registry.add(MyProtocol)`. Servers talk over
//! [`locksim_sim::rpc`]; clients time everything with their node's monotonic clock
//! ([`locksim_sim::NodeCtx::mono_now`]). `examples/custom_protocol.rs` in the repository is
//! the shortest complete example.

pub mod protocol;
pub mod raft;
pub mod redis;
pub mod registry;
pub mod resource;

pub use protocol::{
    parse_params, Acquired, ClientProfile, Grant, LockClient, LostSignal, NoParams, Outcome,
    ParamError, Protocol, Validity,
};
pub use registry::{AnyProtocol, Connector, Deployment, Registry};
