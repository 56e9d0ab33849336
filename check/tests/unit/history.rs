//! The tests of `src/history.rs`.

use locksim_check::history::*;

/// The hash of a history longer than one chunk is xxh3 of its whole encoding at once:
/// how the encoding is cut into updates never shows.
#[test]
fn trace_hash_is_xxh3_of_the_whole_encoding() {
    let history: Vec<Event> = (0..2_000)
        .map(|i| {
            let mut e =
                Event::new(format!("c{}", i % 7), Kind::Ok, Op::Write).detail("x".repeat(i % 300));
            e.index = i as u64;
            e.time_ns = 1_000 * i as u64;
            e
        })
        .collect();
    let mut whole = Vec::new();
    for event in &history {
        encode_for_hash(event, &mut whole);
    }
    assert!(whole.len() > 10 * 8 * 1024, "the history spans many chunks");
    assert_eq!(trace_hash(&history), xxhash_rust::xxh3::xxh3_64(&whole));
    assert_eq!(trace_hash(&[]), xxhash_rust::xxh3::xxh3_64(&[]));
    assert_ne!(trace_hash(&history), trace_hash(&history[1..]));
}
