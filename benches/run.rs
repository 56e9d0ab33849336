//! What one simulated run costs: `cargo bench -p locksim-benches --bench run`.
//!
//! Each iteration runs the next seed of a catalog scenario end to end (world, workload,
//! checker, trace hash), so the figure is the CPU time of one sweep step.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use locksim_protocols::Registry;

fn bench_scenario(c: &mut Criterion, name: &str) {
    let path = format!(
        "{}/../scenarios/catalog/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let prepared = locksim_scenarios::load(&path, &Registry::builtin()).expect("catalog loads");
    let mut seed = 0u64;
    c.bench_function(&format!("run/{name}"), |b| {
        b.iter(|| {
            seed += 1;
            prepared.run(seed)
        })
    });
}

fn runs(c: &mut Criterion) {
    bench_scenario(c, "redis-single-healthy");
    bench_scenario(c, "redis-single-gc-pause");
    // 5 Raft peers, 5 clients, 10 s simulated.
    bench_scenario(c, "etcd-healthy");
}

fn checker(c: &mut Criterion) {
    let path = format!(
        "{}/../scenarios/catalog/redis-single-healthy.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let prepared = locksim_scenarios::load(&path, &Registry::builtin()).expect("catalog loads");
    let (_, history) = prepared.run_with_history(1);
    c.bench_function("check/redis-single-healthy", |b| {
        b.iter(|| locksim_sim::check(&history))
    });
    c.bench_function("trace_hash/redis-single-healthy", |b| {
        b.iter(|| locksim_sim::history::trace_hash(&history))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = runs, checker
}
criterion_main!(benches);
