//! Roles a fault may target instead of a node: whoever has the role when the fault fires.
//!
//! `@servers` and `@clients` name every node of that kind (in random profiles' node lists,
//! and as the group a `pause_periodic` stops and starts together); the others are answered
//! by the deployment (`@primary`, `@leader`) or the workload (`@holder`) through
//! [`crate::World::answer_role`].

/// In a fault or a profile's node list: whoever a role names when the fault fires.
pub fn is_role(name: &str) -> bool {
    name.starts_with('@')
}

/// Every server.
pub const ROLE_SERVERS: &str = "@servers";
/// Every client.
pub const ROLE_CLIENTS: &str = "@clients";
/// Target: the node the deployment names primary now (replicated Redis: the primary of the
/// sentinels' newest configuration).
pub const ROLE_PRIMARY: &str = "@primary";
/// Target: the current leader (Raft).
pub const ROLE_LEADER: &str = "@leader";
/// Target: the client inside its critical section now (the first to enter, if several).
pub const ROLE_HOLDER: &str = "@holder";

/// Whether a name is a group role (`@servers`, `@clients`): every node of a kind, known
/// without asking the deployment.
pub fn is_group(name: &str) -> bool {
    name == ROLE_SERVERS || name == ROLE_CLIENTS
}
