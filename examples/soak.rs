//! Runs many seeds of one scenario in this process and reports CPU cost, simulated time per
//! wall second, and memory as it goes, to show that memory stays flat over long sweeps:
//!
//! ```sh
//! cargo run --release --example soak -- scenarios/catalog/redis-single-healthy.toml 10000
//! ```
//! It measures; it asserts nothing.

use locksim_protocols::Registry;
use std::time::Instant;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

// Wall-clock time is what this tool measures; it never feeds a simulation.
#[allow(clippy::disallowed_methods)]
fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "scenarios/catalog/redis-single-healthy.toml".into());
    let runs: u64 = args
        .next()
        .map_or(10_000, |n| n.parse().expect("a number of runs"));
    let prepared = locksim_scenarios::load(&path, &Registry::builtin()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let start = Instant::now();
    let (mut sim_ms, mut violations) = (0u64, 0u64);
    let step = (runs / 10).max(1);
    println!(
        "{:>8} {:>10} {:>12} {:>10}",
        "runs", "ms/run", "sim s/wall s", "RSS MiB"
    );
    for seed in 1..=runs {
        let r = prepared.run(seed);
        sim_ms += r.stats.sim_ms;
        violations += r.violated() as u64;
        if seed % step == 0 || seed == runs {
            let wall = start.elapsed().as_secs_f64();
            println!(
                "{seed:>8} {:>10.3} {:>12.0} {:>10.1}",
                wall * 1e3 / seed as f64,
                sim_ms as f64 / 1e3 / wall,
                rss_kib() as f64 / 1024.0
            );
        }
    }
    println!(
        "{runs} runs of {}, {violations} with a violation",
        prepared.scenario.name
    );
}
