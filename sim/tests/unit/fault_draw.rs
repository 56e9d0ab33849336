//! The tests of `src/fault/draw.rs`.

use locksim_sim::fault::draw::*;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn sample(d: &mut dyn Draw) -> (usize, u64, i64, bool) {
    (d.index(3), d.u64_in(5, 9), d.i64_in(-4, 4), d.bool(0.5))
}

#[test]
fn the_seeded_stream_draws_within_ranges() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..200 {
        let (i, u, s, _) = sample(&mut rng);
        assert!(i < 3 && (5..=9).contains(&u) && (-4..=4).contains(&s));
        assert!((10..20).contains(&rng.below(10, 20)));
    }
}

#[test]
fn the_strategy_shrinks_every_choice_to_its_simplest_value() {
    let strategy = DrawStrategy::new(sample);
    let mut runner = TestRunner::deterministic();
    for _ in 0..20 {
        let mut tree = strategy.new_tree(&mut runner).unwrap();
        let (i, u, s, _) = tree.current();
        assert!(i < 3 && (5..=9).contains(&u) && (-4..=4).contains(&s));
        while tree.simplify() {}
        assert_eq!(tree.current(), (0, 5, 0, false));
    }
}

#[test]
fn complicate_undoes_a_step_that_went_too_far() {
    // "Fails" while the value is at least 7: shrinking must stop at exactly 7.
    let strategy = DrawStrategy::new(|d: &mut dyn Draw| d.u64_in(0, 1000));
    let mut runner = TestRunner::deterministic();
    let mut tree = strategy.new_tree(&mut runner).unwrap();
    while tree.current() < 7 {
        tree = strategy.new_tree(&mut runner).unwrap();
    }
    let mut smallest = tree.current();
    let mut moved = tree.simplify();
    while moved {
        if tree.current() >= 7 {
            smallest = tree.current();
            moved = tree.simplify();
        } else {
            moved = tree.complicate();
        }
    }
    assert_eq!(smallest, 7);
}
