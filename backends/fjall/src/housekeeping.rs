//! A thread beside fjall's worker doing what a write would otherwise wait for on its event
//! loop: syncing the journal, and sealing memtables before their bound.
//!
//! fjall syncs the journal while holding the journal's lock, which every write takes: at
//! each memtable flush (its worker) and at each `persist(SyncData)`. The event loops then
//! wait for the disk. This thread syncs the journal through its own handle, without that
//! lock: once a second under `appendfsync everysec` (the sync that policy promises, in
//! place of fjall's), and each time [`WRITEBACK_BYTES`] have been written to it unless
//! every round is synced anyway (`appendfsync always`), so that the sync fjall still does
//! under the lock at a flush finds little left. A journal write is synced this way when it
//! has reached the OS before the sync starts: a batch the server acknowledges has (it is
//! handed to the OS before the reply), and a journal fjall replaces it syncs itself.
//!
//! Sealing a memtable starts its flush, and also runs fjall's version upkeep, which closes
//! and deletes the files compactions replaced: done here, not on the writing thread.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fjall::{AbstractTree, Database, Keyspace, PersistMode};

/// Journal bytes written between two writebacks.
pub(crate) const WRITEBACK_BYTES: u64 = 1 << 20;

/// How often the journal is synced under `appendfsync everysec`.
const EVERY: Duration = Duration::from_secs(1);

/// When the thread syncs the journal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Syncs {
    /// Never: fjall syncs every round itself (`appendfsync always`).
    Never,
    /// Each [`WRITEBACK_BYTES`] written (`appendfsync no`).
    Writeback,
    /// Each [`WRITEBACK_BYTES`] and each second (`appendfsync everysec`).
    EverySecond,
}

/// [`Asked::seal`] when no seal is asked for.
const NO_SEAL: u64 = u64::MAX;

/// What the writers ask of the thread.
struct Asked {
    /// Set by a writer, taken by the thread: the lock and condition variable only wake it.
    wake: Mutex<bool>,
    cv: Condvar,
    stop: AtomicBool,
    /// The size from which active memtables are to be sealed ([`NO_SEAL`]: none asked).
    seal: AtomicU64,
    /// Journal bytes written since the last sync.
    unsynced: AtomicU64,
}

impl Asked {
    fn new() -> Self {
        Asked {
            wake: Mutex::new(false),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            seal: AtomicU64::new(NO_SEAL),
            unsynced: AtomicU64::new(0),
        }
    }

    fn wake(&self) {
        *self.wake.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    /// Waits until woken, or for at most `timeout`.
    fn wait(&self, timeout: Option<Duration>) {
        let mut woken = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        match timeout {
            Some(timeout) => {
                let deadline = Instant::now() + timeout;
                while !*woken {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    woken = self.cv.wait_timeout(woken, left).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
            None => {
                while !*woken {
                    woken = self.cv.wait(woken).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
        *woken = false;
    }
}

/// The thread; stopped and joined when dropped (with [`Syncs::EverySecond`], after one
/// last sync).
pub(crate) struct Housekeeping {
    asked: Arc<Asked>,
    syncs: Syncs,
    thread: Option<JoinHandle<()>>,
}

impl Housekeeping {
    /// Starts the thread for `db`, whose files are in `dir`. `seal(at_least)` seals every
    /// active memtable of `at_least` bytes or more.
    pub(crate) fn start(dir: &Path, db: Database, syncs: Syncs, seal: impl Fn(u64) + Send + 'static) -> Self {
        let asked = Arc::new(Asked::new());
        let shared = Arc::clone(&asked);
        let dir = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("fjall-housekeeping".into())
            .spawn(move || run(&shared, &dir, &db, syncs, seal))
            .ok();
        Housekeeping { asked, syncs, thread }
    }

    /// Asks for every active memtable of `at_least` bytes or more to be sealed.
    pub(crate) fn ask_seal(&self, at_least: u64) {
        if self.asked.seal.fetch_min(at_least, Ordering::AcqRel) == NO_SEAL {
            self.asked.wake();
        }
    }

    /// Counts `bytes` written to the journal; wakes the thread each [`WRITEBACK_BYTES`].
    pub(crate) fn wrote(&self, bytes: u64) {
        if self.syncs == Syncs::Never {
            return;
        }
        let before = self.asked.unsynced.fetch_add(bytes, Ordering::Relaxed);
        if before < WRITEBACK_BYTES && before + bytes >= WRITEBACK_BYTES {
            self.asked.wake();
        }
    }
}

impl Drop for Housekeeping {
    fn drop(&mut self) {
        self.asked.stop.store(true, Ordering::Release);
        self.asked.wake();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(asked: &Asked, dir: &Path, db: &Database, syncs: Syncs, seal: impl Fn(u64)) {
    let mut synced_at = Instant::now();
    loop {
        let timer = (syncs == Syncs::EverySecond).then(|| EVERY.saturating_sub(synced_at.elapsed()));
        asked.wait(timer);
        let stop = asked.stop.load(Ordering::Acquire);
        let second = syncs == Syncs::EverySecond && (stop || synced_at.elapsed() >= EVERY);
        // The sync first: the flushes a seal starts then find the journal on disk.
        if second || (syncs != Syncs::Never && asked.unsynced.load(Ordering::Relaxed) >= WRITEBACK_BYTES) {
            asked.unsynced.store(0, Ordering::Relaxed);
            synced_at = Instant::now();
            sync_journal(dir, db);
        }
        if stop {
            return;
        }
        let at_least = asked.seal.swap(NO_SEAL, Ordering::AcqRel);
        if at_least != NO_SEAL {
            seal(at_least);
        }
    }
}

/// Syncs the journal fjall writes in `dir`, and the next one if fjall moved on meanwhile.
/// When that fails, fjall's own sync runs: failing too, it poisons the database, and the
/// next write reports it.
fn sync_journal(dir: &Path, db: &Database) {
    let mut synced = None;
    loop {
        let newest = newest_journal(dir);
        if newest == synced {
            return;
        }
        let Some(journal) = &newest else {
            return;
        };
        if File::open(journal).and_then(|f| f.sync_data()).is_err() {
            let _ = db.persist(PersistMode::SyncData);
            return;
        }
        synced = newest;
    }
}

/// The journal fjall writes: the one with the highest number in `dir`.
fn newest_journal(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let path = e.path();
            let id = path.file_name()?.to_str()?.strip_suffix(".jnl")?.parse::<u64>().ok()?;
            Some((id, path))
        })
        .max_by_key(|(id, _)| *id)
        .map(|(_, path)| path)
}

/// Seals every keyspace's active memtable holding `at_least` bytes or more.
pub(crate) fn seal_from<'a>(keyspaces: impl IntoIterator<Item = &'a Keyspace>, at_least: u64) {
    for ks in keyspaces {
        if ks.tree.active_memtable().size() >= at_least {
            // An error here poisons the database; the next write reports it.
            let _ = ks.rotate_memtable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rediskv_engine::testkit::TempDir;

    #[test]
    fn the_newest_journal_is_the_highest_number_not_the_last_name() {
        let dir = TempDir::new("fjall-newest-journal");
        assert_eq!(newest_journal(dir.path()), None);
        for name in ["9.jnl", "10.jnl", "11.tmp", "version", "12jnl"] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        assert_eq!(newest_journal(dir.path()), Some(dir.path().join("10.jnl")));
    }
}
