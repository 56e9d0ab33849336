//! Consensus runs are functions of (scenario, seed): the same trace hash in this process and
//! in two fresh `locksim` processes, for runs with elections (randomised timeouts drawn from
//! the seed, not from raft-rs's `thread_rng`), crashes, restarts from disk and partitions.

use crate::common;

use common::{code, in_repo, stdout};
use locksim_protocols::Registry;

const FILES: [&str; 4] = [
    "scenarios/catalog/etcd-leader-crash.toml",
    "scenarios/catalog/etcd-partition.toml",
    "scenarios/catalog/raft-ack-before-fsync.toml",
    "scenarios/catalog/zookeeper-ignore-suspended.toml",
];

fn hash_in_a_fresh_process(file: &str, seed: u64) -> String {
    let seed = seed.to_string();
    let out = in_repo(&["run", file, "--seed", &seed, "--json"]);
    assert!(code(&out) <= 1, "{file} --seed {seed}: {}", stdout(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    json["trace_hash"]
        .as_str()
        .expect("a trace hash")
        .to_owned()
}

#[test]
fn consensus_runs_have_the_same_trace_hash_in_every_process() {
    for file in FILES {
        let prepared = locksim_scenarios::load(&common::repo(file), &Registry::builtin())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut hashes = std::collections::BTreeSet::new();
        for seed in 1..=3 {
            let here = locksim_scenarios::runner::isolated(|| prepared.run(seed)).trace_hash;
            let first = hash_in_a_fresh_process(file, seed);
            let second = hash_in_a_fresh_process(file, seed);
            assert_eq!(first, second, "{file} --seed {seed}: two processes differ");
            assert_eq!(here, first, "{file} --seed {seed}: this process differs");
            hashes.insert(first);
        }
        // The seed matters: different seeds, different runs.
        assert_eq!(hashes.len(), 3, "{file}: seeds 1..=3 gave the same trace");
    }
}
