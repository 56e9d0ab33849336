//! The tests of `src/html.rs`.

use locksim_reports::html::*;
use locksim_reports::stats::Share;
use locksim_reports::timeline::escape;
use locksim_reports::{CellSummary, Comparison};

#[test]
fn an_n_a_share_is_written_n_a_and_gets_no_bar() {
    let cell = |fencing: Option<Share>, lost: Option<Share>| {
        let mut c = CellSummary {
            protocol: "p".into(),
            profile: "none".into(),
            damage: Share::of(0, 4),
            latent: Share::of(0, 4),
            overlap: Share::of(1, 4),
            ..CellSummary::default()
        };
        c.properties.insert("fencing".into(), fencing);
        c.properties.insert("lost_update".into(), lost);
        c
    };
    let zero = Some(Share::of(0, 4));
    let bars = |c: CellSummary| {
        let svg = chart(&Comparison {
            cells: vec![c],
            ..Comparison::default()
        });
        let na = svg.matches("class=\"na\">n/a").count();
        (
            na,
            svg.matches("<rect").count(),
            svg.contains("p · no faults"),
        )
    };
    assert_eq!(bars(cell(zero, zero)), (0, 3, true), "all three measured");
    assert_eq!(
        bars(cell(None, zero)),
        (1, 2, true),
        "no tokens: latent n/a"
    );
    assert_eq!(
        bars(cell(None, None)),
        (2, 1, true),
        "and nothing acked: damage n/a"
    );
}

#[test]
fn the_chart_names_every_cell_even_long_ones() {
    let cell = |protocol: &str, profile: &str| CellSummary {
        protocol: protocol.into(),
        profile: profile.into(),
        harm: Share::of(1, 4),
        overlap: Share::of(2, 4),
        ..CellSummary::default()
    };
    let c = Comparison {
        cells: vec![
            cell("replicated-redis+wait", "client-pauses"),
            cell("zookeeper+fencing+cas", "server-crashes-and-partitions"),
            cell("redlock", "none"),
        ],
        ..Comparison::default()
    };
    let svg = chart(&c);
    for x in [&c.cells[0], &c.cells[2]] {
        let name = escape(&chart_label(x));
        assert!(
            svg.contains(&format!(">{name}</text>")),
            "{name} missing: {svg}"
        );
    }
    // Too long for the margin at any size: shortened, not dropped.
    assert!(
        svg.contains(">zookeeper+fencing+cas · server-crashes"),
        "{svg}"
    );
    assert!(svg.contains("…</text>"), "{svg}");
}
