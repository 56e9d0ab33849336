//! How a timeline draws the history events a fault kind records: data, owned by the kind,
//! read by `reports/src/timeline.rs` (which only turns it into SVG).

use locksim_check::history::{Event, Op};

/// Which lane a fault event is drawn on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// The lane of the node it struck (`target`).
    Target,
    /// Above every lane: it struck the network, not one node.
    Top,
}

/// The mark of an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Glyph {
    /// A cross (a crash).
    Cross,
    /// A ring (a restart).
    Ring,
    /// A triangle (a clock change).
    Triangle,
    /// A zigzag (a stalled disk).
    Zigzag,
}

/// What an event is on a timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An instant, drawn with a glyph.
    Point(Glyph),
    /// The start of a span that the event `ends` closes (on the same lane; for a partition,
    /// the one with the same `detail`); `class` names its style (`pause`, `down`, `cut`).
    Opens {
        /// The op that closes the span.
        ends: Op,
        /// The span's style.
        class: &'static str,
    },
    /// The end of a span.
    Closes,
    /// Recorded, but not drawn.
    Hidden,
}

/// How a timeline draws one op of a fault kind.
#[derive(Clone, Debug)]
pub struct Drawing {
    /// The op.
    pub op: Op,
    /// Its lane.
    pub lane: Lane,
    /// Its shape.
    pub shape: Shape,
    /// The short text beside its mark (e.g. `+500 ms`), if any.
    pub label: fn(&Event) -> Option<String>,
    /// The fault in a few words, for a caption (e.g. `c1 paused at 1200 ms for 800 ms`).
    pub caption: fn(&Event) -> String,
}

/// No text beside the mark.
pub fn no_label(_: &Event) -> Option<String> {
    None
}

/// Who an event struck: its target, or its node.
pub fn target(e: &Event) -> &str {
    e.target.as_deref().unwrap_or(&e.node)
}
