//! The Raft family: one host for every replicated lock service, and its flavours.
//!
//! - [`host`]: raft-rs's `RawNode` driven as a pure state machine on simulated nodes, a
//!   [`host::Service`] applied from its log;
//! - [`log`]: the log and hard state on the node's disk; [`audit`]: one leader per term, one
//!   entry per applied index, across the peers of a run; [`client`]: the client's link to the
//!   cluster (one member at a time); [`forward`]: the requests a member forwards to the
//!   leader and waits on;
//! - [`etcd`]: etcd's lessor and `concurrency.Mutex`; [`zookeeper`]: ZooKeeper's sessions,
//!   ephemeral sequential nodes and the lock recipe.
//!
//! A new flavour is a folder here: its params, its [`host::Service`], its client, and its
//! [`crate::Protocol`] in `mod.rs`; then one line in `crate::registry`.

pub mod audit;
pub mod client;
pub mod etcd;
pub mod forward;
pub mod host;
pub mod log;
pub mod zookeeper;
