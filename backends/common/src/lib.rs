//! What rediskv's on-disk backends (`rediskv-fjall`, `rediskv-rocksdb`) share.
//!
//! | item | answers |
//! |---|---|
//! | [`Options`], [`Sync`] | how a directory is opened: durability, GC grace period, key layout |
//! | [`CF_NAMES`] | the column families under Kvrocks' own names |
//! | [`manifest`], [`check_manifest`], [`layout_from_manifest`], [`stored_manifest_layout`] | the layout a directory was written with, refused when it differs |
//! | [`VersionFloor`] | versions never go backwards across a reopen, even when the clock does |
//! | [`GcFilter`] | the compaction-filter side of [`rediskv::gc::decide`], one metadata read per run |
//! | [`Syncer`] | the `everysec` background thread |
//! | [`PendingWrites`] | group commit: whether a persist has anything to do |
//! | [`GroupCommit`] | group commit: a round's batches held in memory, handed to the engine as one |
//! | [`server_files`] | the server's files beside the data: function libraries, SWAPDB mappings |
//!
//! Besides the three data column families, a backend keeps two records of its own, outside
//! every key range the library reads: [`MANIFEST_KEY`] and [`FLOOR_KEY`].
#![deny(missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rediskv::gc::{self, Decision};
use rediskv::{BatchOp, KvBackend, WriteBatch};
use rediskv::{ColumnFamily, KeyLayout, Metadata, Version, VersionGenerator};
use rediskv::{Error, Result};

mod group_commit;
pub mod server_files;
pub mod testkit;

pub use group_commit::{GroupCommit, MAX_HELD_BYTES};

/// Called with the result of a [`DiskBackend::persist_async`].
pub type Persisted = Box<dyn FnOnce(Result<()>) + Send>;

/// What an on-disk backend offers beyond [`KvBackend`]: durability and compaction on demand,
/// and a size figure.
pub trait DiskBackend: KvBackend {
    /// Syncs every write so far to disk.
    ///
    /// # Errors
    /// [`Error::Backend`] when the sync fails.
    fn flush(&self) -> Result<()>;

    /// Writes every memtable to disk and compacts every column family fully, the compaction
    /// filter dropping the garbage. Blocks until done.
    ///
    /// # Errors
    /// [`Error::Backend`] when a flush or compaction fails.
    fn compact(&self) -> Result<()>;

    /// Bytes on disk of one column family's table files (memtables and the journal are not
    /// counted: call [`DiskBackend::compact`] first for a settled figure).
    fn disk_bytes(&self, cf: ColumnFamily) -> u64;

    /// About how many records one column family holds, memtables and tables together
    /// (versions of a key and deletions not yet compacted away may each count), in O(1)
    /// or O(tables): for sizing what a cache keeps per key. Default: not known.
    fn approximate_records(&self, _cf: ColumnFamily) -> Option<u64> {
        None
    }

    /// Where the engine's bytes are: tables and journals on disk, block cache and memtables in
    /// memory. Default: the tables of the four column families, nothing else known.
    fn usage(&self) -> Usage {
        Usage { tables: ColumnFamily::ALL.iter().map(|cf| self.disk_bytes(*cf)).sum(), ..Usage::default() }
    }

    /// Bytes the engine holds in memory: [`Usage`]'s block cache, memtables and pinned blocks,
    /// without its figures on disk (cheaper than [`DiskBackend::usage`] where an engine
    /// overrides it: `maxmemory` reads it before commands).
    fn memory_bytes(&self) -> u64 {
        let usage = self.usage();
        usage.cache + usage.memtables + usage.pinned
    }

    /// With [`Options::group_commit`]: hands every batch written so far to the OS (one
    /// journal write for all of them), and with [`Sync::Always`] syncs them (one
    /// `fdatasync`); a no-op without group commit, or when nothing is pending. Call it
    /// before acknowledging any write, or any read of data written meanwhile.
    ///
    /// # Errors
    /// [`Error::Backend`] when the write to the OS fails (the engine then refuses later writes).
    fn persist_written(&self) -> Result<()>;

    /// Queues a [`DiskBackend::persist_written`] of every batch written so far: `done` is
    /// called with its result once it ran, on the writer thread after
    /// [`DiskBackend::start_persist`] or on the caller's in [`DiskBackend::persist_queued`]
    /// (one of the two must follow). Meanwhile the caller may serve more commands, their
    /// reads seeing those batches. `Err(done)` (the default) when the engine has no writer
    /// thread, or nothing to wait for: the caller then persists itself.
    ///
    /// # Errors
    /// `done`, given back.
    fn persist_async(&self, done: Persisted) -> std::result::Result<(), Persisted> {
        Err(done)
    }

    /// Hands what [`DiskBackend::persist_async`] queued to the writer thread.
    fn start_persist(&self) {}

    /// Runs what [`DiskBackend::persist_async`] queued on this thread, unless the writer
    /// took it already (then waits for it).
    fn persist_queued(&self) {}

    /// Writes `ops` as one batch, as [`KvBackend::write`] does, and leaves `ops` empty with
    /// its room kept, for a caller that reuses one vector for its batches.
    ///
    /// # Errors
    /// As [`KvBackend::write`].
    fn write_ops(&self, ops: &mut Vec<BatchOp>) -> Result<()> {
        let mut batch = WriteBatch::new();
        for op in ops.drain(..) {
            match op {
                BatchOp::Put { cf, key, value } => batch.put(cf, key, value),
                BatchOp::Delete { cf, key } => batch.delete(cf, key),
            }
        }
        self.write(batch)
    }

    /// Writes `records` as one batch, as [`DiskBackend::write_ops`] does, lent rather than
    /// owned: [`GroupCommit`] writes a round's records from its maps, which reads look at
    /// until the engine holds them, without a copy of each key and value. The engine may
    /// reorder `records`. Default: [`DiskBackend::write_ops`] of their clones.
    ///
    /// # Errors
    /// As [`KvBackend::write`].
    fn write_records(&self, records: &mut [Record<'_>]) -> Result<()> {
        let mut ops = records
            .iter()
            .map(|&(cf, key, value)| match value {
                Some(value) => BatchOp::Put { cf, key: key.clone(), value: value.clone() },
                None => BatchOp::Delete { cf, key: key.clone() },
            })
            .collect();
        self.write_ops(&mut ops)
    }

    /// Sets the stream position a replica will have applied once the next writes are in (an
    /// opaque record): every later batch writes it too, in the same atomic batch, so that
    /// after a crash the directory's position and data agree — each write it holds is one
    /// the position counts, and none more. Default: nothing kept.
    fn stamp_writes(&self, position: Option<Vec<u8>>) {
        let _ = position;
    }

    /// [`DiskBackend::stamp_writes`], and writes `position` now (`None`: removes the stored
    /// one), in a batch of its own: for a position the data already stands at.
    ///
    /// # Errors
    /// [`Error::Backend`] when the record cannot be written.
    fn set_position(&self, position: Option<Vec<u8>>) -> Result<()> {
        self.stamp_writes(position);
        Ok(())
    }

    /// The position [`DiskBackend::set_position`] last wrote, as the directory holds it.
    /// Default: `None`.
    ///
    /// # Errors
    /// [`Error::Backend`] when the store cannot be read.
    fn position(&self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Marks a bulk load into an emptied store: `true` before its first write, `false` after
    /// its last. A crash during one starts it over (a replica's full sync, an RDB loaded at
    /// start), so the engine may hold more in memory meanwhile; ending one syncs what it
    /// wrote, before the caller records that the load is done. Default: nothing changes.
    ///
    /// # Errors
    /// [`Error::Backend`] when the sync at the end fails.
    fn bulk_load(&self, on: bool) -> Result<()> {
        let _ = on;
        Ok(())
    }

    /// The longest record key the engine takes. Default: no limit.
    fn max_key_len(&self) -> usize {
        usize::MAX
    }

    /// After a failed [`KvBackend::write`] or [`DiskBackend::persist_written`]: brings the
    /// engine back to what its directory holds, writable again, in place (every handle on
    /// it stays valid). Batches no persist took may be gone afterwards, whole (as after a
    /// crash); the caller drops whatever it kept in memory of the store. A batch the closed
    /// engine took after the last persist returned makes the next persist fail
    /// ([`DroppedWrites`]): no reply acknowledges it. Default: nothing, for an engine that a
    /// failed write leaves usable.
    ///
    /// # Errors
    /// [`Error::Backend`] when the directory cannot be opened again (then call it again
    /// later; meanwhile every call fails).
    fn reopen(&self) -> Result<()> {
        Ok(())
    }
}

/// Where a disk engine's bytes are ([`DiskBackend::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Table files on disk.
    pub tables: u64,
    /// Journal (write-ahead log) files on disk, as allocated.
    pub journals: u64,
    /// Bytes held in the block cache.
    pub cache: u64,
    /// The block cache's capacity.
    pub cache_capacity: u64,
    /// Bytes in memtables (written, not yet flushed to tables).
    pub memtables: u64,
    /// Index and filter blocks the engine holds in memory outside the block cache (fjall
    /// pins them for its first levels; 0 where they all go through the cache).
    pub pinned: u64,
}

/// When writes reach the disk, as Redis' `appendfsync`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sync {
    /// Every batch is synced (`fdatasync`) before `write` returns.
    Always,
    /// Every batch reaches the OS before `write` returns, or before
    /// [`DiskBackend::persist_written`] with [`Options::group_commit`] (it survives a killed
    /// process); a background thread syncs once a second (at most a second is lost on power
    /// failure).
    #[default]
    Everysec,
    /// Every batch reaches the OS before `write` returns; the OS decides when to sync.
    No,
}

/// How a directory is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// Durability of writes.
    pub sync: Sync,
    /// How long after expiry a collection's subkeys are kept ([`gc::DEFAULT_GRACE_MS`]).
    pub grace_ms: u64,
    /// The key layout the database writes with; the directory remembers it and refuses
    /// another one.
    pub layout: KeyLayout,
    /// `write` applies a batch without handing it to the OS, and the caller calls
    /// [`DiskBackend::persist_written`] before acknowledging anything — one journal write
    /// (with [`Sync::Always`], one write and one `fdatasync`) per round of replies instead
    /// of one per command. Redis writes and, with `appendfsync always`, syncs its AOF once
    /// per event-loop iteration, before the replies, the same way. Off by default: each
    /// `write` then reaches the OS (with `Always`, the disk) before it returns.
    pub group_commit: bool,
    /// Capacity of the block cache in bytes, [`DEFAULT_CACHE_BYTES`] unless told: the table
    /// blocks read last (on RocksDB also the tables' index and filter blocks, which would
    /// otherwise stay in memory beside it for every table).
    pub cache_bytes: u64,
    /// The most the memtables of all column families together may hold, in bytes,
    /// [`DEFAULT_WRITE_BUFFER_BYTES`] unless told: past it the engine flushes memtables to
    /// tables (and the journals holding their writes are released).
    pub write_buffer_bytes: u64,
}

/// Default [`Options::cache_bytes`]: 32 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 32 << 20;
/// Default [`Options::write_buffer_bytes`]: 64 MiB.
pub const DEFAULT_WRITE_BUFFER_BYTES: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: Sync::default(),
            grace_ms: gc::DEFAULT_GRACE_MS,
            layout: KeyLayout::default(),
            group_commit: false,
            cache_bytes: DEFAULT_CACHE_BYTES,
            write_buffer_bytes: DEFAULT_WRITE_BUFFER_BYTES,
        }
    }
}

/// The engine's name of each column family: Kvrocks' `metadata`, `default` (subkeys),
/// `zset_score` and `stream`.
pub const CF_NAMES: [(ColumnFamily, &str); 4] = [
    (ColumnFamily::Metadata, "metadata"),
    (ColumnFamily::Subkey, "default"),
    (ColumnFamily::Score, "zset_score"),
    (ColumnFamily::Stream, "stream"),
];

/// The engine's name of `cf`.
pub fn cf_name(cf: ColumnFamily) -> &'static str {
    match cf {
        ColumnFamily::Metadata => "metadata",
        ColumnFamily::Subkey => "default",
        ColumnFamily::Score => "zset_score",
        ColumnFamily::Stream => "stream",
    }
}

/// The name of `cf` in a store of `layout`: [`cf_name`] for Kvrocks; NeoKV's own
/// `redis_metadata`, `data` and `redis_zset_score` for NeoKV (`stream`, which NeoKV does not
/// have, stays).
pub fn cf_name_for(layout: &KeyLayout, cf: ColumnFamily) -> &'static str {
    match (layout.kind(), cf) {
        (rediskv::LayoutKind::NeoKv, ColumnFamily::Metadata) => "redis_metadata",
        (rediskv::LayoutKind::NeoKv, ColumnFamily::Subkey) => "data",
        (rediskv::LayoutKind::NeoKv, ColumnFamily::Score) => "redis_zset_score",
        _ => cf_name(cf),
    }
}

/// Key of the layout manifest, in the backend's own column family.
pub const MANIFEST_KEY: &[u8] = b"rediskv:layout";
/// Key of the version floor (8 bytes, big-endian), in the backend's own column family.
pub const FLOOR_KEY: &[u8] = b"rediskv:version-floor";
/// Key of a replica's stream position ([`DiskBackend::set_position`]), in the backend's own
/// column family.
pub const POSITION_KEY: &[u8] = b"rediskv:replication-position";

/// The manifest of `layout`: one line of text naming the system and every option that
/// changes the bytes of a record key, e.g. `rediskv layout v1; namespace "__namespace";
/// cluster slots off; hash prefix 0; fixed prefix ""` (Kvrocks), `rediskv layout v1;
/// neokv region 1 index 1; hash prefix 0; fixed prefix ""` (NeoKV) or `rediskv layout v1;
/// camellia namespace "default"; hash version 0; set version 1; hash prefix 0; fixed
/// prefix ""` (camellia) or `rediskv layout v1; titea namespace "default.default"; hash
/// prefix 0; fixed prefix ""` (TiTea).
pub fn manifest(layout: &KeyLayout) -> Vec<u8> {
    let system = match layout.neokv_ids() {
        Some((region, index)) => format!("neokv region {region} index {index}"),
        None if layout.kind() == rediskv::LayoutKind::TiTea => {
            format!("titea namespace \"{}\"", layout.namespace().escape_ascii())
        }
        None if layout.kind() == rediskv::LayoutKind::Camellia => format!(
            "camellia namespace \"{}\"; hash version {}; set version {}",
            layout.namespace().escape_ascii(),
            layout.encode_version(rediskv::RedisType::Hash),
            layout.encode_version(rediskv::RedisType::Set),
        ),
        None => format!(
            "namespace \"{}\"; cluster slots {}",
            layout.namespace().escape_ascii(),
            if layout.cluster_slots() { "on" } else { "off" }
        ),
    };
    format!(
        "rediskv layout v1; {system}; hash prefix {}; fixed prefix \"{}\"",
        layout.hash_prefix_len(),
        layout.fixed_prefix().escape_ascii(),
    )
    .into_bytes()
}

/// The layout a manifest written by [`manifest`] names; `None` for text it does not write.
pub fn layout_from_manifest(stored: &[u8]) -> Option<KeyLayout> {
    let mut rest = std::str::from_utf8(stored).ok()?.strip_prefix("rediskv layout v1; ")?;
    let mut layout = if let Some(ids) = rest.strip_prefix("neokv region ") {
        let (region, after) = ids.split_once(" index ")?;
        let (index, after) = after.split_once("; ")?;
        rest = after;
        KeyLayout::neokv(region.parse().ok()?, index.parse().ok()?)
    } else if let Some(after) = rest.strip_prefix("titea namespace ") {
        let namespace;
        (namespace, rest) = quoted(after)?;
        rest = rest.strip_prefix("; ")?;
        KeyLayout::titea(&namespace)
    } else if let Some(after) = rest.strip_prefix("camellia namespace ") {
        let namespace;
        (namespace, rest) = quoted(after)?;
        let (hash, after) = rest.strip_prefix("; hash version ")?.split_once("; ")?;
        let (set, after) = after.strip_prefix("set version ")?.split_once("; ")?;
        rest = after;
        KeyLayout::camellia(&namespace)
            .with_encode_version(rediskv::RedisType::Hash, hash.parse().ok()?)
            .ok()?
            .with_encode_version(rediskv::RedisType::Set, set.parse().ok()?)
            .ok()?
    } else {
        let namespace;
        (namespace, rest) = quoted(rest.strip_prefix("namespace ")?)?;
        let slots;
        (slots, rest) = rest.strip_prefix("; cluster slots ")?.split_once("; ")?;
        let slots = match slots {
            "on" => true,
            "off" => false,
            _ => return None,
        };
        KeyLayout::new(&namespace).ok()?.with_cluster_slots(slots)
    };
    let (hash, after) = rest.strip_prefix("hash prefix ")?.split_once("; ")?;
    let (prefix, after) = quoted(after.strip_prefix("fixed prefix ")?)?;
    layout = layout.with_hash_prefix(hash.parse().ok()?).ok()?.with_fixed_prefix(&prefix);
    after.is_empty().then_some(layout)
}

/// The layout of the directory at `path` from its stored manifest (`None`: no manifest).
///
/// # Errors
/// [`Error::Backend`] for a manifest [`manifest`] does not write.
pub fn stored_manifest_layout(path: &Path, stored: Option<&[u8]>) -> Result<Option<KeyLayout>> {
    let Some(stored) = stored else { return Ok(None) };
    layout_from_manifest(stored).map(Some).ok_or_else(|| {
        Error::Backend(format!("{}: unknown manifest [{}]", path.display(), String::from_utf8_lossy(stored)))
    })
}

/// The bytes of the string `escape_ascii` wrote between the quotes `text` starts with, and
/// the text after the closing quote.
fn quoted(text: &str) -> Option<(Vec<u8>, &str)> {
    let inner = text.strip_prefix('"')?.as_bytes();
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    loop {
        match *inner.get(i)? {
            b'"' => return Some((out, std::str::from_utf8(&inner[i + 1..]).ok()?)),
            b'\\' => {
                let (byte, len) = match *inner.get(i + 1)? {
                    b'n' => (b'\n', 2),
                    b'r' => (b'\r', 2),
                    b't' => (b'\t', 2),
                    b'x' => (
                        u8::from_str_radix(std::str::from_utf8(inner.get(i + 2..i + 4)?).ok()?, 16).ok()?,
                        4,
                    ),
                    other => (other, 2),
                };
                out.push(byte);
                i += len;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
}

/// Checks the manifest stored in the directory at `path` against `layout`.
///
/// # Errors
/// [`Error::Backend`] naming both layouts when they differ: opening would misread every key.
pub fn check_manifest(path: &Path, stored: &[u8], layout: &KeyLayout) -> Result<()> {
    let ours = manifest(layout);
    if stored == ours.as_slice() {
        return Ok(());
    }
    Err(Error::Backend(format!(
        "{} was written with [{}], refusing to open it with [{}]",
        path.display(),
        String::from_utf8_lossy(stored),
        String::from_utf8_lossy(&ours),
    )))
}

/// How far past the largest version written the stored floor is set: 10 s of versions, so
/// the floor record is rewritten about once every 10 s of writes.
pub const FLOOR_LEASE: u64 = 10_000_000 << 11;

/// The persisted upper bound of every version written to a directory.
///
/// Versions come from the clock (`unix_us << 11`); a clock set back between two runs would
/// hand out versions below ones already on disk, and a new collection could then read an old
/// one's subkeys. Every batch whose metadata carries a version above the floor also writes a
/// new floor, in the same atomic batch; at open, the process-wide
/// [`VersionGenerator::global`] is raised above the stored floor.
#[derive(Debug)]
pub struct VersionFloor {
    floor: AtomicU64,
    bump: Mutex<()>,
}

impl VersionFloor {
    /// The floor read from the directory (`None` for a new one); raises the global version
    /// generator above it.
    ///
    /// # Errors
    /// [`Error::Backend`] when the stored record is not 8 bytes.
    pub fn restore(stored: Option<&[u8]>) -> Result<Self> {
        let floor = match stored {
            None => 0,
            Some(raw) => u64::from_be_bytes(raw.try_into().map_err(|_| {
                Error::Backend(format!("version floor record is {} bytes, not 8", raw.len()))
            })?),
        };
        // Drawing one version as if the clock stood just past the floor's time leaves the
        // generator's last version above the floor: every later version is larger.
        VersionGenerator::global().next((floor >> 11) + 1);
        Ok(VersionFloor { floor: AtomicU64::new(floor), bump: Mutex::new(()) })
    }

    /// The floor as last written.
    pub fn get(&self) -> u64 {
        self.floor.load(Ordering::SeqCst)
    }

    /// Applies `batch` through `apply`, which gets the new floor to write in the same atomic
    /// batch when the batch carries a version above the current one (floor bumps are
    /// serialised so the stored floor only grows).
    ///
    /// # Errors
    /// What `apply` returns; the floor then stays where it was.
    pub fn write(
        &self,
        batch: WriteBatch,
        apply: impl FnOnce(WriteBatch, Option<[u8; 8]>) -> Result<()>,
    ) -> Result<()> {
        let top = max_version(batch.ops());
        self.write_ops(top, |floor| apply(batch, floor))
    }

    /// [`VersionFloor::write`] of a batch whose largest version is `top`
    /// ([`max_version`]): `apply` gets the new floor, if any.
    ///
    /// # Errors
    /// What `apply` returns; the floor then stays where it was.
    pub fn write_ops(&self, top: u64, apply: impl FnOnce(Option<[u8; 8]>) -> Result<()>) -> Result<()> {
        if top <= self.get() {
            return apply(None);
        }
        let _bump = self.bump.lock().unwrap_or_else(|e| e.into_inner());
        if top <= self.get() {
            return apply(None);
        }
        let next = top.saturating_add(FLOOR_LEASE);
        apply(Some(next.to_be_bytes()))?;
        self.floor.store(next, Ordering::SeqCst);
        Ok(())
    }
}

/// The largest collection version among the batch's metadata puts (0 when none), in
/// Kvrocks' value format, camellia's or TiTea's (the floor does not need to know the
/// layout); of a TiTea object id, its first 8 bytes (the version it was made from).
pub fn max_version(ops: &[BatchOp]) -> u64 {
    max_version_of(ops.iter().filter_map(|op| match op {
        BatchOp::Put { cf: ColumnFamily::Metadata, value, .. } => Some(&value[..]),
        _ => None,
    }))
}

/// [`max_version`] of the metadata `values` a batch puts.
pub fn max_version_of<'a>(values: impl Iterator<Item = &'a [u8]>) -> u64 {
    values
        .filter_map(|value| {
            Metadata::decode(value)
                .or_else(|_| rediskv::camellia::decode_metadata(value))
                .or_else(|_| rediskv::titea::decode_metadata(value))
                .ok()
                .map(|m| match m.version {
                    Version::Short(v) => v,
                    Version::Id([a, b, c, d, e, f, g, h, ..]) => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
                })
        })
        .max()
        .unwrap_or(0)
}

/// A record lent to [`DiskBackend::write_records`]: its column family, key and value
/// (`None`: a deletion).
pub type Record<'a> = (ColumnFamily, &'a Bytes, Option<&'a Bytes>);

/// `op` lent as a [`Record`].
pub fn record_of(op: &BatchOp) -> Record<'_> {
    match op {
        BatchOp::Put { cf, key, value } => (*cf, key, Some(value)),
        BatchOp::Delete { cf, key } => (*cf, key, None),
    }
}

/// Orders `records` as [`in_key_order`] orders a batch's operations (stable: those of one
/// key stay in the order given).
pub fn sort_records(records: &mut [Record<'_>]) {
    records.sort_by(|a, b| place(a.0, a.1).cmp(&place(b.0, b.1)));
}

/// A record's place in key order: its column family ([`ColumnFamily::ALL`]'s order), then
/// its key.
fn place(cf: ColumnFamily, key: &[u8]) -> (usize, &[u8]) {
    (ColumnFamily::ALL.iter().position(|c| *c == cf).unwrap_or(0), key)
}

/// `ops` ordered by column family ([`ColumnFamily::ALL`]'s order) and key, those of one key
/// in the order given, so what the batch means is unchanged. Both engines insert a batch's
/// records into a skiplist memtable one after the other: in key order each search walks the
/// nodes the last one walked (RocksDB starts it where the last one ended), where in a round's
/// order (a hash map's) each walks the list anew (docs/benchmarks.md: RocksDB's insert from
/// about 3,700 instructions a record to 560; fjall's CPU per pipelined LPUSH a fifth lower).
pub fn in_key_order(ops: &[BatchOp]) -> impl Iterator<Item = &BatchOp> {
    let mut order: Vec<((usize, &[u8]), &BatchOp)> = ops
        .iter()
        .map(|op| match op {
            BatchOp::Put { cf, key, .. } | BatchOp::Delete { cf, key } => (place(*cf, key), op),
        })
        .collect();
    // Stable, so those of one key stay in the order given; it merges the runs already in
    // order (or in reverse) it finds, so a round of pushes to one list sorts in one pass.
    order.sort_by(|a, b| a.0.cmp(&b.0));
    order.into_iter().map(|(_, op)| op)
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One compaction run's garbage decisions for Subkey or Score records.
///
/// Each record is judged by [`gc::decide`] against its owner's metadata as it is now. A run
/// of records with the same owner **and version** reuses the decision: `Drop` is final (a
/// version never comes back) and `Keep` is always safe. A decision is never reused across
/// versions, since a version created after the metadata read would be judged stale.
#[derive(Debug)]
pub struct GcFilter {
    layout: KeyLayout,
    cf: ColumnFamily,
    grace_ms: u64,
    now_ms: u64,
    last: Option<(Vec<u8>, Version, Decision)>,
}

impl GcFilter {
    /// A filter for one run over `cf`, with the clock read once now.
    pub fn new(layout: &KeyLayout, cf: ColumnFamily, grace_ms: u64) -> Self {
        GcFilter { layout: layout.clone(), cf, grace_ms, now_ms: now_ms(), last: None }
    }

    /// The decision for the record `key`; `read` fetches a metadata record.
    ///
    /// # Errors
    /// What `read` returns: the compaction should stop rather than guess.
    pub fn decide<V: AsRef<[u8]>, E>(
        &mut self,
        key: &[u8],
        mut read: impl FnMut(&[u8]) -> std::result::Result<Option<V>, E>,
    ) -> std::result::Result<Decision, E> {
        let owner = match self.cf {
            ColumnFamily::Subkey | ColumnFamily::Stream => {
                self.layout.decode_subkey(key).ok().map(|s| (s.owner(), s.version))
            }
            ColumnFamily::Score => self.layout.decode_score_key(key).ok().map(|s| (s.owner, s.version)),
            ColumnFamily::Metadata => None,
        };
        let Some((owner, version)) = owner else { return Ok(Decision::Keep) };
        let meta_key = self.layout.owner_metadata_key(&owner);
        if let Some((k, v, d)) = &self.last
            && *k == meta_key
            && *v == version
        {
            return Ok(*d);
        }
        let mut failure = None;
        let decision = gc::decide(
            &self.layout,
            self.cf,
            key,
            |k| match read(k) {
                Ok(v) => v,
                Err(e) => {
                    failure = Some(e);
                    None
                }
            },
            self.now_ms,
            self.grace_ms,
        );
        if let Some(e) = failure {
            return Err(e);
        }
        self.last = Some((meta_key, version, decision));
        Ok(decision)
    }
}

/// Group commit's bookkeeping: batches written and batches known persisted, so that
/// [`DiskBackend::persist_written`] after a round of reads only (nothing new to persist)
/// costs two atomic loads, not a journal lock and, with [`Sync::Always`], an `fdatasync`.
#[derive(Debug, Default)]
pub struct PendingWrites {
    written: AtomicU64,
    persisted: AtomicU64,
    /// Batches covered by a persist that returned, with success or not: their replies say so.
    reported: AtomicU64,
}

impl PendingWrites {
    /// Counts a batch the engine has taken (call once its commit returned).
    pub fn wrote(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs `persist` when a batch was written since the last persist that covered it. A
    /// batch counted before this call is covered: `persist` starts after its commit.
    ///
    /// # Errors
    /// What `persist` returns; the batches then stay pending.
    pub fn persist(&self, persist: impl FnOnce() -> Result<()>) -> Result<()> {
        let seen = self.written.load(Ordering::SeqCst);
        if seen <= self.persisted.load(Ordering::SeqCst) {
            return Ok(());
        }
        let persisted = persist();
        self.reported.fetch_max(seen, Ordering::SeqCst);
        persisted?;
        self.persisted.fetch_max(seen, Ordering::SeqCst);
        Ok(())
    }

    /// A persist that fails with `error` without running: every batch taken so far is
    /// reported failed.
    ///
    /// # Errors
    /// `error`, always.
    pub fn refuse(&self, error: Error) -> Result<()> {
        self.reported.fetch_max(self.written.load(Ordering::SeqCst), Ordering::SeqCst);
        Err(error)
    }

    /// Whether a batch was taken since the last persist returned: closing the engine now
    /// drops it before any reply said whether it is durable.
    pub fn unreported(&self) -> bool {
        self.written.load(Ordering::SeqCst) > self.reported.load(Ordering::SeqCst)
    }
}

/// A reopen's guard for batches it drops unreported: the closed engine took them after the
/// last persist returned, so the next [`DiskBackend::persist_written`] (on the reopened
/// engine, which never saw them) must fail, or it would acknowledge writes that are gone.
#[derive(Debug, Default)]
pub struct DroppedWrites(AtomicBool);

impl DroppedWrites {
    /// The engine whose bookkeeping is `pending` is being closed by a reopen.
    pub fn closing(&self, pending: &PendingWrites) {
        if pending.unreported() {
            self.dropped();
        }
    }

    /// Batches no persist reported on were dropped (a reopen under a layer that held them).
    pub fn dropped(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The error the next persist answers after a drop, once (`None`: nothing was dropped).
    pub fn take(&self) -> Option<Error> {
        self.0.swap(false, Ordering::SeqCst).then(|| {
            Error::Backend("writes the engine took were dropped by a reopen before any persist".into())
        })
    }

    /// Runs a persist on the reopened engine whose bookkeeping is `pending`: fails, once,
    /// when the last reopen dropped unreported batches.
    ///
    /// # Errors
    /// That error, or what `persist` returns.
    pub fn persist(&self, pending: &PendingWrites, persist: impl FnOnce() -> Result<()>) -> Result<()> {
        if let Some(e) = self.take() {
            return pending.refuse(e);
        }
        pending.persist(persist)
    }
}

/// A background thread calling a function every interval until dropped (the `everysec`
/// sync).
#[derive(Debug)]
pub struct Syncer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the thread; `tick` runs once per `every` and once more when stopped.
    pub fn start(every: Duration, tick: impl Fn() + Send + 'static) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (lock, cv) = &*flag;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped {
                stopped = cv.wait_timeout(stopped, every).unwrap_or_else(|e| e.into_inner()).0;
                tick();
            }
        });
        Syncer { stop, thread: Some(thread) }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Maps an engine error to the library's.
pub fn backend_error(engine: &str, e: impl std::fmt::Display) -> Error {
    Error::Backend(format!("{engine}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_in_key_order_keeps_each_keys_records_in_their_order() {
        use bytes::Bytes;
        let put = |cf, key: &'static [u8], value: &'static [u8]| BatchOp::Put {
            cf,
            key: Bytes::from_static(key),
            value: Bytes::from_static(value),
        };
        let delete = |cf, key: &'static [u8]| BatchOp::Delete { cf, key: Bytes::from_static(key) };
        let ops = vec![
            put(ColumnFamily::Subkey, b"b", b"1"),
            put(ColumnFamily::Metadata, b"z", b"m"),
            delete(ColumnFamily::Subkey, b"a"),
            delete(ColumnFamily::Subkey, b"b"),
            put(ColumnFamily::Subkey, b"a", b"2"),
            put(ColumnFamily::Subkey, b"b", b"3"),
        ];
        let ordered: Vec<&BatchOp> = in_key_order(&ops).collect();
        let expected = [&ops[1], &ops[2], &ops[4], &ops[0], &ops[3], &ops[5]];
        assert_eq!(ordered, expected);
        // The same records lent, as a round's are: the same order.
        let mut records: Vec<Record<'_>> = ops.iter().map(record_of).collect();
        sort_records(&mut records);
        let lent: Vec<Record<'_>> = expected.iter().map(|op| record_of(op)).collect();
        assert_eq!(records, lent);
    }

    #[test]
    fn every_manifest_names_its_layout_back() {
        let layouts = [
            KeyLayout::default(),
            KeyLayout::new(b"tenant \"x\"\\\n\x01\xff").unwrap().with_cluster_slots(true),
            KeyLayout::default().with_hash_prefix(4).unwrap().with_fixed_prefix(b"\x00p; q"),
            KeyLayout::neokv(1, 1),
            KeyLayout::neokv(-7, i64::MAX).with_fixed_prefix(b"r"),
            KeyLayout::camellia(b"default"),
            KeyLayout::titea(b"default.default"),
            KeyLayout::camellia(b"a \"b\"; c")
                .with_encode_version(rediskv::RedisType::Set, 1)
                .unwrap()
                .with_hash_prefix(8)
                .unwrap(),
        ];
        for layout in layouts {
            let text = manifest(&layout);
            assert_eq!(layout_from_manifest(&text), Some(layout), "{}", String::from_utf8_lossy(&text));
        }
        assert_eq!(
            manifest(&KeyLayout::default()),
            b"rediskv layout v1; namespace \"__namespace\"; cluster slots off; hash prefix 0; fixed prefix \"\""
        );
        assert_eq!(
            manifest(&KeyLayout::camellia(b"n").with_encode_version(rediskv::RedisType::Hash, 1).unwrap()),
            b"rediskv layout v1; camellia namespace \"n\"; hash version 1; set version 0; hash prefix 0; fixed prefix \"\""
        );
        for bad in [
            &b""[..],
            b"rediskv layout v2; namespace \"a\"",
            b"rediskv layout v1; neokv region x index 1",
            b"rediskv layout v1; camellia namespace \"n\"; hash version 2; set version 0; hash prefix 0; fixed prefix \"\"",
        ] {
            assert_eq!(layout_from_manifest(bad), None);
        }
    }
}
