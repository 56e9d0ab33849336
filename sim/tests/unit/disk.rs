//! The tests of `src/disk.rs`.

use locksim_sim::disk::*;

#[test]
fn config_validation_names_the_field() {
    assert!(DiskConfig::default().validate().is_ok());
    let bad = DiskConfig {
        fsync_ms_min: 5,
        fsync_ms_max: 1,
    };
    assert!(bad.validate().unwrap_err().contains("disk.fsync_ms_min"));
}
