//! The tests of `src/stats.rs`.

use locksim_reports::stats::*;

#[test]
fn a_mean_interval_is_students_and_needs_two_runs() {
    // 1, 2, 3, 4, 5: mean 3, s = 1.5811, t(4) = 2.776: 3 ± 1.963.
    let [lo, hi] = mean_interval(5, 15, 55, 1.0).unwrap();
    assert!(
        (lo - 1.037).abs() < 1e-3 && (hi - 4.963).abs() < 1e-3,
        "{lo} {hi}"
    );
    // In ms from µs, and clipped at 0 below.
    assert_eq!(mean_interval(2, 1000, 1_000_000, 1e3), Some([0.0, 6.853]));
    assert_eq!(
        mean_interval(3, 30, 300, 1.0),
        Some([10.0, 10.0]),
        "runs alike"
    );
    assert_eq!(mean_interval(1, 7, 49, 1.0), None);
    assert_eq!(with_interval(3.0, Some([1.037, 4.963]), 1), "3.0 ±2.0");
    assert_eq!(with_interval(3.0, None, 1), "3.0");
    assert!((t95(31) - 2.040).abs() < 1e-3 && (t95(1000) - 1.962).abs() < 1e-3);
}

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
