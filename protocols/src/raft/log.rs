//! A Raft peer's durable state on its node's simulated [`Disk`]: the log (`raft/log`, one
//! record per entry, index 1 first) and the hard state (`raft/hard_state`, one record).
//!
//! The disk does the rest ([`locksim_sim::disk`]): a write lands in the page cache, an
//! fsync makes it durable after a latency drawn from the seed (`[disk]`, held by an
//! `fsync_stall`), and a crash keeps exactly what was synced. A restart reads back what
//! survived.

use locksim_sim::Disk;
use raft::eraftpb::{Entry, HardState};

const LOG: &str = "raft/log";
const HARD_STATE: &str = "raft/hard_state";

/// What a restart recovers: the synced hard state and log.
#[derive(Clone, Debug, Default)]
pub struct Image {
    /// Term, vote and commit index.
    pub hard_state: HardState,
    /// The log, from index 1, contiguous.
    pub entries: Vec<Entry>,
}

/// A peer's log and hard state on its disk.
pub struct DurableLog {
    disk: Disk,
    dirty: bool,
}

impl DurableLog {
    /// The log on this disk.
    pub fn new(disk: Disk) -> Self {
        DurableLog { disk, dirty: false }
    }

    /// What the disk holds now (after a restart: what was synced before the crash).
    pub fn load(&self) -> Image {
        Image {
            hard_state: self.disk.last(HARD_STATE).unwrap_or_default(),
            entries: self.disk.read(LOG),
        }
    }

    /// Appends entries; a conflicting suffix is replaced, as Raft requires.
    pub fn write_entries(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else {
            return;
        };
        let keep = (first.index - 1) as usize;
        assert!(
            keep <= self.disk.len(LOG),
            "a log write at index {} leaves a gap after {}",
            first.index,
            self.disk.len(LOG)
        );
        self.disk.truncate(LOG, keep);
        for entry in entries {
            self.disk.append(LOG, entry.clone());
        }
        self.dirty = true;
    }

    /// Writes the hard state; `must_sync` if the next sync must make it durable.
    pub fn write_hard_state(&mut self, hs: &HardState, must_sync: bool) {
        self.disk.put(HARD_STATE, hs.clone());
        self.dirty |= must_sync;
    }

    /// Writes the commit index (it rides along with the next fsync: a commit index that is
    /// lost is learnt again from the leader).
    pub fn write_commit(&mut self, commit: u64) {
        let mut hs: HardState = self.disk.last(HARD_STATE).unwrap_or_default();
        hs.commit = commit;
        self.disk.put(HARD_STATE, hs);
    }

    /// Makes everything written so far durable; returns when it is (never, if the node
    /// crashes first).
    pub async fn sync(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.disk.fsync().await;
        }
    }

    /// Starts an fsync without waiting for it (what a host that acknowledges before fsync
    /// does).
    pub fn sync_in_background(&mut self) {
        if std::mem::take(&mut self.dirty) {
            drop(self.disk.fsync());
        }
    }
}
