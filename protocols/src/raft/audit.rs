//! Raft's safety properties, checked as they happen across all peers of one run.
//!
//! - **Election safety**: at most one leader per term.
//! - **State-machine safety**: every peer applies the same entry at the same index; an entry
//!   once applied by any peer is never replaced (so no applied entry is lost, even when a
//!   peer crashes and re-applies its log after a restart).
//!
//! With `enforce` (the correct variant) a breach is a bug in the model or the host and
//! panics with what broke; the run then reports the panic with its seed. A bug variant such
//! as `ack-before-fsync` breaks them on purpose: it records the first breach as a note.

use locksim_sim::history::{Event, Kind, Op};
use locksim_sim::NodeCtx;
use std::collections::BTreeMap;

/// The per-run record all peers report to.
#[derive(Debug, Default)]
pub struct Audit {
    enforce: bool,
    leaders: BTreeMap<u64, u64>,
    applied: BTreeMap<u64, (u64, u64)>,
    breached: bool,
}

impl Audit {
    /// A new audit; `enforce` makes a breach panic.
    pub fn new(enforce: bool) -> Self {
        Audit {
            enforce,
            ..Audit::default()
        }
    }

    /// Peer `id` became leader of `term`.
    pub fn elected(&mut self, ctx: &NodeCtx, term: u64, id: u64) {
        let first = *self.leaders.entry(term).or_insert(id);
        if first != id {
            self.breach(
                ctx,
                format!("two leaders in term {term}: peers {first} and {id}"),
            );
        }
    }

    /// Peer `id` applied the entry (`term`, `digest` of its data) at `index`.
    pub fn applied(&mut self, ctx: &NodeCtx, id: u64, index: u64, term: u64, digest: u64) {
        let first = *self.applied.entry(index).or_insert((term, digest));
        if first != (term, digest) {
            self.breach(
                ctx,
                format!(
                    "peer {id} applied (term {term}, digest {digest:x}) at index {index}, \
                     another peer applied (term {}, digest {:x}) there",
                    first.0, first.1
                ),
            );
        }
    }

    fn breach(&mut self, ctx: &NodeCtx, what: String) {
        assert!(!self.enforce, "Raft safety violated: {what}");
        if !self.breached {
            self.breached = true;
            ctx.record_event(
                Event::new(ctx.name(), Kind::Info, Op::Note)
                    .detail(format!("Raft safety broken (bug variant): {what}")),
            );
        }
    }
}
