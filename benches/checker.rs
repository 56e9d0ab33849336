//! The checker on large synthetic histories: a lock that lets 100,000 clients into the
//! critical section at once (1,000,000 events, ~5·10⁹ overlapping pairs), and a healthy
//! history of 200,000 events.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use locksim_check::synthetic::{history, Shape};
use locksim_check::{check, Property};
use std::time::Duration;

fn checker(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let broken = history(100_000, Shape::Simultaneous);
    assert_eq!(broken.len(), 1_000_000);
    let pairs = check(&broken)
        .result(Property::MutualExclusion)
        .unwrap()
        .violation_count;
    assert_eq!(pairs, 100_000 * 99_999 / 2);
    group.bench_function("1M events, 100k simultaneous sections", |b| {
        b.iter(|| check(&broken))
    });
    let healthy = history(20_000, Shape::Sequential);
    assert_eq!(healthy.len(), 200_000);
    assert_eq!(check(&healthy).verdict, locksim_check::Verdict::Valid);
    group.bench_function("200k events, healthy", |b| b.iter(|| check(&healthy)));
    group.finish();
}

criterion_group!(benches, checker);
criterion_main!(benches);
