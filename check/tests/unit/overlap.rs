//! The tests of `src/overlap.rs`.

use locksim_check::overlap::*;

fn span(start: u64, end: u64, group: u32) -> Span {
    Span { start, end, group }
}

#[test]
fn counts_every_pair_of_simultaneous_spans_and_keeps_few() {
    let spans: Vec<Span> = (0..1000).map(|g| span(10, 20, g)).collect();
    let found = overlapping_pairs(&spans, 3);
    assert_eq!(found.pairs, 1000 * 999 / 2);
    assert_eq!(found.first, vec![(0, 1), (0, 2), (1, 2)]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 500,
        failure_persistence: None,
        ..Default::default()
    })]

    #[test]
    fn the_sweep_counts_what_comparing_every_pair_counts(
        raw in proptest::collection::vec((0..20u64, 0..20u64, 0..4u32), 0..30)
    ) {
        let spans: Vec<Span> = raw.iter().map(|&(s, e, g)| span(s, e, g)).collect();
        let mut pairs = vec![];
        for (i, a) in spans.iter().enumerate() {
            for (j, b) in spans.iter().enumerate().skip(i + 1) {
                if a.overlaps(b) {
                    pairs.push((i, j));
                }
            }
        }
        let found = overlapping_pairs(&spans, 1_000);
        proptest::prop_assert_eq!(found.pairs, pairs.len() as u64);
        let mut first: Vec<(usize, usize)> =
            found.first.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
        first.sort_unstable();
        proptest::prop_assert_eq!(first, pairs);
    }
}

#[test]
fn touching_empty_and_same_group_spans_do_not_count() {
    let spans = [
        span(0, 10, 0),
        span(10, 20, 1),
        span(5, 5, 2),
        span(2, 8, 0),
    ];
    let found = overlapping_pairs(&spans, 10);
    assert_eq!(found.pairs, 0);
    assert!(found.first.is_empty());
}
