//! The engine's speed against madsim's own: `cargo bench -p locksim-benches --bench speed`.
//!
//! In one process, one thread, it measures madsim's bare `Endpoint` ping-pong (two nodes, one
//! message in flight, nothing else) and then locksim's healthy catalog scenarios end to end
//! (world, workload, checker, trace hash). Each figure is the median of three repetitions of
//! the thread's own CPU time (`getrusage(RUSAGE_THREAD)`, which madsim does not intercept), so
//! other processes on the machine slow the wall clock but not the figures much. Printed: CPU
//! per run, messages per run, messages per CPU-second, the ratio to the ping-pong's rate, and
//! simulated time per CPU time.
//!
//! `LOCKSIM_SPEED_SCALE=0.1` shortens every workload tenfold (a quick look, noisier).

// A bench binary: no public API to document.
#![allow(missing_docs)]

use locksim_protocols::Registry;
use std::net::SocketAddr;

/// The allocator of the `locksim` binary (src/main.rs), so that these figures are the
/// binary's; madsim's ping-pong runs on it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Duration;

/// Messages in madsim's ping-pong (each round trip is two).
const PING_PONG_MESSAGES: u64 = 400_000;

/// Each scenario and the seeds it runs per repetition (about a second of CPU each).
const SCENARIOS: [(&str, u64); 4] = [
    ("redlock-healthy", 200),
    ("redis-single-healthy", 300),
    ("etcd-healthy", 40),
    ("zookeeper-healthy", 40),
];

const REPETITIONS: usize = 3;

/// This thread's CPU time so far, in seconds (user + system).
fn thread_cpu_s() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the pointer it is given.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()), 0);
        usage.assume_init()
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(usage.ru_utime) + s(usage.ru_stime)
}

/// The median CPU time of `REPETITIONS` calls of `work`, with what the last call returned.
fn median_cpu_s<T>(mut work: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..REPETITIONS {
        let start = thread_cpu_s();
        last = Some(work());
        times.push(thread_cpu_s() - start);
    }
    times.sort_by(f64::total_cmp);
    (times[REPETITIONS / 2], last.unwrap())
}

/// madsim's two-node ping-pong over `Endpoint`; returns the messages delivered.
fn ping_pong(messages: u64) -> u64 {
    use madsim::net::Endpoint;
    let runtime = madsim::runtime::Runtime::with_seed_and_config(1, Default::default());
    let server_addr: SocketAddr = "10.0.0.1:1".parse().unwrap();
    let client_addr: SocketAddr = "10.0.0.2:1".parse().unwrap();
    let server = runtime.create_node().ip(server_addr.ip()).build();
    let client = runtime.create_node().ip(client_addr.ip()).build();
    let rounds = messages / 2;
    server.spawn(async move {
        let net = Endpoint::bind(server_addr).await.unwrap();
        let mut buf = [0u8; 8];
        for _ in 0..rounds {
            let (len, from) = net.recv_from(1, &mut buf).await.unwrap();
            net.send_to(from, 2, &buf[..len]).await.unwrap();
        }
    });
    let done = client.spawn(async move {
        let net = Endpoint::bind(client_addr).await.unwrap();
        // The server binds first: a message to an unbound address would be lost.
        madsim::time::sleep(Duration::from_millis(10)).await;
        let mut buf = [0u8; 8];
        let mut delivered = 0;
        for i in 0..rounds {
            net.send_to(server_addr, 1, &i.to_le_bytes()).await.unwrap();
            let len = net.recv_from(2, &mut buf).await.unwrap().0;
            assert_eq!(buf[..len], i.to_le_bytes(), "the echo of round {i}");
            delivered += 2;
        }
        delivered
    });
    runtime.block_on(done).unwrap()
}

/// Totals over one repetition's seeds of a scenario.
struct Totals {
    runs: u64,
    messages: u64,
    events: u64,
    sim_ms: u64,
}

fn run_seeds(name: &str, seeds: u64) -> Totals {
    let path = format!(
        "{}/../scenarios/catalog/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let prepared = locksim_scenarios::load(&path, &Registry::builtin()).expect("catalog loads");
    let mut t = Totals {
        runs: 0,
        messages: 0,
        events: 0,
        sim_ms: 0,
    };
    for seed in 1..=seeds {
        let r = prepared.run(seed);
        assert!(r.error.is_none(), "{name} seed {seed}: {:?}", r.error);
        t.runs += 1;
        t.messages += r
            .stats
            .messages
            .expect("a simulated run counts its messages");
        t.events += r.stats.events;
        t.sim_ms += r.stats.sim_ms;
    }
    t
}

fn scaled(n: u64, scale: f64) -> u64 {
    ((n as f64 * scale).round() as u64).max(1)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test -p locksim-benches --benches` runs it once, tiny, as a smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let scale: f64 = match std::env::var("LOCKSIM_SPEED_SCALE") {
        Ok(s) => s.parse().expect("LOCKSIM_SPEED_SCALE is a number"),
        Err(_) if smoke => 0.005,
        Err(_) => 1.0,
    };
    let (cpu_s, delivered) = median_cpu_s(|| ping_pong(scaled(PING_PONG_MESSAGES, scale)));
    let madsim_rate = delivered as f64 / cpu_s;
    println!("| workload | CPU per run | messages per run | events per CPU-second | messages per CPU-second | vs madsim's bare ping-pong | simulated / CPU time |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| madsim 0.2.34, two nodes, `Endpoint` ping-pong, {delivered} messages | {:.3} s | — | — | {:.2} M | 1.00× | — |",
        cpu_s,
        madsim_rate / 1e6
    );
    for (name, seeds) in SCENARIOS {
        let seeds = scaled(seeds, scale);
        let (cpu_s, t) = median_cpu_s(|| run_seeds(name, seeds));
        let rate = t.messages as f64 / cpu_s;
        println!(
            "| `{name}` ({} seeds) | {:.2} ms | {} | {:.2} M | {:.2} M | **{:.2}×** | {:.0}× |",
            t.runs,
            cpu_s * 1e3 / t.runs as f64,
            t.messages / t.runs,
            t.events as f64 / cpu_s / 1e6,
            rate / 1e6,
            rate / madsim_rate,
            t.sim_ms as f64 / 1e3 / cpu_s
        );
    }
    println!(
        "\n(medians of {REPETITIONS} repetitions of this thread's CPU time; scale {scale}; `cargo bench -p locksim-benches --bench speed`)"
    );
}
