//! [`KeyFilter`]: which metadata keys a store may hold, so that the read of a key it
//! certainly does not hold (a SET of a new key must know it is new, for the key counts)
//! need not walk the store's memtables and tables.
//!
//! A scalable Bloom filter: layers of a Bloom filter blocked by 64-bit word, where a key
//! sets [`BITS_PER_KEY`] bits of one word, chosen by its [`key_hash`](super::key_hash).
//! Keys go into the newest layer; once it holds about as many keys as it was sized for
//! ([`LAYER_FILL`] of its bits set, a little less for each later layer), the insert that
//! passes the mark adds a layer twice its size, while the layers together stay within the
//! filter's bound. A key is looked for in every layer, so growing loses none, and a store
//! that grows keeps its false positives near 2% instead of a filter that saturates.
//!
//! Bits are only ever set, never cleared: a deleted key still answers "may hold", so the
//! filter has false positives (the store is then read) and never false negatives. When no
//! layer fits in the bound any more, the newest keeps filling; past [`MAX_FILL`] its false
//! positives grow, and the filter stops answering (every read goes to the store).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The bits a key sets in its word.
pub const BITS_PER_KEY: u32 = 6;

/// Bits of a layer per key it is sized for: about 1% false positives at that many keys.
pub const BITS_PER_SIZED_KEY: usize = 12;

/// The share of the first layer's bits set when it holds the keys it was sized for
/// (`1 - e^(-6/12)`): past it, a larger layer takes the new keys.
pub const LAYER_FILL: f64 = 0.4;

/// Each layer makes the next past this share of the fill of the one before: about a quarter
/// of its false positives, so that all layers together give about 2% (`fill^6` each).
pub const FILL_TIGHTENING: f64 = 0.8;

/// The share of set bits of the newest layer past which the filter no longer answers: with
/// [`BITS_PER_KEY`] bits per key, a random absent key then finds all of its bits set about
/// one time in nine.
pub const MAX_FILL: f64 = 0.7;

/// The most layers a filter has: from the smallest (512 bytes) doubling, more than any
/// bound a store asks for.
const MAX_LAYERS: usize = 24;

/// One Bloom filter of the layers.
struct Layer {
    words: Box<[AtomicU64]>,
    /// Bits set so far (each counted by the insert that set it).
    set: AtomicU64,
    /// [`LAYER_FILL`] of the bits, tightened by [`FILL_TIGHTENING`] for each layer before.
    grow_at: u64,
    /// [`MAX_FILL`] of the bits.
    most_set: u64,
}

impl Layer {
    /// The layer of `words` words that is the filter's `index`th.
    fn new(words: u64, index: usize) -> Layer {
        let bits = (words * 64) as f64;
        Layer {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            set: AtomicU64::new(0),
            grow_at: (LAYER_FILL * FILL_TIGHTENING.powi(index as i32) * bits) as u64,
            most_set: (MAX_FILL * bits) as u64,
        }
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

    /// Sets the key's bits; returns whether they took the layer past [`LAYER_FILL`].
    fn insert(&self, hash: u64) -> bool {
        let (word, bits) = self.place(hash);
        if word.load(Ordering::Relaxed) & bits == bits {
            return false;
        }
        let before = word.fetch_or(bits, Ordering::Release);
        let new = u64::from((bits & !before).count_ones());
        new > 0 && self.set.fetch_add(new, Ordering::Relaxed) + new > self.grow_at
    }

    fn may_hold(&self, hash: u64) -> bool {
        let (word, bits) = self.place(hash);
        word.load(Ordering::Acquire) & bits == bits
    }
}

/// A scalable Bloom filter of key hashes that threads set and test without a lock (see the
/// module docs).
pub struct KeyFilter {
    layers: [OnceLock<Layer>; MAX_LAYERS],
    /// Layers made so far; keys go into the last.
    made: AtomicUsize,
    /// Whether an insert is making the next layer, or no room is left for one.
    busy: AtomicBool,
    /// The most words all layers may take.
    max_words: u64,
}

impl KeyFilter {
    /// An empty filter whose first layer is sized for `keys` keys: [`BITS_PER_SIZED_KEY`]
    /// bits each, rounded up to a power of two of words (at least 64 words); all its
    /// layers together take at most `max_bytes` (rounded down to a power of two, at least
    /// 512).
    pub(crate) fn with_capacity(keys: u64, max_bytes: u64) -> KeyFilter {
        let wanted = keys.saturating_mul(BITS_PER_SIZED_KEY as u64).div_ceil(64).max(64).next_power_of_two();
        let most = (max_bytes / 8).max(64);
        let most = 1u64 << (63 - most.leading_zeros());
        let filter = KeyFilter {
            layers: std::array::from_fn(|_| OnceLock::new()),
            made: AtomicUsize::new(1),
            busy: AtomicBool::new(false),
            max_words: most,
        };
        let _ = filter.layers[0].set(Layer::new(wanted.min(most), 0));
        filter
    }

    /// The layers made so far, oldest first.
    fn layers(&self) -> impl DoubleEndedIterator<Item = &Layer> {
        self.layers[..self.made.load(Ordering::Acquire)].iter().filter_map(OnceLock::get)
    }

    /// The filter's size in bytes, all layers.
    pub(crate) fn bytes(&self) -> usize {
        self.layers().map(|l| l.words.len() * 8).sum()
    }

    /// The number of layers made so far.
    #[cfg(test)]
    fn layer_count(&self) -> usize {
        self.made.load(Ordering::Acquire)
    }

    /// Records the key whose hash is `hash`: in the newest layer, and when that passes
    /// [`LAYER_FILL`], makes the next layer (one insert allocates it; the others go on
    /// into the old one meanwhile).
    pub(crate) fn insert(&self, hash: u64) {
        let Some(top) = self.layers().next_back() else { return };
        if top.insert(hash) && !self.busy.load(Ordering::Relaxed) {
            self.grow(top);
        }
    }

    /// Adds a layer twice the size of `top` if it is still the newest and the bound leaves
    /// room; without room, no insert tries again.
    #[cold]
    fn grow(&self, top: &Layer) {
        if self.busy.swap(true, Ordering::Acquire) {
            return;
        }
        // Another insert may have grown the filter since this one's layer passed the mark.
        if !self.layers().next_back().is_some_and(|newest| std::ptr::eq(newest, top)) {
            self.busy.store(false, Ordering::Release);
            return;
        }
        let made = self.made.load(Ordering::Acquire);
        let words = top.words.len() as u64 * 2;
        let used: u64 = self.layers().map(|l| l.words.len() as u64).sum();
        if made == MAX_LAYERS || used + words > self.max_words {
            return;
        }
        let _ = self.layers[made].set(Layer::new(words, made));
        self.made.store(made + 1, Ordering::Release);
        self.busy.store(false, Ordering::Release);
    }

    /// Whether the key whose hash is `hash` may have been recorded: false only for a key
    /// never recorded, unless the filter is past [`MAX_FILL`] (then always true).
    pub(crate) fn may_hold(&self, hash: u64) -> bool {
        self.layers().rev().any(|l| l.may_hold(hash)) || self.full()
    }

    /// Whether the newest layer is past [`MAX_FILL`] (no room was left for another), so the
    /// filter answers "may hold" for every key.
    pub(crate) fn full(&self) -> bool {
        self.layers().next_back().is_none_or(|top| top.set.load(Ordering::Relaxed) > top.most_set)
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::key_hash;

    fn key(i: u64) -> Vec<u8> {
        format!("\x01\x0b__namespacekey:{i:012}").into_bytes()
    }

    /// The share of `count` keys from `from` never recorded that the filter may hold.
    fn false_positives(filter: &KeyFilter, from: u64, count: u64) -> f64 {
        (from..from + count).filter(|&i| filter.may_hold(key_hash(&key(i)))).count() as f64 / count as f64
    }

    #[test]
    fn sizes_are_powers_of_two_within_the_bound() {
        assert_eq!(KeyFilter::with_capacity(0, 1 << 20).bytes(), 512);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 64 << 20).bytes(), 2 << 20);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 1 << 20).bytes(), 1 << 20);
        assert_eq!(KeyFilter::with_capacity(1_000_000, 1_500_000).bytes(), 1 << 20);
    }

    /// Every recorded key may be held; of keys never recorded, about 1% (under 2%) at the
    /// size the filter was made for. Without room for another layer it fills, and past its
    /// fill it answers for every key.
    #[test]
    fn no_false_negatives_and_few_false_positives() {
        // 2^15 words of 64 bits, 12 bits a key; no room for a second layer.
        const KEYS: u64 = 174_762;
        let filter = KeyFilter::with_capacity(KEYS, 1 << 18);
        assert_eq!(filter.bytes(), 1 << 18);
        for i in 0..KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert!((0..KEYS).all(|i| filter.may_hold(key_hash(&key(i)))));
        assert!(!filter.full());
        let rate = false_positives(&filter, KEYS, KEYS);
        assert!(rate < 0.02, "false positives: {rate}");
        // Three times as many keys: past the fill, every key may be held.
        for i in 2 * KEYS..5 * KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert_eq!(filter.layer_count(), 1);
        assert!(filter.full());
        assert!((5 * KEYS..6 * KEYS).all(|i| filter.may_hold(key_hash(&key(i)))));
    }

    /// Thirty times the keys the first layer was sized for: the filter grows by layers of
    /// twice the size within its bound, holds every key, and keeps its false positives
    /// under 3%.
    #[test]
    fn a_filter_grows_by_layers_as_keys_come() {
        // 2^11 words: 16 KiB for 10,000 keys; up to 1 MiB in all.
        const KEYS: u64 = 300_000;
        let filter = KeyFilter::with_capacity(10_000, 1 << 20);
        for i in 0..KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert!((0..KEYS).all(|i| filter.may_hold(key_hash(&key(i)))));
        assert!(!filter.full());
        let layers = filter.layer_count();
        assert!((4..=6).contains(&layers), "{layers} layers");
        assert_eq!(filter.bytes(), (16 << 10) * ((1 << layers) - 1));
        let rate = false_positives(&filter, KEYS, KEYS);
        assert!(rate < 0.03, "false positives: {rate} over {layers} layers");
        // Past its bound (1 MiB: six layers), the newest layer fills and the filter stops
        // answering.
        for i in KEYS..10 * KEYS {
            filter.insert(key_hash(&key(i)));
        }
        assert_eq!(filter.layer_count(), 6);
        assert_eq!(filter.bytes(), (16 << 10) * 63);
        assert!(filter.full());
        assert!(filter.may_hold(key_hash(&key(10 * KEYS))));
    }

    /// Threads recording keys at once lose none of them, while the filter grows under them.
    #[test]
    fn concurrent_inserts_lose_no_key() {
        let filter = KeyFilter::with_capacity(1_000, 4 << 20);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let filter = &filter;
                s.spawn(move || (0..50_000).for_each(|i| filter.insert(key_hash(&key(t * 1_000_000 + i)))));
            }
        });
        assert!(!filter.full());
        assert!(filter.layer_count() > 4, "{} layers", filter.layer_count());
        assert!((0..4u64).all(|t| (0..50_000).all(|i| filter.may_hold(key_hash(&key(t * 1_000_000 + i))))));
    }
}
