//! The tests of `src/tradeoff.rs`.

use locksim_reports::cost::Cost;
use locksim_reports::stats::Share;
use locksim_reports::tradeoff::*;
use locksim_reports::Comparison;
use locksim_reports::{CellSummary, Row, Setup};

#[test]
fn one_mark_per_row_with_its_label_and_the_latent_ring_where_there_is_one() {
    let row = |label: &str, ms: f64, guard: &str| Row {
        label: label.into(),
        setup: Setup {
            guard: guard.into(),
            ..Setup::default()
        },
        cost: Some(Cost {
            acquire_ms_p50: ms,
            acquire_ms_p99: ms * 2.0,
            ..Cost::default()
        }),
    };
    let cell = |label: &str, damage: u64, latent: u64| CellSummary {
        protocol: label.into(),
        profile: "mixed".into(),
        damage: Share::of(damage, 100),
        latent: Share::of(latent, 100),
        ..CellSummary::default()
    };
    let c = Comparison {
        rows: vec![row("fast", 2.0, "none"), row("slow", 20.0, "fencing")],
        cells: vec![cell("fast", 30, 0), cell("slow", 0, 40)],
        ..Comparison::default()
    };
    let svg = svg(&c, "mixed");
    assert_eq!(svg.matches("r=\"5\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("r=\"6\"").count(), 1, "one latent ring: {svg}");
    assert!(
        svg.contains(">latent 40% (slow)</text>"),
        "the ring is labelled: {svg}"
    );
    assert!(
        svg.contains(">fast</text>") && svg.contains(">slow</text>"),
        "{svg}"
    );
    let f = frame(&marks(&c, "mixed"));
    assert!(
        f.x(2.0) < f.x(20.0) && f.y(0.3) < f.y(0.0),
        "axes point the right way"
    );
    assert_eq!(
        f.top, 0.5,
        "the scale reaches the widest interval (40%: up to ~50%)"
    );
}
