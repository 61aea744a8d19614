//! [`MetadataCache`]: metadata records kept in memory in front of a store.
//!
//! Every command reads its keys' metadata first; on an LSM store that read walks the
//! memtables and the tables even for a key written a moment ago. The cache answers it from
//! memory for recently read or written keys.
//!
//! It is a direct-mapped table of [`SLOTS`] slots, each holding one key's record (or its
//! absence), filled by reads and by writes through the cache (write-through), and bounded:
//! records over [`MAX_VALUE`] bytes are not kept. It is only correct when every write to the
//! store goes through it: never put it in front of a store other processes write (a shared
//! store, [`KvBackend::is_shared`]).
//!
//! Readers need no lock on the key. Each slot counts the writes of its keys in progress and
//! carries a version that each of them bumps when it starts and when it ends. A write empties
//! the slot before the store takes the batch and puts the new record in after, unless another
//! write of the slot is still in progress. A read that missed keeps what it read from the
//! store only if no write of the slot started or ran meanwhile, so a record read before a
//! write can never be kept after it, nor one write's record after a later one's.
//!
//! [`MetadataCache::with_key_filter`] also keeps a filter of the keys the store may hold,
//! so that a read of a key that is certainly absent (a SET of a new key, a GET of a
//! missing one) answers at once. Every metadata record written from the start goes into
//! the filter before it goes to the store; [`MetadataCache::fill_key_filter`] adds the keys
//! the store held, and only then does the filter answer. Deleted keys stay in it (the store
//! is read for them); it grows by layers as keys come, and stops answering only when it has
//! filled its bound.
//!
//! A walk through a list's elements ([`KvBackend::get_ahead`], a list popped element by
//! element) is read ahead in one scan and answered from memory (`read_ahead`'s runs), so
//! each pop is not a point read of the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::key_filter::KeyFilter;
use super::read_ahead::{Lookup, Runs};
use super::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch, key_hash};
use crate::codec::KeyRange;
use crate::error::Result;

/// The number of slots.
pub const SLOTS: usize = 4096;

/// The largest record value kept (a string's metadata record holds its value).
pub const MAX_VALUE: usize = 512;

#[derive(Default)]
struct Slot {
    version: u64,
    /// Writes of keys of this slot in progress.
    writing: u32,
    /// The key and its record (`None`: the store has no such key).
    entry: Option<(Bytes, Option<Bytes>)>,
}

/// A [`KvBackend`] that keeps metadata records of `B` in memory (see the module docs).
/// Every other column family, scans and stamps go to `B` as they are.
pub struct MetadataCache<B> {
    inner: B,
    slots: Box<[Mutex<Slot>]>,
    /// The keys the store may hold, and whether it answers yet (see the module docs).
    filter: Option<KeyFilter>,
    filter_filled: AtomicBool,
    /// Subkeys read ahead of walks.
    runs: Runs,
}

impl<B: std::fmt::Debug> std::fmt::Debug for MetadataCache<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataCache").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<B: KvBackend> MetadataCache<B> {
    /// Puts an empty cache in front of `inner`, which only this cache may write from now on.
    pub fn new(inner: B) -> Self {
        MetadataCache {
            inner,
            slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
            filter: None,
            filter_filled: AtomicBool::new(false),
            runs: Runs::default(),
        }
    }

    /// [`MetadataCache::new`] with a filter of the keys the store may hold, sized for `keys`
    /// keys within `max_bytes` (see the module docs). It answers once
    /// [`MetadataCache::fill_key_filter`] has run.
    pub fn with_key_filter(inner: B, keys: u64, max_bytes: u64) -> Self {
        MetadataCache { filter: Some(KeyFilter::with_capacity(keys, max_bytes)), ..MetadataCache::new(inner) }
    }

    /// Adds every metadata key the store holds to the key filter, which answers from then
    /// on; returns how many keys it read. Writes may go on meanwhile (they add their own
    /// keys). Without a filter, reads nothing.
    ///
    /// # Errors
    /// The store's, from its scan; the filter then does not answer.
    pub fn fill_key_filter(&self) -> Result<u64> {
        let Some(filter) = &self.filter else { return Ok(0) };
        let everything = KeyRange { start: Vec::new(), end: None };
        let mut keys = 0;
        for pair in self.inner.scan(ColumnFamily::Metadata, &everything, Direction::Forward)? {
            filter.insert(key_hash(&pair?.0));
            keys += 1;
        }
        self.filter_filled.store(true, Ordering::Release);
        Ok(keys)
    }

    /// The key filter's size in bytes, and whether it answers (filled and not too full).
    pub fn key_filter(&self) -> Option<(usize, bool)> {
        let filter = self.filter.as_ref()?;
        Some((filter.bytes(), self.filter_filled.load(Ordering::Acquire) && !filter.full()))
    }

    /// The metadata record of `key` from the store, after a miss of its slot `at` at the
    /// slot's `version`: kept in the slot unless a write of the slot started or ran since.
    fn read_through(&self, key: &[u8], at: usize, version: u64) -> Result<Option<Bytes>> {
        let value = self.inner.get(ColumnFamily::Metadata, key)?;
        if value.as_ref().is_none_or(|v| v.len() <= MAX_VALUE) {
            let mut slot = self.slot(at);
            if slot.version == version && slot.writing == 0 {
                slot.entry = Some((Bytes::copy_from_slice(key), value.clone()));
            }
        }
        Ok(value)
    }

    /// Whether the filter says the store certainly has no record under the key whose hash
    /// is `hash`.
    fn surely_absent(&self, hash: u64) -> bool {
        self.filter.as_ref().is_some_and(|f| self.filter_filled.load(Ordering::Acquire) && !f.may_hold(hash))
    }

    /// The store behind the cache.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn slot(&self, at: usize) -> MutexGuard<'_, Slot> {
        // A panic while a slot is held leaves nothing half-written in it.
        self.slots[at].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A write of a key of slot `at` starts: the slot is emptied.
    fn start_write(&self, at: usize) {
        let mut slot = self.slot(at);
        slot.writing += 1;
        slot.version += 1;
        slot.entry = None;
    }

    /// A write of `key` (of slot `at`) ended (`written`: the store took `value`, `None` for a
    /// delete): the slot keeps the new record if no other write of it is in progress.
    fn end_write(&self, at: usize, key: Bytes, value: Option<Bytes>, written: bool) {
        let mut slot = self.slot(at);
        slot.writing -= 1;
        slot.version += 1;
        let keep = written && slot.writing == 0 && value.as_ref().is_none_or(|v| v.len() <= MAX_VALUE);
        slot.entry = keep.then_some((key, value));
    }
}

/// The slot of the key whose hash is `hash`.
fn slot_of(hash: u64) -> usize {
    hash as usize % SLOTS
}

/// A metadata record a batch writes: its key's hash, key and new value (`None`: deleted).
type MetadataOp = (u64, Bytes, Option<Bytes>);

/// `op`'s [`MetadataOp`], if it writes a metadata record.
fn metadata_op(op: &BatchOp) -> Option<MetadataOp> {
    match op {
        BatchOp::Put { cf: ColumnFamily::Metadata, key, value } => {
            Some((key_hash(key), key.clone(), Some(value.clone())))
        }
        BatchOp::Delete { cf: ColumnFamily::Metadata, key } => Some((key_hash(key), key.clone(), None)),
        _ => None,
    }
}

impl<B: KvBackend> KvBackend for MetadataCache<B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        if cf != ColumnFamily::Metadata {
            return self.inner.get(cf, key);
        }
        let hash = key_hash(key);
        if self.surely_absent(hash) {
            return Ok(None);
        }
        let at = slot_of(hash);
        let version = {
            let slot = self.slot(at);
            if let Some((k, v)) = &slot.entry
                && k.as_ref() == key
            {
                return Ok(v.clone());
            }
            slot.version
        };
        self.read_through(key, at, version)
    }

    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        if cf == ColumnFamily::Metadata {
            let hash = key_hash(key);
            if self.surely_absent(hash) {
                read(None);
                return Ok(());
            }
            // A hit is lent from its slot, which stays locked meanwhile (a decode, no store
            // access): no reference taken to the cached bytes.
            let at = slot_of(hash);
            let version = {
                let slot = self.slot(at);
                if let Some((k, v)) = &slot.entry
                    && k.as_ref() == key
                {
                    read(v.as_deref());
                    return Ok(());
                }
                slot.version
            };
            read(self.read_through(key, at, version)?.as_deref());
            return Ok(());
        }
        self.inner.get_with(cf, key, read)
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        if cf != ColumnFamily::Metadata {
            return self.inner.multi_get(cf, keys);
        }
        keys.iter().map(|k| self.get(cf, k)).collect()
    }

    /// A subkey from a run read ahead when one holds it; else, when the read continues a walk
    /// (its key lies in the span the one before announced), one scan of `key` and the next
    /// records toward `bound`, kept as a run; else a point read.
    fn get_ahead(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        bound: &[u8],
        direction: Direction,
    ) -> Result<Option<Bytes>> {
        if cf != ColumnFamily::Subkey {
            return self.get(cf, key);
        }
        match self.runs.lookup(key, bound, direction) {
            Lookup::Hit(value) => Ok(value),
            Lookup::Walk => self.runs.read_ahead(&self.inner, key, bound, direction),
            Lookup::Point => self.inner.get(cf, key),
        }
    }

    fn reads_ahead(&self) -> bool {
        true
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        self.inner.scan(cf, range, direction)
    }

    /// Writes `batch` to the store. Its metadata keys' slots are emptied first; once the
    /// store took the batch they hold the new records, and after a failed write they stay
    /// empty (the store's state is then read again). Runs read ahead lose the subkeys it
    /// deletes, and a run one of its subkey puts falls in goes (every run, if it fails).
    ///
    /// # Errors
    /// The store's.
    fn write(&self, batch: WriteBatch) -> Result<()> {
        let subkeys = batch.ops().iter().any(|op| op.cf() == ColumnFamily::Subkey);
        if subkeys {
            self.runs.start_write(batch.ops());
        }
        // The first apart: a batch of one metadata record (most) allocates no list.
        let mut ops = batch.ops().iter().filter_map(metadata_op);
        let (first, rest): (Option<MetadataOp>, Vec<MetadataOp>) = (ops.next(), ops.collect());
        for (hash, _, value) in first.iter().chain(&rest) {
            if let (Some(filter), Some(_)) = (&self.filter, value) {
                // Before the store has it: the filter never says a stored key is absent.
                filter.insert(*hash);
            }
            self.start_write(slot_of(*hash));
        }
        let written = self.inner.write(batch);
        if subkeys {
            self.runs.end_write(written.is_ok());
        }
        for (hash, key, value) in first.into_iter().chain(rest) {
            self.end_write(slot_of(hash), key, value, written.is_ok());
        }
        written
    }

    fn begin(&self) {
        self.inner.begin()
    }

    fn finish(&self) -> bool {
        self.inner.finish()
    }

    fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        self.inner.retry_pause(attempt, elapsed)
    }

    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        self.inner.stamp(cf, key)
    }

    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }

    /// The store's own snapshot: every write went through to it.
    fn snapshot(&self) -> Result<Option<super::Snapshot>> {
        self.inner.snapshot()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    use crate::backend::{FaultyBackend, MemoryBackend};

    crate::kv_backend_conformance!(MetadataCache::new(MemoryBackend::new()));

    /// A cache with a filled key filter, sized for 1,000 keys.
    fn filtered<B: KvBackend>(inner: B) -> MetadataCache<B> {
        let cache = MetadataCache::with_key_filter(inner, 1000, 1 << 20);
        cache.fill_key_filter().unwrap();
        cache
    }

    mod with_a_key_filter {
        use super::*;
        crate::kv_backend_conformance!(filtered(MemoryBackend::new()));
    }

    /// A store that counts its point reads of metadata and of subkeys, and its scans.
    #[derive(Default)]
    pub(in crate::backend) struct Counting {
        pub(in crate::backend) store: MemoryBackend,
        reads: AtomicUsize,
        pub(in crate::backend) subkey_reads: AtomicUsize,
        pub(in crate::backend) scans: AtomicUsize,
    }

    impl KvBackend for Counting {
        fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
            match cf {
                ColumnFamily::Metadata => self.reads.fetch_add(1, Ordering::Relaxed),
                ColumnFamily::Subkey => self.subkey_reads.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            self.store.get(cf, key)
        }

        fn scan<'a>(
            &'a self,
            cf: ColumnFamily,
            range: &KeyRange,
            direction: Direction,
        ) -> Result<ScanIter<'a>> {
            self.scans.fetch_add(1, Ordering::Relaxed);
            self.store.scan(cf, range, direction)
        }

        fn write(&self, batch: WriteBatch) -> Result<()> {
            self.store.write(batch)
        }
    }

    fn reads(cache: &MetadataCache<Counting>) -> usize {
        cache.inner().reads.load(Ordering::Relaxed)
    }

    /// Keys the store held before the filter was filled, and keys written since, are read;
    /// keys never written, or never before the filter answers, are answered without a read.
    #[test]
    fn the_key_filter_spares_the_reads_of_absent_keys() {
        let inner = Counting::default();
        for i in 0..100 {
            put(&inner.store, format!("old{i}").as_bytes(), b"v").unwrap();
        }
        let cache = MetadataCache::with_key_filter(inner, 1000, 1 << 20);
        put(&cache, b"new-before-filling", b"v").unwrap();
        assert_eq!(cache.key_filter(), Some((2048, false)));
        // Not filled yet: every miss of the slots goes to the store.
        assert_eq!(cache.get(ColumnFamily::Metadata, b"absent0").unwrap(), None);
        assert_eq!(reads(&cache), 1);
        assert_eq!(cache.fill_key_filter().unwrap(), 101);
        assert_eq!(cache.key_filter(), Some((2048, true)));
        put(&cache, b"new-after-filling", b"v").unwrap();
        let before = reads(&cache);
        let absent = (1..1000).filter(|i| {
            let key = format!("absent{i}");
            assert_eq!(cache.get(ColumnFamily::Metadata, key.as_bytes()).unwrap(), None);
            let mut seen = Some(vec![]);
            cache
                .get_with(ColumnFamily::Metadata, key.as_bytes(), &mut |v| seen = v.map(<[u8]>::to_vec))
                .unwrap();
            assert_eq!(seen, None);
            reads(&cache) == before
        });
        // About 1% of absent keys are false positives of a filter at its size.
        assert!(absent.count() > 900);
        let present = (0..100)
            .map(|i| format!("old{i}"))
            .chain(["new-before-filling".into(), "new-after-filling".into()]);
        for key in present {
            assert_eq!(
                cache.get(ColumnFamily::Metadata, key.as_bytes()).unwrap().as_deref(),
                Some(&b"v"[..]),
                "{key}"
            );
        }
    }

    /// A fill whose scan fails midway leaves the filter silent: the keys it did not reach
    /// are still found, from the store.
    #[test]
    fn a_failed_fill_leaves_the_filter_silent() {
        let faulty = FaultyBackend::new(MemoryBackend::new());
        for i in 0..10 {
            put(&faulty, format!("k{i}").as_bytes(), b"v").unwrap();
        }
        let cache = MetadataCache::with_key_filter(&faulty, 1000, 1 << 20);
        faulty.fail_read(5);
        assert!(cache.fill_key_filter().is_err());
        faulty.disarm();
        assert_eq!(cache.key_filter(), Some((2048, false)));
        for i in 0..10 {
            assert_eq!(
                cache.get(ColumnFamily::Metadata, format!("k{i}").as_bytes()).unwrap().as_deref(),
                Some(&b"v"[..])
            );
        }
    }

    /// A deleted key stays in the filter (the store answers for it), and a filter without
    /// room to grow, filled past its size, stops answering.
    #[test]
    fn deleted_keys_are_read_and_a_full_filter_stops_answering() {
        let cache = MetadataCache::with_key_filter(Counting::default(), 1000, 2048);
        cache.fill_key_filter().unwrap();
        put(&cache, b"gone", b"v").unwrap();
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Metadata, b"gone".to_vec());
        cache.write(batch).unwrap();
        assert_eq!(cache.get(ColumnFamily::Metadata, b"gone").unwrap(), None);
        assert!(cache.filter.as_ref().unwrap().may_hold(key_hash(b"gone")));
        for i in 0..5000 {
            put(&cache, format!("k{i}").as_bytes(), b"v").unwrap();
        }
        assert_eq!(cache.key_filter(), Some((2048, false)));
        let before = reads(&cache);
        for i in 0..100 {
            assert_eq!(cache.get(ColumnFamily::Metadata, format!("absent{i}").as_bytes()).unwrap(), None);
        }
        assert_eq!(reads(&cache), before + 100);
    }

    /// Forty times the keys the filter was sized for: it grows within its bound and goes on
    /// answering for absent keys without a store read.
    #[test]
    fn a_filter_outgrown_by_the_store_grows_and_answers() {
        let cache = filtered(Counting::default());
        for i in 0..40_000 {
            put(&cache, format!("k{i}").as_bytes(), b"v").unwrap();
        }
        let (bytes, answers) = cache.key_filter().unwrap();
        assert!(answers && bytes > 2048 && bytes <= 1 << 20, "{bytes} bytes, answers: {answers}");
        let before = reads(&cache);
        for i in 0..1000 {
            assert_eq!(cache.get(ColumnFamily::Metadata, format!("absent{i}").as_bytes()).unwrap(), None);
        }
        // About 2% of absent keys are false positives of the grown filter.
        let read = reads(&cache) - before;
        assert!(read < 40, "{read} of 1000 absent keys read from the store");
        for i in (0..40_000).step_by(97) {
            assert_eq!(
                cache.get(ColumnFamily::Metadata, format!("k{i}").as_bytes()).unwrap().as_deref(),
                Some(&b"v"[..])
            );
        }
    }

    /// Writers create keys while the filter is filled from the store: once it answers, it
    /// answers for every key the store holds.
    #[test]
    fn keys_written_while_the_filter_fills_are_in_it() {
        let inner = MemoryBackend::new();
        for i in 0..20_000 {
            put(&inner, format!("old{i}").as_bytes(), b"v").unwrap();
        }
        let cache = MetadataCache::with_key_filter(inner, 100_000, 1 << 20);
        std::thread::scope(|s| {
            for w in 0..3 {
                let cache = &cache;
                s.spawn(move || {
                    for i in 0..5_000 {
                        put(cache, format!("new{w}:{i}").as_bytes(), b"v").unwrap();
                    }
                });
            }
            assert!(cache.fill_key_filter().unwrap() >= 20_000);
        });
        assert_eq!(cache.key_filter(), Some((1 << 18, true)));
        let everything = KeyRange { start: Vec::new(), end: None };
        let mut stored = 0;
        for pair in cache.inner().scan(ColumnFamily::Metadata, &everything, Direction::Forward).unwrap() {
            let (key, value) = pair.unwrap();
            assert_eq!(cache.get(ColumnFamily::Metadata, &key).unwrap(), Some(value));
            stored += 1;
        }
        assert_eq!(stored, 35_000);
    }

    fn put(b: &impl KvBackend, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, key.to_vec(), value.to_vec());
        b.write(batch)
    }

    #[test]
    fn a_read_after_a_write_sees_it_whether_cached_or_not() {
        let cache = MetadataCache::new(MemoryBackend::new());
        assert_eq!(cache.get(ColumnFamily::Metadata, b"k").unwrap(), None);
        put(&cache, b"k", b"1").unwrap();
        assert_eq!(cache.get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&b"1"[..]));
        // The store itself has it: the cache wrote through.
        assert_eq!(cache.inner().get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&b"1"[..]));
        let big = vec![7u8; MAX_VALUE + 1];
        put(&cache, b"k", &big).unwrap();
        assert_eq!(cache.get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&big[..]));
    }

    #[test]
    fn a_batch_of_several_metadata_records_is_cached_whole() {
        let cache = MetadataCache::new(MemoryBackend::new());
        put(&cache, b"c", b"old").unwrap();
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, b"a".to_vec(), b"1".to_vec());
        batch.put(ColumnFamily::Subkey, b"a-sub".to_vec(), b"x".to_vec());
        batch.put(ColumnFamily::Metadata, b"b".to_vec(), b"2".to_vec());
        batch.delete(ColumnFamily::Metadata, b"c".to_vec());
        cache.write(batch).unwrap();
        // What the cache answers, then what the store holds: the same.
        for b in [&cache as &dyn KvBackend, cache.inner()] {
            assert_eq!(b.get(ColumnFamily::Metadata, b"a").unwrap().as_deref(), Some(&b"1"[..]));
            assert_eq!(b.get(ColumnFamily::Metadata, b"b").unwrap().as_deref(), Some(&b"2"[..]));
            assert_eq!(b.get(ColumnFamily::Metadata, b"c").unwrap(), None);
        }
    }

    #[test]
    fn keys_sharing_a_slot_do_not_see_each_other() {
        let cache = MetadataCache::new(MemoryBackend::new());
        // More keys than slots: many share one.
        let keys: Vec<Vec<u8>> = (0..SLOTS * 3).map(|i| format!("key{i}").into_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            if i % 2 == 0 {
                put(&cache, k, k).unwrap();
            }
        }
        for (i, k) in keys.iter().enumerate() {
            let want = (i % 2 == 0).then_some(&k[..]);
            assert_eq!(cache.get(ColumnFamily::Metadata, k).unwrap().as_deref(), want);
        }
    }

    #[test]
    fn a_failed_write_leaves_the_store_s_state_visible() {
        let faulty = FaultyBackend::new(MemoryBackend::new());
        let cache = MetadataCache::new(&faulty);
        put(&cache, b"k", b"1").unwrap();
        assert_eq!(cache.get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&b"1"[..]));
        faulty.fail_write(0);
        assert!(put(&cache, b"k", b"2").is_err());
        faulty.disarm();
        assert_eq!(cache.get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&b"1"[..]));
    }

    /// Writers bump counters through the cache while readers read them without any lock:
    /// a reader never sees a counter go back, and at the end the cache agrees with the
    /// store on every key.
    #[test]
    fn unlocked_readers_never_keep_a_record_older_than_a_write() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let cache = MetadataCache::new(MemoryBackend::new());
        let keys: Vec<Vec<u8>> = (0..8).map(|i| format!("c{i}").into_bytes()).collect();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for (w, key) in keys.iter().enumerate() {
                let (cache, done) = (&cache, &done);
                s.spawn(move || {
                    for n in 1..=2000u64 {
                        put(cache, key, &n.to_be_bytes()).unwrap();
                    }
                    if w == 0 {
                        done.store(true, Ordering::SeqCst);
                    }
                });
            }
            for _ in 0..2 {
                let (cache, keys, done) = (&cache, &keys, &done);
                s.spawn(move || {
                    let mut seen = vec![0u64; keys.len()];
                    while !done.load(Ordering::SeqCst) {
                        for (i, k) in keys.iter().enumerate() {
                            let n = cache
                                .get(ColumnFamily::Metadata, k)
                                .unwrap()
                                .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()));
                            assert!(n >= seen[i], "key {i} went back from {} to {n}", seen[i]);
                            seen[i] = n;
                        }
                    }
                });
            }
        });
        for k in &keys {
            let stored = cache.inner().get(ColumnFamily::Metadata, k).unwrap();
            assert_eq!(cache.get(ColumnFamily::Metadata, k).unwrap(), stored);
            assert_eq!(stored.as_deref(), Some(&2000u64.to_be_bytes()[..]));
        }
    }
}
