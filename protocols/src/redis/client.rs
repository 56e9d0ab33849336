//! What every Redis lock client does alike: a unique value per attempt, the clock-drift
//! allowance of the Redis distributed-locks page, and the validity that leaves.

use crate::ParamError;
use locksim_sim::NodeCtx;
use rand::Rng;
use std::time::Duration;

/// A fresh lock value, unique per attempt (real clients use 20 random bytes; unique is what
/// matters: compare-and-delete must never match another attempt's key).
pub fn lock_value(ctx: &NodeCtx) -> String {
    let n: u64 = madsim::rand::thread_rng().gen();
    format!("{}:{n:016x}", ctx.name())
}

/// The drift allowance in ms: ttl × `clock_drift_factor` + 2 ms.
pub fn drift_allowance_ms(ttl_ms: u64, clock_drift_factor: f64) -> f64 {
    ttl_ms as f64 * clock_drift_factor + 2.0
}

/// The validity a grant gets, from the start of the attempt: ttl − drift allowance.
pub fn validity(ttl_ms: u64, clock_drift_factor: f64) -> Duration {
    let drift_ms = drift_allowance_ms(ttl_ms, clock_drift_factor);
    Duration::from_micros(((ttl_ms as f64 - drift_ms).max(0.0) * 1000.0) as u64)
}

/// Checks a `clock_drift_factor` parameter.
pub fn check_drift_factor(clock_drift_factor: f64) -> Result<(), ParamError> {
    if (0.0..1.0).contains(&clock_drift_factor) {
        Ok(())
    } else {
        Err(ParamError::field("clock_drift_factor", "must be in [0, 1)"))
    }
}
