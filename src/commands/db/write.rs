//! Queueing writes: metadata records in the layout's form, new collections, deleted keys;
//! and the deletion of expired and evicted keys.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{Changes, Db, LAZYFREE_THRESHOLD, RECORD_OVERHEAD};
use crate::backend::{Direction, KvBackend, WriteBatch, WrittenMetadata};
use crate::codec::{ColumnFamily, KeyLayout, LayoutKind, Metadata, RedisType, Version};
use crate::commands::counts::counted_meta;
use crate::commands::reply::CommandResult;

impl<B: KvBackend> Db<'_, B> {
    /// Deletes, in one batch, those of `metadata_keys` whose record is still expired at
    /// `now_ms` (a key written since is left alone), and returns them. Redis deletes a key
    /// when it finds it expired; this engine does it after the command, so a later command
    /// does not report the same expiry again. The caller holds the keys' locks. A deleted
    /// collection sets [`Effects::garbage`](crate::commands::Effects::garbage).
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub fn delete_expired(&self, metadata_keys: &[Bytes], now_ms: u64) -> crate::Result<Vec<Bytes>> {
        let mut batch = WriteBatch::new();
        let mut deleted = Vec::new();
        let mut big = 0;
        let mut collections = false;
        for key in metadata_keys {
            let raw = self.metadata_record(key)?;
            let meta = raw.as_ref().and_then(|raw| self.layout().decode_metadata(raw).ok());
            if let Some(meta) = meta.filter(|m| m.is_expired(now_ms)) {
                batch.delete(ColumnFamily::Metadata, key.clone());
                deleted.push(key.clone());
                big += usize::from(!meta.ty.is_single_kv() && meta.size > LAZYFREE_THRESHOLD);
                collections |= !meta.ty.is_single_kv();
            }
        }
        if !batch.is_empty() {
            let Changes { deltas, gate, .. } = self.changes(&batch)?;
            let batch = self.adapt(batch)?;
            self.write_counted(batch, deltas, gate)?;
            self.shared.deferred_frees.fetch_add(big as u64, Ordering::Relaxed);
            self.journal.borrow_mut().effects.garbage |= collections;
        }
        Ok(deleted)
    }

    /// Deletes `key` for `maxmemory` as DEL does: its metadata record alone, in one batch
    /// (a collection's records become garbage for the collector). `None` when it is not
    /// live; else an estimate of the bytes its records keep until the collector drops
    /// them (0 for a string, freed with its record). The caller holds the key's lock.
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub(crate) fn evict_key(&self, key: &[u8]) -> crate::Result<Option<u64>> {
        let mkey = self.metadata_key(key);
        let Some(raw) = self.metadata_record(&mkey)? else { return Ok(None) };
        let Some(meta) = self.layout().decode_metadata(&raw).ok().filter(|m| m.is_live(self.now_ms())) else {
            return Ok(None);
        };
        let mut left = 0;
        if !meta.ty.is_single_kv() && meta.size > 0 {
            // A few records' mean size times the records the collection has.
            let (mut seen, mut bytes) = (0u64, 0u64);
            if let Ok(records) = self.scan_subkeys(key, meta.version, Direction::Forward) {
                for (sub, value) in records.take(5).flatten() {
                    bytes += (mkey.len() + 12 + sub.len() + value.len()) as u64 + RECORD_OVERHEAD;
                    seen += 1;
                }
            }
            let records = match meta.ty {
                RedisType::Bitmap => meta.size.div_ceil(1024),
                RedisType::ZSet => meta.size * 2,
                _ => meta.size,
            };
            left = bytes.checked_div(seen).unwrap_or(0) * records;
        }
        let mut batch = WriteBatch::new();
        self.delete_key(&mut batch, key);
        let Changes { deltas, gate, .. } = self.changes(&batch)?;
        let batch = self.adapt(batch)?;
        self.write_counted(batch, deltas, gate)?;
        self.count_deferred_free(&meta);
        Ok(Some(left))
    }

    /// The metadata of `key` if it holds `ty`, else a new empty collection of `ty` under a
    /// fresh version (a missing, expired or deleted key starts over).
    ///
    /// # Errors
    /// As [`Db::lookup_of`].
    pub(crate) fn lookup_or_create(&self, key: &[u8], ty: RedisType) -> CommandResult<Metadata<'static>> {
        Ok(match self.lookup_of(key, ty)? {
            Some(meta) => meta,
            None => self.new_collection(ty),
        })
    }

    /// A new, empty collection of `ty` under a fresh version; hashes and sets are
    /// blind-write while [`Db::blind_write`] is on, or when the layout writes them
    /// uncounted (camellia's encode version 1).
    pub(crate) fn new_collection(&self, ty: RedisType) -> Metadata<'static> {
        let mut meta = Metadata::collection(ty, self.new_version());
        meta.blind_write = (self.blind_write() && matches!(ty, RedisType::Hash | RedisType::Set))
            || self.layout().writes_uncounted(ty);
        meta
    }

    /// Queues the metadata record of `key`, in the layout's form. A type the layout cannot
    /// store is not queued: the command's commit fails instead ([`Db::commit`]).
    pub(crate) fn put_metadata(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        self.put_metadata_in(self.layout(), batch, self.metadata_key(key), meta);
    }

    /// [`Db::put_metadata`] under a metadata key built already, of `layout`'s database.
    pub(crate) fn put_metadata_in(
        &self,
        layout: &KeyLayout,
        batch: &mut WriteBatch,
        mkey: Vec<u8>,
        meta: &Metadata<'_>,
    ) {
        // camellia and TiTea put a version in a string's record too: a fresh one for a
        // string a command made (TiTea keeps a live string's id: `titea_index_records`).
        let stamped;
        let meta = if meta.ty == RedisType::String && meta.version.is_none() && layout.versions_strings() {
            stamped = Metadata { version: self.new_version(), ..meta.clone() };
            &stamped
        } else {
            meta
        };
        match layout.encode_metadata(meta) {
            Ok(value) => {
                // A key this command's lookup touched has its time set already (the
                // command's time, under LFU its count too): setting it again changes nothing.
                if !self.read_memo.borrow().touched(&mkey) {
                    self.shared.access.written(&mkey, self.now_ms() / 1000);
                }
                // The Kvrocks form decodes to what the key counts need of `meta`: they need
                // not decode it again (the other forms may store less).
                if matches!(layout.kind(), LayoutKind::Kvrocks | LayoutKind::NeoKv) {
                    let version = if meta.ty.is_single_kv() { Version::NONE } else { meta.version };
                    batch.put_metadata(mkey, value, WrittenMetadata { counted: counted_meta(meta), version });
                } else {
                    batch.put(ColumnFamily::Metadata, mkey, value);
                }
            }
            Err(_) => self.journal.borrow_mut().refused = Some(meta.ty),
        }
    }

    /// Queues the metadata of a collection after an edit: deleted when it became empty
    /// (an empty collection does not exist), written otherwise.
    pub(crate) fn put_collection(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        self.put_collection_at(batch, self.metadata_key(key), meta);
    }

    /// [`Db::put_collection`] under a metadata key built already (see [`Db::lookup_at`]).
    pub(crate) fn put_collection_at(&self, batch: &mut WriteBatch, mkey: Vec<u8>, meta: &Metadata<'_>) {
        if meta.size == 0 && !meta.blind_write {
            batch.delete(ColumnFamily::Metadata, mkey);
        } else {
            self.put_metadata_in(self.layout(), batch, mkey, meta);
        }
    }

    /// Counts, once its deletion is committed, a deleted key whose records are left for
    /// the collector: a collection of more than [`LAZYFREE_THRESHOLD`] records.
    pub(crate) fn count_deferred_free(&self, meta: &Metadata<'_>) {
        if !meta.ty.is_single_kv() && meta.size > LAZYFREE_THRESHOLD {
            self.shared.deferred_frees.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues the deletion of `key`: its metadata record only, O(1) whatever the size; the
    /// subkeys become garbage for [`crate::gc`].
    pub(crate) fn delete_key(&self, batch: &mut WriteBatch, key: &[u8]) {
        let mkey = self.metadata_key(key);
        self.shared.access.forget(&mkey);
        batch.delete(ColumnFamily::Metadata, mkey);
    }
}
