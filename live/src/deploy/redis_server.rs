//! One `redis-server` on loopback: its command line (the model's persistence policy and
//! active expiry) and its readiness probe, shared by every Redis deployment.

use locksim_protocols::redis::server::Persistence;
use locksim_protocols::redis::store::Reply;
use std::time::Duration;

/// Ready when it answers `PING`.
pub fn redis_probe(port: u16) -> crate::deploy::servers::Probe {
    let addr = crate::deploy::servers::loopback(port);
    Box::new(move || {
        let pong = crate::links::resp::call(addr, &["PING"], Duration::from_millis(200));
        matches!(pong, Ok(Reply::Bulk(p)) if p == "PONG")
    })
}

/// The arguments of one redis-server on loopback with the model's persistence policy.
pub fn redis_args(
    port: u16,
    persistence: Persistence,
    active_expire_interval_ms: u64,
) -> Vec<String> {
    let (aof, fsync) = match persistence {
        Persistence::None => ("no", "no"),
        Persistence::Everysec => ("yes", "everysec"),
        Persistence::Always => ("yes", "always"),
    };
    // Redis runs its active expiry `hz` times a second (1..=500).
    let hz = (1000 / active_expire_interval_ms.max(2)).clamp(1, 500);
    let args = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--dir",
        ".",
        "--save",
        "",
        "--appendonly",
        aof,
        "--appendfsync",
        fsync,
        "--hz",
        &hz.to_string(),
        "--logfile",
        "",
    ];
    args.iter().map(|s| s.to_string()).collect()
}
