//! The tests of `src/redis/client.rs`.

use locksim_protocols::redis::client::lock_value_text;

#[test]
fn lock_value_text_is_the_formatted_text() {
    for n in [0, 1, 0xabc, 0x0123_4567_89ab_cdef, u64::MAX, 1 << 63] {
        assert_eq!(lock_value_text("c12", n), format!("c12:{n:016x}"));
    }
}
