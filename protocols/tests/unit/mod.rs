//! The models' own tests, module by module: their parameters, arithmetic and state
//! machines (each named after the file it tests).

mod etcd_params;
mod etcd_profile;
mod redis_client;
mod redlock;
mod registry;
mod replication;
mod store;
mod zookeeper_params;
mod zookeeper_tree;
