//! What INFO persistence, LASTSAVE and the `save` points read of the RDB saves (`rdb` makes
//! them): a leaf, so that `state` can hold it without importing `rdb`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

/// What INFO persistence, LASTSAVE and the `save` points read.
#[derive(Debug)]
pub struct Persistence {
    /// A BGSAVE is writing.
    pub in_progress: AtomicBool,
    /// BGSAVE SCHEDULE asked for one after the running one.
    pub scheduled: AtomicBool,
    /// When the last successful save finished, unix seconds (the start time before any).
    pub last_save: AtomicU64,
    /// The changes counter (the state's `dirty` sum) the last successful save included.
    pub saved_dirty: AtomicU64,
    /// Whether the last BGSAVE succeeded.
    pub last_ok: AtomicBool,
    /// Seconds the last BGSAVE took (-1: none yet).
    pub last_secs: AtomicI64,
    /// When the running BGSAVE started, unix seconds.
    pub started: AtomicU64,
    /// When the last BGSAVE was tried, unix seconds.
    pub last_try: AtomicU64,
    /// Successful saves since the start.
    pub saves: AtomicU64,
    /// Keys the running save wrote so far, and the keys its snapshot holds.
    pub keys_processed: AtomicU64,
    /// See `keys_processed`.
    pub keys_total: AtomicU64,
    /// Keys the last load stored, and keys it dropped as already expired.
    pub loaded: AtomicU64,
    /// See `loaded`.
    pub load_expired: AtomicU64,
}

impl Persistence {
    /// Nothing saved yet; `now` stands for the last save.
    pub fn new(now_secs: u64) -> Self {
        Persistence {
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            last_save: AtomicU64::new(now_secs),
            saved_dirty: AtomicU64::new(0),
            last_ok: AtomicBool::new(true),
            last_secs: AtomicI64::new(-1),
            started: AtomicU64::new(0),
            last_try: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            keys_processed: AtomicU64::new(0),
            keys_total: AtomicU64::new(0),
            loaded: AtomicU64::new(0),
            load_expired: AtomicU64::new(0),
        }
    }

    /// Records a successful save of a snapshot taken at changes counter `dirty`.
    pub fn saved(&self, dirty: u64) {
        self.last_save.store(crate::clock::unix_secs(), Relaxed);
        // Changes made while it ran remain (as Redis' dirty_before_bgsave).
        self.saved_dirty.fetch_max(dirty, Relaxed);
        self.saves.fetch_add(1, Relaxed);
    }
}
