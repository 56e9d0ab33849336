//! The tests of `src/raft/zookeeper/tree.rs`.

use locksim_protocols::raft::zookeeper::tree::*;
use std::time::Duration;

#[test]
fn an_expiry_is_rounded_up_to_the_end_of_its_tick_bucket() {
    let ms = Duration::from_millis;
    let tree = Tree::new(ms(2_000));
    // ZooKeeper: (t / tick + 1) * tick, so an exact multiple moves a whole tick on.
    assert_eq!(tree.expiry_after(ms(100), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(0), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(1_999), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(2_000), ms(4_000)), ms(8_000));
    assert_eq!(Tree::default().expiry_after(ms(1), ms(4_000)), ms(4_001));
}
