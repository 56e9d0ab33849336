//! The tests of `src/clock.rs`.

use locksim_sim::clock::*;
use std::time::Duration;

#[test]
fn no_drift_tracks_true_time() {
    let c = NodeClock::new(0, 5_000);
    assert_eq!(c.mono_ns(1_000_000), 1_000_000);
    assert_eq!(c.wall_ns(1_000_000), 1_005_000);
}

#[test]
fn drift_scales_elapsed_time() {
    let fast = NodeClock::new(1_000, 0); // 0.1% fast
    assert_eq!(fast.mono_ns(1_000_000_000), 1_001_000_000);
    let slow = NodeClock::new(-1_000, 0);
    assert_eq!(slow.mono_ns(1_000_000_000), 999_000_000);
}

#[test]
fn changing_drift_keeps_readings_continuous() {
    let mut c = NodeClock::new(0, 0);
    c.set_drift(1_000_000_000, 100_000); // 10% fast from t = 1 s
    assert_eq!(c.mono_ns(1_000_000_000), 1_000_000_000);
    assert_eq!(c.mono_ns(2_000_000_000), 2_100_000_000);
}

#[test]
fn backward_jump_moves_wall_not_monotonic() {
    let mut c = NodeClock::new(0, 0);
    let before_wall = c.wall_ns(10_000_000);
    let before_mono = c.mono_ns(10_000_000);
    c.jump(-5_000_000);
    assert_eq!(c.wall_ns(10_000_000), before_wall - 5_000_000);
    assert_eq!(c.mono_ns(10_000_000), before_mono);
    // The wall clock now reads less than it did: time went backwards for Redis.
    assert!(c.wall_ns(12_000_000) < before_wall);
}

#[test]
fn local_sleep_honours_drift() {
    // A clock running 10% fast reaches +110 ms local after 100 ms true.
    let c = NodeClock::new(100_000, 0);
    assert_eq!(
        c.true_duration(Duration::from_millis(110)),
        Duration::from_millis(100)
    );
    let slow = NodeClock::new(-100_000, 0);
    assert_eq!(
        slow.true_duration(Duration::from_millis(90)),
        Duration::from_millis(100)
    );
    // Rounded up: never early.
    let d = c.true_duration(Duration::from_nanos(1));
    assert!(c.mono_ns(d.as_nanos() as u64) >= 1);
}

#[test]
fn true_time_at_a_monotonic_reading() {
    let c = NodeClock::new(-500_000 + 1, 0);
    let t = c.true_ns_at_mono(0, 1_000_000);
    assert!(c.mono_ns(t) >= 1_000_000);
    assert!(c.mono_ns(t - 1) < 1_000_000);
}
