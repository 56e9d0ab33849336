//! Real time for live runs: one monotonic clock for every process of a run.
//!
//! `CLOCK_MONOTONIC` is system-wide on Linux, so the parent and every client process read
//! the same clock; each stamps its own events with `now_ns() - start_ns` and the parent
//! merges them. The workspace builds with `--cfg madsim`, under which madsim replaces libc's
//! `clock_gettime` (and `getrandom`) in the binary; its replacement answers with simulated
//! time only inside a madsim runtime and otherwise calls the real function through
//! `dlsym(RTLD_NEXT, ...)` (madsim 0.2.34, `src/sim/time/system_time.rs`). [`assert_real`]
//! makes sure live code never runs inside one.

use std::time::Duration;

/// Panics if called inside a madsim runtime: live code must read the machine's clock.
pub fn assert_real() {
    assert!(
        madsim::runtime::Handle::try_current().is_err(),
        "live mode runs in real time: it must not run inside a madsim runtime"
    );
}

/// `clock`'s reading, in ns.
fn read_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime fails only on a bad clock id");
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The machine's monotonic clock, in ns (the same clock in every process).
pub fn now_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC) as u64
}

/// Sleeps in real time (a live run waits for real servers; nothing here is simulated).
#[allow(clippy::disallowed_methods)]
pub fn sleep(d: Duration) {
    std::thread::sleep(d);
}

/// The time since `start_ns` on the monotonic clock.
pub fn since(start_ns: u64) -> Duration {
    Duration::from_nanos(now_ns().saturating_sub(start_ns))
}

/// The machine's wall clock, in ms since the Unix epoch (what a live node's `wall_ms` reads).
pub fn wall_ms() -> i64 {
    read_ns(libc::CLOCK_REALTIME).div_euclid(1_000_000)
}
