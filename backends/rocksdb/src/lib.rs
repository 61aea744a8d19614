//! rediskv's [`KvBackend`] over RocksDB (the `rocksdb` crate), in Kvrocks' own column
//! families, so a directory it writes has Kvrocks' record layout.
//!
//! ```no_run
//! use rediskv::Db;
//! use rediskv_rocksdb::{Options, Sync};
//!
//! let backend = rediskv_rocksdb::open("./data", Options { sync: Sync::Everysec, ..Options::default() })?;
//! let mut db = Db::new(backend);
//! db.run(&["SET", "k", "v"]);
//! # Ok::<(), rediskv::Error>(())
//! ```
//!
//! # On disk
//! Column families `metadata`, `default` (subkeys), `zset_score` and `stream`, as Kvrocks
//! names them ([`rediskv_engine::CF_NAMES`]) — under NeoKV's layout `redis_metadata`, `data`
//! and `redis_zset_score`, as NeoKV names them ([`rediskv_engine::cf_name_for`]) — and
//! Kvrocks' `propagate` family holding this crate's two
//! records, the layout manifest and the version floor ([`rediskv_engine::MANIFEST_KEY`],
//! [`rediskv_engine::FLOOR_KEY`]).
//!
//! Tables are LZ4-compressed at every level and carry a 10-bit bloom filter each. The
//! families of subkeys have memtables of an eighth of [`Options::write_buffer_bytes`], the
//! others of RocksDB's default (64 MiB) or the whole bound when it is less, and a batch's
//! records go into the memtable in key order. A flush
//! ([`DiskBackend::flush`], the server's SAVE) writes every family's memtables to tables, so
//! the WAL files are deleted; the WAL files are also bounded at 64 MiB, past which RocksDB
//! flushes the families keeping the oldest one.
//!
//! # Memory
//! One LRU block cache of [`Options::cache_bytes`] for every family, holding the tables'
//! index and filter partitions too (so they do not grow with the number of tables beside
//! it; each table keeps only its top-level index and filter index pinned),
//! and a write buffer manager holding every family's memtables together under
//! [`Options::write_buffer_bytes`] (writers wait for a flush past it).
//!
//! # Reads and writes
//! Point reads and scans read the latest state. A scan reads chunks of 256 records, each
//! one consistent view, and the command engine locks the keys of a command for its
//! duration, which is what the library's consistency contract asks of a single-process
//! backend (no snapshot is taken per command). A batch becomes one RocksDB `WriteBatch` (one WAL
//! record, atomic across column families); [`Sync::Always`] writes it with `sync = true`, or,
//! with [`Options::group_commit`], leaves it in the WAL buffer for
//! [`DiskBackend::persist_written`] to write and sync with every batch before it.
//!
//! # After a failed write
//! A failed WAL write (a full disk) stops the database for good: RocksDB marks it with a
//! fatal background error. [`DiskBackend::reopen`] closes it and opens the directory again
//! behind the same [`Backend`]. While the disk is still too full for that (opening writes a
//! table and a new WAL file), the directory is opened for reads only, and the next
//! [`DiskBackend::reopen`] tries again. A scan holds the database it started on, so a
//! reopen during a scan gets the read-only opening too.
//!
//! # Garbage
//! `default` and `zset_score` carry a compaction filter factory; each filter asks
//! [`rediskv::gc::decide`] about every record, reading the owner's metadata from the
//! `metadata` family of the live database as Kvrocks' subkey filter does, with the grace
//! period of [`Options`]. The filter reaches the database through a `Weak` handle (the
//! database owns its filters); a failed metadata read keeps the record.
//!
//! Known limit, shared with Kvrocks' filter: the filter reads the latest *published* metadata.
//! A batch's records become visible together, but if RocksDB flushed and compacted a subkey
//! between the batch's memtable insert and its publication, the filter would not yet see the
//! owner's metadata and drop a live record. Both steps happen inside one batch commit, so
//! the window is a few microseconds against a flush plus a compaction; the concurrency test
//! (writers beside a compaction loop, checked by `fsck`) has not hit it.
#![deny(missing_docs)]

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use rediskv::Result;
use rediskv::gc::Decision as GcDecision;
use rediskv::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch};
use rediskv::{KeyLayout, KeyRange};
pub use rediskv_engine::{DiskBackend, Options, Sync, Usage};
use rediskv_engine::{
    DroppedWrites, FLOOR_KEY, GcFilter, MANIFEST_KEY, POSITION_KEY, PendingWrites, Syncer, VersionFloor,
    backend_error, cf_name_for, check_manifest, manifest,
};
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, BottommostLevelCompaction, Cache, ColumnFamilyDescriptor,
    CompactOptions, DB, DBCompressionType, FlushOptions, IteratorMode, ReadOptions, WriteBufferManager,
    WriteOptions,
};

/// Kvrocks' column family for replication records; this crate keeps its own two records there.
pub const OWN_CF: &str = "propagate";

/// The database, once open; compaction filters read its metadata family through it.
type DbSlot = Arc<RwLock<Weak<DB>>>;

fn err(e: impl std::fmt::Display) -> rediskv::Error {
    backend_error("rocksdb", e)
}

/// A directory opened with [`open`]: a [`KvBackend`] shareable between threads (`&self`
/// everywhere; wrap it in an `Arc`).
///
/// A failed WAL write stops a RocksDB database for good (a fatal background error): every
/// later write fails. [`DiskBackend::reopen`] closes it and opens the directory again in
/// place, behind the same `Backend`, so that the handles shared with it stay valid.
pub struct Backend {
    options: Options,
    path: PathBuf,
    write_options: WriteOptions,
    slot: DbSlot,
    /// The block cache every column family shares, index and filter blocks included.
    cache: Cache,
    /// The open database; `None` after a reopen that closed it and could not open it again.
    open: RwLock<Option<Open>>,
    /// The position every batch also writes ([`DiskBackend::set_position`]).
    position: Mutex<Option<Vec<u8>>>,
    /// Batches a reopen dropped before a persist reported on them.
    dropped: DroppedWrites,
}

/// One opening of the directory: what [`DiskBackend::reopen`] replaces.
struct Open {
    /// Shared with the scans reading it, the compaction filters and the `everysec` syncer.
    db: Arc<DB>,
    layout: KeyLayout,
    floor: VersionFloor,
    syncer: Option<Syncer>,
    pending: PendingWrites,
}

/// Opens (or creates) the database in directory `path`.
///
/// A new directory records `options.layout` in its manifest; an existing one must have
/// been written with the same layout.
///
/// # Errors
/// [`rediskv::Error::Backend`] when RocksDB cannot open the directory, when it was written
/// with another layout (the message names both), or when its version floor record is corrupt.
pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Backend> {
    let path = path.as_ref().to_path_buf();
    let slot: DbSlot = Arc::new(RwLock::new(Weak::new()));
    let cache = Cache::new_lru_cache(options.cache_bytes as usize);
    let open = open_database(&path, &options, &slot, &cache, false)?;
    let mut write_options = WriteOptions::default();
    write_options.set_sync(options.sync == Sync::Always && !options.group_commit);
    Ok(Backend {
        options,
        path,
        write_options,
        slot,
        cache,
        open: RwLock::new(Some(open)),
        position: Mutex::default(),
        dropped: DroppedWrites::default(),
    })
}

/// The layout the directory at `path` was written with (`None` for a directory without a
/// store or a manifest): what a tool passes as [`Options::layout`] to open any store. Reads
/// it from a read-only open, where no compaction runs.
///
/// # Errors
/// [`rediskv::Error::Backend`] when RocksDB cannot open the directory, or the manifest is not
/// one this crate writes.
pub fn stored_layout(path: impl AsRef<Path>) -> Result<Option<rediskv::KeyLayout>> {
    let path = path.as_ref();
    if !path.join("CURRENT").exists() {
        return Ok(None);
    }
    // The families that exist (their names depend on the layout, not known yet).
    let names = DB::list_cf(&rocksdb::Options::default(), path).map_err(err)?;
    let db = DB::open_cf_for_read_only(&rocksdb::Options::default(), path, names, false).map_err(err)?;
    let own = db.cf_handle(OWN_CF).ok_or_else(|| err("propagate column family missing"))?;
    rediskv_engine::stored_manifest_layout(path, db.get_cf(own, MANIFEST_KEY).map_err(err)?.as_deref())
}

/// The most the WAL files may hold before RocksDB flushes the memtables keeping the oldest
/// one alive (the propagate family, written rarely, would otherwise keep every WAL file).
const MAX_TOTAL_WAL_BYTES: u64 = 64 << 20;

/// Every column family's options: LZ4 on every level (the records of one key share long
/// prefixes; LZ4 is the compression this build of RocksDB has), a 10-bit bloom filter per
/// table, blocks, index and filters in the shared `cache` (bounded: otherwise each open
/// table keeps its index and filter in memory), memtables of at most `write_buffer_bytes`.
///
/// Filters and indexes are partitioned, and only their top levels are pinned: a point read
/// then brings one small filter partition through the cache. A whole filter is 10 bits per
/// key of its table, megabytes past the first level, and with a cache smaller than the
/// filters every point read read one again from the file and checksummed it (HSET of new
/// fields into a 3,000,000-field hash fell to about 3,000/s).
fn cf_options(cache: &Cache, write_buffer_bytes: u64) -> rocksdb::Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    let mut cf_options = rocksdb::Options::default();
    cf_options.set_block_based_table_factory(&table);
    cf_options.set_compression_type(DBCompressionType::Lz4);
    cf_options.set_bottommost_compression_type(DBCompressionType::Lz4);
    // RocksDB's own default (64 MiB), unless the total allowed is less.
    cf_options.set_write_buffer_size(write_buffer_bytes.min(64 << 20) as usize);
    cf_options
}

/// The memtable size of the families of subkeys (`default`, `zset_score`): an eighth of
/// `write_buffer_bytes` (8 MiB by default), at least 1 MiB. Each record of a list, hash, set
/// or sorted set is its own memtable insert, and a scan stepping back through a memtable
/// (a list's pops from the right) searches the skiplist again at each step: in a smaller
/// memtable both are shorter. Smaller still (4 MiB), the extra flushes and compactions cost
/// more than that saves (docs/benchmarks.md).
fn subkey_write_buffer_bytes(write_buffer_bytes: u64) -> usize {
    (write_buffer_bytes / 8).clamp(1 << 20, 64 << 20) as usize
}

/// Opens the database in `path` (for reads only if `read_only`: RocksDB then writes nothing)
/// and points the compaction filters' `slot` at it.
fn open_database(
    path: &Path,
    options: &Options,
    slot: &DbSlot,
    cache: &Cache,
    read_only: bool,
) -> Result<Open> {
    let mut db_options = rocksdb::Options::default();
    db_options.create_if_missing(true);
    db_options.create_missing_column_families(true);
    // Group commit: WAL writes wait in RocksDB's buffer for `persist_written`.
    db_options.set_manual_wal_flush(options.group_commit);
    // Memtables of every family together: past the bound RocksDB flushes the largest, and
    // writers wait for the flush rather than grow them further.
    db_options.set_write_buffer_manager(&WriteBufferManager::new_write_buffer_manager(
        options.write_buffer_bytes as usize,
        true,
    ));
    db_options.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
    let descriptor = |cf: Option<ColumnFamily>| {
        let mut cf_options = cf_options(cache, options.write_buffer_bytes);
        if matches!(cf, Some(ColumnFamily::Subkey | ColumnFamily::Score)) {
            cf_options.set_write_buffer_size(subkey_write_buffer_bytes(options.write_buffer_bytes));
        }
        let name = match cf {
            Some(cf) => {
                if cf != ColumnFamily::Metadata {
                    cf_options.set_compaction_filter_factory(GcFactory {
                        slot: Arc::clone(slot),
                        layout: options.layout.clone(),
                        cf,
                        grace_ms: options.grace_ms,
                    });
                }
                cf_name_for(&options.layout, cf)
            }
            None => OWN_CF,
        };
        ColumnFamilyDescriptor::new(name, cf_options)
    };
    let descriptors = ColumnFamily::ALL.into_iter().map(Some).chain([None]).map(descriptor);
    let db = if read_only {
        DB::open_cf_descriptors_read_only(&db_options, path, descriptors, false)
    } else {
        DB::open_cf_descriptors(&db_options, path, descriptors)
    };
    let db = Arc::new(db.map_err(err)?);
    let own = db.cf_handle(OWN_CF).ok_or_else(|| err("propagate column family missing"))?;
    match db.get_cf(own, MANIFEST_KEY).map_err(err)? {
        Some(stored) => check_manifest(path, &stored, &options.layout)?,
        None => {
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            let mut batch = rocksdb::WriteBatch::default();
            batch.put_cf(own, MANIFEST_KEY, manifest(&options.layout));
            db.write_opt(batch, &sync).map_err(err)?;
        }
    }
    let floor = VersionFloor::restore(db.get_cf(own, FLOOR_KEY).map_err(err)?.as_deref())?;
    *slot.write().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&db);
    let syncer = (options.sync == Sync::Everysec && !read_only).then(|| {
        let db = Arc::downgrade(&db);
        Syncer::start(Duration::from_secs(1), move || {
            if let Some(db) = db.upgrade() {
                // A failed sync shows in RocksDB's background error, which fails later writes.
                let _ = db.flush_wal(true);
            }
        })
    });
    Ok(Open { db, layout: options.layout.clone(), floor, syncer, pending: PendingWrites::default() })
}

impl Open {
    fn cf(&self, cf: ColumnFamily) -> Result<&rocksdb::ColumnFamily> {
        let name = cf_name_for(&self.layout, cf);
        self.db.cf_handle(name).ok_or_else(|| err(format!("column family {name} missing")))
    }

    /// The propagate family, holding this crate's own records.
    fn own(&self) -> Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(OWN_CF).ok_or_else(|| err("propagate column family missing"))
    }

    /// Every column family, the propagate family included.
    fn all_cfs(&self) -> Result<Vec<&rocksdb::ColumnFamily>> {
        ColumnFamily::ALL.iter().map(|cf| self.cf(*cf)).chain([self.own()]).collect()
    }

    /// Flushes every column family's memtables to tables and waits: the WAL files holding
    /// their writes are then deleted.
    fn flush_memtables(&self) -> Result<()> {
        self.db.flush_cfs_opt(&self.all_cfs()?, &FlushOptions::default()).map_err(err)
    }

    /// The sum of an integer property over every column family.
    fn property_sum(&self, name: &str) -> u64 {
        let cfs = self.all_cfs().unwrap_or_default();
        cfs.into_iter().filter_map(|h| self.db.property_int_value_cf(h, name).ok().flatten()).sum()
    }

    /// Stops the syncer and RocksDB's background work, after a synced write of the WAL if
    /// `sync_wal`; the database closes once the scans still reading it end.
    fn close(mut self, slot: &DbSlot, sync_wal: bool) {
        self.syncer = None;
        *slot.write().unwrap_or_else(|e| e.into_inner()) = Weak::new();
        if sync_wal {
            let _ = self.db.flush_wal(true);
        }
        // A running filter may hold the database for one record: wait for background work
        // so the last handle is dropped here, not on a compaction thread.
        self.db.cancel_all_background_work(true);
    }
}

impl Backend {
    /// Runs `f` on the open database; an error while a reopen could not open it again.
    fn with_open<T>(&self, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        let open = self.open.read().unwrap_or_else(|e| e.into_inner());
        f(open.as_ref().ok_or_else(|| err("the database is closed: it could not be opened again"))?)
    }

    /// An integer figure of the open database; 0 while it is closed.
    fn figure(&self, f: impl FnOnce(&Open) -> Option<u64>) -> u64 {
        self.with_open(|open| Ok(f(open))).ok().flatten().unwrap_or(0)
    }

    /// The options the directory was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The highest version the directory has promised never to go below.
    pub fn version_floor(&self) -> u64 {
        self.figure(|open| Some(open.floor.get()))
    }
}

impl DiskBackend for Backend {
    /// Syncs the WAL, then flushes every memtable to tables, so the WAL files are released.
    fn flush(&self) -> Result<()> {
        self.with_open(|open| {
            open.db.flush_wal(true).map_err(err)?;
            open.flush_memtables()
        })
    }

    fn compact(&self) -> Result<()> {
        let mut opts = CompactOptions::default();
        opts.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        opts.set_exclusive_manual_compaction(true);
        self.with_open(|open| {
            open.flush_memtables()?;
            for cf in ColumnFamily::ALL {
                open.db.compact_range_cf_opt(open.cf(cf)?, None::<&[u8]>, None::<&[u8]>, &opts);
            }
            Ok(())
        })
    }

    fn disk_bytes(&self, cf: ColumnFamily) -> u64 {
        self.figure(|open| {
            open.db.property_int_value_cf(open.cf(cf).ok()?, "rocksdb.total-sst-files-size").ok().flatten()
        })
    }

    /// RocksDB's `rocksdb.estimate-num-keys` of the column family.
    fn approximate_records(&self, cf: ColumnFamily) -> Option<u64> {
        let open = self.open.read().unwrap_or_else(|e| e.into_inner());
        let open = open.as_ref()?;
        open.db.property_int_value_cf(open.cf(cf).ok()?, "rocksdb.estimate-num-keys").ok().flatten()
    }

    fn usage(&self) -> Usage {
        Usage {
            tables: self.figure(|open| Some(open.property_sum("rocksdb.total-sst-files-size"))),
            journals: wal_allocated_bytes(&self.path),
            cache: self.cache.get_usage() as u64,
            cache_capacity: self.options.cache_bytes,
            memtables: self.figure(|open| Some(open.property_sum("rocksdb.size-all-mem-tables"))),
            pinned: 0,
        }
    }

    fn memory_bytes(&self) -> u64 {
        self.cache.get_usage() as u64
            + self.figure(|open| Some(open.property_sum("rocksdb.size-all-mem-tables")))
    }

    fn stamp_writes(&self, position: Option<Vec<u8>>) {
        *self.position.lock().unwrap_or_else(|p| p.into_inner()) = position;
    }

    fn set_position(&self, position: Option<Vec<u8>>) -> Result<()> {
        self.stamp_writes(position.clone());
        self.with_open(|open| {
            let mut wb = rocksdb::WriteBatch::default();
            match position {
                Some(position) => wb.put_cf(open.own()?, POSITION_KEY, position),
                None => wb.delete_cf(open.own()?, POSITION_KEY),
            }
            open.db.write_opt(wb, &self.write_options).map_err(err)?;
            open.pending.wrote();
            Ok(())
        })
    }

    fn position(&self) -> Result<Option<Vec<u8>>> {
        self.with_open(|open| open.db.get_cf(open.own()?, POSITION_KEY).map_err(err))
    }

    /// `FlushWAL(false)`: one write of the WAL's buffer (with [`Sync::Always`],
    /// `FlushWAL(true)`: and a sync), when a batch was written since the last one.
    fn persist_written(&self) -> Result<()> {
        if !self.options.group_commit {
            return Ok(());
        }
        let sync = self.options.sync == Sync::Always;
        self.with_open(|open| self.dropped.persist(&open.pending, || open.db.flush_wal(sync).map_err(err)))
    }

    /// Closes the database (the WAL's buffer and the memtables are dropped: what no persist
    /// took is gone, as after a crash) and opens the directory again, as at start. Opening
    /// writes (a table of the WAL's records, a new WAL file), so on a full disk it fails:
    /// the directory is then opened for reads only, so that reads go on, and a later call
    /// tries again. Between the two, and if even that fails, every call fails.
    fn reopen(&self) -> Result<()> {
        let mut open = self.open.write().unwrap_or_else(|e| e.into_inner());
        if let Some(closing) = open.take() {
            self.dropped.closing(&closing.pending);
            closing.close(&self.slot, false);
        }
        let opened = open_database(&self.path, &self.options, &self.slot, &self.cache, false);
        let opened = opened.inspect_err(|_| {
            *open = open_database(&self.path, &self.options, &self.slot, &self.cache, true).ok();
        })?;
        *open = Some(opened);
        Ok(())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let open = self.open.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(open) = open {
            open.close(&self.slot, self.options.sync != Sync::No);
        }
    }
}

/// Bytes the WAL files (`*.log`) in `dir` take on disk (allocated blocks: RocksDB allocates a
/// WAL file ahead of its writes).
fn wal_allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().map_or(0, |m| m.blocks() * 512))
        .sum()
}

fn bytes(b: Box<[u8]>) -> Bytes {
    Bytes::from(Vec::from(b))
}

impl KvBackend for Backend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        let value = self.with_open(|open| open.db.get_cf(open.cf(cf)?, key).map_err(err))?;
        Ok(value.map(Bytes::from))
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if range.end.as_ref().is_some_and(|end| *end <= range.start) {
            return Ok(Box::new(std::iter::empty()));
        }
        let db = self.with_open(|open| Ok(Arc::clone(&open.db)))?;
        Ok(Box::new(Scan {
            db,
            cf: cf_name_for(&self.options.layout, cf),
            lower: range.start.clone(),
            upper: range.end.clone(),
            direction,
            chunk: Default::default(),
            done: false,
        }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.with_open(|open| {
            open.floor.write(batch, |batch, floor| {
                let mut wb = rocksdb::WriteBatch::default();
                let ops = batch.into_ops();
                for op in rediskv_engine::in_key_order(&ops) {
                    match op {
                        BatchOp::Put { cf, key, value } => wb.put_cf(open.cf(*cf)?, key, value),
                        BatchOp::Delete { cf, key } => wb.delete_cf(open.cf(*cf)?, key),
                    }
                }
                if let Some(floor) = floor {
                    wb.put_cf(open.own()?, FLOOR_KEY, floor);
                }
                if let Some(position) = &*self.position.lock().unwrap_or_else(|p| p.into_inner()) {
                    wb.put_cf(open.own()?, POSITION_KEY, position);
                }
                open.db.write_opt(wb, &self.write_options).map_err(err)?;
                open.pending.wrote();
                Ok(())
            })
        })
    }
}

/// Records a scan reads through one RocksDB iterator before it lets the database go.
const SCAN_CHUNK: usize = 256;

/// A scan of one column family: chunks of [`SCAN_CHUNK`] records, each read by its own
/// iterator from where the last ended. It holds the database rather than borrowing it, so
/// that [`DiskBackend::reopen`] can replace the database under a scan; the one it started
/// on closes once the scan ends.
struct Scan {
    db: Arc<DB>,
    cf: &'static str,
    /// The bounds still to read: the lower one inclusive, the upper one exclusive.
    lower: Vec<u8>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    chunk: std::collections::VecDeque<(Bytes, Bytes)>,
    /// Whether the last chunk was read (or failed).
    done: bool,
}

impl Scan {
    fn read_chunk(&mut self) -> Result<()> {
        let cf =
            self.db.cf_handle(self.cf).ok_or_else(|| err(format!("column family {} missing", self.cf)))?;
        let mut read = ReadOptions::default();
        read.set_iterate_lower_bound(self.lower.clone());
        if let Some(upper) = &self.upper {
            read.set_iterate_upper_bound(upper.clone());
        }
        let mode = match self.direction {
            Direction::Forward => IteratorMode::Start,
            Direction::Reverse => IteratorMode::End,
        };
        for item in self.db.iterator_cf_opt(cf, read, mode).take(SCAN_CHUNK) {
            let (k, v) = item.map_err(err)?;
            self.chunk.push_back((bytes(k), bytes(v)));
        }
        match self.chunk.back() {
            Some((last, _)) if self.chunk.len() == SCAN_CHUNK => match self.direction {
                Direction::Forward => self.lower = [last.as_ref(), &[0]].concat(),
                Direction::Reverse => self.upper = Some(last.to_vec()),
            },
            _ => self.done = true,
        }
        Ok(())
    }
}

impl Iterator for Scan {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.chunk.is_empty()
            && !self.done
            && let Err(e) = self.read_chunk()
        {
            self.done = true;
            return Some(Err(e));
        }
        self.chunk.pop_front().map(Ok)
    }
}

/// Makes a [`GcCompactionFilter`] per compaction of one column family.
struct GcFactory {
    slot: DbSlot,
    layout: KeyLayout,
    cf: ColumnFamily,
    grace_ms: u64,
}

impl CompactionFilterFactory for GcFactory {
    type Filter = GcCompactionFilter;

    fn create(&mut self, _context: CompactionFilterContext) -> GcCompactionFilter {
        let db = self.slot.read().unwrap_or_else(|e| e.into_inner()).clone();
        let metadata = cf_name_for(&self.layout, ColumnFamily::Metadata);
        GcCompactionFilter { db, metadata, gc: GcFilter::new(&self.layout, self.cf, self.grace_ms) }
    }

    fn name(&self) -> &CStr {
        c"rediskv-gc"
    }
}

/// One compaction's filter: while the database is not open (recovery, close) it keeps
/// everything.
struct GcCompactionFilter {
    db: Weak<DB>,
    /// The name of the Metadata column family in this layout.
    metadata: &'static str,
    gc: GcFilter,
}

impl CompactionFilter for GcCompactionFilter {
    fn filter(&mut self, _level: u32, key: &[u8], _value: &[u8]) -> Decision {
        let Some(db) = self.db.upgrade() else { return Decision::Keep };
        let Some(metadata) = db.cf_handle(self.metadata) else { return Decision::Keep };
        match self.gc.decide(key, |k| db.get_pinned_cf(metadata, k).map(|v| v.map(|v| v.to_vec()))) {
            Ok(GcDecision::Drop) => Decision::Remove,
            Ok(GcDecision::Keep) | Err(_) => Decision::Keep,
        }
    }

    fn name(&self) -> &CStr {
        c"rediskv-gc"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rediskv_engine::testkit::{TempDir, group_commit, put};

    fn get(backend: &Backend, key: &[u8]) -> Option<Bytes> {
        backend.get(ColumnFamily::Subkey, key).expect("get")
    }

    fn scan_all(backend: &Backend) -> ScanIter<'_> {
        let everything = KeyRange { start: Vec::new(), end: None };
        backend.scan(ColumnFamily::Subkey, &everything, Direction::Forward).expect("scan")
    }

    #[test]
    fn a_reopened_backend_serves_the_directory_and_takes_writes() {
        let dir = TempDir::new("rocksdb-reopen");
        let backend = open(dir.path(), group_commit()).expect("open");
        put(&backend, b"before", b"1");
        backend.persist_written().expect("persist");

        // A scan holds the database it started on: the directory opens for reads only.
        let scan = scan_all(&backend);
        assert!(backend.reopen().is_err(), "a scan still holds the closed database");
        assert_eq!(get(&backend, b"before").as_deref(), Some(&b"1"[..]), "read-only, reads go on");
        assert_eq!(scan.count(), 1, "a scan started before the reopen ends on its database");

        backend.reopen().expect("reopen once the scan ended");
        assert_eq!(get(&backend, b"before").as_deref(), Some(&b"1"[..]));
        put(&backend, b"after", b"2");
        backend.persist_written().expect("persist after the reopen");
        drop(backend);
        let backend = open(dir.path(), group_commit()).expect("open again");
        assert_eq!(get(&backend, b"before").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&backend, b"after").as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn a_scan_reads_every_chunk_in_both_directions() {
        let dir = TempDir::new("rocksdb-scan-chunks");
        let backend = open(dir.path(), Options::default()).expect("open");
        let keys: Vec<Vec<u8>> = (0..SCAN_CHUNK * 2 + 3).map(|i| format!("k{i:05}").into_bytes()).collect();
        for key in &keys {
            put(&backend, key, b"v");
        }
        let read = |direction| -> Vec<Vec<u8>> {
            let range = KeyRange { start: b"k".to_vec(), end: Some(b"l".to_vec()) };
            let scan = backend.scan(ColumnFamily::Subkey, &range, direction).expect("scan");
            scan.map(|item| item.expect("record").0.to_vec()).collect()
        };
        assert_eq!(read(Direction::Forward), keys);
        assert_eq!(read(Direction::Reverse), keys.iter().rev().cloned().collect::<Vec<_>>());
    }
}
