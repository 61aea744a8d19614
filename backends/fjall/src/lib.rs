//! rediskv's [`KvBackend`] over [fjall](https://crates.io/crates/fjall) 3, a pure-Rust LSM
//! store.
//!
//! ```no_run
//! use rediskv::Db;
//! use rediskv_fjall::{Options, Sync};
//!
//! let backend = rediskv_fjall::open("./data", Options { sync: Sync::Always, ..Options::default() })?;
//! let mut db = Db::new(backend);
//! db.run(&["SET", "k", "v"]);
//! # Ok::<(), rediskv::Error>(())
//! ```
//!
//! # On disk
//! One fjall database with a keyspace per column family, under Kvrocks' names
//! ([`rediskv_engine::CF_NAMES`]: `metadata`, `default`, `zset_score`), plus a keyspace
//! `rediskv` holding the layout manifest and the version floor. fjall refuses empty keys,
//! which the [`KvBackend`] contract allows, so every record key is stored behind one tag
//! byte ([`KEY_TAG`]); order is unchanged. Keys are limited to 65,534 bytes (fjall's 65,535
//! less the tag): a longer one is an error, never a panic.
//!
//! # Memory
//! fjall's block cache has [`Options::cache_bytes`]. Filters and indexes are partitioned at
//! every level: their partitions go through the cache, and only each table's top-level
//! indexes stay beside it ([`Usage::pinned`], a few entries per MB of table). fjall bounds
//! memtables per keyspace: the `default` and `zset_score` keyspaces' memtables are sealed
//! past a sixteenth of [`Options::write_buffer_bytes`], the others' past a quarter, fixed
//! when fjall creates the keyspace (a directory keeps the sizes it was created with), and
//! up to four sealed ones may wait for a flush.
//! Across keyspaces a write waits while the memtables take more than a quarter of the write
//! buffer in memory, sealing every active one. What they take is estimated from what fjall
//! counts (keys, values and a fixed size per record) and the records' mean size: a small
//! record's skiplist node and buffers take about as much again, a large one's little more
//! than its value, so memtables of 100 KB strings hold nearly twice the bytes of memtables of
//! small records and are flushed half as often. The rest of the buffer is for what flushes
//! and compactions hold while they write tables (of 16 MiB). Keys and values are fjall's
//! own slices (up to 20 bytes are held inline in the memtable's node), copied into
//! [`Bytes`] when read.
//!
//! Beside the journal being written (fjall starts a new one past 64 MB), the sealed journals
//! hold at most [`Options::write_buffer_bytes`] or 64 MiB, whichever is more: past it fjall
//! flushes the memtables keeping the oldest one. The journal and the tables of the first two
//! levels are not compressed; deeper tables and blob files are.
//!
//! fjall syncs the journal holding its lock, which every write takes: under
//! [`Sync::Everysec`] a thread of this crate syncs it instead, once a second, through a file
//! handle of its own, and (unless [`Sync::Always`]) after each MiB written, so that the sync
//! fjall still does at each flush finds little to write. The same thread seals memtables
//! (which deletes the files compactions replaced) for the writers.
//!
//! # Reads and writes
//! Point reads and scans read the keyspaces directly: each scan iterates one consistent
//! snapshot, and the command engine locks the keys of a command for its duration, which is
//! what the library's consistency contract asks of a single-process backend (no snapshot is
//! taken per command). Every metadata record read is decoded once: one that does not decode
//! is an error naming its key, never skipped. A [`rediskv::WriteBatch`] becomes one
//! fjall batch, atomic across keyspaces (one journal entry). With [`Options::group_commit`]
//! the batch waits in the journal's buffer, and [`DiskBackend::persist_written`] writes (with
//! [`Sync::Always`], also syncs) every waiting batch at once; there a batch of one record (a
//! SET, an INCR, an HSET of a field that exists) is inserted into its keyspace directly,
//! which skips what fjall's batch adds to a write (its keyspace set, its references to the
//! keyspaces): directories created since keep their journal's buffer for this crate to
//! write out, and say so in the `rediskv` keyspace; older ones write batches throughout.
//!
//! # A failed write
//! fjall poisons its database when a journal write, a sync or a flush fails (a full disk):
//! every later write and persist fails. A write refused that way is kept, so that every
//! later [`DiskBackend::persist_written`] fails too, and no reply acknowledges the batches
//! around it. [`DiskBackend::reopen`] closes the database and opens the directory again,
//! behind the same `Backend`, so that the handles shared with it stay valid. Reopening reads
//! the journals as a start does. A batch the journal kept whole comes back, others are gone.
//! A batch the closed database took after the last persist returned fails the next persist
//! ([`rediskv_engine::DroppedWrites`]), so that no reply acknowledges it.
//! A scan started before the reopen ends on the old database's snapshot.
//!
//! # Garbage
//! The `default` and `zset_score` keyspaces carry a compaction filter that asks
//! [`rediskv::gc::decide`] about every record it meets, reading the owner's metadata from the
//! `metadata` keyspace as it is at that moment, with the grace period of [`Options`]. Dropped
//! records are destroyed without a tombstone: an older copy of the same key that this would
//! uncover belongs to the same dead version, so it is invisible and is dropped in its turn.
//!
//! Known limit, shared with Kvrocks' filter: the filter reads the latest *published* metadata.
//! A batch's records become visible together, but if fjall flushed and compacted a subkey
//! between the batch's memtable insert and its publication, the filter would not yet see the
//! owner's metadata and drop a live record. Both steps happen inside one batch commit, so
//! the window is a few microseconds against a flush plus a compaction; the concurrency test
//! (writers beside a compaction loop, checked by `fsck`) has not hit it.
#![deny(missing_docs)]

mod housekeeping;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use fjall::compaction::filter::{CompactionFilter, Context, Factory, ItemAccessor, Verdict};
use fjall::config::{
    BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry, PartitioningPolicy,
};
use fjall::{
    AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions,
    PersistMode, Readable,
};
use rediskv::KeyRange;
use rediskv::Result;
use rediskv::gc::Decision;
use rediskv::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch};
use rediskv_engine::{
    CF_NAMES, DroppedWrites, FLOOR_KEY, GcFilter, MANIFEST_KEY, POSITION_KEY, PendingWrites, Record,
    VersionFloor, backend_error, cf_name, check_manifest, manifest, max_version_of, record_of, sort_records,
};
pub use rediskv_engine::{DiskBackend, Options, Sync, Usage};

use housekeeping::{Housekeeping, Syncs, seal_from};

/// The byte stored before every record key.
pub const KEY_TAG: u8 = 0;

/// `key` as stored: behind [`KEY_TAG`].
fn tagged(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(KEY_TAG);
    out.extend_from_slice(key);
    out
}

/// Keys shorter than this are tagged on the stack by [`with_tagged`]: a point read or a
/// batch operation then allocates nothing of its own (fjall copies the keys it keeps).
const STACK_KEY: usize = 128;

/// Lends `key` as stored to `lend_to`, built on the stack when it is short.
fn with_tagged<T>(key: &[u8], lend_to: impl FnOnce(&[u8]) -> T) -> T {
    let mut buf = [KEY_TAG; STACK_KEY];
    match buf.get_mut(..key.len() + 1) {
        Some(stored) => {
            stored[1..].copy_from_slice(key);
            lend_to(stored)
        }
        None => lend_to(&tagged(key)),
    }
}

/// Refuses a key fjall cannot hold behind the tag.
fn check_write_key(key: &[u8]) -> Result<()> {
    if key.len() >= usize::from(u16::MAX) {
        return Err(err(format!("a key of {} bytes is over the limit of 65534", key.len())));
    }
    Ok(())
}

/// Name of the keyspace holding the manifest and the version floor.
const OWN_KEYSPACE: &str = "rediskv";

/// Present in [`OWN_KEYSPACE`] when the keyspaces were created with
/// `manual_journal_persist`: a single insert or removal then leaves the journal's buffer to
/// this crate's persisting, as a batch does, and a write of one record can skip the batch.
const MANUAL_JOURNAL_KEY: &[u8] = b"rediskv:manual-journal-persist";

/// The metadata keyspace, once open; compaction filters read it. Emptied when the backend
/// is dropped, so the database (which owns the filters) does not keep itself alive.
type MetadataSlot = Arc<RwLock<Option<Keyspace>>>;

fn err(e: impl std::fmt::Display) -> rediskv::Error {
    backend_error("fjall", e)
}

/// A directory opened with [`open`]: a [`KvBackend`] shareable between threads (`&self`
/// everywhere; wrap it in an `Arc`).
///
/// A failed journal write or flush poisons a fjall database for good: every later write
/// fails. [`DiskBackend::reopen`] closes it and opens the directory again in place, behind
/// the same `Backend`, so that the handles shared with it stay valid.
pub struct Backend {
    options: Options,
    path: PathBuf,
    slot: MetadataSlot,
    /// The open database; `None` after a reopen that closed it and could not open it again.
    open: RwLock<Option<Open>>,
    /// Writes seen past five eighths of the memtables' bound ([`Open::seal_early`]).
    writes_near_bound: AtomicU32,
    /// A bulk load is under way ([`DiskBackend::bulk_load`]).
    bulk_load: AtomicBool,
    /// The position every batch also writes ([`DiskBackend::set_position`]).
    position: Mutex<Option<Vec<u8>>>,
    /// Batches a reopen dropped before a persist reported on them.
    dropped: DroppedWrites,
}

/// One opening of the directory: what [`DiskBackend::reopen`] replaces.
struct Open {
    db: Database,
    /// Metadata, Subkey, Score, Stream, in [`ColumnFamily::ALL`]'s order.
    cfs: [Keyspace; 4],
    own: Keyspace,
    floor: VersionFloor,
    /// Syncs the journal and seals memtables off the writing threads.
    housekeeping: Option<Housekeeping>,
    pending: PendingWrites,
    /// Whether a group-committed write of one record goes to its keyspace directly, without
    /// a fjall batch ([`MANUAL_JOURNAL_KEY`]).
    single_writes: bool,
    /// A write fjall refused (its journal could not be written): every later persist fails
    /// with it, so that no reply goes out as if the journal held what came before and after.
    failed_write: Mutex<Option<String>>,
}

/// Opens (or creates) the database in directory `path`.
///
/// A new directory records `options.layout` in its manifest; an existing one must have
/// been written with the same layout.
///
/// # Errors
/// [`rediskv::Error::Backend`] when fjall cannot open the directory, when it was written with
/// another layout (the message names both), or when its version floor record is corrupt.
pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Backend> {
    let path = path.as_ref().to_path_buf();
    let slot: MetadataSlot = Arc::default();
    let open = open_database(&path, &options, &slot)?;
    Ok(Backend {
        options,
        path,
        slot,
        open: RwLock::new(Some(open)),
        writes_near_bound: AtomicU32::new(0),
        bulk_load: AtomicBool::new(false),
        position: Mutex::default(),
        dropped: DroppedWrites::default(),
    })
}

/// Opens the database in `path` and points the compaction filters' `slot` at its metadata
/// keyspace.
fn open_database(path: &Path, options: &Options, slot: &MetadataSlot) -> Result<Open> {
    let factory_slot = Arc::clone(slot);
    let (layout, grace_ms) = (options.layout.clone(), options.grace_ms);
    let db = Database::builder(path)
        .with_compaction_filter_factories(Arc::new(move |name: &str| {
            let cf = CF_NAMES.iter().find(|(_, n)| *n == name).map(|(cf, _)| *cf)?;
            if cf == ColumnFamily::Metadata {
                return None;
            }
            let factory: Arc<dyn Factory> =
                Arc::new(GcFactory { slot: Arc::clone(&factory_slot), layout: layout.clone(), cf, grace_ms });
            Some(factory)
        }))
        // Journals hold what memtables have not flushed yet: bounded, they make fjall flush
        // the oldest memtables instead of keeping every write twice on disk.
        .max_journaling_size(MAX_JOURNALING_BYTES.max(options.write_buffer_bytes))
        // The journal is written on the committing thread (an event loop) and deleted once its
        // memtables are flushed, to tables and blob files that are compressed anyway: LZ4 on a
        // large value there costs the loop more than writing it raw.
        .journal_compression(CompressionType::None)
        .cache_size(options.cache_bytes)
        // One worker for flushes and compactions. With more, a worker that takes a compaction
        // while another compacts hands it back to the queue and takes it again, spinning a
        // core until the other is done (fjall's `worker_tick`): under RPOP that spin was
        // about a third of fjall's CPU.
        .worker_threads(FJALL_WORKERS)
        .open()
        .map_err(err)?;
    let mut names = CF_NAMES.iter().map(|(_, name)| *name).chain([OWN_KEYSPACE]);
    let fresh = !names.any(|name| db.keyspace_exists(name));
    let keyspace = |name: &str| {
        let options = || {
            let subkeys = [ColumnFamily::Subkey, ColumnFamily::Score].map(cf_name).contains(&name);
            let memtable_bytes = if subkeys {
                subkey_memtable_bytes(options.write_buffer_bytes)
            } else {
                max_memtable_bytes(options.write_buffer_bytes)
            };
            let options = keyspace_options(memtable_bytes);
            // Strings live in the metadata records: a large value goes to blob files, which
            // compaction does not rewrite (the subkey families keep their compaction filter,
            // which reads values inline).
            if name == cf_name(ColumnFamily::Metadata) {
                options.with_kv_separation(Some(
                    KvSeparationOptions::default().separation_threshold(LARGE_VALUE),
                ))
            } else {
                options
            }
        };
        db.keyspace(name, options).map_err(err)
    };
    let cfs = [
        keyspace(cf_name(ColumnFamily::ALL[0]))?,
        keyspace(cf_name(ColumnFamily::ALL[1]))?,
        keyspace(cf_name(ColumnFamily::ALL[2]))?,
        keyspace(cf_name(ColumnFamily::ALL[3]))?,
    ];
    let own = keyspace(OWN_KEYSPACE)?;
    match own.get(MANIFEST_KEY).map_err(err)? {
        Some(stored) => check_manifest(path, &stored, &options.layout)?,
        None => {
            own.insert(MANIFEST_KEY, manifest(&options.layout)).map_err(err)?;
            db.persist(PersistMode::SyncAll).map_err(err)?;
        }
    }
    if fresh {
        own.insert(MANUAL_JOURNAL_KEY, []).map_err(err)?;
        db.persist(PersistMode::SyncAll).map_err(err)?;
    }
    let single_writes = own.contains_key(MANUAL_JOURNAL_KEY).map_err(err)?;
    let floor = VersionFloor::restore(own.get(FLOOR_KEY).map_err(err)?.as_deref())?;
    *slot.write().unwrap_or_else(|e| e.into_inner()) = Some(cfs[0].clone());
    let keyspaces: Vec<Keyspace> = cfs.iter().chain([&own]).cloned().collect();
    let syncs = match options.sync {
        Sync::Always => Syncs::Never,
        Sync::Everysec => Syncs::EverySecond,
        Sync::No => Syncs::Writeback,
    };
    let housekeeping =
        Housekeeping::start(path, db.clone(), syncs, move |at_least| seal_from(&keyspaces, at_least));
    let pending = PendingWrites::default();
    Ok(Open {
        db,
        cfs,
        own,
        floor,
        housekeeping: Some(housekeeping),
        pending,
        single_writes,
        failed_write: Mutex::default(),
    })
}

/// The layout the directory at `path` was written with (`None` for a directory without a
/// store or a manifest): what a tool passes as [`Options::layout`] to open any store. Opens
/// the database once without compaction filters, which then never run with a wrong layout.
///
/// # Errors
/// [`rediskv::Error::Backend`] when fjall cannot open the directory, or the manifest is not
/// one this crate writes.
pub fn stored_layout(path: impl AsRef<Path>) -> Result<Option<rediskv::KeyLayout>> {
    let path = path.as_ref();
    // fjall's own marker: without it there is no store to read (and nothing is created).
    if !path.join("version").exists() {
        return Ok(None);
    }
    let db = Database::builder(path).open().map_err(err)?;
    let memtable_bytes = max_memtable_bytes(rediskv_engine::DEFAULT_WRITE_BUFFER_BYTES);
    let own = db.keyspace(OWN_KEYSPACE, || keyspace_options(memtable_bytes)).map_err(err)?;
    rediskv_engine::stored_manifest_layout(path, own.get(MANIFEST_KEY).map_err(err)?.as_deref())
}

/// Bytes the journal files in `dir` take on disk (allocated blocks: fjall sizes a fresh
/// journal file ahead without writing it, so its length says little).
fn journal_allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jnl"))
        .map(|e| e.metadata().map_or(0, |m| m.blocks() * 512))
        .sum()
}

/// How many times the write buffer a bulk load may hold in memtables
/// ([`Backend::write_buffer_now`]): with the default 64 MiB, 128 MiB in memory instead of
/// 16 MiB.
const BULK_LOAD_BUFFER: u64 = 8;

/// fjall's flush and compaction threads (see [`open_database`]).
const FJALL_WORKERS: usize = 1;

/// The least the journals may hold before fjall flushes the oldest memtables (fjall's minimum;
/// [`Options::write_buffer_bytes`] when that is more).
const MAX_JOURNALING_BYTES: u64 = 64 << 20;

/// A keyspace's memtable size for [`Options::write_buffer_bytes`]: a quarter of it (at least
/// 1 MiB). A load writes two keyspaces at once (metadata and subkeys), each with an active
/// memtable and one being flushed: together they stay within the bound. fjall has no bound
/// across keyspaces; its own default is 64 MiB for each.
fn max_memtable_bytes(write_buffer_bytes: u64) -> u64 {
    (write_buffer_bytes / 4).max(1 << 20)
}

/// The memtable size of the keyspaces of subkeys (`default`, `zset_score`) for
/// [`Options::write_buffer_bytes`]: a sixteenth of it (at least 1 MiB; 4 MiB by default).
/// Each record of a list, hash, set or sorted set is its own memtable insert (a round's
/// writes to one key are one insert only for metadata), a skiplist search comparing keys
/// that share their owner's prefix: in a smaller memtable the search is shorter. Smaller
/// still, the scans of a list's pops read through more sealed memtables and tables
/// (docs/benchmarks.md).
fn subkey_memtable_bytes(write_buffer_bytes: u64) -> u64 {
    (write_buffer_bytes / 16).max(1 << 20)
}

/// Values of at least this many bytes in the metadata keyspace (strings) are kept in blob
/// files beside its tables (fjall's key-value separation): a flush writes them once and
/// compactions move only their pointers.
const LARGE_VALUE: u32 = 4096;

/// The most the memtables of all keyspaces together may take in memory before a write waits
/// for flushes: a quarter of [`Options::write_buffer_bytes`], as [`Open::memtables_memory`]
/// estimates it from what fjall counts. The rest of the write buffer is what the flushes
/// and compactions writing tables hold meanwhile (each output table's filter and index
/// partitions until it ends, blocks on their way) and the allocator's room between memory
/// freed by one and taken by the next: with memtables of small records taking half the
/// buffer instead, a load of 3M records of each kind peaked 60 MB over the budget
/// (`benches/storage_cost.sh`).
fn memtables_limit(write_buffer_bytes: u64) -> u64 {
    (write_buffer_bytes / 4).max(2 << 20)
}

/// What [`Open::memtables_memory`] adds at most for each record beyond what fjall counts for
/// it (its key, value and fixed size): the skiplist node and the buffers of keys and values
/// past 20 bytes, and the allocator's rounding of them.
const RECORD_OVERHEAD: u64 = 512;

/// `bytes` of memory in fjall's count, where `counted` counted bytes take `memory`.
fn scale(bytes: u64, counted: u64, memory: u64) -> u64 {
    if memory == 0 {
        return bytes;
    }
    (u128::from(bytes) * u128::from(counted) / u128::from(memory)) as u64
}

/// The size of the tables compactions write. A compaction keeps an output table's filter
/// and index partitions until the table ends, so its memory follows this size (fjall's
/// default is 64 MiB).
const TABLE_BYTES: u64 = 16 << 20;

/// Bits per key of every table's bloom filter (about 1% false positives).
const BLOOM_BITS_PER_KEY: f32 = 10.0;

/// How many writes past five eighths of the memtables' bound [`Open::seal_early`] lets go
/// between two looks at the keyspaces' memtables (each look takes every keyspace's lock).
const SEAL_CHECK: u32 = 16;

/// The longest a write waits for flushes in [`Open::bound_memtables`].
const MEMTABLES_WAIT: Duration = Duration::from_secs(10);

/// Every keyspace's options: LZ4 on the data blocks from the third level on (the records of
/// one key share long prefixes; the first two levels, written by flushes and the first
/// compactions, are rewritten soon: compressing them costs each pushed or popped list
/// element about 350 instructions), bloom filters of 10 bits per key on every
/// level (fjall's default builds the first level's for a false positive rate of 1 in 10,000,
/// about twice the bits and hashes per key), memtables of `memtable_bytes`, and filters and
/// indexes partitioned at every level. fjall's default
/// (partitioned from the fourth level only) builds a table's whole filter from 8 bytes per
/// key before writing it, reads a table's whole filter and index block through the cache,
/// and pins them outside it on the first levels: memory growing with the tables, not bounded
/// by the cache. Partitioned, a table keeps a small top-level index and its partitions go
/// through the block cache. Compactions write tables of [`TABLE_BYTES`]. All of these are
/// fixed when fjall creates the keyspace: a directory keeps the options it was created with.
/// The journal's buffer is handed to the OS when this crate says (a batch's durability,
/// [`DiskBackend::persist_written`]), not after each single insert (see [`MANUAL_JOURNAL_KEY`]).
fn keyspace_options(memtable_bytes: u64) -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .compaction_strategy(Arc::new(
            fjall::compaction::Leveled::default().with_table_target_size(TABLE_BYTES),
        ))
        .data_block_compression_policy(CompressionPolicy::new([
            CompressionType::None,
            CompressionType::None,
            CompressionType::Lz4,
        ]))
        .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(
            BLOOM_BITS_PER_KEY,
        ))))
        .filter_block_partitioning_policy(PartitioningPolicy::all(true))
        .index_block_partitioning_policy(PartitioningPolicy::all(true))
        .max_memtable_size(memtable_bytes)
        .manual_journal_persist(true)
}

impl Open {
    /// Counts a write fjall took, of `bytes` of keys and values, or keeps the error of one
    /// it refused ([`Open::failed_write`]).
    fn wrote(&self, written: fjall::Result<()>, bytes: usize) -> Result<()> {
        match written {
            Ok(()) => {
                self.pending.wrote();
                if let Some(housekeeping) = &self.housekeeping {
                    housekeeping.wrote(bytes as u64);
                }
                Ok(())
            }
            Err(e) => {
                let e = err(e);
                *self.failed_write.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Seals `ks`'s memtable and waits until fjall has flushed it, or failed to: a failed
    /// flush poisons the database, which the persist looked at meanwhile reports (fjall's
    /// `rotate_memtable_and_wait` would wait for good, on a full disk).
    fn rotate_and_wait(&self, ks: &Keyspace) -> Result<()> {
        if ks.rotate_memtable().map_err(err)? {
            while ks.tree.sealed_memtable_count() > 0 {
                self.db.persist(PersistMode::Buffer).map_err(err)?;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    fn cf(&self, cf: ColumnFamily) -> &Keyspace {
        keyspace_of(&self.cfs, cf)
    }

    fn keyspaces(&self) -> impl Iterator<Item = &Keyspace> {
        self.cfs.iter().chain([&self.own])
    }

    /// Index and filter blocks the keyspaces pin in memory.
    fn pinned_bytes(&self) -> u64 {
        self.keyspaces()
            .map(|ks| (ks.tree.pinned_block_index_size() + ks.tree.pinned_filter_size()) as u64)
            .sum()
    }

    /// Flushes every keyspace's memtable to a table and waits: the journals holding those
    /// writes can then be deleted.
    fn flush_memtables(&self) -> Result<()> {
        for ks in self.keyspaces() {
            self.rotate_and_wait(ks)?;
        }
        // fjall's worker deletes the journals a flush frees just after the flush is done:
        // wait for it (bounded: writes arriving meanwhile may seal another journal).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while self.db.journal_count() > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    /// Holds a write while the memtables of all keyspaces together take more than
    /// [`memtables_limit`] in memory ([`Open::memtables_memory`]): seals every active
    /// memtable (fjall flushes them) and waits for the flushes to bring them under it. fjall
    /// bounds each keyspace alone (a memtable and up to four sealed ones waiting for a
    /// flush), so without this a load outrunning the flushes holds several times the write
    /// buffer. The wait is bounded (a failed flush poisons the database: the write then
    /// reports it). Past five eighths of the bound, [`Open::seal_early`] starts flushes
    /// before the bound is reached.
    fn bound_memtables(&self, write_buffer_bytes: u64, writes_near_bound: &AtomicU32) {
        let limit = memtables_limit(write_buffer_bytes);
        let counted = self.db.write_buffer_size();
        // The memtables take at most twice what fjall counts: nothing to look at below.
        if counted.saturating_mul(2) <= limit / 8 * 5 {
            return;
        }
        let memory = self.memtables_memory(counted);
        if memory <= limit / 8 * 5 {
            return;
        }
        if memory <= limit {
            self.seal_early(scale(limit / 8 * 3, counted, memory), writes_near_bound);
            return;
        }
        // Every active memtable is sealed, not only the largest: the others together may
        // hold more than the bound themselves (a load writes several keyspaces at once),
        // and no flush would then bring the total under it. The wait counts in the proportion
        // of records measured before the seal (the new memtables hold too few to tell).
        self.seal(1);
        let counted_limit = scale(limit, counted, memory);
        let deadline = std::time::Instant::now() + MEMTABLES_WAIT;
        while self.db.write_buffer_size() > counted_limit && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// What memtables holding `counted` bytes by fjall's count take in memory, estimated from
    /// the records of the active memtables: what fjall counts, plus for each record its
    /// skiplist node and buffers, which take about as much again for a small record and at
    /// most [`RECORD_OVERHEAD`] and an eighth of its size for a large one (a 100 KB value
    /// takes about its own size, a 20-byte key and a 3-byte value twice what fjall counts).
    /// Without active records to measure, twice what fjall counts.
    fn memtables_memory(&self, counted: u64) -> u64 {
        let (records, bytes) = self.keyspaces().fold((0u64, 0u64), |(records, bytes), ks| {
            let memtable = ks.tree.active_memtable();
            (records + memtable.len() as u64, bytes + memtable.size())
        });
        if records == 0 || bytes == 0 {
            return counted.saturating_mul(2);
        }
        // The records `counted` holds, at the active memtables' bytes per record.
        let held = (u128::from(counted) * u128::from(records) / u128::from(bytes)) as u64;
        let overhead = held.saturating_mul(RECORD_OVERHEAD).saturating_add(counted / 8).min(counted);
        counted + overhead
    }

    /// Asks [`Housekeeping`] to seal every active memtable of `at_least` bytes or more by
    /// fjall's count, once per [`SEAL_CHECK`] writes: fjall flushes it while writes go on,
    /// so a write waits in [`Open::bound_memtables`] only when the flushes fall behind the
    /// writes, not each time the memtables fill. A wait holds the event loop that writes:
    /// sealed only at the bound, 400,000 pipelined LPUSHes waited 16 times, 300 ms in all;
    /// sealed from five eighths, not once (docs/benchmarks.md).
    fn seal_early(&self, at_least: u64, writes_near_bound: &AtomicU32) {
        // Relaxed load and store, not an increment: a check skipped or repeated by a race
        // costs nothing.
        let writes = writes_near_bound.load(Ordering::Relaxed);
        writes_near_bound.store(writes.wrapping_add(1), Ordering::Relaxed);
        if !writes.is_multiple_of(SEAL_CHECK) {
            return;
        }
        self.seal(at_least);
    }

    /// Seals every active memtable of `at_least` bytes or more, on [`Housekeeping`]'s
    /// thread: sealing also deletes the files compactions replaced, which takes a while.
    fn seal(&self, at_least: u64) {
        match &self.housekeeping {
            Some(housekeeping) => housekeeping.ask_seal(at_least),
            None => seal_from(self.keyspaces(), at_least),
        }
    }
}

impl Backend {
    /// Runs `f` on the open database; an error while a reopen could not open it again.
    fn with_open<T>(&self, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        let open = self.open.read().unwrap_or_else(|e| e.into_inner());
        f(open.as_ref().ok_or_else(|| err("the database is closed: it could not be opened again"))?)
    }

    /// The write buffer the memtables' bound is taken from ([`memtables_limit`]): during a
    /// bulk load, [`BULK_LOAD_BUFFER`] times [`Options::write_buffer_bytes`], so that the
    /// load waits for flushes only when they fall behind, not each time a quarter fills.
    fn write_buffer_now(&self) -> u64 {
        let bytes = self.options.write_buffer_bytes;
        if self.bulk_load.load(Ordering::Relaxed) { bytes.saturating_mul(BULK_LOAD_BUFFER) } else { bytes }
    }

    /// The options the directory was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The highest version the directory has promised never to go below (0 while closed).
    pub fn version_floor(&self) -> u64 {
        self.with_open(|open| Ok(open.floor.get())).unwrap_or(0)
    }

    /// Closes the database, syncing it first when `sync` (a clean close; never after a
    /// failed write, whose batches the journal must not keep now).
    fn close(&self, sync: bool) {
        let mut open = self.open.write().unwrap_or_else(|e| e.into_inner());
        if let Some(mut closing) = open.take() {
            self.dropped.closing(&closing.pending);
            closing.housekeeping = None;
            if sync {
                let _ = closing.db.persist(PersistMode::SyncAll);
            }
        }
        // The compaction filters' handle on the metadata keyspace holds the database open.
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl DiskBackend for Backend {
    /// Syncs the journal, then flushes every memtable to tables, so the journals are released.
    fn flush(&self) -> Result<()> {
        self.with_open(|open| {
            open.db.persist(PersistMode::SyncAll).map_err(err)?;
            open.flush_memtables()
        })
    }

    fn compact(&self) -> Result<()> {
        self.with_open(|open| {
            open.flush_memtables()?;
            for ks in &open.cfs {
                ks.major_compact().map_err(err)?;
            }
            // The tables a compaction replaced are deleted once fjall drops the versions
            // naming them, which it does when a memtable is sealed: seal one (the manifest
            // record, written again unchanged) so that only the live tables stay on disk.
            open.own.insert(MANIFEST_KEY, manifest(&self.options.layout)).map_err(err)?;
            open.rotate_and_wait(&open.own)?;
            Ok(())
        })
    }

    fn disk_bytes(&self, cf: ColumnFamily) -> u64 {
        self.with_open(|open| Ok(open.cf(cf).disk_space())).unwrap_or(0)
    }

    /// fjall's `approximate_len`: the items of the memtables and of the tables' metadata.
    fn approximate_records(&self, cf: ColumnFamily) -> Option<u64> {
        self.with_open(|open| Ok(open.cf(cf).approximate_len() as u64)).ok()
    }

    fn usage(&self) -> Usage {
        let journals = journal_allocated_bytes(&self.path);
        self.with_open(|open| {
            Ok(Usage {
                tables: open.keyspaces().map(Keyspace::disk_space).sum(),
                journals,
                cache: open.db.cache_size(),
                cache_capacity: open.db.cache_capacity(),
                memtables: open.db.write_buffer_size(),
                pinned: open.pinned_bytes(),
            })
        })
        .unwrap_or(Usage { journals, ..Usage::default() })
    }

    fn memory_bytes(&self) -> u64 {
        self.with_open(|open| Ok(open.db.cache_size() + open.db.write_buffer_size() + open.pinned_bytes()))
            .unwrap_or(0)
    }

    /// 65,534: fjall's limit less the tag byte.
    fn max_key_len(&self) -> usize {
        usize::from(u16::MAX) - 1
    }

    /// `persist(Buffer)` (with [`Sync::Always`], `persist(SyncData)`) when a batch was
    /// written since the last one.
    fn stamp_writes(&self, position: Option<Vec<u8>>) {
        *self.position.lock().unwrap_or_else(|p| p.into_inner()) = position;
    }

    fn set_position(&self, position: Option<Vec<u8>>) -> Result<()> {
        self.stamp_writes(position.clone());
        self.with_open(|open| {
            let durability = match self.options.sync {
                _ if self.options.group_commit => None,
                Sync::Always => Some(PersistMode::SyncData),
                _ => Some(PersistMode::Buffer),
            };
            let mut fb = open.db.batch().durability(durability);
            let bytes = position.as_ref().map_or(0, Vec::len);
            match position {
                Some(position) => fb.insert(&open.own, POSITION_KEY, position),
                None => fb.remove(&open.own, POSITION_KEY),
            }
            open.wrote(fb.commit(), bytes)
        })
    }

    /// While on, a larger memtables' bound (`Backend::write_buffer_now`); at the end, the
    /// journal synced.
    fn bulk_load(&self, on: bool) -> Result<()> {
        self.bulk_load.store(on, Ordering::Relaxed);
        if on {
            return Ok(());
        }
        self.with_open(|open| open.db.persist(PersistMode::SyncAll).map_err(err))
    }

    fn position(&self) -> Result<Option<Vec<u8>>> {
        self.with_open(|open| Ok(open.own.get(POSITION_KEY).map_err(err)?.map(|v| v.to_vec())))
    }

    fn write_ops(&self, ops: &mut Vec<BatchOp>) -> Result<()> {
        let mut records: Vec<Record<'_>> = ops.iter().map(record_of).collect();
        let written = self.write_records(&mut records);
        drop(records);
        ops.clear();
        written
    }

    /// One fjall batch of `records`, sized for them at once; a group-committed batch of one
    /// record is inserted into its keyspace directly (see the module docs).
    fn write_records(&self, records: &mut [Record<'_>]) -> Result<()> {
        let top =
            max_version_of(records.iter().filter_map(|(cf, _, value)| {
                value.filter(|_| *cf == ColumnFamily::Metadata).map(|v| &v[..])
            }));
        self.with_open(|open| {
            open.floor.write_ops(top, |floor| {
                let durability = match self.options.sync {
                    _ if self.options.group_commit => None,
                    Sync::Always => Some(PersistMode::SyncData),
                    _ => Some(PersistMode::Buffer),
                };
                // One record, written without a fjall batch (its journal entry, the keyspace
                // set its commit builds and the keyspace references it holds): durable when
                // the batches around it are, at the next `persist_written`.
                open.bound_memtables(self.write_buffer_now(), &self.writes_near_bound);
                let bytes =
                    records.iter().map(|(_, key, value)| key.len() + value.map_or(0, |v| v.len())).sum();
                let position = self.position.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if durability.is_none()
                    && open.single_writes
                    && floor.is_none()
                    && position.is_none()
                    && let [(cf, key, value)] = records
                {
                    let written = match value {
                        Some(value) => {
                            check_write_key(key)?;
                            with_tagged(key, |key| open.cf(*cf).insert(key, &value[..]))
                        }
                        None => with_tagged(key, |key| open.cf(*cf).remove(key)),
                    };
                    return open.wrote(written, bytes);
                }
                let mut fb = fjall::OwnedWriteBatch::with_capacity(open.db.clone(), records.len() + 2)
                    .durability(durability);
                sort_records(records);
                for (cf, key, value) in records.iter() {
                    match value {
                        Some(value) => {
                            check_write_key(key)?;
                            with_tagged(key, |key| fb.insert(open.cf(*cf), key, &value[..]));
                        }
                        None => with_tagged(key, |key| fb.remove(open.cf(*cf), key)),
                    }
                }
                if let Some(floor) = floor {
                    fb.insert(&open.own, FLOOR_KEY, floor.to_vec());
                }
                if let Some(position) = position {
                    fb.insert(&open.own, POSITION_KEY, position);
                }
                open.wrote(fb.commit(), bytes)
            })
        })
    }

    fn persist_written(&self) -> Result<()> {
        if !self.options.group_commit {
            return Ok(());
        }
        let mode =
            if self.options.sync == Sync::Always { PersistMode::SyncData } else { PersistMode::Buffer };
        self.with_open(|open| {
            if let Some(failed) = &*open.failed_write.lock().unwrap_or_else(|p| p.into_inner()) {
                return open.pending.refuse(rediskv::Error::Backend(failed.clone()));
            }
            self.dropped.persist(&open.pending, || open.db.persist(mode).map_err(err))
        })
    }

    /// Closes the database (its journal's buffer and memtables are dropped: what no persist
    /// took is gone, as after a crash) and opens the directory again, as at start. Between the
    /// two, every call fails; a failed open leaves it closed, for a later call to try again.
    fn reopen(&self) -> Result<()> {
        self.close(false);
        let mut open = self.open.write().unwrap_or_else(|e| e.into_inner());
        if open.is_none() {
            *open = Some(open_database(&self.path, &self.options, &self.slot)?);
        }
        Ok(())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.close(self.options.sync != Sync::No);
    }
}

impl KvBackend for Backend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        let value = self.with_open(|open| with_tagged(key, |key| open.cf(cf).get(key)).map_err(err))?;
        let Some(value) = value else { return Ok(None) };
        // A large value is its own buffer (read from a blob file, or the memtable's copy):
        // shared, not copied. A small one may be a slice of a whole cached block, which
        // a `Bytes` kept for long would hold: copied.
        if value.len() >= LARGE_VALUE as usize {
            return Ok(Some(Bytes::from_owner(value)));
        }
        Ok(Some(Bytes::copy_from_slice(&value)))
    }

    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        let value = self.with_open(|open| with_tagged(key, |key| open.cf(cf).get(key)).map_err(err))?;
        read(value.as_deref());
        Ok(())
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        // fjall's iterator holds its own snapshot: the scan goes on after the lock is let go.
        self.with_open(|open| {
            Ok(scan_with(range, direction, |bounds| open.cf(cf).range::<Vec<u8>, _>(bounds)))
        })
    }

    /// fjall's cross-keyspace snapshot: O(1).
    fn snapshot(&self) -> Result<Option<rediskv::Snapshot>> {
        self.with_open(|open| {
            Ok(Some(Arc::new(Snapshot { snapshot: open.db.snapshot(), cfs: open.cfs.clone() }) as _))
        })
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_ops(&mut batch.into_ops())
    }
}

/// `cf`'s keyspace among the four, which are in [`ColumnFamily::ALL`]'s order.
fn keyspace_of(cfs: &[Keyspace; 4], cf: ColumnFamily) -> &Keyspace {
    &cfs[ColumnFamily::ALL.iter().position(|c| *c == cf).unwrap_or(0)]
}

/// The records of `range` in `direction`, from `open`, which iterates stored keys (tagged)
/// between the bounds it is given.
fn scan_with<'a>(
    range: &KeyRange,
    direction: Direction,
    open: impl FnOnce((Bound<Vec<u8>>, Bound<Vec<u8>>)) -> fjall::Iter,
) -> ScanIter<'a> {
    let start = Bound::Included(tagged(&range.start));
    let end = match &range.end {
        Some(end) if *end <= range.start => return Box::new(std::iter::empty()),
        Some(end) => Bound::Excluded(tagged(end)),
        None => Bound::Unbounded,
    };
    let iter = open((start, end));
    let iter: Box<dyn Iterator<Item = fjall::Guard>> = match direction {
        Direction::Forward => Box::new(iter),
        Direction::Reverse => Box::new(iter.rev()),
    };
    Box::new(iter.map(move |guard| {
        let (k, v) = guard.into_inner().map_err(err)?;
        Ok((Bytes::copy_from_slice(&k[1..]), Bytes::copy_from_slice(&v)))
    }))
}

/// A point-in-time view of the directory ([`KvBackend::snapshot`]): it pins the tables and
/// memtables it reads, so a compaction meanwhile (its collector included) changes nothing
/// it sees; they are released when it is dropped. Writes are refused.
struct Snapshot {
    snapshot: fjall::Snapshot,
    /// Metadata, Subkey, Score, Stream, in [`ColumnFamily::ALL`]'s order.
    cfs: [Keyspace; 4],
}

impl Snapshot {
    fn cf(&self, cf: ColumnFamily) -> &Keyspace {
        keyspace_of(&self.cfs, cf)
    }
}

impl KvBackend for Snapshot {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        let value = with_tagged(key, |key| self.snapshot.get(self.cf(cf), key)).map_err(err)?;
        Ok(value.map(|v| Bytes::copy_from_slice(&v)))
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        Ok(scan_with(range, direction, |bounds| self.snapshot.range::<Vec<u8>, _>(self.cf(cf), bounds)))
    }

    fn write(&self, _batch: WriteBatch) -> Result<()> {
        Err(err("a snapshot is read-only"))
    }
}

/// Makes a [`GcCompactionFilter`] per compaction of one column family.
struct GcFactory {
    slot: MetadataSlot,
    layout: rediskv::KeyLayout,
    cf: ColumnFamily,
    grace_ms: u64,
}

impl Factory for GcFactory {
    fn name(&self) -> &str {
        "rediskv-gc"
    }

    fn make_filter(&self, _ctx: &Context) -> Box<dyn CompactionFilter> {
        let metadata = self.slot.read().unwrap_or_else(|e| e.into_inner()).clone();
        Box::new(GcCompactionFilter { metadata, gc: GcFilter::new(&self.layout, self.cf, self.grace_ms) })
    }
}

/// One compaction's filter: without the metadata keyspace (during recovery, after close)
/// it keeps everything.
struct GcCompactionFilter {
    metadata: Option<Keyspace>,
    gc: GcFilter,
}

impl CompactionFilter for GcCompactionFilter {
    fn filter_item(
        &mut self,
        item: ItemAccessor<'_>,
        _ctx: &Context,
    ) -> fjall::compaction::filter::CompactionFilterResult {
        let Some(metadata) = &self.metadata else { return Ok(Verdict::Keep) };
        let read = |k: &[u8]| {
            with_tagged(k, |k| metadata.get(k)).map_err(|e| match e {
                fjall::Error::Storage(e) => e,
                fjall::Error::Io(e) => fjall::LsmError::Io(e),
                _ => fjall::LsmError::Unrecoverable,
            })
        };
        // A key without the tag is not ours: keep it.
        let Some(key) = item.key().strip_prefix(&[KEY_TAG]) else { return Ok(Verdict::Keep) };
        match self.gc.decide(key, read)? {
            Decision::Drop => Ok(Verdict::Destroy),
            Decision::Keep => Ok(Verdict::Keep),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rediskv::WriteBatch;
    use rediskv_engine::testkit::{TempDir, group_commit, put};

    #[test]
    fn a_new_directory_is_marked_for_single_record_writes() {
        let dir = TempDir::new("fjall-single-writes");
        let backend = open(dir.path(), group_commit()).expect("open");
        assert!(backend.with_open(|o| Ok(o.single_writes)).expect("open"));
        put(&backend, b"k", b"v");
        backend.persist_written().expect("persist");
        drop(backend);
        let backend = open(dir.path(), group_commit()).expect("reopen");
        assert!(backend.with_open(|o| Ok(o.single_writes)).expect("open"), "the marker is kept");
        assert_eq!(backend.get(ColumnFamily::Subkey, b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }

    /// Behind [`rediskv_engine::GroupCommit`], a round's batches are read back at once but
    /// reach fjall only at the persist (or before a scan), the last value of each key once.
    #[test]
    fn a_round_reaches_fjall_at_the_persist() {
        let dir = TempDir::new("fjall-round");
        let held = rediskv_engine::GroupCommit::new(open(dir.path(), group_commit()).expect("open"));
        let fjall = |key: &[u8]| held.inner().get(ColumnFamily::Subkey, key).expect("get");
        put(&held, b"k", b"1");
        put(&held, b"k", b"2");
        assert_eq!(held.get(ColumnFamily::Subkey, b"k").expect("get").as_deref(), Some(&b"2"[..]));
        assert_eq!(fjall(b"k"), None, "held until the persist");
        let past = KeyRange { start: b"l".to_vec(), end: None };
        assert_eq!(held.scan(ColumnFamily::Subkey, &past, Direction::Forward).expect("scan").count(), 0);
        assert_eq!(fjall(b"k"), None, "a scan of a range without held records commits nothing");
        held.persist_written().expect("persist");
        assert_eq!(fjall(b"k").as_deref(), Some(&b"2"[..]));

        let mut delete = WriteBatch::new();
        delete.delete(ColumnFamily::Subkey, &b"k"[..]);
        held.write(delete).expect("delete");
        assert_eq!(
            held.get(ColumnFamily::Subkey, b"k").expect("get"),
            None,
            "a held deletion hides the record"
        );
        assert!(fjall(b"k").is_some());
        let all = KeyRange { start: Vec::new(), end: None };
        assert_eq!(held.scan(ColumnFamily::Subkey, &all, Direction::Forward).expect("scan").count(), 0);
        assert_eq!(fjall(b"k"), None, "a scan commits what is held first");

        let long = vec![b'x'; usize::from(u16::MAX)];
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, &b"short"[..], &b"v"[..]);
        batch.put(ColumnFamily::Subkey, long, &b"v"[..]);
        assert!(held.write(batch).is_err(), "a key fjall cannot hold is refused at the write");
        held.persist_written().expect("persist");
        assert_eq!(held.get(ColumnFamily::Subkey, b"short").expect("get"), None, "nothing of that batch");

        // A reopen drops what is held: the next persist fails, so none of it is acknowledged.
        put(&held, b"dropped", b"1");
        held.reopen().expect("reopen");
        assert!(held.persist_written().is_err(), "the dropped write must not be acknowledged");
        assert_eq!(held.get(ColumnFamily::Subkey, b"dropped").expect("get"), None);
        put(&held, b"after", b"1");
        held.persist_written().expect("a later round persists");
        assert_eq!(fjall(b"after").as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn a_reopened_backend_serves_the_directory_and_takes_writes() {
        let dir = TempDir::new("fjall-reopen");
        let backend = open(dir.path(), group_commit()).expect("open");
        put(&backend, b"before", b"1");
        backend.persist_written().expect("persist");
        let scan = backend
            .scan(ColumnFamily::Subkey, &KeyRange { start: Vec::new(), end: None }, Direction::Forward)
            .expect("scan");
        backend.reopen().expect("reopen");
        assert_eq!(scan.count(), 1, "a scan started before the reopen ends on its snapshot");
        assert_eq!(backend.get(ColumnFamily::Subkey, b"before").expect("get").as_deref(), Some(&b"1"[..]));
        put(&backend, b"after", b"2");
        backend.persist_written().expect("persist after the reopen");
        drop(backend);
        let backend = open(dir.path(), group_commit()).expect("open again");
        for (key, value) in [(&b"before"[..], &b"1"[..]), (b"after", b"2")] {
            assert_eq!(backend.get(ColumnFamily::Subkey, key).expect("get").as_deref(), Some(value));
        }
    }

    #[test]
    fn keyspaces_created_without_the_marker_keep_writing_batches() {
        let dir = TempDir::new("fjall-batch-writes");
        let backend = open(dir.path(), group_commit()).expect("open");
        // As a directory written before the marker: its keyspaces persist the journal
        // after every single insert, so a write of one record must stay a batch.
        backend
            .with_open(|o| {
                o.own.remove(MANUAL_JOURNAL_KEY).expect("remove the marker");
                o.db.persist(PersistMode::SyncAll).map_err(err)
            })
            .expect("sync");
        drop(backend);
        let backend = open(dir.path(), group_commit()).expect("reopen");
        assert!(!backend.with_open(|o| Ok(o.single_writes)).expect("open"));
        put(&backend, b"k", b"v");
        assert_eq!(backend.get(ColumnFamily::Subkey, b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}
