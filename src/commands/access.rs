//! When each key was last used (OBJECT IDLETIME), as Redis keeps an LRU clock in every
//! object: a command that looks a key up or writes it sets the time, except those Redis
//! runs with `LOOKUP_NOTOUCH` (EXISTS, TYPE, TTL and friends, OBJECT, MEMORY USAGE).
//!
//! The times live in memory only, in a fixed table of [`SLOTS`] slots indexed by a hash of
//! the metadata key, each one atomic word: the key's hash tag and the time in seconds. A
//! use writes its slot (one store, no lock, no allocation: every command pays it); a key
//! whose slot another key took since was last used no later than the time in the slot, so
//! its idle time is reported from that time: a lower bound, as for a key Redis loaded at
//! startup.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Slots of the table (8 bytes each), allocated at the first use.
const SLOTS: usize = 1 << 17;

/// Last-use times, in seconds of the engine's clock.
pub(crate) struct AccessTimes {
    /// `(hash tag << 32) | seconds`; 0: unused since the start.
    slots: OnceLock<Box<[AtomicU64]>>,
    start_secs: u64,
}

/// The slot and the tag of `key`.
fn place(key: &[u8]) -> (usize, u64) {
    let hash = super::locks::key_hash(key);
    // The tag is never 0, so that 0 means an unused slot.
    ((hash as usize) % SLOTS, (hash >> 32) | 1)
}

impl AccessTimes {
    /// An empty table: every key counts as last used at `start_secs`.
    pub(crate) fn new(start_secs: u64) -> Self {
        AccessTimes { slots: OnceLock::new(), start_secs }
    }

    fn slots(&self) -> &[AtomicU64] {
        self.slots.get_or_init(|| (0..SLOTS).map(|_| AtomicU64::new(0)).collect())
    }

    /// `key` was used at `now_secs`.
    pub(crate) fn touch(&self, key: &[u8], now_secs: u64) {
        let (slot, tag) = place(key);
        self.slots()[slot].store((tag << 32) | (now_secs & 0xffff_ffff), Relaxed);
    }

    /// `key` was deleted: its slot keeps its time (the other keys of the slot were last
    /// used no later than that) under no key's tag.
    pub(crate) fn forget(&self, key: &[u8]) {
        let (slot, tag) = place(key);
        let slot = &self.slots()[slot];
        let word = slot.load(Relaxed);
        if word >> 32 == tag {
            let _ = slot.compare_exchange(word, word & 0xffff_ffff, Relaxed, Relaxed);
        }
    }

    /// When `key` was last used: its own time, else the latest it can have been.
    pub(crate) fn last(&self, key: &[u8]) -> u64 {
        let Some(slots) = self.slots.get() else { return self.start_secs };
        let (slot, _) = place(key);
        match slots[slot].load(Relaxed) {
            0 => self.start_secs,
            word => (self.start_secs & !0xffff_ffff) | (word & 0xffff_ffff),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_use_and_never_reports_a_later_one() {
        let times = AccessTimes::new(100);
        assert_eq!(times.last(b"k"), 100);
        times.touch(b"k", 150);
        assert_eq!(times.last(b"k"), 150);
        times.forget(b"k");
        assert_eq!(times.last(b"k"), 150, "a deleted key's slot keeps its time");
        // Far more keys than slots: every key's reported last use is at or after its real
        // one (its idle time a lower bound).
        let n = (SLOTS * 4) as u64;
        for i in 0..n {
            times.touch(&i.to_be_bytes(), 200 + i / 1000);
        }
        for i in (0..n).step_by(97) {
            let last = times.last(&i.to_be_bytes());
            assert!(last >= 200 + i / 1000, "key {i}: {last}");
        }
        times.touch(b"fresh", 5000);
        assert_eq!(times.last(b"fresh"), 5000);
    }
}
