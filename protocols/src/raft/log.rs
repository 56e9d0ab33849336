//! A Raft peer's durable state: its log entries and hard state, written to a page cache and
//! durable only after an fsync.
//!
//! The durable [`Image`] lives outside the node (it outlives every incarnation); the page
//! cache is node memory, so a crash loses exactly what was written but not yet synced. Writes
//! are applied to the image in the order they were made, so what survives a crash is always
//! a prefix of what the peer wrote. The fsync latency is drawn from the run's seeded RNG.

use raft::eraftpb::{Entry, HardState};
use rand::Rng;
use locksim_sim::NodeCtx;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What survives a crash: the synced hard state and log.
#[derive(Clone, Debug, Default)]
pub struct Image {
    /// Term, vote and commit index as last synced.
    pub hard_state: HardState,
    /// The synced log, from index 1, contiguous.
    pub entries: Vec<Entry>,
}

/// One write to the page cache.
#[derive(Clone, Debug)]
enum Write {
    Entries(Vec<Entry>),
    HardState(HardState),
    Commit(u64),
}

impl Image {
    fn apply(&mut self, write: Write) {
        match write {
            Write::Entries(entries) => {
                let Some(first) = entries.first() else {
                    return;
                };
                // Raft overwrites a conflicting suffix: drop everything from the first new index.
                let keep = (first.index - 1) as usize;
                assert!(
                    keep <= self.entries.len(),
                    "a log write at index {} leaves a gap after {}",
                    first.index,
                    self.entries.len()
                );
                self.entries.truncate(keep);
                self.entries.extend(entries);
            }
            Write::HardState(hs) => self.hard_state = hs,
            Write::Commit(commit) => self.hard_state.commit = commit,
        }
    }
}

/// A peer's view of its disk: the durable image (shared with later incarnations) and the
/// page cache of this incarnation.
pub struct DurableLog {
    durable: Arc<Mutex<Image>>,
    cache: Rc<RefCell<Vec<Write>>>,
    flushing: Rc<Cell<bool>>,
    fsync_ms_min: u64,
    fsync_ms_max: u64,
}

impl DurableLog {
    /// The log of a peer whose durable image is `durable`.
    pub fn new(durable: Arc<Mutex<Image>>, fsync_ms_min: u64, fsync_ms_max: u64) -> Self {
        assert!(fsync_ms_min <= fsync_ms_max);
        DurableLog {
            durable,
            cache: Rc::default(),
            flushing: Rc::default(),
            fsync_ms_min,
            fsync_ms_max,
        }
    }

    /// What the disk holds now (what a restart recovers).
    pub fn load(&self) -> Image {
        self.durable.lock().unwrap().clone()
    }

    /// Appends entries (to the page cache).
    pub fn write_entries(&mut self, entries: &[Entry]) {
        if !entries.is_empty() {
            self.cache.borrow_mut().push(Write::Entries(entries.to_vec()));
        }
    }

    /// Writes the hard state (to the page cache).
    pub fn write_hard_state(&mut self, hs: &HardState) {
        self.cache.borrow_mut().push(Write::HardState(hs.clone()));
    }

    /// Writes the commit index (to the page cache; it rides along with the next fsync).
    pub fn write_commit(&mut self, commit: u64) {
        self.cache.borrow_mut().push(Write::Commit(commit));
    }

    /// Whether anything waits in the page cache.
    pub fn dirty(&self) -> bool {
        !self.cache.borrow().is_empty()
    }

    /// Makes everything written so far durable. Takes the drawn fsync latency (true time: a
    /// device's latency does not follow the node's clock); a crash meanwhile loses it all.
    pub async fn sync(&mut self) {
        sync(&self.durable, &self.cache, self.fsync_ms_min, self.fsync_ms_max).await;
    }

    /// Syncs in a task of its own, again and again while writes keep coming, without making
    /// anyone wait (what a host that acknowledges before fsync relies on).
    pub fn sync_in_background(&self, ctx: &NodeCtx) {
        if self.flushing.replace(true) {
            return;
        }
        let (durable, cache, flushing) = (
            self.durable.clone(),
            self.cache.clone(),
            self.flushing.clone(),
        );
        let (lo, hi) = (self.fsync_ms_min, self.fsync_ms_max);
        ctx.spawn(async move {
            while !cache.borrow().is_empty() {
                sync(&durable, &cache, lo, hi).await;
            }
            flushing.set(false);
        });
    }
}

/// One fsync of everything in `cache` at its start.
async fn sync(durable: &Mutex<Image>, cache: &RefCell<Vec<Write>>, lo: u64, hi: u64) {
    let batch: Vec<Write> = cache.borrow_mut().drain(..).collect();
    if batch.is_empty() {
        return;
    }
    let ms = madsim::rand::thread_rng().gen_range(lo..=hi);
    madsim::time::sleep(Duration::from_millis(ms)).await;
    let mut image = durable.lock().unwrap();
    for write in batch {
        image.apply(write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e
    }

    #[test]
    fn a_conflicting_write_replaces_the_suffix() {
        let mut image = Image::default();
        image.apply(Write::Entries(vec![entry(1, 1), entry(2, 1), entry(3, 1)]));
        image.apply(Write::Entries(vec![entry(2, 2)]));
        let terms: Vec<u64> = image.entries.iter().map(|e| e.term).collect();
        assert_eq!(terms, vec![1, 2]);
    }

    #[test]
    fn unsynced_writes_are_not_durable() {
        let durable = Arc::new(Mutex::new(Image::default()));
        let mut log = DurableLog::new(durable.clone(), 1, 1);
        log.write_entries(&[entry(1, 1)]);
        assert!(log.dirty());
        assert!(log.load().entries.is_empty(), "a write is durable only after fsync");
        drop(log); // the crash: the page cache is gone
        assert!(durable.lock().unwrap().entries.is_empty());
    }
}
