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
//!
//! Under an LFU `maxmemory-policy` the same word holds, as Redis' object header does then,
//! the minute of the last decrement (16 bits) and a logarithmic access counter (8 bits):
//! each use decays the counter by one per `lfu-decay-time` minutes elapsed, then adds one
//! with probability `1 / ((counter - 5) * lfu-log-factor + 1)`. A new key starts at 5
//! (Redis' `LFU_INIT_VAL`). Switching policies reinterprets the words, as in Redis.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Slots of the table (8 bytes each), allocated at the first use.
const SLOTS: usize = 1 << 17;

/// Last-use times, in seconds of the engine's clock.
pub(crate) struct AccessTimes {
    /// `(hash tag << 32) | seconds`; 0: unused since the start.
    slots: OnceLock<Box<[AtomicU64]>>,
    start_secs: u64,
    /// Words hold LFU data (an LFU policy is selected).
    lfu: AtomicBool,
    /// `lfu-log-factor` and `lfu-decay-time` (minutes), packed high and low.
    lfu_params: AtomicU64,
    rng: AtomicU64,
}

/// Redis' `LFU_INIT_VAL`: the counter of a new key, so that it is not evicted at once.
pub const LFU_INIT: u8 = 5;

/// The 16-bit minute clock of the LFU data.
fn minutes(now_secs: u64) -> u64 {
    (now_secs / 60) & 0xffff
}

/// The slot and the tag of `key`.
fn place(key: &[u8]) -> (usize, u64) {
    let hash = crate::backend::key_hash(key);
    // The tag is never 0, so that 0 means an unused slot.
    ((hash as usize) % SLOTS, (hash >> 32) | 1)
}

impl AccessTimes {
    /// An empty table: every key counts as last used at `start_secs`.
    pub(crate) fn new(start_secs: u64) -> Self {
        AccessTimes {
            slots: OnceLock::new(),
            start_secs,
            lfu: AtomicBool::new(false),
            lfu_params: AtomicU64::new((10 << 32) | 1),
            rng: AtomicU64::new(0x2545_F491_4F6C_DD1D),
        }
    }

    /// Keeps LFU data from now on (`Some((lfu-log-factor, lfu-decay-time))`), or LRU times.
    pub(crate) fn set_lfu(&self, lfu: Option<(u32, u32)>) {
        if let Some((factor, decay)) = lfu {
            self.lfu_params.store((u64::from(factor) << 32) | u64::from(decay), Relaxed);
        }
        self.lfu.store(lfu.is_some(), Relaxed);
    }

    /// Whether the words hold LFU data.
    pub(crate) fn lfu(&self) -> bool {
        self.lfu.load(Relaxed)
    }

    /// The counter of LFU data `word` at `now_secs`, decayed by the periods elapsed since
    /// its minute (not stored: as Redis' `LFUDecrAndReturn`).
    fn decayed(&self, word: u64, now_secs: u64) -> u8 {
        let (at, counter) = ((word >> 8) & 0xffff, (word & 0xff) as u8);
        let now = minutes(now_secs);
        let elapsed = if now >= at { now - at } else { 0xffff - at + now };
        let decay = self.lfu_params.load(Relaxed) & 0xffff_ffff;
        let periods = elapsed.checked_div(decay).unwrap_or(0);
        counter.saturating_sub(periods.min(255) as u8)
    }

    /// Redis' `LFULogIncr`: one more use makes the counter grow with a probability that
    /// falls as it grows.
    fn log_incr(&self, counter: u8) -> u8 {
        if counter == 255 {
            return 255;
        }
        let factor = (self.lfu_params.load(Relaxed) >> 32) as f64;
        let base = f64::from(counter.saturating_sub(LFU_INIT));
        let p = 1.0 / (base * factor + 1.0);
        let x = self.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed);
        let r = (crate::backend::key_hash(&x.to_le_bytes()) >> 11) as f64 / (1u64 << 53) as f64;
        if r < p { counter + 1 } else { counter }
    }

    fn lfu_word(counter: u8, now_secs: u64) -> u64 {
        (minutes(now_secs) << 8) | u64::from(counter)
    }

    fn slots(&self) -> &[AtomicU64] {
        self.slots.get_or_init(|| (0..SLOTS).map(|_| AtomicU64::new(0)).collect())
    }

    /// `key` was used at `now_secs` (looked up: under LFU its counter grows).
    pub(crate) fn touch(&self, key: &[u8], now_secs: u64) {
        let (slot, tag) = place(key);
        let slot = &self.slots()[slot];
        if !self.lfu() {
            slot.store((tag << 32) | (now_secs & 0xffff_ffff), Relaxed);
            return;
        }
        let word = slot.load(Relaxed);
        let counter = if word >> 32 == tag { self.log_incr(self.decayed(word, now_secs)) } else { LFU_INIT };
        slot.store((tag << 32) | Self::lfu_word(counter, now_secs), Relaxed);
    }

    /// `key` was written at `now_secs`: under LFU a key new to the table starts at
    /// [`LFU_INIT`] and a known one keeps its counter (the lookup before the write counted
    /// the use), as Redis' overwrite keeps the old object's.
    pub(crate) fn written(&self, key: &[u8], now_secs: u64) {
        if !self.lfu() {
            return self.touch(key, now_secs);
        }
        let (slot, tag) = place(key);
        let slot = &self.slots()[slot];
        if slot.load(Relaxed) >> 32 != tag {
            slot.store((tag << 32) | Self::lfu_word(LFU_INIT, now_secs), Relaxed);
        }
    }

    /// Sets the LFU counter of `key` (RESTORE … FREQ).
    pub(crate) fn set_freq(&self, key: &[u8], counter: u8, now_secs: u64) {
        let (slot, tag) = place(key);
        self.slots()[slot].store((tag << 32) | Self::lfu_word(counter, now_secs), Relaxed);
    }

    /// The LFU counter of `key` at `now_secs` (OBJECT FREQ): [`LFU_INIT`] for a key the
    /// table does not hold.
    pub(crate) fn freq(&self, key: &[u8], now_secs: u64) -> u8 {
        let Some(slots) = self.slots.get() else { return LFU_INIT };
        let (slot, tag) = place(key);
        match slots[slot].load(Relaxed) {
            word if word >> 32 == tag => self.decayed(word, now_secs),
            _ => LFU_INIT,
        }
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

    #[test]
    fn lfu_counters_start_at_five_grow_and_decay() {
        let times = AccessTimes::new(0);
        times.set_lfu(Some((0, 2)));
        times.written(b"k", 600);
        assert_eq!(times.freq(b"k", 600), LFU_INIT);
        // A write of a key already there keeps its counter.
        times.touch(b"k", 600);
        times.written(b"k", 600);
        assert_eq!(times.freq(b"k", 600), LFU_INIT + 1, "log factor 0: every use counts");
        // One off per 2 minutes since the last update.
        assert_eq!(times.freq(b"k", 600 + 5 * 60), LFU_INIT - 1);
        assert_eq!(times.freq(b"k", 600 + 24 * 3600), 0);
        times.set_freq(b"k", 255, 600);
        times.touch(b"k", 600);
        assert_eq!(times.freq(b"k", 600), 255, "saturates");
        // Factor 10: 1000 uses take a new key to about 19 (Redis' table), far from 1000.
        times.set_lfu(Some((10, 1)));
        times.set_freq(b"j", LFU_INIT, 600);
        for _ in 0..1000 {
            times.touch(b"j", 600);
        }
        let counter = times.freq(b"j", 600);
        assert!((12..=30).contains(&counter), "{counter}");
    }
}
