//! [`KeyFilter`]: which metadata keys a store may hold, so that the read of a key it
//! certainly does not hold (a SET of a new key must know it is new, for the key counts)
//! need not walk the store's memtables and tables.
//!
//! A Bloom filter blocked by 64-bit word: a key sets [`BITS_PER_KEY`] bits of one word,
//! chosen by its [`key_hash`](super::key_hash). Bits are only ever set, never cleared: a
//! deleted key still answers "may hold", so the filter has false positives (the store is
//! then read) and never false negatives. As it fills past [`MAX_FILL`] its false positives
//! grow, and it stops answering (every read goes to the store).

use std::sync::atomic::{AtomicU64, Ordering};

/// The bits a key sets in its word.
pub const BITS_PER_KEY: u32 = 6;

/// Bits of the filter per key it is sized for: about 1% false positives at that many keys.
pub const BITS_PER_SIZED_KEY: usize = 12;

/// The share of set bits past which the filter no longer answers: with [`BITS_PER_KEY`]
/// bits per key, a random absent key then finds all of its bits set about one time in nine.
pub const MAX_FILL: f64 = 0.7;

/// A Bloom filter of key hashes that threads set and test without a lock (see the module
/// docs).
pub struct KeyFilter {
    words: Box<[AtomicU64]>,
    /// Bits set so far (each counted by the insert that set it).
    set: AtomicU64,
    /// [`MAX_FILL`] of the bits.
    most_set: u64,
}

impl KeyFilter {
    /// An empty filter sized for `keys` keys: [`BITS_PER_SIZED_KEY`] bits each, rounded up
    /// to a power of two of words (at least 64 words), and at most `max_bytes` (rounded
    /// down to a power of two, at least 512).
    pub fn with_capacity(keys: u64, max_bytes: u64) -> KeyFilter {
        let wanted = keys.saturating_mul(BITS_PER_SIZED_KEY as u64).div_ceil(64).max(64).next_power_of_two();
        let most = (max_bytes / 8).max(64);
        let most = 1u64 << (63 - most.leading_zeros());
        let words = wanted.min(most);
        KeyFilter {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            set: AtomicU64::new(0),
            most_set: (MAX_FILL * (words * 64) as f64) as u64,
        }
    }

    /// The filter's size in bytes.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The word and the bits of the key whose hash is `hash`.
    fn place(&self, hash: u64) -> (&AtomicU64, u64) {
        let word = &self.words[(hash >> 32) as usize & (self.words.len() - 1)];
        let mut bits_of = (hash ^ (hash >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let mut bits = 0u64;
        for _ in 0..BITS_PER_KEY {
            bits |= 1 << (bits_of & 63);
            bits_of >>= 6;
        }
        (word, bits)
    }

    /// Records the key whose hash is `hash`.
    pub fn insert(&self, hash: u64) {
        let (word, bits) = self.place(hash);
        if word.load(Ordering::Relaxed) & bits == bits {
            return;
        }
        let before = word.fetch_or(bits, Ordering::Release);
        let new = (bits & !before).count_ones();
        if new > 0 {
            self.set.fetch_add(u64::from(new), Ordering::Relaxed);
        }
    }

    /// Whether the key whose hash is `hash` may have been recorded: false only for a key
    /// never recorded, unless the filter is past [`MAX_FILL`] (then always true).
    pub fn may_hold(&self, hash: u64) -> bool {
        let (word, bits) = self.place(hash);
        word.load(Ordering::Acquire) & bits == bits || self.full()
    }

    /// Whether the filter is past [`MAX_FILL`] and so answers "may hold" for every key.
    pub fn full(&self) -> bool {
        self.set.load(Ordering::Relaxed) > self.most_set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::key_hash;

    fn key(i: u64) -> Vec<u8> {
        format!("\x01\x0b__namespacekey:{i:012}").into_bytes()
    }

    #[test]
    fn sizes_are_powers_of_two_within_the_bound() {
        assert_eq!(KeyFilter::with_capacity(0, 1 << 20).bytes(), 512);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 64 << 20).bytes(), 2 << 20);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 1 << 20).bytes(), 1 << 20);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 1_500_000).bytes(), 1 << 20);
    }

    /// Every recorded key may be held; of keys never recorded, about 1% (under 2%) at the
    /// size the filter was made for, and the filter answers for all of them once past its fill.
    #[test]
    fn no_false_negatives_and_few_false_positives() {
        // 2^15 words of 64 bits, 12 bits a key.
        const KEYS: u64 = 174_762;
        let filter = KeyFilter::with_capacity(KEYS, 1 << 30);
        assert_eq!(filter.bytes(), 1 << 18);
        for i in 0..KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert!((0..KEYS).all(|i| filter.may_hold(key_hash(&key(i)))));
        assert!(!filter.full());
        let positives = (KEYS..2 * KEYS).filter(|&i| filter.may_hold(key_hash(&key(i)))).count();
        let rate = positives as f64 / KEYS as f64;
        assert!(rate < 0.02, "false positives: {rate}");
        // Three times as many keys: past the fill, every key may be held.
        for i in 2 * KEYS..5 * KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert!(filter.full());
        assert!((5 * KEYS..6 * KEYS).all(|i| filter.may_hold(key_hash(&key(i)))));
    }

    /// Threads recording keys at once lose none of them.
    #[test]
    fn concurrent_inserts_lose_no_key() {
        let filter = KeyFilter::with_capacity(100_000, 1 << 20);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let filter = &filter;
                s.spawn(move || (0..20_000).for_each(|i| filter.insert(key_hash(&key(t * 1_000_000 + i)))));
            }
        });
        assert!(!filter.full());
        assert!((0..4u64).all(|t| (0..20_000).all(|i| filter.may_hold(key_hash(&key(t * 1_000_000 + i))))));
    }
}
