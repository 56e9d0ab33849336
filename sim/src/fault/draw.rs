//! One way to draw a random fault, two ways to sample it.
//!
//! Each fault kind writes its random draw once, as a function of a [`Draw`] (`fn
//! draw(&self, space, d) -> Fault`). The random profile samples it from its own ChaCha
//! stream ([`ChaCha8Rng`] implements [`Draw`] with exactly the calls the profile always
//! made, so schedules drawn from a seed never change); the fault search samples it through
//! [`DrawStrategy`], a proptest [`Strategy`] that records every choice the draw made and
//! shrinks them one by one (each towards its simplest value: the lowest of a range, the
//! first of a list, `false`), replaying the draw on the shrunk choices. So the generator and
//! the search cannot disagree about what a kind's faults look like.

use proptest::num::i64::BinarySearch;
use proptest::prelude::RngExt;
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::sync::Arc;

/// The random choices a fault's draw can make. Each kind's draw calls these in a fixed
/// order; the values come from a seeded stream or from proptest.
pub trait Draw {
    /// An index in `0..len` (`len` > 0).
    fn index(&mut self, len: usize) -> usize;
    /// A number in `lo..hi` (`lo` < `hi`): a start time.
    fn below(&mut self, lo: u64, hi: u64) -> u64;
    /// A number in `lo..=hi`.
    fn u64_in(&mut self, lo: u64, hi: u64) -> u64;
    /// A number in `lo..=hi`.
    fn i64_in(&mut self, lo: i64, hi: i64) -> i64;
    /// `true` with probability `p`.
    fn bool(&mut self, p: f64) -> bool;
}

/// One of `items` (not empty).
pub fn pick<T: Clone>(d: &mut dyn Draw, items: &[T]) -> T {
    assert!(!items.is_empty(), "a pick needs something to pick");
    items[d.index(items.len())].clone()
}

/// The random profile's stream: the same calls, in the same order, as ever.
impl Draw for ChaCha8Rng {
    fn index(&mut self, len: usize) -> usize {
        self.gen_range(0..len)
    }
    fn below(&mut self, lo: u64, hi: u64) -> u64 {
        self.gen_range(lo..hi)
    }
    fn u64_in(&mut self, lo: u64, hi: u64) -> u64 {
        self.gen_range(lo..=hi)
    }
    fn i64_in(&mut self, lo: i64, hi: i64) -> i64 {
        self.gen_range(lo..=hi)
    }
    fn bool(&mut self, p: f64) -> bool {
        self.gen_bool(p)
    }
}

/// One recorded choice: its range and a binary search from the drawn value towards the
/// range's simplest value (0 if inside it, else the bound nearest 0).
#[derive(Clone, Copy, Debug)]
struct Choice {
    target: i64,
    lo: i64,
    hi: i64,
    offset: BinarySearch,
}

impl Choice {
    fn new(lo: i64, hi: i64, value: i64) -> Self {
        assert!(lo <= value && value <= hi, "{value} outside {lo}..={hi}");
        let target = 0.clamp(lo, hi);
        Choice {
            target,
            lo,
            hi,
            offset: BinarySearch::new(value - target),
        }
    }

    fn value(&self) -> i64 {
        (self.target + self.offset.current()).clamp(self.lo, self.hi)
    }
}

/// Records the choices of a first draw, from proptest's RNG.
struct Recorder<'a> {
    runner: &'a mut TestRunner,
    choices: Vec<Choice>,
}

impl Recorder<'_> {
    fn record(&mut self, lo: i64, hi: i64) -> i64 {
        let value = self.runner.rng().random_range(lo..=hi);
        self.choices.push(Choice::new(lo, hi, value));
        value
    }
}

/// Replays recorded (and shrunk) choices; a choice the draw did not make before (its
/// structure changed as an earlier choice shrank) takes its simplest value.
struct Replay<'a> {
    choices: &'a [Choice],
    next: usize,
}

impl Replay<'_> {
    fn replay(&mut self, lo: i64, hi: i64) -> i64 {
        let choice = self.choices.get(self.next);
        self.next += 1;
        choice.map_or(0, Choice::value).clamp(lo, hi)
    }
}

/// Both sides see the same integer ranges.
trait Chooser {
    fn choose(&mut self, lo: i64, hi: i64) -> i64;
}

impl Chooser for Recorder<'_> {
    fn choose(&mut self, lo: i64, hi: i64) -> i64 {
        self.record(lo, hi)
    }
}

impl Chooser for Replay<'_> {
    fn choose(&mut self, lo: i64, hi: i64) -> i64 {
        self.replay(lo, hi)
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).expect("fault ranges fit in i64")
}

impl<C: Chooser> Draw for C {
    fn index(&mut self, len: usize) -> usize {
        assert!(len > 0);
        self.choose(0, to_i64(len as u64) - 1) as usize
    }
    fn below(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo < hi);
        self.choose(to_i64(lo), to_i64(hi) - 1) as u64
    }
    fn u64_in(&mut self, lo: u64, hi: u64) -> u64 {
        self.choose(to_i64(lo), to_i64(hi)) as u64
    }
    fn i64_in(&mut self, lo: i64, hi: i64) -> i64 {
        self.choose(lo, hi)
    }
    fn bool(&mut self, _p: f64) -> bool {
        // Shrinks towards `false`; proptest explores both sides evenly.
        self.choose(0, 1) == 1
    }
}

type DrawFn<T> = Arc<dyn Fn(&mut dyn Draw) -> T + Send + Sync>;

/// A proptest strategy from a draw function (see the module's documentation).
pub struct DrawStrategy<T> {
    draw: DrawFn<T>,
}

impl<T> DrawStrategy<T> {
    /// The strategy of values `draw` makes.
    pub fn new(draw: impl Fn(&mut dyn Draw) -> T + Send + Sync + 'static) -> Self {
        DrawStrategy {
            draw: Arc::new(draw),
        }
    }
}

impl<T> fmt::Debug for DrawStrategy<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DrawStrategy")
    }
}

impl<T: fmt::Debug> Strategy for DrawStrategy<T> {
    type Tree = DrawTree<T>;
    type Value = T;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let mut recorder = Recorder {
            runner,
            choices: vec![],
        };
        (self.draw)(&mut recorder);
        Ok(DrawTree {
            draw: self.draw.clone(),
            choices: recorder.choices,
            shrinking: 0,
            last: None,
        })
    }
}

/// The value tree of a [`DrawStrategy`]: its choices shrink in the order they were made,
/// as proptest shrinks the elements of a tuple.
pub struct DrawTree<T> {
    draw: DrawFn<T>,
    choices: Vec<Choice>,
    /// The choice being shrunk.
    shrinking: usize,
    /// The choice the last `simplify` changed, for `complicate`.
    last: Option<usize>,
}

impl<T: fmt::Debug> ValueTree for DrawTree<T> {
    type Value = T;

    fn current(&self) -> T {
        let mut replay = Replay {
            choices: &self.choices,
            next: 0,
        };
        (self.draw)(&mut replay)
    }

    fn simplify(&mut self) -> bool {
        while self.shrinking < self.choices.len() {
            if self.choices[self.shrinking].offset.simplify() {
                self.last = Some(self.shrinking);
                return true;
            }
            self.shrinking += 1;
        }
        false
    }

    fn complicate(&mut self) -> bool {
        let Some(i) = self.last else {
            return false;
        };
        let moved = self.choices[i].offset.complicate();
        if !moved {
            self.last = None;
        }
        moved
    }
}
