//! The storage interface: [`KvBackend`], the in-memory reference [`MemoryBackend`], the
//! [`conformance`] kit every other implementation should run, [`FaultyBackend`] for tests
//! of what an engine does when its store fails, and [`MetadataCache`], which keeps a store's
//! recent metadata records in memory when only one process writes it.

mod cached;
pub mod conformance;
mod faulty;
mod key_filter;
mod memory;
mod read_ahead;

use bytes::Bytes;

pub use crate::codec::ColumnFamily;
use crate::codec::KeyRange;
use crate::error::Result;
pub use cached::MetadataCache;
pub use faulty::FaultyBackend;
pub use memory::MemoryBackend;

/// A fast 64-bit hash of a key (not keyed: for spreading keys, not against adversaries),
/// whose high and low halves both vary with every byte.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |h: u64, word: u64| (h ^ word).wrapping_mul(K).rotate_left(31);
    let mut h = key.len() as u64;
    for chunk in key.chunks_exact(8) {
        h = mix(h, u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
    }
    // The last 8 bytes (overlapping the last chunk), or all of a shorter key: a few loads,
    // no call to `memcpy`.
    let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| u64::from(u32::from_le_bytes(key[at..at + 4].try_into().unwrap_or_default()));
    let n = key.len();
    let tail = match n {
        8.. => word(n - 8),
        4..8 => (half(n - 4) << 32) | half(0),
        1..4 => u64::from(key[0]) | (u64::from(key[n / 2]) << 8) | (u64::from(key[n - 1]) << 16),
        0 => 0,
    };
    h = mix(h, tail);
    let h = (h ^ (h >> 29)).wrapping_mul(K);
    h ^ (h >> 32)
}

/// A key and its value, as a scan yields them.
pub type KvPair = (Bytes, Bytes);

/// A consistent read-only view of a whole store at one point in time
/// ([`KvBackend::snapshot`]): reads answer as the store did then; nothing written to it
/// reaches the store (a disk engine's snapshot refuses writes).
pub type Snapshot = std::sync::Arc<dyn KvBackend + Send + Sync>;

/// A lazy scan: records in key order (or reverse), each possibly a backend error.
pub type ScanIter<'a> = Box<dyn Iterator<Item = Result<KvPair>> + 'a>;

/// Which way a scan walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending byte order, from `start`.
    Forward,
    /// Descending byte order, from just before `end`.
    Reverse,
}

/// One write in a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Set `key` to `value` in `cf`.
    Put {
        /// Column family.
        cf: ColumnFamily,
        /// Record key.
        key: Bytes,
        /// Record value (may be empty).
        value: Bytes,
    },
    /// Remove `key` from `cf`; removing a missing key is not an error.
    Delete {
        /// Column family.
        cf: ColumnFamily,
        /// Record key.
        key: Bytes,
    },
}

impl BatchOp {
    /// The column family it writes.
    pub(crate) fn cf(&self) -> ColumnFamily {
        match self {
            BatchOp::Put { cf, .. } | BatchOp::Delete { cf, .. } => *cf,
        }
    }
}

/// Puts and deletes across column families, applied all-or-nothing and in order: when two
/// operations touch the same key, the later one wins.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    /// What the commit's key counts need of one metadata put (the last one the command
    /// queued with [`WriteBatch::put_metadata`], by its place in `ops`), so that they do
    /// not decode the record the command has just encoded.
    written: Option<(usize, WrittenMetadata)>,
}

/// Of a metadata record a command writes: what it adds to the key counts (`None` when it is
/// no key, else its expiry) and its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrittenMetadata {
    pub(crate) counted: Option<u64>,
    pub(crate) version: crate::codec::Version,
}

/// Batches are equal when their operations are.
impl PartialEq for WriteBatch {
    fn eq(&self, other: &Self) -> bool {
        self.ops == other.ops
    }
}

impl Eq for WriteBatch {}

impl WriteBatch {
    /// An empty batch, with room for a few operations: nearly every batch gets one, and a
    /// first push that grows the vector costs more than allocating it here.
    pub fn new() -> Self {
        WriteBatch { ops: Vec::with_capacity(4), written: None }
    }

    /// Adds a put of a metadata record at `key`, which decodes to what `written` says.
    pub(crate) fn put_metadata(
        &mut self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        written: WrittenMetadata,
    ) {
        self.written = Some((self.ops.len(), written));
        self.put(ColumnFamily::Metadata, key, value);
    }

    /// What [`WriteBatch::put_metadata`] said of the operation at `index`, if it queued it.
    #[inline]
    pub(crate) fn written(&self, index: usize) -> Option<WrittenMetadata> {
        self.written.filter(|(at, _)| *at == index).map(|(_, written)| written)
    }

    /// Adds a put.
    pub fn put(&mut self, cf: ColumnFamily, key: impl Into<Bytes>, value: impl Into<Bytes>) {
        self.ops.push(BatchOp::Put { cf, key: key.into(), value: value.into() });
    }

    /// Adds a delete.
    pub fn delete(&mut self, cf: ColumnFamily, key: impl Into<Bytes>) {
        self.ops.push(BatchOp::Delete { cf, key: key.into() });
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Takes the operations, in order.
    pub fn into_ops(self) -> Vec<BatchOp> {
        self.ops
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// How many times in all [`crate::commands::Engine`] runs a command (or an EXEC) whose batch
/// the backend refused with [`crate::Error::Conflict`] (see [`KvBackend::begin`]), unless the
/// backend's [`KvBackend::retry_pause`] says otherwise; the last refusal is the client's error
/// reply.
pub const CONFLICT_ATTEMPTS: u32 = 16;

/// An ordered key-value store with four column families.
///
/// # Contract
/// - Keys are compared as unsigned bytes; values may be empty.
/// - [`KvBackend::scan`] yields exactly the keys in `[range.start, range.end)` (`end: None`
///   is unbounded), ascending for [`Direction::Forward`], descending for
///   [`Direction::Reverse`]. It may be lazy; the engine often stops early.
/// - [`KvBackend::write`] applies the whole batch or none of it, operations in order.
///
/// # Consistency
/// Every method takes `&self`, so one backend can serve many threads (wrap it in an `Arc`).
/// A command does its reads, then submits one batch. The reads of one command must see one
/// consistent state of the keys it touches; the engine gets that by locking those keys for
/// the command's duration, so a backend only has to apply each batch atomically. A backend
/// shared by several processes must give the guarantee itself: implement the trait on a
/// read view that holds a snapshot and writes through a transaction (TiKV, RocksDB
/// `Snapshot` + `WriteBatch`).
///
/// Such a backend gets each command's boundaries from [`KvBackend::begin`] and
/// [`KvBackend::finish`], which [`crate::commands::Engine`] calls on the command's thread
/// around every command and every EXEC (and [`crate::gc::expire_step`] around its re-check and
/// delete). In between, the backend may serve that thread's reads from one snapshot and make
/// its one `write` conditional on them: when something the command read has changed since,
/// `write` applies nothing and fails with [`crate::Error::Conflict`], `finish` answers `true`,
/// and the engine runs the command again from the start on a fresh snapshot, for as long as
/// [`KvBackend::retry_pause`] says (by default [`CONFLICT_ATTEMPTS`] times
/// in all). A command's only effect is its batch,
/// so a refused attempt leaves nothing behind. Both methods default to doing nothing (and
/// `finish` to `false`): a single-process backend keeps working unchanged. WATCH across
/// processes needs [`KvBackend::stamp`] as well.
pub trait KvBackend {
    /// Reads one record.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the store fails.
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>>;

    /// Reads one record and lends its value to `read` (`None`: no record) instead of
    /// returning a copy: for a reader that keeps nothing of the bytes (a lookup that decodes
    /// a metadata record). `read` runs while the store may hold a lock, so it must not use
    /// the store. By default [`KvBackend::get`], then `read` on its result.
    ///
    /// # Errors
    /// As [`KvBackend::get`]; `read` is not called then.
    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        read(self.get(cf, key)?.as_deref());
        Ok(())
    }

    /// Reads several records of one column family; the answer has one entry per key.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the store fails.
    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        keys.iter().map(|k| self.get(cf, k)).collect()
    }

    /// Reads one record of a walk from `key` toward `bound`: the caller reads the keys
    /// between them next, one at a time in `direction` — forward, those after `key` and
    /// before `bound`; in reverse, those before `key` down to `bound` (a list popped element
    /// by element: `bound` is the list's far end). Answers as [`KvBackend::get`]; a store
    /// may read part of the walk in the same pass and keep it for those reads
    /// ([`MetadataCache`] does, for subkeys). By default [`KvBackend::get`].
    ///
    /// # Errors
    /// As [`KvBackend::get`].
    fn get_ahead(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        bound: &[u8],
        direction: Direction,
    ) -> Result<Option<Bytes>> {
        let _ = (bound, direction);
        self.get(cf, key)
    }

    /// Whether [`KvBackend::get_ahead`] does more than [`KvBackend::get`]: a caller builds
    /// the walk's bound only for a store that reads ahead. Default `false`.
    fn reads_ahead(&self) -> bool {
        false
    }

    /// Walks `range` in one column family, lazily.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the scan cannot start; later failures come as items.
    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>>;

    /// Applies a batch atomically.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the store fails; then nothing was applied.
    fn write(&self, batch: WriteBatch) -> Result<()>;

    /// Starts a transaction on the calling thread (see Consistency above). Default: nothing.
    fn begin(&self) {}

    /// Ends the calling thread's transaction; `true` when the backend refused it with
    /// [`crate::Error::Conflict`] (nothing of it was applied: run it again). Default: `false`.
    fn finish(&self) -> bool {
        false
    }

    /// After the `attempt`-th refused run of one command (1-based), `elapsed` since the first refusal:
    /// how long to pause before running it again, or `None` to give up and answer the
    /// conflict error. Default: a pause doubling from 100 µs, [`CONFLICT_ATTEMPTS`]
    /// runs in all. A store shared by several processes may keep trying until a deadline,
    /// with jitter so that competing writers spread out.
    fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        let _ = elapsed;
        (attempt < CONFLICT_ATTEMPTS).then(|| std::time::Duration::from_micros(50 << attempt.clamp(1, 10)))
    }

    /// A stamp of one record that changes whenever the record is written, by any process
    /// (etcd: its `mod_revision`, 0 when absent), read like [`KvBackend::get`] (inside a
    /// transaction: at its snapshot, and guarding its write). WATCH takes the stamp of each
    /// watched key's metadata and EXEC aborts when it differs, so WATCH sees other processes'
    /// writes. Default `None`: no stamps; WATCH then sees this process' writes only.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the store fails.
    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        let _ = (cf, key);
        Ok(None)
    }

    /// Whether other processes write this store too (etcd shared by several server nodes).
    /// An [`crate::commands::Engine`] then keeps no key counts of its own (they would miss
    /// the other processes' writes) and DBSIZE scans. Default `false`.
    fn is_shared(&self) -> bool {
        false
    }

    /// A [`Snapshot`] of the whole store as it is now, showing every batch written before
    /// the call and none after (each batch all or nothing): what BGSAVE and a replica's full
    /// sync read while commands go on. fjall and RocksDB take theirs in O(1) (the versions
    /// they see are kept until the snapshot is dropped); the memory store copies itself
    /// under its lock (O(data), writes wait meanwhile). Default `None`: the store cannot.
    ///
    /// # Errors
    /// [`crate::Error::Backend`] when the store fails.
    fn snapshot(&self) -> Result<Option<Snapshot>> {
        Ok(None)
    }
}

/// Sharing a backend: `&B` and `Arc<B>` are backends too, forwarding every call.
macro_rules! forward_backend {
    ($($ty:ty),*) => {$(
        impl<B: KvBackend + ?Sized> KvBackend for $ty {
            fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
                (**self).get(cf, key)
            }
            fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
                (**self).get_with(cf, key, read)
            }
            fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
                (**self).multi_get(cf, keys)
            }
            fn get_ahead(&self, cf: ColumnFamily, key: &[u8], bound: &[u8], direction: Direction) -> Result<Option<Bytes>> {
                (**self).get_ahead(cf, key, bound, direction)
            }
            fn reads_ahead(&self) -> bool {
                (**self).reads_ahead()
            }
            fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
                (**self).scan(cf, range, direction)
            }
            fn write(&self, batch: WriteBatch) -> Result<()> {
                (**self).write(batch)
            }
            fn begin(&self) {
                (**self).begin()
            }
            fn finish(&self) -> bool {
                (**self).finish()
            }
            fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
                (**self).retry_pause(attempt, elapsed)
            }
            fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
                (**self).stamp(cf, key)
            }
            fn is_shared(&self) -> bool {
                (**self).is_shared()
            }
            fn snapshot(&self) -> Result<Option<Snapshot>> {
                (**self).snapshot()
            }
        }
    )*};
}

forward_backend!(&B, std::sync::Arc<B>);
