//! What a lock costs, beside what it guarantees: per row, measured by the simulator under the
//! matrix's network.
//!
//! - **Uncontended acquire** (p50, p99): one client alone, no faults; each run's median and
//!   99th percentile from acquire invoke to grant, averaged over the runs. This is the price of
//!   one lock round trip (quorums, fsyncs, `WAIT` included), not a queueing figure.
//! - **Messages and fsyncs per acquisition**: from the same runs, the lock's own traffic (the
//!   resource's excluded) and the lock servers' fsyncs, divided by the grants: heartbeats,
//!   keep-alives and replication are part of the price.
//! - **Handoffs per second**: grants per simulated second with the row's clients contending,
//!   under the fault-free profile.
//! - **Time stuck**: ms per simulated second in which some client wanted the lock while no
//!   live client held it, under the reference profile (`mixed`): a crashed holder's TTL, an
//!   election, a lost session.

use crate::CellSummary;
use serde::{Deserialize, Serialize};

/// The cost of one row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cost {
    /// Uncontended acquire latency, median (mean over runs of each run's), in ms.
    pub acquire_ms_p50: f64,
    /// Uncontended acquire latency, 99th percentile (mean over runs of each run's), in ms.
    pub acquire_ms_p99: f64,
    /// 95% interval of `acquire_ms_p50` over the runs (Student's; `None` below 2 runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquire_ms_p50_ci95: Option<[f64; 2]>,
    /// 95% interval of `acquire_ms_p99`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquire_ms_p99_ci95: Option<[f64; 2]>,
    /// Grants per simulated second with the row's clients contending, no faults (`None`
    /// without a fault-free profile).
    pub handoffs_per_s: Option<f64>,
    /// 95% interval of `handoffs_per_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoffs_per_s_ci95: Option<[f64; 2]>,
    /// Lock messages per acquisition, uncontended.
    pub messages_per_acquire: f64,
    /// Lock-server fsyncs per acquisition, uncontended.
    pub fsyncs_per_acquire: f64,
    /// Time stuck (wanted while free) per simulated second under `stuck_profile`, in ms.
    pub stuck_ms_per_s: Option<f64>,
    /// 95% interval of `stuck_ms_per_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stuck_ms_per_s_ci95: Option<[f64; 2]>,
    /// The profile the handoffs were measured under.
    pub contended_profile: String,
    /// The profile the time stuck was measured under.
    pub stuck_profile: String,
    /// Uncontended runs measured.
    pub runs: u64,
    /// Their seeds.
    pub seeds: String,
    /// The real system's acquire latency on loopback, where `compare --validation` gave one.
    pub live: Option<LiveLatency>,
}

/// A protocol's acquire latency against its real servers on loopback (`locksim validate`'s
/// live runs of its healthy validation scenario), beside the simulator's on the same scenario:
/// both contended, so the pair is comparable where the uncontended figure is not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LiveLatency {
    /// The validation scenario (`v-…-healthy`).
    pub scenario: String,
    /// Live: median over the live runs of each run's median acquire latency, in ms.
    pub acquire_ms_p50: f64,
    /// Simulated, same scenario and statistic, in ms.
    pub sim_acquire_ms_p50: f64,
    /// Live runs behind it.
    pub runs: u64,
    /// Live: the servers' fsyncs per grant, pooled over the live runs that counted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsyncs_per_grant: Option<f64>,
    /// Simulated, same scenario and statistic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_fsyncs_per_grant: Option<f64>,
}

fn per_s(x: f64, cell: &CellSummary) -> Option<f64> {
    (cell.sim_ms_mean > 0.0).then(|| x / (cell.sim_ms_mean / 1e3))
}

/// A per-run interval as a rate per simulated second: every run of a cell simulates the same
/// duration (the scenario's), so dividing by the mean is dividing each run's figure by it.
fn per_s_interval(x: Option<[f64; 2]>, cell: &CellSummary) -> Option<[f64; 2]> {
    let [lo, hi] = x?;
    let round = |v: f64| (v * 1e3).round() / 1e3;
    Some([round(per_s(lo, cell)?), round(per_s(hi, cell)?)])
}

impl Cost {
    /// The cost from the uncontended runs, the contended fault-free cell and the reference
    /// cell (each where there is one).
    pub fn of(
        uncontended: &CellSummary,
        contended: Option<&CellSummary>,
        reference: Option<&CellSummary>,
    ) -> Cost {
        let cost = Cost {
            acquire_ms_p50: uncontended.acquire_latency_ms_p50_mean,
            acquire_ms_p99: uncontended.acquire_latency_ms_p99_mean,
            acquire_ms_p50_ci95: uncontended.acquire_latency_ms_p50_ci95,
            acquire_ms_p99_ci95: uncontended.acquire_latency_ms_p99_ci95,
            handoffs_per_s: contended.and_then(|c| per_s(c.acquisitions_mean, c)),
            handoffs_per_s_ci95: contended.and_then(|c| per_s_interval(c.acquisitions_ci95, c)),
            stuck_ms_per_s_ci95: reference.and_then(|c| per_s_interval(c.wanted_free_ms_ci95, c)),
            messages_per_acquire: uncontended.lock_messages_per_acquire.unwrap_or(0.0),
            fsyncs_per_acquire: uncontended.server_fsyncs_per_acquire.unwrap_or(0.0),
            stuck_ms_per_s: reference.and_then(|c| per_s(c.wanted_free_ms_mean, c)),
            contended_profile: contended.map_or(String::new(), |c| c.profile.clone()),
            stuck_profile: reference.map_or(String::new(), |c| c.profile.clone()),
            runs: uncontended.runs,
            seeds: uncontended.seeds.clone(),
            live: None,
        };
        assert!(
            cost.acquire_ms_p50 <= cost.acquire_ms_p99 + 1e-9,
            "{cost:?}"
        );
        cost
    }

    /// Whether it was measured at all (some uncontended acquire succeeded).
    pub fn measured(&self) -> bool {
        self.acquire_ms_p50 > 0.0
    }
}

/// A figure with its 95% interval's half-width for tables (`6.2 ±0.3`): `–` where there is
/// none.
pub fn figure_ci(x: Option<f64>, ci: Option<[f64; 2]>, decimals: usize) -> String {
    x.map_or("–".into(), |v| {
        crate::stats::with_interval(v, ci, decimals)
    })
}
