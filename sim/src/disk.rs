//! Per-node simulated disks: durable state that outlives a node's incarnations.
//!
//! A real server's durable state goes through two steps: `write` puts the bytes in the
//! operating system's page cache, `fsync` makes them durable, some time later. A power loss
//! (what a `crash` is here) keeps exactly what was synced. Every protocol's durable state
//! (Redis' AOF, Sentinel's config file, a Raft log and hard state, the resource) lives on a
//! [`Disk`], so their crash behaviour comes from this one mechanism.
//!
//! - A disk is a set of named files; a file is a list of typed records (any `Clone` value:
//!   a log entry, a whole key/value image). [`Disk::append`], [`Disk::overwrite`],
//!   [`Disk::truncate`] and [`Disk::put`] (replace the file by one record) change the page
//!   cache; [`Disk::read`] and [`Disk::last`] read it back, as the node itself sees it.
//! - [`Disk::fsync`] makes everything written so far durable after a latency drawn from the
//!   run's seed (`[disk] fsync_ms_min`..=`fsync_ms_max`). The sync proceeds whether or not
//!   the caller awaits it, as a background fsync thread does (Redis' `everysec`); await the
//!   returned future to know it is durable (`always`, a Raft `Ready`, a vote).
//! - A `crash` of the node throws the page cache away: the disk holds its last synced state,
//!   and an fsync still in progress is lost with it.
//! - An `fsync_stall` fault holds every fsync that would complete inside it until it ends (a
//!   saturated device, a stalled RAID controller, a cloud volume hiccup).
//!
//! Records are stored as shared values, not bytes: nothing is serialised, and reading a
//! record with the wrong type is a bug in the caller (it panics).
//!
//! An fsync costs what changed since the last one, not the disk's size: every change to the
//! page cache is also appended to a journal, an fsync remembers the journal's length when it
//! starts, and when it completes it replays the journal up to there onto the durable state.
//! (Copying the page cache at each fsync made a Raft node's syncs quadratic in its log.)

use crate::nodes::{NodeIdx, Subsystem};
use futures::channel::oneshot;
use madsim::runtime::NodeHandle;
use madsim::time::TimeHandle;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Disk settings of a scenario (`[disk]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// Shortest fsync, in ms.
    #[serde(default = "d_fsync_min")]
    pub fsync_ms_min: u64,
    /// Longest fsync, in ms.
    #[serde(default = "d_fsync_max")]
    pub fsync_ms_max: u64,
}

fn d_fsync_min() -> u64 {
    1
}

fn d_fsync_max() -> u64 {
    3
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            fsync_ms_min: d_fsync_min(),
            fsync_ms_max: d_fsync_max(),
        }
    }
}

impl DiskConfig {
    /// Checks ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.fsync_ms_min > self.fsync_ms_max {
            return Err(format!(
                "disk.fsync_ms_min ({}) exceeds disk.fsync_ms_max ({})",
                self.fsync_ms_min, self.fsync_ms_max
            ));
        }
        Ok(())
    }
}

type Record = Arc<dyn Any + Send + Sync>;
type Files = BTreeMap<&'static str, Vec<Record>>;

/// One change to a file's records, as the page cache took it.
enum Change {
    Overwrite(usize, Record),
    Truncate(usize),
    Put(Record),
}

impl Change {
    fn apply(self, records: &mut Vec<Record>) {
        match self {
            Change::Overwrite(index, record) if index == records.len() => records.push(record),
            Change::Overwrite(index, record) => records[index] = record,
            Change::Truncate(len) => records.truncate(len),
            Change::Put(record) => *records = vec![record],
        }
    }
}

/// One node's disk.
#[derive(Default)]
struct NodeDisk {
    /// What the node sees: everything written.
    cache: Files,
    /// What a crash keeps.
    durable: Files,
    /// Changes to the page cache not yet replayed onto `durable`, oldest first; the first
    /// one is change number `journal_start` of this incarnation.
    journal: Vec<(&'static str, Change)>,
    journal_start: u64,
    /// Number of the last fsync started, and of the last one that completed.
    fsync_started: u64,
    fsync_done: u64,
    /// Bumped by every crash: an fsync that started before it is lost.
    epoch: u64,
    /// Fsyncs do not complete before this true time (ns).
    stalled_until_ns: u64,
}

impl NodeDisk {
    /// Applies a change to the page cache and journals it for the next fsync.
    fn change(&mut self, file: &'static str, change: Change) {
        let records = self.cache.entry(file).or_default();
        let journaled = match &change {
            Change::Overwrite(index, record) => Change::Overwrite(*index, record.clone()),
            Change::Truncate(len) => Change::Truncate(*len),
            Change::Put(record) => Change::Put(record.clone()),
        };
        change.apply(records);
        self.journal.push((file, journaled));
    }

    /// How many changes this incarnation has made: an fsync that starts now covers these.
    fn changes(&self) -> u64 {
        self.journal_start + self.journal.len() as u64
    }

    /// Makes the first `upto` changes durable (those before it already are).
    fn sync_to(&mut self, upto: u64) {
        assert!(
            upto >= self.journal_start,
            "fsyncs complete in order of start"
        );
        let n = (upto - self.journal_start) as usize;
        for (file, change) in self.journal.drain(..n) {
            change.apply(self.durable.entry(file).or_default());
        }
        self.journal_start = upto;
    }
}

/// Every node's disk (the world's storage subsystem).
#[derive(Default)]
pub(crate) struct Disks {
    config: DiskConfig,
    nodes: BTreeMap<NodeIdx, NodeDisk>,
}

impl Disks {
    pub(crate) fn new(config: DiskConfig) -> Self {
        Disks {
            config,
            nodes: BTreeMap::new(),
        }
    }

    fn node(&mut self, idx: NodeIdx) -> &mut NodeDisk {
        self.nodes.entry(idx).or_default()
    }

    /// Holds the node's fsyncs until `until_ns`.
    pub(crate) fn stall(&mut self, idx: NodeIdx, until_ns: u64) {
        let d = self.node(idx);
        d.stalled_until_ns = d.stalled_until_ns.max(until_ns);
    }

    /// Fsyncs the node started, over all its incarnations.
    pub(crate) fn fsyncs_started(&self, idx: NodeIdx) -> u64 {
        self.nodes.get(&idx).map_or(0, |d| d.fsync_started)
    }

    /// Until when the node's fsyncs are held.
    fn stalled_until_ns(&mut self, idx: NodeIdx) -> u64 {
        self.node(idx).stalled_until_ns
    }
}

impl Subsystem for Disks {
    /// The page cache is gone, and so are fsyncs in progress.
    fn crash(&mut self, idx: NodeIdx) {
        if let Some(d) = self.nodes.get_mut(&idx) {
            d.cache = d.durable.clone();
            d.journal.clear();
            d.journal_start = 0;
            d.epoch += 1;
        }
    }

    /// No fsync is held any longer (one already waiting for a stall's end wakes when it
    /// would have). Never reported as a healed fault: the history records stalls as points.
    fn heal(&mut self) -> bool {
        for d in self.nodes.values_mut() {
            d.stalled_until_ns = 0;
        }
        false
    }
}

/// What every disk handle shares: the disks, true time, and the never-paused node fsyncs
/// complete on.
#[derive(Clone)]
pub(crate) struct DiskHost {
    pub(crate) disks: Arc<Mutex<Disks>>,
    pub(crate) time: TimeHandle,
    pub(crate) nemesis: NodeHandle,
}

impl DiskHost {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Disks> {
        self.disks.lock().expect("disk lock poisoned")
    }

    fn now_ns(&self) -> u64 {
        self.time.elapsed().as_nanos() as u64
    }
}

/// A node's disk. Cheap to clone; every clone is the same disk.
#[derive(Clone)]
pub struct Disk {
    host: DiskHost,
    node: NodeIdx,
}

impl Disk {
    pub(crate) fn new(host: DiskHost, node: NodeIdx) -> Self {
        Disk { host, node }
    }

    fn with<R>(&self, f: impl FnOnce(&mut NodeDisk) -> R) -> R {
        let mut disks = self.host.lock();
        f(disks.node(self.node))
    }

    /// Appends a record to `file` (page cache).
    pub fn append<T: Any + Send + Sync>(&self, file: &'static str, record: T) {
        self.with(|d| {
            let len = d.cache.get(file).map_or(0, Vec::len);
            d.change(file, Change::Overwrite(len, Arc::new(record)));
        });
    }

    /// Replaces the record at `index` of `file` (page cache); `index` = the file's length
    /// appends.
    pub fn overwrite<T: Any + Send + Sync>(&self, file: &'static str, index: usize, record: T) {
        self.with(|d| {
            let len = d.cache.get(file).map_or(0, Vec::len);
            assert!(index <= len, "overwrite past the end of {file}");
            d.change(file, Change::Overwrite(index, Arc::new(record)));
        });
    }

    /// Keeps only the first `len` records of `file` (page cache).
    pub fn truncate(&self, file: &'static str, len: usize) {
        self.with(|d| d.change(file, Change::Truncate(len)));
    }

    /// Makes `file` exactly one record, `value` (an image: a config file, a snapshot).
    pub fn put<T: Any + Send + Sync>(&self, file: &'static str, value: T) {
        self.with(|d| d.change(file, Change::Put(Arc::new(value))));
    }

    /// Every record of `file`, as this node sees it now (empty if there is no such file).
    pub fn read<T: Any + Clone>(&self, file: &str) -> Vec<T> {
        self.with(|d| {
            d.cache
                .get(file)
                .map(|records| records.iter().map(|r| downcast::<T>(file, r)).collect())
                .unwrap_or_default()
        })
    }

    /// The last record of `file`, if any (an image written with [`Disk::put`]).
    pub fn last<T: Any + Clone>(&self, file: &str) -> Option<T> {
        self.with(|d| d.cache.get(file)?.last().map(|r| downcast::<T>(file, r)))
    }

    /// How many records `file` has.
    pub fn len(&self, file: &str) -> usize {
        self.with(|d| d.cache.get(file).map_or(0, Vec::len))
    }

    /// Whether `file` has no records.
    pub fn is_empty(&self, file: &str) -> bool {
        self.len(file) == 0
    }

    /// Makes everything written so far durable, after the seeded fsync latency (and any
    /// `fsync_stall`). The sync goes ahead even if the returned future is dropped; it
    /// resolves once the data is durable, and never if the node crashes first.
    pub fn fsync(&self) -> impl Future<Output = ()> {
        let (latency, epoch, seq, upto) = {
            let mut disks = self.host.lock();
            let (lo, hi) = (disks.config.fsync_ms_min, disks.config.fsync_ms_max);
            let ms = if hi > lo {
                madsim::rand::thread_rng().gen_range(lo..=hi)
            } else {
                lo
            };
            let d = disks.node(self.node);
            d.fsync_started += 1;
            (ms, d.epoch, d.fsync_started, d.changes())
        };
        let (done, wait) = oneshot::channel::<()>();
        let (host, node) = (self.host.clone(), self.node);
        self.host.nemesis.spawn(async move {
            madsim::time::sleep(Duration::from_millis(latency)).await;
            loop {
                let until = host.lock().stalled_until_ns(node);
                let now = host.now_ns();
                if until <= now {
                    break;
                }
                madsim::time::sleep(Duration::from_nanos(until - now)).await;
            }
            let mut disks = host.lock();
            let d = disks.node(node);
            if d.epoch != epoch {
                return; // The node crashed meanwhile: this sync never happened.
            }
            // Syncs may complete out of order; an older one must not undo a newer one.
            if seq > d.fsync_done {
                d.sync_to(upto);
                d.fsync_done = seq;
            }
            let _ = done.send(());
        });
        async move {
            let _ = wait.await;
        }
    }
}

fn downcast<T: Any + Clone>(file: &str, record: &Record) -> T {
    record
        .downcast_ref::<T>()
        .unwrap_or_else(|| {
            panic!(
                "{file}: a record read as {} was written as another type",
                std::any::type_name::<T>()
            )
        })
        .clone()
}
