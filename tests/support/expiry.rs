//! Expiry windows in the conformance tests against real servers: a lease or session may be
//! expired by the server at any instant of its window (real timers and scheduling), so a test
//! never asks about one while the present falls inside its window.

use std::time::Instant;

/// Something a real server expires at an instant of a known window.
pub trait Expiring {
    /// From the earliest to the latest instant the server may expire it.
    fn window(&self) -> (Instant, Instant);
    /// Whether it is known to be gone (past its window).
    fn gone(&self) -> bool;
    /// Records that it is gone.
    fn mark_gone(&mut self);
}

/// Waits out every window the present falls in; whatever is past its window is gone.
pub fn settle<T: Expiring>(items: &mut [T]) {
    loop {
        let now = Instant::now();
        for t in items.iter_mut() {
            if now >= t.window().1 {
                t.mark_gone();
            }
        }
        let open = (items.iter_mut())
            .filter(|t| !t.gone())
            .find(|t| now >= t.window().0);
        match open {
            Some(t) => {
                std::thread::sleep(t.window().1.saturating_duration_since(now));
                t.mark_gone();
            }
            None => return,
        }
    }
}
