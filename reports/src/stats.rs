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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-5
    }

    #[test]
    fn wilson_on_known_cases() {
        // Reference values computed independently from the closed form (z = 1.959964).
        let (lo, hi) = wilson(0, 100);
        assert!(lo == 0.0 && close(hi, 0.036_993), "{lo} {hi}");
        let (lo, hi) = wilson(100, 100);
        assert!(close(lo, 0.963_005) && hi == 1.0, "{lo} {hi}");
        let (lo, hi) = wilson(27, 100);
        assert!(close(lo, 0.192_696) && close(hi, 0.364_321), "{lo} {hi}");
        let (lo, hi) = wilson(1, 2);
        assert!(close(lo, 0.094_531) && close(hi, 0.905_469), "{lo} {hi}");
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn share_text_and_overlap() {
        assert_eq!(Share::of(27, 100).text(), "27% (19–36%)");
        assert_eq!(Share::of(0, 100).text(), "0 of 100 (≤ 4%)");
        assert!(Share::of(30, 100).overlaps(&Share::of(36, 100)));
        assert!(!Share::of(0, 100).overlaps(&Share::of(50, 100)));
    }

    #[test]
    fn overlapping_intervals_share_a_rank() {
        let r = ranks(&[
            Share::of(30, 100),
            Share::of(34, 100),
            Share::of(0, 100),
            Share::of(90, 100),
        ]);
        assert_eq!(r, vec![2, 2, 1, 4]);
        // A chain of overlaps is one group, though its ends do not overlap.
        let chain = [(0.0, 0.10), (0.08, 0.20), (0.18, 0.30), (0.31, 0.4)].map(|(lo, hi)| Share {
            k: 1,
            n: 1,
            lo,
            hi,
        });
        assert_eq!(ranks(&chain), vec![1, 1, 1, 4]);
    }
}
