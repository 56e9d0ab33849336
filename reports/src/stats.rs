//! Shares of runs with 95% confidence intervals, and rankings that refuse to order what the data cannot tell apart.
//!
//! A share is `k` of `n` runs. Its interval is Wilson's score interval (Wilson 1927; the
//! interval Brown, Cai and DasGupta 2001 recommend for binomial proportions): unlike the
//! textbook `p ± 1.96·sqrt(p(1-p)/n)` it stays inside [0, 1] and does not collapse to a point
//! at 0 of n or n of n, where most cells of a lock comparison sit.

use serde::{Deserialize, Serialize};

/// The normal quantile of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// `k` of `n` runs, with the 95% Wilson interval `[lo, hi]` of the share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Runs that showed it.
    pub k: u64,
    /// Runs in all.
    pub n: u64,
    /// Lower end of the 95% interval, in [0, 1].
    pub lo: f64,
    /// Upper end of the 95% interval, in [0, 1].
    pub hi: f64,
}

/// Wilson's 95% score interval for `k` successes in `n` trials; `(0, 1)` when `n` is 0.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    assert!(k <= n, "{k} of {n}");
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n_f, p) = (n as f64, k as f64 / n as f64);
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denom;
    let half = Z95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    // At k = 0 (k = n) the lower (upper) end is exactly 0 (1); rounding must not move it.
    let lo = if k == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if k == n {
        1.0
    } else {
        (center + half).min(1.0)
    };
    (lo, hi)
}

impl Share {
    /// `k` of `n`, with its interval.
    pub fn of(k: u64, n: u64) -> Share {
        let (lo, hi) = wilson(k, n);
        // Four decimals (a hundredth of a point) are all a report needs, and they survive a
        // JSON round trip exactly.
        let round = |x: f64| (x * 1e4).round() / 1e4;
        Share {
            k,
            n,
            lo: round(lo),
            hi: round(hi),
        }
    }

    /// The share itself, `k / n` (0 when there are no runs).
    pub fn rate(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.k as f64 / self.n as f64
        }
    }

    /// Half the interval's width: the "± points" of the share.
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// Whether the two intervals overlap: then the data does not say which share is larger.
    pub fn overlaps(&self, other: &Share) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// For people: `27% (19–36%)`; `0 of 40 (≤ 9%)` when nothing was seen.
    pub fn text(&self) -> String {
        if self.n == 0 {
            return "no runs".into();
        }
        if self.k == 0 {
            return format!("0 of {} (≤ {})", self.n, pct(self.hi));
        }
        format!(
            "{} ({}–{})",
            pct(self.rate()),
            pct_bare(self.lo),
            pct(self.hi)
        )
    }
}

/// Student's t quantile for a two-sided 95% interval with `df` degrees of freedom (`df` ≥ 1):
/// the table's values to 30, then the normal quantile with the first two Cornish–Fisher
/// terms (within 0.001 of the exact value from 31 on).
pub fn t95(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    assert!(df >= 1, "t quantile without degrees of freedom");
    match TABLE.get(df as usize - 1) {
        Some(t) => *t,
        None => {
            let (z, d) = (Z95, df as f64);
            z + (z.powi(3) + z) / (4.0 * d)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

/// The 95% interval of a mean over `n` runs from the runs' sum and sum of squares (integers,
/// so that the figures do not depend on the order the runs came in), in the sums' unit
/// divided by `scale`: `mean ± t·s/√n`, Student's interval for a mean. `None` below 2 runs,
/// where nothing says how much runs differ.
pub fn mean_interval(n: u64, sum: u64, sum_sq: u128, scale: f64) -> Option<[f64; 2]> {
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mean = sum as f64 / nf;
    // (Σx² − n·mean²) / (n − 1), exact in integers up to the final division.
    let centred = (sum_sq as f64 - sum as f64 * mean).max(0.0);
    let sd = (centred / (nf - 1.0)).sqrt();
    let half = t95(n - 1) * sd / nf.sqrt();
    let round = |x: f64| (x / scale * 1e3).round() / 1e3;
    Some([round((mean - half).max(0.0)), round(mean + half)])
}

/// A figure (the interval's mean) with the interval's half-width, for tables: `6.2 ±0.3`;
/// the figure alone without an interval.
pub fn with_interval(x: f64, interval: Option<[f64; 2]>, decimals: usize) -> String {
    match interval {
        // The upper end is never clipped (the lower may be, at 0): its distance is the half-width.
        Some([_, hi]) => format!("{x:.decimals$} ±{:.decimals$}", hi - x),
        None => format!("{x:.decimals$}"),
    }
}

/// A rate as a whole percentage (one decimal below 1%).
pub fn pct(rate: f64) -> String {
    format!("{}%", pct_bare(rate))
}

fn pct_bare(rate: f64) -> String {
    let p = rate * 100.0;
    if p > 0.0 && p < 1.0 {
        format!("{p:.1}")
    } else {
        format!("{p:.0}")
    }
}

/// Ranks of shares, lower is better. Shares whose intervals overlap, directly or through a
/// chain of overlapping intervals, share a rank: the data does not order them. Between
/// different ranks every interval of the better lies wholly below every interval of the
/// worse. A rank is 1 + the number of shares ranked better.
pub fn ranks(shares: &[Share]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|a, b| shares[*a].lo.total_cmp(&shares[*b].lo));
    let mut ranks = vec![0; shares.len()];
    let (mut rank, mut reach, mut seen) = (1, f64::NEG_INFINITY, 0);
    for i in order {
        // The union of the intervals so far ends at `reach`: one starting past it begins
        // a new group, worse than everything before.
        if shares[i].lo > reach {
            rank = seen + 1;
        }
        reach = reach.max(shares[i].hi);
        ranks[i] = rank;
        seen += 1;
    }
    ranks
}
