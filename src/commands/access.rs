//! When each key was last used (OBJECT IDLETIME), as Redis keeps an LRU clock in every
//! object: a command that looks a key up or writes it sets the time, except those Redis
//! runs with `LOOKUP_NOTOUCH` (EXISTS, TYPE, TTL and friends, OBJECT, MEMORY USAGE).
//!
//! The times live in memory only, keyed by metadata key, in shards behind short locks. The
//! table is bounded: past [`SHARD_CAPACITY`] keys a shard forgets its older half and keeps
//! the newest time it forgot. A key without an entry (not used since the server started,
//! or forgotten) was last used at that time at the latest, so its idle time is reported
//! from it: a lower bound, as for a key Redis loaded at startup.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

const SHARDS: usize = 64;

/// Keys one shard remembers before it forgets its older half.
const SHARD_CAPACITY: usize = 1 << 12;

/// One shard: last-use times by key, and the newest time it forgot (keys without an entry
/// were last used then at the latest).
struct Shard {
    times: HashMap<Box<[u8]>, u64>,
    forgotten: u64,
}

/// Last-use times, in seconds of the engine's clock.
pub(crate) struct AccessTimes {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    capacity: usize,
}

impl AccessTimes {
    /// An empty table: every key counts as last used at `start_secs`.
    pub(crate) fn new(start_secs: u64) -> Self {
        Self::with_capacity(start_secs, SHARD_CAPACITY)
    }

    fn with_capacity(start_secs: u64, capacity: usize) -> Self {
        AccessTimes {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Shard { times: HashMap::new(), forgotten: start_secs }))
                .collect(),
            hasher: RandomState::new(),
            capacity,
        }
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        let i = self.hasher.hash_one(key) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `key` was used at `now_secs`.
    pub(crate) fn touch(&self, key: &[u8], now_secs: u64) {
        let mut shard = self.shard(key);
        if let Some(t) = shard.times.get_mut(key) {
            *t = now_secs;
            return;
        }
        if shard.times.len() >= self.capacity {
            let mut times: Vec<u64> = shard.times.values().copied().collect();
            let middle = times.len() / 2;
            let cutoff = *times.select_nth_unstable(middle).1;
            shard.times.retain(|_, t| *t > cutoff);
            shard.forgotten = shard.forgotten.max(cutoff);
        }
        shard.times.insert(key.into(), now_secs);
    }

    /// `key` was deleted.
    pub(crate) fn forget(&self, key: &[u8]) {
        self.shard(key).times.remove(key);
    }

    /// When `key` was last used (at the latest, when it has no entry).
    pub(crate) fn last(&self, key: &[u8]) -> u64 {
        let shard = self.shard(key);
        shard.times.get(key).copied().unwrap_or(shard.forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_use_and_bounds_what_it_forgets() {
        let times = AccessTimes::with_capacity(100, 64);
        assert_eq!(times.last(b"k"), 100);
        times.touch(b"k", 150);
        assert_eq!(times.last(b"k"), 150);
        times.forget(b"k");
        assert_eq!(times.last(b"k"), 100);
        // Far more keys than the table keeps: a forgotten key's time is a lower bound of
        // its idle time (never later than its real last use).
        let n = (SHARDS * 64 * 4) as u64;
        for i in 0..n {
            times.touch(&i.to_be_bytes(), 200 + i / 100);
        }
        for i in (0..n).step_by(97) {
            let last = times.last(&i.to_be_bytes());
            assert!(last >= 200 + i / 100, "key {i}: {last}");
        }
        assert!(times.shards.iter().all(|s| s.lock().unwrap().times.len() <= 64));
    }
}
