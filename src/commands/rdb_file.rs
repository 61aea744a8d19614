//! Whole databases to and from RDB files ([`crate::codec::RdbFileWriter`],
//! [`crate::codec::RdbFileReader`]): what SAVE, BGSAVE, a full sync and `rediskv-inspect`
//! write and load. A save holds one key (and a piece of the file) in memory; a load, one
//! batch of keys (about 4 MiB of records, or one larger key).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{CommandError, Db, Engine};
use crate::backend::{BatchOp, KvBackend, WriteBatch};
use crate::codec::{RdbFileOptions, RdbFileWriter, RdbHeader, RdbItem};

/// Bytes gathered before [`save_rdb`] hands them on.
const EMIT_BYTES: usize = 64 << 10;

/// What a save or a load did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RdbCounts {
    /// Keys written or stored.
    pub keys: u64,
    /// Keys by type name (`string`, `list`, `set`, `zset`, `hash`, `stream`).
    pub by_type: BTreeMap<&'static str, u64>,
    /// Bytes of the file.
    pub bytes: u64,
    /// Saving: keys of a type an RDB file cannot hold (bloom filter, JSON…), left out.
    /// Loading: keys already expired, not stored.
    pub skipped: u64,
    /// Function libraries.
    pub functions: u64,
}

impl RdbCounts {
    fn count(&mut self, type_name: &'static str) {
        self.keys += 1;
        *self.by_type.entry(type_name).or_default() += 1;
    }
}

/// What [`save_rdb`] writes besides the keys.
#[derive(Debug, Clone)]
pub struct RdbSave<'a> {
    /// The header's auxiliary fields.
    pub header: RdbHeader,
    /// The function libraries' code.
    pub functions: &'a [String],
    /// Databases `0..databases` are written.
    pub databases: usize,
    /// RESIZEDB's figures by database: keys, and keys with a TTL (a hint to the loader).
    pub sizes: &'a [(u64, u64)],
    /// `rdbcompression`, `rdbchecksum`.
    pub options: RdbFileOptions,
}

/// Writes `engine`'s databases as an RDB file, handing it to `emit` in pieces of about
/// 64 KiB and calling `progress(keys so far)` after each key. Expired keys and keys of
/// types an RDB file cannot hold are left out (the latter counted in
/// [`RdbCounts::skipped`]). `engine` should read a snapshot of the store, so that the file
/// is one point in time.
///
/// # Errors
/// The store's read failed (its message), or `emit` (its message, as it gave it).
pub fn save_rdb<B: KvBackend>(
    engine: &Engine<B>,
    save: &RdbSave<'_>,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    progress: &mut dyn FnMut(u64),
) -> Result<RdbCounts, String> {
    let mut counts = RdbCounts::default();
    let mut w = RdbFileWriter::new(save.options);
    let mut buf = Vec::with_capacity(EMIT_BYTES * 2);
    let mut hand_on = |buf: &mut Vec<u8>, counts: &mut RdbCounts| {
        counts.bytes += buf.len() as u64;
        let sent = emit(buf);
        buf.clear();
        sent
    };
    w.header(&mut buf, &save.header);
    for code in save.functions {
        w.function(&mut buf, code.as_bytes());
        counts.functions += 1;
    }
    let session = engine.session();
    let mut db = engine.db(&session);
    for index in 0..save.databases {
        let (keys, expires) = save.sizes.get(index).copied().unwrap_or_default();
        db.select(index).map_err(|e| e.to_string())?;
        let mut selected = false;
        let mut failed = None;
        let skipped = db
            .each_rdb_value(|key, value, expire_ms| {
                if !selected {
                    w.select_db(&mut buf, index as u64, keys, expires);
                    selected = true;
                }
                w.entry(&mut buf, key, &value, (expire_ms != 0).then_some(expire_ms));
                counts.count(value.type_name());
                progress(counts.keys);
                if buf.len() >= EMIT_BYTES
                    && let Err(e) = hand_on(&mut buf, &mut counts)
                {
                    failed = Some(e);
                    return Err(CommandError::err("the output failed"));
                }
                Ok(())
            })
            .map_err(|e| failed.take().unwrap_or_else(|| e.to_string()))?;
        counts.skipped += skipped;
    }
    w.finish(&mut buf);
    hand_on(&mut buf, &mut counts)?;
    Ok(counts)
}

/// Operations [`RdbLoader`] gathers in one batch before it writes them.
const LOAD_BATCH_OPS: usize = 4096;

/// Bytes of keys and values [`RdbLoader`] gathers in one batch before it writes them.
const LOAD_BATCH_BYTES: usize = 4 << 20;

/// Stores the keys of an RDB file's items through a [`Db`] of the engine it was made on,
/// many keys to a batch, and keeps the function libraries for the caller. Keys already
/// expired are not stored. A key is never split between batches: on a failure the caller
/// empties the store (a loaded file is all or nothing), so the batches need not be atomic
/// together.
pub struct RdbLoader<'e, B: KvBackend> {
    db: Db<'e, &'e B>,
    counts: RdbCounts,
    functions: Vec<Bytes>,
    batch: WriteBatch,
    batch_bytes: usize,
    batch_ops: usize,
}

impl<B: KvBackend> std::fmt::Debug for RdbLoader<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdbLoader").field("counts", &self.counts).finish_non_exhaustive()
    }
}

impl<'e, B: KvBackend> RdbLoader<'e, B> {
    /// A loader into `engine`, which should hold no key (it does not look: a key in the file
    /// replaces the one there).
    pub fn new(engine: &'e Engine<B>) -> Self {
        RdbLoader {
            db: engine.db(&engine.session()),
            counts: RdbCounts::default(),
            functions: Vec::new(),
            batch: WriteBatch::new(),
            batch_bytes: 0,
            batch_ops: LOAD_BATCH_OPS,
        }
    }

    /// Writes a batch once it holds `ops` operations (at least one key's): 1 writes each key
    /// in a batch of its own, for a store that refuses large batches (etcd).
    pub fn with_batch_ops(mut self, ops: usize) -> Self {
        self.batch_ops = ops.max(1);
        self
    }

    /// Takes one item of the file.
    ///
    /// # Errors
    /// A database past [`super::DATABASES`], or the store's refusal.
    pub fn take(&mut self, item: RdbItem) -> Result<(), String> {
        match item {
            RdbItem::Entry(entry) => {
                let index = usize::try_from(entry.db).unwrap_or(usize::MAX);
                if self.db.index() != index {
                    // A batch holds the keys of one database (its counts are of that one).
                    self.write_batch()?;
                    self.db.select(index).map_err(|e| format!("database {}: {e}", entry.db))?;
                }
                let expire = entry.expire_at_ms.unwrap_or(0);
                if expire != 0 && expire <= self.db.now_ms() as i64 {
                    self.counts.skipped += 1;
                    return Ok(());
                }
                let ty = entry.value.type_name();
                let before = self.batch.len();
                self.db
                    .queue_value(&mut self.batch, &entry.key, entry.value, expire as u64)
                    .map_err(|e| e.to_string())?;
                self.batch_bytes += self.batch.ops()[before..].iter().map(op_bytes).sum::<usize>();
                self.counts.count(ty);
                if self.batch.len() >= self.batch_ops || self.batch_bytes >= LOAD_BATCH_BYTES {
                    self.write_batch()?;
                }
            }
            RdbItem::Function(code) => {
                self.functions.push(code);
                self.counts.functions += 1;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes the keys gathered.
    fn write_batch(&mut self) -> Result<(), String> {
        self.batch_bytes = 0;
        self.db.commit(std::mem::take(&mut self.batch)).map_err(|e| e.to_string())
    }

    /// Writes the last keys; returns what was loaded, and the function libraries' code.
    ///
    /// # Errors
    /// The store's refusal.
    pub fn finish(mut self) -> Result<(RdbCounts, Vec<Bytes>), String> {
        self.write_batch()?;
        Ok((self.counts, self.functions))
    }
}

/// The bytes an operation writes.
fn op_bytes(op: &BatchOp) -> usize {
    match op {
        BatchOp::Put { key, value, .. } => key.len() + value.len(),
        BatchOp::Delete { key, .. } => key.len(),
    }
}
