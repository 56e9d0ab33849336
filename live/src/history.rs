//! The live run's history: every process stamps its own events on the machine's monotonic
//! clock (ns since the run's zero); the parent collects them here and, at the end, sorts
//! them by time and numbers them, giving the same flat history a simulated run has.

use crate::clock;
use locksim_check::{Event, History};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where the parent collects events (cheap to clone; shared with its threads).
#[derive(Clone)]
pub struct Recorder {
    start_ns: Arc<AtomicU64>,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Recorder {
    /// A recorder whose zero is `start_ns` on the monotonic clock.
    pub fn new(start_ns: u64) -> Self {
        Recorder {
            start_ns: Arc::new(AtomicU64::new(start_ns)),
            events: Arc::default(),
        }
    }

    /// The run's zero.
    pub fn start_ns(&self) -> u64 {
        self.start_ns.load(Ordering::Relaxed)
    }

    /// Moves the run's zero before it comes (the clients' real libraries are up later or
    /// sooner than planned); what the clients recorded before their start is at 0.
    pub fn set_start(&self, start_ns: u64) {
        let recorded = self.events.lock().unwrap();
        assert!(
            recorded.iter().all(|e| e.time_ns == 0),
            "nothing after the zero"
        );
        self.start_ns.store(start_ns, Ordering::Relaxed);
    }

    /// Records an event of the parent (the resource, the nemesis), stamped now.
    pub fn record(&self, event: Event) {
        self.record_at(clock::now_ns(), event);
    }

    /// Records an event of the parent that happened at `at_ns` on the monotonic clock.
    pub fn record_at(&self, at_ns: u64, mut event: Event) {
        event.time_ns = at_ns.saturating_sub(self.start_ns());
        self.events.lock().unwrap().push(event);
    }

    /// Records an event a client stamped itself.
    pub fn push_stamped(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }

    /// The history: events in time order (ties keep their arrival order), numbered from 0.
    pub fn history(&self) -> History {
        let mut events = self.events.lock().unwrap().clone();
        events.sort_by_key(|e| e.time_ns);
        for (i, e) in events.iter_mut().enumerate() {
            e.index = i as u64;
        }
        events
    }
}
