//! The context of a client process (`Ctx`: its name, clock, random draws, output and named
//! points) and the adapter that makes a real library's blocking driver the workload's
//! `LockClient` ([`Blocking`]).

use crate::client::driver::DriverLock;
use crate::clock;
use crate::deploy::shim::ClockView;
use crate::spec::{ClientMsg, ClientSpec};
use async_trait::async_trait;
use locksim_check::{Event, Kind, Op};
use locksim_protocols::{Acquired, Grant, LockClient, LostSignal, Outcome, Validity};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The client process's context: its name, clock, random draws, output and named points.
pub struct Ctx {
    pub(crate) spec: ClientSpec,
    /// The run's zero on the monotonic clock, set by the parent's word to start; until then
    /// the end of time, so that what is recorded before it (a driver's hello) is at 0.
    start_ns: std::sync::atomic::AtomicU64,
    /// Its moved clock's monotonic reading at the run's zero (its drift may have begun a
    /// little before, with the faults due at 0), which its `mono_now` counts from.
    start_reading_ns: std::sync::atomic::AtomicI64,
    out: Arc<Mutex<std::io::Stdout>>,
    rng: Mutex<StdRng>,
    passages: Mutex<BTreeMap<String, u32>>,
    /// Its moved clock, if the run moves it (else the machine's clocks).
    clock: Option<ClockView>,
}

impl Ctx {
    pub(crate) fn new(spec: ClientSpec) -> Ctx {
        let name_hash = spec
            .name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        let seed = spec.seed ^ name_hash.rotate_left(17) ^ ((spec.incarnation as u64) << 48);
        let passages = Mutex::new(spec.passages_before.clone());
        let clock = (spec.clock.as_deref()).map(|path| {
            ClockView::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        });
        Ctx {
            clock,
            spec,
            start_ns: u64::MAX.into(),
            start_reading_ns: 0.into(),
            out: Arc::new(Mutex::new(std::io::stdout())),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            passages,
        }
    }

    /// The client's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Time since the run's zero on the client's monotonic clock: the machine's, or its
    /// moved clock's, which runs at its drift.
    pub fn mono_now(&self) -> Duration {
        match &self.clock {
            None => clock::since(self.start_ns()),
            Some(_) if !self.started() => Duration::ZERO,
            Some(view) => {
                let start_ns = self.start_reading_ns.load(Ordering::Relaxed);
                let moved_ns = view.mono_ns(clock::now_ns()) - start_ns;
                Duration::from_nanos(moved_ns.max(0) as u64)
            }
        }
    }

    /// The client's wall clock, in ms since the epoch: the machine's, or its moved clock's.
    pub fn wall_ms(&self) -> i64 {
        self.clock
            .as_ref()
            .map_or_else(clock::wall_ms, ClockView::wall_ms)
    }

    /// Whether the run moves this client's clock and has started (a sleep before the start
    /// is on the machine's clock).
    pub fn clock_moves(&self) -> bool {
        self.clock.is_some() && self.started()
    }

    fn started(&self) -> bool {
        self.start_ns() != u64::MAX
    }

    /// How long `local` of the client's monotonic clock lasts in real time, at its drift now
    /// (the simulator's own conversion, rounded up: a sleep never ends early).
    pub fn real_duration(&self, local: Duration) -> Duration {
        let ppm = self.clock.as_ref().map_or(0, ClockView::drift_ppm);
        locksim_sim::clock::NodeClock::new(ppm, 0).true_duration(local)
    }

    fn start_ns(&self) -> u64 {
        self.start_ns.load(Ordering::Acquire)
    }

    /// Sets the run's zero (the parent's word to start, which comes after the faults due at
    /// 0 moved the clock: its reading at the zero is known).
    pub fn set_start(&self, start_ns: u64) {
        if let Some(view) = &self.clock {
            let reading_ns = view.mono_ns(start_ns);
            self.start_reading_ns.store(reading_ns, Ordering::Relaxed);
        }
        // Released after the reading: whoever sees the start sees it.
        self.start_ns.store(start_ns, Ordering::Release);
    }

    /// A random u64 (lock values).
    pub fn random(&self) -> u64 {
        self.rng.lock().unwrap().gen()
    }

    fn send(&self, msg: &ClientMsg) {
        let mut line = serde_json::to_string(msg).expect("messages serialise");
        line.push('\n');
        let mut out = self.out.lock().unwrap();
        // The parent gone: nothing to report to; PDEATHSIG ends this process.
        let _ = out.write_all(line.as_bytes()).and_then(|_| out.flush());
    }

    /// Tells the parent that the lock is up and the client waits for the start.
    pub fn ready(&self) {
        self.send(&ClientMsg::Ready);
    }

    /// Records an event, stamped now.
    pub fn record(&self, mut event: Event) {
        event.time_ns = clock::now_ns().saturating_sub(self.start_ns());
        self.send(&ClientMsg::Event(event));
    }

    /// An event of this client.
    pub fn ev(&self, kind: Kind, op: Op) -> Event {
        Event::new(self.name(), kind, op)
    }

    /// A note on the timeline.
    pub fn note(&self, detail: impl Into<String>) {
        self.record(self.ev(Kind::Info, Op::Note).detail(detail));
    }

    /// Passes a named point: stops here if a scripted fault says so (the parent resumes
    /// the process after the pause, or kills it for a crash). Whether it stopped.
    pub fn point(&self, point: &str) -> bool {
        let n = {
            let mut passages = self.passages.lock().unwrap();
            let n = passages.entry(point.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        let armed = self.spec.stops.iter().filter(|s| s.point == point);
        let stop = armed.clone().find(|s| s.occurrence == n);
        match stop {
            Some(stop) => {
                self.send(&ClientMsg::Stop(stop.clone()));
                crate::procs::stop_self();
            }
            None if armed.into_iter().any(|s| s.occurrence > n) => {
                self.send(&ClientMsg::Passed(point.to_owned()));
            }
            None => {}
        }
        stop.is_some()
    }
}

/// How often a blocking library is asked for its lost-lock signal while the workload waits
/// under `check = "on_signal"`, in ms: the simulator's work wakes the moment the signal is
/// raised; here the signal is looked at this often (a driver answers from the library's own
/// state, without a request to a server), so an abort comes up to this much later than the
/// library raised it.
pub const SIGNAL_POLL_MS: u64 = 10;

/// A real library behind its driver ([`DriverLock`]) as the workload's [`LockClient`]. Its
/// calls block the client's executor while they run, as the library blocks its caller;
/// between calls, a task asks it for its lost-lock signal every [`SIGNAL_POLL_MS`].
pub struct Blocking {
    lock: Rc<RefCell<DriverLock>>,
    /// Releases so far: a signal's watcher stops once its grant is released.
    releases: Rc<Cell<u64>>,
}

impl Blocking {
    /// The workload's client of `lock`.
    pub fn new(lock: DriverLock) -> Blocking {
        Blocking {
            lock: Rc::new(RefCell::new(lock)),
            releases: Rc::default(),
        }
    }
}

#[async_trait(?Send)]
impl LockClient for Blocking {
    async fn acquire(&mut self) -> Acquired {
        self.lock.borrow_mut().acquire()
    }

    async fn release(&mut self, _grant: &Grant) -> Outcome {
        self.releases.set(self.releases.get() + 1);
        self.lock.borrow_mut().outcome("release")
    }

    async fn extend(&mut self, _grant: &mut Grant) -> Outcome {
        self.lock.borrow_mut().outcome("extend")
    }

    fn validity(&mut self, _grant: &Grant) -> Validity {
        // What the library itself tells its user: etcd's `Session.Done()`; redis-py nothing
        // (`owned()` would ask the server), as its model's `Validity::Indefinite`.
        let signal = self.lock.borrow_mut().lost_signal();
        signal.map_or(Validity::Indefinite, Validity::Lost)
    }

    async fn ask_servers(&mut self, grant: &Grant) -> Validity {
        // The library's own call (pottery's `locked()`); live mode refuses `ask_servers`
        // with a driver that has none, so the fallback is never the answer of a run.
        let asked = self.lock.borrow_mut().ask();
        match asked {
            Some(Ok(())) => Validity::Indefinite,
            Some(Err(why)) => Validity::Lost(why),
            None => self.validity(grant),
        }
    }

    fn lost_signal(&mut self, _grant: &Grant) -> Option<LostSignal> {
        let signal = LostSignal::new();
        let (lock, watched) = (self.lock.clone(), signal.clone());
        let (releases, held) = (self.releases.clone(), self.releases.get());
        tokio::task::spawn_local(async move {
            while releases.get() == held {
                if let Some(why) = lock.borrow_mut().lost_signal() {
                    watched.raise(why);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(SIGNAL_POLL_MS)).await;
            }
        });
        Some(signal)
    }
}
